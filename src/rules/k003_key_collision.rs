use polars::prelude::*;

use crate::model::Table;
use crate::cells::one_array;
use crate::dictionary::NULL;
use crate::error::Result;
use crate::prepare::Prepared;
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::groups::{ManyValues, RowGroups, text_codes};
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
    /// Make the key unique per interval and DAG (`fix-key-derivation`, manual: a code change),
    /// then re-export the intervals that got another interval's object under a new key version,
    /// with a new approval: the action's explanation says so, and the plan proposes no
    /// re-export of its own.
    pub struct KeyCollision => "K003", "key-collision", Error;
}
impl_rule!(KeyCollision, check, repair);

fn check(_: &KeyCollision, prepared: &Prepared) -> Result<Vec<Finding>> {
    // The intents, and the keys (NULL among them) whose intents came from more than one DAG
    // or named more than one interval.
    let journal = &prepared.journal;
    let phases = prepared.journal_phases()?;
    let intents: Vec<IdxSize> = (phases.iter().enumerate())
        .filter(|(_, phase)| **phase == Some(crate::model::Phase::Intent))
        .map(|(row, _)| row as IdxSize)
        .collect();
    let keys = one_array(&prepared.journal_key_codes()?);
    let null_key = prepared.codes.keys as u32;
    let key_of = |row: IdxSize| keys.get(row as usize).unwrap_or(null_key);
    // The intervals are compared as findings print them (`prepare::interval_label_codes`).
    let (dags, intervals) = (
        text_codes(journal, "dag_id", &intents)?,
        crate::prepare::interval_label_codes(journal, &intents)?,
    );
    let mut dags_of_key = ManyValues::new(prepared.codes.keys + 1);
    let mut intervals_of_key = ManyValues::new(prepared.codes.keys + 1);
    for ((&row, &dag), &interval) in intents.iter().zip(&dags).zip(&intervals) {
        dags_of_key.see(key_of(row), dag);
        if interval != NULL {
            intervals_of_key.see(key_of(row), interval);
        }
    }
    let collided_rows = intents
        .into_iter()
        .filter(|&row| dags_of_key.holds(key_of(row)) || intervals_of_key.holds(key_of(row)))
        .collect();
    let collided = RowGroups::of_rows(
        journal,
        Table::Journal,
        collided_rows,
        vec!["op_key", "recorded_at", "run_id", "try_number"],
        &["op_key"],
        "K003",
    )?;
    let journal = JournalRows::read(&collided.frame, &prepared.operations)?;
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
