//! The `provider` table from the provider's own paginated listing API (SPEC §3).
//!
//! Every provider pages differently, so the listing is configured, not coded: `[provider]`
//! names the endpoint, the pagination style (`cursor`, `link`, `page`, `offset`), the JSON
//! path of the items, the created-after/before parameters and a dotted JSON path for each
//! canonical column. What is read:
//!
//! * `page` and `offset` listings are read concurrently: the first page, then the following
//!   pages `concurrency` at a time, in order, until one comes back shorter than the page size
//!   (or, when `total` names the count, up to the last page the count implies).
//! * `cursor` and `link` listings can only be read one page after another; a bounded window
//!   is split into `sub_windows` created-at slices which are listed concurrently. Slices
//!   overlap by a second at their edges, so a server that treats its bounds as exclusive
//!   loses nothing; what two slices both list is counted once.
//! * An object seen twice (the listing shifted while it was read) is counted once by its
//!   external id; when the two copies differ the later page's copy is kept, with a warning.
//!
//! Politeness: at most `concurrency` requests in flight, at most `requests_per_second`,
//! retries with exponential backoff and jitter on 429, 5xx, timeouts and dropped connections,
//! honouring `Retry-After` (seconds or an HTTP date), all inside a total `deadline`.
//!
//! Anything that leaves the listing partial — a page that never came, a body that is not
//! JSON, a repeating cursor, the page cap, the deadline, an object with a missing or mistyped
//! field — is [`Error::Incomplete`] naming the source, the URL, the page and the field: no
//! table is ever built from part of a listing. Secrets come from the environment, travel only
//! in headers (marked sensitive) and are scrubbed from every message.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use polars::prelude::*;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, LINK, RETRY_AFTER};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{PROVIDER, Table};
use crate::sources::snapshot::{Cell, Mapping, Values, push};
use crate::timestamp;

/// A dotted JSON path (`metadata.interval_start`; a number indexes an array). The empty
/// path is the value itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath(Vec<String>);

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(JsonPath(Vec::new()));
        }
        let parts: Vec<String> = text.split('.').map(str::to_string).collect();
        if parts.iter().any(|part| part.is_empty()) {
            return Err(format!(
                "{text:?} is not a dotted JSON path (an empty segment)"
            ));
        }
        Ok(JsonPath(parts))
    }

    pub fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.0.iter().try_fold(value, |value, part| match value {
            Value::Object(map) => map.get(part),
            Value::Array(items) => items.get(part.parse::<usize>().ok()?),
            _ => None,
        })
    }
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return write!(f, "(the body)");
        }
        write!(f, "{}", self.0.join("."))
    }
}

/// How the listing is paged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pagination {
    /// An opaque token in the body (`next`), sent back as `param`. A null, empty or absent
    /// token ends the listing.
    Cursor { param: String, next: JsonPath },
    /// The next page's URL: in an RFC 8288 `Link: <…>; rel="next"` header (`next` None), or
    /// in the body at `next`.
    Link { next: Option<JsonPath> },
    /// Page numbers from `first`.
    Page { param: String, first: i64 },
    /// Item offsets from 0.
    Offset { param: String },
}

impl Pagination {
    fn sequential(&self) -> bool {
        matches!(self, Pagination::Cursor { .. } | Pagination::Link { .. })
    }
}

/// How created-after/before values are written in the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    Rfc3339,
    EpochSeconds,
    EpochMillis,
}

impl TimeFormat {
    pub fn parse(text: &str) -> Option<TimeFormat> {
        match text {
            "rfc3339" => Some(TimeFormat::Rfc3339),
            "epoch_seconds" => Some(TimeFormat::EpochSeconds),
            "epoch_millis" => Some(TimeFormat::EpochMillis),
            _ => None,
        }
    }

    /// `micros` in this format; `round_up` for an upper bound, so that truncation never
    /// narrows the window.
    fn write(self, micros: i64, round_up: bool) -> String {
        let unit = match self {
            TimeFormat::Rfc3339 | TimeFormat::EpochSeconds => 1_000_000,
            TimeFormat::EpochMillis => 1_000,
        };
        let whole = if round_up {
            micros.div_euclid(unit) + i64::from(micros.rem_euclid(unit) != 0)
        } else {
            micros.div_euclid(unit)
        };
        match self {
            TimeFormat::Rfc3339 => timestamp::format(whole * unit),
            TimeFormat::EpochSeconds | TimeFormat::EpochMillis => whole.to_string(),
        }
    }
}

/// A value read from the environment and never shown: `Debug` prints `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "***")
    }
}

/// How requests authenticate; the secret comes from an environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    /// `Authorization: Bearer <secret>`.
    Bearer(Secret),
    /// `Authorization: Basic base64(user:secret)`.
    Basic {
        user: String,
        password: Secret,
    },
    /// `<header>: <secret>`, e.g. `X-Api-Key`.
    Header {
        name: String,
        value: Secret,
    },
}

