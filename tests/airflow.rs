//! The attempts reader on metadata databases that a real Airflow (2.10.5 and 3.3.2, from PyPI,
//! run by its real scheduler) produced: see fixtures/airflow/README.md. Expectations come from
//! the generator's expected.json, derived from what happened in those runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use onceonly::sources::airflow_db::{self, Filter};
use onceonly::sources::database::Database;

use crate::scenario::{Scenario, fixtures, onceonly, stderr};

const VERSIONS: [&str; 2] = ["airflow-2.10.5", "airflow-3.3.2"];

fn expected(version: &str) -> serde_json::Value {
    let path = fixtures()
        .join("airflow/out")
        .join(version)
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("expected.json")).expect("json")
}

fn report(version: &str, args: &[&str]) -> serde_json::Value {
    let config = fixtures()
        .join("airflow/out")
        .join(version)
        .join("onceonly.toml");
    let mut all = vec![
        "audit",
        "--config",
        config.to_str().unwrap(),
        "--format",
        "json",
    ];
    all.extend_from_slice(args);
    let output = onceonly(&all);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("json report")
}

#[test]
fn findings_on_real_airflow_match_what_happened() {
    for version in VERSIONS {
        let expected = expected(version);
        let report = report(version, &[]);
        let by_rule: BTreeMap<String, u64> =
            serde_json::from_value(report["summary"]["by_rule"].clone()).unwrap();
        let wanted: BTreeMap<String, u64> =
            serde_json::from_value(expected["findings_by_code"].clone()).unwrap();
        assert_eq!(by_rule, wanted, "{version}");
        assert_eq!(
            report["summary"]["reconciled_retries"].as_u64(),
            Some(expected["reconciled"].as_array().unwrap().len() as u64),
            "{version}: the replayed retries of scenarios a and f"
        );
        assert_eq!(
            report["coverage"]["tries"], expected["counts"]["tries"],
            "{version}"
        );
        // Every expected finding's key is reported under its code.
        for finding in expected["findings"].as_array().unwrap() {
            let code = finding["code"].as_str().unwrap();
            let found = report["findings"].as_array().unwrap().iter().any(|ours| {
                ours["code"] == code
                    && ours["dag_id"] == finding["dag_id"]
                    && (finding["op_key"].is_null()
                        || ours["op_key"] == finding["op_key"]
                        || ours["evidence"]["keys"]
                            .as_array()
                            .unwrap()
                            .contains(&finding["op_key"]))
            });
            assert!(
                found,
                "{version}: {code} for {} not reported",
                finding["dag_id"]
            );
        }
    }
}

#[test]
fn interval_basis_follows_the_airflow_version() {
    // 2.10: every run has a data interval with length except the manual one (logical date).
    let old = report("airflow-2.10.5", &[]);
    assert_eq!(
        old["coverage"]["interval_basis"],
        serde_json::json!({"data_interval": 16, "logical_date": 1})
    );
    // 3.3: @daily gives zero-length intervals (logical date); the manual trigger has no
    // logical date at all, so run_after is used.
    let new = report("airflow-3.3.2", &[]);
    assert_eq!(
        new["coverage"]["interval_basis"],
        serde_json::json!({"logical_date": 19, "run_after": 1})
    );
}

#[test]
fn dag_filter_is_pushed_into_sql() {
    let report = report("airflow-3.3.2", &["--dag", "onceonly_d_*"]);
    assert_eq!(report["coverage"]["tries"], 4);
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    // The unjournaled objects of onceonly_g carry keys g's template makes: they are that DAG's,
    // left out of this audit (SPEC §7) and counted with the other DAGs' objects.
    assert_eq!(codes, ["D001", "R001", "T001"]);
    assert_eq!(
        report["coverage"]["objects_left_out"],
        serde_json::json!({"claimed_elsewhere": 19, "unclaimed": 0})
    );
}

fn read(path: PathBuf, filter: Filter) -> onceonly::error::Result<airflow_db::AirflowRead> {
    let database = Database::parse(
        &format!("sqlite:///{}", path.display()),
        std::path::Path::new("/"),
        None,
    )
    .unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(airflow_db::read(&database, &filter))
}

#[test]
fn tries_come_from_history_and_task_instance_with_decoded_conf() {
    for version in VERSIONS {
        let read = read(
            fixtures()
                .join("airflow/out")
                .join(version)
                .join("airflow.db"),
            Filter::default(),
        )
        .expect("read");
        let attempts = read.attempts;
        let expected = expected(version);
        assert_eq!(
            attempts.height() as u64,
            expected["counts"]["tries"].as_u64().unwrap(),
            "{version}"
        );
        assert_eq!(read.version, expected["alembic_version"].as_str().unwrap());
        assert!(read.warnings.is_empty(), "{:?}", read.warnings);
        // The manual run's conf carries the approval, in 2.x from a pickle.
        let confs: Vec<Option<&str>> = attempts
            .column("conf")
            .unwrap()
            .str()
            .unwrap()
            .iter()
            .collect();
        let dags: Vec<Option<&str>> = attempts
            .column("dag_id")
            .unwrap()
            .str()
            .unwrap()
            .iter()
            .collect();
        let manual = dags
            .iter()
            .position(|dag| *dag == Some("onceonly_e_manual"))
            .expect("manual run");
        let conf: serde_json::Value = serde_json::from_str(confs[manual].expect("conf")).unwrap();
        assert_eq!(conf["approval_id"], "APR-0042", "{version}");
    }
}

/// A writable copy of a fixture database, changed with SQL.
fn changed_copy(version: &str, sql: &'static str) -> Scenario {
    let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
    scenario.sqlite("airflow.db", sql);
    scenario
}

#[test]
fn unknown_but_compatible_schema_is_read_with_a_warning() {
    let scenario = changed_copy(
        "airflow-3.3.2",
        "UPDATE alembic_version SET version_num = 'feedc0ffee00'",
    );
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let warnings = report["coverage"]["warnings"].to_string();
    assert!(
        warnings.contains("feedc0ffee00") && warnings.contains("Airflow 3.x"),
        "{warnings}"
    );
}

#[test]
fn missing_table_or_column_names_version_and_what_is_missing() {
    let scenario = changed_copy("airflow-2.10.5", "DROP TABLE task_instance_history");
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("5f2621c13b39") && message.contains("task_instance_history.try_number"),
        "{message}"
    );

    let scenario = changed_copy(
        "airflow-3.3.2",
        "DROP INDEX idx_dag_run_run_after; ALTER TABLE dag_run DROP COLUMN run_after",
    );
    let message = stderr(&scenario.audit(&[]));
    assert!(
        message.contains("d2f4e1b3c5a7") && message.contains("dag_run.run_after"),
        "{message}"
    );
}

#[test]
fn empty_or_missing_database_is_refused() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.write("airflow.db", "");
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("not an Airflow metadata database"),
        "{}",
        stderr(&output)
    );

    std::fs::remove_file(scenario.path("airflow.db")).unwrap();
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("airflow.db"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_database_is_not_written() {
    let path = fixtures().join("airflow/out/airflow-3.3.2/airflow.db");
    let before = std::fs::read(&path).unwrap();
    report("airflow-3.3.2", &[]);
    assert!(
        std::fs::read(&path).unwrap() == before,
        "the audit changed the metadata database"
    );
}
