//! Stage 1, scope: which runs, journal rows and provider objects an audit is about. `--dag`,
//! the activity window and the interval range pick the runs; their journal rows come along;
//! the provider is read around the audited tries (SPEC §3).

use polars::prelude::*;

use crate::config::glob_match;
use crate::error::{EngineContext, Result};
use crate::model::utc;
use crate::prepare::ProviderWindow;
use crate::sources::Tables;

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
    /// The provider window of the whole audit, for one part of it (`onceonly split`): used
    /// instead of the window around this audit's own tries.
    pub provider_window: Option<ProviderWindow>,
    /// Also write what `onceonly merge` needs of this part's audit (`audit --partition-out`).
    pub partition_out: Option<super::partition::PartitionOut>,
    /// Nothing asks the audit for its verdicts frame (`Audit::verdicts`): what only the frame
    /// shows (`verdicts::FRAME_READS`) is left unread where it can be (`left_unread`), and
    /// the frame is refused. `audit` sets it when none of its outputs shows the verdicts.
    pub without_verdicts_frame: bool,
    /// `audit --allow-empty`: a scope without a try of an operation task is accepted rather
    /// than refused (`crate::known::refuse_nothing`).
    pub allow_empty: bool,
}

impl AuditOptions {
    /// Whether `--interval-from` or `--interval-to` limits the audit: the range, open ends
    /// None.
    pub fn intervals(&self) -> Option<(Option<i64>, Option<i64>)> {
        (self.interval_from.is_some() || self.interval_to.is_some())
            .then_some((self.interval_from, self.interval_to))
    }
}

/// The margin around the audited tries when none is configured.
pub const DEFAULT_SLACK: i64 = 3_600_000_000;

/// How much of what was read an audit is about, for its coverage: the audited tries and
/// journal rows, and the created-at window the provider covers for them.
pub struct Scoped {
    pub attempts: usize,
    pub journal: usize,
    pub window: ProviderWindow,
}

/// The audited tries and their journal rows, cut before the provider is needed
/// ([`cut_tries`]); [`cut_provider`] then cuts the provider to their window.
pub struct ScopedTries {
    pub attempts: DataFrame,
    pub journal: DataFrame,
    /// The window the audited tries need; None when every run is audited: the provider as
    /// read, over the window it was listed for.
    window: Option<ProviderWindow>,
}

impl ScopedTries {
    /// The window the audited tries need ([`cut_provider`]).
    pub fn window(&self) -> Option<ProviderWindow> {
        self.window
    }
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
/// along. The provider is then read from the earliest try start minus the slack to the latest
/// try end plus the slack (SPEC §3; [`cut_provider`]).
pub fn cut_tries(
    attempts: &DataFrame,
    journal: &DataFrame,
    options: &AuditOptions,
) -> Result<ScopedTries> {
    let mut attempts = attempts.clone().lazy();
    let mut journal = journal.clone().lazy();
    if let Some(dag) = &options.dag {
        attempts = attempts.filter(dag_matches(dag));
        journal = journal.filter(dag_matches(dag));
    }
    let Some(runs) = audited_runs(&attempts, options) else {
        return Ok(ScopedTries {
            attempts: attempts.collect().engine("filtering attempts")?,
            journal: journal.collect().engine("filtering journal")?,
            window: None,
        });
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
    let window = match options.provider_window {
        Some(window) => window,
        None => around_tries(&attempts, options)?,
    };
    Ok(ScopedTries {
        attempts,
        journal,
        window: Some(window),
    })
}

/// The provider objects of the audited tries' window ([`cut_tries`]), and the window. The
/// objects' raw JSON is left out: it is kept in a snapshot and hashed into a plan's
/// fingerprint, from the tables as read, and the audit reads nothing of it.
pub fn cut_provider(
    tables: &Tables,
    window: Option<ProviderWindow>,
) -> Result<(DataFrame, ProviderWindow)> {
    let provider = match tables.provider.drop("raw") {
        Ok(without) => without,
        // A snapshot read without it.
        Err(_) => tables.provider.clone(),
    };
    let Some(window) = window else {
        return Ok((provider, tables.listed_window.unwrap_or_default()));
    };
    let created = |bound: Option<i64>, above: bool| match bound {
        None => lit(true),
        Some(at) if above => col("created_at").gt_eq(lit(at).cast(utc())),
        Some(at) => col("created_at").lt_eq(lit(at).cast(utc())),
    };
    let provider = provider
        .lazy()
        .filter(created(window.from, true).and(created(window.to, false)))
        .collect()
        .engine("filtering provider")?;
    Ok((provider, window))
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
    if let Some((from, to)) = options.intervals() {
        let interval = between(crate::prepare::interval_start(), from, to);
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

/// The earliest try start and the latest try end (or start, for a try still running).
fn try_bounds(attempts: &DataFrame) -> Result<(Option<i64>, Option<i64>)> {
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