impl Auth {
    fn secret(&self) -> Option<&str> {
        match self {
            Auth::None => None,
            Auth::Bearer(secret)
            | Auth::Basic {
                password: secret, ..
            }
            | Auth::Header { value: secret, .. } => Some(secret.0.as_str()),
        }
    }
}

/// A configured provider listing API (`[provider] url = …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderApi {
    /// The listing endpoint, without credentials.
    pub url: String,
    /// How reports and errors name this source.
    pub shown: String,
    pub pagination: Pagination,
    pub page_size_param: Option<String>,
    pub page_size: u32,
    /// Where the array of objects is in a page's body.
    pub items: JsonPath,
    /// Where a page/offset body gives the total number of objects, if it does.
    pub total: Option<JsonPath>,
    pub created_after_param: Option<String>,
    pub created_before_param: Option<String>,
    pub time_format: TimeFormat,
    /// Fixed query parameters sent with every first request (e.g. `status = "all"`).
    pub query: BTreeMap<String, String>,
    /// Canonical provider column -> JSON path in each object (`raw` is always the object).
    pub fields: BTreeMap<String, JsonPath>,
    pub auth: Auth,
    pub concurrency: usize,
    /// The least time between two requests (from `requests_per_second`).
    pub min_interval: Option<Duration>,
    pub retries: u32,
    /// One request, connection to last byte.
    pub timeout: Duration,
    /// The whole listing.
    pub deadline: Duration,
    pub max_pages: usize,
    /// The largest body one page may have, in bytes, as read: after any gzip decoding, so a
    /// small compressed answer cannot unpack into an unbounded one.
    pub max_page_bytes: u64,
    /// The most objects the whole listing may hold (repeats included).
    pub max_objects: usize,
    /// Created-at slices a cursor or link listing is split into (when the window is bounded).
    pub sub_windows: usize,
    /// Margin around the audited tries, microseconds.
    pub slack: i64,
    /// The first retry's wait; each further retry doubles it (with jitter).
    pub backoff: Duration,
}

impl ProviderApi {
    /// The path of a canonical column: configured, else the column's own name.
    pub fn path(&self, column: &str) -> JsonPath {
        self.fields
            .get(column)
            .cloned()
            .unwrap_or_else(|| JsonPath(vec![column.to_string()]))
    }

    fn scrub(&self, text: &str) -> String {
        match self.auth.secret() {
            Some(secret) if !secret.is_empty() => text.replace(secret, "***"),
            _ => text.to_string(),
        }
    }

    fn incomplete(&self, reason: impl AsRef<str>) -> Error {
        Error::Incomplete {
            source_name: self.shown.clone(),
            reason: self.scrub(reason.as_ref()),
        }
    }
}

/// The created-at bounds to list, microseconds, both inclusive; `None` is unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl Window {
    pub fn unbounded() -> Window {
        Window::default()
    }

    fn contains(&self, micros: i64) -> bool {
        self.from.is_none_or(|from| micros >= from) && self.to.is_none_or(|to| micros <= to)
    }
}

/// What a listing covered and how it went.
#[derive(Debug, Clone, Default)]
pub struct ListingCoverage {
    /// The created-at window asked for (None: unbounded on that side).
    pub window: Window,
    /// Pages read (retries not counted).
    pub pages: usize,
    /// HTTP requests sent, retries included.
    pub requests: usize,
    pub retries: usize,
    /// Objects seen more than once and counted once.
    pub repeated: usize,
    /// Created-at slices listed concurrently (1: not split).
    pub sub_windows: usize,
    pub warnings: Vec<String>,
}

/// The provider table, and what the listing covered.
pub struct Listed {
    pub provider: DataFrame,
    pub coverage: ListingCoverage,
}

