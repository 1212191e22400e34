//! The provider listing client against the mock provider on loopback: every pagination style,
//! the created-at window, and every fault either recovered from or reported as incomplete.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use onceonly::commands::mock_provider::{self, Fault, MockOptions, MockPagination, MockProvider};
use onceonly::config::{Config, Source};
use onceonly::error::Error;
use onceonly::sources::provider_http::{self, Listed, ProviderApi, Window};
use serde_json::{Value, json};

use crate::scenario::{Scenario, fixtures, stderr, stdout};

const STYLES: [MockPagination; 7] = [
    MockPagination::Cursor,
    MockPagination::Link,
    MockPagination::LinkBody,
    MockPagination::Page,
    MockPagination::Offset,
    MockPagination::Stripe,
    MockPagination::Relay,
];

fn state_file() -> std::path::PathBuf {
    fixtures().join("airflow/out/airflow-3.3.2/provider_state.json")
}

pub fn state() -> Vec<Value> {
    mock_provider::load_state(&state_file()).expect("the fixture's provider state")
}

/// The `[provider]` table that lists the mock in `style`, plus `extra` lines.
fn provider_table(url: &str, style: MockPagination, extra: &str) -> String {
    let pagination = match style {
        MockPagination::Cursor => "pagination = \"cursor\"",
        MockPagination::Link => "pagination = \"link\"",
        MockPagination::LinkBody => "pagination = \"link\"\nnext_url = \"links.next\"",
        MockPagination::Page => "pagination = \"page\"\ntotal = \"total\"",
        MockPagination::Offset => "pagination = \"offset\"",
        MockPagination::Stripe => "pagination = \"stripe\"",
        MockPagination::Relay => "pagination = \"relay\"\npage_size_param = \"first\"",
    };
    let items = if style == MockPagination::Relay {
        "nodes"
    } else {
        "data"
    };
    let text = format!(
        r#"[provider]
url = "{url}"
{pagination}
page_size = 3
items = "{items}"
created_after_param = "created_after"
created_before_param = "created_before"
time_format = "epoch_seconds"
requests_per_second = 500
retries = 3
backoff = "50ms"
timeout = "5s"
deadline = "30s"
void_statuses = ["cancelled"]
{extra}

[provider.fields]
external_id = "id"
op_key = "idempotency_key"
created_at = "created"
payload_hash = "payload_sha256"
interval_start = "metadata.interval_start"
interval_end = "metadata.interval_end"
"#
    );
    // A key in `extra` replaces the default one above.
    let overridden = |line: &str| {
        line.split_once(" = ").is_some_and(|(key, _)| {
            extra
                .lines()
                .any(|given| given.starts_with(&format!("{key} = ")))
                && !extra.contains(line)
        })
    };
    text.lines()
        .filter(|line| !overridden(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

fn api(url: &str, style: MockPagination, extra: &str) -> ProviderApi {
    let text = format!(
        "[airflow]\nsnapshot = \"a.csv\"\n[journal]\nsnapshot = \"j.csv\"\n{}\n[[operation]]\ndag_id = \"*\"\ntask_id = \"export\"\n",
        provider_table(url, style, extra)
    );
    let config = Config::parse(&text, Path::new("/nowhere/onceonly.toml")).expect("config");
    match config.provider.source {
        Source::Listing(api) => *api,
        other => panic!("not a listing: {other:?}"),
    }
}

pub fn mock(objects: Vec<Value>, style: MockPagination, faults: &[&str]) -> MockProvider {
    let mut options = MockOptions::new(objects, style);
    options.faults = faults
        .iter()
        .map(|fault| fault.parse::<Fault>().expect("fault"))
        .collect();
    mock_provider::start(options, 0).expect("mock provider")
}

fn list(mock: &MockProvider, style: MockPagination, extra: &str, window: Window) -> Listed {
    provider_http::list_blocking(&api(&mock.url(), style, extra), window)
        .unwrap_or_else(|err| panic!("{style:?}: {err}"))
}

fn incomplete(mock: &MockProvider, style: MockPagination, extra: &str) -> String {
    match provider_http::list_blocking(&api(&mock.url(), style, extra), Window::unbounded()) {
        Err(Error::Incomplete {
            source_name,
            reason,
        }) => {
            assert_eq!(source_name, format!("provider listing {}", mock.url()));
            reason
        }
        Err(other) => panic!("{style:?}: not an incomplete listing: {other}"),
        Ok(listed) => panic!(
            "{style:?}: the listing completed with {} objects",
            listed.provider.height()
        ),
    }
}

/// The listed table, one line per object, to compare with the state.
fn listed_rows(listed: &Listed) -> Vec<String> {
    let df = &listed.provider;
    let texts = |name: &str| onceonly::cells::texts(df, name).expect(name);
    let ints = |name: &str| onceonly::cells::ints(df, name).expect(name);
    let (ids, keys, statuses, hashes) = (
        texts("external_id"),
        texts("op_key"),
        texts("status"),
        texts("payload_hash"),
    );
    let (created, start, end) = (
        ints("created_at"),
        ints("interval_start"),
        ints("interval_end"),
    );
    let mut rows: Vec<String> = (0..df.height())
        .map(|i| {
            format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                ids[i], keys[i], created[i], statuses[i], hashes[i], start[i], end[i]
            )
        })
        .collect();
    rows.sort();
    rows
}

/// The same lines computed from state objects directly.
fn expected_rows(objects: &[Value]) -> Vec<String> {
    let time = |value: &Value| -> Option<i64> {
        match value {
            Value::Number(n) => onceonly::timestamp::from_epoch_number(n.as_f64()?),
            Value::String(text) => onceonly::timestamp::parse(text),
            _ => None,
        }
    };
    let text = |value: &Value| value.as_str().map(str::to_string);
    let mut rows: Vec<String> = objects
        .iter()
        .map(|o| {
            format!(
                "{:?} {:?} {:?} {:?} {:?} {:?} {:?}",
                text(&o["id"]),
                text(&o["idempotency_key"]),
                time(&o["created"]),
                text(&o["status"]),
                text(&o["payload_sha256"]),
                time(&o["metadata"]["interval_start"]),
                time(&o["metadata"]["interval_end"]),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// Every row's `raw` is the JSON of that row's own object: the copy the listing kept, with the
/// id and the status the row's columns hold.
fn assert_each_row_keeps_its_own_raw(listed: &Listed, context: &str) {
    let column = |name: &str| onceonly::cells::texts(&listed.provider, name).unwrap();
    let (ids, statuses, raws) = (column("external_id"), column("status"), column("raw"));
    assert!(!raws.is_empty(), "{context}: no rows");
    for ((id, status), raw) in ids.iter().zip(&statuses).zip(&raws) {
        let object: Value = serde_json::from_str(raw.as_deref().expect("every object has raw"))
            .unwrap_or_else(|err| panic!("{context}: raw of {id:?} is not JSON: {err}"));
        assert_eq!(object["id"].as_str(), id.as_deref(), "{context}: {raw:?}");
        assert_eq!(
            object["status"].as_str(),
            status.as_deref(),
            "{context}: {raw:?}"
        );
        assert!(
            object["metadata"].is_object(),
            "{context}: raw keeps the whole object"
        );
    }
}

#[test]
fn every_pagination_style_lists_exactly_the_state() {
    let objects = state();
    let expected = expected_rows(&objects);
    assert_eq!(
        Some(expected.len() as u64),
        crate::scenario::airflow_expected("airflow-3.3.2")["counts"]["provider_objects"].as_u64()
    );
    for style in STYLES {
        let mock = mock(objects.clone(), style, &[]);
        let listed = list(&mock, style, "", Window::unbounded());
        assert_eq!(listed_rows(&listed), expected, "{style:?}");
        // At least 20 objects, 3 a page: at least 7 pages.
        assert!(
            listed.coverage.pages >= 7,
            "{style:?}: {:?}",
            listed.coverage
        );
        assert_eq!(listed.coverage.repeated, 0, "{style:?}");
        assert_each_row_keeps_its_own_raw(&listed, &format!("{style:?}"));
        for request in mock.requests() {
            assert!(request.starts_with("GET /exports"), "{request}");
        }
    }
}

/// Objects an hour apart, for window tests.
fn hourly(count: usize) -> Vec<Value> {
    let start = 1_795_000_000i64;
    (0..count)
        .map(|i| {
            json!({
                "id": format!("exp_{i:03}"),
                "created": start + 3600 * i as i64,
                "status": if i % 7 == 3 { "cancelled" } else { "live" },
                "idempotency_key": format!("key:{i}"),
                "payload_sha256": format!("{i:064x}"),
                "metadata": {"interval_start": start + 3600 * i as i64},
            })
        })
        .collect()
}

#[test]
fn created_window_is_listed_exactly_in_every_style() {
    let objects = hourly(40);
    let micros = |i: i64| (1_795_000_000 + 3600 * i) * 1_000_000;
    let window = Window {
        from: Some(micros(5)),
        to: Some(micros(20)),
    };
    let expected = expected_rows(&objects[5..=20]);
    for style in STYLES {
        let mock = mock(objects.clone(), style, &[]);
        // Cursor and link listings are split into slices of the window and read concurrently.
        let listed = list(&mock, style, "concurrency = 4\nsub_windows = 5", window);
        assert_eq!(listed_rows(&listed), expected, "{style:?}");
        assert_each_row_keeps_its_own_raw(&listed, &format!("{style:?}, in slices"));
        assert_eq!(listed.coverage.window, window);
        let split = matches!(style, MockPagination::Page | MockPagination::Offset);
        assert_eq!(listed.coverage.sub_windows, if split { 1 } else { 5 });
        let bounded = mock
            .requests()
            .iter()
            .all(|r| r.contains("created_after=") && r.contains("created_before="));
        assert!(bounded, "{:?}", mock.requests());
    }
}

#[test]
fn rate_limits_and_server_errors_are_retried() {
    let objects = state();
    let expected = expected_rows(&objects);
    for (style, faults) in [
        (MockPagination::Cursor, vec!["rate-limit@2=1"]),
        (MockPagination::Page, vec!["rate-limit-date@3=2"]),
        (
            MockPagination::Link,
            vec!["server-error@2", "server-error@3", "server-error@5"],
        ),
        (MockPagination::Offset, vec!["drop@2", "server-error@4"]),
        (MockPagination::LinkBody, vec!["slow@3=400"]),
    ] {
        let mock = mock(objects.clone(), style, &faults);
        let started = std::time::Instant::now();
        let listed = list(&mock, style, "", Window::unbounded());
        assert_eq!(listed_rows(&listed), expected, "{style:?} {faults:?}");
        if faults[0].starts_with("rate-limit") {
            // Retry-After is honoured: the retry waited for it.
            assert!(
                started.elapsed() >= std::time::Duration::from_millis(900),
                "{faults:?}"
            );
            assert!(listed.coverage.retries >= 1);
        }
        if faults[0].starts_with("server-error") {
            assert_eq!(listed.coverage.retries, 3, "{faults:?}");
        }
    }
}

#[test]
fn a_request_that_times_out_is_retried() {
    let objects = state();
    let mock = mock(objects.clone(), MockPagination::Page, &["slow@2=1500"]);
    let listed = list(
        &mock,
        MockPagination::Page,
        "timeout = \"400ms\"\nconcurrency = 1",
        Window::unbounded(),
    );
    assert_eq!(listed_rows(&listed), expected_rows(&objects));
    assert_eq!(listed.coverage.retries, 1, "{:?}", listed.coverage);
}

#[test]
fn objects_inserted_mid_listing_are_listed_as_the_listing_now_is() {
    let objects = state();
    for (style, extra) in [
        // The page's `total` goes from 29 to 31 between page 3 and page 4: read again.
        (MockPagination::Page, "concurrency = 1"),
        // No total: the new objects join the end of an oldest-first listing, where the first
        // read reads them, and a second read lists the same.
        (MockPagination::Offset, "concurrency = 1"),
    ] {
        // Two new objects, newer than all others, once page 3 has been served.
        let mock = mock(objects.clone(), style, &["insert@3=2"]);
        let listed = list(&mock, style, extra, Window::unbounded());
        let ids = onceonly::cells::texts(&listed.provider, "external_id").unwrap();
        assert_eq!(ids.len(), objects.len() + 2, "{style:?}");
        for new in ["exp_inserted_0001", "exp_inserted_0002"] {
            assert!(ids.iter().any(|id| id.as_deref() == Some(new)), "{style:?}");
        }
        assert_eq!(listed.coverage.repeated, 0, "{style:?}");
        assert_eq!(listed.coverage.reads, 2, "{style:?}: {:?}", listed.coverage);
        assert_each_row_keeps_its_own_raw(&listed, &format!("{style:?}, objects inserted"));
    }
}

#[test]
fn listing_failures_are_incomplete_and_named() {
    let objects = state();
    let cases: [(MockPagination, &[&str], &str, &[&str]); 13] = [
        (
            MockPagination::Stripe,
            &["repeat-cursor@3"],
            "",
            &["page 3", "a cursor it had already sent"],
        ),
        (
            MockPagination::Relay,
            &["repeat-cursor@2"],
            "",
            &["page 2", "a cursor it had already sent"],
        ),
        (
            // A Stripe listing whose `has_more` is looked for in the wrong place.
            MockPagination::Stripe,
            &[],
            "has_more = \"more\"",
            &["page 1", "the answer has no `more` (has_more)"],
        ),
        (
            MockPagination::Page,
            &["server-error%1"],
            "",
            &["page 1", "HTTP 500", "gave up after 4 tries"],
        ),
        (
            MockPagination::Cursor,
            &["drop%1"],
            "",
            &["page 1", "gave up after 4 tries"],
        ),
        (
            MockPagination::Offset,
            &["truncated@2"],
            // One request at a time, so that request 2 is page 2.
            "concurrency = 1",
            &["page 2", "not JSON"],
        ),
        (
            MockPagination::Link,
            &["invalid-json@2"],
            "",
            &["page 2", "not JSON", "Service temporarily overloaded"],
        ),
        (
            MockPagination::Cursor,
            &["repeat-cursor@3"],
            "",
            &["page 3", "a cursor it had already sent"],
        ),
        (
            MockPagination::LinkBody,
            &["repeat-cursor@2"],
            "",
            &["page 2", "a cursor it had already sent"],
        ),
        (
            MockPagination::Cursor,
            &[],
            "max_pages = 4",
            &["page cap of 4 pages", "max_pages"],
        ),
        (
            MockPagination::Page,
            &["slow@1=3000"],
            "deadline = \"1s\"",
            &["deadline of 1.0s"],
        ),
        (
            MockPagination::Cursor,
            &["missing-field@2"],
            "",
            &[
                "page 2",
                "object 1",
                "field `id`",
                "has no `id` (external_id)",
            ],
        ),
        (
            MockPagination::Offset,
            &["mistyped-field@2"],
            "concurrency = 1",
            &["page 2", "object 1", "field `created`", "\"not a time\""],
        ),
    ];
    for (style, faults, extra, needles) in cases {
        let mock = mock(objects.clone(), style, faults);
        let reason = incomplete(&mock, style, extra);
        for needle in needles {
            assert!(
                reason.contains(needle),
                "{style:?} {faults:?}: {needle:?} not in {reason}"
            );
        }
        assert!(reason.contains(&mock.url()), "the URL is named: {reason}");
    }
}

#[test]
fn a_listing_that_shifts_and_changes_is_read_again_as_it_now_is() {
    // While page 2 is asked for, one object appears before all others and every status
    // changes: page 2 repeats page 1's last object. That read moved; the next ones list
    // every object once, each as it now is.
    let objects = state();
    let mock = mock(objects.clone(), MockPagination::Offset, &["change@2"]);
    let listed = list(
        &mock,
        MockPagination::Offset,
        "concurrency = 1",
        Window::unbounded(),
    );
    assert_eq!(listed.coverage.repeated, 0);
    assert_each_row_keeps_its_own_raw(&listed, "a listing read again");
    let ids = onceonly::cells::texts(&listed.provider, "external_id").unwrap();
    assert_eq!(ids.len(), objects.len() + 1);
    let statuses = onceonly::cells::texts(&listed.provider, "status").unwrap();
    assert!(
        statuses
            .iter()
            .all(|status| status.as_deref() == Some("voided")),
        "{statuses:?}"
    );
    assert_eq!(listed.coverage.warnings.len(), 1, "{:?}", listed.coverage);
    let warning = &listed.coverage.warnings[0];
    assert!(
        warning.contains("the listing moved while it was read")
            && warning.contains("page 2 repeats 1 object of page 1"),
        "{warning}"
    );
}

/// The real-Airflow 3.3.2 run with `[provider]` switched to the mock's listing.
pub fn listing_scenario(url: &str, style: MockPagination, extra: &str) -> Scenario {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    use_listing(&scenario, url, style, extra);
    scenario
}

/// Switches a scenario's `[provider]` to the mock's listing at `url`.
pub fn use_listing(scenario: &Scenario, url: &str, style: MockPagination, extra: &str) {
    let config = scenario.read("onceonly.toml");
    let start = config.find("[provider]").expect("[provider]");
    let end = start + config[start..].find("[[operation]]").expect("operations");
    let text = format!(
        "{}{}\n{}",
        &config[..start],
        provider_table(url, style, extra),
        &config[end..]
    );
    scenario.write("onceonly.toml", &text);
}

/// `onceonly audit --format json` of `scenario` with `envs` set.
pub fn audit_in(scenario: &Scenario, envs: &[(&str, &str)]) -> Output {
    let config = scenario.config();
    let mut command = Command::new(env!("CARGO_BIN_EXE_onceonly"));
    command
        .args(["audit", "--format", "json", "--config"])
        .arg(&config)
        .env_remove("ONCEONLY_CONFIG")
        .env("NO_COLOR", "1");
    for (name, value) in envs {
        command.env(name, value);
    }
    command.output().expect("run onceonly")
}

#[test]
fn audit_over_the_listing_equals_audit_over_the_snapshot() {
    let snapshot = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let expected = audit_in(&snapshot, &[]);
    let expected: Value = serde_json::from_slice(&expected.stdout).expect("json report");
    for style in [
        MockPagination::Cursor,
        MockPagination::Page,
        MockPagination::Stripe,
        MockPagination::Relay,
    ] {
        let mock = mock(state(), style, &[]);
        let scenario = listing_scenario(&mock.url(), style, "");
        let output = audit_in(&scenario, &[]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let report: Value = serde_json::from_slice(&output.stdout).expect("json report");
        assert_eq!(
            report["summary"]["by_rule"], expected["summary"]["by_rule"],
            "{style:?}"
        );
        assert!(
            expected["summary"]["by_rule"]
                .as_object()
                .is_some_and(|rules| !rules.is_empty())
        );
        let log = mock.requests();
        assert!(!log.is_empty() && log.iter().all(|r| r.starts_with("GET ")));
    }
}

#[test]
fn incomplete_listing_exits_2_without_a_report() {
    for (style, fault, extra, needle) in [
        (MockPagination::Page, "server-error%1", "", "HTTP 500"),
        (
            MockPagination::Cursor,
            "drop%1",
            "sub_windows = 1",
            "gave up",
        ),
        (MockPagination::Offset, "truncated@2", "", "not JSON"),
        (
            MockPagination::Link,
            "invalid-json@1",
            "sub_windows = 1",
            "not JSON",
        ),
        // One slice, read in order: the audit's bounded window would otherwise split a cursor
        // listing into slices, and the 2nd request would open another slice.
        (
            MockPagination::Cursor,
            "repeat-cursor@2",
            "sub_windows = 1",
            "already sent",
        ),
        (
            MockPagination::Cursor,
            "slow@1=0",
            "max_pages = 2",
            "page cap",
        ),
        (
            MockPagination::Page,
            "slow@1=3000",
            "deadline = \"1s\"",
            "deadline",
        ),
        (
            MockPagination::LinkBody,
            "missing-field@2",
            "sub_windows = 1",
            "field `id`",
        ),
        (
            MockPagination::Page,
            "mistyped-field@3",
            "",
            "field `created`",
        ),
        (
            MockPagination::Stripe,
            "lose-next@2",
            "sub_windows = 1",
            "no last object to go on from",
        ),
        (
            MockPagination::Relay,
            "lose-next@2",
            "sub_windows = 1",
            "names no cursor to go on from",
        ),
        (
            MockPagination::Offset,
            "clamp@2=1",
            "concurrency = 1",
            "the provider says more follow",
        ),
    ] {
        let mock = mock(state(), style, &[fault]);
        let scenario = listing_scenario(&mock.url(), style, extra);
        let output = audit_in(&scenario, &[]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{fault}: {err}");
        assert!(
            err.contains(&format!(
                "incomplete input: provider listing {} was only partly read",
                mock.url()
            )),
            "{fault}: {err}"
        );
        assert!(err.contains(needle), "{fault}: {needle:?} not in {err}");
        assert!(
            stdout(&output).is_empty(),
            "no report over a partial listing"
        );
    }
}

#[test]
fn secrets_never_appear_in_output() {
    const CANARY: &str = "canary-7f3a9c1e-never-print-me";
    for (auth, header) in [
        (
            "[provider.auth]\nkind = \"bearer\"\nenv = \"ONCEONLY_TEST_PROVIDER_SECRET\"",
            ("authorization", format!("Bearer {CANARY}")),
        ),
        (
            "[provider.auth]\nkind = \"header\"\nheader = \"X-Api-Key\"\nenv = \"ONCEONLY_TEST_PROVIDER_SECRET\"",
            ("x-api-key", CANARY.to_string()),
        ),
        (
            "[provider.auth]\nkind = \"basic\"\nuser = \"auditor\"\nenv = \"ONCEONLY_TEST_PROVIDER_SECRET\"",
            (
                "authorization",
                // base64("auditor:canary-7f3a9c1e-never-print-me")
                "Basic YXVkaXRvcjpjYW5hcnktN2YzYTljMWUtbmV2ZXItcHJpbnQtbWU=".to_string(),
            ),
        ),
    ] {
        for fault in [None, Some("server-error%1"), Some("missing-field@1")] {
            let mut options = MockOptions::new(state(), MockPagination::Cursor);
            options.require_header = Some((header.0.to_string(), header.1.clone()));
            options.faults = fault.iter().map(|f| f.parse().unwrap()).collect();
            let mock = mock_provider::start(options, 0).unwrap();
            // The `[provider.auth]` table goes after the other provider keys. One slice, so the
            // faulty first request is a page with objects, not an empty slice of the window.
            let scenario = listing_scenario(&mock.url(), MockPagination::Cursor, "sub_windows = 1");
            scenario.edit(
                "onceonly.toml",
                "[provider.fields]",
                &format!("{auth}\n\n[provider.fields]"),
            );
            let output = audit_in(&scenario, &[("ONCEONLY_TEST_PROVIDER_SECRET", CANARY)]);
            let expected = if fault.is_some() { 2 } else { 1 };
            assert_eq!(
                output.status.code(),
                Some(expected),
                "{auth} {fault:?}: {}",
                stderr(&output)
            );
            for text in [stdout(&output), stderr(&output)] {
                assert!(!text.contains(CANARY), "{auth}: the secret leaked: {text}");
            }
        }
        // A wrong secret is refused by the provider; the error does not echo it.
        let mut options = MockOptions::new(state(), MockPagination::Cursor);
        options.require_header = Some((header.0.to_string(), "something else".into()));
        let mock = mock_provider::start(options, 0).unwrap();
        let scenario = listing_scenario(&mock.url(), MockPagination::Cursor, "");
        scenario.edit(
            "onceonly.toml",
            "[provider.fields]",
            &format!("{auth}\n\n[provider.fields]"),
        );
        let output = audit_in(&scenario, &[("ONCEONLY_TEST_PROVIDER_SECRET", CANARY)]);
        assert_eq!(output.status.code(), Some(2));
        let err = stderr(&output);
        assert!(err.contains("HTTP 401"), "{err}");
        assert!(!err.contains(CANARY) && !stdout(&output).contains(CANARY));
    }
}

#[test]
fn mock_provider_subcommand_serves_loopback_and_logs_requests() {
    for (flag, style) in [
        ("page", MockPagination::Page),
        ("stripe", MockPagination::Stripe),
        ("relay", MockPagination::Relay),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_onceonly"))
            .args(["mock-provider", "--pagination", flag, "--state"])
            .arg(state_file())
            .args(["--fault", "clamp=2", "--request-log"])
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let listing = api(&url, style, "");
        let listed = provider_http::list_blocking(&listing, Window::unbounded());
        let _ = child.kill();
        let _ = child.wait();
        let listed = listed.unwrap_or_else(|err| panic!("{flag}: {err}"));
        assert_eq!(listed_rows(&listed), expected_rows(&state()), "{flag}");
        // 23 objects, at most 2 a page.
        assert!(listed.coverage.pages >= 12, "{flag}: {:?}", listed.coverage);
        let requests = std::fs::read_to_string(&log).unwrap();
        assert!(!requests.is_empty());
        for request in requests.lines() {
            assert!(request.starts_with("GET /exports?"), "{request}");
        }
    }

    let refused = scenario_output(&[
        "mock-provider",
        "--bind",
        "0.0.0.0",
        "--state",
        state_file().to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("loopback"),
        "{}",
        stderr(&refused)
    );
}

fn scenario_output(args: &[&str]) -> Output {
    crate::scenario::onceonly(args)
}

#[test]
fn config_errors_name_the_key_and_line() {
    let base = provider_table("http://127.0.0.1:9/exports", MockPagination::Cursor, "");
    let parse = |provider: &str| {
        let text = format!(
            "[airflow]\nurl = \"sqlite:///a.db\"\n[journal]\nsnapshot = \"j.csv\"\n{provider}\n[[operation]]\ndag_id = \"*\"\ntask_id = \"export\"\n"
        );
        Config::parse(&text, Path::new("/x/onceonly.toml"))
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default()
    };
    let cases: BTreeMap<&str, (String, &str)> = BTreeMap::from([
        (
            "style",
            (
                base.replace("\"cursor\"", "\"pages\""),
                "line 7: [provider] pagination = \"pages\"",
            ),
        ),
        (
            "other style's key",
            (
                base.replace("page_size = 3", "page_size = 3\npage_param = \"p\""),
                "line 9: [provider] `page_param` does not apply",
            ),
        ),
        (
            "url in its own table",
            (
                base.replace("http://127.0.0.1:9/exports", "ftp://x"),
                "line 6: [provider] url",
            ),
        ),
        (
            "unset secret",
            (
                base.replace(
                    "[provider.fields]",
                    "[provider.auth]\nkind = \"bearer\"\nenv = \"ONCEONLY_SURELY_UNSET_VAR\"\n[provider.fields]",
                ),
                "ONCEONLY_SURELY_UNSET_VAR, which is not set",
            ),
        ),
        (
            "unknown column",
            (
                base.replace("op_key = ", "opkey = "),
                "[provider.fields] names `opkey`",
            ),
        ),
        (
            "bad duration",
            (base.replace("\"5s\"", "\"soon\""), "timeout = \"soon\""),
        ),
    ]);
    for (what, (provider, needle)) in cases {
        let message = parse(&provider);
        assert!(
            message.contains(needle),
            "{what}: {needle:?} not in {message:?}"
        );
    }
}

#[test]
fn a_full_last_page_ends_the_listing_when_the_provider_says_so() {
    // 21 objects, 3 a page: the last page is full, and each style says it is the last (a
    // null cursor, a `Link` header without `next`, `has_more: false`, an empty page 8, …).
    let objects = hourly(21);
    for style in STYLES {
        let mock = mock(objects.clone(), style, &[]);
        let listed = list(&mock, style, "", Window::unbounded());
        assert_eq!(listed_rows(&listed), expected_rows(&objects), "{style:?}");
    }
}

#[test]
fn pages_clamped_by_the_provider_are_read_to_the_end_in_every_style() {
    // The provider serves at most 2 objects whatever `limit` asks: each style's next pointer
    // or page numbers go on, and nothing is lost.
    let objects = state();
    for style in STYLES {
        let mock = mock(objects.clone(), style, &["clamp=2"]);
        let listed = list(&mock, style, "concurrency = 1", Window::unbounded());
        assert_eq!(listed_rows(&listed), expected_rows(&objects), "{style:?}");
        assert!(
            listed.coverage.pages >= 12,
            "{style:?}: {:?}",
            listed.coverage
        );
    }
    // Clamped on one page only: a short page is no end where a pointer leads on.
    for style in [
        MockPagination::Cursor,
        MockPagination::Link,
        MockPagination::LinkBody,
        MockPagination::Stripe,
        MockPagination::Relay,
    ] {
        let mock = mock(objects.clone(), style, &["clamp@2=1"]);
        let listed = list(&mock, style, "", Window::unbounded());
        assert_eq!(listed_rows(&listed), expected_rows(&objects), "{style:?}");
    }
}

#[test]
fn a_page_cut_short_while_the_provider_says_more_is_incomplete() {
    // Page 2 comes back with one object while the page says more follow: a page or offset
    // listing cannot tell what it missed, so it stops.
    let objects = state();
    let total = format!("the total `total` is {}", objects.len());
    for (style, extra, signal) in [
        (MockPagination::Page, "concurrency = 1", total.as_str()),
        (
            MockPagination::Offset,
            "concurrency = 1",
            "`has_more` is true",
        ),
        (
            MockPagination::Offset,
            "concurrency = 1\ntotal = \"total\"",
            total.as_str(),
        ),
    ] {
        let mock = mock(objects.clone(), style, &["clamp@2=1"]);
        let reason = incomplete(&mock, style, extra);
        for needle in [
            "page 2",
            "the listing would end on this page, but",
            signal,
            mock.url().as_str(),
        ] {
            assert!(
                reason.contains(needle),
                "{style:?}: {needle:?} not in {reason}"
            );
        }
    }
}

#[test]
fn a_page_that_says_more_but_names_no_way_on_is_incomplete() {
    let objects = state();
    let total = format!(
        "the listing would end on this page, but the total `total` is {}",
        objects.len()
    );
    for (style, needle) in [
        (
            MockPagination::Cursor,
            "a full page of 3 objects, and the answer has no `next_cursor` (next_cursor)",
        ),
        (
            MockPagination::Link,
            "a full page of 3 objects, and no `Link` header",
        ),
        (
            MockPagination::LinkBody,
            "a full page of 3 objects, and the answer has no `links.next` (next_url)",
        ),
        (MockPagination::Page, total.as_str()),
        (
            MockPagination::Offset,
            "the listing would end on this page, but `has_more` is true",
        ),
        (
            MockPagination::Stripe,
            "`has_more` is true on a page with no objects",
        ),
        (
            MockPagination::Relay,
            "`pageInfo.hasNextPage` is true, but `pageInfo.endCursor` names no cursor",
        ),
    ] {
        let mock = mock(objects.clone(), style, &["lose-next@2"]);
        let reason = incomplete(&mock, style, "concurrency = 1");
        assert!(
            reason.contains(needle) && reason.contains("page 2"),
            "{style:?}: {needle:?} not in {reason}"
        );
        assert!(reason.contains(&mock.url()), "{reason}");
    }
}

#[test]
fn a_stripe_listing_read_as_a_cursor_listing_stops_instead_of_reporting_false_findings() {
    // The reported case: Stripe's pages carry `has_more` and no `next_cursor`. Read as a
    // cursor listing, the first page used to be taken as the whole listing, and the audit
    // reported M001 and L002 on live exports.
    let mock = mock(state(), MockPagination::Stripe, &[]);
    let scenario = listing_scenario(&mock.url(), MockPagination::Cursor, "sub_windows = 1");
    let output = audit_in(&scenario, &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(stdout(&output).is_empty(), "no report over one page");
    for needle in [
        "incomplete input: provider listing",
        mock.url().as_str(),
        "page 1",
        "a full page of 3 objects, and the answer has no `next_cursor` (next_cursor)",
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    // Configured as what it is, the same provider audits like the snapshot.
    let scenario = listing_scenario(&mock.url(), MockPagination::Stripe, "");
    let output = audit_in(&scenario, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
}
