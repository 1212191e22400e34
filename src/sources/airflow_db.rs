//! The `attempts` table from Airflow's metadata database (SQLite, PostgreSQL; MySQL is refused).
//!
//! The schema version is read from `alembic_version` and the columns the query needs are
//! checked before it runs, so a database of the wrong kind or version fails with a message
//! naming what was found and what is missing. Rows are streamed into column builders; on
//! SQLite the DAG runs are read apart and joined to the tries here (`Runs`). All of
//! it is read in one read-only transaction ([`ReadTransaction`]): Airflow may be writing, and
//! the revision, the columns and every try come from the database as it stood at one instant.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::*;

use crate::dictionary::CopiedDictionary;
use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{ATTEMPTS, ColumnSpec, ProviderWindow};
use crate::sources::database::{Database, Dialect, Param};
use crate::sources::pickle;
use crate::sources::read_transaction::{Cells, ReadTransaction};
use crate::sources::snapshot::Values;
use crate::sources::sqlite_rows::SqliteRead;
use crate::timestamp;

/// Alembic revisions onceonly was checked against, with the Airflow version they belong to.
pub const KNOWN_VERSIONS: [(&str, &str, u8); 2] =
    [("5f2621c13b39", "2.10.5", 2), ("d2f4e1b3c5a7", "3.3.2", 3)];

/// What the audit asks of the database: pushed down into the SQL.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A dag_id glob.
    pub dag: Option<String>,
    pub since: Option<i64>,
    pub until: Option<i64>,
}

/// The attempts table and what was learned about the schema on the way.
pub struct AirflowRead {
    pub attempts: DataFrame,
    pub version: String,
    pub warnings: Vec<String>,
}

const REQUIRED_COMMON: [(&str, &str); 24] = [
    ("task_instance", "dag_id"),
    ("task_instance", "task_id"),
    ("task_instance", "map_index"),
    ("task_instance", "run_id"),
    ("task_instance", "try_number"),
    ("task_instance", "state"),
    ("task_instance", "start_date"),
    ("task_instance", "end_date"),
    ("task_instance", "hostname"),
    ("task_instance", "pid"),
    ("task_instance", "queued_dttm"),
    ("task_instance_history", "try_number"),
    ("task_instance_history", "start_date"),
    ("task_instance_history", "hostname"),
    ("dag_run", "run_type"),
    ("dag_run", "data_interval_start"),
    ("dag_run", "data_interval_end"),
    ("dag_run", "conf"),
    ("dag_run", "clear_number"),
    ("alembic_version", "version_num"),
    // the DAG's own zone, for key templates
    ("serialized_dag", "dag_id"),
    ("serialized_dag", "data"),
    ("serialized_dag", "data_compressed"),
    ("serialized_dag", "last_updated"),
];
const REQUIRED_2: [(&str, &str); 1] = [("dag_run", "execution_date")];
const REQUIRED_3: [(&str, &str); 2] = [("dag_run", "logical_date"), ("dag_run", "run_after")];

/// Reads the attempts in one read transaction of their own.
pub async fn read(database: &Database, filter: &Filter) -> Result<AirflowRead> {
    let mut transaction = ReadTransaction::begin(database).await?;
    let read = read_in(&mut transaction, filter).await?;
    transaction.finish().await?;
    Ok(read)
}

/// Reads the attempts inside `transaction`: the schema revision, the columns and the tries
/// all come from the database as it stood at one point in time.
pub async fn read_in(
    transaction: &mut ReadTransaction<'_>,
    filter: &Filter,
) -> Result<AirflowRead> {
    AttemptsQuery::prepare(transaction, filter)
        .await?
        .read(transaction)
        .await
}

/// The earliest try start and the latest try end (or start, for a try still running) of the
/// tries the attempts query reads: what the provider window is made from (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TryBounds {
    pub first_start: Option<i64>,
    pub last_end: Option<i64>,
}

impl TryBounds {
    /// The bounds of tries as read (an `attempts` table).
    pub fn of(attempts: &DataFrame) -> Result<TryBounds> {
        let starts = crate::cells::int_column(attempts, "start_date")?;
        let ends = crate::cells::int_column(attempts, "end_date")?;
        Ok(TryBounds {
            first_start: starts.min(),
            last_end: ends.max().max(starts.max()),
        })
    }

    /// The created-at window a provider listing covers for these tries (SPEC §3): the earliest
    /// start minus `slack` to the latest end plus `slack`; without any try, `since` to `until`
    /// (the audit's activity window).
    pub fn listing_window(
        self,
        slack: i64,
        since: Option<i64>,
        until: Option<i64>,
    ) -> ProviderWindow {
        match (self.first_start, self.last_end) {
            (Some(from), Some(to)) => ProviderWindow {
                from: Some(from - slack),
                to: Some(to + slack),
            },
            _ => ProviderWindow {
                from: since,
                to: until,
            },
        }
    }
}

/// The attempts query for one database, its schema checked: [`bounds`](Self::bounds) asks the
/// database for the tries' time bounds before [`read`](Self::read) reads them, so that a
/// provider listing can start while the tries are read. Both run in the same transaction, so
/// they see the same tries.
pub struct AttemptsQuery<'f> {
    statements: Statements,
    version: String,
    warnings: Vec<String>,
    filter: &'f Filter,
}

