use polars::prelude::*;

use crate::cells::{groups, ints, one_chunk, texts};
use crate::error::{EngineContext, Result};
use crate::prepare::Prepared;
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};
use crate::timestamp;

declare_rule! {
    /// ## What it detects
    /// An intent, a commit or a provider object under a key that is later than the expiry of
    /// the approval that authorised the key's operation.
    ///
    /// ## Why it matters
    /// Some operations (payouts, customer-facing exports, paid jobs) need a person's approval
    /// that holds for a limited time. A retry or re-run hours later acts on an approval that no
    /// longer holds: the write happened without authorisation.
    ///
    /// ## Example
    /// Approval `APR-7` for `payout:2026-11-01` expired at 12:00; try 3 wrote its intent at
    /// 14:10 and the provider created `po_3` at 14:10.
    ///
    /// ## Repair
    /// Investigate whether the write may stand (`investigate`, manual). If it may not, redo it
    /// under a new key version with a new approval: the plan leaves that to the person who
    /// decides, and says so in the action's explanation.
    pub struct WriteAfterApprovalExpiry => "A001", "write-after-approval-expiry", Error;
    reads Journal.approval_id, Journal.approval_expires_at;
}
impl_rule!(WriteAfterApprovalExpiry, check, repair);

fn check(_: &WriteAfterApprovalExpiry, prepared: &Prepared) -> Result<Vec<Finding>> {
    // Only the journal rows and objects of keys with an approval can be late; they are picked
    // by key code before any text is put together for them.
    let journal_keys = one_chunk(prepared.journal_key_codes()?);
    let expiries = crate::cells::int_column(&prepared.journal, "approval_expires_at")?;
    let mut approved = vec![false; prepared.codes.keys];
    let expiries = crate::cells::each_number(&expiries);
    for (key, expires) in crate::cells::each_number(&journal_keys).zip(expiries) {
        if let (Some(key), Some(_)) = (key, expires) {
            approved[key as usize] = true;
        }
    }
    let of_approved_keys = |keys: &UInt32Chunked| -> BooleanChunked {
        crate::cells::each_number(keys)
            .map(|key| Some(key.is_some_and(|key| approved[key as usize])))
            .collect()
    };
    let journal = prepared
        .journal
        .filter(&of_approved_keys(&journal_keys))
        .engine("A001")?;
    let journal = prepared.operations.with_column(&journal)?;
    let journal = crate::prepare::with_interval_labels(&journal)?.lazy();
    let objects = prepared
        .objects
        .filter(&of_approved_keys(&prepared.object_key_codes()?))
        .engine("A001")?
        .lazy();
    let approvals = journal
        .clone()
        .filter(col("approval_expires_at").is_not_null())
        .group_by([col("op_key")])
        .agg([
            col("approval_expires_at").min().alias("expires_at"),
            col("approval_id")
                .drop_nulls()
                .sort(Default::default())
                .first()
                .alias("approval"),
            col("dag_id").first(),
            col("operation").first(),
            col("interval").first(),
        ]);
    let late_writes = journal
        .filter(col("phase").is_in(
            lit(Series::new("p".into(), ["intent", "committed"])).implode(false),
            false,
        ))
        .select([
            col("op_key"),
            concat_str(
                [
                    col("phase"),
                    lit(" by "),
                    col("run_id"),
                    lit("#"),
                    col("try_number").cast(DataType::String),
                ],
                "",
                false,
            )
            .alias("what"),
            col("recorded_at").alias("at"),
            lit(NULL).cast(DataType::String).alias("external_id"),
        ]);
    let late_objects = objects.filter(col("key").is_not_null()).select([
        col("key").alias("op_key"),
        concat_str([lit("provider object "), col("external_id")], "", false).alias("what"),
        col("created_at").alias("at"),
        col("external_id"),
    ]);
    let late = concat([late_writes, late_objects], UnionArgs::default())
        .engine("A001")?
        .join(
            approvals,
            [col("op_key")],
            [col("op_key")],
            JoinArgs::new(JoinType::Inner),
        )
        .filter(col("at").gt(col("expires_at")))
        .sort(["op_key", "at", "what"], Default::default())
        .collect()
        .engine("A001")?;
    let (key, what, approval) = (
        texts(&late, "op_key")?,
        texts(&late, "what")?,
        texts(&late, "approval")?,
    );
    let (dag, operation, interval, external) = (
        texts(&late, "dag_id")?,
        texts(&late, "operation")?,
        texts(&late, "interval")?,
        texts(&late, "external_id")?,
    );
    let (at, expires) = (ints(&late, "at")?, ints(&late, "expires_at")?);
    groups(&late, &["op_key"])?
        .into_iter()
        .map(|(first, members)| {
            let mut writes: Vec<String> = members
                .iter()
                .map(|row| {
                    format!(
                        "{} at {}",
                        what[*row].as_deref().unwrap_or(""),
                        timestamp::format_opt(at[*row])
                    )
                })
                .collect();
            // A journal row written twice is one write (the rows are sorted by what they say).
            writes.dedup();
            let mut evidence = crate::rules::Evidence {
                external_ids: members
                    .iter()
                    .filter_map(|row| external[*row].clone())
                    .collect(),
                keys: vec![key[first].clone().unwrap_or_default()],
                times: writes.clone(),
                ..Default::default()
            };
            evidence.times.push(format!(
                "approval_expires_at={}",
                timestamp::format_opt(expires[first])
            ));
            Ok(WriteAfterApprovalExpiry::finding(FindingDraft {
                dag_id: dag[first].clone(),
                operation: operation[first].clone(),
                interval: interval[first].clone(),
                op_key: key[first].clone(),
                message: format!(
                    "approval {} expired at {}; later: {}",
                    approval[first].as_deref().unwrap_or("(no id)"),
                    timestamp::format_opt(expires[first]),
                    writes.join("; ")
                ),
                evidence,
            }))
        })
        .collect()
}

/// `investigate` (manual): decide whether the write after the approval expired may stand; redo it under a new key version with a new approval if not.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    repair::investigate(
        finding,
        "approval-expired",
        "decide whether the write after the approval expired may stand; redo it under a new key version with a new approval if not",
    )
}
