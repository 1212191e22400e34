//! Tries whose outcome is not final when the sources are read (SPEC §5): still running,
//! waiting to run or to be retried, or in a run that has not finished. Such a try may yet
//! write its commit or create its object, so no rule that reasons from an absence judges its
//! interval, its verdict is `in-flight`, and the plan proposes nothing for it: retrying while
//! the first try still calls the provider is how overlapping tries duplicate an export.
//!
//! A running try whose last heartbeat is older than the scheduler's timeout
//! (`[airflow] heartbeat_timeout`) is named probably dead instead: Airflow will fail it, so it
//! is judged as the failed try it is about to be.

use std::collections::HashSet;

use serde::Serialize;

use crate::error::{EngineContext, Result};
use crate::prepare::Prepared;
use crate::rules::Finding;

/// A try's state that is not an outcome: Airflow will still run, retry or finish it.
pub const NOT_FINAL: [&str; 7] = [
    "running",
    "queued",
    "scheduled",
    "up_for_retry",
    "up_for_reschedule",
    "deferred",
    "restarting",
];

/// A run's state while it is not finished.
const RUN_NOT_FINISHED: [&str; 2] = ["queued", "running"];

/// How many in-flight and probably dead tries the coverage lists by name.
const LISTED: usize = 50;

/// Where a try's outcome stands when the sources were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Final,
    /// Not finished: judged when it finishes.
    InFlight,
    /// Running, with a heartbeat older than the timeout: Airflow will fail it.
    ProbablyDead,
}

/// The tries in flight and the intervals and runs they keep from being judged.
#[derive(Debug, Default)]
pub struct InFlight {
    /// Each try's liveness, by its row of the prepared tries; empty when every try is final.
    of_try: Vec<Liveness>,
    /// (dag_id, interval label) of every interval with a try in flight.
    intervals: HashSet<(String, String)>,
    /// (dag_id, run_id) of every run in flight.
    runs: HashSet<(String, String)>,
    pub coverage: InFlightCoverage,
}

/// What the report's coverage says of the tries in flight (`coverage.in_flight`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InFlightCoverage {
    /// Tries not finished when the sources were read: judged when they finish.
    pub tries: usize,
    /// Intervals with a try in flight or in a run not finished: no rule that reasons from an
    /// absence judges them, and the plan proposes nothing for them.
    pub intervals: usize,
    /// Runs not finished (`queued`, `running`) among the audited ones.
    pub runs_not_finished: usize,
    /// Findings of the rules that reason from an absence left out for those intervals.
    pub findings_withheld: usize,
    /// The tries in flight, the first [`LISTED`] in (dag_id, run_id, task_id, map_index,
    /// try_number) order.
    pub listed: Vec<TryInFlight>,
    /// Running tries whose heartbeat is older than the timeout: judged as failed.
    pub probably_dead: Vec<TryInFlight>,
}

impl InFlightCoverage {
    pub fn is_empty(&self) -> bool {
        self.tries == 0 && self.intervals == 0 && self.probably_dead.is_empty()
    }

    /// Adds a partition's coverage: the tries of one DAG are in one part.
    pub fn add(&mut self, other: InFlightCoverage) {
        self.tries += other.tries;
        self.intervals += other.intervals;
        self.runs_not_finished += other.runs_not_finished;
        self.findings_withheld += other.findings_withheld;
        self.listed.extend(other.listed);
        self.listed.sort();
        self.listed.truncate(LISTED);
        self.probably_dead.extend(other.probably_dead);
        self.probably_dead.sort();
        self.probably_dead.truncate(LISTED);
    }
}

/// One try in flight or probably dead, as the coverage lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct TryInFlight {
    pub dag_id: String,
    pub run_id: String,
    pub task_id: String,
    pub map_index: i64,
    pub try_number: i64,
    pub state: Option<String>,
    pub interval: Option<String>,
    /// Its last heartbeat, RFC 3339, where the source tells it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub heartbeat_at: Option<String>,
}