impl<'f> AttemptsQuery<'f> {
    /// Reads the schema revision and checks the columns the query needs.
    pub async fn prepare(
        transaction: &mut ReadTransaction<'_>,
        filter: &'f Filter,
    ) -> Result<AttemptsQuery<'f>> {
        let database = transaction.database;
        let columns = columns(transaction).await?;
        let version = schema_version(transaction, &columns).await?;
        let (major, warnings) = major_version(&version, &columns, database)?;
        let heartbeat = heartbeat(major, &columns, database.dialect);
        let with_heartbeat = |sql: &str| sql.replace("{heartbeat}", heartbeat);
        let statements = match (database.dialect, major) {
            (Dialect::Sqlite, major) => Statements::Apart {
                tries: as_filtered(
                    &with_heartbeat(include_str!("../../queries/airflow/sqlite/tries.sql")),
                    filter,
                ),
                runs: match major {
                    2 => include_str!("../../queries/airflow/2/sqlite/runs.sql"),
                    _ => include_str!("../../queries/airflow/3/sqlite/runs.sql"),
                },
            },
            (Dialect::Postgres, 2) => Statements::Joined(as_filtered(
                &with_heartbeat(include_str!(
                    "../../queries/airflow/2/postgres/attempts.sql"
                )),
                filter,
            )),
            (Dialect::Postgres, _) => Statements::Joined(as_filtered(
                &with_heartbeat(include_str!(
                    "../../queries/airflow/3/postgres/attempts.sql"
                )),
                filter,
            )),
            (Dialect::Mysql, _) => return Err(mysql_refused(database)),
        };
        Ok(AttemptsQuery {
            statements,
            version,
            warnings,
            filter,
        })
    }

    /// The bounds of the tries [`read`](Self::read) returns, as the database finds them in a
    /// quick scan of the try tables (`try_bounds.sql`; on SQLite, for an audit of every run,
    /// the two tables scanned at once, `sqlite_bounds_apart`). They are compared with the
    /// tries once read (`sources::load`): where the two differ, the tries' own bounds are used.
    pub async fn bounds(&self, transaction: &mut ReadTransaction<'_>) -> Result<TryBounds> {
        let database = transaction.database;
        if database.dialect == Dialect::Sqlite && unfiltered(self.filter) {
            return sqlite_bounds_apart(database);
        }
        let sql = match database.dialect {
            Dialect::Sqlite => include_str!("../../queries/airflow/sqlite/try_bounds.sql"),
            Dialect::Postgres => include_str!("../../queries/airflow/postgres/try_bounds.sql"),
            Dialect::Mysql => return Err(mysql_refused(database)),
        };
        let sql = as_filtered(sql, self.filter);
        let (since, until, dag_like) = self.params(database);
        let params = [
            Param::Text(&since),
            Param::Text(&until),
            Param::Text(&dag_like),
        ];
        let mut times = [None; 3];
        transaction
            .for_each_row(
                "the tries' bounds",
                &sql,
                &params,
                &BOUNDS,
                |number, row| {
                    times = bound_times(row, &database.shown, number)?;
                    Ok(())
                },
            )
            .await?;
        Ok(TryBounds::of_times([times]))
    }

    /// Reads the tries.
    pub async fn read(self, transaction: &mut ReadTransaction<'_>) -> Result<AirflowRead> {
        let attempts = self.stream(transaction).await?;
        let (_, _, dag_like) = self.params(transaction.database);
        let zones = compressed_zones(transaction, &dag_like).await?;
        let attempts = with_zones(attempts, &zones)?;
        Ok(AirflowRead {
            attempts,
            version: self.version,
            warnings: self.warnings,
        })
    }

    /// The bind values: the activity window and the dag_id pattern.
    fn params(&self, database: &Database) -> (String, String, String) {
        let (since, until) = database
            .dialect
            .window_bounds(self.filter.since, self.filter.until);
        let dag_like = self
            .filter
            .dag
            .as_deref()
            .map(like_pattern)
            .unwrap_or_else(|| "%".to_string());
        (since, until, dag_like)
    }

    async fn stream(&self, transaction: &mut ReadTransaction<'_>) -> Result<DataFrame> {
        let database = transaction.database;
        let (since, until, dag_like) = self.params(database);
        let params = [
            Param::Text(&since),
            Param::Text(&until),
            Param::Text(&dag_like),
        ];
        let progress = crate::progress::Line::open("attempts", &database.shown);
        let mut read = 0;
        let attempts = match &self.statements {
            Statements::Joined(sql) => {
                let specs: Vec<&ColumnSpec> = ATTEMPTS.iter().collect();
                let mut builders = builders(&specs);
                let named = TryNamed::at(|name| place(&specs, name));
                // `has_run` after the columns and `conf_pickle`.
                let mut names = names(&specs);
                let has_run = names.len();
                names.push("has_run");
                transaction
                    .for_each_row("the tries", sql, &params, &names, |number, row| {
                        read = number;
                        progress.row(number);
                        let at = cell_at(&database.shown, number);
                        if row.int(has_run) == Ok(Some(0)) {
                            return Err(named.without_run(row, &at));
                        }
                        if !named.ran(row, &at)? {
                            return Ok(());
                        }
                        push_row(row, &specs, &mut builders, &at)
                    })
                    .await?;
                in_attempts_order(columns_of(specs, builders))?
            }
            Statements::Apart { tries, runs } => {
                let runs = Runs::read(transaction, runs, &params).await?;
                runs.join(transaction, tries, &params, |number| {
                    read = number;
                    progress.row(number);
                })
                .await?
            }
        };
        progress.rows(read as u64);
        progress.done();
        Ok(attempts)
    }
}

/// The statements that read the tries with their runs' columns.
enum Statements {
    /// One query: PostgreSQL joins each try to its run by hash.
    Joined(String),
    /// SQLite: the tries (`tries.sql`) and the runs (`runs.sql`), read apart and joined here by
    /// hash ([`Runs`]). SQLite itself would look each try's run up in dag_run's index and then
    /// in the table: two b-tree descents a try.
    Apart { tries: String, runs: &'static str },
}

/// The DAG runs as `runs.sql` reads them, for the tries to be joined to: their columns of
/// `attempts` (each cell checked as it is read), a row per run whose dag_id and run_id are not
/// NULL. A run with a cell that failed its check has a NULL there and its error kept: the read
/// fails on it only if a try is joined to that run, as a query joining them would.
struct Runs {
    keys: RunKeys,
    /// `Runs::COLUMNS`, each with its spec, a row per run.
    columns: Vec<(&'static ColumnSpec, Column)>,
    /// The first failed check of each run that has one, by its row.
    refused: BTreeMap<u32, Error>,
}

impl Runs {
    /// The columns of `attempts` that come from a try's run.
    const COLUMNS: [&'static str; 9] = [
        "run_type",
        "run_state",
        "interval_start",
        "interval_end",
        "logical_date",
        "run_after",
        "conf",
        "clear_number",
        "dag_timezone",
    ];

