//! `onceonly synth`: a consistent scenario of any size, with chosen rates of every fault of
//! SPEC §5, and the exact findings it injected (issue 7).
//!
//! Every interval of every DAG gets one case: a clean export, a harmless retry, or one fault.
//! The same scenario is written four ways, so each reading path can be checked against the
//! ground truth and timed:
//!
//! | file | what |
//! |---|---|
//! | `manifest.json`, `*.parquet` | a saved snapshot (`audit --from-snapshot DIR`) |
//! | `airflow.db` | an Airflow 3.3.2 metadata database (the real schema, synthetic rows) |
//! | `journal.db` | the operation journal, canonical columns and phases |
//! | `provider_state.json` | the provider's objects, for `onceonly mock-provider --state` |
//! | `onceonly.toml` | airflow.db + journal.db + provider.parquet |
//! | `onceonly-listing.toml` | the same, the provider listed over HTTP at `__PROVIDER_URL__` |
//! | `truth.json` | the findings the audit must report: code, DAG, interval, key, object ids |
//!
//! With `snapshot_only` only the snapshot, `onceonly.toml` and `truth.json` are written.
//!
//! Intervals are hourly; interval `n` belongs to DAG `n % dags`, so every DAG runs on the same
//! schedule. The key is `synth:{dag_id}:{interval_start:%Y-%m-%dT%H}`. Each DAG has an
//! `[[operation]]` of its own (`synth_NNN`), or, with [`Layout::GlobOperation`], one operation
//! (`export`, `dag_id = "*"`) covers them all: the tables and the truth are the same, since
//! each DAG is its own pipeline either way (SPEC §4). All times are whole seconds, so the
//! provider's epoch-second listing loses nothing.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::{EngineContext, Error, Result};
use crate::model::{Table, utc};
use crate::sources::Tables;

/// What happens in one interval. The fillers (`Clean`, `Retry`, `Reconciled`, `Voided`,
/// `CheckThenCreate`) cause no finding; each fault causes exactly the findings [`Case::findings`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Case {
    /// One try: intent, object, committed.
    Clean,
    /// Try 1 fails before the provider is called; try 2 exports.
    Retry,
    /// Lost response recovered: try 1 creates the object and loses the answer, try 2 sends
    /// the same key and the provider replays the object.
    Reconciled,
    /// A duplicate repaired earlier: try 1's object was created twice and voided since.
    Voided,
    /// Try 1 exported and committed, then failed in a later step; try 2 read the journal,
    /// found the key committed and skipped the provider: a success with no journal row.
    CheckThenCreate,
    /// Lost response, not recovered: one try, the object exists, no committed row (L001).
    L001,
    /// Both tries committed an object under one key: the provider had forgotten it (D001).
    D001,
    /// The key carries the try number: two objects under two keys (D002 + K001).
    D002,
    /// An intent, a failure, nothing created (L002).
    L002,
    /// An object under the interval's key that no journal row knows: a task version that
    /// did not journal (L003).
    L003,
    /// The committed object is cancelled or gone at the provider (M001).
    M001,
    /// A successful try that wrote no journal row and created nothing (M002).
    M002,
    /// The interval was cleared and re-run with a new payload under the old key; the
    /// provider replayed the old object (K002).
    K002,
    /// A zombie try still writing while its retry ran (C001).
    C001,
}

impl Case {
    pub const ALL: [Case; 14] = [
        Case::Clean,
        Case::Retry,
        Case::Reconciled,
        Case::Voided,
        Case::CheckThenCreate,
        Case::L001,
        Case::D001,
        Case::D002,
        Case::L002,
        Case::L003,
        Case::M001,
        Case::M002,
        Case::K002,
        Case::C001,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Case::Clean => "clean",
            Case::Retry => "retry",
            Case::Reconciled => "reconciled",
            Case::Voided => "voided",
            Case::CheckThenCreate => "check-then-create",
            Case::L001 => "L001",
            Case::D001 => "D001",
            Case::D002 => "D002",
            Case::L002 => "L002",
            Case::L003 => "L003",
            Case::M001 => "M001",
            Case::M002 => "M002",
            Case::K002 => "K002",
            Case::C001 => "C001",
        }
    }

    fn parse(text: &str) -> Option<Case> {
        Case::ALL
            .into_iter()
            .find(|case| case.name().eq_ignore_ascii_case(text))
    }
}

/// The share of intervals given each case; `Clean` takes what the others leave.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub BTreeMap<Case, f64>);

impl Default for Rates {
    /// About 1.4 tries and 1.1 provider objects per interval, 0.5 % of intervals per fault;
    /// one interval in twenty has a check-then-create retry.
    fn default() -> Rates {
        let mut rates = BTreeMap::new();
        rates.insert(Case::Retry, 0.10);
        rates.insert(Case::Reconciled, 0.10);
        rates.insert(Case::Voided, 0.10);
        rates.insert(Case::CheckThenCreate, 0.05);
        for case in &Case::ALL[5..] {
            rates.insert(*case, 0.005);
        }
        Rates(rates)
    }
}

