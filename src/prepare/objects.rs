//! Attributing provider objects: each object's key, operation, interval and creating try.
//!
//! Each key and each object id is coded once ([`TextDictionary`]), and every step after that
//! is an array lookup by code rather than a join or group-by on text.

use polars::prelude::*;

use crate::cells::{IntArray, TextArray, one_array, one_chunk};
use crate::config::Config;
use crate::dictionary::{NULL as NONE, TextDictionary};
use crate::error::{EngineContext, Result};

/// Which key and which object id each row holds, as codes shared by every frame: the same
/// key has the same key code (`model::KEY_CODE`) in the journal, the tries and the objects.
pub struct Interned {
    pub journal_keys: Vec<u32>,
    pub journal_ids: Vec<u32>,
    pub try_keys: Vec<u32>,
    /// How many distinct keys and object ids there are: every id is below its count.
    pub key_count: usize,
    pub id_count: usize,
}

/// The result of [`attribute`]: the objects frame and the ids of the rows of the other frames.
pub struct Attributed {
    pub objects: DataFrame,
    pub interned: Interned,
    /// Per key number: whether the whole journal has a committed or reconciled row under it
    /// (keys only the tries have are past its end).
    pub committed_keys: Vec<bool>,
}

/// NULLs last (the order the attribution takes rows in).
fn last<T: Ord>(value: Option<T>) -> (bool, Option<T>) {
    (value.is_none(), value)
}

/// A table's keys and object ids (`op_key`, `external_id`): the cells the source codes are
/// made of ([`SourceCodes`]), the whole journal's and the provider objects'.
pub struct KeysAndIds {
    keys: StringChunked,
    ids: StringChunked,
}

impl KeysAndIds {
    pub fn of(frame: &DataFrame) -> Result<KeysAndIds> {
        let text = crate::cells::text_column;
        Ok(KeysAndIds {
            keys: text(frame, "op_key")?,
            ids: text(frame, "external_id")?,
        })
    }
}

/// The whole journal's keys and ids.
pub type JournalTexts = KeysAndIds;
/// The provider objects' keys and ids.
pub type ObjectTexts = KeysAndIds;

/// The codes that need only the sources, not the prepared tries: every object id, and the
/// keys of the whole journal and of the objects (coded first, so a key's code does not
/// depend on the tries). The journal is coded first and the objects after it
/// ([`CodedJournal::with_objects`]), so the codes are the same whether the objects were read
/// before the journal was coded or only after.
pub struct SourceCodes<'a> {
    journal: CodedJournal<'a>,
    object_keys: &'a StringChunked,
    object_key: Vec<u32>,
    object_id: Vec<u32>,
}

/// The whole journal's keys and ids coded, the objects' not yet.
pub struct CodedJournal<'a> {
    texts: &'a JournalTexts,
    keys: TextDictionary<'a>,
    all_key: Vec<u32>,
    ids: TextDictionary<'a>,
    all_id: Vec<u32>,
}

impl<'a> CodedJournal<'a> {
    /// Keys on one thread and ids on another.
    pub fn of(texts: &'a JournalTexts) -> CodedJournal<'a> {
        let t = std::time::Instant::now();
        let ((keys, all_key), (ids, all_id)) = crate::parallel::side_by_side(
            || {
                let mut keys = TextDictionary::default();
                let all_key = keys.encode(&texts.keys);
                (keys, all_key)
            },
            || {
                let mut ids = TextDictionary::default();
                let all_id = ids.encode(&texts.ids);
                (ids, all_id)
            },
        );
        crate::timing::phase("prepare:sources:journal", t);
        CodedJournal {
            texts,
            keys,
            all_key,
            ids,
            all_id,
        }
    }

    /// The objects' keys and ids coded after the journal's, keys on one thread and ids on
    /// another.
    pub fn with_objects<'o>(self, objects: &'o ObjectTexts) -> SourceCodes<'o>
    where
        'a: 'o,
    {
        let t = std::time::Instant::now();
        let CodedJournal {
            texts,
            keys,
            all_key,
            ids,
            all_id,
        } = self;
        // The dictionaries now borrow from the objects' columns too.
        let (mut keys, mut ids): (TextDictionary<'o>, TextDictionary<'o>) = (keys, ids);
        let (object_key, object_id) = crate::parallel::side_by_side(
            || keys.encode(&objects.keys),
            || ids.encode(&objects.ids),
        );
        crate::timing::phase("prepare:sources:objects", t);
        SourceCodes {
            journal: CodedJournal {
                texts,
                keys,
                all_key,
                ids,
                all_id,
            },
            object_keys: &objects.keys,
            object_key,
            object_id,
        }
    }
}

