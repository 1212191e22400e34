//! Sources: everything that reads outside data into the canonical tables.

pub mod airflow_api;
pub mod airflow_db;
pub mod content;
pub mod database;
pub mod http;
pub mod journal_db;
pub mod page_json;
mod parquet_columns;
pub mod pickle;
pub mod provider_http;
pub mod read_transaction;
pub mod retry;
pub mod saved;
pub mod snapshot;
pub mod sqlite_rows;

use std::collections::BTreeMap;
use std::path::PathBuf;

use polars::prelude::DataFrame;

use crate::error::Result;
use crate::model::{ProviderWindow, Table};

/// Where a canonical table comes from, as `[airflow]`, `[journal]` or `[provider]` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Snapshot(PathBuf),
    /// Airflow's metadata database.
    Database(database::Database),
    /// Airflow's REST API.
    Api(airflow_api::AirflowApi),
    /// The provider's paginated listing API.
    Listing(Box<provider_http::ProviderApi>),
}

impl Source {
    /// The margin a provider listing is configured with.
    pub fn listing_slack(&self) -> Option<i64> {
        match self {
            Source::Listing(api) => Some(api.slack),
            _ => None,
        }
    }

    /// The source as reports name it: never with a password.
    pub fn describe(&self) -> String {
        match self {
            Source::Snapshot(path) => format!("snapshot {}", path.display()),
            Source::Database(database) => database.shown.clone(),
            Source::Api(api) => api.shown.clone(),
            Source::Listing(api) => api.shown.clone(),
        }
    }
}

/// `[journal]`: where the journal is read, and how its own columns and phase values map onto
/// the canonical journal.
#[derive(Debug, Clone)]
pub struct JournalSettings {
    pub source: Source,
    /// The journal table, for a database source.
    pub table: Option<String>,
    /// canonical column name -> the journal's own column name.
    pub columns: BTreeMap<String, String>,
    /// the journal's own phase value -> canonical phase.
    pub phases: BTreeMap<String, String>,
}

impl JournalSettings {
    /// The journal's own name for a canonical column.
    pub fn column<'a>(&'a self, canonical: &'a str) -> &'a str {
        self.columns
            .get(canonical)
            .map(String::as_str)
            .unwrap_or(canonical)
    }
}

/// Where each canonical table is read from, as the config names them.
#[derive(Clone, Copy)]
pub struct TableSources<'a> {
    pub attempts: &'a Source,
    pub journal: &'a JournalSettings,
    pub provider: &'a Source,
    /// What a provider file must hold, where the config names it.
    pub provider_check: &'a snapshot::FileCheck,
}

impl TableSources<'_> {
    /// How a table's source is named in reports and errors (never with credentials).
    pub fn describe(&self, table: Table) -> String {
        match table {
            Table::Attempts => self.attempts.describe(),
            Table::Journal => self.journal.source.describe(),
            Table::Provider => self.provider.describe(),
        }
    }
}

/// The three canonical tables as read, and what the sources warned about.
#[derive(Clone)]
pub struct Tables {
    pub attempts: DataFrame,
    pub journal: DataFrame,
    pub provider: DataFrame,
    pub warnings: Vec<String>,
    /// Where each table came from, as reports name it (attempts, journal, provider).
    pub origins: [String; 3],
    /// The created-at window a provider listing was asked for; None: the source held it all.
    pub listed_window: Option<ProviderWindow>,
    /// The content hash of a snapshot these tables were read from (its manifest's, checked
    /// against the files) or saved as, so a plan need not hash the tables again to quote it.
    pub snapshot_hash: Option<String>,
    /// When the sources were read (microseconds since the epoch): what a running try's
    /// heartbeat age is measured against (`crate::in_flight`). A snapshot keeps its read's;
    /// None where nothing says (tables made in memory): the audit takes its own start.
    pub read_at: Option<i64>,
}

impl Tables {
    pub fn origin(&self, table: Table) -> &str {
        &self.origins[table as usize]
    }

    pub fn get_mut(&mut self, table: Table) -> &mut DataFrame {
        match table {
            Table::Attempts => &mut self.attempts,
            Table::Journal => &mut self.journal,
            Table::Provider => &mut self.provider,
        }
    }

    pub fn get(&self, table: Table) -> &DataFrame {
        match table {
            Table::Attempts => &self.attempts,
            Table::Journal => &self.journal,
            Table::Provider => &self.provider,
        }
    }
}

