//! The canonical tables. Every source is read into one of these three schemas; rules only ever
//! see these, so a new source never touches a rule.
//!
//! All datetimes are `Datetime(Microseconds, None)` holding **UTC** wall time: sources convert
//! offsets to UTC on the way in, so no column ever carries a local time.

use polars::prelude::*;

pub const TIME_UNIT: TimeUnit = TimeUnit::Microseconds;

/// The dtype of every timestamp column: microseconds since the epoch, UTC.
pub fn utc() -> DataType {
    DataType::Datetime(TIME_UNIT, None)
}

/// The logical type of a canonical column, before it becomes a polars dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Int,
    Time,
}

impl Kind {
    pub fn dtype(self) -> DataType {
        match self {
            Kind::Text => DataType::String,
            Kind::Int => DataType::Int64,
            Kind::Time => utc(),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Int => "integer",
            Kind::Time => "timestamp (RFC 3339 or epoch seconds/milliseconds)",
        }
    }
}

/// One column of a canonical table.
#[derive(Debug, Clone, Copy)]
pub struct ColumnSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// Whether a row may leave it empty.
    pub nullable: bool,
}

const fn c(name: &'static str, kind: Kind, nullable: bool) -> ColumnSpec {
    ColumnSpec {
        name,
        kind,
        nullable,
    }
}

/// The three canonical tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Table {
    Attempts,
    Journal,
    Provider,
}

impl Table {
    pub const ALL: [Table; 3] = [Table::Attempts, Table::Journal, Table::Provider];

    pub fn name(self) -> &'static str {
        match self {
            Table::Attempts => "attempts",
            Table::Journal => "journal",
            Table::Provider => "provider",
        }
    }

    pub fn columns(self) -> &'static [ColumnSpec] {
        match self {
            Table::Attempts => ATTEMPTS,
            Table::Journal => JOURNAL,
            Table::Provider => PROVIDER,
        }
    }

    pub fn schema(self) -> Schema {
        self.columns()
            .iter()
            .map(|spec| Field::new(spec.name.into(), spec.kind.dtype()))
            .collect()
    }

    /// The column that places a row in time: a try's start, a journal row's recording, an
    /// object's creation.
    pub fn time_column(self) -> &'static str {
        match self {
            Table::Attempts => "start_date",
            Table::Journal => "recorded_at",
            Table::Provider => "created_at",
        }
    }

    /// The columns that order the table deterministically, whatever order a source gave.
    pub fn sort_key(self) -> &'static [&'static str] {
        match self {
            Table::Attempts => &["dag_id", "run_id", "task_id", "map_index", "try_number"],
            Table::Journal => &[
                "recorded_at",
                "op_key",
                "dag_id",
                "task_id",
                "map_index",
                "run_id",
                "try_number",
                "phase",
                "external_id",
            ],
            Table::Provider => &["created_at", "external_id"],
        }
    }

    /// `by`, then the columns of [`Table::sort_key`] it does not name. Rows sorted by them
    /// come out in one order whatever order the source gave them in, so what is read from the
    /// first of a group, and every list made of a group's rows, does not depend on it (a
    /// journal that records times to the second has many rows that tie on time).
    pub fn sorted_by<'a>(self, by: &[&'a str]) -> Vec<&'a str> {
        let rest = self.sort_key().iter().filter(|name| !by.contains(name));
        by.iter().copied().chain(rest.copied()).collect()
    }
}

/// Two rows of a journal frame compared in the journal's own order ([`Table::sort_key`]), for
/// code that walks rows instead of sorting them: of rows that tie on time (a journal that
/// records to the second has many), the one taken first or last is decided by what the rows
/// say, not by where the source put them. A column is read only when the rows tie on the ones
/// before it.
pub struct JournalOrder {
    columns: Vec<OrderColumn>,
}

enum OrderColumn {
    Text(crate::cells::TextArray),
    Int(crate::cells::IntArray),
}