    async fn read(
        transaction: &mut ReadTransaction<'_>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Runs> {
        let database = transaction.database;
        let specs: Vec<&'static ColumnSpec> = ATTEMPTS
            .iter()
            .filter(|spec| Runs::COLUMNS.contains(&spec.name))
            .collect();
        let mut builders = builders(&specs);
        // The keys after the columns and `conf_pickle`.
        let mut names = names(&specs);
        let key_columns = [names.len(), names.len() + 1];
        names.extend(["dag_id", "run_id"]);
        let mut dag_ids = StringChunkedBuilder::new("dag_id".into(), 0);
        let mut run_ids = StringChunkedBuilder::new("run_id".into(), 0);
        let mut runs = 0u32;
        let mut refused = BTreeMap::new();
        let source = format!("{}, dag_run", database.shown);
        transaction
            .for_each_row("the DAG runs", sql, params, &names, |number, row| {
                let at = cell_at(&source, number);
                let Some((dag_id, run_id)) = run_key(row, key_columns, &at)? else {
                    return Ok(());
                };
                dag_ids.append_value(&dag_id);
                run_ids.append_value(&run_id);
                for (column, (spec, builder)) in specs.iter().zip(builders.iter_mut()).enumerate() {
                    if let Err(err) = push_cell(row, column, specs.len(), spec, builder, &at) {
                        refused.entry(runs).or_insert(err);
                        builder.push_null();
                    }
                }
                runs += 1;
                Ok(())
            })
            .await?;
        let keys = RunKeys {
            source,
            dag_ids: dag_ids.finish(),
            run_ids: run_ids.finish(),
        };
        Ok(Runs {
            keys,
            columns: columns_of(specs, builders),
            refused,
        })
    }

    /// The tries `sql` (tries.sql) reads, each joined to its run; `counted` is told the number
    /// of each try read. A try whose run has no row here fails the read naming the try; one
    /// whose run failed a check fails it with that run's error.
    async fn join(
        self,
        transaction: &mut ReadTransaction<'_>,
        sql: &str,
        params: &[Param<'_>],
        mut counted: impl FnMut(usize),
    ) -> Result<DataFrame> {
        let database = transaction.database;
        let Runs {
            keys,
            columns,
            mut refused,
        } = self;
        let index = keys.index()?;
        let specs: Vec<&ColumnSpec> = ATTEMPTS
            .iter()
            .filter(|spec| !Runs::COLUMNS.contains(&spec.name))
            .collect();
        let mut builders = builders(&specs);
        let column = |name: &str| place(&specs, name);
        let key_columns = ["dag_id", "run_id"].map(column);
        let try_columns = ["task_id", "map_index", "try_number"].map(column);
        let named = TryNamed::at(column);
        // `latest` after the columns and `conf_pickle`.
        let mut names = names(&specs);
        let latest_column = names.len();
        names.push("latest");
        let mut history = TriesInHistory::default();
        // The latest rows left out so far: the rows are numbered as the tries read.
        let mut left_out = 0;
        // The run of each try kept: its code in `index`, which is its row of `columns`.
        let mut their_runs: Vec<IdxSize> = Vec::new();
        let mut guess = None;
        transaction
            .for_each_row("the tries", sql, params, &names, |number, row| {
                let number = number - left_out;
                let at = cell_at(&database.shown, number);
                let latest = row.int(latest_column) == Ok(Some(1));
                if !named.ran(row, &at)? {
                    left_out += 1;
                    return Ok(());
                }
                let Some((dag_id, run_id)) = run_key(row, key_columns, &at)? else {
                    return Err(named.without_run(row, &at));
                };
                let Some(run) = index.find((&dag_id, &run_id), guess) else {
                    return Err(named.without_run(row, &at));
                };
                guess = Some(run);
                if latest {
                    if history.holds(run, row, try_columns) {
                        left_out += 1;
                        return Ok(());
                    }
                } else if history.after_latest {
                    return Err(Error::input(
                        Location::source(&database.shown),
                        "SQLite gave a try of task_instance_history after task_instance rows; \
                         onceonly reads the history first, to leave out the tries both tables \
                         hold",
                    ));
                }
                counted(number);
                if let Some(err) = refused.remove(&run) {
                    return Err(err);
                }
                push_row(row, &specs, &mut builders, &at)?;
                their_runs.push(run as IdxSize);
                if latest {
                    history.after_latest = true;
                } else {
                    history.add(run, row, try_columns);
                }
                Ok(())
            })
            .await?;
        let their_runs = IdxCa::from_vec(PlSmallStr::EMPTY, their_runs);
        let mut joined = columns_of(specs, builders);
        for (spec, column) in columns {
            let column = column
                .take(&their_runs)
                .engine("joining the tries to their runs")?;
            joined.push((spec, column));
        }
        in_attempts_order(joined)
    }
}

/// The columns of `try_bounds.sql` and `try_bounds_of.sql`.
const BOUNDS: [&str; 3] = ["first_start", "last_start", "last_end"];

/// A row of [`BOUNDS`], each a time; `number` names the row in `shown` for an error.
fn bound_times(row: &Cells<'_>, shown: &str, number: usize) -> Result<[Option<i64>; 3]> {
    let mut times = [None; 3];
    for (column, time) in times.iter_mut().enumerate() {
        *time = row.time(column).map_err(|message| {
            Error::input(
                Location::source(shown).row(number).column(BOUNDS[column]),
                message,
            )
        })?;
    }
    Ok(times)
}

impl TryBounds {
    /// The bounds of rows of [`BOUNDS`]: the earliest first start, the latest of the last
    /// starts and ends.
    fn of_times(rows: impl IntoIterator<Item = [Option<i64>; 3]>) -> TryBounds {
        let (mut first_start, mut last_end) = (None::<i64>, None::<i64>);
        for [first, last_start, end] in rows {
            first_start = match (first_start, first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            last_end = last_end.max(last_start).max(end);
        }
        TryBounds {
            first_start,
            last_end,
        }
    }
}

/// [`AttemptsQuery::bounds`] on SQLite for an audit of every run: task_instance and
/// task_instance_history scanned at once, each on a read-only connection of its own
/// (`try_bounds_of.sql`). The bounds only start the listing early and are compared with the
/// tries once read (`sources::load`), so they need not come from the read transaction.
fn sqlite_bounds_apart(database: &Database) -> Result<TryBounds> {
    let scan = |table: &str| -> Result<[Option<i64>; 3]> {
        let sql = include_str!("../../queries/airflow/sqlite/try_bounds_of.sql")
            .replace("{table}", table);
        let mut read = SqliteRead::begin(database)?;
        let mut times = [None; 3];
        read.for_each_row("the tries' bounds", &sql, &[], &BOUNDS, |number, row| {
            times = bound_times(&Cells::Sqlite(row), &database.shown, number)?;
            Ok(())
        })?;
        read.finish()?;
        Ok(times)
    };
    let (latest, history) =
        crate::parallel::side_by_side(|| scan("task_instance"), || scan("task_instance_history"));
    Ok(TryBounds::of_times([latest?, history?]))
}

/// The tries read from task_instance_history (`tries.sql` gives them first), by their run's
/// code, task, map index and try number: a task_instance row whose try is among them is the
/// try being retried, read already, and is left out.
#[derive(Default)]
struct TriesInHistory {
    tasks: PlHashMap<String, u32>,
    tries: PlHashSet<(u32, u32, i64, i64)>,
    /// Whether a task_instance row has been read: no history row may follow.
    after_latest: bool,
}

impl TriesInHistory {
    /// The try of `row` (its cells at `columns`: task_id, map_index, try_number); None where
    /// one of them is NULL or unreadable, as such a row equals no other.
    fn cells<'r>(row: &'r Cells<'_>, columns: [usize; 3]) -> Option<(Cow<'r, str>, i64, i64)> {
        let [task, map, number] = columns;
        Some((
            row.text(task).ok()??,
            row.int(map).ok()??,
            row.int(number).ok()??,
        ))
    }

