//! The `provider` table from the provider's own paginated listing API (SPEC §3).
//!
//! Every provider pages differently, so the listing is configured, not coded: `[provider]`
//! names the endpoint, the pagination style (`cursor`, `link`, `page`, `offset`, `stripe`,
//! `relay`), the JSON path of the items, the created-after/before parameters and a dotted JSON
//! path for each canonical column. What is read:
//!
//! * `page` and `offset` listings are read concurrently: the first page, then the following
//!   pages `concurrency` at a time, in order, until one comes back shorter than the provider's
//!   page (or, when `total` names the count, up to the last page the count implies).
//! * `cursor`, `link`, `stripe` and `relay` listings can only be read one page after another;
//!   a bounded window is split into `sub_windows` created-at slices which are listed
//!   concurrently. Slices overlap by a second at their edges, so a server that treats its
//!   bounds as exclusive loses nothing; what two slices both list is counted once.
//! * Created-at slices overlap, so an object two slices list is counted once by its external
//!   id; when the two copies differ the later copy is kept, with a warning.
//!
//! A live provider serves other clients while it is read, so the listing can move between two
//! page requests ([`Watch`]). Page and offset listings count positions: an object deleted
//! behind the reader makes every later page start one object later (one is skipped), a new
//! object ahead of it (a newest-first listing's new exports) makes the next page repeat the
//! last one. So a read of them checks a `total` that changes between pages, a page that
//! repeats objects of earlier pages, and a count over the `total` at the end. When no page
//! carries a total, a deletion leaves no trace in the pages read, so the listing is read a
//! second time, page 1 first: new or gone objects on any page mean it moved, and only two
//! reads that list the same objects on the same pages make it consistent (configure `total`
//! where the provider sends one: such a listing is read once).
//! Cursor, link, stripe and relay listings resume from a keyset (the last object read), so
//! inserts and deletes move nothing under them: an object deleted behind the cursor stays
//! read, one created behind it (Stripe's newest first) is left for the next audit, and no
//! object that stayed is skipped or read twice. What can still be seen is checked: an object
//! read twice within one slice (a cursor that counts positions after all), and a `total`,
//! where one is configured, that changes. A read that moved is thrown away and the whole
//! listing read again, until [`READS`] reads have moved, within `deadline` and `max_pages`;
//! then the listing is incomplete, naming the URL, the pages and what changed.
//!
//! The listing ends only where the provider says it does: a null or empty next cursor or URL,
//! a `Link` header without `rel="next"`, `has_more: false`, `hasNextPage: false`, or a short
//! page of a page/offset listing. A page that says nothing of the kind while it is full (its
//! next pointer absent: a misconfigured path, not an end), or that ends the listing while its
//! `has_more`, `total` or `Link` header says more follow (providers clamp page sizes silently),
//! leaves the listing incomplete.
//!
//! Politeness: at most `concurrency` requests in flight, at most `requests_per_second`, and
//! [`retry`](crate::sources::retry)'s retries, inside a total `deadline`.
//!
//! Anything that leaves the listing partial — a page that never came, a body that is not
//! JSON, a repeating cursor, an end the provider did not declare, the page cap, the deadline,
//! an object with a missing or mistyped field — is [`Error::Incomplete`] naming the source,
//! the URL, the page and the field: no table is ever built from part of a listing. Secrets
//! come from the environment, travel only in headers (marked sensitive) and are scrubbed from
//! every message.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use futures_util::{StreamExt, TryStreamExt};
use polars::prelude::*;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, LINK};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{PROVIDER, Table};
use crate::sources::http::{self, Scrubber};
use crate::sources::page_json::Json;
use crate::sources::retry::{Failure, Retrier, RetryPolicy, describe};
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

    /// [`get`](Self::get) on a page read in place.
    pub fn find<'j, 'a>(&self, json: &'j Json<'a>) -> Option<&'j Json<'a>> {
        self.0.iter().try_fold(json, |json, part| match json {
            Json::Object(_) => json.member(part),
            Json::Array(_) => json.item(part.parse::<usize>().ok()?),
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
    /// An opaque token in the body (`next`), sent back as `param`. A null or empty token ends
    /// the listing; an absent one says nothing.
    Cursor { param: String, next: JsonPath },
    /// The next page's URL: in an RFC 8288 `Link: <…>; rel="next"` header (`next` None), or
    /// in the body at `next`. A `Link` header without `rel="next"`, or a null URL, ends it.
    Link { next: Option<JsonPath> },
    /// Page numbers from `first`.
    Page { param: String, first: i64 },
    /// Item offsets from 0.
    Offset { param: String },
    /// Stripe's: while a page's `has_more` is true, the external id of its last object is sent
    /// back as `param` (`starting_after`).
    Stripe { param: String },
    /// Relay's: while `has_next_page` is true, `end_cursor` is sent back as `param` (`after`).
    Relay {
        param: String,
        has_next_page: JsonPath,
        end_cursor: JsonPath,
    },
}

impl Pagination {
    /// Whether each page names the next (page and offset listings number their pages).
    fn sequential(&self) -> bool {
        !matches!(self, Pagination::Page { .. } | Pagination::Offset { .. })
    }
}

/// Where a page says whether more pages follow (`has_more: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoreFlag {
    /// Configured, or Stripe's: every page carries this boolean.
    Required(JsonPath),
    /// Not configured: the path is read on pages that carry a boolean there.
    IfPresent(JsonPath),
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
    /// Where a page's body gives the total number of objects, if it does.
    pub total: Option<JsonPath>,
    /// Where a page's body says more pages follow.
    pub has_more: MoreFlag,
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
    /// Retries, the timeout of one request and the deadline of the whole listing.
    pub retry: RetryPolicy,
    pub max_pages: usize,
    /// The largest body one page may have, in bytes, as read: after any gzip decoding, so a
    /// small compressed answer cannot unpack into an unbounded one.
    pub max_page_bytes: u64,
    /// The most objects the whole listing may hold (repeats included).
    pub max_objects: usize,
    /// Created-at slices a sequential listing is split into (when the window is bounded).
    pub sub_windows: usize,
    /// Margin around the audited tries, microseconds.
    pub slack: i64,
}

impl ProviderApi {
    /// The path of a canonical column: configured, else the column's own name.
    pub fn path(&self, column: &str) -> JsonPath {
        self.fields
            .get(column)
            .cloned()
            .unwrap_or_else(|| JsonPath(vec![column.to_string()]))
    }

    /// The credential in every form requests carry it (the raw secret, `Basic`'s base64).
    fn scrubber(&self) -> Scrubber {
        match &self.auth {
            Auth::None => Scrubber::default(),
            Auth::Bearer(secret) | Auth::Header { value: secret, .. } => {
                Scrubber::default().secret(&secret.0)
            }
            Auth::Basic { user, password } => Scrubber::default().basic(user, &password.0),
        }
    }

    fn scrub(&self, text: &str) -> String {
        self.scrubber().scrub(text)
    }

    fn incomplete(&self, reason: impl AsRef<str>) -> Error {
        Error::Incomplete {
            source_name: self.shown.clone(),
            reason: self.scrub(reason.as_ref()),
        }
    }
}

/// The created-at bounds a listing is asked for.
pub use crate::model::ProviderWindow as Window;

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
    /// Whole reads of the listing: more than 1 when a read moved and was thrown away.
    pub reads: usize,
    pub warnings: Vec<String>,
}

