//! A verdict for every try of an operation task (SPEC §5), so a try Airflow recorded as
//! failed but that did cause the side effect is visible.
//!
//! | verdict | the try ... |
//! |---|---|
//! | `committed` | committed an object that it created, the first for its interval |
//! | `reconciled` | committed an object an earlier try of its interval had created (the provider replayed the key), or wrote a `reconciled` row |
//! | `duplicate` | created or committed an object while an earlier live object of its interval existed |
//! | `lost-response` | created an object under its key but committed nothing |
//! | `intent-only` | wrote an intent, no outcome, and nothing was created |
//! | `failed-before-effect` | failed with nothing created (a `failed` row, or no journal row at all) |
//! | `no-operation` | did not fail, wrote no journal row and created nothing under its key |
//! | `in-flight` | had not finished when the sources were read (`crate::in_flight`): judged when it finishes |

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::ahead;
use crate::cells::{IntArray, one_array, one_chunk};
use crate::dictionary::NULL as NONE;
use crate::error::{EngineContext, Result};
use crate::in_flight::InFlight;
use crate::model::Phase;
use crate::prepare::{Intervals, Prepared, model};

/// The columns of `model::READ_ON_DEMAND` the verdicts frame ([`Verdicts::frame`]) shows: each
/// try's worker and process.
pub const FRAME_READS: &[crate::model::SourceColumn] = &[
    crate::model::SourceColumn {
        table: crate::model::Table::Attempts,
        name: "hostname",
    },
    crate::model::SourceColumn {
        table: crate::model::Table::Attempts,
        name: "pid",
    },
];

pub const VERDICTS: [&str; 8] = [
    "committed",
    "reconciled",
    "duplicate",
    "lost-response",
    "intent-only",
    "failed-before-effect",
    "no-operation",
    "in-flight",
];

/// Every operation try's verdict, with the key and the object it is tied to, as rows of the
/// prepared frames: the verdicts frame ([`Verdicts::frame`], one row per try with its identity,
/// state, key, object and verdict) is made of them only when something reads it (`--verdicts`,
/// the HTML page, `trace`, a partition's result), not for every audit.
pub struct Verdicts {
    /// The verdict of each try (its place in `VERDICTS`).
    verdict: Vec<IdxSize>,
    key: Vec<KeyOf>,
    object: Vec<ObjectOf>,
    /// How many tries had each verdict (those no try had are left out).
    pub counts: BTreeMap<String, usize>,
}

/// Where a try's key is read from.
#[derive(Clone, Copy)]
enum KeyOf {
    /// Its first journal row's `op_key` (a row of the prepared journal).
    Journal(u32),
    /// Its own expected key.
    Expected,
}

/// Where the id of the object a try is tied to is read from.
#[derive(Clone, Copy)]
enum ObjectOf {
    None,
    /// The `external_id` of its committed journal row.
    Journal(u32),
    /// The `external_id` of the object it created (a row of the prepared objects).
    Object(u32),
}

/// Every try's verdict (see [`Verdicts`]).
///
/// Every step is a pass over arrays indexed by the try's row, the object's row or the dense
/// key and id codes `prepare` gave each frame, not a join or group-by on text keys.
pub fn compute(prepared: &Prepared, in_flight: &InFlight) -> Result<Verdicts> {
    let tries = &prepared.tries;
    let t = std::time::Instant::now();
    let journal = Journal::of(prepared)?;
    let intervals = &prepared.intervals;
    let objects = Objects::of(prepared)?;
    crate::timing::phase("verdicts:read", t);
    let t = std::time::Instant::now();
    let first_live = first_live(intervals, &objects);
    crate::timing::phase("verdicts:first_live", t);
    let t = std::time::Instant::now();

    let int =
        |name: &str| -> Result<IntArray> { Ok(one_array(&crate::cells::int_column(tries, name)?)) };
    let mut failed_state = failed_states(&crate::cells::text_column(tries, "state")?);
    // A running try whose heartbeat is too old is judged as the failed try Airflow will make it.
    for (row, failed) in failed_state.iter_mut().enumerate() {
        if in_flight.probably_dead(row) {
            *failed = Some(true);
        }
    }
    let facts = VerdictInputs {
        journal,
        objects,
        intervals,
        first_live,
        start: int("start_date")?,
        end: int("end_date")?,
        iv_start: int("iv_start")?,
        expected_key: one_array(&crate::cells::code_column(tries, model::KEY_CODE)?),
        failed_state,
        in_flight,
    };
    // The tries are judged in two halves, one on a thread of its own.
    let mut parts =
        crate::parallel::over_rows(tries.height(), |part| facts.judge(part)).into_iter();
    let mut judged = parts.next().expect("over_rows gives every part");
    for part in parts {
        judged.append(part);
    }
    crate::timing::phase("verdicts:tries", t);
    let mut counts = [0usize; VERDICTS.len()];
    for &verdict in &judged.verdict {
        counts[verdict as usize] += 1;
    }
    let counts = VERDICTS
        .iter()
        .zip(counts)
        .filter(|&(_, count)| count > 0)
        .map(|(verdict, count)| (verdict.to_string(), count))
        .collect();
    Ok(Verdicts {
        verdict: judged.verdict,
        key: judged.key,
        object: judged.object,
        counts,
    })
}

