//! Flags as the user types them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::render::Format;
use crate::rules::Severity;

#[derive(Debug, Parser)]
#[command(
    name = "onceonly",
    version,
    about = "Did each Airflow interval's side effect happen exactly once, and do our records know about it?"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Audit the tries that ran in a window: duplicates, lost responses, unsafe keys.
    Audit(Box<AuditArgs>),
    /// List the rules, or explain one (`onceonly rule L001`).
    Rule {
        /// A rule code or name.
        code: Option<String>,
    },
    /// Audit the bundled scenario: no set-up needed.
    Demo {
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The onceonly.toml that names the sources and operations.
    #[arg(long, short, env = "ONCEONLY_CONFIG")]
    pub config: PathBuf,
    /// Only this DAG (a dag_id or a glob such as `orders_*`).
    #[arg(long)]
    pub dag: Option<String>,
    /// Audit runs with a try active at or after this time (RFC 3339 or a date).
    #[arg(long)]
    pub since: Option<String>,
    /// ... and before this time.
    #[arg(long)]
    pub until: Option<String>,
    /// Margin around the audited tries when reading the provider (e.g. 1h, 30m).
    #[arg(long, default_value = "1h")]
    pub slack: String,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the report here instead of stdout (atomically).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Exit 1 when a finding is at or above this severity.
    #[arg(long, value_enum, default_value = "warning")]
    pub fail_on: FailOn,
    /// Write every operation try's verdict to this file (.csv, else NDJSON).
    #[arg(long)]
    pub verdicts: Option<PathBuf>,
    /// Run only these rules (codes), e.g. `--rule D001 --rule L001`.
    #[arg(long = "rule")]
    pub rules: Vec<String>,
    /// Keep what this run read in DIR: a Parquet file per table and manifest.json.
    #[arg(long, value_name = "DIR")]
    pub save_snapshot: Option<PathBuf>,
    /// Audit a snapshot saved earlier instead of reading the sources (offline).
    #[arg(long, value_name = "DIR")]
    pub from_snapshot: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Info,
    Never,
}

impl FailOn {
    pub fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Error => Some(Severity::Error),
            FailOn::Warning => Some(Severity::Warning),
            FailOn::Info => Some(Severity::Info),
            FailOn::Never => None,
        }
    }
}
