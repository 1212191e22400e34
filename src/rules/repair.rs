//! What a rule proposes for one of its findings (SPEC §6), as typed data: the kind of action,
//! its safety class, a reason keyword, what it acts on, its preconditions and an explanation.
//! Each rule's `repair` builds these from the finding and from [`NamedRows`], the provider
//! objects and intent rows the findings name; the plan collects the proposals, merges equal
//! ones, numbers and orders them.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use polars::prelude::*;
use serde::Serialize;

use crate::cells::{bools, ints, texts};
use crate::error::{EngineContext, Result};
use crate::model::{SourceColumn, Table};
use crate::rules::Finding;

/// The columns of `Prepared::objects` a plan reads ([`NamedRows::read`]); a part's result
/// carries them to the merge, which plans.
pub const OBJECT_COLUMNS: [&str; 9] = [
    "external_id",
    "status",
    "payload_hash",
    "by_run_id",
    "created_at",
    "by_try_number",
    "by_map_index",
    "live",
    "committed",
];
/// The columns of `Prepared::journal` a plan reads, likewise.
pub const JOURNAL_COLUMNS: [&str; 7] = [
    "op_key",
    "run_id",
    "dag_id",
    "task_id",
    "phase",
    "try_number",
    "map_index",
];

/// Whether a plan reads a source column: the prepared objects and journal keep the
/// provider's and the journal's columns under their own names.
pub fn plan_reads(column: &SourceColumn) -> bool {
    match column.table {
        Table::Provider => OBJECT_COLUMNS.contains(&column.name),
        Table::Journal => JOURNAL_COLUMNS.contains(&column.name),
        Table::Attempts => false,
    }
}

/// The fixed kinds of action, in the order a plan lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    AdoptExternalId,
    VoidDuplicate,
    RetrySameKey,
    ReexportNewVersion,
    FixKeyDerivation,
    Investigate,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::AdoptExternalId => "adopt-external-id",
            Kind::VoidDuplicate => "void-duplicate",
            Kind::RetrySameKey => "retry-same-key",
            Kind::ReexportNewVersion => "reexport-new-version",
            Kind::FixKeyDerivation => "fix-key-derivation",
            Kind::Investigate => "investigate",
        }
    }
}

/// How much trust carrying an action out needs (as ruff's fix applicability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Safety {
    Automatic,
    NeedsApproval,
    Manual,
}

/// The committed row an `adopt-external-id` writes, in canonical journal columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalRow {
    pub op_key: String,
    pub dag_id: String,
    pub task_id: String,
    pub map_index: i64,
    pub run_id: String,
    pub try_number: i64,
    pub external_id: String,
    pub payload_hash: Option<String>,
    /// The object's creation time: when the response would have been recorded.
    pub recorded_at: String,
}

/// One action a rule proposes for one finding. The plan adds the finding's id, DAG, operation,
/// interval and key, and the action's id (from its kind and `acts_on`).
#[derive(Debug, Clone)]
pub struct Repair {
    pub kind: Kind,
    pub safety: Safety,
    /// A fixed keyword saying why.
    pub reason: &'static str,
    /// What the action acts on. Two proposals with the same kind and `acts_on` are one action
    /// answering both findings.
    pub acts_on: Vec<String>,
    /// `void-duplicate`: the object kept, and why it was chosen.
    pub keep: Option<String>,
    pub keep_reason: Option<&'static str>,
    /// The external ids acted on (voided, adopted, re-exported).
    pub targets: Vec<String>,
    pub journal_row: Option<JournalRow>,
    /// What must still hold before the action is carried out.
    pub preconditions: Vec<String>,
    /// What to do, for a person.
    pub explanation: String,
    /// Commands that carry the action out, each narrowed to what it repairs.
    pub commands: Vec<super::clear::Command>,
}

impl Repair {
    /// A proposal with nothing kept, no targets, no journal row, preconditions or explanation.
    pub fn new(kind: Kind, safety: Safety, reason: &'static str, acts_on: Vec<String>) -> Repair {
        Repair {
            kind,
            safety,
            reason,
            acts_on,
            keep: None,
            keep_reason: None,
            targets: Vec::new(),
            journal_row: None,
            preconditions: Vec::new(),
            explanation: String::new(),
            commands: Vec::new(),
        }
    }
}

/// What a finding's repair needs beyond its evidence, in its rule's own type (K001 keeps which
/// part of the key changed): set by the rule's detection, read back by the same rule's repair.
/// Not part of any report.
#[derive(Clone, Default)]
pub struct RepairInput(Option<Arc<dyn Stored>>);

/// A value a [`RepairInput`] can hold: compared and printed as its own type.
trait Stored: Any + fmt::Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn same(&self, other: &dyn Stored) -> bool;
}

impl<T: Any + fmt::Debug + PartialEq + Send + Sync> Stored for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn Stored) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