impl Verdicts {
    /// The verdicts frame: one row per try of `prepared` (the frames these verdicts were
    /// computed from), its identity, state, key, object and verdict.
    pub fn frame(&self, prepared: &Prepared) -> Result<DataFrame> {
        let tries = &prepared.tries;
        let text = |frame: &DataFrame, name: &str| -> Result<StringChunked> {
            Ok(one_chunk(crate::cells::text_column(frame, name)?))
        };
        let (journal_keys, journal_ids) = (
            text(&prepared.journal, "op_key")?,
            text(&prepared.journal, "external_id")?,
        );
        let (expected, object_ids) = (
            text(tries, "expected_key")?,
            text(&prepared.objects, "external_id")?,
        );
        // The two text columns are written in two halves, one on a thread of its own.
        let parts = crate::parallel::over_rows(tries.height(), |rows| {
            let mut op_key = StringChunkedBuilder::new("op_key".into(), rows.len());
            let mut external_id = StringChunkedBuilder::new("external_id".into(), rows.len());
            for row in rows {
                op_key.append_option(match self.key[row] {
                    KeyOf::Journal(at) => journal_keys.get(at as usize),
                    KeyOf::Expected => expected.get(row),
                });
                external_id.append_option(match self.object[row] {
                    ObjectOf::None => None,
                    ObjectOf::Journal(at) => journal_ids.get(at as usize),
                    ObjectOf::Object(at) => object_ids.get(at as usize),
                });
            }
            (op_key.finish(), external_id.finish())
        });
        let mut parts = parts.into_iter();
        let (mut op_key, mut external_id) = parts.next().expect("over_rows gives every part");
        for (keys, ids) in parts {
            op_key.append(&keys).engine("computing verdicts")?;
            external_id.append(&ids).engine("computing verdicts")?;
        }
        let mut out = prepared
            .operations
            .with_column(tries)?
            .select([
                "dag_id",
                "task_id",
                "map_index",
                "run_id",
                "try_number",
                "operation",
                "state",
                "start_date",
                "end_date",
                "hostname",
                "pid",
            ])
            .engine("computing verdicts")?;
        // The interval's label and basis go after the operation, where the frame has always
        // had them, as texts.
        let label_at = out.get_column_index("operation").map_or(0, |at| at + 1);
        let bases = crate::cells::code_column(tries, crate::prepare::model::tries::BASIS)?;
        let bases = bases.iter().map(|code| code.map(|code| code as IdxSize));
        let basis = crate::cells::repeated_texts(
            crate::prepare::model::tries::BASIS,
            &crate::prepare::model::tries::BASES,
            bases,
        );
        out.insert_column(label_at, crate::prepare::interval_labels(tries)?)
            .and_then(|out| out.insert_column(label_at + 1, basis.into_column()))
            .engine("computing verdicts")?;
        out.hstack_mut(&[
            op_key.into_column(),
            external_id.into_column(),
            crate::cells::repeated_texts(
                "verdict",
                &VERDICTS,
                self.verdict.iter().map(|&v| Some(v)),
            )
            .into_column(),
        ])
        .engine("computing verdicts")?;
        Ok(out)
    }
}

