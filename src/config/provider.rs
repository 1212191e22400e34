//! `[provider]` with `url`: the provider's listing API, typed layer by layer.
//!
//! The keys of the table are read by [`RawListing`] (every listing), [`RawRetry`] (how hard
//! to try, shared with `[airflow]`'s API), the struct of the one pagination style that
//! `pagination` names ([`Style`]), and `[provider.auth]` by the struct of its `kind`
//! ([`AuthKind`]). What no layer reads is refused at its line, with the style or kind it
//! belongs to when it belongs to another.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::table::{Table, keys_of, tag, variants_of};
use super::{RawProvider, Source};

use crate::error::{Error, Result};
use crate::model::PROVIDER;
use crate::sources::provider_http::{
    Auth, JsonPath, MoreFlag, Pagination, ProviderApi, Secret, TimeFormat,
};
use crate::sources::retry::RetryPolicy;
use crate::timestamp::{self, parse_wait};

/// The keys every listing API has, whatever its pagination.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListing {
    /// `cursor`, `link`, `page`, `offset`, `stripe` or `relay`: which of [`Style`]'s
    /// structs reads the style's own keys.
    pagination: Option<String>,
    /// The page-size parameter (default `limit`; "" sends none) and its value (100).
    page_size_param: Option<String>,
    page_size: Option<u32>,
    /// The JSON path of the array of objects in a page's body (default `data`).
    items: Option<String>,
    /// The JSON path of the total object count, when the body has one.
    total: Option<String>,
    /// The JSON path of the boolean that says more pages follow (Stripe's `has_more`).
    has_more: Option<String>,
    created_after_param: Option<String>,
    created_before_param: Option<String>,
    /// `rfc3339` (default), `epoch_seconds` or `epoch_millis`.
    time_format: Option<String>,
    concurrency: Option<usize>,
    requests_per_second: Option<f64>,
    max_pages: Option<usize>,
    /// The largest page body, in bytes after any gzip decoding (default 64 MiB).
    max_page_bytes: Option<u64>,
    /// The most objects the listing may hold (default 10 million).
    max_objects: Option<usize>,
    /// Cursor-like styles: created-at slices listed concurrently (default 4 × concurrency).
    sub_windows: Option<usize>,
    /// Margin around the audited tries when listing (default 1h).
    slack: Option<String>,
}

/// How hard a source is tried: `[provider]` (a listing) and `[airflow]` (with `api`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    retries: Option<u32>,
    /// The first retry's wait, doubled for each further one, with jitter.
    backoff: Option<String>,
    /// One request.
    timeout: Option<String>,
    /// The whole read.
    deadline: Option<String>,
}

impl RawRetry {
    /// The policy, each key checked; absent keys take `defaults`.
    pub(super) fn policy(&self, defaults: RetryPolicy, table: &Table<'_>) -> Result<RetryPolicy> {
        let wait = |key: &str, value: &Option<String>, default: Duration| -> Result<Duration> {
            let Some(text) = value else {
                return Ok(default);
            };
            parse_wait(text).filter(|d| !d.is_zero()).ok_or_else(|| {
                table.error(
                    key,
                    format!("{key} = {text:?} is not a duration (use forms like 500ms, 30s, 10m)"),
                )
            })
        };
        Ok(RetryPolicy {
            retries: self.retries.unwrap_or(defaults.retries),
            backoff: wait("backoff", &self.backoff, defaults.backoff)?,
            timeout: wait("timeout", &self.timeout, defaults.timeout)?,
            deadline: wait("deadline", &self.deadline, defaults.deadline)?,
        })
    }
}

/// What `pagination` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Style {
    Cursor,
    Link,
    Page,
    Offset,
    Stripe,
    Relay,
}

/// cursor: an opaque token in the body, sent back as a parameter.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CursorKeys {
    /// The query parameter the cursor is sent back in (default `cursor`).
    cursor_param: Option<String>,
    /// The JSON path of the next cursor in a page's body (default `next_cursor`).
    next_cursor: Option<String>,
}

