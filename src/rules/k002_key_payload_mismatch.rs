use polars::prelude::*;

use std::collections::BTreeSet;

use crate::cells::{groups, text_column, texts};
use crate::config::Replay;
use crate::error::{EngineContext, Result};
use crate::prepare::Prepared;
use crate::rules::repair::{Kind, NamedRows, Repair, Safety};
use crate::rules::{Evidence, Finding, FindingDraft, declare_rule, impl_rule};

declare_rule! {
    /// ## What it detects
    /// One key seen with more than one payload hash, in the journal or at the provider.
    ///
    /// ## Why it matters
    /// One key must mean one business operation with one body. A provider given an old key and a
    /// new body either rejects the request or silently returns the first result, so the changed
    /// export (corrected figures, a new column) never reaches the consumer. With
    /// `[provider] replay = "reject"` (the provider answers a changed body with 422) the finding
    /// says which payloads never reached the provider and which one the export keeps.
    ///
    /// ## Example
    /// Try 1 sent `orders:2026-11-01` with payload `sha256:aa…`; after a fix to the query the
    /// interval was cleared and try 3 sent the same key with `sha256:bb…`.
    ///
    /// ## Repair
    /// If the new body is the one wanted, export it under a new key version with a new approval
    /// (`reexport-new-version`, needs approval); otherwise investigate why the body changed.
    pub struct KeyPayloadMismatch => "K002", "key-payload-mismatch", Error;
    reads Journal.payload_hash, Provider.payload_hash;
}
impl_rule!(KeyPayloadMismatch, check, repair);

