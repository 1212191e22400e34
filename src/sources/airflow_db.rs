//! The `attempts` table from Airflow's metadata database (SQLite, PostgreSQL, MySQL) via sqlx.
//!
//! The schema version is read from `alembic_version` and the columns the query needs are
//! checked before it runs, so a database of the wrong kind or version fails with a message
//! naming what was found and what is missing. Rows are streamed into column builders; the
//! connection is read-only.

use std::borrow::Cow;
use std::collections::BTreeSet;

use futures_util::TryStreamExt;
use polars::prelude::*;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AssertSqlSafe, Connection, Row};

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::ATTEMPTS;
use crate::sources::database::{Database, Dialect};
use crate::sources::pickle;
use crate::sources::snapshot::Values;
use crate::sources::sqlite_rows::{self, SqliteCells};
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

pub async fn read(database: &Database, filter: &Filter) -> Result<AirflowRead> {
    let mut connection = database.connect().await?;
    let version = schema_version(&mut connection, database).await?;
    let columns = columns(&mut connection, database).await?;
    let (major, warnings) = major_version(&version, &columns, database)?;
    let sql = match (database.dialect, major) {
        (Dialect::Sqlite, 2) => include_str!("../../queries/airflow/2/sqlite/attempts.sql"),
        (Dialect::Sqlite, _) => include_str!("../../queries/airflow/3/sqlite/attempts.sql"),
        (Dialect::Postgres, 2) => include_str!("../../queries/airflow/2/postgres/attempts.sql"),
        (Dialect::Postgres, _) => include_str!("../../queries/airflow/3/postgres/attempts.sql"),
        (Dialect::Mysql, _) => {
            return Err(Error::input(
                Location::source(&database.shown),
                "reading Airflow metadata from MySQL is not supported yet (SQLite and PostgreSQL are)",
            ));
        }
    };
    let unfiltered = filter.dag.is_none() && filter.since.is_none() && filter.until.is_none();
    let sql: String = sql
        .lines()
        .filter(|line| !(unfiltered && line.ends_with("-- onceonly: only when filtered")))
        .collect::<Vec<_>>()
        .join("\n");
    let attempts = stream_attempts(&mut connection, database, &sql, filter).await?;
    let _ = connection.close().await;
    Ok(AirflowRead {
        attempts,
        version,
        warnings,
    })
}

async fn schema_version(connection: &mut AnyConnection, database: &Database) -> Result<String> {
    let row = sqlx::query("SELECT CAST(version_num AS TEXT) AS version_num FROM alembic_version")
        .fetch_optional(&mut *connection)
        .await
        .map_err(|err| {
            Error::input(
                Location::source(&database.shown),
                format!(
                    "not an Airflow metadata database: cannot read alembic_version ({})",
                    database.scrub(&err.to_string())
                ),
            )
        })?;
    let row = row.ok_or_else(|| {
        Error::input(
            Location::source(&database.shown),
            "alembic_version is empty: the database was never migrated (`airflow db migrate`)",
        )
    })?;
    row.try_get::<String, _>("version_num")
        .map_err(|err| database.error(&err))
}

async fn columns(
    connection: &mut AnyConnection,
    database: &Database,
) -> Result<BTreeSet<(String, String)>> {
    let sql = match database.dialect {
        Dialect::Sqlite => include_str!("../../queries/airflow/sqlite/columns.sql"),
        Dialect::Postgres => include_str!("../../queries/airflow/postgres/columns.sql"),
        Dialect::Mysql => include_str!("../../queries/airflow/mysql/columns.sql"),
    };
    let rows = sqlx::query(sql)
        .fetch_all(&mut *connection)
        .await
        .map_err(|err| database.error(&err))?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get::<String, _>("table_name")
                    .map_err(|err| database.error(&err))?,
                row.try_get::<String, _>("column_name")
                    .map_err(|err| database.error(&err))?,
            ))
        })
        .collect()
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

async fn stream_attempts(
    connection: &mut AnyConnection,
    database: &Database,
    sql: &str,
    filter: &Filter,
) -> Result<DataFrame> {
    let (since, until) = database.dialect.window_bounds(filter.since, filter.until);
    let dag_like = filter
        .dag
        .as_deref()
        .map(like_pattern)
        .unwrap_or_else(|| "%".to_string());
    let mut builders: Vec<Values> = ATTEMPTS.iter().map(|spec| Values::new(spec.kind)).collect();
    if database.dialect == Dialect::Sqlite {
        let names: Vec<&str> = ATTEMPTS
            .iter()
            .map(|spec| spec.name)
            .chain(["conf_pickle"])
            .collect();
        let params: [&dyn rusqlite::ToSql; 3] = [&since, &until, &dag_like];
        sqlite_rows::for_each_row(database, sql, &params, &names, |number, row| {
            push_row(row, number, &mut builders, database)
        })?;
        return assemble(builders);
    }
    let mut rows = sqlx::query(AssertSqlSafe(sql))
        .bind(since)
        .bind(until)
        .bind(dag_like)
        .fetch(&mut *connection);
    let mut number = 0usize;
    while let Some(row) = rows.try_next().await.map_err(|err| database.error(&err))? {
        number += 1;
        push_row(&row, number, &mut builders, database)?;
    }
    assemble(builders)
}

