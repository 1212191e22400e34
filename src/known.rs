//! What the Airflow metadata knows — its DAG ids and the tasks of each — so that a command
//! never says "clean" about nothing (SPEC §7): a `--dag` that matches no DAG of the metadata,
//! an `[[operation]]` that matches no DAG or task, and an audit whose scope holds no try of an
//! operation task are errors (exit 2) that name what was asked for and the closest names that
//! exist. The metadata is read for this only when the audit's own tries leave the question
//! open, so an audit whose every operation matched pays nothing.

use std::collections::BTreeSet;
use std::path::Path;

use polars::prelude::*;

use crate::config::{Config, Operation, Source};
use crate::engine::{Audit, AuditOptions};
use crate::error::{EngineContext, Error, Result};
use crate::glob::glob_match;
use crate::model::Table;
use crate::timestamp;

/// How many of the closest names a message offers.
const CLOSEST: usize = 3;

/// The DAGs and tasks of the Airflow metadata, whole (not cut to an audit's scope).
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Where they were read, as messages name it.
    pub source: String,
    pub dags: BTreeSet<String>,
    /// `(dag_id, task_id)` of every task with a try.
    pub tasks: BTreeSet<(String, String)>,
}

impl Known {
    /// The metadata's DAGs and tasks: from the snapshot the audit reads (`--from-snapshot`),
    /// the `[airflow]` snapshot file, or the metadata database. None for Airflow's REST API,
    /// whose tries come already cut to the audit's DAG and window: there is nothing wider to
    /// look in.
    pub fn read(config: &Config, from_snapshot: Option<&Path>) -> Result<Option<Known>> {
        if let Some(dir) = from_snapshot {
            let unread = crate::model::READ_ON_DEMAND.to_vec();
            let (tables, _) = crate::sources::saved::load(dir, &unread)?;
            return Known::of_attempts(&tables.attempts, format!("snapshot {}", dir.display()))
                .map(Some);
        }
        match &config.attempts {
            Source::Snapshot(path) => {
                let attempts =
                    crate::sources::snapshot::read(path, Table::Attempts, &Default::default())?;
                Known::of_attempts(&attempts, config.attempts.describe()).map(Some)
            }
            Source::Database(database) => {
                let pairs = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|err| Error::io("the async runtime", err))?
                    .block_on(crate::sources::airflow_db::read_known_tasks(database))?;
                let mut known = Known {
                    source: database.shown.clone(),
                    ..Known::default()
                };
                for (dag, task) in pairs {
                    if let Some(task) = task {
                        known.tasks.insert((dag.clone(), task));
                    }
                    known.dags.insert(dag);
                }
                Ok(Some(known))
            }
            Source::Api(_) | Source::Listing(_) => Ok(None),
        }
    }

    /// The DAGs and tasks of an `attempts` table.
    pub fn of_attempts(attempts: &DataFrame, source: String) -> Result<Known> {
        let pairs = attempts
            .clone()
            .lazy()
            .select([col("dag_id"), col("task_id")])
            .unique(None, UniqueKeepStrategy::Any)
            .collect()
            .engine("the DAGs and tasks read")?;
        let (dags, tasks) = (
            crate::cells::texts(&pairs, "dag_id")?,
            crate::cells::texts(&pairs, "task_id")?,
        );
        let mut known = Known {
            source,
            ..Known::default()
        };
        for (dag, task) in dags.into_iter().zip(tasks) {
            let Some(dag) = dag else { continue };
            if let Some(task) = task {
                known.tasks.insert((dag.clone(), task));
            }
            known.dags.insert(dag);
        }
        Ok(known)
    }

    fn dags_matching(&self, pattern: &str) -> Vec<&str> {
        (self.dags.iter())
            .filter(|dag| glob_match(pattern, dag))
            .map(String::as_str)
            .collect()
    }

    /// What is wrong with `--dag PATTERN`, if it matches no DAG of the metadata.
    pub fn dag_problem(&self, pattern: &str) -> Option<String> {
        if !self.dags_matching(pattern).is_empty() {
            return None;
        }
        Some(format!(
            "{pattern:?} matches no DAG of {} ({} DAGs){}",
            self.source,
            self.dags.len(),
            closest_names(pattern, self.dags.iter().map(String::as_str))
        ))
    }

    /// What is wrong with `operation`, if it matches no DAG, or no task of the DAGs it
    /// matches.
    pub fn operation_problem(&self, operation: &Operation) -> Option<String> {
        let dags = self.dags_matching(&operation.dag_id);
        let named = format!("[[operation]] `{}`", operation.name);
        if dags.is_empty() {
            return Some(format!(
                "{named}: dag_id {:?} matches no DAG of {}{}",
                operation.dag_id,
                self.source,
                closest_names(&operation.dag_id, self.dags.iter().map(String::as_str))
            ));
        }
        let tasks: BTreeSet<&str> = (self.tasks.iter())
            .filter(|(dag, _)| glob_match(&operation.dag_id, dag))
            .map(|(_, task)| task.as_str())
            .collect();
        if tasks
            .iter()
            .any(|task| glob_match(&operation.task_id, task))
        {
            return None;
        }
        let shown: Vec<&str> = dags.iter().take(CLOSEST).copied().collect();
        Some(format!(
            "{named}: task_id {:?} matches no task of {} (in {}){}",
            operation.task_id,
            shown.join(", "),
            self.source,
            closest_names(&operation.task_id, tasks.iter().copied())
        ))
    }
}