/// Lists every object in the window. Any failure leaves nothing: an `Incomplete` error.
pub async fn list(api: &ProviderApi, window: Window) -> Result<Listed> {
    // reqwest is built without a crypto provider; https needs one installed (Err: already is).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .connect_timeout(api.timeout.min(Duration::from_secs(10)))
        .timeout(api.timeout)
        .user_agent(concat!("onceonly/", env!("CARGO_PKG_VERSION")))
        .default_headers(auth_headers(api)?)
        .build()
        .map_err(|err| api.incomplete(format!("cannot build an HTTP client: {}", chain(&err))))?;
    let fetcher = Fetcher {
        api,
        http,
        permits: Semaphore::new(api.concurrency.max(1)),
        pace: Mutex::new(Instant::now()),
        deadline: Instant::now() + api.deadline,
        pages: AtomicUsize::new(0),
        objects: AtomicUsize::new(0),
        requests: AtomicUsize::new(0),
        retries: AtomicUsize::new(0),
        seed: AtomicU64::new(seed()),
    };
    let base = Url::parse(&api.url).map_err(|err| api.incomplete(format!("{}: {err}", api.url)))?;
    let fetch_started = std::time::Instant::now();

    let (pages, sub_windows) = match (&api.pagination, window.from, window.to) {
        (pagination, Some(from), Some(to))
            if pagination.sequential()
                && api.created_after_param.is_some()
                && api.created_before_param.is_some()
                && api.sub_windows > 1
                && to > from =>
        {
            let slices = split(from, to, api.sub_windows);
            let count = slices.len();
            let lists: Vec<(usize, Vec<Page>)> =
                futures_util::stream::iter(slices.into_iter().enumerate())
                    .map(|(index, slice)| {
                        let fetcher = &fetcher;
                        let base = &base;
                        async move {
                            let label = format!("slice {} of {count}", index + 1);
                            let url = first_url(api, base, slice, true);
                            Ok::<_, Error>((index, fetcher.sequential(url, &label).await?))
                        }
                    })
                    .buffer_unordered(api.concurrency.max(1))
                    .try_collect()
                    .await?;
            let mut lists = lists;
            lists.sort_by_key(|(index, _)| *index);
            (
                lists.into_iter().flat_map(|(_, pages)| pages).collect(),
                count,
            )
        }
        (pagination, _, _) if pagination.sequential() => {
            let url = first_url(api, &base, window, false);
            (fetcher.sequential(url, "listing").await?, 1)
        }
        _ => (fetcher.numbered(&base, window).await?, 1),
    };

    crate::timing::phase("read:provider:fetch", fetch_started);
    let mut coverage = ListingCoverage {
        window,
        pages: fetcher.pages.load(Ordering::Relaxed),
        requests: fetcher.requests.load(Ordering::Relaxed),
        retries: fetcher.retries.load(Ordering::Relaxed),
        sub_windows,
        ..ListingCoverage::default()
    };
    let provider = frame(api, pages, window, &mut coverage)?;
    Ok(Listed { provider, coverage })
}

/// [`list`] on a runtime of its own, for callers that are not async.
pub fn list_blocking(api: &ProviderApi, window: Window) -> Result<Listed> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| Error::io("the async runtime", err))?
        .block_on(list(api, window))
}

/// Splits `[from, to]` into `count` slices; each reaches one second past its neighbours'
/// edges, so exclusive or second-truncated bounds at the provider lose nothing.
fn split(from: i64, to: i64, count: usize) -> Vec<Window> {
    let count = count.max(1) as i64;
    let step = ((to - from) / count).max(1_000_000);
    let mut slices = Vec::new();
    let mut start = from;
    while start <= to {
        let end = if slices.len() as i64 == count - 1 {
            to
        } else {
            (start + step).min(to)
        };
        slices.push(Window {
            from: Some(start - 1_000_000),
            to: Some(end + 1_000_000),
        });
        if end >= to {
            break;
        }
        start = end;
    }
    slices
}

/// The first request of a listing: fixed parameters, page size and window.
fn first_url(api: &ProviderApi, base: &Url, window: Window, already_padded: bool) -> Url {
    let mut url = base.clone();
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in &api.query {
            query.append_pair(name, value);
        }
        if let Some(param) = &api.page_size_param {
            query.append_pair(param, &api.page_size.to_string());
        }
        // The audit window itself is widened by a second as well: a provider with
        // second-resolution or exclusive bounds would otherwise drop objects at the edges.
        let pad = if already_padded { 0 } else { 1_000_000 };
        if let (Some(param), Some(from)) = (&api.created_after_param, window.from) {
            query.append_pair(param, &api.time_format.write(from - pad, false));
        }
        if let (Some(param), Some(to)) = (&api.created_before_param, window.to) {
            query.append_pair(param, &api.time_format.write(to + pad, true));
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
    url
}

fn with_param(url: &Url, name: &str, value: &str) -> Url {
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| key != name)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let mut url = url.clone();
    url.query_pairs_mut()
        .clear()
        .extend_pairs(pairs)
        .append_pair(name, value);
    url
}

fn auth_headers(api: &ProviderApi) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    let bad = |what: &str| api.incomplete(format!("the {what} is not a valid header value"));
    let (name, value) = match &api.auth {
        Auth::None => return Ok(headers),
        Auth::Bearer(token) => (AUTHORIZATION, format!("Bearer {}", token.0)),
        Auth::Basic { user, password } => (
            AUTHORIZATION,
            format!("Basic {}", base64(&format!("{user}:{}", password.0))),
        ),
        Auth::Header { name, value } => (
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("auth header name"))?,
            value.0.clone(),
        ),
    };
    let mut value = HeaderValue::from_str(&value).map_err(|_| bad("secret"))?;
    value.set_sensitive(true);
    headers.insert(name, value);
    Ok(headers)
}

fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// One page as read: where it came from and its objects.
struct Page {
    /// `GET <url>, page N of <slice>`, for errors.
    label: String,
    items: Vec<Object>,
}

/// One listed object as kept until the listing ends: the object's JSON text and the value at
/// each mapped field's path (in `PROVIDER` order; `raw`'s is unused). The parsed JSON of a whole
/// page is dropped as soon as the page is read: kept for a million objects it took gigabytes.
struct Object {
    raw: String,
    fields: Vec<Option<Value>>,
}

