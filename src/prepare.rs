//! Joins the three canonical tables into the frames every rule reads.
//!
//! * `tries`: attempts of operation tasks, each with its operation, its **audit interval** and
//!   its expected key;
//! * `journal`: journal rows with their operation and the interval of their run;
//! * `objects`: provider objects with liveness and their attribution to a key, an operation
//!   and an interval.
//!
//! The audit interval (SPEC §2) is the data interval where it has length, else the logical
//! date, else `run_after`; `basis` says which one was used.

use std::collections::BTreeSet;

use polars::prelude::*;

use crate::config::{Config, Operation};
use crate::error::{EngineContext, Result};
use crate::keys::conf_column;
use crate::timing::Run;

pub const BASIS_DATA_INTERVAL: &str = "data_interval";
pub const BASIS_LOGICAL_DATE: &str = "logical_date";
pub const BASIS_RUN_AFTER: &str = "run_after";

/// The columns that identify one task instance (all its tries).
pub const TASK_INSTANCE: [&str; 4] = ["dag_id", "task_id", "map_index", "run_id"];
/// The columns that identify one try.
pub const TRY: [&str; 5] = ["dag_id", "task_id", "map_index", "run_id", "try_number"];
/// The columns that identify one interval of one operation.
/// Mapped task instances are separate operations: `map_index` is part of the identity.
pub const OPERATION_INTERVAL: [&str; 4] = ["operation", "map_index", "iv_start", "iv_end"];

/// What the listing covered: objects created outside it are unknown, not absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProviderWindow {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl ProviderWindow {
    pub fn contains(&self) -> Expr {
        let after = self
            .from
            .map(|from| col("recorded_at").gt_eq(lit(from).cast(crate::model::utc())));
        let before = self
            .to
            .map(|to| col("recorded_at").lt_eq(lit(to).cast(crate::model::utc())));
        match (after, before) {
            (Some(a), Some(b)) => a.and(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => lit(true),
        }
    }
}

/// The joined frames, collected once and shared by every rule.
pub struct Prepared {
    pub tries: DataFrame,
    pub journal: DataFrame,
    pub objects: DataFrame,
    pub key_ttl: Option<i64>,
    pub window: ProviderWindow,
}

impl Prepared {
    pub fn tries(&self) -> LazyFrame {
        self.tries.clone().lazy()
    }

    pub fn journal(&self) -> LazyFrame {
        self.journal.clone().lazy()
    }

    pub fn objects(&self) -> LazyFrame {
        self.objects.clone().lazy()
    }

    /// Live objects attributed to an operation interval.
    pub fn live_in_intervals(&self) -> LazyFrame {
        self.objects().filter(
            col("live")
                .and(col("operation").is_not_null())
                .and(col("iv_start").is_not_null()),
        )
    }

    /// `journal` holds the rows of the audited runs; `all_journal` every row the source gave,
    /// so an object journalled by a run outside the audit is recognised and left out rather
    /// than reported as unjournaled.
    pub fn build(
        config: &Config,
        attempts: &DataFrame,
        journal: &DataFrame,
        all_journal: &DataFrame,
        provider: &DataFrame,
        window: ProviderWindow,
    ) -> Result<Prepared> {
        let t = std::time::Instant::now();
        let mut attempts = with_conf_columns(config, attempts)?;
        let operations = operation_column(config, &attempts, "operation")?;
        let attempts_operations_missing = operations.null_count() > 0;
        attempts
            .with_column(operations)
            .engine("naming operations")?;

        // Tries of tasks that are not operations are left out; when there are none the frame
        // is kept as it is rather than copied by a filter that keeps every row.
        let mut tries = attempts.lazy();
        if attempts_operations_missing {
            tries = tries.filter(col("operation").is_not_null());
        }
        let mut tries = tries
            .with_columns(audit_interval())
            .run("preparing tries")?;
        let mut formatted = vec![
            ("iv_start", LABEL_FORMAT.to_string()),
            ("iv_end", LABEL_FORMAT.to_string()),
        ];
        for key in config.operations.iter().filter_map(|op| op.key.as_ref()) {
            formatted.extend(key.times().map(|(c, f)| (c, f.to_string())));
        }
        formatted.sort();
        formatted.dedup();
        for (column, format) in &formatted {
            let times = crate::keys::format_times(&tries, column, format)
                .engine("formatting interval times")?;
            tries
                .with_column(times)
                .engine("formatting interval times")?;
        }
        let tries = tries
            .lazy()
            .with_columns([interval_label(), expected_key(&config.operations)])
            .drop(cols(formatted.iter().map(|(column, format)| {
                crate::keys::formatted_name(column, format)
            })))
            .run("preparing tries")?;
        crate::timing::phase("prepare:tries", t);
        let t = std::time::Instant::now();

        let mut journal = journal.clone();
        journal
            .with_column(operation_column(config, &journal, "configured")?)
            .engine("naming operations")?;
        let journal = journal
            .lazy()
            .with_column(col("map_index").fill_null(lit(-1i64)))
            .collect()
            .engine("preparing the journal")?;
        let (run_row, try_row) = journal_tries(&tries, &journal)?;
        // Each row takes its run's interval from any try of the run (all of them agree).
        let interval = tries
            .select(["iv_start", "iv_end", "basis", "interval"])
            .engine("journal intervals")?
            .take(&run_row)
            .engine("journal intervals")?;
        let mut journal = journal
            .hstack(interval.columns())
            .engine("journal intervals")?;
        journal
            .with_column(try_row.with_name("try_row".into()).into_column())
            .engine("journal tries")?;
        let journal = journal
            .lazy()
            // Journal rows of tasks no [[operation]] names still describe operations.
            .with_column(
                coalesce(&[
                    col("configured"),
                    concat_str([col("dag_id"), col("task_id")], ".", false),
                ])
                .alias("operation"),
            )
            .drop(cols(["configured"]))
            .run("preparing the journal")?;
        crate::timing::phase("prepare:journal", t);
        let t = std::time::Instant::now();

        let objects = attribute_objects(config, &tries, &journal, all_journal, provider)?;
        crate::timing::phase("prepare:objects", t);

        Ok(Prepared {
            tries,
            journal,
            objects,
            key_ttl: config.provider.key_ttl,
            window,
        })
    }
}

