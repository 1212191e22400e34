//! Stage 2, read: the three canonical tables, from the configured sources (the provider listed
//! over the window the audited tries need) or from a saved snapshot; saved as a snapshot when
//! asked. The audit starts on the attempts and the journal as soon as they are read
//! ([`Read`]): a provider listing, the slowest source, is still running meanwhile.

use std::borrow::Cow;

use polars::prelude::DataFrame;

use crate::config::Config;
use crate::error::Result;
use crate::model::{READ_ON_DEMAND, SourceColumn, Table};
use crate::rules;
use crate::sources::{self, Tables};
use crate::timestamp;

use super::scope::{self, AuditOptions, DEFAULT_SLACK};

/// What has been read when the audit starts: the attempts and the journal, and the provider
/// either with them or still being read.
pub enum Read<'a> {
    /// All three tables: a snapshot, or tables read before.
    Whole(Cow<'a, Tables>),
    /// The attempts and the journal from the configured sources, the provider still being
    /// read; [`Read::tables`] waits for it.
    Pending {
        pending: sources::Pending<'a, 'a>,
        options: &'a AuditOptions,
        started: std::time::Instant,
    },
}

impl<'a> Read<'a> {
    pub fn attempts(&self) -> &DataFrame {
        match self {
            Read::Whole(tables) => &tables.attempts,
            Read::Pending { pending, .. } => pending.attempts(),
        }
    }

    pub fn journal(&self) -> &DataFrame {
        match self {
            Read::Whole(tables) => &tables.journal,
            Read::Pending { pending, .. } => pending.journal(),
        }
    }

    /// The three tables, when they were all read at once.
    pub fn whole(&self) -> Option<&Tables> {
        match self {
            Read::Whole(tables) => Some(tables),
            Read::Pending { .. } => None,
        }
    }

    /// Whether [`tables`](Self::tables) saves the three tables as a snapshot once the provider
    /// is read, which sets their `snapshot_hash` from its manifest.
    pub fn saved_once_read(&self) -> bool {
        matches!(self, Read::Pending { options, .. } if options.save_snapshot.is_some())
    }

    /// The three tables, once the provider is read.
    pub fn tables(self) -> Result<Cow<'a, Tables>> {
        match self {
            Read::Whole(tables) => Ok(tables),
            Read::Pending {
                pending,
                options,
                started,
            } => {
                let mut tables = pending.tables()?;
                // Saved as a snapshot: its manifest's content hash is these tables', hashed once.
                if let Some(manifest) = read(&tables, options, started)? {
                    tables.snapshot_hash = Some(manifest.content_hash);
                }
                Ok(Cow::Owned(tables))
            }
        }
    }
}

/// Reads the sources (or the snapshot) and hands them to `then` as soon as the attempts and
/// the journal are read.
pub fn tables_then<T>(
    config: &Config,
    options: &AuditOptions,
    then: impl FnOnce(Read<'_>) -> Result<T>,
) -> Result<T> {
    let started = std::time::Instant::now();
    match &options.from_snapshot {
        Some(dir) => {
            let mut tables = sources::saved::load(dir, &left_unread(options))?.0;
            read(&tables, options, started)?;
            // Saved by now, if asked: the snapshot keeps the rows as they were read.
            let ordering = std::time::Instant::now();
            super::order::in_time_order(&mut tables)?;
            crate::timing::phase("read:order", ordering);
            then(Read::Whole(Cow::Owned(tables)))
        }
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
            sources::load_then(config.sources(), &filter, &window, |pending| {
                crate::timing::phase("read:attempts+journal", started);
                // What reading them freed (the SQLite runs and their index, batches, builders'
                // growth) goes back before they are prepared on other threads (`memory`).
                crate::memory::release_free();
                then(Read::Pending {
                    pending,
                    options,
                    started,
                })
            })
        }
    }
}

/// The columns of `model::READ_ON_DEMAND` an audit of a snapshot leaves NULL, undecoded:
/// those neither its rules, its plan nor its verdicts frame read. A part's audit
/// (`--partition-out`) reads what a plan and a frame read too, since the merge plans from the
/// rows it writes and merges the parts' frames; saved again, the snapshot keeps every column.
pub fn left_unread(options: &AuditOptions) -> Vec<SourceColumn> {
    if options.save_snapshot.is_some() {
        return Vec::new();
    }
    let plans = options.plan || options.partition_out.is_some();
    // A part's result holds its verdicts frame.
    let framed = !options.without_verdicts_frame || options.partition_out.is_some();
    let selected = rules::selected(&options.rules);
    let read = |column: &SourceColumn| {
        (plans && rules::repair::plan_reads(column))
            || (framed && crate::verdicts::FRAME_READS.contains(column))
            || selected.iter().any(|rule| rule.reads().contains(column))
    };
    READ_ON_DEMAND
        .iter()
        .filter(|column| !read(column))
        .copied()
        .collect()
}

/// The read's timings, and the snapshot saved when asked (its manifest).
fn read(
    tables: &Tables,
    options: &AuditOptions,
    started: std::time::Instant,
) -> Result<Option<sources::saved::Manifest>> {
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
        return sources::saved::save(dir, tables, window).map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unread(options: AuditOptions) -> Vec<String> {
        left_unread(&options)
            .iter()
            .map(|column| format!("{}.{}", column.table.name(), column.name))
            .collect()
    }

    fn rules(codes: &[&str]) -> AuditOptions {
        AuditOptions {
            rules: codes.iter().map(|code| code.to_string()).collect(),
            without_verdicts_frame: true,
            ..AuditOptions::default()
        }
    }

    /// What no rule, no plan and no verdicts frame reads is left unread; each rule, the plan
    /// and the frame add their own columns back; a snapshot saved again reads everything.
    #[test]
    fn an_audit_reads_the_columns_its_rules_and_plan_name() {
        let nobodys = [
            "attempts.run_type",
            "attempts.pid",
            "attempts.queued_at",
            "provider.raw",
        ];
        assert_eq!(unread(rules(&[])), nobodys);
        assert_eq!(
            unread(rules(&["D001", "l001"])),
            READ_ON_DEMAND
                .iter()
                .map(|column| format!("{}.{}", column.table.name(), column.name))
                .collect::<Vec<_>>()
        );
        let c001 = unread(rules(&["C001"]));
        assert!(!c001.contains(&"attempts.hostname".to_string()));
        assert!(c001.contains(&"attempts.pid".to_string()));
        let framed = unread(AuditOptions {
            without_verdicts_frame: false,
            ..rules(&["D001"])
        });
        assert!(
            !framed
                .iter()
                .any(|c| c == "attempts.hostname" || c == "attempts.pid")
        );
        assert!(framed.contains(&"attempts.run_type".to_string()));
        let k002 = unread(rules(&["K002"]));
        assert!(!k002.iter().any(|column| column.ends_with("payload_hash")));
        assert!(k002.contains(&"journal.approval_id".to_string()));
        let planned = unread(AuditOptions {
            plan: true,
            ..rules(&["D001"])
        });
        assert!(planned.contains(&"journal.payload_hash".to_string()));
        assert!(!planned.contains(&"provider.payload_hash".to_string()));
        let saving = AuditOptions {
            save_snapshot: Some("out".into()),
            ..rules(&["D001"])
        };
        assert!(unread(saving).is_empty());
    }
}