/// Reads every table `from` names. Any failure stops the run: no finding is ever computed
/// over a table that was only partly read.
/// A provider listing is asked only for the objects created from the earliest try start minus
/// `slack` to the latest try end plus `slack` (SPEC §3); `window.of_attempts` gives that window
/// for the tries the audit keeps (an interval range can keep fewer than the SQL filter reads).
///
/// Each database is read at one point in time (`read_transaction::ReadTransaction`). The sources are
/// read side by side:
///
/// * a journal in a database (or file) of its own, and a provider snapshot file, each on a
///   thread of its own from the start;
/// * a provider listing on a thread of its own as soon as its window is known: Airflow's
///   database is first asked for the tries' time bounds, in the transaction that then reads the
///   tries (so over the very same tries), and the listing runs while the tries and the journal
///   are read. Once the tries are read, their own bounds are checked against the ones the
///   listing started with; were they ever different, that listing is stopped and the provider
///   listed again for the tries' window, so the window is always exactly SPEC §3's;
/// * a journal table in Airflow's metadata database after the tries in the same transaction,
///   so both tables show the database as it stood at one instant.
///
/// Errors are reported in that order (attempts, journal, provider) whichever comes first; a
/// listing still running when the attempts or the journal fail is stopped.
pub fn load(
    from: TableSources<'_>,
    filter: &airflow_db::Filter,
    window: &ListingWindow<'_>,
) -> Result<Tables> {
    load_then(from, filter, window, |pending| pending.tables())
}

/// [`load`], handing the read to `then` as soon as the attempts and the journal are read
/// ([`Pending`]), while the provider may still be being listed: what needs only those two
/// tables can run during the listing. `then` gets the three tables from
/// [`Pending::tables`]; were the attempts or the journal not read, their error is returned
/// and `then` is not called.
pub fn load_then<T>(
    from: TableSources<'_>,
    filter: &airflow_db::Filter,
    window: &ListingWindow<'_>,
    then: impl FnOnce(Pending<'_, '_>) -> Result<T>,
) -> Result<T> {
    let slack = window.slack;
    let shared = shared_database(from);
    std::thread::scope(|scope| {
        let journal = shared.is_none().then(|| {
            scope.spawn(|| {
                let started = std::time::Instant::now();
                let journal = read_journal(from);
                crate::timing::phase("read:journal", started);
                journal
            })
        });
        let mut provider = Provider::start(scope, from);
        let started = std::time::Instant::now();
        let mut list_early = |bounds: airflow_db::TryBounds| {
            if let Source::Listing(api) = from.provider {
                let window = bounds.listing_window(slack, filter.since, filter.until);
                provider = Provider::listing(scope, api, window);
            }
        };
        let early: Option<&mut dyn FnMut(airflow_db::TryBounds)> = (window.list_early
            && matches!(from.provider, Source::Listing(_)))
        .then_some(&mut list_early);
        let read = read_attempts(from, filter, shared.map(|(_, table)| table), early);
        crate::timing::phase(
            match shared {
                Some(_) => "read:attempts+journal",
                None => "read:attempts",
            },
            started,
        );
        // On an error of the attempts or the journal, `provider` is dropped with the scope: a
        // listing still running is stopped (its thread then ends).
        let mut read = read?;
        let journal = match journal {
            Some(thread) => thread.join().expect("the journal reader does not panic")?,
            None => read
                .journal
                .take()
                .expect("a journal table of the metadata database is read with the tries"),
        };
        then(Pending {
            from,
            window,
            provider,
            read,
            journal,
        })
    })
}

/// The attempts and the journal, read, and the provider as far as it has got: what
/// [`load_then`] hands over.
pub struct Pending<'scope, 'env> {
    from: TableSources<'env>,
    window: &'env ListingWindow<'env>,
    provider: Provider<'scope>,
    read: AttemptsRead,
    journal: DataFrame,
}

impl Pending<'_, '_> {
    pub fn attempts(&self) -> &DataFrame {
        &self.read.attempts
    }

    pub fn journal(&self) -> &DataFrame {
        &self.journal
    }

    /// The three tables, once the provider is read (or listed again, for the tries' window:
    /// [`load`]).
    pub fn tables(self) -> Result<Tables> {
        let provider = self
            .provider
            .finish(self.from, self.window, Some(&self.read));
        finish(
            self.from,
            (self.read.attempts, self.read.warnings),
            self.journal,
            provider,
        )
    }
}

