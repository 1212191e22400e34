//! `onceonly ttl-risk`: before a backfill or a clear, which intervals would a re-run export
//! again because the provider has forgotten their idempotency keys?
//!
//! Per interval of the DAG in the range:
//! * `safe`: nothing live exists for it; a re-run creates its first object;
//! * `deduplicated`: an object exists and the provider still remembers the key a re-run would
//!   send, so the re-run gets the same object back (until the key expires); also when that
//!   object was voided since: the re-run gets the void object back (as `[provider] replay`
//!   says) and exports nothing;
//! * `at-risk`: an object exists and the key has expired, or a re-run would send a key the
//!   provider never saw (an unstable key): a re-run creates a duplicate;
//! * `unknown`: what decides it is not known (no key TTL, no key).

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{Config, Replay};
use crate::engine::{self, AuditOptions};
use crate::error::{Error, Result};
use crate::report::ttl_risk::{IntervalRisk, TtlRisk, WithoutRun};
use crate::retention::KeyTtl;
use crate::timestamp;

#[derive(Debug, Clone)]
pub struct TtlRiskOptions {
    /// A dag_id or a glob (`orders_*`): each DAG it matches is judged as its own.
    pub dag: String,
    /// Logical-date range, both ends included.
    pub from: i64,
    pub to: i64,
    /// `--ttl`: overrides every configured TTL.
    pub ttl: Option<KeyTtl>,
    /// When the re-run would happen (default: now).
    pub at: i64,
    /// The planned Airflow 3 backfill the range was read from (`--backfill-id`).
    pub backfill: Option<PlannedBackfill>,
    /// `--allow-empty`: a DAG without a try of an operation task, or a range without an
    /// interval, is reported (exit 0) rather than refused (exit 2).
    pub allow_empty: bool,
}

/// What ttl-risk takes from a planned backfill besides its DAG and range.
#[derive(Debug, Clone)]
pub struct PlannedBackfill {
    pub id: i64,
    pub reprocess_behavior: String,
    /// What Airflow decided for each logical date (`Backfill::left_alone`).
    pub left_alone: BTreeMap<i64, Option<String>>,
}

const CHECK_THEN_CREATE: &str = "skip it in the re-run (reprocess_behavior \"none\"), or check-then-create (look for a committed journal row before calling the provider), or export under a new key version with a new approval";

pub fn run(config: &Config, options: &TtlRiskOptions) -> Result<TtlRisk> {
    let audit_options = AuditOptions {
        dag: Some(options.dag.clone()),
        allow_empty: options.allow_empty,
        ..AuditOptions::default()
    };
    let audit = engine::run(config, &audit_options)?;
    // A --dag that matches no DAG, an [[operation]] that matches no task, a DAG without a try
    // of an operation task: nothing to judge, never "safe".
    crate::known::refuse_nothing(config, &audit_options, &audit)?;
    let mut risks = Vec::new();
    let mut sources = BTreeSet::new();
    let mut without = Vec::new();
    for dag in audit.dag_ids(&options.dag)? {
        risks.extend(dag_risks(config, &audit, &dag, options, &mut sources)?);
        without.push((dag.clone(), without_run(&audit, &dag, options)?));
    }
    let mut summary = BTreeMap::new();
    for class in ["safe", "deduplicated", "at-risk", "unknown"] {
        summary.insert(class, risks.iter().filter(|r| r.class == class).count());
    }
    let without_run = all_without_run(without);
    if risks.is_empty() && without_run.count.unwrap_or(0) == 0 && !options.allow_empty {
        return Err(Error::usage(
            "--allow-empty",
            format!(
                "nothing to judge: no run of {:?} has an interval from {} to {}, and none is known to be missing ({}); pass --allow-empty to accept an empty range",
                options.dag,
                timestamp::format(options.from),
                timestamp::format(options.to),
                without_run.schedule
            ),
        ));
    }
    Ok(TtlRisk {
        without_run,
        dag_id: options.dag.clone(),
        from: timestamp::format(options.from),
        to: timestamp::format(options.to),
        at: timestamp::format(options.at),
        backfill_id: options.backfill.as_ref().map(|backfill| backfill.id),
        reprocess_behavior: (options.backfill.as_ref())
            .map(|backfill| backfill.reprocess_behavior.clone()),
        ttl_source: (!sources.is_empty())
            .then(|| sources.into_iter().collect::<Vec<_>>().join("; ")),
        intervals: risks,
        summary,
        warnings: audit.report.coverage.warnings.clone(),
    })
}