/// For each journal row, a row of `tries` in its run (`dag_id`, `run_id`) and the row of its
/// own try (`TRY`), NULL where the audit has none: the joins that give journal rows their
/// interval and their try, as one hash lookup per row (split over two threads) instead of
/// joins on string columns.
fn journal_tries(tries: &DataFrame, journal: &DataFrame) -> Result<(IdxCa, IdxCa)> {
    let keys = TryKeys::of(tries)?;
    let mut by_try: PlHashMap<TryKey<'_>, IdxSize> = PlHashMap::with_capacity(tries.height());
    for (row, key) in keys.rows().enumerate() {
        if let Some(key) = complete(key) {
            by_try.entry(key).or_insert(row as IdxSize);
        }
    }
    let rows = TryKeys::of(journal)?;
    let lookup = |offset: i64, length: usize| -> Vec<Option<IdxSize>> {
        rows.slice(offset, length)
            .rows()
            .map(|key| complete(key).and_then(|key| by_try.get(&key).copied()))
            .collect()
    };
    let half = journal.height() / 2;
    let (mut try_rows, rest) = std::thread::scope(|scope| {
        let second = scope.spawn(|| lookup(half as i64, journal.height() - half));
        let first = lookup(0, half);
        (
            first,
            second.join().expect("the lookup thread does not panic"),
        )
    });
    try_rows.extend(rest);

    // A row of its own try is a row of its run. Rows of tasks that are not operations (or of
    // tries the audit lacks) look their run up by (dag_id, run_id).
    let mut run_rows = try_rows.clone();
    if try_rows.iter().any(Option::is_none) {
        let mut by_run: PlHashMap<(&str, &str), IdxSize> = PlHashMap::new();
        for (row, key) in keys.rows().enumerate() {
            if let (Some(dag), Some(run)) = (key.0, key.1) {
                by_run.entry((dag, run)).or_insert(row as IdxSize);
            }
        }
        for ((run_row, try_row), key) in run_rows.iter_mut().zip(&try_rows).zip(rows.rows()) {
            if let (None, Some(dag), Some(run)) = (try_row, key.0, key.1) {
                *run_row = by_run.get(&(dag, run)).copied();
            }
        }
    }
    Ok((
        IdxCa::from_iter_options("run_row".into(), run_rows.into_iter()),
        IdxCa::from_iter_options("try_row".into(), try_rows.into_iter()),
    ))
}

type TryKey<'a> = (&'a str, &'a str, &'a str, i64, i64);
type PartialKey<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<i64>,
    Option<i64>,
);