/// The provider table, and what the listing covered.
pub struct Listed {
    pub provider: DataFrame,
    pub coverage: ListingCoverage,
}

/// Lists every object in the window. Any failure leaves nothing: an `Incomplete` error.
pub async fn list(api: &ProviderApi, window: Window) -> Result<Listed> {
    let http = http::client(&api.retry, auth_headers(api)?).map_err(|err| {
        api.incomplete(format!("cannot build an HTTP client: {}", describe(&err)))
    })?;
    let progress = crate::progress::Line::open("provider", &api.shown);
    let fetcher = Fetcher {
        api,
        http,
        permits: Semaphore::new(api.concurrency.max(1)),
        pace: Mutex::new(Instant::now()),
        retrier: Retrier::new(api.retry).reporting_to(progress.clone()),
        progress: progress.clone(),
        decoder: std::sync::Arc::new(Decoder::new(api)),
        pages: AtomicUsize::new(0),
        objects: AtomicUsize::new(0),
        requests: AtomicUsize::new(0),
    };
    let base = Url::parse(&api.url).map_err(|err| api.incomplete(format!("{}: {err}", api.url)))?;
    let fetch_started = std::time::Instant::now();

    // Each read that moved: its number (from 1) and what changed.
    let mut moves: Vec<(usize, String)> = Vec::new();
    let mut reads = 0;
    // The read before and its ids, when it needs a second read to confirm it. The confirmed
    // read is the one used: a second read only says the listing held still, and what the
    // first got wrong (a field that does not parse) is not read away.
    let mut unconfirmed: Option<(Vec<Vec<String>>, Read)> = None;
    let (pages, sub_windows, used) = loop {
        // A read is a listing of its own: `max_objects` counts its objects; `max_pages` and
        // the deadline count every read's.
        fetcher.objects.store(0, Ordering::Relaxed);
        reads += 1;
        let what = match fetcher.read(&base, window).await? {
            Ok(read) if !read.uncounted => break (read.pages, read.sub_windows, reads),
            Ok(read) => {
                let ids = page_ids(&read.pages);
                let moved = match unconfirmed.take() {
                    Some((before, first)) => match read_again(&before, &ids, &read.pages) {
                        None => break (first.pages, first.sub_windows, reads - 1),
                        moved => moved,
                    },
                    None => None,
                };
                unconfirmed = Some((ids, read));
                match moved {
                    Some(what) => what,
                    // The first of two reads: the second tells.
                    None => continue,
                }
            }
            Err(Moved(what)) => {
                unconfirmed = None;
                what
            }
        };
        moves.push((reads, what));
        if moves.len() >= READS {
            let moves: Vec<String> = moves
                .iter()
                .map(|(read, what)| format!("read {read}: {what}"))
                .collect();
            return Err(api.incomplete(format!(
                "the listing moved while it was read, {READS} times over, so no read of {} is consistent: {}",
                api.url,
                moves.join("; ")
            )));
        }
    };
    crate::timing::phase("read:provider:fetch", fetch_started);
    let mut coverage = ListingCoverage {
        window,
        pages: fetcher.pages.load(Ordering::Relaxed),
        requests: fetcher.requests.load(Ordering::Relaxed),
        retries: fetcher.retrier.retries(),
        sub_windows,
        reads,
        ..ListingCoverage::default()
    };
    for (read, what) in &moves {
        coverage.warnings.push(api.scrub(&format!(
            "{}: the listing moved while it was read (read {read}: {what}); it was read again, and read {used}, which held still, is the one used",
            api.shown
        )));
    }
    let provider = frame(api, pages, window, &mut coverage)?;
    progress.done();
    Ok(Listed { provider, coverage })
}

/// How many reads of a listing may move before it is given up as incomplete.
pub const READS: usize = 3;

/// A read of the listing that moved while it was read: what changed, naming the URL and pages.
struct Moved(String);

/// One whole read of the listing that did not see it move.
struct Read {
    pages: Vec<Page>,
    /// Created-at slices listed concurrently (1: not split).
    sub_windows: usize,
    /// A page or offset listing of more than one page whose pages carry no `total`: an object
    /// deleted behind the reader would have gone unseen, so only a second read that lists the
    /// same objects on the same pages makes it consistent.
    uncounted: bool,
}

/// The external ids of a read, page by page.
fn page_ids(pages: &[Page]) -> Vec<Vec<String>> {
    pages
        .iter()
        .map(|page| page.objects.ids.iter().flatten().cloned().collect())
        .collect()
}

/// How `now`, a read of the listing, differs from the read before it (`before`), naming the
/// first page where they differ; None when they list the same objects on the same pages.
fn read_again(before: &[Vec<String>], now: &[Vec<String>], pages: &[Page]) -> Option<String> {
    let at = (0..before.len().max(now.len())).find(|&at| before.get(at) != now.get(at))?;
    let empty = Vec::new();
    let change = changed(
        before.get(at).unwrap_or(&empty),
        now.get(at).unwrap_or(&empty),
    );
    let label = pages
        .get(at)
        .map_or_else(|| format!("page {}", at + 1), |page| page.label.clone());
    Some(format!(
        "{label}, read again: {change} (the read before had {} pages, this one {})",
        before.len(),
        now.len()
    ))
}

/// What one read of the listing has seen so far, page after page in listing order, to tell
/// whether the listing moved under it.
#[derive(Default)]
struct Watch {
    /// The page (from 1) each external id was first read on.
    read_on: HashMap<String, usize>,
    /// The latest `total` a page carried, and that page.
    total: Option<(i64, usize)>,
    /// Distinct objects read.
    distinct: i64,
}