/// The intervals of one DAG in the range, classed, as they stood at `--at`: only the tries
/// started, the intents recorded and the objects created before it count. Where each TTL
/// came from goes into `sources`.
fn dag_risks(
    config: &Config,
    audit: &engine::Audit,
    dag: &str,
    options: &TtlRiskOptions,
    sources: &mut BTreeSet<String>,
) -> Result<Vec<IntervalRisk>> {
    let (from, to, at) = (options.from, options.to, options.at);
    let intervals = audit.tried_intervals(dag, from, to, at)?;

    let id = |pipeline: Option<i64>, map: Option<i64>, start: Option<i64>| {
        (pipeline, map.unwrap_or(-1), start.unwrap_or(0))
    };
    // Journal keys per interval.
    let mut journal_by_interval = BTreeMap::new();
    for keys in audit.intent_keys(dag, from, to, at)? {
        journal_by_interval.insert(
            id(keys.pipeline, keys.map_index, keys.iv_start),
            (keys.last_key, keys.key_count),
        );
    }
    // Live and void objects per interval: (id, key, created, status). Every object of the
    // intervals counts, live or void: a re-run under a key the provider still remembers gets
    // a voided object back too.
    type Seen = (String, Option<String>, i64, String);
    let mut objects_by_interval: BTreeMap<_, Vec<Seen>> = BTreeMap::new();
    let mut void_by_interval: BTreeMap<_, Vec<Seen>> = BTreeMap::new();
    for object in audit.objects_starting_in(dag, from, to, at)? {
        let by_interval = if object.live == Some(true) {
            &mut objects_by_interval
        } else {
            &mut void_by_interval
        };
        by_interval
            .entry(id(object.pipeline, object.map_index, object.iv_start))
            .or_default()
            .push((
                object.external_id.unwrap_or_default(),
                object.key,
                object.created_at.unwrap_or(0),
                object.status.unwrap_or_default(),
            ));
    }

    let ttl_of = |operation: &str| -> Option<(i64, String)> {
        if let Some(ttl) = &options.ttl {
            return Some((ttl.micros, format!("--ttl: {}", ttl.source)));
        }
        let op = config.operations.iter().find(|op| op.name == operation);
        if let Some(ttl) = op.and_then(|op| op.key_ttl) {
            return Some((
                ttl,
                format!(
                    "[[operation]] {operation} key_ttl {}",
                    timestamp::format_duration(ttl)
                ),
            ));
        }
        config.provider.key_ttl.map(|ttl| {
            (
                ttl,
                config.provider.key_ttl_source.clone().unwrap_or_else(|| {
                    format!("[provider] key_ttl {}", timestamp::format_duration(ttl))
                }),
            )
        })
    };

    let mut risks = Vec::new();
    for interval in &intervals {
        let key_id = id(interval.pipeline, interval.map_index, interval.iv_start);
        let operation = interval.operation.clone().unwrap_or_default();
        // Only where Airflow recorded that the backfill leaves the interval's logical date
        // alone is it not re-run; a date it did not record is taken as re-run.
        let left_alone = options
            .backfill
            .as_ref()
            .zip(interval.iv_start)
            .and_then(|(backfill, at)| Some((backfill, backfill.left_alone.get(&at)?.as_ref()?)));
        let rerun = left_alone.is_none();
        let journal = journal_by_interval.get(&key_id);
        let unstable = journal.is_some_and(|(_, count)| *count > 1);
        let key = interval
            .expected_key
            .clone()
            .or_else(|| journal.and_then(|(last, _)| last.clone()));
        let live = objects_by_interval
            .get(&key_id)
            .cloned()
            .unwrap_or_default();
        let mut risk = IntervalRisk {
            dag_id: dag.to_string(),
            operation: operation.clone(),
            map_index: interval.map_index.unwrap_or(-1),
            interval: interval.label.clone().unwrap_or_default(),
            rerun,
            key: key.clone(),
            objects: live.iter().map(|(id, ..)| id.clone()).collect(),
            key_first_seen: None,
            key_expires: None,
            class: "unknown",
            reason: String::new(),
            repair: String::new(),
        };
        let first_under_key = live
            .iter()
            .filter(|(_, k, ..)| k.is_some() && *k == key)
            .map(|(_, _, created, _)| *created)
            .min();
        // The first object ever created under the key, if every one is void.
        let voided_under_key = void_by_interval
            .get(&key_id)
            .into_iter()
            .flatten()
            .filter(|(_, k, ..)| k.is_some() && *k == key)
            .min_by_key(|(id, _, created, _)| (*created, id.clone()));
        if let Some((backfill, why)) = left_alone {
            risk.class = "safe";
            risk.reason = format!(
                "the backfill does not re-run it (reprocess_behavior {}; Airflow recorded `{why}` for its logical date)",
                backfill.reprocess_behavior
            );
            risk.repair = "nothing to do".into();
        } else if let (true, Some((voided, _, created, status))) =
            (live.is_empty(), voided_under_key)
        {
            // The provider may still remember the key of a voided object: a re-run then gets
            // it back (as `replay` says) and exports nothing.
            match ttl_of(&operation) {
                Some((ttl, source)) if options.at < created + ttl => {
                    sources.insert(source);
                    let expires = created + ttl;
                    risk.key_first_seen = Some(timestamp::format(*created));
                    risk.key_expires = Some(timestamp::format(expires));
                    risk.class = "deduplicated";
                    risk.reason = format!(
                        "the provider still remembers the key (until {}): a re-run {}; nothing new is exported",
                        timestamp::format(expires),
                        replayed(config.provider.replay, voided, status)
                    );
                    risk.repair = format!(
                        "a re-run before {} {}; to export the interval again, use a new key version with a new approval",
                        timestamp::format(expires),
                        match config.provider.replay {
                            Replay::Frozen | Replay::Reject => "commits a void object (M001 next)",
                            Replay::Latest | Replay::Current =>
                                "sees a void object and exports nothing",
                        }
                    );
                }
                Some((ttl, source)) => {
                    sources.insert(source);
                    risk.class = "safe";
                    risk.key_first_seen = Some(timestamp::format(*created));
                    risk.key_expires = Some(timestamp::format(created + ttl));
                    risk.reason = format!(
                        "{voided} under the key is {status}, and the provider forgot the key at {}",
                        timestamp::format(created + ttl)
                    );
                    risk.repair =
                        "re-run freely: the re-run creates the interval's first live object".into();
                }
                None => {
                    risk.reason = format!(
                        "{voided} under the key is {status}; whether the provider still remembers the key (and replays it) is not known: set [provider] key_ttl or --ttl"
                    );
                    risk.repair =
                        "find the provider's key retention, then run ttl-risk again".into();
                }
            }
        } else if live.is_empty() {
            risk.class = "safe";
            risk.reason = "no live object exists for this interval".into();
            risk.repair = "re-run freely: the re-run creates its first object".into();
        } else if unstable {
            risk.class = "at-risk";
            risk.reason =
                "its tries used different keys (K001): a re-run sends a key the provider never saw"
                    .into();
            risk.repair = format!("fix the key derivation first; until then {CHECK_THEN_CREATE}");
        } else if key.is_none() {
            risk.reason =
                "no key template and no journal key: the key a re-run would send is not known"
                    .into();
            risk.repair = "add `key` to the [[operation]], or check the provider by hand".into();
        } else if first_under_key.is_none() {
            risk.class = "at-risk";
            risk.reason = "an object exists, but not under the key a re-run would send".into();
            risk.repair = CHECK_THEN_CREATE.into();
        } else if let (Some(first), Some((ttl, source))) = (first_under_key, ttl_of(&operation)) {
            sources.insert(source);
            let expires = first + ttl;
            risk.key_first_seen = Some(timestamp::format(first));
            risk.key_expires = Some(timestamp::format(expires));
            if options.at < expires {
                risk.class = "deduplicated";
                risk.reason = format!(
                    "the provider still remembers the key (until {})",
                    timestamp::format(expires)
                );
                risk.repair = format!(
                    "a re-run before {} gets {} back; after that it is at risk",
                    timestamp::format(expires),
                    risk.objects.join(", ")
                );
            } else {
                risk.class = "at-risk";
                risk.reason = format!(
                    "the key expired at {} ({} after the object was created): a re-run creates a duplicate",
                    timestamp::format(expires),
                    timestamp::format_duration(ttl)
                );
                risk.repair = CHECK_THEN_CREATE.into();
            }
        } else {
            risk.reason =
                "no key TTL is known: set [provider] key_ttl (a duration or a preset) or --ttl"
                    .into();
            risk.repair = "find the provider's key retention, then run ttl-risk again".into();
        }
        risks.push(risk);
    }
    Ok(risks)
}

