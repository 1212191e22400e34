//! `onceonly merge`: the report, verdicts and plan of a partitioned audit, from every
//! partition's result (`audit --partition-out`), as the one audit would have given them,
//! written as `audit` writes its own.

use std::path::{Path, PathBuf};

use crate::commands::audit::{self, Outputs};
use crate::config::Config;
use crate::engine;
use crate::error::Result;
use crate::partition::merge;
use crate::report::Report;

/// Merges the partitions' results and writes them where `outputs` says; with `baseline`,
/// marks findings against an earlier report as `audit --baseline` does. The report, to tell
/// the exit code.
pub fn run(
    config: &Config,
    parts: &[PathBuf],
    baseline: Option<&Path>,
    outputs: &Outputs,
) -> Result<Report> {
    let started = std::time::Instant::now();
    let mut inputs: Vec<(String, PathBuf)> = parts
        .iter()
        .flat_map(|part| audit::folder_inputs("a part's", part))
        .collect();
    if let Some(path) = baseline {
        inputs.push(("--baseline".to_string(), path.to_path_buf()));
    }
    audit::check(config, outputs, inputs)?;
    let wants_plan = outputs.plan.is_some() || outputs.sql.is_some();
    let merged = merge::merge(parts, wants_plan)?;
    let mut report = merged.report;
    let plan = match &merged.plan_rows {
        Some((objects, journal)) => Some(crate::plan::Plan {
            scope: Some(merged.scope.clone()),
            ..engine::plan_of(
                &report.findings,
                objects,
                journal,
                merged.inputs_fingerprint,
            )?
        }),
        None => None,
    };
    if let Some(path) = baseline {
        let earlier = engine::earlier_findings(path)?;
        report.compare(&path.display().to_string(), earlier, &merged.scope.rules);
    }
    audit::write(
        config,
        outputs,
        &report,
        Some(merged.verdicts),
        plan.as_ref(),
        started,
    )?;
    Ok(report)
}