/// Gives every provider object its key, operation and interval (see `Early::finish`):
///
/// * `live`: its status is not one of the configured void statuses (case-insensitive);
/// * `key`: the key the provider echoes, else the smallest key among the journal rows that
///   name its id;
/// * operation and interval: those of the journal rows with that key, else of the tries whose
///   expected key it is; a key used in several intervals takes the earliest (K003 reports it),
///   ties broken by operation, map index, interval end, DAG and task, then by the order read;
/// * `named`: a journal row names its id; `committed`: a committed or reconciled row does;
///   `key_journaled`: its key appears in the journal;
/// * `by_run_id`, `by_try_number`, `by_map_index`: the try that created it (`creators`).
///
/// Objects the journal ties to runs outside the audit are dropped: they are another audit's.
pub fn attribute(
    config: &Config,
    tries: &DataFrame,
    journal: &DataFrame,
    all_journal: &DataFrame,
    provider: &DataFrame,
    sources: SourceCodes<'_>,
    operations: &super::Operations,
) -> Result<Attributed> {
    let text = crate::cells::text_column;
    let SourceCodes {
        journal:
            CodedJournal {
                texts,
                keys,
                all_key,
                ids: id_map,
                all_id,
            },
        object_keys,
        object_key,
        object_id,
    } = sources;
    let all_keys = &texts.keys;
    let journal_keys = text(journal, "op_key")?;
    let try_keys = text(tries, "expected_key")?;
    // The audited journal is the whole journal unless --dag or a window cut it down: then its
    // cells are the whole journal's own (the same memory), not a copy.
    let whole_journal = same_cells(&journal_keys, all_keys);
    let source_key_count = keys.len();
    let id_count = id_map.len();
    let t = std::time::Instant::now();
    // The tries' keys are coded and every key's interval found on a thread of their own while
    // the whole journal is read for what it says of each object id.
    let (said, keyed) = crate::parallel::side_by_side(
        || {
            let codes = JournalCodes {
                key_ids: &all_key,
                ids: &all_id,
                key_count: source_key_count,
                id_count,
            };
            let said = JournalByObject::of(all_journal, all_keys, codes);
            crate::timing::phase("prepare:objects:journal", t);
            said
        },
        || -> Result<KeyIntervals<'_>> {
            // The keys of the tries and of a cut-down journal join the sources' codes;
            // the map now borrows from their columns too.
            let mut keys: TextDictionary<'_> = keys;
            let try_key = keys.encode_mostly_known(&try_keys);
            let journal_key = if whole_journal {
                all_key.clone()
            } else {
                keys.encode_mostly_known(&journal_keys)
            };
            let interval_sources = IntervalSources::new(journal, tries, operations)?;
            let source = interval_sources.best(keys.len(), &journal_key, &try_key)?;
            let keyed = if whole_journal {
                "prepare:objects:intervals"
            } else {
                "prepare:objects:intervals (audited journal a subset)"
            };
            crate::timing::phase(keyed, t);
            Ok(KeyIntervals {
                key_count: keys.len(),
                try_key,
                journal_key,
                interval_sources,
                source,
            })
        },
    );
    let (keyed, mut said) = (keyed?, said?);
    let KeyIntervals {
        key_count,
        try_key,
        journal_key,
        interval_sources,
        source,
    } = keyed;
    let t = std::time::Instant::now();

    let keep_status = Live::new(config);
    let statuses: TextArray = one_array(&text(provider, "status")?);
    let created: IntArray = one_array(&crate::cells::int_column(provider, "created_at")?);
    let object_key_texts: TextArray = one_array(object_keys);
    // The key TTL of each operation that sets its own; the provider's for the others.
    let ttls: PlHashMap<&str, i64> = config
        .operations
        .iter()
        .filter_map(|op| Some((op.name.as_str(), op.key_ttl?)))
        .collect();
    let ttl = |operation: Option<&str>| {
        operation
            .and_then(|name| ttls.get(name).copied())
            .or(config.provider.key_ttl)
    };
    let says = &said;

    // Whether each object of `rows` is kept, and the attribution of those kept.
    let attribute_rows = |rows: std::ops::Range<usize>| {
        let mut keep = Vec::with_capacity(rows.len());
        let mut out = ObjectColumns::with_capacity(rows.len());
        // Objects in no order read what the journal says of their id and key from all over:
        // each asks for it a few objects ahead (`crate::ahead`).
        let recorded = says.recorded.values().as_slice();
        let far = |row: usize| {
            if let Some(&id) = object_id.get(row)
                && id != NONE
            {
                crate::ahead::ask(&says.named, id as usize);
                crate::ahead::ask(&says.committed, id as usize);
                crate::ahead::ask(&says.named_key, id as usize);
                crate::ahead::ask(&says.first_commit, id as usize);
            }
            if let Some(&key) = object_key.get(row)
                && key != NONE
            {
                crate::ahead::ask(&source, key as usize);
                crate::ahead::ask(&says.journaled, key as usize);
                says.intents.ask(key);
            }
        };
        let near = |row: usize| {
            if let Some(&key) = object_key.get(row)
                && key != NONE
                && let Some(&intent) = says.intents.of(key).first()
            {
                crate::ahead::ask(recorded, intent as usize);
            }
        };
        crate::ahead::each_row(rows, far, near, |row| {
            let (key, id) = (object_key[row], object_id[row]);
            let (object_key_text, status) = (object_key_texts.get(row), statuses.get(row));
            let (is_named, is_committed, by_name) = match id {
                NONE => (false, false, None),
                id => (
                    says.named[id as usize],
                    says.committed[id as usize],
                    says.named_key[id as usize],
                ),
            };
            // Every key an object has, its own or the journal's, is one of the sources': it is
            // below `source_key_count`.
            let (key_cell, key) = match object_key_text {
                Some(_) => (KeyCell::Listed(row as u32), key),
                None => match by_name {
                    Some((journal_row, key)) => (KeyCell::Journal(journal_row), key),
                    None => (KeyCell::None, NONE),
                },
            };
            let (source_row, is_journaled) = match key {
                NONE => (None, false),
                key => (source[key as usize], says.journaled[key as usize]),
            };
            let operation = source_row.and_then(|source| interval_sources.operation(source));
            if operation.is_none() && (is_named || is_journaled) {
                keep.push(false);
                return;
            }
            keep.push(true);
            // The creator: the last intent under the key recorded by the time the object
            // appeared (one second of slack for providers that round to the second), else the
            // first committed row that names it.
            let intent = match (key, created.get(row)) {
                (NONE, _) | (_, None) => None,
                (key, Some(created)) => says
                    .intents
                    .of(key)
                    .iter()
                    .copied()
                    .filter(|&r| {
                        says.recorded
                            .get(r as usize)
                            .is_some_and(|at| at <= created + super::ROUNDING)
                    })
                    .max_by(|&a, &b| says.cmp(a as usize, b as usize)),
            };
            let commit = match id {
                NONE => None,
                id => Some(says.first_commit[id as usize]).filter(|&r| r != NONE),
            };
            out.live.push(status.map(|status| keep_status.live(status)));
            out.named.push(is_named);
            out.committed.push(is_committed);
            out.key.push(key_cell);
            out.key_id.push((key != NONE).then_some(key));
            out.id.push((id != NONE).then_some(id));
            out.source.push(source_row);
            out.key_journaled.push(is_journaled);
            out.key_ttl.push(ttl(operation));
            out.intent.push(intent);
            out.commit.push(commit);
        });
        (keep, out)
    };
    // In two halves, one on a thread of its own.
    let mut parts = crate::parallel::over_rows(provider.height(), attribute_rows).into_iter();
    let (mut keep, mut out) = parts.next().expect("over_rows gives every part");
    for (part_keep, part_out) in parts {
        keep.extend(part_keep);
        out.extend(part_out);
    }

    crate::timing::phase("prepare:objects:attribute", t);
    let journal_ids = if whole_journal {
        all_id
    } else {
        // Every id of the audited journal is one of the whole journal's.
        id_map.find(&text(journal, "external_id")?)
    };
    let committed_keys = std::mem::take(&mut said.key_committed);
    // What only the attribution needed goes before the columns are built, so they can reuse
    // its memory.
    drop((said, source));
    drop((object_key, object_id, id_map));
    let t = std::time::Instant::now();
    let mut objects = provider.clone();
    // Usually every object is kept: the frame is then shared, not copied by the filter.
    if keep.contains(&false) {
        let keep = BooleanChunked::from_slice("keep".into(), &keep);
        objects = objects
            .filter(&keep)
            .engine("attributing provider objects")?;
    }
    objects
        .rename("interval_start", "provider_interval_start".into())
        .engine("attributing provider objects")?;
    objects
        .rename("interval_end", "provider_interval_end".into())
        .engine("attributing provider objects")?;
    // The creators' columns are taken on a thread of their own while the others are built.
    let (columns, creators) = crate::parallel::side_by_side(
        || out.columns(&interval_sources, object_keys, all_keys),
        || creators(&out, all_journal),
    );
    let mut columns = columns?;
    columns.extend(creators?);
    objects
        .hstack_mut(&columns)
        .engine("attributing provider objects")?;

    crate::timing::phase("prepare:objects:frame", t);
    Ok(Attributed {
        objects,
        interned: Interned {
            journal_keys: journal_key,
            journal_ids,
            try_keys: try_key,
            key_count,
            id_count,
        },
        committed_keys,
    })
}

