//! The `attempts` table from Airflow's REST API (3.x `/api/v2`, 2.x `/api/v1`).
//!
//! What is read, per audited DAG: its runs (`/dags/{dag_id}/dagRuns`, or `/dags/~/dagRuns`
//! for all DAGs or a glob), each run's task instances (`…/dagRuns/{run_id}/taskInstances`)
//! and every try of each (`…/taskInstances/{task_id}/tries`, or
//! `…/taskInstances/{task_id}/{map_index}/tries` for a mapped task: the first form only
//! knows map index -1). A try's row takes its run's fields: the same columns the metadata
//! database gives, except `clear_number` and `dag_timezone`, which neither API exposes (they stay NULL).
//!
//! With an activity window (`since`), a run's tries are asked for only when its task
//! instances leave room for a try in the window: the instance listing shows each instance's
//! current try, and a task's earlier tries started and ended before its current one started,
//! so a run whose every instance started and ended more than [`CLOCK_SLACK`] before `since`
//! has no try in the window, and reading its tries would only confirm it. Which runs are
//! audited is then decided from the tries, as before. A nightly audit of a DAG with years
//! of runs so asks for the tries of the runs of the last day, not of every run.
//!
//! Listings are paged with `limit`/`offset` until `total_entries` is reached; a page that is
//! not JSON, lacks a field, changes the total or ends the listing early is an error naming
//! the URL and the page: no table is ever built from part of a listing. Every request is
//! retried as the provider's listing is ([`retry`](crate::sources::retry): 429, 5xx, timeouts
//! and dropped connections, honouring `Retry-After`, within the read's deadline), as
//! `[airflow]`'s `retries`, `backoff`, `timeout` and `deadline` say. Credentials come from
//! the environment and are only ever sent in headers, never shown.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use polars::prelude::*;
use serde_json::Value;

use crate::error::{EngineContext, Error, Location, Result};
use crate::glob::glob_match;
use crate::model::ATTEMPTS;
use crate::sources::airflow_db::{AirflowRead, Filter};
use crate::sources::http::{self, Scrubber};
use crate::sources::retry::{Retrier, RetryPolicy, describe};
use crate::sources::snapshot::Values;
use crate::timestamp;

/// The largest page Airflow serves by default (`[api] maximum_page_limit`).
pub const MAX_PAGE_SIZE: u32 = 100;
/// How hard the API is tried unless `[airflow]` says otherwise: a managed Airflow answers
/// 429 and 503 under load, and a large deployment's read takes minutes.
pub const DEFAULT_RETRY: RetryPolicy = RetryPolicy {
    retries: 5,
    backoff: Duration::from_millis(500),
    timeout: Duration::from_secs(120),
    deadline: Duration::from_secs(30 * 60),
};
/// Requests in flight at once: enough to hide latency, few enough not to load the API server.
const CONCURRENCY: usize = 8;
/// How far before the activity window an instance's current try may have started or ended
/// and its run still be read try by try (microseconds): the times are the workers' clocks,
/// and a task's tries may have run on machines whose clocks disagree.
pub const CLOCK_SLACK: i64 = 3_600_000_000;

/// Which REST API an Airflow serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// Airflow 2.x, `/api/v1`, basic auth.
    V1,
    /// Airflow 3.x, `/api/v2`, a JWT from `POST /auth/token`.
    V2,
}

impl ApiVersion {
    pub fn parse(text: &str) -> Option<ApiVersion> {
        match text.trim().to_ascii_lowercase().as_str() {
            "v1" | "1" => Some(ApiVersion::V1),
            "v2" | "2" => Some(ApiVersion::V2),
            _ => None,
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            ApiVersion::V1 => "/api/v1",
            ApiVersion::V2 => "/api/v2",
        }
    }
}

/// An Airflow REST API to read: where it is, how to authenticate, and the name to show.
#[derive(Clone, PartialEq, Eq)]
pub struct AirflowApi {
    /// The server's base URL without a trailing slash (`http://host:8080`, or with a path
    /// prefix when Airflow is served under one).
    pub base: String,
    /// How reports and errors name this source (never with credentials).
    pub shown: String,
    /// `None`: detected from `/api/v2/version`, then `/api/v1/version`.
    pub version: Option<ApiVersion>,
    pub username: Option<String>,
    pub page_size: u32,
    /// Retries, the timeout of one request, and the deadline of the whole read.
    pub retry: RetryPolicy,
    password: Option<String>,
    token: Option<String>,
}

