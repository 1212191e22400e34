//! Stage 4, rules and verdicts: the selected rules' findings, and a verdict for every try,
//! worked out side by side from the prepared frames.

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::StringChunked;

use crate::config::Config;
use crate::error::Result;
use crate::in_flight::{InFlight, InFlightCoverage};
use crate::prepare::Prepared;
use crate::report::{Noticed, Shadowed, SkippedRule, WithoutTheirTry};
use crate::rules::{self, Finding};
use crate::verdicts::Verdicts;

use super::scope::AuditOptions;

/// What the rules and the verdicts found.
pub struct Checked {
    pub findings: Vec<Finding>,
    /// A verdict for every try, and how many tries had each.
    pub verdicts: Verdicts,
    /// How many runs were audited.
    pub runs: usize,
    /// How many runs took their interval from each basis.
    pub interval_basis: BTreeMap<String, usize>,
    /// Selected rules these inputs cannot run, with the reason.
    pub rules_skipped: Vec<SkippedRule>,
    /// The tries in flight, and what was left unjudged for them.
    pub in_flight: InFlightCoverage,
}

/// The rules' findings and the verdicts, with the tries in flight as of `read_at` (when the
/// sources were read, microseconds since the epoch) left to be judged when they finish.
pub fn run(
    config: &Config,
    prepared: &Prepared,
    options: &AuditOptions,
    read_at: i64,
) -> Result<Checked> {
    let selected = rules::selected(&options.rules);
    let mut in_flight = InFlight::of(prepared, read_at, config.heartbeat_timeout)?;
    // The verdicts do not depend on the findings: they are computed on a thread of their own
    // while the rules run, and that thread then takes rules too.
    let started = std::time::Instant::now();
    let (findings, verdicts) =
        rules::run_all_beside(prepared, &selected, || verdicts(prepared, &in_flight));
    crate::timing::phase("rules", started);
    let findings = in_flight.judge(findings?);
    let (verdicts, (runs, interval_basis)) = verdicts?;
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
        runs,
        interval_basis,
        rules_skipped,
        in_flight: in_flight.coverage,
    })
}

/// How many runs there are, and how many of them have each interval basis.
type RunsAndBases = (usize, BTreeMap<String, usize>);

/// Every try's verdict (with how many tries had each), and the runs and interval bases the
/// coverage counts.
fn verdicts(prepared: &Prepared, in_flight: &InFlight) -> Result<(Verdicts, RunsAndBases)> {
    let started = std::time::Instant::now();
    let verdicts = crate::verdicts::compute(prepared, in_flight)?;
    crate::timing::phase("verdicts:compute", started);
    let counting = std::time::Instant::now();
    let runs = runs_and_bases(prepared)?;
    crate::timing::phase("verdicts:runs", counting);
    crate::timing::phase("verdicts", started);
    Ok((verdicts, runs))
}

/// How many runs were audited, and how many took their interval from each basis (`unknown`
/// for none). Every try of a run has its run's basis; a run whose tries disagree is counted
/// under each basis they give. Runs are told apart by the run numbers prepare gave the tries;
/// a try with no dag_id or run_id has none, and is counted by its `(dag_id, run_id)` as read.
fn runs_and_bases(prepared: &Prepared) -> Result<RunsAndBases> {
    let tries = &prepared.tries;
    let numbers = prepared.try_run_codes()?;
    let text = |name: &str| crate::cells::text_column(tries, name);
    let (dags, runs) = (text("dag_id")?, text("run_id")?);
    let bases = crate::cells::code_column(tries, crate::prepare::model::tries::BASIS)?;
    let mut basis_of_run: Vec<Option<Option<u32>>> = prepared.codes.per_run(None);
    // (run number, or the pair as read where there is none; basis) beyond each run's first.
    let mut others = std::collections::HashSet::new();
    let each = crate::cells::each_number;
    for (row, (number, basis)) in each(&numbers).zip(each(&bases)).enumerate() {
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
        let name = basis.map_or("unknown", |code| {
            crate::prepare::model::tries::BASES[code as usize]
        });
        *counts.entry(name.to_string()).or_insert(0) += 1;
    }
    Ok((prepared.codes.runs + uncoded.len(), counts))
}

/// What the audit notices beyond the sources' warnings (`report::Noticed`).
pub fn noticed(config: &Config, prepared: &Prepared) -> Result<Noticed> {
    let mut noticed = shadowed_operations(config, prepared)?;
    noticed.without_their_try = journal_rows_without_their_try(prepared)?;
    noticed.zones_unknown = prepared.zones_unknown.clone();
    Ok(noticed)
}

/// Per later operation, the audited tasks that an earlier one takes (`Noticed::shadowed`), and
/// the operations that take at least one (`Noticed::auditing`): each DAG task of the tries is
/// looked at once, and counted as a part's would be (`Noticed::add`).
fn shadowed_operations(config: &Config, prepared: &Prepared) -> Result<Noticed> {
    let tries = &prepared.tries;
    let pipelines = crate::cells::code_column(tries, crate::prepare::model::interval::PIPELINE)?;
    let (dags, tasks) = (
        crate::cells::text_column(tries, "dag_id")?,
        crate::cells::text_column(tries, "task_id")?,
    );
    let mut seen: Vec<bool> = Vec::new();
    let mut noticed = Noticed::default();
    for (row, pipeline) in crate::cells::each_number(&pipelines).enumerate() {
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
        let Some((first_index, first)) = matching.next() else {
            continue;
        };
        let shadowed = matching.map(|(index, operation)| {
            let this_task = Shadowed {
                name: operation.name.clone(),
                dag_id: operation.dag_id.clone(),
                task_id: operation.task_id.clone(),
                tasks: 1,
                least: (dag.to_string(), task.to_string()),
                taken_by: first.name.clone(),
            };
            (index, this_task)
        });
        noticed.add(Noticed {
            shadowed: shadowed.collect(),
            auditing: BTreeSet::from([first_index]),
            ..Noticed::default()
        });
    }
    Ok(noticed)
}

/// The journal's rows without a try of their own (`Noticed::without_their_try`).
fn journal_rows_without_their_try(prepared: &Prepared) -> Result<Option<WithoutTheirTry>> {
    let try_rows = prepared.journal_try_rows()?;
    let rows = try_rows.null_count();
    if rows == 0 {
        return Ok(None);
    }
    let journal = &prepared.journal;
    let text = |name: &str| crate::cells::text_column(journal, name);
    let int = |name: &str| crate::cells::int_column(journal, name);
    let (dags, tasks, runs) = (text("dag_id")?, text("task_id")?, text("run_id")?);
    let (maps, numbers) = (int("map_index")?, int("try_number")?);
    let Some(least) = (0..journal.height())
        .filter(|&row| try_rows.get(row).is_none())
        .map(|row| {
            let text = |column: &StringChunked| column.get(row).unwrap_or_default().to_string();
            (
                text(&dags),
                text(&tasks),
                text(&runs),
                maps.get(row),
                numbers.get(row),
            )
        })
        .min()
    else {
        return Ok(None);
    };
    Ok(Some(WithoutTheirTry { rows, least }))
}
