//! Hostile strings from the provider and from Airflow, through every output format: nothing
//! reaches a terminal as an escape sequence, a spreadsheet as a formula, a browser as markup or
//! a database as SQL; machine formats keep every string exactly. And a hostile provider's
//! answers (huge pages, gzip bombs, endless listings, a server that never answers) end in a
//! clear error, not in memory exhaustion or a hang.

use std::path::Path;

use onceonly::commands::mock_provider::{self, Fault, MockOptions, MockPagination};
use onceonly::config::{Config, Source};
use onceonly::error::Error;
use onceonly::sources::provider_http::{self, ProviderApi, Window};
use serde_json::{Value, json};

use crate::loopback::{Reply, Scripted};
use crate::scenario::{Scenario, onceonly, stderr, stdout};

/// A run id that is a spreadsheet formula, a terminal colour, markup and SQL at once.
const RUN_ID: &str =
    "=cmd|'/c calc'!A1\u{1b}[31m<script>alert(1)</script>'); DROP TABLE x; --\u{202e}dier";
/// A conf value (it reaches the key through `{conf.region}`): an OSC title, a NUL, Unicode.
const REGION: &str = "+SUM(1)\u{1b}]0;title\u{7}<img src=x onerror=alert(2)>\u{0}é😀\u{2066}";
/// The provider's id: `@`, a screen clear, backspace, DEL, a C1 CSI, a line break.
const EXTERNAL_ID: &str =
    "@SUM(A1)\u{1b}[2J\u{8}\u{7f}\u{9b}31m\r\n<img src=x onerror=alert(3)>'\"\\";
/// The provider's status.
const STATUS: &str = "-2+3\u{1b}[5m<b>\u{202d}blink";
/// Airflow's hostname of a worker (a hyperlink escape).
const HOSTNAME: &str = "\u{1b}]8;;http://evil.example/\u{7}worker\u{1b}]8;;\u{7}";

/// Every hostile fragment, to look for in outputs.
const ESCAPES: [char; 12] = [
    '\u{1b}', '\u{7}', '\u{8}', '\u{7f}', '\u{9b}', '\u{0}', '\r', '\u{202e}', '\u{202d}',
    '\u{2066}', '\u{202c}', '\u{85}',
];

fn long_external_id() -> String {
    format!("{EXTERNAL_ID}{}", "x".repeat(5000))
}

fn key() -> String {
    format!("orders:{RUN_ID}:{REGION}")
}

