//! Markdown for tickets and incident notes.

use super::{baseline_line, coverage_lines, summary_line};
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
                "| {}{} | {} {} | {} | {} | {} | {} |\n",
                finding.severity,
                finding
                    .baseline
                    .map(|mark| format!(" ({mark})"))
                    .unwrap_or_default(),
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
    if let Some(line) = baseline_line(report) {
        out.push_str(&format!("\n{}\n", escape(&line)));
    }
    out
}

/// `text` as a fenced code block that pastes as it is: no escapes inside, a fence longer than
/// any run of backticks in it. Control and bidirectional characters alone are written as
/// `\u{..}`, so what a reader sees is what a shell would run.
pub(crate) fn code_block(info: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for ch in text.chars() {
        run = if ch == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let mut body = String::with_capacity(text.len());
    for ch in text.chars() {
        if (ch.is_control() && ch != '\n') || super::is_bidi(ch) {
            body.push_str(&format!("\\u{{{:x}}}", ch as u32));
        } else {
            body.push(ch);
        }
    }
    format!("{fence}{info}\n{body}\n{fence}\n")
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
