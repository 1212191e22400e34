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

    /// A copy of a scenario of `fixtures/rules/` with the config those scenarios share.
    pub fn of_rules(scenario: &str) -> Scenario {
        let copy = Scenario::copy_of(&format!("rules/{scenario}"));
        std::fs::copy(fixtures().join("rules/onceonly.toml"), copy.config())
            .expect("copy the rules' config");
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

    /// Changes one of the scenario's SQLite databases with SQL.
    pub fn sqlite(&self, file: &str, sql: &'static str) {
        let url = format!("sqlite://{}", self.path(file).display());
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async {
                use sqlx::Connection;
                let mut db = sqlx::SqliteConnection::connect(&url)
                    .await
                    .expect("open the database");
                sqlx::raw_sql(sql)
                    .execute(&mut db)
                    .await
                    .expect("run the SQL");
            });
    }

    pub fn audit(&self, args: &[&str]) -> Output {
        let config = self.config();
        let mut all = vec!["audit", "--config", config.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        onceonly(&all)
    }
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

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