impl Rates {
    /// The defaults, changed by `NAME=RATE` entries (`L001=0.01`, `reconciled=0.2`).
    pub fn parse(entries: &[String]) -> std::result::Result<Rates, String> {
        let mut rates = Rates::default();
        for entry in entries {
            let (name, rate) = entry
                .split_once('=')
                .ok_or_else(|| format!("{entry:?}: write NAME=RATE, e.g. L001=0.01"))?;
            let case = Case::parse(name.trim())
                .filter(|case| *case != Case::Clean)
                .ok_or_else(|| {
                    format!(
                        "{name:?} is not a case; use one of {}",
                        Case::ALL[1..]
                            .iter()
                            .map(|c| c.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
            let rate: f64 = rate
                .trim()
                .parse()
                .ok()
                .filter(|rate: &f64| (0.0..=1.0).contains(rate))
                .ok_or_else(|| format!("{entry:?}: the rate is a number from 0 to 1"))?;
            rates.0.insert(case, rate);
        }
        let total: f64 = rates.0.values().sum();
        if total > 1.0 {
            return Err(format!("the rates add up to {total}, more than 1"));
        }
        Ok(rates)
    }
}

#[derive(Debug, Clone)]
pub struct SynthOptions {
    pub intervals: usize,
    pub dags: usize,
    pub seed: u64,
    pub rates: Rates,
    pub layout: Layout,
    /// Write the snapshot, `onceonly.toml` and the truth only: not the Airflow and journal
    /// databases, the provider's state file nor the listing config that serves it (what audits
    /// `--from-snapshot` do not read).
    pub snapshot_only: bool,
    /// Write the snapshot's tables with their rows in a random order (seeded by `seed`)
    /// instead of the order they were generated in (by DAG, interval and try, as a scheduler
    /// writes them): the order a database without a useful physical order, or a listing sorted
    /// by something else, gives. The databases and the state file keep the generated order.
    pub shuffle_rows: bool,
}

/// How the configs bind the scenario's DAGs to operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Layout {
    /// Each DAG has an `[[operation]]` of its own, named after it.
    #[default]
    OperationPerDag,
    /// One `[[operation]]` named `export` whose `dag_id` is the glob `*`: every DAG.
    GlobOperation,
}

/// One finding the audit must report, identified as the report identifies it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct Expected {
    pub code: String,
    pub dag_id: String,
    pub interval: String,
    pub op_key: Option<String>,
    pub external_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Truth {
    pub seed: u64,
    pub intervals: usize,
    pub dags: usize,
    /// Intervals per case.
    pub cases: BTreeMap<String, usize>,
    pub rows: BTreeMap<String, usize>,
    pub findings: Vec<Expected>,
}

/// The generated scenario, in memory.
pub struct Scenario {
    pub tables: Tables,
    pub truth: Truth,
}

/// How many intervals are generated as rows before they are turned into frames: the rows as
/// Rust values take about twice the memory of the frames.
const CHUNK: usize = 250_000;

const HOUR: i64 = 3_600;
const SECOND: i64 = 1_000_000;
/// 2024-01-01T00:00:00Z.
const BASE: i64 = 1_704_067_200;

/// One journal row of an interval: try number, key, phase, the object it names (an index into
/// the interval's objects), payload hash, recorded at (seconds).
type JournalRow = (i64, String, &'static str, Option<usize>, String, i64);

/// splitmix64: small, fast, and the same everywhere for a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n.max(1)) as i64
    }
}

#[derive(Default)]
struct Attempts {
    dag_id: Vec<String>,
    run_id: Vec<String>,
    try_number: Vec<i64>,
    state: Vec<&'static str>,
    start: Vec<i64>,
    end: Vec<i64>,
    hostname: Vec<String>,
    pid: Vec<i64>,
    iv_start: Vec<i64>,
    clear_number: Vec<i64>,
}

#[derive(Default)]
struct Journal {
    op_key: Vec<String>,
    dag_id: Vec<String>,
    run_id: Vec<String>,
    try_number: Vec<i64>,
    phase: Vec<&'static str>,
    external_id: Vec<Option<String>>,
    payload_hash: Vec<String>,
    recorded_at: Vec<i64>,
}

#[derive(Default)]
struct Provider {
    external_id: Vec<String>,
    op_key: Vec<String>,
    created_at: Vec<i64>,
    status: Vec<&'static str>,
    payload_hash: Vec<String>,
    iv_start: Vec<i64>,
    raw: Vec<String>,
    /// Run id and try number of the try that created each object.
    meta: Vec<(String, i64)>,
}

/// `2024-01-01T05:00:00Z/2024-01-01T06:00:00Z`, as reports write an interval.
fn interval_label(start: i64) -> String {
    format!("{}/{}", iso(start), iso(start + HOUR))
}

fn iso(seconds: i64) -> String {
    crate::timestamp::format(seconds * SECOND)
}

fn dag_name(dag: usize) -> String {
    format!("synth_{dag:03}")
}

/// The provider's view of one object, as the state file and the listing carry it.
fn object_json(provider: &Provider, row: usize, dag_id: &str) -> Value {
    let (run_id, try_number) = &provider.meta[row];
    json!({
        "id": provider.external_id[row],
        "created": provider.created_at[row],
        "idempotency_key": provider.op_key[row],
        "payload_sha256": provider.payload_hash[row],
        "status": provider.status[row],
        "metadata": {
            "dag_id": dag_id,
            "task_id": "export",
            "map_index": -1,
            "run_id": run_id,
            "try_number": try_number,
            "interval_start": iso(provider.iv_start[row]),
            "interval_end": iso(provider.iv_start[row] + HOUR),
        },
    })
}

/// Builds the scenario.
pub fn generate(options: &SynthOptions) -> Result<Scenario> {
    generate_in_chunks(options, CHUNK)
}

/// Builds the scenario, turning the rows into frames every `chunk` intervals: the same scenario
/// whatever the chunk, held as Rust values for one chunk at a time.
pub fn generate_in_chunks(options: &SynthOptions, chunk: usize) -> Result<Scenario> {
    let chunk = chunk.max(1);
    let dags = options.dags.max(1);
    let mut rng = Rng(options.seed ^ 0x6f6e_6365_6f6e_6c79);
    let mut attempts = Attempts::default();
    let mut journal = Journal::default();
    let mut provider = Provider::default();
    let mut findings: Vec<Expected> = Vec::new();
    let mut pending: Vec<(String, Option<String>, Vec<usize>)> = Vec::new();
    let mut cases: BTreeMap<String, usize> = BTreeMap::new();
    let cumulative: Vec<(Case, f64)> = options
        .rates
        .0
        .iter()
        .filter(|(case, _)| **case != Case::Clean)
        .scan(0.0, |sum, (case, rate)| {
            *sum += rate;
            Some((*case, *sum))
        })
        .collect();
    let mut object_number = 0u64;

    let mut chunks: Vec<[DataFrame; 3]> = Vec::new();
    for n in 0..options.intervals {
        if n > 0 && n % chunk == 0 {
            chunks.push(frames(
                &std::mem::take(&mut attempts),
                &std::mem::take(&mut journal),
                &std::mem::take(&mut provider),
            )?);
        }
        let dag = n % dags;
        let slot = (n / dags) as i64;
        let dag_id = dag_name(dag);
        let iv_start = BASE + slot * HOUR;
        let run_id = format!(
            "scheduled__{}",
            crate::timestamp::format(iv_start * SECOND).replace('Z', "+00:00")
        );
        let key = format!(
            "synth:{dag_id}:{}",
            chrono::DateTime::from_timestamp(iv_start, 0)
                .expect("in range")
                .format("%Y-%m-%dT%H")
        );
        let draw = rng.unit();
        let case = cumulative
            .iter()
            .find(|(_, upto)| draw < *upto)
            .map(|(case, _)| *case)
            .unwrap_or(Case::Clean);
        *cases.entry(case.name().to_string()).or_default() += 1;
        let payload = format!("sha256:{:016x}", rng.next());
        let s = iv_start + HOUR + 60 + rng.below(240);
        let r = s + 300;
        let mut clear_number = 0;

        // (try_number, state, start, end)
        let mut tries: Vec<(i64, &'static str, i64, i64)> = Vec::new();
        let mut rows: Vec<JournalRow> = Vec::new();
        // (key, created, status, payload, by try)
        let mut made: Vec<(String, i64, &'static str, String, i64)> = Vec::new();
        let k = || key.clone();
        let p = || payload.clone();
        let mut expect = |code: &str, op_key: Option<&str>, objects: Vec<usize>| {
            pending.push((code.to_string(), op_key.map(str::to_string), objects))
        };
        match case {
            Case::Clean => {
                tries.push((1, "success", s, s + 12));
                made.push((k(), s + 5, "live", p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "committed", Some(0), p(), s + 8));
            }
            Case::Retry => {
                tries.push((1, "failed", s, s + 12));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "failed", None, p(), s + 10));
                tries.push((2, "success", r, r + 12));
                made.push((k(), r + 5, "live", p(), 2));
                rows.push((2, k(), "intent", None, p(), r + 2));
                rows.push((2, k(), "committed", Some(0), p(), r + 8));
            }
            Case::Reconciled | Case::Voided => {
                tries.push((1, "failed", s, s + 12));
                made.push((k(), s + 5, "live", p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "failed", None, p(), s + 10));
                tries.push((2, "success", r, r + 12));
                rows.push((2, k(), "intent", None, p(), r + 2));
                let committed = if case == Case::Voided {
                    made[0].2 = "cancelled";
                    made.push((k(), r + 5, "live", p(), 2));
                    1
                } else {
                    0
                };
                rows.push((2, k(), "committed", Some(committed), p(), r + 8));
            }
            Case::CheckThenCreate => {
                tries.push((1, "failed", s, s + 12));
                made.push((k(), s + 5, "live", p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "committed", Some(0), p(), s + 8));
                tries.push((2, "success", r, r + 3));
            }
            Case::L001 => {
                tries.push((1, "failed", s, s + 12));
                made.push((k(), s + 5, "live", p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "failed", None, p(), s + 10));
                expect("L001", Some(&key), vec![0]);
            }
            Case::D001 | Case::D002 => {
                let key_of = |number: i64| match case {
                    Case::D002 => format!("{key}:try{number}"),
                    _ => key.clone(),
                };
                tries.push((1, "failed", s, s + 12));
                made.push((key_of(1), s + 5, "live", p(), 1));
                rows.push((1, key_of(1), "intent", None, p(), s + 2));
                rows.push((1, key_of(1), "committed", Some(0), p(), s + 8));
                tries.push((2, "success", r, r + 12));
                made.push((key_of(2), r + 5, "live", p(), 2));
                rows.push((2, key_of(2), "intent", None, p(), r + 2));
                rows.push((2, key_of(2), "committed", Some(1), p(), r + 8));
                if case == Case::D001 {
                    expect("D001", Some(&key), vec![0, 1]);
                } else {
                    expect("D002", None, vec![0, 1]);
                    expect("K001", None, vec![]);
                }
            }
            Case::L002 => {
                tries.push((1, "failed", s, s + 12));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "failed", None, p(), s + 10));
                expect("L002", Some(&key), vec![]);
            }
            Case::L003 => {
                tries.push((1, "failed", s, s + 12));
                made.push((k(), s + 5, "live", p(), 1));
                expect("L003", Some(&key), vec![0]);
            }
            Case::M001 => {
                tries.push((1, "success", s, s + 12));
                let status = if rng.next().is_multiple_of(2) {
                    "cancelled"
                } else {
                    "gone"
                };
                made.push((k(), s + 5, status, p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "committed", Some(0), p(), s + 8));
                expect("M001", Some(&key), vec![0]);
            }
            Case::M002 => {
                tries.push((1, "success", s, s + 12));
                expect("M002", Some(&key), vec![]);
            }
            Case::K002 => {
                let changed = format!("sha256:{:016x}", rng.next());
                tries.push((1, "success", s, s + 12));
                made.push((k(), s + 5, "live", p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((1, k(), "committed", Some(0), p(), s + 8));
                // Cleared a day later and re-run with a corrected body under the old key.
                clear_number = 1;
                let c = s + 24 * HOUR;
                tries.push((2, "success", c, c + 12));
                rows.push((2, k(), "intent", None, changed.clone(), c + 2));
                rows.push((2, k(), "committed", Some(0), changed, c + 8));
                expect("K002", Some(&key), vec![0]);
            }
            Case::C001 => {
                // Try 1 lost its heartbeat and was marked failed at s+20, but kept running.
                tries.push((1, "failed", s, s + 20));
                tries.push((2, "success", s + 30, s + 55));
                made.push((k(), s + 25, "live", p(), 1));
                rows.push((1, k(), "intent", None, p(), s + 2));
                rows.push((2, k(), "intent", None, p(), s + 32));
                rows.push((1, k(), "committed", Some(0), p(), s + 45));
                rows.push((2, k(), "committed", Some(0), p(), s + 50));
                expect("C001", None, vec![]);
            }
        }

        // Objects: ids are global and sequential. A "gone" object was never listed.
        let mut ids = Vec::with_capacity(made.len());
        for (object_key, created, status, object_payload, by_try) in made {
            object_number += 1;
            let id = format!("exp_{object_number:09}");
            ids.push(id.clone());
            if status == "gone" {
                continue;
            }
            provider.external_id.push(id);
            provider.op_key.push(object_key);
            provider.created_at.push(created);
            provider.status.push(status);
            provider.payload_hash.push(object_payload);
            provider.iv_start.push(iv_start);
            provider.meta.push((run_id.clone(), by_try));
            let row = provider.external_id.len() - 1;
            let raw = object_json(&provider, row, &dag_id).to_string();
            provider.raw.push(raw);
        }
        for (number, state, start, end) in tries {
            attempts.dag_id.push(dag_id.clone());
            attempts.run_id.push(run_id.clone());
            attempts.try_number.push(number);
            attempts.state.push(state);
            attempts.start.push(start);
            attempts.end.push(end);
            attempts.hostname.push(format!("worker-{}", rng.below(8)));
            attempts.pid.push(1000 + rng.below(60_000));
            attempts.iv_start.push(iv_start);
            attempts.clear_number.push(clear_number);
        }
        for (number, row_key, phase, object, row_payload, at) in rows {
            journal.op_key.push(row_key);
            journal.dag_id.push(dag_id.clone());
            journal.run_id.push(run_id.clone());
            journal.try_number.push(number);
            journal.phase.push(phase);
            journal.external_id.push(
                object
                    .filter(|_| phase == "committed")
                    .map(|i| ids[i].clone()),
            );
            journal.payload_hash.push(row_payload);
            journal.recorded_at.push(at);
        }
        for (code, op_key, objects) in pending.drain(..) {
            let mut external_ids: Vec<String> = objects.iter().map(|i| ids[*i].clone()).collect();
            external_ids.sort();
            findings.push(Expected {
                code,
                dag_id: dag_id.clone(),
                interval: interval_label(iv_start),
                op_key,
                external_ids,
            });
        }
    }
    findings.sort();

    chunks.push(frames(&attempts, &journal, &provider)?);
    drop((attempts, journal, provider));
    let tables = tables(chunks, options.seed)?;
    let rows = Table::ALL
        .iter()
        .map(|table| (table.name().to_string(), tables.get(*table).height()))
        .collect();
    Ok(Scenario {
        tables,
        truth: Truth {
            seed: options.seed,
            intervals: options.intervals,
            dags,
            cases,
            rows,
            findings,
        },
    })
}

fn times(name: &str, seconds: impl Iterator<Item = Option<i64>>) -> Result<Column> {
    let micros: Vec<Option<i64>> = seconds.map(|s| s.map(|s| s * SECOND)).collect();
    Column::new(name.into(), micros)
        .cast(&utc())
        .engine("building a synthetic time column")
}

fn text<'a>(name: &str, values: impl Iterator<Item = Option<&'a str>>) -> Column {
    Column::new(name.into(), values.collect::<Vec<Option<&str>>>())
}

fn ints(name: &str, values: impl Iterator<Item = Option<i64>>) -> Column {
    Column::new(name.into(), values.collect::<Vec<Option<i64>>>())
}

/// The canonical tables, in the column order of [`crate::model`], from the frames of each
/// chunk of intervals in order.
fn tables(chunks: Vec<[DataFrame; 3]>, seed: u64) -> Result<Tables> {
    let mut stacked: [Option<DataFrame>; 3] = [None, None, None];
    for chunk in chunks {
        for (all, frame) in stacked.iter_mut().zip(chunk) {
            match all {
                Some(all) => {
                    all.vstack_mut_owned(frame)
                        .engine("stacking synthetic rows")?;
                }
                None => *all = Some(frame),
            }
        }
    }
    // One chunk per column, as if the rows had been one frame from the start (column by
    // column, so only one column is ever held twice).
    let [attempts, journal, provider] = stacked.map(|frame| {
        let mut frame = frame.unwrap_or_default();
        frame.rechunk_mut();
        frame
    });
    let origin = format!("onceonly synth (seed {seed})");
    Ok(Tables {
        attempts,
        journal,
        provider,
        warnings: Vec::new(),
        origins: [origin.clone(), origin.clone(), origin],
        listed_window: None,
        snapshot_hash: None,
        read_at: None,
    })
}

/// The frames of a chunk of intervals' rows: attempts, journal, provider.
fn frames(attempts: &Attempts, journal: &Journal, provider: &Provider) -> Result<[DataFrame; 3]> {
    let a = attempts;
    let rows = a.dag_id.len();
    let run_type = vec![Some("scheduled"); rows];
    let attempts = DataFrame::new_infer_height(vec![
        text("dag_id", a.dag_id.iter().map(|s| Some(s.as_str()))),
        text("task_id", std::iter::repeat_n(Some("export"), rows)),
        ints("map_index", std::iter::repeat_n(Some(-1), rows)),
        text("run_id", a.run_id.iter().map(|s| Some(s.as_str()))),
        text("run_type", run_type.into_iter()),
        ints("try_number", a.try_number.iter().map(|n| Some(*n))),
        text("state", a.state.iter().map(|s| Some(*s))),
        times("start_date", a.start.iter().map(|t| Some(*t)))?,
        times("end_date", a.end.iter().map(|t| Some(*t)))?,
        text("hostname", a.hostname.iter().map(|s| Some(s.as_str()))),
        ints("pid", a.pid.iter().map(|n| Some(*n))),
        times("queued_at", a.start.iter().map(|t| Some(*t - 2)))?,
        times("interval_start", a.iv_start.iter().map(|t| Some(*t)))?,
        times("interval_end", a.iv_start.iter().map(|t| Some(*t + HOUR)))?,
        times("logical_date", a.iv_start.iter().map(|t| Some(*t)))?,
        times("run_after", a.iv_start.iter().map(|t| Some(*t + HOUR)))?,
        text("conf", std::iter::repeat_n(Some("{}"), rows)),
        ints("clear_number", a.clear_number.iter().map(|n| Some(*n))),
    ])
    .engine("building synthetic attempts")?;
    let j = journal;
    let rows = j.op_key.len();
    let journal = DataFrame::new_infer_height(vec![
        text("op_key", j.op_key.iter().map(|s| Some(s.as_str()))),
        text("dag_id", j.dag_id.iter().map(|s| Some(s.as_str()))),
        text("task_id", std::iter::repeat_n(Some("export"), rows)),
        ints("map_index", std::iter::repeat_n(Some(-1), rows)),
        text("run_id", j.run_id.iter().map(|s| Some(s.as_str()))),
        ints("try_number", j.try_number.iter().map(|n| Some(*n))),
        text("phase", j.phase.iter().map(|s| Some(*s))),
        text("external_id", j.external_id.iter().map(|s| s.as_deref())),
        text(
            "payload_hash",
            j.payload_hash.iter().map(|s| Some(s.as_str())),
        ),
        times("recorded_at", j.recorded_at.iter().map(|t| Some(*t)))?,
        text("approval_id", std::iter::repeat_n(None, rows)),
        times("approval_expires_at", std::iter::repeat_n(None, rows))?,
    ])
    .engine("building the synthetic journal")?;
    let p = provider;
    let provider = DataFrame::new_infer_height(vec![
        text(
            "external_id",
            p.external_id.iter().map(|s| Some(s.as_str())),
        ),
        text("op_key", p.op_key.iter().map(|s| Some(s.as_str()))),
        times("created_at", p.created_at.iter().map(|t| Some(*t)))?,
        text("status", p.status.iter().map(|s| Some(*s))),
        text(
            "payload_hash",
            p.payload_hash.iter().map(|s| Some(s.as_str())),
        ),
        times("interval_start", p.iv_start.iter().map(|t| Some(*t)))?,
        times("interval_end", p.iv_start.iter().map(|t| Some(*t + HOUR)))?,
        text("raw", p.raw.iter().map(|s| Some(s.as_str()))),
    ])
    .engine("building the synthetic provider")?;
    Ok([attempts, journal, provider])
}

/// What `write` produced.
pub struct Written {
    pub dir: PathBuf,
    pub truth: Truth,
}

/// Generates the scenario and writes every form of it into `dir`.
pub fn run(options: &SynthOptions, dir: &Path) -> Result<Written> {
    let scenario = generate(options)?;
    write(&scenario, options, dir)?;
    Ok(Written {
        dir: dir.to_path_buf(),
        truth: scenario.truth,
    })
}

pub fn write(scenario: &Scenario, options: &SynthOptions, dir: &Path) -> Result<()> {
    let shown = dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|err| Error::io(&shown, err))?;
    if options.shuffle_rows {
        let shuffled = shuffle_rows(&scenario.tables, options.seed)?;
        crate::sources::saved::save(dir, &shuffled, Default::default())?;
    } else {
        crate::sources::saved::save(dir, &scenario.tables, Default::default())?;
    }
    let tables = &scenario.tables;
    let dags = options.dags.max(1);
    crate::output::file(
        &dir.join("onceonly.toml"),
        config(dags, options.layout, None).as_bytes(),
    )?;
    let mut truth = serde_json::to_string_pretty(&scenario.truth).expect("truth serializes");
    truth.push('\n');
    crate::output::file(&dir.join("truth.json"), truth.as_bytes())?;
    if options.snapshot_only {
        return Ok(());
    }
    // The listing config serves the state file through `mock-provider`: written with it.
    crate::output::file(
        &dir.join("onceonly-listing.toml"),
        config(dags, options.layout, Some("__PROVIDER_URL__")).as_bytes(),
    )?;
    write_state(
        &dir.join("provider_state.json"),
        &crate::cells::text_column(&tables.provider, "raw")?,
    )?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Error::io("the async runtime", err))?
        .block_on(async {
            write_airflow_db(&dir.join("airflow.db"), &tables.attempts).await?;
            write_journal_db(&dir.join("journal.db"), &tables.journal).await
        })
}

