//! The attempts reader on metadata databases that a real Airflow (2.10.5 and 3.3.2, from PyPI,
//! run by its real scheduler) produced: see fixtures/airflow/README.md. Expectations come from
//! the generator's expected.json, derived from what happened in those runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use onceonly::sources::airflow_db::{self, Filter};
use onceonly::sources::database::Database;
use polars::prelude::BooleanChunked;

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
    report_exiting(version, args, 1)
}

/// The JSON report of an audit that exits with `code`.
fn report_exiting(version: &str, args: &[&str], code: i32) -> serde_json::Value {
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
    assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
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
    // The runs per basis, as the generator read them from the metadata.
    let bases = |version: &str| {
        let mut bases: BTreeMap<String, u64> = BTreeMap::new();
        for runs in expected(version)["dags"].as_object().unwrap().values() {
            for run in runs.as_array().unwrap() {
                *bases
                    .entry(run["interval_basis"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
        }
        serde_json::to_value(bases).unwrap()
    };
    // 2.10: every run has a data interval with length except the manual one (logical date).
    let old = bases("airflow-2.10.5");
    assert_eq!(old["logical_date"], 1);
    assert_eq!(
        report("airflow-2.10.5", &[])["coverage"]["interval_basis"],
        old
    );
    // 3.3: @daily gives zero-length intervals (logical date); the manual trigger has no
    // logical date at all, so run_after is used.
    let new = bases("airflow-3.3.2");
    assert_eq!(new["run_after"], 1);
    assert!(new.get("data_interval").is_none(), "{new}");
    assert_eq!(
        report("airflow-3.3.2", &[])["coverage"]["interval_basis"],
        new
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
    let provider = &report["coverage"]["sources"][2];
    let left_out = provider["rows"].as_u64().unwrap() - provider["rows_audited"].as_u64().unwrap();
    assert!(left_out > 0);
    assert_eq!(
        report["coverage"]["objects_left_out"],
        serde_json::json!({"claimed_elsewhere": left_out, "unclaimed": 0})
    );
}

/// A real-Airflow fixture's metadata database (`fixtures/airflow/out/<version>/airflow.db`).
pub fn fixture_db(version: &str) -> PathBuf {
    fixtures()
        .join("airflow/out")
        .join(version)
        .join("airflow.db")
}

/// The SQLite file at `path` as a source.
pub fn sqlite_database(path: &std::path::Path) -> Database {
    Database::parse(
        &format!("sqlite:///{}", path.display()),
        std::path::Path::new("/"),
        None,
    )
    .unwrap()
}

fn read(path: PathBuf, filter: Filter) -> onceonly::error::Result<airflow_db::AirflowRead> {
    let database = sqlite_database(&path);
    crate::postgres::runtime().block_on(airflow_db::read(&database, &filter))
}

#[test]
fn tries_come_from_history_and_task_instance_with_decoded_conf() {
    for version in VERSIONS {
        let read = read(fixture_db(version), Filter::default()).expect("read");
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

/// The run_id of onceonly_e_manual's one run, and how many tries of it `attempts` holds.
fn manual_run(attempts: &polars::prelude::DataFrame) -> (String, usize) {
    let column = |name: &str| attempts.column(name).unwrap().str().unwrap().clone();
    let (dags, runs) = (column("dag_id"), column("run_id"));
    let theirs: Vec<&str> = dags
        .iter()
        .zip(runs.iter())
        .filter(|(dag, _)| *dag == Some("onceonly_e_manual"))
        .map(|(_, run)| run.unwrap())
        .collect();
    (theirs[0].to_string(), theirs.len())
}

#[test]
fn a_try_is_read_with_its_run_and_a_run_is_checked_where_a_try_has_it() {
    for version in VERSIONS {
        let all = read(fixture_db(version), Filter::default()).expect("read");
        let (run_id, tries) = manual_run(&all.attempts);
        let this_run = format!("dag_id = 'onceonly_e_manual' AND run_id = '{run_id}'");

        // A run's cell that fails its check fails the read of its tries, naming dag_run.
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        scenario.sqlite(
            "airflow.db",
            &format!("UPDATE dag_run SET data_interval_end = 'not a time' WHERE {this_run}"),
        );
        let message = read(scenario.path("airflow.db"), Filter::default())
            .err()
            .expect("a try's run with a bad cell is refused")
            .to_string();
        assert!(
            message.contains("dag_run")
                && message.contains("interval_end")
                && message.contains("not a time"),
            "{version}: {message}"
        );

        // The same run without tries is never checked: its tries are all that is gone.
        scenario.sqlite(
            "airflow.db",
            &format!(
                "DELETE FROM task_instance WHERE {this_run}; \
                 DELETE FROM task_instance_history WHERE {this_run}"
            ),
        );
        let without = read(scenario.path("airflow.db"), Filter::default()).expect("read");
        assert_eq!(
            without.attempts.height(),
            all.attempts.height() - tries,
            "{version}"
        );

        // Tries whose run is gone are left out, the others read as before.
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        scenario.sqlite(
            "airflow.db",
            &format!("DELETE FROM dag_run WHERE {this_run}"),
        );
        let runless = read(scenario.path("airflow.db"), Filter::default()).expect("read");
        assert_eq!(
            runless.attempts.height(),
            all.attempts.height() - tries,
            "{version}"
        );
        let column = |name: &str| all.attempts.column(name).unwrap().str().unwrap().clone();
        let others: BooleanChunked = (column("dag_id").iter().zip(column("run_id").iter()))
            .map(|key| key != (Some("onceonly_e_manual"), Some(run_id.as_str())))
            .collect();
        let kept = all.attempts.filter(&others).unwrap();
        assert!(kept.equals_missing(&runless.attempts), "{version}");
    }
}

/// The bounds the provider listing starts on, before the tries are read, are the read tries'
/// own: for an audit of every run (the two try tables scanned apart, at once) and for a
/// filtered one (one query). Bounds that differed would make the listing run again.
#[test]
fn the_early_bounds_are_the_bounds_of_the_tries_read() {
    use onceonly::sources::airflow_db::{AttemptsQuery, TryBounds};
    use onceonly::sources::read_transaction::ReadTransaction;
    for version in VERSIONS {
        let path = fixture_db(version);
        let database = sqlite_database(&path);
        let all = read(path.clone(), Filter::default()).expect("read");
        let dag = all
            .attempts
            .column("dag_id")
            .unwrap()
            .str()
            .unwrap()
            .get(0)
            .unwrap()
            .to_string();
        for filter in [
            Filter::default(),
            Filter {
                dag: Some(dag),
                ..Filter::default()
            },
        ] {
            let (early, read) = crate::postgres::runtime()
                .block_on(async {
                    let mut transaction = ReadTransaction::begin(&database).await?;
                    let query = AttemptsQuery::prepare(&mut transaction, &filter).await?;
                    let early = query.bounds(&mut transaction).await?;
                    let read = query.read(&mut transaction).await?;
                    transaction.finish().await?;
                    Ok::<_, onceonly::error::Error>((early, read))
                })
                .expect("read");
            assert!(read.attempts.height() > 0, "{version} {filter:?}");
            assert_eq!(
                early,
                TryBounds::of(&read.attempts).unwrap(),
                "{version} {filter:?}"
            );
        }
    }
}

/// Airflow's tables hold a try being retried twice: its task_instance row and its history
/// row, with one try number. The try is read once, from the history, in every kind of read; the
/// task_instance copy (its start moved to 2001 here) neither adds a try nor makes its run
/// audited for an activity window only it falls in.
#[test]
fn a_try_both_tables_hold_is_read_once_from_the_history() {
    // 3.x names the task instance in its history rows; 2.10 does not.
    let try_in_both = |version: &str| {
        let (named, by) = match version {
            "airflow-2.10.5" => ("", ""),
            _ => ("task_instance_id, ", "id, "),
        };
        let last = "rowid = (SELECT max(rowid) FROM task_instance WHERE try_number >= 1)";
        format!(
            "INSERT INTO task_instance_history ({named}task_id, dag_id, run_id, map_index,
                 try_number, start_date, end_date, state, hostname, pool, pool_slots, pid,
                 queued_dttm)
             SELECT {by}task_id, dag_id, run_id, map_index, try_number, start_date, end_date,
                 state, hostname, pool, pool_slots, pid, queued_dttm
             FROM task_instance WHERE {last};
             UPDATE task_instance SET start_date = '2001-01-01 00:00:00.000000',
                 end_date = '2001-01-01 00:01:00.000000'
             WHERE {last};"
        )
    };
    // A try both tables hold is read from the history, which keeps no heartbeat (only a
    // running try's matters, and a try being retried is not running): the heartbeat is left
    // out of the comparison.
    let sorted = |read: &airflow_db::AirflowRead| {
        let key = ["dag_id", "run_id", "task_id", "map_index", "try_number"];
        read.attempts
            .drop("heartbeat_at")
            .expect("a heartbeat column")
            .sort(key, Default::default())
            .expect("sort")
    };
    let at = |text: &str| onceonly::timestamp::parse(text).expect("a time");
    for version in VERSIONS {
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        scenario.sqlite("airflow.db", &try_in_both(version));
        let dag: String = rusqlite::Connection::open(scenario.path("airflow.db"))
            .expect("open")
            .query_row(
                "SELECT dag_id FROM task_instance WHERE start_date LIKE '2001-%'",
                [],
                |row| row.get(0),
            )
            .expect("the copied try's DAG");
        let filters = [
            Filter::default(),
            Filter {
                dag: Some(dag.clone()),
                ..Filter::default()
            },
            Filter {
                since: Some(at("2000-01-01T00:00:00Z")),
                until: Some(at("2100-01-01T00:00:00Z")),
                ..Filter::default()
            },
        ];
        for filter in filters {
            let before = read(fixture_db(version), filter.clone()).expect("read");
            let after = read(scenario.path("airflow.db"), filter.clone()).expect("read");
            assert!(before.attempts.height() > 0, "{version} {filter:?}");
            assert!(
                sorted(&after).equals_missing(&sorted(&before)),
                "{version} {filter:?}: the tries differ"
            );
        }
        // Only the task_instance copy was active in 2001: no run is audited.
        let only_the_copy = Filter {
            since: Some(at("2000-12-31T00:00:00Z")),
            until: Some(at("2001-01-02T00:00:00Z")),
            ..Filter::default()
        };
        let read = read(scenario.path("airflow.db"), only_the_copy).expect("read");
        assert_eq!(read.attempts.height(), 0, "{version}");
    }
}

#[test]
fn two_runs_with_one_key_are_refused_naming_the_key() {
    // dag_run's unique key rules this out; a copy of the table without it lets it happen.
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.sqlite(
        "airflow.db",
        "PRAGMA foreign_keys = OFF; \
         CREATE TABLE dag_run_copy AS SELECT * FROM dag_run; \
         DROP TABLE dag_run; \
         ALTER TABLE dag_run_copy RENAME TO dag_run; \
         INSERT INTO dag_run SELECT * FROM dag_run WHERE dag_id = 'onceonly_e_manual'",
    );
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("dag_run")
            && message.contains("two DAG runs have dag_id \"onceonly_e_manual\""),
        "{message}"
    );
    assert!(output.stdout.is_empty(), "no report on a refused read");
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

/// Scheduled in Europe/Berlin across the end of summer time (fixtures/airflow/README.md).
const BERLIN: &str = "onceonly_i_berlin_local_date";
/// Check-then-create: a retry that finds its key committed skips the provider, writes no row.
const CHECK_THEN_CREATE: &str = "onceonly_j_check_then_create";

/// Every try of a DAG in expected.json, with the run it belongs to.
fn tries_of<'e>(
    expected: &'e serde_json::Value,
    dag: &str,
) -> Vec<(&'e serde_json::Value, &'e serde_json::Value)> {
    let mut tries = Vec::new();
    for run in expected["dags"][dag].as_array().expect("the DAG ran") {
        for task in run["task_instances"].as_array().unwrap() {
            for tri in task["tries"].as_array().unwrap() {
                tries.push((run, tri));
            }
        }
    }
    tries
}

/// A report's findings about one DAG.
fn findings_of(report: &serde_json::Value, dag: &str) -> Vec<serde_json::Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["dag_id"] == dag)
        .cloned()
        .collect()
}

#[test]
fn the_dags_own_zone_is_read_from_the_serialized_dag() {
    for version in VERSIONS {
        let path = fixture_db(version);
        let attempts = read(path, Filter::default()).expect("read").attempts;
        let column = |name: &str| -> Vec<Option<String>> {
            attempts
                .column(name)
                .unwrap()
                .str()
                .unwrap()
                .iter()
                .map(|value| value.map(str::to_string))
                .collect()
        };
        let zones: BTreeMap<Option<String>, Option<String>> = column("dag_id")
            .into_iter()
            .zip(column("dag_timezone"))
            .collect();
        let wanted: BTreeMap<Option<String>, Option<String>> =
            serde_json::from_value::<BTreeMap<String, Option<String>>>(
                expected(version)["dag_timezones"].clone(),
            )
            .unwrap()
            .into_iter()
            .map(|(dag, zone)| (Some(dag), zone))
            .collect();
        assert_eq!(zones, wanted, "{version}");
        assert_eq!(
            zones[&Some(BERLIN.to_string())].as_deref(),
            Some("Europe/Berlin")
        );
    }
}

/// `ttl-risk` over the Berlin DAG's four intervals, with a 90-day key TTL, one hour after the
/// last object was created (the fixture's objects are all live).
fn berlin_ttl_risk(scenario: &Scenario) -> serde_json::Value {
    let state: serde_json::Value =
        serde_json::from_str(&scenario.read("provider_state.json")).unwrap();
    let last = state["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|object| object["created"].as_i64().unwrap())
        .max()
        .unwrap();
    let at = chrono::DateTime::from_timestamp(last + 3600, 0)
        .unwrap()
        .to_rfc3339();
    let config = scenario.config();
    let output = onceonly(&[
        "ttl-risk",
        "--config",
        config.to_str().unwrap(),
        "--dag",
        BERLIN,
        "--from",
        "2026-10-22T22:00:00Z",
        "--to",
        "2026-10-25T23:00:00Z",
        "--ttl",
        "90d",
        "--at",
        &at,
        "--format",
        "json",
    ]);
    assert!(
        output.status.code().is_some_and(|code| code < 2),
        "{}",
        stderr(&output)
    );
    serde_json::from_slice(&output.stdout).expect("json")
}

fn classes_and_keys(risk: &serde_json::Value) -> Vec<(String, String)> {
    risk["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|interval| {
            (
                interval["class"].as_str().unwrap().to_string(),
                interval["key"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn keys_in_the_dags_own_zone_across_a_dst_change() {
    for version in VERSIONS {
        let expected = expected(version);
        // The keys the task journaled: local midnight, +02:00 before the switch, +01:00 after.
        let journaled: Vec<String> = tries_of(&expected, BERLIN)
            .iter()
            .flat_map(|(_, tri)| tri["op_keys"].as_array().unwrap().clone())
            .map(|key| key.as_str().unwrap().to_string())
            .collect();
        assert_eq!(journaled.len(), 4, "{version}");
        assert!(
            journaled[2].ends_with("2026-10-25T00:00:00+02:00"),
            "{journaled:?}"
        );
        assert!(
            journaled[3].ends_with("2026-10-26T00:00:00+01:00"),
            "{journaled:?}"
        );

        // The template names no zone: the DAG's own, from the metadata. (The audit of that DAG
        // alone reports nothing of other DAGs: it exits 0.)
        let berlin = findings_of(&report_exiting(version, &["--dag", BERLIN], 0), BERLIN);
        assert!(berlin.is_empty(), "{version}: {berlin:?}");
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        let dedup: Vec<(String, String)> = journaled
            .iter()
            .map(|key| ("deduplicated".to_string(), key.clone()))
            .collect();
        assert_eq!(
            classes_and_keys(&berlin_ttl_risk(&scenario)),
            dedup,
            "{version}"
        );

        // The same zone named in the template or by the operation.
        let template = "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z}\"";
        for zoned in [
            "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z@Europe/Berlin}\"",
            "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z}\"\ntimezone = \"Europe/Berlin\"",
        ] {
            let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
            scenario.edit("onceonly.toml", template, zoned);
            assert_eq!(
                classes_and_keys(&berlin_ttl_risk(&scenario)),
                dedup,
                "{zoned}"
            );
        }

        // Near miss: formatted in UTC the key is a day and an offset off for every interval,
        // and a backfill looks as if it would duplicate every export.
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        scenario.edit(
            "onceonly.toml",
            template,
            &format!("{template}\ntimezone = \"UTC\""),
        );
        let utc = classes_and_keys(&berlin_ttl_risk(&scenario));
        let starts = [
            "2026-10-22T22:00:00+00:00",
            "2026-10-23T22:00:00+00:00",
            "2026-10-24T22:00:00+00:00",
            "2026-10-25T23:00:00+00:00",
        ];
        assert_eq!(
            utc,
            starts
                .iter()
                .map(|start| (
                    "at-risk".to_string(),
                    format!("exp:{BERLIN}:export:{start}")
                ))
                .collect::<Vec<_>>(),
            "{version}"
        );
    }
}

#[test]
fn a_bad_zone_is_a_config_error_naming_the_line() {
    let template = "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z}\"";
    for (changed, named) in [
        (
            format!("{template}\ntimezone = \"Europe/Berln\""),
            "Europe/Berln",
        ),
        (
            template.replace("%:z}", "%:z@Mars/Olympus}"),
            "Mars/Olympus",
        ),
    ] {
        let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
        scenario.edit("onceonly.toml", template, &changed);
        let line = scenario
            .read("onceonly.toml")
            .lines()
            .position(|line| line.contains(named))
            .unwrap()
            + 1;
        let output = scenario.audit(&[]);
        assert_eq!(output.status.code(), Some(2), "{changed}");
        let message = stderr(&output);
        assert!(
            message.contains(&format!("line {line}:")) && message.contains(named),
            "{message}"
        );
    }
}

#[test]
fn check_then_create_retry_is_no_operation_not_an_unrecorded_success() {
    for version in VERSIONS {
        let expected = expected(version);
        // What happened: try 1 committed and then failed; try 2 found the committed row,
        // called nothing and wrote nothing.
        let first: Vec<(&str, usize)> = tries_of(&expected, CHECK_THEN_CREATE)
            .iter()
            .filter(|(run, _)| run["run_id"] == expected["dags"][CHECK_THEN_CREATE][0]["run_id"])
            .map(|(_, tri)| {
                (
                    tri["state"].as_str().unwrap(),
                    tri["journal_phases"].as_array().unwrap().len(),
                )
            })
            .collect();
        assert_eq!(first, [("failed", 2), ("success", 0)], "{version}");

        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        let verdicts = scenario.path("verdicts.ndjson");
        let output = scenario.audit(&[
            "--format",
            "json",
            "--dag",
            CHECK_THEN_CREATE,
            "--verdicts",
            verdicts.to_str().unwrap(),
        ]);
        let verdicts: Vec<(i64, String)> = std::fs::read_to_string(&verdicts)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|verdict| verdict["run_id"] == expected["dags"][CHECK_THEN_CREATE][0]["run_id"])
            .map(|verdict| {
                (
                    verdict["try_number"].as_i64().unwrap(),
                    verdict["verdict"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            verdicts,
            [
                (1, "committed".to_string()),
                (2, "no-operation".to_string())
            ],
            "{version}"
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let ours = findings_of(&report, CHECK_THEN_CREATE);
        assert!(ours.is_empty(), "{version}: {ours:?}");
    }
}

/// What each try's verdict should be, as the generator reads SPEC §5 from what happened; None
/// where it names none of the verdicts (an unjournaled try that created an object).
fn derived_verdicts(expected: &serde_json::Value) -> BTreeMap<(String, String, i64, i64), String> {
    const VERDICTS: [&str; 7] = [
        "committed",
        "reconciled",
        "duplicate",
        "lost-response",
        "intent-only",
        "no-operation",
        "failed-before-effect",
    ];
    let mut verdicts = BTreeMap::new();
    for dag in expected["dags"].as_object().unwrap().keys() {
        for run in expected["dags"][dag].as_array().unwrap() {
            for task in run["task_instances"].as_array().unwrap() {
                for tri in task["tries"].as_array().unwrap() {
                    let verdict = tri["suggested_verdict"].as_str().unwrap();
                    if VERDICTS.contains(&verdict) {
                        verdicts.insert(
                            (
                                dag.clone(),
                                run["run_id"].as_str().unwrap().to_string(),
                                task["map_index"].as_i64().unwrap(),
                                tri["try_number"].as_i64().unwrap(),
                            ),
                            verdict.to_string(),
                        );
                    }
                }
            }
        }
    }
    verdicts
}

#[test]
fn verdicts_on_real_airflow_match_what_happened() {
    for version in VERSIONS {
        let wanted = derived_verdicts(&expected(version));
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        let path = scenario.path("verdicts.ndjson");
        scenario.audit(&["--verdicts", path.to_str().unwrap()]);
        let ours: BTreeMap<(String, String, i64, i64), String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .map(|verdict| {
                (
                    (
                        verdict["dag_id"].as_str().unwrap().to_string(),
                        verdict["run_id"].as_str().unwrap().to_string(),
                        verdict["map_index"].as_i64().unwrap(),
                        verdict["try_number"].as_i64().unwrap(),
                    ),
                    verdict["verdict"].as_str().unwrap().to_string(),
                )
            })
            .filter(|(try_, _)| wanted.contains_key(try_))
            .collect();
        assert_eq!(ours, wanted, "{version}");
    }
}

/// The Python that runs the generator's scripts (they need SQLAlchemy): the Airflow venv's.
fn airflow_python() -> Option<PathBuf> {
    std::env::var_os("ONCEONLY_TEST_AIRFLOW_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            ["3.3.2", "2.10.5"]
                .iter()
                .map(|version| PathBuf::from(format!("/opt/venvs/airflow-{version}/bin/python"))),
        )
        .find(|python| python.is_file())
}

#[test]
fn committed_expectations_are_what_the_generator_derives_today() {
    let Some(python) = airflow_python().filter(|_| !crate::skip::without("airflow")) else {
        crate::skip::skipped(
            "derive_expected.py's output",
            "no Airflow venv (/opt/venvs/airflow-3.3.2, made by fixtures/airflow/generate.sh)",
        );
        return;
    };
    for version in VERSIONS {
        let fixture = format!("airflow/out/{version}");
        let scenario = Scenario::copy_of(&fixture);
        let committed = expected(version);
        let out = scenario.path("derived");
        let db = format!("sqlite:///{}", scenario.path("airflow.db").display());
        let output = std::process::Command::new(&python)
            .arg(fixtures().join("airflow/derive_expected.py"))
            .args(["--version", committed["airflow_version"].as_str().unwrap()])
            .args(["--db", &db])
            .arg("--journal")
            .arg(scenario.path("journal.db"))
            .arg("--provider")
            .arg(scenario.path("provider_state.json"))
            .arg("--rules")
            .arg(scenario.path("provider_rules.json"))
            .arg("--events")
            .arg(scenario.path("driver_events.json"))
            .args(["--start-date", committed["start_date"].as_str().unwrap()])
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run derive_expected.py");
        assert!(
            output.status.success(),
            "{version}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let derived: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("expected.json")).unwrap())
                .unwrap();
        for part in [
            "findings",
            "findings_by_code",
            "reconciled",
            "counts",
            "dag_timezones",
        ] {
            assert_eq!(derived[part], committed[part], "{version}: {part}");
        }
        assert_eq!(derived, committed, "{version}: expected.json");
        assert_eq!(
            std::fs::read_to_string(out.join("SCENARIO.md")).unwrap(),
            scenario.read("SCENARIO.md"),
            "{version}: SCENARIO.md"
        );
    }
    // The PostgreSQL fixture keeps the metadata as a pg_dump, not a database the script can
    // read: its expectations are checked against the run .ci/postgres.sh makes (tests/postgres.rs).
    eprintln!(
        "SKIPPED committed_expectations_are_what_the_generator_derives_today for \
         airflow-3.3.2-postgres: derive_expected.py needs the PostgreSQL database, the fixture \
         holds only its dump"
    );
}

/// A task that two `[[operation]]`s match is audited under the first, in the config's order.
/// An operation that audits nothing because earlier ones take every task it matches is named in
/// a warning, rather than letting the overlap of globs pass silently; the findings are those of
/// the config without it. A catch-all glob after specific operations that still audits a task
/// of its own is shadowed on purpose, and not warned of.
#[test]
fn an_operation_that_earlier_ones_shadow_is_named_in_a_warning() {
    let version = "airflow-3.3.2";
    let alone = report(version, &[]);
    let catch_all =
        "\n[[operation]]\nname = \"every_export\"\ndag_id = \"onceonly_*\"\ntask_id = \"export\"\n";
    let warnings_of = |config: &str| {
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        scenario.write("onceonly.toml", config);
        let output = scenario.audit(&["--format", "json"]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let warnings: Vec<String> = report["coverage"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|warning| warning.as_str())
            .filter(|warning| warning.contains("every_export"))
            .map(str::to_string)
            .collect();
        (report, warnings)
    };
    let config = std::fs::read_to_string(
        crate::scenario::fixtures().join(format!("airflow/out/{version}/onceonly.toml")),
    )
    .unwrap();
    let operations = config.matches("\n[[operation]]").count();
    let (shadowed, warnings) = warnings_of(&format!("{config}{catch_all}"));
    assert_eq!(shadowed["findings"], alone["findings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!(
            "[[operation]] `every_export` (dag_id `onceonly_*`, task_id `export`) audits nothing: the {operations} tasks it matches an earlier operation matches first"
        )),
        "{}",
        warnings[0]
    );
    assert!(
        !alone["coverage"]["warnings"]
            .to_string()
            .contains("every_export")
    );

    // Without the last DAG's own operation, the catch-all audits that DAG: no warning.
    let last = config.rfind("\n[[operation]]").unwrap();
    let (_, warnings) = warnings_of(&format!("{}{catch_all}", &config[..last]));
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// Stores every serialized DAG of the scenario's `airflow.db` as Airflow does under
/// `[core] compress_serialized_dags = True` (its `SerializedDagModel` writes the zlib of the
/// JSON to `data_compressed` and leaves `data` NULL).
fn compress_serialized_dags(scenario: &Scenario) {
    use std::io::Write;
    let db = rusqlite::Connection::open(scenario.path("airflow.db")).unwrap();
    let rows: Vec<(i64, String)> = db
        .prepare("SELECT rowid, data FROM serialized_dag WHERE data IS NOT NULL")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!rows.is_empty());
    for (rowid, data) in rows {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(data.as_bytes()).unwrap();
        db.execute(
            "UPDATE serialized_dag SET data = NULL, data_compressed = ?1 WHERE rowid = ?2",
            rusqlite::params![zlib.finish().unwrap(), rowid],
        )
        .unwrap();
    }
}

#[test]
fn a_dag_serialized_compressed_gives_its_zone_as_well() {
    for version in VERSIONS {
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        compress_serialized_dags(&scenario);
        let zones = |path: PathBuf| -> BTreeMap<String, Option<String>> {
            let attempts = read(path, Filter::default()).expect("read").attempts;
            let text = |name: &str| attempts.column(name).unwrap().str().unwrap().clone();
            let (dags, zones) = (text("dag_id"), text("dag_timezone"));
            dags.iter()
                .zip(zones.iter())
                .map(|(dag, zone)| (dag.unwrap().to_string(), zone.map(str::to_string)))
                .collect()
        };
        let compressed = zones(scenario.path("airflow.db"));
        assert_eq!(compressed, zones(fixture_db(version)), "{version}");
        assert_eq!(compressed[BERLIN].as_deref(), Some("Europe/Berlin"));

        // The Berlin DAG's keys are in its own zone: nothing to report, across the DST change.
        let output = scenario.audit(&["--dag", BERLIN, "--format", "json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(findings_of(&report, BERLIN).is_empty(), "{version}");
        assert!(
            !report["coverage"]["warnings"]
                .to_string()
                .contains("time zone unknown"),
            "{version}: {}",
            report["coverage"]["warnings"]
        );
    }
}

#[test]
fn a_compressed_serialized_dag_that_does_not_inflate_is_bad_input_naming_its_row() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.sqlite(
        "airflow.db",
        &format!(
            "UPDATE serialized_dag SET data = NULL, data_compressed = X'00112233' WHERE dag_id = '{BERLIN}'"
        ),
    );
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("serialized_dag")
            && message.contains("data_compressed")
            && message.contains(BERLIN)
            && message.contains("zlib"),
        "{message}"
    );
}

#[test]
fn a_dag_whose_zone_the_metadata_lacks_is_named_in_a_warning() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.sqlite(
        "airflow.db",
        &format!("UPDATE serialized_dag SET data = json_remove(data, '$.dag.timezone') WHERE dag_id = '{BERLIN}'"),
    );
    let output = scenario.audit(&["--dag", BERLIN, "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a report");
    let warnings = report["coverage"]["warnings"].to_string();
    assert!(
        warnings.contains("time zone unknown for 1 DAG") && warnings.contains(BERLIN),
        "{warnings}"
    );
    // ttl-risk judges from the same keys, and says so too.
    let risk = berlin_ttl_risk(&scenario);
    assert!(
        risk["warnings"].to_string().contains("time zone unknown")
            && risk["warnings"].to_string().contains(BERLIN),
        "{}",
        risk["warnings"]
    );
    // An operation that names the zone needs none from the metadata.
    scenario.edit(
        "onceonly.toml",
        "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z}\"",
        "key = \"exp:{dag_id}:{task_id}:{interval_start:%Y-%m-%dT%H:%M:%S%:z}\"\ntimezone = \"Europe/Berlin\"",
    );
    let output = scenario.audit(&["--dag", BERLIN, "--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        !report["coverage"]["warnings"]
            .to_string()
            .contains("time zone unknown")
    );
}

/// Changes the scenario's `airflow.db` with foreign keys unenforced (as SQLite leaves them
/// unless told): how a row Airflow would not write gets there.
fn unenforced(scenario: &Scenario, sql: &str) {
    let db = rusqlite::Connection::open(scenario.path("airflow.db")).unwrap();
    db.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    db.execute(sql, []).unwrap();
}

/// The tries the fixture's audit reads (`coverage.tries`).
fn tries_read(output: &std::process::Output) -> u64 {
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("a report: {}", stderr(output)));
    report["coverage"]["tries"]
        .as_u64()
        .expect("coverage.tries")
}

#[test]
fn bad_try_rows_of_airflow_are_refused_naming_row_and_column_not_coerced_or_dropped() {
    for version in VERSIONS {
        let whole = Scenario::copy_of(&format!("airflow/out/{version}"));
        let before = tries_read(&whole.audit(&["--format", "json"]));
        // One try of the Berlin DAG, in each table that holds tries.
        let one = |table: &str, set: &str| {
            format!(
                "UPDATE {table} SET {set} WHERE rowid = (SELECT min(rowid) FROM {table} WHERE dag_id = '{BERLIN}')"
            )
        };
        for (sql, column, says) in [
            (
                one("task_instance", "try_number = 'abc'"),
                "try_number",
                "\"abc\" is not an integer",
            ),
            (
                one("task_instance", "try_number = -2"),
                "try_number",
                "try_number -2 is below 0",
            ),
            (
                one("task_instance", "map_index = 'x'"),
                "map_index",
                "\"x\" is not an integer",
            ),
            (
                one("task_instance", "pid = 'twelve'"),
                "pid",
                "\"twelve\" is not an integer",
            ),
        ] {
            let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
            unenforced(&scenario, &sql);
            let output = scenario.audit(&["--format", "json"]);
            let message = stderr(&output);
            assert_eq!(output.status.code(), Some(2), "{version} {sql}: {message}");
            assert!(
                message.contains(&format!("column `{column}`")) && message.contains(says),
                "{version} {sql}: {message}"
            );
        }

        // A try whose run was deleted is named, not dropped.
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        unenforced(
            &scenario,
            &format!(
                "DELETE FROM dag_run WHERE rowid = (SELECT min(rowid) FROM dag_run WHERE dag_id = '{BERLIN}')"
            ),
        );
        let output = scenario.audit(&["--format", "json"]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{version}: {message}");
        assert!(
            message.contains("has no run")
                && message.contains(BERLIN)
                && message.contains("column `run_id`"),
            "{version}: {message}"
        );

        // A try number 0 is an instance that never ran: left out, the others all read.
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        let held = scenario.sqlite_number(
            "airflow.db",
            &format!("SELECT count(*) FROM task_instance_history WHERE dag_id = '{BERLIN}'"),
        );
        assert_eq!(held, 0, "the Berlin DAG's tries are all first tries");
        unenforced(
            &scenario,
            &one(
                "task_instance",
                "try_number = 0, state = NULL, start_date = NULL, end_date = NULL",
            ),
        );
        let output = scenario.audit(&["--format", "json"]);
        assert_eq!(
            tries_read(&output),
            before - 1,
            "{version}: {}",
            stderr(&output)
        );
    }
}