impl InFlight {
    /// The liveness of every prepared try, as of `now` (microseconds since the epoch, when the
    /// sources were read), with a heartbeat older than `timeout` named probably dead.
    pub fn of(prepared: &Prepared, now: i64, timeout: std::time::Duration) -> Result<InFlight> {
        let tries = &prepared.tries;
        let states = crate::cells::text_column(tries, "state")?;
        let run_states = crate::cells::text_column(tries, "run_state")?;
        let heartbeats = crate::cells::int_column(tries, "heartbeat_at")?;
        let not_final = crate::cells::each_text(&states, |state| {
            state.map(|state| NOT_FINAL.contains(&state))
        });
        let run_open = crate::cells::each_text(&run_states, |state| {
            state.is_some_and(|state| RUN_NOT_FINISHED.contains(&state))
        });
        if !not_final.contains(&Some(true)) && !run_open.contains(&true) {
            return Ok(InFlight::default());
        }
        let timeout = i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX);
        let mut of_try = vec![Liveness::Final; tries.height()];
        for (row, liveness) in of_try.iter_mut().enumerate() {
            let state = states.get(row);
            *liveness = match (not_final[row], run_open[row]) {
                (Some(true), _) => {
                    let stale = heartbeats
                        .get(row)
                        .is_some_and(|beat| now.saturating_sub(beat) > timeout);
                    if state == Some("running") && stale {
                        Liveness::ProbablyDead
                    } else {
                        Liveness::InFlight
                    }
                }
                // No state yet (cleared, or not scheduled) in a run that is not finished.
                (None, true) => Liveness::InFlight,
                _ => Liveness::Final,
            };
        }
        // The rows that matter: in flight, probably dead, or in a run not finished.
        let rows: Vec<usize> = (0..tries.height())
            .filter(|&row| of_try[row] != Liveness::Final || run_open[row])
            .collect();
        let picked = polars::prelude::IdxCa::from_vec(
            "rows".into(),
            rows.iter()
                .map(|&row| row as polars::prelude::IdxSize)
                .collect(),
        );
        let some = tries.take(&picked).engine("finding the tries in flight")?;
        let labels = crate::prepare::interval_labels(&some)?;
        let labels = labels.str().engine("finding the tries in flight")?;
        let text = |name: &str| crate::cells::text_column(&some, name);
        let int = |name: &str| crate::cells::int_column(&some, name);
        let (dags, runs, tasks) = (text("dag_id")?, text("run_id")?, text("task_id")?);
        let (maps, numbers) = (int("map_index")?, int("try_number")?);
        // Runs whose only unfinished try is probably dead are unfinished because of it: they
        // say nothing the try does not.
        let mut dead_runs: HashSet<(String, String)> = HashSet::new();
        let key = |at: usize| {
            (
                dags.get(at).unwrap_or_default().to_string(),
                runs.get(at).unwrap_or_default().to_string(),
            )
        };
        for (at, &row) in rows.iter().enumerate() {
            if of_try[row] == Liveness::ProbablyDead {
                dead_runs.insert(key(at));
            }
        }
        let mut found = InFlight {
            of_try,
            ..InFlight::default()
        };
        let mut listed = Vec::new();
        let mut probably_dead = Vec::new();
        let mut open_runs: HashSet<(String, String)> = HashSet::new();
        let mut in_flight_runs: HashSet<(String, String)> = HashSet::new();
        for (at, &row) in rows.iter().enumerate() {
            let run = key(at);
            let liveness = found.of_try[row];
            if run_open[row] {
                open_runs.insert(run.clone());
            }
            let judged_later = liveness == Liveness::InFlight
                || (run_open[row] && liveness == Liveness::Final && !dead_runs.contains(&run));
            if judged_later {
                in_flight_runs.insert(run.clone());
                if let Some(label) = labels.get(at) {
                    found.intervals.insert((run.0.clone(), label.to_string()));
                }
            }
            if liveness == Liveness::Final {
                continue;
            }
            let heartbeat_at = heartbeats.get(row);
            let entry = TryInFlight {
                dag_id: run.0.clone(),
                run_id: run.1.clone(),
                task_id: tasks.get(at).unwrap_or_default().to_string(),
                map_index: maps.get(at).unwrap_or(-1),
                try_number: numbers.get(at).unwrap_or(0),
                state: states.get(row).map(str::to_string),
                interval: labels.get(at).map(str::to_string),
                // The time, not its age: a report of the same read is the same whenever it
                // is written.
                heartbeat_at: heartbeat_at.map(crate::timestamp::format),
            };
            match liveness {
                Liveness::InFlight => listed.push(entry),
                _ => probably_dead.push(entry),
            }
        }
        found.runs = in_flight_runs;
        listed.sort();
        probably_dead.sort();
        found.coverage = InFlightCoverage {
            tries: listed.len(),
            intervals: found.intervals.len(),
            runs_not_finished: open_runs.len(),
            findings_withheld: 0,
            listed: listed.into_iter().take(LISTED).collect(),
            probably_dead: probably_dead.into_iter().take(LISTED).collect(),
        };
        Ok(found)
    }

    /// Whether the try at `row` of the prepared tries is in flight.
    pub fn try_in_flight(&self, row: usize) -> bool {
        self.of_try.get(row) == Some(&Liveness::InFlight)
    }

    /// Whether the try at `row` of the prepared tries is running with a heartbeat too old.
    pub fn probably_dead(&self, row: usize) -> bool {
        self.of_try.get(row) == Some(&Liveness::ProbablyDead)
    }

    /// Whether `finding` is about an interval or a run in flight.
    pub fn touches(&self, finding: &Finding) -> bool {
        if self.intervals.is_empty() && self.runs.is_empty() {
            return false;
        }
        let Some(dag) = finding.dag_id.as_deref() else {
            return finding
                .evidence
                .run_ids
                .iter()
                .any(|run| self.runs.iter().any(|(_, open)| open == run));
        };
        let interval = finding.interval.as_deref().is_some_and(|interval| {
            self.intervals
                .contains(&(dag.to_string(), interval.to_string()))
        });
        interval
            || finding
                .evidence
                .run_ids
                .iter()
                .any(|run| self.runs.contains(&(dag.to_string(), run.clone())))
    }

    /// `findings` without those of rules that reason from an absence about an interval in
    /// flight, and with every other finding about one marked `in_flight` (the plan proposes
    /// nothing for it); the withheld are counted in the coverage.
    pub fn judge(&mut self, findings: Vec<Finding>) -> Vec<Finding> {
        let mut kept = Vec::with_capacity(findings.len());
        for mut finding in findings {
            if !self.touches(&finding) {
                kept.push(finding);
                continue;
            }
            let from_absence =
                crate::rules::by_code(finding.code).is_some_and(|rule| rule.reasons_from_absence());
            if from_absence {
                self.coverage.findings_withheld += 1;
            } else {
                finding.in_flight = true;
                kept.push(finding);
            }
        }
        kept
    }
}