/// fixtures/rules/L001/fires (a lost response nobody recovered), with hostile run id, conf,
/// key, external id, status and hostname; the journal in a SQLite table beside a table `x`
/// that the SQL fragments name.
fn hostile_scenario() -> Scenario {
    let scenario = Scenario::of_rules("L001/fires");
    let key = key();
    let conf = json!({ "region": REGION }).to_string();

    let attempts_csv = scenario.read("attempts.csv");
    let mut attempts = csv::Reader::from_reader(attempts_csv.as_bytes());
    let header = attempts.headers().unwrap().clone();
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(&header).unwrap();
    for record in attempts.records() {
        let record = record.unwrap();
        let row: Vec<String> = header
            .iter()
            .zip(record.iter())
            .map(|(name, value)| match name {
                "run_id" => RUN_ID.to_string(),
                "conf" => conf.clone(),
                "hostname" => HOSTNAME.to_string(),
                _ => value.to_string(),
            })
            .collect();
        out.write_record(&row).unwrap();
    }
    scenario.write(
        "attempts.csv",
        &String::from_utf8(out.into_inner().unwrap()).unwrap(),
    );

    let provider = json!({
        "external_id": long_external_id(), "op_key": key, "created_at": "2026-11-02T00:05:30Z",
        "status": STATUS, "payload_hash": "sha256:5e1f0c2a",
        "interval_start": "2026-11-01T00:00:00Z", "interval_end": "2026-11-02T00:00:00Z",
    });
    scenario.write("provider.ndjson", &format!("{provider}\n"));

    let journal = scenario.read("journal.csv");
    let url = format!(
        "sqlite://{}?mode=rwc",
        scenario.path("journal.db").display()
    );
    runtime().block_on(async {
        use sqlx::Connection;
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(include_str!("../queries/journal/ddl/sqlite.sql"))
            .execute(&mut db)
            .await
            .unwrap();
        sqlx::raw_sql("CREATE TABLE x (canary TEXT); INSERT INTO x VALUES ('alive');")
            .execute(&mut db)
            .await
            .unwrap();
        let mut rows = csv::Reader::from_reader(journal.as_bytes());
        for row in rows.records() {
            let row = row.unwrap();
            sqlx::query("INSERT INTO onceonly_journal (op_key, dag_id, task_id, map_index, run_id, try_number, phase, payload_hash, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(&key)
                .bind(row[1].to_string())
                .bind(row[2].to_string())
                .bind(row[3].parse::<i64>().unwrap())
                .bind(RUN_ID)
                .bind(row[5].parse::<i64>().unwrap())
                .bind(row[6].to_string())
                .bind(row[8].to_string())
                .bind(row[9].to_string())
                .execute(&mut db)
                .await
                .unwrap();
        }
    });
    scenario.edit(
        "onceonly.toml",
        "snapshot = \"journal.csv\"",
        "url = \"sqlite:///journal.db\"\ntable = \"onceonly_journal\"",
    );
    scenario.edit(
        "onceonly.toml",
        "snapshot = \"provider.csv\"",
        "snapshot = \"provider.ndjson\"",
    );
    scenario.edit(
        "onceonly.toml",
        "key = \"orders:{interval_start:%Y-%m-%d}\"",
        "key = \"orders:{run_id}:{conf.region}\"",
    );
    scenario
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Output meant for a terminal: no control character but a newline (and tabs), no bidi
/// override, none of the hostile fragments raw.
fn assert_terminal_safe(what: &str, text: &str) {
    let bad = |ch: char| {
        (ch.is_control() && ch != '\n' && ch != '\t')
            || ESCAPES.contains(&ch)
            || matches!(ch, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if let Some((at, ch)) = text.char_indices().find(|(_, ch)| bad(*ch)) {
        let around: String = text[at..].chars().take(60).collect();
        let before: String = text[..at].chars().rev().take(60).collect();
        let before: String = before.chars().rev().collect();
        panic!(
            "{what}: a raw {ch:?} reaches the terminal: …{}{}…",
            before.escape_debug(),
            around.escape_debug()
        );
    }
}

/// Every string in a JSON document.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => {
            for (name, item) in map {
                out.push(name.clone());
                strings(item, out);
            }
        }
        _ => {}
    }
}

/// The document holds each of `exact` as one whole string, unchanged.
fn assert_round_trips(what: &str, document: &Value, exact: &[&str]) {
    let mut all = Vec::new();
    strings(document, &mut all);
    for wanted in exact {
        assert!(
            all.iter().any(|text| text == wanted),
            "{what}: {:?} does not come back exactly",
            wanted.escape_debug().to_string()
        );
    }
}

/// The CSV holds each of `exact` as one whole cell, unchanged but for the quote that defuses a
/// leading formula character.
fn assert_csv_keeps(what: &str, records: &[csv::StringRecord], exact: &[&str]) {
    for wanted in exact {
        let cell = if wanted.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            format!("'{wanted}")
        } else {
            wanted.to_string()
        };
        assert!(
            records.iter().flat_map(|r| r.iter()).any(|c| c == cell),
            "{what}: {:?} is not a cell",
            cell.escape_debug().to_string()
        );
    }
}

/// CSV cells a spreadsheet would run: none may start with = + - @ (or tab, CR).
fn assert_csv_defused(what: &str, text: &str) -> Vec<csv::StringRecord> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes());
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert!(records.len() > 1, "{what}: no rows:\n{text}");
    for record in &records {
        for cell in record {
            // A number is not a formula (a map index of -1 stays a number).
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']) || cell.parse::<f64>().is_ok(),
                "{what}: the cell {:?} is a formula",
                cell.escape_debug().to_string()
            );
        }
    }
    records
}