/// The tables with each one's rows in a random order of its own (a Fisher-Yates shuffle
/// seeded by `seed`).
fn shuffle_rows(tables: &Tables, seed: u64) -> Result<Tables> {
    let mut rng = Rng(seed ^ 0x5eed_0f0d_d30d_3e00);
    let mut shuffle = |frame: &DataFrame| -> Result<DataFrame> {
        let mut order: Vec<IdxSize> = (0..frame.height() as IdxSize).collect();
        for last in (1..order.len()).rev() {
            order.swap(last, rng.below(last as u64 + 1) as usize);
        }
        frame
            .take(&IdxCa::from_vec("order".into(), order))
            .engine("shuffling rows")
    };
    Ok(Tables {
        attempts: shuffle(&tables.attempts)?,
        journal: shuffle(&tables.journal)?,
        provider: shuffle(&tables.provider)?,
        warnings: tables.warnings.clone(),
        origins: tables.origins.clone(),
        listed_window: tables.listed_window,
        snapshot_hash: None,
        read_at: None,
    })
}

/// The state file `mock-provider` serves: each listed object's JSON (the provider's `raw`).
fn write_state(path: &Path, objects: &StringChunked) -> Result<()> {
    let shown = path.display().to_string();
    let file = std::fs::File::create(path).map_err(|err| Error::io(&shown, err))?;
    let mut out = std::io::BufWriter::new(file);
    let mut write = || -> std::io::Result<()> {
        out.write_all(b"{\"objects\": [\n")?;
        for (index, object) in objects.iter().enumerate() {
            if index > 0 {
                out.write_all(b",\n")?;
            }
            out.write_all(object.unwrap_or("null").as_bytes())?;
        }
        out.write_all(b"\n]}\n")?;
        out.flush()
    };
    write().map_err(|err| Error::io(&shown, err))
}