/// The intervals without a run of every DAG judged, together: one DAG's as it is; for
/// several, their starts together, counted only when every DAG's schedule is known, and each
/// DAG's schedule named.
fn all_without_run(mut each: Vec<(String, WithoutRun)>) -> WithoutRun {
    if each.len() == 1 {
        return each.pop().expect("one").1;
    }
    if each.is_empty() {
        return WithoutRun {
            count: None,
            starts: Vec::new(),
            schedule: "not known: no DAG was judged".into(),
        };
    }
    let count = (each.iter())
        .map(|(_, without)| without.count)
        .sum::<Option<usize>>();
    let mut starts: Vec<String> = (each.iter())
        .flat_map(|(_, without)| without.starts.iter().cloned())
        .collect();
    starts.sort();
    let schedule = (each.iter())
        .map(|(dag, without)| format!("{dag}: {}", without.schedule))
        .collect::<Vec<_>>()
        .join("; ");
    WithoutRun {
        count,
        starts,
        schedule,
    }
}

/// The intervals of the range no run of the DAG covers (no try started before `--at`). The
/// schedule's step is the typical
/// length of the DAG's intervals (or, for point intervals such as Airflow 3's `@daily`, the
/// typical spacing of their starts), taken over all of the DAG's runs; each gap between known
/// intervals is split into as many steps as fit, so calendar months space evenly enough.
fn without_run(audit: &engine::Audit, dag: &str, options: &TtlRiskOptions) -> Result<WithoutRun> {
    let spans = audit.interval_spans(dag, options.at)?;
    let starts: Vec<i64> = spans.iter().filter_map(|(start, _)| *start).collect();
    let ends: Vec<Option<i64>> = spans.iter().map(|(_, end)| *end).collect();
    let mut starts_seen: Vec<i64> = starts.clone();
    starts_seen.dedup();
    let lengths: Vec<i64> = starts
        .iter()
        .zip(ends.iter())
        .filter_map(|(start, end)| end.map(|end| end - start))
        .filter(|length| *length > 0)
        .collect();
    let spacings: Vec<i64> = starts_seen
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .collect();
    let (step, from_what) = if lengths.len() * 2 > starts_seen.len() {
        (median(lengths), "length of its data intervals")
    } else {
        (median(spacings), "spacing of its runs' logical dates")
    };
    let Some(step) = step.filter(|_| starts_seen.len() >= 2) else {
        return Ok(WithoutRun {
            count: None,
            starts: Vec::new(),
            schedule: format!(
                "not known: the DAG's runs give {} interval(s), too few to infer its schedule",
                starts_seen.len()
            ),
        });
    };
    let in_range = |at: i64| at >= options.from && at <= options.to;
    let mut missing = Vec::new();
    let (first, last) = (starts_seen[0], starts_seen[starts_seen.len() - 1]);
    let mut at = first - step;
    while at >= options.from {
        if in_range(at) {
            missing.push(at);
        }
        at -= step;
    }
    for pair in starts_seen.windows(2) {
        let gap = pair[1] - pair[0];
        // Steps that fit the gap, rounded: months of 28 to 31 days count as one.
        let steps = ((gap + step / 2) / step).max(1);
        for k in 1..steps {
            let at = pair[0] + gap * k / steps;
            if in_range(at) {
                missing.push(at);
            }
        }
    }
    let mut at = last + step;
    while at <= options.to {
        missing.push(at);
        at += step;
    }
    missing.sort_unstable();
    Ok(WithoutRun {
        count: Some(missing.len()),
        starts: missing.into_iter().map(timestamp::format).collect(),
        schedule: format!(
            "every {}, the typical {from_what} ({} intervals read)",
            timestamp::format_duration(step),
            starts_seen.len()
        ),
    })
}

