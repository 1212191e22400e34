//! Stage 6, partition out (`audit --from-snapshot DIR/part-K --partition-out OUT`): what the
//! merge of a partitioned audit needs of one part's audit, written after the plan stage while
//! the joined frames are still there (`crate::partition::merge::write`).

use std::path::PathBuf;

use polars::prelude::DataFrame;

use crate::error::Result;
use crate::partition::PartManifest;
use crate::prepare::Prepared;
use crate::report::{Noticed, Report};

/// Where a part's result goes, and the part (its `partition.json`, from `onceonly split`).
#[derive(Debug, Clone)]
pub struct PartitionOut {
    pub dir: PathBuf,
    pub part: PartManifest,
}

/// Writes the part's result: its report, verdicts, the rows its findings name and what it
/// noticed beyond the sources' warnings.
pub fn write(
    out: &PartitionOut,
    rules: &[String],
    report: &Report,
    verdicts: &DataFrame,
    prepared: &Prepared,
    noticed: &Noticed,
) -> Result<()> {
    let started = std::time::Instant::now();
    crate::partition::merge::write(
        &out.dir, &out.part, rules, report, verdicts, prepared, noticed,
    )?;
    crate::timing::phase("partition out", started);
    Ok(())
}
