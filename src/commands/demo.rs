//! `onceonly demo`: audits the bundled scenario, with no set-up at all.
//!
//! The scenario's files are compiled into the binary and written to a temporary folder, so
//! the demo works from any directory.

use std::path::PathBuf;

use crate::commands::audit::{self, Audit, AuditOptions};
use crate::config::Config;
use crate::error::{Error, Result};

const FILES: [(&str, &str); 4] = [
    (
        "onceonly.toml",
        include_str!("../../fixtures/demo/onceonly.toml"),
    ),
    (
        "attempts.csv",
        include_str!("../../fixtures/demo/attempts.csv"),
    ),
    (
        "journal.csv",
        include_str!("../../fixtures/demo/journal.csv"),
    ),
    (
        "provider.csv",
        include_str!("../../fixtures/demo/provider.csv"),
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
