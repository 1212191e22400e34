//! SQLite files read through rusqlite, at one point in time (the SQLite side of
//! [`ReadTransaction`](crate::sources::read_transaction::ReadTransaction)).
//!
//! Each cell is borrowed from SQLite's own buffer and read by its column's position, never
//! copied into a row of its own first. The file is opened read-only, and every statement of a
//! source runs in one read transaction.

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags, Row, ToSql};

use crate::error::{Error, Location, Result};
use crate::sources::database::{Database, Param};

/// An SQLite file opened read-only, inside one read transaction.
pub struct SqliteRead<'d> {
    database: &'d Database,
    connection: Connection,
}

impl<'d> SqliteRead<'d> {
    /// Opens the file read-only with the database's busy timeout and starts the read
    /// transaction by reading the schema: from that read on, every statement sees the
    /// database as it stood then. A lock held past the timeout is [`Database::locked`].
    pub fn begin(database: &'d Database) -> Result<SqliteRead<'d>> {
        let path = database
            .sqlite_path
            .as_ref()
            .ok_or_else(|| Error::input(Location::source(&database.shown), "not an SQLite file"))?;
        let failed = |err: rusqlite::Error| failure(database, "the database", err);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(|err| {
            Error::input(
                Location::source(&database.shown),
                format!("cannot open: {err}"),
            )
        })?;
        connection
            .busy_timeout(database.busy_timeout)
            .map_err(failed)?;
        connection.execute_batch("BEGIN").map_err(failed)?;
        connection
            .query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(failed)?;
        Ok(SqliteRead {
            database,
            connection,
        })
    }

    /// Runs `sql` in the transaction and hands every row to `each` with its 1-based number.
    /// `columns` are looked up once and given to `each` as indexes.
    pub fn for_each_row(
        &self,
        what: &str,
        sql: &str,
        params: &[Param<'_>],
        columns: &[&str],
        mut each: impl FnMut(usize, &SqliteCells<'_, '_>) -> Result<()>,
    ) -> Result<()> {
        let failed = |err: rusqlite::Error| failure(self.database, what, err);
        let params: Vec<&dyn ToSql> = params
            .iter()
            .map(|param| match param {
                Param::Text(text) => text as &dyn ToSql,
                Param::Int(value) => value as &dyn ToSql,
            })
            .collect();
        let mut statement = self.connection.prepare(sql).map_err(failed)?;
        let indexes: Vec<Option<usize>> = columns
            .iter()
            .map(|name| statement.column_index(name).ok())
            .collect();
        let mut rows = statement.query(params.as_slice()).map_err(failed)?;
        let mut number = 0usize;
        while let Some(row) = rows.next().map_err(failed)? {
            number += 1;
            each(
                number,
                &SqliteCells {
                    row,
                    indexes: &indexes,
                },
            )?;
        }
        Ok(())
    }

    /// Ends the read transaction.
    pub fn finish(self) -> Result<()> {
        let database = self.database;
        self.connection
            .execute_batch("COMMIT")
            .map_err(|err| failure(database, "the database", err))
    }
}

/// A driver error while reading `what`: a lock held past the busy timeout, or anything else.
fn failure(database: &Database, what: &str, err: rusqlite::Error) -> Error {
    match err.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => database.locked(what),
        _ => Error::input(
            Location::source(&database.shown),
            format!("cannot read {what}: {err}"),
        ),
    }
}

/// One row's cells, by the position of their name in `for_each_row`'s `columns`.
pub struct SqliteCells<'s, 'r> {
    row: &'r Row<'s>,
    indexes: &'r [Option<usize>],
}

impl SqliteCells<'_, '_> {
    /// Whether the query has the column.
    pub fn has(&self, column: usize) -> bool {
        self.indexes[column].is_some()
    }

    fn cell(&self, column: usize) -> std::result::Result<ValueRef<'_>, String> {
        let index = self.indexes[column].ok_or("the query has no such column")?;
        self.row.get_ref(index).map_err(|err| err.to_string())
    }

    /// The cell as text: text as stored, numbers written out, NULL as `None`.
    pub fn text(&self, column: usize) -> std::result::Result<Option<Cow<'_, str>>, String> {
        Ok(match self.cell(column)? {
            ValueRef::Null => None,
            ValueRef::Text(bytes) => Some(Cow::Borrowed(
                std::str::from_utf8(bytes).map_err(|_| "the text is not UTF-8".to_string())?,
            )),
            ValueRef::Integer(value) => Some(Cow::Owned(value.to_string())),
            ValueRef::Real(value) => Some(Cow::Owned(value.to_string())),
            ValueRef::Blob(_) => return Err("a BLOB where text was expected".into()),
        })
    }

    /// The cell as an integer; a whole REAL or integer text is accepted.
    pub fn int(&self, column: usize) -> std::result::Result<Option<i64>, String> {
        match self.cell(column)? {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(value) => Ok(Some(value)),
            ValueRef::Real(value) if value.fract() == 0.0 && value.abs() < 9.0e15 => {
                Ok(Some(value as i64))
            }
            ValueRef::Text(bytes) => std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .map(Some)
                .ok_or_else(|| format!("{:?} is not an integer", String::from_utf8_lossy(bytes))),
            other => Err(format!("{:?} is not an integer", other.data_type())),
        }
    }
}
