//! Tries still in flight when the databases are read (issue 42.1, SPEC §5): no rule that
//! reasons from an absence judges their interval, their verdict is `in-flight`, the coverage
//! lists them, the plan proposes nothing for them; a running try with a stale heartbeat is
//! named probably dead and judged as failed.
//!
//! The metadata is the real Airflow 3.3.2 scheduler's database, with the last try of
//! `onceonly_c_exhausted` (an orphan intent, L002, once finished) put back to what Airflow
//! writes while it runs: `running`, no `end_date`, its run `running`, and a heartbeat set
//! relative to the test's own clock (a fixture's heartbeat ages with the fixture).

use serde_json::Value;

use crate::scenario::{Scenario, stderr, stdout};

const DAG: &str = "onceonly_c_exhausted";
const RUN: &str = "scheduled__2026-11-27T00:00:00+00:00";

/// The 3.3.2 scenario with `DAG`'s last try of `RUN` running, its heartbeat `age` seconds old.
fn running(age: i64) -> Scenario {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let beat = (chrono::Utc::now() - chrono::Duration::seconds(age))
        .format("%Y-%m-%d %H:%M:%S%.6f")
        .to_string();
    scenario.sqlite(
        "airflow.db",
        &format!(
            "UPDATE task_instance SET state = 'running', end_date = NULL, \
             last_heartbeat_at = '{beat}' WHERE dag_id = '{DAG}' AND run_id = '{RUN}'; \
             UPDATE dag_run SET state = 'running', end_date = NULL \
             WHERE dag_id = '{DAG}' AND run_id = '{RUN}';"
        ),
    );
    scenario
}

fn report(scenario: &Scenario, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = scenario.audit(&all);
    let report =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|err| panic!("{err}: {}", stderr(&out)));
    (out.status.code(), report)
}

