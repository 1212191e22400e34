//! The journal read in place from a database, with column and phase mapping.

use crate::scenario::{Scenario, stderr};

/// The real 3.3.2 run with its journal.db changed by `sql` first.
fn with_journal_sql(sql: &'static str) -> Scenario {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.sqlite("journal.db", sql);
    scenario
}

#[test]
fn renamed_columns_are_found_through_the_mapping() {
    let scenario =
        with_journal_sql("ALTER TABLE export_journal RENAME COLUMN op_key TO idempotency_key");
    let before = scenario.audit(&["--format", "json"]).stdout;
    assert!(stderr(&scenario.audit(&[])).contains("missing column `op_key`"));
    scenario.edit(
        "onceonly.toml",
        "payload_hash = \"payload_sha256\"",
        "payload_hash = \"payload_sha256\"\nop_key = \"idempotency_key\"",
    );
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // What the generator derived from the run (fixtures/airflow/out/airflow-3.3.2).
    let expected = crate::scenario::airflow_expected("airflow-3.3.2");
    assert_eq!(
        report["summary"]["findings"].as_u64(),
        Some(expected["findings"].as_array().unwrap().len() as u64)
    );
    assert!(
        before.is_empty(),
        "a journal without its key column must not be audited"
    );
}

#[test]
fn missing_mapped_column_names_table_and_column() {
    let scenario = with_journal_sql("ALTER TABLE export_journal DROP COLUMN recorded_at");
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("table export_journal")
            && message.contains("missing column `recorded_at`"),
        "{message}"
    );
}

#[test]
fn unknown_phase_and_bad_timestamp_name_the_row() {
    let scenario = with_journal_sql("UPDATE export_journal SET phase = 'SENT' WHERE rowid = 3");
    let message = stderr(&scenario.audit(&[]));
    assert!(
        message.contains("table export_journal, row 3, column `phase`")
            && message.contains("\"SENT\""),
        "{message}"
    );

    let scenario =
        with_journal_sql("UPDATE export_journal SET recorded_at = 'yesterday' WHERE rowid = 5");
    let message = stderr(&scenario.audit(&[]));
    assert!(message.contains("row 5, column `recorded_at`"), "{message}");
}

/// A journal of a few thousand rows is read in several batches (sources::sqlite_rows): a bad
/// cell far into it is still named by its own row.
#[test]
fn a_bad_cell_thousands_of_rows_in_names_its_row() {
    let scenario = with_journal_sql(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO export_journal SELECT j.* FROM n, (SELECT * FROM export_journal LIMIT 1) AS j;
         UPDATE export_journal SET recorded_at = 'yesterday' WHERE rowid = 2900",
    );
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("row 2900, column `recorded_at`"),
        "{message}"
    );
}

#[test]
fn missing_table_and_unsafe_table_name_are_refused() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.edit(
        "onceonly.toml",
        "table = \"export_journal\"",
        "table = \"exports\"",
    );
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("table exports: no such table"),
        "{}",
        stderr(&output)
    );

    scenario.edit(
        "onceonly.toml",
        "table = \"exports\"",
        "table = \"x; DROP TABLE export_journal\"",
    );
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("the table name must be"),
        "{}",
        stderr(&output)
    );
}