/// The config for the scenario: airflow.db and journal.db read in place; the provider from
/// the snapshot's Parquet file, or listed over HTTP at `url`; the operations as `layout` says.
pub fn config(dags: usize, layout: Layout, url: Option<&str>) -> String {
    let mut text = String::from(
        "# Written by `onceonly synth`: audit with --from-snapshot . or straight from the sources.\n\n\
         [airflow]\nurl = \"sqlite:///airflow.db\"\n\n\
         [journal]\nurl = \"sqlite:///journal.db\"\ntable = \"export_journal\"\n\n",
    );
    match url {
        None => text.push_str(
            "[provider]\nsnapshot = \"provider.parquet\"\nvoid_statuses = [\"cancelled\"]\n",
        ),
        Some(url) => text.push_str(&listing(url)),
    }
    let operation = |name: &str, dag_id: &str| {
        format!(
            "\n[[operation]]\nname = \"{name}\"\ndag_id = \"{dag_id}\"\ntask_id = \"export\"\n\
             key = \"synth:{{dag_id}}:{{interval_start:%Y-%m-%dT%H}}\"\n\
             # the synthetic DAGs are scheduled in UTC and have no serialized version\n\
             timezone = \"UTC\"\n"
        )
    };
    match layout {
        Layout::OperationPerDag => {
            for dag in 0..dags.max(1) {
                let dag_id = dag_name(dag);
                text.push_str(&operation(&dag_id, &dag_id));
            }
        }
        Layout::GlobOperation => text.push_str(&operation("export", "*")),
    }
    text
}

