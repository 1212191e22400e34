//! The rules (SPEC §5): one module each, one registry, stable codes.
//!
//! A rule reads the prepared frames only, never a source. Its doc comment is its
//! documentation: `onceonly rule CODE` prints it, so docs and code cannot drift apart.
//!
//! A rule's file holds its detection (`check`: findings with their messages) and its repair
//! (`repair`: the actions it proposes for one of its findings, see [`repair`]). A new rule is
//! its file, its fixture folder (`fixtures/rules/CODE/{fires,near-miss}` with a README.md each,
//! and the snapshots its test writes) and its line in `registry!`.

use std::fmt;

use serde::Serialize;

use crate::error::Result;
use crate::prepare::Prepared;
use repair::{NamedRows, Repair, RepairInput};

pub mod clear;
mod groups;
pub mod repair;
mod rows;

/// Declares each rule's module and lists its rule in [`REGISTRY`]: one line per rule.
macro_rules! registry {
    ($($module:ident::$rule:ident,)*) => {
        $(pub mod $module;)*

        /// Every rule, in code order.
        pub static REGISTRY: &[&dyn Rule] = &[$(&$module::$rule),*];
    };
}

registry! {
    d001_duplicate_export::DuplicateExport,
    d002_duplicate_interval::DuplicateInterval,
    l001_lost_response::LostResponse,
    l002_orphan_intent::OrphanIntent,
    l003_unjournaled_export::UnjournaledExport,
    m001_missing_export::MissingExport,
    m002_unrecorded_success::UnrecordedSuccess,
    k001_unstable_key::UnstableKey,
    k002_key_payload_mismatch::KeyPayloadMismatch,
    k003_key_collision::KeyCollision,
    c001_overlapping_tries::OverlappingTries,
    r001_rerun_after_success::RerunAfterSuccess,
    a001_write_after_approval_expiry::WriteAfterApprovalExpiry,
    t001_ttl_replay::TtlReplay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// A rule's identity and documentation, fixed at compile time.
pub trait Rule: Sync {
    fn code(&self) -> &'static str;
    fn name(&self) -> &'static str;
    fn severity(&self) -> Severity;
    /// The doc comment, as written above the rule.
    fn doc(&self) -> &'static str;
    /// The columns of `model::READ_ON_DEMAND` its check reads (declared with `reads` in
    /// `declare_rule!`): an audit of a snapshot decodes those only for the rules that read them.
    fn reads(&self) -> &'static [crate::model::SourceColumn];
    /// Whether it reasons from an absence (a missing commit, object or journal row): then it
    /// does not judge an interval with a try in flight (`crate::in_flight`), which may yet
    /// write or create what is missing.
    fn reasons_from_absence(&self) -> bool;
    fn check(&self, prepared: &Prepared) -> Result<Vec<Finding>>;
    /// The actions proposed for one of this rule's findings (none where it needs none).
    fn repair(&self, finding: &Finding, named: &NamedRows) -> Vec<Repair>;
    /// The finding's repair input as text, for a partition's result to carry to the merge
    /// (None: the rule keeps none).
    fn repair_input_text(&self, finding: &Finding) -> Option<String>;
    /// The repair input `repair_input_text` gave, read back (None: not one of this rule's).
    fn repair_input_of_text(&self, text: &str) -> Option<RepairInput>;
}

/// Declares a rule struct whose doc comment becomes its `doc()`.
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident => $code:literal, $rule:literal, $severity:ident;
        $(reads $($table:ident . $column:ident),+;)?
        $(from_absence = $from_absence:literal;)?
    ) => {
        $(#[doc = $doc])*
        pub struct $name;

        impl $name {
            /// The columns of `model::READ_ON_DEMAND` the rule reads.
            pub const READS: &'static [$crate::model::SourceColumn] = &[$($(
                $crate::model::SourceColumn {
                    table: $crate::model::Table::$table,
                    name: stringify!($column),
                }
            ),+)?];
            /// Whether it reasons from an absence (`Rule::from_absence`).
            pub const FROM_ABSENCE: bool = false $(|| $from_absence)?;
            pub const CODE: &'static str = $code;
            pub const NAME: &'static str = $rule;
            pub const SEVERITY: $crate::rules::Severity = $crate::rules::Severity::$severity;
            pub const DOC: &'static str = concat!($($doc, "\n"),*);

            pub fn finding(draft: $crate::rules::FindingDraft) -> $crate::rules::Finding {
                draft.finish(Self::CODE, Self::NAME, Self::SEVERITY)
            }
        }
    };
}
pub(crate) use declare_rule;

