//! The attempts reader against a real PostgreSQL server whose Airflow schema was created by the
//! real `airflow db migrate` and filled by the real scheduler (`.ci/postgres.sh` sets it up and
//! exports ONCEONLY_TEST_PG_URL, ONCEONLY_TEST_PG_PASSWORD and ONCEONLY_TEST_PG_OUT).

use std::collections::BTreeMap;

use onceonly::sources::airflow_db::{self, Filter};
use onceonly::sources::database::Database;
use polars::prelude::*;

use crate::scenario::{Scenario, stderr};
use crate::skip;

pub struct Server {
    pub url: String,
    pub password: String,
    pub out: std::path::PathBuf,
}

/// The server `.ci/postgres.sh` started; None (a skip, see tests/skip.rs) when none was set up.
pub fn server() -> Option<Server> {
    match (
        std::env::var("ONCEONLY_TEST_PG_URL"),
        std::env::var("ONCEONLY_TEST_PG_PASSWORD"),
        std::env::var("ONCEONLY_TEST_PG_OUT"),
    ) {
        (Ok(url), Ok(password), Ok(out)) if !skip::without("postgres") => Some(Server {
            url,
            password,
            out: out.into(),
        }),
        _ => {
            skip::skipped(
                "the run against a real PostgreSQL",
                "no server (`source .ci/postgres.sh` starts one and sets ONCEONLY_TEST_PG_*)",
            );
            None
        }
    }
}