impl Object {
    fn new(api: &ProviderApi, item: &Value) -> Object {
        Object {
            raw: item.to_string(),
            fields: PROVIDER
                .iter()
                .map(|spec| match spec.name {
                    "raw" => None,
                    name => api.path(name).get(item).cloned(),
                })
                .collect(),
        }
    }

    fn field(&self, name: &str) -> Option<&Value> {
        let index = PROVIDER.iter().position(|spec| spec.name == name)?;
        self.fields[index].as_ref()
    }
}

/// A page's parsed answer.
struct Answer {
    body: Value,
    link_next: Option<String>,
}

struct Fetcher<'a> {
    api: &'a ProviderApi,
    http: reqwest::Client,
    permits: Semaphore,
    /// The earliest time the next request may start (the requests-per-second limit).
    pace: Mutex<Instant>,
    deadline: Instant,
    pages: AtomicUsize,
    /// Objects read so far, for `max_objects`.
    objects: AtomicUsize,
    requests: AtomicUsize,
    retries: AtomicUsize,
    seed: AtomicU64,
}

/// What went wrong with one request, and whether trying again may help.
enum Failure {
    Retry {
        reason: String,
        after: Option<Duration>,
    },
    Fatal(String),
}

impl Fetcher<'_> {
    /// A cursor or link listing, one page after another.
    async fn sequential(&self, first: Url, slice: &str) -> Result<Vec<Page>> {
        let api = self.api;
        let mut url = first;
        let mut seen: HashSet<String> = HashSet::new();
        let mut pages = Vec::new();
        let mut number = 0usize;
        loop {
            number += 1;
            let label = format!("GET {url}, page {number} of the {slice}");
            let answer = self.fetch(&url, &label).await?;
            let items = self.items(&answer.body, &label)?;
            pages.push(Page { label, items });
            let label = &pages.last().expect("just pushed").label;
            let next = match &api.pagination {
                Pagination::Cursor { param, next } => {
                    let cursor = match next.get(&answer.body) {
                        None | Some(Value::Null) => None,
                        Some(Value::String(text)) if text.is_empty() => None,
                        Some(Value::String(text)) => Some(text.clone()),
                        Some(Value::Number(number)) => Some(number.to_string()),
                        Some(other) => {
                            return Err(api.incomplete(format!(
                                "{label}: the next cursor `{next}` is {other}, not a token"
                            )));
                        }
                    };
                    cursor.map(|cursor| (cursor.clone(), with_param(&url, param, &cursor)))
                }
                Pagination::Link { next } => {
                    let link = match next {
                        None => answer.link_next.clone(),
                        Some(path) => match path.get(&answer.body) {
                            None | Some(Value::Null) => None,
                            Some(Value::String(text)) if text.is_empty() => None,
                            Some(Value::String(text)) => Some(text.clone()),
                            Some(other) => {
                                return Err(api.incomplete(format!(
                                    "{label}: the next URL `{path}` is {other}, not a URL"
                                )));
                            }
                        },
                    };
                    match link {
                        None => None,
                        Some(link) => {
                            let next = url.join(&link).map_err(|err| {
                                api.incomplete(format!(
                                    "{label}: the next link {link:?} is not a URL ({err})"
                                ))
                            })?;
                            // Credentials go only where they were configured to go.
                            if next.origin() != url.origin() {
                                return Err(api.incomplete(format!(
                                    "{label}: the next link points to another server ({})",
                                    next.origin().ascii_serialization()
                                )));
                            }
                            Some((next.to_string(), next))
                        }
                    }
                }
                _ => unreachable!("only cursor and link listings are sequential"),
            };
            let Some((token, next_url)) = next else {
                return Ok(pages);
            };
            if !seen.insert(token.clone()) {
                return Err(api.incomplete(format!(
                    "{label}: the provider sent a cursor it had already sent ({token:?}); the listing would never end"
                )));
            }
            url = next_url;
        }
    }

    /// A page-number or offset listing: the first page, then the rest concurrently.
    async fn numbered(&self, base: &Url, window: Window) -> Result<Vec<Page>> {
        let api = self.api;
        let first = first_url(api, base, window, false);
        let (param, first_number) = match &api.pagination {
            Pagination::Page { param, first } => (param.as_str(), *first),
            Pagination::Offset { param } => (param.as_str(), 0),
            _ => unreachable!("cursor and link listings are sequential"),
        };
        let is_offset = matches!(api.pagination, Pagination::Offset { .. });
        // Page `slot` (0-based) as a request, given the number of objects a full page holds.
        let url_of = |slot: i64, step: i64| {
            let value = if is_offset {
                slot * step
            } else {
                first_number + slot
            };
            with_param(&first, param, &value.to_string())
        };
        let fetch_slot = |slot: i64, step: i64| {
            let url = url_of(slot, step);
            async move {
                let label = format!("GET {url}, page {}", slot + 1);
                let answer = self.fetch(&url, &label).await?;
                let total = self.total(&answer.body, &label)?;
                let items = self.items(&answer.body, &label)?;
                Ok::<_, Error>((Page { label, items }, total))
            }
        };

        let (page, total) = fetch_slot(0, i64::from(api.page_size)).await?;
        let mut full = i64::from(api.page_size);
        let mut count = page.items.len() as i64;
        let mut pages = vec![page];
        if count == 0 {
            return Ok(pages);
        }
        let mut next_slot = 1;
        if count < full {
            // Either everything fitted, or the server serves fewer than asked: page 2 tells.
            let (page, _) = fetch_slot(1, count).await?;
            if page.items.is_empty() {
                return Ok(pages);
            }
            full = count;
            count = page.items.len() as i64;
            pages.push(page);
            next_slot = 2;
            if count < full {
                return Ok(pages);
            }
        }
        // With a total the number of pages is known; without one, or when the listing grew
        // while it was read, go on until a short page.
        let last_slot = |total: Option<i64>| total.map(|total| (total.max(1) - 1) / full);
        let mut bounded = last_slot(total);
        loop {
            let end = bounded.unwrap_or(i64::MAX);
            if end < next_slot {
                return Ok(pages);
            }
            let mut stream = futures_util::stream::iter(next_slot..=end)
                .map(|slot| fetch_slot(slot, full))
                .buffered(api.concurrency.max(1));
            let mut latest_total = None;
            while let Some(result) = stream.next().await {
                let (page, total) = result?;
                let short = (page.items.len() as i64) < full;
                pages.push(page);
                next_slot += 1;
                latest_total = total.or(latest_total);
                if short {
                    return Ok(pages);
                }
            }
            if bounded.is_none() {
                return Ok(pages);
            }
            // The last page was full: the listing may have grown while it was read. The
            // latest total says how far; without one, read on until a short page.
            bounded = match last_slot(latest_total) {
                Some(last) if last < next_slot => return Ok(pages),
                other => other,
            };
        }
    }

    fn items(&self, body: &Value, label: &str) -> Result<Vec<Object>> {
        let items = page_items(self.api, body, label)?;
        let seen = self.objects.fetch_add(items.len(), Ordering::Relaxed) + items.len();
        if seen > self.api.max_objects {
            return Err(self.api.incomplete(format!(
                "{label}: the listing passed {} objects (max_objects) before it ended",
                self.api.max_objects
            )));
        }
        Ok(items
            .iter()
            .map(|item| Object::new(self.api, item))
            .collect())
    }

    fn total(&self, body: &Value, label: &str) -> Result<Option<i64>> {
        let Some(path) = &self.api.total else {
            return Ok(None);
        };
        match path.get(body) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_i64().filter(|n| *n >= 0).map(Some).ok_or_else(|| {
                self.api.incomplete(format!(
                    "{label}: the total `{path}` is {value}, not a count"
                ))
            }),
        }
    }

    /// One page, retried as politeness allows; its body parsed as JSON.
    async fn fetch(&self, url: &Url, label: &str) -> Result<Answer> {
        let api = self.api;
        let pages = self.pages.fetch_add(1, Ordering::Relaxed) + 1;
        if pages > api.max_pages {
            return Err(api.incomplete(format!(
                "the page cap of {} pages (max_pages) was reached before the listing ended; {label} was not read",
                api.max_pages
            )));
        }
        let mut attempt: u32 = 0;
        loop {
            let failure = match self.attempt(url).await? {
                Ok(answer) => return Ok(answer),
                Err(failure) => failure,
            };
            let (reason, after) = match failure {
                Failure::Fatal(reason) => return Err(api.incomplete(format!("{label}: {reason}"))),
                Failure::Retry { reason, after } => (reason, after),
            };
            if attempt >= api.retries {
                return Err(api.incomplete(format!(
                    "{label}: {reason}; gave up after {} tries",
                    attempt + 1
                )));
            }
            let wait = after.unwrap_or_else(|| self.backoff(attempt));
            if Instant::now() + wait > self.deadline {
                return Err(api.incomplete(format!(
                    "{label}: {reason}; waiting {} more would pass the deadline of {} (deadline)",
                    human(wait),
                    human(api.deadline)
                )));
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// One request. The outer error ends the listing (the deadline); the inner one says
    /// whether to retry.
    async fn attempt(&self, url: &Url) -> Result<Result<Answer, Failure>> {
        let api = self.api;
        let overdue = || {
            api.incomplete(format!(
                "GET {url}: the deadline of {} for the whole listing passed (deadline)",
                human(api.deadline)
            ))
        };
        let slot = {
            let mut pace = self.pace.lock().expect("pace lock");
            let slot = (*pace).max(Instant::now());
            *pace = slot + api.min_interval.unwrap_or_default();
            slot
        };
        if slot > self.deadline {
            return Err(overdue());
        }
        tokio::time::sleep_until(slot).await;
        let _permit = tokio::time::timeout_at(self.deadline, self.permits.acquire())
            .await
            .map_err(|_| overdue())?
            .expect("the semaphore is never closed");
        self.requests.fetch_add(1, Ordering::Relaxed);
        let exchange = async {
            let response = match self.http.get(url.clone()).send().await {
                Ok(response) => response,
                Err(err) => {
                    return Err(Failure::Retry {
                        reason: chain(&err),
                        after: None,
                    });
                }
            };
            let status = response.status();
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(retry_after);
            let link_next = response
                .headers()
                .get_all(LINK)
                .iter()
                .filter_map(|value| value.to_str().ok())
                .find_map(next_link);
            let body = read_capped(response, api.max_page_bytes).await?;
            if status.as_u16() == 429 || status.is_server_error() {
                return Err(Failure::Retry {
                    reason: format!("HTTP {}", status_line(status)),
                    after: retry_after,
                });
            }
            if !status.is_success() {
                let hint = match status.as_u16() {
                    401 | 403 => " (is the secret in the auth variable right?)",
                    404 => " (is `url` the listing endpoint?)",
                    _ => "",
                };
                return Err(Failure::Fatal(format!(
                    "HTTP {}{hint}: {}",
                    status_line(status),
                    snippet(&body)
                )));
            }
            match serde_json::from_slice::<Value>(&body) {
                Ok(body) => Ok(Answer { body, link_next }),
                Err(err) => Err(Failure::Fatal(format!(
                    "the answer is not JSON ({err}; {} bytes: {})",
                    body.len(),
                    snippet(&body)
                ))),
            }
        };
        tokio::time::timeout_at(self.deadline, exchange)
            .await
            .map_err(|_| overdue())
    }

    /// Exponential backoff with full jitter: a random wait in [base·2ⁿ/2, base·2ⁿ], capped.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .api
            .backoff
            .saturating_mul(1u32 << attempt.min(16))
            .min(Duration::from_secs(60));
        let random = splitmix(
            self.seed
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed),
        );
        let fraction = 0.5 + (random >> 11) as f64 / (1u64 << 53) as f64 / 2.0;
        ceiling.mul_f64(fraction)
    }
}

