//! Retries for the HTTP sources (the provider's listing, Airflow's REST API), in one place.
//!
//! A request that fails in a way that may pass — 429, a 5xx, a timeout, a refused or dropped
//! connection, a body that broke off — is tried again after a wait: the server's
//! `Retry-After` when it gives one (delay-seconds, or an HTTP date in any of the three forms
//! RFC 9110 allows), else exponential backoff with jitter. It gives up after `retries` more
//! tries, or as soon as a wait would pass the read's `deadline`; the reason then says which,
//! so an incomplete read names what ran out. A wait is the server's to choose, so it is only
//! ever compared with the time left (no `Retry-After`, however large, is added to a clock).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use tokio::time::Instant;

use crate::progress::Line;
use crate::sources::http::redirect_refused;
use crate::timestamp::format_wait;

/// Thirty years: the deadline of a read whose configured one the clock cannot hold.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);

/// How hard a source tries: configured per source (`[provider]`, `[airflow]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first.
    pub retries: u32,
    /// The first retry's wait; each further retry doubles it (with jitter), up to a minute.
    pub backoff: Duration,
    /// One request, connection to last byte.
    pub timeout: Duration,
    /// The whole read, every request, retry and wait included.
    pub deadline: Duration,
}

/// What went wrong with one request, and whether trying again may help.
pub enum Failure {
    Retry {
        reason: String,
        /// The server's `Retry-After`, if it gave one.
        after: Option<Duration>,
    },
    Fatal(String),
}

impl Failure {
    /// A request that got no (whole) answer: always worth another try.
    pub fn unanswered(err: &reqwest::Error) -> Failure {
        Failure::Retry {
            reason: describe(err),
            after: None,
        }
    }

    /// An answer with a status that may pass (429, 5xx), else `None`.
    pub fn passing(status: reqwest::StatusCode, headers: &HeaderMap) -> Option<Failure> {
        (status.as_u16() == 429 || status.is_server_error()).then(|| Failure::Retry {
            reason: format!("HTTP {}", status_line(status)),
            after: headers
                .get(RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(retry_after),
        })
    }
}

/// One read's retries: the policy, the read's deadline, and the count of retries made.
pub struct Retrier {
    pub policy: RetryPolicy,
    pub deadline: Instant,
    retries: AtomicUsize,
    seed: AtomicU64,
    /// Where a wait is shown while it lasts.
    progress: Line,
}

impl Retrier {
    /// Starts the read's clock.
    pub fn new(policy: RetryPolicy) -> Retrier {
        let now = Instant::now();
        Retrier {
            policy,
            // A deadline past what the clock can hold is as good as none.
            deadline: now
                .checked_add(policy.deadline)
                .unwrap_or_else(|| now + FAR_FUTURE),
            retries: AtomicUsize::new(0),
            seed: AtomicU64::new(seed()),
            progress: Line::default(),
        }
    }

    /// Shows each wait on the source's progress line.
    pub fn reporting_to(mut self, progress: Line) -> Retrier {
        self.progress = progress;
        self
    }

