//! What `trace` and `ttl-risk` ask of an audit beyond its report: the intervals a selector
//! means, the journal rows and provider objects of intervals or keys, the intervals of a
//! range with the key a re-run would send. Each question reads the joined frames here, so
//! the commands know nothing of how `prepare` lays them out.

use polars::prelude::*;

use crate::cells::{bools, ints, texts};
use crate::error::{EngineContext, Result};
use crate::model::{Table, utc};
use crate::prepare::interval_texts;

use super::Audit;

/// A journal row, as a timeline shows it.
#[derive(Debug, Clone)]
pub struct JournalRow {
    pub op_key: Option<String>,
    pub run_id: Option<String>,
    pub try_number: Option<i64>,
    pub map_index: Option<i64>,
    pub phase: Option<String>,
    pub external_id: Option<String>,
    pub recorded_at: Option<i64>,
}

/// A provider object with what the audit worked out about it.
#[derive(Debug, Clone)]
pub struct ProviderObject {
    pub external_id: Option<String>,
    pub key: Option<String>,
    pub created_at: Option<i64>,
    pub status: Option<String>,
    /// Not voided.
    pub live: Option<bool>,
    /// Whether the journal recorded the response that created it.
    pub committed: Option<bool>,
    /// The try that created it (run_id, try_number, map_index), as the journal says.
    pub by_run_id: Option<String>,
    pub by_try_number: Option<i64>,
    pub by_map_index: Option<i64>,
    /// The pipeline interval it is attributed to (pipeline number, map index, start).
    pub pipeline: Option<i64>,
    pub map_index: Option<i64>,
    pub iv_start: Option<i64>,
}

/// A pipeline interval tried in a range, with what its tries say.
#[derive(Debug, Clone)]
pub struct TriedInterval {
    pub pipeline: Option<i64>,
    pub operation: Option<String>,
    pub map_index: Option<i64>,
    pub iv_start: Option<i64>,
    /// The interval as reports name it.
    pub label: Option<String>,
    /// The key the operation's template gives (the first try's that gives one: by start, a
    /// try that never started counting as earliest, then try number, then the tries' own
    /// order).
    pub expected_key: Option<String>,
}

/// The intent rows of a pipeline interval: the key of the latest and how many keys differ.
#[derive(Debug, Clone)]
pub struct IntentKeys {
    pub pipeline: Option<i64>,
    pub map_index: Option<i64>,
    pub iv_start: Option<i64>,
    pub last_key: Option<String>,
    pub key_count: usize,
}

impl Audit {
    /// The DAG's intervals that start at `at` or hold it, by label, sorted, each once.
    pub fn intervals_at(&self, dag: &str, at: i64) -> Result<Vec<String>> {
        let at = lit(at).cast(utc());
        let hits = self
            .prepared
            .tries()
            .filter(
                of_dag(dag).and(
                    col("iv_start")
                        .eq(at.clone())
                        .or(col("iv_start").lt_eq(at.clone()).and(col("iv_end").gt(at))),
                ),
            )
            .collect()
            .engine("trace: intervals")?;
        Ok(distinct(interval_texts(&hits)?))
    }

    /// The intervals of a run of the DAG, by label.
    pub fn intervals_of_run(&self, dag: &str, run_id: &str) -> Result<Vec<String>> {
        let hits = self
            .prepared
            .tries()
            .filter(of_dag(dag).and(col("run_id").eq(lit(run_id.to_string()))))
            .collect()
            .engine("trace: run")?;
        Ok(distinct(interval_texts(&hits)?))
    }

    /// The intervals journal rows or provider objects under `key` belong to, by label.
    pub fn intervals_of_key(&self, key: &str) -> Result<Vec<String>> {
        let journal = self
            .prepared
            .journal()
            .filter(col("op_key").eq(lit(key.to_string())))
            .collect()
            .engine("trace: key")?;
        let objects = self
            .prepared
            .objects()
            .filter(col("key").eq(lit(key.to_string())))
            .collect()
            .engine("trace: key")?;
        let mut intervals = interval_texts(&journal)?;
        intervals.extend(interval_texts(&objects)?);
        Ok(distinct(intervals))
    }

