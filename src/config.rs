//! The TOML configuration, validated up front into typed settings.
//!
//! Every error names the file, the key and the line: `toml` reports spans for syntax and
//! unknown fields; the checks here find the key's line themselves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::keys::KeyTemplate;
use crate::model::{JOURNAL, PHASES, PROVIDER};
use crate::sources::airflow_api::{AirflowApi, ApiVersion};
use crate::sources::database::Database;
use crate::sources::provider_http::{self, JsonPath, Pagination, ProviderApi, TimeFormat};
use crate::timestamp;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    airflow: Option<RawSource>,
    journal: Option<RawJournal>,
    provider: Option<RawProvider>,
    #[serde(default)]
    operation: Vec<RawOperation>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    snapshot: Option<PathBuf>,
    /// A database URL, sqlx's or Airflow's `sql_alchemy_conn` form.
    url: Option<String>,
    /// The environment variable holding the database or API password (kept out of the file).
    password_env: Option<String>,
    /// The Airflow REST API's base URL (`http://host:8080`), instead of the database.
    api: Option<String>,
    /// `v1` (Airflow 2) or `v2` (Airflow 3); detected from `/api/v*/version` when absent.
    api_version: Option<String>,
    /// The API user (basic auth on v1, `POST /auth/token` on v2).
    username: Option<String>,
    /// The environment variable holding a JWT for `/api/v2`, instead of a password.
    token_env: Option<String>,
    /// Entries per API page (`limit`), at most 100.
    page_size: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJournal {
    snapshot: Option<PathBuf>,
    /// A database URL holding the journal table (sqlx or SQLAlchemy form).
    url: Option<String>,
    /// The journal table, with `url`.
    table: Option<String>,
    password_env: Option<String>,
    #[serde(default)]
    columns: BTreeMap<String, String>,
    phases: Option<BTreeMap<String, Vec<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    snapshot: Option<PathBuf>,
    /// The provider's listing endpoint (`http://host/v1/exports`), instead of a snapshot.
    url: Option<String>,
    /// `cursor`, `link`, `page` or `offset`.
    pagination: Option<String>,
    /// cursor: the query parameter the cursor is sent back in (default `cursor`).
    cursor_param: Option<String>,
    /// cursor: the JSON path of the next cursor in a page's body (default `next_cursor`).
    next_cursor: Option<String>,
    /// link: the JSON path of the next page's URL in the body; absent: the `Link` header.
    next_url: Option<String>,
    /// page: the page-number parameter (default `page`) and the first page's number (1).
    page_param: Option<String>,
    first_page: Option<i64>,
    /// offset: the offset parameter (default `offset`).
    offset_param: Option<String>,
    /// The page-size parameter (default `limit`; "" sends none) and its value (100).
    page_size_param: Option<String>,
    page_size: Option<u32>,
    /// The JSON path of the array of objects in a page's body (default `data`).
    items: Option<String>,
    /// page/offset: the JSON path of the total object count, when the body has one.
    total: Option<String>,
    created_after_param: Option<String>,
    created_before_param: Option<String>,
    /// `rfc3339` (default), `epoch_seconds` or `epoch_millis`.
    time_format: Option<String>,
    /// Fixed query parameters sent with every listing.
    #[serde(default)]
    query: BTreeMap<String, String>,
    /// Canonical column -> dotted JSON path in each object (default: the column's name).
    #[serde(default)]
    fields: BTreeMap<String, String>,
    auth: Option<RawAuth>,
    concurrency: Option<usize>,
    requests_per_second: Option<f64>,
    retries: Option<u32>,
    timeout: Option<String>,
    deadline: Option<String>,
    max_pages: Option<usize>,
    /// The largest page body, in bytes after any gzip decoding (default 64 MiB).
    max_page_bytes: Option<u64>,
    /// The most objects the listing may hold (default 10 million).
    max_objects: Option<usize>,
    /// cursor/link: created-at slices listed concurrently (default 4 × concurrency).
    sub_windows: Option<usize>,
    /// Margin around the audited tries when listing (default 1h).
    slack: Option<String>,
    /// The first retry's wait (default 500ms); doubled for each further one, with jitter.
    backoff: Option<String>,
    key_ttl: Option<String>,
    #[serde(default = "default_void_statuses")]
    void_statuses: Vec<String>,
    #[serde(default)]
    replay: Replay,
}