fn complete(key: PartialKey<'_>) -> Option<TryKey<'_>> {
    Some((key.0?, key.1?, key.2?, key.3?, key.4?))
}

/// The `TRY` columns of a frame: `(dag_id, run_id, task_id, map_index, try_number)` per row.
struct TryKeys {
    dag: StringChunked,
    run: StringChunked,
    task: StringChunked,
    map: Int64Chunked,
    number: Int64Chunked,
}

impl TryKeys {
    fn of(frame: &DataFrame) -> Result<TryKeys> {
        let text = |name: &str| crate::cells::text_column(frame, name);
        let int = |name: &str| crate::cells::int_column(frame, name);
        Ok(TryKeys {
            dag: text("dag_id")?,
            run: text("run_id")?,
            task: text("task_id")?,
            map: int("map_index")?,
            number: int("try_number")?,
        })
    }

    fn slice(&self, offset: i64, length: usize) -> TryKeys {
        TryKeys {
            dag: self.dag.slice(offset, length),
            run: self.run.slice(offset, length),
            task: self.task.slice(offset, length),
            map: self.map.slice(offset, length),
            number: self.number.slice(offset, length),
        }
    }

    fn rows(&self) -> impl Iterator<Item = PartialKey<'_>> {
        self.dag
            .iter()
            .zip(self.run.iter())
            .zip(self.task.iter())
            .zip(self.map.iter().zip(self.number.iter()))
            .map(|(((dag, run), task), (map, number))| (dag, run, task, map, number))
    }
}

/// The configured operation of each row's `(dag_id, task_id)`, NULL where none matches. The
/// config's globs are matched once per distinct pair, not once per row.
fn operation_column(config: &Config, frame: &DataFrame, name: &str) -> Result<Column> {
    let dags = crate::cells::text_column(frame, "dag_id")?;
    let tasks = crate::cells::text_column(frame, "task_id")?;
    let mut seen: std::collections::HashMap<(&str, &str), Option<&str>> = Default::default();
    let names: StringChunked = dags
        .iter()
        .zip(tasks.iter())
        .map(|pair| match pair {
            (Some(dag), Some(task)) => *seen.entry((dag, task)).or_insert_with(|| {
                config
                    .operation_for(dag, task)
                    .map(|operation| operation.name.as_str())
            }),
            _ => None,
        })
        .collect();
    Ok(names.with_name(name.into()).into_column())
}

/// Extracts the conf values key templates read into `conf.NAME` columns.
fn with_conf_columns(config: &Config, attempts: &DataFrame) -> Result<DataFrame> {
    let names: BTreeSet<&str> = config
        .operations
        .iter()
        .filter_map(|op| op.key.as_ref())
        .flat_map(|key| key.conf_names())
        .collect();
    let mut attempts = attempts.clone();
    if names.is_empty() {
        return Ok(attempts);
    }
    let confs = crate::cells::texts(&attempts, "conf")?;
    let parsed: Vec<Option<serde_json::Value>> = confs
        .iter()
        .map(|conf| {
            conf.as_deref()
                .and_then(|text| serde_json::from_str(text).ok())
        })
        .collect();
    for name in names {
        let values: Vec<Option<String>> = parsed
            .iter()
            .map(|conf| {
                conf.as_ref()
                    .and_then(|conf| conf.get(name))
                    .and_then(|value| match value {
                        serde_json::Value::Null => None,
                        serde_json::Value::String(text) => Some(text.clone()),
                        other => Some(other.to_string()),
                    })
            })
            .collect();
        attempts
            .with_column(Column::new(conf_column(name).into(), values))
            .engine("extracting conf values")?;
    }
    Ok(attempts)
}

fn audit_interval() -> [Expr; 3] {
    let has_length = col("interval_end").gt(col("interval_start"));
    let has_logical = col("logical_date").is_not_null();
    let start = when(has_length.clone())
        .then(col("interval_start"))
        .when(has_logical.clone())
        .then(col("logical_date"))
        .otherwise(col("run_after"))
        .alias("iv_start");
    let end = when(has_length.clone())
        .then(col("interval_end"))
        .when(has_logical.clone())
        .then(col("logical_date"))
        .otherwise(col("run_after"))
        .alias("iv_end");
    let basis = when(has_length)
        .then(lit(BASIS_DATA_INTERVAL))
        .when(has_logical)
        .then(lit(BASIS_LOGICAL_DATE))
        .when(col("run_after").is_not_null())
        .then(lit(BASIS_RUN_AFTER))
        .otherwise(lit(NULL).cast(DataType::String))
        .alias("basis");
    [start, end, basis]
}

const LABEL_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// The interval as people write it: `start/end`, or one instant for a point interval.
fn interval_label() -> Expr {
    let start = col(crate::keys::formatted_name("iv_start", LABEL_FORMAT));
    let end = col(crate::keys::formatted_name("iv_end", LABEL_FORMAT));
    when(col("iv_end").gt(col("iv_start")))
        .then(concat_str([start.clone(), end], "/", false))
        .otherwise(start)
        .alias("interval")
}