/// `[provider]` listing the mock provider (`onceonly mock-provider --state provider_state.json`).
/// The listing may send 100 requests a second (Stripe's documented read limit in live mode),
/// not the default 10, at which a listing of a large scenario would mostly wait on the limit.
pub fn listing(url: &str) -> String {
    format!(
        r#"[provider]
url = "{url}"
pagination = "cursor"
items = "data"
page_size = 1000
concurrency = 4
requests_per_second = 100
created_after_param = "created_after"
created_before_param = "created_before"
time_format = "epoch_seconds"
void_statuses = ["cancelled"]

[provider.fields]
external_id = "id"
op_key = "idempotency_key"
created_at = "created"
status = "status"
payload_hash = "payload_sha256"
interval_start = "metadata.interval_start"
interval_end = "metadata.interval_end"
"#
    )
}

/// Airflow's SQLite timestamp text: `2024-01-01 05:00:00.000000`, UTC without an offset.
fn airflow_time(micros: Option<i64>) -> Option<String> {
    micros.and_then(|micros| {
        chrono::DateTime::from_timestamp_micros(micros)
            .map(|at| at.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    })
}

#[derive(Clone)]
enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
    Real(Option<f64>),
}

/// Inserts rows `BATCH` at a time with one prepared multi-row statement.
struct Inserter {
    table: &'static str,
    columns: &'static [&'static str],
    rows: Vec<Vec<Cell>>,
}

