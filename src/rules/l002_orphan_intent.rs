use polars::prelude::IdxSize;

use crate::model::{Phase, Table};
use crate::ahead;
use crate::cells::{groups, ints, one_chunk};
use crate::error::Result;
use crate::prepare::{IntervalObject, Prepared, WantedInterval};
use crate::rules::clear::TaskInstanceRef;
use crate::rules::repair::{Kind, NamedRows, Repair, Safety};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::rows::{JournalRows, gather_sorted};

declare_rule! {
    /// ## What it detects
    /// An intent without any committed row for its key and without any provider object under
    /// the key, inside the window the provider listing covered.
    ///
    /// Nothing under the key is not yet nothing for the interval: a live object attributed to
    /// the interval under another key, or one the provider lists under no key but with the
    /// interval's own `interval_start`/`interval_end`, may be this operation's export. Then the
    /// finding names it, and the repair is to find out, not to retry.
    ///
    /// ## Why it matters
    /// Nothing was created, so the operation never happened: the interval's export is missing.
    /// This is the good kind of failure: retrying with the same key is safe, when no live object
    /// of the interval exists by key or by interval.
    ///
    /// ## Example
    /// Try 1 writes intent `orders:2026-11-01`, the provider answers 500 three times, the task
    /// exhausts its retries; the provider lists nothing under the key.
    ///
    /// ## Repair
    /// Clear the task so it runs again with the same key (`retry-same-key`, automatic). When the
    /// interval has a live object, look at it first (`investigate`, manual): adopt it if it is
    /// this operation's export, or retry once it is known not to be.
    pub struct OrphanIntent => "L002", "orphan-intent", Info;
    from_absence = true;
}
impl_rule!(OrphanIntent, check, repair, TaskInstanceRef);

fn check(_: &OrphanIntent, prepared: &Prepared) -> Result<Vec<Finding>> {
    // Per key code: an intent, a committed or reconciled row, the first intent's time, an
    // object under it (arrays indexed by key code, not group-bys and joins).
    let keys = one_chunk(prepared.journal_key_codes()?);
    let phases = prepared.journal_phases()?;
    let recorded = crate::cells::int_column(&prepared.journal, "recorded_at")?;
    let mut done = prepared.codes.per_key(false);
    let mut first_intent: Vec<Option<Option<i64>>> = prepared.codes.per_key(None);
    // Rows in no order update their keys' entries all over: each asks for the entries of the
    // row a few on (`crate::ahead`).
    let key_codes = ahead::values(&keys);
    let rows = crate::cells::each_number(&keys)
        .zip(phases)
        .zip(crate::cells::each_number(&recorded));
    for (row, ((key, phase), at)) in rows.enumerate() {
        if let Some(&far) = key_codes.get(row + ahead::FAR) {
            ahead::ask(&done, far as usize);
            ahead::ask(&first_intent, far as usize);
        }
        let Some(key) = key else { continue };
        let key = key as usize;
        match phase {
            Some(Phase::Intent) => {
                // The earliest time among the key's intents (NULL only if all are NULL).
                let first = first_intent[key].get_or_insert(None);
                if let Some(at) = at {
                    *first = Some(first.map_or(at, |first| first.min(at)));
                }
            }
            Some(Phase::Committed | Phase::Reconciled) => done[key] = true,
            _ => {}
        }
    }
    let objects = prepared.objects_by_key()?;
    let orphan: Vec<bool> = (0..prepared.codes.keys)
        .map(|key| {
            !done[key]
                && objects.all(key as u32).is_empty()
                && first_intent[key]
                    .flatten()
                    .is_some_and(|at| prepared.window.holds(at))
        })
        .collect();
    let rows = gather_sorted(
        &prepared.journal,
        Table::Journal,
        crate::cells::each_number(&keys).map(|key| key.is_some_and(|key| orphan[key as usize])),
        &["op_key", "recorded_at", "try_number"],
        "L002",
    )?;
    let journal = JournalRows::read(&rows, &prepared.operations)?;
    // What else exists for the orphans' intervals, looked up for those intervals only.
    let all = 0..rows.height() as IdxSize;
    let intervals = prepared.intervals.of_rows(&rows, all, |_| None)?;
    let (starts, ends) = (ints(&rows, "iv_start")?, ints(&rows, "iv_end")?);
    let mut wanted: Vec<WantedInterval> = (0..rows.height())
        .filter_map(|row| Some((intervals[row]?, starts[row], ends[row])))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let existing = prepared.live_objects_of(&wanted)?;
    let (tasks, try_rows) = (
        crate::cells::texts(&rows, "task_id")?,
        crate::cells::code_column(&rows, crate::prepare::model::journal::TRY_ROW)?,
    );
    let logical_dates = crate::cells::int_column(&prepared.tries, "logical_date")?;
    // The task instance a retry clears: the one that wrote the latest intent (rows are in
    // `recorded_at` order within a key).
    let to_clear = |members: &[usize]| {
        let row = *members
            .iter()
            .rev()
            .find(|row| journal.phase[**row].as_deref() == Some("intent"))?;
        Some(TaskInstanceRef {
            dag_id: journal.dag_id[row].clone()?,
            task_id: tasks[row].clone()?,
            run_id: journal.run_id[row].clone()?,
            map_index: journal.map_index[row].unwrap_or(-1),
            logical_date: try_rows
                .get(row)
                .and_then(|try_row| logical_dates.get(try_row as usize)),
        })
    };
    groups(&rows, &["op_key"])?
        .into_iter()
        .map(|(first, members)| {
            let mut evidence = journal.evidence(&members);
            let mut failed: Vec<String> = members
                .iter()
                .filter(|r| journal.phase[**r].as_deref() == Some("failed"))
                .map(|r| journal.try_ref(*r))
                .collect();
            failed.sort();
            failed.dedup();
            let mut others: Vec<&IntervalObject> = members
                .iter()
                .filter_map(|row| intervals[*row])
                .flat_map(|interval| existing.get(&interval).into_iter().flatten())
                .collect();
            others.sort();
            others.dedup();
            let failed = match failed.len() {
                0 => String::new(),
                1 => " (1 try failed)".to_string(),
                count => format!(" ({count} tries failed)"),
            };
            let verdict = if others.is_empty() {
                "safe to retry with the same key".to_string()
            } else {
                evidence.external_ids = others.iter().map(|object| object.external_id.clone()).collect();
                format!(
                    "but the provider lists {} for the interval: {}; do not retry before finding out whether it is this operation's export",
                    if others.len() == 1 { "a live object" } else { "live objects" },
                    listing(&others)
                )
            };
            let cleared = to_clear(&members);
            let finding = OrphanIntent::finding(FindingDraft {
                dag_id: journal.dag_id[first].clone(),
                operation: journal.operation[first].clone(),
                interval: journal.interval[first].clone(),
                message: format!(
                    "intent by {} with no committed row and no provider object under the key{failed}: {verdict}",
                    evidence.tries.join(", "),
                ),
                op_key: journal.op_key[first].clone(),
                evidence: evidence.normalized(),
            });
            Ok(match cleared {
                Some(cleared) => finding.with_repair_input(cleared),
                None => finding,
            })
        })
        .collect()
}

