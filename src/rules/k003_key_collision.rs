use polars::prelude::*;

use crate::error::Result;
use crate::prepare::{Prepared, model};
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::groups::{RowGroups, over};
use super::rows::JournalRows;

declare_rule! {
    /// ## What it detects
    /// One key used by different intervals or by different DAGs.
    ///
    /// ## Why it matters
    /// The provider treats a repeated key as a replay: the second interval gets the first
    /// interval's object back and its own export never happens, silently. Common causes are a
    /// date format that is too coarse (`%Y-%m` for a daily DAG) or a template shared by two DAGs
    /// without the dag_id in it.
    ///
    /// ## Example
    /// `orders_daily` used `orders:2026-11` for 2026-11-01 and for 2026-11-02.
    ///
    /// ## Repair
    /// Make the key unique per interval and DAG (`fix-key-derivation`, manual), then re-export
    /// the intervals that got a replayed object under a new key version
    /// (`reexport-new-version`, needs approval).
    pub struct KeyCollision => "K003", "key-collision", Error;
}
impl_rule!(KeyCollision, check, repair);

fn check(_: &KeyCollision, prepared: &Prepared) -> Result<Vec<Finding>> {
    let per_key = |expr: Expr| over(expr, &[model::KEY_CODE]);
    let collided = RowGroups::of(
        prepared.journal().filter(col("phase").eq(lit("intent"))),
        per_key(col("dag_id").n_unique())?
            .gt(lit(1u32))
            .or(per_key(col("interval").drop_nulls().n_unique())?.gt(lit(1u32))),
        vec!["op_key", "recorded_at", "run_id", "try_number"],
        &["op_key"],
        "K003",
    )?;
    let journal = JournalRows::read(&collided.frame)?;
    collided.findings(|first, members| {
        let mut users: Vec<String> = members
            .iter()
            .map(|row| {
                format!(
                    "{} {}",
                    journal.dag_id[*row].as_deref().unwrap_or(""),
                    journal.interval[*row]
                        .as_deref()
                        .unwrap_or("(interval unknown)")
                )
            })
            .collect();
        users.sort();
        users.dedup();
        Ok(KeyCollision::finding(FindingDraft {
            dag_id: journal.dag_id[first].clone(),
            operation: journal.operation[first].clone(),
            interval: None,
            message: format!(
                "key {} was used by {} intervals or DAGs: {}",
                journal.op_key[first].as_deref().unwrap_or(""),
                users.len(),
                users.join("; ")
            ),
            op_key: journal.op_key[first].clone(),
            evidence: journal.evidence(members),
        }))
    })
}

/// `fix-key-derivation` (manual), one action per operation.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    repair::fix_key_derivation(
        finding,
        KeyCollision::CODE,
        "key-collision",
        "make the key unique per DAG and interval (include the dag_id and a date as fine as the schedule), then re-export the intervals that got another interval's object".to_string(),
    )
}