const BATCH: usize = 200;

impl Inserter {
    fn new(table: &'static str, columns: &'static [&'static str]) -> Inserter {
        Inserter {
            table,
            columns,
            rows: Vec::with_capacity(BATCH),
        }
    }

    async fn push(&mut self, conn: &mut sqlx::SqliteConnection, row: Vec<Cell>) -> Result<()> {
        debug_assert_eq!(row.len(), self.columns.len());
        self.rows.push(row);
        if self.rows.len() == BATCH {
            self.flush(conn).await?;
        }
        Ok(())
    }

    async fn flush(&mut self, conn: &mut sqlx::SqliteConnection) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let one = format!("({})", vec!["?"; self.columns.len()].join(", "));
        let sql = format!(
            "INSERT INTO {} ({}) VALUES {}",
            self.table,
            self.columns.join(", "),
            vec![one; self.rows.len()].join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for row in self.rows.drain(..) {
            for cell in row {
                query = match cell {
                    Cell::Text(value) => query.bind(value),
                    Cell::Int(value) => query.bind(value),
                    Cell::Real(value) => query.bind(value),
                };
            }
        }
        query.execute(&mut *conn).await.map_err(|err| {
            Error::io(
                format!("writing {}", self.table),
                std::io::Error::other(err),
            )
        })?;
        Ok(())
    }
}

async fn open(path: &Path) -> Result<sqlx::SqliteConnection> {
    use sqlx::ConnectOptions;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Off)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Off)
        .foreign_keys(false);
    options
        .connect()
        .await
        .map_err(|err| Error::io(path.display().to_string(), std::io::Error::other(err)))
}