/// The tries' and the audited journal's key codes, and the row each key takes its interval
/// from.
struct KeyIntervals<'f> {
    key_count: usize,
    try_key: Vec<u32>,
    journal_key: Vec<u32>,
    interval_sources: IntervalSources<'f>,
    source: Vec<Option<u32>>,
}

/// What the whole journal says of each object id and each key.
struct JournalByObject {
    /// Per object id: the row with the smallest key of the rows naming it, and that key's
    /// code.
    named_key: Vec<Option<(u32, u32)>>,
    named: Vec<bool>,
    committed: Vec<bool>,
    /// Per key: whether the journal has it, and whether a committed or reconciled row has it.
    journaled: Vec<bool>,
    key_committed: Vec<bool>,
    /// Per object id: the first committed row by [`JournalByObject::cmp`].
    first_commit: Vec<u32>,
    /// Per key, its intents' rows.
    intents: Grouped,
    recorded: IntArray,
    try_numbers: IntArray,
    order: crate::model::JournalOrder,
}

/// Journal rows by the time recorded (NULL first), then try number, then the journal's own
/// order: which of several rows comes first does not depend on the order they were read in.
fn in_time_order(
    recorded: &IntArray,
    try_numbers: &IntArray,
    order: &crate::model::JournalOrder,
    a: usize,
    b: usize,
) -> std::cmp::Ordering {
    let at = |row: usize| (recorded.get(row), try_numbers.get(row));
    at(a).cmp(&at(b)).then_with(|| order.cmp(a, b))
}

