//! The audit report: coverage, summary and findings. Everything in it is derived from the
//! inputs, never from the clock, so the same inputs give byte-identical output. The reports
//! of `trace` and `ttl-risk` are in the modules below.

pub mod trace;
pub mod ttl_risk;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::rules::{Finding, Severity};

pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub format_version: u32,
    pub coverage: Coverage,
    pub summary: Summary,
    pub findings: Vec<Finding>,
    /// Against `--baseline`: what is new, what persists, what was resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub file: String,
    pub new: usize,
    pub persisting: usize,
    /// The earlier report's findings that are no longer reported, as that report had them.
    pub resolved: Vec<serde_json::Value>,
}

/// What the report is about, so nobody reads "no findings" over data that was not there.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// Activity window of the audited tries (`--since`/`--until`), RFC 3339; None is open.
    pub since: Option<String>,
    pub until: Option<String>,
    /// Range of data intervals (`--interval-from`/`--interval-to`): runs whose interval starts
    /// in it, RFC 3339, the end excluded; absent when not given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_to: Option<String>,
    pub dag: Option<String>,
    pub sources: Vec<SourceCoverage>,
    /// Created-at window in which the provider's objects were read; None is open.
    pub provider_from: Option<String>,
    pub provider_to: Option<String>,
    /// Which definition of the interval the audited tries used (SPEC §2): count per basis.
    pub interval_basis: BTreeMap<String, usize>,
    pub operations: Vec<String>,
    pub runs: usize,
    pub tries: usize,
    /// Rules that could not run on these inputs, with the reason.
    pub rules_skipped: Vec<SkippedRule>,
    /// What the sources warned about (an unknown but compatible schema revision, ...).
    pub warnings: Vec<String>,
    /// A `--dag` audit only: the provider's objects in the covered window it left out because
    /// they belong to other DAGs, or to none (an unscoped audit reports those).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects_left_out: Option<crate::prepare::LeftOut>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceCoverage {
    pub table: &'static str,
    pub source: String,
    pub rows: usize,
    /// Rows left after the audit's filters (dag, window).
    pub rows_audited: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct SkippedRule {
    pub code: &'static str,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub findings: usize,
    pub by_severity: BTreeMap<Severity, usize>,
    pub by_rule: BTreeMap<&'static str, usize>,
    /// Retries that got the same object back: proof the protection works.
    pub reconciled_retries: usize,
    pub verdicts: BTreeMap<String, usize>,
}

impl Summary {
    pub fn new(findings: &[Finding], verdicts: BTreeMap<String, usize>) -> Summary {
        let mut summary = Summary {
            findings: findings.len(),
            reconciled_retries: verdicts.get("reconciled").copied().unwrap_or(0),
            verdicts,
            ..Summary::default()
        };
        for finding in findings {
            *summary.by_severity.entry(finding.severity).or_default() += 1;
            *summary.by_rule.entry(finding.code).or_default() += 1;
        }
        summary
    }
}

impl Report {
    /// Whether any finding is at or above `threshold` (None: never fail on findings); with
    /// `only_new`, findings the baseline already had do not count.
    pub fn fails(&self, threshold: Option<Severity>, only_new: bool) -> bool {
        threshold.is_some_and(|threshold| {
            self.findings
                .iter()
                .filter(|finding| !only_new || finding.baseline != Some("persisting"))
                .any(|finding| finding.severity >= threshold)
        })
    }

    /// Marks every finding `new` or `persisting` against an earlier report's findings (by
    /// id) and lists the earlier ones no longer reported.
    pub fn compare(&mut self, file: &str, earlier: Vec<serde_json::Value>) {
        let id =
            |finding: &serde_json::Value| finding["id"].as_str().unwrap_or_default().to_string();
        let known: std::collections::BTreeSet<String> = earlier.iter().map(id).collect();
        let current: std::collections::BTreeSet<String> =
            self.findings.iter().map(|f| f.id.clone()).collect();
        let (mut new, mut persisting) = (0, 0);
        for finding in &mut self.findings {
            if known.contains(&finding.id) {
                finding.baseline = Some("persisting");
                persisting += 1;
            } else {
                finding.baseline = Some("new");
                new += 1;
            }
        }
        let mut resolved: Vec<serde_json::Value> = earlier
            .into_iter()
            .filter(|f| !current.contains(&id(f)))
            .collect();
        resolved.sort_by_key(id);
        self.baseline = Some(Baseline {
            file: file.to_string(),
            new,
            persisting,
            resolved,
        });
    }
}