/// What the verdicts are drawn from.
struct VerdictInputs<'a> {
    journal: Journal,
    objects: Objects<'a>,
    intervals: &'a Intervals,
    first_live: Vec<Option<u32>>,
    start: IntArray,
    end: IntArray,
    iv_start: IntArray,
    expected_key: CodeArray,
    /// Whether each try's state is a failure's; None where it has none.
    failed_state: Vec<Option<bool>>,
    in_flight: &'a InFlight,
}

/// The verdict (its place in `VERDICTS`), the key and the object of a range of tries.
struct Judged {
    verdict: Vec<IdxSize>,
    key: Vec<KeyOf>,
    object: Vec<ObjectOf>,
}

impl Judged {
    fn append(&mut self, other: Judged) {
        self.verdict.extend(other.verdict);
        self.key.extend(other.key);
        self.object.extend(other.object);
    }
}

impl VerdictInputs<'_> {
    fn judge(&self, rows: std::ops::Range<usize>) -> Judged {
        let VerdictInputs {
            journal,
            objects,
            intervals,
            first_live,
            start,
            end,
            iv_start,
            expected_key,
            failed_state,
            in_flight,
        } = self;
        let mut keys = Vec::with_capacity(rows.len());
        let mut objects_of = Vec::with_capacity(rows.len());
        let mut verdicts = Vec::with_capacity(rows.len());
        // Tries in no order read their journal rows and objects from all over: each row asks
        // for them a few rows ahead (`crate::ahead`).
        let (key_ids, ids) = (
            journal.key_ids.values().as_slice(),
            journal.ids.values().as_slice(),
        );
        let created = objects.created.values().as_slice();
        // What a try names: its journal rows' cells, its interval's first live object.
        let far = |row: usize| {
            let Some(rows) = journal.of_try.get(row) else {
                return;
            };
            if let Some(first) = rows.first {
                ahead::ask(key_ids, first as usize);
            }
            if let Some(committed) = rows.committed {
                ahead::ask(ids, committed as usize);
            }
            if let Some(group) = intervals.of_try(row) {
                ahead::ask(first_live, group as usize);
            }
        };
        // What those name: the objects under its key, the object its id names, the first live
        // object's cells.
        let near = |row: usize| {
            let Some(rows) = journal.of_try.get(row) else {
                return;
            };
            if let Some(&key) = rows.first.and_then(|first| key_ids.get(first as usize))
                && key != NONE
            {
                objects.by_key.ask(key);
            }
            if let Some(&id) = rows.committed.and_then(|row| ids.get(row as usize)) {
                ahead::ask(&objects.by_id, id as usize);
            }
            if let Some(Some(first)) = intervals
                .of_try(row)
                .and_then(|group| first_live.get(group as usize))
            {
                ahead::ask(created, *first as usize);
                ahead::ask(objects.id_codes.values().as_slice(), *first as usize);
            }
        };
        ahead::each_row(rows, far, near, |row| {
            let rows = journal.of_try.get(row).copied().unwrap_or_default();
            // The try's key: that of its first journal row, else the expected one.
            let (key_of, key) = match rows.first.and_then(|r| Some((r, journal.key(r)?))) {
                Some((first, key)) => (KeyOf::Journal(first), key),
                None => (KeyOf::Expected, expected_key.get(row).unwrap_or(NONE)),
            };
            // Objects are told apart by their id codes (the journal's and the provider's are
            // coded alike).
            let committed = rows.committed.map(|r| {
                let object = journal.object(r, objects);
                (journal.ids.get(r as usize).map(|id| (id, r)), object)
            });
            // The earliest object it created under its key while it ran.
            let created = match (key, start.get(row)) {
                (NONE, _) | (_, None) => None,
                (key, Some(started)) => objects
                    .with_key(key)
                    .iter()
                    .copied()
                    .filter(|&object| {
                        objects.created.get(object as usize).is_some_and(|created| {
                            created + crate::prepare::ROUNDING > started
                                && end.get(row).is_none_or(|ended| created <= ended)
                        })
                    })
                    .min_by_key(|&object| objects.order(object)),
            };
            let committed_created = committed
                .and_then(|(_, object)| object)
                .and_then(|object| objects.created.get(object as usize));
            let committed_object = committed.and_then(|(_, object)| object);
            let created_id = created
                .and_then(|object| objects.id_codes.get(object as usize).map(|id| (id, object)));
            let created_created = created.and_then(|object| objects.created.get(object as usize));
            let (object, object_of) = match (committed.and_then(|(id, _)| id), created_id) {
                (Some((id, r)), _) => (Some(id), ObjectOf::Journal(r)),
                (None, Some((id, object))) => (Some(id), ObjectOf::Object(object)),
                (None, None) => (None, ObjectOf::None),
            };
            let created_at = committed_created.or(created_created);

            // A duplicate: a live object of the interval already existed when this one was created.
            let first = intervals
                .of_try(row)
                .and_then(|group| first_live[group as usize])
                .map(|first| {
                    (
                        objects.id_codes.get(first as usize),
                        objects.created.get(first as usize),
                    )
                });
            let is_later_duplicate = match (first, object, created_at) {
                (Some((Some(first_id), Some(first_created))), Some(object), Some(created_at)) => {
                    first_id != object && first_created < created_at
                }
                _ => false,
            };
            let failed_state = failed_state[row];
            // An object of another interval (a key collision, K003: another day, or another DAG
            // of a glob operation) is not this interval's replay.
            let own_interval = match committed_object {
                None => true,
                Some(object) => match (objects.interval[object as usize], intervals.of_try(row)) {
                    (Some(its), Some(ours)) => its == ours,
                    _ => objects
                        .iv_start
                        .get(object as usize)
                        .is_none_or(|start| iv_start.get(row) == Some(start)),
                },
            };
            let replayed = rows.reconciled
                || matches!((committed_created, intervals.earlier_ended(row)), (Some(c), Some(e)) if c <= e);
            let verdict = if in_flight.try_in_flight(row) {
                "in-flight"
            } else if committed.is_some() && own_interval && replayed {
                "reconciled"
            } else if committed.is_some() && is_later_duplicate {
                "duplicate"
            } else if committed.is_some() {
                "committed"
            } else if created.is_some() && is_later_duplicate {
                "duplicate"
            } else if created.is_some() {
                "lost-response"
            } else if rows.intent && !rows.failed && failed_state == Some(false) {
                "intent-only"
            } else if rows.failed || failed_state == Some(true) {
                "failed-before-effect"
            } else if rows.intent {
                "intent-only"
            } else {
                "no-operation"
            };
            keys.push(key_of);
            objects_of.push(object_of);
            let place = VERDICTS.iter().position(|known| *known == verdict);
            verdicts.push(place.expect("every verdict is one of VERDICTS") as IdxSize);
        });
        Judged {
            verdict: verdicts,
            key: keys,
            object: objects_of,
        }
    }
}