fn run_ok(output: &std::process::Output, what: &str) {
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{what}: exit {:?}: {}",
        output.status.code(),
        stderr(output)
    );
    assert_terminal_safe(&format!("{what} (stderr)"), &stderr(output));
}

#[test]
fn hostile_strings_pass_every_audit_format_defused() {
    let scenario = hostile_scenario();
    let external_id = long_external_id();
    let key = key();
    // The hostile values every machine format of the audit carries, each checked in each
    // format below. The provider's status is in none of them (trace shows it, checked there).
    let exact = [RUN_ID, external_id.as_str(), key.as_str()];

    // The report itself: one lost response, naming the hostile object.
    let output = scenario.audit(&["--format", "json"]);
    run_ok(&output, "audit json");
    let report: Value = serde_json::from_slice(&output.stdout).expect("the JSON report parses");
    assert_eq!(
        report["summary"]["by_rule"]["L001"],
        1,
        "{}",
        stdout(&output)
    );
    assert_round_trips("audit json", &report, &exact);

    let output = scenario.audit(&["--format", "ndjson"]);
    run_ok(&output, "audit ndjson");
    let mut lines = Vec::new();
    for line in stdout(&output).lines() {
        lines.push(serde_json::from_str::<Value>(line).expect("each NDJSON line parses"));
    }
    assert_round_trips("audit ndjson", &Value::Array(lines), &exact);

    for format in ["table", "markdown"] {
        let output = scenario.audit(&["--format", format]);
        run_ok(&output, format);
        let text = stdout(&output);
        assert_terminal_safe(&format!("audit {format}"), &text);
        assert!(text.contains("L001"), "{format}: {text}");
    }
    // Markup is kept as text: every `<` behind a backslash.
    let markdown = stdout(&scenario.audit(&["--format", "markdown"]));
    assert!(markdown.contains("\\<script\\>"), "{markdown}");
    assert!(
        !markdown.replace("\\<", "").contains('<'),
        "markdown carries raw markup"
    );

    let output = scenario.audit(&["--format", "csv"]);
    run_ok(&output, "audit csv");
    let records = assert_csv_defused("audit csv", &stdout(&output));
    assert_csv_keeps("audit csv", &records, &exact);

    // Verdicts, as CSV and as NDJSON.
    let verdicts_csv = scenario.path("verdicts.csv");
    let verdicts_ndjson = scenario.path("verdicts.ndjson");
    for path in [&verdicts_csv, &verdicts_ndjson] {
        let output = scenario.audit(&["--verdicts", path.to_str().unwrap()]);
        run_ok(&output, "audit --verdicts");
    }
    let text = scenario.read("verdicts.csv");
    let records = assert_csv_defused("verdicts csv", &text);
    assert_csv_keeps("verdicts csv", &records, &exact);
    let verdicts: Vec<Value> = scenario
        .read("verdicts.ndjson")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each verdict line parses"))
        .collect();
    assert_round_trips("verdicts ndjson", &Value::Array(verdicts), &exact);

    // The plan in its three forms.
    for name in ["plan.json", "plan.md", "plan.txt"] {
        let path = scenario.path(name);
        let output = scenario.audit(&["--plan", path.to_str().unwrap()]);
        run_ok(&output, name);
    }
    let plan: Value = serde_json::from_str(&scenario.read("plan.json")).expect("plan JSON");
    assert_round_trips("plan json", &plan, &exact);
    for name in ["plan.md", "plan.txt"] {
        let text = scenario.read(name);
        assert_terminal_safe(name, &text);
        if name == "plan.md" {
            assert!(
                !text.replace("\\<", "").contains('<'),
                "{name} carries raw markup"
            );
        }
    }

    // Metrics: Prometheus text, every line a comment or `name{labels} value`.
    let metrics = scenario.path("metrics.prom");
    let output = scenario.audit(&["--metrics", metrics.to_str().unwrap()]);
    run_ok(&output, "metrics");
    let text = scenario.read("metrics.prom");
    assert_terminal_safe("metrics", &text);
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "not a sample: {line:?}");
    }
}