/// A response body, read chunk by chunk (decoded, when it came gzipped) and refused as soon
/// as it passes `limit` bytes: a huge page or a gzip bomb costs at most `limit` of memory.
async fn read_capped(mut response: reqwest::Response, limit: u64) -> Result<Vec<u8>, Failure> {
    // A declared length is the length on the wire; a gzipped body is checked as it unpacks.
    if let Some(declared) = response.content_length()
        && declared > limit
    {
        return Err(Failure::Fatal(format!(
            "the answer is {declared} bytes, more than the {limit} a page may have (max_page_bytes)"
        )));
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() as u64 + chunk.len() as u64 > limit {
                    return Err(Failure::Fatal(format!(
                        "the answer passed the {limit} bytes a page may have (max_page_bytes) as it was read, after any gzip decoding"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(err) => {
                return Err(Failure::Retry {
                    reason: chain(&err),
                    after: None,
                });
            }
        }
    }
}

/// The array of objects in one page's body.
fn page_items<'b>(api: &ProviderApi, body: &'b Value, label: &str) -> Result<&'b [Value]> {
    let path = &api.items;
    match path.get(body) {
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(api.incomplete(format!(
            "{label}: `{path}` is {}, not the array of objects",
            json_type(other)
        ))),
        None => Err(api.incomplete(format!("{label}: the answer has no `{path}`"))),
    }
}

/// One page's body, as the listing reads it, turned into provider rows as if it were the
/// whole listing: the JSON, the array of objects, every mapped field. No I/O, so tests and
/// the fuzzer (fuzz/fuzz_targets/provider_page.rs) can drive it directly.
pub fn parse_page(api: &ProviderApi, body: &[u8], window: Window) -> Result<DataFrame> {
    let label = "page 1".to_string();
    let body: Value = serde_json::from_slice(body).map_err(|err| {
        api.incomplete(format!(
            "{label}: the answer is not JSON ({err}; {} bytes: {})",
            body.len(),
            snippet(body)
        ))
    })?;
    let items = page_items(api, &body, &label)?
        .iter()
        .map(|item| Object::new(api, item))
        .collect();
    let pages = [Page { label, items }];
    frame(api, pages.into(), window, &mut ListingCoverage::default())
}

/// Checks and assembles the objects of every page, in listing order, counted once each.
fn frame(
    api: &ProviderApi,
    mut pages: Vec<Page>,
    window: Window,
    coverage: &mut ListingCoverage,
) -> Result<DataFrame> {
    let started = std::time::Instant::now();
    let id_path = api.path("external_id");
    // external id -> (page index, item index): the copy that is kept.
    let mut kept: PlHashMap<std::borrow::Cow<'_, str>, usize> = PlHashMap::new();
    // (page index, item index) of the kept copy of each id, in the order ids were first seen.
    let mut order: Vec<(usize, usize)> = Vec::new();
    let mut changed: BTreeMap<String, String> = BTreeMap::new();
    for (page_index, page) in pages.iter().enumerate() {
        for (item_index, item) in page.items.iter().enumerate() {
            let at = || field_at(page, item_index, &id_path);
            let id = match item.field("external_id") {
                None | Some(Value::Null) => {
                    return Err(input_to_incomplete(
                        api,
                        Error::input(at(), format!("the object has no `{id_path}` (external_id)")),
                    ));
                }
                Some(Value::String(text)) if !text.is_empty() => {
                    std::borrow::Cow::Borrowed(text.as_str())
                }
                Some(Value::Number(number)) => std::borrow::Cow::Owned(number.to_string()),
                Some(other) => {
                    return Err(input_to_incomplete(
                        api,
                        Error::input(
                            at(),
                            format!(
                                "`{id_path}` (external_id) is {other} ({}), not an id",
                                json_type(other)
                            ),
                        ),
                    ));
                }
            };
            match kept.get(&id) {
                None => {
                    kept.insert(id, order.len());
                    order.push((page_index, item_index));
                }
                Some(&slot) => {
                    coverage.repeated += 1;
                    let previous = order[slot];
                    let earlier = &pages[previous.0].items[previous.1];
                    if earlier.raw != item.raw {
                        changed.insert(id.into_owned(), pages[previous.0].label.clone());
                    }
                    order[slot] = (page_index, item_index);
                }
            }
        }
    }
    drop(kept);
    crate::timing::phase("read:provider:dedup", started);
    for (id, earlier) in &changed {
        coverage.warnings.push(format!(
            "{}: object {id} changed while the listing was read (first seen on {earlier}); the later copy is used",
            api.shown
        ));
    }

    let mapping = Mapping::default();
    let mut columns: Vec<Values> = PROVIDER.iter().map(|spec| Values::new(spec.kind)).collect();
    for &(page_index, item_index) in &order {
        // The object's text moves into the table rather than being copied.
        let mut raw = Some(std::mem::take(&mut pages[page_index].items[item_index].raw));
        let page = &pages[page_index];
        let item = &page.items[item_index];
        // Slices overlap and servers round bounds: keep exactly the asked window.
        if let Some(created) = item.field("created_at").and_then(created_micros)
            && !window.contains(created)
        {
            continue;
        }
        let fields = PROVIDER.iter().zip(&item.fields);
        for ((spec, field), values) in fields.zip(columns.iter_mut()) {
            if spec.name == "raw" {
                if let Values::Text(texts) = values {
                    texts.append_option(raw.take());
                }
                continue;
            }
            let path = api.path(spec.name);
            let at = || field_at(page, item_index, &path);
            let number;
            let cell = match field {
                None if !spec.nullable => {
                    return Err(input_to_incomplete(
                        api,
                        Error::input(at(), format!("the object has no `{path}` ({})", spec.name)),
                    ));
                }
                None => Cell::Null,
                // Numeric ids and keys are common; they are text in the canonical table.
                Some(Value::Number(value)) if spec.kind == crate::model::Kind::Text => {
                    number = value.to_string();
                    Cell::Text(&number)
                }
                Some(value) => Cell::Json(value),
            };
            push(values, spec, cell, &mapping, at).map_err(|err| input_to_incomplete(api, err))?;
        }
    }
    let columns = PROVIDER
        .iter()
        .zip(columns)
        .map(|(spec, values)| values.into_column(spec.name))
        .collect();
    let df = DataFrame::new_infer_height(columns).engine("assembling the provider listing")?;
    crate::timing::phase("read:provider:columns", started);
    // Listings usually come in creation order already: then the sort is only checked.
    if in_creation_order(&df)? {
        return Ok(df);
    }
    df.sort(
        Table::Provider.sort_key().to_vec(),
        SortMultipleOptions::default(),
    )
    .engine("ordering the provider listing")
}

/// Whether the rows are already in `(created_at, external_id)` order, nulls first (as the
/// sort puts them).
fn in_creation_order(df: &DataFrame) -> Result<bool> {
    debug_assert_eq!(Table::Provider.sort_key(), ["created_at", "external_id"]);
    let created = crate::cells::int_column(df, "created_at")?;
    let ids = crate::cells::text_column(df, "external_id")?;
    let mut previous: Option<(Option<i64>, Option<&str>)> = None;
    for row in created.iter().zip(ids.iter()) {
        if previous.is_some_and(|previous| previous > row) {
            return Ok(false);
        }
        previous = Some(row);
    }
    Ok(true)
}

fn created_micros(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => timestamp::parse(text),
        Value::Number(number) => number.as_f64().and_then(timestamp::from_epoch_number),
        _ => None,
    }
}

