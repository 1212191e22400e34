//! `onceonly audit`: every finding for the tries that ran in a window.

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::config::{Config, glob_match};
use crate::error::{EngineContext, Result};
use crate::model::{Table, utc};
use crate::plan::Plan;
use crate::prepare::{Prepared, ProviderWindow};
use crate::report::{Coverage, Report, SkippedRule, SourceCoverage, Summary};
use crate::rules::{self, Rule};
use crate::sources::{self, Tables};
use crate::timestamp;

#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// A dag_id or glob.
    pub dag: Option<String>,
    /// Activity window: runs with a try that started or ended in it, microseconds.
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// Data intervals: runs whose audit interval starts at or after `interval_from` and before
    /// `interval_to`, microseconds (combined with the activity window: both must hold).
    pub interval_from: Option<i64>,
    pub interval_to: Option<i64>,
    /// Margin around the audited tries for the provider window, microseconds (None: the
    /// listing's configured `slack`, else one hour).
    pub slack: Option<i64>,
    /// Rule codes to run; empty runs all.
    pub rules: Vec<String>,
    /// Keep what was read here (Parquet per table and a manifest).
    pub save_snapshot: Option<std::path::PathBuf>,
    /// Read a saved snapshot instead of the configured sources.
    pub from_snapshot: Option<std::path::PathBuf>,
    /// Make a repair plan (`Audit::plan`).
    pub plan: bool,
    /// An earlier JSON (or NDJSON) report to mark findings new, persisting or resolved against.
    pub baseline: Option<std::path::PathBuf>,
}

/// What an audit produced: the report, a verdict for every operation try, and the repair plan
/// when one was asked for.
pub struct Audit {
    pub report: Report,
    pub verdicts: DataFrame,
    pub plan: Option<Plan>,
    /// The joined frames the rules read, for commands that show them (`trace`).
    pub prepared: Prepared,
}

pub fn run(config: &Config, options: &AuditOptions) -> Result<Audit> {
    let filter = sources::airflow_db::Filter {
        dag: options.dag.clone(),
        since: options.since,
        until: options.until,
    };
    let mut options = options.clone();
    if options.slack.is_none() {
        options.slack = config.provider.source.listing_slack();
    }
    let options = &options;
    let started = std::time::Instant::now();
    let tables = match &options.from_snapshot {
        Some(dir) => sources::saved::load(dir, options.save_snapshot.is_some())?.0,
        None => {
            let window = sources::ListingWindow {
                slack: options.slack.unwrap_or(DEFAULT_SLACK),
                of_attempts: &|attempts| listing_window(attempts, options),
                list_early: options.interval_from.is_none() && options.interval_to.is_none(),
            };
            sources::load(config, &filter, &window)?
        }
    };
    crate::timing::phase("read", started);
    for table in Table::ALL {
        crate::timing::size(table.name(), tables.get(table));
    }
    if let Some(dir) = &options.save_snapshot {
        let window = sources::saved::Window {
            dag: options.dag.clone(),
            since: options.since.map(timestamp::format),
            until: options.until.map(timestamp::format),
            provider_from: tables
                .listed_window
                .and_then(|w| w.from)
                .map(timestamp::format),
            provider_to: tables
                .listed_window
                .and_then(|w| w.to)
                .map(timestamp::format),
        };
        sources::saved::save(dir, &tables, window)?;
    }
    audit_tables(config, &tables, options)
}

pub fn audit_tables(config: &Config, tables: &Tables, options: &AuditOptions) -> Result<Audit> {
    // A plan quotes the inputs' fingerprint, which for tables read from live sources means
    // encoding them as a snapshot would: seconds at a million intervals, done on a thread of
    // its own while the audit runs.
    std::thread::scope(|threads| {
        let fingerprint = options
            .plan
            .then(|| threads.spawn(|| sources::saved::fingerprint(tables)));
        audit_with(config, tables, options, fingerprint)
    })
}