fn assemble(builders: Vec<Values>) -> Result<DataFrame> {
    let columns = ATTEMPTS
        .iter()
        .zip(builders)
        .map(|(spec, values)| values.into_column(spec.name))
        .collect();
    DataFrame::new_infer_height(columns).engine("assembling attempts")
}

/// A row's cells by position in `ATTEMPTS` (then `conf_pickle`) and by name: sqlx rows are
/// read by name, SQLite rows by position.
trait Cells {
    fn text(&self, column: usize, name: &str) -> std::result::Result<Option<Cow<'_, str>>, String>;
    fn int(&self, column: usize, name: &str) -> std::result::Result<Option<i64>, String>;
    fn has(&self, column: usize, name: &str) -> bool;
}

impl Cells for AnyRow {
    fn text(&self, _: usize, name: &str) -> std::result::Result<Option<Cow<'_, str>>, String> {
        let value: Option<String> = self.try_get(name).map_err(|err| err.to_string())?;
        Ok(value.map(Cow::Owned))
    }

    fn int(&self, _: usize, name: &str) -> std::result::Result<Option<i64>, String> {
        self.try_get(name).map_err(|err| err.to_string())
    }

    fn has(&self, _: usize, name: &str) -> bool {
        self.try_column(name).is_ok()
    }
}

impl Cells for SqliteCells<'_, '_> {
    fn text(&self, column: usize, _: &str) -> std::result::Result<Option<Cow<'_, str>>, String> {
        SqliteCells::text(self, column)
    }

    fn int(&self, column: usize, _: &str) -> std::result::Result<Option<i64>, String> {
        SqliteCells::int(self, column)
    }

    fn has(&self, column: usize, _: &str) -> bool {
        SqliteCells::has(self, column)
    }
}

/// Where `conf_pickle` (2.x) sits after the `ATTEMPTS` columns.
const CONF_PICKLE: usize = ATTEMPTS.len();

fn push_row(
    row: &impl Cells,
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
                let value = row.text(column, spec.name).map_err(failed)?;
                required(value.is_some())?;
                values.append_option(value);
            }
            Values::Int(values) => {
                let value = row.int(column, spec.name).map_err(failed)?;
                required(value.is_some())?;
                values.push(value);
            }
            Values::Time(values) => {
                let text = row.text(column, spec.name).map_err(failed)?;
                let value = match text.as_deref() {
                    None | Some("") => None,
                    Some(text) => Some(timestamp::parse(text).ok_or_else(|| {
                        Error::input(at(spec.name), format!("{text:?} is not a timestamp"))
                    })?),
                };
                required(value.is_some())?;
                values.push(value);
            }
        }
    }
    Ok(())
}

/// The run's conf as JSON text: 3.x stores JSON, 2.x a pickle that is decoded here.
fn conf(row: &impl Cells, column: usize, at: &dyn Fn(&str) -> Location) -> Result<Option<String>> {
    let failed = |message: String| Error::input(at("conf"), message);
    if row.has(CONF_PICKLE, "conf_pickle") {
        let hex = row.text(CONF_PICKLE, "conf_pickle").map_err(failed)?;
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
    Ok(row
        .text(column, "conf")
        .map_err(failed)?
        .map(Cow::into_owned))
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
    let mut connection = database.connect().await?;
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
    let row = sqlx::query(sql)
        .bind(id)
        .fetch_optional(&mut connection)
        .await
        .map_err(|err| {
            Error::input(
                Location::source(&database.shown),
                format!(
                    "cannot read the backfill table (Airflow 2 has no planned backfills): {}",
                    database.scrub(&err.to_string())
                ),
            )
        })?;
    let _ = connection.close().await;
    let row = row.ok_or_else(|| {
        Error::input(
            Location::source(&database.shown),
            format!("there is no backfill {id}"),
        )
    })?;
    let text = |name: &str| -> Result<String> {
        row.try_get::<Option<String>, _>(name)
            .map_err(|err| database.error(&err))?
            .ok_or_else(|| {
                Error::input(
                    Location::source(&database.shown).column(name),
                    format!("backfill {id} has no {name}"),
                )
            })
    };
    let time = |name: &str| -> Result<i64> {
        let value = text(name)?;
        timestamp::parse(&value).ok_or_else(|| {
            Error::input(
                Location::source(&database.shown).column(name),
                format!("{value:?} is not a timestamp"),
            )
        })
    };
    Ok(Backfill {
        dag_id: text("dag_id")?,
        from: time("from_date")?,
        to: time("to_date")?,
        reprocess_behavior: text("reprocess_behavior")?,
    })
}
