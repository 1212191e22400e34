//! Repair plans (SPEC §6): findings become typed actions. Planning changes nothing; carrying a
//! plan out is a separate, explicit step (the SQL script, a provider call, a person).
//!
//! Every action has a fixed kind, a deterministic id (from what it acts on), the findings it
//! answers, a safety class, a reason keyword, preconditions that must still hold before it is
//! carried out, and an explanation for a person.

pub mod sql;

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::*;
use serde::Serialize;

use crate::cells::{bools, ints, texts};
use crate::error::{EngineContext, Result};
use crate::identity::stable_id;
use crate::prepare::Prepared;
use crate::rules::Finding;
use crate::timestamp;

pub const FORMAT_VERSION: u32 = 1;

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

#[derive(Debug, Clone, Serialize)]
pub struct Action {
    pub id: String,
    pub kind: Kind,
    pub safety: Safety,
    /// A fixed keyword saying why.
    pub reason: &'static str,
    /// Ids of the findings this action answers.
    pub answers: Vec<String>,
    pub dag_id: Option<String>,
    pub operation: Option<String>,
    pub interval: Option<String>,
    pub op_key: Option<String>,
    /// `void-duplicate`: the object kept, and why it was chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_reason: Option<&'static str>,
    /// The external ids acted on (voided, adopted, re-exported).
    pub targets: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_row: Option<JournalRow>,
    pub preconditions: Vec<String>,
    pub explanation: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub format_version: u32,
    /// The content hash of the tables the plan was made from (a snapshot of them has it too).
    pub inputs_fingerprint: String,
    pub actions: Vec<Action>,
}

/// What the planner needs to know of a provider object.
struct Object {
    created_at: Option<i64>,
    status: String,
    live: bool,
    committed: bool,
    payload_hash: Option<String>,
    by_run_id: Option<String>,
    by_try_number: Option<i64>,
    by_map_index: Option<i64>,
}

