//! The `attempts` table from Airflow's metadata database (SQLite, PostgreSQL; MySQL is refused).
//!
//! The schema version is read from `alembic_version` and the columns the query needs are
//! checked before it runs, so a database of the wrong kind or version fails with a message
//! naming what was found and what is missing. Rows are streamed into column builders. All of
//! it is read in one read-only transaction ([`ReadTransaction`]): Airflow may be writing, and
//! the revision, the columns and every try come from the database as it stood at one instant.

use std::borrow::Cow;
use std::collections::BTreeSet;

use polars::prelude::*;

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{ATTEMPTS, ProviderWindow};
use crate::sources::database::{Database, Dialect, Param};
use crate::sources::pickle;
use crate::sources::read_transaction::{Cells, ReadTransaction};
use crate::sources::snapshot::Values;
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

const REQUIRED_COMMON: [(&str, &str); 23] = [
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
    sql: String,
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
        let sql = match (database.dialect, major) {
            (Dialect::Sqlite, 2) => include_str!("../../queries/airflow/2/sqlite/attempts.sql"),
            (Dialect::Sqlite, _) => include_str!("../../queries/airflow/3/sqlite/attempts.sql"),
            (Dialect::Postgres, 2) => {
                include_str!("../../queries/airflow/2/postgres/attempts.sql")
            }
            (Dialect::Postgres, _) => {
                include_str!("../../queries/airflow/3/postgres/attempts.sql")
            }
            (Dialect::Mysql, _) => return Err(mysql_refused(database)),
        };
        let sql = as_filtered(sql, filter);
        Ok(AttemptsQuery {
            sql,
            version,
            warnings,
            filter,
        })
    }

    /// The bounds of the tries [`read`](Self::read) returns, as the database finds them in a
    /// quick scan of the try tables (`try_bounds.sql`). They are compared with the tries once
    /// read (`sources::load`): where the two differ, the tries' own bounds are used.
    pub async fn bounds(&self, transaction: &mut ReadTransaction<'_>) -> Result<TryBounds> {
        let database = transaction.database;
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
        let names = ["first_start", "last_start", "last_end"];
        let mut times = [None; 3];
        transaction
            .for_each_row("the tries' bounds", &sql, &params, &names, |number, row| {
                for (column, time) in times.iter_mut().enumerate() {
                    *time = row.time(column).map_err(|message| {
                        Error::input(
                            Location::source(&database.shown)
                                .row(number)
                                .column(names[column]),
                            message,
                        )
                    })?;
                }
                Ok(())
            })
            .await?;
        let [first_start, last_start, last_end] = times;
        Ok(TryBounds {
            first_start,
            last_end: last_end.max(last_start),
        })
    }

    /// Reads the tries.
    pub async fn read(self, transaction: &mut ReadTransaction<'_>) -> Result<AirflowRead> {
        let attempts = self.stream(transaction).await?;
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
        let mut builders: Vec<Values> =
            ATTEMPTS.iter().map(|spec| Values::new(spec.kind)).collect();
        let names: Vec<&str> = ATTEMPTS
            .iter()
            .map(|spec| spec.name)
            .chain(["conf_pickle"])
            .collect();
        let params = [
            Param::Text(&since),
            Param::Text(&until),
            Param::Text(&dag_like),
        ];
        let progress = crate::progress::Line::open("attempts", &database.shown);
        let mut read = 0;
        transaction
            .for_each_row("the tries", &self.sql, &params, &names, |number, row| {
                read = number;
                progress.row(number);
                push_row(row, number, &mut builders, database)
            })
            .await?;
        progress.rows(read as u64);
        progress.done();
        assemble(builders)
    }
}

/// A query of `queries/airflow` as run for `filter`: without a dag, since or until, the lines
/// ending `-- onceonly: only when filtered` are left out.
fn as_filtered(sql: &str, filter: &Filter) -> String {
    let unfiltered = filter.dag.is_none() && filter.since.is_none() && filter.until.is_none();
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

fn assemble(builders: Vec<Values>) -> Result<DataFrame> {
    let columns = ATTEMPTS
        .iter()
        .zip(builders)
        .map(|(spec, values)| values.into_column(spec.name))
        .collect();
    DataFrame::new_infer_height(columns).engine("assembling attempts")
}

/// Where `conf_pickle` (2.x) sits after the `ATTEMPTS` columns.
const CONF_PICKLE: usize = ATTEMPTS.len();

fn push_row(
    row: &Cells<'_>,
    number: usize,
    builders: &mut [Values],
    database: &Database,
) -> Result<()> {
    let at = |column: &str| Location::source(&database.shown).row(number).column(column);
    for (column, (spec, builder)) in ATTEMPTS.iter().zip(builders.iter_mut()).enumerate() {
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
                values.append_option(conf(row, column, &at)?);
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
    }
    Ok(())
}

/// The run's conf as JSON text: 3.x stores JSON, 2.x a pickle that is decoded here.
fn conf(row: &Cells<'_>, column: usize, at: &dyn Fn(&str) -> Location) -> Result<Option<String>> {
    let failed = |message: String| Error::input(at("conf"), message);
    if row.has(CONF_PICKLE) {
        let hex = row.text(CONF_PICKLE).map_err(failed)?;
        let Some(hex) = hex.filter(|hex| !hex.is_empty()) else {
            return Ok(None);
        };
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
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
}

pub async fn read_backfill(database: &Database, id: i64) -> Result<Backfill> {
    let sql = match database.dialect {
        Dialect::Sqlite => include_str!("../../queries/airflow/3/sqlite/backfill.sql"),
        Dialect::Postgres => include_str!("../../queries/airflow/3/postgres/backfill.sql"),
        Dialect::Mysql => {
            return Err(Error::input(
                Location::source(&database.shown),
                "reading backfills from MySQL is not supported yet",
            ));
        }
    };
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
    })
}