/// The middle value (the lower of the two middle ones), None for none.
fn median(mut values: Vec<i64>) -> Option<i64> {
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied()
}

/// What a re-run under a remembered key gets back for a voided object, as `replay` says.
fn replayed(replay: Replay, id: &str, status: &str) -> String {
    match replay {
        Replay::Frozen => format!(
            "gets {id}'s first response back (replay = frozen), which says it was created, though it is {status} now"
        ),
        Replay::Reject => format!(
            "sending the same body gets {id}'s first response back (replay = reject), which says it was created, though it is {status} now (a changed body is refused)"
        ),
        Replay::Latest => {
            format!("gets {id} back with its latest status (replay = latest), {status}")
        }
        Replay::Current => format!("gets {id} back as it is now (replay = current), {status}"),
    }
}

/// The range and reprocess behaviour of a planned backfill, from the metadata database.
pub fn backfill(config: &Config, id: i64) -> Result<crate::sources::airflow_db::Backfill> {
    let crate::config::Source::Database(database) = &config.attempts else {
        return Err(Error::usage(
            "--backfill-id",
            "reading a backfill needs [airflow] url (the metadata database)",
        ));
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| Error::io("the async runtime", err))?
        .block_on(crate::sources::airflow_db::read_backfill(database, id))
}
