//! Scenario folders for tests: copies of bundled fixtures that a test may change.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A copy of a fixture folder in a temporary directory.
pub struct Scenario {
    pub dir: tempfile::TempDir,
}

impl Scenario {
    pub fn copy_of(fixture: &str) -> Scenario {
        let dir = tempfile::tempdir().expect("temporary directory");
        for entry in std::fs::read_dir(fixtures().join(fixture)).expect("fixture folder") {
            let entry = entry.expect("fixture entry");
            if entry.path().is_file() {
                std::fs::copy(entry.path(), dir.path().join(entry.file_name()))
                    .expect("copy fixture");
            }
        }
        Scenario { dir }
    }

    /// A copy of a scenario of `fixtures/rules/` with the config those scenarios share, cut to
    /// the `[[operation]]`s whose dag_id matches a DAG of the scenario's attempts: an operation
    /// that matches no DAG is refused (exit 2), and each scenario holds only some of the DAGs.
    pub fn of_rules(scenario: &str) -> Scenario {
        let copy = Scenario::copy_of(&format!("rules/{scenario}"));
        let shared = std::fs::read_to_string(fixtures().join("rules/onceonly.toml"))
            .expect("the rules' config");
        let attempts = copy.read("attempts.csv");
        let mut lines = attempts.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let dag_column = header
            .iter()
            .position(|name| *name == "dag_id")
            .expect("dag_id");
        let dags: Vec<String> = lines
            .filter_map(|line| line.split(',').nth(dag_column).map(str::to_string))
            .collect();
        let mut blocks = shared.split("\n[[operation]]\n");
        let mut config = blocks.next().expect("the sources").to_string();
        for block in blocks {
            let dag_id = block
                .lines()
                .find_map(|line| line.strip_prefix("dag_id = "))
                .expect("an operation's dag_id")
                .trim_matches('"');
            if dags
                .iter()
                .any(|dag| onceonly::glob::glob_match(dag_id, dag))
            {
                config.push_str("\n[[operation]]\n");
                config.push_str(block);
            }
        }
        copy.write("onceonly.toml", &config);
        copy
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn config(&self) -> PathBuf {
        self.path("onceonly.toml")
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).expect("scenario file")
    }

    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).expect("write scenario file");
    }

    /// Replaces the first occurrence of `from` in a file, failing loudly if it is not there.
    pub fn edit(&self, name: &str, from: &str, to: &str) {
        let text = self.read(name);
        assert!(text.contains(from), "{name} does not contain {from:?}");
        self.write(name, &text.replacen(from, to, 1));
    }

    fn database(&self, file: &str) -> (tokio::runtime::Runtime, sqlx::SqliteConnection) {
        database(&self.path(file))
    }

    /// Changes one of the scenario's SQLite databases with SQL.
    pub fn sqlite(&self, file: &str, sql: &str) {
        change_sqlite(&self.path(file), sql);
    }

    /// The one integer a query of one of the scenario's SQLite databases gives.
    pub fn sqlite_number(&self, file: &str, sql: &str) -> i64 {
        let (runtime, mut db) = self.database(file);
        runtime
            .block_on(sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).fetch_one(&mut db))
            .expect("run the query")
    }

    /// Stores a table's rows of one of the scenario's SQLite databases in reverse, so that a
    /// reader that asks for no order gets them last first. A table whose rows are numbered by
    /// an integer `id` (its row id) gets the ids negated, and other tables' references to them
    /// are left as they were; any other table is written again.
    pub fn reverse_rows(&self, file: &str, table: &str) {
        let numbered = format!(
            "SELECT COUNT(*) FROM pragma_table_info('{table}')
             WHERE pk = 1 AND name = 'id' AND upper(type) = 'INTEGER'"
        );
        let sql = if self.sqlite_number(file, &numbered) == 1 {
            format!("PRAGMA foreign_keys = OFF; UPDATE {table} SET id = -id;")
        } else {
            format!(
                "PRAGMA foreign_keys = OFF;
                 CREATE TABLE reversed AS SELECT * FROM {table} ORDER BY rowid DESC;
                 DELETE FROM {table};
                 INSERT INTO {table} SELECT * FROM reversed;
                 DROP TABLE reversed;"
            )
        };
        self.sqlite(file, &sql);
    }

    pub fn audit(&self, args: &[&str]) -> Output {
        let config = self.config();
        let mut all = vec!["audit", "--config", config.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        onceonly(&all)
    }
}