/// Implements [`Rule`] for a declared rule with its `check` and `repair` functions, and the
/// type of its repair input (`RepairText`) where its findings keep one.
macro_rules! impl_rule {
    ($name:ident, $check:path, $repair:path) => {
        $crate::rules::impl_rule!($name, $check, $repair, ());
    };
    ($name:ident, $check:path, $repair:path, $input:ty) => {
        impl $crate::rules::Rule for $name {
            fn code(&self) -> &'static str {
                Self::CODE
            }
            fn name(&self) -> &'static str {
                Self::NAME
            }
            fn severity(&self) -> $crate::rules::Severity {
                Self::SEVERITY
            }
            fn doc(&self) -> &'static str {
                Self::DOC
            }
            fn reads(&self) -> &'static [$crate::model::SourceColumn] {
                Self::READS
            }
            fn reasons_from_absence(&self) -> bool {
                Self::FROM_ABSENCE
            }
            fn check(
                &self,
                prepared: &$crate::prepare::Prepared,
            ) -> $crate::error::Result<Vec<$crate::rules::Finding>> {
                $check(self, prepared)
            }
            fn repair(
                &self,
                finding: &$crate::rules::Finding,
                named: &$crate::rules::repair::NamedRows,
            ) -> Vec<$crate::rules::repair::Repair> {
                $repair(finding, named)
            }
            fn repair_input_text(&self, finding: &$crate::rules::Finding) -> Option<String> {
                let input = finding.repair_input.get::<$input>()?;
                $crate::rules::repair::RepairText::text(input)
            }
            fn repair_input_of_text(
                &self,
                text: &str,
            ) -> Option<$crate::rules::repair::RepairInput> {
                <$input as $crate::rules::repair::RepairText>::of_text(text)
                    .map($crate::rules::repair::RepairInput::new)
            }
        }
    };
}
pub(crate) use impl_rule;

/// Finds a rule by code (`D001`) or name (`duplicate-export`), case-insensitively.
pub fn lookup(code_or_name: &str) -> Option<&'static dyn Rule> {
    REGISTRY.iter().copied().find(|rule| {
        rule.code().eq_ignore_ascii_case(code_or_name)
            || rule.name().eq_ignore_ascii_case(code_or_name)
    })
}

/// The rules an audit runs: those `codes` names by code or by name, as [`lookup`] finds them
/// (`--rule` accepts both), every rule when it names none.
pub fn selected(codes: &[String]) -> Vec<&'static dyn Rule> {
    if codes.is_empty() {
        return REGISTRY.to_vec();
    }
    let named: Vec<&str> = codes
        .iter()
        .filter_map(|code| lookup(code))
        .map(|rule| rule.code())
        .collect();
    REGISTRY
        .iter()
        .copied()
        .filter(|rule| named.contains(&rule.code()))
        .collect()
}

/// The registered rule with this code, exactly as the rule spells it.
pub fn by_code(code: &str) -> Option<&'static dyn Rule> {
    REGISTRY.iter().copied().find(|rule| rule.code() == code)
}

/// The doc comment as text: the one leading space rustdoc keeps on each line removed.
pub fn doc_text(rule: &dyn Rule) -> String {
    rule.doc()
        .lines()
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// What a finding points at: the ids a person looks up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// Provider object ids.
    pub external_ids: Vec<String>,
    /// Operation keys involved.
    pub keys: Vec<String>,
    pub run_ids: Vec<String>,
    /// Tries as `run_id#try_number` (with `[map_index]` for mapped tasks).
    pub tries: Vec<String>,
    /// Named times, `what=RFC 3339`.
    pub times: Vec<String>,
}

