use polars::prelude::*;

use crate::model::Table;
use crate::cells::one_array;
use crate::dictionary::NULL;
use crate::error::Result;
use crate::prepare::Prepared;
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::groups::RowGroups;
use super::rows::JournalRows;

declare_rule! {
    /// ## What it detects
    /// The tries or runs of one interval of one operation used different keys.
    ///
    /// ## Why it matters
    /// An idempotency key only protects a retry if the retry sends the same key. A key derived
    /// from `try_number`, `run_id`, the current time or a random value makes every try a new
    /// business operation to the provider, so a lost response becomes a duplicate.
    ///
    /// ## Example
    /// Try 1 wrote intent `orders:2026-11-01:try1`, try 2 wrote `orders:2026-11-01:try2`: the
    /// key contains the try number.
    ///
    /// ## Repair
    /// Derive the key only from what identifies the interval's business operation, e.g.
    /// `orders:{interval_start:%Y-%m-%d}` (`fix-key-derivation`, manual: a code change). The
    /// finding names the part of the key that changed.
    pub struct UnstableKey => "K001", "unstable-key", Error;
}
impl_rule!(UnstableKey, check, repair, ChangedPart);

fn check(_: &UnstableKey, prepared: &Prepared) -> Result<Vec<Finding>> {
    // The intents with an interval, and the intervals whose intents used more than one key.
    let journal = &prepared.journal;
    let phases = prepared.journal_phases()?;
    let starts = crate::cells::int_column(journal, "iv_start")?;
    let intents: Vec<IdxSize> = (phases.iter().zip(starts.iter()).enumerate())
        .filter(|(_, (phase, start))| **phase == Some(crate::model::Phase::Intent) && start.is_some())
        .map(|(row, _)| row as IdxSize)
        .collect();
    let keys = one_array(&prepared.journal_key_codes()?);
    let unstable = RowGroups::of_intervals_with_many(
        prepared,
        Table::Journal,
        intents,
        |row| keys.get(row as usize).unwrap_or(NULL),
        &["recorded_at", "try_number"],
        "K001",
    )?;
    let journal = JournalRows::read(&unstable.frame, &prepared.operations)?;
    unstable.findings(|first, members| {
        let evidence = journal.evidence(members);
        let part = unstable_part(&journal, members);
        Ok(UnstableKey::finding(FindingDraft {
            dag_id: journal.dag_id[first].clone(),
            operation: journal.operation[first].clone(),
            interval: journal.interval[first].clone(),
            op_key: None,
            message: format!(
                "{} of one interval used {} different keys ({}); the key contains {part}",
                match evidence.tries.len() {
                    1 => "1 try".to_string(),
                    tries => format!("{tries} tries"),
                },
                evidence.keys.len(),
                evidence.keys.join(", ")
            ),
            evidence,
        })
        .with_repair_input(ChangedPart(part)))
    })
}

/// Names what makes the key change: the run id, the try number, or (failing both) a time or
/// random part.
pub fn unstable_part(journal: &JournalRows, rows: &[usize]) -> &'static str {
    let key = |row: usize| journal.op_key[row].as_deref().unwrap_or("");
    let run_ids: std::collections::BTreeSet<_> = rows
        .iter()
        .map(|row| journal.run_id[*row].as_deref())
        .collect();
    if run_ids.len() > 1
        && rows.iter().all(|row| {
            journal.run_id[*row]
                .as_deref()
                .is_some_and(|run| key(*row).contains(run))
        })
    {
        return RUN_ID;
    }
    let tries: std::collections::BTreeSet<_> =
        rows.iter().map(|row| journal.try_number[*row]).collect();
    let with_try_removed = |row: usize| {
        let number = journal.try_number[row]
            .map(|n| n.to_string())
            .unwrap_or_default();
        match key(row).rfind(&number) {
            Some(at) if !number.is_empty() => {
                format!("{}{}", &key(row)[..at], &key(row)[at + number.len()..])
            }
            _ => key(row).to_string(),
        }
    };
    if tries.len() > 1 {
        let stripped: std::collections::BTreeSet<String> =
            rows.iter().map(|row| with_try_removed(*row)).collect();
        if stripped.len() == 1 {
            return TRY_NUMBER;
        }
    }
    OTHER
}

/// Which part of the key changed between the tries (`unstable_part`), kept for the repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ChangedPart(&'static str);

impl repair::RepairText for ChangedPart {
    fn text(&self) -> Option<String> {
        Some(self.0.to_string())
    }
    fn of_text(text: &str) -> Option<ChangedPart> {
        PARTS.into_iter().find(|part| *part == text).map(ChangedPart)
    }
}

/// Every part `unstable_part` names.
const PARTS: [&str; 3] = [RUN_ID, TRY_NUMBER, OTHER];
const RUN_ID: &str = "the run_id";
const TRY_NUMBER: &str = "the try_number";
const OTHER: &str = "a time or random part";

/// `fix-key-derivation` (manual), one action per operation: derive the key without the part
/// that changed.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    let part = finding
        .repair_input
        .get::<ChangedPart>()
        .map_or("an unstable part", |part| part.0);
    repair::fix_key_derivation(
        finding,
        UnstableKey::CODE,
        "unstable-key",
        format!(
            "derive the key only from what identifies the interval's operation (e.g. {{interval_start:%Y-%m-%d}}), not from {part}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::repair::{Kind, Safety};

    #[test]
    fn the_repair_names_the_part_the_detection_found_whatever_the_message_says() {
        let finding = UnstableKey::finding(FindingDraft {
            operation: Some("orders".into()),
            message: "3 tries used 3 keys".into(),
            ..FindingDraft::default()
        })
        .with_repair_input(ChangedPart("the run_id"));
        let repairs = repair(&finding, &NamedRows::default());
        assert_eq!(repairs.len(), 1);
        let fix = &repairs[0];
        assert_eq!(
            (fix.kind, fix.safety),
            (Kind::FixKeyDerivation, Safety::Manual)
        );
        assert_eq!(fix.acts_on, ["orders", "K001"]);
        assert!(
            fix.explanation.ends_with("not from the run_id"),
            "{}",
            fix.explanation
        );
    }
}
