//! Timestamps as sources write them, to and from microseconds since the epoch (UTC); durations
//! as configs write them and as messages show them.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};

/// Parses the timestamp forms sources use:
///
/// * RFC 3339 with an offset (`2026-11-01T10:00:00+02:00`, `...Z`), converted to UTC;
/// * the same without an offset, `T` or space separated, as SQLite stores Airflow's times
///   (taken as UTC, which is what Airflow writes);
/// * a bare date (`2026-11-01`, midnight UTC);
/// * epoch seconds or milliseconds (an integer above 10^11 is taken as milliseconds, which
///   keeps seconds unambiguous until the year 5138).
pub fn parse(text: &str) -> Option<i64> {
    // Only instants RFC 3339 can write back (years 0001 to 9999): a value parsed must survive
    // being formatted and read again (found by fuzzing: 16-digit epoch milliseconds).
    parse_any(text).filter(|&micros| in_range(micros))
}

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z.
const EARLIEST: i64 = -62_135_596_800_000_000;
const LATEST: i64 = 253_402_300_799_999_999;

/// Whether an instant is one the canonical tables hold: years 0001 to 9999, as RFC 3339
/// writes them. Times read as text are parsed into this range; typed times (a snapshot's
/// Parquet timestamps) are checked against it.
pub fn in_range(micros: i64) -> bool {
    (EARLIEST..=LATEST).contains(&micros)
}

/// How [`in_range`] is said in a message.
pub const RANGE: &str = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z";

fn parse_any(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Some(fast) = parse_common(text.as_bytes()) {
        return Some(fast);
    }
    if let Some(epoch) = parse_epoch(text) {
        return Some(epoch);
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(text) {
        return Some(dt.with_timezone(&Utc).timestamp_micros());
    }
    // RFC 3339 also allows a space for `T`; chrono's rfc3339 parser already does, but
    // PostgreSQL-style `+00` offsets without minutes need help.
    for format in ["%Y-%m-%d %H:%M:%S%.f%#z", "%Y-%m-%dT%H:%M:%S%.f%#z"] {
        if let Ok(dt) = DateTime::parse_from_str(text, format) {
            return Some(dt.with_timezone(&Utc).timestamp_micros());
        }
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(text, format) {
            return Some(naive.and_utc().timestamp_micros());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_micros());
    }
    None
}

/// The forms databases and APIs write nearly always (`2026-11-01 10:00:00.123456`,
/// `2026-11-01T10:00:00Z`, `...+00:00`), read byte by byte, so a large read does not spend its
/// time in chrono's format parsers tried in turn. Anything else is left to those parsers.
fn parse_common(bytes: &[u8]) -> Option<i64> {
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let mut value = 0u32;
        for &b in bytes.get(range)? {
            if !b.is_ascii_digit() {
                return None;
            }
            value = value * 10 + u32::from(b - b'0');
        }
        Some(value)
    };
    if bytes.len() < 19
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(digits(0..4)? as i32, digits(5..7)?, digits(8..10)?)?;
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let mut at = 19;
    let mut micros = 0u32;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_digit() {
            if at - start < 6 {
                micros = micros * 10 + u32::from(bytes[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return None;
        }
        for _ in (at - start)..6 {
            micros *= 10;
        }
    }
    let offset_seconds: i64 = match &bytes[at..] {
        [] | [b'Z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let (hours, minutes) = match rest {
                [_, _] => (digits(at + 1..at + 3)?, 0),
                [_, _, b':', _, _] => (digits(at + 1..at + 3)?, digits(at + 4..at + 6)?),
                [_, _, _, _] => (digits(at + 1..at + 3)?, digits(at + 3..at + 5)?),
                _ => return None,
            };
            let seconds = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'+' { seconds } else { -seconds }
        }
        _ => return None,
    };
    let naive = date.and_hms_micro_opt(hour, minute, second, micros)?;
    Some(naive.and_utc().timestamp_micros() - offset_seconds * 1_000_000)
}

fn parse_epoch(text: &str) -> Option<i64> {
    let (number, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (text, None),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) || number.len() > 16 {
        return None;
    }
    let whole: i64 = number.parse().ok()?;
    let fraction_micros = match fraction {
        None => 0,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            let padded: String = digits.chars().chain("000000".chars()).take(6).collect();
            padded.parse::<i64>().ok()?
        }
        Some(_) => return None,
    };
    if whole > 100_000_000_000 {
        whole
            .checked_mul(1_000)?
            .checked_add(fraction_micros / 1_000)
    } else {
        whole.checked_mul(1_000_000)?.checked_add(fraction_micros)
    }
}

/// Epoch seconds or milliseconds given as a JSON number.
pub fn from_epoch_number(value: f64) -> Option<i64> {
    if !value.is_finite() || !(0.0..=1.0e16).contains(&value) {
        return None;
    }
    let micros = if value > 1.0e11 {
        value * 1_000.0
    } else {
        value * 1_000_000.0
    };
    Some(micros.round() as i64).filter(|micros| *micros <= LATEST)
}

/// RFC 3339 in UTC with a `Z`, seconds precision unless the value has a fraction.
pub fn format(micros: i64) -> String {
    match DateTime::<Utc>::from_timestamp_micros(micros) {
        Some(dt) if micros % 1_000_000 == 0 => dt.to_rfc3339_opts(SecondsFormat::Secs, true),
        Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Micros, true),
        None => format!("<out of range: {micros}µs>"),
    }
}

