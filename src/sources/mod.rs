//! Sources: everything that reads outside data into the canonical tables.

pub mod airflow_api;
pub mod airflow_db;
pub mod database;
pub mod journal_db;
mod pickle;
pub mod provider_http;
pub mod saved;
pub mod snapshot;

use polars::prelude::DataFrame;

use crate::config::{Config, Source};
use crate::error::Result;
use crate::model::Table;

/// The three canonical tables as read, and what the sources warned about.
pub struct Tables {
    pub attempts: DataFrame,
    pub journal: DataFrame,
    pub provider: DataFrame,
    pub warnings: Vec<String>,
    /// Where each table came from, as reports name it (attempts, journal, provider).
    pub origins: [String; 3],
    /// The created-at window a provider listing was asked for; None: the source held it all.
    pub listed_window: Option<crate::prepare::ProviderWindow>,
}

impl Tables {
    pub fn origin(&self, table: Table) -> &str {
        &self.origins[table as usize]
    }

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
/// A provider listing is asked only for the objects created from the earliest try start minus
/// `slack` to the latest try end plus `slack` (SPEC §3).
pub fn load(config: &Config, filter: &airflow_db::Filter, slack: i64) -> Result<Tables> {
    let mut warnings = Vec::new();
    let mut read = |source: &Source, table: Table, mapping: &snapshot::Mapping| match source {
        Source::Snapshot(path) => snapshot::read(path, table, mapping),
        Source::Database(database) if table == Table::Journal => {
            let name = config.journal.table.as_deref().unwrap_or_default();
            runtime()?.block_on(journal_db::read(database, name, mapping))
        }
        Source::Database(database) => {
            let read = runtime()?.block_on(airflow_db::read(database, filter))?;
            warnings.extend(read.warnings);
            Ok(read.attempts)
        }
        Source::Api(api) => {
            let read = runtime()?.block_on(airflow_api::read(api, filter))?;
            warnings.extend(read.warnings);
            Ok(read.attempts)
        }
        Source::Listing(_) => unreachable!("the provider is listed after the attempts are read"),
    };
    let journal_mapping = snapshot::Mapping {
        columns: config.journal.columns.clone(),
        phases: Some(config.journal.phases.clone()),
    };
    let attempts = read(
        &config.attempts,
        Table::Attempts,
        &snapshot::Mapping::default(),
    )?;
    let journal = read(&config.journal.source, Table::Journal, &journal_mapping)?;
    let mut listed_window = None;
    let provider = match &config.provider.source {
        Source::Listing(api) => {
            let window = match crate::commands::audit::try_bounds(&attempts)? {
                (Some(from), Some(to)) => provider_http::Window {
                    from: Some(from - slack),
                    to: Some(to + slack),
                },
                // No try was read: list what the audit's window asks for.
                _ => provider_http::Window {
                    from: filter.since,
                    to: filter.until,
                },
            };
            listed_window = Some(crate::prepare::ProviderWindow {
                from: window.from,
                to: window.to,
            });
            let listed = runtime()?.block_on(provider_http::list(api, window))?;
            warnings.extend(listed.coverage.warnings);
            listed.provider
        }
        source => read(source, Table::Provider, &snapshot::Mapping::default())?,
    };
    Ok(Tables {
        attempts,
        journal,
        provider,
        warnings,
        origins: Table::ALL.map(|table| describe(config, table)),
        listed_window,
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| crate::error::Error::io("the async runtime", err))
}

/// How a source is named in reports and errors (never with credentials).
pub fn describe(config: &Config, table: Table) -> String {
    match table {
        Table::Attempts => config.attempts.describe(),
        Table::Journal => config.journal.source.describe(),
        Table::Provider => config.provider.source.describe(),
    }
}
