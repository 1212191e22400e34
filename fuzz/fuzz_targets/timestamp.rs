//! Timestamps and durations as sources and users write them: parsed or refused, never a
//! panic, and what is parsed survives a round trip through onceonly's own formatting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onceonly::timestamp;

fuzz_target!(|data: &[u8]| {
    if data.len() == 8 {
        let value = f64::from_le_bytes(data.try_into().unwrap());
        if let Some(micros) = timestamp::from_epoch_number(value) {
            assert!(micros >= 0);
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(micros) = timestamp::parse(text) {
        let shown = timestamp::format(micros);
        assert_eq!(
            timestamp::parse(&shown),
            Some(micros),
            "{text:?} -> {shown}"
        );
        let precise = timestamp::format_micros(micros);
        assert_eq!(
            timestamp::parse(&precise),
            Some(micros),
            "{text:?} -> {precise}"
        );
    }
    if let Some(micros) = timestamp::parse_duration(text) {
        assert!(micros >= 0, "{text:?} -> {micros}");
        let shown = timestamp::format_duration(micros);
        assert_eq!(
            timestamp::parse_duration(&shown),
            Some(micros),
            "{text:?} -> {shown}"
        );
    }
});
