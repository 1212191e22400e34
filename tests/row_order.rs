//! What onceonly says does not depend on the order the sources give their rows in. The real
//! Airflow runs' metadata, journal and provider listing are read as stored and with every
//! table's rows in reverse (no reader asks a source for an order). Their journal here records
//! its times to the second, as many journals do, so rows of one key and of one interval tie on
//! time: whatever is taken from the first or last of such rows, and every list of them, must
//! be decided by what the rows say.

use crate::scenario::{Scenario, airflow_days, onceonly, stderr};

const VERSIONS: [&str; 2] = ["airflow-2.10.5", "airflow-3.3.2"];

/// The run of `version` with its journal's times to the second, and rows that tie on time:
/// the unstable-key DAG's retry records its intent in the same second as the first try did;
/// the stable-key DAG's second interval's try commits a second id in the second of its first,
/// and a manual run of that interval records an intent under its key in the same second as
/// the scheduled run (which of them created the object?). As stored, and reversed.
fn both_orders(version: &str, metadata: Option<&str>) -> [Scenario; 2] {
    let [first, second, _] = airflow_days(version);
    let to_the_second = format!(
        "UPDATE export_journal SET recorded_at = substr(recorded_at, 1, 19) || 'Z';
         UPDATE export_journal SET recorded_at = (
             SELECT recorded_at FROM export_journal
             WHERE op_key LIKE '%:{first}:try1' AND phase = 'STARTED')
         WHERE op_key LIKE '%:{first}:try2' AND phase = 'STARTED';
         INSERT INTO export_journal
         SELECT op_key, dag_id, task_id, map_index, run_id, try_number, phase,
                'exp_000000000000', payload_sha256, recorded_at, approval_id, approval_expires_at
         FROM export_journal
         WHERE dag_id = 'onceonly_a_stable_key' AND phase = 'DONE' AND op_key LIKE '%:{second}';
         INSERT INTO export_journal
         SELECT op_key, dag_id, task_id, map_index, 'manual__{second}T00:00:00+00:00', try_number,
                phase, external_id, payload_sha256, recorded_at, approval_id, approval_expires_at
         FROM export_journal
         WHERE dag_id = 'onceonly_a_stable_key' AND phase = 'STARTED' AND op_key LIKE '%:{second}';"
    );
    [false, true].map(|reversed| {
        let scenario = Scenario::copy_of(&format!("airflow/out/{version}"));
        if let Some(metadata) = metadata {
            std::fs::copy(
                crate::scenario::fixtures().join(metadata),
                scenario.path("airflow.db"),
            )
            .expect("copy the metadata database");
        }
        scenario.sqlite("journal.db", &to_the_second);
        if reversed {
            scenario.reverse_rows("journal.db", "export_journal");
            for table in ["dag_run", "task_instance", "task_instance_history"] {
                scenario.reverse_rows("airflow.db", table);
            }
            let listing = scenario.read("provider.ndjson");
            let mut lines: Vec<&str> = listing.lines().collect();
            lines.reverse();
            scenario.write("provider.ndjson", &(lines.join("\n") + "\n"));
        }
        scenario
    })
}

/// The DAGs the run's config names.
fn dags(scenario: &Scenario) -> Vec<String> {
    scenario
        .read("onceonly.toml")
        .lines()
        .filter_map(|line| line.strip_prefix("dag_id = \""))
        .map(|rest| rest.trim_end_matches('"').to_string())
        .collect()
}

/// Fails with the first lines where two texts differ, rather than both whole.
fn assert_same_text(stored: &str, reversed: &str, what: &str) {
    let (stored, reversed): (Vec<&str>, Vec<&str>) =
        (stored.lines().collect(), reversed.lines().collect());
    if let Some(line) =
        (0..stored.len().max(reversed.len())).find(|&n| stored.get(n) != reversed.get(n))
    {
        let around =
            |lines: &[&str]| lines[line.saturating_sub(3)..(line + 4).min(lines.len())].join("\n");
        panic!(
            "{what}: rows read in reverse change line {}:\n--- as stored\n{}\n--- reversed\n{}",
            line + 1,
            around(&stored),
            around(&reversed)
        );
    }
}

fn assert_same_json(stored: &serde_json::Value, reversed: &serde_json::Value, what: &str) {
    let text = |value| serde_json::to_string_pretty(value).unwrap();
    assert_same_text(&text(stored), &text(reversed), what);
}