/// A SQLite database, opened, with a runtime to run its queries on.
fn database(path: &Path) -> (tokio::runtime::Runtime, sqlx::SqliteConnection) {
    use sqlx::Connection;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let url = format!("sqlite://{}", path.display());
    let db = runtime
        .block_on(sqlx::SqliteConnection::connect(&url))
        .expect("open the database");
    (runtime, db)
}

/// Changes a SQLite database with SQL.
pub fn change_sqlite(path: &Path, sql: &str) {
    let (runtime, mut db) = database(path);
    runtime
        .block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string())).execute(&mut db))
        .expect("run the SQL");
}

/// `onceonly synth` into a temporary folder: the folder (kept while the first value lives) and
/// the path of the scenario in it.
pub fn synthesized(
    intervals: &str,
    dags: &str,
    seed: &str,
    rates: &str,
) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir
        .path()
        .join("s")
        .to_str()
        .expect("utf-8 path")
        .to_string();
    let made = onceonly(&[
        "synth",
        "--intervals",
        intervals,
        "--dags",
        dags,
        "--seed",
        seed,
        "--out",
        &out,
        "--rates",
        rates,
    ]);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    (dir, out)
}

pub fn onceonly(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onceonly"))
        .args(args)
        .env_remove("ONCEONLY_CONFIG")
        .env("NO_COLOR", "1")
        .output()
        .expect("run onceonly")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The JSON document in the file at `path`.
pub fn json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What the generator derived from a real-Airflow fixture run (`fixtures/airflow/out/VERSION/
/// expected.json`): counts, runs, tries and findings, so tests follow a regenerated fixture.
pub fn airflow_expected(version: &str) -> serde_json::Value {
    let path = fixtures()
        .join("airflow/out")
        .join(version)
        .join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("expected.json")).expect("json")
}

/// The start of every try of a real-Airflow fixture run (RFC 3339, UTC), earliest first.
pub fn airflow_try_starts(version: &str) -> Vec<String> {
    let expected = airflow_expected(version);
    let mut starts: Vec<String> = Vec::new();
    for runs in expected["dags"].as_object().expect("dags").values() {
        for run in runs.as_array().expect("runs") {
            for task in run["task_instances"].as_array().expect("task instances") {
                for tri in task["tries"].as_array().expect("tries") {
                    if let Some(start) = tri["start_date"].as_str() {
                        starts.push(start.to_string());
                    }
                }
            }
        }
    }
    starts.sort();
    starts
}

/// The UTC day the fixture's scenarios ran (the earliest try's start), as `YYYY-MM-DD`.
pub fn airflow_run_day(version: &str) -> String {
    airflow_try_starts(version)[0][..10].to_string()
}

/// The creation times (epoch seconds) of a DAG's first object per interval in a real-Airflow
/// fixture run, in interval order: `(interval start as YYYY-MM-DD, created)`.
pub fn airflow_first_objects(version: &str, dag: &str) -> Vec<(String, i64)> {
    let path = fixtures()
        .join("airflow/out")
        .join(version)
        .join("provider_state.json");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("provider state"))
            .expect("json");
    let mut first: std::collections::BTreeMap<String, i64> = Default::default();
    for object in state["objects"].as_array().expect("objects") {
        if object["metadata"]["dag_id"] != dag {
            continue;
        }
        let day = object["metadata"]["interval_start"]
            .as_str()
            .expect("interval")[..10]
            .to_string();
        let created = object["created"].as_i64().expect("created");
        let earliest = first.entry(day).or_insert(created);
        *earliest = (*earliest).min(created);
    }
    first.into_iter().collect()
}

/// An epoch second as RFC 3339 UTC (`2026-11-30T23:44:16Z`).
pub fn rfc3339(epoch: i64) -> String {
    chrono::DateTime::from_timestamp(epoch, 0)
        .expect("a time")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The catch-up start date of a real-Airflow fixture run and the two days after it: the three
/// scheduled intervals of its scenarios, as `YYYY-MM-DD`.
pub fn airflow_days(version: &str) -> [String; 3] {
    let start = airflow_expected(version)["start_date"]
        .as_str()
        .expect("start_date")
        .to_string();
    let day = chrono::NaiveDate::parse_from_str(&start, "%Y-%m-%d").expect("a date");
    [0, 1, 2].map(|n| (day + chrono::Days::new(n)).to_string())
}