type Fingerprint<'scope> = std::thread::ScopedJoinHandle<'scope, Result<String>>;

fn audit_with(
    config: &Config,
    tables: &Tables,
    options: &AuditOptions,
    fingerprint: Option<Fingerprint<'_>>,
) -> Result<Audit> {
    let started = std::time::Instant::now();
    let (attempts, journal, provider, window) = scope(tables, options)?;
    let mut prepared = Prepared::build(
        config,
        &attempts,
        &journal,
        &tables.journal,
        &provider,
        window,
    )?;
    // A scoped audit reports nothing that belongs elsewhere (SPEC §7): objects of audited
    // rows stay; others only if they may be the audit's (a key template claims them for an
    // audited DAG, their own interval is in the range).
    let intervals = (options.interval_from.is_some() || options.interval_to.is_some())
        .then_some((options.interval_from, options.interval_to));
    let objects_left_out = if options.dag.is_some() || intervals.is_some() {
        let scope = crate::prepare::Scope {
            dag: options.dag.as_deref(),
            intervals,
        };
        let dropped = provider.height() - prepared.objects.height();
        Some(crate::prepare::scope_objects(
            config,
            &mut prepared,
            scope,
            dropped,
        )?)
    } else {
        None
    };
    // What preparing freed goes back before the rules and the verdicts allocate on threads of
    // their own.
    crate::memory::release_free();
    crate::timing::phase("prepare", started);
    crate::timing::size("tries", &prepared.tries);
    crate::timing::size("journal (prepared)", &prepared.journal);
    crate::timing::size("objects", &prepared.objects);

    let selected: Vec<&dyn Rule> = if options.rules.is_empty() {
        rules::REGISTRY.to_vec()
    } else {
        rules::REGISTRY
            .iter()
            .copied()
            .filter(|rule| {
                options
                    .rules
                    .iter()
                    .any(|code| code.eq_ignore_ascii_case(rule.code()))
            })
            .collect()
    };
    // The verdicts do not depend on the findings: they are computed on a thread of their own
    // while the rules run.
    let started = std::time::Instant::now();
    let (findings, verdicts) = std::thread::scope(|threads| {
        let verdicts = threads.spawn(|| verdicts(&prepared));
        let findings = rules::run_all(&prepared, &selected);
        crate::timing::phase("rules", started);
        let verdicts = verdicts.join().expect("the verdicts thread does not panic");
        (findings, verdicts)
    });
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
    let sources = Table::ALL
        .iter()
        .map(|table| SourceCoverage {
            table: table.name(),
            source: tables.origin(*table).to_string(),
            rows: tables.get(*table).height(),
            rows_audited: match table {
                Table::Attempts => attempts.height(),
                Table::Journal => journal.height(),
                Table::Provider => prepared.objects.height(),
            },
        })
        .collect();
    let coverage = Coverage {
        since: options.since.map(timestamp::format),
        until: options.until.map(timestamp::format),
        interval_from: options.interval_from.map(timestamp::format),
        interval_to: options.interval_to.map(timestamp::format),
        dag: options.dag.clone(),
        sources,
        provider_from: window.from.map(timestamp::format),
        provider_to: window.to.map(timestamp::format),
        interval_basis,
        operations: config.operations.iter().map(|op| op.name.clone()).collect(),
        runs,
        tries: prepared.tries.height(),
        rules_skipped,
        warnings: tables.warnings.clone(),
        objects_left_out,
    };
    let summary = Summary::new(&findings, verdict_counts);
    let started = std::time::Instant::now();
    let plan = match fingerprint {
        Some(fingerprint) => {
            let fingerprint = fingerprint
                .join()
                .expect("the fingerprint thread does not panic")?;
            Some(crate::plan::build(&findings, &prepared, fingerprint)?)
        }
        None => None,
    };
    if options.plan {
        crate::timing::phase("plan", started);
    }
    let mut report = Report {
        format_version: crate::report::FORMAT_VERSION,
        coverage,
        summary,
        findings,
        baseline: None,
    };
    if let Some(path) = &options.baseline {
        report.compare(&path.display().to_string(), earlier_findings(path)?);
    }
    Ok(Audit {
        report,
        verdicts,
        plan,
        prepared,
    })
}