/// Names an object's field: the request and page, the object's place on it, the JSON path.
fn field_at(page: &Page, item_index: usize, path: &JsonPath) -> Location {
    Location::source(&page.label)
        .row(item_index + 1)
        .column(path.to_string())
}

fn input_to_incomplete(api: &ProviderApi, err: Error) -> Error {
    match err {
        Error::Input { location, message } => {
            let location = location.to_string().replacen(", row ", ", object ", 1);
            let location = location.replacen(", column ", ", field ", 1);
            api.incomplete(format!("{location}: {message}"))
        }
        other => other,
    }
}

/// `Retry-After`: delay-seconds or an HTTP date.
fn retry_after(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = chrono::DateTime::parse_from_rfc2822(text).ok()?;
    let wait = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or_default())
}

/// The `rel="next"` target of one RFC 8288 `Link` header value, if it has one.
pub fn next_link(header: &str) -> Option<String> {
    let mut rest = header;
    loop {
        let start = rest.find('<')?;
        let end = start + rest[start..].find('>')?;
        let target = &rest[start + 1..end];
        rest = &rest[end + 1..];
        // The parameters run to the next comma outside quotes.
        let mut quoted = false;
        let stop = rest
            .char_indices()
            .find(|(_, ch)| {
                if *ch == '"' {
                    quoted = !quoted;
                }
                *ch == ',' && !quoted
            })
            .map(|(index, _)| index)
            .unwrap_or(rest.len());
        let params = &rest[..stop];
        rest = &rest[stop..];
        let is_next = params.split(';').any(|param| {
            let Some((name, value)) = param.split_once('=') else {
                return false;
            };
            name.trim().eq_ignore_ascii_case("rel")
                && value
                    .trim()
                    .trim_matches('"')
                    .split_ascii_whitespace()
                    .any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        if is_next {
            return Some(target.to_string());
        }
    }
}

fn status_line(status: reqwest::StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The start of a body, as text, for an error message.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let short: String = text.chars().take(120).collect();
    let short = short.replace(['\n', '\r'], " ");
    if text.chars().count() > 120 {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn chain(err: &reqwest::Error) -> String {
    let mut text = if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        "cannot connect".to_string()
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

fn human(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
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
    fn link_header_next() {
        let header = r#"<https://api.example/x?page=1>; rel="prev", <https://api.example/x?page=3>; rel="next last""#;
        assert_eq!(
            next_link(header).as_deref(),
            Some("https://api.example/x?page=3")
        );
        assert_eq!(
            next_link(r#"<a,b>; title="x, y"; rel=next"#).as_deref(),
            Some("a,b")
        );
        assert_eq!(next_link(r#"<https://api.example/x>; rel="prev""#), None);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon"), None);
    }

    #[test]
    fn dotted_paths() {
        let value: Value = serde_json::json!({"a": {"b": [{"c": 1}]}});
        assert_eq!(
            JsonPath::parse("a.b.0.c").unwrap().get(&value),
            Some(&Value::from(1))
        );
        assert!(JsonPath::parse("a..b").is_err());
        assert_eq!(JsonPath::parse("").unwrap().get(&value), Some(&value));
    }

    #[test]
    fn slices_cover_the_window_and_overlap() {
        let slices = split(0, 100_000_000, 4);
        assert_eq!(slices.len(), 4);
        assert_eq!(slices[0].from, Some(-1_000_000));
        assert_eq!(slices[3].to, Some(101_000_000));
        for pair in slices.windows(2) {
            assert!(pair[0].to.unwrap() > pair[1].from.unwrap());
        }
    }

    #[test]
    fn bounds_never_narrow() {
        assert_eq!(TimeFormat::EpochSeconds.write(1_500_000, false), "1");
        assert_eq!(TimeFormat::EpochSeconds.write(1_500_000, true), "2");
        assert_eq!(TimeFormat::EpochMillis.write(1_500, true), "2");
        assert_eq!(
            TimeFormat::Rfc3339.write(1_500_000, true),
            "1970-01-01T00:00:02Z"
        );
    }

    /// A listing API that reads `data` with the canonical names, for one page at a time.
    fn page_api() -> ProviderApi {
        ProviderApi {
            url: "http://127.0.0.1:1/exports".into(),
            shown: "provider listing http://127.0.0.1:1/exports".into(),
            pagination: Pagination::Offset {
                param: "offset".into(),
            },
            page_size_param: None,
            page_size: 100,
            items: JsonPath::parse("data").unwrap(),
            total: None,
            created_after_param: None,
            created_before_param: None,
            time_format: TimeFormat::Rfc3339,
            query: BTreeMap::new(),
            fields: BTreeMap::new(),
            auth: Auth::None,
            concurrency: 1,
            min_interval: None,
            retries: 0,
            timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(1),
            max_pages: 1,
            max_page_bytes: 1 << 20,
            max_objects: 100,
            sub_windows: 1,
            slack: 0,
            backoff: Duration::from_millis(1),
        }
    }

    #[test]
    fn one_page_becomes_rows_or_names_what_is_wrong() {
        let api = page_api();
        let page = br#"{"data": [{"external_id": 7, "created_at": "2026-11-01T00:00:00Z", "status": "live"}]}"#;
        let rows = parse_page(&api, page, Window::unbounded()).unwrap();
        assert_eq!(rows.height(), 1);
        let err = parse_page(
            &api,
            br#"{"data": [{"status": "live"}]}"#,
            Window::unbounded(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("object 1") && err.contains("external_id"),
            "{err}"
        );
        let err = parse_page(&api, b"<html>", Window::unbounded())
            .unwrap_err()
            .to_string();
        assert!(err.contains("page 1: the answer is not JSON"), "{err}");
    }

    #[test]
    fn basic_auth_encoding() {
        assert_eq!(
            base64("Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64("ab"), "YWI=");
    }
}
