//! Flags as the user types them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::commands::mock_provider::{Fault, MockPagination};
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
    /// Show no progress on stderr (it is shown only when stderr is a terminal).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Colour severities in terminal text: auto (when stdout is a terminal and NO_COLOR is not
    /// set), always or never.
    #[arg(long, value_enum, default_value = "auto", global = true)]
    pub color: crate::render::style::ColorChoice,
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
    /// Incident forensics: every try, journal record and provider object of one interval.
    Trace(TraceArgs),
    /// Before a backfill: which intervals would a re-run duplicate because keys expired?
    TtlRisk(TtlRiskArgs),
    /// Check each configured source: reachable, authorised, schema, columns, one page.
    Doctor {
        #[arg(long, short, env = "ONCEONLY_CONFIG")]
        config: PathBuf,
    },
    /// Audit the bundled scenario: no set-up needed.
    Demo {
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Serve a provider state file as a paginated listing API on loopback, with faults.
    MockProvider(MockProviderArgs),
    /// Write a synthetic scenario of any size with chosen fault rates, and its ground truth.
    Synth(SynthArgs),
    /// Split the audit's inputs into N snapshots that audit apart (`audit --partition-out`).
    Split(SplitArgs),
    /// Merge the partitions' results into the whole audit's report, verdicts and plan.
    Merge(Box<MergeArgs>),
    /// Work with a repair plan: `onceonly plan check PLAN` says whether it still stands.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Print a shell completion script (e.g. `onceonly completions bash > /etc/bash_completion.d/onceonly`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): onceonly(1), or onceonly-COMMAND(1) for one subcommand.
    Man {
        /// A subcommand, e.g. `audit`.
        command: Option<String>,
    },
}

