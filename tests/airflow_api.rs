//! The attempts reader on Airflow's REST API, against the responses a real api-server gave
//! (fixtures/airflow/out/*/api, recorded during the same runs as the metadata databases),
//! served on loopback by a small HTTP server in this module.
//!
//! The server answers a request with the recorded bytes when the recordings hold that
//! method, path and query. Two kinds of answer are derived, and each test says whether it
//! allows them:
//!
//! * a listing the recordings hold completely (`total_entries` entries in one page) is
//!   sliced for another `limit`/`offset`, as the server would; the tries endpoints ignore
//!   `limit`/`offset` (recorded: every page returns all tries), so any tries request gets
//!   the recorded tries;
//! * `GET /dags/~/dagRuns` (all DAGs) was recorded only in pages of 5 that stop at offset 5,
//!   so the whole listing is the union of the complete per-DAG listings, checked against the
//!   recorded `total_entries` of `~/dagRuns`.
//!
//! Anything else is answered 500 "not recorded", which fails the test that asked.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onceonly::sources::airflow_api::{self, AirflowApi, ApiVersion};
use onceonly::sources::airflow_db::{self, Filter};
use onceonly::sources::retry::RetryPolicy;
use polars::prelude::*;
use serde_json::Value;

use crate::loopback::{Reply, Scripted};
use crate::scenario::{Scenario, fixtures, stderr, stdout};

const V2: &str = "airflow-3.3.2";
const V1: &str = "airflow-2.10.5";
/// The password the served Airflow accepts (the recorded one is redacted).
const PASSWORD: &str = "Planted-Passw0rd-7f3a";
/// The JWT the served 3.x Airflow hands out: the recorded `/auth/token` answer's (redacted) value.
const TOKEN: &str = "REDACTED_JWT";
const DAGS: [&str; 7] = [
    "onceonly_a_stable_key",
    "onceonly_b_unstable_key",
    "onceonly_c_exhausted",
    "onceonly_d_rerun_after_success",
    "onceonly_e_manual",
    "onceonly_f_api_clear",
    "onceonly_g_unjournaled",
];

fn api_dir(version: &str) -> PathBuf {
    fixtures().join("airflow/out").join(version).join("api")
}