    /// How many intervals of the DAG the audit read.
    pub fn interval_count(&self, dag: &str) -> Result<usize> {
        let tries = self
            .prepared
            .tries()
            .filter(of_dag(dag))
            .select([col("iv_start"), col("iv_end")])
            .collect()
            .engine("trace: intervals")?;
        // Counted by label, NULL (no interval) being one.
        let mut labels = interval_texts(&tries)?;
        labels.sort();
        labels.dedup();
        Ok(labels.len())
    }

    /// The journal rows of the DAG's `intervals` and those under `keys`, in the journal's own
    /// order ([`Table::sort_key`]).
    pub fn journal_of(
        &self,
        dag: &str,
        intervals: &[String],
        keys: &[String],
    ) -> Result<Vec<JournalRow>> {
        let journal = labelled(self.prepared.journal(), "op_key", dag, keys)?;
        let journal = selected(journal, "op_key", dag, intervals, keys)
            .sort(Table::Journal.sort_key().to_vec(), Default::default())
            .collect()
            .engine("trace: journal")?;
        let (keys, runs, numbers, maps, phases, ids, at) = (
            texts(&journal, "op_key")?,
            texts(&journal, "run_id")?,
            ints(&journal, "try_number")?,
            ints(&journal, "map_index")?,
            texts(&journal, "phase")?,
            texts(&journal, "external_id")?,
            ints(&journal, "recorded_at")?,
        );
        Ok((0..journal.height())
            .map(|row| JournalRow {
                op_key: keys[row].clone(),
                run_id: runs[row].clone(),
                try_number: numbers[row],
                map_index: maps[row],
                phase: phases[row].clone(),
                external_id: ids[row].clone(),
                recorded_at: at[row],
            })
            .collect())
    }

    /// The provider objects of the DAG's `intervals` and those under `keys`, in creation order.
    pub fn objects_of(
        &self,
        dag: &str,
        intervals: &[String],
        keys: &[String],
    ) -> Result<Vec<ProviderObject>> {
        let objects = labelled(self.prepared.objects(), "key", dag, keys)?;
        let objects = selected(objects, "key", dag, intervals, keys)
            .sort(Table::Provider.sort_key().to_vec(), Default::default())
            .collect()
            .engine("trace: objects")?;
        provider_objects(&objects)
    }

    /// The verdicts of the tries of the DAG's `intervals` and those under `keys`.
    pub fn verdicts_of(
        &self,
        dag: &str,
        intervals: &[String],
        keys: &[String],
    ) -> Result<DataFrame> {
        selected(
            self.verdicts()?.clone().lazy(),
            "op_key",
            dag,
            intervals,
            keys,
        )
        .collect()
        .engine("trace: tries")
    }

    /// The DAG's pipeline intervals starting from `from` to `to` (both included) that a try
    /// started before `before` ran (or a try that has not started), in order of start,
    /// operation, task and map index.
    pub fn tried_intervals(
        &self,
        dag: &str,
        from: i64,
        to: i64,
        before: i64,
    ) -> Result<Vec<TriedInterval>> {
        let intervals = self
            .prepared
            .tries()
            .filter(starting_in(dag, from, to).and(earlier("start_date", before)))
            .sort(
                Table::Attempts.sorted_by(&["start_date", "try_number"]),
                Default::default(),
            )
            .group_by(by_pipeline_interval())
            .agg([
                col("task_id").first(),
                col("expected_key").drop_nulls().first(),
            ])
            .collect()
            .engine("ttl-risk: intervals")?;
        let intervals = self
            .prepared
            .operations
            .with_column(&intervals)?
            .sort(
                ["iv_start", "operation", "task_id", "map_index", "iv_end"],
                Default::default(),
            )
            .engine("ttl-risk: intervals")?;
        let (pipelines, operations, maps, starts, labels, expected) = (
            ints(&intervals, "pipeline")?,
            texts(&intervals, "operation")?,
            ints(&intervals, "map_index")?,
            ints(&intervals, "iv_start")?,
            interval_texts(&intervals)?,
            texts(&intervals, "expected_key")?,
        );
        Ok((0..intervals.height())
            .map(|row| TriedInterval {
                pipeline: pipelines[row],
                operation: operations[row].clone(),
                map_index: maps[row],
                iv_start: starts[row],
                label: labels[row].clone(),
                expected_key: expected[row].clone(),
            })
            .collect())
    }

