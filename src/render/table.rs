//! The terminal table: coverage, findings, summary.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};

use super::{baseline_line, coverage_lines, summary_line, terminal_safe};
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

/// Where an incident happened: its DAG and interval.
type Place<'a> = (Option<&'a str>, Option<&'a str>);

/// The default terminal report, in the manner of ruff's concise output: the coverage, then the
/// findings grouped by interval (the findings of one interval are one incident: a D001, R001
/// and T001 there are one story), one line each (`severity code key: message`, wrapped under
/// itself at the style's width), then the summary and the next commands to run.
pub fn concise(report: &Report, style: super::style::Style) -> String {
    use super::style;
    let mut out = String::new();
    // The coverage and summary lines stay whole (scripts and people search them); the findings
    // are wrapped.
    for line in coverage_lines(report) {
        out.push_str(&terminal_safe(&line));
        out.push('\n');
    }
    out.push('\n');
    // Incidents in the order of their worst finding (errors first), then DAG and interval.
    let mut incidents: Vec<(Place<'_>, Vec<&crate::rules::Finding>)> = Vec::new();
    let mut at: std::collections::HashMap<Place<'_>, usize> = Default::default();
    for finding in &report.findings {
        let place = (finding.dag_id.as_deref(), finding.interval.as_deref());
        let index = *at.entry(place).or_insert_with(|| {
            incidents.push((place, Vec::new()));
            incidents.len() - 1
        });
        incidents[index].1.push(finding);
    }
    let worst =
        |findings: &[&crate::rules::Finding]| findings.iter().map(|finding| finding.severity).max();
    incidents
        .sort_by(|(a_place, a), (b_place, b)| worst(b).cmp(&worst(a)).then(a_place.cmp(b_place)));
    let mut shown: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    let mut left_out: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    for ((dag, interval), findings) in &incidents {
        let mut lines = String::new();
        for finding in findings {
            let group = (dag.unwrap_or("-"), finding.code);
            let listed = shown.entry(group).or_default();
            if *listed == MAX_ROWS_PER_RULE {
                *left_out.entry(group).or_default() += 1;
                continue;
            }
            *listed += 1;
            let severity = format!("{:<7}", finding.severity.to_string());
            let mark = match finding.baseline {
                Some(mark) => format!(" [{mark}]"),
                None => String::new(),
            };
            let key = finding
                .op_key
                .as_deref()
                .map(|key| format!(" {}", terminal_safe(key)))
                .unwrap_or_default();
            let text = format!(
                "{severity} {} {}{mark}{key}: {}",
                finding.code,
                finding.rule,
                terminal_safe(&finding.message)
            );
            let wrapped = wrap(&text, "          ", style.width.saturating_sub(2));
            // Colour after wrapping, so the escape codes do not count as columns.
            let coloured = wrapped.replacen(
                &severity,
                &style::severity(style, finding.severity, &severity),
                1,
            );
            for line in coloured.lines() {
                lines.push_str("  ");
                lines.push_str(line);
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            continue;
        }
        let count = match findings.len() {
            1 => String::new(),
            n => format!("  ({n} findings)"),
        };
        let header = format!(
            "{}  {}{count}",
            terminal_safe(dag.unwrap_or("(no DAG)")),
            terminal_safe(interval.unwrap_or("(no interval)"))
        );
        out.push_str(&style::bold(style, &header));
        out.push('\n');
        out.push_str(&lines);
        out.push('\n');
    }
    for ((dag, code), count) in &left_out {
        out.push_str(&wrap(
            &terminal_safe(&format!(
                "{count} more {code} findings in {dag} not listed above (first {MAX_ROWS_PER_RULE} shown; `--format json`, `ndjson` or `csv` lists all)"
            )),
            "",
            style.width,
        ));
    }
    if !left_out.is_empty() {
        out.push('\n');
    }
    out.push_str(&terminal_safe(&summary_line(report)));
    out.push('\n');
    if let Some(line) = baseline_line(report) {
        out.push_str(&terminal_safe(&line));
        out.push('\n');
    }
    if let Some(((Some(dag), Some(interval)), _)) = incidents.first() {
        let start = interval.split('/').next().unwrap_or(interval);
        out.push_str(&wrap(
            &terminal_safe(&format!(
                "next: `onceonly trace --config CONFIG --dag {dag} --interval {start}` tells the first incident's story; `--plan plan.md` proposes the repairs; `--format full` shows every field"
            )),
            "",
            style.width,
        ));
    }
    out
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole),
/// each after the first starting with `indent`; ends with a newline.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let width = width.max(indent.chars().count() + 20);
    let mut out = String::new();
    let indent_len = indent.chars().count();
    let mut line = String::new();
    let mut line_len = 0;
    // Whether the line holds no word yet (only its indent).
    let mut fresh = true;
    for word in text.split(' ') {
        let word_len = word.chars().count();
        if !fresh && line_len + 1 + word_len > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
            line_len = indent_len;
        } else if !fresh {
            line.push(' ');
            line_len += 1;
        }
        fresh = false;
        line.push_str(word);
        line_len += word_len;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
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
    if let Some(line) = baseline_line(report) {
        out.push_str(&terminal_safe(&line));
        out.push('\n');
    }
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