impl JournalOrder {
    pub fn of(journal: &DataFrame) -> crate::error::Result<JournalOrder> {
        let columns = Table::Journal
            .sort_key()
            .iter()
            .map(|name| {
                let kind = Table::Journal.columns().iter().find(|c| c.name == *name);
                Ok(match kind.map(|column| column.kind) {
                    Some(Kind::Text) => OrderColumn::Text(crate::cells::one_array(
                        &crate::cells::text_column(journal, name)?,
                    )),
                    _ => OrderColumn::Int(crate::cells::one_array(&crate::cells::int_column(
                        journal, name,
                    )?)),
                })
            })
            .collect::<crate::error::Result<_>>()?;
        Ok(JournalOrder { columns })
    }

    /// How row `a` compares with row `b`; rows equal here say the same in every column of the
    /// order.
    pub fn cmp(&self, a: usize, b: usize) -> std::cmp::Ordering {
        self.columns
            .iter()
            .map(|column| match column {
                OrderColumn::Text(cells) => cells.get(a).cmp(&cells.get(b)),
                OrderColumn::Int(cells) => cells.get(a).cmp(&cells.get(b)),
            })
            .find(|order| order.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

/// `attempts`: one row per task try, from `task_instance_history` plus `task_instance`.
///
/// * `interval_start`/`interval_end` are the run's data interval (NULL for an Airflow 3 manual
///   run without a logical date); `logical_date` is `execution_date` in 2.x; `run_after` is
///   3.x's never-NULL scheduling time (2.x sources fill it with the logical date).
/// * `conf` is the run's conf as JSON text (2.x pickles are decoded by the source).
/// * `dag_timezone` is the DAG's own zone as Airflow serialized it (`dag.timezone` of the
///   newest serialized version: an IANA name, or a fixed offset in seconds); NULL where the
///   source does not say it (the REST API, compressed serialized DAGs, snapshots saved before
///   the column existed), which key templates read as UTC.
/// * `run_state` is the run's state (`dag_run.state`: `queued`, `running`, `success`,
///   `failed`); `heartbeat_at` the latest try's last heartbeat (Airflow 3's
///   `task_instance.last_heartbeat_at`, Airflow 2's LocalTaskJob `job.latest_heartbeat`),
///   NULL for earlier tries and where the source does not say (the REST API). Both tell a try
///   still in flight from a finished one (`crate::in_flight`).
pub const ATTEMPTS: &[ColumnSpec] = &[
    c("dag_id", Kind::Text, false),
    c("task_id", Kind::Text, false),
    c("map_index", Kind::Int, false),
    c("run_id", Kind::Text, false),
    c("run_type", Kind::Text, true),
    c("try_number", Kind::Int, false),
    c("state", Kind::Text, true),
    c("start_date", Kind::Time, true),
    c("end_date", Kind::Time, true),
    c("hostname", Kind::Text, true),
    c("pid", Kind::Int, true),
    c("queued_at", Kind::Time, true),
    c("interval_start", Kind::Time, true),
    c("interval_end", Kind::Time, true),
    c("logical_date", Kind::Time, true),
    c("run_after", Kind::Time, true),
    c("conf", Kind::Text, true),
    c("clear_number", Kind::Int, true),
    c("dag_timezone", Kind::Text, true),
    c("run_state", Kind::Text, true),
    c("heartbeat_at", Kind::Time, true),
];

/// The `attempts` columns that identify one task instance (all its tries).
pub const TASK_INSTANCE: [&str; 4] = ["dag_id", "task_id", "map_index", "run_id"];
/// The `attempts` columns that identify one try.
pub const TRY: [&str; 5] = ["dag_id", "task_id", "map_index", "run_id", "try_number"];

/// `journal`: one row per record the tasks wrote. `phase` is one of [`PHASES`] after the
/// configured mapping of the journal's own values.
pub const JOURNAL: &[ColumnSpec] = &[
    c("op_key", Kind::Text, false),
    c("dag_id", Kind::Text, false),
    c("task_id", Kind::Text, false),
    c("map_index", Kind::Int, true),
    c("run_id", Kind::Text, false),
    c("try_number", Kind::Int, false),
    c("phase", Kind::Text, false),
    c("external_id", Kind::Text, true),
    c("payload_hash", Kind::Text, true),
    c("recorded_at", Kind::Time, false),
    c("approval_id", Kind::Text, true),
    c("approval_expires_at", Kind::Time, true),
];

/// Journal columns onceonly only writes, never reads: `note`, where a repair script puts the
/// id of the plan action that wrote the row. `[journal.columns]` may map them.
pub const JOURNAL_WRITTEN_ONLY: [&str; 1] = ["note"];

/// `provider`: one row per object the provider lists. `op_key` is the idempotency key or
/// client reference the provider echoes (NULL when it echoes none); `raw` is the object as the
/// provider sent it, JSON text.
pub const PROVIDER: &[ColumnSpec] = &[
    c("external_id", Kind::Text, false),
    c("op_key", Kind::Text, true),
    c("created_at", Kind::Time, false),
    c("status", Kind::Text, false),
    c("payload_hash", Kind::Text, true),
    c("interval_start", Kind::Time, true),
    c("interval_end", Kind::Time, true),
    c("raw", Kind::Text, true),
];

/// A column of a canonical table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceColumn {
    pub table: Table,
    pub name: &'static str,
}

/// The nullable columns that preparing, the verdicts and the report never read: kept as
/// evidence, for a saved snapshot, and for the rules, the plan and the verdicts frame that
/// name them (`Rule::reads`, `rules::repair::plan_reads`, `verdicts::FRAME_READS`). An audit
/// of a snapshot leaves those nobody it runs reads NULL rather than decoding them
/// (`engine::read`), as a query reads only the columns it names.
pub const READ_ON_DEMAND: &[SourceColumn] = &[
    SourceColumn {
        table: Table::Attempts,
        name: "run_type",
    },
    SourceColumn {
        table: Table::Attempts,
        name: "hostname",
    },
    SourceColumn {
        table: Table::Attempts,
        name: "pid",
    },
    SourceColumn {
        table: Table::Attempts,
        name: "queued_at",
    },
    SourceColumn {
        table: Table::Attempts,
        name: "clear_number",
    },
    SourceColumn {
        table: Table::Journal,
        name: "payload_hash",
    },
    SourceColumn {
        table: Table::Journal,
        name: "approval_id",
    },
    SourceColumn {
        table: Table::Journal,
        name: "approval_expires_at",
    },
    SourceColumn {
        table: Table::Provider,
        name: "payload_hash",
    },
    SourceColumn {
        table: Table::Provider,
        name: "raw",
    },
];

/// The created-at window a provider listing covers, microseconds, both ends inclusive; `None`
/// is unbounded on that side. Objects created outside it are unknown, not absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProviderWindow {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl ProviderWindow {
    pub fn unbounded() -> ProviderWindow {
        ProviderWindow::default()
    }

    /// Whether a time (microseconds) is inside the window.
    pub fn holds(&self, at: i64) -> bool {
        self.from.is_none_or(|from| at >= from) && self.to.is_none_or(|to| at <= to)
    }
}

/// The journal phases every journal is mapped onto.
pub const PHASES: [&str; 4] = ["intent", "committed", "failed", "reconciled"];

/// A journal row's phase, one of [`PHASES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Intent,
    Committed,
    Failed,
    Reconciled,
}