/// Refuses an audit that checked nothing it was asked to: a `--dag` that matches no DAG of the
/// metadata, `[[operation]]`s that match no DAG or task, and — unless `--allow-empty` — a scope
/// that holds no try of an operation task. A part of a split audit (`--partition-out`) is left
/// to its merge: a part may hold none of some DAG's tries.
pub fn refuse_nothing(config: &Config, options: &AuditOptions, audit: &Audit) -> Result<()> {
    if options.partition_out.is_some() {
        return Ok(());
    }
    let empty = audit.report.coverage.tries == 0;
    // Operations that matched no task of the audited tries, and may belong to the scope: a
    // `--dag` without a glob leaves out those whose dag_id does not match it.
    let unmatched: Vec<&Operation> = (config.operations.iter().enumerate())
        .filter(|(index, _)| !audit.operations_matching.contains(index))
        .map(|(_, operation)| operation)
        .filter(|operation| match options.dag.as_deref() {
            Some(dag) if !dag.contains(['*', '?']) => glob_match(&operation.dag_id, dag),
            _ => true,
        })
        .collect();
    if !empty && unmatched.is_empty() {
        return Ok(());
    }
    let known = Known::read(config, options.from_snapshot.as_deref())?;
    if let Some(known) = &known {
        if let Some(dag) = options.dag.as_deref().filter(|_| empty)
            && let Some(problem) = known.dag_problem(dag)
        {
            return Err(Error::usage("--dag", problem));
        }
        let problems: Vec<String> = unmatched
            .iter()
            .filter_map(|operation| known.operation_problem(operation))
            .collect();
        if !problems.is_empty() {
            return Err(Error::config(
                config.path.display().to_string(),
                problems.join("; "),
            ));
        }
    }
    if empty && !options.allow_empty {
        let reason = if config.operations.is_empty() {
            "the config has no [[operation]]".to_string()
        } else {
            format!(
                "no try of an [[operation]] task is in {}",
                scope_text(options)
            )
        };
        return Err(Error::usage(
            "--allow-empty",
            format!(
                "nothing was audited: {reason}; a DAG that stopped running fails here: pass --allow-empty to accept an empty audit"
            ),
        ));
    }
    Ok(())
}

/// The audit's scope as flags give it: `--dag`, the window, the interval range.
fn scope_text(options: &AuditOptions) -> String {
    let mut parts = Vec::new();
    if let Some(dag) = &options.dag {
        parts.push(format!("--dag {dag:?}"));
    }
    let time = |at: Option<i64>| at.map_or("-".to_string(), timestamp::format);
    if options.since.is_some() || options.until.is_some() {
        parts.push(format!(
            "the window {} to {}",
            time(options.since),
            time(options.until)
        ));
    }
    if let Some((from, to)) = options.intervals() {
        parts.push(format!("intervals {} to {}", time(from), time(to)));
    }
    match parts.is_empty() {
        true => "the sources".to_string(),
        false => parts.join(", "),
    }
}

/// "; the closest: a, b, c", or nothing when there is no name to offer.
fn closest_names<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> String {
    let closest = closest(wanted, names);
    match closest.is_empty() {
        true => String::new(),
        false => format!("; the closest: {}", closest.join(", ")),
    }
}

/// The names nearest `wanted` by edit distance, nearest first (ties by name), at most
/// [`CLOSEST`].
pub fn closest<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = names
        .into_iter()
        .map(|name| (edit_distance(wanted, name), name))
        .collect();
    scored.sort_unstable();
    scored.dedup();
    scored
        .into_iter()
        .take(CLOSEST)
        .map(|(_, name)| name)
        .collect()
}

/// Levenshtein distance over characters: insertions, deletions and substitutions.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("orders_exprot", "orders_export"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            closest(
                "orders_exprot",
                ["billing", "orders_export", "orders_import"]
            ),
            ["orders_export", "orders_import", "billing"]
        );
    }
}