#[test]
fn the_sql_script_inserts_exactly_the_hostile_values() {
    let scenario = hostile_scenario();
    let external_id = long_external_id();
    let key = key();
    let script_path = scenario.path("repair.sql");
    let output = scenario.audit(&["--sql", script_path.to_str().unwrap()]);
    run_ok(&output, "audit --sql");
    let script = scenario.read("repair.sql");
    assert!(script.is_ascii(), "every hostile value is written as hex");
    assert_eq!(script.matches("INSERT INTO").count(), 1, "{script}");
    assert!(!script.contains("DROP TABLE x"), "{script}");

    let url = format!("sqlite://{}", scenario.path("journal.db").display());
    let runtime = runtime();
    type Row = (String, String, String, Option<String>, i64);
    let read = || -> (Vec<Row>, Vec<String>, Vec<String>) {
        runtime.block_on(async {
            use sqlx::{Connection, Row as _};
            let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
            let rows = sqlx::query("SELECT op_key, run_id, phase, external_id, try_number FROM onceonly_journal ORDER BY rowid")
                .fetch_all(&mut db)
                .await
                .unwrap()
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)))
                .collect();
            let schema = sqlx::query("SELECT type || ' ' || name FROM sqlite_master ORDER BY name")
                .fetch_all(&mut db)
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            let canary = sqlx::query("SELECT canary FROM x")
                .fetch_all(&mut db)
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            (rows, schema, canary)
        })
    };
    let (before, schema_before, canary_before) = read();
    runtime.block_on(async {
        use sqlx::Connection;
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(script.clone()))
            .execute(&mut db)
            .await
            .unwrap();
    });
    let (after, schema_after, canary_after) = read();
    assert_eq!(schema_after, schema_before, "the script changed the schema");
    assert_eq!(canary_after, canary_before, "the script touched table x");
    assert_eq!(canary_after, ["alive"]);
    assert_eq!(after.len(), before.len() + 1, "exactly one row added");
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "existing rows untouched"
    );
    assert_eq!(
        after.last().unwrap(),
        &(
            key.clone(),
            RUN_ID.to_string(),
            // Written by onceonly: the reconciled phase, the journal mapping no phases.
            "reconciled".to_string(),
            Some(external_id.clone()),
            1
        ),
        "the hostile values came back changed"
    );
}

#[test]
fn trace_and_ttl_risk_show_hostile_strings_defused() {
    let scenario = hostile_scenario();
    let external_id = long_external_id();
    let config = scenario.config();
    let config = config.to_str().unwrap();
    let html = scenario.path("trace.html");
    let trace = |format: &str| {
        onceonly(&[
            "trace",
            "--config",
            config,
            "--dag",
            "orders",
            "--run-id",
            RUN_ID,
            "--format",
            format,
            "--html",
            html.to_str().unwrap(),
        ])
    };
    let output = trace("table");
    run_ok(&output, "trace table");
    let text = stdout(&output);
    assert_terminal_safe("trace table", &text);
    assert!(text.contains("worker"), "{text}");

    let output = trace("json");
    run_ok(&output, "trace json");
    let report: Value = serde_json::from_slice(&output.stdout).expect("trace JSON");
    assert_round_trips("trace json", &report, &[RUN_ID, &external_id, HOSTNAME]);
    // The provider's status reaches JSON only here, inside the text of the object's event.
    let mut texts = Vec::new();
    strings(&report, &mut texts);
    assert!(
        texts.iter().any(|text| text.contains(STATUS)),
        "trace json: the provider's status {:?} does not come back exactly",
        STATUS.escape_debug().to_string()
    );

    let page = scenario.read("trace.html");
    for raw in ["<script", "<img", "<b>-2+3"] {
        assert!(!page.contains(raw), "the HTML timeline carries raw {raw}");
    }
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the run id is shown, escaped"
    );
    for ch in ESCAPES {
        assert!(!page.contains(ch), "the HTML carries a raw {ch:?}");
    }

    for format in ["table", "json"] {
        let output = onceonly(&[
            "ttl-risk",
            "--config",
            config,
            "--dag",
            "orders",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-01",
            "--at",
            "2026-11-10T00:00:00Z",
            "--format",
            format,
        ]);
        run_ok(&output, &format!("ttl-risk {format}"));
        let text = stdout(&output);
        if format == "json" {
            let report: Value = serde_json::from_str(&text).expect("ttl-risk JSON");
            assert_round_trips("ttl-risk json", &report, &[&key()]);
        } else {
            assert_terminal_safe("ttl-risk table", &text);
        }
    }
}