/// The whole journal's key and id numbers, each below its count.
struct JournalCodes<'n> {
    key_ids: &'n [u32],
    ids: &'n [u32],
    key_count: usize,
    id_count: usize,
}

impl JournalByObject {
    /// `keys` are the whole journal's `op_key` cells.
    fn of(
        all_journal: &DataFrame,
        keys: &StringChunked,
        numbers: JournalCodes<'_>,
    ) -> Result<JournalByObject> {
        let JournalCodes {
            key_ids,
            ids,
            key_count,
            id_count,
        } = numbers;
        // Each row's phase read once, then compared as codes.
        let phases =
            crate::model::Phase::of_cells(&crate::cells::text_column(all_journal, "phase")?);
        let keys: TextArray = one_array(keys);
        let recorded = one_array(&crate::cells::int_column(all_journal, "recorded_at")?);
        let try_numbers = one_array(&crate::cells::int_column(all_journal, "try_number")?);
        let mut named_key: Vec<Option<(u32, u32)>> = vec![None; id_count];
        // The least key text of each id so far, beside the row it is on.
        let mut least_key: Vec<Option<&str>> = vec![None; id_count];
        let mut named = vec![false; id_count];
        let mut committed = vec![false; id_count];
        let mut journaled = vec![false; key_count];
        let mut key_committed = vec![false; key_count];
        let mut first_commit: Vec<u32> = vec![NONE; id_count];
        let order = crate::model::JournalOrder::of(all_journal)?;
        let earlier = |a, b| in_time_order(&recorded, &try_numbers, &order, a, b);
        for (row, ((key_text, phase), (&key, &id))) in keys
            .iter()
            .zip(phases.iter())
            .zip(key_ids.iter().zip(ids))
            .enumerate()
        {
            let done = phase.is_some_and(crate::model::Phase::done);
            if key != NONE {
                journaled[key as usize] = true;
                key_committed[key as usize] |= done;
            }
            if id == NONE {
                continue;
            }
            let id = id as usize;
            named[id] = true;
            if let Some(text) = key_text
                && least_key[id].is_none_or(|least| text < least)
            {
                least_key[id] = Some(text);
                named_key[id] = Some((row as u32, key));
            }
            if done {
                committed[id] = true;
                if first_commit[id] == NONE || earlier(row, first_commit[id] as usize).is_lt() {
                    first_commit[id] = row as u32;
                }
            }
        }
        let intents = Grouped::new(key_count, || {
            key_ids.iter().zip(phases.iter()).map(|(&key, phase)| {
                (*phase == Some(crate::model::Phase::Intent))
                    .then_some(key)
                    .filter(|&k| k != NONE)
            })
        });
        Ok(JournalByObject {
            named_key,
            named,
            committed,
            journaled,
            key_committed,
            first_commit,
            intents,
            recorded,
            try_numbers,
            order,
        })
    }

