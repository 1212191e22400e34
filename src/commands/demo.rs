//! `onceonly demo`: audits the bundled scenario, with no set-up at all.
//!
//! The scenario is a real one: the metadata database that apache-airflow 3.3.2's scheduler
//! wrote while running the fixture DAGs, the journal their tasks wrote, and the objects the
//! fake provider holds (fixtures/airflow/). Its files are compiled into the binary and written
//! to a temporary folder, so the demo works from any directory.

use std::path::PathBuf;

use crate::commands::audit::{self, Audit, AuditOptions};
use crate::config::Config;
use crate::error::{Error, Result};

const FILES: [(&str, &[u8]); 4] = [
    (
        "onceonly.toml",
        include_bytes!("../../fixtures/airflow/out/airflow-3.3.2/onceonly.toml"),
    ),
    (
        "airflow.db",
        include_bytes!("../../fixtures/airflow/out/airflow-3.3.2/airflow.db"),
    ),
    (
        "journal.db",
        include_bytes!("../../fixtures/airflow/out/airflow-3.3.2/journal.db"),
    ),
    (
        "provider.ndjson",
        include_bytes!("../../fixtures/airflow/out/airflow-3.3.2/provider.ndjson"),
    ),
];

pub fn run() -> Result<Audit> {
    let dir = ScratchDir::new()?;
    for (name, text) in FILES {
        let path = dir.0.join(name);
        std::fs::write(&path, text).map_err(|err| Error::io(path.display().to_string(), err))?;
    }
    let config = Config::load(&dir.0.join("onceonly.toml"))?;
    audit::run(&config, &AuditOptions::default())
}

/// A folder removed when the demo ends, whatever happens.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<ScratchDir> {
        let path = std::env::temp_dir().join(format!("onceonly-demo-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|err| Error::io(path.display().to_string(), err))?;
        Ok(ScratchDir(path))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
