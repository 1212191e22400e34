//! Stage 4, rules and verdicts: the selected rules' findings, and a verdict for every try,
//! worked out side by side from the prepared frames.

use std::collections::BTreeMap;

use polars::prelude::DataFrame;

use crate::config::Config;
use crate::error::Result;
use crate::prepare::Prepared;
use crate::report::SkippedRule;
use crate::rules::{self, Finding};

use super::scope::AuditOptions;

/// What the rules and the verdicts found.
pub struct Checked {
    pub findings: Vec<Finding>,
    /// A verdict for every try.
    pub verdicts: DataFrame,
    /// How many tries had each verdict.
    pub verdict_counts: BTreeMap<String, usize>,
    /// How many runs were audited.
    pub runs: usize,
    /// How many runs took their interval from each basis.
    pub interval_basis: BTreeMap<String, usize>,
    /// Selected rules these inputs cannot run, with the reason.
    pub rules_skipped: Vec<SkippedRule>,
}

pub fn run(config: &Config, prepared: &Prepared, options: &AuditOptions) -> Result<Checked> {
    let selected = rules::selected(&options.rules);
    // The verdicts do not depend on the findings: they are computed on a thread of their own
    // while the rules run, and that thread then takes rules too.
    let started = std::time::Instant::now();
    let (findings, verdicts) = rules::run_all_beside(prepared, &selected, || verdicts(prepared));
    crate::timing::phase("rules", started);
    let findings = findings?;
    let (verdicts, verdict_counts, (runs, interval_basis)) = verdicts?;
    let mut rules_skipped = Vec::new();
    if prepared.key_ttl.is_none()
        && config.operations.iter().all(|op| op.key_ttl.is_none())
        && selected.iter().any(|rule| rule.code() == "T001")
    {
        rules_skipped.push(SkippedRule {
            code: "T001",
            reason: "no [provider] key_ttl configured".into(),
        });
    }
    Ok(Checked {
        findings,
        verdicts,
        verdict_counts,
        runs,
        interval_basis,
        rules_skipped,
    })
}

/// How many runs there are, and how many of them have each interval basis.
type RunsAndBases = (usize, BTreeMap<String, usize>);

/// Every try's verdict, how many tries had each, and the runs and interval bases the coverage
/// counts.
fn verdicts(prepared: &Prepared) -> Result<(DataFrame, BTreeMap<String, usize>, RunsAndBases)> {
    let started = std::time::Instant::now();
    let (verdicts, counts) = crate::verdicts::compute(prepared)?;
    crate::timing::phase("verdicts:compute", started);
    let counting = std::time::Instant::now();
    let runs = runs_and_bases(prepared)?;
    crate::timing::phase("verdicts:runs", counting);
    crate::timing::phase("verdicts", started);
    Ok((verdicts, counts, runs))
}

/// How many runs were audited, and how many took their interval from each basis (`unknown`
/// for none). Every try of a run has its run's basis; a run whose tries disagree is counted
/// under each basis they give. Runs are told apart by the run numbers prepare gave the tries;
/// a try with no dag_id or run_id has none, and is counted by its `(dag_id, run_id)` as read.
fn runs_and_bases(prepared: &Prepared) -> Result<RunsAndBases> {
    let tries = &prepared.tries;
    let numbers = prepared.try_run_codes()?;
    let text = |name: &str| crate::cells::text_column(tries, name);
    let (bases, dags, runs) = (text("basis")?, text("dag_id")?, text("run_id")?);
    let mut basis_of_run: Vec<Option<Option<&str>>> = prepared.codes.per_run(None);
    // (run number, or the pair as read where there is none; basis) beyond each run's first.
    let mut others = std::collections::HashSet::new();
    for (row, (number, basis)) in numbers.iter().zip(bases.iter()).enumerate() {
        match number {
            Some(number) => {
                let first = *basis_of_run[number as usize].get_or_insert(basis);
                if first != basis {
                    others.insert((Ok(number), basis));
                }
            }
            None => {
                others.insert((Err((dags.get(row), runs.get(row))), basis));
            }
        }
    }
    let uncoded: std::collections::HashSet<_> =
        others.iter().filter_map(|(run, _)| run.err()).collect();
    let mut counts = BTreeMap::new();
    for basis in basis_of_run
        .iter()
        .flatten()
        .copied()
        .chain(others.iter().map(|(_, basis)| *basis))
    {
        *counts
            .entry(basis.unwrap_or("unknown").to_string())
            .or_insert(0) += 1;
    }
    Ok((prepared.codes.runs + uncoded.len(), counts))
}