    /// Two rows of the whole journal in time order ([`in_time_order`]).
    fn cmp(&self, a: usize, b: usize) -> std::cmp::Ordering {
        in_time_order(&self.recorded, &self.try_numbers, &self.order, a, b)
    }
}

/// Whether two text columns are the same cells in the same memory (one a clone of the other).
fn same_cells(a: &StringChunked, b: &StringChunked) -> bool {
    a.len() == b.len()
        && a.chunks().len() == b.chunks().len()
        && a.downcast_iter().zip(b.downcast_iter()).all(|(a, b)| {
            a.len() == b.len() && std::ptr::eq(a.views().as_ptr(), b.views().as_ptr())
        })
}

/// Rows grouped by an integer: `of(g)` lists the rows of group `g` in row order.
pub struct Grouped {
    starts: Vec<u32>,
    rows: Vec<u32>,
}

impl Grouped {
    /// Asks for where `group`'s rows are ([`crate::ahead`]).
    pub fn ask(&self, group: u32) {
        crate::ahead::ask(&self.starts, group as usize);
    }

    /// `groups()` gives each row's group (below `count`), or None; it is walked twice, once
    /// to count each group's rows and once to place them.
    pub fn new<I: Iterator<Item = Option<u32>>>(count: usize, groups: impl Fn() -> I) -> Grouped {
        let mut counts = vec![0u32; count + 1];
        for group in groups().flatten() {
            counts[group as usize] += 1;
        }
        let mut total = 0;
        for count in counts.iter_mut() {
            let here = *count;
            *count = total;
            total += here;
        }
        let mut next = counts.clone();
        let mut rows = vec![0; total as usize];
        for (row, group) in groups().enumerate() {
            if let Some(group) = group {
                let slot = &mut next[group as usize];
                rows[*slot as usize] = row as u32;
                *slot += 1;
            }
        }
        Grouped {
            starts: counts,
            rows,
        }
    }

    pub fn of(&self, group: u32) -> &[u32] {
        let group = group as usize;
        &self.rows[self.starts[group] as usize..self.starts[group + 1] as usize]
    }
}

/// Whether a status is live: not one of the configured void statuses, in any case.
struct Live {
    void: Vec<String>,
}

impl Live {
    fn new(config: &Config) -> Live {
        Live {
            void: config
                .provider
                .void_statuses
                .iter()
                .map(|status| status.to_lowercase())
                .collect(),
        }
    }

    fn live(&self, status: &str) -> bool {
        if status.is_ascii() {
            !self
                .void
                .iter()
                .any(|void| void.eq_ignore_ascii_case(status))
        } else {
            let status = status.to_lowercase();
            !self.void.contains(&status)
        }
    }
}

