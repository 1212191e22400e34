//! `onceonly plan check PLAN`: whether a plan made earlier still stands, before anyone carries
//! it out (as terraform refuses a stale plan). The sources are read again for the plan's scope
//! and planned afresh; each action of the old plan holds when the fresh plan has the same action
//! (same id, so the same kind acting on the same objects or keys) with the same targets, kept
//! object, journal row, commands and preconditions. The action id and its content come from the
//! facts its preconditions name, so an action whose preconditions no longer hold is no longer
//! planned, or is planned otherwise. A plan whose inputs fingerprint matches the fresh read's
//! had nothing move under it; one whose fingerprint differs is judged action by action.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::engine::{self, AuditOptions};
use crate::error::{Error, Result};
use crate::plan::Scope;

/// What became of one action of the old plan.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub id: String,
    pub kind: String,
    pub holds: bool,
    /// Why it no longer holds (None where it holds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub plan: String,
    pub plan_fingerprint: String,
    pub fresh_fingerprint: String,
    /// Whether the tables read now are those the plan was made from.
    pub inputs_unchanged: bool,
    pub actions: Vec<Checked>,
    /// Actions the fresh plan has that the old one lacks: what the world needs now.
    pub new_actions: Vec<String>,
}

impl Outcome {
    pub fn all_hold(&self) -> bool {
        self.actions.iter().all(|action| action.holds)
    }

    pub fn text(&self) -> String {
        let held = self.actions.iter().filter(|a| a.holds).count();
        let mut out = format!(
            "plan {}: {held} of {} actions still hold\n",
            self.plan,
            self.actions.len()
        );
        out.push_str(&if self.inputs_unchanged {
            format!(
                "inputs unchanged since the plan (fingerprint {})\n",
                self.plan_fingerprint
            )
        } else {
            format!(
                "inputs changed since the plan (fingerprint {} then, {} now): each action checked against a fresh plan\n",
                self.plan_fingerprint, self.fresh_fingerprint
            )
        });
        for action in &self.actions {
            match &action.why {
                None => out.push_str(&format!("  holds      {} {}\n", action.id, action.kind)),
                Some(why) => out.push_str(&format!(
                    "  STALE      {} {}: {}\n",
                    action.id,
                    action.kind,
                    crate::render::terminal_safe(why)
                )),
            }
        }
        if !self.new_actions.is_empty() {
            out.push_str(&format!(
                "the fresh plan also has {} action(s) this one lacks: {}\n",
                self.new_actions.len(),
                self.new_actions.join(", ")
            ));
        }
        out
    }
}

/// The action fields that must be the same for an action to still hold: all but the findings
/// it answers (a finding can be answered by an equal action under a new id of its own).
const COMPARED: [&str; 11] = [
    "kind",
    "safety",
    "reason",
    "dag_id",
    "interval",
    "op_key",
    "keep",
    "targets",
    "journal_row",
    "preconditions",
    "commands",
];

