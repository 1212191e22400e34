//! What the HTTP sources (the provider's listing, Airflow's REST API) share about talking to a
//! server they do not trust: one way to build the client, redirects followed only within the
//! configured server's origin, and the credentials they send removed from anything shown.
//!
//! A redirect is followed when it stays on the origin (scheme, host and port) of the URL first
//! asked for, at most [`MAX_REDIRECTS`] times; any other redirect is not followed, and the
//! answer is refused naming both URLs ([`redirect_refused`]). So a credential, whether in
//! `Authorization` or in a header of the provider's own such as `X-Api-Key`, never goes to a
//! server it was not configured for, and no table is built from another server's answers.

use base64::Engine;
use reqwest::header::{HeaderMap, LOCATION};

use crate::sources::retry::RetryPolicy;

/// Redirects followed within one origin before an answer is refused.
pub const MAX_REDIRECTS: usize = 5;

/// A client with the source's timeouts, onceonly's user agent, `headers` sent with every
/// request, and redirects followed as the module says.
pub fn client(retry: &RetryPolicy, headers: HeaderMap) -> reqwest::Result<reqwest::Client> {
    // reqwest is built without a crypto provider; https needs one installed before a client
    // is built (an Err only means one is installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(retry.timeout.min(std::time::Duration::from_secs(10)))
        .timeout(retry.timeout)
        .user_agent(concat!("onceonly/", env!("CARGO_PKG_VERSION")))
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt.previous().first().map(reqwest::Url::origin);
            if attempt.previous().len() <= MAX_REDIRECTS && first == Some(attempt.url().origin()) {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }))
        .build()
}

/// Why a redirect the client did not follow ends the request: it leads to another origin
/// than `asked`'s, or it is one too many. `None` for any other answer.
pub fn redirect_refused(asked: &reqwest::Url, response: &reqwest::Response) -> Option<String> {
    if !response.status().is_redirection() {
        return None;
    }
    let location = response.headers().get(LOCATION)?.to_str().ok()?;
    let status = crate::sources::retry::status_line(response.status());
    let Ok(target) = response.url().join(location) else {
        return Some(format!(
            "HTTP {status} redirected to {location:?}, which is not a URL"
        ));
    };
    // After redirects within the origin, the one refused came from the last of them.
    let via = if response.url() == asked {
        String::new()
    } else {
        format!(" from {}", response.url())
    };
    Some(if target.origin() == asked.origin() {
        format!(
            "HTTP {status}{via} redirected to {target}: more than {MAX_REDIRECTS} redirects, not followed"
        )
    } else {
        format!(
            "HTTP {status}{via} redirected to {target}, on another origin than {}: redirects are followed only within the configured server's origin, so that no credential goes elsewhere",
            asked.origin().ascii_serialization()
        )
    })
}

/// The credentials a source sends, in every form it sends them, to take out of text before
/// it is shown: a server may echo a request's headers or body in an error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Scrubber {
    /// Longest first, so that a form holding another is replaced whole.
    forms: Vec<String>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scrubber({} forms)", self.forms.len())
    }
}

impl Scrubber {
    /// A secret sent as it is: a token (the rest of `Bearer <token>`), an API key, a
    /// password in a JSON body. Its JSON-escaped and `{:?}`-escaped forms go too (the body
    /// carries the one, messages quote with the other).
    pub fn secret(mut self, secret: &str) -> Scrubber {
        if secret.is_empty() {
            return self;
        }
        let quoted = |text: String| text[1..text.len() - 1].to_string();
        let json = serde_json::to_string(secret)
            .map(quoted)
            .unwrap_or_default();
        for form in [secret.to_string(), json, quoted(format!("{secret:?}"))] {
            if !form.is_empty() && !self.forms.contains(&form) {
                self.forms.push(form);
            }
        }
        self.forms.sort_by_key(|form| std::cmp::Reverse(form.len()));
        self
    }

    /// A password sent as `Authorization: Basic base64(user:password)`: the password, and
    /// the encoding that carries it.
    pub fn basic(self, user: &str, password: &str) -> Scrubber {
        if password.is_empty() {
            return self;
        }
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.secret(password).secret(&encoded)
    }

    /// `text` with every form of every secret replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for form in &self.forms {
            if text.contains(form.as_str()) {
                text = text.replace(form.as_str(), "***");
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_secret_is_scrubbed() {
        let scrubber = Scrubber::default().basic("svc", "p\"w\\d").secret("tok-1");
        // base64("svc:p\"w\\d")
        let encoded = base64::engine::general_purpose::STANDARD.encode("svc:p\"w\\d");
        let text = format!(
            "Basic {encoded}; {{\"password\":\"p\\\"w\\\\d\"}}; {:?}; Bearer tok-1; raw p\"w\\d",
            "p\"w\\d"
        );
        assert_eq!(
            scrubber.scrub(&text),
            "Basic ***; {\"password\":\"***\"}; \"***\"; Bearer ***; raw ***"
        );
        assert!(!format!("{scrubber:?}").contains("tok-1"));
        assert_eq!(Scrubber::default().secret("").scrub("as is"), "as is");
    }
}