async fn exec(conn: &mut sqlx::SqliteConnection, sql: String, path: &Path) -> Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut *conn)
        .await
        .map_err(|err| Error::io(path.display().to_string(), std::io::Error::other(err)))?;
    Ok(())
}

/// The real Airflow 3.3.2 metadata database the fixtures hold, emptied of its runs and tries.
const AIRFLOW_DB: &[u8] = include_bytes!("../../fixtures/airflow/out/airflow-3.3.2/airflow.db");

/// Tables holding what Airflow set up rather than what ran: kept as they are.
const KEPT: [&str; 8] = [
    "alembic_version",
    "dag",
    "dag_bundle",
    "dag_version",
    "serialized_dag",
    "dag_code",
    "log_template",
    "slot_pool",
];

const DAG_RUN: &[&str] = &[
    "id",
    "dag_id",
    "queued_at",
    "logical_date",
    "start_date",
    "end_date",
    "state",
    "run_id",
    "run_type",
    "triggered_by",
    "conf",
    "data_interval_start",
    "data_interval_end",
    "run_after",
    "last_scheduling_decision",
    "created_at",
    "updated_at",
    "clear_number",
    "span_status",
];

const TI: &[&str] = &[
    "id",
    "task_id",
    "dag_id",
    "run_id",
    "map_index",
    "start_date",
    "end_date",
    "duration",
    "state",
    "try_number",
    "max_tries",
    "hostname",
    "unixname",
    "pool",
    "pool_slots",
    "queue",
    "priority_weight",
    "operator",
    "queued_dttm",
    "pid",
    "executor",
    "updated_at",
    "span_status",
    "task_display_name",
];

const TIH: &[&str] = &[
    "task_instance_id",
    "task_id",
    "dag_id",
    "run_id",
    "map_index",
    "start_date",
    "end_date",
    "duration",
    "state",
    "try_number",
    "max_tries",
    "hostname",
    "unixname",
    "pool",
    "pool_slots",
    "queue",
    "priority_weight",
    "operator",
    "queued_dttm",
    "pid",
    "executor",
    "updated_at",
    "span_status",
    "task_display_name",
];

/// A UUID-shaped id, as Airflow 3 gives every try (32 hex digits, no dashes).
fn try_uuid(row: usize) -> String {
    let mut rng = Rng(row as u64 ^ 0x7469_5f69_6400_0000);
    format!("{:016x}{:016x}", rng.next(), rng.next())
}