/// Runs a command on both scenarios (its config appended) and checks they say the same: the
/// same JSON, or the same refusal. Returns the JSON, if there is one.
fn same_in_both(scenarios: &[Scenario; 2], args: &[&str]) -> Option<serde_json::Value> {
    let [stored, reversed] = [&scenarios[0], &scenarios[1]].map(|scenario| {
        let config = scenario.config();
        let mut all = args.to_vec();
        all.extend(["--config", config.to_str().unwrap(), "--format", "json"]);
        let output = onceonly(&all);
        // Warnings name the scenario's files, which are in a folder of their own.
        let folder = scenario.dir.path().to_str().unwrap();
        let said = serde_json::from_str(
            &String::from_utf8_lossy(&output.stdout).replace(folder, "SCENARIO"),
        )
        .ok();
        let refused = stderr(&output).replace(folder, "SCENARIO");
        (output.status.code(), said, refused)
    });
    assert_eq!(stored.0, reversed.0, "{args:?}: the exit code");
    match (&stored.1, &reversed.1) {
        (Some(stored), Some(reversed)) => assert_same_json(stored, reversed, &format!("{args:?}")),
        _ => assert_same_text(&stored.2, &reversed.2, &format!("{args:?}: what it said")),
    }
    stored.1
}

#[test]
fn an_audit_its_verdicts_and_its_plan() {
    for version in VERSIONS {
        let scenarios = both_orders(version, None);
        let plans = scenarios
            .each_ref()
            .map(|scenario| scenario.path("plan.json"));
        let verdicts = scenarios
            .each_ref()
            .map(|scenario| scenario.path("verdicts.csv"));
        let [stored, reversed] = [0, 1].map(|side| {
            let output = scenarios[side].audit(&[
                "--format",
                "json",
                "--plan",
                plans[side].to_str().unwrap(),
                "--verdicts",
                verdicts[side].to_str().unwrap(),
            ]);
            assert!(output.status.code() == Some(1), "{}", stderr(&output));
            // The sources are named by their paths, which differ.
            String::from_utf8_lossy(&output.stdout)
                .replace(scenarios[side].dir.path().to_str().unwrap(), "SCENARIO")
        });
        assert_same_text(&stored, &reversed, &format!("{version}: the report"));
        let [stored, reversed] = verdicts.map(|path| std::fs::read_to_string(path).unwrap());
        assert_same_text(
            &stored,
            &reversed,
            &format!("{version}: every try's verdict"),
        );
        // The plan quotes a hash of the tables as read, rows in the order read (README,
        // `--save-snapshot`); the rest must be the same.
        let [stored, reversed] = plans.map(|plan| {
            let mut plan = crate::scenario::json_file(&plan);
            plan.as_object_mut().unwrap().remove("inputs_fingerprint");
            plan
        });
        assert_same_json(&stored, &reversed, &format!("{version}: the plan"));
    }
}

#[test]
fn the_trace_of_each_dags_intervals() {
    for version in VERSIONS {
        let scenarios = both_orders(version, None);
        let mut traced = 0;
        for dag in dags(&scenarios[0]) {
            for day in airflow_days(version) {
                let args = ["trace", "--dag", &dag, "--interval", &day];
                traced += usize::from(same_in_both(&scenarios, &args).is_some());
            }
        }
        assert!(traced >= 20, "{version}: {traced} intervals traced");
    }
}

/// The unstable-key DAG's interval whose intents tie: the key a re-run would send is the
/// retry's, the one with the higher try number. The planned backfill's report is compared too.
#[test]
fn ttl_risk() {
    let version = "airflow-3.3.2";
    let scenarios = both_orders(
        version,
        Some("airflow/out/airflow-3.3.2-backfill/airflow.db"),
    );
    for scenario in &scenarios {
        scenario.sqlite(
            "airflow.db",
            "UPDATE backfill SET reprocess_behavior = 'failed' WHERE id = 1",
        );
    }
    let [first, _, last] = airflow_days(version);
    let range = ["--from", first.as_str(), "--to", last.as_str()];
    let at = "2026-12-01T00:00:00Z";
    for dag in dags(&scenarios[0]) {
        let mut args = vec!["ttl-risk", "--dag", &dag, "--ttl", "stripe", "--at", at];
        args.extend(range);
        // A DAG with no run in the range (the manual one) is exit 2, said the same way in
        // both orders (`same_in_both` checks it).
        let Some(report) = same_in_both(&scenarios, &args) else {
            continue;
        };
        if dag == "onceonly_b_unstable_key" {
            assert_eq!(
                report["intervals"][0]["key"],
                format!("exp:onceonly_b_unstable_key:export:{first}:try2"),
                "the retry's key is the interval's last"
            );
        }
    }
    same_in_both(&scenarios, &["ttl-risk", "--backfill-id", "1", "--at", at]);
}
