//! `onceonly trace`: incident forensics for one interval, run or key. Every try, journal record
//! and provider object of it, merged in time order, each try with its verdict, then the
//! findings and the repair.

use polars::prelude::DataFrame;

use crate::cells::{ints, texts};
use crate::config::Config;
use crate::engine::{self, AuditOptions};
use crate::error::{Error, Result};
use crate::report::trace::{Event, Trace, TraceTry};
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

pub fn run(config: &Config, dag: &str, selector: &Selector) -> Result<Trace> {
    let options = AuditOptions {
        dag: Some(dag.to_string()),
        plan: true,
        ..AuditOptions::default()
    };
    let audit = engine::run(config, &options)?;

    // Which intervals (and keys) the selector means.
    let (intervals, keys, selected_by): (Vec<String>, Vec<String>, String) = match selector {
        Selector::Interval(at) => (
            audit.intervals_at(dag, *at)?,
            Vec::new(),
            "interval".to_string(),
        ),
        Selector::RunId(run_id) => (
            audit.intervals_of_run(dag, run_id)?,
            Vec::new(),
            format!("run {run_id}"),
        ),
        Selector::Key(key) => (
            audit.intervals_of_key(key)?,
            vec![key.clone()],
            format!("key {key}"),
        ),
    };
    if intervals.is_empty() && keys.is_empty() {
        let known = audit.interval_count(dag)?;
        return Err(Error::usage(
            "trace",
            format!(
                "no try of DAG {dag:?} matches the {selected_by} given ({known} intervals of that DAG were read)"
            ),
        ));
    }

    let journal = audit.journal_of(dag, &intervals, &keys)?;
    let objects = audit.objects_of(dag, &intervals, &keys)?;
    let verdicts = audit.verdicts_of(dag, &intervals, &keys)?;

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
    for row in &journal {
        let who = try_ref(
            row.run_id.as_deref().unwrap_or(""),
            row.try_number,
            row.map_index,
        );
        let phase = row.phase.clone().unwrap_or_default();
        let what = match &row.external_id {
            Some(id) => format!("journal: {phase} {id}"),
            None => format!("journal: {phase}"),
        };
        events.push(event(
            row.recorded_at.unwrap_or(0),
            "journal",
            Some(&who),
            what,
            row.op_key.clone(),
            row.external_id.clone(),
        ));
    }
    let duplicates: std::collections::BTreeSet<String> = audit
        .plan
        .iter()
        .flat_map(|plan| plan.actions.iter())
        .filter(|action| action.kind == crate::plan::Kind::VoidDuplicate)
        .flat_map(|action| action.targets.clone())
        .collect();
    for object in &objects {
        let id = object.external_id.clone().unwrap_or_default();
        let by = object
            .by_run_id
            .as_deref()
            .map(|run| try_ref(run, object.by_try_number, object.by_map_index));
        let mut e = event(
            object.created_at.unwrap_or(0),
            "provider",
            by.as_deref(),
            format!(
                "provider: {id} created ({}){}",
                object.status.as_deref().unwrap_or("?"),
                by.as_deref()
                    .map(|by| format!(" by {by}"))
                    .unwrap_or_default()
            ),
            object.key.clone(),
            Some(id.clone()),
        );
        if crate::rules::l001_lost_response::object_lost(object.live, object.committed) {
            e.marks.push("lost-response");
        }
        if duplicates.contains(&id) {
            e.marks.push("duplicate");
        }
        if object.live == Some(false) {
            e.marks.push("void");
        }
        events.push(e);
    }
    events.sort_by(|a, b| {
        (a.micros, kind_order(a.kind), &a.what).cmp(&(b.micros, kind_order(b.kind), &b.what))
    });

    let object_set: std::collections::BTreeSet<String> = objects
        .iter()
        .filter_map(|object| object.external_id.clone())
        .collect();
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
