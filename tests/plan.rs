//! Repair plans, SQL repair scripts applied to real databases, baselines and metrics.

use std::collections::BTreeSet;

use crate::scenario::{Scenario, stderr};

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("json")
}

#[test]
fn every_finding_of_the_real_run_gets_a_repair() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let plan_path = scenario.path("plan.json");
    let output = scenario.audit(&["--format", "json", "--plan", plan_path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json(&output.stdout);
    let plan: serde_json::Value = serde_json::from_str(&scenario.read("plan.json")).unwrap();
    assert_eq!(plan["format_version"], 1);
    assert_eq!(plan["inputs_fingerprint"].as_str().unwrap().len(), 64);
    let actions = plan["actions"].as_array().unwrap();
    let answered: BTreeSet<&str> = actions
        .iter()
        .flat_map(|a| a["answers"].as_array().unwrap())
        .map(|id| id.as_str().unwrap())
        .collect();
    for finding in report["findings"].as_array().unwrap() {
        assert!(
            answered.contains(finding["id"].as_str().unwrap()),
            "no repair for {}",
            finding["message"]
        );
    }
    let of_kind = |kind: &str| {
        actions
            .iter()
            .filter(|a| a["kind"] == kind)
            .collect::<Vec<_>>()
    };
    // Scenario b: the lost object is also a duplicate of the committed one, so it is voided,
    // not adopted; scenario d: D001, R001 and T001 are one void of the re-run's object.
    let voids = of_kind("void-duplicate");
    assert_eq!(voids.len(), 2, "{voids:#?}");
    for void in &voids {
        assert_eq!(void["keep_reason"], "committed-in-journal");
        assert_eq!(void["safety"], "needs-approval");
        assert!(!void["preconditions"].as_array().unwrap().is_empty());
    }
    // Scenario h: a lost response nothing else answers is adopted into the journal.
    let adopts = of_kind("adopt-external-id");
    assert_eq!(adopts.len(), 1);
    assert_eq!(adopts[0]["dag_id"], "onceonly_h_lost_then_down");
    assert_eq!(adopts[0]["safety"], "automatic");
    assert_eq!(adopts[0]["journal_row"]["try_number"], 1);
    assert_eq!(of_kind("retry-same-key").len(), 1);
    assert_eq!(of_kind("retry-same-key")[0]["safety"], "automatic");
    assert_eq!(of_kind("fix-key-derivation").len(), 1);
    assert!(
        of_kind("fix-key-derivation")[0]["explanation"]
            .as_str()
            .unwrap()
            .contains("try_number")
    );
    // Ids are deterministic: the same inputs give the same plan, byte for byte.
    let again = scenario.path("again.json");
    scenario.audit(&["--plan", again.to_str().unwrap()]);
    assert_eq!(scenario.read("plan.json"), scenario.read("again.json"));
    // Readable renderings.
    let text = scenario.path("plan.txt");
    let markdown = scenario.path("plan.md");
    scenario.audit(&["--plan", text.to_str().unwrap()]);
    scenario.audit(&["--plan", markdown.to_str().unwrap()]);
    assert!(
        scenario
            .read("plan.txt")
            .contains("void-duplicate [needs approval] duplicate-objects")
    );
    assert!(
        scenario
            .read("plan.md")
            .starts_with("# onceonly repair plan")
    );
}

const HOSTILE_KEY: &str = "orders'; DROP TABLE onceonly_journal; --\\\"\n\té😀";
const HOSTILE_ID: &str = "exp_'); DELETE FROM onceonly_journal; -- \\' \u{202e}\u{0}";

/// fixtures/rules/L001/fires (a lost response nobody recovered) with hostile key and id, the
/// journal in the recommended SQLite table. `nul`: keep the NUL byte in the id.
pub fn hostile_lost_response(nul: bool) -> (Scenario, String, String) {
    let key = format!("{HOSTILE_KEY}{}", "x".repeat(4000));
    let id = if nul {
        HOSTILE_ID.to_string()
    } else {
        HOSTILE_ID.replace('\0', "")
    };
    let scenario = Scenario::of_rules("L001/fires");
    let provider = serde_json::json!({
        "external_id": id, "op_key": key, "created_at": "2026-11-02T00:05:30Z", "status": "succeeded",
        "payload_hash": "sha256:5e1f0c2a", "interval_start": "2026-11-01T00:00:00Z", "interval_end": "2026-11-02T00:00:00Z",
    });
    scenario.write("provider.ndjson", &format!("{provider}\n"));
    let journal = scenario.read("journal.csv");
    let url = format!(
        "sqlite://{}?mode=rwc",
        scenario.path("journal.db").display()
    );
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        use sqlx::Connection;
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(include_str!("../queries/journal/ddl/sqlite.sql")).execute(&mut db).await.unwrap();
        let mut rows = csv::Reader::from_reader(journal.as_bytes());
        for row in rows.records() {
            let row = row.unwrap();
            sqlx::query("INSERT INTO onceonly_journal (op_key, dag_id, task_id, map_index, run_id, try_number, phase, payload_hash, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
                .bind(&key)
                .bind(row[1].to_string())
                .bind(row[2].to_string())
                .bind(row[3].parse::<i64>().unwrap())
                .bind(row[4].to_string())
                .bind(row[5].parse::<i64>().unwrap())
                .bind(row[6].to_string())
                .bind(row[8].to_string())
                .bind(row[9].to_string())
                .execute(&mut db)
                .await
                .unwrap();
        }
    });
    scenario.edit(
        "onceonly.toml",
        "snapshot = \"journal.csv\"",
        "url = \"sqlite:///journal.db\"\ntable = \"onceonly_journal\"",
    );
    scenario.edit(
        "onceonly.toml",
        "snapshot = \"provider.csv\"",
        "snapshot = \"provider.ndjson\"",
    );
    (scenario, key, id)
}

