//! `onceonly trace`: incident forensics for one interval, run or key. Every try, journal record
//! and provider object of it, merged in time order, each try with its verdict, then the
//! findings and the repair.

use polars::prelude::*;
use serde::Serialize;

use crate::cells::{bools, ints, texts};
use crate::commands::audit::{self, AuditOptions};
use crate::config::Config;
use crate::error::{EngineContext, Error, Result};
use crate::plan::Action;
use crate::rules::{Finding, try_ref};
use crate::timestamp;

/// What to trace.
#[derive(Debug, Clone)]
pub enum Selector {
    /// A date or time inside the interval (or its start).
    Interval(i64),
    RunId(String),
    Key(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    pub dag_id: String,
    pub selected_by: String,
    pub intervals: Vec<String>,
    pub tries: Vec<TraceTry>,
    pub events: Vec<Event>,
    pub findings: Vec<Finding>,
    pub repairs: Vec<Action>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceTry {
    #[serde(rename = "try")]
    pub try_ref: String,
    pub task_id: String,
    pub state: Option<String>,
    pub hostname: Option<String>,
    pub pid: Option<i64>,
    pub start_date: Option<String>,
    pub end_date: Option<String>,
    pub verdict: String,
    pub op_key: Option<String>,
    pub external_id: Option<String>,
    #[serde(skip)]
    pub start: Option<i64>,
    #[serde(skip)]
    pub end: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub at: String,
    #[serde(skip)]
    pub micros: i64,
    /// `try-start`, `try-end`, `journal`, `provider`.
    pub kind: &'static str,
    #[serde(rename = "try")]
    pub try_ref: Option<String>,
    pub what: String,
    pub op_key: Option<String>,
    pub external_id: Option<String>,
    /// `lost-response`, `duplicate`, `void`: what a reader should see at a glance.
    pub marks: Vec<&'static str>,
}

pub fn run(config: &Config, dag: &str, selector: &Selector) -> Result<Trace> {
    let options = AuditOptions {
        dag: Some(dag.to_string()),
        plan: true,
        ..AuditOptions::default()
    };
    let audit = audit::run(config, &options)?;
    let prepared = &audit.prepared;
    let dag_lit = || col("dag_id").eq(lit(dag.to_string()));

    // Which intervals (and keys) the selector means.
    let (intervals, keys, selected_by): (Vec<String>, Vec<String>, String) = match selector {
        Selector::Interval(at) => {
            let at = lit(*at).cast(crate::model::utc());
            let hits = prepared
                .tries()
                .filter(
                    dag_lit().and(
                        col("iv_start")
                            .eq(at.clone())
                            .or(col("iv_start").lt_eq(at.clone()).and(col("iv_end").gt(at))),
                    ),
                )
                .collect()
                .engine("trace: intervals")?;
            (
                distinct(texts(&hits, "interval")?),
                Vec::new(),
                "interval".to_string(),
            )
        }
        Selector::RunId(run_id) => {
            let hits = prepared
                .tries()
                .filter(dag_lit().and(col("run_id").eq(lit(run_id.clone()))))
                .collect()
                .engine("trace: run")?;
            (
                distinct(texts(&hits, "interval")?),
                Vec::new(),
                format!("run {run_id}"),
            )
        }
        Selector::Key(key) => {
            let journal = prepared
                .journal()
                .filter(col("op_key").eq(lit(key.clone())))
                .collect()
                .engine("trace: key")?;
            let objects = prepared
                .objects()
                .filter(col("key").eq(lit(key.clone())))
                .collect()
                .engine("trace: key")?;
            let mut intervals = texts(&journal, "interval")?;
            intervals.extend(texts(&objects, "interval")?);
            (distinct(intervals), vec![key.clone()], format!("key {key}"))
        }
    };
    if intervals.is_empty() && keys.is_empty() {
        let known = prepared
            .tries()
            .filter(dag_lit())
            .select([col("interval")])
            .unique(None, UniqueKeepStrategy::Any)
            .collect()
            .engine("trace: intervals")?
            .height();
        return Err(Error::usage(
            "trace",
            format!(
                "no try of DAG {dag:?} matches the {selected_by} given ({known} intervals of that DAG were read)"
            ),
        ));
    }

    let in_interval = |frame: LazyFrame, key_column: &str| {
        let interval_list = lit(Series::new("i".into(), intervals.clone())).implode(false);
        let key_list = lit(Series::new("k".into(), keys.clone())).implode(false);
        frame.filter(
            dag_lit()
                .and(col("interval").is_in(interval_list, false))
                .or(col(key_column).is_in(key_list, false)),
        )
    };
    let journal = in_interval(prepared.journal(), "op_key")
        .collect()
        .engine("trace: journal")?;
    let objects = in_interval(prepared.objects(), "key")
        .collect()
        .engine("trace: objects")?;
    let verdicts = in_interval(audit.verdicts.clone().lazy(), "op_key")
        .collect()
        .engine("trace: tries")?;

    let tries = trace_tries(&verdicts)?;
    let mut events = Vec::new();
    for t in &tries {
        if let Some(start) = t.start {
            events.push(event(
                start,
                "try-start",
                Some(&t.try_ref),
                format!(
                    "{} started on {} (pid {})",
                    t.try_ref,
                    t.hostname.as_deref().unwrap_or("?"),
                    t.pid.map(|p| p.to_string()).unwrap_or("?".into())
                ),
                None,
                None,
            ));
        }
        if let Some(end) = t.end {
            let mut e = event(
                end,
                "try-end",
                Some(&t.try_ref),
                format!(
                    "{} ended {}: verdict {}",
                    t.try_ref,
                    t.state.as_deref().unwrap_or("?"),
                    t.verdict
                ),
                None,
                None,
            );
            if t.verdict == "lost-response" {
                e.marks.push("lost-response");
            }
            events.push(e);
        }
    }
    let (keys_j, runs, numbers, maps, phases, ids, at) = (
        texts(&journal, "op_key")?,
        texts(&journal, "run_id")?,
        ints(&journal, "try_number")?,
        ints(&journal, "map_index")?,
        texts(&journal, "phase")?,
        texts(&journal, "external_id")?,
        ints(&journal, "recorded_at")?,
    );
    for row in 0..journal.height() {
        let who = try_ref(runs[row].as_deref().unwrap_or(""), numbers[row], maps[row]);
        let phase = phases[row].clone().unwrap_or_default();
        let what = match &ids[row] {
            Some(id) => format!("journal: {phase} {id}"),
            None => format!("journal: {phase}"),
        };
        events.push(event(
            at[row].unwrap_or(0),
            "journal",
            Some(&who),
            what,
            keys_j[row].clone(),
            ids[row].clone(),
        ));
    }
    let duplicates: std::collections::BTreeSet<String> = audit
        .plan
        .iter()
        .flat_map(|plan| plan.actions.iter())
        .filter(|action| action.kind == crate::plan::Kind::VoidDuplicate)
        .flat_map(|action| action.targets.clone())
        .collect();
    let (object_ids, object_keys, created, statuses, live, committed, by_run, by_try, by_map) = (
        texts(&objects, "external_id")?,
        texts(&objects, "key")?,
        ints(&objects, "created_at")?,
        texts(&objects, "status")?,
        bools(&objects, "live")?,
        bools(&objects, "committed")?,
        texts(&objects, "by_run_id")?,
        ints(&objects, "by_try_number")?,
        ints(&objects, "by_map_index")?,
    );
    for row in 0..objects.height() {
        let id = object_ids[row].clone().unwrap_or_default();
        let by = by_run[row]
            .as_deref()
            .map(|run| try_ref(run, by_try[row], by_map[row]));
        let mut e = event(
            created[row].unwrap_or(0),
            "provider",
            by.as_deref(),
            format!(
                "provider: {id} created ({}){}",
                statuses[row].as_deref().unwrap_or("?"),
                by.as_deref()
                    .map(|by| format!(" by {by}"))
                    .unwrap_or_default()
            ),
            object_keys[row].clone(),
            Some(id.clone()),
        );
        if crate::rules::l001_lost_response::object_lost(live[row], committed[row]) {
            e.marks.push("lost-response");
        }
        if duplicates.contains(&id) {
            e.marks.push("duplicate");
        }
        if live[row] == Some(false) {
            e.marks.push("void");
        }
        events.push(e);
    }
    events.sort_by(|a, b| {
        (a.micros, kind_order(a.kind), &a.what).cmp(&(b.micros, kind_order(b.kind), &b.what))
    });

    let object_set: std::collections::BTreeSet<String> =
        object_ids.iter().flatten().cloned().collect();
    let findings: Vec<Finding> = audit
        .report
        .findings
        .iter()
        .filter(|f| {
            f.dag_id.as_deref() == Some(dag)
                && f.interval.as_ref().is_some_and(|i| intervals.contains(i))
                || f.op_key.as_ref().is_some_and(|k| keys.contains(k))
                || f.evidence
                    .external_ids
                    .iter()
                    .any(|id| object_set.contains(id))
        })
        .cloned()
        .collect();
    let finding_ids: std::collections::BTreeSet<&str> =
        findings.iter().map(|f| f.id.as_str()).collect();
    let repairs = audit
        .plan
        .iter()
        .flat_map(|plan| plan.actions.iter())
        .filter(|action| {
            action
                .answers
                .iter()
                .any(|id| finding_ids.contains(id.as_str()))
        })
        .cloned()
        .collect();
    Ok(Trace {
        dag_id: dag.to_string(),
        selected_by,
        intervals,
        tries,
        events,
        findings,
        repairs,
    })
}

fn kind_order(kind: &str) -> u8 {
    match kind {
        "try-start" => 0,
        "journal" => 1,
        "provider" => 2,
        _ => 3,
    }
}

fn event(
    micros: i64,
    kind: &'static str,
    who: Option<&str>,
    what: String,
    op_key: Option<String>,
    external_id: Option<String>,
) -> Event {
    Event {
        at: timestamp::format_micros(micros),
        micros,
        kind,
        try_ref: who.map(str::to_string),
        what,
        op_key,
        external_id,
        marks: Vec::new(),
    }
}

fn distinct(values: Vec<Option<String>>) -> Vec<String> {
    let mut out: Vec<String> = values.into_iter().flatten().collect();
    out.sort();
    out.dedup();
    out
}

fn trace_tries(verdicts: &DataFrame) -> Result<Vec<TraceTry>> {
    let (runs, tasks, states, hosts, verdict, keys, ids) = (
        texts(verdicts, "run_id")?,
        texts(verdicts, "task_id")?,
        texts(verdicts, "state")?,
        texts(verdicts, "hostname")?,
        texts(verdicts, "verdict")?,
        texts(verdicts, "op_key")?,
        texts(verdicts, "external_id")?,
    );
    let (numbers, maps, starts, ends, pids) = (
        ints(verdicts, "try_number")?,
        ints(verdicts, "map_index")?,
        ints(verdicts, "start_date")?,
        ints(verdicts, "end_date")?,
        ints(verdicts, "pid")?,
    );
    let mut tries: Vec<TraceTry> = (0..verdicts.height())
        .map(|row| TraceTry {
            try_ref: try_ref(runs[row].as_deref().unwrap_or(""), numbers[row], maps[row]),
            task_id: tasks[row].clone().unwrap_or_default(),
            state: states[row].clone(),
            hostname: hosts[row].clone(),
            pid: pids[row],
            start_date: starts[row].map(timestamp::format_micros),
            end_date: ends[row].map(timestamp::format_micros),
            verdict: verdict[row].clone().unwrap_or_default(),
            op_key: keys[row].clone(),
            external_id: ids[row].clone(),
            start: starts[row],
            end: ends[row],
        })
        .collect();
    tries.sort_by(|a, b| (a.start, &a.try_ref).cmp(&(b.start, &b.try_ref)));
    Ok(tries)
}
