//! `onceonly split`: reads the sources once and writes one snapshot per partition, for audits
//! that run apart (`audit --from-snapshot DIR/part-K --partition-out ...`) and a merge.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::engine::{self, AuditOptions};
use crate::error::{Error, Result};
use crate::partition::{self, PART_FILE, PartManifest, SplitInfo};
use crate::sources;
use crate::timestamp;

#[derive(Debug, Clone, Default)]
pub struct SplitOptions {
    /// Activity window, microseconds, as `audit --since/--until`.
    pub since: Option<i64>,
    pub until: Option<i64>,
    /// Margin around the tries for the provider window, microseconds.
    pub slack: Option<i64>,
    /// Split a saved snapshot instead of reading the sources.
    pub from_snapshot: Option<PathBuf>,
    pub partitions: usize,
}

/// The folder of part `part` under `out`.
pub fn part_dir(out: &Path, part: usize) -> PathBuf {
    out.join(format!("part-{part}"))
}

/// Writes `out/part-K` (K = 0..N-1), each a snapshot with `partition.json`; returns the folders.
pub fn run(config: &Config, options: &SplitOptions, out: &Path) -> Result<Vec<PathBuf>> {
    if options.partitions == 0 {
        return Err(Error::usage("--partitions", "must be at least 1"));
    }
    let audit_options = AuditOptions {
        since: options.since,
        until: options.until,
        slack: options.slack.or(config.provider.source.listing_slack()),
        ..AuditOptions::default()
    };
    let tables = match &options.from_snapshot {
        Some(dir) => sources::saved::load(dir, &[])?.0,
        None => {
            let filter = sources::airflow_db::Filter {
                dag: None,
                since: options.since,
                until: options.until,
            };
            let window = sources::ListingWindow {
                slack: audit_options.slack.unwrap_or(engine::DEFAULT_SLACK),
                of_attempts: &|attempts| engine::listing_window(attempts, &audit_options),
                list_early: true,
            };
            sources::load(config.sources(), &filter, &window)?
        }
    };
    // The provider window of the whole audit: around all audited tries when there is an
    // activity window, else what the listing covered (as `audit` scopes it).
    let windowed = options.since.is_some() || options.until.is_some();
    let window = if windowed {
        Some(engine::listing_window(&tables.attempts, &audit_options)?)
    } else {
        None
    };
    let provider_window = window.unwrap_or(tables.listed_window.unwrap_or_default());
    let fingerprint = sources::saved::fingerprint(&tables)?;
    let since = options.since.map(timestamp::format);
    let until = options.until.map(timestamp::format);
    let assignment = partition::assign(config, &tables, options.partitions)?;
    let split = SplitInfo {
        split_id: partition::split_id(
            &fingerprint,
            options.partitions,
            &[
                since.clone(),
                until.clone(),
                audit_options.slack.map(|slack| slack.to_string()),
            ],
        ),
        partitions: options.partitions,
        since: since.clone(),
        until: until.clone(),
        slack: audit_options.slack,
        provider_from: provider_window.from.map(timestamp::format),
        provider_to: provider_window.to.map(timestamp::format),
        inputs_fingerprint: fingerprint,
        rows: partition::rows(&tables),
        shared_objects: partition::shared_in_window(&tables, &assignment, window)?,
    };
    let mut dirs = Vec::new();
    for part in 0..options.partitions {
        let dir = part_dir(out, part);
        let tables = partition::part_tables(&tables, &assignment, part)?;
        let listed = tables.listed_window;
        let window = sources::saved::Window {
            dag: None,
            since: since.clone(),
            until: until.clone(),
            provider_from: listed.and_then(|w| w.from).map(timestamp::format),
            provider_to: listed.and_then(|w| w.to).map(timestamp::format),
        };
        sources::saved::save(&dir, &tables, window)?;
        let manifest = PartManifest {
            format_version: partition::FORMAT_VERSION,
            part,
            split: split.clone(),
        };
        let mut text =
            serde_json::to_string_pretty(&manifest).expect("a partition manifest serializes");
        text.push('\n');
        crate::output::file(&dir.join(PART_FILE), text.as_bytes())?;
        dirs.push(dir);
    }
    Ok(dirs)
}