/// The rows a key can take its operation interval from: the audited journal's (coded
/// first), then the tries' (coded after them). The two frames are read in place, not
/// stacked into one copy.
struct IntervalSources<'f> {
    journal: IntervalSourceColumns<'f>,
    tries: IntervalSourceColumns<'f>,
}

/// The columns of one kind of row a key can take its interval from.
struct IntervalSourceColumns<'f> {
    frame: &'f DataFrame,
    operations: &'f super::Operations,
    pipeline: <UInt32Type as PolarsDataType>::Array,
    dag: TextArray,
    task: TextArray,
    map: IntArray,
    start: IntArray,
    end: IntArray,
}

/// The columns an object takes from its interval's row. (`task_id` orders the rows but is not taken: the
/// pipeline stands for it.)
const FROM_SOURCE: [&str; 5] = ["dag_id", "pipeline", "map_index", "iv_start", "iv_end"];

/// How the rows a key can take its interval from compare: the earliest interval first, NULLs
/// last.
type SourceOrder<'a> = (
    (bool, Option<i64>),
    (bool, Option<&'a str>),
    (bool, Option<i64>),
    (bool, Option<i64>),
    (bool, Option<&'a str>),
    (bool, Option<&'a str>),
);

impl<'f> IntervalSourceColumns<'f> {
    fn of(
        frame: &'f DataFrame,
        operations: &'f super::Operations,
    ) -> Result<IntervalSourceColumns<'f>> {
        let int = |name: &str| -> Result<IntArray> {
            Ok(one_array(&crate::cells::int_column(frame, name)?))
        };
        let text = |name: &str| -> Result<TextArray> {
            Ok(one_array(&crate::cells::text_column(frame, name)?))
        };
        Ok(IntervalSourceColumns {
            frame,
            operations,
            pipeline: one_array(&crate::cells::code_column(
                frame,
                super::model::interval::PIPELINE,
            )?),
            dag: text("dag_id")?,
            task: text("task_id")?,
            map: int("map_index")?,
            start: int("iv_start")?,
            end: int("iv_end")?,
        })
    }

    /// The operation of a row, None where it has no pipeline.
    fn operation(&self, row: usize) -> Option<&'f str> {
        let operations = self.operations;
        self.pipeline.get(row).map(|code| operations.name(code))
    }

    fn order(&self, row: usize) -> SourceOrder<'_> {
        (
            last(self.start.get(row)),
            last(self.operation(row)),
            last(self.map.get(row)),
            last(self.end.get(row)),
            last(self.dag.get(row)),
            last(self.task.get(row)),
        )
    }
}

