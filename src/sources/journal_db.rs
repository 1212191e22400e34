//! The `journal` table from a database (SQLite, PostgreSQL, MySQL), with the configured
//! mapping of column names and phase values.
//!
//! The table's columns are listed first, so a missing mapped column is named with the table
//! before any row is read. Every value is read as text and checked by the same code that checks
//! snapshot files, so a bad timestamp or an unknown phase is reported the same way, with the
//! row and column. Columns and rows are read in one read-only transaction
//! ([`ReadTransaction`]): tasks append to the journal while the audit reads it.

use std::borrow::Cow;

use polars::prelude::*;

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{JOURNAL, Kind};
use crate::sources::database::{Database, Dialect, Param};
use crate::sources::read_transaction::ReadTransaction;
use crate::sources::snapshot::{Cell, Mapping, Values, push};

/// Reads the whole journal table in one read transaction of its own: objects of DAGs outside
/// an audit are recognised by their journal rows, so even a `--dag` audit needs every row.
pub async fn read(database: &Database, table: &str, mapping: &Mapping) -> Result<DataFrame> {
    let mut transaction = ReadTransaction::begin(database).await?;
    let journal = read_in(&mut transaction, table, mapping).await?;
    transaction.finish().await?;
    Ok(journal)
}

/// Reads the whole journal table inside `transaction` (which may also read the attempts, when
/// the journal lives in Airflow's metadata database).
pub async fn read_in(
    transaction: &mut ReadTransaction<'_>,
    table: &str,
    mapping: &Mapping,
) -> Result<DataFrame> {
    let database = transaction.database;
    let source = format!("{} table {table}", database.shown);
    let identifier_ok = |name: &str| {
        !name.is_empty()
            && name.split('.').count() <= 2
            && name.split('.').all(|part| {
                part.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
    };
    if !identifier_ok(table) {
        return Err(Error::input(
            Location::source(&source),
            "the table name must be letters, digits and _ (schema.table allowed)",
        ));
    }
    let existing = columns(transaction, table).await?;
    if existing.is_empty() {
        return Err(Error::input(
            Location::source(&source),
            "no such table (or it has no columns)",
        ));
    }

    let quote = |name: &str| match database.dialect {
        Dialect::Mysql => name
            .split('.')
            .map(|part| format!("`{part}`"))
            .collect::<Vec<_>>()
            .join("."),
        _ => name
            .split('.')
            .map(|part| format!("\"{part}\""))
            .collect::<Vec<_>>()
            .join("."),
    };
    let text = match database.dialect {
        Dialect::Mysql => "CHAR",
        _ => "TEXT",
    };
    let mut selected = Vec::new();
    for spec in JOURNAL {
        let own = mapping
            .columns
            .get(spec.name)
            .map(String::as_str)
            .unwrap_or(spec.name);
        if existing.iter().any(|column| column == own) {
            selected.push(format!(
                "CAST({} AS {text}) AS {}",
                quote(own),
                quote(spec.name)
            ));
        } else if spec.nullable {
            selected.push(format!("CAST(NULL AS {text}) AS {}", quote(spec.name)));
        } else {
            return Err(Error::input(
                Location::source(&source).column(own),
                format!(
                    "missing column `{own}` (the journal's `{}`); the table has: {}",
                    spec.name,
                    existing.join(", ")
                ),
            ));
        }
    }
    let sql = include_str!("../../queries/journal/select.sql")
        .lines()
        .filter(|line| !line.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("{columns}", &selected.join(",\n       "))
        .replace("{table}", &quote(table));

    let mut values: Vec<Values> = JOURNAL.iter().map(|spec| Values::new(spec.kind)).collect();
    // Each canonical column's name in the journal's own table, for errors.
    let owns: Vec<&str> = JOURNAL
        .iter()
        .map(|spec| {
            mapping
                .columns
                .get(spec.name)
                .map(String::as_str)
                .unwrap_or(spec.name)
        })
        .collect();
    let names: Vec<&str> = JOURNAL.iter().map(|spec| spec.name).collect();
    let progress = crate::progress::Line::open("journal", &source);
    let mut read = 0;
    // Each cell goes straight from the row into its column: no row is built in between.
    transaction
        .for_each_row("the journal", &sql, &[], &names, |number, row| {
            read = number;
            progress.row(number);
            let columns = JOURNAL.iter().zip(values.iter_mut()).zip(&owns);
            for (index, ((spec, column), own)) in columns.enumerate() {
                let at = || Location::source(&source).row(number).column(*own);
                let cell = row
                    .text(index)
                    .map_err(|message| Error::input(at(), message))?;
                // Integers stored as REAL in SQLite come back as "3.0": accept whole numbers.
                let cell = match (spec.kind, cell) {
                    (Kind::Int, Some(text)) if text.ends_with(".0") => {
                        Some(Cow::Owned(text.trim_end_matches(".0").to_string()))
                    }
                    (_, cell) => cell,
                };
                push(
                    column,
                    spec,
                    cell.as_deref().map(Cell::Text).unwrap_or(Cell::Null),
                    mapping,
                    at,
                )?;
            }
            Ok(())
        })
        .await?;
    progress.rows(read as u64);
    progress.done();
    let columns = JOURNAL
        .iter()
        .zip(values)
        .map(|(spec, values)| values.into_column(spec.name))
        .collect();
    DataFrame::new_infer_height(columns).engine("assembling the journal")
}

async fn columns(transaction: &mut ReadTransaction<'_>, table: &str) -> Result<Vec<String>> {
    let database = transaction.database;
    let sql = match database.dialect {
        Dialect::Sqlite => include_str!("../../queries/journal/sqlite/columns.sql"),
        Dialect::Postgres => include_str!("../../queries/journal/postgres/columns.sql"),
        Dialect::Mysql => include_str!("../../queries/journal/mysql/columns.sql"),
    };
    let mut columns = Vec::new();
    transaction
        .for_each_row(
            "the journal table's columns",
            sql,
            &[Param::Text(table)],
            &["column_name"],
            |number, row| {
                let name = row.text(0).map_err(|message| {
                    Error::input(Location::source(&database.shown).row(number), message)
                })?;
                columns.push(name.unwrap_or_default().into_owned());
                Ok(())
            },
        )
        .await?;
    Ok(columns)
}
