//! The audit, one stage after another, the same for `audit`, `trace` and `ttl-risk`:
//!
//! ```text
//! scope    (scope.rs)    flags, config        -> which runs, journal rows, provider window
//! read     (read.rs)     sources or snapshot  -> the canonical tables
//!          (order.rs)    a snapshot's tables  -> its rows in time order, if they come in none
//! prepare  (prepare.rs)  the scoped rows      -> the joined frames, objects of elsewhere set aside
//! check    (check.rs)    the joined frames    -> findings (rules) and a verdict per try
//! plan     (this file)   findings             -> the repair plan, when asked
//! partition (partition.rs) report, frames     -> with --partition-out: what `onceonly merge` needs
//! ```
//!
//! The read hands over the attempts and the journal as soon as they are read: scope and
//! prepare start on them while a provider listing (the slowest source) is still running, and
//! finish with the objects once the provider is read (`read::Read`, `prepare::Early`).
//!
//! The result, `Audit`, holds the report, the verdicts and the plan, and answers the questions
//! the commands that show more than the report ask of the joined frames (`ask.rs`).

mod ask;
mod check;
mod order;
mod partition;
mod prepare;
mod read;
mod scope;

pub use ask::{IntentKeys, JournalRow, ProviderObject, TriedInterval};
pub use order::FEWEST_ROWS as FEWEST_ROWS_PUT_IN_ORDER;
pub use partition::PartitionOut;
pub use read::left_unread;
pub use scope::{AuditOptions, DEFAULT_SLACK, listing_window};

use std::borrow::Cow;
use std::thread::{Scope, ScopedJoinHandle};

use polars::prelude::DataFrame;

use crate::config::Config;
use crate::error::Result;
use crate::model::Table;
use crate::plan::Plan;
use crate::prepare::Prepared;
use crate::report::{Coverage, Report, SourceCoverage, Summary};
use crate::sources::{self, Tables};
use crate::timestamp;
use crate::verdicts::Verdicts;

/// What an audit produced: the report, a verdict for every operation try, and the repair plan
/// when one was asked for.
pub struct Audit {
    pub report: Report,
    verdicts: Verdicts,
    /// The verdicts frame, once asked for.
    verdicts_frame: std::sync::OnceLock<DataFrame>,
    /// The audit was told nothing would ask for the frame
    /// (`AuditOptions::without_verdicts_frame`), so what it shows may not have been read.
    without_verdicts_frame: bool,
    pub plan: Option<Plan>,
    /// The `[[operation]]`s (their places in the config) that match a task of the audited
    /// tries, audited under them or shadowed by an earlier one: the others match nothing in
    /// the audit's scope (`crate::known`).
    pub operations_matching: std::collections::BTreeSet<usize>,
    /// The joined frames the rules read: asked through `ask.rs`, never changed.
    prepared: Prepared,
}

impl Audit {
    /// The verdicts frame: a row per operation try with its identity, state, key, object and
    /// verdict (`crate::verdicts`), made when first asked for.
    pub fn verdicts(&self) -> Result<&DataFrame> {
        if let Some(frame) = self.verdicts_frame.get() {
            return Ok(frame);
        }
        if self.without_verdicts_frame {
            return Err(crate::error::Error::Engine {
                doing: "computing verdicts".into(),
                message: "the audit was run without its verdicts frame".into(),
            });
        }
        let frame = self.verdicts.frame(&self.prepared)?;
        Ok(self.verdicts_frame.get_or_init(|| frame))
    }

    /// The report, the verdicts frame unless the audit was run without it
    /// (`AuditOptions::without_verdicts_frame`; only then is it made) and the plan, the joined
    /// frames (the bulk of the memory) freed.
    pub fn into_results(self) -> Result<(Report, Option<DataFrame>, Option<Plan>)> {
        let verdicts = match self.without_verdicts_frame {
            false => Some(self.verdicts()?.clone()),
            true => None,
        };
        Ok((self.report, verdicts, self.plan))
    }
}

/// Reads the configured sources (or a snapshot) and audits them.
pub fn run(config: &Config, options: &AuditOptions) -> Result<Audit> {
    let mut options = options.clone();
    if options.slack.is_none() {
        options.slack = config.provider.source.listing_slack();
    }
    read::tables_then(config, &options, |read| audit_read(config, read, &options))
}

/// Audits tables already read.
pub fn audit_tables(config: &Config, tables: &Tables, options: &AuditOptions) -> Result<Audit> {
    audit_read(config, read::Read::Whole(Cow::Borrowed(tables)), options)
}