    /// Whether the try of `row` in `run` was read from the history.
    fn holds(&self, run: u32, row: &Cells<'_>, columns: [usize; 3]) -> bool {
        Self::cells(row, columns).is_some_and(|(task, map, number)| {
            self.tasks
                .get(task.as_ref())
                .is_some_and(|&task| self.tries.contains(&(run, task, map, number)))
        })
    }

    /// Notes the try of `row` in `run`, read from the history.
    fn add(&mut self, run: u32, row: &Cells<'_>, columns: [usize; 3]) {
        let Some((task, map, number)) = Self::cells(row, columns) else {
            return;
        };
        let code = match self.tasks.get(task.as_ref()) {
            Some(&code) => code,
            None => {
                let code = self.tasks.len() as u32;
                self.tasks.insert(task.into_owned(), code);
                code
            }
        };
        self.tries.insert((run, code, map, number));
    }
}

/// The runs' dag_id and run_id, a row per run, in `source` (the database's dag_run).
struct RunKeys {
    source: String,
    dag_ids: StringChunked,
    run_ids: StringChunked,
}

impl RunKeys {
    /// The runs by their dag_id and run_id: each run's code is its row. Two runs with one
    /// dag_id and run_id (which dag_run's unique key rules out) are refused, as a try would
    /// belong to both.
    fn index(&self) -> Result<CopiedDictionary<(&str, &str)>> {
        let count = self.dag_ids.len();
        let keys = (self.dag_ids.iter().zip(self.run_ids.iter()))
            .map(|(dag_id, run_id)| Some((dag_id?, run_id?)));
        let mut index = CopiedDictionary::with_capacity(count);
        let codes = index.encode_all(keys, count);
        // Codes are given in order: a run whose code is not its row has the key of an earlier one.
        let repeated = (codes.iter().enumerate()).position(|(row, code)| *code as usize != row);
        if let Some(row) = repeated {
            let (dag_id, run_id) = (self.dag_ids.get(row), self.run_ids.get(row));
            let (dag_id, run_id) = (dag_id.unwrap_or_default(), run_id.unwrap_or_default());
            return Err(Error::input(
                Location::source(&self.source),
                format!("two DAG runs have dag_id {dag_id:?} and run_id {run_id:?}"),
            ));
        }
        Ok(index)
    }
}

/// Whether `filter` keeps every run: no dag, since or until.
fn unfiltered(filter: &Filter) -> bool {
    filter.dag.is_none() && filter.since.is_none() && filter.until.is_none()
}

/// A query of `queries/airflow` as run for `filter`: without a dag, since or until, the lines
/// ending `-- onceonly: only when filtered` are left out.
fn as_filtered(sql: &str, filter: &Filter) -> String {
    let unfiltered = unfiltered(filter);
    sql.lines()
        .filter(|line| !(unfiltered && line.ends_with("-- onceonly: only when filtered")))
        .collect::<Vec<_>>()
        .join("\n")
}

fn mysql_refused(database: &Database) -> Error {
    Error::input(
        Location::source(&database.shown),
        "reading Airflow metadata from MySQL is not supported yet (SQLite and PostgreSQL are)",
    )
}

/// `alembic_version.version_num`; a database without that table is not Airflow's.
async fn schema_version(
    transaction: &mut ReadTransaction<'_>,
    columns: &BTreeSet<(String, String)>,
) -> Result<String> {
    let database = transaction.database;
    let not_airflow = |why: &str| {
        Error::input(
            Location::source(&database.shown),
            format!("not an Airflow metadata database: {why}"),
        )
    };
    if !columns.contains(&("alembic_version".to_string(), "version_num".to_string())) {
        return Err(not_airflow("it has no alembic_version table"));
    }
    let mut version = None;
    transaction
        .for_each_row(
            "alembic_version",
            "SELECT CAST(version_num AS TEXT) AS version_num FROM alembic_version",
            &[],
            &["version_num"],
            |number, row| {
                let text = row.text(0).map_err(|message| {
                    Error::input(
                        Location::source(&database.shown)
                            .row(number)
                            .column("alembic_version.version_num"),
                        message,
                    )
                })?;
                if version.is_none() {
                    version = text.map(Cow::into_owned);
                }
                Ok(())
            },
        )
        .await?;
    version.ok_or_else(|| {
        not_airflow(
            "alembic_version is empty: the database was never migrated (`airflow db migrate`)",
        )
    })
}

async fn columns(transaction: &mut ReadTransaction<'_>) -> Result<BTreeSet<(String, String)>> {
    let database = transaction.database;
    let sql = match database.dialect {
        Dialect::Sqlite => include_str!("../../queries/airflow/sqlite/columns.sql"),
        Dialect::Postgres => include_str!("../../queries/airflow/postgres/columns.sql"),
        Dialect::Mysql => return Err(mysql_refused(database)),
    };
    let mut columns = BTreeSet::new();
    transaction
        .for_each_row(
            "the tables' columns",
            sql,
            &[],
            &["table_name", "column_name"],
            |number, row| {
                let name = |column: usize| -> Result<String> {
                    row.text(column)
                        .map_err(|message| {
                            Error::input(Location::source(&database.shown).row(number), message)
                        })
                        .map(|text| text.unwrap_or_default().into_owned())
                };
                columns.insert((name(0)?, name(1)?));
                Ok(())
            },
        )
        .await?;
    Ok(columns)
}

/// The SQL of the latest try's last heartbeat (`attempts.heartbeat_at`) for the tries'
/// queries' `{heartbeat}`: Airflow 3 keeps it on the task_instance row (`last_heartbeat_at`),
/// Airflow 2 on the try's LocalTaskJob (`job.latest_heartbeat` by `task_instance.job_id`).
/// A schema without those columns (a database made by hand) gives NULL: its running tries
/// are in flight, never named probably dead.
fn heartbeat(major: u8, columns: &BTreeSet<(String, String)>, dialect: Dialect) -> &'static str {
    let has =
        |table: &str, column: &str| columns.contains(&(table.to_string(), column.to_string()));
    let null = match dialect {
        Dialect::Postgres => "NULL::timestamptz",
        _ => "NULL",
    };
    if major >= 3 {
        if has("task_instance", "last_heartbeat_at") {
            return "ti.last_heartbeat_at";
        }
    } else if has("task_instance", "job_id") && has("job", "id") && has("job", "latest_heartbeat") {
        return "(SELECT j.latest_heartbeat FROM job AS j WHERE j.id = ti.job_id)";
    }
    null
}

/// The Airflow major version of a schema: known revisions by name, others by their columns
/// (with a warning naming the revision).
fn major_version(
    version: &str,
    columns: &BTreeSet<(String, String)>,
    database: &Database,
) -> Result<(u8, Vec<String>)> {
    let has =
        |(table, column): &(&str, &str)| columns.contains(&(table.to_string(), column.to_string()));
    let mut warnings = Vec::new();
    let major = match KNOWN_VERSIONS
        .iter()
        .find(|(revision, _, _)| *revision == version)
    {
        Some((_, _, major)) => *major,
        None if REQUIRED_3.iter().all(has) => 3,
        None if REQUIRED_2.iter().all(has) => 2,
        None => 0,
    };
    if major != 0
        && !KNOWN_VERSIONS
            .iter()
            .any(|(revision, _, _)| *revision == version)
    {
        warnings.push(format!(
            "{}: schema revision {version} is not one onceonly was checked against ({}); its tables look like Airflow {major}.x and are read as such",
            database.shown,
            KNOWN_VERSIONS.iter().map(|(revision, airflow, _)| format!("{revision} = {airflow}")).collect::<Vec<_>>().join(", ")
        ));
    }
    let specific: &[(&str, &str)] = if major == 2 { &REQUIRED_2 } else { &REQUIRED_3 };
    let missing: Vec<String> = REQUIRED_COMMON
        .iter()
        .chain(specific)
        .filter(|needed| !has(needed))
        .map(|(table, column)| format!("{table}.{column}"))
        .collect();
    if major == 0 || !missing.is_empty() {
        return Err(Error::input(
            Location::source(&database.shown),
            format!(
                "Airflow schema revision {version} lacks what onceonly reads: {} (supported: Airflow 2.10 and 3.x)",
                if missing.is_empty() {
                    "dag_run.execution_date or dag_run.logical_date".to_string()
                } else {
                    missing.join(", ")
                }
            ),
        ));
    }
    Ok((major, warnings))
}

/// A builder for each of `specs`.
fn builders(specs: &[&ColumnSpec]) -> Vec<Values> {
    specs.iter().map(|spec| Values::new(spec.kind)).collect()
}

/// The names a statement's rows are read by: `specs`' columns, then `conf_pickle` (2.x).
fn names<'s>(specs: &[&'s ColumnSpec]) -> Vec<&'s str> {
    specs
        .iter()
        .map(|spec| spec.name)
        .chain(["conf_pickle"])
        .collect()
}