/// What a try's journal rows say, in the order they were recorded (NULL times first), rows
/// recorded at one time in the journal's own order (`model::JournalOrder`).
#[derive(Clone, Copy, Default)]
struct TryJournal {
    /// Its first row.
    first: Option<u32>,
    /// Its first committed or reconciled row that names an object.
    committed: Option<u32>,
    intent: bool,
    failed: bool,
    reconciled: bool,
}

struct Journal {
    of_try: Vec<TryJournal>,
    /// Each row's key code and object id code (NULL where it has none).
    key_ids: CodeArray,
    ids: CodeArray,
}

impl Journal {
    fn of(prepared: &Prepared) -> Result<Journal> {
        let frame = &prepared.journal;
        let phases = prepared.journal_phases()?;
        let recorded = one_chunk(crate::cells::int_column(frame, "recorded_at")?);
        let ids = one_array(&prepared.journal_external_id_codes()?);
        let try_row = prepared.journal_try_rows()?;
        let mut of_try = vec![TryJournal::default(); prepared.tries.height()];
        let order = crate::model::JournalOrder::of(frame)?;
        let earlier = |a: u32, b: u32| order.cmp(a as usize, b as usize).then(a.cmp(&b)).is_lt();
        // Journal rows in no order update their tries' entries all over: each row asks for the
        // entry of the row a few on, and for the time of that entry's first row (`crate::ahead`).
        let (try_rows, recorded_at) = (ahead::values(&try_row), ahead::values(&recorded));
        let each_try = crate::cells::each_number(&try_row);
        for (row, (try_row, &phase)) in each_try.zip(phases).enumerate() {
            if let Some(&far) = try_rows.get(row + ahead::FAR) {
                ahead::ask(&of_try, far as usize);
            }
            if let Some(first) = try_rows
                .get(row + ahead::NEAR)
                .and_then(|&near| of_try.get(near as usize))
                .and_then(|near| near.first)
            {
                ahead::ask(recorded_at, first as usize);
            }
            let Some(try_row) = try_row else { continue };
            let row = row as u32;
            let rows = &mut of_try[try_row as usize];
            if rows.first.is_none_or(|first| earlier(row, first)) {
                rows.first = Some(row);
            }
            match phase {
                Some(Phase::Intent) => rows.intent = true,
                Some(Phase::Failed) => rows.failed = true,
                Some(Phase::Reconciled) => rows.reconciled = true,
                _ => {}
            }
            if phase.is_some_and(Phase::done)
                && ids.get(row as usize).is_some()
                && rows.committed.is_none_or(|first| earlier(row, first))
            {
                rows.committed = Some(row);
            }
        }
        Ok(Journal {
            of_try,
            key_ids: one_array(&prepared.journal_key_codes()?),
            ids,
        })
    }