/// Reads `plan_path` (a JSON plan), re-reads the sources for its scope (or for `flags`, where
/// the plan records none) and checks every action.
pub fn run(config: &Config, plan_path: &Path, flags: Option<&AuditOptions>) -> Result<Outcome> {
    let shown = plan_path.display().to_string();
    let text = std::fs::read_to_string(plan_path).map_err(|err| Error::io(&shown, err))?;
    let old: Value = serde_json::from_str(&text).map_err(|err| {
        Error::usage(
            "PLAN",
            format!("{shown} is not a JSON plan ({err}); check the plan written as .json, not its markdown or text"),
        )
    })?;
    let field = |name: &str| {
        old.get(name)
            .ok_or_else(|| Error::usage("PLAN", format!("{shown} has no `{name}`: not a plan")))
    };
    let version = field("format_version")?.as_u64();
    if version != Some(u64::from(crate::plan::FORMAT_VERSION)) {
        return Err(Error::usage(
            "PLAN",
            format!(
                "{shown} is plan format {version:?}; this onceonly checks format {}",
                crate::plan::FORMAT_VERSION
            ),
        ));
    }
    let fingerprint = field("inputs_fingerprint")?
        .as_str()
        .ok_or_else(|| Error::usage("PLAN", format!("{shown}: inputs_fingerprint is not text")))?
        .to_string();
    let actions = field("actions")?
        .as_array()
        .ok_or_else(|| Error::usage("PLAN", format!("{shown}: actions is not a list")))?;
    let scope: Option<Scope> = match old.get("scope") {
        None => None,
        Some(scope) => Some(serde_json::from_value(scope.clone()).map_err(|err| {
            Error::usage("PLAN", format!("{shown}: scope does not parse ({err})"))
        })?),
    };
    let mut options = AuditOptions {
        plan: true,
        without_verdicts_frame: true,
        ..flags.cloned().unwrap_or_default()
    };
    match (&scope, flags) {
        (Some(scope), None) => scope.apply(&mut options)?,
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "--dag",
                format!(
                    "{shown} records the audit it was made by (its scope); it is checked for that scope, and takes no scope flags"
                ),
            ));
        }
        (None, _) => {}
    }
    let (_, _, fresh) = engine::run(config, &options)?.into_results()?;
    let fresh = fresh.expect("a plan was asked for");
    let fresh_fingerprint = fresh.inputs_fingerprint.clone();
    let fresh = serde_json::to_value(&fresh.actions).expect("a plan always serializes");
    let fresh: BTreeMap<&str, &Value> = fresh
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|action| Some((action["id"].as_str()?, action)))
        .collect();
    let mut checked = Vec::new();
    for (at, action) in actions.iter().enumerate() {
        let id = action["id"].as_str().ok_or_else(|| {
            Error::usage("PLAN", format!("{shown}: actions[{at}] has no text `id`"))
        })?;
        let kind = action["kind"].as_str().unwrap_or("").to_string();
        let why = match fresh.get(id) {
            Some(now) => COMPARED
                .iter()
                .find(|name| action.get(**name) != now.get(**name))
                .map(|name| {
                    format!(
                        "its {name} changed: {} then, {} now",
                        shown_value(action.get(*name)),
                        shown_value(now.get(*name))
                    )
                }),
            None => Some(gone(action, &fresh)),
        };
        checked.push(Checked {
            id: id.to_string(),
            kind,
            holds: why.is_none(),
            why,
        });
    }
    let old_ids: Vec<&str> = actions.iter().filter_map(|a| a["id"].as_str()).collect();
    let new_actions = fresh
        .keys()
        .filter(|id| !old_ids.contains(id))
        .map(|id| id.to_string())
        .collect();
    Ok(Outcome {
        plan: shown,
        inputs_unchanged: fresh_fingerprint == fingerprint,
        plan_fingerprint: fingerprint,
        fresh_fingerprint,
        actions: checked,
        new_actions,
    })
}

/// Why an action the fresh plan lacks is gone: its findings are no longer reported, or they
/// are answered otherwise now.
fn gone(action: &Value, fresh: &BTreeMap<&str, &Value>) -> String {
    let answers: Vec<&str> = action["answers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let now: Vec<String> = fresh
        .values()
        .filter(|other| {
            other["answers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|finding| answers.contains(&finding))
        })
        .map(|other| {
            format!(
                "{} {}",
                other["id"].as_str().unwrap_or(""),
                other["kind"].as_str().unwrap_or("")
            )
        })
        .collect();
    if now.is_empty() {
        format!(
            "no longer planned: the findings it answers ({}) are not reported now, so what it repairs has changed (an object created, voided or journalled since)",
            answers.join(", ")
        )
    } else {
        format!(
            "no longer planned: its findings are answered by {} now",
            now.join(", ")
        )
    }
}

fn shown_value(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "none".to_string(),
        Some(value) => value.to_string(),
    }
}