/// link: the next page's URL, in the body or in the `Link` header.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkKeys {
    /// The JSON path of the next page's URL in the body; absent: the `Link` header.
    next_url: Option<String>,
}

/// page: page numbers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageKeys {
    /// The page-number parameter (default `page`).
    page_param: Option<String>,
    /// The first page's number (default 1).
    first_page: Option<i64>,
}

/// offset: object offsets from 0.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetKeys {
    /// The offset parameter (default `offset`).
    offset_param: Option<String>,
}

/// stripe: `has_more`, and the last object's id sent back.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StripeKeys {
    /// The parameter the last object's id is sent back in (default `starting_after`).
    cursor_param: Option<String>,
}

/// relay: `pageInfo.hasNextPage` and `pageInfo.endCursor`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RelayKeys {
    /// The parameter the end cursor is sent back in (default `after`).
    cursor_param: Option<String>,
    /// The JSON path of `hasNextPage` (default `pageInfo.hasNextPage`).
    has_next_page: Option<String>,
    /// The JSON path of `endCursor` (default `pageInfo.endCursor`).
    end_cursor: Option<String>,
}

impl Style {
    /// The keys of the style's own struct.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Style::Cursor => keys_of::<CursorKeys>(),
            Style::Link => keys_of::<LinkKeys>(),
            Style::Page => keys_of::<PageKeys>(),
            Style::Offset => keys_of::<OffsetKeys>(),
            Style::Stripe => keys_of::<StripeKeys>(),
            Style::Relay => keys_of::<RelayKeys>(),
        }
    }

    /// Takes the style's own keys out of the table.
    fn read(self, table: &mut Table<'_>) -> Result<Pagination> {
        Ok(match self {
            Style::Cursor => {
                let keys: CursorKeys = table.take()?;
                Pagination::Cursor {
                    param: param(table, "cursor_param", keys.cursor_param, "cursor")?,
                    next: json_path(table, "next_cursor", keys.next_cursor, "next_cursor")?,
                }
            }
            Style::Link => {
                let keys: LinkKeys = table.take()?;
                Pagination::Link {
                    next: keys
                        .next_url
                        .map(|next| json_path(table, "next_url", Some(next), ""))
                        .transpose()?,
                }
            }
            Style::Page => {
                let keys: PageKeys = table.take()?;
                Pagination::Page {
                    param: param(table, "page_param", keys.page_param, "page")?,
                    first: keys.first_page.unwrap_or(1),
                }
            }
            Style::Offset => {
                let keys: OffsetKeys = table.take()?;
                Pagination::Offset {
                    param: param(table, "offset_param", keys.offset_param, "offset")?,
                }
            }
            Style::Stripe => {
                let keys: StripeKeys = table.take()?;
                Pagination::Stripe {
                    param: param(table, "cursor_param", keys.cursor_param, "starting_after")?,
                }
            }
            Style::Relay => {
                let keys: RelayKeys = table.take()?;
                Pagination::Relay {
                    param: param(table, "cursor_param", keys.cursor_param, "after")?,
                    has_next_page: json_path(
                        table,
                        "has_next_page",
                        keys.has_next_page,
                        "pageInfo.hasNextPage",
                    )?,
                    end_cursor: json_path(
                        table,
                        "end_cursor",
                        keys.end_cursor,
                        "pageInfo.endCursor",
                    )?,
                }
            }
        })
    }
}

/// `[provider.auth]`'s `kind`: which struct reads the kind's own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AuthKind {
    Bearer,
    Basic,
    Header,
}

/// `[provider.auth]`: the secret is read from the environment variable `env`, never the file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    /// `bearer`, `basic` or `header`.
    kind: String,
    env: String,
}

/// bearer: `Authorization: Bearer <secret>`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BearerKeys {}

/// basic: `Authorization: Basic base64(user:secret)`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BasicKeys {
    /// The user name (the password is in `env`).
    user: String,
}

/// header: `<header>: <secret>`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderKeys {
    /// The header's name, e.g. `X-Api-Key`.
    header: String,
}