impl Watch {
    /// Page `number` read: its `total` must be the one the pages before it carried, and none
    /// of its objects may be one an earlier page (or itself) listed already.
    fn page(
        &mut self,
        api: &ProviderApi,
        number: usize,
        page: &Page,
        total: Option<i64>,
    ) -> Result<(), Moved> {
        if let (Some(now), Some((before, at)), Some(path)) = (total, self.total, &api.total)
            && now != before
        {
            return Err(Moved(format!(
                "{}: the total `{path}` went from {before} to {now} between page {at} and page {number}",
                page.label
            )));
        }
        if let Some(total) = total {
            self.total = Some((total, number));
        }
        let mut repeated: Vec<(&str, usize)> = Vec::new();
        for id in page.objects.ids.iter().flatten() {
            match self.read_on.get(id) {
                Some(earlier) => repeated.push((id, *earlier)),
                None => {
                    self.read_on.insert(id.clone(), number);
                    self.distinct += 1;
                }
            }
        }
        if let Some((id, earlier)) = repeated.first() {
            let count = repeated.len();
            return Err(Moved(format!(
                "{}: page {number} repeats {count} object{} of page {earlier} ({id}{}): the listing shifted by {count} while it was read (objects were added ahead of the page, or the provider's order is not stable)",
                page.label,
                if count == 1 { "" } else { "s" },
                if count == 1 { "" } else { ", …" }
            )));
        }
        Ok(())
    }

    /// The read ended on `label`: it cannot hold more distinct objects than the last `total`
    /// said there are. (Fewer is a page that was cut short: [`Fetcher::check_end`].)
    fn end(&self, api: &ProviderApi, label: &str) -> Result<(), Moved> {
        match (self.total, &api.total) {
            (Some((total, at)), Some(path)) if self.distinct > total => Err(Moved(format!(
                "{label}: {} objects were read, and the total `{path}` of page {at} is {total}",
                self.distinct
            ))),
            _ => Ok(()),
        }
    }
}

impl Fetcher<'_> {
    /// One whole read of the listing: its pages, or how it moved while it was read.
    async fn read(&self, base: &Url, window: Window) -> Result<Result<Read, Moved>> {
        let api = self.api;
        Ok(match (&api.pagination, window.from, window.to) {
            (pagination, Some(from), Some(to))
                if pagination.sequential()
                    && api.created_after_param.is_some()
                    && api.created_before_param.is_some()
                    && api.sub_windows > 1
                    && to > from =>
            {
                let slices = split(from, to, api.sub_windows);
                let count = slices.len();
                let lists: Vec<(usize, Result<Vec<Page>, Moved>)> =
                    futures_util::stream::iter(slices.into_iter().enumerate())
                        .map(|(index, slice)| async move {
                            let label = format!("slice {} of {count}", index + 1);
                            let url = first_url(api, base, slice, true);
                            Ok::<_, Error>((index, self.sequential(url, &label).await?))
                        })
                        .buffer_unordered(api.concurrency.max(1))
                        .try_collect()
                        .await?;
                let mut lists = lists;
                lists.sort_by_key(|(index, _)| *index);
                let mut pages = Vec::new();
                for (_, list) in lists {
                    match list {
                        Ok(list) => pages.extend(list),
                        Err(moved) => return Ok(Err(moved)),
                    }
                }
                Ok(Read {
                    pages,
                    sub_windows: count,
                    uncounted: false,
                })
            }
            (pagination, _, _) if pagination.sequential() => {
                let url = first_url(api, base, window, false);
                self.sequential(url, "listing").await?.map(|pages| Read {
                    pages,
                    sub_windows: 1,
                    uncounted: false,
                })
            }
            _ => self
                .numbered(base, window)
                .await?
                .map(|(pages, counted)| Read {
                    uncounted: !counted && pages.len() > 1,
                    pages,
                    sub_windows: 1,
                }),
        })
    }
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
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{}", password.0))
            ),
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

/// One page as read: where it came from and its objects.
struct Page {
    /// `GET <url>, page N of <slice>`, for errors.
    label: String,
    objects: Objects,
}

/// A page's objects, read and checked as the page is decoded (on the blocking pool, while
/// other pages are fetched), so that the listing only puts them together once it ends.
struct Objects {
    /// Each object's external id as the listing compares them, or why it has none.
    ids: Vec<Result<String>>,
    /// The objects as provider rows, `PROVIDER`'s columns but `raw`. A cell that failed its
    /// check is null here, and its object's first such failure is in `refused`.
    rows: DataFrame,
    /// The JSON text of every object (compact, keys in order, as `Value` writes it), one
    /// after another: once the listing ends, each page's text becomes a buffer of the `raw`
    /// column, whose cells point into it ([`raw_column`]).
    raw: String,
    /// Where each object's text is in `raw`.
    raw_at: Vec<std::ops::Range<usize>>,
    /// Each object's created-at time, where it has a valid one.
    created: Vec<Option<i64>>,
    /// The objects with a cell that failed its check, by their index on the page, in order,
    /// with the first failure of each.
    refused: Vec<(usize, Error)>,
}

impl Objects {
    fn len(&self) -> usize {
        self.ids.len()
    }

    /// The JSON text of the object at `index`.
    fn raw_text(&self, index: usize) -> &str {
        &self.raw[self.raw_at[index].clone()]
    }

    /// The first failed check of the object at `index`, if one failed (taken out: the
    /// listing stops on it).
    fn refusal(&mut self, index: usize) -> Option<Error> {
        let found = self
            .refused
            .binary_search_by_key(&index, |(at, _)| *at)
            .ok()?;
        Some(self.refused.remove(found).1)
    }
}

/// How the objects of a page are read, worked out once for the whole listing: where the array
/// of objects is, and the path of each canonical column (in `PROVIDER` order; none for `raw`).
struct Decoder {
    items: JsonPath,
    fields: Vec<Option<JsonPath>>,
    id: JsonPath,
    /// For the beginning of a body that is not JSON, which is shown.
    scrubber: Scrubber,
}

impl Decoder {
    fn new(api: &ProviderApi) -> Decoder {
        Decoder {
            items: api.items.clone(),
            fields: PROVIDER
                .iter()
                .map(|spec| (spec.name != "raw").then(|| api.path(spec.name)))
                .collect(),
            id: api.path("external_id"),
            scrubber: api.scrubber(),
        }
    }

    /// A page's body parsed, and its objects read when the body has the array of them (a body
    /// without one is reported where the listing reads the page's objects).
    fn decode(&self, body: &[u8], label: &str) -> Result<(Value, Option<Objects>), Failure> {
        let json = Json::parse(body)
            .map_err(|err| Failure::Fatal(not_json(&err, body, &self.scrubber)))?;
        self.read(&json, label)
            .map_err(|err| Failure::Fatal(format!("reading the objects failed: {err}")))
    }

    /// The body as a `Value` with its array of objects left empty, and the objects read from
    /// that array; the whole body and no objects when it has no such array.
    fn read(&self, body: &Json<'_>, label: &str) -> Result<(Value, Option<Objects>)> {
        Ok(match self.items.find(body) {
            Some(Json::Array(items)) => (
                body.to_value_without(&self.items.0),
                Some(self.objects(items, label)?),
            ),
            _ => (body.to_value(), None),
        })
    }

