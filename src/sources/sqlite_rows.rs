//! SQLite files read through rusqlite, at one point in time (the SQLite side of
//! [`ReadTransaction`](crate::sources::read_transaction::ReadTransaction)).
//!
//! A statement is stepped on a thread of its own while the rows it has given are decoded on
//! the caller's: the stepping thread copies each row's cells into a batch (one buffer of bytes
//! for a thousand rows, no value of its own per cell) and the caller reads them from there by
//! their column's position. The file is opened read-only, and every statement of a source runs
//! in one read transaction.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::mpsc;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags, ToSql};

use crate::error::{Error, Location, Result};
use crate::sources::database::{Database, Param};

/// An SQLite file opened read-only, inside one read transaction.
pub struct SqliteRead<'d> {
    database: &'d Database,
    /// Lent to the stepping thread while a statement runs.
    connection: Option<Connection>,
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
            connection: Some(connection),
        })
    }

    /// Runs `sql` in the transaction and hands every row to `each` with its 1-based number.
    /// `columns` are looked up once and given to `each` as indexes. The statement is stepped
    /// on a thread of its own, a batch of rows ahead of `each`; an error of `each` stops it.
    pub fn for_each_row(
        &mut self,
        what: &str,
        sql: &str,
        params: &[Param<'_>],
        columns: &[&str],
        mut each: impl FnMut(usize, &SqliteCells<'_>) -> Result<()>,
    ) -> Result<()> {
        let connection = self
            .connection
            .take()
            .expect("the connection is back after every statement");
        let (decoded, stepped, connection) = std::thread::scope(|scope| {
            // At most one batch waits: the stepping thread fills the next while one is decoded.
            let (full, batches) = mpsc::sync_channel::<Batch>(1);
            let (emptied, spare) = mpsc::channel::<Batch>();
            let stepper = scope.spawn(move || {
                let stepped = step(&connection, sql, params, columns, &full, &spare);
                (stepped, connection)
            });
            let decoded = (|| {
                let mut number = 0usize;
                // Ends when the statement has ended (or failed: its error is reported below).
                for batch in &batches {
                    for row in 0..batch.rows {
                        number += 1;
                        each(number, &SqliteCells { batch: &batch, row })?;
                    }
                    let _ = emptied.send(batch);
                }
                Ok(())
            })();
            // Stops the stepping thread if `each` failed before the statement ended.
            drop(batches);
            let (stepped, connection) = stepper
                .join()
                .expect("the thread stepping an SQLite statement does not panic");
            (decoded, stepped, connection)
        });
        self.connection = Some(connection);
        decoded?;
        stepped.map_err(|err| failure(self.database, what, err))
    }

    /// Ends the read transaction.
    pub fn finish(self) -> Result<()> {
        let database = self.database;
        self.connection
            .expect("the connection is back after every statement")
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

/// Rows as the stepping thread copied them: `columns.len()` cells a row, in the order of
/// `for_each_row`'s `columns`, their text and blobs in one buffer.
struct Batch {
    width: usize,
    rows: usize,
    cells: Vec<Stored>,
    bytes: Vec<u8>,
}

/// One copied cell; text and blobs as their place in the batch's bytes.
enum Stored {
    /// The statement has no such column.
    Absent,
    Null,
    Integer(i64),
    Real(f64),
    Text(Range<usize>),
    Blob(Range<usize>),
}

impl Batch {
    /// Rows a batch holds before it is handed over, unless its text passes `BYTES` first.
    const ROWS: usize = 1024;
    const BYTES: usize = 1 << 20;

    fn full(&self) -> bool {
        self.rows >= Batch::ROWS || self.bytes.len() >= Batch::BYTES
    }

    fn push_row(
        &mut self,
        row: &rusqlite::Row<'_>,
        indexes: &[Option<usize>],
    ) -> rusqlite::Result<()> {
        for index in indexes {
            let Some(index) = *index else {
                self.cells.push(Stored::Absent);
                continue;
            };
            let mut copy = |bytes: &[u8]| {
                let start = self.bytes.len();
                self.bytes.extend_from_slice(bytes);
                start..self.bytes.len()
            };
            let cell = match row.get_ref(index)? {
                ValueRef::Null => Stored::Null,
                ValueRef::Integer(value) => Stored::Integer(value),
                ValueRef::Real(value) => Stored::Real(value),
                ValueRef::Text(text) => Stored::Text(copy(text)),
                ValueRef::Blob(blob) => Stored::Blob(copy(blob)),
            };
            self.cells.push(cell);
        }
        self.rows += 1;
        Ok(())
    }
}

/// Runs the statement on the stepping thread: its rows, a batch at a time, into `full`
/// (batches come back through `spare` to be filled again). Stops when the decoding side has
/// gone; an error of the statement ends it after the rows it gave before.
fn step(
    connection: &Connection,
    sql: &str,
    params: &[Param<'_>],
    columns: &[&str],
    full: &mpsc::SyncSender<Batch>,
    spare: &mpsc::Receiver<Batch>,
) -> rusqlite::Result<()> {
    let params: Vec<&dyn ToSql> = params
        .iter()
        .map(|param| match param {
            Param::Text(text) => text as &dyn ToSql,
            Param::Int(value) => value as &dyn ToSql,
        })
        .collect();
    let mut statement = connection.prepare(sql)?;
    let indexes: Vec<Option<usize>> = columns
        .iter()
        .map(|name| statement.column_index(name).ok())
        .collect();
    let mut rows = statement.query(params.as_slice())?;
    let fresh = || Batch {
        width: columns.len(),
        rows: 0,
        cells: Vec::new(),
        bytes: Vec::new(),
    };
    let mut batch = fresh();
    while let Some(row) = rows.next()? {
        batch.push_row(row, &indexes)?;
        if batch.full() {
            let mut next = spare.try_recv().unwrap_or_else(|_| fresh());
            next.rows = 0;
            next.cells.clear();
            next.bytes.clear();
            if full.send(std::mem::replace(&mut batch, next)).is_err() {
                return Ok(());
            }
        }
    }
    if batch.rows > 0 {
        let _ = full.send(batch);
    }
    Ok(())
}

/// One row's cells, by the position of their name in `for_each_row`'s `columns`.
pub struct SqliteCells<'b> {
    batch: &'b Batch,
    row: usize,
}

impl SqliteCells<'_> {
    fn stored(&self, column: usize) -> &Stored {
        &self.batch.cells[self.row * self.batch.width + column]
    }

    /// Whether the query has the column.
    pub fn has(&self, column: usize) -> bool {
        !matches!(self.stored(column), Stored::Absent)
    }

    fn cell(&self, column: usize) -> std::result::Result<ValueRef<'_>, String> {
        Ok(match self.stored(column) {
            Stored::Absent => return Err("the query has no such column".into()),
            Stored::Null => ValueRef::Null,
            Stored::Integer(value) => ValueRef::Integer(*value),
            Stored::Real(value) => ValueRef::Real(*value),
            Stored::Text(range) => ValueRef::Text(&self.batch.bytes[range.clone()]),
            Stored::Blob(range) => ValueRef::Blob(&self.batch.bytes[range.clone()]),
        })
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
