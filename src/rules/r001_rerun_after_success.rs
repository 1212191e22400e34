use polars::prelude::*;

use crate::cells::{ints, texts};
use crate::error::{EngineContext, Result};
use crate::prepare::{PIPELINE_INTERVAL, Prepared};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};
use crate::timestamp;

use super::groups::{RowGroups, over_interval};
use super::rows::ObjectRows;

declare_rule! {
    /// ## What it detects
    /// An interval whose operation had already succeeded was cleared or re-triggered, and the
    /// re-run produced a new live provider object beside the one that existed.
    ///
    /// ## Why it matters
    /// A clear (`airflow tasks clear`, the UI, the REST API) or a new run for the same interval
    /// re-executes a task that already did its work. If the provider no longer knows the key, or
    /// the key changed, the interval is exported twice.
    ///
    /// ## Example
    /// `orders_export` for 2026-11-01 succeeded on 2026-11-02 creating `exp_1`; on 2026-11-20
    /// someone cleared the run (clear_number 1), the provider had pruned the key, and the
    /// re-run created `exp_7`.
    ///
    /// ## Repair
    /// Void the re-run's object and keep the original (`void-duplicate`, needs approval). Before
    /// clearing old intervals, run `onceonly ttl-risk`.
    pub struct RerunAfterSuccess => "R001", "rerun-after-success", Error;
}
impl_rule!(
    RerunAfterSuccess,
    check,
    crate::rules::repair::void_duplicates
);

fn check(_: &RerunAfterSuccess, prepared: &Prepared) -> Result<Vec<Finding>> {
    let group: Vec<Expr> = PIPELINE_INTERVAL.iter().map(|name| col(*name)).collect();
    let first_success = prepared
        .tries()
        .filter(
            col("state")
                .eq(lit("success"))
                .and(col("end_date").is_not_null()),
        )
        .group_by(group.clone())
        .agg([col("end_date").min().alias("succeeded_at")]);
    let flagged = prepared
        .live_in_intervals()
        .join(
            first_success.clone(),
            group.clone(),
            group.clone(),
            JoinArgs::new(JoinType::Inner),
        )
        .filter(
            over_interval(col("created_at").gt(col("succeeded_at")).any(true))?.and(
                over_interval(col("created_at").lt_eq(col("succeeded_at")).any(true))?,
            ),
        )
        .collect()
        .engine("R001")?;
    // The reruns are described only for the intervals flagged, not for every interval with a
    // success: joining run ids into text is the costly part.
    let flagged_intervals = flagged
        .clone()
        .lazy()
        .select(group.clone())
        .unique(None, UniqueKeepStrategy::Any);
    let reruns = prepared
        .tries()
        .join(
            flagged_intervals,
            group.clone(),
            group.clone(),
            JoinArgs::new(JoinType::Semi),
        )
        .join(
            first_success,
            group.clone(),
            group.clone(),
            JoinArgs::new(JoinType::Inner),
        )
        .filter(col("start_date").gt(col("succeeded_at")))
        .group_by(group.clone())
        .agg([
            col("run_id")
                .unique()
                .sort(Default::default())
                .str()
                .join(", ", true)
                .alias("rerun_runs"),
            col("clear_number").max().alias("clears"),
        ]);
    let flagged = RowGroups::per_interval(
        flagged
            .lazy()
            .join(reruns, group.clone(), group, JoinArgs::new(JoinType::Left)),
        lit(true),
        &["created_at", "external_id"],
        "R001",
    )?;
    let rows = ObjectRows::read(&flagged.frame)?;
    let succeeded = ints(&flagged.frame, "succeeded_at")?;
    let runs = texts(&flagged.frame, "rerun_runs")?;
    let clears = ints(&flagged.frame, "clears")?;
    flagged.findings(|first, members| {
            let (before, after): (Vec<usize>, Vec<usize>) = members
                .iter()
                .partition(|row| rows.created_at[**row] <= succeeded[**row]);
            let mut evidence = rows.evidence(members);
            evidence.run_ids = runs[first]
                .iter()
                .flat_map(|runs| runs.split(", ").map(str::to_string))
                .collect();
            evidence.times.push(format!(
                "succeeded={}",
                timestamp::format_opt(succeeded[first])
            ));
            Ok(RerunAfterSuccess::finding(FindingDraft {
                dag_id: rows.dag_id[first].clone(),
                operation: rows.operation[first].clone(),
                interval: rows.interval[first].clone(),
                op_key: rows.key[after[0]].clone(),
                message: format!(
                    "succeeded at {} with {}; a re-run ({}, clear_number {}) created {}",
                    timestamp::format_opt(succeeded[first]),
                    rows.listing(&before),
                    runs[first].as_deref().unwrap_or("run unknown"),
                    clears[first]
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "unknown".into()),
                    rows.listing(&after)
                ),
                evidence,
            }))
        })
}
