//! `onceonly ttl-risk` on the real-Airflow run, on scenarios for each class, and on a backfill
//! that real Airflow 3.3.2 planned (`airflow backfill create`).

use std::collections::BTreeMap;

use crate::scenario::{Scenario, airflow_days, airflow_first_objects, onceonly, rfc3339, stderr};

const V3: &str = "airflow-3.3.2";

fn risk(scenario: &Scenario, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let config = scenario.config();
    let mut all = vec![
        "ttl-risk",
        "--config",
        config.to_str().unwrap(),
        "--format",
        "json",
    ];
    all.extend_from_slice(args);
    let output = onceonly(&all);
    let report =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{}", stderr(&output)));
    (output.status.code(), report)
}

fn classes(report: &serde_json::Value) -> BTreeMap<String, String> {
    report["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                format!(
                    "{}[{}]",
                    &i["interval"].as_str().unwrap()[..10],
                    i["map_index"]
                ),
                i["class"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `--from`/`--to` over the three scheduled intervals of the fixture's scenarios.
fn run_days() -> Vec<String> {
    let [first, _, last] = airflow_days(V3);
    vec!["--from".into(), first, "--to".into(), last]
}

/// A moment of the fixture run: scenario d's keys live 5 s at the fake provider, and this is
/// 4 s after d's second interval's object was created, so the first interval's key has
/// expired and the others' have not. Also returns when the second key expires.
fn while_ds_second_key_lives() -> (String, String) {
    let d = airflow_first_objects(V3, "onceonly_d_rerun_after_success");
    assert!(
        d[1].1 - d[0].1 > 1,
        "d's first key expired before the second: {d:?}"
    );
    (rfc3339(d[1].1 + 4), rfc3339(d[1].1 + 5))
}

/// A minute after the fixture run's last object.
fn after_the_run() -> String {
    let last = [
        "onceonly_b_unstable_key",
        "onceonly_c_exhausted",
        "onceonly_f_api_clear",
    ]
    .iter()
    .flat_map(|dag| airflow_first_objects(V3, dag))
    .map(|(_, created)| created)
    .max()
    .unwrap();
    rfc3339(last + 60)
}

fn days_with(args: &[&str]) -> Vec<String> {
    args.iter()
        .map(|arg| arg.to_string())
        .chain(run_days())
        .collect()
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn expired_keys_are_at_risk_and_live_ones_deduplicated() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    // The fake provider kept scenario d's keys for 5 s after each object was created.
    let (at, expires) = while_ds_second_key_lives();
    let args = days_with(&["--dag", "onceonly_d_rerun_after_success", "--at", &at]);
    let (code, report) = risk(&scenario, &refs(&args));
    assert_eq!(code, Some(1), "an at-risk interval fails the check");
    let [first, second, third] = airflow_days(V3);
    let expected: BTreeMap<String, String> = [
        (format!("{first}[-1]"), "at-risk"),
        (format!("{second}[-1]"), "deduplicated"),
        (format!("{third}[-1]"), "deduplicated"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect();
    assert_eq!(classes(&report), expected);
    assert_eq!(report["intervals"][1]["key_expires"], expires);
    assert!(
        report["intervals"][0]["repair"]
            .as_str()
            .unwrap()
            .contains("check-then-create")
    );
    assert!(
        report["intervals"][1]["repair"]
            .as_str()
            .unwrap()
            .contains("gets exp_")
    );
}

#[test]
fn nothing_created_is_safe_unstable_keys_are_at_risk_and_no_ttl_is_unknown() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let at = after_the_run();
    let [first, second, _] = airflow_days(V3);
    let (first, second) = (format!("{first}[-1]"), format!("{second}[-1]"));
    let args = days_with(&["--dag", "onceonly_c_exhausted", "--at", &at]);
    let (_, report) = risk(&scenario, &refs(&args));
    let c = classes(&report);
    assert_eq!(c[&first], "safe", "retries exhausted, nothing was created");
    // No TTL is configured for c: its other intervals have objects but nothing to decide with.
    assert_eq!(c[&second], "unknown");
    assert!(
        report["intervals"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("no key TTL")
    );

    let args = days_with(&[
        "--dag",
        "onceonly_b_unstable_key",
        "--ttl",
        "stripe",
        "--at",
        &at,
    ]);
    let (_, report) = risk(&scenario, &refs(&args));
    let b = classes(&report);
    assert_eq!(b[&first], "at-risk", "tries used different keys");
    assert_eq!(b[&second], "deduplicated", "within Stripe's 24 h");
    assert!(
        report["ttl_source"].as_str().unwrap().contains("Stripe"),
        "{}",
        report["ttl_source"]
    );

    // Mapped tasks are separate operations: one row per map index.
    let args = days_with(&["--dag", "onceonly_f_api_clear", "--ttl", "24h", "--at", &at]);
    let (code, report) = risk(&scenario, &refs(&args));
    assert_eq!(code, Some(0), "nothing at risk");
    assert!(classes(&report).contains_key(&first.replace("[-1]", "[1]")));
}

fn with_backfill(sql: Option<&str>) -> Scenario {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    std::fs::copy(
        crate::scenario::fixtures().join("airflow/out/airflow-3.3.2-backfill/airflow.db"),
        scenario.path("airflow.db"),
    )
    .unwrap();
    if let Some(sql) = sql {
        scenario.sqlite("airflow.db", sql);
    }
    scenario
}

#[test]
fn a_planned_airflow_backfill_is_read_from_the_metadata_database() {
    let scenario = with_backfill(None);
    let (at, _) = while_ds_second_key_lives();
    let (code, report) = risk(&scenario, &["--backfill-id", "1", "--at", &at]);
    assert_eq!(code, Some(1));
    assert_eq!(report["dag_id"], "onceonly_d_rerun_after_success");
    assert_eq!(report["reprocess_behavior"], "completed");
    // The backfill was created over the run's three days (fixtures/airflow/README.md).
    let [first, _, last] = airflow_days(V3);
    assert_eq!(
        (report["from"].as_str(), report["to"].as_str()),
        (
            Some(format!("{first}T00:00:00Z").as_str()),
            Some(format!("{last}T00:00:00Z").as_str())
        )
    );
    assert_eq!(report["summary"]["at-risk"], 1);

    // A backfill that re-runs nothing existing cannot duplicate anything: Airflow records, for
    // each logical date that has a run, that it leaves it alone.
    let none = with_backfill(Some(
        "UPDATE backfill SET reprocess_behavior = 'none' WHERE id = 1;
         UPDATE backfill_dag_run SET dag_run_id = NULL, exception_reason = 'already exists'
         WHERE backfill_id = 1",
    ));
    let (code, report) = risk(&none, &["--backfill-id", "1", "--at", &at]);
    assert_eq!(code, Some(0));
    assert_eq!(report["summary"]["safe"], 3);
    let reason = report["intervals"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("does not re-run"), "{reason}");
    assert!(reason.contains("`already exists`"), "{reason}");
}

/// What a backfill re-runs is what Airflow recorded when it planned it (`backfill_dag_run`), not
/// what onceonly would guess: with `reprocess_behavior = "failed"` Airflow clears a run whose
/// state is failed, and clearing a run re-runs every task of it, an export that succeeded
/// included. Here the first day's run failed elsewhere (Airflow cleared it: it is re-run, and
/// its key has expired: at risk) and the other days' runs succeeded (left alone: safe).
#[test]
fn a_backfill_re_runs_an_export_that_succeeded_in_a_run_that_failed() {
    let [first, ..] = airflow_days(V3);
    let failed = with_backfill(Some(&format!(
        "UPDATE backfill SET reprocess_behavior = 'failed' WHERE id = 1;
         UPDATE backfill_dag_run SET dag_run_id = NULL, exception_reason = 'already exists'
         WHERE backfill_id = 1 AND logical_date NOT LIKE '{first}%'"
    )));
    let (_, at) = while_ds_second_key_lives();
    let (code, report) = risk(&failed, &["--backfill-id", "1", "--at", &at]);
    assert_eq!(code, Some(1), "{report:#}");
    let intervals = report["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), 3);
    assert_eq!(intervals[0]["interval"], format!("{first}T00:00:00Z"));
    assert_eq!(intervals[0]["rerun"], true);
    assert_eq!(intervals[0]["class"], "at-risk", "{:#}", intervals[0]);
    for later in &intervals[1..] {
        assert_eq!(later["rerun"], false, "{later:#}");
        assert_eq!(later["class"], "safe");
    }
}

#[test]
fn bad_backfill_requests_exit_two() {
    let scenario = with_backfill(None);
    let config = scenario.config();
    let config = config.to_str().unwrap();
    let missing = onceonly(&["ttl-risk", "--config", config, "--backfill-id", "9"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no backfill 9"));
    let other_dag = onceonly(&[
        "ttl-risk",
        "--config",
        config,
        "--backfill-id",
        "1",
        "--dag",
        "onceonly_a_stable_key",
    ]);
    assert_eq!(other_dag.status.code(), Some(2));

    // What Airflow decided for a date, unreadable: the row and column are named.
    let unreadable = with_backfill(Some(
        "UPDATE backfill_dag_run SET logical_date = 'soon' WHERE id = 2",
    ));
    let unreadable_config = unreadable.config();
    let output = onceonly(&[
        "ttl-risk",
        "--config",
        unreadable_config.to_str().unwrap(),
        "--backfill-id",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("row 2, column `backfill_dag_run.logical_date`: \"soon\" is not a timestamp"),
        "{}",
        stderr(&output)
    );

    let old = Scenario::copy_of("airflow/out/airflow-2.10.5");
    let output = onceonly(&[
        "ttl-risk",
        "--config",
        old.config().to_str().unwrap(),
        "--backfill-id",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("Airflow 2 has no planned backfills"),
        "{}",
        stderr(&output)
    );

    let bad_ttl = onceonly(&[
        "ttl-risk",
        "--config",
        config,
        "--dag",
        "x",
        "--from",
        "2026-11-26",
        "--to",
        "2026-11-28",
        "--ttl",
        "a while",
    ]);
    assert_eq!(bad_ttl.status.code(), Some(2));
    assert!(stderr(&bad_ttl).contains("stripe, paypal, adyen, aws-step-functions"));
}

/// Intervals of the range that no run covers are counted and named, not left out silently:
/// the schedule's step comes from the spacing of the DAG's runs (daily, in the real run).
#[test]
fn intervals_without_a_run_are_counted() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let (_, report) = risk(
        &scenario,
        &[
            "--dag",
            "onceonly_c_exhausted",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-30",
            // After the fixture's tries ran (on 2026-11-30): only what happened before counts.
            "--at",
            "2026-12-01T10:02:00Z",
        ],
    );
    // Eleven days; runs exist for 11-26, 11-27 and 11-28.
    assert_eq!(report["intervals"].as_array().unwrap().len(), 3);
    let without = &report["without_run"];
    assert_eq!(without["count"], 8, "{without:#}");
    let starts: Vec<&str> = without["starts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(starts.first(), Some(&"2026-11-20T00:00:00Z"));
    assert_eq!(starts.last(), Some(&"2026-11-30T00:00:00Z"));
    assert!(!starts.contains(&"2026-11-27T00:00:00Z"));
    assert!(
        without["schedule"]
            .as_str()
            .unwrap()
            .starts_with("every 1d")
    );

    // One run cannot show a schedule: said so, not guessed.
    let (_, report) = risk(
        &scenario,
        &[
            "--dag",
            "onceonly_e_manual",
            "--from",
            "2026-11-20",
            // Its one (manual) run is of 2026-11-30T23:44:33Z.
            "--to",
            "2026-12-01",
        ],
    );
    assert_eq!(report["without_run"]["count"], serde_json::Value::Null);
    assert!(
        report["without_run"]["schedule"]
            .as_str()
            .unwrap()
            .starts_with("not known"),
        "{report:#}"
    );
}

/// A re-run under a key the provider still remembers gets the remembered object back even when
/// it was voided since (fixtures/rules/M001/fires: `exp_101` of 2026-11-01 is cancelled): no new
/// export, so the interval is `deduplicated`, not `safe`; what the re-run gets back is what
/// `[provider] replay` says. Once the key expired, a re-run creates a live object: `safe`.
#[test]
fn a_voided_object_under_a_remembered_key_is_replayed_not_safe() {
    let scenario = Scenario::of_rules("M001/fires");
    let day = [
        "--dag",
        "orders",
        "--from",
        "2026-11-01",
        "--to",
        "2026-11-01",
    ];
    let first_interval = |at: &str| {
        let mut args = day.to_vec();
        args.extend(["--at", at]);
        let (_, report) = risk(&scenario, &args);
        report["intervals"][0].clone()
    };
    // exp_101 was created at 2026-11-02T00:05:10Z; the provider keeps keys 24 h.
    let remembered = first_interval("2026-11-02T12:00:00Z");
    assert_eq!(remembered["class"], "deduplicated", "{remembered:#}");
    let reason = remembered["reason"].as_str().unwrap();
    assert!(
        reason.contains("exp_101's first response") && reason.contains("replay = frozen"),
        "{reason}"
    );
    assert!(
        remembered["repair"]
            .as_str()
            .unwrap()
            .contains("new key version")
    );
    let forgotten = first_interval("2026-11-04T00:00:00Z");
    assert_eq!(forgotten["class"], "safe", "{forgotten:#}");

    scenario.edit(
        "onceonly.toml",
        "key_ttl = \"24h\"",
        "key_ttl = \"24h\"\nreplay = \"latest\"",
    );
    let latest = first_interval("2026-11-02T12:00:00Z");
    assert_eq!(latest["class"], "deduplicated");
    assert!(
        latest["reason"]
            .as_str()
            .unwrap()
            .contains("latest status (replay = latest), cancelled"),
        "{latest:#}"
    );
}

/// A provider that echoes no key: the object is known by the journal row that names its id,
/// and its key is that row's. The key's lifetime starts when that object was created, so a
/// re-run after the TTL is at risk because the key expired, not because the object is under
/// another key.
#[test]
fn an_object_the_journal_names_has_the_journals_key() {
    let scenario = crate::scenario::Scenario::of_rules("L003/near-miss");
    assert!(
        scenario.read("provider.csv").contains("exp_101,,"),
        "the provider echoes no key"
    );
    let (code, report) = risk(
        &scenario,
        &[
            "--dag",
            "orders",
            "--ttl",
            "1h",
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-01",
            "--at",
            "2026-11-10T00:00:00Z",
        ],
    );
    assert_eq!(code, Some(1), "{report}");
    let interval = &report["intervals"][0];
    assert_eq!(interval["key"], "orders:2026-11-01");
    assert_eq!(interval["objects"], serde_json::json!(["exp_101"]));
    assert_eq!(interval["key_first_seen"], "2026-11-02T00:05:10Z");
    assert_eq!(interval["key_expires"], "2026-11-02T01:05:10Z");
    assert_eq!(interval["class"], "at-risk");
}
