//! A provider listing that moves while it is read (SPEC §3, issue 42 part 2): the real
//! `onceonly mock-provider` on loopback loses an object (`delete@K`) or gains a newest one
//! (`insert@K`) once page K is served, as a live provider serving other clients does, and the
//! audit either reads the listing again until one read holds still, or stops with exit 2.
//! Never a finding over a read that moved.

use std::io::BufRead;
use std::process::{Child, Command, Output, Stdio};

use onceonly::commands::mock_provider::MockPagination;
use serde_json::Value;

use crate::provider_http::{audit_in, listing_scenario};
use crate::scenario::{Scenario, fixtures, stderr, stdout};

/// `onceonly mock-provider` serving the real-Airflow 3.3.2 fixture's provider state, stopped
/// when dropped.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(flag: &str, newest_first: bool, faults: &[&str]) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_onceonly"));
        command
            .args(["mock-provider", "--pagination", flag, "--state"])
            .arg(fixtures().join("airflow/out/airflow-3.3.2/provider_state.json"));
        for fault in faults {
            command.args(["--fault", fault]);
        }
        if newest_first {
            command.arg("--newest-first");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("onceonly mock-provider");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the mock's URL");
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Served { child, url }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which listing an audit over a listing that moved once must equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Equals {
    /// The listing as it was before the fault: a keyset cursor keeps what it already read
    /// (an object deleted behind it) and does not go back for one created behind it.
    Before,
    /// The listing as it is after the fault, served without one: read again (or, for a
    /// cursor, a new object ahead of it read where it is).
    After,
}

/// A listing style as configured, with what each fault once must give.
struct Case {
    name: &'static str,
    flag: &'static str,
    style: MockPagination,
    newest_first: bool,
    extra: &'static str,
    delete: Equals,
    insert: Equals,
    /// Whether the client sees the listing move (and so reads it again), under `delete` and
    /// under `insert`.
    detects: (bool, bool),
}

const fn case(
    name: &'static str,
    flag: &'static str,
    style: MockPagination,
    newest_first: bool,
    extra: &'static str,
    (delete, insert): (Equals, Equals),
    detects: (bool, bool),
) -> Case {
    Case {
        name,
        flag,
        style,
        newest_first,
        extra,
        delete,
        insert,
        detects,
    }
}

use Equals::{After, Before};
const NO: (bool, bool) = (false, false);
const BOTH: (bool, bool) = (true, true);

/// Every style the mock serves; page and offset both oldest and newest first, with and
/// without a `total`.
const CASES: [Case; 11] = [
    case(
        "cursor",
        "cursor",
        MockPagination::Cursor,
        false,
        "",
        (Before, After),
        NO,
    ),
    case(
        "link",
        "link",
        MockPagination::Link,
        false,
        "",
        (Before, After),
        NO,
    ),
    case(
        "link-body",
        "link-body",
        MockPagination::LinkBody,
        false,
        "",
        (Before, After),
        NO,
    ),
    // One created-at slice, read newest first: the new object is behind the cursor (split
    // into slices, a later slice would list it).
    case(
        "stripe",
        "stripe",
        MockPagination::Stripe,
        false,
        "sub_windows = 1",
        (Before, Before),
        NO,
    ),
    case(
        "relay with totalCount",
        "relay",
        MockPagination::Relay,
        false,
        // One slice: a newest object would otherwise join a slice not yet read.
        "total = \"totalCount\"\nsub_windows = 1",
        (After, After),
        BOTH,
    ),
    // The shared config gives page listings `total = "total"`.
    case(
        "page with total",
        "page",
        MockPagination::Page,
        false,
        "",
        (After, After),
        BOTH,
    ),
    case(
        "page with total, newest first",
        "page",
        MockPagination::Page,
        true,
        "",
        (After, After),
        BOTH,
    ),
    case(
        "offset with total, newest first",
        "offset",
        MockPagination::Offset,
        true,
        "total = \"total\"",
        (After, After),
        BOTH,
    ),
    // The shared config gives offset listings no total: a second read must agree. A newest
    // object joins an oldest-first listing at its end, where the first read reads it: nothing
    // moved under it.
    case(
        "offset",
        "offset",
        MockPagination::Offset,
        false,
        "",
        (After, After),
        (true, false),
    ),
    case(
        "offset, newest first",
        "offset",
        MockPagination::Offset,
        true,
        "",
        (After, After),
        BOTH,
    ),
    case(
        "page without total, newest first",
        "page",
        MockPagination::Page,
        true,
        // A total its pages do not carry.
        "total = \"count\"",
        (After, After),
        BOTH,
    ),
];

/// The audit of `scenario` as JSON, which must have exited 1 (findings).
fn report(output: &Output, context: &str) -> Value {
    assert_eq!(
        output.status.code(),
        Some(1),
        "{context}: {}",
        stderr(output)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("{context}: {err}"))
}

/// What the audit says of the world: every finding (id, rule and message), and the verdicts.
fn findings(report: &Value) -> (Vec<String>, Value) {
    let mut findings: Vec<String> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|finding| {
            format!(
                "{} {} {}",
                finding["id"], finding["code"], finding["message"]
            )
        })
        .collect();
    findings.sort();
    (findings, report["summary"]["verdicts"].clone())
}

