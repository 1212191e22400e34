use polars::prelude::StaticArray as _;

use crate::model::Table;
use crate::cells::one_array;
use crate::dictionary::NULL;
use crate::error::Result;
use crate::prepare::Prepared;
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::groups::RowGroups;
use super::rows::ObjectRows;

declare_rule! {
    /// ## What it detects
    /// More than one live provider object for one interval of one operation, created under
    /// different keys.
    ///
    /// ## Why it matters
    /// The provider deduplicates by key, so objects under different keys are different business
    /// operations to it. One interval should have one logical result; two live objects for it
    /// mean the key changed between tries or runs (see K001) and the retry was not protected.
    ///
    /// ## Example
    /// The key template includes `try_number`: try 1 creates `exp_1` under
    /// `orders:2026-11-01:1`, its response is lost, try 2 creates `exp_2` under
    /// `orders:2026-11-01:2`.
    ///
    /// ## Repair
    /// Keep the canonical object (committed in the journal, else the earliest) and void the
    /// others (`void-duplicate`, needs approval). Then fix the key derivation so every try of
    /// an interval sends the same key (K001, where the journal shows the keys that changed,
    /// names the part of the key to change).
    pub struct DuplicateInterval => "D002", "duplicate-interval", Error;
}
impl_rule!(
    DuplicateInterval,
    check,
    crate::rules::repair::void_duplicates
);

fn check(_: &DuplicateInterval, prepared: &Prepared) -> Result<Vec<Finding>> {
    // The live objects attributed to an interval, and the intervals whose objects are under
    // more than one key (NULL among them).
    let attributed = prepared.live_in_interval_row_numbers()?;
    let keys = one_array(&prepared.object_key_codes()?);
    let duplicated = RowGroups::of_intervals_with_many(
        prepared,
        Table::Provider,
        attributed,
        |row| keys.get(row as usize).unwrap_or(NULL),
        &["created_at", "external_id"],
        "D002",
    )?;
    let rows = ObjectRows::read(&duplicated.frame, &prepared.operations)?;
    duplicated.findings(|first, members| {
        let mut keys: Vec<&str> = members
            .iter()
            .filter_map(|row| rows.key[*row].as_deref())
            .collect();
        keys.sort();
        keys.dedup();
        Ok(DuplicateInterval::finding(FindingDraft {
            dag_id: rows.dag_id[first].clone(),
            operation: rows.operation[first].clone(),
            interval: rows.interval[first].clone(),
            op_key: None,
            message: format!(
                "{} live objects for one interval under {} different keys: {}",
                members.len(),
                keys.len(),
                rows.listing(members)
            ),
            evidence: rows.evidence(members),
        }))
    })
}
