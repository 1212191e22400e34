//! Joins the three canonical tables into the frames every rule reads.
//!
//! * `tries`: attempts of operation tasks, each with its pipeline, its **audit interval** and
//!   its expected key;
//! * `journal`: journal rows with their pipeline and the interval of their run;
//! * `objects`: provider objects with liveness and their attribution to a key, a pipeline
//!   and an interval.
//!
//! A pipeline (a DAG's task, coded) stands for its operation: `Prepared::operations` names it
//! for the rows that are printed.
//!
//! The audit interval (SPEC §2) is the data interval where it has length, else the logical
//! date, else `run_after`; `basis` says which one was used.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use polars::prelude::*;

use crate::cells::{IntArray, one_array};
use crate::config::{Config, Operation};
use crate::dictionary::{CopiedDictionary, Dictionary, Encoded, NULL, TextDictionary};
use crate::error::{EngineContext, Result};
use crate::keys::conf_column;
use crate::parallel::Started;
use crate::timing::Run;

mod claims;
mod intervals;
pub mod model;
mod objects;
mod pipelines;

pub use claims::{Claim, Claimants, LeftOut, Scope, scope_objects};
pub use intervals::Intervals;
pub use objects::{Grouped, JournalTexts, ObjectTexts};
use pipelines::Unnamed;
pub use pipelines::{Operations, Pipelines};

/// Providers often give creation times in whole seconds: an object stamped up to this many
/// microseconds before a try's intent or start may still be that try's.
pub const ROUNDING: i64 = 1_000_000;

pub use crate::model::{TASK_INSTANCE, TRY};
/// The columns that identify one interval of one pipeline: a DAG's task, coded in
/// `pipeline` (SPEC §4: an operation whose `dag_id` is a glob covers each matching DAG as its
/// own pipeline, and its `name` only labels). Mapped task instances are separate operations:
/// `map_index` is part of the identity.
pub const PIPELINE_INTERVAL: [&str; 4] = ["pipeline", "map_index", "iv_start", "iv_end"];