    /// Retries made so far.
    pub fn retries(&self) -> usize {
        self.retries.load(Ordering::Relaxed)
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retries or the deadline run
    /// out. The error is the reason, ready to follow the request's name.
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut tries: u32 = 0;
        loop {
            let (reason, after) = match attempt().await {
                Ok(answer) => return Ok(answer),
                Err(Failure::Fatal(reason)) => return Err(reason),
                Err(Failure::Retry { reason, after }) => (reason, after),
            };
            if tries >= self.policy.retries {
                return Err(format!("{reason}; gave up after {} tries", tries + 1));
            }
            let wait = after.unwrap_or_else(|| self.backoff(tries));
            if !self.fits(wait) {
                return Err(format!(
                    "{reason}; waiting {} more would pass the deadline of {} (deadline)",
                    format_wait(wait),
                    format_wait(self.policy.deadline)
                ));
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            self.progress.waiting(wait, &reason, after.is_some());
            tokio::time::sleep(wait).await;
            self.progress.resumed();
            tries += 1;
        }
    }

    /// Whether waiting `wait` from now ends by the deadline.
    pub fn fits(&self, wait: Duration) -> bool {
        wait <= self.deadline.saturating_duration_since(Instant::now())
    }

    /// One request whose whole answer is wanted as text (`request` builds it afresh for each
    /// try): its status and body once the status is not one that may pass, within the
    /// deadline. A status such as 401 or 404 is the caller's to judge.
    pub async fn send_text(
        &self,
        request: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, String), String> {
        self.run(|| async {
            let exchange = async {
                let (client, request) = request().build_split();
                let request = request.map_err(|err| Failure::Fatal(describe(&err)))?;
                let asked = request.url().clone();
                let response = client
                    .execute(request)
                    .await
                    .map_err(|err| Failure::unanswered(&err))?;
                if let Some(refused) = redirect_refused(&asked, &response) {
                    return Err(Failure::Fatal(refused));
                }
                let status = response.status();
                let passing = Failure::passing(status, response.headers());
                let body = response
                    .text()
                    .await
                    .map_err(|err| Failure::unanswered(&err))?;
                match passing {
                    Some(failure) => Err(failure),
                    None => Ok((status, body)),
                }
            };
            tokio::time::timeout_at(self.deadline, exchange)
                .await
                .map_err(|_| Failure::Fatal(self.overdue()))?
        })
        .await
    }

    /// The reason a request that was still running at the deadline gives.
    pub fn overdue(&self) -> String {
        format!(
            "the deadline of {} for the whole read passed (deadline)",
            format_wait(self.policy.deadline)
        )
    }

    /// Exponential backoff with full jitter: a random wait in [base·2ⁿ/2, base·2ⁿ], capped.
    fn backoff(&self, tries: u32) -> Duration {
        let ceiling = self
            .policy
            .backoff
            .saturating_mul(1u32 << tries.min(16))
            .min(Duration::from_secs(60));
        let random = splitmix(
            self.seed
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed),
        );
        let fraction = 0.5 + (random >> 11) as f64 / (1u64 << 53) as f64 / 2.0;
        ceiling.mul_f64(fraction)
    }
}

/// `Retry-After`: delay-seconds, or an HTTP date (IMF-fixdate, RFC 850 or asctime); a date
/// in the past is no wait.
pub fn retry_after(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

/// A request error with its causes ("cannot connect: the connection was refused: … Connection
/// refused"), without the URL reqwest adds: callers name the request themselves. A connection
/// that failed says first, in plain words, whether the host does not resolve or refused it.
pub fn describe(err: &reqwest::Error) -> String {
    let mut text = if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        match connect_failure(err) {
            Some(plain) => format!("cannot connect: {plain}"),
            None => "cannot connect".to_string(),
        }
    } else if err.is_body() || err.is_decode() {
        "the answer broke off".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Why a connection failed, when its causes tell: the host's name does not resolve (hyper's
/// resolver names its error `dns error`), or the host refused the connection.
fn connect_failure(err: &reqwest::Error) -> Option<&'static str> {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return Some("the connection was refused");
        }
        if cause.to_string().starts_with("dns error") {
            return Some("the host does not resolve");
        }
        source = cause.source();
    }
    None
}

/// `429 Too Many Requests`.
pub fn status_line(status: reqwest::StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

fn seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or(0x5EED)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_every_http_date_form() {
        assert_eq!(retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 0 "), Some(Duration::ZERO));
        // The same past instant in IMF-fixdate, RFC 850 and asctime: no wait.
        for past in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(retry_after(past), Some(Duration::ZERO), "{past}");
        }
        let soon = SystemTime::now() + Duration::from_secs(120);
        let imf = httpdate::fmt_http_date(soon);
        let wait = retry_after(&imf).expect("an IMF-fixdate");
        assert!(
            wait > Duration::from_secs(110) && wait <= Duration::from_secs(120),
            "{imf}: {wait:?}"
        );
        assert_eq!(retry_after("soon"), None);
        assert_eq!(retry_after("-5"), None);
    }

    #[test]
    fn a_wait_past_any_clock_is_read_and_never_fits() {
        assert_eq!(
            retry_after("18446744073709551615"),
            Some(Duration::from_secs(u64::MAX))
        );
        let policy = RetryPolicy {
            retries: 1,
            backoff: Duration::from_millis(1),
            timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        };
        let retrier = Retrier::new(policy);
        assert!(retrier.fits(Duration::from_secs(1)));
        assert!(!retrier.fits(Duration::from_secs(61)));
        assert!(!retrier.fits(Duration::MAX));
        // A configured deadline the clock cannot hold is as good as none.
        let endless = Retrier::new(RetryPolicy {
            deadline: Duration::MAX,
            ..policy
        });
        assert!(endless.fits(Duration::from_secs(86_400 * 365)));
        assert!(!endless.fits(Duration::MAX));
    }

    #[test]
    fn backoff_doubles_within_its_jitter() {
        let retrier = Retrier::new(RetryPolicy {
            retries: 5,
            backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        });
        for tries in 0..5u32 {
            let ceiling = Duration::from_millis(100) * (1 << tries);
            let wait = retrier.backoff(tries);
            assert!(wait >= ceiling / 2 && wait <= ceiling, "{tries}: {wait:?}");
        }
        assert!(retrier.backoff(30) <= Duration::from_secs(60));
    }
}
