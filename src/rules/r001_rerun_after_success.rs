use polars::prelude::*;

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Table;
use crate::cells::{int_column, ints, one_array, text_column, texts};
use crate::error::{EngineContext, Result};
use crate::prepare::Prepared;
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};
use crate::timestamp;

use super::groups::RowGroups;
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
    reads Attempts.clear_number;
}
impl_rule!(
    RerunAfterSuccess,
    check,
    crate::rules::repair::void_duplicates
);

fn check(_: &RerunAfterSuccess, prepared: &Prepared) -> Result<Vec<Finding>> {
    let tries = &prepared.tries;
    let intervals = prepared.intervals.count();
    let int = |frame: &DataFrame, name: &str| -> Result<crate::cells::IntArray> {
        Ok(one_array(&int_column(frame, name)?))
    };
    let (starts, ends) = (int(tries, "start_date")?, int(tries, "end_date")?);
    let states = one_array(&text_column(tries, "state")?);
    // When each interval first succeeded: the earliest end of its successful tries.
    let mut succeeded: Vec<Option<i64>> = vec![None; intervals];
    for row in 0..tries.height() {
        if let (Some(interval), Some("success"), Some(end)) = (
            prepared.interval_of_try(row),
            states.get(row),
            ends.get(row),
        ) {
            let first = &mut succeeded[interval as usize];
            *first = Some(first.map_or(end, |first| first.min(end)));
        }
    }
    // The live objects of intervals that succeeded, and whether each interval has one created
    // after its success and one created before (or at) it.
    let objects = &prepared.objects;
    let created = int(objects, "created_at")?;
    let candidates: Vec<(usize, u32)> = prepared
        .live_in_interval_rows()?
        .into_iter()
        .filter(|&(_, interval)| succeeded[interval as usize].is_some())
        .collect();
    let (mut after, mut before) = (vec![false; intervals], vec![false; intervals]);
    for &(row, interval) in &candidates {
        let (Some(created), Some(success)) = (created.get(row), succeeded[interval as usize])
        else {
            continue;
        };
        if created > success {
            after[interval as usize] = true;
        } else {
            before[interval as usize] = true;
        }
    }
    let flagged = |interval: u32| after[interval as usize] && before[interval as usize];
    // The re-runs of each flagged interval: its tries started after its success.
    let run_ids = one_array(&text_column(tries, "run_id")?);
    let clear_numbers = int(tries, "clear_number")?;
    let mut reruns: BTreeMap<u32, (BTreeSet<&str>, Option<i64>)> = BTreeMap::new();
    for row in 0..tries.height() {
        let Some(interval) = prepared.interval_of_try(row).filter(|&i| flagged(i)) else {
            continue;
        };
        if let (Some(start), Some(success)) = (starts.get(row), succeeded[interval as usize])
            && start > success
        {
            let (runs, clears) = reruns.entry(interval).or_default();
            runs.extend(run_ids.get(row));
            *clears = (*clears).max(clear_numbers.get(row));
        }
    }
    // The flagged intervals' objects with their interval's success and re-runs, in interval
    // order.
    let members: Vec<(usize, u32)> = candidates
        .into_iter()
        .filter(|&(_, interval)| flagged(interval))
        .collect();
    let rerun = |interval: u32| reruns.get(&interval);
    let mut frame = objects
        .take(&IdxCa::from_vec(
            "row".into(),
            members.iter().map(|&(row, _)| row as IdxSize).collect(),
        ))
        .engine("R001")?;
    frame
        .hstack_mut(&[
            Column::new(
                "succeeded_at".into(),
                members
                    .iter()
                    .map(|&(_, interval)| succeeded[interval as usize])
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "rerun_runs".into(),
                members
                    .iter()
                    .map(|&(_, interval)| {
                        rerun(interval).map(|(runs, _)| runs.iter().copied().collect::<Vec<_>>().join(", "))
                    })
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "clears".into(),
                members
                    .iter()
                    .map(|&(_, interval)| rerun(interval).and_then(|(_, clears)| *clears))
                    .collect::<Vec<_>>(),
            ),
        ])
        .engine("R001")?;
    let flagged = RowGroups::per_interval(
        frame.lazy(),
        Table::Provider,
        lit(true),
        &["created_at", "external_id"],
        &prepared.operations,
        "R001",
    )?;
    let rows = ObjectRows::read(&flagged.frame, &prepared.operations)?;
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