    /// The objects of a page (`label`): their ids, and every mapped field checked into its
    /// column as the listing's rows hold them.
    fn objects(&self, items: &[Json<'_>], label: &str) -> Result<Objects> {
        let mapping = Mapping::default();
        let mut columns: Vec<Values> = PROVIDER.iter().map(|spec| Values::new(spec.kind)).collect();
        let mut ids = Vec::with_capacity(items.len());
        let mut created = Vec::with_capacity(items.len());
        let mut refused = Vec::new();
        let mut raw = Vec::with_capacity(items.len() * 256);
        let mut raw_at = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let at = |path: &JsonPath| {
                Location::source(label)
                    .row(index + 1)
                    .column(path.to_string())
            };
            let value = |path: &JsonPath| path.find(item).map(Json::to_value);
            ids.push(object_id(value(&self.id).as_ref(), &self.id, || {
                at(&self.id)
            }));
            let mut first_refusal = None;
            let fields = PROVIDER.iter().zip(&self.fields).zip(columns.iter_mut());
            for ((spec, path), column) in fields {
                let Some(path) = path else {
                    // `raw`: the object's text.
                    let start = raw.len();
                    item.write(&mut raw);
                    raw_at.push(start..raw.len());
                    continue;
                };
                let field = value(path);
                if spec.name == "created_at" {
                    created.push(field.as_ref().and_then(created_micros));
                }
                let cell = match &field {
                    None if !spec.nullable => {
                        first_refusal.get_or_insert_with(|| {
                            Error::input(
                                at(path),
                                format!("the object has no `{path}` ({})", spec.name),
                            )
                        });
                        column.push_null();
                        continue;
                    }
                    None => Cell::Null,
                    // Typed as every source is (`snapshot::push`): an integer id is text, a
                    // number for a key or status is refused.
                    Some(value) => Cell::Json(value),
                };
                if let Err(err) = push(column, spec, cell, &mapping, || at(path)) {
                    first_refusal.get_or_insert(err);
                    column.push_null();
                }
            }
            if let Some(err) = first_refusal {
                refused.push((index, err));
            }
        }
        let columns = PROVIDER
            .iter()
            .zip(columns)
            .filter(|(spec, _)| spec.name != "raw")
            .map(|(spec, values)| values.into_column(spec.name))
            .collect();
        raw.shrink_to_fit();
        Ok(Objects {
            ids,
            rows: DataFrame::new_infer_height(columns).engine("assembling a provider page")?,
            raw: String::from_utf8(raw).expect("JSON text is UTF-8"),
            raw_at,
            created,
            refused,
        })
    }
}

/// An object's external id as the listing compares them (text, or a number written out), or
/// why it has none; `at` names the field at `path`.
fn object_id(id: Option<&Value>, path: &JsonPath, at: impl Fn() -> Location) -> Result<String> {
    match id {
        None | Some(Value::Null) => Err(Error::input(
            at(),
            format!("the object has no `{path}` (external_id)"),
        )),
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        Some(Value::Number(number)) => Ok(number.to_string()),
        Some(other) => Err(Error::input(
            at(),
            format!(
                "`{path}` (external_id) is {other} ({}), not an id",
                json_type(other)
            ),
        )),
    }
}

/// Why a page's body is not JSON, with its size and its beginning (scrubbed before it is cut
/// short, so that no part of an echoed secret is shown).
fn not_json(err: &serde_json::Error, body: &[u8], scrubber: &Scrubber) -> String {
    format!(
        "the answer is not JSON ({err}; {} bytes: {})",
        body.len(),
        snippet(scrubber.scrub(&String::from_utf8_lossy(body)).as_bytes())
    )
}

/// A page's parsed answer.
struct Answer {
    /// The body, its array of objects left empty when it has one (they are in `objects`).
    body: Value,
    /// The page's objects, read from `body` as it was parsed.
    objects: Option<Objects>,
    /// The page's `Link` header, if it has one.
    links: Option<Links>,
}

/// What a `Link` header names, resolved against the page's URL.
struct Links {
    next: Option<String>,
    last: Option<String>,
}

/// What a page says about the pages after it, besides its own next pointer.
struct Hints {
    /// `total`: the provider's count of the whole listing.
    total: Option<i64>,
    /// `has_more`.
    has_more: Option<bool>,
}

/// Where a sequential listing goes after a page.
enum Step {
    /// The next page, and the token that names it (a repeat means the listing loops).
    Next { token: String, url: Url },
    /// The provider said the listing ends here (a null cursor, `has_more: false`, …).
    End,
    /// The page names no next page and no end: its pointer is absent (what is absent).
    Silent(String),
}

struct Fetcher<'a> {
    api: &'a ProviderApi,
    http: reqwest::Client,
    permits: Semaphore,
    /// The earliest time the next request may start (the requests-per-second limit).
    pace: Mutex<Instant>,
    retrier: Retrier,
    progress: crate::progress::Line,
    decoder: std::sync::Arc<Decoder>,
    pages: AtomicUsize,
    /// Objects read so far, for `max_objects`.
    objects: AtomicUsize,
    requests: AtomicUsize,
}

