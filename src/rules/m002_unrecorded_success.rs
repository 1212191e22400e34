use polars::prelude::*;

use crate::cells::{code_column, one_array, text_column};
use crate::error::{EngineContext, Result};
use crate::model::{Phase, Table};
use crate::prepare::{Prepared, TRY, model};
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::rows::TryRows;

declare_rule! {
    /// ## What it detects
    /// A successful try of an operation task that left no journal row at all, in an interval
    /// that no try committed. A retry that reads the journal, finds the key committed and
    /// skips the provider (check-then-create) also succeeds without a row: that is the
    /// protection working, so an interval with a committed or reconciled row from any try (or
    /// a try whose expected key the journal committed, in any run) is not reported.
    ///
    /// ## Why it matters
    /// Either the task did not perform its operation (a code path skipped it) or it performed it
    /// without journalling, so its retries and re-runs are unprotected and no audit can tell
    /// whether the interval's export happened once.
    ///
    /// ## Example
    /// `orders_export` succeeded for 2026-11-01 on try 1; the journal has no row for that try,
    /// and none of any other try of 2026-11-01.
    /// With a key template the finding also says whether the provider has an object under the
    /// expected key `orders:2026-11-01`.
    ///
    /// ## Repair
    /// Investigate the task's code path for that run (`investigate`, manual); if the provider
    /// has the object, adopt it into the journal.
    pub struct UnrecordedSuccess => "M002", "unrecorded-success", Warning;
    from_absence = true;
}
impl_rule!(UnrecordedSuccess, check, repair);

fn check(_: &UnrecordedSuccess, prepared: &Prepared) -> Result<Vec<Finding>> {
    let tries = &prepared.tries;
    // A journal row's `try_row` is the row of `tries` it belongs to (prepare matched them on
    // `TRY`): a try with no journal row is a row no journal row points at.
    let mut written = vec![false; tries.height()];
    for row in prepared.journal_try_rows()?.iter().flatten() {
        written[row as usize] = true;
    }
    // The pipeline intervals a try of committed (check-then-create retries skip them).
    let done = (prepared.journal_phases()?.iter().enumerate())
        .filter(|(_, phase)| phase.is_some_and(Phase::done))
        .map(|(row, _)| row as IdxSize);
    let mut committed = vec![false; prepared.intervals.count()];
    for interval in prepared.intervals_of(Table::Journal, done)?.into_iter().flatten() {
        committed[interval as usize] = true;
    }
    // A try whose expected key the journal committed in a run outside the audit (a manual
    // re-trigger of the interval) found it committed too.
    let states = one_array(&text_column(tries, "state")?);
    let keys = one_array(&prepared.try_key_codes()?);
    let silent: Vec<IdxSize> = (0..tries.height())
        .filter(|&row| {
            states.get(row) == Some("success")
                && !written[row]
                && !prepared
                    .interval_of_try(row)
                    .is_some_and(|interval| committed[interval as usize])
                && !keys.get(row).is_some_and(|key| prepared.key_committed(key))
        })
        .map(|row| row as IdxSize)
        .collect();
    let silent = tries
        .take(&IdxCa::from_vec("row".into(), silent))
        .engine("M002")?
        .sort(TRY.to_vec(), Default::default())
        .engine("M002")?;
    // The provider's object under each silent try's expected key (the least id, if several).
    let by_key = prepared.objects_by_key()?;
    let ids = one_array(&text_column(&prepared.objects, "external_id")?);
    let objects: Vec<Option<String>> = code_column(&silent, model::KEY_CODE)?
        .iter()
        .map(|key| {
            let rows = by_key.all(key?);
            rows.iter()
                .filter_map(|&row| ids.get(row as usize))
                .min()
                .map(str::to_string)
        })
        .collect();
    let tries = TryRows::read(&silent, &prepared.operations)?;
    (0..silent.height())
        .map(|row| {
            let expected = tries.expected_key[row].clone();
            let provider = match (&expected, &objects[row]) {
                (Some(key), Some(id)) => {
                    format!("; the provider has {id} under the expected key {key}")
                }
                (Some(key), None) => {
                    format!("; the provider has nothing under the expected key {key}")
                }
                (None, _) => String::new(),
            };
            let mut evidence = tries.evidence(&[row]);
            evidence.external_ids.extend(objects[row].clone());
            Ok(UnrecordedSuccess::finding(FindingDraft {
                dag_id: tries.dag_id[row].clone(),
                operation: tries.operation[row].clone(),
                interval: tries.interval[row].clone(),
                op_key: expected,
                message: format!(
                    "{} succeeded but wrote no journal row{provider}",
                    tries.try_ref(row)
                ),
                evidence,
            }))
        })
        .collect()
}

/// `investigate` (manual): check the task's code path for this run: it succeeded without journalling its operation.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    repair::investigate(
        finding,
        "unrecorded-success",
        "check the task's code path for this run: it succeeded without journalling its operation",
    )
}