impl AuthKind {
    /// The keys of the kind's own struct.
    fn keys(self) -> &'static [&'static str] {
        match self {
            AuthKind::Bearer => keys_of::<BearerKeys>(),
            AuthKind::Basic => keys_of::<BasicKeys>(),
            AuthKind::Header => keys_of::<HeaderKeys>(),
        }
    }
}

/// The values of `T` (a style or auth kind, by their serde names) whose struct has `key`.
fn owners_of<'de, T: Deserialize<'de>>(
    key: &str,
    keys: impl Fn(T) -> &'static [&'static str],
) -> Vec<&'static str> {
    variants_of::<T>()
        .iter()
        .copied()
        .filter(|name| tag::<T>(name).is_ok_and(|other| keys(other).contains(&key)))
        .collect()
}

/// The listing API `[provider]` names with `url`; `table` holds the keys [`RawProvider`] did
/// not take.
pub(super) fn listing(url: &str, mut table: Table<'_>) -> Result<Source> {
    let parsed = reqwest::Url::parse(url.trim())
        .map_err(|e| table.error("url", format!("url = {url:?} is not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(table.error(
            "url",
            format!("url = {url:?}: the listing is served over http or https"),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(table.error(
            "url",
            "url: put no credentials in the URL; use [provider.auth] with `env`",
        ));
    }
    if parsed.fragment().is_some() {
        return Err(table.error("url", format!("url = {url:?}: no `#` fragment, please")));
    }

    let auth = match table.sub_table("auth")? {
        None => Auth::None,
        Some(auth) => auth_of(auth)?,
    };
    // Fixed query parameters sent with every listing.
    let query = match table.sub_table("query")? {
        None => BTreeMap::new(),
        Some(query) => query.strings()?,
    };
    // Canonical column -> dotted JSON path in each object (default: the column's name).
    let fields = match table.sub_table("fields")? {
        None => BTreeMap::new(),
        Some(fields) => mapped_fields(&fields, fields.strings()?)?,
    };
    let keys: RawListing = table.take()?;
    let retry: RawRetry = table.take()?;
    let style_text = keys.pagination.as_deref().ok_or_else(|| {
        table.error(
            "url",
            format!(
                "the listing needs `pagination`: {}",
                names(variants_of::<Style>().iter().copied())
            ),
        )
    })?;
    let style: Style = tag(style_text).map_err(|message| {
        table.error(
            "pagination",
            format!("pagination = {style_text:?}: {message}"),
        )
    })?;
    let pagination = style.read(&mut table)?;
    if let Some(key) = table.leftover() {
        let owners = owners_of(key, Style::keys);
        return Err(if owners.is_empty() {
            unknown(&table, key, listing_keys(style))
        } else {
            table.error(
                key,
                format!(
                    "`{key}` does not apply to pagination = {style_text:?}: it is a key of {}",
                    names(owners)
                ),
            )
        });
    }

    let page_size = keys.page_size.unwrap_or(100);
    if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(table.error(
            "page_size",
            format!("page_size = {page_size}: use 1 to {MAX_PAGE_SIZE} objects a page"),
        ));
    }
    let page_size_param = match keys.page_size_param.as_deref().map(str::trim) {
        None => Some("limit".to_string()),
        Some("") => None,
        Some(param) => Some(param.to_string()),
    };
    let time_format = match &keys.time_format {
        None => TimeFormat::Rfc3339,
        Some(text) => TimeFormat::parse(text).ok_or_else(|| {
            table.error(
                "time_format",
                format!(
                    "time_format = {text:?}: use \"rfc3339\", \"epoch_seconds\" or \"epoch_millis\""
                ),
            )
        })?,
    };
    let created_after_param = keys
        .created_after_param
        .map(|value| param(&table, "created_after_param", Some(value), ""))
        .transpose()?;
    let created_before_param = keys
        .created_before_param
        .map(|value| param(&table, "created_before_param", Some(value), ""))
        .transpose()?;
    let total = keys
        .total
        .map(|value| json_path(&table, "total", Some(value), ""))
        .transpose()?;
    // Stripe's pages always say `has_more`; other styles' are read where a page has it.
    let has_more = match (keys.has_more, style) {
        (Some(path), _) => MoreFlag::Required(json_path(&table, "has_more", Some(path), "")?),
        (None, Style::Stripe) => {
            MoreFlag::Required(json_path(&table, "has_more", None, "has_more")?)
        }
        (None, _) => MoreFlag::IfPresent(json_path(&table, "has_more", None, "has_more")?),
    };

    let concurrency = keys.concurrency.unwrap_or(4);
    if !(1..=64).contains(&concurrency) {
        return Err(table.error(
            "concurrency",
            format!("concurrency = {concurrency}: use 1 to 64 requests in flight"),
        ));
    }
    let min_interval = match keys.requests_per_second {
        None => Some(Duration::from_millis(100)),
        // Below one request a day the listing would never end; Duration would overflow.
        Some(rate) if rate.is_finite() && rate >= 1.0 / 86_400.0 => {
            Some(Duration::from_secs_f64(1.0 / rate))
        }
        Some(rate) => {
            return Err(table.error(
                "requests_per_second",
                format!(
                    "requests_per_second = {rate}: give a number of at least 0.0000116 (one a day)"
                ),
            ));
        }
    };
    let at_least_one = |key: &str, value: usize| {
        if value == 0 {
            Err(table.error(key, format!("{key} must be at least 1")))
        } else {
            Ok(value)
        }
    };
    let max_pages = at_least_one("max_pages", keys.max_pages.unwrap_or(10_000))?;
    let max_page_bytes = keys.max_page_bytes.unwrap_or(64 << 20);
    if max_page_bytes < 1024 {
        return Err(table.error(
            "max_page_bytes",
            format!("max_page_bytes = {max_page_bytes}: a page needs at least 1024 bytes"),
        ));
    }
    let max_objects = at_least_one("max_objects", keys.max_objects.unwrap_or(10_000_000))?;
    let sub_windows = at_least_one("sub_windows", keys.sub_windows.unwrap_or(concurrency * 4))?;
    let slack = match &keys.slack {
        None => 3_600_000_000,
        Some(text) => timestamp::parse_duration(text).ok_or_else(|| {
            table.error(
                "slack",
                format!("slack = {text:?} is not a duration (e.g. 1h, 30m)"),
            )
        })?,
    };
    let retry = retry.policy(
        RetryPolicy {
            retries: 5,
            backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(30),
            deadline: Duration::from_secs(15 * 60),
        },
        &table,
    )?;
    let url = parsed.to_string();
    Ok(Source::Listing(Box::new(ProviderApi {
        shown: format!("provider listing {url}"),
        url,
        pagination,
        page_size_param,
        page_size,
        items: json_path(&table, "items", keys.items, "data")?,
        total,
        has_more,
        created_after_param,
        created_before_param,
        time_format,
        query,
        fields,
        auth,
        concurrency,
        min_interval,
        retry,
        max_pages,
        max_page_bytes,
        max_objects,
        sub_windows,
        slack,
    })))
}

/// `[provider.fields]`: each a canonical column, each path a dotted JSON path.
fn mapped_fields(
    table: &Table<'_>,
    given: BTreeMap<String, String>,
) -> Result<BTreeMap<String, JsonPath>> {
    let mut fields = BTreeMap::new();
    for (column, json) in given {
        if column == "raw" || !PROVIDER.iter().any(|spec| spec.name == column) {
            let known: Vec<_> = PROVIDER
                .iter()
                .map(|spec| spec.name)
                .filter(|name| *name != "raw")
                .collect();
            return Err(table.error(
                &column,
                format!(
                    "names `{column}`, which is not a mapped provider column (known: {}; `raw` is always the whole object)",
                    known.join(", ")
                ),
            ));
        }
        let parsed = JsonPath::parse(&json)
            .ok()
            .filter(|_| !json.trim().is_empty())
            .ok_or_else(|| {
                table.error(
                    &column,
                    format!("{column} = {json:?} is not a dotted JSON path"),
                )
            })?;
        fields.insert(column, parsed);
    }
    Ok(fields)
}

/// A `[provider]` with `snapshot`: `table`'s keys must all be [`RawProvider`]'s.
pub(super) fn snapshot(table: &Table<'_>) -> Result<()> {
    let Some(key) = table.leftover() else {
        return Ok(());
    };
    let listing = SUB_TABLES.contains(&key)
        || keys_of::<RawListing>().contains(&key)
        || keys_of::<RawRetry>().contains(&key)
        || !owners_of(key, Style::keys).is_empty();
    Err(if listing {
        table.error(
            key,
            format!("`{key}` applies to the listing API: it needs `url`, not `snapshot`"),
        )
    } else {
        unknown(table, key, keys_of::<RawProvider>().to_vec())
    })
}

/// The tables inside `[provider]` a listing reads.
const SUB_TABLES: [&str; 3] = ["auth", "query", "fields"];

/// Every key a listing of `style` takes.
fn listing_keys(style: Style) -> Vec<&'static str> {
    let mut keys: Vec<&str> = [
        keys_of::<RawProvider>(),
        keys_of::<RawListing>(),
        keys_of::<RawRetry>(),
        style.keys(),
        &SUB_TABLES,
    ]
    .concat();
    keys.retain(|key| *key != "snapshot");
    keys
}

