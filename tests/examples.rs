//! examples/airflow: the nightly audit DAG parses in a real Airflow, and its script behaves as
//! a nightly job should when run twice.

use std::process::Command;

use crate::scenario::{Scenario, fixtures};
use crate::skip;

fn dag_file() -> String {
    std::fs::read_to_string(fixtures().join("../examples/airflow/onceonly_nightly_audit.py"))
        .unwrap()
}

#[test]
fn the_nightly_dag_imports_in_real_airflow() {
    check_example_dag(
        "onceonly_nightly_audit",
        "assert [t.task_id for t in dag.tasks] == ['audit'], dag.tasks",
    );
}

/// Checks in a real Airflow that `examples/airflow` parses with no import error, that `dag_id`
/// passes the Python `checks` (with `dag` bound to it), and that its runs audit whole days:
/// the timetable gives a scheduled run, and a run triggered by hand, the whole day before it
/// as data interval, which the DAGs' scripts audit.
pub fn check_example_dag(dag_id: &str, checks: &str) {
    check_in_airflow(
        &format!("{dag_id} in a real Airflow"),
        &format!(
            "from airflow.models.dagbag import DagBag
from airflow.serialization.encoders import coerce_to_core_timetable
from airflow.timetables.base import DataInterval, TimeRestriction
import pendulum
bag = DagBag('examples/airflow')
assert not bag.import_errors, bag.import_errors
dag = bag.dags['{dag_id}']
{checks}
timetable = coerce_to_core_timetable(dag.timetable)
day = lambda d, hour=0: pendulum.datetime(2026, 3, d, hour)
scheduled = timetable.next_dagrun_info(
    last_automated_data_interval=DataInterval(day(1), day(2)),
    restriction=TimeRestriction(earliest=None, latest=None, catchup=True))
assert scheduled.run_after == day(3), scheduled
assert scheduled.data_interval == DataInterval(day(2), day(3)), scheduled
manual = timetable.infer_manual_data_interval(run_after=day(3, 6))
assert manual == DataInterval(day(2), day(3)), manual
print('ok')"
        ),
    );
}

/// Runs the Python `check` in a real Airflow (an empty `AIRFLOW_HOME`, no example DAGs) from
/// the repository's root and asserts it succeeds; recorded as skipped without Airflow's venv.
fn check_in_airflow(what: &str, check: &str) {
    let Some(python) = skip::airflow_python(what) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(python)
        .args(["-c", check])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("AIRFLOW_HOME", home.path())
        .env("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The DAG's bash script with Airflow's template values filled in for one night.
fn script_for(night: &str, next: &str) -> String {
    dag_script(&dag_file(), "AUDIT", night, next)
}

/// The bash script a DAG file holds in `NAME = r"""…"""`, with Airflow's template values
/// filled in for one night.
pub fn dag_script(dag_file: &str, name: &str, night: &str, next: &str) -> String {
    let opening = format!("{name} = r\"\"\"");
    let start = dag_file.find(&opening).unwrap() + opening.len();
    let end = start + dag_file[start..].find("\"\"\"").unwrap();
    dag_file[start..end]
        .replace("{{ data_interval_end | ds }}", &next[..10])
        .replace("{{ data_interval_start | ts }}", night)
        .replace("{{ data_interval_end | ts }}", next)
}

#[test]
fn the_nightly_script_fails_on_new_findings_only() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let reports = scenario.path("reports");
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_onceonly"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        binary.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let night = |script: String| {
        Command::new("bash")
            .args(["-c", &script])
            .env("PATH", &path)
            .env("ONCEONLY_CONFIG", scenario.config())
            .env("ONCEONLY_REPORTS", &reports)
            .output()
            .unwrap()
    };
    // The night the fixture's runs happened.
    let day = crate::scenario::airflow_run_day("airflow-3.3.2");
    let next = (chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d").unwrap()
        + chrono::Days::new(1))
    .to_string();
    let (night_start, night_end) = (
        format!("{day}T00:00:00+00:00"),
        format!("{next}T00:00:00+00:00"),
    );
    let first = night(script_for(&night_start, &night_end));
    assert_eq!(
        first.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for file in [
        format!("{next}.json"),
        format!("{next}.html"),
        "report.html".to_string(),
        format!("{next}.plan.md"),
        format!("{next}.repair.sql"),
        "onceonly.prom".to_string(),
        "latest.json".to_string(),
        format!("{next}.evidence/manifest.json"),
    ] {
        assert!(reports.join(&file).exists(), "{file} missing");
    }
    let found = |file: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(reports.join(file)).unwrap()).unwrap()
    };
    let first_findings = found(&format!("{next}.json"))["findings"]
        .as_array()
        .unwrap()
        .len();
    assert!(first_findings > 0);
    // Airflow retries the failed task: the retry is judged as the first try was, not against
    // the report the first try left as latest.json.
    let retry = night(script_for(&night_start, &night_end));
    assert_eq!(
        retry.status.code(),
        Some(1),
        "a retry must not pass the night: {}",
        String::from_utf8_lossy(&retry.stderr)
    );
    // The next night (its own report name) nothing new happened: the known findings do not
    // fail the job again.
    let second = night(script_for(&night_start, &night_end).replace(
        &format!("today=\"$reports/{next}\""),
        "today=\"$reports/the-next-night\"",
    ));
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let report = found("latest.json");
    assert_eq!(report["baseline"]["new"], 0);
    assert_eq!(report["baseline"]["persisting"], first_findings);
}