/// The sort that brings the rows of each pipeline interval together, to be read as groups: by
/// operation and DAG, then the pipeline (a DAG's task, coded in the order read: it orders
/// only a DAG's tasks of one operation among themselves, and findings are sorted again by what
/// they say), then the interval, then `then`. The first three are one column,
/// `pipeline_rank` ([`Operations::with_rank`] adds it); `dag_id` and `pipeline` order the rows
/// without a pipeline among themselves.
pub fn in_pipeline_interval_order(then: &[&'static str]) -> Vec<&'static str> {
    let order = [
        model::interval::PIPELINE_RANK,
        "dag_id",
        "pipeline",
        "map_index",
        "iv_start",
        "iv_end",
    ];
    order.iter().chain(then).copied().collect()
}

pub use crate::model::ProviderWindow;

/// The prepared tables (their columns: [`model`]), collected once and shared by every rule.
///
/// Keys, object ids and runs are coded ([`model::Codes`]): the same value has the same code in
/// every frame, so per-value facts are arrays indexed by code, sized by `codes`.
pub struct Prepared {
    pub tries: DataFrame,
    pub journal: DataFrame,
    pub objects: DataFrame,
    pub key_ttl: Option<i64>,
    /// What the provider returns for a key it still remembers (`[provider] replay`).
    pub replay: crate::config::Replay,
    pub window: ProviderWindow,
    /// How many keys, object ids and runs have codes.
    pub codes: model::Codes,
    /// The pipeline intervals of the tries, coded.
    pub intervals: Intervals,
    /// The operation of each pipeline: the frames' `pipeline` column stands for it.
    pub operations: Operations,
    /// Per key code: whether the whole journal, audited or not, has a committed or reconciled
    /// row under the key. Keys past its end are the tries' alone.
    pub committed_keys: Vec<bool>,
    /// Indexes over `objects`, worked out once when first asked for.
    object_indexes: ObjectIndexes,
    /// Indexes over `journal`, likewise.
    journal_indexes: JournalIndexes,
    /// Provider objects a `--dag` audit left out because no DAG claims them (`objects`' columns;
    /// no rows otherwise): not the audit's to report, but still what exists for an interval.
    pub unclaimed: DataFrame,
    /// The DAGs whose key template formats a time in the DAG's own zone while the metadata
    /// read gives no zone for the DAG ([`zones_unknown`]): their keys' times are in UTC.
    pub zones_unknown: BTreeSet<String>,
}

/// The try whose interval a row of a prepared frame has: a try is its own; a journal row
/// names its own try (`try_row`), an object its home try (`interval_try`), where it has one.
enum NamedTries {
    Themselves,
    Column(<UInt32Type as PolarsDataType>::Array),
}

impl NamedTries {
    fn of(&self, row: IdxSize) -> Option<IdxSize> {
        match self {
            NamedTries::Themselves => Some(row),
            NamedTries::Column(tries) => tries.get(row as usize),
        }
    }
}

/// What is worked out from `Prepared::journal` when first asked for (the journal is not
/// changed once prepared).
#[derive(Default)]
struct JournalIndexes {
    phases: std::sync::OnceLock<Vec<Option<crate::model::Phase>>>,
}

/// What is worked out from `Prepared::objects` when first asked for.
#[derive(Default)]
struct ObjectIndexes {
    /// The pipeline interval of each object (`Intervals::of_rows`).
    intervals: std::sync::OnceLock<Vec<Option<u32>>>,
    by_key: std::sync::OnceLock<ObjectsByKey>,
}

/// The rows of `objects` of each key code, in row order, and whether each object is live.
pub struct ObjectsByKey {
    rows: Grouped,
    live: Vec<bool>,
}

impl ObjectsByKey {
    /// Every object listed or journalled under the key.
    pub fn all(&self, key: u32) -> &[u32] {
        self.rows.of(key)
    }

    /// Asks for the memory [`all`](Self::all) reads for `key` ([`crate::ahead`]).
    pub fn ask(&self, key: u32) {
        self.rows.ask(key);
    }

    /// The live objects under the key.
    pub fn live(&self, key: u32) -> impl Iterator<Item = u32> + '_ {
        self.all(key)
            .iter()
            .copied()
            .filter(|&row| self.live[row as usize])
    }
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

    /// The key code of each try (its expected key's).
    pub fn try_key_codes(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.tries, model::KEY_CODE)
    }

    /// The key code of each journal row.
    pub fn journal_key_codes(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.journal, model::KEY_CODE)
    }

    /// The key code of each object (the key it is listed or journalled under).
    pub fn object_key_codes(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.objects, model::KEY_CODE)
    }

    /// The object id code of each journal row.
    pub fn journal_external_id_codes(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.journal, model::EXTERNAL_ID_CODE)
    }

    /// The object id code of each object.
    pub fn object_external_id_codes(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.objects, model::EXTERNAL_ID_CODE)
    }

    /// The try (row of `tries`) of each journal row, NULL where the audit has none.
    pub fn journal_try_rows(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.journal, model::journal::TRY_ROW)
    }

    /// The run code of each try.
    pub fn try_run_codes(&self) -> Result<UInt32Chunked> {
        crate::cells::code_column(&self.tries, model::tries::RUN_CODE)
    }

    /// The pipeline interval of a try (a row of `tries`), None where a part of it is NULL.
    pub fn interval_of_try(&self, row: usize) -> Option<u32> {
        self.intervals.of_try(row)
    }

    /// The pipeline interval of each of `rows` of the tries, the journal or the objects
    /// (`table`), where a try has it ([`Intervals::of_rows`]): a try, a journal row matched to
    /// its try and an object attributed to a try's interval take that try's, the other rows
    /// are found by their columns.
    pub fn intervals_of(
        &self,
        table: crate::model::Table,
        rows: impl Iterator<Item = IdxSize>,
    ) -> Result<Vec<Option<u32>>> {
        let tries = self.named_tries(table)?;
        self.intervals
            .of_rows(self.frame(table), rows, |row| tries.of(row))
    }

    /// The pipeline interval of each of `rows` of the tries, the journal or the objects
    /// (`table`), coded by [`Intervals::code_rows`] (equal parts, equal codes, NULL parts and
    /// all, whether a try has the interval or not), and how many codes there can be. A try,
    /// a journal row matched to its try and an object attributed to a try's interval take
    /// that try's code.
    pub fn code_interval_rows(
        &self,
        table: crate::model::Table,
        rows: &[IdxSize],
    ) -> Result<(Vec<u32>, usize)> {
        let tries = self.named_tries(table)?;
        self.intervals
            .code_rows(self.frame(table), rows, |row| tries.of(row))
    }

    /// The try whose interval each row of `table`'s frame has, where it names one.
    fn named_tries(&self, table: crate::model::Table) -> Result<NamedTries> {
        let column = match table {
            crate::model::Table::Attempts => return Ok(NamedTries::Themselves),
            crate::model::Table::Journal => model::journal::TRY_ROW,
            crate::model::Table::Provider => model::objects::INTERVAL_TRY,
        };
        let rows = crate::cells::code_column(self.frame(table), column)?;
        Ok(NamedTries::Column(one_array(&rows)))
    }

    /// The prepared frame of a table: the tries, the journal or the objects.
    pub fn frame(&self, table: crate::model::Table) -> &DataFrame {
        match table {
            crate::model::Table::Attempts => &self.tries,
            crate::model::Table::Journal => &self.journal,
            crate::model::Table::Provider => &self.objects,
        }
    }

    /// Whether each object is live.
    pub fn live_objects(&self) -> Result<BooleanChunked> {
        crate::cells::flag_column(&self.objects, model::objects::LIVE)
    }

    /// The row of `objects` of each object id code, None for ids the provider does not list
    /// (only the journal names them). An id listed twice takes its first row.
    pub fn object_rows_by_id(&self) -> Result<Vec<Option<IdxSize>>> {
        let mut rows = self.codes.per_external_id(None);
        for (row, id) in self.object_external_id_codes()?.iter().enumerate() {
            if let Some(id) = id {
                rows[id as usize].get_or_insert(row as IdxSize);
            }
        }
        Ok(rows)
    }

    /// The phase of each journal row (None where it is NULL), read once: each run of one phase
    /// (`cells::Runs`) is matched once.
    pub fn journal_phases(&self) -> Result<&[Option<crate::model::Phase>]> {
        if let Some(known) = self.journal_indexes.phases.get() {
            return Ok(known);
        }
        let texts = crate::cells::text_column(&self.journal, "phase")?;
        let phases = crate::model::Phase::of_cells(&texts);
        Ok(self.journal_indexes.phases.get_or_init(|| phases))
    }

    /// The pipeline interval of each row of `objects`, where a try has it. Two threads asking
    /// at once may both work it out; the answers are the same.
    pub fn object_intervals(&self) -> Result<&[Option<u32>]> {
        if let Some(known) = self.object_indexes.intervals.get() {
            return Ok(known);
        }
        let all = 0..self.objects.height() as IdxSize;
        let intervals = self.intervals_of(crate::model::Table::Provider, all)?;
        Ok(self.object_indexes.intervals.get_or_init(|| intervals))
    }

    /// The objects of each key code, and which of them are live.
    pub fn objects_by_key(&self) -> Result<&ObjectsByKey> {
        if let Some(known) = self.object_indexes.by_key.get() {
            return Ok(known);
        }
        let keys = self.object_key_codes()?;
        let live = self.live_objects()?;
        let index = ObjectsByKey {
            rows: Grouped::new(self.codes.keys, || crate::cells::each_number(&keys)),
            live: crate::cells::each_flag(&live)
                .map(|live| live == Some(true))
                .collect(),
        };
        Ok(self.object_indexes.by_key.get_or_init(|| index))
    }

    /// The rows of `tries` of each run code, in row order.
    pub fn tries_by_run(&self) -> Result<Grouped> {
        let runs = self.try_run_codes()?;
        Ok(Grouped::new(self.codes.runs, || {
            crate::cells::each_number(&runs)
        }))
    }

    /// Replaces the objects (a scoped audit's), forgetting the indexes over them.
    pub fn set_objects(&mut self, objects: DataFrame) {
        self.objects = objects;
        self.object_indexes = ObjectIndexes::default();
    }

    /// Whether the whole journal committed (or reconciled) the operation of a key.
    pub fn key_committed(&self, key: u32) -> bool {
        self.committed_keys.get(key as usize) == Some(&true)
    }

    /// Live objects attributed to an operation interval.
    pub fn live_in_intervals(&self) -> LazyFrame {
        self.objects().filter(
            col("live")
                .and(col(model::interval::PIPELINE).is_not_null())
                .and(col("iv_start").is_not_null()),
        )
    }

    /// The rows of `live_in_intervals`, in row order.
    pub fn live_in_interval_row_numbers(&self) -> Result<Vec<IdxSize>> {
        let live = self.live_objects()?;
        let pipeline = one_array(&crate::cells::code_column(
            &self.objects,
            model::interval::PIPELINE,
        )?);
        let start = one_array(&crate::cells::int_column(&self.objects, "iv_start")?);
        Ok((0..self.objects.height())
            .filter(|&row| {
                live.get(row) == Some(true)
                    && pipeline.get(row).is_some()
                    && start.get(row).is_some()
            })
            .map(|row| row as IdxSize)
            .collect())
    }

    /// The rows of `live_in_intervals` whose interval a try has, each with that interval.
    pub fn live_in_interval_rows(&self) -> Result<Vec<(usize, u32)>> {
        let intervals = self.object_intervals()?;
        Ok(self
            .live_in_interval_row_numbers()?
            .into_iter()
            .filter_map(|row| Some((row as usize, intervals[row as usize]?)))
            .collect())
    }

    /// What can be prepared before the provider's objects are needed: the tries, the
    /// journal, their intervals and the whole journal's keys and ids coded
    /// (`journal_texts`), the objects' too when they are already read (`objects`). The rest
    /// is [`Early::finish`]'s. `journal` holds the rows of the audited runs, `journal_texts`
    /// are every row's the source gave, so an object journalled by a run outside the audit is
    /// recognised and left out rather than reported as unjournaled.
    pub fn early<'t>(
        config: &Config,
        attempts: &DataFrame,
        journal: &DataFrame,
        journal_texts: &'t JournalTexts,
        objects: Option<&'t ObjectTexts>,
    ) -> Result<Early<'t>> {
        // The sources' keys and ids are coded on threads of their own while the tries and
        // the journal are prepared.
        std::thread::scope(|threads| {
            let coding = Started::start(threads, "coding the sources", || {
                let journal = objects::CodedJournal::of(journal_texts);
                match objects {
                    Some(objects) => SourcesCoded::All(journal.with_objects(objects)),
                    None => SourcesCoded::Journal(journal),
                }
            });
            let (tries, mut pipelines, zones_unknown) = Self::prepare_tries(config, attempts)?;
            // The tries' operation intervals are coded on a thread of their own from here on.
            let intervals = {
                let tries = tries.clone();
                Started::start(threads, "coding intervals", move || {
                    let t = std::time::Instant::now();
                    let intervals = Intervals::of(&tries);
                    crate::timing::phase("prepare:intervals", t);
                    intervals
                })
            };
            let (tries, journal, run_count) =
                Self::prepare_journal(config, tries, journal, &mut pipelines)?;
            Ok(Early {
                tries,
                journal,
                run_count,
                zones_unknown,
                operations: pipelines.operations(),
                intervals: intervals.finish()?,
                codes: coding.finish(),
            })
        })
    }

    /// The prepared tries: those of operation tasks, with their operation, pipeline, audit
    /// interval, interval label and expected key; and the pipelines coded so far.
    fn prepare_tries(
        config: &Config,
        attempts: &DataFrame,
    ) -> Result<(DataFrame, Pipelines, BTreeSet<String>)> {
        let t = std::time::Instant::now();
        let step = std::time::Instant::now();
        let mut attempts = with_conf_columns(config, attempts)?;
        let mut pipelines = Pipelines::default();
        let pipeline = pipelines.column(config, &attempts, Unnamed::Null)?;
        let attempts_operations_missing = pipeline.null_count() > 0;
        attempts.with_column(pipeline).engine("naming operations")?;

        // Tries of tasks that are not operations are left out; when there are none the frame
        // is kept as it is rather than copied by a filter that keeps every row.
        let mut tries = attempts.lazy();
        if attempts_operations_missing {
            tries = tries.filter(col(model::interval::PIPELINE).is_not_null());
        }
        let mut tries = tries.run("preparing tries")?;
        tries
            .hstack_mut(&audit_interval(&tries)?)
            .engine("audit intervals")?;
        crate::timing::phase("prepare:tries:intervals", step);
        let step = std::time::Instant::now();
        let mut formatted = Vec::new();
        for key in config.operations.iter().filter_map(|op| op.key.as_ref()) {
            formatted.extend(key.times().map(|(c, f, z)| (c, f.to_string(), z)));
        }
        formatted.sort();
        formatted.dedup();
        // Each (column, format, zone) is formatted on one of both cores.
        let times = crate::parallel::items(formatted.len(), |at| {
            let (column, format, zone) = &formatted[at];
            crate::keys::FormattedTimes::of(&tries, column, format, *zone)
        });
        let times = Times {
            formatted: &formatted,
            times: times.into_iter().collect::<Result<_>>()?,
        };
        crate::timing::phase("prepare:tries:times", step);
        let expected = expected_key(&config.operations, &pipelines, &tries, &times)?;
        tries.with_column(expected).engine("preparing tries")?;
        let zones_unknown = zones_unknown(&config.operations, &pipelines, &tries)?;
        let tries = model::without_read_while_preparing(&tries);
        crate::timing::phase("prepare:tries", t);
        Ok((tries, pipelines, zones_unknown))
    }

    /// The prepared journal: each row with its operation, its run's interval and its own try;
    /// and the tries with their run codes, and how many runs there are.
    fn prepare_journal(
        config: &Config,
        tries: DataFrame,
        journal: &DataFrame,
        pipelines: &mut Pipelines,
    ) -> Result<(DataFrame, DataFrame, usize)> {
        let t = std::time::Instant::now();
        let step = std::time::Instant::now();

        let try_keys = TryKeys::of(&tries)?;
        let mut journal = with_map_index_filled(journal)?;
        let journal_keys = TryKeys::of(&journal)?;
        let (texts, coded) = TryTexts::of(&try_keys);
        crate::timing::phase("prepare:journal:coding", step);
        let step = std::time::Instant::now();
        // The journal's texts are found among the tries' while the tries' runs are coded.
        let (journal_keys, runs) =
            crate::parallel::side_by_side(|| texts.find(&journal_keys), || Runs::of(&coded));
        let (run_row, try_row) = journal_tries(&journal_keys, &coded, &runs)?;
        drop((coded, journal_keys, texts));
        crate::timing::phase("prepare:journal:tries", step);
        let step = std::time::Instant::now();
        // A row that names its try takes the try's pipeline; the others are named from their
        // DAG and task (rows of tasks no `[[operation]]` names still describe operations).
        let try_pipelines = one_array(&crate::cells::code_column(
            &tries,
            model::interval::PIPELINE,
        )?);
        let pipeline = pipelines.column_through_tries(
            config,
            &journal,
            Unnamed::DagTask,
            crate::cells::each_number(&try_row),
            |row| try_pipelines.get(row as usize),
        )?;
        journal.with_column(pipeline).engine("naming operations")?;
        crate::timing::phase("prepare:journal:operations", step);
        let run_count = runs.count();
        let run_codes = column_of_codes(model::tries::RUN_CODE, runs.of_try);
        let mut tries = tries;
        tries.with_column(run_codes).engine("run codes")?;
        // Each row takes its run's interval from any try of the run (all of them agree).
        let interval = tries
            .select(["iv_start", "iv_end"])
            .engine("journal intervals")?
            .take(&run_row)
            .engine("journal intervals")?;
        journal
            .hstack_mut(interval.columns())
            .engine("journal intervals")?;
        journal
            .with_column(
                try_row
                    .with_name(model::journal::TRY_ROW.into())
                    .into_column(),
            )
            .engine("journal tries")?;
        crate::timing::phase("prepare:journal", t);
        Ok((tries, journal, run_count))
    }

    /// The frames with the key and id codes of the tries and the journal.
    fn finish(
        config: &Config,
        (tries, journal, run_count): (DataFrame, DataFrame, usize),
        attributed: objects::Attributed,
        window: ProviderWindow,
        (intervals, operations): (Intervals, Operations),
        t: std::time::Instant,
    ) -> Result<Prepared> {
        let (interned, committed_keys) = (attributed.interned, attributed.committed_keys);
        let mut tries = tries;
        tries
            .with_column(column_of_codes(model::KEY_CODE, interned.try_keys))
            .engine("key codes")?;
        let mut journal = journal;
        journal
            .hstack_mut(&[
                column_of_codes(model::KEY_CODE, interned.journal_keys),
                column_of_codes(model::EXTERNAL_ID_CODE, interned.journal_ids),
            ])
            .engine("key codes")?;
        let objects = attributed.objects;
        model::check(&tries, &journal, &objects)?;
        crate::timing::phase("prepare:objects", t);

        Ok(Prepared {
            tries,
            journal,
            objects,
            key_ttl: config.provider.key_ttl,
            replay: config.provider.replay,
            window,
            codes: model::Codes {
                keys: interned.key_count,
                external_ids: interned.id_count,
                runs: run_count,
            },
            intervals,
            operations,
            committed_keys,
            object_indexes: ObjectIndexes::default(),
            journal_indexes: JournalIndexes::default(),
            unclaimed: DataFrame::empty(),
            zones_unknown: BTreeSet::new(),
        })
    }
}