/// The `attempts` table from its columns, each with its spec, in `ATTEMPTS` order.
fn in_attempts_order(mut columns: Vec<(&ColumnSpec, Column)>) -> Result<DataFrame> {
    let ordered = ATTEMPTS
        .iter()
        .map(|spec| {
            let at = columns
                .iter()
                .position(|(has, _)| has.name == spec.name)
                .expect("every column of attempts is read");
            columns.swap_remove(at).1
        })
        .collect();
    DataFrame::new_infer_height(ordered).engine("assembling attempts")
}

/// The columns `builders` built, each with its spec.
fn columns_of(specs: Vec<&ColumnSpec>, builders: Vec<Values>) -> Vec<(&ColumnSpec, Column)> {
    specs
        .into_iter()
        .zip(builders)
        .map(|(spec, values)| (spec, values.into_column(spec.name)))
        .collect()
}

/// Names a cell of the statement's row `number` in `source` for an error, by its column.
fn cell_at(source: &str, number: usize) -> impl Fn(&str) -> Location + '_ {
    move |column| Location::source(source).row(number).column(column)
}

/// The place of the column `name` among `specs`, the columns a statement's rows are read by.
fn place(specs: &[&ColumnSpec], name: &str) -> usize {
    specs
        .iter()
        .position(|spec| spec.name == name)
        .expect("the statement reads a try's identifying columns")
}