impl Fetcher<'_> {
    /// A sequential listing (cursor, link, stripe, relay), one page after another.
    async fn sequential(&self, first: Url, slice: &str) -> Result<Result<Vec<Page>, Moved>> {
        let api = self.api;
        let mut url = first;
        let mut seen: HashSet<String> = HashSet::new();
        let mut pages = Vec::new();
        let mut watch = Watch::default();
        let mut listed = 0i64;
        for number in 1.. {
            let label = format!("GET {url}, page {number} of the {slice}");
            let mut answer = self.fetch(&url, &label).await?;
            let hints = self.hints(&answer.body, &label)?;
            let step = self.step(&answer, &hints, &url, &label)?;
            let objects = self.items(&mut answer, &label)?;
            let count = objects.len();
            listed += count as i64;
            pages.push(Page { label, objects });
            let page = pages.last().expect("just pushed");
            let label = &page.label;
            // A cursor sent back again loops whatever the listing does: that comes first.
            if let Step::Next { token, .. } = &step
                && seen.contains(token)
            {
                return Err(api.incomplete(format!(
                    "{label}: the provider sent a cursor it had already sent ({token:?}); the listing would never end"
                )));
            }
            if let Err(moved) = watch.page(api, number, page, hints.total) {
                return Ok(Err(moved));
            }
            let (token, next_url) = match step {
                Step::Next { token, url } => (token, url),
                // `has_more: false`, or a total reached, declares the end without a pointer.
                Step::Silent(absent)
                    if count >= api.page_size as usize
                        && hints.has_more != Some(false)
                        && hints.total.is_none_or(|total| total > listed) =>
                {
                    return Err(api.incomplete(format!(
                        "{label}: a full page of {count} objects, and {absent}: the provider named neither a next page nor the end (does `pagination` match how this provider pages?)"
                    )));
                }
                Step::End | Step::Silent(_) => {
                    self.check_end(label, (&answer, &hints, &url), listed)?;
                    return Ok(watch.end(api, label).map(|()| pages));
                }
            };
            seen.insert(token);
            url = next_url;
        }
        unreachable!("the pages of a listing are counted without end")
    }

    /// Where a sequential listing goes after this page, by the style's own pointer.
    fn step(&self, answer: &Answer, hints: &Hints, url: &Url, label: &str) -> Result<Step> {
        let api = self.api;
        let body = &answer.body;
        let absent = |path: &JsonPath, key: &str| format!("the answer has no `{path}` ({key})");
        Ok(match &api.pagination {
            Pagination::Cursor { param, next } => match next.get(body) {
                None => Step::Silent(absent(next, "next_cursor")),
                Some(value) => match token(value) {
                    Ok(None) => Step::End,
                    Ok(Some(cursor)) => Step::Next {
                        url: with_param(url, param, &cursor),
                        token: cursor,
                    },
                    Err(()) => {
                        return Err(api.incomplete(format!(
                            "{label}: the next cursor `{next}` is {value}, not a token"
                        )));
                    }
                },
            },
            Pagination::Link { next: None } => match &answer.links {
                Some(Links {
                    next: Some(link), ..
                }) => self.follow(url, link, label)?,
                Some(_) => Step::End,
                None => Step::Silent("no `Link` header".to_string()),
            },
            Pagination::Link { next: Some(path) } => match path.get(body) {
                None => Step::Silent(absent(path, "next_url")),
                Some(Value::Null) => Step::End,
                Some(Value::String(link)) if link.is_empty() => Step::End,
                Some(Value::String(link)) => self.follow(url, link, label)?,
                Some(other) => {
                    return Err(api.incomplete(format!(
                        "{label}: the next URL `{path}` is {other}, not a URL"
                    )));
                }
            },
            Pagination::Stripe { param } => match hints.has_more {
                Some(false) => Step::End,
                _ => {
                    // `has_more` is required of a Stripe listing: `hints` has checked it.
                    let id_path = api.path("external_id");
                    let objects = answer
                        .objects
                        .as_ref()
                        .ok_or_else(|| no_items(api, body, label))?;
                    let last = objects.ids.last().ok_or_else(|| {
                        api.incomplete(format!(
                            "{label}: `has_more` is true on a page with no objects: there is no last object to go on from"
                        ))
                    })?;
                    match last {
                        Ok(id) => Step::Next {
                            url: with_param(url, param, id),
                            token: id.clone(),
                        },
                        _ => {
                            return Err(api.incomplete(format!(
                                "{label}: `has_more` is true, but the last object has no `{id_path}` (external_id) to send back as {param}"
                            )));
                        }
                    }
                }
            },
            Pagination::Relay {
                param,
                has_next_page,
                end_cursor,
            } => match has_next_page.get(body) {
                Some(Value::Bool(false)) => Step::End,
                Some(Value::Bool(true)) => match end_cursor.get(body).map(token) {
                    Some(Ok(Some(cursor))) => Step::Next {
                        url: with_param(url, param, &cursor),
                        token: cursor,
                    },
                    _ => {
                        return Err(api.incomplete(format!(
                            "{label}: `{has_next_page}` is true, but `{end_cursor}` names no cursor to go on from"
                        )));
                    }
                },
                None => {
                    return Err(api.incomplete(format!(
                        "{label}: {} (is `has_next_page` the path of hasNextPage?)",
                        absent(has_next_page, "has_next_page")
                    )));
                }
                Some(other) => {
                    return Err(api.incomplete(format!(
                        "{label}: `{has_next_page}` is {other}, not true or false"
                    )));
                }
            },
            Pagination::Page { .. } | Pagination::Offset { .. } => {
                unreachable!("page and offset listings number their pages")
            }
        })
    }

    /// A next link, resolved against the page's URL, on the same server.
    fn follow(&self, url: &Url, link: &str, label: &str) -> Result<Step> {
        let api = self.api;
        let next = url.join(link).map_err(|err| {
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
        Ok(Step::Next {
            token: next.to_string(),
            url: next,
        })
    }

    /// A page where the listing would end: an error when the page itself says that more
    /// follow. `listed` counts the objects of the listing up to the page's end.
    fn check_end(&self, label: &str, read: (&Answer, &Hints, &Url), listed: i64) -> Result<()> {
        match self.more(read, listed) {
            None => Ok(()),
            Some(more) => Err(self.api.incomplete(format!(
                "{label}: the listing would end on this page, but {more}: the provider says more follow (it may serve fewer objects a page than asked, or name no way on)"
            ))),
        }
    }

    /// Why a page says more pages follow, if it does: `has_more`, a `total` past the objects
    /// up to its end (`listed`), or a `Link` header naming a next or another last page.
    fn more(&self, (answer, hints, url): (&Answer, &Hints, &Url), listed: i64) -> Option<String> {
        let api = self.api;
        if let (Some(total), Some(path)) = (hints.total, &api.total)
            && total > listed
        {
            return Some(format!(
                "the total `{path}` is {total}, and {listed} objects come up to this page"
            ));
        }
        if hints.has_more == Some(true) {
            return Some(format!("`{}` is true", api.has_more.path()));
        }
        let links = answer.links.as_ref()?;
        if let Some(next) = &links.next {
            return Some(format!("its `Link` header names a next page ({next})"));
        }
        let last = links.last.as_ref()?;
        (!same_page(url, last))
            .then(|| format!("its `Link` header names another last page ({last})"))
    }

    /// A page-number or offset listing: the first page, then the rest concurrently; with
    /// whether its pages carried a `total` it was checked against.
    async fn numbered(
        &self,
        base: &Url,
        window: Window,
    ) -> Result<Result<(Vec<Page>, bool), Moved>> {
        let api = self.api;
        let first = first_url(api, base, window, false);
        let (param, first_number) = match &api.pagination {
            Pagination::Page { param, first } => (param.as_str(), *first),
            Pagination::Offset { param } => (param.as_str(), 0),
            _ => unreachable!("the other styles are sequential"),
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
                let mut answer = self.fetch(&url, &label).await?;
                let hints = self.hints(&answer.body, &label)?;
                let objects = self.items(&mut answer, &label)?;
                Ok::<_, Error>(Numbered {
                    page: Page { label, objects },
                    answer,
                    hints,
                    url,
                    slot,
                })
            }
        };

        let mut watch = Watch::default();
        // Each page is watched as it joins the read, in listing order.
        let mut keep = |read: Numbered, pages: &mut Vec<Page>| -> Result<(), Moved> {
            watch.page(api, read.slot as usize + 1, &read.page, read.hints.total)?;
            pages.push(read.page);
            Ok(())
        };
        let asked = i64::from(api.page_size);
        let mut read = fetch_slot(0, asked).await?;
        let count = read.count();
        let mut total = read.hints.total;
        let mut full = asked;
        let mut next_slot = 1;
        let mut pages = Vec::new();
        if count > 0 && count < asked {
            let says_more = self
                .more((&read.answer, &read.hints, &read.url), count)
                .is_some();
            full = count;
            if !says_more {
                // Everything fitted, or the server serves fewer than asked: page 2 tells.
                if let Err(moved) = keep(read, &mut pages) {
                    return Ok(Err(moved));
                }
                read = fetch_slot(1, count).await?;
                total = read.hints.total.or(total);
                next_slot = 2;
            }
        }
        // With a total the number of pages is known; without one, or when the listing grew
        // while it was read, go on until a short page.
        let last_slot = |total: Option<i64>| total.map(|total| (total.max(1) - 1) / full);
        let mut bounded = last_slot(total);
        loop {
            if read.count() < full || bounded.is_some_and(|last| last < next_slot) {
                let reached = read.slot * full + read.count();
                // A page cut short while its own `total` says more: incomplete, moved or not.
                self.check_end(
                    &read.page.label,
                    (&read.answer, &read.hints, &read.url),
                    reached,
                )?;
                let label = read.page.label.clone();
                if let Err(moved) = keep(read, &mut pages) {
                    return Ok(Err(moved));
                }
                if let Err(moved) = watch.end(api, &label) {
                    return Ok(Err(moved));
                }
                return Ok(Ok((pages, watch.total.is_some())));
            }
            if let Err(moved) = keep(read, &mut pages) {
                return Ok(Err(moved));
            }
            let end = bounded.unwrap_or(i64::MAX);
            let mut stream = futures_util::stream::iter(next_slot..=end)
                .map(|slot| fetch_slot(slot, full))
                .buffered(api.concurrency.max(1));
            let mut latest = None;
            while let Some(result) = stream.next().await {
                let page = result?;
                next_slot = page.slot + 1;
                if let Some(previous) = latest.replace(page)
                    && let Err(moved) = keep(previous, &mut pages)
                {
                    return Ok(Err(moved));
                }
                if latest.as_ref().is_some_and(|page| page.count() < full) {
                    break;
                }
            }
            read = latest.expect("a bounded stream reads at least one page");
            // The last page was full: the listing may have grown while it was read. The
            // latest total says how far; without one, read on until a short page.
            bounded = match (bounded, read.hints.total) {
                (Some(_), Some(total)) => last_slot(Some(total)),
                (bounded, _) => bounded,
            };
        }
    }

    /// A page's `total` and `has_more`, each checked.
    fn hints(&self, body: &Value, label: &str) -> Result<Hints> {
        let api = self.api;
        let total = match &api.total {
            None => None,
            Some(path) => match path.get(body) {
                None | Some(Value::Null) => None,
                Some(value) => Some(value.as_i64().filter(|n| *n >= 0).ok_or_else(|| {
                    api.incomplete(format!(
                        "{label}: the total `{path}` is {value}, not a count"
                    ))
                })?),
            },
        };
        let has_more = match (&api.has_more, api.has_more.path().get(body)) {
            (_, Some(Value::Bool(more))) => Some(*more),
            (MoreFlag::IfPresent(_), _) => None,
            (MoreFlag::Required(path), None) => {
                return Err(api.incomplete(format!(
                    "{label}: the answer has no `{path}` (has_more), so it does not say whether more pages follow"
                )));
            }
            (MoreFlag::Required(path), Some(other)) => {
                return Err(api.incomplete(format!(
                    "{label}: `{path}` (has_more) is {other}, not true or false"
                )));
            }
        };
        Ok(Hints { total, has_more })
    }

    /// The page's objects, counted against `max_objects`.
    fn items(&self, answer: &mut Answer, label: &str) -> Result<Objects> {
        let objects = answer
            .objects
            .take()
            .ok_or_else(|| no_items(self.api, &answer.body, label))?;
        let count = objects.len();
        let seen = self.objects.fetch_add(count, Ordering::Relaxed) + count;
        if seen > self.api.max_objects {
            return Err(self.api.incomplete(format!(
                "{label}: the listing passed {} objects (max_objects) before it ended",
                self.api.max_objects
            )));
        }
        self.progress.page(count);
        Ok(objects)
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
        self.retrier
            .run(|| self.attempt(url, label))
            .await
            .map_err(|reason| api.incomplete(format!("{label}: {reason}")))
    }

    /// One request, paced and within the deadline.
    async fn attempt(&self, url: &Url, label: &str) -> Result<Answer, Failure> {
        let api = self.api;
        let deadline = self.retrier.deadline;
        let overdue = || Failure::Fatal(self.retrier.overdue());
        let slot = {
            let mut pace = self.pace.lock().expect("pace lock");
            let slot = (*pace).max(Instant::now());
            *pace = slot + api.min_interval.unwrap_or_default();
            slot
        };
        if slot > deadline {
            return Err(overdue());
        }
        tokio::time::sleep_until(slot).await;
        let _permit = tokio::time::timeout_at(deadline, self.permits.acquire())
            .await
            .map_err(|_| overdue())?
            .expect("the semaphore is never closed");
        self.requests.fetch_add(1, Ordering::Relaxed);
        let exchange = async {
            let response = self
                .http
                .get(url.clone())
                .send()
                .await
                .map_err(|err| Failure::unanswered(&err))?;
            if let Some(refused) = http::redirect_refused(url, &response) {
                return Err(Failure::Fatal(refused));
            }
            let status = response.status();
            let passing = Failure::passing(status, response.headers());
            let links = links(response.headers(), url);
            let body = read_capped(response, api.max_page_bytes).await?;
            if let Some(failure) = passing {
                return Err(failure);
            }
            if !status.is_success() {
                let hint = match status.as_u16() {
                    401 | 403 => " (is the secret in the auth variable right?)",
                    404 => " (is `url` the listing endpoint?)",
                    _ => "",
                };
                // Scrubbed before it is cut short: no part of an echoed secret is shown.
                return Err(Failure::Fatal(format!(
                    "HTTP {}{hint}: {}",
                    crate::sources::retry::status_line(status),
                    snippet(api.scrub(&String::from_utf8_lossy(&body)).as_bytes())
                )));
            }
            // Parsed on a thread of the blocking pool, so that the next requests go out and
            // the answers of others are read meanwhile.
            let decoder = self.decoder.clone();
            let label = label.to_string();
            let (body, objects) =
                tokio::task::spawn_blocking(move || decoder.decode(&body, &label))
                    .await
                    .map_err(|err| {
                        Failure::Fatal(format!("decoding the answer failed: {err}"))
                    })??;
            Ok(Answer {
                body,
                objects,
                links,
            })
        };
        tokio::time::timeout_at(deadline, exchange)
            .await
            .map_err(|_| overdue())?
    }
}