/// The tries and the journal prepared, before the provider's objects are
/// ([`Prepared::early`]).
pub struct Early<'t> {
    tries: DataFrame,
    journal: DataFrame,
    run_count: usize,
    zones_unknown: BTreeSet<String>,
    operations: Operations,
    intervals: Intervals,
    codes: SourcesCoded<'t>,
}

/// The sources' codes as far as they are made: the journal's, or the objects' as well.
enum SourcesCoded<'t> {
    Journal(objects::CodedJournal<'t>),
    All(objects::SourceCodes<'t>),
}

impl<'t> Early<'t> {
    /// The objects attributed, and the frames with their codes: the [`Prepared`] frames.
    /// `all_journal` is every journal row the source gave; `provider` the objects of the
    /// audit's window without their raw JSON (`engine::scope::cut_provider`), and `objects`
    /// their texts (the ones [`Prepared::early`] was given, if it was).
    pub fn finish<'o>(
        self,
        config: &Config,
        all_journal: &DataFrame,
        provider: &DataFrame,
        objects: &'o ObjectTexts,
        window: ProviderWindow,
    ) -> Result<Prepared>
    where
        't: 'o,
    {
        let codes = match self.codes {
            SourcesCoded::All(codes) => codes,
            SourcesCoded::Journal(journal) => journal.with_objects(objects),
        };
        let t = std::time::Instant::now();
        let attributed = objects::attribute(
            config,
            &self.tries,
            &self.journal,
            all_journal,
            provider,
            codes,
            &self.operations,
        )?;
        let mut prepared = Prepared::finish(
            config,
            (self.tries, self.journal, self.run_count),
            attributed,
            window,
            (self.intervals, self.operations),
            t,
        )?;
        prepared.zones_unknown = self.zones_unknown;
        Ok(prepared)
    }
}

