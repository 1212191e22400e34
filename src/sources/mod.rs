//! Sources: everything that reads outside data into the canonical tables.

pub mod airflow_api;
pub mod airflow_db;
pub mod database;
pub mod journal_db;
pub mod pickle;
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
/// A provider listing is asked only for the objects created from the earliest try start minus
/// `slack` to the latest try end plus `slack` (SPEC §3); `window.audited` says which of the
/// tries read the audit keeps (an interval range can keep fewer than the SQL filter reads).
///
/// Each database is read at one point in time (`database::ReadTransaction`). The sources are
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
/// listing still running when the attempts fail is stopped.
pub fn load(
    config: &Config,
    filter: &airflow_db::Filter,
    window: &ListingWindow<'_>,
) -> Result<Tables> {
    let slack = window.slack;
    let shared = shared_database(config);
    std::thread::scope(|scope| {
        let journal = shared.is_none().then(|| {
            scope.spawn(|| {
                let started = std::time::Instant::now();
                let journal = read_journal(config);
                crate::timing::phase("read:journal", started);
                journal
            })
        });
        let mut provider = Provider::start(scope, config);
        let started = std::time::Instant::now();
        let mut list_early = |bounds| {
            if let Source::Listing(api) = &config.provider.source {
                provider = Provider::listing(scope, api, listing_window(bounds, filter, slack));
            }
        };
        let early: Option<&mut dyn FnMut(airflow_db::TryBounds)> = (window.list_early
            && matches!(config.provider.source, Source::Listing(_)))
        .then_some(&mut list_early);
        let read = read_attempts(config, filter, shared.map(|(_, table)| table), early);
        crate::timing::phase(
            match shared {
                Some(_) => "read:attempts+journal",
                None => "read:attempts",
            },
            started,
        );
        let provider = provider.finish(config, window, read.as_ref().ok());
        let (attempts, shared_journal) = match read {
            Ok(read) => (Ok((read.attempts, read.warnings)), read.journal),
            Err(err) => (Err(err), None),
        };
        let journal = match (journal, shared_journal) {
            (Some(thread), _) => thread.join().expect("the journal reader does not panic"),
            (None, Some(journal)) => Ok(journal),
            // The shared journal is read after the tries, which failed: their error is reported.
            (None, None) => Ok(crate::model::empty(Table::Journal)),
        };
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

/// The provider's read, as far as it has got while the attempts are read.
enum Provider<'scope> {
    /// Waits for the tries (a listing whose window is not known yet).
    Waiting,
    /// A snapshot file, read on a thread of its own.
    Reading(std::thread::ScopedJoinHandle<'scope, ProviderRead>),
    /// A listing of `window`, on a thread of its own; dropping `stop` stops it.
    Listing {
        window: provider_http::Window,
        thread: std::thread::ScopedJoinHandle<'scope, Option<ProviderRead>>,
        stop: tokio::sync::oneshot::Sender<()>,
    },
}

impl<'scope> Provider<'scope> {
    /// Starts reading a provider snapshot; a listing waits for its window.
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        config: &'env Config,
    ) -> Provider<'scope> {
        match &config.provider.source {
            Source::Snapshot(path) => Provider::Reading(scope.spawn(move || {
                let started = std::time::Instant::now();
                let read = snapshot::read(path, Table::Provider, &snapshot::Mapping::default())
                    .map(|provider| (provider, None, Vec::new()));
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
        window: provider_http::Window,
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
        config: &Config,
        audited: &ListingWindow<'_>,
        attempts: Option<&AttemptsRead>,
    ) -> Option<ProviderRead> {
        let started = std::time::Instant::now();
        let window = attempts.map(|read| {
            (audited.of_attempts)(&read.attempts).map(|window| provider_http::Window {
                from: window.from,
                to: window.to,
            })
        });
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
                window.map(|window| window.and_then(|window| list_for(config, window)))
            }
            (Provider::Waiting, Some(window)) => {
                Some(window.and_then(|window| list_for(config, window)))
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
    pub of_attempts: &'a (dyn Fn(&DataFrame) -> Result<crate::prepare::ProviderWindow> + Sync),
    /// Whether the tries the SQL filter reads are the audited ones, so the listing can start
    /// from their bounds before they are read; false when the audit keeps fewer (an interval
    /// range), and the listing waits for the tries.
    pub list_early: bool,
}

/// The created-at window to list for tries with these bounds: the earliest start minus `slack`
/// to the latest end plus `slack`; without any try, what the audit's window asks for.
fn listing_window(
    bounds: airflow_db::TryBounds,
    filter: &airflow_db::Filter,
    slack: i64,
) -> provider_http::Window {
    match (bounds.first_start, bounds.last_end) {
        (Some(from), Some(to)) => provider_http::Window {
            from: Some(from - slack),
            to: Some(to + slack),
        },
        _ => provider_http::Window {
            from: filter.since,
            to: filter.until,
        },
    }
}

/// The configured listing of `window`, read now.
fn list_for(config: &Config, window: provider_http::Window) -> ProviderRead {
    match &config.provider.source {
        Source::Listing(api) => runtime()?.block_on(list(api, window)),
        _ => unreachable!("only a listing waits for the tries' window"),
    }
}

async fn list(api: &provider_http::ProviderApi, window: provider_http::Window) -> ProviderRead {
    let listed = provider_http::list(api, window).await?;
    let covered = crate::prepare::ProviderWindow {
        from: window.from,
        to: window.to,
    };
    Ok((listed.provider, Some(covered), listed.coverage.warnings))
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
    config: &Config,
    filter: &airflow_db::Filter,
    shared_journal: Option<&str>,
    early: Option<&mut dyn FnMut(airflow_db::TryBounds)>,
) -> Result<AttemptsRead> {
    let read = |attempts, warnings| AttemptsRead {
        attempts,
        warnings,
        journal: None,
    };
    match &config.attempts {
        Source::Snapshot(path) => Ok(read(
            snapshot::read(path, Table::Attempts, &snapshot::Mapping::default())?,
            Vec::new(),
        )),
        Source::Database(database) => runtime()?.block_on(async {
            let mut transaction = database::ReadTransaction::begin(database).await?;
            let query = airflow_db::AttemptsQuery::prepare(&mut transaction, filter).await?;
            if let Some(early) = early {
                let started = std::time::Instant::now();
                early(query.bounds(&mut transaction).await?);
                crate::timing::phase("read:attempts:bounds", started);
            }
            let attempts = query.read(&mut transaction).await?;
            let journal = match shared_journal {
                Some(table) => {
                    Some(journal_db::read_in(&mut transaction, table, &mapping(config)).await?)
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