/// Where a try's identifying cells are in a row, to judge its number and name it in errors.
struct TryNamed {
    /// dag_id, task_id, map_index, run_id, try_number.
    columns: [usize; 5],
}

impl TryNamed {
    fn at(column: impl Fn(&str) -> usize) -> TryNamed {
        TryNamed {
            columns: ["dag_id", "task_id", "map_index", "run_id", "try_number"].map(column),
        }
    }

    /// Whether the row is a try that ran: Airflow numbers tries from 1, and an instance that
    /// never ran has try 0 (left out); a number below 0, or not a number, is bad input. A NULL
    /// number is left to the column's own check.
    fn ran(&self, row: &Cells<'_>, at: &dyn Fn(&str) -> Location) -> Result<bool> {
        match row.int(self.columns[4]) {
            Ok(Some(0)) => Ok(false),
            Ok(Some(number)) if number < 0 => Err(Error::input(
                at("try_number"),
                format!(
                    "{}: try_number {number} is below 0 (Airflow numbers tries from 1; 0 is an instance that never ran)",
                    self.describe(row)
                ),
            )),
            Ok(_) => Ok(true),
            Err(message) => Err(Error::input(
                at("try_number"),
                format!("{}: {message}", self.describe(row)),
            )),
        }
    }

    /// The error for a try whose run is not in `dag_run`: it has no interval to be audited in,
    /// and leaving it out would hide a try.
    fn without_run(&self, row: &Cells<'_>, at: &dyn Fn(&str) -> Location) -> Error {
        Error::input(
            at("run_id"),
            format!(
                "{} has no run: dag_run has no row for its dag_id and run_id (a try without its run has no interval to audit; the metadata database is inconsistent)",
                self.describe(row)
            ),
        )
    }

    /// `try N of dag.task[map] in run `R``, from whatever of it the row's cells give.
    fn describe(&self, row: &Cells<'_>) -> String {
        // PostgreSQL gives integers only as integers, SQLite either way.
        let text = |column: usize| match (row.text(column), row.int(column)) {
            (Ok(Some(text)), _) => text.into_owned(),
            (_, Ok(Some(number))) => number.to_string(),
            (Ok(None), _) | (_, Ok(None)) => "NULL".to_string(),
            (Err(_), Err(_)) => "?".to_string(),
        };
        let [dag, task, map, run, number] = self.columns;
        format!(
            "try {} of {}.{}[{}] in run `{}`",
            text(number),
            text(dag),
            text(task),
            text(map),
            text(run)
        )
    }
}

/// A row's dag_id and run_id (the cells at `columns`), None where either is NULL: NULL never
/// equals anything, so such a row has no run, or no try, to be joined to.
fn run_key<'r>(
    row: &'r Cells<'_>,
    columns: [usize; 2],
    at: &dyn Fn(&str) -> Location,
) -> Result<Option<(Cow<'r, str>, Cow<'r, str>)>> {
    let [dag_id, run_id] =
        [(columns[0], "dag_id"), (columns[1], "run_id")].map(|(column, name)| {
            row.text(column)
                .map_err(|message| Error::input(at(name), message))
        });
    Ok(dag_id?.zip(run_id?))
}

/// Checks a row's cells of `specs` (by their place there; `conf_pickle` after them) and
/// appends them; `at` names a cell's column for the error.
fn push_row(
    row: &Cells<'_>,
    specs: &[&ColumnSpec],
    builders: &mut [Values],
    at: &dyn Fn(&str) -> Location,
) -> Result<()> {
    for (column, (spec, builder)) in specs.iter().zip(builders.iter_mut()).enumerate() {
        push_cell(row, column, specs.len(), spec, builder, at)?;
    }
    Ok(())
}

/// Checks the cell at `column` against `spec` and appends it; `conf_pickle` is at `pickle`.
fn push_cell(
    row: &Cells<'_>,
    column: usize,
    pickle: usize,
    spec: &ColumnSpec,
    builder: &mut Values,
    at: &dyn Fn(&str) -> Location,
) -> Result<()> {
    let required = |present: bool| {
        if present || spec.nullable {
            Ok(())
        } else {
            Err(Error::input(
                at(spec.name),
                format!("`{}` is NULL", spec.name),
            ))
        }
    };
    let failed = |message: String| Error::input(at(spec.name), message);
    match builder {
        Values::Text(values) if spec.name == "conf" => {
            values.append_option(conf(row, column, pickle, at)?);
        }
        Values::Text(values) => {
            let value = row.text(column).map_err(failed)?;
            required(value.is_some())?;
            values.append_option(value);
        }
        Values::Int(values) => {
            let value = row.int(column).map_err(failed)?;
            required(value.is_some())?;
            values.push(value);
        }
        Values::Time(values) => {
            let value = row.time(column).map_err(failed)?;
            required(value.is_some())?;
            values.push(value);
        }
    }
    Ok(())
}

