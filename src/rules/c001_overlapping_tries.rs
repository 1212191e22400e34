use polars::prelude::*;

use crate::cells::{IntArray, int_column, one_array, one_chunk, text_column};
use crate::error::{EngineContext, Result};
use crate::prepare::{Prepared, model};
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Evidence, Finding, FindingDraft, declare_rule, impl_rule, try_ref};
use crate::timestamp;

declare_rule! {
    /// ## What it detects
    /// Two tries of one task instance that overlapped in time. A try counts as running from its
    /// start until the later of its end date and its last journal record, so a zombie that kept
    /// writing after Airflow marked it failed is caught too.
    ///
    /// ## Why it matters
    /// Overlapping tries race: both can check "does the export exist?", both see no, and both
    /// create it. This happens when a worker loses its heartbeat, the scheduler marks the try
    /// failed and starts the next one while the first process is still running.
    ///
    /// ## Example
    /// Try 1 started 10:00 on worker-a and was marked failed at 10:05 after a lost heartbeat,
    /// but wrote its committed row at 10:07; try 2 started on worker-b at 10:06.
    ///
    /// ## Repair
    /// Investigate both tries' effects (`investigate`, manual); make the operation atomic with
    /// the journal's unique constraint on the key so the second writer fails instead of
    /// creating.
    pub struct OverlappingTries => "C001", "overlapping-tries", Warning;
    reads Attempts.hostname;
}
impl_rule!(OverlappingTries, check, repair);

fn check(_: &OverlappingTries, prepared: &Prepared) -> Result<Vec<Finding>> {
    let tries = &prepared.tries;
    // The columns' arrays: a run's tries are compared pairwise, so a pair's cells are read for
    // each of a run's pairs.
    let int = |name: &str| -> Result<IntArray> { Ok(one_array(&int_column(tries, name)?)) };
    let (numbers, maps, starts, ends) = (
        int("try_number")?,
        int("map_index")?,
        int("start_date")?,
        int("end_date")?,
    );
    let task_ids = one_array(&text_column(tries, "task_id")?);
    // Each try is busy from its start until the later of its end and its last journal record;
    // an unfinished try (no end date) is still running: open-ended.
    let mut last_write: Vec<Option<i64>> = vec![None; tries.height()];
    let recorded = int_column(&prepared.journal, "recorded_at")?;
    let tries_of_rows = prepared.journal_try_rows()?;
    let recorded = crate::cells::each_number(&recorded);
    for (row, at) in crate::cells::each_number(&tries_of_rows).zip(recorded) {
        if let (Some(row), Some(at)) = (row, at) {
            let last = &mut last_write[row as usize];
            *last = Some(last.map_or(at, |last| last.max(at)));
        }
    }
    let busy_until = |row: usize| match ends.get(row) {
        None => i64::MAX,
        Some(end) => last_write[row].map_or(end, |write| write.max(end)),
    };
    // Two tries of one task instance (one run, the same task and map index), the earlier by
    // try number, each starting before the other stopped being busy. A run's tries are few, so
    // each run's are compared pairwise.
    let mut overlaps: Vec<(usize, usize)> = Vec::new();
    let by_run = prepared.tries_by_run()?;
    for run in 0..prepared.codes.runs as u32 {
        let rows = by_run.of(run);
        for (&first, &later) in rows
            .iter()
            .flat_map(|first| rows.iter().map(move |later| (first, later)))
        {
            let (first, later) = (first as usize, later as usize);
            let earlier = numbers
                .get(first)
                .zip(numbers.get(later))
                .is_some_and(|(a, b)| a < b);
            if !earlier {
                continue;
            }
            let same_instance = maps.get(first).is_some_and(|m| maps.get(later) == Some(m))
                && task_ids.get(first).is_some_and(|t| task_ids.get(later) == Some(t));
            let overlapped = starts.get(first).zip(starts.get(later)).is_some_and(
                |(start, start_later)| {
                    start_later < busy_until(first) && start < busy_until(later)
                },
            );
            if same_instance && overlapped {
                overlaps.push((first, later));
            }
        }
    }
    let dags = one_chunk(text_column(tries, "dag_id")?);
    let runs = one_chunk(text_column(tries, "run_id")?);
    overlaps.sort_by_key(|&(first, later)| {
        (
            dags.get(first),
            task_ids.get(first),
            maps.get(first),
            runs.get(first),
            numbers.get(first),
            numbers.get(later),
        )
    });

    // Cells are read for the overlapping tries alone.
    let text = |name: &str| -> Result<StringChunked> { Ok(one_chunk(text_column(tries, name)?)) };
    let host = text("hostname")?;
    let pipelines = one_chunk(crate::cells::code_column(
        tries,
        model::interval::PIPELINE,
    )?);
    let operation = |row: usize| {
        let code = pipelines.get(row)?;
        Some(prepared.operations.name(code).to_string())
    };
    let cell = |column: &StringChunked, row: usize| column.get(row).map(str::to_string);
    let firsts: Vec<IdxSize> = overlaps.iter().map(|&(row, _)| row as IdxSize).collect();
    let spans = tries
        .select([model::interval::START, model::interval::END])
        .and_then(|spans| spans.take(&IdxCa::from_vec("row".into(), firsts)))
        .engine("C001")?;
    let intervals = crate::prepare::interval_texts(&spans)?;
    overlaps
        .into_iter()
        .zip(intervals)
        .map(|((row, later), interval)| {
            let run_id = runs.get(row).unwrap_or_default().to_string();
            let (first, second) = (
                try_ref(&run_id, numbers.get(row), maps.get(row)),
                try_ref(&run_id, numbers.get(later), maps.get(row)),
            );
            let until = match busy_until(row) {
                i64::MAX => "still running".to_string(),
                at => format!("busy until {}", timestamp::format(at)),
            };
            Ok(OverlappingTries::finding(FindingDraft {
                dag_id: cell(&dags, row),
                operation: operation(row),
                interval,
                op_key: None,
                message: format!(
                    "{first} on {} ({until}) overlapped {second} on {}, started {}",
                    host.get(row).unwrap_or("?"),
                    host.get(later).unwrap_or("?"),
                    timestamp::format_opt(starts.get(later))
                ),
                evidence: Evidence {
                    run_ids: vec![run_id.clone()],
                    tries: vec![first.clone(), second.clone()],
                    times: vec![
                        format!(
                            "{first} start={} end={}",
                            timestamp::format_opt(starts.get(row)),
                            timestamp::format_opt(ends.get(row))
                        ),
                        format!("{second} start={}", timestamp::format_opt(starts.get(later))),
                    ],
                    ..Evidence::default()
                },
            }))
        })
        .collect()
}

/// `investigate` (manual): check both tries' effects; make the commit atomic with the journal's one-commit-per-key constraint.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    repair::investigate(
        finding,
        "overlapping-tries",
        "check both tries' effects; make the commit atomic with the journal's one-commit-per-key constraint",
    )
}