fn check(_: &KeyPayloadMismatch, prepared: &Prepared) -> Result<Vec<Finding>> {
    // The keys seen with more than one payload (journal and provider together), found in one
    // pass over the key codes and hashes before any row is described.
    let tables = [
        (&prepared.journal, prepared.journal_key_codes()?),
        (&prepared.objects, prepared.object_key_codes()?),
    ];
    let mut first_payload: Vec<Option<&str>> = prepared.codes.per_key(None);
    let mut mismatched = prepared.codes.per_key(false);
    let hashes = tables
        .iter()
        .map(|(frame, _)| Ok(crate::cells::one_array(&text_column(frame, "payload_hash")?)))
        .collect::<Result<Vec<crate::cells::TextArray>>>()?;
    for ((_, keys), hashes) in tables.iter().zip(&hashes) {
        for (key, hash) in crate::cells::each_number(keys).zip(hashes.iter()) {
            let (Some(key), Some(hash)) = (key, hash) else {
                continue;
            };
            match first_payload[key as usize] {
                None => first_payload[key as usize] = Some(hash),
                Some(first) if first != hash => mismatched[key as usize] = true,
                Some(_) => {}
            }
        }
    }
    let of_mismatched = |frame: &DataFrame, keys: &UInt32Chunked| -> Result<LazyFrame> {
        let rows: BooleanChunked = keys
            .iter()
            .map(|key| Some(key.is_some_and(|key| mismatched[key as usize])))
            .collect();
        let picked = frame.filter(&rows).engine("K002")?;
        let picked = prepared.operations.with_column(&picked)?;
        Ok(crate::prepare::with_interval_labels(&picked)?.lazy())
    };
    let [(journal, journal_keys), (objects, object_keys)] = &tables;
    let from_journal = of_mismatched(journal, journal_keys)?.select([
        col("op_key").alias("key"),
        col("payload_hash"),
        concat_str(
            [
                lit("journal "),
                col("run_id"),
                lit("#"),
                col("try_number").cast(DataType::String),
            ],
            "",
            false,
        )
        .alias("seen_by"),
        col("dag_id"),
        col("operation"),
        col("interval"),
    ]);
    let from_provider = of_mismatched(objects, object_keys)?.select([
        col("key"),
        col("payload_hash"),
        concat_str([lit("provider "), col("external_id")], "", false).alias("seen_by"),
        col("dag_id"),
        col("operation"),
        col("interval"),
    ]);
    let mismatched = concat([from_journal, from_provider], UnionArgs::default())
        .engine("K002")?
        .filter(
            col("key")
                .is_not_null()
                .and(col("payload_hash").is_not_null()),
        )
        .unique_stable(None, UniqueKeepStrategy::First)
        .sort(["key", "payload_hash", "seen_by"], Default::default())
        .collect()
        .engine("K002")?;
    let (key, hash, seen_by) = (
        texts(&mismatched, "key")?,
        texts(&mismatched, "payload_hash")?,
        texts(&mismatched, "seen_by")?,
    );
    let (dag, operation, interval) = (
        texts(&mismatched, "dag_id")?,
        texts(&mismatched, "operation")?,
        texts(&mismatched, "interval")?,
    );
    groups(&mismatched, &["key"])?
        .into_iter()
        .map(|(first, members)| {
            let mut hashes: Vec<&str> = members
                .iter()
                .filter_map(|row| hash[*row].as_deref())
                .collect();
            hashes.dedup();
            let seen: Vec<String> = members
                .iter()
                .map(|row| {
                    format!(
                        "{}: {}",
                        seen_by[*row].as_deref().unwrap_or(""),
                        hash[*row].as_deref().unwrap_or("")
                    )
                })
                .collect();
            let external_ids = seen
                .iter()
                .filter_map(|s| s.strip_prefix("provider "))
                .filter_map(|s| s.split(':').next())
                .map(str::to_string)
                .collect();
            // A provider that refuses a changed body (replay = reject) never applied one: what
            // it holds under the key is all there is.
            let outcome = match prepared.replay {
                Replay::Reject => {
                    let exported: BTreeSet<&str> = members
                        .iter()
                        .filter(|row| seen_by[**row].as_deref().is_some_and(|by| by.starts_with("provider ")))
                        .filter_map(|row| hash[*row].as_deref())
                        .collect();
                    let refused: BTreeSet<&str> = hashes
                        .iter()
                        .copied()
                        .filter(|hash| !exported.contains(hash))
                        .collect();
                    format!(
                        "; the provider refuses a changed body under a known key (replay = reject): {} never reached it, and the export keeps {}",
                        join_or(&refused, "no other payload"),
                        join_or(&exported, "no payload the listing shows")
                    )
                }
                Replay::Frozen | Replay::Latest | Replay::Current => String::new(),
            };
            Ok(KeyPayloadMismatch::finding(FindingDraft {
                dag_id: members.iter().find_map(|row| dag[*row].clone()),
                operation: members.iter().find_map(|row| operation[*row].clone()),
                interval: members.iter().find_map(|row| interval[*row].clone()),
                message: format!(
                    "key {} carried {} different payloads ({}){outcome}",
                    key[first].as_deref().unwrap_or(""),
                    hashes.len(),
                    seen.join("; ")
                ),
                op_key: key[first].clone(),
                evidence: Evidence {
                    external_ids,
                    keys: vec![key[first].clone().unwrap_or_default()],
                    times: seen,
                    ..Evidence::default()
                },
            }))
        })
        .collect()
}

/// `a, b`, or `none` for an empty set.
fn join_or(texts: &BTreeSet<&str>, none: &str) -> String {
    if texts.is_empty() {
        none.to_string()
    } else {
        texts.iter().copied().collect::<Vec<_>>().join(", ")
    }
}

/// `reexport-new-version` (needs approval): the wanted payload under a new key version.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    let key = finding.op_key.clone().unwrap_or_default();
    vec![Repair {
        targets: finding.evidence.external_ids.clone(),
        preconditions: vec![
            format!("the changed payload under {key} is the one wanted"),
            "a new approval for the re-export".to_string(),
        ],
        explanation: format!(
            "one key carried different payloads: export the wanted payload under a new key version (e.g. {key}:v2) with a new approval; the provider may have kept the first body"
        ),
        ..Repair::new(
            Kind::ReexportNewVersion,
            Safety::NeedsApproval,
            "payload-changed",
            vec![key.clone()],
        )
    }]
}