    /// The intent keys of each of the DAG's pipeline intervals starting from `from` to `to`,
    /// of the intents recorded before `before`. The last key is the last intent's: by the time
    /// it was recorded, then try number, then the journal's own order.
    pub fn intent_keys(
        &self,
        dag: &str,
        from: i64,
        to: i64,
        before: i64,
    ) -> Result<Vec<IntentKeys>> {
        let keys = self
            .prepared
            .journal()
            .filter(
                starting_in(dag, from, to)
                    .and(col("phase").eq(lit("intent")))
                    .and(earlier("recorded_at", before)),
            )
            .sort(
                Table::Journal.sorted_by(&["recorded_at", "try_number"]),
                Default::default(),
            )
            .group_by(by_pipeline_interval())
            .agg([
                col("op_key")
                    .n_unique()
                    .cast(DataType::Int64)
                    .alias("key_count"),
                col("op_key").last().alias("last_key"),
            ])
            .collect()
            .engine("ttl-risk: keys")?;
        let (pipelines, maps, starts, last, counts) = (
            ints(&keys, "pipeline")?,
            ints(&keys, "map_index")?,
            ints(&keys, "iv_start")?,
            texts(&keys, "last_key")?,
            ints(&keys, "key_count")?,
        );
        Ok((0..keys.height())
            .map(|row| IntentKeys {
                pipeline: pipelines[row],
                map_index: maps[row],
                iv_start: starts[row],
                last_key: last[row].clone(),
                key_count: counts[row].unwrap_or(0) as usize,
            })
            .collect())
    }

    /// Every object, live or void, created before `before` and attributed to one of the DAG's
    /// pipeline intervals starting from `from` to `to`, in creation order.
    pub fn objects_starting_in(
        &self,
        dag: &str,
        from: i64,
        to: i64,
        before: i64,
    ) -> Result<Vec<ProviderObject>> {
        let objects = self
            .prepared
            .objects()
            .filter(
                col(crate::prepare::model::interval::PIPELINE)
                    .is_not_null()
                    .and(col("iv_start").is_not_null())
                    .and(starting_in(dag, from, to))
                    .and(earlier("created_at", before)),
            )
            .sort(["created_at", "external_id"], Default::default())
            .collect()
            .engine("ttl-risk: objects")?;
        provider_objects(&objects)
    }

    /// The (start, end) of each of the DAG's intervals that a try started before `before` has
    /// (or a try that has not started), once each, in order of start.
    pub fn interval_spans(
        &self,
        dag: &str,
        before: i64,
    ) -> Result<Vec<(Option<i64>, Option<i64>)>> {
        let spans = self
            .prepared
            .tries()
            .filter(of_dag(dag).and(earlier("start_date", before)))
            .select([col("iv_start"), col("iv_end")])
            .unique(None, UniqueKeepStrategy::Any)
            .sort(["iv_start"], Default::default())
            .collect()
            .engine("ttl-risk: the DAG's intervals")?;
        let (starts, ends) = (ints(&spans, "iv_start")?, ints(&spans, "iv_end")?);
        Ok(starts.into_iter().zip(ends).collect())
    }

