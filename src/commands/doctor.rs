//! `onceonly doctor`: checks each configured source the way an audit would read it, and says
//! what is wrong in plain words: reachable, authorised, schema version, mapped columns present,
//! one page of the provider's listing parses.

use crate::config::{Config, Source};
use crate::error::{Error, Result};
use crate::model::Table;
use crate::sources::airflow_db::Filter;
use crate::sources::{airflow_api, airflow_db, journal_db, provider_http, snapshot};

/// One check's outcome, as a line for people.
pub struct Check {
    pub source: String,
    pub ok: bool,
    pub detail: String,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| Error::io("the async runtime", err))
}

fn check(source: String, outcome: Result<String>) -> Check {
    match outcome {
        Ok(detail) => Check {
            source,
            ok: true,
            detail,
        },
        Err(err) => Check {
            source,
            ok: false,
            detail: err.to_string(),
        },
    }
}

pub fn run(config: &Config) -> Result<Vec<Check>> {
    let runtime = runtime()?;
    let now = chrono::Utc::now().timestamp_micros();
    // An empty activity window: the schema, the columns and the query are checked, no rows read.
    let nothing = Filter {
        dag: None,
        since: Some(now),
        until: Some(now),
    };
    let mut checks = Vec::new();

    let attempts = match &config.attempts {
        Source::Snapshot(path) => snapshot::read(path, Table::Attempts, &Default::default()).map(|df| format!("{} tries readable", df.height())),
        Source::Database(database) => runtime.block_on(airflow_db::read(database, &nothing)).map(|read| {
            let mut detail = format!("connected, read-only; Airflow schema revision {}; the tables and columns onceonly reads are there", read.version);
            for warning in read.warnings {
                detail.push_str(&format!("; warning: {warning}"));
            }
            detail
        }),
        Source::Api(api) => runtime
            .block_on(airflow_api::read(api, &nothing))
            .map(|read| format!("reachable and authorised; {} tries in an empty window", read.attempts.height())),
        Source::Listing(_) => Err(Error::usage("[airflow]", "a provider listing cannot hold Airflow's tries")),
    };
    checks.push(check(
        format!("airflow: {}", config.attempts.describe()),
        attempts,
    ));

    let mapping = snapshot::Mapping {
        columns: config.journal.columns.clone(),
        phases: Some(config.journal.phases.clone()),
    };
    let journal = match &config.journal.source {
        Source::Snapshot(path) => snapshot::read(path, Table::Journal, &mapping),
        Source::Database(database) => runtime.block_on(journal_db::read(
            database,
            config.journal.table.as_deref().unwrap_or_default(),
            &mapping,
        )),
        _ => Err(Error::usage(
            "[journal]",
            "the journal is a file or a database table",
        )),
    }
    .map(|df| {
        format!(
            "{} rows; every mapped column present, every phase value known",
            df.height()
        )
    });
    checks.push(check(
        format!("journal: {}", config.journal.source.describe()),
        journal,
    ));

    let provider = match &config.provider.source {
        Source::Snapshot(path) => snapshot::read(path, Table::Provider, &Default::default())
            .map(|df| format!("{} objects readable", df.height())),
        Source::Listing(api) => {
            // One page: a cap of one page, read in one slice, over the last day.
            let mut probe = (**api).clone();
            probe.max_pages = 1;
            probe.concurrency = 1;
            probe.sub_windows = 1;
            let window = provider_http::Window {
                from: Some(now - 86_400_000_000),
                to: Some(now),
            };
            match runtime.block_on(provider_http::list(&probe, window)) {
                Ok(listed) => Ok(format!("reachable and authorised; the listing of the last day has {} objects on one page, all fields parse", listed.provider.height())),
                // The cap stops the second page: the first one was read and parsed.
                Err(Error::Incomplete { reason, .. }) if reason.contains("(max_pages)") => {
                    Ok("reachable and authorised; the first page of the last day parses (more pages follow)".to_string())
                }
                Err(err) => Err(err),
            }
        }
        _ => Err(Error::usage(
            "[provider]",
            "the provider is a file or a listing URL",
        )),
    };
    checks.push(check(
        format!("provider: {}", config.provider.source.describe()),
        provider,
    ));
    Ok(checks)
}