/// The metadata database and the journal table, when the journal is a table of it.
fn shared_database<'a>(from: TableSources<'a>) -> Option<(&'a database::Database, &'a str)> {
    match (&from.attempts, &from.journal.source) {
        (Source::Database(airflow), Source::Database(journal))
            if airflow.same_database(journal) =>
        {
            Some((airflow, from.journal.table.as_deref().unwrap_or_default()))
        }
        _ => None,
    }
}

type ProviderRead = Result<(DataFrame, Option<ProviderWindow>, Vec<String>)>;

/// The provider's read, as far as it has got while the attempts are read.
enum Provider<'scope> {
    /// Waits for the tries (a listing whose window is not known yet).
    Waiting,
    /// A snapshot file, read on a thread of its own.
    Reading(std::thread::ScopedJoinHandle<'scope, ProviderRead>),
    /// A listing of `window`, on a thread of its own; dropping `stop` stops it.
    Listing {
        window: ProviderWindow,
        thread: std::thread::ScopedJoinHandle<'scope, Option<ProviderRead>>,
        stop: tokio::sync::oneshot::Sender<()>,
    },
}

impl<'scope> Provider<'scope> {
    /// Starts reading a provider snapshot; a listing waits for its window.
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        from: TableSources<'env>,
    ) -> Provider<'scope> {
        match from.provider {
            Source::Snapshot(path) => Provider::Reading(scope.spawn(move || {
                let started = std::time::Instant::now();
                let read = snapshot::read(path, Table::Provider, &snapshot::Mapping::default())
                    .and_then(|provider| {
                        from.provider_check.check(path, provider.height())?;
                        snapshot::each_object_once(provider, &path.display().to_string())
                    })
                    .map(|(provider, warnings)| (provider, None, warnings));
                crate::timing::phase("read:provider", started);
                read
            })),
            _ => Provider::Waiting,
        }
    }

    /// Starts listing `window` on a thread of its own.
    fn listing<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        api: &'env provider_http::ProviderApi,
        window: ProviderWindow,
    ) -> Provider<'scope> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = scope.spawn(move || {
            let started = std::time::Instant::now();
            let listed = runtime().map(|runtime| {
                runtime.block_on(async {
                    tokio::select! {
                        listed = list(api, window) => Some(listed),
                        // The sender was dropped: the attempts failed, or asked for another window.
                        _ = stopped => None,
                    }
                })
            });
            crate::timing::phase("read:provider", started);
            listed.unwrap_or_else(|err| Some(Err(err)))
        });
        Provider::Listing {
            window,
            thread,
            stop,
        }
    }

    /// The provider once the attempts are read: what the thread read, or a listing of the
    /// tries' window; nothing when the attempts failed.
    fn finish(
        self,
        from: TableSources<'_>,
        audited: &ListingWindow<'_>,
        attempts: Option<&AttemptsRead>,
    ) -> Option<ProviderRead> {
        let started = std::time::Instant::now();
        let window = attempts.map(|read| (audited.of_attempts)(&read.attempts));
        let provider = match (self, window) {
            (Provider::Reading(thread), Some(_)) => {
                Some(thread.join().expect("the provider reader does not panic"))
            }
            (
                Provider::Listing {
                    window: listing,
                    thread,
                    stop,
                },
                Some(Ok(window)),
            ) if listing == window => {
                let listed = thread.join().expect("the provider listing does not panic");
                drop(stop);
                listed
            }
            (Provider::Listing { thread, stop, .. }, window) => {
                drop(stop);
                let _ = thread.join();
                window.map(|window| window.and_then(|window| list_for(from, window)))
            }
            (Provider::Waiting, Some(window)) => {
                Some(window.and_then(|window| list_for(from, window)))
            }
            (Provider::Reading(thread), None) => {
                let _ = thread.join();
                None
            }
            (Provider::Waiting, None) => None,
        };
        crate::timing::phase("read:provider:after-attempts", started);
        provider
    }
}

/// The window a provider listing covers: the tries' span plus `slack` (SPEC §3).
pub struct ListingWindow<'a> {
    /// The margin around the tries, microseconds: with the tries' time bounds from Airflow's
    /// database it gives the window a listing starts with while the tries are read.
    pub slack: i64,
    /// The window the audited tries need, given every try the Airflow source returned; a
    /// listing started for another window is listed again for this one.
    pub of_attempts: &'a (dyn Fn(&DataFrame) -> Result<ProviderWindow> + Sync),
    /// Whether the tries the SQL filter reads are the audited ones, so the listing can start
    /// from their bounds before they are read; false when the audit keeps fewer (an interval
    /// range), and the listing waits for the tries.
    pub list_early: bool,
}

