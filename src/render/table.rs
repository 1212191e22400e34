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

/// The table lists at most this many findings of one rule in one DAG.
pub const MAX_ROWS_PER_RULE: usize = 50;

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for line in coverage_lines(report) {
        out.push_str(&terminal_safe(&line));
        out.push('\n');
    }
    out.push('\n');
    if !report.findings.is_empty() {
        let mut table = terminal_table(&["severity", "code", "dag", "interval", "key", "finding"]);
        // A flood of one rule in one DAG (two million unclaimed objects) is listed as its
        // first findings and a count: the JSON, NDJSON and CSV reports list every one.
        let mut shown: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
        let mut left_out: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
        for finding in &report.findings {
            let group = (finding.dag_id.as_deref().unwrap_or("-"), finding.code);
            let listed = shown.entry(group).or_default();
            if *listed == MAX_ROWS_PER_RULE {
                *left_out.entry(group).or_default() += 1;
                continue;
            }
            *listed += 1;
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
        for ((dag, code), count) in &left_out {
            out.push_str(&terminal_safe(&format!(
                "{count} more {code} findings in {dag} not listed above (first {MAX_ROWS_PER_RULE} shown; `--format json`, `ndjson` or `csv` lists all)\n"
            )));
        }
        if !left_out.is_empty() {
            out.push('\n');
        }
    }
    out.push_str(&terminal_safe(&summary_line(report)));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_one_rule_is_listed_as_its_first_findings_and_a_count() {
        let mut report = crate::commands::demo::run().unwrap().report;
        let first = report.findings[0].clone();
        let flood = 3 * MAX_ROWS_PER_RULE + 7;
        report.findings = (0..flood)
            .map(|n| crate::rules::Finding {
                id: format!("{}-{n}", first.id),
                message: format!("finding number {n}"),
                ..first.clone()
            })
            .collect();
        let text = render(&report);
        let listed = text.matches("finding number ").count();
        assert_eq!(listed, MAX_ROWS_PER_RULE, "{text}");
        let dag = first.dag_id.as_deref().unwrap_or("-");
        assert!(
            text.contains(&format!(
                "{} more {} findings in {dag} not listed above",
                flood - MAX_ROWS_PER_RULE,
                first.code
            )),
            "{text}"
        );
    }
}