async fn journal_rows(url: &str) -> Vec<(String, String, Option<String>)> {
    use sqlx::{Connection, Row};
    let mut db = sqlx::SqliteConnection::connect(url).await.unwrap();
    sqlx::query("SELECT op_key, phase, external_id FROM onceonly_journal ORDER BY rowid")
        .fetch_all(&mut db)
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect()
}

#[test]
fn sql_repair_adopts_the_lost_response_once_with_hostile_values() {
    let (scenario, key, id) = hostile_lost_response(true);
    let baseline = scenario.path("before.json");
    let first = scenario.audit(&[
        "--format",
        "json",
        "--output",
        baseline.to_str().unwrap(),
        "--sql",
        scenario.path("repair.sql").to_str().unwrap(),
    ]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let before = json(&std::fs::read(&baseline).unwrap());
    assert_eq!(before["summary"]["by_rule"], serde_json::json!({"L001": 1}));
    let script = scenario.read("repair.sql");
    assert!(
        !script.contains("DROP TABLE onceonly_journal;\n") && !script.contains("DELETE FROM"),
        "{script}"
    );
    assert!(
        script.starts_with("-- onceonly repair script")
            && script.contains("\nBEGIN;\n")
            && script.contains("\nCOMMIT;\n")
    );

    let url = format!("sqlite://{}", scenario.path("journal.db").display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let apply = || {
        runtime.block_on(async {
            use sqlx::Connection;
            let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(script.clone()))
                .execute(&mut db)
                .await
                .unwrap();
        })
    };
    let rows_before = runtime.block_on(journal_rows(&url));
    apply();
    let rows_once = runtime.block_on(journal_rows(&url));
    assert_eq!(rows_once.len(), rows_before.len() + 1);
    assert_eq!(
        rows_once.last().unwrap(),
        &(key.clone(), "committed".to_string(), Some(id.clone())),
        "the values came back changed"
    );
    apply();
    assert_eq!(
        runtime.block_on(journal_rows(&url)),
        rows_once,
        "a second run changed the journal"
    );

    // The next audit: the lost response is resolved against the first report.
    let output = scenario.audit(&[
        "--format",
        "json",
        "--baseline",
        baseline.to_str().unwrap(),
        "--fail-on-new",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let after = json(&output.stdout);
    assert_eq!(after["summary"]["findings"], 0);
    assert_eq!(after["summary"]["reconciled_retries"], 0);
    assert_eq!(after["baseline"]["resolved"][0]["code"], "L001");
    assert_eq!(
        after["baseline"]["resolved"][0]["id"],
        before["findings"][0]["id"]
    );
}

#[test]
fn baseline_marks_findings_and_fail_on_new_ignores_old_ones() {
    let scenario = Scenario::copy_of("demo");
    let baseline = scenario.path("yesterday.ndjson");
    scenario.audit(&["--format", "ndjson", "--output", baseline.to_str().unwrap()]);
    let same = scenario.audit(&[
        "--format",
        "json",
        "--baseline",
        baseline.to_str().unwrap(),
        "--fail-on-new",
    ]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "nothing new: {}",
        stderr(&same)
    );
    let report = json(&same.stdout);
    assert_eq!(report["baseline"]["new"], 0);
    assert_eq!(report["baseline"]["persisting"], 10);
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["baseline"] == "persisting")
    );

    // A new lost response appears overnight: only it is new, and it fails the job.
    scenario.edit(
        "provider.csv",
        "exp_999,",
        "exp_998,orders:2026-11-04,2026-11-05T00:05:06Z,live,sha256:o4,,,\nexp_999,",
    );
    let next = scenario.audit(&[
        "--format",
        "json",
        "--baseline",
        baseline.to_str().unwrap(),
        "--fail-on-new",
    ]);
    assert_eq!(next.status.code(), Some(1));
    let report = json(&next.stdout);
    let new: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["baseline"] == "new")
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(new, ["L001"]);
    // ... and the orphan intent it explains is resolved.
    assert_eq!(report["baseline"]["resolved"][0]["code"], "L002");

    scenario.write("broken.json", "{\"no\": 1}");
    let broken = scenario.audit(&["--baseline", scenario.path("broken.json").to_str().unwrap()]);
    assert_eq!(broken.status.code(), Some(2));
    assert!(
        stderr(&broken).contains("broken.json")
            && stderr(&broken).contains("not an onceonly report")
    );
}