/// A live provider object of an interval, as a finding names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IntervalObject {
    pub created_at: Option<i64>,
    pub external_id: String,
    /// The key it is listed or journalled under; None: the provider echoes none and no journal
    /// row names it (it was found by its interval fields).
    pub key: Option<String>,
}

/// A pipeline interval (a code of `Prepared::intervals`) with its start and end.
pub type WantedInterval = (u32, Option<i64>, Option<i64>);

impl Prepared {
    /// The live objects of each `wanted` interval: those attributed to it, and those the
    /// provider lists under no key whose own `interval_start`/`interval_end` are the
    /// interval's (which DAG's they are nothing says, so they may be any of its pipelines').
    /// Objects a scoped audit left out because no DAG claims them (`unclaimed`) count too.
    /// Each interval's objects are in creation order.
    pub fn live_objects_of(
        &self,
        wanted: &[WantedInterval],
    ) -> Result<BTreeMap<u32, Vec<IntervalObject>>> {
        let mut found: BTreeMap<u32, Vec<IntervalObject>> = BTreeMap::new();
        if wanted.is_empty() {
            return Ok(found);
        }
        let mut is_wanted = vec![false; self.intervals.count()];
        for (code, ..) in wanted {
            is_wanted[*code as usize] = true;
        }
        let mut by_times: BTreeMap<(Option<i64>, Option<i64>), Vec<u32>> = BTreeMap::new();
        for &(code, start, end) in wanted {
            by_times.entry((start, end)).or_default().push(code);
        }
        for (frame, attributed) in [(&self.objects, true), (&self.unclaimed, false)] {
            if frame.height() == 0 {
                continue;
            }
            let text = |name: &str| -> Result<crate::cells::TextArray> {
                Ok(one_array(&crate::cells::text_column(frame, name)?))
            };
            let int = |name: &str| -> Result<IntArray> {
                Ok(one_array(&crate::cells::int_column(frame, name)?))
            };
            let (ids, keys, live) = (
                text("external_id")?,
                text("key")?,
                one_array(&crate::cells::flag_column(frame, "live")?),
            );
            let (created, starts, ends) = (
                int("created_at")?,
                int("provider_interval_start")?,
                int("provider_interval_end")?,
            );
            let unattributed = vec![None; if attributed { 0 } else { frame.height() }];
            let of_rows = if attributed {
                self.object_intervals()?
            } else {
                &unattributed
            };
            for (row, &interval) in of_rows.iter().enumerate() {
                if live.get(row) != Some(true) {
                    continue;
                }
                let mut of: Vec<u32> = interval
                    .filter(|&n| is_wanted[n as usize])
                    .into_iter()
                    .collect();
                if keys.get(row).is_none()
                    && let Some(start) = starts.get(row)
                {
                    // A provider that gives no end is taken at its start alone.
                    let end = ends.get(row);
                    for (&(from, to), codes) in by_times.range((Some(start), None)..) {
                        if from != Some(start) {
                            break;
                        }
                        if end.is_none() || to == end {
                            of.extend(codes);
                        }
                    }
                }
                of.sort_unstable();
                of.dedup();
                for code in of {
                    found.entry(code).or_default().push(IntervalObject {
                        created_at: created.get(row),
                        external_id: ids.get(row).unwrap_or_default().to_string(),
                        key: keys.get(row).map(str::to_string),
                    });
                }
            }
        }
        for objects in found.values_mut() {
            objects.sort();
            objects.dedup();
        }
        Ok(found)
    }
}

