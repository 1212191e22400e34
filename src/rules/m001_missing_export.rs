use polars::prelude::*;

use crate::error::{EngineContext, Result};
use crate::prepare::Prepared;
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::rows::{JournalRows, pick};
use crate::cells::texts;

declare_rule! {
    /// ## What it detects
    /// A committed (or reconciled) journal row names an external id that the provider does not list as live:
    /// it is absent, or listed with a void status (cancelled, voided, deleted). Only rows
    /// recorded inside the window the provider listing covered are checked.
    ///
    /// ## Why it matters
    /// The journal says the interval's export exists; the provider says it does not. Downstream
    /// consumers that trust the journal will look for an object that is gone.
    ///
    /// ## Example
    /// Try 2 committed `exp_2`; someone cancelled `exp_2` at the provider while voiding
    /// duplicates, and kept nothing for the interval.
    ///
    /// ## Repair
    /// Investigate why the object is gone (`investigate`, manual); if the interval needs its
    /// export, re-export under a new key version with a new approval (`reexport-new-version`).
    pub struct MissingExport => "M001", "missing-export", Warning;
}
impl_rule!(MissingExport, check);

fn check(_: &MissingExport, prepared: &Prepared) -> Result<Vec<Finding>> {
    let live = prepared.objects().filter(col("live")).select([col("xid")]);
    let statuses = prepared
        .objects()
        .select([col("xid"), col("status").alias("provider_status")]);
    let missing = pick(
        &prepared.journal,
        |journal| {
            Ok(journal
                .filter(crate::model::is_done(col("phase")).and(col("external_id").is_not_null()))
                .filter(prepared.window.contains())
                .join(
                    live,
                    [col("xid")],
                    [col("xid")],
                    JoinArgs::new(JoinType::Anti),
                ))
        },
        "M001",
    )?
    .lazy()
    .join(
        statuses,
        [col("xid")],
        [col("xid")],
        JoinArgs::new(JoinType::Left),
    )
    .sort(["external_id", "recorded_at"], Default::default())
    .collect()
    .engine("M001")?;
    let journal = JournalRows::read(&missing)?;
    let status = texts(&missing, "provider_status")?;
    (0..missing.height())
        .map(|row| {
            let id = journal.external_id[row].clone().unwrap_or_default();
            let why = match &status[row] {
                Some(status) => format!("the provider lists it as {status}"),
                None => "the provider does not list it".to_string(),
            };
            Ok(MissingExport::finding(FindingDraft {
                dag_id: journal.dag_id[row].clone(),
                operation: journal.operation[row].clone(),
                interval: journal.interval[row].clone(),
                op_key: journal.op_key[row].clone(),
                message: format!("{} committed {id}, but {why}", journal.try_ref(row)),
                evidence: journal.evidence(&[row]),
            }))
        })
        .collect()
}