/// How a page read again (`again`) differs from its first read (`first`), which it does.
fn changed(first: &[String], again: &[String]) -> String {
    let missing = |ids: &[String], from: &[String]| -> Vec<String> {
        ids.iter()
            .filter(|id| !from.contains(id))
            .cloned()
            .collect()
    };
    let (new, gone) = (missing(again, first), missing(first, again));
    let name = |ids: &[String]| match ids {
        [one] => format!("1 object ({one})"),
        [first, ..] => format!("{} objects ({first}, …)", ids.len()),
        [] => String::new(),
    };
    match (new.is_empty(), gone.is_empty()) {
        (false, false) => format!(
            "it now holds {} it did not hold, and no longer holds {}",
            name(&new),
            name(&gone)
        ),
        (false, true) => format!("it now holds {} it did not hold", name(&new)),
        (true, false) => format!("it no longer holds {}", name(&gone)),
        (true, true) => "its objects come in another order".to_string(),
    }
}

/// One page of a numbered listing as read, with what it says.
struct Numbered {
    page: Page,
    answer: Answer,
    hints: Hints,
    url: Url,
    /// 0-based.
    slot: i64,
}

impl Numbered {
    fn count(&self) -> i64 {
        self.page.objects.len() as i64
    }
}

impl MoreFlag {
    fn path(&self) -> &JsonPath {
        match self {
            MoreFlag::Required(path) | MoreFlag::IfPresent(path) => path,
        }
    }
}