/// The configured listing of `window`, read now.
fn list_for(from: TableSources<'_>, window: ProviderWindow) -> ProviderRead {
    match from.provider {
        Source::Listing(api) => runtime()?.block_on(list(api, window)),
        _ => unreachable!("only a listing waits for the tries' window"),
    }
}

async fn list(api: &provider_http::ProviderApi, window: ProviderWindow) -> ProviderRead {
    let listed = provider_http::list(api, window).await?;
    Ok((listed.provider, Some(window), listed.coverage.warnings))
}

fn finish(
    from: TableSources<'_>,
    (attempts, mut warnings): (DataFrame, Vec<String>),
    journal: DataFrame,
    provider: Option<ProviderRead>,
) -> Result<Tables> {
    let (provider, listed_window, listing_warnings) =
        provider.expect("the provider is read once the attempts are")?;
    warnings.extend(listing_warnings);
    // A text file cut at a line boundary reads as a whole one: said where nothing checks it.
    let files = [
        (from.attempts, None),
        (&from.journal.source, None),
        (from.provider, Some(from.provider_check)),
    ];
    for (source, check) in files {
        if let Source::Snapshot(path) = source {
            warnings.extend(snapshot::unchecked(path, check));
        }
    }
    Ok(Tables {
        attempts,
        journal,
        provider,
        warnings,
        origins: Table::ALL.map(|table| from.describe(table)),
        listed_window,
        snapshot_hash: None,
        read_at: Some(chrono::Utc::now().timestamp_micros()),
    })
}

fn mapping(from: TableSources<'_>) -> snapshot::Mapping {
    snapshot::Mapping {
        columns: from.journal.columns.clone(),
        phases: Some(from.journal.phases.clone()),
    }
}

/// What the attempts' source gave: the tries, its warnings, and the journal when it is a table
/// of the same database (`shared_journal`).
struct AttemptsRead {
    attempts: DataFrame,
    warnings: Vec<String>,
    journal: Option<DataFrame>,
}

/// Reads the attempts, and a journal table of the same database after them. A database is
/// first asked for the tries' bounds when `early` wants them, which it gets before the tries
/// are read.
fn read_attempts(
    from: TableSources<'_>,
    filter: &airflow_db::Filter,
    shared_journal: Option<&str>,
    early: Option<&mut dyn FnMut(airflow_db::TryBounds)>,
) -> Result<AttemptsRead> {
    let read = |attempts, warnings| AttemptsRead {
        attempts,
        warnings,
        journal: None,
    };
    match &from.attempts {
        Source::Snapshot(path) => Ok(read(
            snapshot::read(path, Table::Attempts, &snapshot::Mapping::default())?,
            Vec::new(),
        )),
        Source::Database(database) => runtime()?.block_on(async {
            let mut transaction = read_transaction::ReadTransaction::begin(database).await?;
            let query = airflow_db::AttemptsQuery::prepare(&mut transaction, filter).await?;
            if let Some(early) = early {
                let started = std::time::Instant::now();
                early(query.bounds(&mut transaction).await?);
                crate::timing::phase("read:attempts:bounds", started);
            }
            let attempts = query.read(&mut transaction).await?;
            let journal = match shared_journal {
                Some(table) => {
                    Some(journal_db::read_in(&mut transaction, table, &mapping(from)).await?)
                }
                None => None,
            };
            transaction.finish().await?;
            Ok(AttemptsRead {
                journal,
                ..read(attempts.attempts, attempts.warnings)
            })
        }),
        Source::Api(api) => {
            let attempts = runtime()?.block_on(airflow_api::read(api, filter))?;
            Ok(read(attempts.attempts, attempts.warnings))
        }
        Source::Listing(_) => unreachable!("the config refuses a listing for the attempts"),
    }
}

fn read_journal(from: TableSources<'_>) -> Result<DataFrame> {
    let mapping = mapping(from);
    match &from.journal.source {
        Source::Snapshot(path) => snapshot::read(path, Table::Journal, &mapping),
        Source::Database(database) => {
            let name = from.journal.table.as_deref().unwrap_or_default();
            runtime()?.block_on(journal_db::read(database, name, &mapping))
        }
        Source::Api(_) | Source::Listing(_) => {
            unreachable!("the config refuses an API or a listing for the journal")
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| crate::error::Error::io("the async runtime", err))
}