fn codes_of(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["dag_id"] == DAG)
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["interval"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The finished database gives the L002 that the running try must not get.
#[test]
fn a_running_try_is_in_flight_not_an_orphan_intent() {
    let finished = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let (_, before) = report(&finished, &[]);
    assert!(
        codes_of(&before).contains(&("L002".into(), "2026-11-27T00:00:00Z".into())),
        "the finished try is an orphan intent: {:?}",
        codes_of(&before)
    );
    assert!(before["coverage"].get("in_flight").is_none());

    let scenario = running(20);
    let verdicts = scenario.path("verdicts.ndjson");
    let plan = scenario.path("plan.json");
    let (code, after) = report(
        &scenario,
        &[
            "--verdicts",
            verdicts.to_str().unwrap(),
            "--plan",
            plan.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(1), "other DAGs still have findings");
    assert!(
        !codes_of(&after).iter().any(|(code, _)| code == "L002"),
        "no orphan intent while the try runs: {:?}",
        codes_of(&after)
    );
    let in_flight = &after["coverage"]["in_flight"];
    assert_eq!(in_flight["tries"], 1, "{in_flight}");
    assert_eq!(in_flight["intervals"], 1);
    assert_eq!(in_flight["runs_not_finished"], 1);
    assert_eq!(in_flight["findings_withheld"], 1);
    let listed = &in_flight["listed"][0];
    assert_eq!(listed["dag_id"], DAG);
    assert_eq!(listed["run_id"], RUN);
    assert_eq!(listed["try_number"], 3);
    assert_eq!(listed["state"], "running");
    assert!(in_flight["probably_dead"].as_array().unwrap().is_empty());
    assert_eq!(after["summary"]["verdicts"]["in-flight"], 1);

    // Its verdict, and no other try's, is in-flight; the earlier, failed tries keep theirs.
    let rows: Vec<Value> = std::fs::read_to_string(&verdicts)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|row: &Value| row["dag_id"] == DAG && row["run_id"] == RUN)
        .collect();
    let by_try: Vec<(i64, &str)> = rows
        .iter()
        .map(|row| {
            (
                row["try_number"].as_i64().unwrap(),
                row["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by_try,
        [
            (1, "failed-before-effect"),
            (2, "failed-before-effect"),
            (3, "in-flight")
        ]
    );

    // The plan proposes nothing for the interval in flight.
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let for_it: Vec<&Value> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|action| action["dag_id"] == DAG)
        .collect();
    assert!(for_it.is_empty(), "{for_it:?}");

    // The terminal report says so, and does not read as all clear for the DAG.
    let out = scenario.audit(&["--dag", DAG]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(
        text.contains("in flight: 1 tries not finished")
            && text.contains(&format!("in flight: {DAG} export {RUN}#3 running"))
            && text.contains("judged when they finish"),
        "{text}"
    );
}

/// A running try whose heartbeat is older than the scheduler's timeout is probably dead:
/// Airflow will fail it, so it is judged as failed (its orphan intent is reported), and
/// named as such; a longer `heartbeat_timeout` keeps it in flight.
#[test]
fn a_running_try_with_a_stale_heartbeat_is_probably_dead() {
    let scenario = running(3600);
    let (_, stale) = report(&scenario, &[]);
    let in_flight = &stale["coverage"]["in_flight"];
    assert_eq!(in_flight["tries"], 0, "{in_flight}");
    let dead = &in_flight["probably_dead"][0];
    assert_eq!(dead["run_id"], RUN);
    let beat = onceonly::timestamp::parse(dead["heartbeat_at"].as_str().unwrap()).unwrap();
    assert!(chrono::Utc::now().timestamp_micros() - beat >= 3_600_000_000);
    assert!(
        codes_of(&stale).contains(&("L002".into(), "2026-11-27T00:00:00Z".into())),
        "{:?}",
        codes_of(&stale)
    );
    let text = stdout(&scenario.audit(&["--dag", DAG]));
    assert!(text.contains("probably dead:"), "{text}");

    scenario.edit(
        "onceonly.toml",
        "[airflow]\n",
        "[airflow]\nheartbeat_timeout = \"2h\"\n",
    );
    let (_, patient) = report(&scenario, &[]);
    assert_eq!(
        patient["coverage"]["in_flight"]["tries"], 1,
        "{}",
        patient["coverage"]
    );
    assert!(!codes_of(&patient).iter().any(|(code, _)| code == "L002"));
}

/// A try waiting for its retry is not final either, and a bad timeout names the key.
#[test]
fn up_for_retry_is_in_flight_and_a_bad_timeout_is_refused() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.sqlite(
        "airflow.db",
        &format!(
            "UPDATE task_instance SET state = 'up_for_retry' WHERE dag_id = '{DAG}' AND run_id = '{RUN}'; \
             UPDATE dag_run SET state = 'running' WHERE dag_id = '{DAG}' AND run_id = '{RUN}';"
        ),
    );
    let (_, waiting) = report(&scenario, &[]);
    assert_eq!(waiting["coverage"]["in_flight"]["tries"], 1);
    assert_eq!(
        waiting["coverage"]["in_flight"]["listed"][0]["state"],
        "up_for_retry"
    );
    assert!(!codes_of(&waiting).iter().any(|(code, _)| code == "L002"));

    scenario.edit(
        "onceonly.toml",
        "[airflow]\n",
        "[airflow]\nheartbeat_timeout = \"soon\"\n",
    );
    let out = scenario.audit(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("heartbeat_timeout"),
        "{}",
        stderr(&out)
    );
}

/// The real scheduler's database copied with SQLite's backup API while two tries slept
/// (`fixtures/airflow/in_flight.sh`): one after creating its object, one after writing its
/// intent; one try waited for its retry, one for a pool slot. Judged as of the copy (the
/// heartbeats were seconds old; the timeout here is longer than the fixture's age), only the
/// finished lost response is a finding; judged today, the sleeping tries are probably dead.
#[test]
fn a_scheduler_database_copied_while_tries_run_judges_only_what_finished() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2-in-flight");
    let expected: Value = serde_json::from_str(&scenario.read("expected_in_flight.json")).unwrap();
    scenario.edit(
        "onceonly.toml",
        "[airflow]\n",
        "[airflow]\nheartbeat_timeout = \"1000000h\"\n",
    );
    let (code, at_copy) = report(&scenario, &[]);
    assert_eq!(code, Some(1));
    let found: Vec<(String, String, String)> = at_copy["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_string(),
                f["dag_id"].as_str().unwrap().to_string(),
                f["interval"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [(
            "L001".to_string(),
            "onceonly_k_in_flight".to_string(),
            "2026-12-03T00:00:00Z".to_string()
        )],
        "only the finished lost response"
    );
    let in_flight = &at_copy["coverage"]["in_flight"];
    assert_eq!(in_flight["findings_withheld"], 3, "{in_flight}");
    // Every try the copy holds in a state that is not final is listed, except the try waiting
    // for its retry: Airflow keeps it as `failed` in task_instance_history, and its interval
    // waits because its run is still running.
    let listed: Vec<(String, String)> = in_flight["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["run_id"].as_str().unwrap().into(),
                t["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    for wanted in expected["not_final_tries"].as_array().unwrap() {
        let pair = (
            wanted["run_id"].as_str().unwrap().to_string(),
            wanted["state"].as_str().unwrap().to_string(),
        );
        assert_eq!(
            listed.contains(&pair),
            pair.1 != "up_for_retry",
            "{pair:?} in {listed:?}"
        );
    }
    assert_eq!(in_flight["intervals"], 4);

    // The default timeout, long after the copy: the sleeping tries are probably dead, judged
    // as failed, and their absences are findings again.
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2-in-flight");
    let (_, later) = report(&scenario, &[]);
    assert_eq!(
        later["coverage"]["in_flight"]["probably_dead"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{}",
        later["coverage"]
    );
    assert!(codes_in(&later).contains(&"L002".to_string()));
}

fn codes_in(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}