/// A column of codes, NULL where a code is [`NULL`].
fn column_of_codes(name: &str, codes: Vec<u32>) -> Column {
    crate::cells::codes(name, codes, NULL).into_column()
}

/// The journal with `map_index` -1 where it is NULL, as Airflow writes an unmapped task's.
fn with_map_index_filled(journal: &DataFrame) -> Result<DataFrame> {
    journal
        .clone()
        .lazy()
        .with_column(col("map_index").fill_null(lit(-1i64)))
        .collect()
        .engine("preparing the journal")
}

/// The texts of the `TRY` columns (`dag_id`, `run_id`, `task_id`) coded, each column by a
/// dictionary of its own over the tries' cells, so runs and tries are then found by integers.
/// A DAG, a run id or a task id repeats across many tries (a run id such as
/// `scheduled__2024-01-01T00:00:00+00:00` across the DAGs of a schedule), so these
/// dictionaries are small and stay in the cache in any row order; the integer keys are
/// compared with one read of a packed array, not of three strings in three frames.
struct TryTexts<'a> {
    dag: TextDictionary<'a>,
    run: TextDictionary<'a>,
    task: TextDictionary<'a>,
}

/// A frame's `TRY` columns with their texts coded ([`NULL`] for a NULL cell, or a text no
/// try has).
struct CodedTryColumns {
    dag: Vec<u32>,
    run: Vec<u32>,
    task: Vec<u32>,
    map: IntArray,
    number: IntArray,
}

/// One row's `TRY` values with the texts coded: [`NULL`] codes and NULL numbers as read.
type TryValues = (u32, u32, u32, Option<i64>, Option<i64>);

/// One row's `TRY` values with the texts coded, none of them NULL: what tries are found by.
type CodedTry = (u32, u32, u32, i64, i64);

impl CodedTryColumns {
    fn values(&self, row: usize) -> TryValues {
        (
            self.dag[row],
            self.run[row],
            self.task[row],
            self.map.get(row),
            self.number.get(row),
        )
    }
}

/// The values as a try is found by, None where one of them is NULL.
fn complete((dag, run, task, map, number): TryValues) -> Option<CodedTry> {
    if dag == NULL || run == NULL || task == NULL {
        return None;
    }
    Some((dag, run, task, map?, number?))
}

impl<'a> TryTexts<'a> {
    /// The tries' texts coded, giving new texts new codes: the run ids, the most varied, on a
    /// thread of their own beside the DAGs and the tasks.
    fn of(tries: &'a TryKeys) -> (TryTexts<'a>, CodedTryColumns) {
        let coded = |column: &'a StringChunked| {
            let mut dictionary = TextDictionary::default();
            let codes = dictionary.encode(column);
            (dictionary, codes)
        };
        let (((dag, dags), (task, tasks)), (run, runs)) = crate::parallel::side_by_side(
            || (coded(&tries.dag), coded(&tries.task)),
            || coded(&tries.run),
        );
        let texts = TryTexts { dag, run, task };
        let coded = CodedTryColumns {
            dag: dags,
            run: runs,
            task: tasks,
            map: one_array(&tries.map),
            number: one_array(&tries.number),
        };
        (texts, coded)
    }

    /// Another frame's `TRY` columns coded with the tries' codes, on both cores.
    fn find(&self, keys: &TryKeys) -> CodedTryColumns {
        let find = |dictionary: &TextDictionary<'_>, column: &StringChunked| {
            crate::parallel::concat_rows(column.len(), |part| {
                dictionary.find(&column.slice(part.start as i64, part.len()))
            })
        };
        CodedTryColumns {
            dag: find(&self.dag, &keys.dag),
            run: find(&self.run, &keys.run),
            task: find(&self.task, &keys.task),
            map: one_array(&keys.map),
            number: one_array(&keys.number),
        }
    }
}

/// The runs of the tries (`dag_id`, `run_id`, coded), coded densely from 0 in the order first
/// seen: each try's run code (`NULL` where its dag_id or run_id is NULL) and each run's first
/// try.
struct Runs {
    /// Each run's (dag, run id) codes.
    dictionary: CopiedDictionary<(u32, u32)>,
    first_rows: Vec<IdxSize>,
    of_try: Vec<u32>,
    /// Each run's tries, in row order.
    tries: Grouped,
}

impl Runs {
    fn of(tries: &CodedTryColumns) -> Runs {
        let mut dictionary = CopiedDictionary::with_capacity(tries.dag.len());
        let runs = tries.dag.iter().zip(&tries.run);
        let of_try = dictionary.encode_all(
            runs.map(|(&dag, &run)| (dag != NULL && run != NULL).then_some((dag, run))),
            tries.dag.len(),
        );
        let count = dictionary.len();
        Runs {
            first_rows: first_rows(&of_try, count),
            tries: Grouped::new(count, || {
                of_try.iter().map(|&run| (run != NULL).then_some(run))
            }),
            dictionary,
            of_try,
        }
    }

    /// The run code of each of `rows` of `frame` ([`NULL`] where no try has its run).
    fn codes(&self, frame: &CodedTryColumns, rows: Range<usize>) -> Vec<u32> {
        let count = rows.len();
        let runs = rows.map(|row| {
            let (dag, run) = (frame.dag[row], frame.run[row]);
            (dag != NULL && run != NULL).then_some((dag, run))
        });
        self.dictionary.find_all(runs, count)
    }

    /// The first try of `run` (in row order) with the task, map index and try number of
    /// `values`, one of `frame`'s rows' (texts coded as the tries' are); None where a value is
    /// NULL. A run has few tries: they are looked at in turn.
    fn own_try(&self, run: u32, values: TryValues, tries: &CodedTryColumns) -> Option<IdxSize> {
        let (_, _, task, map, number) = complete(values)?;
        self.tries
            .of(run)
            .iter()
            .find(|&&row| {
                let row = row as usize;
                tries.task[row] == task
                    && tries.map.get(row) == Some(map)
                    && tries.number.get(row) == Some(number)
            })
            .map(|&row| row as IdxSize)
    }

    /// A run's first try.
    fn first_row(&self, run: u32) -> IdxSize {
        self.first_rows[run as usize]
    }

    fn count(&self) -> usize {
        self.first_rows.len()
    }
}