/// RFC 3339 in UTC with all six fractional digits, so that texts sort as the instants do.
pub fn format_micros(micros: i64) -> String {
    match DateTime::<Utc>::from_timestamp_micros(micros) {
        Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Micros, true),
        None => format!("<out of range: {micros}µs>"),
    }
}

pub fn format_opt(micros: Option<i64>) -> String {
    micros.map(format).unwrap_or_default()
}

/// Parses a duration such as `24h`, `7d`, `90m`, `45s`, `1d12h`.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total: i64 = 0;
    let mut number = String::new();
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            number.push(ch);
            continue;
        }
        let unit: i64 = match ch {
            'w' => 7 * 86_400,
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        let value: i64 = number.parse().ok()?;
        number.clear();
        total = total.checked_add(value.checked_mul(unit)?.checked_mul(1_000_000)?)?;
    }
    if !number.is_empty() {
        return None;
    }
    Some(total)
}

/// A duration in the shortest exact form, e.g. `1d12h`.
pub fn format_duration(micros: i64) -> String {
    let mut seconds = micros / 1_000_000;
    if seconds == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    if seconds < 0 {
        out.push('-');
        seconds = -seconds;
    }
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if seconds >= size {
            out.push_str(&format!("{}{unit}", seconds / size));
            seconds %= size;
        }
    }
    out
}

/// A wait as a config writes it: `500ms`, or any duration [`parse_duration`] reads (`30s`,
/// `10m`, `1h`).
pub fn parse_wait(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Some(millis) = text.strip_suffix("ms") {
        return millis.trim().parse::<u64>().ok().map(Duration::from_millis);
    }
    let micros = parse_duration(text)?;
    u64::try_from(micros).ok().map(Duration::from_micros)
}

/// A configured wait as a config would write it, exactly: `30s`, `500ms`.
pub fn format_setting(wait: Duration) -> String {
    let millis = wait.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{millis}ms")
    }
}

/// A wait as messages show it: milliseconds below a second (`250ms`), else seconds to a tenth
/// (`1.5s`).
pub fn format_wait(wait: Duration) -> String {
    if wait < Duration::from_secs(1) {
        format!("{}ms", wait.as_millis())
    } else {
        format!("{:.1}s", wait.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_sources_use_agree_on_the_instant() {
        let expected = parse("2026-11-01T10:00:00Z").unwrap();
        for text in [
            "2026-11-01T12:00:00+02:00",
            "2026-11-01 10:00:00",
            "2026-11-01 10:00:00.000000",
            "2026-11-01T10:00:00",
            "2026-11-01 10:00:00+00",
            "1793527200",
            "1793527200000",
        ] {
            assert_eq!(parse(text), Some(expected), "{text}");
        }
        assert_eq!(parse("2026-11-01"), parse("2026-11-01T00:00:00Z"));
    }

    #[test]
    fn the_fast_path_agrees_with_chrono() {
        for text in [
            "2026-11-01 10:00:00",
            "2026-11-01 10:00:00.5",
            "2026-11-01T10:00:00.123456789Z",
            "2026-11-01T12:30:00+02:30",
            "2026-11-01T08:00:00-0200",
            "2026-11-01 10:00:00+00",
            "2024-02-29 23:59:59.999999",
        ] {
            let slow = DateTime::parse_from_rfc3339(
                &text
                    .replace(' ', "T")
                    .replace("+00", "+00:00")
                    .replace("-0200", "-02:00"),
            )
            .ok()
            .or_else(|| DateTime::parse_from_rfc3339(&format!("{}Z", text.replace(' ', "T"))).ok())
            .map(|dt| dt.with_timezone(&Utc).timestamp_micros());
            assert_eq!(parse_common(text.as_bytes()), slow, "{text}");
        }
        for text in [
            "2026-13-01 10:00:00",
            "2026-02-30 10:00:00",
            "2026-11-01 25:00:00",
            "2026-11-01 10:00:00.",
            "2026-11-01 10:00:00x",
        ] {
            assert_eq!(parse_common(text.as_bytes()), None, "{text}");
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn instants_rfc_3339_cannot_write_are_refused() {
        // The fuzzer's crash: epoch milliseconds beyond the year 9999.
        assert_eq!(parse("9199999999992222"), None);
        assert_eq!(from_epoch_number(9_199_999_999_992_222.0), None);
        let last = parse("9999-12-31T23:59:59.999999Z").unwrap();
        assert_eq!(parse(&format(last)), Some(last));
        assert_eq!(parse("0001-01-01T00:00:00Z"), Some(EARLIEST));
    }

    #[test]
    fn garbage_is_refused() {
        for text in ["", "yesterday", "2026-13-01", "12:00", "1.2.3", "-5"] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn formats_round_trip() {
        let micros = parse("2026-11-01T10:00:00.250Z").unwrap();
        assert_eq!(format(micros), "2026-11-01T10:00:00.250000Z");
        assert_eq!(parse(&format(micros)), Some(micros));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h"), Some(86_400_000_000));
        assert_eq!(parse_duration("1d12h"), Some(129_600_000_000));
        assert_eq!(parse_duration("12"), None);
        assert_eq!(parse_duration("3x"), None);
        assert_eq!(format_duration(129_600_000_000), "1d12h");
        assert_eq!(parse_wait("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_wait("30s"), Some(Duration::from_secs(30)));
        assert_eq!(format_setting(Duration::from_secs(30)), "30s");
        assert_eq!(format_setting(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_wait(Duration::from_millis(250)), "250ms");
        assert_eq!(format_wait(Duration::from_millis(1500)), "1.5s");
    }
}
