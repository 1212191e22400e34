//! Repair plans (SPEC §6): what the rules propose for their findings, collected into one
//! document. Planning changes nothing; carrying a plan out is a separate, explicit step (the
//! SQL script, a provider call, a person).
//!
//! Every action has a fixed kind, a deterministic id (from its kind and what it acts on), the
//! findings it answers, a safety class, a reason keyword, preconditions that must still hold
//! before it is carried out, and an explanation for a person. Which actions a finding gets is
//! its rule's `repair` (src/rules/); the plan adds the finding's place (DAG, operation,
//! interval, key), merges equal proposals, keeps contradicting ones out and orders the rest.

pub mod sql;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::Result;
use crate::identity::stable_id;
use crate::rules::repair::{NamedRows, Repair};
use crate::rules::{self, Finding};

pub use crate::rules::clear::Command;
pub use crate::rules::repair::{JournalRow, Kind, Safety};

pub const FORMAT_VERSION: u32 = 1;

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
    /// Commands that carry the action out (`retry-same-key`: Airflow's CLI and REST clear of
    /// the one task instance), for the Airflow versions they are for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Command>,
}

impl Action {
    /// The action for a rule's proposal, answering the finding it was proposed for.
    fn proposed(finding: &Finding, repair: Repair) -> Action {
        Action {
            id: stable_id(
                &format!("A-{}", repair.kind.name()),
                repair.acts_on.iter().map(String::as_str),
            ),
            kind: repair.kind,
            safety: repair.safety,
            reason: repair.reason,
            answers: vec![finding.id.clone()],
            dag_id: finding.dag_id.clone(),
            operation: finding.operation.clone(),
            interval: finding.interval.clone(),
            op_key: finding.op_key.clone(),
            keep: repair.keep,
            keep_reason: repair.keep_reason,
            targets: repair.targets,
            journal_row: repair.journal_row,
            preconditions: repair.preconditions,
            explanation: repair.explanation,
            commands: repair.commands,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub format_version: u32,
    /// The content hash of the tables the plan was made from (a snapshot of them has it too).
    pub inputs_fingerprint: String,
    /// The audit that made it (or the split a merged plan's parts came from), so `onceonly plan
    /// check` re-reads the same runs. None in plans written before onceonly recorded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    pub actions: Vec<Action>,
}

/// Which runs an audit read, as its flags gave them (times RFC 3339, the slack a duration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Scope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

impl Scope {
    /// The scope of an audit run with `options` on `config` (the slack as the audit resolves
    /// it: the flag, else the listing's own).
    pub fn of(options: &crate::engine::AuditOptions, config: &crate::config::Config) -> Scope {
        let time = |at: Option<i64>| at.map(crate::timestamp::format);
        Scope {
            dag: options.dag.clone(),
            since: time(options.since),
            until: time(options.until),
            interval_from: time(options.interval_from),
            interval_to: time(options.interval_to),
            slack: (options.slack)
                .or(config.provider.source.listing_slack())
                .map(crate::timestamp::format_duration),
            rules: options.rules.clone(),
        }
    }

    /// The scope of a split's audit: its window and slack (a split takes no `--dag` and no
    /// interval range), and the rules its parts ran.
    pub fn of_split(split: &crate::partition::SplitInfo, rules: &[String]) -> Scope {
        Scope {
            since: split.since.clone(),
            until: split.until.clone(),
            slack: split.slack.map(crate::timestamp::format_duration),
            rules: rules.to_vec(),
            ..Scope::default()
        }
    }

    /// `options` narrowed to this scope; an error naming the field that does not parse.
    pub fn apply(&self, options: &mut crate::engine::AuditOptions) -> Result<()> {
        let time = |field: &str, text: &Option<String>| -> Result<Option<i64>> {
            text.as_deref()
                .map(|text| {
                    crate::timestamp::parse(text).ok_or_else(|| {
                        crate::error::Error::usage(
                            "PLAN",
                            format!("the plan's scope.{field} {text:?} is not a time"),
                        )
                    })
                })
                .transpose()
        };
        options.dag = self.dag.clone();
        options.since = time("since", &self.since)?;
        options.until = time("until", &self.until)?;
        options.interval_from = time("interval_from", &self.interval_from)?;
        options.interval_to = time("interval_to", &self.interval_to)?;
        options.slack = self
            .slack
            .as_deref()
            .map(|text| {
                crate::timestamp::parse_duration(text).ok_or_else(|| {
                    crate::error::Error::usage(
                        "PLAN",
                        format!("the plan's scope.slack {text:?} is not a duration"),
                    )
                })
            })
            .transpose()?;
        options.rules = self.rules.clone();
        Ok(())
    }
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

/// An object that a `void-duplicate` voids is not also adopted (the two repairs would
/// contradict): the adoption is dropped and the void (the first by id, where several void the
/// object) answers its findings.
fn drop_adoptions_of_voided(actions: &mut BTreeMap<String, Action>) {
    let mut voided: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for action in actions.values() {
        if action.kind == Kind::VoidDuplicate {
            for target in &action.targets {
                voided.entry(target).or_default().insert(&action.id);
            }
        }
    }
    let answered: Vec<(String, String)> = actions
        .values()
        .filter(|action| action.kind == Kind::AdoptExternalId)
        .filter_map(|action| {
            let void = action
                .targets
                .iter()
                .find_map(|target| voided.get(target.as_str())?.first())?;
            Some((action.id.clone(), void.to_string()))
        })
        .collect();
    for (adoption, void) in answered {
        let Some(adoption) = actions.remove(&adoption) else {
            continue;
        };
        if let Some(void) = actions.get_mut(&void) {
            void.answers.extend(adoption.answers);
        }
    }
}

/// Builds the plan from what each finding's rule proposes for it.
pub fn build(findings: &[Finding], named: &NamedRows, inputs_fingerprint: String) -> Result<Plan> {
    let mut actions: BTreeMap<String, Action> = BTreeMap::new();
    // A finding about an interval with a try in flight gets no action: what the try is
    // still doing may change the repair (`crate::in_flight`).
    for finding in findings.iter().filter(|finding| !finding.in_flight) {
        let Some(rule) = rules::by_code(finding.code) else {
            continue;
        };
        for repair in rule.repair(finding, named) {
            add(&mut actions, Action::proposed(finding, repair));
        }
    }
    drop_adoptions_of_voided(&mut actions);

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
        scope: None,
        actions,
    })
}