#[test]
fn metrics_are_prometheus_text_with_every_rule() {
    let scenario = Scenario::copy_of("demo");
    let path = scenario.path("onceonly.prom");
    scenario.audit(&["--metrics", path.to_str().unwrap()]);
    let text = scenario.read("onceonly.prom");
    let sample = |name: &str| {
        text.lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        sample("onceonly_findings{rule=\"D001\",name=\"duplicate-export\",severity=\"error\"}"),
        "onceonly_findings{rule=\"D001\",name=\"duplicate-export\",severity=\"error\"} 1"
    );
    assert!(
        sample("onceonly_findings{rule=\"A001\"").ends_with(" 0"),
        "rules without findings report 0"
    );
    assert_eq!(
        text.lines()
            .filter(|line| line.starts_with("onceonly_findings{"))
            .count(),
        14
    );
    assert_eq!(
        sample("onceonly_reconciled_retries"),
        "onceonly_reconciled_retries 2"
    );
    assert_eq!(
        sample("onceonly_source_rows{table=\"attempts\"}"),
        "onceonly_source_rows{table=\"attempts\"} 12"
    );
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(scenario.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "the atomic write left a temporary file"
    );
}

#[test]
fn sql_needs_a_database_journal() {
    let scenario = Scenario::copy_of("demo");
    let output = scenario.audit(&["--sql", scenario.path("x.sql").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--sql"), "{}", stderr(&output));
}

#[test]
fn the_real_runs_lost_response_is_adopted_and_resolved() {
    // Scenario h of the real Airflow run: try 1's response was lost, the retries met a
    // provider that answered 500, nothing committed the object.
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let before = scenario.path("before.json");
    let sql = scenario.path("repair.sql");
    let first = scenario.audit(&[
        "--format",
        "json",
        "--output",
        before.to_str().unwrap(),
        "--sql",
        sql.to_str().unwrap(),
    ]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let report = json(&std::fs::read(&before).unwrap());
    let lost: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "L001" && f["dag_id"] == "onceonly_h_lost_then_down")
        .collect();
    assert_eq!(lost.len(), 1);
    let script = scenario.read("repair.sql");
    assert!(script.contains("-- 1 journal rows"), "{script}");

    let url = format!("sqlite://{}", scenario.path("journal.db").display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let count = || {
        runtime.block_on(async {
            use sqlx::{Connection, Row};
            let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query("SELECT count(*) FROM export_journal")
                .fetch_one(&mut db)
                .await
                .unwrap()
                .get::<i64, _>(0)
        })
    };
    let apply = || {
        runtime.block_on(async {
            use sqlx::Connection;
            let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(script.clone()))
                .execute(&mut db)
                .await
                .unwrap();
        })
    };
    let rows = count();
    apply();
    assert_eq!(count(), rows + 1);
    apply();
    assert_eq!(
        count(),
        rows + 1,
        "a second application changed the journal"
    );

    let after = scenario.audit(&["--format", "json", "--baseline", before.to_str().unwrap()]);
    let after = json(&after.stdout);
    let resolved: Vec<&str> = after["baseline"]["resolved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(resolved, [lost[0]["id"].as_str().unwrap()]);
    assert_eq!(
        after["baseline"]["new"], 0,
        "the repair created no new finding"
    );
}
