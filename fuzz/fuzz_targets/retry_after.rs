//! `Retry-After` as a server sends it, through the retry policy: read or ignored, never a
//! panic, delay-seconds read exactly, and a wait — however large — only ever weighed against
//! the time left before the read's deadline, never added to a clock. The first byte picks the
//! deadline (2^(byte % 64) ms: from a millisecond to past what the clock can hold); the rest
//! is the header's value.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use onceonly::sources::retry::{Failure, Retrier, RetryPolicy, retry_after};
use onceonly::timestamp::format_wait;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, value)) = data.split_first() else {
        return;
    };
    let deadline = Duration::from_millis(1u64 << (pick % 64));
    let Ok(header) = HeaderValue::from_bytes(value) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(RETRY_AFTER, header.clone());
    for status in [StatusCode::TOO_MANY_REQUESTS, StatusCode::SERVICE_UNAVAILABLE] {
        let Some(Failure::Retry { after, reason }) = Failure::passing(status, &headers) else {
            panic!("{status} may pass");
        };
        assert!(reason.starts_with(&format!("HTTP {}", status.as_u16())));
        let text = header.to_str().ok();
        // A date's wait is counted from now, so two reads differ by the time between them.
        assert_eq!(
            after.is_some(),
            text.and_then(retry_after).is_some(),
            "{text:?}"
        );
        if let Some(seconds) = text.and_then(|text| text.trim().parse::<u64>().ok()) {
            assert_eq!(after, Some(Duration::from_secs(seconds)), "{text:?}");
        }
        let Some(wait) = after else {
            continue;
        };
        let retrier = Retrier::new(RetryPolicy {
            retries: 3,
            backoff: Duration::from_millis(10),
            timeout: Duration::from_secs(1),
            deadline,
        });
        // A wait that fits ends by the deadline; what is said of one that does not reads.
        if retrier.fits(wait) {
            assert!(wait <= deadline, "{text:?}: {wait:?} fits {deadline:?}");
        }
        assert!(!format_wait(wait).is_empty());
    }
    // No header, or one with no wait in it: the policy's own backoff.
    if Failure::passing(StatusCode::BAD_GATEWAY, &HeaderMap::new()).is_none() {
        panic!("a 502 may pass");
    }
});