/// The run's conf as JSON text: 3.x stores JSON, 2.x a pickle that is decoded here.
fn conf(
    row: &Cells<'_>,
    column: usize,
    pickle: usize,
    at: &dyn Fn(&str) -> Location,
) -> Result<Option<String>> {
    let failed = |message: String| Error::input(at("conf"), message);
    if row.has(pickle) {
        let hex = row.text(pickle).map_err(failed)?;
        let Some(hex) = hex.filter(|hex| !hex.is_empty()) else {
            return Ok(None);
        };
        let bytes = unhex(&hex)
            .ok_or_else(|| Error::input(at("conf"), "the pickled conf is not valid hex"))?;
        let value = pickle::to_json(&bytes).map_err(|message| {
            Error::input(
                at("conf"),
                format!("cannot decode the pickled conf: {message}"),
            )
        })?;
        return Ok(Some(value.to_string()));
    }
    Ok(row.text(column).map_err(failed)?.map(Cow::into_owned))
}

/// The bytes of a query's `hex()` (SQLite) or `encode(…, 'hex')` (PostgreSQL) text.
fn unhex(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect()
}

/// The most a compressed serialized DAG may inflate to: Airflow's largest DAGs serialize to a
/// few megabytes; a row past this is refused rather than inflated without bound.
const SERIALIZED_DAG_LIMIT: u64 = 256 << 20;

/// The zone of each audited DAG whose newest serialized version is compressed
/// (`compressed_zones.sql`): `dag.timezone` of the decompressed JSON, an IANA name or an offset
/// in seconds, as text, as the uncompressed rows give it.
async fn compressed_zones(
    transaction: &mut ReadTransaction<'_>,
    dag_like: &str,
) -> Result<BTreeMap<String, Option<String>>> {
    let database = transaction.database;
    let sql = match database.dialect {
        Dialect::Sqlite => include_str!("../../queries/airflow/sqlite/compressed_zones.sql"),
        Dialect::Postgres => include_str!("../../queries/airflow/postgres/compressed_zones.sql"),
        Dialect::Mysql => return Err(mysql_refused(database)),
    };
    let mut zones = BTreeMap::new();
    transaction
        .for_each_row(
            "the compressed serialized DAGs",
            sql,
            &[Param::Text(dag_like)],
            &["dag_id", "compressed"],
            |number, row| {
                let at = |column: &str| {
                    Location::source(format!("{} table serialized_dag", database.shown))
                        .row(number)
                        .column(column)
                };
                let text = |column: usize, name: &str| {
                    row.text(column)
                        .map_err(|message| Error::input(at(name), message))
                };
                let dag = text(0, "dag_id")?.map(Cow::into_owned).unwrap_or_default();
                let hex = text(1, "data_compressed")?.unwrap_or_default();
                let zone = serialized_zone(&hex).map_err(|message| {
                    Error::input(at("data_compressed"), format!("DAG `{dag}`: {message}"))
                })?;
                zones.insert(dag, zone);
                Ok(())
            },
        )
        .await?;
    Ok(zones)
}

/// `dag.timezone` of a serialized DAG compressed as Airflow compresses it (zlib of the JSON),
/// given as hex.
fn serialized_zone(hex: &str) -> std::result::Result<Option<String>, String> {
    use std::io::Read;
    let bytes = unhex(hex).ok_or("the compressed serialized DAG is not valid hex")?;
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(bytes.as_slice())
        .take(SERIALIZED_DAG_LIMIT + 1)
        .read_to_end(&mut json)
        .map_err(|err| format!("cannot decompress the serialized DAG (zlib): {err}"))?;
    if json.len() as u64 > SERIALIZED_DAG_LIMIT {
        return Err(format!(
            "the serialized DAG inflates past {} MiB",
            SERIALIZED_DAG_LIMIT >> 20
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(&json)
        .map_err(|err| format!("the decompressed serialized DAG is not JSON ({err})"))?;
    match value.pointer("/dag/timezone") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(zone)) => Ok(Some(zone.clone())),
        Some(serde_json::Value::Number(offset)) => Ok(Some(offset.to_string())),
        Some(other) => Err(format!(
            "dag.timezone is {other}, neither a zone name nor an offset in seconds"
        )),
    }
}

/// `attempts` with the zones of DAGs serialized compressed filled in where `dag_timezone` is
/// NULL.
fn with_zones(attempts: DataFrame, zones: &BTreeMap<String, Option<String>>) -> Result<DataFrame> {
    if zones.is_empty() {
        return Ok(attempts);
    }
    let dags = crate::cells::text_column(&attempts, "dag_id")?;
    let current = crate::cells::text_column(&attempts, "dag_timezone")?;
    let filled: StringChunked = dags
        .iter()
        .zip(current.iter())
        .map(|(dag, zone)| zone.or_else(|| dag.and_then(|dag| zones.get(dag)?.as_deref())))
        .collect();
    let mut attempts = attempts;
    attempts
        .with_column(filled.with_name("dag_timezone".into()).into_column())
        .engine("the compressed DAGs' zones")?;
    Ok(attempts)
}

/// A glob as a SQL LIKE pattern with `\` as the escape character.
pub fn like_pattern(glob: &str) -> String {
    let mut out = String::with_capacity(glob.len());
    for ch in glob.chars() {
        match ch {
            '*' => out.push('%'),
            '?' => out.push('_'),
            '%' | '_' | '\\' => {
                out.push('\\');
                out.push(ch);
            }
            ch => out.push(ch),
        }
    }
    out
}

/// A planned Airflow 3 backfill: its DAG, its logical-date range (both ends included, as
/// Airflow creates them) and what it re-runs (`none`, `failed`, `completed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backfill {
    pub dag_id: String,
    pub from: i64,
    pub to: i64,
    pub reprocess_behavior: String,
    /// What Airflow decided for each logical date when it planned the backfill
    /// (`backfill_dag_run`): None where it created or cleared the date's run, which then
    /// re-runs every task of it, whatever state each ended in; the reason it gave where it
    /// leaves the date alone (`already exists`, `in flight`).
    pub left_alone: BTreeMap<i64, Option<String>>,
}