struct Entry {
    method: String,
    path: String,
    query: String,
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

/// How a `Retry-After` header says when to come back: seconds, or one of the three HTTP
/// date forms, this many seconds from when the answer is sent.
#[derive(Clone, Copy, PartialEq, Debug)]
enum RetryAfter {
    Seconds(u64),
    ImfFixdate(u64),
    Rfc850(u64),
    Asctime(u64),
}

impl RetryAfter {
    fn header(self) -> String {
        let at = |seconds: u64| chrono::Utc::now() + chrono::Duration::seconds(seconds as i64);
        match self {
            RetryAfter::Seconds(seconds) => seconds.to_string(),
            RetryAfter::ImfFixdate(seconds) => {
                at(seconds).format("%a, %d %b %Y %H:%M:%S GMT").to_string()
            }
            RetryAfter::Rfc850(seconds) => {
                at(seconds).format("%A, %d-%b-%y %H:%M:%S GMT").to_string()
            }
            RetryAfter::Asctime(seconds) => at(seconds).format("%a %b %e %H:%M:%S %Y").to_string(),
        }
    }
}

/// What the server does besides replaying.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// Answer the first `times` requests whose path and query end with `end` with `status`
    /// (and `Retry-After`, if given) instead of the recording.
    Status {
        end: &'static str,
        status: u16,
        retry_after: Option<RetryAfter>,
        times: usize,
    },
    /// Answer the first `times` requests whose path and query end with `end` this many
    /// milliseconds late.
    Slow {
        end: &'static str,
        millis: u64,
        times: usize,
    },
    /// Answer requests whose path and query end with this with a body that is not JSON.
    NotJson(&'static str),
    /// Close the connection halfway through the body of requests whose path and query end
    /// with this.
    Drop(&'static str),
    /// Add one to `total_entries` on pages after the first of paths ending with this.
    TotalMoves(&'static str),
    /// Give every try of tries listings whose path ends with this the try number -2.
    NegativeTry(&'static str),
}

/// A request served: method, path?query, and how it was answered (`recorded`, `derived`,
/// `not recorded`).
type Answer = (String, String, &'static str);

struct Server {
    base: String,
    log: Arc<Mutex<Vec<Answer>>>,
}

impl Server {
    fn start(version: &str, fault: Fault) -> Server {
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(api_dir(version).join("manifest.json")).unwrap(),
        )
        .unwrap();
        let entries: Vec<Entry> = manifest["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| Entry {
                method: e["method"].as_str().unwrap().into(),
                path: e["path"].as_str().unwrap().into(),
                query: e["query"].as_str().unwrap().into(),
                status: e["status"].as_u64().unwrap() as u16,
                content_type: e["content_type"].as_str().unwrap().into(),
                body: std::fs::read(api_dir(version).join(e["file"].as_str().unwrap())).unwrap(),
            })
            .collect();
        let prefix = manifest["airflow_api"].as_str().unwrap().to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        // The fault's count of requests it has struck so far.
        let state = Arc::new((entries, prefix, fault, AtomicUsize::new(0)));
        let server_log = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = state.clone();
                let log = server_log.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state.0, &state.1, (state.2, &state.3), &log);
                });
            }
        });
        Server { base, log }
    }

    fn answers(&self) -> Vec<Answer> {
        self.log.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    entries: &[Entry],
    prefix: &str,
    (fault, struck): (Fault, &AtomicUsize),
    log: &Mutex<Vec<Answer>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));

    let v2 = prefix == "/api/v2";
    let authorized = match headers.get("authorization") {
        Some(value) if v2 => *value == format!("Bearer {TOKEN}"),
        Some(value) => *value == format!("Basic {}", base64(&format!("admin:{PASSWORD}"))),
        None => false,
    };
    let find = |method: &str, path: &str, query: &str, status: fn(u16) -> bool| {
        entries
            .iter()
            .find(|e| e.method == method && e.path == path && e.query == query && status(e.status))
    };
    let (status, content_type, mut answer, how): (u16, String, Vec<u8>, &'static str) =
        if method == "POST" && path == "/auth/token" {
            let sent: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let good = sent["username"] == "admin" && sent["password"] == PASSWORD;
            let entry = find(
                "POST",
                path,
                "",
                if good { |s| s == 201 } else { |s| s == 401 },
            )
            .expect("recorded /auth/token");
            (
                entry.status,
                entry.content_type.clone(),
                entry.body.clone(),
                "recorded",
            )
        } else if path.ends_with("/version") {
            match find("GET", path, "", |s| s == 200) {
                Some(e) => (200, e.content_type.clone(), e.body.clone(), "recorded"),
                None => (
                    404,
                    "application/json".into(),
                    br#"{"detail":"Not Found"}"#.to_vec(),
                    "recorded",
                ),
            }
        } else if !authorized {
            let entry = entries
                .iter()
                .find(|e| e.status == 401 && e.method == "GET")
                .expect("recorded 401");
            (
                401,
                entry.content_type.clone(),
                entry.body.clone(),
                "recorded",
            )
        } else if let Some(entry) = find(&method, path, query, |s| s != 401) {
            (
                entry.status,
                entry.content_type.clone(),
                entry.body.clone(),
                "recorded",
            )
        } else {
            match derive(entries, prefix, path, query) {
                Some(body) => (200, "application/json".into(), body, "derived"),
                None => (
                    500,
                    "text/plain".into(),
                    b"not recorded".to_vec(),
                    "not recorded",
                ),
            }
        };
    // The first `times` matching requests are struck.
    let strikes = |end: &str, times: usize| {
        target.ends_with(end) && struck.fetch_add(1, Ordering::SeqCst) < times
    };
    let mut extra_headers = String::new();
    let mut delay = Duration::ZERO;
    let (status, content_type, how) = match fault {
        Fault::Status {
            end,
            status: fault_status,
            retry_after,
            times,
        } if strikes(end, times) => {
            if let Some(retry_after) = retry_after {
                extra_headers = format!("Retry-After: {}\r\n", retry_after.header());
            }
            answer = br#"{"detail":"try again later"}"#.to_vec();
            (fault_status, "application/json".to_string(), "fault")
        }
        Fault::Slow { end, millis, times } if strikes(end, times) => {
            delay = Duration::from_millis(millis);
            (status, content_type, how)
        }
        _ => (status, content_type, how),
    };
    log.lock()
        .unwrap()
        .push((method.clone(), target.clone(), how));
    std::thread::sleep(delay);

    match fault {
        Fault::NotJson(end) if target.ends_with(end) && status == 200 => {
            answer = b"<html>502 Bad Gateway</html>".to_vec();
        }
        Fault::TotalMoves(end) if path.ends_with(end) && !query.ends_with("offset=0") => {
            let mut value: Value = serde_json::from_slice(&answer).unwrap();
            value["total_entries"] = (value["total_entries"].as_u64().unwrap() + 1).into();
            answer = serde_json::to_vec(&value).unwrap();
        }
        Fault::NegativeTry(end) if path.ends_with(end) && status == 200 => {
            let mut value: Value = serde_json::from_slice(&answer).unwrap();
            for tri in value["task_instances"].as_array_mut().unwrap() {
                tri["try_number"] = (-2).into();
            }
            answer = serde_json::to_vec(&value).unwrap();
        }
        _ => {}
    }
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra_headers}Connection: close\r\n\r\n",
        answer.len()
    );
    stream.write_all(head.as_bytes())?;
    if let Fault::Drop(end) = fault
        && target.ends_with(end)
    {
        stream.write_all(&answer[..answer.len() / 2])?;
        stream.flush()?;
        return stream.shutdown(std::net::Shutdown::Both);
    }
    stream.write_all(&answer)?;
    stream.flush()
}

/// An answer the recordings determine without holding it (see the module comment).
fn derive(entries: &[Entry], prefix: &str, path: &str, query: &str) -> Option<Vec<u8>> {
    let params: BTreeMap<&str, &str> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    let limit: usize = params.get("limit")?.parse().ok()?;
    let offset: usize = params.get("offset")?.parse().ok()?;
    let complete = |entry: &Entry, key: &str| -> Option<(Vec<Value>, u64)> {
        let value: Value = serde_json::from_slice(&entry.body).ok()?;
        let items = value.get(key)?.as_array()?.clone();
        let total = value.get("total_entries")?.as_u64()?;
        (entry.status == 200 && items.len() as u64 == total).then_some((items, total))
    };
    let recorded = entries
        .iter()
        .filter(|e| e.method == "GET" && e.path == path);
    if path.ends_with("/tries") {
        // The tries endpoints return every try whatever limit/offset say.
        return recorded.map(|e| e.body.clone()).next();
    }
    let (key, items, total) = if path == format!("{prefix}/dags/~/dagRuns") {
        let mut all = Vec::new();
        for entry in entries.iter().filter(|e| {
            e.method == "GET"
                && e.status == 200
                && e.path.starts_with(&format!("{prefix}/dags/"))
                && e.path.ends_with("/dagRuns")
                && e.query == "limit=100&offset=0"
        }) {
            all.extend(complete(entry, "dag_runs")?.0);
        }
        let recorded_total = entries
            .iter()
            .filter(|e| e.path == path)
            .find_map(|e| complete_total(&e.body))?;
        assert_eq!(
            all.len() as u64,
            recorded_total,
            "the per-DAG listings hold every run"
        );
        ("dag_runs", all, recorded_total)
    } else {
        let key = if path.ends_with("/dagRuns") {
            "dag_runs"
        } else {
            "task_instances"
        };
        let (items, total) = recorded.filter_map(|e| complete(e, key)).next()?;
        (key, items, total)
    };
    let page: Vec<Value> = items.into_iter().skip(offset).take(limit).collect();
    Some(serde_json::to_vec(&serde_json::json!({key: page, "total_entries": total})).unwrap())
}

