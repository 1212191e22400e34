//! Markdown for tickets and incident notes.

use super::{coverage_lines, summary_line};
use crate::report::Report;

pub fn render(report: &Report) -> String {
    let mut out = String::from("# onceonly audit\n\n## Coverage\n\n");
    for line in coverage_lines(report) {
        out.push_str(&format!("- {}\n", escape(&line)));
    }
    out.push_str("\n## Findings\n\n");
    if report.findings.is_empty() {
        out.push_str("None over the coverage above.\n");
    } else {
        out.push_str(
            "| severity | code | dag | interval | key | finding |\n|---|---|---|---|---|---|\n",
        );
        for finding in &report.findings {
            out.push_str(&format!(
                "| {} | {} {} | {} | {} | {} | {} |\n",
                finding.severity,
                finding.code,
                finding.rule,
                escape(finding.dag_id.as_deref().unwrap_or("-")),
                escape(finding.interval.as_deref().unwrap_or("-")),
                escape(finding.op_key.as_deref().unwrap_or("-")),
                escape(&finding.message),
            ));
        }
    }
    out.push_str(&format!(
        "\n## Summary\n\n{}\n",
        escape(&summary_line(report))
    ));
    out
}

/// Keeps provider and Airflow strings from breaking out of a table cell or becoming markup.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' => {
                out.push('\\');
                out.push(ch);
            }
            '\n' | '\r' => out.push(' '),
            ch if ch.is_control() || super::is_bidi(ch) => {
                out.push_str(&format!("\\u{{{:x}}}", ch as u32))
            }
            ch => out.push(ch),
        }
    }
    out
}