impl std::fmt::Debug for AirflowApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AirflowApi")
            .field("base", &self.base)
            .field("version", &self.version)
            .field("username", &self.username)
            .field("page_size", &self.page_size)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl AirflowApi {
    /// Checks the URL and settings; `password` and `token` come from the environment.
    pub fn new(
        url: &str,
        version: Option<ApiVersion>,
        username: Option<String>,
        password: Option<String>,
        token: Option<String>,
        page_size: Option<u32>,
    ) -> Result<AirflowApi, String> {
        let parsed = reqwest::Url::parse(url.trim())
            .map_err(|err| format!("{url:?} is not a URL ({err}); use http://host:8080"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "{url:?}: the API is served over http or https, not {}",
                parsed.scheme()
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(
                "put no credentials in the URL: use `username` and `password_env` or `token_env`"
                    .into(),
            );
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(format!(
                "{url:?}: give the server's base URL, without ? or #"
            ));
        }
        let base = parsed.as_str().trim_end_matches('/').to_string();
        let password = password.filter(|p| !p.is_empty());
        let token = token.filter(|t| !t.is_empty());
        let page_size = page_size.unwrap_or(MAX_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(format!(
                "page_size = {page_size}: Airflow serves at most {MAX_PAGE_SIZE} entries a page"
            ));
        }
        if token.is_none() && (username.is_none() || password.is_none()) {
            return Err(
                "the API needs `username` with `password_env`, or `token_env` (a JWT, Airflow 3)"
                    .into(),
            );
        }
        if token.is_some() && version == Some(ApiVersion::V1) {
            return Err(
                "token_env works with /api/v2 (Airflow 3); /api/v1 takes `username` and `password_env`"
                    .into(),
            );
        }
        Ok(AirflowApi {
            shown: format!("Airflow API {base}"),
            base,
            version,
            username,
            page_size,
            retry: DEFAULT_RETRY,
            password,
            token,
        })
    }

    /// The same API, tried as `retry` says.
    pub fn with_retry(mut self, retry: RetryPolicy) -> AirflowApi {
        self.retry = retry;
        self
    }

    /// The configured credentials in every form requests carry them: the password as it is
    /// (in `/auth/token`'s JSON body) and in `Basic`'s base64, the token.
    fn scrubber(&self) -> Scrubber {
        let mut scrubber = Scrubber::default();
        if let Some(password) = &self.password {
            scrubber = scrubber.basic(self.username.as_deref().unwrap_or_default(), password);
        }
        if let Some(token) = &self.token {
            scrubber = scrubber.secret(token);
        }
        scrubber
    }

    /// Removes the secrets from text that is about to be shown (a server may echo them).
    fn scrub(&self, text: &str) -> String {
        self.scrubber().scrub(text)
    }

    fn error(&self, message: impl AsRef<str>) -> Error {
        Error::input(Location::source(&self.shown), self.scrub(message.as_ref()))
    }
}

/// Reads every try of the runs the filter selects. Runs are selected as the SQL reader does:
/// a run is audited when one of its tries started or ended inside the activity window, and
/// then all of its tries are read.
pub async fn read(api: &AirflowApi, filter: &Filter) -> Result<AirflowRead> {
    let http = http::client(&api.retry, Default::default())
        .map_err(|err| api.error(format!("cannot build an HTTP client: {}", describe(&err))))?;
    let progress = crate::progress::Line::open("attempts", &api.shown);
    // One clock and one count of retries for every request of the read.
    let retrier = Retrier::new(api.retry).reporting_to(progress.clone());
    let (version, airflow_version, warnings) = detect_version(api, &http, &retrier).await?;
    let auth = authenticate(api, &http, &retrier, version).await?;
    // A token from /auth/token is sent with every request from now on: scrubbed as well.
    let scrubber = match &auth {
        Auth::Bearer(token) => api.scrubber().secret(token),
        Auth::Basic(..) => api.scrubber(),
    };
    let client = Client {
        scrubber,
        retrier,
        progress: progress.clone(),
        api,
        http,
        auth,
        prefix: version.prefix(),
    };

    let runs = client.runs(version, filter.dag.as_deref()).await?;
    let instances: Vec<Instances> = futures_util::stream::iter(&runs)
        .map(|run| client.task_instances(run, filter.since))
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    let wanted: Vec<(&Run, &str, i64)> = runs
        .iter()
        .zip(&instances)
        .filter(|(_, tis)| tis.may_have_tried_since)
        .flat_map(|(run, tis)| {
            tis.instances
                .iter()
                .map(move |(task_id, map_index)| (run, task_id.as_str(), *map_index))
        })
        .collect();
    let tries: Vec<Vec<Try>> = futures_util::stream::iter(&wanted)
        .map(|(run, task_id, map_index)| client.tries(run, task_id, *map_index))
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;

    // Runs in the window: any try (of the audited DAGs) that started or ended inside it.
    let mut by_run: BTreeMap<(&str, &str), Vec<&Try>> = BTreeMap::new();
    for ((run, _, _), tries) in wanted.iter().zip(&tries) {
        by_run
            .entry((run.dag_id.as_str(), run.run_id.as_str()))
            .or_default()
            .extend(tries.iter());
    }
    let inside = |time: Option<i64>| {
        time.is_some_and(|t| {
            filter.since.is_none_or(|s| t >= s) && filter.until.is_none_or(|u| t < u)
        })
    };
    let run_fields: BTreeMap<(&str, &str), &Run> = runs
        .iter()
        .map(|run| ((run.dag_id.as_str(), run.run_id.as_str()), run))
        .collect();
    let mut rows: Vec<(&Run, &Try)> = Vec::new();
    for (key, tries) in &by_run {
        if tries
            .iter()
            .any(|t| inside(t.start_date) || inside(t.end_date))
        {
            let run = run_fields[key];
            rows.extend(tries.iter().map(|t| (run, *t)));
        }
    }
    rows.sort_by(|(_, a), (_, b)| {
        (&a.dag_id, &a.run_id, &a.task_id, a.map_index, a.try_number).cmp(&(
            &b.dag_id,
            &b.run_id,
            &b.task_id,
            b.map_index,
            b.try_number,
        ))
    });
    let attempts = frame(&rows)?;
    progress.done();
    Ok(AirflowRead {
        attempts,
        version: airflow_version,
        warnings,
    })
}

/// One DAG run's fields, as every try of it carries them.
struct Run {
    dag_id: String,
    run_id: String,
    run_type: Option<String>,
    state: Option<String>,
    interval_start: Option<i64>,
    interval_end: Option<i64>,
    logical_date: Option<i64>,
    run_after: Option<i64>,
    conf: Option<String>,
}

/// A run's task instances, and whether one of them may have a try since the activity
/// window's start (see the module documentation).
struct Instances {
    /// (task_id, map_index) of each.
    instances: Vec<(String, i64)>,
    may_have_tried_since: bool,
}

/// Whether a task instance whose current try started at `start` and ended at `end` may have a
/// try, this one or an earlier one, that started or ended at `since` or later: a time it has
/// not recorded yet may still come, and an earlier try ended before this one started.
fn tried_since(start: Option<i64>, end: Option<i64>, since: Option<i64>) -> bool {
    let Some(since) = since else {
        return true;
    };
    let recent = |time: Option<i64>| time.is_none_or(|time| time >= since - CLOCK_SLACK);
    recent(start) || recent(end)
}

/// One try of a task instance.
struct Try {
    dag_id: String,
    task_id: String,
    map_index: i64,
    run_id: String,
    try_number: i64,
    state: Option<String>,
    start_date: Option<i64>,
    end_date: Option<i64>,
    hostname: Option<String>,
    pid: Option<i64>,
    queued_at: Option<i64>,
}

/// The canonical attempts frame, in ATTEMPTS' column order.
fn frame(rows: &[(&Run, &Try)]) -> Result<DataFrame> {
    let mut builders: Vec<Values> = ATTEMPTS.iter().map(|spec| Values::new(spec.kind)).collect();
    for (run, tri) in rows {
        for (spec, builder) in ATTEMPTS.iter().zip(builders.iter_mut()) {
            match (builder, spec.name) {
                (Values::Text(v), "dag_id") => v.append_value(&tri.dag_id),
                (Values::Text(v), "task_id") => v.append_value(&tri.task_id),
                (Values::Int(v), "map_index") => v.push(Some(tri.map_index)),
                (Values::Text(v), "run_id") => v.append_value(&tri.run_id),
                (Values::Text(v), "run_type") => v.append_option(run.run_type.as_deref()),
                (Values::Int(v), "try_number") => v.push(Some(tri.try_number)),
                (Values::Text(v), "state") => v.append_option(tri.state.as_deref()),
                (Values::Time(v), "start_date") => v.push(tri.start_date),
                (Values::Time(v), "end_date") => v.push(tri.end_date),
                (Values::Text(v), "hostname") => v.append_option(tri.hostname.as_deref()),
                (Values::Int(v), "pid") => v.push(tri.pid),
                (Values::Time(v), "queued_at") => v.push(tri.queued_at),
                (Values::Time(v), "interval_start") => v.push(run.interval_start),
                (Values::Time(v), "interval_end") => v.push(run.interval_end),
                (Values::Time(v), "logical_date") => v.push(run.logical_date),
                (Values::Time(v), "run_after") => v.push(run.run_after),
                (Values::Text(v), "conf") => v.append_option(run.conf.as_deref()),
                // Neither /api/v1 nor /api/v2 exposes dag_run.clear_number.
                (Values::Int(v), "clear_number") => v.push(None),
                // Neither API gives a DAG's own zone: `/dags/{dag_id}/details` has a
                // `timezone`, but Airflow 2.10 and 3.3 fill it with the server's
                // `[core] default_timezone` for every DAG (recorded in the fixtures). The audit
                // names the DAGs whose keys would need it (`Noticed::zones_unknown`).
                (Values::Text(v), "dag_timezone") => v.append_null(),
                (Values::Text(v), "run_state") => v.append_option(run.state.as_deref()),
                // Neither API shows a try's heartbeat: a running try read through it is in
                // flight, never named probably dead.
                (Values::Time(v), "heartbeat_at") => v.push(None),
                (_, name) => {
                    return Err(Error::Engine {
                        doing: "assembling attempts from the Airflow API".into(),
                        message: format!("no API field for the attempts column `{name}`"),
                    });
                }
            }
        }
    }
    let columns = ATTEMPTS
        .iter()
        .zip(builders)
        .map(|(spec, values)| values.into_column(spec.name))
        .collect();
    DataFrame::new_infer_height(columns).engine("assembling attempts")
}

/// The API version to use, the Airflow version the server reports, and warnings.
async fn detect_version(
    api: &AirflowApi,
    http: &reqwest::Client,
    retrier: &Retrier,
) -> Result<(ApiVersion, String, Vec<String>)> {
    let candidates: &[ApiVersion] = match api.version {
        Some(ApiVersion::V1) => &[ApiVersion::V1],
        Some(ApiVersion::V2) => &[ApiVersion::V2],
        None => &[ApiVersion::V2, ApiVersion::V1],
    };
    let mut tried = Vec::new();
    for version in candidates {
        // `/version` needs no credentials in 2.x or 3.x.
        let url = format!("{}{}/version", api.base, version.prefix());
        let (status, body) = retrier
            .send_text(|| http.get(&url))
            .await
            .map_err(|reason| api.error(format!("GET {url}: {reason}")))?;
        if status == reqwest::StatusCode::NOT_FOUND && api.version.is_none() {
            tried.push(format!("GET {url}: HTTP 404"));
            continue;
        }
        if !status.is_success() {
            if api.version.is_some() {
                // The version was configured: a hidden /version is no reason to stop.
                return Ok((
                    *version,
                    "unknown".into(),
                    vec![format!(
                        "{}: GET {url} answered {}; reading as configured (api_version)",
                        api.shown,
                        status_text(status, &api.scrub(&body))
                    )],
                ));
            }
            return Err(api.error(format!(
                "GET {url}: {}",
                status_text(status, &api.scrub(&body))
            )));
        }
        let airflow = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|value| value.get("version")?.as_str().map(str::to_string))
            .ok_or_else(|| {
                api.error(format!(
                    "GET {url}: not an Airflow version answer (expected JSON with `version`)"
                ))
            })?;
        return Ok((*version, airflow, Vec::new()));
    }
    Err(api.error(format!(
        "no Airflow REST API found ({}); set api_version if the server hides /version",
        tried.join("; ")
    )))
}