fn complete_total(body: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Value>(body).ok()?["total_entries"].as_u64()
}

fn base64(text: &str) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Retries quick enough for tests: three after the first, from 50 ms.
const QUICK: RetryPolicy = RetryPolicy {
    retries: 3,
    backoff: Duration::from_millis(50),
    timeout: Duration::from_secs(5),
    deadline: Duration::from_secs(60),
};

fn api(server: &Server, version: Option<ApiVersion>, page_size: Option<u32>) -> AirflowApi {
    AirflowApi::new(
        &server.base,
        version,
        Some("admin".into()),
        Some(PASSWORD.into()),
        None,
        page_size,
    )
    .unwrap()
    .with_retry(QUICK)
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn read_api(api: &AirflowApi, filter: &Filter) -> onceonly::error::Result<DataFrame> {
    block_on(airflow_api::read(api, filter)).map(|read| read.attempts)
}

fn read_db(version: &str, dag: Option<&str>) -> DataFrame {
    let path = crate::airflow::fixture_db(version);
    let database = crate::airflow::sqlite_database(&path);
    let filter = Filter {
        dag: dag.map(str::to_string),
        ..Filter::default()
    };
    block_on(airflow_db::read(&database, &filter))
        .expect("read the SQLite fixture")
        .attempts
}

fn sorted(frame: &DataFrame) -> DataFrame {
    frame
        .sort(
            ["dag_id", "run_id", "task_id", "map_index", "try_number"],
            Default::default(),
        )
        .unwrap()
}

fn cells(frame: &DataFrame, name: &str) -> Vec<Option<String>> {
    let column = frame.column(name).unwrap().cast(&DataType::String).unwrap();
    column
        .str()
        .unwrap()
        .iter()
        .map(|cell| cell.map(str::to_string))
        .collect()
}

/// The API's attempts equal the database's, column by column. `clear_number` is a column
/// neither /api/v1 nor /api/v2 exposes: NULL from the API; the reader does not read the DAG's
/// zone (`dag_timezone`) either, and neither API shows a try's heartbeat (`heartbeat_at`).
/// `conf` is compared as JSON
/// (the database keeps Airflow's own text; the API answers parsed JSON).
fn assert_same_attempts(from_api: &DataFrame, from_db: &DataFrame, what: &str) {
    assert!(from_db.height() > 0, "{what}: the database has tries");
    assert_eq!(
        from_api.schema(),
        from_db.schema(),
        "{what}: canonical schema"
    );
    let (api, db) = (sorted(from_api), sorted(from_db));
    assert_eq!(api.height(), db.height(), "{what}: tries");
    for spec in onceonly::model::ATTEMPTS {
        match spec.name {
            "clear_number" | "dag_timezone" | "heartbeat_at" => {
                assert_eq!(
                    api.column(spec.name).unwrap().null_count(),
                    api.height(),
                    "{what}: the API reader gives no {}",
                    spec.name
                );
            }
            "conf" => {
                let json = |cells: Vec<Option<String>>| -> Vec<Option<Value>> {
                    cells
                        .into_iter()
                        .map(|c| c.map(|c| serde_json::from_str(&c).unwrap()))
                        .collect()
                };
                assert_eq!(
                    json(cells(&api, "conf")),
                    json(cells(&db, "conf")),
                    "{what}: conf"
                );
            }
            name => assert_eq!(cells(&api, name), cells(&db, name), "{what}: {name}"),
        }
    }
}

#[test]
fn every_recorded_dag_reads_the_same_as_the_metadata_database() {
    for (version, api_version) in [(V2, ApiVersion::V2), (V1, ApiVersion::V1)] {
        let server = Server::start(version, Fault::None);
        let api = api(&server, Some(api_version), None);
        for dag in DAGS {
            let filter = Filter {
                dag: Some(dag.into()),
                ..Filter::default()
            };
            let from_api = read_api(&api, &filter).expect("read through the API");
            assert_same_attempts(
                &from_api,
                &read_db(version, Some(dag)),
                &format!("{version} {dag}"),
            );
        }
        // Nothing was derived: these are the requests the real api-server answered.
        let answers = server.answers();
        assert!(
            answers.iter().all(|(_, _, how)| *how == "recorded"),
            "{version}: {answers:?}"
        );
        assert!(
            answers
                .iter()
                .any(|(_, target, _)| target.contains("/export/1/tries")),
            "{version}: a mapped instance's tries are read by map index"
        );
    }
}

#[test]
fn all_dags_through_the_all_runs_listing_and_version_detection() {
    for version in [V2, V1] {
        let server = Server::start(version, Fault::None);
        // No api_version: detected from /api/v2/version (404 on 2.x), then /api/v1/version.
        let read = block_on(airflow_api::read(
            &api(&server, None, None),
            &Filter::default(),
        ))
        .expect("read all DAGs");
        assert_eq!(read.version, version.trim_start_matches("airflow-"));
        assert_same_attempts(&read.attempts, &read_db(version, None), version);

        let glob = Filter {
            dag: Some("onceonly_d*".into()),
            ..Filter::default()
        };
        let only_d = read_api(&api(&server, None, None), &glob).unwrap();
        assert_same_attempts(&only_d, &read_db(version, Some("onceonly_d*")), version);
    }
}

#[test]
fn activity_window_keeps_whole_runs_like_the_sql_reader() {
    // 3.3.2's first interval of onceonly_d was cleared and re-run later: a window around
    // the re-run keeps that run with both of its tries, and no other run of that DAG.
    let server = Server::start(V2, Fault::None);
    let db = read_db(V2, Some("onceonly_d_rerun_after_success"));
    let starts = cells(&sorted(&db), "start_date");
    let rerun = starts[1].clone().expect("the re-run try has a start");
    let since = onceonly::timestamp::parse(&rerun).unwrap();
    let filter = Filter {
        dag: Some("onceonly_d_rerun_after_success".into()),
        since: Some(since),
        until: Some(since + 1),
    };
    let from_api = read_api(&api(&server, Some(ApiVersion::V2), None), &filter).unwrap();
    let database = crate::airflow::sqlite_database(&crate::airflow::fixture_db(V2));
    let from_db = block_on(airflow_db::read(&database, &filter))
        .unwrap()
        .attempts;
    assert_eq!(from_api.height(), 2, "both tries of the re-run interval");
    assert_same_attempts(&from_api, &from_db, "window");
}

/// The latest start or end of any try in a fixture's database.
fn latest_try_time(version: &str) -> i64 {
    let db = read_db(version, None);
    ["start_date", "end_date"]
        .iter()
        .flat_map(|column| cells(&db, column))
        .flatten()
        .map(|time| onceonly::timestamp::parse(&time).expect("a fixture time"))
        .max()
        .expect("the fixture has tries")
}

#[test]
fn runs_whose_tries_all_ended_before_the_window_are_not_read_try_by_try() {
    for (version, api_version) in [(V2, ApiVersion::V2), (V1, ApiVersion::V1)] {
        let latest = latest_try_time(version);
        let database = crate::airflow::sqlite_database(&crate::airflow::fixture_db(version));
        // The tries read through the API and from the database for a day's window from
        // `since`, and the targets of the tries requests the API read made.
        let read_from = |since: i64| {
            let filter = Filter {
                dag: None,
                since: Some(since),
                until: Some(since + 86_400_000_000),
            };
            let server = Server::start(version, Fault::None);
            let from_api = read_api(&api(&server, Some(api_version), None), &filter).unwrap();
            let from_db = block_on(airflow_db::read(&database, &filter))
                .unwrap()
                .attempts;
            let answers = server.answers();
            assert!(
                answers
                    .iter()
                    .any(|(_, target, _)| target.contains("/taskInstances?")),
                "{version}: the task instances were listed"
            );
            let tries_asked: Vec<String> = answers
                .into_iter()
                .filter(|(_, target, _)| target.contains("/tries"))
                .map(|(_, target, _)| target)
                .collect();
            (from_api, from_db, tries_asked)
        };

        // A window that starts more than the clock slack after every try: the runs' task
        // instances say so, and no run's tries are asked for. The database finds none either.
        let (from_api, from_db, tries_asked) =
            read_from(latest + airflow_api::CLOCK_SLACK + 1_000_000);
        assert_eq!((from_api.height(), from_db.height()), (0, 0), "{version}");
        assert_eq!(tries_asked, Vec::<String>::new(), "{version}");

        // A window that starts at the last try's last time: the runs' tries are read, and
        // the audited runs are the database's.
        let (from_api, from_db, tries_asked) = read_from(latest);
        assert!(!tries_asked.is_empty(), "{version}");
        assert!(
            from_db.height() > 0,
            "{version}: the last try is in the window"
        );
        assert_same_attempts(&from_api, &from_db, version);
    }
}

#[test]
fn small_pages_are_followed_to_total_entries() {
    for (version, api_version) in [(V2, ApiVersion::V2), (V1, ApiVersion::V1)] {
        let server = Server::start(version, Fault::None);
        let filter = Filter {
            dag: Some("onceonly_a_stable_key".into()),
            ..Filter::default()
        };
        let from_api = read_api(&api(&server, Some(api_version), Some(2)), &filter).unwrap();
        assert_same_attempts(
            &from_api,
            &read_db(version, Some("onceonly_a_stable_key")),
            version,
        );
        let answers = server.answers();
        // The run listing came in the recorded pages of 2: offset 0, then offset 2.
        for query in ["limit=2&offset=0", "limit=2&offset=2"] {
            assert!(
                answers.iter().any(|(_, target, how)| target
                    .ends_with(&format!("/dags/onceonly_a_stable_key/dagRuns?{query}"))
                    && *how == "recorded"),
                "{version}: {answers:?}"
            );
        }
        assert!(
            !answers
                .iter()
                .any(|(_, target, _)| target.contains("dagRuns?limit=2&offset=4")),
            "{version}: stops at total_entries"
        );
    }
}

#[test]
fn mapped_task_instances_are_paged_one_by_one() {
    // Recorded on both versions: the mapped run's task instances in pages of 1.
    for (version, api_version) in [(V2, ApiVersion::V2), (V1, ApiVersion::V1)] {
        let server = Server::start(version, Fault::None);
        let dag = "onceonly_f_api_clear";
        let filter = Filter {
            dag: Some(dag.into()),
            ..Filter::default()
        };
        let from_api = read_api(&api(&server, Some(api_version), Some(1)), &filter).unwrap();
        assert_same_attempts(&from_api, &read_db(version, Some(dag)), version);
        let answers = server.answers();
        // The first run of the fixture (its catch-up start date).
        let [first, _, _] = crate::scenario::airflow_days(version);
        for query in ["limit=1&offset=0", "limit=1&offset=1"] {
            assert!(
                answers
                    .iter()
                    .any(|(_, target, how)| target.ends_with(&format!(
                        "{first}T00%3A00%3A00%2B00%3A00/taskInstances?{query}"
                    )) && *how == "recorded"),
                "{version}: {answers:?}"
            );
        }
    }
}

fn error_text(api: &AirflowApi, dag: &str) -> String {
    read_api(
        api,
        &Filter {
            dag: Some(dag.into()),
            ..Filter::default()
        },
    )
    .expect_err("the read must fail")
    .to_string()
}

#[test]
fn wrong_credentials_are_refused_with_the_url_and_without_the_secret() {
    let planted = "Leaky-Secret-0451";
    // 3.x: POST /auth/token answers 401 (recorded).
    let server = Server::start(V2, Fault::None);
    let wrong = AirflowApi::new(
        &server.base,
        None,
        Some("admin".into()),
        Some(planted.into()),
        None,
        None,
    )
    .unwrap();
    let message = error_text(&wrong, "onceonly_a_stable_key");
    assert!(
        message.contains(&format!("POST {}/auth/token", server.base)),
        "{message}"
    );
    assert!(
        message.contains("401") && message.contains("Invalid credentials"),
        "{message}"
    );
    assert!(!message.contains(planted), "{message}");
    // 3.x with a given token the server does not accept: the listing answers 401 (recorded).
    let token =
        AirflowApi::new(&server.base, None, None, None, Some(planted.into()), None).unwrap();
    let message = error_text(&token, "onceonly_a_stable_key");
    assert!(
        message.contains("401") && message.contains("dagRuns?limit=100&offset=0"),
        "{message}"
    );
    assert!(!message.contains(planted), "{message}");
    // 2.x basic auth with a wrong password: 401 (the recorded unauthenticated answer).
    let server = Server::start(V1, Fault::None);
    let wrong = AirflowApi::new(
        &server.base,
        Some(ApiVersion::V1),
        Some("admin".into()),
        Some(planted.into()),
        None,
        None,
    )
    .unwrap();
    let message = error_text(&wrong, "onceonly_a_stable_key");
    assert!(
        message.contains("401") && message.contains(&server.base),
        "{message}"
    );
    assert!(!message.contains(planted), "{message}");
}

#[test]
fn a_given_token_is_used_as_is() {
    let server = Server::start(V2, Fault::None);
    let api = AirflowApi::new(&server.base, None, None, None, Some(TOKEN.into()), None).unwrap();
    let filter = Filter {
        dag: Some("onceonly_e_manual".into()),
        ..Filter::default()
    };
    let from_api = read_api(&api, &filter).unwrap();
    assert_same_attempts(&from_api, &read_db(V2, Some("onceonly_e_manual")), "token");
    assert!(
        !server
            .answers()
            .iter()
            .any(|(method, _, _)| method == "POST"),
        "no /auth/token with a given token"
    );
}

#[test]
fn unknown_dag_is_an_error_on_3x_and_empty_on_2x() {
    let server = Server::start(V2, Fault::None);
    let message = error_text(&api(&server, Some(ApiVersion::V2), None), "no_such_dag");
    assert!(
        message.contains("404")
            && message.contains("no_such_dag")
            && message.contains(&server.base),
        "{message}"
    );
    // 2.10 answers 200 with no runs (recorded), as the database has none.
    let server = Server::start(V1, Fault::None);
    let filter = Filter {
        dag: Some("no_such_dag".into()),
        ..Filter::default()
    };
    let empty = read_api(&api(&server, Some(ApiVersion::V1), None), &filter).unwrap();
    assert_eq!(empty.height(), 0);
}

#[test]
fn broken_pages_fail_naming_url_and_page() {
    let dag = "onceonly_a_stable_key";
    for (fault, wanted) in [
        (
            Fault::NotJson("/taskInstances?limit=2&offset=0"),
            "(page 1 of task instances): the answer is not JSON",
        ),
        (
            Fault::Drop("/dagRuns?limit=2&offset=2"),
            "dagRuns?limit=2&offset=2 (page 2 of DAG runs): the answer broke off",
        ),
        (
            Fault::Drop("/export/tries?limit=2&offset=0"),
            "(page 1 of tries): the answer broke off",
        ),
        (
            Fault::TotalMoves("/dagRuns"),
            "(page 2 of DAG runs): total_entries changed from 3 to 4",
        ),
        (
            Fault::NegativeTry("/export/tries"),
            "(page 1 of tries), entry 1: `try_number` is -2, below 0",
        ),
    ] {
        let server = Server::start(V2, fault);
        let message = error_text(&api(&server, Some(ApiVersion::V2), Some(2)), dag);
        assert!(message.contains(wanted), "{message}");
        assert!(
            message.contains(&server.base) && message.contains("page "),
            "{message}"
        );
        assert!(message.contains("incomplete input"), "{message}");
        assert!(!message.contains(PASSWORD), "{message}");
    }
}

#[test]
fn unreachable_server_is_an_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let api = AirflowApi::new(
        &format!("http://127.0.0.1:{port}"),
        Some(ApiVersion::V2),
        Some("admin".into()),
        Some(PASSWORD.into()),
        None,
        None,
    )
    .unwrap()
    .with_retry(QUICK);
    let message = read_api(&api, &Filter::default()).unwrap_err().to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{port}")) && message.contains("cannot connect"),
        "{message}"
    );
}