/// The first row of each code in `codes` (codes given in order of first row, [`NULL`] left
/// out), `count` codes in all.
fn first_rows(codes: &[u32], count: usize) -> Vec<IdxSize> {
    let mut first_rows = Vec::with_capacity(count);
    for (row, &code) in codes.iter().enumerate() {
        if code as usize == first_rows.len() {
            first_rows.push(row as IdxSize);
        }
    }
    first_rows
}

/// For each journal row, a row of `tries` in its run (`dag_id`, `run_id`) and the row of its
/// own try (`TRY`), NULL where the audit has none: the joins that give journal rows their
/// interval and their try, as lookups on both cores instead of joins on string columns.
fn journal_tries(
    journal: &CodedTryColumns,
    tries: &CodedTryColumns,
    runs: &Runs,
) -> Result<(IdxCa, IdxCa)> {
    // (run row, try row) of each journal row. A row's own try is one of its run's tries, found
    // among them; rows of tasks that are not operations (or of tries the audit lacks) take
    // their run's first try. A try's rows are often read one after another: a row of the same
    // try as the row before it takes that row's answer.
    let lookup = |part: Range<usize>| -> Vec<RunAndTry> {
        let run_codes = runs.codes(journal, part.clone());
        let mut previous: Option<(TryValues, RunAndTry)> = None;
        part.zip(run_codes)
            .map(|(row, run)| {
                let values = journal.values(row);
                match previous {
                    Some((before, found)) if before == values => found,
                    _ => {
                        let run = (run != NULL).then_some(run);
                        let own_row = run.and_then(|run| runs.own_try(run, values, tries));
                        let run_row = own_row.or_else(|| run.map(|run| runs.first_row(run)));
                        let found = (run_row.unwrap_or(NULL), own_row.unwrap_or(NULL));
                        previous = Some((values, found));
                        found
                    }
                }
            })
            .collect()
    };
    let found = crate::parallel::concat_rows(journal.dag.len(), lookup);
    let (run_rows, try_rows): (Vec<IdxSize>, Vec<IdxSize>) = found.into_iter().unzip();
    Ok((
        crate::cells::codes("run_row", run_rows, NULL),
        crate::cells::codes("try_row", try_rows, NULL),
    ))
}

/// A journal row's (run row, try row), [`NULL`] where it has none: two numbers a row, packed,
/// as the lookup's result for every row of the journal is held at once.
type RunAndTry = (IdxSize, IdxSize);

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
    // One pass, each conf parsed and dropped in turn, so only one parsed conf is held.
    let confs = crate::cells::text_column(&attempts, "conf")?;
    let mut values: Vec<StringChunkedBuilder> = names
        .iter()
        .map(|name| StringChunkedBuilder::new(conf_column(name).into(), confs.len()))
        .collect();
    for conf in confs.iter() {
        let conf = conf.and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok());
        for (name, column) in names.iter().zip(values.iter_mut()) {
            match conf.as_ref().and_then(|conf| conf.get(name)) {
                None | Some(serde_json::Value::Null) => column.append_null(),
                Some(serde_json::Value::String(text)) => column.append_value(text),
                Some(other) => column.append_value(other.to_string()),
            }
        }
    }
    for column in values {
        attempts
            .with_column(column.finish().into_column())
            .engine("extracting conf values")?;
    }
    Ok(attempts)
}

/// The start of each attempt's audit interval (`iv_start` of `audit_interval`) as an expression
/// over the canonical attempts, for filtering runs before they are prepared: the data interval
/// where it has length, else the logical date, else `run_after`.
pub fn interval_start() -> Expr {
    when(col("interval_end").gt(col("interval_start")))
        .then(col("interval_start"))
        .when(col("logical_date").is_not_null())
        .then(col("logical_date"))
        .otherwise(col("run_after"))
}

/// `iv_start`, `iv_end` and `basis` (SPEC §2) for each try, in one pass over the four times.
fn audit_interval(tries: &DataFrame) -> Result<[Column; 3]> {
    let int = |name: &str| crate::cells::int_column(tries, name);
    let (interval_start, interval_end) = (int("interval_start")?, int("interval_end")?);
    let (logical_date, run_after) = (int("logical_date")?, int("run_after")?);
    let mut start = Vec::with_capacity(tries.height());
    let mut end = Vec::with_capacity(tries.height());
    let mut basis = Vec::with_capacity(tries.height());
    let each = crate::cells::each_number;
    let times = each(&interval_start)
        .zip(each(&interval_end))
        .zip(each(&logical_date).zip(each(&run_after)));
    for ((from, to), (logical, after)) in times {
        let (from, to, why) = match (from, to, logical) {
            (Some(from), Some(to), _) if to > from => (Some(from), Some(to), 0),
            (.., Some(logical)) => (Some(logical), Some(logical), 1),
            _ => (after, after, 2),
        };
        start.push(from);
        end.push(to);
        // `why` is the basis's code: its place in `model::tries::BASES`.
        basis.push(from.map(|_| why as u32));
    }
    let time = |name: &str, values: Vec<Option<i64>>| {
        crate::cells::numbers::<Int64Type>(name, values.into_iter())
            .into_series()
            .cast(&crate::model::utc())
            .map(Column::from)
            .engine("audit intervals")
    };
    Ok([
        time("iv_start", start)?,
        time("iv_end", end)?,
        crate::cells::numbers::<UInt32Type>(model::tries::BASIS, basis.into_iter()).into_column(),
    ])
}

/// How an interval label ([`interval_labels`]) writes its times.
const LABEL_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// The tries' times formatted as key templates need them, by (column, format, zone).
struct Times<'f> {
    formatted: &'f [(&'static str, String, crate::keys::Zone)],
    times: Vec<crate::keys::FormattedTimes>,
}

impl Times<'_> {
    fn of(
        &self,
        column: &str,
        format: &str,
        zone: crate::keys::Zone,
    ) -> Result<&crate::keys::FormattedTimes> {
        self.formatted
            .iter()
            .position(|(c, f, z)| *c == column && f == format && *z == zone)
            .map(|at| &self.times[at])
            .ok_or_else(|| crate::error::Error::Engine {
                doing: "preparing tries".into(),
                message: format!("{column} was not formatted as {format}"),
            })
    }
}

