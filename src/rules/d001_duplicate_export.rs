use polars::prelude::*;

use crate::model::Table;
use crate::error::{EngineContext, Result};
use crate::prepare::Prepared;
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::groups::RowGroups;
use super::rows::ObjectRows;

declare_rule! {
    /// ## What it detects
    /// More than one live provider object under one operation key.
    ///
    /// ## Why it matters
    /// One key is meant to be one business operation. Two live objects under it mean the
    /// provider did not deduplicate the retry (it ignores the key, or had already forgotten it),
    /// so the export, report or paid job now exists twice and both may be delivered or billed.
    ///
    /// ## Example
    /// Try 1 of `orders_export` for 2026-11-01 creates `exp_1` under `orders:2026-11-01`; the
    /// response is lost; try 2 sends the same key two days later, after the provider's 24 h key
    /// retention, and gets a new `exp_2`.
    ///
    /// ## Repair
    /// Keep the canonical object (the one the journal committed, else the earliest) and void the
    /// others through the provider or by hand (`void-duplicate`, needs approval). If the objects
    /// are further apart than the key TTL, T001 explains why the key did not help.
    pub struct DuplicateExport => "D001", "duplicate-export", Error;
}
impl_rule!(
    DuplicateExport,
    check,
    crate::rules::repair::void_duplicates
);

fn check(_: &DuplicateExport, prepared: &Prepared) -> Result<Vec<Finding>> {
    let by_key = prepared.objects_by_key()?;
    let mut rows: Vec<IdxSize> = Vec::new();
    for key in 0..prepared.codes.keys as u32 {
        if by_key.live(key).nth(1).is_some() {
            rows.extend(by_key.live(key).map(|row| row as IdxSize));
        }
    }
    let rows = IdxCa::from_vec("row".into(), rows);
    let duplicated = prepared
        .objects
        .take(&rows)
        .engine("D001")?
        .sort(Table::Provider.sorted_by(&["key"]), Default::default())
        .engine("D001")?;
    let duplicated = RowGroups::sorted(duplicated, &["key"])?;
    let rows = ObjectRows::read(&duplicated.frame, &prepared.operations)?;
    duplicated.findings(|first, members| {
        let key = rows.key[first].clone().unwrap_or_default();
        Ok(DuplicateExport::finding(FindingDraft {
            dag_id: rows.dag_id[first].clone(),
            operation: rows.operation[first].clone(),
            interval: rows.interval[first].clone(),
            message: format!(
                "{} live objects under key {key}: {}",
                members.len(),
                rows.listing(members)
            ),
            op_key: Some(key),
            evidence: rows.evidence(members),
        }))
    })
}