/// A query of a planned backfill, in the database's dialect: `(sqlite, postgres)`.
fn backfill_query(
    database: &Database,
    (sqlite, postgres): (&'static str, &'static str),
) -> Result<&'static str> {
    match database.dialect {
        Dialect::Sqlite => Ok(sqlite),
        Dialect::Postgres => Ok(postgres),
        Dialect::Mysql => Err(Error::input(
            Location::source(&database.shown),
            "reading backfills from MySQL is not supported yet",
        )),
    }
}

pub async fn read_backfill(database: &Database, id: i64) -> Result<Backfill> {
    let sql = backfill_query(
        database,
        (
            include_str!("../../queries/airflow/3/sqlite/backfill.sql"),
            include_str!("../../queries/airflow/3/postgres/backfill.sql"),
        ),
    )?;
    let names = ["dag_id", "from_date", "to_date", "reprocess_behavior"];
    let mut cells: Option<Vec<Option<String>>> = None;
    let mut transaction = ReadTransaction::begin(database).await?;
    transaction
        .for_each_row(
            "the backfill table (Airflow 2 has no planned backfills)",
            sql,
            &[Param::Int(id)],
            &names,
            |_, row| {
                let texts = (0..names.len())
                    .map(|column| {
                        row.text(column)
                            .map(|text| text.map(Cow::into_owned))
                            .map_err(|message| {
                                Error::input(
                                    Location::source(&database.shown).column(names[column]),
                                    message,
                                )
                            })
                    })
                    .collect::<Result<Vec<_>>>()?;
                cells.get_or_insert(texts);
                Ok(())
            },
        )
        .await?;
    // What Airflow decided for each date is read in the same transaction as the backfill, so
    // both are of one instant while the scheduler works through it.
    let left_alone = read_left_alone(&mut transaction, id).await?;
    transaction.finish().await?;
    let cells = cells.ok_or_else(|| {
        Error::input(
            Location::source(&database.shown),
            format!("there is no backfill {id}"),
        )
    })?;
    let text = |column: usize| -> Result<String> {
        cells[column].clone().ok_or_else(|| {
            Error::input(
                Location::source(&database.shown).column(names[column]),
                format!("backfill {id} has no {}", names[column]),
            )
        })
    };
    let time = |column: usize| -> Result<i64> {
        let value = text(column)?;
        timestamp::parse(&value).ok_or_else(|| {
            Error::input(
                Location::source(&database.shown).column(names[column]),
                format!("{value:?} is not a timestamp"),
            )
        })
    };
    Ok(Backfill {
        dag_id: text(0)?,
        from: time(1)?,
        to: time(2)?,
        reprocess_behavior: text(3)?,
        left_alone,
    })
}

/// What the backfill decided for each logical date ([`Backfill::left_alone`]).
async fn read_left_alone(
    transaction: &mut ReadTransaction<'_>,
    id: i64,
) -> Result<BTreeMap<i64, Option<String>>> {
    let database = transaction.database;
    let sql = backfill_query(
        database,
        (
            include_str!("../../queries/airflow/3/sqlite/backfill_runs.sql"),
            include_str!("../../queries/airflow/3/postgres/backfill_runs.sql"),
        ),
    )?;
    let names = ["logical_date", "exception_reason"];
    let mut decided = BTreeMap::new();
    transaction
        .for_each_row(
            "the backfill's runs",
            sql,
            &[Param::Int(id)],
            &names,
            |number, row| {
                let at = |column: usize| {
                    Location::source(&database.shown)
                        .row(number)
                        .column(format!("backfill_dag_run.{}", names[column]))
                };
                let logical_date = row
                    .time(0)
                    .map_err(|message| Error::input(at(0), message))?
                    .ok_or_else(|| Error::input(at(0), "the logical date is empty"))?;
                let reason = row
                    .text(1)
                    .map_err(|message| Error::input(at(1), message))?
                    .map(Cow::into_owned);
                decided.insert(logical_date, reason);
                Ok(())
            },
        )
        .await?;
    Ok(decided)
}

/// Every DAG the metadata database knows and the tasks of each that have a task instance
/// (`known_tasks.sql`), as `(dag_id, task_id)` pairs, a DAG's own row with no task; read in
/// one read transaction of its own.
pub async fn read_known_tasks(database: &Database) -> Result<Vec<(String, Option<String>)>> {
    if database.dialect == Dialect::Mysql {
        return Err(mysql_refused(database));
    }
    let names = ["dag_id", "task_id"];
    let mut pairs = Vec::new();
    let mut transaction = ReadTransaction::begin(database).await?;
    transaction
        .for_each_row(
            "the DAGs and tasks the metadata knows",
            include_str!("../../queries/airflow/known_tasks.sql"),
            &[],
            &names,
            |number, row| {
                let text = |column: usize| {
                    row.text(column)
                        .map(|text| text.map(Cow::into_owned))
                        .map_err(|message| {
                            Error::input(
                                Location::source(&database.shown)
                                    .row(number)
                                    .column(names[column]),
                                message,
                            )
                        })
                };
                if let Some(dag) = text(0)? {
                    pairs.push((dag, text(1)?));
                }
                Ok(())
            },
        )
        .await?;
    transaction.finish().await?;
    Ok(pairs)
}