/// The findings of an earlier report, JSON (`--format json`) or NDJSON (`--format ndjson`).
fn earlier_findings(path: &std::path::Path) -> Result<Vec<serde_json::Value>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| crate::error::Error::io(&shown, err))?;
    let not_a_report = |detail: String| {
        crate::error::Error::input(
            crate::error::Location::source(&shown),
            format!("not an onceonly report (--format json or ndjson): {detail}"),
        )
    };
    if let Ok(report) = serde_json::from_str::<serde_json::Value>(&text) {
        return match report.get("findings").and_then(|f| f.as_array()) {
            Some(findings) => Ok(findings.clone()),
            None => Err(not_a_report("it has no `findings` list".into())),
        };
    }
    let mut findings = Vec::new();
    for (index, line) in text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
    {
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|err| not_a_report(format!("line {}: {err}", index + 1)))?;
        if value["type"] == "finding" {
            findings.push(value);
        }
    }
    Ok(findings)
}

fn dag_matches(pattern: &str) -> Expr {
    let pattern = pattern.to_string();
    col("dag_id").map(
        move |column| {
            let matched: BooleanChunked = column
                .str()?
                .iter()
                .map(|dag| dag.map(|dag| glob_match(&pattern, dag)))
                .collect();
            Ok(matched.into_column())
        },
        |_, field| Ok(Field::new(field.name().clone(), DataType::Boolean)),
    )
}

/// Applies `--dag`, the activity window and the interval range: the audited runs are those
/// with a try active in the window whose interval starts in the range; their journal rows come
/// along; the provider is read from the earliest try start minus the slack to the latest try
/// end plus the slack (SPEC §3).
fn scope(
    tables: &Tables,
    options: &AuditOptions,
) -> Result<(DataFrame, DataFrame, DataFrame, ProviderWindow)> {
    let mut attempts = tables.attempts.clone().lazy();
    let mut journal = tables.journal.clone().lazy();
    if let Some(dag) = &options.dag {
        attempts = attempts.filter(dag_matches(dag));
        journal = journal.filter(dag_matches(dag));
    }
    let Some(runs) = audited_runs(&attempts, options) else {
        let attempts = attempts.collect().engine("filtering attempts")?;
        let journal = journal.collect().engine("filtering journal")?;
        return Ok((
            attempts,
            journal,
            tables.provider.clone(),
            tables.listed_window.unwrap_or_default(),
        ));
    };
    let on = [col("dag_id"), col("run_id")];
    let attempts = attempts
        .join(
            runs.clone(),
            on.clone(),
            on.clone(),
            JoinArgs::new(JoinType::Semi),
        )
        .collect()
        .engine("filtering attempts")?;
    let journal = journal
        .join(runs, on.clone(), on, JoinArgs::new(JoinType::Semi))
        .collect()
        .engine("filtering journal")?;
    let window = around_tries(&attempts, options)?;
    let created = |bound: Option<i64>, above: bool| match bound {
        None => lit(true),
        Some(at) if above => col("created_at").gt_eq(lit(at).cast(utc())),
        Some(at) => col("created_at").lt_eq(lit(at).cast(utc())),
    };
    let provider = tables
        .provider
        .clone()
        .lazy()
        .filter(created(window.from, true).and(created(window.to, false)))
        .collect()
        .engine("filtering provider")?;
    Ok((attempts, journal, provider, window))
}