/// The interval label ([`model::interval::LABEL`]) of each row of a frame that has the audit
/// interval's columns: `start/end`, or the start alone where the interval has no length; NULL
/// where it has no start. The prepared frames keep no such column (a text cell a row, and
/// most rows are never printed): what prints intervals, or picks them by label, makes the
/// labels of the rows it reads. Each distinct interval's label is written once (a run's tries,
/// and the runs of many DAGs, share an interval).
pub fn interval_labels(frame: &DataFrame) -> Result<Column> {
    use crate::keys::FormattedTimes;
    let text = |column: &str| FormattedTimes::of(frame, column, LABEL_FORMAT, crate::keys::UTC);
    let (start_text, end_text) = (text(model::interval::START)?, text(model::interval::END)?);
    let int = |name: &str| crate::cells::int_column(frame, name);
    let (start, end) = (int(model::interval::START)?, int(model::interval::END)?);
    let mut labels: Vec<String> = Vec::new();
    let mut spans: Vec<(i64, Option<i64>)> = Vec::new();
    let mut dictionary = Dictionary::default();
    let mut previous: Option<u32> = None;
    let mut rows = Vec::with_capacity(frame.height());
    let times = start.iter().zip(end.iter()).enumerate();
    for (row, (start, end)) in times {
        let (from, to) = (start_text.get(row), end_text.get(row));
        // The texts are NULL exactly where the times are: no start, no label.
        let (Some(start), Some(from)) = (start, from) else {
            rows.push(None);
            continue;
        };
        let span = label_span(start, end);
        let encoded = dictionary.encode(span, previous, |code| spans[code as usize]);
        if let Encoded::New(_) = encoded {
            spans.push(span);
            labels.push(match (span.1, to) {
                (Some(_), Some(to)) => format!("{from}/{to}"),
                _ => from.to_string(),
            });
        }
        previous = Some(encoded.code());
        rows.push(Some(encoded.code() as IdxSize));
    }
    let labels = crate::cells::repeated_texts(model::interval::LABEL, &labels, rows.into_iter());
    Ok(labels.into_column())
}

/// What an interval's label ([`interval_labels`]) says of it: the start to the second, and
/// the end to the second where the interval has length (the label writes it only there).
/// Intervals with the same span have the same label.
fn label_span(start: i64, end: Option<i64>) -> (i64, Option<i64>) {
    let second = |micros: i64| micros.div_euclid(1_000_000);
    (second(start), end.filter(|&end| end > start).map(second))
}

/// The interval of each of `rows` (rows of a frame with the audit interval's columns) coded
/// by its [`label_span`], so two rows have the same code exactly where their labels are the
/// same text; [`NULL`] where a row has no start. Intervals are compared as findings print
/// them without a label being written.
pub fn interval_label_codes(frame: &DataFrame, rows: &[IdxSize]) -> Result<Vec<u32>> {
    let int = |name: &str| crate::cells::int_column(frame, name).map(|column| one_array(&column));
    let (start, end) = (int(model::interval::START)?, int(model::interval::END)?);
    let spans = rows.iter().map(|&row| {
        let start = start.get(row as usize)?;
        Some(label_span(start, end.get(row as usize)))
    });
    Ok(CopiedDictionary::with_capacity(0).encode_all(spans, rows.len()))
}

/// `frame` with the interval label of each row ([`interval_labels`]) as its last column.
pub fn with_interval_labels(frame: &DataFrame) -> Result<DataFrame> {
    let mut labelled = frame.clone();
    labelled
        .with_column(interval_labels(frame)?)
        .engine("labelling intervals")?;
    Ok(labelled)
}

/// The interval label of each row of `frame` ([`interval_labels`]), as texts.
pub fn interval_texts(frame: &DataFrame) -> Result<Vec<Option<String>>> {
    let labels = interval_labels(frame)?;
    let labels = labels.str().engine("labelling intervals")?;
    Ok(labels
        .iter()
        .map(|label| label.map(str::to_string))
        .collect())
}

/// The DAGs of the tries whose operation's key template formats a time in the DAG's own zone
/// (a time placeholder naming no zone, of an operation without `timezone`) while the read gave
/// no zone for the DAG (`dag_timezone` NULL): the Airflow REST API gives none, nor does a DAG
/// whose serialized version is gone. Their keys' times are formatted in UTC, which is right
/// only if the DAG is scheduled in UTC.
fn zones_unknown(
    operations: &[Operation],
    pipelines: &Pipelines,
    tries: &DataFrame,
) -> Result<BTreeSet<String>> {
    let in_dag_zone: Vec<&str> = operations
        .iter()
        .filter(|op| {
            op.key.as_ref().is_some_and(|key| {
                key.times()
                    .any(|(_, _, zone)| zone == crate::keys::Zone::OfDag)
            })
        })
        .map(|op| op.name.as_str())
        .collect();
    let mut unknown = BTreeSet::new();
    if in_dag_zone.is_empty() || tries.column("dag_timezone").is_err() {
        return Ok(unknown);
    }
    let zones = crate::cells::text_column(tries, "dag_timezone")?;
    let dags = crate::cells::text_column(tries, "dag_id")?;
    let codes = crate::cells::code_column(tries, model::interval::PIPELINE)?;
    for (row, code) in crate::cells::each_number(&codes).enumerate() {
        let formats_in_dag_zone = code
            .and_then(|code| pipelines.configured(code))
            .is_some_and(|name| in_dag_zone.contains(&name));
        if let Some(dag) = dags.get(row)
            && formats_in_dag_zone
            && zones.get(row).is_none()
            && !unknown.contains(dag)
        {
            unknown.insert(dag.to_string());
        }
    }
    Ok(unknown)
}