/// The Authorization header value: `Bearer <JWT>` (3.x) or `Basic …` (2.x).
async fn authenticate(
    api: &AirflowApi,
    http: &reqwest::Client,
    retrier: &Retrier,
    version: ApiVersion,
) -> Result<Auth> {
    let username = api.username.clone().unwrap_or_default();
    match (version, &api.token, &api.password) {
        (ApiVersion::V2, Some(token), _) => Ok(Auth::Bearer(token.clone())),
        (ApiVersion::V1, Some(_), None) => Err(api.error(
            "the server speaks /api/v1 (Airflow 2), which takes `username` and `password_env`, not a token",
        )),
        (ApiVersion::V1, _, Some(password)) => Ok(Auth::Basic(username, password.clone())),
        (ApiVersion::V2, None, Some(password)) => {
            let url = format!("{}/auth/token", api.base);
            let credentials = serde_json::json!({"username": username, "password": password});
            let (status, body) = retrier
                .send_text(|| http.post(&url).json(&credentials))
                .await
                .map_err(|reason| api.error(format!("POST {url}: {reason}")))?;
            if !status.is_success() {
                return Err(api.error(format!(
                    "POST {url} as {username:?}: {}",
                    status_text(status, &api.scrub(&body))
                )));
            }
            let token = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|value| value.get("access_token")?.as_str().map(str::to_string))
                .filter(|token| !token.is_empty())
                .ok_or_else(|| {
                    api.error(format!(
                        "POST {url}: the answer has no `access_token` (HTTP {})",
                        status.as_u16()
                    ))
                })?;
            Ok(Auth::Bearer(token))
        }
        (_, None, None) => Err(api.error("no credentials: set password_env or token_env")),
    }
}