/// The audited runs (`dag_id`, `run_id`) among `attempts`: those with a try active in the
/// activity window (`--since`/`--until`) and whose audit interval starts in the interval range
/// (`--interval-from`/`--interval-to`). None when neither is given: every run.
fn audited_runs(attempts: &LazyFrame, options: &AuditOptions) -> Option<LazyFrame> {
    let at = |micros: Option<i64>, default: i64| lit(micros.unwrap_or(default)).cast(utc());
    let between = |value: Expr, from: Option<i64>, to: Option<i64>| {
        value
            .clone()
            .gt_eq(at(from, i64::MIN / 2))
            .and(value.lt(at(to, i64::MAX / 2)))
    };
    let mut runs = None;
    if options.since.is_some() || options.until.is_some() {
        let active = |column: &str| between(col(column), options.since, options.until);
        runs = Some(active("start_date").or(active("end_date")));
    }
    if options.interval_from.is_some() || options.interval_to.is_some() {
        let interval = between(
            crate::prepare::interval_start(),
            options.interval_from,
            options.interval_to,
        );
        // A run is one interval: any of its tries tells it, and the window's test applies to
        // the run as a whole.
        let with_interval = attempts
            .clone()
            .filter(interval)
            .select([col("dag_id"), col("run_id")])
            .unique(None, UniqueKeepStrategy::Any);
        let active = match runs.take() {
            Some(active) => attempts.clone().filter(active),
            None => attempts.clone(),
        };
        let on = [col("dag_id"), col("run_id")];
        return Some(
            active
                .select([col("dag_id"), col("run_id")])
                .unique(None, UniqueKeepStrategy::Any)
                .join(with_interval, on.clone(), on, JoinArgs::new(JoinType::Semi)),
        );
    }
    runs.map(|active| {
        attempts
            .clone()
            .filter(active)
            .select([col("dag_id"), col("run_id")])
            .unique(None, UniqueKeepStrategy::Any)
    })
}

/// The created-at window the provider must cover for `attempts` (the audited tries): from the
/// earliest try start minus the slack to the latest try end plus the slack (SPEC §3). With no
/// try there is nothing to attribute: the activity window itself.
fn around_tries(attempts: &DataFrame, options: &AuditOptions) -> Result<ProviderWindow> {
    let slack = options.slack.unwrap_or(DEFAULT_SLACK);
    Ok(match try_bounds(attempts)? {
        (Some(from), Some(to)) => ProviderWindow {
            from: Some(from - slack),
            to: Some(to + slack),
        },
        _ => ProviderWindow {
            from: options.since,
            to: options.until,
        },
    })
}

/// The window a provider listing is asked for, given every try the Airflow source returned
/// (already cut to `--dag` and the activity window): the one the audited tries need.
pub fn listing_window(attempts: &DataFrame, options: &AuditOptions) -> Result<ProviderWindow> {
    let lazy = attempts.clone().lazy();
    match audited_runs(&lazy, options) {
        None => around_tries(attempts, options),
        Some(runs) => {
            let on = [col("dag_id"), col("run_id")];
            let audited = lazy
                .join(runs, on.clone(), on, JoinArgs::new(JoinType::Semi))
                .collect()
                .engine("the listing window")?;
            around_tries(&audited, options)
        }
    }
}

/// The margin around the audited tries when none is configured.
pub const DEFAULT_SLACK: i64 = 3_600_000_000;

/// The earliest try start and the latest try end (or start, for a try still running).
pub fn try_bounds(attempts: &DataFrame) -> Result<(Option<i64>, Option<i64>)> {
    let bounds = attempts
        .clone()
        .lazy()
        .select([
            col("start_date").min().cast(DataType::Int64).alias("from"),
            polars::lazy::dsl::max_horizontal([col("end_date").max(), col("start_date").max()])
                .engine("provider window")?
                .cast(DataType::Int64)
                .alias("to"),
        ])
        .collect()
        .engine("provider window")?;
    let first = |name: &str| -> Result<Option<i64>> {
        Ok(crate::cells::ints(&bounds, name)?
            .first()
            .copied()
            .flatten())
    };
    Ok((first("from")?, first("to")?))
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
    let unnumbered: std::collections::HashSet<_> =
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
    Ok((prepared.codes.runs + unnumbered.len(), counts))
}