/// Where a task matches more than one `[[operation]]`, it is audited under the first that
/// matches it, in the config's order; a later operation it also matches audits nothing of it.
/// One warning per such later operation, naming how many of the audited tasks it gives up and
/// which operation took the first of them, so an overlap of globs is not silent.
pub fn shadowed_operations(config: &Config, prepared: &Prepared) -> Result<Vec<String>> {
    let tries = &prepared.tries;
    let pipelines = crate::cells::one_chunk(crate::cells::code_column(
        tries,
        crate::prepare::model::interval::PIPELINE,
    )?);
    let (dags, tasks) = (
        crate::cells::text_column(tries, "dag_id")?,
        crate::cells::text_column(tries, "task_id")?,
    );
    let mut seen: Vec<bool> = Vec::new();
    // Per later operation: the tasks it gives up, and the first of them with its operation.
    let mut shadowed: BTreeMap<usize, (usize, String)> = BTreeMap::new();
    for (row, pipeline) in pipelines.iter().enumerate() {
        let Some(pipeline) = pipeline else { continue };
        let pipeline = pipeline as usize;
        if seen.len() <= pipeline {
            seen.resize(pipeline + 1, false);
        }
        if std::mem::replace(&mut seen[pipeline], true) {
            continue;
        }
        let (Some(dag), Some(task)) = (dags.get(row), tasks.get(row)) else {
            continue;
        };
        let mut matching = config
            .operations
            .iter()
            .enumerate()
            .filter(|(_, operation)| operation.matches(dag, task));
        let Some((_, first)) = matching.next() else {
            continue;
        };
        for (index, _) in matching {
            let entry = shadowed
                .entry(index)
                .or_insert_with(|| (0, format!("{dag}.{task}, audited under `{}`", first.name)));
            entry.0 += 1;
        }
    }
    Ok(shadowed
        .into_iter()
        .map(|(index, (count, example))| {
            let operation = &config.operations[index];
            format!(
                "[[operation]] `{}` (dag_id `{}`, task_id `{}`) matches {count} task{} that an earlier operation matches first ({example}); a task is audited under the first operation that matches it",
                operation.name,
                operation.dag_id,
                operation.task_id,
                if count == 1 { "" } else { "s" }
            )
        })
        .collect())
}

/// Journal rows of the audited runs that name a try Airflow does not have (their run, task, map
/// index and try number match none of the run's tries): a journal that does not record
/// Airflow's `map_index` for a mapped task, or its own try count. Their tries are judged
/// without them, so one warning says how many there are and names the first.
pub fn journal_rows_without_their_try(prepared: &Prepared) -> Result<Option<String>> {
    let try_rows = prepared.journal_try_rows()?;
    let without = try_rows.null_count();
    let Some(first) = try_rows.iter().position(|row| row.is_none()) else {
        return Ok(None);
    };
    let journal = &prepared.journal;
    let text = |name: &str| -> Result<String> {
        Ok(crate::cells::text_column(journal, name)?
            .get(first)
            .unwrap_or_default()
            .to_string())
    };
    let int = |name: &str| -> Result<String> {
        Ok(crate::cells::int_column(journal, name)?
            .get(first)
            .map_or_else(|| "NULL".to_string(), |value| value.to_string()))
    };
    Ok(Some(format!(
        "journal: {without} row{} of the audited runs name{} a try Airflow does not have (the first: {}.{} in run {}, map_index {}, try {}); {} judged without {}: check that the journal records Airflow's try_number and map_index",
        if without == 1 { "" } else { "s" },
        if without == 1 { "s" } else { "" },
        text("dag_id")?,
        text("task_id")?,
        text("run_id")?,
        int("map_index")?,
        int("try_number")?,
        if without == 1 {
            "its try is"
        } else {
            "their tries are"
        },
        if without == 1 { "it" } else { "them" },
    )))
}