enum Auth {
    Bearer(String),
    Basic(String, String),
}

struct Client<'a> {
    api: &'a AirflowApi,
    /// The API's credentials and the session's token.
    scrubber: Scrubber,
    retrier: Retrier,
    progress: crate::progress::Line,
    http: reqwest::Client,
    auth: Auth,
    prefix: &'static str,
}

impl Client<'_> {
    fn error(&self, message: impl AsRef<str>) -> Error {
        Error::input(
            Location::source(&self.api.shown),
            self.scrubber.scrub(message.as_ref()),
        )
    }

    fn incomplete(&self, reason: impl AsRef<str>) -> Error {
        Error::Incomplete {
            source_name: self.api.shown.clone(),
            reason: self.scrubber.scrub(reason.as_ref()),
        }
    }

    /// The runs of one DAG, or of every DAG whose id matches a glob.
    async fn runs(&self, version: ApiVersion, dag: Option<&str>) -> Result<Vec<Run>> {
        let literal = dag.filter(|dag| !dag.contains(['*', '?']));
        let path = format!(
            "{}/dags/{}/dagRuns",
            self.prefix,
            literal.map(encode).unwrap_or_else(|| "~".into())
        );
        let items = self.list(&path, "dag_runs", "DAG runs").await?;
        let mut seen = BTreeSet::new();
        let mut runs = Vec::new();
        for (index, (page, item)) in items.iter().enumerate() {
            let at = Item {
                page,
                index,
                client: self,
            };
            let dag_id = at.text(item, "dag_id")?.ok_or_else(|| at.null("dag_id"))?;
            if dag.is_some_and(|glob| !glob_match(glob, &dag_id)) {
                continue;
            }
            let run_id = at
                .text(item, "dag_run_id")?
                .ok_or_else(|| at.null("dag_run_id"))?;
            if !seen.insert((dag_id.clone(), run_id.clone())) {
                return Err(at.fail(format!(
                    "run {dag_id}/{run_id} is listed twice: the listing moved while it was read"
                )));
            }
            let (logical_date, run_after) = match version {
                // 2.10 names it execution_date (and logical_date, the same value); 2.x has no
                // run_after: a run is scheduled for its logical date, as the SQL reader says.
                ApiVersion::V1 => {
                    let logical = if item.get("execution_date").is_some() {
                        at.time(item, "execution_date")?
                    } else {
                        at.time(item, "logical_date")?
                    };
                    (logical, logical)
                }
                ApiVersion::V2 => (at.time(item, "logical_date")?, at.time(item, "run_after")?),
            };
            let conf = match at.field(item, "conf")? {
                Value::Null => None,
                value => Some(value.to_string()),
            };
            runs.push(Run {
                run_type: at.text(item, "run_type")?,
                state: at.text(item, "state")?,
                interval_start: at.time(item, "data_interval_start")?,
                interval_end: at.time(item, "data_interval_end")?,
                logical_date,
                run_after,
                conf,
                dag_id,
                run_id,
            });
        }
        Ok(runs)
    }

    /// Every task instance of a run, and whether one may have a try since `since`.
    async fn task_instances(&self, run: &Run, since: Option<i64>) -> Result<Instances> {
        let path = format!(
            "{}/dags/{}/dagRuns/{}/taskInstances",
            self.prefix,
            encode(&run.dag_id),
            encode(&run.run_id)
        );
        let items = self.list(&path, "task_instances", "task instances").await?;
        let mut instances = BTreeSet::new();
        let mut may_have_tried_since = since.is_none();
        for (index, (page, item)) in items.iter().enumerate() {
            let at = Item {
                page,
                index,
                client: self,
            };
            at.expect(item, "dag_id", &run.dag_id)?;
            at.expect(item, "dag_run_id", &run.run_id)?;
            let task_id = at
                .text(item, "task_id")?
                .ok_or_else(|| at.null("task_id"))?;
            let map_index = at
                .int(item, "map_index")?
                .ok_or_else(|| at.null("map_index"))?;
            if !instances.insert((task_id.clone(), map_index)) {
                return Err(at.fail(format!(
                    "task instance {task_id}[{map_index}] is listed twice: the listing moved while it was read"
                )));
            }
            // Once one instance may have, the run's tries are read: the others' times are
            // not needed.
            may_have_tried_since = may_have_tried_since
                || tried_since(
                    at.time(item, "start_date")?,
                    at.time(item, "end_date")?,
                    since,
                );
        }
        Ok(Instances {
            instances: instances.into_iter().collect(),
            may_have_tried_since,
        })
    }

    /// Every try of one task instance: the history's rows, then the current one.
    async fn tries(&self, run: &Run, task_id: &str, map_index: i64) -> Result<Vec<Try>> {
        // `…/{task_id}/tries` is the map_index -1 form; a mapped instance needs its index.
        let instance = if map_index < 0 {
            encode(task_id)
        } else {
            format!("{}/{map_index}", encode(task_id))
        };
        let path = format!(
            "{}/dags/{}/dagRuns/{}/taskInstances/{instance}/tries",
            self.prefix,
            encode(&run.dag_id),
            encode(&run.run_id)
        );
        let items = self.list(&path, "task_instances", "tries").await?;
        let mut by_number: BTreeMap<i64, Try> = BTreeMap::new();
        for (index, (page, item)) in items.iter().enumerate() {
            let at = Item {
                page,
                index,
                client: self,
            };
            at.expect(item, "dag_id", &run.dag_id)?;
            at.expect(item, "dag_run_id", &run.run_id)?;
            at.expect(item, "task_id", task_id)?;
            let got_index = at
                .int(item, "map_index")?
                .ok_or_else(|| at.null("map_index"))?;
            if got_index != map_index {
                return Err(at.fail(format!(
                    "`map_index` is {got_index}, but the tries of map index {map_index} were asked for"
                )));
            }
            let try_number = at
                .int(item, "try_number")?
                .ok_or_else(|| at.null("try_number"))?;
            if try_number < 0 {
                return Err(at.fail(format!(
                    "`try_number` is {try_number}, below 0 (Airflow numbers tries from 1; 0 is an instance that never ran)"
                )));
            }
            if try_number == 0 {
                // Never ran (the SQL reader leaves try 0 out as well).
                continue;
            }
            let tri = Try {
                dag_id: run.dag_id.clone(),
                task_id: task_id.to_string(),
                map_index,
                run_id: run.run_id.clone(),
                try_number,
                state: at.text(item, "state")?,
                start_date: at.time(item, "start_date")?,
                end_date: at.time(item, "end_date")?,
                hostname: at.text(item, "hostname")?,
                pid: at.int(item, "pid")?,
                queued_at: at.time(item, "queued_when")?,
            };
            // A cleared try not yet re-run is in the history and still the current instance:
            // keep the history's row (listed first), as the SQL reader does.
            by_number.entry(try_number).or_insert(tri);
        }
        Ok(by_number.into_values().collect())
    }

    /// Every entry of a `limit`/`offset` listing, each with the page it came from.
    async fn list(&self, path: &str, key: &str, what: &str) -> Result<Vec<(Page, Value)>> {
        let limit = self.api.page_size;
        let mut entries = Vec::new();
        let mut total: Option<u64> = None;
        let mut offset = 0u64;
        let mut number = 0usize;
        loop {
            number += 1;
            let url = format!("{}{path}?limit={limit}&offset={offset}", self.api.base);
            let page = Page {
                url: url.clone(),
                number,
                what: what.to_string(),
            };
            let body = self.get(&page).await?;
            let value: Value = serde_json::from_str(&body).map_err(|err| {
                self.incomplete(format!("{page}: the answer is not JSON ({err})"))
            })?;
            let page_total = value
                .get("total_entries")
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    self.incomplete(format!("{page}: no `total_entries` in the answer"))
                })?;
            let items = value
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| self.incomplete(format!("{page}: no `{key}` list in the answer")))?;
            match total {
                None => total = Some(page_total),
                Some(first) if first != page_total => {
                    return Err(self.incomplete(format!(
                        "{page}: total_entries changed from {first} to {page_total} while the listing was read; run again"
                    )));
                }
                Some(_) => {}
            }
            let count = items.len() as u64;
            self.progress.page(items.len());
            for item in items {
                entries.push((page.clone(), item.clone()));
            }
            let seen = entries.len() as u64;
            if seen > page_total {
                return Err(self.incomplete(format!(
                    "{page}: {seen} entries read, more than total_entries {page_total}"
                )));
            }
            if seen == page_total {
                return Ok(entries);
            }
            if count == 0 {
                return Err(self.incomplete(format!(
                    "{page}: the listing ended after {seen} of {page_total} entries"
                )));
            }
            // A server may serve fewer than asked (its maximum_page_limit): go on from what came.
            offset += count;
        }
    }

    async fn get(&self, page: &Page) -> Result<String> {
        let request = || {
            let request = self.http.get(&page.url);
            match &self.auth {
                Auth::Bearer(token) => request.bearer_auth(token),
                Auth::Basic(user, password) => request.basic_auth(user, Some(password)),
            }
        };
        let (status, body) = self
            .retrier
            .send_text(request)
            .await
            .map_err(|reason| self.incomplete(format!("{page}: {reason}")))?;
        if !status.is_success() {
            // Scrubbed before `status_text` cuts the detail short.
            let body = self.scrubber.scrub(&body);
            return Err(self.error(format!("{page}: {}", status_text(status, &body))));
        }
        Ok(body)
    }
}

