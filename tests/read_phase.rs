//! How the sources are read side by side (`sources::load`): the provider listing starts on the
//! time bounds Airflow's database gives before the tries are read, and the window it covers is
//! still exactly the tries' own (SPEC §3) when those bounds turn out different.

use serde_json::Value;

use onceonly::commands::mock_provider::{self, MockPagination};

use crate::provider_http::{audit_in, listing_scenario, mock, state, use_listing};
use crate::scenario::{Scenario, stderr};

/// The task instance whose current try is also put in the history (as Airflow's tables hold a
/// try being retried), with the task_instance row's start moved to 2001: the tries read are
/// unchanged, since the attempts query takes that try from the history, but a plain scan of
/// the two tables (the bounds the listing starts on) finds 2001.
const TRY_IN_BOTH_TABLES: &str = "
    INSERT INTO task_instance_history (task_instance_id, task_id, dag_id, run_id, map_index,
        try_number, start_date, end_date, state, hostname, pool, pool_slots, pid, queued_dttm,
        dag_version_id)
    SELECT id, task_id, dag_id, run_id, map_index, try_number, start_date, end_date, state,
        hostname, pool, pool_slots, pid, queued_dttm, dag_version_id
    FROM task_instance
    WHERE rowid = (SELECT min(rowid) FROM task_instance WHERE try_number >= 1 AND start_date IS NOT NULL);
    UPDATE task_instance SET start_date = '2001-01-01 00:00:00.000000'
    WHERE rowid = (SELECT min(rowid) FROM task_instance WHERE try_number >= 1 AND start_date IS NOT NULL);";

fn audit(scenario: &Scenario) -> Value {
    audit_with(scenario, &[])
}

fn audit_with(scenario: &Scenario, args: &[&str]) -> Value {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let output = scenario.audit(&all);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("a JSON report")
}

