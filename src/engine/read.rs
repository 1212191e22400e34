//! Stage 2, read: the three canonical tables, from the configured sources (the provider listed
//! over the window the audited tries need) or from a saved snapshot; saved as a snapshot when
//! asked.

use crate::config::Config;
use crate::error::Result;
use crate::model::Table;
use crate::sources::{self, Tables};
use crate::timestamp;

use super::scope::{self, AuditOptions, DEFAULT_SLACK};

pub fn tables(config: &Config, options: &AuditOptions) -> Result<Tables> {
    let started = std::time::Instant::now();
    let tables = match &options.from_snapshot {
        Some(dir) => sources::saved::load(dir, options.save_snapshot.is_some())?.0,
        None => {
            let filter = sources::airflow_db::Filter {
                dag: options.dag.clone(),
                since: options.since,
                until: options.until,
            };
            let window = sources::ListingWindow {
                slack: options.slack.unwrap_or(DEFAULT_SLACK),
                of_attempts: &|attempts| scope::listing_window(attempts, options),
                list_early: options.intervals().is_none(),
            };
            sources::load(config.sources(), &filter, &window)?
        }
    };
    crate::timing::phase("read", started);
    for table in Table::ALL {
        crate::timing::size(table.name(), tables.get(table));
    }
    if let Some(dir) = &options.save_snapshot {
        let window = sources::saved::Window {
            dag: options.dag.clone(),
            since: options.since.map(timestamp::format),
            until: options.until.map(timestamp::format),
            provider_from: tables
                .listed_window
                .and_then(|w| w.from)
                .map(timestamp::format),
            provider_to: tables
                .listed_window
                .and_then(|w| w.to)
                .map(timestamp::format),
        };
        sources::saved::save(dir, &tables, window)?;
    }
    Ok(tables)
}