/// The PostgreSQL run's own journal and provider snapshots with a config reading `url`.
pub fn scenario(server: &Server, url: &str) -> Scenario {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    for name in ["journal.db", "provider.ndjson", "expected.json"] {
        std::fs::copy(server.out.join(name), scenario.path(name)).unwrap();
    }
    scenario.edit(
        "onceonly.toml",
        "url = \"sqlite:///airflow.db\"",
        &format!("url = \"{url}\"\npassword_env = \"ONCEONLY_TEST_PG_PASSWORD\""),
    );
    scenario
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The server's URL with its password, for the tests' own connections.
pub fn with_password(server: &Server) -> String {
    server.url.replace(
        "postgresql+psycopg2://airflow@",
        &format!("postgres://airflow:{}@", server.password),
    )
}

#[test]
fn audit_of_airflow_on_postgres_matches_what_happened() {
    let Some(server) = server() else { return };
    let scenario = scenario(&server, &server.url);
    let evidence = scenario.path("evidence");
    let output = scenario.audit(&[
        "--format",
        "json",
        "--save-snapshot",
        evidence.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    for file in std::fs::read_dir(&evidence).unwrap() {
        let bytes = std::fs::read(file.unwrap().path()).unwrap();
        let password = server.password.as_bytes();
        assert!(
            !bytes.windows(password.len()).any(|w| w == password),
            "the password reached the snapshot"
        );
    }
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&scenario.read("expected.json")).unwrap();
    let by_rule: BTreeMap<String, u64> =
        serde_json::from_value(report["summary"]["by_rule"].clone()).unwrap();
    let wanted: BTreeMap<String, u64> =
        serde_json::from_value(expected["findings_by_code"].clone()).unwrap();
    assert_eq!(by_rule, wanted);
    assert_eq!(report["coverage"]["tries"], expected["counts"]["tries"]);
    assert_eq!(
        report["coverage"]["interval_basis"],
        // Every run has a logical date but scenario e's manual trigger, which has none.
        serde_json::json!({
            "logical_date": expected["counts"]["dag_runs"].as_u64().unwrap() - 1,
            "run_after": 1
        })
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        !text.contains(&server.password),
        "the password reached the report"
    );
    assert!(
        text.contains("postgres://airflow:***@127.0.0.1"),
        "the report names the source"
    );
}

/// Attempts without what differs between two runs of one scenario: times, pids and hosts;
/// dates become days after the first interval of their DAG (the generator starts three days
/// before the day it runs; the Berlin DAG runs over fixed dates), and the manual run's trigger
/// time leaves its run id and conf.
fn comparable(attempts: &DataFrame) -> Vec<String> {
    let text = |name: &str| -> Vec<Option<String>> {
        let column = attempts
            .column(name)
            .unwrap()
            .cast(&DataType::String)
            .unwrap();
        column
            .str()
            .unwrap()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    };
    let day = |value: &str| {
        chrono::NaiveDate::parse_from_str(value.get(..10).unwrap_or(""), "%Y-%m-%d").ok()
    };
    let dags = text("dag_id");
    let mut first_days: std::collections::BTreeMap<String, chrono::NaiveDate> = Default::default();
    for (dag, start) in dags.iter().zip(text("interval_start")) {
        if let (Some(dag), Some(date)) = (dag, start.as_deref().and_then(day)) {
            let first = first_days.entry(dag.clone()).or_insert(date);
            *first = (*first).min(date);
        }
    }
    let relative = |row: usize, value: &str| {
        let first = dags[row].as_ref().and_then(|dag| first_days.get(dag));
        match (day(value), first) {
            (Some(date), Some(first)) => format!("day+{}", (date - *first).num_days()),
            _ => value.to_string(),
        }
    };
    let names = [
        "dag_id",
        "task_id",
        "map_index",
        "run_id",
        "run_type",
        "try_number",
        "state",
        "interval_start",
        "interval_end",
        "logical_date",
        "clear_number",
        "conf",
        "dag_timezone",
    ];
    let columns: Vec<Vec<Option<String>>> = names.iter().map(|name| text(name)).collect();
    let mut rows: Vec<String> = (0..attempts.height())
        .map(|row| {
            names
                .iter()
                .zip(&columns)
                .map(|(name, values)| {
                    let value = values[row].clone().unwrap_or_else(|| "NULL".into());
                    match *name {
                        "run_id" => match value.split_once("__") {
                            Some(("manual", _)) => "manual__<trigger time>".to_string(),
                            Some((kind, date)) => format!("{kind}__{}", relative(row, date)),
                            None => value,
                        },
                        "conf" => {
                            let conf: serde_json::Value =
                                serde_json::from_str(&value).unwrap_or_default();
                            let keys: Vec<&String> = conf
                                .as_object()
                                .map(|o| o.keys().collect())
                                .unwrap_or_default();
                            format!("{keys:?}")
                        }
                        "interval_start" | "interval_end" | "logical_date" => relative(row, &value),
                        _ => value,
                    }
                })
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn postgres_and_sqlite_give_the_same_attempts_for_the_same_scenario() {
    let Some(server) = server() else { return };
    let password = Some(server.password.clone());
    let postgres = Database::parse(&server.url, std::path::Path::new("/"), password).unwrap();
    let from_postgres = runtime()
        .block_on(airflow_db::read(&postgres, &Filter::default()))
        .unwrap();
    let sqlite = crate::airflow::sqlite_database(&crate::airflow::fixture_db("airflow-3.3.2"));
    let from_sqlite = runtime()
        .block_on(airflow_db::read(&sqlite, &Filter::default()))
        .unwrap();
    assert_eq!(from_postgres.version, from_sqlite.version);
    assert_eq!(
        from_postgres.attempts.schema(),
        from_sqlite.attempts.schema()
    );
    let postgres_rows = comparable(&from_postgres.attempts);
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(server.out.join("expected.json")).unwrap())
            .unwrap();
    assert_eq!(
        Some(postgres_rows.len() as u64),
        expected["counts"]["tries"].as_u64()
    );
    assert_eq!(postgres_rows, comparable(&from_sqlite.attempts));
}

#[test]
fn postgres_sessions_cannot_write() {
    let Some(server) = server() else { return };
    let database = Database::parse(
        &server.url,
        std::path::Path::new("/"),
        Some(server.password.clone()),
    )
    .unwrap();
    let error = runtime().block_on(async {
        let mut connection = database.connect().await.unwrap();
        sqlx::query("CREATE TABLE onceonly_was_here (id int)")
            .execute(&mut connection)
            .await
            .unwrap_err()
    });
    assert!(
        error.to_string().contains("read-only transaction"),
        "{error}"
    );
}

#[test]
fn wrong_password_and_unreachable_server_exit_two_without_secrets() {
    let Some(server) = server() else { return };
    let wrong = scenario(&server, &server.url);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_onceonly"))
        .args(["audit", "--config", wrong.config().to_str().unwrap()])
        .env("ONCEONLY_TEST_PG_PASSWORD", "canary-wrong-password-7731")
        .output()
        .unwrap();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains("postgres://airflow:***@127.0.0.1"),
        "{message}"
    );
    assert!(
        !message.contains("canary-wrong-password-7731") && !message.contains(&server.password),
        "{message}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let unreachable = scenario(
        &server,
        &format!("postgresql+psycopg2://airflow@127.0.0.1:{port}/airflow"),
    );
    let output = unreachable.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot connect"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn journal_in_postgres_with_the_recommended_table() {
    let Some(server) = server() else { return };
    let url = server.url.replace(
        "postgresql+psycopg2://airflow@",
        &format!("postgres://airflow:{}@", server.password),
    );
    let journal_db = format!(
        "sqlite://{}?mode=ro",
        server.out.join("journal.db").display()
    );
    runtime().block_on(async {
        use sqlx::{Connection, Row};
        let mut postgres = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql("DROP SCHEMA IF EXISTS ops CASCADE; CREATE SCHEMA ops; SET search_path = ops")
            .execute(&mut postgres)
            .await
            .unwrap();
        let ddl = include_str!("../queries/journal/ddl/postgres.sql");
        sqlx::raw_sql(ddl).execute(&mut postgres).await.unwrap();
        // The fixture DAG's history has two commits under scenario d's key (see journal.rs).
        sqlx::raw_sql("DROP INDEX ops.onceonly_journal_one_commit").execute(&mut postgres).await.unwrap();
        let mut sqlite = sqlx::SqliteConnection::connect(&journal_db).await.unwrap();
        let rows = sqlx::query("SELECT * FROM export_journal").fetch_all(&mut sqlite).await.unwrap();
        for row in &rows {
            let phase = match row.get::<String, _>("phase").as_str() {
                "STARTED" => "intent",
                "DONE" => "committed",
                _ => "failed",
            };
            sqlx::query(
                "INSERT INTO ops.onceonly_journal (op_key, dag_id, task_id, map_index, run_id, try_number, phase, external_id, payload_hash, recorded_at, approval_id, approval_expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::timestamptz, $11, $12::timestamptz)",
            )
            .bind(row.get::<String, _>("op_key"))
            .bind(row.get::<String, _>("dag_id"))
            .bind(row.get::<String, _>("task_id"))
            .bind(row.get::<i64, _>("map_index") as i32)
            .bind(row.get::<String, _>("run_id"))
            .bind(row.get::<i64, _>("try_number") as i32)
            .bind(phase)
            .bind(row.get::<Option<String>, _>("external_id"))
            .bind(row.get::<Option<String>, _>("payload_sha256"))
            .bind(row.get::<String, _>("recorded_at"))
            .bind(row.get::<Option<String>, _>("approval_id"))
            .bind(row.get::<Option<String>, _>("approval_expires_at"))
            .execute(&mut postgres)
            .await
            .unwrap();
        }
    });
    let scenario = scenario(&server, &server.url);
    let config = scenario.read("onceonly.toml");
    let (start, end) = (
        config.find("[journal]").unwrap(),
        config.find("[provider]").unwrap(),
    );
    let journal = format!(
        "[journal]\nurl = \"{}\"\npassword_env = \"ONCEONLY_TEST_PG_PASSWORD\"\ntable = \"ops.onceonly_journal\"\n\n",
        server.url
    );
    scenario.write(
        "onceonly.toml",
        &format!("{}{journal}{}", &config[..start], &config[end..]),
    );
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&scenario.read("expected.json")).unwrap();
    assert_eq!(report["summary"]["by_rule"], expected["findings_by_code"]);
    assert_eq!(
        report["coverage"]["sources"][1]["rows"],
        expected["counts"]["journal_rows"]
    );
}

async fn count(postgres: &mut sqlx::PgConnection) -> i64 {
    use sqlx::Row;
    sqlx::query("SELECT count(*) FROM ops_sql.onceonly_journal")
        .fetch_one(postgres)
        .await
        .unwrap()
        .get::<i64, _>(0)
}

#[test]
fn sql_repair_script_on_postgres_is_idempotent_with_hostile_values() {
    let Some(server) = server() else { return };
    let (scenario, key, id) = crate::plan::hostile_lost_response(false);
    let url = server.url.replace(
        "postgresql+psycopg2://airflow@",
        &format!("postgres://airflow:{}@", server.password),
    );
    let sqlite = format!("sqlite://{}", scenario.path("journal.db").display());
    runtime().block_on(async {
        use sqlx::{Connection, Row};
        let mut postgres = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql("DROP SCHEMA IF EXISTS ops_sql CASCADE; CREATE SCHEMA ops_sql; SET search_path = ops_sql")
            .execute(&mut postgres)
            .await
            .unwrap();
        sqlx::raw_sql(include_str!("../queries/journal/ddl/postgres.sql")).execute(&mut postgres).await.unwrap();
        let mut source = sqlx::SqliteConnection::connect(&sqlite).await.unwrap();
        for row in sqlx::query("SELECT * FROM onceonly_journal").fetch_all(&mut source).await.unwrap() {
            sqlx::query("INSERT INTO ops_sql.onceonly_journal (op_key, dag_id, task_id, map_index, run_id, try_number, phase, payload_hash, recorded_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::timestamptz)")
                .bind(row.get::<String, _>("op_key"))
                .bind(row.get::<String, _>("dag_id"))
                .bind(row.get::<String, _>("task_id"))
                .bind(row.get::<i64, _>("map_index") as i32)
                .bind(row.get::<String, _>("run_id"))
                .bind(row.get::<i64, _>("try_number") as i32)
                .bind(row.get::<String, _>("phase"))
                .bind(row.get::<Option<String>, _>("payload_hash"))
                .bind(row.get::<String, _>("recorded_at"))
                .execute(&mut postgres)
                .await
                .unwrap();
        }
    });
    scenario.edit(
        "onceonly.toml",
        "url = \"sqlite:///journal.db\"\ntable = \"onceonly_journal\"",
        &format!("url = \"{}\"\npassword_env = \"ONCEONLY_TEST_PG_PASSWORD\"\ntable = \"ops_sql.onceonly_journal\"", server.url),
    );
    let script_path = scenario.path("repair.sql");
    let output = scenario.audit(&["--sql", script_path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let script = scenario.read("repair.sql");
    assert!(!script.contains(&server.password));
    runtime().block_on(async {
        use sqlx::{Connection, Row};
        let mut postgres = sqlx::PgConnection::connect(&url).await.unwrap();
        let before = count(&mut postgres).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(script.clone()))
            .execute(&mut postgres)
            .await
            .unwrap();
        assert_eq!(count(&mut postgres).await, before + 1);
        sqlx::raw_sql(sqlx::AssertSqlSafe(script.clone()))
            .execute(&mut postgres)
            .await
            .unwrap();
        assert_eq!(
            count(&mut postgres).await,
            before + 1,
            "a second run changed the journal"
        );
        let row = sqlx::query(
            // Written by onceonly: the reconciled phase, as the journal maps no phases.
            "SELECT op_key, external_id FROM ops_sql.onceonly_journal WHERE phase = 'reconciled'",
        )
        .fetch_one(&mut postgres)
        .await
        .unwrap();
        assert_eq!(
            (row.get::<String, _>(0), row.get::<String, _>(1)),
            (key.clone(), id.clone())
        );
    });
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    // A NUL byte cannot be stored in PostgreSQL text: that action is left to a person.
    let (with_nul, _, _) = crate::plan::hostile_lost_response(true);
    with_nul.edit(
        "onceonly.toml",
        "url = \"sqlite:///journal.db\"\ntable = \"onceonly_journal\"",
        &format!("url = \"{}\"\npassword_env = \"ONCEONLY_TEST_PG_PASSWORD\"\ntable = \"ops_sql.onceonly_journal\"", server.url),
    );
    runtime().block_on(async {
        use sqlx::Connection;
        let mut postgres = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql("DELETE FROM ops_sql.onceonly_journal WHERE phase = 'reconciled'")
            .execute(&mut postgres)
            .await
            .unwrap();
    });
    let nul_script = with_nul.path("repair.sql");
    with_nul.audit(&["--sql", nul_script.to_str().unwrap()]);
    let text = with_nul.read("repair.sql");
    assert!(
        text.contains("a value holds a NUL byte") && text.contains("-- 0 journal rows"),
        "{text}"
    );
}