#[test]
fn the_listing_covers_the_tries_window_even_when_the_early_bounds_differ() {
    let mock = mock(state(), MockPagination::Cursor, &[]);
    let plain = listing_scenario(&mock.url(), MockPagination::Cursor, "");
    let expected = audit(&plain);

    let changed = listing_scenario(&mock.url(), MockPagination::Cursor, "");
    changed.sqlite("airflow.db", TRY_IN_BOTH_TABLES);
    let report = audit(&changed);

    let coverage = |report: &Value, key: &str| report["coverage"][key].clone();
    for key in ["provider_from", "provider_to", "tries", "runs"] {
        assert_eq!(
            coverage(&report, key),
            coverage(&expected, key),
            "{key}: the listing was not the tries' window"
        );
    }
    assert!(
        coverage(&report, "provider_from")
            .as_str()
            .is_some_and(|from| !from.starts_with("2000") && !from.starts_with("2001")),
        "{report}"
    );
    let rows = |report: &Value| {
        report["coverage"]["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .map(|source| (source["table"].clone(), source["rows"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(rows(&report), rows(&expected));
    assert_eq!(report["findings"], expected["findings"]);
    assert_eq!(report["summary"], expected["summary"]);
}

/// A filtered audit (a DAG glob and an activity window) asks the database for the bounds of
/// the audited runs' tries only: the listing covers what the provider snapshot is cut to when
/// the same audit reads it from a file.
fn filtered_listing_matches_the_snapshot(from_file: &Scenario, listed: &Scenario, objects: &str) {
    let mock = mock(
        mock_provider::load_state(std::path::Path::new(objects)).expect("provider state"),
        MockPagination::Cursor,
        &[],
    );
    use_listing(listed, &mock.url(), MockPagination::Cursor, "");
    // The middle try's start in the scenario's own run (PostgreSQL's ran at another time).
    let expected: Value = serde_json::from_str(&from_file.read("expected.json")).expect("json");
    let mut starts: Vec<&str> = expected["dags"]
        .as_object()
        .expect("dags")
        .values()
        .flat_map(|runs| runs.as_array().expect("runs"))
        .flat_map(|run| run["task_instances"].as_array().expect("task instances"))
        .flat_map(|task| task["tries"].as_array().expect("tries"))
        .filter_map(|tri| tri["start_date"].as_str())
        .collect();
    starts.sort();
    let since = starts[starts.len() / 2];
    let filter = ["--dag", "onceonly_*", "--since", since];
    let expected = audit_with(from_file, &filter);
    let report = audit_with(listed, &filter);
    for key in ["provider_from", "provider_to", "tries", "runs"] {
        assert_eq!(report["coverage"][key], expected["coverage"][key], "{key}");
    }
    assert!(report["coverage"]["provider_from"].is_string(), "{report}");
    // The window left some tries out, and kept some.
    let all = audit_with(from_file, &[]);
    let tries = |report: &Value| report["coverage"]["tries"].as_u64().expect("tries");
    assert!(
        tries(&report) > 0 && tries(&report) < tries(&all),
        "{report}"
    );
    assert_eq!(report["findings"], expected["findings"]);
    assert_eq!(report["summary"], expected["summary"]);
}

#[test]
fn a_filtered_audit_lists_the_window_of_the_audited_tries() {
    let fixture = crate::scenario::fixtures().join("airflow/out/airflow-3.3.2");
    filtered_listing_matches_the_snapshot(
        &Scenario::copy_of("airflow/out/airflow-3.3.2"),
        &Scenario::copy_of("airflow/out/airflow-3.3.2"),
        fixture
            .join("provider_state.json")
            .to_str()
            .expect("utf-8 path"),
    );
}

#[test]
fn a_filtered_audit_of_airflow_on_postgres_lists_the_window_of_the_audited_tries() {
    let Some(server) = crate::postgres::server() else {
        return;
    };
    filtered_listing_matches_the_snapshot(
        &crate::postgres::scenario(&server, &server.url),
        &crate::postgres::scenario(&server, &server.url),
        server
            .out
            .join("provider_state.json")
            .to_str()
            .expect("utf-8 path"),
    );
}

/// Every DAG's zone set to one no zone database has: a key template formatted in the DAG's
/// zone cannot be rendered, and preparing the tries fails (exit 2, naming the zone).
const ZONE_NOBODY_HAS: &str =
    "UPDATE serialized_dag SET data = json_set(data, '$.dag.timezone', 'Mars/Olympus')";

/// The tries are prepared while the provider is still being listed; what the listing says
/// still comes first. A listing that breaks is the error reported even when preparing the tries
/// failed before it broke, and without the listing's fault the tries' error is.
#[test]
fn a_listing_error_comes_before_an_error_of_the_tries_prepared_meanwhile() {
    let failing = mock(state(), MockPagination::Cursor, &["invalid-json@3"]);
    let scenario = listing_scenario(&failing.url(), MockPagination::Cursor, "sub_windows = 1");
    scenario.sqlite("airflow.db", ZONE_NOBODY_HAS);
    let output = scenario.audit(&["--format", "json"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(output.stdout.is_empty(), "a report was written: {err}");
    assert!(err.contains("not JSON"), "{err}");
    assert!(err.contains(&failing.url()), "{err}");
    assert!(!err.contains("Mars/Olympus"), "{err}");

    let listed = mock(state(), MockPagination::Cursor, &[]);
    let scenario = listing_scenario(&listed.url(), MockPagination::Cursor, "sub_windows = 1");
    scenario.sqlite("airflow.db", ZONE_NOBODY_HAS);
    let output = scenario.audit(&["--format", "json"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("Mars/Olympus"), "{err}");
}

/// With a slow provider (every page takes a quarter of a second), the tries and the journal are
/// prepared before the listing ends: `ONCEONLY_TIMINGS` prints each phase as it ends, and the
/// early preparing ends before the read does. The report is the one of the same audit with a
/// fast provider.
#[test]
fn the_tries_and_the_journal_are_prepared_while_the_provider_is_listed() {
    let fast = mock(state(), MockPagination::Cursor, &[]);
    let expected = audit(&listing_scenario(&fast.url(), MockPagination::Cursor, ""));

    let slow = mock(state(), MockPagination::Cursor, &["slow%1=250"]);
    let scenario = listing_scenario(&slow.url(), MockPagination::Cursor, "");
    let output = audit_in(&scenario, &[("ONCEONLY_TIMINGS", "1")]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let ended = |phase: &str| {
        err.lines()
            .position(|line| line.starts_with(&format!("onceonly timing: {phase} ")))
            .unwrap_or_else(|| panic!("no `{phase}` timing in:\n{err}"))
    };
    assert!(ended("prepare:early") < ended("read"), "{err}");
    assert!(ended("read") < ended("prepare"), "{err}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    assert_eq!(report["findings"], expected["findings"]);
    assert_eq!(report["summary"], expected["summary"]);
}

/// A journal that cannot be read stops a listing still running: the audit exits 2 naming the
/// journal's cell without waiting for the provider, whose every page here takes a second.
#[test]
fn a_journal_that_fails_stops_the_listing() {
    let fast = mock(state(), MockPagination::Cursor, &[]);
    audit(&listing_scenario(
        &fast.url(),
        MockPagination::Cursor,
        "sub_windows = 1",
    ));
    let whole_listing = fast.requests().len();
    assert!(
        whole_listing >= 4,
        "{whole_listing} requests list everything"
    );

    let slow = mock(state(), MockPagination::Cursor, &["slow%1=1000"]);
    let scenario = listing_scenario(&slow.url(), MockPagination::Cursor, "sub_windows = 1");
    scenario.sqlite(
        "journal.db",
        "UPDATE export_journal SET recorded_at = 'not a time' WHERE rowid = 1",
    );
    let output = scenario.audit(&["--format", "json"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("journal.db") && err.contains("recorded_at"),
        "{err}"
    );
    let asked = slow.requests().len();
    assert!(
        asked < whole_listing,
        "the listing went on after the journal failed: {asked} of {whole_listing} requests"
    );
}
