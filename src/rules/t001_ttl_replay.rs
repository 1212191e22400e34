use polars::prelude::*;

use crate::model::Table;
use crate::error::Result;
use crate::error::EngineContext;
use crate::prepare::Prepared;
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};
use crate::timestamp;

use super::groups::{RowGroups, over_interval};
use super::rows::ObjectRows;

declare_rule! {
    /// ## What it detects
    /// A duplicate (several live objects for one interval) whose objects were created further
    /// apart than the provider's idempotency-key TTL (`key_ttl` of the operation, else of
    /// `[provider]`). It explains a D001
    /// or D002: the key could not have helped, the provider had forgotten it.
    ///
    /// ## Why it matters
    /// Providers prune keys (Stripe after at least 24 h, PayPal 6 h to 45 days, Adyen at least
    /// 7 days). A backfill or manual clear of an older interval sends a key the provider no
    /// longer remembers and creates the object again, even with a perfectly stable key.
    ///
    /// ## Example
    /// `exp_1` was created 2026-11-01, the interval was cleared on 2026-11-20 and `exp_7` was
    /// created under the same key; the provider's key TTL is 24 h.
    ///
    /// ## Repair
    /// Void the later objects (`void-duplicate`); before re-running old intervals run
    /// `onceonly ttl-risk` and check for an existing object first (check-then-create).
    pub struct TtlReplay => "T001", "ttl-replay", Info;
}
impl_rule!(TtlReplay, check, crate::rules::repair::void_duplicates);

fn check(_: &TtlReplay, prepared: &Prepared) -> Result<Vec<Finding>> {
    // The live objects of intervals with more than one, where the provider forgets keys.
    let objects = &prepared.objects;
    let attributed = prepared.live_in_interval_row_numbers()?;
    let (intervals, count) = prepared.code_interval_rows(Table::Provider, &attributed)?;
    let mut objects_of_interval = vec![0u32; count];
    for &interval in &intervals {
        objects_of_interval[interval as usize] += 1;
    }
    let ttls = crate::cells::int_column(objects, "key_ttl")?;
    let several = (attributed.iter().zip(&intervals))
        .filter(|&(&row, &interval)| {
            objects_of_interval[interval as usize] > 1 && ttls.get(row as usize).is_some()
        })
        .map(|(row, _)| *row)
        .collect();
    let several = objects
        .take(&IdxCa::from_vec("rows".into(), several))
        .engine("T001")?;
    let spread = (col("created_at").max() - col("created_at").min()).cast(DataType::Int64);
    let replayed = RowGroups::per_interval(
        several.lazy(),
        Table::Provider,
        over_interval(spread)?.gt(col("key_ttl")),
        &["created_at", "external_id"],
        &prepared.operations,
        "T001",
    )?;
    let rows = ObjectRows::read(&replayed.frame, &prepared.operations)?;
    let ttls = crate::cells::ints(&replayed.frame, "key_ttl")?;
    replayed.findings(|first, members| {
        let last = *members.last().expect("groups are not empty");
        let apart = rows.created_at[last]
            .zip(rows.created_at[first])
            .map(|(b, a)| b - a)
            .unwrap_or(0);
        Ok(TtlReplay::finding(FindingDraft {
            dag_id: rows.dag_id[first].clone(),
            operation: rows.operation[first].clone(),
            interval: rows.interval[first].clone(),
            op_key: rows.key[last].clone(),
            message: format!(
                "objects created {} apart, beyond the provider's key TTL of {}: {}",
                timestamp::format_duration(apart),
                timestamp::format_duration(ttls[first].unwrap_or(0)),
                rows.listing(members)
            ),
            evidence: rows.evidence(members),
        }))
    })
}