/// The fixture's config with `[airflow] api = …` instead of the metadata database.
fn api_scenario(version: &str, server: &Server, extra: &str) -> Scenario {
    let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
    scenario.edit(
        "onceonly.toml",
        "url = \"sqlite:///airflow.db\"",
        &format!(
            "api = \"{}\"\nusername = \"admin\"\npassword_env = \"ONCEONLY_TEST_AIRFLOW_PASSWORD\"\nbackoff = \"50ms\"\n{extra}",
            server.base
        ),
    );
    scenario
}

fn audit(scenario: &Scenario, password: &str, args: &[&str]) -> Output {
    let config = scenario.config();
    Command::new(env!("CARGO_BIN_EXE_onceonly"))
        .args([
            "audit",
            "--config",
            config.to_str().unwrap(),
            "--format",
            "json",
        ])
        .args(args)
        .env_remove("ONCEONLY_CONFIG")
        .env("NO_COLOR", "1")
        .env("ONCEONLY_TEST_AIRFLOW_PASSWORD", password)
        .output()
        .unwrap()
}

#[test]
fn audit_through_the_api_finds_what_the_database_audit_finds() {
    for version in [V2, V1] {
        let server = Server::start(version, Fault::None);
        let scenario = api_scenario(version, &server, "");
        let through_api = audit(&scenario, PASSWORD, &[]);
        assert_eq!(
            through_api.status.code(),
            Some(1),
            "{}",
            stderr(&through_api)
        );
        let database = crate::scenario::onceonly(&[
            "audit",
            "--config",
            fixtures()
                .join("airflow/out")
                .join(version)
                .join("onceonly.toml")
                .to_str()
                .unwrap(),
            "--format",
            "json",
        ]);
        let (api, db): (Value, Value) = (
            serde_json::from_slice(&through_api.stdout).unwrap(),
            serde_json::from_slice(&database.stdout).unwrap(),
        );
        assert_eq!(
            api["summary"]["by_rule"], db["summary"]["by_rule"],
            "{version}"
        );
        assert_eq!(
            api["coverage"]["tries"], db["coverage"]["tries"],
            "{version}"
        );
        assert_eq!(
            api["coverage"]["interval_basis"], db["coverage"]["interval_basis"],
            "{version}"
        );
        let codes = |report: &Value| -> Vec<(String, String)> {
            report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (f["code"].to_string(), f["op_key"].to_string()))
                .collect()
        };
        assert_eq!(codes(&api), codes(&db), "{version}");
        let text = format!("{}{}", stdout(&through_api), stderr(&through_api));
        assert!(
            text.contains(&server.base),
            "the report names the API source"
        );
        assert!(
            !text.contains(PASSWORD),
            "the password is not in the report"
        );
    }
}