#[test]
fn a_hostile_airflow_state_reaches_no_terminal() {
    let scenario = hostile_scenario();
    let state = "\u{1b}[31mfailed\u{7}\u{202e}";
    scenario.edit("attempts.csv", ",failed,", &format!(",{state},"));
    let output = scenario.audit(&[]);
    run_ok(&output, "audit");
    assert_terminal_safe("audit table", &stdout(&output));

    let config = scenario.config();
    let trace = |format: &str| {
        onceonly(&[
            "trace",
            "--config",
            config.to_str().unwrap(),
            "--dag",
            "orders",
            "--interval",
            "2026-11-01",
            "--format",
            format,
        ])
    };
    let output = trace("table");
    run_ok(&output, "trace table");
    let text = stdout(&output);
    assert_terminal_safe("trace table", &text);
    assert!(
        text.contains("\\u{1b}[31mfailed"),
        "the state is shown, defused: {text}"
    );
    let report: Value = serde_json::from_slice(&trace("json").stdout).expect("trace JSON");
    assert_round_trips("trace json", &report, &[state]);
}

// ---------------------------------------------------------------------------------------
// A hostile provider: limits, each with a clear error.

fn objects(count: usize) -> Vec<Value> {
    (0..count)
        .map(|n| {
            json!({
                "id": format!("exp_{n:04}"), "idempotency_key": format!("k{n}"),
                "created": 1_793_491_200 + 60 * n as i64, "status": "live",
            })
        })
        .collect()
}

fn listing_api(url: &str, extra: &str) -> ProviderApi {
    let text = format!(
        r#"[airflow]
snapshot = "a.csv"
[journal]
snapshot = "j.csv"
[provider]
url = "{url}"
pagination = "page"
page_size = 3
requests_per_second = 500
retries = 1
backoff = "10ms"
timeout = "5s"
deadline = "30s"
{extra}
[provider.fields]
external_id = "id"
op_key = "idempotency_key"
created_at = "created"
[[operation]]
dag_id = "*"
task_id = "export"
"#
    );
    // A key given in `extra` replaces the one above.
    let given = |line: &str| {
        line.split_once(" = ").is_some_and(|(key, _)| {
            !extra.contains(line) && extra.lines().any(|l| l.starts_with(&format!("{key} = ")))
        })
    };
    let text: String = text
        .lines()
        .filter(|line| !given(line))
        .map(|line| format!("{line}\n"))
        .collect();
    let config = Config::parse(&text, Path::new("/nowhere/onceonly.toml")).expect("config");
    match config.provider.source {
        Source::Listing(api) => *api,
        other => panic!("not a listing: {other:?}"),
    }
}

fn serve(count: usize, faults: &[&str]) -> mock_provider::MockProvider {
    let mut options = MockOptions::new(objects(count), MockPagination::Page);
    options.faults = faults.iter().map(|f| f.parse::<Fault>().unwrap()).collect();
    mock_provider::start(options, 0).unwrap()
}

fn refused(url: &str, extra: &str) -> String {
    match provider_http::list_blocking(&listing_api(url, extra), Window::unbounded()) {
        Err(Error::Incomplete { reason, .. }) => reason,
        Err(other) => panic!("not an incomplete listing: {other}"),
        Ok(listed) => panic!("listed {} objects", listed.provider.height()),
    }
}