/// A cursor or id as sent back: text or a number; `None` for null or empty (the end).
fn token(value: &Value) -> Result<Option<String>, ()> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) if text.is_empty() => Ok(None),
        Value::String(text) => Ok(Some(text.clone())),
        Value::Number(number) => Ok(Some(number.to_string())),
        _ => Err(()),
    }
}

/// Whether `link` names the page at `url` (the same query, in any order).
fn same_page(url: &Url, link: &str) -> bool {
    let Ok(link) = url.join(link) else {
        return false;
    };
    let query = |url: &Url| {
        let mut pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        pairs.sort();
        pairs
    };
    link.origin() == url.origin() && link.path() == url.path() && query(&link) == query(url)
}

/// A response's `Link` headers: the `next` and `last` targets, resolved against `url`.
fn links(headers: &HeaderMap, url: &Url) -> Option<Links> {
    let values: Vec<&str> = headers
        .get_all(LINK)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    if values.is_empty() {
        return None;
    }
    let target = |rel: &str| {
        values
            .iter()
            .find_map(|value| link_target(value, rel))
            .map(|target| url.join(&target).map_or(target, |url| url.to_string()))
    };
    Some(Links {
        next: target("next"),
        last: target("last"),
    })
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
            Err(err) => return Err(Failure::unanswered(&err)),
        }
    }
}

/// What is wrong with a page's body that has no array of objects where `items` says.
fn no_items(api: &ProviderApi, body: &Value, label: &str) -> Error {
    let path = &api.items;
    match path.get(body) {
        Some(other) => api.incomplete(format!(
            "{label}: `{path}` is {}, not the array of objects",
            json_type(other)
        )),
        None => api.incomplete(format!("{label}: the answer has no `{path}`")),
    }
}

/// One page's body, as the listing reads it, turned into provider rows as if it were the
/// whole listing: the JSON, the array of objects, every mapped field. No I/O, so tests and
/// the fuzzer (fuzz/fuzz_targets/provider_page.rs) can drive it directly.
pub fn parse_page(api: &ProviderApi, body: &[u8], window: Window) -> Result<DataFrame> {
    let label = "page 1".to_string();
    let json = Json::parse(body).map_err(|err| {
        api.incomplete(format!(
            "{label}: {}",
            not_json(&err, body, &api.scrubber())
        ))
    })?;
    let (body, objects) = Decoder::new(api).read(&json, &label)?;
    let objects = objects.ok_or_else(|| no_items(api, &body, &label))?;
    let pages = [Page { label, objects }];
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
    let listed: usize = pages.iter().map(|page| page.objects.len()).sum();
    // Each object's id coded in listing order: an id's code is its place in `order`, where the
    // copy that is kept is.
    let mut ids = crate::dictionary::TextDictionary::default();
    let codes = ids.encode_all(
        pages
            .iter()
            .flat_map(|page| page.objects.ids.iter().map(|id| id.as_deref().ok())),
        listed,
    );
    drop(ids);
    let mut codes = codes.into_iter();
    // (page index, object index) of the kept copy of each id, in the order ids were first seen.
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(listed);
    let mut changed: BTreeMap<String, String> = BTreeMap::new();
    // The first object without a usable id, if one has none.
    let mut without_id = None;
    'pages: for (page_index, page) in pages.iter().enumerate() {
        for (object_index, id) in page.objects.ids.iter().enumerate() {
            let code = codes.next().expect("a code for every object") as usize;
            let Ok(id) = id else {
                without_id = Some((page_index, object_index));
                break 'pages;
            };
            // A new id's code is the next place in `order`.
            if code == order.len() {
                order.push((page_index, object_index));
                continue;
            }
            coverage.repeated += 1;
            let (earlier_page, earlier_object) = order[code];
            if pages[earlier_page].objects.raw_text(earlier_object)
                != page.objects.raw_text(object_index)
            {
                changed.insert(id.to_string(), pages[earlier_page].label.clone());
            }
            order[code] = (page_index, object_index);
        }
    }
    if let Some((page_index, object_index)) = without_id {
        let ids = &mut pages[page_index].objects.ids;
        let err = ids
            .swap_remove(object_index)
            .expect_err("the object has no id");
        return Err(input_to_incomplete(api, err));
    }
    crate::timing::phase("read:provider:dedup", started);
    for (id, earlier) in &changed {
        coverage.warnings.push(api.scrub(&format!(
            "{}: object {id} changed while the listing was read (first seen on {earlier}); the later copy is used",
            api.shown
        )));
    }

    // Where each page's rows start among all pages' rows.
    let starts: Vec<usize> = pages
        .iter()
        .scan(0, |start, page| {
            let here = *start;
            *start += page.objects.len();
            Some(here)
        })
        .collect();
    let mut rows: Vec<IdxSize> = Vec::with_capacity(order.len());
    let mut kept_objects: Vec<(usize, usize)> = Vec::with_capacity(order.len());
    for &(page_index, object_index) in &order {
        let objects = &mut pages[page_index].objects;
        // Slices overlap and servers round bounds: keep exactly the asked window.
        if objects.created[object_index].is_some_and(|created| !window.holds(created)) {
            continue;
        }
        if let Some(err) = objects.refusal(object_index) {
            return Err(input_to_incomplete(api, err));
        }
        rows.push((starts[page_index] + object_index) as IdxSize);
        kept_objects.push((page_index, object_index));
    }
    let raw = raw_column(api, &mut pages, &kept_objects)?;
    // Nearly always every row is kept, in the order read: then the pages' rows are the listing.
    let total: usize = pages.iter().map(|page| page.objects.len()).sum();
    let every_row_in_order =
        rows.len() == total && rows.iter().enumerate().all(|(at, row)| *row as usize == at);
    let mut listed = pages.into_iter().map(|page| page.objects.rows);
    let df = match listed.next() {
        None => crate::model::empty(Table::Provider),
        Some(mut df) => {
            for page in listed {
                df.vstack_mut_owned(page)
                    .engine("assembling the provider listing")?;
            }
            let mut df = if every_row_in_order {
                df.rechunk_mut_par();
                df
            } else {
                df.take(&IdxCa::from_vec(PlSmallStr::EMPTY, rows))
                    .engine("assembling the provider listing")?
            };
            df.with_column(raw)
                .engine("assembling the provider listing")?;
            df.select(PROVIDER.iter().map(|spec| spec.name))
                .engine("assembling the provider listing")?
        }
    };
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