/// Writes the attempts as Airflow 3.3.2 stores them: one `dag_run` per run, the latest try of
/// each task instance in `task_instance`, earlier tries in `task_instance_history`.
async fn write_airflow_db(path: &Path, attempts: &DataFrame) -> Result<()> {
    crate::output::file(path, AIRFLOW_DB)?;
    let mut conn = open(path).await?;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .fetch_all(&mut conn)
    .await
    .map_err(|err| Error::io(path.display().to_string(), std::io::Error::other(err)))?;
    exec(&mut conn, "BEGIN".into(), path).await?;
    for table in tables.iter().filter(|t| !KEPT.contains(&t.as_str())) {
        exec(&mut conn, format!("DELETE FROM \"{table}\""), path).await?;
    }

    let texts = |name: &str| crate::cells::texts(attempts, name);
    let numbers = |name: &str| crate::cells::ints(attempts, name);
    let (dag, run, state, host) = (
        texts("dag_id")?,
        texts("run_id")?,
        texts("state")?,
        texts("hostname")?,
    );
    let (number, pid, clears) = (
        numbers("try_number")?,
        numbers("pid")?,
        numbers("clear_number")?,
    );
    let (start, end, queued, iv_start, iv_end, run_after) = (
        numbers("start_date")?,
        numbers("end_date")?,
        numbers("queued_at")?,
        numbers("interval_start")?,
        numbers("interval_end")?,
        numbers("run_after")?,
    );
    let t = |micros: Option<i64>| Cell::Text(airflow_time(micros));
    let s = |value: &Option<String>| Cell::Text(value.clone());
    let mut runs = Inserter::new("dag_run", DAG_RUN);
    let mut current = Inserter::new("task_instance", TI);
    let mut history = Inserter::new("task_instance_history", TIH);
    let height = attempts.height();
    let mut run_id = 0i64;
    let mut first_of_run = 0usize;
    for row in 0..height {
        let last_of_run = row + 1 == height || run[row + 1] != run[row] || dag[row + 1] != dag[row];
        let duration = match (start[row], end[row]) {
            (Some(a), Some(b)) => Some((b - a) as f64 / 1e6),
            _ => None,
        };
        let mut cells = vec![
            Cell::Text(Some("export".into())),
            s(&dag[row]),
            s(&run[row]),
            Cell::Int(Some(-1)),
            t(start[row]),
            t(end[row]),
            Cell::Real(duration),
            s(&state[row]),
            Cell::Int(number[row]),
            Cell::Int(Some(1)),
            s(&host[row]),
            Cell::Text(Some("airflow".into())),
            Cell::Text(Some("default_pool".into())),
            Cell::Int(Some(1)),
            Cell::Text(Some("default".into())),
            Cell::Int(Some(1)),
            Cell::Text(Some("PythonOperator".into())),
            t(queued[row]),
            Cell::Int(pid[row]),
            Cell::Text(Some("LocalExecutor".into())),
            t(end[row]),
            Cell::Text(Some("not_started".into())),
            Cell::Text(Some("export".into())),
        ];
        cells.insert(0, Cell::Text(Some(try_uuid(row))));
        if last_of_run {
            current.push(&mut conn, cells).await?;
            run_id += 1;
            let run_state = match state[row].as_deref() {
                Some("success") => "success",
                _ => "failed",
            };
            runs.push(
                &mut conn,
                vec![
                    Cell::Int(Some(run_id)),
                    s(&dag[row]),
                    t(queued[first_of_run]),
                    t(iv_start[row]),
                    t(start[first_of_run]),
                    t(end[row]),
                    Cell::Text(Some(run_state.into())),
                    s(&run[row]),
                    Cell::Text(Some("scheduled".into())),
                    Cell::Text(Some("timetable".into())),
                    Cell::Text(Some("{}".into())),
                    t(iv_start[row]),
                    t(iv_end[row]),
                    t(run_after[row]),
                    t(end[row]),
                    t(queued[first_of_run]),
                    t(end[row]),
                    Cell::Int(clears[row]),
                    Cell::Text(Some("not_started".into())),
                ],
            )
            .await?;
            first_of_run = row + 1;
        } else {
            history.push(&mut conn, cells).await?;
        }
    }
    for inserter in [&mut runs, &mut current, &mut history] {
        inserter.flush(&mut conn).await?;
    }
    exec(&mut conn, "COMMIT".into(), path).await?;
    use sqlx::Connection;
    let _ = conn.close().await;
    Ok(())
}

const JOURNAL_COLUMNS: &[&str] = &[
    "op_key",
    "dag_id",
    "task_id",
    "map_index",
    "run_id",
    "try_number",
    "phase",
    "external_id",
    "payload_hash",
    "recorded_at",
    "approval_id",
    "approval_expires_at",
];

/// The journal as a task writes it: canonical columns and phases, RFC 3339 times. No unique
/// constraints: the tasks that caused these faults wrote through an older, unguarded path.
async fn write_journal_db(path: &Path, journal: &DataFrame) -> Result<()> {
    if path.exists() {
        std::fs::remove_file(path).map_err(|err| Error::io(path.display().to_string(), err))?;
    }
    let mut conn = open(path).await?;
    exec(
        &mut conn,
        "CREATE TABLE export_journal (op_key TEXT NOT NULL, dag_id TEXT NOT NULL, \
         task_id TEXT NOT NULL, map_index INTEGER, run_id TEXT NOT NULL, \
         try_number INTEGER NOT NULL, phase TEXT NOT NULL, external_id TEXT, payload_hash TEXT, \
         recorded_at TEXT NOT NULL, approval_id TEXT, approval_expires_at TEXT)"
            .into(),
        path,
    )
    .await?;
    exec(&mut conn, "BEGIN".into(), path).await?;
    let texts = |name: &str| crate::cells::texts(journal, name);
    let columns: Vec<Vec<Option<String>>> = [
        "op_key",
        "dag_id",
        "task_id",
        "run_id",
        "phase",
        "external_id",
        "payload_hash",
    ]
    .iter()
    .map(|name| texts(name))
    .collect::<Result<_>>()?;
    let number = crate::cells::ints(journal, "try_number")?;
    let recorded = crate::cells::ints(journal, "recorded_at")?;
    let mut rows = Inserter::new("export_journal", JOURNAL_COLUMNS);
    for row in 0..journal.height() {
        let s = |column: usize| Cell::Text(columns[column][row].clone());
        rows.push(
            &mut conn,
            vec![
                s(0),
                s(1),
                s(2),
                Cell::Int(Some(-1)),
                s(3),
                Cell::Int(number[row]),
                s(4),
                s(5),
                s(6),
                Cell::Text(recorded[row].map(crate::timestamp::format)),
                Cell::Text(None),
                Cell::Text(None),
            ],
        )
        .await?;
    }
    rows.flush(&mut conn).await?;
    exec(&mut conn, "COMMIT".into(), path).await?;
    use sqlx::Connection;
    let _ = conn.close().await;
    Ok(())
}