/// `exp_9 (created …, under key orders:2026-11-01:try2)`, `exp_7 (created …, under no key, by
/// its interval fields)`.
fn listing(objects: &[&IntervalObject]) -> String {
    let objects: Vec<String> = objects
        .iter()
        .map(|object| {
            let under = match &object.key {
                Some(key) => format!("under key {key}"),
                None => "under no key, by its interval fields".to_string(),
            };
            format!(
                "{} (created {}, {under})",
                object.external_id,
                crate::timestamp::format_opt(object.created_at)
            )
        })
        .collect();
    objects.join(", ")
}

/// With a live object in the interval: `investigate` (manual), as that object may be this
/// operation's export. Without: `retry-same-key` (automatic), as nothing was created.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    let key = finding.op_key.clone().unwrap_or_default();
    let targets = finding.evidence.external_ids.clone();
    if !targets.is_empty() {
        let preconditions = std::iter::once(format!(
            "the journal still has no committed row for key {key}"
        ))
        .chain(
            targets
                .iter()
                .map(|id| format!("{id} is still live at the provider")),
        )
        .collect();
        let explanation = format!(
            "the intent under {key} left no object under its key, but the provider lists {} for the interval: if it is this operation's export, adopt it into the journal; retry with the same key only once it is known not to be",
            targets.join(", ")
        );
        return vec![Repair {
            targets,
            preconditions,
            explanation,
            ..Repair::new(
                Kind::Investigate,
                Safety::Manual,
                "object-exists-for-interval",
                vec![key],
            )
        }];
    }
    let (commands, explanation) = match finding.repair_input.get::<TaskInstanceRef>() {
        Some(cleared) => {
            let (commands, gaps) = cleared.commands();
            let mut explanation = format!(
                "nothing was created: clear task {} of run {} so it runs again with the same key (one of the commands below; each clears that task instance alone and asks before it does)",
                cleared.task_id, cleared.run_id
            );
            for gap in gaps {
                explanation.push_str("; ");
                explanation.push_str(&gap);
            }
            (commands, explanation)
        }
        None => (
            Vec::new(),
            "nothing was created: clear the task instance that wrote the intent so it runs again with the same key (the journal does not name it fully: no command is given)".to_string(),
        ),
    };
    vec![Repair {
        preconditions: vec![
            format!("the provider still lists no object under key {key}"),
            format!("the journal still has no committed row for key {key}"),
        ],
        explanation,
        commands,
        ..Repair::new(
            Kind::RetrySameKey,
            Safety::Automatic,
            "nothing-created",
            vec![key.clone()],
        )
    }]
}