/// The listing's `raw` column: each page's text becomes one of the column's buffers and each
/// kept object (`(page, object)`, in row order) a view into it, so the objects' JSON, the
/// largest part of a listing, is not copied. A page's text is dropped with the column.
fn raw_column(api: &ProviderApi, pages: &mut [Page], kept: &[(usize, usize)]) -> Result<Column> {
    use polars_arrow::array::{Utf8ViewArray, View};
    use polars_arrow::datatypes::ArrowDataType;
    use polars_buffer::Buffer;

    let mut buffers: Vec<Buffer<u8>> = Vec::with_capacity(pages.len());
    for page in pages.iter_mut() {
        // A view addresses its buffer with 32-bit offsets, and Arrow caps a buffer at 2 GiB.
        if page.objects.raw.len() > polars_arrow::array::BINVIEW_ARROW_BUFFER_LEN_LIMIT {
            return Err(api.incomplete(format!(
                "{}: the objects' JSON is {} bytes, more than the 2 GiB a page's objects may take (ask for fewer objects a page: page_size)",
                page.label,
                page.objects.raw.len()
            )));
        }
        buffers.push(Buffer::from(
            std::mem::take(&mut page.objects.raw).into_bytes(),
        ));
    }
    let mut bytes = 0;
    let views: Vec<View> = kept
        .iter()
        .map(|&(page, object)| {
            let at = pages[page].objects.raw_at[object].clone();
            bytes += at.len();
            // The offset fits in 32 bits: the page's text is under 2 GiB (above).
            View::new_from_bytes(&buffers[page][at.clone()], page as u32, at.start as u32)
        })
        .collect();
    let buffer_bytes = buffers.iter().map(|buffer| buffer.len()).sum();
    // SAFETY: each buffer is a page's text (a `String`), and each view the bytes of one
    // object's text in it, from where writing the object started to where it ended: whole
    // UTF-8 characters (`Objects::raw_text` slices the same ranges as `str`). `bytes` adds up
    // the views' lengths, `buffer_bytes` the buffers'.
    let array = unsafe {
        Utf8ViewArray::new_unchecked(
            ArrowDataType::Utf8View,
            views.into(),
            buffers.into(),
            None,
            Some(bytes),
            buffer_bytes,
        )
    };
    Ok(StringChunked::with_chunk("raw".into(), array).into_column())
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

/// The `rel="next"` target of one RFC 8288 `Link` header value, if it has one.
pub fn next_link(header: &str) -> Option<String> {
    link_target(header, "next")
}

/// The target of one RFC 8288 `Link` header value whose `rel` includes `wanted`.
fn link_target(header: &str, wanted: &str) -> Option<String> {
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
                    .any(|rel| rel.eq_ignore_ascii_case(wanted))
        });
        if is_next {
            return Some(target.to_string());
        }
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
            has_more: MoreFlag::IfPresent(JsonPath::parse("has_more").unwrap()),
            created_after_param: None,
            created_before_param: None,
            time_format: TimeFormat::Rfc3339,
            query: BTreeMap::new(),
            fields: BTreeMap::new(),
            auth: Auth::None,
            concurrency: 1,
            min_interval: None,
            retry: RetryPolicy {
                retries: 0,
                backoff: Duration::from_millis(1),
                timeout: Duration::from_secs(1),
                deadline: Duration::from_secs(1),
            },
            max_pages: 1,
            max_page_bytes: 1 << 20,
            max_objects: 100,
            sub_windows: 1,
            slack: 0,
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

    /// A cell is refused only for an object the listing keeps: not for a copy a later copy
    /// replaces, nor for an object created outside the window.
    #[test]
    fn only_kept_objects_inside_the_window_have_their_cells_checked() {
        let api = page_api();
        let page = br#"{"data": [
            {"external_id": "a", "created_at": "2026-11-01T00:00:00Z", "status": 1},
            {"external_id": "b", "created_at": "2026-11-01T00:00:01Z", "status": "live"},
            {"external_id": "a", "created_at": "2026-11-01T00:00:02Z", "status": "void"},
            {"external_id": "c", "created_at": "2026-11-02T00:00:00Z"}
        ]}"#;
        let to = crate::timestamp::parse("2026-11-01T12:00:00Z");
        let window = Window { from: None, to };
        let rows = parse_page(&api, page, window).unwrap();
        let ids = crate::cells::text_column(&rows, "external_id").unwrap();
        let statuses = crate::cells::text_column(&rows, "status").unwrap();
        assert_eq!(ids.iter().collect::<Vec<_>>(), [Some("b"), Some("a")]);
        assert_eq!(
            statuses.iter().collect::<Vec<_>>(),
            [Some("live"), Some("void")]
        );
        let err = parse_page(&api, page, Window::unbounded())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("page 1, object 4") && err.contains("no `status`"),
            "{err}"
        );
    }

    #[test]
    fn basic_auth_header() {
        let mut api = page_api();
        api.auth = Auth::Basic {
            user: "Aladdin".into(),
            password: Secret::new("open sesame".into()),
        };
        let headers = auth_headers(&api).unwrap();
        let value = &headers[AUTHORIZATION];
        assert_eq!(value, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(value.is_sensitive());
    }

    #[test]
    fn link_targets_and_pages() {
        let header = r#"<https://api.example/x?page=2>; rel="next", <https://api.example/x?page=5>; rel="last""#;
        assert_eq!(
            link_target(header, "last").as_deref(),
            Some("https://api.example/x?page=5")
        );
        let here = Url::parse("https://api.example/x?limit=3&page=5").unwrap();
        assert!(same_page(&here, "/x?page=5&limit=3"));
        assert!(!same_page(&here, "/x?page=4&limit=3"));
    }
}