/// `[provider.auth]`: the secret is read from the environment variable `env`, never the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    /// `bearer`, `basic` or `header`.
    kind: String,
    env: String,
    /// header: the header's name, e.g. `X-Api-Key`.
    header: Option<String>,
    /// basic: the user name (the password is in `env`).
    user: Option<String>,
}

fn default_void_statuses() -> Vec<String> {
    ["cancelled", "canceled", "voided", "deleted"]
        .map(String::from)
        .to_vec()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperation {
    name: Option<String>,
    dag_id: String,
    task_id: String,
    key: Option<String>,
    /// Overrides `[provider] key_ttl` for this operation (providers differ by endpoint).
    key_ttl: Option<String>,
}

/// What a provider returns when a key it still remembers is sent again (SPEC §3): `ttl-risk`
/// and K002 say what a re-run gets back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Replay {
    /// The first response, frozen, whatever happened to the object since.
    #[default]
    Frozen,
    /// The object with its latest status.
    Latest,
    /// The object's current state.
    Current,
    /// A changed body under the key is refused (HTTP 422, as Stripe does); the same body gets
    /// the first response.
    Reject,
}

/// Where a canonical table comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Snapshot(PathBuf),
    /// Airflow's metadata database.
    Database(Database),
    /// Airflow's REST API.
    Api(AirflowApi),
    /// The provider's paginated listing API.
    Listing(Box<ProviderApi>),
}

impl Source {
    /// The margin a provider listing is configured with.
    pub fn listing_slack(&self) -> Option<i64> {
        match self {
            Source::Listing(api) => Some(api.slack),
            _ => None,
        }
    }

