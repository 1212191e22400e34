//! How the sources are read side by side (`sources::load`): the provider listing starts on the
//! time bounds Airflow's database gives before the tries are read, and the window it covers is
//! still exactly the tries' own (SPEC §3) when those bounds turn out different.

use serde_json::Value;

use onceonly::commands::mock_provider::MockPagination;

use crate::provider_http::{listing_scenario, mock, state};
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
    let output = scenario.audit(&["--format", "json"]);
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