    /// The dag_ids of the audited tries that `pattern` (a dag_id or glob) matches, sorted.
    pub fn dag_ids(&self, pattern: &str) -> Result<Vec<String>> {
        let dags = self
            .prepared
            .tries()
            .select([col("dag_id")])
            .unique(None, UniqueKeepStrategy::Any)
            .collect()
            .engine("ttl-risk: the DAGs")?;
        let mut dags: Vec<String> = texts(&dags, "dag_id")?
            .into_iter()
            .flatten()
            .filter(|dag| crate::glob::glob_match(pattern, dag))
            .collect();
        dags.sort();
        Ok(dags)
    }
}

/// Rows whose time `column` is before `before`, or NULL (a try not started, an object or a
/// record without a time): what had happened at `ttl-risk --at`.
fn earlier(column: &str, before: i64) -> Expr {
    col(column)
        .is_null()
        .or(col(column).lt(lit(before).cast(utc())))
}

fn of_dag(dag: &str) -> Expr {
    col("dag_id").eq(lit(dag.to_string()))
}

/// Rows of the DAG whose interval starts from `from` to `to`, both included.
fn starting_in(dag: &str, from: i64, to: i64) -> Expr {
    of_dag(dag)
        .and(col("iv_start").gt_eq(lit(from).cast(utc())))
        .and(col("iv_start").lt_eq(lit(to).cast(utc())))
}

/// Each DAG's task is its own pipeline, whatever operation names it (SPEC §4).
fn by_pipeline_interval() -> Vec<Expr> {
    crate::prepare::PIPELINE_INTERVAL
        .iter()
        .map(|name| col(*name))
        .collect()
}

/// The rows of the DAG and those whose `key_column` is one of `keys`, with their interval
/// labels, for [`selected`] to pick from.
fn labelled(frame: LazyFrame, key_column: &str, dag: &str, keys: &[String]) -> Result<LazyFrame> {
    let key_list = lit(Series::new("k".into(), keys.to_vec())).implode(false);
    let rows = frame
        .filter(of_dag(dag).or(col(key_column).is_in(key_list, false)))
        .collect()
        .engine("trace: intervals")?;
    Ok(crate::prepare::with_interval_labels(&rows)?.lazy())
}

/// Rows of the DAG's `intervals`, and rows whose `key_column` is one of `keys` (of a frame
/// with interval labels: the verdicts, or one [`labelled`] made).
fn selected(
    frame: LazyFrame,
    key_column: &str,
    dag: &str,
    intervals: &[String],
    keys: &[String],
) -> LazyFrame {
    let interval_list = lit(Series::new("i".into(), intervals.to_vec())).implode(false);
    let key_list = lit(Series::new("k".into(), keys.to_vec())).implode(false);
    frame.filter(
        of_dag(dag)
            .and(col("interval").is_in(interval_list, false))
            .or(col(key_column).is_in(key_list, false)),
    )
}

fn provider_objects(objects: &DataFrame) -> Result<Vec<ProviderObject>> {
    let (ids, keys, created, statuses, live, committed) = (
        texts(objects, "external_id")?,
        texts(objects, "key")?,
        ints(objects, "created_at")?,
        texts(objects, "status")?,
        bools(objects, "live")?,
        bools(objects, "committed")?,
    );
    let (by_run, by_try, by_map) = (
        texts(objects, "by_run_id")?,
        ints(objects, "by_try_number")?,
        ints(objects, "by_map_index")?,
    );
    let (pipelines, maps, starts) = (
        ints(objects, "pipeline")?,
        ints(objects, "map_index")?,
        ints(objects, "iv_start")?,
    );
    Ok((0..objects.height())
        .map(|row| ProviderObject {
            external_id: ids[row].clone(),
            key: keys[row].clone(),
            created_at: created[row],
            status: statuses[row].clone(),
            live: live[row],
            committed: committed[row],
            by_run_id: by_run[row].clone(),
            by_try_number: by_try[row],
            by_map_index: by_map[row],
            pipeline: pipelines[row],
            map_index: maps[row],
            iv_start: starts[row],
        })
        .collect())
}

fn distinct(values: Vec<Option<String>>) -> Vec<String> {
    let mut out: Vec<String> = values.into_iter().flatten().collect();
    out.sort();
    out.dedup();
    out
}
