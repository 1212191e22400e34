use polars::prelude::*;

use crate::model::Table;
use crate::error::{EngineContext, Result};
use crate::prepare::{Prepared, model};
use crate::rules::repair::{Kind, NamedRows, Repair, Safety};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::rows::{JournalRows, gather_sorted};
use crate::cells::texts;
use crate::cells::{flag_column, code_column};

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
    /// Find out why the object is gone, then, if the interval needs its export, export it again
    /// under a new key version with a new approval (`reexport-new-version`, needs approval:
    /// its preconditions are that the object is still not live, and the new approval).
    pub struct MissingExport => "M001", "missing-export", Warning;
    from_absence = true;
}
impl_rule!(MissingExport, check, repair);

fn check(_: &MissingExport, prepared: &Prepared) -> Result<Vec<Finding>> {
    // The object row of each object id, and which ids are live (arrays indexed by the id's
    // code).
    let objects = &prepared.objects;
    let ids = |frame: &DataFrame| code_column(frame, model::EXTERNAL_ID_CODE);
    let object_of = prepared.object_rows_by_id()?;
    let mut live_ids = prepared.codes.per_external_id(false);
    for (id, live) in ids(objects)?
        .iter()
        .zip(flag_column(objects, "live")?.iter())
    {
        if let Some(id) = id {
            live_ids[id as usize] |= live == Some(true);
        }
    }
    let journal = &prepared.journal;
    let phases = prepared.journal_phases()?;
    let recorded = crate::cells::int_column(journal, "recorded_at")?;
    let journal_ids = ids(journal)?;
    let missing = journal_ids
        .iter()
        .zip(phases.iter().zip(recorded.iter()))
        .map(|(id, (phase, at))| {
            phase.is_some_and(crate::model::Phase::done)
                && at.is_some_and(|at| prepared.window.holds(at))
                && id.is_some_and(|id| !live_ids[id as usize])
        });
    let mut missing = gather_sorted(journal, Table::Journal, missing, &[], "M001")?;
    let shown = ids(&missing)?
        .iter()
        .map(|id| id.and_then(|id| object_of[id as usize]))
        .collect::<IdxCa>();
    let status = objects
        .column("status")
        .engine("status")?
        .take(&shown)
        .engine("M001")?
        .with_name("provider_status".into());
    missing.with_column(status).engine("M001")?;
    let missing = missing
        .sort(["external_id", "recorded_at"], Default::default())
        .engine("M001")?;
    let journal = JournalRows::read(&missing, &prepared.operations)?;
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

/// `reexport-new-version` (needs approval): the committed objects are gone, so the interval's
/// export is made again under a new key version.
fn repair(finding: &Finding, named: &NamedRows) -> Vec<Repair> {
    let key = finding.op_key.clone().unwrap_or_default();
    let targets = finding.evidence.external_ids.clone();
    let preconditions = targets
        .iter()
        .map(|id| match named.object(id) {
            Some(object) => format!("{id} is still {} at the provider", object.status),
            None => format!("{id} is still absent from the provider"),
        })
        .chain(std::iter::once(
            "a new approval for the re-export".to_string(),
        ))
        .collect();
    let explanation = format!(
        "the journal names {} but the provider has no live object: find out why, then export again under a new key version (e.g. {key}:v2) with a new approval",
        targets.join(", ")
    );
    vec![Repair {
        targets: targets.clone(),
        preconditions,
        explanation,
        ..Repair::new(
            Kind::ReexportNewVersion,
            Safety::NeedsApproval,
            "object-missing",
            targets,
        )
    }]
}