/// Each try's key under its operation's template. Operations that share a template are
/// evaluated together: one expression per distinct template, not one per operation.
fn expected_key(operations: &[Operation]) -> Expr {
    let mut templates: Vec<(&crate::keys::KeyTemplate, Vec<String>)> = Vec::new();
    for op in operations {
        let Some(key) = &op.key else { continue };
        match templates
            .iter_mut()
            .find(|(template, _)| template.text == key.text)
        {
            Some((_, names)) => names.push(op.name.clone()),
            None => templates.push((key, vec![op.name.clone()])),
        }
    }
    templates
        .into_iter()
        .rev()
        .fold(
            lit(NULL).cast(DataType::String),
            |otherwise, (key, names)| {
                let names = Series::new("operations".into(), names);
                when(col("operation").is_in(lit(names).implode(false), false))
                    .then(key.expr())
                    .otherwise(otherwise)
            },
        )
        .alias("expected_key")
}

/// The provider's key TTL for each object's operation: the operation's own, else the
/// provider's, else NULL (unknown).
fn key_ttl(config: &Config) -> Expr {
    let default = match config.provider.key_ttl {
        Some(ttl) => lit(ttl),
        None => lit(NULL).cast(DataType::Int64),
    };
    config
        .operations
        .iter()
        .rev()
        .filter_map(|op| op.key_ttl.map(|ttl| (op, ttl)))
        .fold(default, |otherwise, (op, ttl)| {
            when(col("operation").eq(lit(op.name.clone())))
                .then(lit(ttl))
                .otherwise(otherwise)
        })
        .alias("key_ttl")
}

/// Gives every provider object its key, operation and interval.
///
/// * `live`: its status is not one of the configured void statuses (case-insensitive);
/// * `key`: the key the provider echoes, else the key of the journal row that names its id;
/// * operation and interval: those of the journal rows with that key, else of the tries whose
///   expected key it is (a key used in several intervals takes the earliest: K003 reports it);
/// * `named`: a journal row names its id; `committed`: a committed or reconciled row does;
///   `key_journaled`: its key appears in the journal.
///
/// Objects the journal ties to runs outside the audit are dropped: they are another audit's.
fn attribute_objects(
    config: &Config,
    tries: &DataFrame,
    journal: &DataFrame,
    all_journal: &DataFrame,
    provider: &DataFrame,
) -> Result<DataFrame> {
    let void: Vec<String> = config
        .provider
        .void_statuses
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let void = Series::new("void".into(), void);
    let journal_frame = journal;
    let all_journal = all_journal.clone().lazy();

    let named = all_journal
        .clone()
        .filter(col("external_id").is_not_null())
        .group_by([col("external_id")])
        .agg([
            col("op_key").min().alias("named_key"),
            crate::model::is_done(col("phase"))
                .any(true)
                .alias("committed"),
        ])
        .with_column(lit(true).alias("named"));

    // A journal row whose key is its own try's expected key says nothing the try's row does
    // not (same operation, DAG, map index and interval): only the others are kept, which at
    // scale is a third of the rows to sort.
    let try_row = journal_frame
        .column("try_row")
        .engine("try_row")?
        .idx()
        .engine("try_row")?;
    let own_expected = tries
        .column("expected_key")
        .engine("expected_key")?
        .take(try_row)
        .engine("expected_key")?;
    let journal_keys = journal_frame
        .select([
            "op_key",
            "operation",
            "dag_id",
            "map_index",
            "iv_start",
            "iv_end",
            "interval",
        ])
        .engine("journal keys")?
        .hstack(&[own_expected.with_name("own_expected".into())])
        .engine("journal keys")?
        .lazy()
        .filter(
            col("own_expected")
                .is_null()
                .or(col("op_key").neq(col("own_expected"))),
        )
        .select(home("op_key"));
    let expected_keys = tries
        .clone()
        .lazy()
        .filter(col("expected_key").is_not_null())
        .select(home("expected_key"));
    let key_home = concat([journal_keys, expected_keys], UnionArgs::default())
        .engine("collecting keys")?
        // The earliest interval first; ties between operations broken by name, so the order
        // the rows were read in never decides.
        .sort(
            ["iv_start", "operation", "map_index", "iv_end", "dag_id"],
            SortMultipleOptions::default()
                .with_nulls_last(true)
                .with_maintain_order(true),
        )
        .group_by([col("key")])
        .agg([
            col("operation").first(),
            col("dag_id").first(),
            col("map_index").first(),
            col("iv_start").first(),
            col("iv_end").first(),
            col("interval").first(),
        ]);
    let journaled = all_journal
        .clone()
        .select([col("op_key").alias("key")])
        .unique(None, UniqueKeepStrategy::Any)
        .with_column(lit(true).alias("key_journaled"));

    // `raw` is kept in snapshots as evidence; no rule reads it, and carrying the provider's
    // JSON through every join and sort cost most of the memory at a million objects.
    let objects = provider
        .clone()
        .lazy()
        .drop(cols(["raw"]))
        .rename(
            ["interval_start", "interval_end"],
            ["provider_interval_start", "provider_interval_end"],
            true,
        )
        .with_column(
            col("status")
                .str()
                .to_lowercase()
                .is_in(lit(void).implode(false), false)
                .not()
                .alias("live"),
        )
        .join(
            named,
            [col("external_id")],
            [col("external_id")],
            JoinArgs::new(JoinType::Left),
        )
        .with_columns([
            coalesce(&[col("op_key"), col("named_key")]).alias("key"),
            col("named").fill_null(lit(false)),
            col("committed").fill_null(lit(false)),
        ])
        .join(
            key_home,
            [col("key")],
            [col("key")],
            JoinArgs::new(JoinType::Left),
        )
        .join(
            journaled,
            [col("key")],
            [col("key")],
            JoinArgs::new(JoinType::Left),
        )
        .with_column(col("key_journaled").fill_null(lit(false)))
        .filter(
            col("operation")
                .is_not_null()
                .or(col("named").not().and(col("key_journaled").not())),
        )
        .with_column(key_ttl(config))
        .drop(cols(["named_key"]))
        .run("attributing provider objects")?;
    with_creators(objects, all_journal)
}

