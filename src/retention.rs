//! How long providers remember idempotency keys: named presets with their public sources, so
//! `key_ttl = "stripe"` says where the number comes from. A duration (`24h`) overrides any.

use crate::timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// Microseconds; for a range the lower bound, which is the safe assumption.
    pub ttl: i64,
    pub note: &'static str,
    pub source: &'static str,
}

const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;

pub const PRESETS: [Preset; 4] = [
    Preset {
        name: "stripe",
        ttl: DAY,
        note: "Stripe API v1 removes idempotency keys once they are at least 24 hours old",
        source: "Stripe API reference, Idempotent requests",
    },
    Preset {
        name: "paypal",
        ttl: 6 * HOUR,
        note: "PayPal keeps PayPal-Request-Id from 6 hours to 45 days depending on the endpoint; 6 hours unless the endpoint's documentation says more",
        source: "PayPal REST API reference, Idempotency",
    },
    Preset {
        name: "adyen",
        ttl: 7 * DAY,
        note: "Adyen keeps idempotency keys for at least 7 days",
        source: "Adyen documentation, API idempotency",
    },
    Preset {
        name: "aws-step-functions",
        ttl: 90 * DAY,
        note: "an AWS Step Functions execution name stays taken for 90 days after the execution closes",
        source: "AWS Step Functions API reference, StartExecution",
    },
];

/// A key TTL as configured: a preset name or a duration. The text says where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTtl {
    pub micros: i64,
    pub source: String,
}

impl KeyTtl {
    pub fn parse(text: &str) -> Option<KeyTtl> {
        if let Some(preset) = PRESETS
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(text.trim()))
        {
            return Some(KeyTtl {
                micros: preset.ttl,
                source: format!(
                    "preset {}: {} ({})",
                    preset.name, preset.note, preset.source
                ),
            });
        }
        let micros = timestamp::parse_duration(text).filter(|ttl| *ttl > 0)?;
        Some(KeyTtl {
            micros,
            source: format!("configured {}", timestamp::format_duration(micros)),
        })
    }
}

pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_durations() {
        assert_eq!(KeyTtl::parse("stripe").unwrap().micros, DAY);
        assert_eq!(
            KeyTtl::parse("AWS-Step-Functions").unwrap().micros,
            90 * DAY
        );
        assert!(
            KeyTtl::parse("paypal")
                .unwrap()
                .source
                .contains("6 hours to 45 days")
        );
        assert_eq!(KeyTtl::parse("36h").unwrap().source, "configured 1d12h");
        assert!(KeyTtl::parse("forever").is_none());
    }
}
