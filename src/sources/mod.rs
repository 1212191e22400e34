//! Sources: everything that reads outside data into the canonical tables.

pub mod snapshot;

use polars::prelude::DataFrame;

use crate::config::{Config, Source};
use crate::error::Result;
use crate::model::Table;

/// The three canonical tables as read, with where each came from.
pub struct Tables {
    pub attempts: DataFrame,
    pub journal: DataFrame,
    pub provider: DataFrame,
}

impl Tables {
    pub fn get(&self, table: Table) -> &DataFrame {
        match table {
            Table::Attempts => &self.attempts,
            Table::Journal => &self.journal,
            Table::Provider => &self.provider,
        }
    }
}

/// Reads every table the config names. Any failure stops the run: no finding is ever
/// computed over a table that was only partly read.
pub fn load(config: &Config) -> Result<Tables> {
    let read = |source: &Source, table: Table, mapping: &snapshot::Mapping| match source {
        Source::Snapshot(path) => snapshot::read(path, table, mapping),
    };
    let journal_mapping = snapshot::Mapping {
        columns: config.journal.columns.clone(),
        phases: Some(config.journal.phases.clone()),
    };
    Ok(Tables {
        attempts: read(
            &config.attempts,
            Table::Attempts,
            &snapshot::Mapping::default(),
        )?,
        journal: read(&config.journal.source, Table::Journal, &journal_mapping)?,
        provider: read(
            &config.provider.source,
            Table::Provider,
            &snapshot::Mapping::default(),
        )?,
    })
}

/// How a source is named in reports and errors (never with credentials).
pub fn describe(config: &Config, table: Table) -> String {
    match table {
        Table::Attempts => config.attempts.describe(),
        Table::Journal => config.journal.source.describe(),
        Table::Provider => config.provider.source.describe(),
    }
}