impl<'f> IntervalSources<'f> {
    fn new(
        journal: &'f DataFrame,
        tries: &'f DataFrame,
        operations: &'f super::Operations,
    ) -> Result<IntervalSources<'f>> {
        Ok(IntervalSources {
            journal: IntervalSourceColumns::of(journal, operations)?,
            tries: IntervalSourceColumns::of(tries, operations)?,
        })
    }

    /// The frame and row of a source row's code.
    fn at(&self, source: u32) -> (&IntervalSourceColumns<'f>, usize) {
        let source = source as usize;
        match source.checked_sub(self.journal.frame.height()) {
            None => (&self.journal, source),
            Some(row) => (&self.tries, row),
        }
    }

    /// Whether source `a` comes before source `b` in `SourceOrder`. The interval starts are
    /// compared first and the rest only where they are equal: most pairs differ in their start,
    /// and `b` (a key's best so far) is a row anywhere in its frame.
    fn earlier(&self, a: u32, b: u32) -> bool {
        let ((a, a_row), (b, b_row)) = (self.at(a), self.at(b));
        match last(a.start.get(a_row)).cmp(&last(b.start.get(b_row))) {
            std::cmp::Ordering::Equal => a.order(a_row) < b.order(b_row),
            unequal => unequal.is_lt(),
        }
    }

    fn operation(&self, source: u32) -> Option<&str> {
        let (source, row) = self.at(source);
        source.operation(row)
    }

    /// For each key, the number of its source: the earliest interval; ties by operation, map
    /// index, interval end, DAG, task (NULLs last), then by the order of the rows.
    ///
    /// A journal row whose key is its own try's expected key says nothing the try's row does
    /// not, and is passed over.
    fn best(&self, keys: usize, journal_key: &[u32], try_key: &[u32]) -> Result<Vec<Option<u32>>> {
        let own_try =
            crate::cells::code_column(self.journal.frame, super::model::journal::TRY_ROW)?;
        let own_try = crate::cells::each_number(&own_try);
        let journal_candidates = journal_key.iter().zip(own_try).map(|(&key, own)| {
            let own = own.map_or(NONE, |row| try_key[row as usize]);
            (key != own).then_some(key)
        });
        let try_candidates = try_key.iter().map(|&key| Some(key));
        let mut best: Vec<Option<u32>> = vec![None; keys];
        for (source, key) in journal_candidates.chain(try_candidates).enumerate() {
            let Some(key) = key.filter(|&key| key != NONE) else {
                continue;
            };
            let source = source as u32;
            let slot = &mut best[key as usize];
            if slot.is_none_or(|current| self.earlier(source, current)) {
                *slot = Some(source);
            }
        }
        Ok(best)
    }

    /// The `FROM_SOURCE` columns of the given source rows, NULL where there is none, then
    /// `interval_try`: a try whose operation interval is the row's.
    ///
    /// A journal row of its own try has that try's operation, DAG, map index and interval
    /// (`Prepared::early` gave it them), so such rows are read from the tries as well: only
    /// journal rows with no try of their own are taken from the journal.
    fn take(&self, rows: &[Option<u32>]) -> Result<Vec<Column>> {
        let journal_height = self.journal.frame.height() as u32;
        let own_try = one_chunk(crate::cells::code_column(
            self.journal.frame,
            super::model::journal::TRY_ROW,
        )?);
        let mut try_rows = Vec::with_capacity(rows.len());
        let mut journal_rows = Vec::with_capacity(rows.len());
        for &source in rows {
            let (in_tries, in_journal) = match source {
                None => (None, None),
                Some(source) if source >= journal_height => (Some(source - journal_height), None),
                Some(row) => match own_try.get(row as usize) {
                    Some(own) => (Some(own), None),
                    None => (None, Some(row)),
                },
            };
            try_rows.push(in_tries);
            journal_rows.push(in_journal);
        }
        let try_rows: IdxCa =
            crate::cells::numbers(super::model::objects::INTERVAL_TRY, try_rows.into_iter());
        let from_journal = journal_rows.iter().any(Option::is_some).then(|| {
            let mask: BooleanChunked = journal_rows.iter().map(Option::is_some).collect();
            let rows: IdxCa = crate::cells::numbers("source", journal_rows.iter().copied());
            (rows, mask)
        });
        let take = |frame: &DataFrame, name: &str, rows: &IdxCa| -> Result<Column> {
            frame
                .column(name)
                .engine(name)?
                .take(rows)
                .engine("key intervals")
        };
        // Column by column, so only one column's two halves exist at a time.
        let mut columns = FROM_SOURCE
            .iter()
            .map(|&name| {
                let tries = take(self.tries.frame, name, &try_rows)?;
                match &from_journal {
                    None => Ok(tries),
                    Some((rows, mask)) => take(self.journal.frame, name, rows)?
                        .zip_with(mask, &tries)
                        .engine("key intervals"),
                }
            })
            .collect::<Result<Vec<Column>>>()?;
        columns.push(try_rows.into_column());
        Ok(columns)
    }
}

/// Where the text of an object's key is: the listing's `op_key` of a row, the whole journal's
/// of a row, or nowhere (no key).
#[derive(Clone, Copy)]
enum KeyCell {
    None,
    Listed(u32),
    Journal(u32),
}

/// The attribution of the kept objects, row by row.
#[derive(Default)]
struct ObjectColumns {
    live: Vec<Option<bool>>,
    named: Vec<bool>,
    committed: Vec<bool>,
    key: Vec<KeyCell>,
    key_id: Vec<Option<u32>>,
    id: Vec<Option<u32>>,
    source: Vec<Option<u32>>,
    key_journaled: Vec<bool>,
    key_ttl: Vec<Option<i64>>,
    intent: Vec<Option<u32>>,
    commit: Vec<Option<u32>>,
}

