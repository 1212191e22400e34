use polars::prelude::*;

use crate::cells::{ints, texts};
use crate::error::{EngineContext, Result};
use crate::prepare::{Prepared, TASK_INSTANCE, model};
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
}
impl_rule!(OverlappingTries, check, repair);

fn check(_: &OverlappingTries, prepared: &Prepared) -> Result<Vec<Finding>> {
    // A journal row's `try_row` is the row of `tries` it belongs to (prepare matched them on
    // `TRY`).
    let on = [col(model::journal::TRY_ROW)];
    let last_write = prepared
        .journal()
        .filter(col(model::journal::TRY_ROW).is_not_null())
        .group_by(on.clone())
        .agg([col("recorded_at").max().alias("last_write")]);
    let spans = prepared
        .tries()
        .with_row_index(model::journal::TRY_ROW, None)
        .filter(col("start_date").is_not_null())
        .join(last_write, on.clone(), on, JoinArgs::new(JoinType::Left))
        .select([
            col("dag_id"),
            col("task_id"),
            col("map_index"),
            col("run_id"),
            col("try_number"),
            col("operation"),
            col("interval"),
            col("hostname"),
            col("pid"),
            col("start_date"),
            col("end_date"),
            // An unfinished try (no end date) is still running: open-ended.
            when(col("end_date").is_null())
                .then(lit(i64::MAX).cast(crate::model::utc()))
                .otherwise(
                    polars::lazy::dsl::max_horizontal([col("end_date"), col("last_write")])
                        .engine("C001")?,
                )
                .alias("busy_until"),
        ]);
    let ti: Vec<Expr> = TASK_INSTANCE.iter().map(|name| col(*name)).collect();
    let overlaps = spans
        .clone()
        .join(
            spans,
            ti.clone(),
            ti,
            JoinArgs::new(JoinType::Inner).with_suffix(Some("_later".into())),
        )
        .filter(
            col("try_number")
                .lt(col("try_number_later"))
                .and(col("start_date_later").lt(col("busy_until")))
                .and(col("start_date").lt(col("busy_until_later"))),
        )
        .sort(
            [
                "dag_id",
                "task_id",
                "map_index",
                "run_id",
                "try_number",
                "try_number_later",
            ],
            Default::default(),
        )
        .collect()
        .engine("C001")?;

    let text = |name: &str| texts(&overlaps, name);
    let (dag, run, operation, interval) = (
        text("dag_id")?,
        text("run_id")?,
        text("operation")?,
        text("interval")?,
    );
    let (host, host_later) = (text("hostname")?, text("hostname_later")?);
    let (map, tries, later) = (
        ints(&overlaps, "map_index")?,
        ints(&overlaps, "try_number")?,
        ints(&overlaps, "try_number_later")?,
    );
    let (busy, start_later, start, end) = (
        ints(&overlaps, "busy_until")?,
        ints(&overlaps, "start_date_later")?,
        ints(&overlaps, "start_date")?,
        ints(&overlaps, "end_date")?,
    );
    (0..overlaps.height())
        .map(|row| {
            let run_id = run[row].clone().unwrap_or_default();
            let (first, second) = (
                try_ref(&run_id, tries[row], map[row]),
                try_ref(&run_id, later[row], map[row]),
            );
            let until = match busy[row] {
                Some(i64::MAX) | None => "still running".to_string(),
                Some(at) => format!("busy until {}", timestamp::format(at)),
            };
            Ok(OverlappingTries::finding(FindingDraft {
                dag_id: dag[row].clone(),
                operation: operation[row].clone(),
                interval: interval[row].clone(),
                op_key: None,
                message: format!(
                    "{first} on {} ({until}) overlapped {second} on {}, started {}",
                    host[row].as_deref().unwrap_or("?"),
                    host_later[row].as_deref().unwrap_or("?"),
                    timestamp::format_opt(start_later[row])
                ),
                evidence: Evidence {
                    run_ids: vec![run_id.clone()],
                    tries: vec![first.clone(), second.clone()],
                    times: vec![
                        format!(
                            "{first} start={} end={}",
                            timestamp::format_opt(start[row]),
                            timestamp::format_opt(end[row])
                        ),
                        format!("{second} start={}", timestamp::format_opt(start_later[row])),
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
