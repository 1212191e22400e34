//! The prepared tables: the three canonical tables (`crate::model`) with the columns `prepare`
//! adds to them, written here once.
//!
//! * [`tries`]: the attempts of operation tasks with their operation, pipeline, audit interval,
//!   expected key and codes;
//! * [`journal`]: the audited journal's rows with their operation, interval, own try and codes;
//! * [`objects`]: the provider's objects with their liveness, key, attribution and creator.
//!
//! **Codes** number a kind of value densely from 0, the same value having the same code in
//! every table, so per-value facts are arrays indexed by code ([`Codes`]): keys (`key_code`),
//! object ids (`external_id_code`), runs (`run_code`), pipelines (`pipeline`). A NULL code is a
//! NULL cell. **Rows** (`try_row`, `interval_try`) are row numbers of `tries`.
//!
//! `Early::finish` checks the frames it returns against these lists ([`check`]).

use polars::prelude::*;

use crate::error::{Error, Result};

/// What a prepared column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    /// Microseconds since the epoch, UTC (`crate::model::utc`).
    Time,
    Flag,
    /// A code (see the module documentation); NULL for no value.
    Code,
    /// A row of `tries`; NULL for none.
    TryRow,
}

impl Kind {
    fn dtype(self) -> DataType {
        match self {
            Kind::Text => DataType::String,
            Kind::Int => DataType::Int64,
            Kind::Time => crate::model::utc(),
            Kind::Flag => DataType::Boolean,
            Kind::Code => DataType::UInt32,
            Kind::TryRow => IDX_DTYPE,
        }
    }
}

/// A column `prepare` adds, and what it holds.
#[derive(Debug, Clone, Copy)]
pub struct Added {
    pub name: &'static str,
    pub kind: Kind,
}

const fn added(name: &'static str, kind: Kind) -> Added {
    Added { name, kind }
}

/// The code of the key of a try (its expected key), a journal row (`op_key`) or an object.
pub const KEY_CODE: &str = "key_code";
/// The code of the object id (`external_id`) of a journal row or an object.
pub const EXTERNAL_ID_CODE: &str = "external_id_code";

/// How many keys, object ids and runs have codes: arrays indexed by a code are this long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Codes {
    /// Keys (`KEY_CODE`): the whole journal's, the provider's and the tries' expected keys.
    pub keys: usize,
    /// Object ids (`EXTERNAL_ID_CODE`): the whole journal's and the provider's.
    pub external_ids: usize,
    /// Runs (`tries::RUN_CODE`).
    pub runs: usize,
}

impl Codes {
    /// `value` for every key code.
    pub fn per_key<T: Clone>(&self, value: T) -> Vec<T> {
        vec![value; self.keys]
    }

    /// `value` for every object id code.
    pub fn per_external_id<T: Clone>(&self, value: T) -> Vec<T> {
        vec![value; self.external_ids]
    }

    /// `value` for every run code.
    pub fn per_run<T: Clone>(&self, value: T) -> Vec<T> {
        vec![value; self.runs]
    }
}

/// The columns of a pipeline interval (SPEC §4), in the tries, the journal and the objects.
pub mod interval {
    /// The `[[operation]]` name (a journal row of a task no operation names: `dag_id.task_id`).
    /// No prepared frame has it as a column: the pipeline stands for it, and
    /// `Prepared::operations` names it for the rows that are printed.
    pub const OPERATION: &str = "operation";
    /// A DAG's task, coded in the order first seen in the tries, then the journal.
    pub const PIPELINE: &str = "pipeline";
    /// A pipeline's place in the order of operation name, DAG, then pipeline code. No prepared
    /// frame has it: `Operations::with_rank` adds it to rows about to be sorted by interval.
    pub const PIPELINE_RANK: &str = "pipeline_rank";
    /// The audit interval (SPEC §2).
    pub const START: &str = "iv_start";
    pub const END: &str = "iv_end";
    /// The interval as findings print it: `start/end`, or `start` where it has no length. No
    /// prepared frame has it as a column: `prepare::interval_labels` makes it from the start
    /// and end for the rows that are printed or picked by it.
    pub const LABEL: &str = "interval";
}

/// The columns `prepare` adds to the attempts of operation tasks.
pub mod tries {
    /// Which of the run's times the audit interval is, coded: its name is `BASES[code]`;
    /// NULL where the try has no interval.
    pub const BASIS: &str = "basis";
    /// The names of the bases, by code.
    pub const BASES: [&str; 3] = ["data_interval", "logical_date", "run_after"];
    /// The key the operation's template gives the try.
    pub const EXPECTED_KEY: &str = "expected_key";
    /// The run (`dag_id`, `run_id`), coded.
    pub const RUN_CODE: &str = "run_code";
}

