use crate::model::Table;
use crate::cells::groups;
use crate::error::Result;
use crate::prepare::{Prepared, model};
use crate::rules::repair::{JournalRow, Kind, NamedRows, Repair, Safety};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};
use crate::timestamp;

use super::rows::{JournalRows, ObjectRows, gather_sorted};
use crate::cells::{flag_column, code_column};

declare_rule! {
    /// ## What it detects
    /// A live provider object exists under a key whose journal has an intent but no committed
    /// row naming the object, and no later try recovered it.
    ///
    /// ## Why it matters
    /// The provider did the work but the task never learned the object's id: the connection
    /// dropped or the process died between the provider's answer and the journal write. Airflow
    /// shows a failed try; nothing downstream knows the export exists, and a person may create
    /// it again by hand.
    ///
    /// ## Example
    /// Try 1 writes intent `orders:2026-11-01`, the provider creates `exp_1`, the response times
    /// out, the try fails; no try ran since, or every later try failed before the provider.
    ///
    /// ## Repair
    /// Write the lost response into the journal as a committed row naming `exp_1`
    /// (`adopt-external-id`, automatic: the provider proves the object exists under the key).
    /// When the key has a committed object as well, the lost one is a duplicate: the plan
    /// voids it instead (`void-duplicate`, needs approval: the duplicate finding's action) and
    /// does not adopt it.
    pub struct LostResponse => "L001", "lost-response", Error;
    from_absence = true;
}
impl_rule!(LostResponse, check, repair);

/// Whether a provider object's own row makes it a lost response: live at the provider, and no
/// committed row names it. L001 reports such an object when an intent was written under its
/// key.
pub fn object_lost(live: Option<bool>, committed: Option<bool>) -> bool {
    live == Some(true) && committed == Some(false)
}

fn check(_: &LostResponse, prepared: &Prepared) -> Result<Vec<Finding>> {
    // Per key code: whether an intent was written under it, and whether an object lost
    // under it (arrays indexed by key code, not joins).
    let journal_keys = prepared.journal_key_codes()?;
    let phases = prepared.journal_phases()?;
    let mut intended = prepared.codes.per_key(false);
    for (key, phase) in crate::cells::each_number(&journal_keys).zip(phases) {
        if let (Some(key), Some(crate::model::Phase::Intent)) = (key, phase) {
            intended[key as usize] = true;
        }
    }
    let object_keys = prepared.object_key_codes()?;
    let (live, committed) = (
        prepared.live_objects()?,
        flag_column(&prepared.objects, "committed")?,
    );
    let each_flag = crate::cells::each_flag;
    let is_lost = crate::cells::each_number(&object_keys)
        .zip(each_flag(&live).zip(each_flag(&committed)))
        .map(|(key, (live, committed))| {
            object_lost(live, committed) && key.is_some_and(|key| intended[key as usize])
        });
    let lost = gather_sorted(
        &prepared.objects,
        Table::Provider,
        is_lost,
        &["key", "created_at", "external_id"],
        "L001 objects",
    )?;
    let mut lost_key = prepared.codes.per_key(false);
    for key in code_column(&lost, model::KEY_CODE)?.iter().flatten() {
        lost_key[key as usize] = true;
    }
    let writers = gather_sorted(
        &prepared.journal,
        Table::Journal,
        crate::cells::each_number(&journal_keys)
            .map(|key| key.is_some_and(|key| lost_key[key as usize])),
        &["op_key", "recorded_at", "try_number"],
        "L001 journal",
    )?;
    let objects = ObjectRows::read(&lost, &prepared.operations)?;
    let journal = JournalRows::read(&writers, &prepared.operations)?;
    // Journal rows by key, looked up once per lost object (a scan per object is quadratic).
    let tries_by_key: std::collections::HashMap<&str, Vec<usize>> = groups(&writers, &["op_key"])?
        .into_iter()
        .filter_map(|(first, rows)| Some((journal.op_key[first].as_deref()?, rows)))
        .collect();

    (0..lost.height())
        .map(|row| {
            let key = objects.key[row].clone().unwrap_or_default();
            let journal_rows: Vec<usize> = tries_by_key
                .get(key.as_str())
                .cloned()
                .unwrap_or_default();
            let mut evidence = journal.evidence(&journal_rows);
            evidence.external_ids = vec![objects.id(row).to_string()];
            evidence.times.push(format!("{} created={}", objects.id(row), timestamp::format_opt(objects.created_at[row])));
            // Each try once, in the order of its first intent (a try may record one twice).
            let mut intent_tries: Vec<String> = Vec::new();
            for row in journal_rows.iter().filter(|r| journal.phase[**r].as_deref() == Some("intent")) {
                let try_ref = journal.try_ref(*row);
                if !intent_tries.contains(&try_ref) {
                    intent_tries.push(try_ref);
                }
            }
            Ok(LostResponse::finding(FindingDraft {
                dag_id: objects.dag_id[row].clone(),
                operation: objects.operation[row].clone(),
                interval: objects.interval[row].clone(),
                message: format!(
                    "{} was created (at {}) under key {key}, but no committed row names it; intent by {}",
                    objects.id(row),
                    timestamp::format_opt(objects.created_at[row]),
                    if intent_tries.is_empty() { "an unknown try".to_string() } else { intent_tries.join(", ") }
                ),
                op_key: Some(key),
                evidence,
            }))
        })
        .collect()
}

/// `adopt-external-id`: a committed row naming the object, written for the try whose intent
/// sent the request (automatic), or by hand where no intent row says which try that was
/// (manual).
fn repair(finding: &Finding, named: &NamedRows) -> Vec<Repair> {
    let Some((id, object)) = finding
        .evidence
        .external_ids
        .first()
        .and_then(|id| named.object(id).map(|object| (id, object)))
    else {
        return Vec::new();
    };
    let key = finding.op_key.clone().unwrap_or_default();
    let writer =
        object
            .by_run_id
            .clone()
            .zip(object.by_try_number)
            .and_then(|(run_id, try_number)| {
                named
                    .intent(&key, &run_id, try_number)
                    .map(|writer| (run_id, try_number, writer))
            });
    let mut repair = Repair {
        targets: vec![id.clone()],
        preconditions: vec![
            format!("{id} is still live at the provider under key {key}"),
            format!("the journal still has no committed row naming {id}"),
        ],
        ..Repair::new(
            Kind::AdoptExternalId,
            Safety::Automatic,
            "lost-response",
            vec![id.clone()],
        )
    };
    match writer {
        Some((run_id, try_number, writer)) => {
            repair.explanation = format!(
                "record the lost response: a committed row for {run_id} try {try_number} naming {id}, so the journal knows the export exists"
            );
            repair.journal_row = Some(JournalRow {
                op_key: key,
                dag_id: writer.dag_id.clone(),
                task_id: writer.task_id.clone(),
                map_index: object.by_map_index.unwrap_or(writer.map_index),
                run_id,
                try_number,
                external_id: id.clone(),
                payload_hash: object.payload_hash.clone(),
                recorded_at: timestamp::format_opt(object.created_at),
            });
        }
        None => {
            // Without the try that sent the request the row cannot be written.
            repair.safety = Safety::Manual;
            repair.explanation = format!(
                "record {id} in the journal by hand: no intent row says which try created it"
            );
        }
    }
    vec![repair]
}