impl RepairInput {
    pub fn new<T: Any + fmt::Debug + PartialEq + Send + Sync>(value: T) -> RepairInput {
        RepairInput(Some(Arc::new(value)))
    }

    /// The value, if one of type `T` was set.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.as_any().downcast_ref::<T>()
    }
}

impl PartialEq for RepairInput {
    fn eq(&self, other: &RepairInput) -> bool {
        match (self.0.as_deref(), other.0.as_deref()) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same(b),
            _ => false,
        }
    }
}

impl Eq for RepairInput {}

impl fmt::Debug for RepairInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_deref() {
            Some(value) => f.debug_tuple("RepairInput").field(&value).finish(),
            None => f.write_str("RepairInput(none)"),
        }
    }
}

/// A repair input that can be written as text and read back as the same value: what a
/// partition's result carries to the merge (`onceonly merge`), so the merged plan is the one
/// audit's.
pub trait RepairText: Sized {
    fn text(&self) -> Option<String>;
    fn of_text(text: &str) -> Option<Self>;
}

/// No repair input.
impl RepairText for () {
    fn text(&self) -> Option<String> {
        None
    }
    fn of_text(_: &str) -> Option<()> {
        None
    }
}

/// What a repair may know of a provider object.
#[derive(Debug, Clone)]
pub struct ObjectFacts {
    pub created_at: Option<i64>,
    pub status: String,
    pub live: bool,
    pub committed: bool,
    pub payload_hash: Option<String>,
    pub by_run_id: Option<String>,
    pub by_try_number: Option<i64>,
    pub by_map_index: Option<i64>,
}

/// The task instance that wrote an intent row.
#[derive(Debug, Clone)]
pub struct IntentWriter {
    pub dag_id: String,
    pub task_id: String,
    pub map_index: i64,
}

/// The provider objects the findings name (by external id) and the intent rows under the
/// findings' keys, read once for all findings.
#[derive(Default)]
pub struct NamedRows {
    objects: BTreeMap<String, ObjectFacts>,
    /// `(op_key, run_id, try_number)` of an intent row -> who wrote it.
    intents: BTreeMap<(String, String, i64), IntentWriter>,
}

impl NamedRows {
    /// From the provider objects and journal rows as prepare has them (`Prepared::objects`,
    /// `Prepared::journal`, or the rows of them a partition's result kept).
    pub fn read(
        objects: &DataFrame,
        journal: &DataFrame,
        findings: &[Finding],
    ) -> Result<NamedRows> {
        // Two passes over columns of millions of rows, one on a thread of its own.
        let (objects, intents) = crate::parallel::side_by_side(
            || named_objects(objects, findings),
            || intents(journal, findings),
        );
        Ok(NamedRows {
            objects: objects?,
            intents: intents?,
        })
    }

    /// A provider object a finding names.
    pub fn object(&self, external_id: &str) -> Option<&ObjectFacts> {
        self.objects.get(external_id)
    }

    /// Who wrote the intent under `op_key` in try `try_number` of `run_id`.
    pub fn intent(&self, op_key: &str, run_id: &str, try_number: i64) -> Option<&IntentWriter> {
        self.intents
            .get(&(op_key.to_string(), run_id.to_string(), try_number))
    }
}

/// The objects the findings name, by id. Only those are read out of the frame, so a plan
/// costs what its findings name, not what the provider lists.
fn named_objects(
    objects: &DataFrame,
    findings: &[Finding],
) -> Result<BTreeMap<String, ObjectFacts>> {
    let named: BTreeSet<&str> = findings
        .iter()
        .flat_map(|finding| finding.evidence.external_ids.iter().map(String::as_str))
        .collect();
    let df = &only(objects, "external_id", named)?;
    let (ids, statuses, hashes, runs) = (
        texts(df, "external_id")?,
        texts(df, "status")?,
        texts(df, "payload_hash")?,
        texts(df, "by_run_id")?,
    );
    let (created, tries, maps) = (
        ints(df, "created_at")?,
        ints(df, "by_try_number")?,
        ints(df, "by_map_index")?,
    );
    let (live, committed) = (bools(df, "live")?, bools(df, "committed")?);
    let mut out = BTreeMap::new();
    for row in 0..df.height() {
        let Some(id) = ids[row].clone() else { continue };
        out.insert(
            id,
            ObjectFacts {
                created_at: created[row],
                status: statuses[row].clone().unwrap_or_default(),
                live: live[row].unwrap_or(false),
                committed: committed[row].unwrap_or(false),
                payload_hash: hashes[row].clone(),
                by_run_id: runs[row].clone(),
                by_try_number: tries[row],
                by_map_index: maps[row],
            },
        );
    }
    Ok(out)
}