#[test]
fn audit_with_a_wrong_password_exits_2_without_printing_it() {
    let planted = "Wrong-But-Secret-8812";
    let server = Server::start(V2, Fault::None);
    let scenario = api_scenario(V2, &server, "api_version = \"v2\"\n");
    let output = audit(&scenario, planted, &[]);
    assert_eq!(output.status.code(), Some(2));
    let text = format!("{}{}", stdout(&output), stderr(&output));
    assert!(
        text.contains("401") && text.contains(&server.base),
        "{text}"
    );
    assert!(!text.contains(planted), "{text}");
    // A dropped connection mid-listing: exit 2, never a report over part of the runs.
    let server = Server::start(V2, Fault::Drop("/tries?limit=100&offset=0"));
    let scenario = api_scenario(V2, &server, "");
    let output = audit(&scenario, PASSWORD, &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stdout(&output).is_empty());
    assert!(
        stderr(&output).contains("incomplete input"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn config_needs_exactly_one_airflow_source() {
    let server = Server::start(V2, Fault::None);
    let scenario = api_scenario(V2, &server, "url = \"sqlite:///airflow.db\"\n");
    let output = audit(&scenario, PASSWORD, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("exactly one of"),
        "{}",
        stderr(&output)
    );

    let scenario = Scenario::copy_of(&format!("airflow/out/{V2}"));
    scenario.edit(
        "onceonly.toml",
        "url = \"sqlite:///airflow.db\"",
        "url = \"sqlite:///airflow.db\"\nusername = \"admin\"",
    );
    let output = audit(&scenario, PASSWORD, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("needs `api`"),
        "{}",
        stderr(&output)
    );

    let scenario = api_scenario(V2, &server, "page_size = 500\n");
    let output = audit(&scenario, PASSWORD, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("at most 100"),
        "{}",
        stderr(&output)
    );
}

/// Reads one DAG through a server with `fault`, and checks it equals the database's read.
fn read_through(fault: Fault, retry: RetryPolicy) -> (Server, Duration) {
    let server = Server::start(V2, fault);
    let dag = "onceonly_a_stable_key";
    let filter = Filter {
        dag: Some(dag.into()),
        ..Filter::default()
    };
    let started = Instant::now();
    let from_api = read_api(
        &api(&server, Some(ApiVersion::V2), None).with_retry(retry),
        &filter,
    )
    .unwrap_or_else(|err| panic!("{err}"));
    let took = started.elapsed();
    assert_same_attempts(&from_api, &read_db(V2, Some(dag)), "after retries");
    (server, took)
}

/// How often the server saw a request whose target ends with `end`.
fn requests_to(server: &Server, end: &str) -> usize {
    server
        .answers()
        .iter()
        .filter(|(_, target, _)| target.ends_with(end))
        .count()
}

const RUNS: &str = "/dags/onceonly_a_stable_key/dagRuns?limit=100&offset=0";

#[test]
fn rate_limits_and_unavailable_answers_wait_as_retry_after_says_in_every_form() {
    // 429 or 503 on the run listing, once, with `Retry-After` in seconds and in each HTTP
    // date form; the read waits that long and then reads everything.
    let cases = [
        (429, RetryAfter::Seconds(1)),
        (429, RetryAfter::ImfFixdate(2)),
        (503, RetryAfter::Rfc850(2)),
        (503, RetryAfter::Asctime(2)),
    ];
    std::thread::scope(|scope| {
        for (status, retry_after) in cases {
            scope.spawn(move || {
                let fault = Fault::Status {
                    end: RUNS,
                    status,
                    retry_after: Some(retry_after),
                    times: 1,
                };
                // A backoff far longer than any Retry-After: only the header explains a
                // short wait.
                let retry = RetryPolicy {
                    backoff: Duration::from_secs(30),
                    ..QUICK
                };
                let (server, took) = read_through(fault, retry);
                assert_eq!(requests_to(&server, RUNS), 2, "{retry_after:?}");
                // A date has whole seconds: a date 2 s ahead is 1 to 2 s ahead when read.
                assert!(
                    took >= Duration::from_millis(900) && took < Duration::from_secs(10),
                    "{retry_after:?}: {took:?}"
                );
            });
        }
    });
}

#[test]
fn server_errors_and_timeouts_are_retried_with_backoff() {
    let tries = "/taskInstances/export/tries?limit=100&offset=0";
    for fault in [
        Fault::Status {
            end: tries,
            status: 500,
            retry_after: None,
            times: 2,
        },
        Fault::Status {
            end: "/api/v2/version",
            status: 502,
            retry_after: None,
            times: 1,
        },
        Fault::Slow {
            end: RUNS,
            millis: 1500,
            times: 1,
        },
    ] {
        let retry = RetryPolicy {
            timeout: Duration::from_millis(500),
            ..QUICK
        };
        let (server, _) = read_through(fault, retry);
        assert!(
            server.answers().iter().any(|(_, _, how)| *how == "fault")
                || matches!(fault, Fault::Slow { .. }),
            "the fault struck"
        );
        if let Fault::Slow { end, .. } = fault {
            assert_eq!(
                requests_to(&server, end),
                2,
                "the slow request was sent again"
            );
        }
    }
}

#[test]
fn retries_and_deadline_run_out_naming_the_page() {
    let dag = "onceonly_a_stable_key";
    // Always 503: three retries, then the page is named.
    let server = Server::start(
        V2,
        Fault::Status {
            end: RUNS,
            status: 503,
            retry_after: None,
            times: usize::MAX,
        },
    );
    let message = error_text(&api(&server, Some(ApiVersion::V2), None), dag);
    assert!(
        message.contains(&format!(
            "GET {}/api/v2{RUNS} (page 1 of DAG runs): HTTP 503 Service Unavailable; gave up after 4 tries",
            server.base
        ))
            && message.contains("incomplete input"),
        "{message}"
    );
    assert_eq!(requests_to(&server, RUNS), 4);
    // Told to come back in a minute, with a deadline of two seconds: no waiting in vain.
    let server = Server::start(
        V2,
        Fault::Status {
            end: RUNS,
            status: 429,
            retry_after: Some(RetryAfter::Seconds(60)),
            times: usize::MAX,
        },
    );
    let started = Instant::now();
    let message = error_text(
        &api(&server, Some(ApiVersion::V2), None).with_retry(RetryPolicy {
            deadline: Duration::from_secs(2),
            ..QUICK
        }),
        dag,
    );
    assert!(
        message.contains("HTTP 429 Too Many Requests; waiting 60.0s more would pass the deadline of 2.0s (deadline)"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn the_airflow_retry_keys_reach_the_audit() {
    // `[airflow] retries` bounds the audit's read: exit 2, naming the page, no report.
    let server = Server::start(
        V2,
        Fault::Status {
            end: "/tries?limit=100&offset=0",
            status: 503,
            retry_after: None,
            times: usize::MAX,
        },
    );
    let scenario = api_scenario(
        V2,
        &server,
        "retries = 1\ntimeout = \"5s\"\ndeadline = \"1m\"\n",
    );
    let output = audit(&scenario, PASSWORD, &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stdout(&output).is_empty());
    let err = stderr(&output);
    assert!(
        err.contains("HTTP 503")
            && err.contains("gave up after 2 tries")
            && err.contains("(page 1 of tries)"),
        "{err}"
    );
    // Two 503s on the run listing are outlasted with the default of five retries.
    let server = Server::start(
        V2,
        Fault::Status {
            end: "/dags/~/dagRuns?limit=100&offset=0",
            status: 503,
            retry_after: Some(RetryAfter::Seconds(0)),
            times: 2,
        },
    );
    let output = audit(&api_scenario(V2, &server, ""), PASSWORD, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
}

// ---------------------------------------------------------------------------------------
// A hostile API server: waits past any clock, redirects, echoed credentials.

/// `/version` answered as `version` would (`v1`: 2.10.5, `v2`: 3.3.2), everything else as
/// `rest` says.
fn airflow_that(
    version: ApiVersion,
    rest: impl Fn(&crate::loopback::Request) -> Reply + Send + Sync + 'static,
) -> Scripted {
    let (prefix, number) = match version {
        ApiVersion::V1 => ("/api/v1/version", "2.10.5"),
        ApiVersion::V2 => ("/api/v2/version", "3.3.2"),
    };
    Scripted::start(move |request| {
        if request.target() == prefix {
            Reply::json("200 OK", format!(r#"{{"version":"{number}"}}"#))
        } else {
            rest(request)
        }
    })
}

#[test]
fn a_retry_after_past_any_clock_gives_up_at_the_deadline() {
    for wait in [
        "18446744073709551615",
        "9223372036854775807",
        "Fri, 31 Dec 9999 23:59:59 GMT",
    ] {
        let server = airflow_that(ApiVersion::V2, move |_| {
            Reply::json("429 Too Many Requests", r#"{"detail":"slow down"}"#)
                .header("Retry-After", wait)
        });
        let api = AirflowApi::new(&server.base, None, None, None, Some(TOKEN.into()), None)
            .unwrap()
            .with_retry(QUICK);
        let message = error_text(&api, "onceonly_a_stable_key");
        assert!(
            message.contains(RUNS)
                && message.contains("HTTP 429")
                && message.contains("would pass the deadline of 60.0s (deadline)"),
            "{wait}: {message}"
        );
    }
}

#[test]
fn a_redirect_to_another_server_is_refused_naming_both() {
    let elsewhere =
        Scripted::start(|_| Reply::json("200 OK", r#"{"dag_runs":[],"total_entries":0}"#));
    let target = elsewhere.base.clone();
    let server = airflow_that(ApiVersion::V2, move |request| {
        Reply::json("302 Found", "").header("Location", format!("{target}{}", request.target()))
    });
    let api = AirflowApi::new(&server.base, None, None, None, Some(TOKEN.into()), None)
        .unwrap()
        .with_retry(QUICK);
    let message = error_text(&api, "onceonly_a_stable_key");
    assert!(
        message.contains(&format!("GET {}/api/v2{RUNS}", server.base))
            && message.contains(&format!("redirected to {}/api/v2{RUNS}", elsewhere.base))
            && message.contains("another origin"),
        "{message}"
    );
    assert!(
        elsewhere.requests().is_empty(),
        "{:?}",
        elsewhere.requests()
    );
}

#[test]
fn a_401_that_echoes_the_credentials_shows_none_of_them() {
    let echo = |request: &crate::loopback::Request| {
        let sent = request.header("authorization").unwrap_or("").to_string();
        Reply::json(
            "401 Unauthorized",
            serde_json::json!({ "detail": format!("{sent} is not accepted") }).to_string(),
        )
    };
    // 2.x basic auth: base64("admin:Planted-Passw0rd-7f3a") is what the header carries.
    let encoded = base64(&format!("admin:{PASSWORD}"));
    let server = airflow_that(ApiVersion::V1, echo);
    let api = AirflowApi::new(
        &server.base,
        Some(ApiVersion::V1),
        Some("admin".into()),
        Some(PASSWORD.into()),
        None,
        None,
    )
    .unwrap()
    .with_retry(QUICK);
    let message = error_text(&api, "onceonly_a_stable_key");
    assert!(message.contains("401"), "{message}");
    assert!(
        !message.contains(&encoded) && !message.contains(PASSWORD),
        "{message}"
    );
    // 3.x: the JWT that /auth/token handed out is a credential onceonly sends as well.
    const SESSION: &str = "eyJhbGciOi.session-jwt-3c9f.never-print";
    let server = airflow_that(ApiVersion::V2, move |request| {
        if request.target() == "/auth/token" {
            Reply::json("201 Created", format!(r#"{{"access_token":"{SESSION}"}}"#))
        } else {
            echo(request)
        }
    });
    let api = AirflowApi::new(
        &server.base,
        None,
        Some("admin".into()),
        Some(PASSWORD.into()),
        None,
        None,
    )
    .unwrap()
    .with_retry(QUICK);
    let message = error_text(&api, "onceonly_a_stable_key");
    assert!(message.contains("401"), "{message}");
    assert!(
        server
            .requests()
            .iter()
            .any(|request| request.header("authorization") == Some(&format!("Bearer {SESSION}"))),
        "the session token was sent"
    );
    assert!(!message.contains(SESSION), "{message}");
}

/// The DAG the fixtures schedule in Europe/Berlin across the end of summer time.
const BERLIN: &str = "onceonly_i_berlin_local_date";
const BERLIN_KEY: &str = "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z}\"";

/// An audit's JSON report and its verdicts (NDJSON lines, sorted).
fn report_and_verdicts(output: &Output, verdicts: &std::path::Path) -> (Value, Vec<Value>) {
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("a JSON report: {}", stderr(output)));
    let mut lines: Vec<Value> = std::fs::read_to_string(verdicts)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    lines.sort_by_key(|line| line.to_string());
    (report, lines)
}

/// What a finding says about which interval, key and tries: the fields that do not name the
/// source it was read from.
fn finding_facts(report: &Value) -> Vec<Value> {
    let mut facts: Vec<Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            serde_json::json!([
                f["code"],
                f["dag_id"],
                f["interval"],
                f["op_key"],
                f["verdict"]
            ])
        })
        .collect();
    facts.sort_by_key(|fact| fact.to_string());
    facts
}

#[test]
fn through_the_api_a_dags_zone_is_unknown_and_said_and_once_named_the_answers_agree() {
    for version in [V2, V1] {
        // What a real api-server answers for the Berlin DAG's `timezone` (recorded): the
        // server's default zone, not the zone its serialized DAG holds. So the API cannot tell
        // onceonly a DAG's zone.
        let details = std::fs::read_dir(api_dir(version))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                name.contains(BERLIN) && name.contains("details")
            })
            .expect("the Berlin DAG's details were recorded");
        let details: Value = serde_json::from_slice(&std::fs::read(details).unwrap()).unwrap();
        assert_eq!(details["timezone"], "UTC", "{version}");
        let from_db = read_db(version, Some(BERLIN));
        assert_eq!(
            cells(&from_db, "dag_timezone")[0].as_deref(),
            Some("Europe/Berlin")
        );

        // Audited through the API as the config stands, the keys are formatted in UTC and the
        // report says so, naming the DAG; through the database it does not.
        let server = Server::start(version, Fault::None);
        let scenario = api_scenario(version, &server, "");
        let dir = tempfile::tempdir().unwrap();
        let (api_verdicts, db_verdicts) =
            (dir.path().join("api.ndjson"), dir.path().join("db.ndjson"));
        let database = Scenario::copy_of(&format!("airflow/out/{version}"));
        // Each scenario audited, the API's and the database's: report and verdicts.
        let both = |scenario: &Scenario, database: &Scenario| {
            let through_api = audit(
                scenario,
                PASSWORD,
                &["--verdicts", api_verdicts.to_str().unwrap()],
            );
            let output = database.audit(&[
                "--format",
                "json",
                "--verdicts",
                db_verdicts.to_str().unwrap(),
            ]);
            (
                report_and_verdicts(&through_api, &api_verdicts),
                report_and_verdicts(&output, &db_verdicts),
            )
        };
        let ((report, _), (db_report, _)) = both(&scenario, &database);
        let warnings = report["coverage"]["warnings"].to_string();
        assert!(
            warnings.contains("time zone unknown for") && warnings.contains(BERLIN),
            "{version}: {warnings}"
        );
        assert!(
            !db_report["coverage"]["warnings"]
                .to_string()
                .contains("time zone unknown")
        );

        // With the zone named on the operation, the API and the database give the same
        // findings and the same verdicts for every try, the Berlin DAG's four intervals across
        // its DST change among them.
        let named = format!("{BERLIN_KEY}\ntimezone = \"Europe/Berlin\"");
        scenario.edit("onceonly.toml", BERLIN_KEY, &named);
        database.edit("onceonly.toml", BERLIN_KEY, &named);
        let ((api_report, api_lines), (db_report, db_lines)) = both(&scenario, &database);
        // The other DAGs' templates format in their DAG's zone too, which the API does not
        // give either: they are still named, the Berlin DAG no more.
        let warnings = api_report["coverage"]["warnings"].to_string();
        assert!(
            warnings.contains("time zone unknown for") && !warnings.contains(BERLIN),
            "{version}: {warnings}"
        );
        assert_eq!(
            finding_facts(&api_report),
            finding_facts(&db_report),
            "{version}"
        );
        assert_eq!(api_lines, db_lines, "{version}");
        let berlin: Vec<&Value> = api_lines
            .iter()
            .filter(|line| line["dag_id"] == BERLIN)
            .collect();
        assert_eq!(berlin.len(), 4, "{version}: {berlin:?}");
        assert!(
            berlin.iter().all(|line| line["verdict"] == "committed"),
            "{version}: {berlin:?}"
        );
    }
}