impl ObjectColumns {
    fn with_capacity(rows: usize) -> ObjectColumns {
        ObjectColumns {
            live: Vec::with_capacity(rows),
            named: Vec::with_capacity(rows),
            committed: Vec::with_capacity(rows),
            key: Vec::with_capacity(rows),
            key_id: Vec::with_capacity(rows),
            id: Vec::with_capacity(rows),
            source: Vec::with_capacity(rows),
            key_journaled: Vec::with_capacity(rows),
            key_ttl: Vec::with_capacity(rows),
            intent: Vec::with_capacity(rows),
            commit: Vec::with_capacity(rows),
        }
    }

    /// Appends the rows of `other`.
    fn extend(&mut self, other: ObjectColumns) {
        self.live.extend(other.live);
        self.named.extend(other.named);
        self.committed.extend(other.committed);
        self.key.extend(other.key);
        self.key_id.extend(other.key_id);
        self.id.extend(other.id);
        self.source.extend(other.source);
        self.key_journaled.extend(other.key_journaled);
        self.key_ttl.extend(other.key_ttl);
        self.intent.extend(other.intent);
        self.commit.extend(other.commit);
    }

    /// `listed_keys` are the listing's `op_key` cells, `journal_keys` the whole journal's.
    fn columns(
        &self,
        interval_sources: &IntervalSources<'_>,
        listed_keys: &StringChunked,
        journal_keys: &StringChunked,
    ) -> Result<Vec<Column>> {
        let mut columns = vec![
            Column::new("live".into(), &self.live),
            Column::new("named".into(), &self.named),
            Column::new("committed".into(), &self.committed),
            self.key_column(listed_keys, journal_keys)?,
            crate::cells::numbers::<UInt32Type>(
                super::model::KEY_CODE,
                self.key_id.iter().copied(),
            )
            .into_column(),
            crate::cells::numbers::<UInt32Type>(
                super::model::EXTERNAL_ID_CODE,
                self.id.iter().copied(),
            )
            .into_column(),
        ];
        columns.extend(interval_sources.take(&self.source)?);
        columns.push(Column::new(
            super::model::objects::KEY_JOURNALED.into(),
            &self.key_journaled,
        ));
        columns.push(Column::new("key_ttl".into(), &self.key_ttl));
        Ok(columns)
    }

    /// The `key` column: each object's cell taken from where its text is, so the cells share
    /// the texts' memory instead of copying them.
    fn key_column(&self, listed: &StringChunked, journal: &StringChunked) -> Result<Column> {
        let rows = |wanted: fn(KeyCell) -> Option<u32>| -> IdxCa {
            crate::cells::numbers("key", self.key.iter().map(|&cell| wanted(cell)))
        };
        let from_listing = rows(|cell| match cell {
            KeyCell::Listed(row) => Some(row),
            _ => None,
        });
        let mut keys = listed.take(&from_listing).engine("object keys")?;
        if self
            .key
            .iter()
            .any(|cell| matches!(cell, KeyCell::Journal(_)))
        {
            let from_journal = rows(|cell| match cell {
                KeyCell::Journal(row) => Some(row),
                _ => None,
            });
            let listed_here: BooleanChunked = self
                .key
                .iter()
                .map(|cell| matches!(cell, KeyCell::Listed(_)))
                .collect();
            let named = journal.take(&from_journal).engine("object keys")?;
            keys = keys.zip_with(&listed_here, &named).engine("object keys")?;
        }
        Ok(keys.with_name("key".into()).into_column())
    }
}

/// `by_run_id`, `by_try_number`, `by_map_index`: each from the creating intent's row where it
/// has the value, else from the first committed row's; NULL where neither is known. Each
/// column is one take, of the row each object's value comes from.
fn creators(objects: &ObjectColumns, all_journal: &DataFrame) -> Result<Vec<Column>> {
    [
        ("run_id", "by_run_id"),
        ("try_number", "by_try_number"),
        ("map_index", "by_map_index"),
    ]
    .into_iter()
    .map(|(from, name)| {
        let column = all_journal.column(from).engine(from)?;
        let known = column
            .is_not_null()
            .rechunk()
            .downcast_as_array()
            .values()
            .clone();
        let rows = objects
            .intent
            .iter()
            .zip(&objects.commit)
            .map(|(&intent, &commit)| intent.filter(|&row| known.get_bit(row as usize)).or(commit));
        let rows: IdxCa = crate::cells::numbers(name, rows);
        Ok(column.take(&rows).engine(from)?.with_name(name.into()))
    })
    .collect()
}
