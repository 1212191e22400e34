//! The Prometheus text exposition format, for node_exporter's textfile collector.

use std::fmt::Write as _;

use crate::report::Report;
use crate::rules::REGISTRY;

/// Every rule gets a sample, zero included, so an alert on a rule never goes stale.
pub fn render(report: &Report, duration_seconds: f64) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let findings = REGISTRY
        .iter()
        .map(|rule| {
            let count = report
                .findings
                .iter()
                .filter(|f| f.code == rule.code())
                .count();
            (
                format!(
                    "{{rule=\"{}\",name=\"{}\",severity=\"{}\"}}",
                    rule.code(),
                    rule.name(),
                    rule.severity()
                ),
                count.to_string(),
            )
        })
        .collect();
    metric(
        "onceonly_findings",
        "gauge",
        "Findings of the last audit, by rule and severity.",
        findings,
    );
    if let Some(baseline) = &report.baseline {
        metric(
            "onceonly_findings_new",
            "gauge",
            "Findings the baseline report did not have.",
            vec![(String::new(), baseline.new.to_string())],
        );
        metric(
            "onceonly_findings_resolved",
            "gauge",
            "Findings of the baseline report no longer reported.",
            vec![(String::new(), baseline.resolved.len().to_string())],
        );
    }
    metric(
        "onceonly_reconciled_retries",
        "gauge",
        "Retries that got the same object back from the provider.",
        vec![(String::new(), report.summary.reconciled_retries.to_string())],
    );
    let rows = report
        .coverage
        .sources
        .iter()
        .map(|source| {
            (
                format!("{{table=\"{}\"}}", source.table),
                source.rows.to_string(),
            )
        })
        .collect();
    metric(
        "onceonly_source_rows",
        "gauge",
        "Rows read from each source.",
        rows,
    );
    metric(
        "onceonly_audited_tries",
        "gauge",
        "Tries of operation tasks the audit covered.",
        vec![(String::new(), report.coverage.tries.to_string())],
    );
    metric(
        "onceonly_audited_runs",
        "gauge",
        "DAG runs the audit covered.",
        vec![(String::new(), report.coverage.runs.to_string())],
    );
    let bound = |value: &Option<String>| {
        value
            .as_deref()
            .and_then(crate::timestamp::parse)
            .map(|micros| format!("{}", micros / 1_000_000))
    };
    let mut window = Vec::new();
    if let Some(from) = bound(&report.coverage.provider_from) {
        window.push(("{bound=\"from\"}".to_string(), from));
    }
    if let Some(to) = bound(&report.coverage.provider_to) {
        window.push(("{bound=\"to\"}".to_string(), to));
    }
    if !window.is_empty() {
        metric(
            "onceonly_provider_window_timestamp_seconds",
            "gauge",
            "The created-at window the provider listing covered.",
            window,
        );
    }
    metric(
        "onceonly_audit_duration_seconds",
        "gauge",
        "Wall time of the last audit.",
        vec![(String::new(), format!("{duration_seconds:.3}"))],
    );
    out
}
