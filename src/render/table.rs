//! The terminal table: coverage, findings, summary.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};

use super::{coverage_lines, summary_line, terminal_safe};
use crate::report::Report;

/// A table for a terminal, as every text output draws one: box-drawing lines, cells wrapped so
/// the table fits 160 columns whatever the terminal's width.
pub(super) fn terminal_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(160)
        .set_header(header.to_vec());
    table
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for line in coverage_lines(report) {
        out.push_str(&terminal_safe(&line));
        out.push('\n');
    }
    out.push('\n');
    if !report.findings.is_empty() {
        let mut table = terminal_table(&["severity", "code", "dag", "interval", "key", "finding"]);
        for finding in &report.findings {
            table.add_row([
                finding.severity.to_string(),
                format!("{} {}", finding.code, finding.rule),
                terminal_safe(finding.dag_id.as_deref().unwrap_or("-")),
                terminal_safe(finding.interval.as_deref().unwrap_or("-")),
                terminal_safe(finding.op_key.as_deref().unwrap_or("-")),
                terminal_safe(&finding.message),
            ]);
        }
        out.push_str(&table.to_string());
        out.push_str("\n\n");
    }
    out.push_str(&terminal_safe(&summary_line(report)));
    out.push('\n');
    out
}