/// A key (from the column `key`) with the operation interval it belongs to.
fn home(key: &str) -> [Expr; 7] {
    [
        col(key).alias("key"),
        col("operation"),
        col("dag_id"),
        col("map_index"),
        col("iv_start"),
        col("iv_end"),
        col("interval"),
    ]
}

/// The try that created each object: the last try that wrote an intent under the object's key
/// before the object appeared (one second of slack for providers that round to the second),
/// else the try whose committed row names it. `by_run_id`, `by_try_number`, `by_map_index`
/// are NULL where neither is known.
fn with_creators(objects: DataFrame, all_journal: LazyFrame) -> Result<DataFrame> {
    let objects = objects.lazy();
    let by_intent = objects
        .clone()
        .select([col("external_id"), col("key"), col("created_at")])
        .join(
            all_journal
                .clone()
                .filter(col("phase").eq(lit("intent")))
                .select([
                    col("op_key").alias("key"),
                    col("run_id"),
                    col("try_number"),
                    col("map_index"),
                    col("recorded_at"),
                ]),
            [col("key")],
            [col("key")],
            JoinArgs::new(JoinType::Inner),
        )
        .filter(
            col("recorded_at")
                .cast(DataType::Int64)
                .lt_eq(col("created_at").cast(DataType::Int64) + lit(1_000_000i64)),
        )
        .sort(["recorded_at", "try_number"], Default::default())
        .group_by([col("external_id")])
        .agg([
            col("run_id").last().alias("intent_run_id"),
            col("try_number").last().alias("intent_try_number"),
            col("map_index").last().alias("intent_map_index"),
        ]);
    let by_commit = all_journal
        .filter(crate::model::is_done(col("phase")).and(col("external_id").is_not_null()))
        .sort(["recorded_at", "try_number"], Default::default())
        .group_by([col("external_id")])
        .agg([
            col("run_id").first().alias("commit_run_id"),
            col("try_number").first().alias("commit_try_number"),
            col("map_index").first().alias("commit_map_index"),
        ]);
    objects
        .join(
            by_intent,
            [col("external_id")],
            [col("external_id")],
            JoinArgs::new(JoinType::Left),
        )
        .join(
            by_commit,
            [col("external_id")],
            [col("external_id")],
            JoinArgs::new(JoinType::Left),
        )
        .with_columns([
            coalesce(&[col("intent_run_id"), col("commit_run_id")]).alias("by_run_id"),
            coalesce(&[col("intent_try_number"), col("commit_try_number")]).alias("by_try_number"),
            coalesce(&[col("intent_map_index"), col("commit_map_index")]).alias("by_map_index"),
        ])
        .drop(cols([
            "intent_run_id",
            "intent_try_number",
            "intent_map_index",
            "commit_run_id",
            "commit_try_number",
            "commit_map_index",
        ]))
        .run("finding which try created each object")
}