/// Audits what `read` gives: the tries and the journal are cut and prepared as soon as they
/// are read, while a provider listing may still be running, and the objects once the provider
/// is read.
fn audit_read(config: &Config, read: read::Read<'_>, options: &AuditOptions) -> Result<Audit> {
    // A plan quotes the inputs' fingerprint, which for tables read from live sources means
    // hashing their content as a snapshot's manifest would; it is worked out on threads of its
    // own beside the audit.
    std::thread::scope(|threads| {
        let mut fingerprint = options.plan.then(|| Fingerprint::start(threads, &read));
        let (cut, tries) = match prepare::Cut::of(&read, options) {
            Ok((cut, tries)) => (Ok(cut), Some(tries)),
            Err(error) => (Err(error), None),
        };
        let early = cut
            .as_ref()
            .ok()
            .zip(tries)
            .map(|(cut, tries)| prepare::Early::of(config, cut, tries));
        // What preparing freed goes back before the rest of a listing that may still be
        // running, and the objects after it, allocate on other threads.
        crate::memory::release_free_for_other_threads();
        // What the provider's read says comes before what the tries' preparing says: the
        // errors come in the order of the stages.
        let mut tables = read.tables()?;
        // Putting the listing together freed its pages, on the threads that decoded them.
        crate::memory::release_free_for_other_threads();
        let early = match early {
            Some(early) => early?,
            None => return Err(cut.err().expect("a cut that failed has its error")),
        };
        if let Some(fingerprint) = &mut fingerprint {
            fingerprint.provider(threads, &tables);
        }
        // The objects' raw JSON is for a snapshot (saved by now) and the plan's fingerprint
        // (hashed from its own copy): nothing after reads it, so it goes before the objects
        // are prepared. A snapshot read without it has none. So do the attempts' columns only
        // preparing the tries read, prepared by now: the prepared tries keep none of them.
        if let Cow::Owned(tables) = &mut tables {
            let _absent = tables.provider.drop_in_place("raw");
            tables.attempts = crate::prepare::model::without_read_while_preparing(&tables.attempts);
        }
        audit_with(config, tables, early, options, fingerprint)
    })
}

/// The plan's inputs fingerprint being worked out: the attempts' and the journal's hashes from
/// when they are read, the provider's from when it is (`sources::saved::fingerprint`); a
/// snapshot's own content hash when the tables are one, or are about to be saved as one.
enum Fingerprint<'scope> {
    Known(String),
    /// The tables are being saved as a snapshot (`--save-snapshot`), which hashes them: its
    /// manifest's content hash is the fingerprint, known once the provider is read.
    Saving,
    Hashing {
        tries_and_journal: ScopedJoinHandle<'scope, Result<[String; 2]>>,
        provider: Option<ScopedJoinHandle<'scope, Result<String>>>,
    },
}

impl<'scope> Fingerprint<'scope> {
    fn start<'env>(threads: &'scope Scope<'scope, 'env>, read: &read::Read<'_>) -> Self {
        if let Some(hash) = read.whole().and_then(|tables| tables.snapshot_hash.clone()) {
            return Fingerprint::Known(hash);
        }
        if read.saved_once_read() {
            return Fingerprint::Saving;
        }
        let (attempts, journal) = (read.attempts().clone(), read.journal().clone());
        Fingerprint::Hashing {
            tries_and_journal: threads.spawn(move || {
                let started = std::time::Instant::now();
                let hashes = [
                    sources::content::table_hash(&attempts)?,
                    sources::content::table_hash(&journal)?,
                ];
                crate::timing::phase("fingerprint:attempts+journal", started);
                Ok(hashes)
            }),
            provider: None,
        }
    }

    /// Starts hashing the provider, now read; tables just saved as a snapshot have their
    /// manifest's content hash, which is the fingerprint.
    fn provider<'env>(&mut self, threads: &'scope Scope<'scope, 'env>, tables: &Tables) {
        if let Some(hash) = &tables.snapshot_hash {
            *self = Fingerprint::Known(hash.clone());
            return;
        }
        if let Fingerprint::Hashing { provider, .. } = self {
            let objects = tables.provider.clone();
            *provider = Some(threads.spawn(move || {
                let started = std::time::Instant::now();
                let hash = sources::content::table_hash(&objects);
                crate::timing::phase("fingerprint:provider", started);
                hash
            }));
        }
    }

    fn finish(self) -> Result<String> {
        match self {
            Fingerprint::Known(hash) => Ok(hash),
            Fingerprint::Saving => {
                unreachable!("a saved snapshot's hash is known once the provider is read")
            }
            Fingerprint::Hashing {
                tries_and_journal,
                provider,
            } => {
                let [attempts, journal] = tries_and_journal
                    .join()
                    .expect("hashing the tables does not panic")?;
                let provider = provider
                    .expect("the provider is hashed once read")
                    .join()
                    .expect("hashing the tables does not panic")?;
                Ok(sources::saved::fingerprint_of(&[
                    attempts, journal, provider,
                ]))
            }
        }
    }
}