/// One page of a listing, as errors name it.
#[derive(Clone)]
struct Page {
    url: String,
    number: usize,
    what: String,
}

impl std::fmt::Display for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GET {} (page {} of {})",
            self.url, self.number, self.what
        )
    }
}

/// One entry of a listing, for errors that name the field.
struct Item<'a> {
    page: &'a Page,
    /// 0-based over the whole listing.
    index: usize,
    client: &'a Client<'a>,
}

impl Item<'_> {
    fn fail(&self, message: String) -> Error {
        self.client.incomplete(format!(
            "{}, entry {}: {message}",
            self.page,
            self.index + 1
        ))
    }

    fn null(&self, field: &str) -> Error {
        self.fail(format!("`{field}` is null"))
    }

    fn field<'v>(&self, item: &'v Value, field: &str) -> Result<&'v Value> {
        item.get(field)
            .ok_or_else(|| self.fail(format!("no `{field}` field")))
    }

    fn text(&self, item: &Value, field: &str) -> Result<Option<String>> {
        match self.field(item, field)? {
            Value::Null => Ok(None),
            Value::String(text) => Ok(Some(text.clone())),
            other => Err(self.fail(format!("`{field}` is {other}, not text"))),
        }
    }

    fn int(&self, item: &Value, field: &str) -> Result<Option<i64>> {
        match self.field(item, field)? {
            Value::Null => Ok(None),
            value => value
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.fail(format!("`{field}` is {value}, not an integer"))),
        }
    }

    fn time(&self, item: &Value, field: &str) -> Result<Option<i64>> {
        match self.field(item, field)? {
            Value::Null => Ok(None),
            Value::String(text) => timestamp::parse(text)
                .map(Some)
                .ok_or_else(|| self.fail(format!("`{field}` is {text:?}, not a timestamp"))),
            other => Err(self.fail(format!("`{field}` is {other}, not a timestamp"))),
        }
    }

    /// The answer must be about what was asked for.
    fn expect(&self, item: &Value, field: &str, wanted: &str) -> Result<()> {
        match self.text(item, field)? {
            Some(found) if found == wanted => Ok(()),
            found => Err(self.fail(format!(
                "`{field}` is {found:?}, but {wanted:?} was asked for"
            ))),
        }
    }
}