    /// The key code of a row, None where it has no key.
    fn key(&self, row: u32) -> Option<u32> {
        self.key_ids.get(row as usize)
    }

    /// The row of the object a journal row names, if the provider lists it.
    fn object(&self, row: u32, objects: &Objects) -> Option<u32> {
        let id = self.ids.get(row as usize)?;
        objects.by_id[id as usize]
    }
}

struct Objects<'a> {
    ids: TextArray,
    /// Each object's id code, as the journal's ids are coded.
    id_codes: CodeArray,
    created: IntArray,
    iv_start: IntArray,
    live: BooleanChunked,
    /// The pipeline interval of each object, where a try has it.
    interval: Vec<Option<u32>>,
    /// The object row of each object id.
    by_id: Vec<Option<IdxSize>>,
    by_key: &'a crate::prepare::ObjectsByKey,
}

impl Objects<'_> {
    fn of(prepared: &Prepared) -> Result<Objects<'_>> {
        let frame = &prepared.objects;
        let int = |name: &str| -> Result<IntArray> {
            Ok(one_array(&crate::cells::int_column(frame, name)?))
        };
        Ok(Objects {
            ids: one_array(&crate::cells::text_column(frame, "external_id")?),
            id_codes: one_array(&prepared.object_external_id_codes()?),
            created: int("created_at")?,
            iv_start: int("iv_start")?,
            live: crate::cells::flag_column(frame, "live")?,
            interval: prepared.object_intervals()?.to_vec(),
            by_id: prepared.object_rows_by_id()?,
            by_key: prepared.objects_by_key()?,
        })
    }

    fn with_key(&self, key: u32) -> &[u32] {
        self.by_key.all(key)
    }

    /// Objects in the order they appeared: by creation time (NULL first), then id.
    fn order(&self, row: u32) -> (Option<i64>, Option<&str>) {
        (self.created.get(row as usize), self.ids.get(row as usize))
    }
}

/// A code column's cells in one array.
type CodeArray = <UInt32Type as PolarsDataType>::Array;
/// A text column's cells in one array.
type TextArray = <StringType as PolarsDataType>::Array;

/// Whether each try's state is a failure's (`failed`, `up_for_retry`, `upstream_failed`), None
/// where it has none; a run of one state (`cells::Runs`) is looked at once.
fn failed_states(states: &StringChunked) -> Vec<Option<bool>> {
    crate::cells::each_text(states, |state| {
        state.map(|state| matches!(state, "failed" | "up_for_retry" | "upstream_failed"))
    })
}

/// Per interval, its first live object: by creation time (NULL first), then id.
fn first_live(intervals: &Intervals, objects: &Objects) -> Vec<Option<u32>> {
    let mut first: Vec<Option<u32>> = vec![None; intervals.count()];
    for (row, (group, live)) in objects.interval.iter().zip(objects.live.iter()).enumerate() {
        let (Some(group), Some(true)) = (group, live) else {
            continue;
        };
        let slot = &mut first[*group as usize];
        let row = row as u32;
        if slot.is_none_or(|current| objects.order(row) < objects.order(current)) {
            *slot = Some(row);
        }
    }
    first
}
