//! `onceonly demo`: audits the bundled scenario, with no set-up at all.
//!
//! The scenario is a real one: the metadata database that apache-airflow 3.3.2's scheduler
//! wrote while running the fixture DAGs, the journal their tasks wrote, and the objects the
//! fake provider holds (fixtures/airflow/). Its files are compiled into the binary and written
//! to a temporary folder, so the demo works from any directory. The provider's objects are
//! served by the built-in mock on a free loopback port and listed over HTTP, page by page, as
//! a real provider's would be.

use std::path::PathBuf;

use crate::commands::mock_provider::{self, MockOptions, MockPagination};
use crate::config::Config;
use crate::engine::{self, Audit, AuditOptions};
use crate::error::{Error, Result};

const FILES: [(&str, &[u8]); 3] = [
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
];

const PROVIDER_STATE: &str =
    include_str!("../../fixtures/airflow/out/airflow-3.3.2/provider_state.json");

pub fn run() -> Result<Audit> {
    let dir = ScratchDir::new()?;
    for (name, text) in FILES {
        let path = dir.0.join(name);
        std::fs::write(&path, text).map_err(|err| Error::io(path.display().to_string(), err))?;
    }
    let state = dir.0.join("provider_state.json");
    std::fs::write(&state, PROVIDER_STATE)
        .map_err(|err| Error::io(state.display().to_string(), err))?;
    let objects = mock_provider::load_state(&state)?;
    let mock = mock_provider::start(MockOptions::new(objects, MockPagination::Cursor), 0)?;

    let path = dir.0.join("onceonly.toml");
    let config =
        std::fs::read_to_string(&path).map_err(|err| Error::io(path.display().to_string(), err))?;
    let (start, end) = match (config.find("[provider]"), config.find("[[operation]]")) {
        (Some(start), Some(end)) if start < end => (start, end),
        _ => {
            return Err(Error::config(
                path.display().to_string(),
                "the bundled config lost its [provider] table",
            ));
        }
    };
    let listing = format!(
        r#"[provider]
# The fake provider's objects, served by `onceonly mock-provider` on loopback.
url = "{}"
pagination = "cursor"
items = "data"
created_after_param = "created_after"
created_before_param = "created_before"
time_format = "epoch_seconds"
void_statuses = ["cancelled"]

[provider.fields]
external_id = "id"
op_key = "idempotency_key"
created_at = "created"
payload_hash = "payload_sha256"
interval_start = "metadata.interval_start"
interval_end = "metadata.interval_end"

"#,
        mock.url()
    );
    let config = format!("{}{listing}{}", &config[..start], &config[end..]);
    std::fs::write(&path, config).map_err(|err| Error::io(path.display().to_string(), err))?;
    let config = Config::load(&path)?;
    engine::run(&config, &AuditOptions::default())
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