    /// The source as reports name it: never with a password.
    pub fn describe(&self) -> String {
        match self {
            Source::Snapshot(path) => format!("snapshot {}", path.display()),
            Source::Database(database) => database.shown.clone(),
            Source::Api(api) => api.shown.clone(),
            Source::Listing(api) => api.shown.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct JournalSettings {
    pub source: Source,
    /// The journal table, for a database source.
    pub table: Option<String>,
    /// canonical column name -> the journal's own column name.
    pub columns: BTreeMap<String, String>,
    /// the journal's own phase value -> canonical phase.
    pub phases: BTreeMap<String, String>,
}

impl JournalSettings {
    /// The journal's own name for a canonical column.
    pub fn column<'a>(&'a self, canonical: &'a str) -> &'a str {
        self.columns
            .get(canonical)
            .map(String::as_str)
            .unwrap_or(canonical)
    }
}

#[derive(Debug, Clone)]
pub struct ProviderSettings {
    pub source: Source,
    /// How long the provider remembers an idempotency key, in microseconds.
    pub key_ttl: Option<i64>,
    /// Where the TTL comes from: a preset with its public source, or the configured duration.
    pub key_ttl_source: Option<String>,
    pub void_statuses: Vec<String>,
    pub replay: Replay,
}

/// An `[[operation]]`: which task's tries cause a side effect, and how its key is derived.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub dag_id: String,
    pub task_id: String,
    pub key: Option<KeyTemplate>,
    pub key_ttl: Option<i64>,
}

impl Operation {
    pub fn matches(&self, dag_id: &str, task_id: &str) -> bool {
        glob_match(&self.dag_id, dag_id) && glob_match(&self.task_id, task_id)
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub attempts: Source,
    pub journal: JournalSettings,
    pub provider: ProviderSettings,
    pub operations: Vec<Operation>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| Error::io(path.display().to_string(), err))?;
        Config::parse(&text, path)
    }

    /// Parses config text; relative paths are taken from `path`'s folder.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let shown = path.display().to_string();
        let raw: RawConfig = toml::from_str(text).map_err(|err| {
            let line = err
                .span()
                .map(|span| format!("line {}: ", line_of(text, span.start)))
                .unwrap_or_default();
            Error::config(&shown, format!("{line}{}", err.message()))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let at = Locator { text, path: &shown };

        let airflow = raw.airflow.ok_or_else(|| {
            Error::config(
                &shown,
                "missing [airflow]: where to read Airflow's task tries",
            )
        })?;
        let journal = raw.journal.ok_or_else(|| {
            Error::config(
                &shown,
                "missing [journal]: where to read the operation journal",
            )
        })?;
        let provider = raw.provider.ok_or_else(|| {
            Error::config(
                &shown,
                "missing [provider]: where to read the provider's objects",
            )
        })?;

        for (canonical, own) in &journal.columns {
            if !JOURNAL.iter().any(|spec| spec.name == canonical) {
                let known: Vec<_> = JOURNAL.iter().map(|spec| spec.name).collect();
                return Err(at.error(canonical, format!(
                    "[journal.columns] names `{canonical}`, which is not a journal column (known: {})",
                    known.join(", ")
                )));
            }
            if own.trim().is_empty() {
                return Err(at.error(
                    canonical,
                    format!("[journal.columns] `{canonical}` maps to an empty name"),
                ));
            }
            if own.chars().any(char::is_control) {
                return Err(at.error(
                    canonical,
                    format!("[journal.columns] `{canonical}` = {own:?} holds a control character"),
                ));
            }
        }
        // Table and column names go into repair scripts as quoted identifiers; a NUL would end
        // the statement early in SQLite's parser, so no control character is accepted.
        if let Some(table) = &journal.table
            && table.chars().any(char::is_control)
        {
            return Err(at.error(
                "table",
                format!("[journal] table = {table:?} holds a control character"),
            ));
        }
        let phases = phase_mapping(journal.phases.as_ref(), &at)?;

        let duration = |text: &Option<String>, table: &str| -> Result<Option<i64>> {
            match text {
                None => Ok(None),
                Some(text) => Ok(Some(crate::retention::KeyTtl::parse(text).map(|ttl| ttl.micros).ok_or_else(|| {
                    at.error(
                        "key_ttl",
                        format!(
                            "{table} key_ttl = {text:?} is neither a duration (24h, 7d, 90d, 6h30m) nor a provider preset ({})",
                            crate::retention::preset_names()
                        ),
                    )
                })?)),
            }
        };
        let key_ttl = duration(&provider.key_ttl, "[provider]")?;
        let key_ttl_source = provider
            .key_ttl
            .as_deref()
            .and_then(crate::retention::KeyTtl::parse)
            .map(|ttl| ttl.source);

        if raw.operation.is_empty() {
            return Err(Error::config(
                &shown,
                "no [[operation]]: name at least one dag_id/task_id whose tries cause a side effect",
            ));
        }
        let mut operations = Vec::with_capacity(raw.operation.len());
        for (index, op) in raw.operation.into_iter().enumerate() {
            let name = op
                .name
                .clone()
                .unwrap_or_else(|| format!("{}.{}", op.dag_id, op.task_id));
            if operations
                .iter()
                .any(|known: &Operation| known.name == name)
            {
                return Err(at.error(
                    "name",
                    format!(
                        "[[operation]] #{}: the name `{name}` is used twice",
                        index + 1
                    ),
                ));
            }
            for (field, value) in [("dag_id", &op.dag_id), ("task_id", &op.task_id)] {
                if value.trim().is_empty() {
                    return Err(at.error(
                        field,
                        format!("[[operation]] #{}: `{field}` is empty", index + 1),
                    ));
                }
            }
            let key = match &op.key {
                None => None,
                Some(template) => Some(KeyTemplate::parse(template).map_err(|message| {
                    at.error(
                        "key",
                        format!("[[operation]] `{name}`: key template {template:?}: {message}"),
                    )
                })?),
            };
            let key_ttl = duration(&op.key_ttl, "[[operation]]")?;
            operations.push(Operation {
                name,
                dag_id: op.dag_id,
                task_id: op.task_id,
                key,
                key_ttl,
            });
        }

        let env = |key: &str, name: &Option<String>| -> Result<Option<String>> {
            match name {
                None => Ok(None),
                Some(name) => std::env::var(name).map(Some).map_err(|_| {
                    at.error(
                        key,
                        format!("[airflow] {key} names {name}, which is not set"),
                    )
                }),
            }
        };
        if airflow.api.is_none() {
            for (key, given) in [
                ("api_version", airflow.api_version.is_some()),
                ("username", airflow.username.is_some()),
                ("token_env", airflow.token_env.is_some()),
                ("page_size", airflow.page_size.is_some()),
            ] {
                if given {
                    return Err(at.error(
                        key,
                        format!("[airflow] `{key}` applies to the REST API: it needs `api`"),
                    ));
                }
            }
        }
        let attempts = match (airflow.snapshot, airflow.url, airflow.api) {
            (Some(snapshot), None, None) => Source::Snapshot(base.join(snapshot)),
            (None, Some(url), None) => {
                let password = env("password_env", &airflow.password_env)?;
                Source::Database(
                    Database::parse(&url, base, password)
                        .map_err(|message| at.error("url", format!("[airflow] url: {message}")))?,
                )
            }
            (None, None, Some(api)) => {
                let version = match &airflow.api_version {
                    None => None,
                    Some(text) => Some(ApiVersion::parse(text).ok_or_else(|| {
                        at.error(
                            "api_version",
                            format!("[airflow] api_version = {text:?}: use \"v1\" (Airflow 2) or \"v2\" (Airflow 3)"),
                        )
                    })?),
                };
                let password = env("password_env", &airflow.password_env)?;
                let token = env("token_env", &airflow.token_env)?;
                Source::Api(
                    AirflowApi::new(
                        &api,
                        version,
                        airflow.username,
                        password,
                        token,
                        airflow.page_size,
                    )
                    .map_err(|message| at.error("api", format!("[airflow] api: {message}")))?,
                )
            }
            _ => {
                return Err(Error::config(
                    &shown,
                    "[airflow] needs exactly one of `snapshot` (a file), `url` (the metadata database) or `api` (the REST API)",
                ));
            }
        };

        let journal_source = match (journal.snapshot, &journal.url, &journal.table) {
            (Some(snapshot), None, None) => Source::Snapshot(base.join(snapshot)),
            (None, Some(url), Some(_)) => {
                let password = match &journal.password_env {
                    None => None,
                    Some(name) => Some(std::env::var(name).map_err(|_| {
                        at.error(
                            "password_env",
                            format!("[journal] password_env names {name}, which is not set"),
                        )
                    })?),
                };
                Source::Database(
                    Database::parse(url, base, password)
                        .map_err(|message| at.error("url", format!("[journal] url: {message}")))?,
                )
            }
            (None, Some(_), None) => {
                return Err(at.error(
                    "url",
                    "[journal] url needs `table`, the journal table's name".into(),
                ));
            }
            _ => {
                return Err(Error::config(
                    &shown,
                    "[journal] needs exactly one of `snapshot` (a file) or `url` with `table` (a database)",
                ));
            }
        };

        Ok(Config {
            path: path.to_path_buf(),
            attempts,
            journal: JournalSettings {
                source: journal_source,
                table: journal.table,
                columns: journal.columns,
                phases,
            },
            provider: ProviderSettings {
                source: provider_source(&provider, base, &at)?,
                key_ttl,
                key_ttl_source,
                void_statuses: provider.void_statuses,
                replay: provider.replay,
            },
            operations,
        })
    }

    /// The operation a task belongs to: the first `[[operation]]` whose globs match.
    pub fn operation_for(&self, dag_id: &str, task_id: &str) -> Option<&Operation> {
        self.operations
            .iter()
            .find(|op| op.matches(dag_id, task_id))
    }
}

/// `[provider]`: a snapshot file, or the listing API with its pagination, mapping, auth and
/// politeness, each key checked against the pagination style it belongs to.
fn provider_source(raw: &RawProvider, base: &Path, at: &Locator<'_>) -> Result<Source> {
    let table = "provider";
    let err = |key: &str, message: String| at.error_in(table, key, format!("[provider] {message}"));
    let listing_keys: [(&str, bool); 28] = [
        ("pagination", raw.pagination.is_some()),
        ("cursor_param", raw.cursor_param.is_some()),
        ("next_cursor", raw.next_cursor.is_some()),
        ("next_url", raw.next_url.is_some()),
        ("page_param", raw.page_param.is_some()),
        ("first_page", raw.first_page.is_some()),
        ("offset_param", raw.offset_param.is_some()),
        ("page_size_param", raw.page_size_param.is_some()),
        ("page_size", raw.page_size.is_some()),
        ("items", raw.items.is_some()),
        ("total", raw.total.is_some()),
        ("created_after_param", raw.created_after_param.is_some()),
        ("created_before_param", raw.created_before_param.is_some()),
        ("time_format", raw.time_format.is_some()),
        ("query", !raw.query.is_empty()),
        ("fields", !raw.fields.is_empty()),
        ("auth", raw.auth.is_some()),
        ("concurrency", raw.concurrency.is_some()),
        ("requests_per_second", raw.requests_per_second.is_some()),
        ("retries", raw.retries.is_some()),
        ("timeout", raw.timeout.is_some()),
        ("deadline", raw.deadline.is_some()),
        ("max_pages", raw.max_pages.is_some()),
        ("max_page_bytes", raw.max_page_bytes.is_some()),
        ("max_objects", raw.max_objects.is_some()),
        ("sub_windows", raw.sub_windows.is_some()),
        ("slack", raw.slack.is_some()),
        ("backoff", raw.backoff.is_some()),
    ];
    let url = match (&raw.snapshot, &raw.url) {
        (Some(snapshot), None) => {
            if let Some((key, _)) = listing_keys.iter().find(|(_, given)| *given) {
                return Err(err(
                    key,
                    format!("`{key}` applies to the listing API: it needs `url`, not `snapshot`"),
                ));
            }
            return Ok(Source::Snapshot(base.join(snapshot)));
        }
        (None, Some(url)) => url,
        _ => {
            return Err(Error::config(
                at.path,
                "[provider] needs exactly one of `snapshot` (a file) or `url` (the provider's listing API)",
            ));
        }
    };

    let parsed = reqwest::Url::parse(url.trim())
        .map_err(|e| err("url", format!("url = {url:?} is not a URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(err(
            "url",
            format!("url = {url:?}: the listing is served over http or https"),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(err(
            "url",
            "url: put no credentials in the URL; use [provider.auth] with `env`".into(),
        ));
    }
    if parsed.fragment().is_some() {
        return Err(err(
            "url",
            format!("url = {url:?}: no `#` fragment, please"),
        ));
    }

    let path = |key: &str, value: &Option<String>, default: &str| -> Result<JsonPath> {
        JsonPath::parse(value.as_deref().unwrap_or(default))
            .map_err(|message| err(key, format!("{key}: {message}")))
    };
    let name = |key: &str, value: &Option<String>, default: &str| -> Result<String> {
        let value = value.as_deref().unwrap_or(default).trim().to_string();
        if value.is_empty() {
            return Err(err(key, format!("`{key}` is empty")));
        }
        Ok(value)
    };
    let style = raw.pagination.as_deref().ok_or_else(|| {
        err(
            "url",
            "the listing needs `pagination`: \"cursor\", \"link\", \"page\" or \"offset\"".into(),
        )
    })?;
    let owned: &[&str] = match style {
        "cursor" => &["cursor_param", "next_cursor"],
        "link" => &["next_url"],
        "page" => &["page_param", "first_page", "total"],
        "offset" => &["offset_param", "total"],
        other => {
            return Err(err(
                "pagination",
                format!("pagination = {other:?}: use \"cursor\", \"link\", \"page\" or \"offset\""),
            ));
        }
    };
    for (key, given) in &listing_keys[1..7] {
        if *given && !owned.contains(key) {
            return Err(err(
                key,
                format!("`{key}` does not apply to pagination = {style:?}"),
            ));
        }
    }
    if raw.total.is_some() && !owned.contains(&"total") {
        return Err(err(
            "total",
            format!("`total` applies to page and offset listings, not {style:?}"),
        ));
    }
    let pagination = match style {
        "cursor" => Pagination::Cursor {
            param: name("cursor_param", &raw.cursor_param, "cursor")?,
            next: path("next_cursor", &raw.next_cursor, "next_cursor")?,
        },
        "link" => Pagination::Link {
            next: match &raw.next_url {
                None => None,
                Some(_) => Some(path("next_url", &raw.next_url, "")?),
            },
        },
        "page" => Pagination::Page {
            param: name("page_param", &raw.page_param, "page")?,
            first: raw.first_page.unwrap_or(1),
        },
        _ => Pagination::Offset {
            param: name("offset_param", &raw.offset_param, "offset")?,
        },
    };

    let page_size = raw.page_size.unwrap_or(100);
    if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(err(
            "page_size",
            format!("page_size = {page_size}: use 1 to {MAX_PAGE_SIZE} objects a page"),
        ));
    }
    let page_size_param = match raw.page_size_param.as_deref().map(str::trim) {
        None => Some("limit".to_string()),
        Some("") => None,
        Some(param) => Some(param.to_string()),
    };
    let time_format = match &raw.time_format {
        None => TimeFormat::Rfc3339,
        Some(text) => TimeFormat::parse(text).ok_or_else(|| {
            err(
                "time_format",
                format!(
                    "time_format = {text:?}: use \"rfc3339\", \"epoch_seconds\" or \"epoch_millis\""
                ),
            )
        })?,
    };
    let created_after_param = match &raw.created_after_param {
        None => None,
        value => Some(name("created_after_param", value, "")?),
    };
    let created_before_param = match &raw.created_before_param {
        None => None,
        value => Some(name("created_before_param", value, "")?),
    };

    let mut fields = BTreeMap::new();
    for (column, json_path) in &raw.fields {
        if column == "raw" || !PROVIDER.iter().any(|spec| spec.name == column) {
            let known: Vec<_> = PROVIDER
                .iter()
                .map(|spec| spec.name)
                .filter(|name| *name != "raw")
                .collect();
            return Err(at.error_in(
                "provider.fields",
                column,
                format!(
                    "[provider.fields] names `{column}`, which is not a mapped provider column (known: {}; `raw` is always the whole object)",
                    known.join(", ")
                ),
            ));
        }
        let parsed = JsonPath::parse(json_path)
            .ok()
            .filter(|_| !json_path.trim().is_empty())
            .ok_or_else(|| {
                at.error_in(
                    "provider.fields",
                    column,
                    format!("[provider.fields] {column} = {json_path:?} is not a dotted JSON path"),
                )
            })?;
        fields.insert(column.clone(), parsed);
    }

    let auth = match &raw.auth {
        None => provider_http::Auth::None,
        Some(auth) => {
            let at_auth = |key: &str, message: String| {
                at.error_in("provider.auth", key, format!("[provider.auth] {message}"))
            };
            let secret = std::env::var(&auth.env)
                .ok()
                .filter(|value| !value.is_empty())
                .map(provider_http::Secret::new)
                .ok_or_else(|| {
                    at_auth(
                        "env",
                        format!("env names {}, which is not set (or empty)", auth.env),
                    )
                })?;
            match auth.kind.as_str() {
                "bearer" | "basic" | "header" => {}
                other => {
                    return Err(at_auth(
                        "kind",
                        format!("kind = {other:?}: use \"bearer\", \"basic\" or \"header\""),
                    ));
                }
            }
            if auth.header.is_some() && auth.kind != "header" {
                return Err(at_auth(
                    "header",
                    "`header` applies to kind = \"header\"".into(),
                ));
            }
            if auth.user.is_some() && auth.kind != "basic" {
                return Err(at_auth("user", "`user` applies to kind = \"basic\"".into()));
            }
            match auth.kind.as_str() {
                "bearer" => provider_http::Auth::Bearer(secret),
                "basic" => provider_http::Auth::Basic {
                    user: auth
                        .user
                        .clone()
                        .ok_or_else(|| at_auth("kind", "kind = \"basic\" needs `user`".into()))?,
                    password: secret,
                },
                _ => {
                    let header = auth.header.clone().ok_or_else(|| {
                        at_auth(
                            "kind",
                            "kind = \"header\" needs `header`, the header's name (e.g. X-Api-Key)"
                                .into(),
                        )
                    })?;
                    if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
                        return Err(at_auth(
                            "header",
                            format!("header = {header:?} is not a header name"),
                        ));
                    }
                    provider_http::Auth::Header {
                        name: header,
                        value: secret,
                    }
                }
            }
        }
    };

    let concurrency = raw.concurrency.unwrap_or(4);
    if !(1..=64).contains(&concurrency) {
        return Err(err(
            "concurrency",
            format!("concurrency = {concurrency}: use 1 to 64 requests in flight"),
        ));
    }
    let min_interval = match raw.requests_per_second {
        None => Some(Duration::from_millis(100)),
        // Below one request a day the listing would never end; Duration would overflow.
        Some(rate) if rate.is_finite() && rate >= 1.0 / 86_400.0 => {
            Some(Duration::from_secs_f64(1.0 / rate))
        }
        Some(rate) => {
            return Err(err(
                "requests_per_second",
                format!(
                    "requests_per_second = {rate}: give a number of at least 0.0000116 (one a day)"
                ),
            ));
        }
    };
    let wait = |key: &str, value: &Option<String>, default: &str| -> Result<Duration> {
        let text = value.as_deref().unwrap_or(default);
        wait_duration(text).filter(|d| !d.is_zero()).ok_or_else(|| {
            err(
                key,
                format!("{key} = {text:?} is not a duration (use forms like 500ms, 30s, 10m)"),
            )
        })
    };
    let max_pages = raw.max_pages.unwrap_or(10_000);
    if max_pages == 0 {
        return Err(err("max_pages", "max_pages must be at least 1".into()));
    }
    let max_page_bytes = raw.max_page_bytes.unwrap_or(64 << 20);
    if max_page_bytes < 1024 {
        return Err(err(
            "max_page_bytes",
            format!("max_page_bytes = {max_page_bytes}: a page needs at least 1024 bytes"),
        ));
    }
    let max_objects = raw.max_objects.unwrap_or(10_000_000);
    if max_objects == 0 {
        return Err(err("max_objects", "max_objects must be at least 1".into()));
    }
    let sub_windows = raw.sub_windows.unwrap_or(concurrency * 4);
    if sub_windows == 0 {
        return Err(err("sub_windows", "sub_windows must be at least 1".into()));
    }
    let slack = match &raw.slack {
        None => 3_600_000_000,
        Some(text) => timestamp::parse_duration(text).ok_or_else(|| {
            err(
                "slack",
                format!("slack = {text:?} is not a duration (e.g. 1h, 30m)"),
            )
        })?,
    };
    let url = parsed.to_string();
    Ok(Source::Listing(Box::new(ProviderApi {
        shown: format!("provider listing {url}"),
        url,
        pagination,
        page_size_param,
        page_size,
        items: path("items", &raw.items, "data")?,
        total: match &raw.total {
            None => None,
            Some(_) => Some(path("total", &raw.total, "")?),
        },
        created_after_param,
        created_before_param,
        time_format,
        query: raw.query.clone(),
        fields,
        auth,
        concurrency,
        min_interval,
        retries: raw.retries.unwrap_or(5),
        timeout: wait("timeout", &raw.timeout, "30s")?,
        deadline: wait("deadline", &raw.deadline, "15m")?,
        max_pages,
        max_page_bytes,
        max_objects,
        sub_windows,
        slack,
        backoff: wait("backoff", &raw.backoff, "500ms")?,
    })))
}

/// The most objects a page may be asked for: beyond it one page is a bulk export, and its
/// body would pass any sensible `max_page_bytes`.
const MAX_PAGE_SIZE: u32 = 10_000;

/// `500ms`, or any duration [`timestamp::parse_duration`] reads (`30s`, `10m`, `1h`).
fn wait_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Some(millis) = text.strip_suffix("ms") {
        return millis.trim().parse::<u64>().ok().map(Duration::from_millis);
    }
    let micros = timestamp::parse_duration(text)?;
    u64::try_from(micros).ok().map(Duration::from_micros)
}

/// Builds "own value -> canonical phase"; without `[journal.phases]` the canonical names map
/// to themselves.
fn phase_mapping(
    phases: Option<&BTreeMap<String, Vec<String>>>,
    at: &Locator<'_>,
) -> Result<BTreeMap<String, String>> {
    let mut mapping = BTreeMap::new();
    let Some(phases) = phases else {
        for phase in PHASES {
            mapping.insert(phase.to_string(), phase.to_string());
        }
        return Ok(mapping);
    };
    for (canonical, values) in phases {
        if !PHASES.contains(&canonical.as_str()) {
            return Err(at.error(
                canonical,
                format!(
                    "[journal.phases] names `{canonical}`, which is not a phase (known: {})",
                    PHASES.join(", ")
                ),
            ));
        }
        for value in values {
            if let Some(previous) = mapping.insert(value.clone(), canonical.clone()) {
                return Err(at.error(
                    canonical,
                    format!(
                        "[journal.phases] maps {value:?} to both `{previous}` and `{canonical}`"
                    ),
                ));
            }
        }
    }
    for required in ["intent", "committed"] {
        if !mapping.values().any(|phase| phase == required) {
            return Err(at.error(
                "phases",
                format!("[journal.phases] gives no value for `{required}`; the rules need it"),
            ));
        }
    }
    Ok(mapping)
}

/// Names the line a key is set on, for checks that run after parsing.
struct Locator<'a> {
    text: &'a str,
    path: &'a str,
}