/// The `attempts` columns only preparing reads: the run's times the audit interval is chosen
/// from and the run's conf and DAG zone, which key templates read (`crate::keys`). The
/// prepared tries keep none of them, nor the `conf.NAME` values taken out for the templates:
/// the audit interval, its label and the expected key stand for them in every rule, verdict
/// and question after preparing. The run's `logical_date` stays: it is how `airflow tasks
/// clear` selects a run, which a plan's commands name (`crate::rules::clear`).
pub const READ_WHILE_PREPARING: [&str; 5] = [
    "interval_start",
    "interval_end",
    "run_after",
    "conf",
    "dag_timezone",
];

/// `frame` without the columns only preparing reads: those of [`READ_WHILE_PREPARING`] and
/// the `conf.NAME` values taken out for key templates, where it has them.
pub fn without_read_while_preparing(frame: &DataFrame) -> DataFrame {
    let read_while_preparing: Vec<PlSmallStr> = frame
        .get_column_names()
        .into_iter()
        .filter(|name| {
            READ_WHILE_PREPARING.contains(&name.as_str())
                || name.starts_with(crate::keys::CONF_PREFIX)
        })
        .cloned()
        .collect();
    frame.drop_many(read_while_preparing)
}

/// The columns `prepare` adds to the audited journal.
pub mod journal {
    /// The row of `tries` of the row's own try (`TRY`), NULL where the audit has none.
    pub const TRY_ROW: &str = "try_row";
}

/// The columns `prepare` adds to the provider's objects.
pub mod objects {
    /// Not deleted.
    pub const LIVE: &str = "live";
    /// Listed under a key, or named by a journal row.
    pub const NAMED: &str = "named";
    /// A committed or reconciled journal row names it.
    pub const COMMITTED: &str = "committed";
    /// The key it is listed or journalled under.
    pub const KEY: &str = "key";
    /// The DAG of its interval.
    pub const DAG_ID: &str = "dag_id";
    pub const MAP_INDEX: &str = "map_index";
    /// A try (row of `tries`) whose pipeline interval is the object's.
    pub const INTERVAL_TRY: &str = "interval_try";
    /// Whether the journal has a row under its key.
    pub const KEY_JOURNALED: &str = "key_journaled";
    /// The provider's `interval_start`/`interval_end` of the object, renamed so they are not
    /// taken for the attributed interval.
    pub const PROVIDER_INTERVAL_START: &str = "provider_interval_start";
    pub const PROVIDER_INTERVAL_END: &str = "provider_interval_end";
    /// The try that created it, where the journal tells.
    pub const BY_RUN_ID: &str = "by_run_id";
    pub const BY_TRY_NUMBER: &str = "by_try_number";
    pub const BY_MAP_INDEX: &str = "by_map_index";
}

const INTERVAL: [Added; 3] = [
    added(interval::PIPELINE, Kind::Code),
    added(interval::START, Kind::Time),
    added(interval::END, Kind::Time),
];

/// Every column `prepare` adds to each table, interval columns first.
pub const TRIES: [Added; 4] = [
    added(tries::BASIS, Kind::Code),
    added(tries::EXPECTED_KEY, Kind::Text),
    added(KEY_CODE, Kind::Code),
    added(tries::RUN_CODE, Kind::Code),
];
pub const JOURNAL: [Added; 3] = [
    added(journal::TRY_ROW, Kind::TryRow),
    added(KEY_CODE, Kind::Code),
    added(EXTERNAL_ID_CODE, Kind::Code),
];
pub const OBJECTS: [Added; 15] = [
    added(objects::LIVE, Kind::Flag),
    added(objects::NAMED, Kind::Flag),
    added(objects::COMMITTED, Kind::Flag),
    added(objects::KEY, Kind::Text),
    added(KEY_CODE, Kind::Code),
    added(EXTERNAL_ID_CODE, Kind::Code),
    added(objects::DAG_ID, Kind::Text),
    added(objects::MAP_INDEX, Kind::Int),
    added(objects::INTERVAL_TRY, Kind::TryRow),
    added(objects::KEY_JOURNALED, Kind::Flag),
    added(objects::PROVIDER_INTERVAL_START, Kind::Time),
    added(objects::PROVIDER_INTERVAL_END, Kind::Time),
    added(objects::BY_RUN_ID, Kind::Text),
    added(objects::BY_TRY_NUMBER, Kind::Int),
    added(objects::BY_MAP_INDEX, Kind::Int),
];

/// Whether each prepared frame has the columns this module lists, of their kinds.
pub fn check(tries: &DataFrame, journal: &DataFrame, objects: &DataFrame) -> Result<()> {
    let tables: [(&str, &DataFrame, &[Added]); 3] = [
        ("tries", tries, &TRIES),
        ("journal", journal, &JOURNAL),
        ("objects", objects, &OBJECTS),
    ];
    for (table, frame, columns) in tables {
        for column in INTERVAL.iter().chain(columns) {
            let found = frame.schema().get(column.name).cloned();
            if found.as_ref() != Some(&column.kind.dtype()) {
                return Err(Error::Engine {
                    doing: "preparing the tables".into(),
                    message: format!(
                        "prepared {table} column `{}` is {found:?}, not {:?}",
                        column.name, column.kind
                    ),
                });
            }
        }
    }
    Ok(())
}
