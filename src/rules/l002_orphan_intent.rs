use polars::prelude::*;

use crate::cells::groups;
use crate::error::Result;
use crate::prepare::Prepared;
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::rows::{JournalRows, pick_sorted};

declare_rule! {
    /// ## What it detects
    /// An intent without any committed row for its key and without any provider object under
    /// the key, inside the window the provider listing covered.
    ///
    /// ## Why it matters
    /// Nothing was created, so the operation never happened: the interval's export is missing.
    /// This is the good kind of failure: retrying with the same key is safe.
    ///
    /// ## Example
    /// Try 1 writes intent `orders:2026-11-01`, the provider answers 500 three times, the task
    /// exhausts its retries; the provider lists nothing under the key.
    ///
    /// ## Repair
    /// Clear the task so it runs again with the same key (`retry-same-key`, automatic).
    pub struct OrphanIntent => "L002", "orphan-intent", Info;
}
impl_rule!(OrphanIntent, check);

fn check(_: &OrphanIntent, prepared: &Prepared) -> Result<Vec<Finding>> {
    let object_keys = prepared
        .objects()
        .filter(col("key_id").is_not_null())
        .select([col("key_id")])
        .unique(None, UniqueKeepStrategy::Any);
    // The per-row flags are computed before grouping, so the group-by only takes `any` and
    // `min` of plain columns (filtering inside an aggregation runs once per group).
    let is_intent = col("phase").eq(lit("intent"));
    let orphans = prepared
        .journal()
        .select([
            col("key_id"),
            is_intent.clone().alias("intent"),
            crate::model::is_done(col("phase")).alias("done"),
            when(is_intent)
                .then(col("recorded_at"))
                .otherwise(lit(NULL).cast(crate::model::utc()))
                .alias("first_intent"),
        ])
        .group_by([col("key_id")])
        .agg([
            col("intent").any(true),
            col("done").any(true),
            col("first_intent").min(),
        ])
        .filter(col("intent").and(col("done").not()))
        .join(
            object_keys,
            [col("key_id")],
            [col("key_id")],
            JoinArgs::new(JoinType::Anti),
        )
        .with_column(col("first_intent").alias("recorded_at"))
        .filter(prepared.window.contains())
        .select([col("key_id")]);
    let rows = pick_sorted(
        &prepared.journal,
        |journal| {
            Ok(journal.join(
                orphans,
                [col("key_id")],
                [col("key_id")],
                JoinArgs::new(JoinType::Semi),
            ))
        },
        &["op_key", "recorded_at", "try_number"],
        "L002",
    )?;
    let journal = JournalRows::read(&rows)?;
    groups(&rows, &["op_key"])?
        .into_iter()
        .map(|(first, members)| {
            let evidence = journal.evidence(&members);
            let failed = members.iter().filter(|r| journal.phase[**r].as_deref() == Some("failed")).count();
            Ok(OrphanIntent::finding(FindingDraft {
                dag_id: journal.dag_id[first].clone(),
                operation: journal.operation[first].clone(),
                interval: journal.interval[first].clone(),
                message: format!(
                    "intent by {} with no committed row and no provider object under the key{}: safe to retry with the same key",
                    evidence.tries.join(", "),
                    if failed > 0 { format!(" ({failed} failed rows)") } else { String::new() }
                ),
                op_key: journal.op_key[first].clone(),
                evidence,
            }))
        })
        .collect()
}
