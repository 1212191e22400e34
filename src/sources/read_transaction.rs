//! [`ReadTransaction`]: how a source reads a database that Airflow and its tasks are writing,
//! every statement at one point in time, each row handed over as [`Cells`] as it arrives.

use std::borrow::Cow;

use futures_util::TryStreamExt;
use sqlx::any::AnyRow;
use sqlx::postgres::{PgConnection, PgRow, PgValueFormat};
use sqlx::{AnyConnection, AssertSqlSafe, Column, Connection, Decode, Row, TypeInfo, ValueRef};

use crate::error::{Error, Result};
use crate::sources::database::{Database, Dialect, Param};
use crate::sources::sqlite_rows::{SqliteCells, SqliteRead};
use crate::timestamp;

/// One database read at one point in time: every statement a source runs (schema checks, rows)
/// runs in one read-only transaction, so a source that Airflow and its tasks write while it is
/// read is seen as it stood at one instant, never half before and half after a write.
///
/// * SQLite: the file opened read-only, one read transaction started by its first read, after
///   waiting up to `busy_timeout` for a writer's lock. In WAL mode the transaction sees the
///   database as of that read while writers go on; in rollback-journal mode its shared lock
///   keeps writers from committing until the read ends.
/// * PostgreSQL: `REPEATABLE READ READ ONLY`, whose snapshot is taken by the first statement.
/// * MySQL (journals only): `START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`.
///
/// A database locked past `busy_timeout` is an error naming it ([`Database::locked`]).
pub struct ReadTransaction<'d> {
    pub database: &'d Database,
    connection: Open<'d>,
}

enum Open<'d> {
    Sqlite(SqliteRead<'d>),
    Postgres(PgConnection),
    Mysql(AnyConnection),
}

impl<'d> ReadTransaction<'d> {
    pub async fn begin(database: &'d Database) -> Result<ReadTransaction<'d>> {
        let begin_failed = |err: sqlx::Error| database.read_error("the database", &err);
        let connection = match database.dialect {
            Dialect::Sqlite => Open::Sqlite(SqliteRead::begin(database)?),
            Dialect::Postgres => {
                let mut connection = database.connect_postgres().await?;
                sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .execute(&mut connection)
                    .await
                    .map_err(begin_failed)?;
                Open::Postgres(connection)
            }
            Dialect::Mysql => {
                let mut connection = database.connect().await?;
                sqlx::raw_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                    .execute(&mut connection)
                    .await
                    .map_err(begin_failed)?;
                Open::Mysql(connection)
            }
        };
        Ok(ReadTransaction {
            database,
            connection,
        })
    }

    /// Runs `sql` and hands every row to `each` with its 1-based number; `columns` are looked
    /// up once and given to `each` as indexes. `what` names what the statement reads in errors.
    pub async fn for_each_row(
        &mut self,
        what: &str,
        sql: &str,
        params: &[Param<'_>],
        columns: &[&str],
        mut each: impl FnMut(usize, &Cells<'_>) -> Result<()>,
    ) -> Result<()> {
        let database = self.database;
        let failed = |err: sqlx::Error| database.read_error(what, &err);
        match &mut self.connection {
            Open::Sqlite(read) => read.for_each_row(what, sql, params, columns, |number, row| {
                each(number, &Cells::Sqlite(row))
            }),
            Open::Postgres(connection) => {
                let statement = (sql, params, columns);
                stream(
                    &mut *connection,
                    statement,
                    failed,
                    |number, row, indexes| each(number, &Cells::Postgres { row, indexes }),
                )
                .await
            }
            Open::Mysql(connection) => {
                let statement = (sql, params, columns);
                stream(
                    &mut *connection,
                    statement,
                    failed,
                    |number, row, indexes| each(number, &Cells::Any { row, indexes }),
                )
                .await
            }
        }
    }

    /// Ends the transaction; it wrote nothing, so this only lets go of the snapshot and locks.
    pub async fn finish(self) -> Result<()> {
        let failed = |err: sqlx::Error| self.database.read_error("the database", &err);
        match self.connection {
            Open::Sqlite(read) => read.finish(),
            Open::Postgres(connection) => commit(connection).await.map_err(failed),
            Open::Mysql(connection) => commit(connection).await.map_err(failed),
        }
    }
}

/// Ends a server's read transaction and closes the connection.
async fn commit<C>(mut connection: C) -> std::result::Result<(), sqlx::Error>
where
    C: Connection,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
{
    sqlx::raw_sql("COMMIT").execute(&mut connection).await?;
    let _ = connection.close().await;
    Ok(())
}

/// Runs `sql` on a server and hands every row, as it arrives, to `each` with its 1-based number
/// and where each of `columns` is in it.
async fn stream<'c, DB, E>(
    executor: E,
    (sql, params, columns): (&str, &[Param<'_>], &[&str]),
    failed: impl Fn(sqlx::Error) -> Error,
    mut each: impl FnMut(usize, &DB::Row, &[Option<usize>]) -> Result<()>,
) -> Result<()>
where
    DB: sqlx::Database,
    E: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut query = sqlx::query::<DB>(AssertSqlSafe(sql));
    for param in params {
        query = match *param {
            Param::Text(text) => query.bind(text.to_string()),
            Param::Int(value) => query.bind(value),
        };
    }
    let mut rows = query.fetch(executor);
    let mut indexes = None;
    let mut number = 0usize;
    while let Some(row) = rows.try_next().await.map_err(&failed)? {
        number += 1;
        let indexes = indexes.get_or_insert_with(|| ordinals(&row, columns));
        each(number, &row, indexes)?;
    }
    Ok(())
}

/// Where each of `columns` is in a statement's rows.
fn ordinals(row: &impl Row, columns: &[&str]) -> Vec<Option<usize>> {
    columns
        .iter()
        .map(|name| {
            row.columns()
                .iter()
                .position(|column| column.name() == *name)
        })
        .collect()
}

/// One row's cells, by the position of their name in `for_each_row`'s `columns`.
pub enum Cells<'r> {
    Sqlite(&'r SqliteCells<'r>),
    Postgres {
        row: &'r PgRow,
        indexes: &'r [Option<usize>],
    },
    Any {
        row: &'r AnyRow,
        indexes: &'r [Option<usize>],
    },
}

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01), which binary times count from.
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

impl Cells<'_> {
    /// Whether the statement has the column.
    pub fn has(&self, column: usize) -> bool {
        match self {
            Cells::Sqlite(row) => row.has(column),
            Cells::Postgres { indexes, .. } | Cells::Any { indexes, .. } => {
                indexes[column].is_some()
            }
        }
    }

