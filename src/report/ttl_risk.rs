//! What `ttl-risk` reports: per interval of a range, whether a re-run would export it again.

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct TtlRisk {
    /// `--dag` as given: a dag_id or a glob.
    pub dag_id: String,
    pub from: String,
    pub to: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backfill_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reprocess_behavior: Option<String>,
    /// Where the TTL came from (a preset and its public source, the config, or --ttl).
    pub ttl_source: Option<String>,
    pub intervals: Vec<IntervalRisk>,
    pub summary: BTreeMap<&'static str, usize>,
    /// Intervals of the range no run covers at all: none of the above, and a backfill would
    /// run them for the first time.
    pub without_run: WithoutRun,
    /// What the audit it was judged from warned about (its report's `coverage.warnings`), e.g.
    /// a DAG whose keys are formatted in UTC because its zone is unknown.
    pub warnings: Vec<String>,
}

/// The intervals of the range the DAG's schedule has but no run covers, inferred from the
/// spacing of the DAG's runs (Airflow's timetable is not read).
#[derive(Debug, Clone, Default, Serialize)]
pub struct WithoutRun {
    /// How many; None when the schedule cannot be inferred (fewer than two runs, or none with a
    /// regular spacing).
    pub count: Option<usize>,
    /// Where each starts, RFC 3339.
    pub starts: Vec<String>,
    /// How the schedule was inferred, or why it could not be.
    pub schedule: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct IntervalRisk {
    /// The DAG (of those `--dag` matches).
    pub dag_id: String,
    pub operation: String,
    pub map_index: i64,
    pub interval: String,
    /// Whether the backfill re-runs it (always, without a backfill).
    pub rerun: bool,
    /// The key a re-run would send.
    pub key: Option<String>,
    pub objects: Vec<String>,
    pub key_first_seen: Option<String>,
    pub key_expires: Option<String>,
    pub class: &'static str,
    pub reason: String,
    pub repair: String,
}