/// A path segment, percent-encoded: run ids hold `:` and `+`.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `HTTP 401 Unauthorized: Invalid credentials`, with a hint for the usual causes.
fn status_text(status: reqwest::StatusCode, body: &str) -> String {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| {
            ["detail", "title"]
                .iter()
                .find_map(|key| value.get(key)?.as_str().map(str::to_string))
        })
        .unwrap_or_default();
    let detail: String = detail.chars().take(300).collect();
    let hint = match status.as_u16() {
        401 => " (wrong username, password or token?)",
        403 => " (the user may not read DAG runs or task instances)",
        404 => " (unknown DAG or run, or not an Airflow API at this URL?)",
        _ => "",
    };
    let mut text = format!("HTTP {status}");
    if !detail.is_empty() {
        text.push_str(&format!(": {detail}"));
    }
    text.push_str(hint);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_may_have_tried_since_unless_both_its_times_are_well_before() {
        let since = 100 * CLOCK_SLACK;
        let before = since - CLOCK_SLACK - 1;
        assert!(tried_since(Some(before), Some(before), None));
        assert!(!tried_since(Some(before), Some(before), Some(since)));
        // Within the slack, or after: its tries are read.
        assert!(tried_since(
            Some(before),
            Some(since - CLOCK_SLACK),
            Some(since)
        ));
        assert!(tried_since(Some(since + 5), Some(before), Some(since)));
        // Not started or not ended yet (queued, running): it may still.
        assert!(tried_since(None, Some(before), Some(since)));
        assert!(tried_since(Some(before), None, Some(since)));
    }

    #[test]
    fn run_ids_are_encoded_as_airflow_expects() {
        assert_eq!(
            encode("scheduled__2026-11-26T00:00:00+00:00"),
            "scheduled__2026-11-26T00%3A00%3A00%2B00%3A00"
        );
        assert_eq!(
            encode("manual__2026-11-29T09:14:33.242706+00:00"),
            "manual__2026-11-29T09%3A14%3A33.242706%2B00%3A00"
        );
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn urls_with_credentials_are_refused_and_secrets_hidden() {
        let refused = AirflowApi::new(
            "http://admin:pw@host:8080",
            None,
            Some("admin".into()),
            Some("pw".into()),
            None,
            None,
        );
        assert!(refused.unwrap_err().contains("no credentials in the URL"));
        let api = AirflowApi::new(
            "http://host:8080/",
            None,
            Some("admin".into()),
            Some("s3cret".into()),
            None,
            None,
        )
        .unwrap();
        assert_eq!(api.base, "http://host:8080");
        assert!(!format!("{api:?}").contains("s3cret"));
        assert_eq!(api.scrub("echo s3cret"), "echo ***");
        assert!(
            AirflowApi::new("http://h", None, None, None, None, Some(101))
                .unwrap_err()
                .contains("at most 100")
        );
    }
}
