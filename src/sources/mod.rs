//! Sources: everything that reads outside data into the canonical tables.

pub mod airflow_api;
pub mod airflow_db;
pub mod database;
pub mod journal_db;
mod pickle;
pub mod provider_http;
pub mod retry;
pub mod saved;
pub mod snapshot;
pub mod sqlite_rows;

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
    /// The content hash of a snapshot these tables were read from (its manifest's, checked
    /// against the files), so a plan need not encode the tables again to quote it.
    pub snapshot_hash: Option<String>,
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
/// A provider listing is asked only for the objects created in the window `listing_window`
/// gives for the attempts read: the audited tries' span plus the slack (SPEC §3).
///
/// Each database is read at one point in time (`database::ReadTransaction`). A journal in its
/// own database is read on its own thread while the attempts are read and the provider listed;
/// a journal table in Airflow's metadata database is read after the tries in the same
/// transaction, so both tables show the database as it stood at one instant.
/// Errors are reported in that order whichever comes first.
pub fn load(
    config: &Config,
    filter: &airflow_db::Filter,
    listing_window: &ListingWindow<'_>,
) -> Result<Tables> {
    if let Some((database, table)) = shared_database(config) {
        let started = std::time::Instant::now();
        let read = runtime()?.block_on(async {
            let mut transaction = database::ReadTransaction::begin(database).await?;
            let attempts = airflow_db::read_in(&mut transaction, filter).await?;
            let journal = journal_db::read_in(&mut transaction, table, &mapping(config)).await?;
            transaction.finish().await?;
            Ok::<_, crate::error::Error>((attempts, journal))
        });
        crate::timing::phase("read:attempts+journal", started);
        let (attempts, journal) = read?;
        let attempts = Ok((attempts.attempts, attempts.warnings));
        let provider = read_provider_after(config, listing_window, &attempts);
        return finish(config, attempts, Ok(journal), provider);
    }
    std::thread::scope(|scope| {
        let journal = scope.spawn(|| {
            let started = std::time::Instant::now();
            let journal = read_journal(config);
            crate::timing::phase("read:journal", started);
            journal
        });
        let started = std::time::Instant::now();
        let attempts = read_attempts(config, filter);
        crate::timing::phase("read:attempts", started);
        let provider = read_provider_after(config, listing_window, &attempts);
        let journal = journal.join().expect("the journal reader does not panic");
        finish(config, attempts, journal, provider)
    })
}

/// The metadata database and the journal table, when the journal is a table of it.
fn shared_database(config: &Config) -> Option<(&database::Database, &str)> {
    match (&config.attempts, &config.journal.source) {
        (Source::Database(airflow), Source::Database(journal))
            if airflow.same_database(journal) =>
        {
            Some((airflow, config.journal.table.as_deref().unwrap_or_default()))
        }
        _ => None,
    }
}

type ProviderRead = Result<(
    DataFrame,
    Option<crate::prepare::ProviderWindow>,
    Vec<String>,
)>;

/// The provider, once the attempts say which window to list; nothing if they failed.
fn read_provider_after(
    config: &Config,
    listing_window: &ListingWindow<'_>,
    attempts: &Result<(DataFrame, Vec<String>)>,
) -> Option<ProviderRead> {
    let started = std::time::Instant::now();
    let provider = match attempts {
        Ok((attempts, _)) => Some(read_provider(config, listing_window, attempts)),
        Err(_) => None,
    };
    crate::timing::phase("read:provider", started);
    provider
}

fn finish(
    config: &Config,
    attempts: Result<(DataFrame, Vec<String>)>,
    journal: Result<DataFrame>,
    provider: Option<ProviderRead>,
) -> Result<Tables> {
    let (attempts, mut warnings) = attempts?;
    let journal = journal?;
    let (provider, listed_window, listing_warnings) =
        provider.expect("the provider is read once the attempts are")?;
    warnings.extend(listing_warnings);
    Ok(Tables {
        attempts,
        journal,
        provider,
        warnings,
        origins: Table::ALL.map(|table| describe(config, table)),
        listed_window,
        snapshot_hash: None,
    })
}

fn mapping(config: &Config) -> snapshot::Mapping {
    snapshot::Mapping {
        columns: config.journal.columns.clone(),
        phases: Some(config.journal.phases.clone()),
    }
}

fn read_attempts(config: &Config, filter: &airflow_db::Filter) -> Result<(DataFrame, Vec<String>)> {
    match &config.attempts {
        Source::Snapshot(path) => Ok((
            snapshot::read(path, Table::Attempts, &snapshot::Mapping::default())?,
            Vec::new(),
        )),
        Source::Database(database) => {
            let read = runtime()?.block_on(airflow_db::read(database, filter))?;
            Ok((read.attempts, read.warnings))
        }
        Source::Api(api) => {
            let read = runtime()?.block_on(airflow_api::read(api, filter))?;
            Ok((read.attempts, read.warnings))
        }
        Source::Listing(_) => unreachable!("the config refuses a listing for the attempts"),
    }
}

fn read_journal(config: &Config) -> Result<DataFrame> {
    let mapping = mapping(config);
    match &config.journal.source {
        Source::Snapshot(path) => snapshot::read(path, Table::Journal, &mapping),
        Source::Database(database) => {
            let name = config.journal.table.as_deref().unwrap_or_default();
            runtime()?.block_on(journal_db::read(database, name, &mapping))
        }
        Source::Api(_) | Source::Listing(_) => {
            unreachable!("the config refuses an API or a listing for the journal")
        }
    }
}

/// The created-at window a listing must cover, given the attempts read.
pub type ListingWindow<'a> =
    dyn Fn(&DataFrame) -> Result<crate::prepare::ProviderWindow> + Sync + 'a;

/// The provider's objects, the window a listing covered, and the listing's warnings.
fn read_provider(
    config: &Config,
    listing_window: &ListingWindow<'_>,
    attempts: &DataFrame,
) -> ProviderRead {
    match &config.provider.source {
        Source::Listing(api) => {
            let window = listing_window(attempts)?;
            let window = provider_http::Window {
                from: window.from,
                to: window.to,
            };
            let listed = runtime()?.block_on(provider_http::list(api, window))?;
            let covered = crate::prepare::ProviderWindow {
                from: window.from,
                to: window.to,
            };
            Ok((listed.provider, Some(covered), listed.coverage.warnings))
        }
        Source::Snapshot(path) => Ok((
            snapshot::read(path, Table::Provider, &snapshot::Mapping::default())?,
            None,
            Vec::new(),
        )),
        Source::Database(_) | Source::Api(_) => {
            unreachable!("the config refuses a database or an Airflow API for the provider")
        }
    }
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