#[test]
fn a_page_larger_than_max_page_bytes_is_refused_unread() {
    let mock = serve(7, &["huge@2=8"]);
    let started = std::time::Instant::now();
    let reason = refused(&mock.url(), "max_page_bytes = 1048576\nconcurrency = 1");
    assert!(
        reason.contains("page 2")
            && reason
                .contains("8388608 bytes, more than the 1048576 a page may have (max_page_bytes)"),
        "{reason}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_gzip_bomb_is_refused_as_it_unpacks() {
    // Within the limit the gzipped page is read like any other: the encoding is real.
    let mock = serve(7, &["gzip-bomb@1=2"]);
    let listed = provider_http::list_blocking(
        &listing_api(&mock.url(), "max_page_bytes = 4194304"),
        Window::unbounded(),
    )
    .expect("a 2 MiB gzipped page within a 4 MiB limit");
    assert_eq!(listed.provider.height(), 7);

    // 16 MiB unpacked from some 20 KiB on the wire: refused once 1 MiB has unpacked. The mock
    // compresses the page before it answers, which a loaded machine can make slower than the
    // listing's usual timeout: the timeout here is generous, so the refusal, not a timeout and a
    // clean retry, is what the test sees.
    let mock = serve(7, &["gzip-bomb@1=16"]);
    let reason = refused(
        &mock.url(),
        "max_page_bytes = 1048576\ntimeout = \"120s\"\ndeadline = \"300s\"",
    );
    assert!(
        reason.contains("page 1")
            && reason.contains("passed the 1048576 bytes a page may have (max_page_bytes)")
            && reason.contains("gzip"),
        "{reason}"
    );
    assert!(
        !reason.contains("gave up"),
        "a bomb is not retried: {reason}"
    );
}

#[test]
fn a_listing_past_max_objects_is_refused() {
    let mock = serve(20, &[]);
    let reason = refused(&mock.url(), "max_objects = 10\nconcurrency = 1");
    assert!(
        reason.contains("passed 10 objects (max_objects) before it ended"),
        "{reason}"
    );
}

#[test]
fn page_size_and_size_limits_are_checked_in_the_config() {
    let config = |extra: &str| {
        let text = format!(
            "[airflow]\nsnapshot = \"a.csv\"\n[journal]\nsnapshot = \"j.csv\"\n[provider]\nurl = \"http://127.0.0.1:9/x\"\npagination = \"page\"\n{extra}\n[[operation]]\ndag_id = \"*\"\ntask_id = \"export\"\n"
        );
        Config::parse(&text, Path::new("/nowhere/onceonly.toml"))
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default()
    };
    for (extra, needle) in [
        (
            "page_size = 100000",
            "page_size = 100000: use 1 to 10000 objects a page",
        ),
        ("page_size = 0", "page_size = 0: use 1 to 10000"),
        (
            "max_page_bytes = 10",
            "max_page_bytes = 10: a page needs at least 1024 bytes",
        ),
        ("max_objects = 0", "max_objects must be at least 1"),
        ("requests_per_second = 1e-300", "requests_per_second = "),
    ] {
        let message = config(extra);
        assert!(
            message.contains(needle) && message.contains("/nowhere/onceonly.toml"),
            "{extra}: {message}"
        );
    }
}

#[test]
fn a_provider_that_never_answers_times_out_in_plain_words() {
    let mock = serve(7, &["slow%1=3000"]);
    let started = std::time::Instant::now();
    let reason = refused(&mock.url(), "timeout = \"300ms\"");
    assert!(
        reason.contains("page 1")
            && reason.contains("timed out")
            && reason.contains("gave up after 2 tries"),
        "{reason}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

#[test]
fn journal_names_with_control_characters_are_refused() {
    for journal in [
        "url = \"sqlite:///j.db\"\ntable = \"journal\\u0000; DROP TABLE x\"",
        "url = \"sqlite:///j.db\"\ntable = \"journal\"\n[journal.columns]\nop_key = \"key\\u001b[31m\"",
    ] {
        let text = format!(
            "[airflow]\nsnapshot = \"a.csv\"\n[journal]\n{journal}\n[provider]\nsnapshot = \"p.csv\"\n[[operation]]\ndag_id = \"*\"\ntask_id = \"export\"\n"
        );
        let message = Config::parse(&text, Path::new("/nowhere/onceonly.toml"))
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(
            message.contains("holds a control character") && !message.contains('\u{0}'),
            "{journal}: {message}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// A hostile provider's headers: waits past any clock, redirects, echoed credentials.

/// `Retry-After` values no clock can add: u64::MAX and i64::MAX seconds, and the last date
/// HTTP can write.
const ENDLESS_WAITS: [&str; 3] = [
    "18446744073709551615",
    "9223372036854775807",
    "Fri, 31 Dec 9999 23:59:59 GMT",
];

fn always_429(retry_after: &'static str) -> Scripted {
    Scripted::start(move |_| {
        Reply::json("429 Too Many Requests", r#"{"detail":"slow down"}"#)
            .header("Retry-After", retry_after)
    })
}

#[test]
fn a_retry_after_past_any_clock_gives_up_at_the_deadline() {
    for wait in ENDLESS_WAITS {
        let server = always_429(wait);
        let started = std::time::Instant::now();
        let reason = refused(&server.base, "");
        assert!(
            reason.contains("page 1")
                && reason.contains("HTTP 429")
                && reason.contains("would pass the deadline of 30.0s (deadline)"),
            "{wait}: {reason}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));

        // The audit and doctor read the listing the same way: exit 2 in plain words.
        let scenario = crate::provider_http::listing_scenario(
            &server.base,
            MockPagination::Cursor,
            "sub_windows = 1",
        );
        let output = crate::provider_http::audit_in(&scenario, &[]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{wait}: {err}");
        assert!(
            err.contains("(deadline)") && !err.contains("panicked"),
            "{wait}: {err}"
        );
        let doctor = onceonly(&["doctor", "--config", scenario.config().to_str().unwrap()]);
        let text = format!("{}{}", stdout(&doctor), stderr(&doctor));
        assert_eq!(doctor.status.code(), Some(2), "{wait}: {text}");
        assert!(
            text.contains("PROBLEM provider:") && text.contains("(deadline)"),
            "{wait}: {text}"
        );
    }
}

/// A listing of two objects, as `listing_api`'s page pagination reads it: page 1 (of the
/// request `target`) has both, every later page none.
fn short_page(target: &str) -> String {
    let objects = if target.ends_with("page=1") {
        objects(2)
    } else {
        Vec::new()
    };
    json!({ "data": objects }).to_string()
}

#[test]
fn a_redirect_is_followed_within_the_origin_only() {
    // Same origin, a few hops: followed, and the listing read where it was sent.
    let server = Scripted::start(|request| match request.target() {
        target if target.starts_with("/moved/again") => Reply::json("200 OK", short_page(target)),
        target if target.starts_with("/moved") => Reply::json("307 Temporary Redirect", "").header(
            "Location",
            format!("/moved/again{}", &target["/moved".len()..]),
        ),
        target => Reply::json("302 Found", "").header("Location", format!("/moved{target}")),
    });
    let listed = provider_http::list_blocking(
        &listing_api(&format!("{}/v1/exports", server.base), ""),
        Window::unbounded(),
    )
    .expect("a listing moved on the same server");
    assert_eq!(listed.provider.height(), 2);
    // A page listing without a `total` is read twice, to see that it held still.
    assert!(
        server.requests().len() == 12 && server.requests()[2].target().starts_with("/moved/again"),
        "two pages, read twice, each redirected twice: {:?}",
        server.requests()
    );

    // Same origin, without end: refused once the count is passed, not followed for ever.
    let server = Scripted::start(|request| {
        Reply::json("302 Found", "").header("Location", format!("{}x", request.target()))
    });
    let reason = refused(&format!("{}/v1/exports", server.base), "");
    assert!(
        reason.contains("page 1") && reason.contains("more than 5 redirects"),
        "{reason}"
    );
    assert_eq!(
        server.requests().len(),
        6,
        "the first request and 5 redirects"
    );
}

#[test]
fn a_redirect_to_another_server_is_refused_and_the_secret_stays() {
    const SECRET: &str = "canary-redirect-5b1d-never-send";
    // The other server would list happily: following it would build a report from it.
    let elsewhere = Scripted::start(|_| Reply::json("200 OK", r#"{"data":[],"next_cursor":null}"#));
    let target = elsewhere.base.clone();
    let first = Scripted::start(move |request| {
        Reply::json("302 Found", "").header("Location", format!("{target}{}", request.target()))
    });
    let url = format!("{}/v1/exports", first.base);
    let scenario =
        crate::provider_http::listing_scenario(&url, MockPagination::Cursor, "sub_windows = 1");
    scenario.edit(
        "onceonly.toml",
        "[provider.fields]",
        "[provider.auth]\nkind = \"header\"\nheader = \"X-Api-Key\"\nenv = \"ONCEONLY_TEST_PROVIDER_SECRET\"\n\n[provider.fields]",
    );
    let output =
        crate::provider_http::audit_in(&scenario, &[("ONCEONLY_TEST_PROVIDER_SECRET", SECRET)]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(stdout(&output).is_empty(), "no report: {}", stdout(&output));
    assert!(
        err.contains(&format!("GET {url}?"))
            && err.contains(&format!("redirected to {}/v1/exports?", elsewhere.base))
            && err.contains("another origin"),
        "both URLs named: {err}"
    );
    assert!(
        first.requests()[0].header("x-api-key") == Some(SECRET),
        "the configured server gets the secret"
    );
    assert!(
        elsewhere
            .requests()
            .iter()
            .all(|request| !request.head.contains(SECRET)),
        "the other server never gets the secret: {:?}",
        elsewhere.requests()
    );
    assert!(!err.contains(SECRET));
}

/// Every run of 12 characters of `encoded`: a part of a secret's encoding long enough to
/// carry some of the secret.
fn pieces(encoded: &str) -> Vec<&str> {
    (0..=encoded.len().saturating_sub(12))
        .map(|at| &encoded[at..at + 12])
        .collect()
}

#[test]
fn a_401_that_echoes_the_authorization_header_shows_no_form_of_the_secret() {
    const SECRET: &str = "canary-basic-9e2c-never-print";
    // base64("svc:canary-basic-9e2c-never-print"), as the Authorization header carries it.
    const ENCODED: &str = "c3ZjOmNhbmFyeS1iYXNpYy05ZTJjLW5ldmVyLXByaW50";
    // Echoed at the start of the body, and where the shown part of the body is cut off.
    for padding in [0, 90] {
        let server = Scripted::start(move |request| {
            let sent = request.header("authorization").unwrap_or("").to_string();
            Reply::json(
                "401 Unauthorized",
                json!({ "detail": format!("{}{sent} is not accepted", "x".repeat(padding)) })
                    .to_string(),
            )
        });
        let scenario = crate::provider_http::listing_scenario(
            &server.base,
            MockPagination::Cursor,
            "sub_windows = 1",
        );
        scenario.edit(
            "onceonly.toml",
            "[provider.fields]",
            "[provider.auth]\nkind = \"basic\"\nuser = \"svc\"\nenv = \"ONCEONLY_TEST_PROVIDER_SECRET\"\n\n[provider.fields]",
        );
        let output =
            crate::provider_http::audit_in(&scenario, &[("ONCEONLY_TEST_PROVIDER_SECRET", SECRET)]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{err}");
        assert_eq!(
            server.requests()[0].header("authorization"),
            Some(format!("Basic {ENCODED}").as_str()),
            "the test's encoding is the one sent"
        );
        assert!(err.contains("HTTP 401"), "{err}");
        for text in [err.clone(), stdout(&output)] {
            assert!(!text.contains(SECRET), "{text}");
            for piece in pieces(ENCODED) {
                assert!(
                    !text.contains(piece),
                    "{piece} of the encoding shown: {text}"
                );
            }
        }
    }
}
