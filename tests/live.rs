//! Live databases (SPEC §8): the nightly audit runs while Airflow and its tasks write.
//!
//! A writer process moves tries into `task_instance_history` (as Airflow does on a retry: the
//! `task_instance` row's try copied into history, the row updated to the next try) and appends
//! journal rows, in many small transactions, while `onceonly audit` reads the same database
//! again and again. Every audit completes, and its report is the report of the database as it
//! stood after one of the writer's commits: the test rebuilds that state in the same place
//! afterwards and audits it again. A database that another process holds locked past
//! `busy_timeout` stops the audit with exit 2 naming it, and a shorter lock is waited out.
//!
//! The writer is this test binary run again (`writer_process`, an ignored test that does
//! nothing unless ONCEONLY_LIVE_WRITER is set), so it is a separate OS process with its own
//! connection, as Airflow's scheduler and workers are.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::{AnyConnection, AssertSqlSafe, Connection, Row};

use crate::postgres::{self, Server};
use crate::scenario::{Scenario, stderr};

/// The writer and lock-holder process; see the module doc.
#[test]
#[ignore = "the writer process of the live-database tests, which start it themselves"]
fn writer_process() {
    let Ok(mode) = std::env::var("ONCEONLY_LIVE_WRITER") else {
        return;
    };
    let setting = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let url = setting("ONCEONLY_LIVE_URL");
    postgres::runtime().block_on(async {
        let mut db = connect_writer(&url).await;
        match mode.as_str() {
            "steps" => {
                let instances = task_instances(&mut db).await;
                let stop = PathBuf::from(setting("ONCEONLY_LIVE_STOP"));
                let started = Instant::now();
                for number in 1.. {
                    if stop.exists() || started.elapsed() > Duration::from_secs(120) {
                        break;
                    }
                    let transaction =
                        format!("BEGIN;\n{}\nCOMMIT;", step(&url, &instances, number).0);
                    sqlx::raw_sql(AssertSqlSafe(transaction))
                        .execute(&mut db)
                        .await
                        .unwrap();
                    println!("committed {number}");
                    // A breath between commits, short enough that hundreds land in one audit.
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            "lock" => {
                sqlx::raw_sql(AssertSqlSafe(setting("ONCEONLY_LIVE_LOCK")))
                    .execute(&mut db)
                    .await
                    .unwrap();
                println!("locked");
                let hold: u64 = setting("ONCEONLY_LIVE_HOLD_MS").parse().unwrap();
                tokio::time::sleep(Duration::from_millis(hold)).await;
                // Ending the process rolls the transaction back and lets go of the lock.
            }
            other => panic!("unknown writer mode {other}"),
        }
    });
}

/// A read-write connection that commits without waiting for the disk, so that many commits
/// land inside one audit's read.
async fn connect_writer(url: &str) -> AnyConnection {
    sqlx::any::install_default_drivers();
    let mut db = AnyConnection::connect(url).await.unwrap();
    let session = if url.starts_with("sqlite:") {
        "PRAGMA synchronous = OFF"
    } else {
        "SET synchronous_commit = off"
    };
    sqlx::raw_sql(session).execute(&mut db).await.unwrap();
    db
}

/// The writer process, killed if a test ends before it does.
struct Writer {
    child: Child,
    /// Its output lines so far (`committed N`, `locked`).
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(environment: &[(&str, String)]) -> Writer {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "live::writer_process",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in environment {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                // libtest names the test on the line the first output goes to.
                let line = line.unwrap_or_default();
                let line = line.trim_start_matches("test live::writer_process ... ");
                seen.lock().unwrap().push(line.to_string());
            }
        });
        Writer {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits until the writer printed `line`.
    fn wait_for(&mut self, line: &str) {
        let started = Instant::now();
        while !self.lines.lock().unwrap().iter().any(|seen| seen == line) {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the writer ended before printing {line:?}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no {line:?} from the writer"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the writer to end; the number of steps it committed.
    fn finish(mut self) -> usize {
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the writer failed: {status}");
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|line| line.strip_prefix("committed ")?.parse().ok())
            .max()
            .unwrap_or(0)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A time `seconds` into the writer's day, as Airflow stores it in the database at `url`.
fn airflow_time(url: &str, seconds: usize) -> String {
    let time = chrono::DateTime::from_timestamp(1_796_040_000 + seconds as i64, 0).unwrap();
    if url.starts_with("sqlite:") {
        time.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
    } else {
        time.format("%Y-%m-%d %H:%M:%S%.6f+00:00").to_string()
    }
}

/// A task instance the writer retries: its key and its interval's day.
struct TaskInstance {
    dag_id: String,
    run_id: String,
    map_index: i64,
    day: String,
}

/// What a step adds: (tries, journal rows).
type Growth = (u64, u64);

/// The writer's step `number` (from 1) as one transaction's SQL for the database at `url`, and
/// what it adds. Each task instance in turn is retried (its try moved into history, the row
/// updated to the next try), the new try writes an intent and a commit to the journal, and
/// succeeds.
fn step(url: &str, instances: &[TaskInstance], number: usize) -> (String, Growth) {
    let quote = |text: &str| format!("'{}'", text.replace('\'', "''"));
    let instance = &instances[(number - 1) / 4 % instances.len()];
    let time = quote(&airflow_time(url, number));
    let ti = format!(
        "dag_id = {} AND task_id = 'export' AND run_id = {} AND map_index = {}",
        quote(&instance.dag_id),
        quote(&instance.run_id),
        instance.map_index
    );
    let journal = |phase: &str, external_id: &str| {
        format!(
            "INSERT INTO export_journal (op_key, dag_id, task_id, map_index, run_id, try_number, phase, external_id, payload_sha256, recorded_at, approval_id, approval_expires_at)
             SELECT {}, dag_id, task_id, map_index, run_id, try_number, '{phase}', {external_id}, 'live-payload', '{}', NULL, NULL
             FROM task_instance WHERE {ti};",
            quote(&format!("exp:{}:export:{}", instance.dag_id, instance.day)),
            chrono::DateTime::from_timestamp(1_796_040_000 + number as i64, 0)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        )
    };
    match (number - 1) % 4 {
        0 => (
            format!(
                "INSERT INTO task_instance_history (task_instance_id, task_id, dag_id, run_id, map_index, try_number, start_date, end_date, state, hostname, pool, pool_slots, pid, queued_dttm, dag_version_id)
                 SELECT id, task_id, dag_id, run_id, map_index, try_number, start_date, {time}, 'failed', hostname, pool, pool_slots, pid, queued_dttm, dag_version_id
                 FROM task_instance WHERE {ti};
                 UPDATE task_instance SET id = '{:032x}', try_number = try_number + 1, state = 'running',
                        start_date = {time}, end_date = NULL, pid = {}
                 WHERE {ti};",
                0x01a2_26c0_0000_7000_8000_0000_0000_0000_u128 + number as u128,
                10_000 + number
            ),
            (1, 0),
        ),
        1 => (journal("STARTED", "NULL"), (0, 1)),
        2 => (journal("DONE", &format!("'exp_live_{number}'")), (0, 1)),
        _ => (
            format!("UPDATE task_instance SET state = 'success', end_date = {time} WHERE {ti};"),
            (0, 0),
        ),
    }
}

/// The export task instances of three fixture DAGs whose keys come from the interval.
async fn task_instances(db: &mut AnyConnection) -> Vec<TaskInstance> {
    let rows = sqlx::query(
        "SELECT CAST(ti.dag_id AS TEXT) AS dag_id, CAST(ti.run_id AS TEXT) AS run_id,
                CAST(ti.map_index AS BIGINT) AS map_index, CAST(dr.logical_date AS TEXT) AS logical_date
         FROM task_instance AS ti JOIN dag_run AS dr ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id
         WHERE ti.task_id = 'export'
           AND ti.dag_id IN ('onceonly_a_stable_key', 'onceonly_c_exhausted', 'onceonly_h_lost_then_down')
         ORDER BY ti.dag_id, ti.run_id",
    )
    .fetch_all(db)
    .await
    .unwrap();
    let instances: Vec<TaskInstance> = rows
        .iter()
        .map(|row| TaskInstance {
            dag_id: row.get("dag_id"),
            run_id: row.get("run_id"),
            map_index: row.get("map_index"),
            day: row.get::<String, _>("logical_date")[..10].to_string(),
        })
        .collect();
    assert!(instances.len() >= 3, "the fixture has the export tries");
    instances
}

/// A database the writer changes, and how to put it back as it was before step 1.
trait Live {
    /// The database as it was before the writer's first step.
    fn reset(&self);
    /// The writer's and the test's read-write URL.
    fn url(&self) -> String;
}

/// Audits while the writer commits its steps and checks each report against the database as
/// it stood after some commit. Returns how many different states the audits saw.
fn audits_match_some_instant(live: &dyn Live, scenario: &Scenario) -> usize {
    let url = live.url();
    let instances = postgres::runtime()
        .block_on(async { task_instances(&mut connect_writer(&url).await).await });
    let before = audit(scenario);
    let counts = |report: &[u8]| -> Growth {
        let report: serde_json::Value = serde_json::from_slice(report).unwrap();
        let rows = |index: usize| {
            report["coverage"]["sources"][index]["rows"]
                .as_u64()
                .unwrap()
        };
        (rows(0), rows(1))
    };

    let stop = scenario.path("stop");
    let mut writer = Writer::start(&[
        ("ONCEONLY_LIVE_WRITER", "steps".into()),
        ("ONCEONLY_LIVE_URL", url.clone()),
        ("ONCEONLY_LIVE_STOP", stop.display().to_string()),
    ]);
    writer.wait_for("committed 1");
    let reports: Vec<Vec<u8>> = (0..5).map(|_| audit(scenario)).collect();
    std::fs::write(&stop, "").unwrap();
    let committed = writer.finish();

    // The row counts after each step, then the state after step k, rebuilt in place of the
    // database and audited: only the states whose counts are those a report states. Reports
    // come in the order of the writes, so the database is reset once and taken forward.
    let mut after = vec![counts(&before)];
    for number in 1..=committed {
        let ((tries, journal), (more_tries, more_journal)) =
            (after[number - 1], step(&url, &instances, number).1);
        after.push((tries + more_tries, journal + more_journal));
    }
    live.reset();
    let mut built = 0;
    let mut known: BTreeMap<usize, Vec<u8>> = BTreeMap::from([(0, before)]);
    let mut seen = std::collections::BTreeSet::new();
    for report in &reports {
        let wanted = counts(report);
        let mut state = None;
        for k in (0..=committed).filter(|&k| after[k] == wanted) {
            let expected = known.entry(k).or_insert_with(|| {
                if k < built {
                    live.reset();
                    built = 0;
                }
                let steps: Vec<String> = (built + 1..=k)
                    .map(|number| step(&url, &instances, number).0)
                    .collect();
                apply(&url, &steps);
                built = k;
                audit(scenario)
            });
            if *expected == *report {
                state = Some(k);
                break;
            }
        }
        let Some(state) = state else {
            panic!(
                "an audit during the writes reported {wanted:?} (tries, journal rows), which is no state the database was in after any of the {committed} commits:\n{}",
                String::from_utf8_lossy(report)
            );
        };
        seen.insert(state);
    }
    seen.len()
}

/// Runs `steps` on `url` in one transaction.
fn apply(url: &str, steps: &[String]) {
    let transaction = format!("BEGIN;\n{}\nCOMMIT;", steps.join("\n"));
    postgres::runtime().block_on(async {
        let mut db = connect_writer(url).await;
        sqlx::raw_sql(AssertSqlSafe(transaction))
            .execute(&mut db)
            .await
            .unwrap();
        let _ = db.close().await;
    });
}

/// The audit's JSON report; it must complete (exit 0 or 1).
fn audit(scenario: &Scenario) -> Vec<u8> {
    let output = scenario.audit(&["--format", "json"]);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "the audit did not complete: exit {:?}: {}",
        output.status.code(),
        stderr(&output)
    );
    output.stdout
}

/// The real Airflow 3.3.2 run with its journal moved into the metadata database (one file,
/// WAL mode), and a pristine copy to reset it from.
struct SqliteLive {
    scenario: Scenario,
}

impl SqliteLive {
    fn new() -> SqliteLive {
        let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
        postgres::runtime().block_on(async {
            let mut db = connect_writer(&format!(
                "sqlite://{}",
                scenario.path("airflow.db").display()
            ))
            .await;
            let journal = scenario
                .path("journal.db")
                .display()
                .to_string()
                .replace('\'', "''");
            sqlx::raw_sql(AssertSqlSafe(format!(
                "ATTACH DATABASE '{journal}' AS j;
                 CREATE TABLE export_journal AS SELECT * FROM j.export_journal;
                 DETACH DATABASE j;
                 PRAGMA journal_mode = WAL;"
            )))
            .execute(&mut db)
            .await
            .unwrap();
            let _ = db.close().await;
        });
        std::fs::copy(scenario.path("airflow.db"), scenario.path("initial.db")).unwrap();
        scenario.edit(
            "onceonly.toml",
            "url = \"sqlite:///journal.db\"",
            "url = \"sqlite:///airflow.db\"",
        );
        SqliteLive { scenario }
    }
}

impl Live for SqliteLive {
    fn reset(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(self.scenario.path(&format!("airflow.db{suffix}")));
        }
        std::fs::copy(
            self.scenario.path("initial.db"),
            self.scenario.path("airflow.db"),
        )
        .unwrap();
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.scenario.path("airflow.db").display())
    }
}

#[test]
fn sqlite_audits_while_airflow_and_the_journal_write_see_one_instant() {
    let live = SqliteLive::new();
    let states = audits_match_some_instant(&live, &live.scenario);
    assert!(
        states >= 2,
        "the audits all saw one state: they did not overlap the writes"
    );
}

/// A copy of the PostgreSQL run's Airflow tables and journal in a schema of its own (the
/// server's own tables are shared with other tests), and a second schema to reset it from.
struct PostgresLive {
    server: Server,
    schema: String,
    scenario: Scenario,
}

const AIRFLOW_TABLES: [&str; 5] = [
    "alembic_version",
    "dag_run",
    "serialized_dag",
    "task_instance",
    "task_instance_history",
];

impl PostgresLive {
    fn new(server: Server, name: &str) -> PostgresLive {
        let schema = format!("onceonly_{name}_{}", std::process::id());
        let scenario = postgres::scenario(&server, &server.url);
        let journal_rows = postgres::runtime().block_on(async {
            let mut sqlite = connect_writer(&format!("sqlite://{}?mode=ro", scenario.path("journal.db").display())).await;
            sqlx::query(
                "SELECT op_key, dag_id, task_id, map_index, run_id, try_number, phase, external_id,
                        payload_sha256, recorded_at, approval_id, approval_expires_at FROM export_journal",
            )
            .fetch_all(&mut sqlite)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                (0..12)
                    .map(|index| match index {
                        3 | 5 => Some(row.get::<i64, _>(index).to_string()),
                        _ => row.get::<Option<String>, _>(index),
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
        });
        let live = PostgresLive {
            server,
            schema,
            scenario,
        };
        let initial = format!("{}_initial", live.schema);
        let mut sql = format!(
            "DROP SCHEMA IF EXISTS {0} CASCADE; DROP SCHEMA IF EXISTS {initial} CASCADE;
             CREATE SCHEMA {0}; CREATE SCHEMA {initial};",
            live.schema
        );
        for table in AIRFLOW_TABLES {
            let filter = if table == "alembic_version" {
                String::new()
            } else {
                "WHERE dag_id LIKE 'onceonly\\_%'".to_string()
            };
            sql += &format!(
                "CREATE TABLE {initial}.{table} (LIKE public.{table} INCLUDING DEFAULTS);
                 INSERT INTO {initial}.{table} SELECT * FROM public.{table} {filter};
                 CREATE TABLE {0}.{table} (LIKE public.{table} INCLUDING DEFAULTS);",
                live.schema
            );
        }
        sql += &format!(
            "CREATE TABLE {initial}.export_journal (op_key text, dag_id text, task_id text, map_index integer,
                 run_id text, try_number integer, phase text, external_id text, payload_sha256 text,
                 recorded_at text, approval_id text, approval_expires_at text);
             CREATE TABLE {0}.export_journal (LIKE {initial}.export_journal);",
            live.schema
        );
        for row in journal_rows {
            let values: Vec<String> = row
                .iter()
                .map(|value| match value {
                    Some(text) => format!("'{}'", text.replace('\'', "''")),
                    None => "NULL".into(),
                })
                .collect();
            sql += &format!(
                "INSERT INTO {initial}.export_journal VALUES ({});",
                values.join(", ")
            );
        }
        live.admin(&sql);
        live.reset();

        let url = format!("{}?options[search_path]={}", live.server.url, live.schema);
        let config = live.scenario.read("onceonly.toml");
        let (start, end) = (
            config.find("[journal]").unwrap(),
            config.find("[journal.columns]").unwrap(),
        );
        live.scenario.write(
            "onceonly.toml",
            &format!(
                "{}[journal]\nurl = \"{url}\"\npassword_env = \"ONCEONLY_TEST_PG_PASSWORD\"\ntable = \"export_journal\"\n\n{}",
                &config[..start],
                &config[end..]
            )
            .replacen(
                &format!("url = \"{}\"", live.server.url),
                &format!("url = \"{url}\""),
                1,
            ),
        );
        live
    }

    /// Runs SQL on the server's own database, outside the live schema.
    fn admin(&self, sql: &str) {
        let url = postgres::with_password(&self.server);
        postgres::runtime().block_on(async {
            let mut db = connect_writer(&url).await;
            sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
                .execute(&mut db)
                .await
                .unwrap();
            let _ = db.close().await;
        });
    }
}

impl Live for PostgresLive {
    fn reset(&self) {
        let initial = format!("{}_initial", self.schema);
        let mut sql = String::from("BEGIN;");
        for table in AIRFLOW_TABLES.iter().chain(&["export_journal"]) {
            sql += &format!(
                "TRUNCATE {0}.{table}; INSERT INTO {0}.{table} SELECT * FROM {initial}.{table};",
                self.schema
            );
        }
        sql += "COMMIT;";
        self.admin(&sql);
    }

    fn url(&self) -> String {
        format!(
            "{}?options[search_path]={}",
            postgres::with_password(&self.server),
            self.schema
        )
    }
}

impl Drop for PostgresLive {
    fn drop(&mut self) {
        self.admin(&format!(
            "DROP SCHEMA IF EXISTS {0} CASCADE; DROP SCHEMA IF EXISTS {0}_initial CASCADE;",
            self.schema
        ));
    }
}

#[test]
fn postgres_audits_while_airflow_and_the_journal_write_see_one_instant() {
    let Some(server) = postgres::server() else {
        return;
    };
    let live = PostgresLive::new(server, "live");
    let states = audits_match_some_instant(&live, &live.scenario);
    assert!(
        states >= 2,
        "the audits all saw one state: they did not overlap the writes"
    );
}

/// Starts a process that holds `lock` on `url` for `hold`, once it holds it.
fn hold_lock(url: &str, lock: &str, hold: Duration) -> Writer {
    let mut writer = Writer::start(&[
        ("ONCEONLY_LIVE_WRITER", "lock".into()),
        ("ONCEONLY_LIVE_URL", url.to_string()),
        ("ONCEONLY_LIVE_LOCK", lock.to_string()),
        ("ONCEONLY_LIVE_HOLD_MS", hold.as_millis().to_string()),
    ]);
    writer.wait_for("locked");
    writer
}

/// An audit of `scenario` while `url` is locked: exit 2 naming `named`, no report.
fn refused_while_locked(scenario: &Scenario, url: &str, lock: &str, named: &str) -> Output {
    let writer = hold_lock(url, lock, Duration::from_secs(30));
    let started = Instant::now();
    let output = scenario.audit(&["--format", "json"]);
    let waited = started.elapsed();
    drop(writer);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains(named)
            && message.contains("locked")
            && message.contains("busy timeout of 300ms"),
        "{message}"
    );
    assert!(output.stdout.is_empty(), "a report over a locked source");
    assert!(
        waited >= Duration::from_millis(300),
        "it did not wait: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(20),
        "it waited past the timeout: {waited:?}"
    );
    output
}

fn with_busy_timeout(scenario: &Scenario, timeout: &str) {
    scenario.edit(
        "onceonly.toml",
        "url = \"sqlite:///airflow.db\"",
        &format!("url = \"sqlite:///airflow.db\"\nbusy_timeout = \"{timeout}\""),
    );
    scenario.edit(
        "onceonly.toml",
        "url = \"sqlite:///journal.db\"",
        &format!("url = \"sqlite:///journal.db\"\nbusy_timeout = \"{timeout}\""),
    );
}

#[test]
fn a_sqlite_source_locked_past_the_busy_timeout_exits_two_naming_it() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    with_busy_timeout(&scenario, "300ms");
    for file in ["airflow.db", "journal.db"] {
        let url = format!("sqlite://{}", scenario.path(file).display());
        // Rollback-journal mode, as Airflow leaves its SQLite file: a writer's exclusive lock.
        refused_while_locked(
            &scenario,
            &url,
            "BEGIN EXCLUSIVE",
            &scenario.path(file).display().to_string(),
        );
    }
    // WAL mode lets readers past writers, except a writer in exclusive locking mode.
    let url = format!("sqlite://{}", scenario.path("journal.db").display());
    refused_while_locked(
        &scenario,
        &url,
        "PRAGMA journal_mode = WAL; PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE",
        &scenario.path("journal.db").display().to_string(),
    );
}

#[test]
fn a_lock_released_within_the_busy_timeout_is_waited_out() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    with_busy_timeout(&scenario, "20s");
    let unlocked = audit(&scenario);
    let url = format!("sqlite://{}", scenario.path("airflow.db").display());
    let writer = hold_lock(&url, "BEGIN EXCLUSIVE", Duration::from_millis(1500));
    let started = Instant::now();
    let locked = audit(&scenario);
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "the lock was not held while the audit started"
    );
    writer.finish();
    assert!(
        locked == unlocked,
        "the audit that waited reported something else"
    );
}

#[test]
fn a_postgres_table_locked_past_the_busy_timeout_exits_two_naming_the_server() {
    let Some(server) = postgres::server() else {
        return;
    };
    let live = PostgresLive::new(server, "locked");
    let config = live.scenario.read("onceonly.toml").replace(
        "password_env = \"ONCEONLY_TEST_PG_PASSWORD\"",
        "password_env = \"ONCEONLY_TEST_PG_PASSWORD\"\nbusy_timeout = \"300ms\"",
    );
    assert_eq!(config.matches("busy_timeout").count(), 2, "{config}");
    live.scenario.write("onceonly.toml", &config);
    // A migration or VACUUM FULL holds ACCESS EXCLUSIVE, which even a read waits for.
    for table in ["task_instance", "export_journal"] {
        refused_while_locked(
            &live.scenario,
            &live.url(),
            &format!("BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"),
            "postgres://airflow:***@127.0.0.1",
        );
    }
}