/// The intent rows under the findings' keys.
fn intents(
    journal: &DataFrame,
    findings: &[Finding],
) -> Result<BTreeMap<(String, String, i64), IntentWriter>> {
    let keys: BTreeSet<&str> = findings
        .iter()
        .filter_map(|finding| finding.op_key.as_deref())
        .collect();
    let df = &only(journal, "op_key", keys)?;
    let (keys, runs, dags, tasks, phases) = (
        texts(df, "op_key")?,
        texts(df, "run_id")?,
        texts(df, "dag_id")?,
        texts(df, "task_id")?,
        texts(df, "phase")?,
    );
    let (tries, maps) = (ints(df, "try_number")?, ints(df, "map_index")?);
    let mut out = BTreeMap::new();
    for row in 0..df.height() {
        if phases[row].as_deref() != Some("intent") {
            continue;
        }
        if let (Some(key), Some(run), Some(number), Some(dag_id), Some(task_id)) = (
            keys[row].clone(),
            runs[row].clone(),
            tries[row],
            dags[row].clone(),
            tasks[row].clone(),
        ) {
            let map_index = maps[row].unwrap_or(-1);
            out.insert(
                (key, run, number),
                IntentWriter {
                    dag_id,
                    task_id,
                    map_index,
                },
            );
        }
    }
    Ok(out)
}

/// The rows of `frame` whose `column` is one of `values`.
fn only(frame: &DataFrame, column: &str, values: BTreeSet<&str>) -> Result<DataFrame> {
    // A pass over the column picks the rows, and only those rows' cells are copied.
    let values: PlHashSet<&str> = values.into_iter().collect();
    let rows: Vec<IdxSize> = (crate::cells::text_column(frame, column)?.iter())
        .enumerate()
        .filter(|(_, cell)| cell.is_some_and(|cell| values.contains(cell)))
        .map(|(row, _)| row as IdxSize)
        .collect();
    frame
        .take(&IdxCa::from_vec("rows".into(), rows))
        .engine("selecting the findings' rows")
}

/// The repair of a duplicate (D001, D002, R001, T001): keep one live object of those the
/// finding names (the one the journal committed, else the earliest created) and void the other
/// live ones. Nothing when fewer than two of them are still live.
pub fn void_duplicates(finding: &Finding, named: &NamedRows) -> Vec<Repair> {
    let mut group: Vec<(&String, &ObjectFacts)> = finding
        .evidence
        .external_ids
        .iter()
        .filter_map(|id| named.object(id).map(|object| (id, object)))
        .filter(|(_, object)| object.live)
        .collect();
    if group.len() < 2 {
        return Vec::new();
    }
    group.sort_by_key(|(id, object)| (!object.committed, object.created_at, (*id).clone()));
    let (keep, kept) = group[0];
    let targets: Vec<String> = group[1..].iter().map(|(id, _)| (*id).clone()).collect();
    let still_live = |id: &String| format!("{id} is still live at the provider");
    let preconditions = std::iter::once(still_live(keep))
        .chain(targets.iter().map(still_live))
        .chain(
            targets
                .iter()
                .map(|id| format!("nothing downstream consumed {id} instead of {keep}")),
        )
        .collect();
    let explanation = format!(
        "keep {keep} ({}) and void {} through the provider's API or console; the interval keeps one logical result",
        if kept.committed {
            "the journal committed it"
        } else {
            "created first; the journal committed none"
        },
        targets.join(", ")
    );
    let acts_on = std::iter::once(keep.clone())
        .chain(targets.iter().cloned())
        .collect();
    vec![Repair {
        keep: Some(keep.clone()),
        keep_reason: Some(if kept.committed {
            "committed-in-journal"
        } else {
            "earliest-created"
        }),
        targets,
        preconditions,
        explanation,
        ..Repair::new(
            Kind::VoidDuplicate,
            Safety::NeedsApproval,
            "duplicate-objects",
            acts_on,
        )
    }]
}

/// A finding a person has to look into (`investigate`, manual): one action per finding,
/// targeting the objects it names, for as long as the finding is still reported.
pub fn investigate(finding: &Finding, reason: &'static str, explanation: &str) -> Vec<Repair> {
    vec![Repair {
        targets: finding.evidence.external_ids.clone(),
        preconditions: vec![format!("finding {} is still reported", finding.id)],
        explanation: explanation.to_string(),
        ..Repair::new(
            Kind::Investigate,
            Safety::Manual,
            reason,
            vec![finding.id.clone()],
        )
    }]
}

/// A change to how the operation derives its key (`fix-key-derivation`, manual): one action per
/// operation and rule, however many intervals show the problem.
pub fn fix_key_derivation(
    finding: &Finding,
    code: &'static str,
    reason: &'static str,
    explanation: String,
) -> Vec<Repair> {
    vec![Repair {
        preconditions: vec!["a code review of the task's key derivation".to_string()],
        explanation,
        ..Repair::new(
            Kind::FixKeyDerivation,
            Safety::Manual,
            reason,
            vec![
                finding.operation.clone().unwrap_or_default(),
                code.to_string(),
            ],
        )
    }]
}
