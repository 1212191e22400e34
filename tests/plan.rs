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
        &(key.clone(), "reconciled".to_string(), Some(id.clone())),
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
    // The adopted row is in the reconciled phase: the lost try now counts as reconciled.
    assert_eq!(after["summary"]["reconciled_retries"], 1);
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

/// Adoption rows say onceonly wrote them: in the journal's reconciled phase with the action's id
/// in a mapped note column; a journal that maps no reconciled phase gets committed rows, and the
/// script says that only its comments tell.
#[test]
fn adoption_rows_say_onceonly_wrote_them() {
    let (scenario, _, id) = hostile_lost_response(false);
    let url = format!("sqlite://{}", scenario.path("journal.db").display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sql = |statement: String| {
        runtime.block_on(async {
            use sqlx::Connection;
            let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(&mut db)
                .await
                .unwrap();
        })
    };
    sql("ALTER TABLE onceonly_journal ADD COLUMN remark TEXT".to_string());
    let config = scenario.read("onceonly.toml");
    scenario.write(
        "onceonly.toml",
        &config.replace(
            "table = \"onceonly_journal\"",
            "table = \"onceonly_journal\"\n\n[journal.columns]\nnote = \"remark\"",
        ),
    );
    let script_path = scenario.path("repair.sql");
    let plan_path = scenario.path("plan.json");
    let output = scenario.audit(&[
        "--sql",
        script_path.to_str().unwrap(),
        "--plan",
        plan_path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let plan: serde_json::Value = serde_json::from_str(&scenario.read("plan.json")).unwrap();
    let adoption = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|action| action["kind"] == "adopt-external-id")
        .expect("the lost response is adopted")["id"]
        .as_str()
        .unwrap()
        .to_string();
    sql(scenario.read("repair.sql"));
    let row: (String, String, String) = runtime.block_on(async {
        use sqlx::{Connection, Row};
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let row = sqlx::query(
            "SELECT phase, external_id, remark FROM onceonly_journal WHERE remark IS NOT NULL",
        )
        .fetch_one(&mut db)
        .await
        .unwrap();
        (row.get(0), row.get(1), row.get(2))
    });
    assert_eq!(
        row,
        (
            "reconciled".to_string(),
            id.clone(),
            format!("onceonly plan action {adoption}")
        )
    );

    // A journal whose phases name no reconciled value: committed rows, and the script says so.
    let mapped = scenario.read("onceonly.toml").replace(
        "[journal.columns]\nnote = \"remark\"",
        "[journal.phases]\nintent = [\"intent\"]\ncommitted = [\"committed\"]\nfailed = [\"failed\"]",
    );
    let fresh = hostile_lost_response(false).0;
    fresh.write("onceonly.toml", &mapped);
    let script_path = fresh.path("repair.sql");
    let output = fresh.audit(&["--sql", script_path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let script = fresh.read("repair.sql");
    assert!(
        script.contains("maps no reconciled phase: rows are written as committed"),
        "{script}"
    );
    assert!(
        script.contains("'committed'") && !script.contains("'reconciled'"),
        "{script}"
    );
    assert!(script.contains("maps no note column"), "{script}");
}

/// `plan check` re-reads the sources for the plan's own scope: every action holds while nothing
/// moved (exit 0); once an object appears under an orphan intent's key and a duplicate is voided,
/// the retry and the void are named stale (exit 1) and the rest still hold.
#[test]
fn plan_check_names_the_actions_the_world_has_moved_under() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let plan_path = scenario.path("plan.json");
    let plan = plan_path.to_str().unwrap();
    let output = scenario.audit(&["--plan", plan, "--since", "2026-11-01"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let made: serde_json::Value = serde_json::from_str(&scenario.read("plan.json")).unwrap();
    assert_eq!(made["scope"]["since"], "2026-11-01T00:00:00Z");
    let check = || {
        let output = crate::scenario::onceonly(&[
            "plan",
            "check",
            plan,
            "--config",
            scenario.config().to_str().unwrap(),
            "--format",
            "json",
        ]);
        let code = output.status.code();
        let outcome: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("{}", stderr(&output)));
        (code, outcome)
    };
    let (code, outcome) = check();
    assert_eq!(code, Some(0), "{outcome:#}");
    assert_eq!(outcome["inputs_unchanged"], true);
    let actions = outcome["actions"].as_array().unwrap();
    assert_eq!(actions.len(), made["actions"].as_array().unwrap().len());
    assert!(actions.iter().all(|action| action["holds"] == true));

    let of_kind = |kind: &str| -> serde_json::Value {
        made["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|action| action["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in the plan"))
            .clone()
    };
    let retry = of_kind("retry-same-key");
    let void = of_kind("void-duplicate");
    let voided = void["targets"][0].as_str().unwrap().to_string();
    let mut rows: Vec<serde_json::Value> = scenario
        .read("provider.ndjson")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for row in &mut rows {
        if row["external_id"] == voided.as_str() {
            // The fixture's `void_statuses`.
            row["status"] = "cancelled".into();
        }
    }
    let mut created = rows[0].clone();
    created["external_id"] = "exp_created_after_the_plan".into();
    created["op_key"] = retry["op_key"].clone();
    rows.push(created);
    let text: String = rows.iter().map(|row| format!("{row}\n")).collect();
    scenario.write("provider.ndjson", &text);

    let (code, outcome) = check();
    assert_eq!(code, Some(1), "{outcome:#}");
    assert_eq!(outcome["inputs_unchanged"], false);
    let stale: BTreeSet<&str> = outcome["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|action| action["holds"] == false)
        .map(|action| action["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        stale,
        BTreeSet::from([retry["id"].as_str().unwrap(), void["id"].as_str().unwrap()]),
        "{outcome:#}"
    );
}

/// Only a JSON plan can be checked; a plan made by a merge (no scope) takes scope flags, one
/// that records its scope refuses them.
#[test]
fn plan_check_refuses_what_it_cannot_check() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let md = scenario.path("plan.md");
    let json = scenario.path("plan.json");
    let output = scenario.audit(&["--plan", md.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    scenario.audit(&["--plan", json.to_str().unwrap()]);
    let config = scenario.config();
    let check = |args: &[&str]| {
        let mut all = vec!["plan", "check"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--config", config.to_str().unwrap()]);
        crate::scenario::onceonly(&all)
    };
    let output = check(&[md.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a JSON plan"),
        "{}",
        stderr(&output)
    );
    let output = check(&[json.to_str().unwrap(), "--dag", "onceonly_a_stable_key"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("takes no scope flags"),
        "{}",
        stderr(&output)
    );
}

/// `--rule D001 --baseline full.json`: the other rules' earlier findings were not checked, so
/// they are not resolved; they are counted as `not_checked`.
#[test]
fn a_baseline_finding_of_a_rule_that_did_not_run_is_not_resolved() {
    let scenario = Scenario::copy_of("demo");
    let baseline = scenario.path("full.json");
    scenario.audit(&["--format", "json", "--output", baseline.to_str().unwrap()]);
    let full = json(&std::fs::read(&baseline).unwrap());
    let total = full["findings"].as_array().unwrap().len();
    let d001 = full["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "D001")
        .count();
    assert!(d001 > 0 && d001 < total, "{d001} of {total}");
    let output = scenario.audit(&[
        "--format",
        "json",
        "--rule",
        "D001",
        "--baseline",
        baseline.to_str().unwrap(),
    ]);
    let report = json(&output.stdout);
    assert_eq!(report["baseline"]["persisting"], d001);
    assert_eq!(report["baseline"]["resolved"], serde_json::json!([]));
    assert_eq!(report["baseline"]["not_checked"], total - d001);
}

/// The terminal and markdown reports say what the baseline says: each finding's mark and the
/// counts of new, persisting, resolved and unchecked findings.
#[test]
fn the_table_and_markdown_show_the_baseline() {
    let scenario = Scenario::copy_of("demo");
    let baseline = scenario.path("full.json");
    scenario.audit(&["--format", "json", "--output", baseline.to_str().unwrap()]);
    for format in ["table", "markdown"] {
        let output = scenario.audit(&[
            "--format",
            format,
            "--rule",
            "D001",
            "--baseline",
            baseline.to_str().unwrap(),
        ]);
        let text = String::from_utf8(output.stdout).unwrap();
        let report = json(
            &scenario
                .audit(&[
                    "--format",
                    "json",
                    "--rule",
                    "D001",
                    "--baseline",
                    baseline.to_str().unwrap(),
                ])
                .stdout,
        );
        let counts = format!(
            ": {} new, {} persisting, 0 resolved, {} not checked",
            report["baseline"]["new"],
            report["baseline"]["persisting"],
            report["baseline"]["not_checked"]
        );
        assert!(text.contains(&counts), "{format}: {text}");
        assert!(text.contains("persisting"), "{format}: {text}");
    }
}
