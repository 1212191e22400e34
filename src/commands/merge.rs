//! `onceonly merge`: the report, verdicts and plan of a partitioned audit, from every
//! partition's result (`audit --partition-out`), as the one audit would have given them.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::partition::merge::{self, Merged};

/// Merges the partitions' results; with `plan`, the repair plan too; with `baseline`, marks
/// findings against an earlier report as `audit --baseline` does.
pub fn run(parts: &[PathBuf], plan: bool, baseline: Option<&Path>) -> Result<Merged> {
    let mut merged = merge::merge(parts, plan)?;
    if let Some(path) = baseline {
        let earlier = crate::commands::audit::earlier_findings(path)?;
        merged.report.compare(&path.display().to_string(), earlier);
    }
    Ok(merged)
}
