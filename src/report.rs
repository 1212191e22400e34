//! The audit report: coverage, summary and findings. Everything in it is derived from the
//! inputs, never from the clock, so the same inputs give byte-identical output. The reports
//! of `trace` and `ttl-risk` are in the modules below.

pub mod trace;
pub mod ttl_risk;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

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
    /// The earlier report's findings of rules this audit did not run (`--rule`, or a rule
    /// skipped on these inputs): neither resolved nor persisting, as nothing checked them.
    pub not_checked: usize,
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
    /// The tries not finished when the sources were read, judged when they finish, and the
    /// running ones whose heartbeat is too old (`crate::in_flight`); absent when there are none.
    #[serde(skip_serializing_if = "crate::in_flight::InFlightCoverage::is_empty")]
    pub in_flight: crate::in_flight::InFlightCoverage,
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
    /// Marks each finding new or persisting against `earlier` (an earlier report's findings)
    /// and lists the resolved ones. `rules` are the codes the audit ran (empty: every rule);
    /// an earlier finding of a rule that did not run, or was skipped, is not resolved.
    pub fn compare(&mut self, file: &str, earlier: Vec<serde_json::Value>, rules: &[String]) {
        let id =
            |finding: &serde_json::Value| finding["id"].as_str().unwrap_or_default().to_string();
        let skipped: Vec<&str> = self.coverage.rules_skipped.iter().map(|r| r.code).collect();
        let checked = |finding: &serde_json::Value| {
            let code = finding["code"].as_str().unwrap_or_default();
            (rules.is_empty() || rules.iter().any(|rule| rule.eq_ignore_ascii_case(code)))
                && !skipped.contains(&code)
        };
        let (earlier, unchecked): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
            earlier.into_iter().partition(|finding| checked(finding));
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
            not_checked: unchecked.len(),
        });
    }
}

/// What an audit notices of its configuration and its journal beyond the sources' own
/// warnings, kept as counts and the least example of each, so that the parts of a partitioned
/// audit add up to what the one audit says (`partition::merge`); [`Noticed::warnings`] makes
/// the report's texts from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Noticed {
    /// Per `[[operation]]` (its place in the config) that earlier ones shadow: a task that
    /// several operations match is audited under the first, in the config's order.
    pub shadowed: BTreeMap<usize, Shadowed>,
    /// The operations (their places) that audit at least one task: a catch-all glob after
    /// specific operations is shadowed on purpose, and warned of only if it audits nothing.
    #[serde(default)]
    pub auditing: BTreeSet<usize>,
    /// Journal rows of the audited runs that name a try Airflow does not have (their run, task,
    /// map index and try number match none of the run's tries): a journal that does not record
    /// Airflow's `map_index` for a mapped task, or counts tries its own way.
    pub without_their_try: Option<WithoutTheirTry>,
    /// The DAGs whose keys format a time in the DAG's own zone while the metadata read gave no
    /// zone for them (`Prepared::zones_unknown`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub zones_unknown: BTreeSet<String>,
}

/// A later operation's tasks that an earlier one takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shadowed {
    pub name: String,
    pub dag_id: String,
    pub task_id: String,
    /// How many audited tasks (a DAG's task) it gives up.
    pub tasks: usize,
    /// The least of them, `(dag_id, task_id)`, and the operation that takes it.
    pub least: (String, String),
    pub taken_by: String,
}

/// Journal rows without a try of their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WithoutTheirTry {
    pub rows: usize,
    /// The least of them: DAG, task, run, map index, try number.
    pub least: (String, String, String, Option<i64>, Option<i64>),
}

impl Noticed {
    /// What `self` and `other`, noticed by audits of disjoint parts (or of single tasks, as the
    /// audit counts them), say together.
    pub fn add(&mut self, other: Noticed) {
        self.auditing.extend(other.auditing);
        for (index, theirs) in other.shadowed {
            match self.shadowed.get_mut(&index) {
                None => {
                    self.shadowed.insert(index, theirs);
                }
                Some(ours) => {
                    ours.tasks += theirs.tasks;
                    if theirs.least < ours.least {
                        (ours.least, ours.taken_by) = (theirs.least, theirs.taken_by);
                    }
                }
            }
        }
        self.without_their_try = match (self.without_their_try.take(), other.without_their_try) {
            (Some(ours), Some(theirs)) => Some(WithoutTheirTry {
                rows: ours.rows + theirs.rows,
                least: ours.least.min(theirs.least),
            }),
            (ours, theirs) => ours.or(theirs),
        };
        self.zones_unknown.extend(other.zones_unknown);
    }

    /// The report's warnings: one per operation that matches audited tasks but audits none of
    /// them, one for the journal's rows without their try.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self
            .shadowed
            .iter()
            .filter(|(index, _)| !self.auditing.contains(index))
            .map(|(_, shadowed)| {
                let (dag, task) = &shadowed.least;
                format!(
                    "[[operation]] `{}` (dag_id `{}`, task_id `{}`) audits nothing: the {} task{} it matches an earlier operation matches first (e.g. {dag}.{task}, audited under `{}`); a task is audited under the first operation that matches it",
                    shadowed.name,
                    shadowed.dag_id,
                    shadowed.task_id,
                    shadowed.tasks,
                    if shadowed.tasks == 1 { "" } else { "s" },
                    shadowed.taken_by
                )
            })
            .collect();
        if let Some(without) = &self.without_their_try {
            let (dag, task, run, map_index, try_number) = &without.least;
            let shown = |value: &Option<i64>| value.map_or("NULL".to_string(), |v| v.to_string());
            let one = without.rows == 1;
            warnings.push(format!(
                "journal: {} row{} of the audited runs name{} a try Airflow does not have (e.g. {dag}.{task} in run {run}, map_index {}, try {}); {} judged without {}: check that the journal records Airflow's try_number and map_index",
                without.rows,
                if one { "" } else { "s" },
                if one { "s" } else { "" },
                shown(map_index),
                shown(try_number),
                if one { "its try is" } else { "their tries are" },
                if one { "it" } else { "them" },
            ));
        }
        if !self.zones_unknown.is_empty() {
            const SHOWN: usize = 10;
            let count = self.zones_unknown.len();
            let mut dags: Vec<String> = self
                .zones_unknown
                .iter()
                .take(SHOWN)
                .map(|dag| format!("`{dag}`"))
                .collect();
            if count > SHOWN {
                dags.push(format!("and {} more", count - SHOWN));
            }
            warnings.push(format!(
                "time zone unknown for {} DAG{} ({}): {} key template{} format{} times in the DAG's own zone, which the metadata read does not give (the Airflow REST API gives no DAG's own zone: its `/dags/{{dag_id}}/details` answers the server's default_timezone for every DAG; a database gives none for a DAG with no serialized version), so they are formatted in UTC; set `timezone` on the [[operation]] (or name the zone in the template) if a DAG is scheduled in another zone",
                count,
                if count == 1 { "" } else { "s" },
                dags.join(", "),
                if count == 1 { "its" } else { "their" },
                if count == 1 { "" } else { "s" },
                if count == 1 { "s" } else { "" },
            ));
        }
        warnings
    }
}