impl Locator<'_> {
    /// Like [`Locator::error`], looking for the key inside `[table]` first: keys such as
    /// `url` appear in several tables.
    fn error_in(&self, table: &str, key: &str, message: String) -> Error {
        let header = format!("[{table}]");
        let lines: Vec<&str> = self.text.lines().collect();
        let found = lines
            .iter()
            .position(|line| line.trim() == header)
            .and_then(|start| {
                lines[start + 1..]
                    .iter()
                    .take_while(|line| !line.trim_start().starts_with('['))
                    .position(|line| {
                        let line = line.trim_start();
                        line.starts_with(key) && line[key.len()..].trim_start().starts_with('=')
                    })
                    .map(|offset| start + 1 + offset)
            });
        match found {
            Some(index) => Error::config(self.path, format!("line {}: {message}", index + 1)),
            None => self.error(key, message),
        }
    }

    fn error(&self, key: &str, message: String) -> Error {
        let line = self.text.lines().position(|line| {
            let line = line.trim_start();
            line.starts_with(key) && line[key.len()..].trim_start().starts_with('=')
                || line.starts_with(&format!("\"{key}\""))
                || line.starts_with(&format!("[journal.{key}]"))
        });
        match line {
            Some(index) => Error::config(self.path, format!("line {}: {message}", index + 1)),
            None => Error::config(self.path, message),
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

/// `*` matches any run of characters, `?` one character; everything else is literal.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|ch| *ch == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[airflow]
snapshot = "attempts.csv"
[journal]
snapshot = "journal.csv"
[provider]
snapshot = "provider.csv"
key_ttl = "24h"
[[operation]]
dag_id = "orders_*"
task_id = "export"
key = "orders:{interval_start:%Y-%m-%d}"
"#;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/etc/onceonly/onceonly.toml"))
    }

    #[test]
    fn minimal_config_resolves_paths_next_to_the_file() {
        let config = parse(MINIMAL).unwrap();
        assert_eq!(
            config.attempts,
            Source::Snapshot("/etc/onceonly/attempts.csv".into())
        );
        assert_eq!(config.provider.key_ttl, Some(86_400_000_000));
        assert_eq!(config.operations[0].name, "orders_*.export");
        assert_eq!(
            config.journal.phases.get("committed").map(String::as_str),
            Some("committed")
        );
    }

    #[test]
    fn unknown_field_names_field_and_line() {
        let text = MINIMAL.replace("key_ttl = \"24h\"", "key_ttl = \"24h\"\nkey_tll = \"1d\"");
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("onceonly.toml"), "{message}");
        assert!(message.contains("line 9"), "{message}");
        assert!(message.contains("key_tll"), "{message}");
    }

    #[test]
    fn bad_duration_names_key_and_line() {
        let message = parse(&MINIMAL.replace("24h", "a day"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("line 8") && message.contains("key_ttl"),
            "{message}"
        );
    }

    #[test]
    fn bad_template_is_refused() {
        let message = parse(&MINIMAL.replace("{interval_start:%Y-%m-%d}", "{nope}"))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("line 12") && message.contains("nope"),
            "{message}"
        );
    }

    #[test]
    fn phase_mapping_needs_intent_and_committed() {
        let text = format!("{MINIMAL}\n[journal.phases]\nintent = [\"STARTED\"]\n");
        let text = text.replace("[journal]\nsnapshot = \"journal.csv\"\n", "");
        let text = text.replace(
            "[journal.phases]",
            "[journal]\nsnapshot = \"journal.csv\"\n[journal.phases]",
        );
        let message = parse(&text).unwrap_err().to_string();
        assert!(message.contains("committed"), "{message}");
    }

    #[test]
    fn globs() {
        assert!(glob_match("orders_*", "orders_daily"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("orders_*", "order_daily"));
        assert!(glob_match("*_export*", "x_export_y"));
    }
}