#[derive(Debug, clap::Args)]
pub struct SynthArgs {
    /// How many intervals (all DAGs together).
    #[arg(long, default_value_t = 100_000)]
    pub intervals: usize,
    /// How many DAGs, one operation each (all on one hourly schedule).
    #[arg(long, default_value_t = 20)]
    pub dags: usize,
    /// Bind every DAG to one `[[operation]]` whose dag_id is the glob `*`, instead of one
    /// operation per DAG (the same scenario and truth: each DAG is its own pipeline).
    #[arg(long)]
    pub glob_operation: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The folder to write (snapshot, airflow.db, journal.db, provider_state.json, configs,
    /// truth.json).
    #[arg(long)]
    pub out: PathBuf,
    /// NAME=RATE, the share of intervals given a case: L001, D001, D002, L002, L003, M001,
    /// M002, K002, C001, reconciled, retry, voided, check-then-create (e.g. --rates L001=0.01,D001=0.02).
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<String>,
    /// Write only the snapshot, onceonly.toml and truth.json, not airflow.db, journal.db,
    /// provider_state.json and onceonly-listing.toml (for audits `--from-snapshot` of large
    /// scenarios).
    #[arg(long)]
    pub snapshot_only: bool,
    /// Write the snapshot's rows in a random order (seeded by --seed), not in the order they
    /// were generated (by DAG, interval and try); the databases keep the generated order.
    #[arg(long)]
    pub shuffle_rows: bool,
}

#[derive(Debug, clap::Args)]
pub struct MockProviderArgs {
    /// The provider state file (`{"objects": [{"id", "created", ...}]}`).
    #[arg(long)]
    pub state: PathBuf,
    /// The port to listen on (0: a free one; the URL is printed on stdout).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// The address to listen on; only loopback addresses are accepted.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    #[arg(long, value_enum, default_value = "cursor")]
    pub pagination: MockPagination,
    /// Objects per page when the request gives no `limit`.
    #[arg(long, default_value_t = 3)]
    pub page_size: usize,
    /// Milliseconds added before every answer.
    #[arg(long, default_value_t = 0)]
    pub latency: u64,
    /// A fault: KIND@N (the Nth listing request) or KIND%K (every Kth), optionally =VALUE;
    /// e.g. rate-limit@2=1, server-error%3, slow@4=1500, drop@2, truncated@2, invalid-json@2,
    /// repeat-cursor@2, insert@2 (after page 2, a new newest object), delete@2 (after page 2,
    /// its first object is gone), missing-field@2, mistyped-field@2, huge@1=80 (MiB),
    /// gzip-bomb@1=100 (MiB unpacked), clamp=2 (every page at most 2 objects), lose-next@2.
    /// Repeatable.
    #[arg(long = "fault", value_name = "FAULT")]
    pub faults: Vec<Fault>,
    /// Serve page and offset listings newest first (Stripe's always is).
    #[arg(long)]
    pub newest_first: bool,
    /// Append `METHOD TARGET` of every request to this file.
    #[arg(long, value_name = "FILE")]
    pub request_log: Option<PathBuf>,
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
    /// Audit runs whose data interval starts at or after this time (RFC 3339 or a date);
    /// combines with --since/--until.
    #[arg(long)]
    pub interval_from: Option<String>,
    /// ... and before this time.
    #[arg(long)]
    pub interval_to: Option<String>,
    /// Margin around the audited tries when reading the provider (e.g. 1h, 30m; default: the
    /// listing's `slack`, else 1h).
    #[arg(long)]
    pub slack: Option<String>,
    /// Run only these rules (codes or names), e.g. `--rule D001 --rule lost-response`.
    #[arg(long = "rule")]
    pub rules: Vec<String>,
    /// Keep what this run read in DIR: a Parquet file per table and manifest.json.
    #[arg(long, value_name = "DIR")]
    pub save_snapshot: Option<PathBuf>,
    /// Audit a snapshot saved earlier instead of reading the sources (offline).
    #[arg(long, value_name = "DIR")]
    pub from_snapshot: Option<PathBuf>,
    /// Where the report and its companions go, and when the exit code is 1.
    #[command(flatten)]
    pub report: ReportArgs,
    /// Accept an audit whose scope holds no try of an operation task (exit 0) instead of
    /// refusing it (exit 2). A --dag or [[operation]] that matches nothing is refused still.
    #[arg(long)]
    pub allow_empty: bool,
    /// With --from-snapshot of a part made by `onceonly split`: also write what `onceonly
    /// merge` needs into DIR.
    #[arg(long, value_name = "DIR", requires = "from_snapshot")]
    pub partition_out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Re-read the sources and say, for each action of PLAN, whether it still holds (exit 1
    /// when any does not).
    Check(PlanCheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct PlanCheckArgs {
    /// A plan written by `audit --plan FILE.json`.
    #[arg(value_name = "PLAN")]
    pub plan: PathBuf,
    #[arg(long, short, env = "ONCEONLY_CONFIG")]
    pub config: PathBuf,
    /// `table` (text) or `json`.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// For a plan that records no scope (written before onceonly recorded it): only this DAG.
    #[arg(long)]
    pub dag: Option<String>,
    /// For a plan that records no scope: runs with a try active at or after this time.
    #[arg(long)]
    pub since: Option<String>,
    /// ... and before this time.
    #[arg(long)]
    pub until: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct SplitArgs {
    #[arg(long, short, env = "ONCEONLY_CONFIG")]
    pub config: PathBuf,
    /// Audit runs with a try active at or after this time (RFC 3339 or a date).
    #[arg(long)]
    pub since: Option<String>,
    /// ... and before this time.
    #[arg(long)]
    pub until: Option<String>,
    /// Margin around the audited tries when reading the provider (e.g. 1h).
    #[arg(long)]
    pub slack: Option<String>,
    /// Split a snapshot saved earlier instead of reading the sources.
    #[arg(long, value_name = "DIR")]
    pub from_snapshot: Option<PathBuf>,
    /// How many partitions.
    #[arg(long)]
    pub partitions: usize,
    /// The folder to write DIR/part-0 .. DIR/part-(N-1) into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The config of the audit (for the SQL script's journal dialect and table).
    #[arg(long, short, env = "ONCEONLY_CONFIG")]
    pub config: PathBuf,
    /// Every partition's result folder (`audit --partition-out DIR`).
    #[arg(required = true, value_name = "DIR")]
    pub parts: Vec<PathBuf>,
    /// Where the report and its companions go, and when the exit code is 1.
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["interval", "run_id", "key"])))]
pub struct TraceArgs {
    #[arg(long, short, env = "ONCEONLY_CONFIG")]
    pub config: PathBuf,
    /// The DAG.
    #[arg(long)]
    pub dag: String,
    /// A date or time in the interval (its start, e.g. 2026-11-26).
    #[arg(long)]
    pub interval: Option<String>,
    /// A run id.
    #[arg(long)]
    pub run_id: Option<String>,
    /// An operation key.
    #[arg(long)]
    pub key: Option<String>,
    /// `table` (default) or `json`.
    #[arg(long, value_enum, default_value = "table")]
    pub format: TraceFormat,
    /// Also write a self-contained HTML timeline here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("range").required(true).args(["from", "backfill_id"])))]
pub struct TtlRiskArgs {
    #[arg(long, short, env = "ONCEONLY_CONFIG")]
    pub config: PathBuf,
    /// The DAG, or a glob such as `orders_*` (each DAG it matches judged as its own; with
    /// --backfill-id, the backfill's DAG).
    #[arg(long, required_unless_present = "backfill_id")]
    pub dag: Option<String>,
    /// The first logical date of the range (included).
    #[arg(long, requires = "to")]
    pub from: Option<String>,
    /// The last logical date of the range (included).
    #[arg(long)]
    pub to: Option<String>,
    /// Read the range and reprocess_behavior of a planned Airflow 3 backfill.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    pub backfill_id: Option<i64>,
    /// The provider's key TTL: a duration (24h) or a preset (stripe, paypal, adyen,
    /// aws-step-functions); overrides the config.
    #[arg(long)]
    pub ttl: Option<String>,
    /// When the re-run would happen (default: now); only the tries started and the objects
    /// created before it count.
    #[arg(long)]
    pub at: Option<String>,
    /// Accept a DAG without a try of an operation task, or a range without an interval
    /// (exit 0), instead of refusing it (exit 2).
    #[arg(long)]
    pub allow_empty: bool,
    /// `table` (default) or `json`.
    #[arg(long, value_enum, default_value = "table")]
    pub format: TraceFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceFormat {
    Table,
    Json,
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

/// The flags `audit` and `merge` share: the report's format and file, the files written beside
/// it, and what makes the exit code 1.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the report here instead of stdout (atomically).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page here (atomically), beside
    /// `--format`.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 1 when a finding is at or above this severity.
    #[arg(long, value_enum, default_value = "warning")]
    pub fail_on: FailOn,
    /// Write every operation try's verdict to this file (.csv, else NDJSON).
    #[arg(long)]
    pub verdicts: Option<PathBuf>,
    /// Write the repair plan: JSON, or markdown for a .md name, or text for a .txt name.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Write the journal-side repairs as one SQL script in the journal's dialect.
    #[arg(long, value_name = "FILE")]
    pub sql: Option<PathBuf>,
    /// An earlier JSON or NDJSON report: mark findings new, persisting or resolved.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit 1 only for new findings at or above --fail-on.
    #[arg(long, requires = "baseline")]
    pub fail_on_new: bool,
    /// Write Prometheus metrics (text format, atomically) for node_exporter's textfile collector.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
}