/// The objects the findings name, by id. Only those are read out of the frame: converting
/// every object took most of the plan's time at a million intervals.
fn objects(prepared: &Prepared, findings: &[Finding]) -> Result<BTreeMap<String, Object>> {
    let named: BTreeSet<&str> = findings
        .iter()
        .flat_map(|finding| finding.evidence.external_ids.iter().map(String::as_str))
        .collect();
    let df = &only(&prepared.objects, "external_id", named)?;
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
            Object {
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

/// `(op_key, run_id, try_number) -> (dag_id, task_id, map_index)` of intent rows.
type Intents = BTreeMap<(String, String, i64), (String, String, i64)>;

/// The intent rows under the findings' keys.
fn intents(prepared: &Prepared, findings: &[Finding]) -> Result<Intents> {
    let keys: BTreeSet<&str> = findings
        .iter()
        .filter_map(|finding| finding.op_key.as_deref())
        .collect();
    let df = &only(&prepared.journal, "op_key", keys)?;
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
        if let (Some(key), Some(run), Some(number), Some(dag), Some(task)) = (
            keys[row].clone(),
            runs[row].clone(),
            tries[row],
            dags[row].clone(),
            tasks[row].clone(),
        ) {
            out.insert((key, run, number), (dag, task, maps[row].unwrap_or(-1)));
        }
    }
    Ok(out)
}

/// The rows of `frame` whose `column` is one of `values`.
fn only(frame: &DataFrame, column: &str, values: BTreeSet<&str>) -> Result<DataFrame> {
    let values = Series::new("values".into(), values.into_iter().collect::<Vec<_>>());
    frame
        .clone()
        .lazy()
        .filter(col(column).is_in(lit(values).implode(false), false))
        .collect()
        .engine("selecting the findings' rows")
}

/// Adds an action, merging it into an equal one (same id) that answers other findings. An
/// action that answers findings of several DAGs (one key derivation shared by the DAGs of a
/// glob operation) belongs to no one DAG.
fn add(actions: &mut BTreeMap<String, Action>, action: Action) {
    actions
        .entry(action.id.clone())
        .and_modify(|known| {
            known.answers.extend(action.answers.clone());
            if known.dag_id != action.dag_id {
                known.dag_id = None;
            }
        })
        .or_insert(action);
}

/// Builds the plan. Duplicates are answered first: an object that a `void-duplicate` voids is
/// not also adopted, even when it is a lost response (the two repairs would contradict).
pub fn build(
    findings: &[Finding],
    prepared: &Prepared,
    inputs_fingerprint: String,
) -> Result<Plan> {
    let objects = objects(prepared, findings)?;
    let intents = intents(prepared, findings)?;
    let mut actions: BTreeMap<String, Action> = BTreeMap::new();
    // Voided object id -> the void-duplicate actions that void it.
    let mut voided: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();

    let base = |finding: &Finding,
                kind: Kind,
                safety: Safety,
                reason: &'static str,
                id_parts: Vec<String>| Action {
        id: stable_id(
            &format!("A-{}", kind.name()),
            id_parts.iter().map(String::as_str),
        ),
        kind,
        safety,
        reason,
        answers: vec![finding.id.clone()],
        dag_id: finding.dag_id.clone(),
        operation: finding.operation.clone(),
        interval: finding.interval.clone(),
        op_key: finding.op_key.clone(),
        keep: None,
        keep_reason: None,
        targets: Vec::new(),
        journal_row: None,
        preconditions: Vec::new(),
        explanation: String::new(),
    };

    // Duplicates: keep one object per group, void the other live ones.
    for finding in findings
        .iter()
        .filter(|f| matches!(f.code, "D001" | "D002" | "R001" | "T001"))
    {
        let mut group: Vec<(&String, &Object)> = finding
            .evidence
            .external_ids
            .iter()
            .filter_map(|id| objects.get(id).map(|object| (id, object)))
            .filter(|(_, object)| object.live)
            .collect();
        if group.len() < 2 {
            continue;
        }
        group.sort_by_key(|(id, object)| (!object.committed, object.created_at, (*id).clone()));
        let (keep, kept) = group[0];
        let keep_reason = if kept.committed {
            "committed-in-journal"
        } else {
            "earliest-created"
        };
        let targets: Vec<String> = group[1..].iter().map(|(id, _)| (*id).clone()).collect();
        let mut action = base(
            finding,
            Kind::VoidDuplicate,
            Safety::NeedsApproval,
            "duplicate-objects",
            std::iter::once(keep.clone())
                .chain(targets.iter().cloned())
                .collect(),
        );
        action.preconditions = std::iter::once(format!("{keep} is still live at the provider"))
            .chain(
                targets
                    .iter()
                    .map(|id| format!("{id} is still live at the provider")),
            )
            .chain(
                targets
                    .iter()
                    .map(|id| format!("nothing downstream consumed {id} instead of {keep}")),
            )
            .collect();
        action.explanation = format!(
            "keep {keep} ({}) and void {} through the provider's API or console; the interval keeps one logical result",
            if kept.committed {
                "the journal committed it"
            } else {
                "created first; the journal committed none"
            },
            targets.join(", ")
        );
        action.keep = Some(keep.clone());
        action.keep_reason = Some(keep_reason);
        for target in &targets {
            voided
                .entry(target.clone())
                .or_default()
                .insert(action.id.clone());
        }
        action.targets = targets;
        add(&mut actions, action);
    }

    for finding in findings {
        let key = finding.op_key.clone().unwrap_or_default();
        match finding.code {
            "L001" => {
                let Some((id, object)) = finding
                    .evidence
                    .external_ids
                    .first()
                    .and_then(|id| objects.get(id).map(|o| (id, o)))
                else {
                    continue;
                };
                if let Some(voids) = voided.get(id) {
                    // A duplicate of a committed object: the void-duplicate answers it.
                    if let Some(void) = voids.first().and_then(|void| actions.get_mut(void)) {
                        void.answers.push(finding.id.clone());
                    }
                    continue;
                }
                let writer =
                    object
                        .by_run_id
                        .clone()
                        .zip(object.by_try_number)
                        .and_then(|(run, number)| {
                            intents
                                .get(&(key.clone(), run.clone(), number))
                                .map(|who| (run, number, who))
                        });
                let mut action = base(
                    finding,
                    Kind::AdoptExternalId,
                    Safety::Automatic,
                    "lost-response",
                    vec![id.clone()],
                );
                action.targets = vec![id.clone()];
                action.preconditions = vec![
                    format!("{id} is still live at the provider under key {key}"),
                    format!("the journal still has no committed row naming {id}"),
                ];
                match writer {
                    Some((run_id, try_number, (dag_id, task_id, map_index))) => {
                        action.explanation = format!(
                            "record the lost response: a committed row for {run_id} try {try_number} naming {id}, so the journal knows the export exists"
                        );
                        action.journal_row = Some(JournalRow {
                            op_key: key.clone(),
                            dag_id: dag_id.clone(),
                            task_id: task_id.clone(),
                            map_index: object.by_map_index.unwrap_or(*map_index),
                            run_id,
                            try_number,
                            external_id: id.clone(),
                            payload_hash: object.payload_hash.clone(),
                            recorded_at: timestamp::format_opt(object.created_at),
                        });
                    }
                    None => {
                        // Without the try that sent the request the row cannot be written.
                        action.safety = Safety::Manual;
                        action.explanation = format!(
                            "record {id} in the journal by hand: no intent row says which try created it"
                        );
                    }
                }
                add(&mut actions, action);
            }
            // An orphan intent whose interval has a live object (the finding names it): that
            // object may be this operation's export, so a retry is not blind but investigated.
            "L002" if !finding.evidence.external_ids.is_empty() => {
                let targets = finding.evidence.external_ids.clone();
                let mut action = base(
                    finding,
                    Kind::Investigate,
                    Safety::Manual,
                    "object-exists-for-interval",
                    vec![key.clone()],
                );
                action.preconditions = std::iter::once(format!(
                    "the journal still has no committed row for key {key}"
                ))
                .chain(
                    targets
                        .iter()
                        .map(|id| format!("{id} is still live at the provider")),
                )
                .collect();
                action.explanation = format!(
                    "the intent under {key} left no object under its key, but the provider lists {} for the interval: if it is this operation's export, adopt it into the journal; retry with the same key only once it is known not to be",
                    targets.join(", ")
                );
                action.targets = targets;
                add(&mut actions, action);
            }
            "L002" => {
                let mut action = base(
                    finding,
                    Kind::RetrySameKey,
                    Safety::Automatic,
                    "nothing-created",
                    vec![key.clone()],
                );
                action.preconditions = vec![
                    format!("the provider still lists no object under key {key}"),
                    format!("the journal still has no committed row for key {key}"),
                ];
                let start = finding
                    .interval
                    .as_deref()
                    .and_then(|i| i.split('/').next())
                    .unwrap_or("INTERVAL");
                let task = finding.operation.as_deref().unwrap_or("TASK");
                action.explanation = format!(
                    "nothing was created: clear the task so it runs again with the same key, e.g. `airflow tasks clear {} --start-date {start} --end-date {start} --yes` (the task of operation {task})",
                    finding.dag_id.as_deref().unwrap_or("DAG")
                );
                add(&mut actions, action);
            }
            "M001" => {
                let targets = finding.evidence.external_ids.clone();
                let mut action = base(
                    finding,
                    Kind::ReexportNewVersion,
                    Safety::NeedsApproval,
                    "object-missing",
                    targets.clone(),
                );
                action.preconditions = targets
                    .iter()
                    .map(|id| match objects.get(id) {
                        Some(object) => format!("{id} is still {} at the provider", object.status),
                        None => format!("{id} is still absent from the provider"),
                    })
                    .chain(std::iter::once(
                        "a new approval for the re-export".to_string(),
                    ))
                    .collect();
                action.explanation = format!(
                    "the journal names {} but the provider has no live object: find out why, then export again under a new key version (e.g. {key}:v2) with a new approval",
                    targets.join(", ")
                );
                action.targets = targets;
                add(&mut actions, action);
            }
            "K002" => {
                let mut action = base(
                    finding,
                    Kind::ReexportNewVersion,
                    Safety::NeedsApproval,
                    "payload-changed",
                    vec![key.clone()],
                );
                action.targets = finding.evidence.external_ids.clone();
                action.preconditions = vec![
                    format!("the changed payload under {key} is the one wanted"),
                    "a new approval for the re-export".to_string(),
                ];
                action.explanation = format!(
                    "one key carried different payloads: export the wanted payload under a new key version (e.g. {key}:v2) with a new approval; the provider may have kept the first body"
                );
                add(&mut actions, action);
            }
            "K001" | "K003" => {
                let reason = if finding.code == "K001" {
                    "unstable-key"
                } else {
                    "key-collision"
                };
                let mut action = base(
                    finding,
                    Kind::FixKeyDerivation,
                    Safety::Manual,
                    reason,
                    vec![
                        finding.operation.clone().unwrap_or_default(),
                        finding.code.to_string(),
                    ],
                );
                action.preconditions =
                    vec!["a code review of the task's key derivation".to_string()];
                action.explanation = if finding.code == "K001" {
                    let part = finding
                        .message
                        .rsplit("the key contains ")
                        .next()
                        .unwrap_or("an unstable part");
                    format!(
                        "derive the key only from what identifies the interval's operation (e.g. {{interval_start:%Y-%m-%d}}), not from {part}"
                    )
                } else {
                    "make the key unique per DAG and interval (include the dag_id and a date as fine as the schedule), then re-export the intervals that got another interval's object".to_string()
                };
                add(&mut actions, action);
            }
            "L003" | "M002" | "C001" | "A001" => {
                let reason = match finding.code {
                    "L003" => "unjournaled-object",
                    "M002" => "unrecorded-success",
                    "C001" => "overlapping-tries",
                    _ => "approval-expired",
                };
                let parts = std::iter::once(finding.id.clone()).collect();
                let mut action = base(finding, Kind::Investigate, Safety::Manual, reason, parts);
                action.targets = finding.evidence.external_ids.clone();
                action.preconditions = vec![format!("finding {} is still reported", finding.id)];
                action.explanation = match finding.code {
                    "L003" => "find who created the object; adopt it into the journal if it belongs to an interval, void it if not".to_string(),
                    "M002" => "check the task's code path for this run: it succeeded without journalling its operation".to_string(),
                    "C001" => "check both tries' effects; make the commit atomic with the journal's one-commit-per-key constraint".to_string(),
                    _ => "decide whether the write after the approval expired may stand; redo it under a new key version with a new approval if not".to_string(),
                };
                add(&mut actions, action);
            }
            _ => {}
        }
    }

    let mut actions: Vec<Action> = actions.into_values().collect();
    for action in &mut actions {
        action.answers.sort();
        action.answers.dedup();
    }
    actions.sort_by(|a, b| {
        (a.kind, &a.dag_id, &a.interval, &a.id).cmp(&(b.kind, &b.dag_id, &b.interval, &b.id))
    });
    Ok(Plan {
        format_version: FORMAT_VERSION,
        inputs_fingerprint,
        actions,
    })
}