fn unknown(table: &Table<'_>, key: &str, known: Vec<&str>) -> Error {
    table.error(
        key,
        format!("unknown key `{key}` (known: {})", known.join(", ")),
    )
}

/// `[provider.auth]`: the kind's keys, and the secret from the environment.
fn auth_of(mut table: Table<'_>) -> Result<Auth> {
    let raw: RawAuth = table.take()?;
    let kind: AuthKind = tag(&raw.kind)
        .map_err(|message| table.error("kind", format!("kind = {:?}: {message}", raw.kind)))?;
    let auth = match kind {
        AuthKind::Bearer => {
            let _: BearerKeys = table.take()?;
            None
        }
        AuthKind::Basic => Some(Err(table.take::<BasicKeys>()?.user)),
        AuthKind::Header => Some(Ok(table.take::<HeaderKeys>()?.header)),
    };
    if let Some(key) = table.leftover() {
        let owners = owners_of(key, AuthKind::keys);
        return Err(if owners.is_empty() {
            unknown(&table, key, [keys_of::<RawAuth>(), kind.keys()].concat())
        } else {
            table.error(
                key,
                format!(
                    "`{key}` applies to kind = {}, not {:?}",
                    names(owners),
                    raw.kind
                ),
            )
        });
    }
    let secret = std::env::var(&raw.env)
        .ok()
        .filter(|value| !value.is_empty())
        .map(Secret::new)
        .ok_or_else(|| {
            table.error(
                "env",
                format!("env names {}, which is not set (or empty)", raw.env),
            )
        })?;
    Ok(match auth {
        None => Auth::Bearer(secret),
        Some(Err(user)) => Auth::Basic {
            user,
            password: secret,
        },
        Some(Ok(header)) => {
            if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(table.error(
                    "header",
                    format!("header = {header:?} is not a header name"),
                ));
            }
            Auth::Header {
                name: header,
                value: secret,
            }
        }
    })
}

/// `"a"`, `"a" or "b"`, `"a", "b" or "c"`.
fn names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.into_iter().map(|name| format!("{name:?}")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

fn json_path(
    table: &Table<'_>,
    key: &str,
    value: Option<String>,
    default: &str,
) -> Result<JsonPath> {
    JsonPath::parse(value.as_deref().unwrap_or(default))
        .map_err(|message| table.error(key, format!("{key}: {message}")))
}

/// A query parameter's name: not empty.
fn param(table: &Table<'_>, key: &str, value: Option<String>, default: &str) -> Result<String> {
    let value = value.as_deref().unwrap_or(default).trim().to_string();
    if value.is_empty() {
        return Err(table.error(key, format!("`{key}` is empty")));
    }
    Ok(value)
}

/// The most objects a page may be asked for: beyond it one page is a bulk export, and its
/// body would pass any sensible `max_page_bytes`.
const MAX_PAGE_SIZE: u32 = 10_000;
