//! `onceonly doctor`: checks each configured source the way an audit would read it, and says
//! what is wrong in plain words: reachable, authorised, schema version, mapped columns present,
//! one page of the provider's listing parses, every `[[operation]]` matches a DAG and a task
//! the metadata has. A check that had nothing to look at (no row, no object) is a warning, not
//! a pass; a config whose environment variables are not set names all of them.

use crate::config::{Config, Source};
use crate::error::{Error, Result};
use crate::model::Table;
use crate::sources::airflow_db::Filter;
use crate::sources::{airflow_api, airflow_db, journal_db, provider_http, snapshot};

/// One check's outcome, as a line for people.
pub struct Check {
    pub source: String,
    pub ok: bool,
    /// Passed, but had nothing to look at: said, and not failed.
    pub warning: bool,
    pub detail: String,
}

/// The config, or an error naming every environment variable it names that is not set (the
/// config's own load stops at the first).
pub fn load(path: &std::path::Path) -> Result<Config> {
    Config::load(path).map_err(|err| {
        let unset = std::fs::read_to_string(path)
            .map(|text| crate::config::unset_environment(&text))
            .unwrap_or_default();
        if unset.is_empty() {
            return err;
        }
        let named: Vec<String> = unset
            .iter()
            .map(|(key, name)| format!("{name} ({key})"))
            .collect();
        Error::config(
            path.display().to_string(),
            format!(
                "{} environment variable{} the config names {} not set: {}",
                unset.len(),
                if unset.len() == 1 { "" } else { "s" },
                if unset.len() == 1 { "is" } else { "are" },
                named.join(", ")
            ),
        )
    })
}

/// A check that passed over nothing: a warning saying so.
fn nothing_to_check(check: Check, rows: usize, what: &str) -> Check {
    match (check.ok, rows) {
        (true, 0) => Check {
            warning: true,
            detail: format!("{}; but {what}: nothing to check", check.detail),
            ..check
        },
        _ => check,
    }
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
            warning: false,
            detail,
        },
        // One page read in doctor is not a partial read of a listing: the reason is the news.
        Err(Error::Incomplete { reason, .. }) => Check {
            source,
            ok: false,
            warning: false,
            detail: reason,
        },
        Err(err) => Check {
            source,
            ok: false,
            warning: false,
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

    let mut rows = None;
    let attempts = match &config.attempts {
        Source::Snapshot(path) => snapshot::read(path, Table::Attempts, &Default::default()).map(|df| {
            rows = Some(df.height());
            format!("{} tries readable", df.height())
        }),
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
    let airflow_read = attempts.is_ok();
    let mut airflow = check(format!("airflow: {}", config.attempts.describe()), attempts);
    if let Some(rows) = rows {
        airflow = nothing_to_check(airflow, rows, "the snapshot holds no try");
    }
    checks.push(airflow);

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
        (
            df.height(),
            format!(
                "{} rows; every mapped column present, every phase value known",
                df.height()
            ),
        )
    });
    let journal_rows = journal.as_ref().map_or(1, |(rows, _)| *rows);
    checks.push(nothing_to_check(
        check(
            format!("journal: {}", config.journal.source.describe()),
            journal.map(|(_, detail)| detail),
        ),
        journal_rows,
        "it has no row, so no phase value was checked",
    ));

    // How many objects were parsed: none is a warning.
    let mut objects = None;
    let provider = match &config.provider.source {
        Source::Snapshot(path) => {
            snapshot::read(path, Table::Provider, &Default::default()).map(|df| {
                objects = Some(df.height());
                format!("{} objects readable", df.height())
            })
        }
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
                Ok(listed) => {
                    objects = Some(listed.provider.height());
                    Ok(match listed.provider.height() {
                        0 => "reachable and authorised; the listing of the last day has no object".to_string(),
                        count => format!("reachable and authorised; the listing of the last day has {count} objects on one page, all fields parse"),
                    })
                }
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
    let provider = check(
        format!("provider: {}", config.provider.source.describe()),
        provider,
    );
    checks.push(match objects {
        Some(objects) => nothing_to_check(provider, objects, "no field of an object was parsed"),
        None => provider,
    });
    checks.push(operations(config, airflow_read));
    Ok(checks)
}

/// Every `[[operation]]` matches a DAG of the metadata and a task of it (`crate::known`).
fn operations(config: &Config, airflow_read: bool) -> Check {
    let source = format!("operations: {} [[operation]]", config.operations.len());
    let fail = |detail: String| Check {
        source: source.clone(),
        ok: false,
        warning: false,
        detail,
    };
    if config.operations.is_empty() {
        return fail("the config has no [[operation]]: an audit would check nothing".into());
    }
    if !airflow_read {
        return fail("not checked: the Airflow source could not be read".into());
    }
    let known = match crate::known::Known::read(config, None) {
        Ok(Some(known)) => known,
        Ok(None) => {
            return Check {
                source,
                ok: true,
                warning: true,
                detail: "not checked: the REST API is read a window at a time, so the DAGs and tasks it knows are not listed whole; an audit refuses an operation that matches no task it read".into(),
            };
        }
        Err(err) => return fail(err.to_string()),
    };
    let problems: Vec<String> = (config.operations.iter())
        .filter_map(|operation| known.operation_problem(operation))
        .collect();
    if !problems.is_empty() {
        return fail(problems.join("; "));
    }
    Check {
        source,
        ok: true,
        warning: false,
        detail: format!(
            "each matches a DAG and a task of {} ({} DAGs, {} tasks)",
            known.source,
            known.dags.len(),
            known.tasks.len()
        ),
    }
}