impl Phase {
    /// The phase a cell names; None for a text that is not one of [`PHASES`].
    pub fn of(text: &str) -> Option<Phase> {
        match text {
            "intent" => Some(Phase::Intent),
            "committed" => Some(Phase::Committed),
            "failed" => Some(Phase::Failed),
            "reconciled" => Some(Phase::Reconciled),
            _ => None,
        }
    }

    /// The phase of each cell of a `phase` column (None where it is NULL or names no phase),
    /// each run of one phase (`cells::Runs`) matched once.
    pub fn of_cells(column: &StringChunked) -> Vec<Option<Phase>> {
        crate::cells::each_text(column, |text| text.and_then(Phase::of))
    }

    /// Whether it says the operation's outcome is known (see [`is_done`]).
    pub fn done(self) -> bool {
        matches!(self, Phase::Committed | Phase::Reconciled)
    }
}

/// Whether a phase says the operation's outcome is known: a committed row, or a reconciled
/// one (a later check found the object).
pub fn is_done(phase: Expr) -> Expr {
    phase.is_in(
        lit(Series::new("done".into(), ["committed", "reconciled"])).implode(false),
        false,
    )
}

/// An empty frame with a table's schema, for a source that legitimately has no rows.
pub fn empty(table: Table) -> DataFrame {
    DataFrame::empty_with_schema(&table.schema())
}