fn audit_with(
    config: &Config,
    tables: Cow<'_, Tables>,
    early: prepare::Early<'_>,
    options: &AuditOptions,
    fingerprint: Option<Fingerprint<'_>>,
) -> Result<Audit> {
    let started = std::time::Instant::now();
    let (prepared, objects_left_out, scoped) = early.finish(config, &tables, options)?;
    crate::timing::phase("prepare", started);
    crate::timing::size("tries", &prepared.tries);
    crate::timing::size("journal (prepared)", &prepared.journal);
    crate::timing::size("objects", &prepared.objects);

    let sources = Table::ALL
        .iter()
        .map(|table| SourceCoverage {
            table: table.name(),
            source: tables.origin(*table).to_string(),
            rows: tables.get(*table).height(),
            rows_audited: match table {
                Table::Attempts => scoped.attempts,
                Table::Journal => scoped.journal,
                Table::Provider => prepared.objects.height(),
            },
        })
        .collect();
    let noticed = check::noticed(config, &prepared)?;
    let mut warnings = tables.warnings.clone();
    warnings.extend(noticed.warnings());
    // The tables as read are not needed past this point: what the prepared frames do not share
    // with them (the objects' raw JSON; the rows a scoped audit cut away) goes, with what
    // preparing freed, before the rules and the verdicts allocate on threads of their own.
    // Tables the caller lent stay the caller's.
    let read_at = tables
        .read_at
        .unwrap_or_else(|| chrono::Utc::now().timestamp_micros());
    drop(tables);
    crate::memory::release_free_for_other_threads();

    let checked = check::run(config, &prepared, options, read_at)?;

    let window = scoped.window;
    let coverage = Coverage {
        since: options.since.map(timestamp::format),
        until: options.until.map(timestamp::format),
        interval_from: options.interval_from.map(timestamp::format),
        interval_to: options.interval_to.map(timestamp::format),
        dag: options.dag.clone(),
        sources,
        provider_from: window.from.map(timestamp::format),
        provider_to: window.to.map(timestamp::format),
        interval_basis: checked.interval_basis,
        operations: config.operations.iter().map(|op| op.name.clone()).collect(),
        runs: checked.runs,
        tries: prepared.tries.height(),
        rules_skipped: checked.rules_skipped,
        warnings,
        objects_left_out,
        in_flight: checked.in_flight,
    };
    let findings = checked.findings;
    let summary = Summary::new(&findings, checked.verdicts.counts.clone());
    let plan = plan(&findings, &prepared, fingerprint)?;
    let mut report = Report {
        format_version: crate::report::FORMAT_VERSION,
        coverage,
        summary,
        findings,
        baseline: None,
    };
    if let Some(path) = &options.baseline {
        report.compare(
            &path.display().to_string(),
            earlier_findings(path)?,
            &options.rules,
        );
    }
    if let Some(out) = &options.partition_out {
        partition::write(
            out,
            &options.rules,
            &report,
            &checked.verdicts.frame(&prepared)?,
            &prepared,
            &noticed,
        )?;
    }
    Ok(Audit {
        report,
        verdicts: checked.verdicts,
        verdicts_frame: std::sync::OnceLock::new(),
        without_verdicts_frame: options.without_verdicts_frame,
        plan,
        operations_matching: (noticed.auditing.iter())
            .chain(noticed.shadowed.keys())
            .copied()
            .collect(),
        prepared,
    })
}

/// Stage 5, plan: the repairs of the findings (`crate::plan`), when a plan was asked for (the
/// inputs' fingerprint is being worked out).
fn plan(
    findings: &[crate::rules::Finding],
    prepared: &Prepared,
    fingerprint: Option<Fingerprint<'_>>,
) -> Result<Option<Plan>> {
    let Some(fingerprint) = fingerprint else {
        return Ok(None);
    };
    let fingerprint = fingerprint.finish()?;
    // What the rules and the verdicts worked with goes back before the plan allocates.
    crate::memory::release_free();
    plan_of(findings, &prepared.objects, &prepared.journal, fingerprint).map(Some)
}

/// The repair plan of `findings` from the provider objects and journal rows as prepare has
/// them (`objects`, `journal`; only the rows the findings name are read): the plan stage, for
/// an audit and for the merge of a partitioned one.
pub fn plan_of(
    findings: &[crate::rules::Finding],
    objects: &DataFrame,
    journal: &DataFrame,
    inputs_fingerprint: String,
) -> Result<Plan> {
    let started = std::time::Instant::now();
    let named = crate::rules::repair::NamedRows::read(objects, journal, findings)?;
    let plan = crate::plan::build(findings, &named, inputs_fingerprint)?;
    crate::timing::phase("plan", started);
    Ok(plan)
}

/// The findings of an earlier report, JSON (`--format json`) or NDJSON (`--format ndjson`).
pub fn earlier_findings(path: &std::path::Path) -> Result<Vec<serde_json::Value>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| crate::error::Error::io(&shown, err))?;
    let not_a_report = |detail: String| {
        crate::error::Error::input(
            crate::error::Location::source(&shown),
            format!("not an onceonly report (--format json or ndjson): {detail}"),
        )
    };
    if let Ok(report) = serde_json::from_str::<serde_json::Value>(&text) {
        return match report.get("findings").and_then(|f| f.as_array()) {
            Some(findings) => Ok(findings.clone()),
            None => Err(not_a_report("it has no `findings` list".into())),
        };
    }
    let mut findings = Vec::new();
    for (index, line) in text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
    {
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|err| not_a_report(format!("line {}: {err}", index + 1)))?;
        if value["type"] == "finding" {
            findings.push(value);
        }
    }
    Ok(findings)
}