fn warnings(report: &Value) -> Vec<String> {
    report["coverage"]["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|warning| warning.as_str().map(str::to_string))
        .collect()
}

fn audit(served: &Served, case: &Case) -> Output {
    let extra = format!("concurrency = 1\n{}", case.extra);
    let scenario: Scenario = listing_scenario(&served.url, case.style, &extra);
    audit_in(&scenario, &[])
}

#[test]
fn a_listing_that_moves_once_is_read_again_and_audits_as_the_listing_it_became() {
    for case in &CASES {
        let stable = Served::start(case.flag, case.newest_first, &[]);
        let before = report(&audit(&stable, case), case.name);
        drop(stable);
        for (fault, expected, detects) in [
            ("delete@2", case.delete, case.detects.0),
            ("insert@2", case.insert, case.detects.1),
        ] {
            let context = format!("{} {fault}", case.name);
            let served = Served::start(case.flag, case.newest_first, &[fault]);
            let moved = report(&audit(&served, case), &context);
            // Request 2 is long past: the same provider now serves the listing as the fault
            // left it, holding still.
            let after = report(&audit(&served, case), &format!("{context}, after"));
            assert!(
                warnings(&after)
                    .iter()
                    .all(|warning| !warning.contains("moved while it was read")),
                "{context}: the listing holds still now: {:?}",
                warnings(&after)
            );
            let reference = match expected {
                Before => &before,
                After => &after,
            };
            assert_eq!(
                findings(&moved),
                findings(reference),
                "{context}: the audit over the listing that moved must equal the audit over the listing as it was {}",
                if expected == Before {
                    "before"
                } else {
                    "after"
                }
            );
            // The fault changes what the provider holds, so the two listings audit apart:
            // equal findings above are not equal by accident.
            assert_ne!(findings(&before), findings(&after), "{context}");
            let read_again = warnings(&moved).iter().any(|warning| {
                warning.contains("the listing moved while it was read")
                    && warning.contains("page")
                    && warning.contains(&served.url)
            });
            assert_eq!(read_again, detects, "{context}: {:?}", warnings(&moved));
        }
    }
}

#[test]
fn a_listing_that_keeps_moving_exits_2_naming_the_pages_and_what_changed() {
    for case in CASES.iter().filter(|case| case.detects != NO) {
        for (fault, change) in [
            ("delete%2", ["went from", "no longer holds", "repeats"]),
            ("insert%2", ["went from", "did not hold", "repeats"]),
        ] {
            let context = format!("{} {fault}", case.name);
            let served = Served::start(case.flag, case.newest_first, &[fault]);
            let output = audit(&served, case);
            let err = stderr(&output);
            assert_eq!(output.status.code(), Some(2), "{context}: {err}");
            assert!(
                stdout(&output).is_empty(),
                "{context}: no report over a read that moved"
            );
            for needle in [
                format!(
                    "incomplete input: provider listing {} was only partly read",
                    served.url
                ),
                "the listing moved while it was read, 3 times over".to_string(),
                "read 3: GET ".to_string(),
                ", page ".to_string(),
            ] {
                assert!(err.contains(&needle), "{context}: {needle:?} not in {err}");
            }
            assert!(
                change.iter().any(|said| err.contains(said)),
                "{context}: what changed is not said: {err}"
            );
        }
    }
}

/// A cursor listing whose cursor is a position in disguise (`next_cursor` = how many objects
/// were served), newest first, on a scripted loopback server: a new object at the head once
/// page 2 has been served (with `again`, after every even request) makes page 3 repeat page
/// 2's last object.
fn positional_cursor(
    again: bool,
) -> (
    crate::loopback::Scripted,
    onceonly::sources::provider_http::ProviderApi,
) {
    use crate::loopback::{Reply, Scripted};
    use std::sync::Mutex;
    let objects: Mutex<(Vec<Value>, usize)> = Mutex::new((
        (0..8)
            .rev()
            .map(|n| {
                serde_json::json!({"id": format!("exp_{n}"), "idempotency_key": format!("k{n}"),
                    "created": 1_793_491_200 + 60 * n, "status": "live"})
            })
            .collect(),
        0,
    ));
    let server = Scripted::start(move |request| {
        let mut state = objects.lock().unwrap();
        let (listing, requests) = &mut *state;
        *requests += 1;
        let from: usize = request
            .target()
            .split_once("cursor=")
            .map_or(0, |(_, at)| at.parse().unwrap());
        let page: Vec<Value> = listing.iter().skip(from).take(3).cloned().collect();
        let next = (from + 3 < listing.len()).then(|| (from + 3).to_string());
        let body = serde_json::json!({"data": page, "next_cursor": next}).to_string();
        if *requests == 2 || (again && *requests > 2 && *requests % 2 == 0) {
            let n = 100 + *requests;
            listing.insert(
                0,
                serde_json::json!({"id": format!("exp_new_{n}"), "idempotency_key": format!("k{n}"),
                    "created": 1_793_491_200 + 60 * n as i64, "status": "live"}),
            );
        }
        Reply::json("200 OK", body)
    });
    let text = format!(
        "[airflow]\nsnapshot = \"a.csv\"\n[journal]\nsnapshot = \"j.csv\"\n[provider]\nurl = \"{}/exports\"\npagination = \"cursor\"\npage_size = 3\nrequests_per_second = 500\nretries = 1\nbackoff = \"10ms\"\n[provider.fields]\nexternal_id = \"id\"\nop_key = \"idempotency_key\"\ncreated_at = \"created\"\n[[operation]]\ndag_id = \"*\"\ntask_id = \"export\"\n",
        server.base
    );
    let config =
        onceonly::config::Config::parse(&text, std::path::Path::new("/nowhere/onceonly.toml"))
            .expect("config");
    match config.provider.source {
        onceonly::config::Source::Listing(api) => (server, *api),
        other => panic!("not a listing: {other:?}"),
    }
}

#[test]
fn a_cursor_that_counts_positions_is_caught_repeating_an_object() {
    use onceonly::sources::provider_http::{Window, list_blocking};
    // Once: page 3 repeats exp_2, page 2's last; that read is thrown away, the next holds.
    let (server, api) = positional_cursor(false);
    let listed = list_blocking(&api, Window::unbounded()).expect("read again, consistent");
    let ids = onceonly::cells::texts(&listed.provider, "external_id").unwrap();
    assert_eq!(
        ids.len(),
        9,
        "the 8 objects and the new one, once each: {ids:?}"
    );
    assert_eq!(listed.coverage.reads, 2, "{:?}", listed.coverage);
    assert!(
        listed
            .coverage
            .warnings
            .iter()
            .any(|warning| warning.contains("page 3 repeats 1 object of page 2 (exp_2)")),
        "{:?}",
        listed.coverage.warnings
    );
    drop(server);
    // Moving on every other request: never consistent, incomplete naming the pages.
    let (_server, api) = positional_cursor(true);
    match list_blocking(&api, Window::unbounded()) {
        Err(onceonly::error::Error::Incomplete { reason, .. }) => {
            assert!(
                reason.contains("3 times over") && reason.contains("repeats 1 object of page"),
                "{reason}"
            );
        }
        Err(other) => panic!("not incomplete: {other}"),
        Ok(listed) => panic!(
            "listed {} objects from a moving cursor",
            listed.provider.height()
        ),
    }
}
