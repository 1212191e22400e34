//! A command never says "clean" about nothing (SPEC §7): a `--dag` that matches no DAG of the
//! metadata, an `[[operation]]` that matches no DAG or task, an audit whose window holds no try
//! of an operation task, a ttl-risk range with nothing to judge — each exit 2, named.

use crate::scenario::{Scenario, onceonly, stderr, stdout};

const V3: &str = "airflow/out/airflow-3.3.2";

fn ttl_risk(scenario: &Scenario, args: &[&str]) -> std::process::Output {
    let config = scenario.config();
    let mut all = vec!["ttl-risk", "--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    onceonly(&all)
}

/// The real Airflow 3.3.2 metadata database: a misspelt --dag is refused with the DAGs that
/// exist nearest it, by audit and ttl-risk alike; --allow-empty does not accept a typo.
#[test]
fn a_dag_that_matches_no_dag_is_refused_with_the_closest_names() {
    let scenario = Scenario::copy_of(V3);
    for args in [
        vec!["--dag", "onceonly_a_stabel_key"],
        vec!["--dag", "onceonly_a_stabel_key", "--allow-empty"],
    ] {
        let output = scenario.audit(&args);
        assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
        let text = stderr(&output);
        assert!(
            text.contains("\"onceonly_a_stabel_key\" matches no DAG of sqlite://"),
            "{text}"
        );
        assert!(
            text.contains("the closest: onceonly_a_stable_key,"),
            "{text}"
        );
        assert!(stdout(&output).is_empty(), "no report over nothing");
    }
    for dag in ["nonexistent", "onceonly_x_*"] {
        let output = ttl_risk(
            &scenario,
            &["--dag", dag, "--from", "2020-01-01", "--to", "2030-01-01"],
        );
        assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
        assert!(
            stderr(&output).contains("matches no DAG"),
            "{}",
            stderr(&output)
        );
    }
}

/// An operation whose dag_id or task_id is misspelt is named as such, with the closest names,
/// rather than reported as journal rows naming tries Airflow does not have.
#[test]
fn an_operation_that_matches_no_dag_or_task_is_named() {
    let scenario = Scenario::copy_of(V3);
    scenario.edit(
        "onceonly.toml",
        "dag_id = \"onceonly_c_exhausted\"\ntask_id = \"export\"",
        "dag_id = \"onceonly_c_exhaustd\"\ntask_id = \"export\"",
    );
    scenario.edit(
        "onceonly.toml",
        "dag_id = \"onceonly_g_unjournaled\"\ntask_id = \"export\"",
        "dag_id = \"onceonly_g_unjournaled\"\ntask_id = \"exprt\"",
    );
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let text = stderr(&output);
    assert!(
        text.contains(
            "[[operation]] `c`: dag_id \"onceonly_c_exhaustd\" matches no DAG of sqlite://"
        ),
        "{text}"
    );
    assert!(
        text.contains("airflow.db; the closest: onceonly_c_exhausted,"),
        "{text}"
    );
    assert!(
        text.contains("[[operation]] `g`: task_id \"exprt\" matches no task of onceonly_g_unjournaled (in sqlite://"),
        "{text}"
    );
    assert!(
        text.ends_with("airflow.db); the closest: export\n"),
        "{text}"
    );
    assert!(!text.contains("try Airflow does not have"), "{text}");

    // An audit of another DAG leaves the misspelt operations alone: they are not its scope.
    let other = scenario.audit(&["--dag", "onceonly_a_stable_key", "--fail-on", "never"]);
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
}

/// A window that holds no try of an operation task (a DAG that stopped running) fails the
/// nightly job; --allow-empty accepts it, and the report says what it covered.
#[test]
fn a_window_without_a_run_is_refused_unless_allowed() {
    let scenario = Scenario::copy_of(V3);
    let output = scenario.audit(&["--since", "2030-01-01"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("nothing was audited: no try of an [[operation]] task is in the window 2030-01-01T00:00:00Z to -"),
        "{}",
        stderr(&output)
    );
    let allowed = scenario.audit(&["--since", "2030-01-01", "--allow-empty"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert!(
        stdout(&allowed).contains("audited: 0 runs"),
        "{}",
        stdout(&allowed)
    );

    // A DAG that exists, but whose window holds none of its tries.
    let dag = scenario.audit(&["--dag", "onceonly_a_stable_key", "--since", "2030-01-01"]);
    assert_eq!(dag.status.code(), Some(2));
    assert!(
        stderr(&dag).contains("--dag \"onceonly_a_stable_key\", the window"),
        "{}",
        stderr(&dag)
    );
}

fn ttl_json(scenario: &Scenario, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let output = ttl_risk(scenario, &all);
    let report =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{}", stderr(&output)));
    (output.status.code(), report)
}

/// `ttl-risk --dag` takes a glob as `audit` does: each DAG it matches is judged as its own, and
/// its intervals are those a one-DAG ttl-risk gives.
#[test]
fn ttl_risk_takes_a_glob() {
    let scenario = Scenario::copy_of(V3);
    let range = ["--from", "2020-01-01", "--to", "2030-01-01", "--ttl", "24h"];
    let one = |dag: &str| {
        let mut args = vec!["--dag", dag];
        args.extend_from_slice(&range);
        ttl_json(&scenario, &args).1["intervals"].clone()
    };
    let (code, all) = ttl_json(&scenario, &[&["--dag", "onceonly_*"][..], &range].concat());
    let intervals = all["intervals"].as_array().unwrap();
    let dags: std::collections::BTreeSet<&str> = intervals
        .iter()
        .map(|i| i["dag_id"].as_str().unwrap())
        .collect();
    assert_eq!(dags.len(), 10, "{dags:?}");
    let of = |dag: &str| -> Vec<serde_json::Value> {
        intervals
            .iter()
            .filter(|i| i["dag_id"] == dag)
            .cloned()
            .collect()
    };
    for dag in ["onceonly_a_stable_key", "onceonly_b_unstable_key"] {
        assert_eq!(serde_json::Value::Array(of(dag)), one(dag), "{dag}");
    }
    // K001's unstable key makes an interval of onceonly_b at risk.
    assert_eq!(code, Some(1));
}

/// ttl-risk exits 0 only when every interval is `safe` or `deduplicated`: `unknown` (no key
/// TTL known) fails the backfill gate too.
#[test]
fn ttl_risk_fails_on_unknown() {
    let scenario = Scenario::copy_of(V3);
    let args = [
        "--dag",
        "onceonly_a_stable_key",
        "--from",
        "2020-01-01",
        "--to",
        "2030-01-01",
    ];
    let (code, report) = ttl_json(&scenario, &args);
    assert!(
        report["summary"]["unknown"].as_u64().unwrap() > 0,
        "{report:#}"
    );
    assert_eq!(report["summary"]["at-risk"], 0);
    assert_eq!(code, Some(1));
    // With a TTL long enough, every interval is deduplicated: exit 0.
    let (code, report) = ttl_json(&scenario, &[&args[..], &["--ttl", "36500d"]].concat());
    assert_eq!(
        report["summary"]["deduplicated"],
        report["intervals"].as_array().unwrap().len()
    );
    assert_eq!(code, Some(0));
}

/// `--at T` judges the range as it stood at T: an object created after T does not exist yet
/// (fixtures/rules/clean: the orders try of 2026-11-01 started at 00:05:00 and created
/// `exp_101` at 00:05:10), and a try started after T has not run.
#[test]
fn ttl_risk_at_counts_only_what_had_happened() {
    let scenario = Scenario::of_rules("clean");
    let range = [
        "--dag",
        "orders",
        "--from",
        "2026-11-01",
        "--to",
        "2026-11-01",
    ];
    let at = |when: &str| ttl_json(&scenario, &[&range[..], &["--at", when]].concat());
    let (_, later) = at("2026-11-02T06:00:00Z");
    assert_eq!(later["intervals"][0]["class"], "deduplicated");
    assert_eq!(later["intervals"][0]["objects"][0], "exp_101");
    let (code, between) = at("2026-11-02T00:05:05Z");
    assert_eq!(between["intervals"][0]["class"], "safe", "{between:#}");
    assert_eq!(between["intervals"][0]["objects"], serde_json::json!([]));
    assert_eq!(code, Some(0));
    // Before the try started nothing was tried: nothing to judge.
    let before = ttl_risk(
        &scenario,
        &[&range[..], &["--at", "2026-11-02T00:04:00Z"]].concat(),
    );
    assert_eq!(before.status.code(), Some(2), "{}", stdout(&before));
    assert!(
        stderr(&before).contains("nothing to judge"),
        "{}",
        stderr(&before)
    );
}