    fn index(indexes: &[Option<usize>], column: usize) -> std::result::Result<usize, String> {
        indexes[column].ok_or_else(|| "the query has no such column".to_string())
    }

    /// The cell as text; NULL as `None`.
    pub fn text(&self, column: usize) -> std::result::Result<Option<Cow<'_, str>>, String> {
        match self {
            Cells::Sqlite(row) => row.text(column),
            Cells::Postgres { row, indexes } => {
                let value: Option<&str> = row
                    .try_get(Self::index(indexes, column)?)
                    .map_err(|err| err.to_string())?;
                Ok(value.map(Cow::Borrowed))
            }
            Cells::Any { row, indexes } => {
                let value: Option<String> = row
                    .try_get(Self::index(indexes, column)?)
                    .map_err(|err| err.to_string())?;
                Ok(value.map(Cow::Owned))
            }
        }
    }

    /// The cell as an integer; NULL as `None`.
    pub fn int(&self, column: usize) -> std::result::Result<Option<i64>, String> {
        match self {
            Cells::Sqlite(row) => row.int(column),
            Cells::Postgres { row, indexes } => row
                .try_get(Self::index(indexes, column)?)
                .map_err(|err| err.to_string()),
            Cells::Any { row, indexes } => row
                .try_get(Self::index(indexes, column)?)
                .map_err(|err| err.to_string()),
        }
    }

    /// The cell as a time, microseconds since the epoch in UTC: a PostgreSQL `timestamptz` as
    /// the server sent it (binary), anything else parsed from its text. NULL and the empty text
    /// as `None`.
    pub fn time(&self, column: usize) -> std::result::Result<Option<i64>, String> {
        if let Cells::Postgres { row, indexes } = self {
            let value = row
                .try_get_raw(Self::index(indexes, column)?)
                .map_err(|err| err.to_string())?;
            let binary_time = value.format() == PgValueFormat::Binary
                && matches!(value.type_info().name(), "TIMESTAMPTZ" | "TIMESTAMP");
            if binary_time {
                if value.is_null() {
                    return Ok(None);
                }
                let since_2000: i64 =
                    Decode::<sqlx::Postgres>::decode(value).map_err(|err| err.to_string())?;
                // `infinity` and `-infinity` are the extremes of the range.
                return match since_2000 {
                    i64::MAX | i64::MIN => Err("an infinite time is not a timestamp".into()),
                    micros => micros
                        .checked_add(POSTGRES_EPOCH_MICROS)
                        .map(Some)
                        .ok_or_else(|| format!("{micros} is not a timestamp")),
                };
            }
        }
        match self.text(column)?.as_deref() {
            None | Some("") => Ok(None),
            Some(text) => timestamp::parse(text)
                .map(Some)
                .ok_or_else(|| format!("{text:?} is not a timestamp")),
        }
    }
}
