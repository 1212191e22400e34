use crate::model::Table;
use crate::error::Result;
use crate::prepare::Prepared;
use crate::rules::repair::{self, NamedRows, Repair};
use crate::rules::{Finding, FindingDraft, declare_rule, impl_rule};

use super::rows::{ObjectRows, gather_sorted};
use crate::cells::flag_column;

declare_rule! {
    /// ## What it detects
    /// A live provider object that no journal row knows about: neither its id nor its key
    /// appears in the journal.
    ///
    /// ## Why it matters
    /// Something created it outside the journalled path: a task version that did not write the
    /// journal, a manual run of the script, another system sharing the account. Nobody can say
    /// which interval it belongs to or whether it is a duplicate.
    ///
    /// ## Example
    /// The provider lists `exp_9` under key `orders:2026-10-30`; the journal has no row with
    /// that key or id (perhaps the task ran before the journal existed).
    ///
    /// ## Repair
    /// Investigate who created it (`investigate`, manual); if it belongs to an interval, adopt it
    /// into the journal; if not, void it.
    pub struct UnjournaledExport => "L003", "unjournaled-export", Warning;
    from_absence = true;
}
impl_rule!(UnjournaledExport, check, repair);

fn check(_: &UnjournaledExport, prepared: &Prepared) -> Result<Vec<Finding>> {
    let objects = &prepared.objects;
    let (live, named, journaled) = (
        flag_column(objects, "live")?,
        flag_column(objects, "named")?,
        flag_column(objects, "key_journaled")?,
    );
    let unknown =
        live.iter()
            .zip(named.iter().zip(journaled.iter()))
            .map(|(live, (named, journaled))| {
                live == Some(true) && named == Some(false) && journaled == Some(false)
            });
    let unknown = gather_sorted(objects, Table::Provider, unknown, &[], "L003")?;
    let rows = ObjectRows::read(&unknown, &prepared.operations)?;
    (0..unknown.height())
        .map(|row| {
            let key = rows.key[row].clone();
            Ok(UnjournaledExport::finding(FindingDraft {
                dag_id: rows.dag_id[row].clone(),
                operation: rows.operation[row].clone(),
                interval: rows.interval[row].clone(),
                message: format!(
                    "{} is live at the provider{}, but no journal row names it or its key",
                    rows.listing(&[row]),
                    key.as_deref()
                        .map(|key| format!(" under key {key}"))
                        .unwrap_or_default()
                ),
                op_key: key,
                evidence: rows.evidence(&[row]),
            }))
        })
        .collect()
}

/// `investigate` (manual): find who created the object; adopt it into the journal if it belongs to an interval, void it if not.
fn repair(finding: &Finding, _: &NamedRows) -> Vec<Repair> {
    repair::investigate(
        finding,
        "unjournaled-object",
        "find who created the object; adopt it into the journal if it belongs to an interval, void it if not",
    )
}