/// The recommended table (queries/journal/ddl/sqlite.sql) filled with the real run's journal.
fn recommended_sqlite_journal() -> Scenario {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let path = scenario.path("recommended.db");
    let ddl = include_str!("../queries/journal/ddl/sqlite.sql");
    let copy = format!(
        "ATTACH DATABASE '{}' AS fixture;
         INSERT INTO onceonly_journal
         SELECT op_key, dag_id, task_id, map_index, run_id, try_number,
                CASE phase WHEN 'STARTED' THEN 'intent' WHEN 'DONE' THEN 'committed' ELSE 'failed' END,
                external_id, payload_sha256, recorded_at, approval_id, approval_expires_at
         FROM fixture.export_journal;",
        scenario.path("journal.db").display()
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            use sqlx::Connection;
            let url = format!("sqlite://{}?mode=rwc", path.display());
            let mut connection = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(ddl).execute(&mut connection).await.unwrap();
            // The fixture DAG commits without checking for an earlier commit first, so its history
            // has a second committed object under one key (scenario d): exactly what the
            // one-commit index exists to stop. Import it without the index, then check the index.
            sqlx::raw_sql("DROP INDEX onceonly_journal_one_commit")
                .execute(&mut connection)
                .await
                .unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(copy))
                .execute(&mut connection)
                .await
                .unwrap();
            let index = sqlx::raw_sql(ddl).execute(&mut connection).await;
            assert!(
                index.unwrap_err().to_string().contains("UNIQUE"),
                "the one-commit index accepted two commits under one key"
            );
        });
    let config = scenario.read("onceonly.toml");
    let start = config.find("[journal]").unwrap();
    let end = config.find("[provider]").unwrap();
    let journal = "[journal]\nurl = \"sqlite:///recommended.db\"\ntable = \"onceonly_journal\"\n\n";
    scenario.write(
        "onceonly.toml",
        &format!("{}{journal}{}", &config[..start], &config[end..]),
    );
    scenario
}

#[test]
fn the_recommended_table_needs_no_mapping() {
    let scenario = recommended_sqlite_journal();
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&scenario.read("expected.json")).unwrap();
    assert_eq!(report["summary"]["by_rule"], expected["findings_by_code"]);
    assert_eq!(report["summary"]["reconciled_retries"], 3);
}

/// A journal written at least once, every row twice (an insert retried after a timeout that had
/// committed): the same findings, messages included, and the same verdicts. The rules' messages
/// count tries, not rows, and a write listed twice is one write.
#[test]
fn every_row_written_twice_finds_the_same() {
    let audit = |scenario: &Scenario| {
        let verdicts = scenario.path("verdicts.csv");
        let output =
            scenario.audit(&["--format", "json", "--verdicts", verdicts.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        (report, std::fs::read_to_string(verdicts).unwrap())
    };
    let (once, once_verdicts) = audit(&Scenario::copy_of("airflow/out/airflow-3.3.2"));
    let (twice, twice_verdicts) = audit(&with_journal_sql(
        "INSERT INTO export_journal SELECT * FROM export_journal",
    ));
    assert_eq!(
        twice["coverage"]["sources"][1]["rows"].as_i64(),
        once["coverage"]["sources"][1]["rows"]
            .as_i64()
            .map(|rows| rows * 2)
    );
    assert_eq!(twice["summary"], once["summary"]);
    for (once, twice) in once["findings"]
        .as_array()
        .unwrap()
        .iter()
        .zip(twice["findings"].as_array().unwrap())
    {
        assert_eq!(once, twice);
    }
    assert_eq!(once_verdicts, twice_verdicts);
}

/// A journal that does not record a mapped task's `map_index` (every row -1) names tries Airflow
/// does not have: the report says how many rows and names the first, rather than judging the
/// mapped tries as if they had written nothing without a word. The run as recorded has none.
#[test]
fn rows_that_name_no_try_of_airflow_are_counted_in_a_warning() {
    let warnings = |scenario: &Scenario| {
        let output = scenario.audit(&["--format", "json"]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        report["coverage"]["warnings"].to_string()
    };
    let recorded = warnings(&Scenario::copy_of("airflow/out/airflow-3.3.2"));
    assert!(
        !recorded.contains("a try Airflow does not have"),
        "{recorded}"
    );
    let unmapped = with_journal_sql(
        "UPDATE export_journal SET map_index = -1 WHERE dag_id = 'onceonly_f_api_clear'",
    );
    let rows = unmapped.sqlite_number(
        "journal.db",
        "SELECT COUNT(*) FROM export_journal WHERE dag_id = 'onceonly_f_api_clear'",
    );
    assert!(rows > 1);
    let said = warnings(&unmapped);
    assert!(
        said.contains(&format!(
            "journal: {rows} rows of the audited runs name a try Airflow does not have (e.g. onceonly_f_api_clear.export in run "
        )),
        "{said}"
    );
    assert!(said.contains("map_index -1, try 1)"), "{said}");
}