impl Evidence {
    /// Sorts and deduplicates every list, so evidence does not depend on row order.
    pub fn normalized(mut self) -> Evidence {
        for list in [
            &mut self.external_ids,
            &mut self.keys,
            &mut self.run_ids,
            &mut self.tries,
        ] {
            list.sort();
            list.dedup();
        }
        self.times.dedup();
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable across runs: rule code, operation key and the evidence ids.
    pub id: String,
    pub code: &'static str,
    pub rule: &'static str,
    pub severity: Severity,
    pub dag_id: Option<String>,
    pub operation: Option<String>,
    pub interval: Option<String>,
    pub op_key: Option<String>,
    pub message: String,
    pub evidence: Evidence,
    /// Against `--baseline`: `new` or `persisting` (resolved ones are listed in the report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'static str>,
    /// About an interval with a try in flight (`crate::in_flight`): the plan proposes nothing
    /// for it until the try has finished.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_flight: bool,
    /// What the rule's repair needs beyond the evidence, in the rule's own type.
    #[serde(skip)]
    pub repair_input: RepairInput,
}

impl Finding {
    /// The finding with `input` kept for its rule's repair.
    pub fn with_repair_input<T>(mut self, input: T) -> Finding
    where
        T: std::any::Any + fmt::Debug + PartialEq + Send + Sync,
    {
        self.repair_input = RepairInput::new(input);
        self
    }
}

/// The parts of a finding a rule decides; [`FindingDraft::finish`] adds identity and rule.
#[derive(Debug, Clone, Default)]
pub struct FindingDraft {
    pub dag_id: Option<String>,
    pub operation: Option<String>,
    pub interval: Option<String>,
    pub op_key: Option<String>,
    pub message: String,
    pub evidence: Evidence,
}

impl FindingDraft {
    pub fn finish(self, code: &'static str, rule: &'static str, severity: Severity) -> Finding {
        let evidence = self.evidence.normalized();
        // What the finding is about: its rule, key, operation and interval, and the objects
        // and keys it names. Tries only where nothing else identifies it (C001), so a later
        // retry of the same problem is the same finding, night after night.
        let tries: &[String] = if evidence.external_ids.is_empty() && evidence.keys.is_empty() {
            &evidence.tries
        } else {
            &[]
        };
        let parts = [
            self.op_key.as_deref().unwrap_or(""),
            self.operation.as_deref().unwrap_or(""),
            self.interval.as_deref().unwrap_or(""),
        ];
        let id = crate::identity::stable_id(
            code,
            parts
                .into_iter()
                .chain(evidence.external_ids.iter().map(String::as_str))
                .chain(evidence.keys.iter().map(String::as_str))
                .chain(tries.iter().map(String::as_str)),
        );
        Finding {
            id,
            code,
            rule,
            severity,
            dag_id: self.dag_id,
            operation: self.operation,
            interval: self.interval,
            op_key: self.op_key,
            message: self.message,
            evidence,
            baseline: None,
            in_flight: false,
            repair_input: RepairInput::default(),
        }
    }
}

/// Formats a try the way evidence lists it.
pub fn try_ref(run_id: &str, try_number: Option<i64>, map_index: Option<i64>) -> String {
    let map = match map_index {
        Some(index) if index >= 0 => format!("[{index}]"),
        _ => String::new(),
    };
    match try_number {
        Some(number) => format!("{run_id}{map}#{number}"),
        None => format!("{run_id}{map}"),
    }
}

/// Runs every selected rule and returns findings in a fixed order, with `beside`'s result:
/// `beside` runs on a thread of its own, which then takes rules too
/// ([`crate::parallel::items_then_beside`]). An error is the first failing rule's, in the
/// order given. What a rule frees stays with the allocator for the next rules to reuse; the
/// engine gives it back to the system once they have all run, before the plan.
pub fn run_all_beside<B: Send>(
    prepared: &Prepared,
    rules: &[&dyn Rule],
    beside: impl FnOnce() -> B + Send,
) -> (Result<Vec<Finding>>, B) {
    let (checked, beside) = crate::parallel::items_then_beside(
        rules.len(),
        |index| {
            let rule = rules[index];
            let started = std::time::Instant::now();
            let found = rule.check(prepared);
            crate::timing::phase(&format!("rules:{}", rule.code()), started);
            found
        },
        beside,
    );
    let findings = checked
        .into_iter()
        .collect::<Result<Vec<_>>>()
        .map(|found| {
            let mut findings: Vec<Finding> = found.into_iter().flatten().collect();
            sort_findings(&mut findings);
            findings
        });
    (findings, beside)
}

/// Severity first, then code, then where: the same inputs always give the same order.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.code.cmp(b.code))
            .then_with(|| a.dag_id.cmp(&b.dag_id))
            .then_with(|| a.interval.cmp(&b.interval))
            .then_with(|| a.op_key.cmp(&b.op_key))
            .then_with(|| a.id.cmp(&b.id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_unique_and_documented() {
        let mut codes: Vec<_> = REGISTRY.iter().map(|rule| rule.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), REGISTRY.len(), "a code is registered twice");
        for rule in REGISTRY {
            let doc = doc_text(*rule);
            for heading in [
                "## What it detects",
                "## Why it matters",
                "## Example",
                "## Repair",
            ] {
                assert!(doc.contains(heading), "{} lacks {heading}", rule.code());
            }
            assert!(
                rule.name()
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '-')
            );
        }
    }

    #[test]
    fn lookup_by_code_or_name() {
        assert_eq!(
            lookup("l001").map(|rule| rule.name()),
            Some("lost-response")
        );
        assert_eq!(
            lookup("duplicate-export").map(|rule| rule.code()),
            Some("D001")
        );
        assert!(lookup("X999").is_none());
    }

    /// An audit's rules are picked by code or by name, as `lookup` finds them; none is all.
    #[test]
    fn selected_takes_codes_and_names() {
        let codes = |given: &[&str]| -> Vec<&str> {
            let given: Vec<String> = given.iter().map(|code| code.to_string()).collect();
            selected(&given).iter().map(|rule| rule.code()).collect()
        };
        assert_eq!(codes(&["duplicate-export", "l001"]), ["D001", "L001"]);
        assert_eq!(codes(&["D001", "Duplicate-Export"]), ["D001"]);
        assert_eq!(codes(&[]).len(), REGISTRY.len());
    }
}