/// Each try's key under its operation's template (NULL where a placeholder is NULL), built
/// row by row into one column, with no intermediate column per part.
fn expected_key(
    operations: &[Operation],
    pipelines: &Pipelines,
    tries: &DataFrame,
    times: &Times<'_>,
) -> Result<Column> {
    use crate::keys::Part;
    // One entry per distinct template; each operation points at its template's entry.
    let mut templates: Vec<&crate::keys::KeyTemplate> = Vec::new();
    let mut of_operation: PlHashMap<&str, usize> = PlHashMap::default();
    for op in operations {
        let Some(key) = &op.key else { continue };
        // Equal texts under different operation zones are different templates.
        let index = match templates.iter().position(|t| *t == key) {
            Some(index) => index,
            None => {
                templates.push(key);
                templates.len() - 1
            }
        };
        of_operation.entry(op.name.as_str()).or_insert(index);
    }
    /// Where a part's text comes from.
    enum Source<'t> {
        Literal(&'t str),
        Column(crate::cells::TextArray),
        Time(&'t crate::keys::FormattedTimes),
    }
    let text_of = |name: &str| -> Result<crate::cells::TextArray> {
        Ok(one_array(&crate::cells::text_column(tries, name)?))
    };
    let sources: Vec<Vec<Source<'_>>> = templates
        .iter()
        .map(|template| {
            template
                .parts
                .iter()
                .map(|part| {
                    Ok(match part {
                        Part::Literal(text) => Source::Literal(text),
                        Part::Field(name) => Source::Column(text_of(name)?),
                        Part::Time(name, format, zone) => {
                            Source::Time(times.of(crate::keys::time_column(name), format, *zone)?)
                        }
                        Part::Conf(_) => {
                            let name = crate::keys::column_of(part).unwrap_or_default();
                            Source::Column(text_of(&name)?)
                        }
                    })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;

    let codes = crate::cells::code_column(tries, model::interval::PIPELINE)?;
    let mut keys = StringChunkedBuilder::new("expected_key".into(), tries.height());
    let mut key = String::new();
    'rows: for (row, code) in crate::cells::each_number(&codes).enumerate() {
        let Some(parts) = code
            .and_then(|code| pipelines.configured(code))
            .and_then(|name| of_operation.get(name))
            .map(|&index| &sources[index])
        else {
            keys.append_null();
            continue;
        };
        key.clear();
        for part in parts {
            match part {
                Source::Literal(text) => key.push_str(text),
                Source::Column(column) => match column.get(row) {
                    Some(text) => key.push_str(text),
                    None => {
                        keys.append_null();
                        continue 'rows;
                    }
                },
                Source::Time(times) => match times.get(row) {
                    Some(text) => key.push_str(text),
                    None => {
                        keys.append_null();
                        continue 'rows;
                    }
                },
            }
        }
        keys.append_value(&key);
    }
    Ok(keys.finish().into_column())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--interval-from/--interval-to` filter runs with `interval_start()` before they are
    /// prepared; it must pick the interval `audit_interval` gives each try.
    #[test]
    fn the_interval_filter_and_the_audit_interval_agree() {
        let time = |name: &str, values: [Option<i64>; 4]| {
            Column::new(name.into(), values)
                .cast(&crate::model::utc())
                .unwrap()
        };
        // Data interval with length; zero-length (Airflow 3 @daily); no data interval; nothing
        // but run_after (a manual Airflow 3 trigger).
        let tries = DataFrame::new_infer_height(vec![
            time("interval_start", [Some(10), Some(20), None, None]),
            time("interval_end", [Some(15), Some(20), None, None]),
            time("logical_date", [Some(11), Some(21), Some(31), None]),
            time("run_after", [Some(12), Some(22), Some(32), Some(42)]),
        ])
        .unwrap();
        let [iv_start, ..] = audit_interval(&tries).unwrap();
        let filtered = tries
            .clone()
            .lazy()
            .select([interval_start().alias("iv_start")])
            .collect()
            .unwrap();
        let ints = |frame: &DataFrame| crate::cells::ints(frame, "iv_start").unwrap();
        let prepared = DataFrame::new_infer_height(vec![iv_start]).unwrap();
        assert_eq!(ints(&filtered), ints(&prepared));
        assert_eq!(ints(&prepared), [Some(10), Some(21), Some(31), Some(42)]);
    }

    /// K003 compares intervals by `interval_label_codes`: two rows must share a code exactly
    /// where their labels are the same text, whatever the times' fractions of a second, and
    /// whether the interval has length, none, or an end before its start.
    #[test]
    fn interval_label_codes_agree_with_the_labels() {
        const SECOND: i64 = 1_000_000;
        let pairs: [(Option<i64>, Option<i64>); 14] = [
            (Some(0), Some(3_600 * SECOND)),
            (Some(400_000), Some(3_600 * SECOND + 999_999)),
            (Some(0), Some(0)),
            (Some(0), Some(999_999)),
            (Some(999_999), Some(SECOND)),
            (Some(SECOND), Some(SECOND)),
            (Some(SECOND), Some(0)),
            (Some(SECOND), None),
            (Some(SECOND + 1), None),
            (None, Some(SECOND)),
            (None, None),
            (Some(-1), Some(0)),
            (Some(-SECOND), Some(-SECOND)),
            (Some(-SECOND + 5), Some(-SECOND + 5)),
        ];
        let time = |name: &str, values: Vec<Option<i64>>| {
            Column::new(name.into(), values)
                .cast(&crate::model::utc())
                .unwrap()
        };
        let frame = DataFrame::new_infer_height(vec![
            time(model::interval::START, pairs.iter().map(|p| p.0).collect()),
            time(model::interval::END, pairs.iter().map(|p| p.1).collect()),
        ])
        .unwrap();
        let labels = interval_texts(&frame).unwrap();
        // Picked rows in another order than the frame's, each twice.
        let rows: Vec<IdxSize> = (0..pairs.len() as IdxSize)
            .rev()
            .chain(0..pairs.len() as IdxSize)
            .collect();
        let codes = interval_label_codes(&frame, &rows).unwrap();
        for (a, &row_a) in rows.iter().enumerate() {
            let label_a = &labels[row_a as usize];
            assert_eq!(codes[a] == NULL, label_a.is_none(), "row {row_a}");
            for (b, &row_b) in rows.iter().enumerate() {
                let label_b = &labels[row_b as usize];
                if label_a.is_some() && label_b.is_some() {
                    assert_eq!(
                        codes[a] == codes[b],
                        label_a == label_b,
                        "rows {row_a} and {row_b}"
                    );
                }
            }
        }
    }

    /// Labels are made for whatever rows a reader has: the whole frame or rows picked from it
    /// give each row the same label.
    #[test]
    fn an_interval_label_is_start_slash_end_or_the_start_alone() {
        const HOUR: i64 = 3_600_000_000;
        let time = |name: &str, values: &[Option<i64>]| {
            Column::new(name.into(), values)
                .cast(&crate::model::utc())
                .unwrap()
        };
        let starts = [
            Some(0),
            Some(0),
            Some(HOUR),
            Some(HOUR),
            None,
            Some(7),
            Some(0),
        ];
        let ends = [
            Some(HOUR),
            Some(HOUR),
            Some(HOUR),
            Some(0),
            Some(HOUR),
            None,
            Some(HOUR),
        ];
        let frame = DataFrame::new_infer_height(vec![
            time(model::interval::START, &starts),
            time(model::interval::END, &ends),
        ])
        .unwrap();
        let labels = interval_texts(&frame).unwrap();
        let whole = "1970-01-01T00:00:00Z/1970-01-01T01:00:00Z";
        let point = "1970-01-01T01:00:00Z";
        let expected = [
            Some(whole),
            Some(whole),
            Some(point),
            Some(point),
            None,
            Some("1970-01-01T00:00:00Z"),
            Some(whole),
        ];
        assert_eq!(labels, expected.map(|label| label.map(str::to_string)));
        let picked = frame
            .take(&IdxCa::from_vec("row".into(), vec![6, 3, 4]))
            .unwrap();
        let picked_labels = interval_texts(&picked).unwrap();
        assert_eq!(picked_labels, [6, 3, 4].map(|row| labels[row].clone()));
        let labelled = with_interval_labels(&picked).unwrap();
        assert_eq!(
            crate::cells::texts(&labelled, model::interval::LABEL).unwrap(),
            picked_labels
        );
    }
}
