//! `audit --format html` and `audit --html FILE`: the nightly report as one self-contained page.
//!
//! The page has no external assets and no script (its Content-Security-Policy forbids both):
//! inline CSS and SVG only, so it can be mailed, archived or served as it is. It shows the
//! coverage, the counts by rule, severity and verdict, what is new, persisting or resolved
//! against `--baseline`, and per DAG a picture of its intervals along time, one cell per
//! interval coloured by the worst finding there or, with no finding, by its tries' verdicts,
//! followed by that DAG's findings grouped by rule with the rule's own explanation. Every
//! string from Airflow, the journal, the provider or an earlier report is escaped. Nothing in
//! it comes from the clock: the same report gives the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use polars::prelude::*;

use crate::error::{EngineContext, Result};
use crate::report::Report;
use crate::rules::{Finding, Severity};

/// Escapes text for HTML element content and attribute values. Control and bidirectional
/// characters are shown as `\u{..}`, not obeyed: a bidi control would reorder the text
/// around it.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            ch if ch.is_control() || super::is_bidi(ch) => {
                let _ = write!(out, "\\u{{{:x}}}", ch as u32);
            }
            ch => out.push(ch),
        }
    }
    out
}

/// A whole page: the head every onceonly page has (no external loads allowed), `style` and
/// `body` as given. `title` is escaped here; `style` and `body` must be escaped already.
pub fn document(title: &str, style: &str, body: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<style>
body {{ font: 13px system-ui, sans-serif; margin: 20px; color: #222; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }}
{style}</style></head>
<body>
{body}</body></html>
"#,
        escape(title)
    )
}

/// Where its tries' verdicts leave an interval that has no finding.
fn verdicts_class(verdicts: &BTreeMap<String, usize>) -> Class {
    let had = |verdict: &str| verdicts.contains_key(verdict);
    let settled = had("committed") || had("reconciled");
    if had("duplicate") || (had("lost-response") && !settled) {
        Class::BadVerdict
    } else if had("lost-response") {
        Class::Recovered
    } else if settled || had("no-operation") {
        Class::Fine
    } else if had("intent-only") {
        Class::Unfinished
    } else if had("failed-before-effect") {
        Class::NoEffect
    } else {
        Class::Fine
    }
}

/// What colours a cell, from least to most alarming: a cell that stands for several intervals
/// takes the worst of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Committed, reconciled, or skipped because the journal had it (`no-operation`).
    Fine,
    /// A response was lost and a later try settled the interval: it got the same object back
    /// (`reconciled`), or committed a new one while the lost one is no longer live (voided).
    Recovered,
    /// Every try failed before causing anything: the interval has no export yet.
    NoEffect,
    /// An intent with no outcome, nothing created and nothing committed.
    Unfinished,
    /// A `duplicate` try, or a `lost-response` no later try settled, that no finding of the
    /// selected rules names.
    BadVerdict,
    Info,
    Warning,
    Error,
}

impl Class {
    const ALL: [Class; 8] = [
        Class::Error,
        Class::Warning,
        Class::Info,
        Class::BadVerdict,
        Class::Unfinished,
        Class::NoEffect,
        Class::Recovered,
        Class::Fine,
    ];

    fn of_severity(severity: Severity) -> Class {
        match severity {
            Severity::Error => Class::Error,
            Severity::Warning => Class::Warning,
            Severity::Info => Class::Info,
        }
    }

    /// The CSS class name a cell and its legend entry carry.
    fn name(self) -> &'static str {
        match self {
            Class::Error => "error",
            Class::Warning => "warning",
            Class::Info => "info",
            Class::BadVerdict => "bad-verdict",
            Class::Unfinished => "unfinished",
            Class::NoEffect => "no-effect",
            Class::Recovered => "recovered",
            Class::Fine => "fine",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Class::Error => "#d62728",
            Class::Warning => "#ff7f0e",
            Class::Info => "#1f77b4",
            Class::BadVerdict => "#9467bd",
            Class::Unfinished => "#bcbd22",
            Class::NoEffect => "#7f7f7f",
            Class::Recovered => "#98df8a",
            Class::Fine => "#2ca02c",
        }
    }

    fn meaning(self) -> &'static str {
        match self {
            Class::Error => "an error finding",
            Class::Warning => "a warning finding",
            Class::Info => "an info finding",
            Class::BadVerdict => "a duplicate or unsettled lost-response try, no finding",
            Class::Unfinished => "an intent with no outcome",
            Class::NoEffect => "every try failed before any effect",
            Class::Recovered => "a lost response a later try settled",
            Class::Fine => "committed",
        }
    }
}

/// The label of tries whose interval could not be told (no data interval, logical date or
/// run_after).
const NO_INTERVAL: &str = "(no interval)";

/// The audited intervals of each DAG and how many of their tries had each verdict: what the
/// page's pictures are drawn from, derived from the audit's verdicts (one row per try).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals {
    /// dag_id -> interval label -> verdict -> tries.
    dags: BTreeMap<String, BTreeMap<String, BTreeMap<String, usize>>>,
}

impl Intervals {
    /// Counts the tries of each (dag_id, interval, verdict) in the audit's verdict frame.
    pub fn of(verdicts: &DataFrame) -> Result<Intervals> {
        let counted = verdicts
            .clone()
            .lazy()
            .group_by([col("dag_id"), col("interval"), col("verdict")])
            .agg([len().alias("tries")])
            .collect()
            .engine("counting verdicts per interval")?;
        let dags = crate::cells::text_column(&counted, "dag_id")?;
        let intervals = crate::cells::text_column(&counted, "interval")?;
        let verdicts = crate::cells::text_column(&counted, "verdict")?;
        let tries = crate::cells::int_column(&counted, "tries")?;
        let mut out = Intervals::default();
        for (((dag, interval), verdict), tries) in dags
            .iter()
            .zip(intervals.iter())
            .zip(verdicts.iter())
            .zip(tries.iter())
        {
            *out.dags
                .entry(dag.unwrap_or_default().to_string())
                .or_default()
                .entry(interval.unwrap_or(NO_INTERVAL).to_string())
                .or_default()
                .entry(verdict.unwrap_or("unknown").to_string())
                .or_default() += tries.unwrap_or(0).max(0) as usize;
        }
        Ok(out)
    }
}

/// One interval of one DAG as the picture shows it.
struct Cell<'a> {
    interval: &'a str,
    verdicts: Option<&'a BTreeMap<String, usize>>,
    findings: Vec<&'a Finding>,
}

impl Cell<'_> {
    fn class(&self) -> Class {
        let worst_finding = self
            .findings
            .iter()
            .map(|finding| Class::of_severity(finding.severity))
            .max();
        worst_finding
            .or(self.verdicts.map(verdicts_class))
            .unwrap_or(Class::Fine)
    }

    fn title(&self) -> String {
        let mut title = self.interval.to_string();
        if !self.findings.is_empty() {
            let codes: Vec<&str> = self.findings.iter().map(|finding| finding.code).collect();
            let _ = write!(title, " | findings: {}", codes.join(", "));
        }
        if let Some(verdicts) = self.verdicts {
            let tries: Vec<String> = verdicts
                .iter()
                .map(|(verdict, n)| format!("{verdict} {n}"))
                .collect();
            let _ = write!(title, " | tries: {}", tries.join(", "));
        }
        title
    }
}

/// Findings of no DAG (an object no try or journal row ties to one) are listed under this.
const NO_DAG: &str = "(no DAG)";

/// A picture holds at most this many cells; a DAG with more intervals gets cells that each
/// stand for a run of consecutive intervals (coloured by the worst of them), so the page's
/// size does not grow with the number of intervals.
const MAX_CELLS: usize = 1_000;
/// A finding table lists at most this many findings of one rule in one DAG; the JSON report
/// has them all.
const MAX_ROWS: usize = 500;
const PER_ROW: usize = 50;
const CELL: usize = 16;
const GAP: usize = 2;
const LEFT: usize = 170;

/// The nightly report as one HTML page.
pub fn page(report: &Report, intervals: &Intervals) -> String {
    let mut by_dag: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for finding in &report.findings {
        by_dag
            .entry(finding.dag_id.as_deref().unwrap_or(NO_DAG))
            .or_default()
            .push(finding);
    }
    for dag in intervals.dags.keys() {
        by_dag.entry(dag).or_default();
    }
    // The pictures come first, one per DAG, so the page opens on where things went wrong;
    // each links to its DAG's findings below.
    let (mut pictures, mut sections) = (String::new(), String::new());
    let mut cells_by_class: BTreeMap<Class, usize> = BTreeMap::new();
    for (index, (dag, findings)) in by_dag.iter().enumerate() {
        let anchor = format!("dag-{index}");
        let cells = cells(intervals.dags.get(*dag), findings);
        if !cells.is_empty() {
            pictures.push_str(&picture(
                dag,
                &anchor,
                findings.len(),
                &cells,
                &mut cells_by_class,
            ));
        }
        sections.push_str(&dag_section(dag, &anchor, findings, cells.len()));
    }
    let mut body = String::from("<h1>onceonly audit</h1>\n");
    body.push_str(&coverage(report));
    body.push_str(&counts(report));
    if report.baseline.is_some() {
        body.push_str(&baseline(report));
    }
    body.push_str("<section id=\"intervals\"><h2>Intervals by DAG</h2>\n");
    body.push_str(&legend(&cells_by_class));
    body.push_str(&pictures);
    body.push_str("</section>\n<section id=\"dags\"><h2>Findings by DAG</h2>\n");
    body.push_str(&sections);
    body.push_str("</section>\n");
    document("onceonly audit", STYLE, &body)
}

const STYLE: &str = "figure { margin: 8px 0 14px 0; } figcaption { margin-bottom: 4px; }
h3 { margin-top: 28px; border-top: 1px solid #ccc; padding-top: 10px; }
.doc { background: #f6f6f6; padding: 4px 10px; margin: 6px 0; }
.doc p { margin: 4px 0; }
.sev { display: inline-block; padding: 2px 8px; margin-right: 8px; border-radius: 3px; color: white; }
.sev.error { background: #d62728; } .sev.warning { background: #ff7f0e; } .sev.info { background: #1f77b4; }
.legend span { display: inline-block; margin-right: 14px; }
.new { color: #d62728; font-weight: bold; } .persisting { color: #555; }
.warning-line { color: #b35900; } .skipped { color: #b35900; }
td.count { text-align: right; }
";

/// The cells of one DAG's picture in time order: every interval its tries had, and every
/// interval its findings name.
fn cells<'a>(
    verdicts: Option<&'a BTreeMap<String, BTreeMap<String, usize>>>,
    findings: &[&'a Finding],
) -> Vec<Cell<'a>> {
    let mut cells: BTreeMap<&str, Cell<'a>> = BTreeMap::new();
    for (interval, counts) in verdicts.into_iter().flatten() {
        cells.insert(
            interval,
            Cell {
                interval,
                verdicts: Some(counts),
                findings: Vec::new(),
            },
        );
    }
    for finding in findings {
        if let Some(interval) = finding.interval.as_deref() {
            cells
                .entry(interval)
                .or_insert(Cell {
                    interval,
                    verdicts: None,
                    findings: Vec::new(),
                })
                .findings
                .push(finding);
        }
    }
    // Interval labels are fixed-width RFC 3339 UTC times, so text order is time order; the
    // label of tries without an interval starts with `(` and sorts before them: it goes last.
    let (mut timed, untimed): (Vec<Cell>, Vec<Cell>) = cells
        .into_values()
        .partition(|cell| cell.interval != NO_INTERVAL);
    timed.extend(untimed);
    timed
}

fn coverage(report: &Report) -> String {
    let coverage = &report.coverage;
    let mut out = String::from("<section id=\"coverage\"><h2>Coverage</h2>\n<ul>");
    // The lines the table and markdown reports start with; warnings and skipped rules are
    // shown below, highlighted, from the report's own fields.
    for line in super::coverage_lines(report) {
        if !line.starts_with("warning: ") && !line.starts_with("not checked: ") {
            let _ = write!(out, "<li>{}</li>", escape(&line));
        }
    }
    out.push_str("</ul>\n");
    for warning in &coverage.warnings {
        let _ = writeln!(
            out,
            "<p class=\"warning-line\">warning: {}</p>",
            escape(warning)
        );
    }
    if coverage.rules_skipped.is_empty() {
        out.push_str("<p class=\"rules-run\">Every selected rule ran.</p>\n");
    }
    for skipped in &coverage.rules_skipped {
        let _ = writeln!(
            out,
            "<p class=\"skipped\" data-rule=\"{c}\">not checked: {c} ({})</p>",
            escape(&skipped.reason),
            c = escape(skipped.code),
        );
    }
    out.push_str("</section>\n");
    out
}

fn counts(report: &Report) -> String {
    let summary = &report.summary;
    let mut out = format!(
        "<section id=\"counts\"><h2>Findings: <span id=\"findings-total\">{}</span></h2>\n<p>",
        summary.findings
    );
    for (severity, n) in summary.by_severity.iter().rev() {
        let _ = write!(
            out,
            "<span class=\"sev {severity}\" data-severity=\"{severity}\" data-count=\"{n}\">{n} {severity}</span>"
        );
    }
    out.push_str("</p>\n");
    if !summary.by_rule.is_empty() {
        out.push_str(
            "<table id=\"by-rule\"><tr><th>rule</th><th>name</th><th>severity</th><th>findings</th></tr>",
        );
        for (code, n) in &summary.by_rule {
            let (name, severity) = crate::rules::lookup(code)
                .map(|rule| (rule.name(), rule.severity().to_string()))
                .unwrap_or_default();
            let _ = write!(
                out,
                "<tr data-rule=\"{code}\"><td>{code}</td><td>{name}</td><td>{severity}</td><td class=\"count\">{n}</td></tr>",
                code = escape(code),
                name = escape(name),
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str(
        "<h3>Tries by verdict</h3><table id=\"by-verdict\"><tr><th>verdict</th><th>tries</th></tr>",
    );
    for (verdict, n) in &summary.verdicts {
        let _ = write!(
            out,
            "<tr data-verdict=\"{v}\"><td>{v}</td><td class=\"count\">{n}</td></tr>",
            v = escape(verdict)
        );
    }
    let _ = writeln!(
        out,
        "</table>\n<p>{} retries got the same object back (reconciled): the protection worked.</p>\n</section>",
        summary.reconciled_retries
    );
    out
}

fn baseline(report: &Report) -> String {
    let Some(baseline) = &report.baseline else {
        return String::new();
    };
    let mut out = format!(
        "<section id=\"baseline\"><h2>Against {}</h2>\n<p><span class=\"new\" id=\"new\">{}</span> new, <span class=\"persisting\" id=\"persisting\">{}</span> persisting, <span id=\"resolved\">{}</span> resolved</p>\n",
        escape(&baseline.file),
        baseline.new,
        baseline.persisting,
        baseline.resolved.len()
    );
    if !baseline.resolved.is_empty() {
        out.push_str("<table class=\"resolved\"><tr><th>rule</th><th>dag</th><th>interval</th><th>finding</th></tr>");
        // The earlier report is a file anyone could have edited: every field is text to escape.
        let field = |finding: &serde_json::Value, name: &str| -> String {
            match &finding[name] {
                serde_json::Value::String(text) => escape(text),
                serde_json::Value::Null => "-".into(),
                other => escape(&other.to_string()),
            }
        };
        for finding in &baseline.resolved {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                field(finding, "code"),
                field(finding, "dag_id"),
                field(finding, "interval"),
                field(finding, "message"),
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");
    out
}

fn legend(cells_by_class: &BTreeMap<Class, usize>) -> String {
    let mut out = String::from("<p class=\"legend\">One cell per interval, in time order: ");
    for class in Class::ALL {
        let _ = write!(
            out,
            "<span class=\"key {name}\" data-cells=\"{n}\"><span style=\"color:{colour}\">■</span> {meaning} ({n})</span>",
            name = class.name(),
            colour = class.colour(),
            meaning = class.meaning(),
            n = cells_by_class.get(&class).copied().unwrap_or(0),
        );
    }
    out.push_str("</p>\n");
    out
}

fn dag_section(dag: &str, anchor: &str, findings: &[&Finding], intervals: usize) -> String {
    let mut out = format!(
        "<section class=\"dag\" id=\"{anchor}\" data-dag=\"{d}\"><h3>{d}</h3>\n<p>{intervals} intervals, <span class=\"dag-findings\">{}</span> findings</p>\n",
        findings.len(),
        d = escape(dag),
    );
    let mut by_rule: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
    for finding in findings {
        by_rule.entry(finding.code).or_default().push(finding);
    }
    for (code, findings) in by_rule {
        out.push_str(&rule_findings(code, &findings));
    }
    out.push_str("</section>\n");
    out
}

/// The DAG's intervals as rows of cells, `PER_ROW` to a row, each row labelled with the
/// interval of its first cell; the caption links to the DAG's findings.
fn picture(
    dag: &str,
    anchor: &str,
    findings: usize,
    cells: &[Cell],
    cells_by_class: &mut BTreeMap<Class, usize>,
) -> String {
    let span = cells.len().div_ceil(MAX_CELLS);
    let shown: Vec<(Class, String, &str)> = cells
        .chunks(span)
        .map(|run| {
            let class = run.iter().map(Cell::class).max().unwrap_or(Class::Fine);
            let title = if run.len() == 1 {
                run[0].title()
            } else {
                let worst: Vec<String> = run
                    .iter()
                    .filter(|cell| cell.class() == class)
                    .map(Cell::title)
                    .take(3)
                    .collect();
                format!(
                    "{} intervals from {} to {}; worst: {}",
                    run.len(),
                    run[0].interval,
                    run[run.len() - 1].interval,
                    worst.join(" / ")
                )
            };
            (class, title, run[0].interval)
        })
        .collect();
    let rows = shown.len().div_ceil(PER_ROW);
    let (width, height) = (LEFT + PER_ROW * (CELL + GAP), rows * (CELL + GAP) + 4);
    let mut out = format!(
        "<figure class=\"dag-intervals\" data-dag=\"{d}\"><figcaption><a href=\"#{anchor}\">{d}</a>: {} intervals, {findings} findings{}</figcaption>\n",
        cells.len(),
        if span > 1 {
            format!("; each cell stands for {span} consecutive intervals")
        } else {
            String::new()
        },
        d = escape(dag),
    );
    let _ = write!(
        out,
        r#"<svg class="intervals" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="intervals of {}">"#,
        escape(dag)
    );
    for (index, (class, title, first)) in shown.iter().enumerate() {
        let (row, column) = (index / PER_ROW, index % PER_ROW);
        let y = row * (CELL + GAP) + 2;
        if column == 0 {
            let _ = write!(
                out,
                r##"<text x="0" y="{}" font-size="11" fill="#555">{}</text>"##,
                y + CELL - 4,
                // A label `start/end` is shown by its start, to fit beside the row.
                escape(first.split('/').next().unwrap_or(first))
            );
        }
        let _ = write!(
            out,
            r#"<rect class="cell {}" x="{}" y="{y}" width="{CELL}" height="{CELL}" fill="{}"><title>{}</title></rect>"#,
            class.name(),
            LEFT + column * (CELL + GAP),
            class.colour(),
            escape(title)
        );
        *cells_by_class.entry(*class).or_default() += 1;
    }
    out.push_str("</svg></figure>\n");
    out
}

/// One rule's findings in one DAG, under the rule's own explanation.
fn rule_findings(code: &str, findings: &[&Finding]) -> String {
    let rule = crate::rules::lookup(code);
    let mut out = format!(
        "<div class=\"rule\" data-rule=\"{c}\"><h4>{c} {} ({}): <span class=\"rule-findings\">{}</span> finding(s)</h4>\n",
        escape(rule.map(|rule| rule.name()).unwrap_or_default()),
        rule.map(|rule| rule.severity().to_string())
            .unwrap_or_default(),
        findings.len(),
        c = escape(code),
    );
    if let Some(rule) = rule {
        out.push_str("<div class=\"doc\">");
        let doc = crate::rules::doc_text(rule);
        for heading in ["What it detects", "Repair"] {
            if let Some(text) = doc_section(&doc, heading) {
                let _ = write!(out, "<p><b>{heading}</b>: {}</p>", with_code(&text));
            }
        }
        out.push_str("</div>\n");
    }
    // Marked `new` or `persisting` only against a baseline: without one the column is left out.
    let against_baseline = findings.iter().any(|finding| finding.baseline.is_some());
    let _ = write!(
        out,
        "<table class=\"findings\"><tr><th>severity</th><th>interval</th><th>key</th><th>finding</th><th>evidence</th>{}</tr>",
        if against_baseline {
            "<th>baseline</th>"
        } else {
            ""
        }
    );
    for finding in findings.iter().take(MAX_ROWS) {
        let evidence = &finding.evidence;
        let ids: Vec<&String> = evidence
            .external_ids
            .iter()
            .chain(&evidence.tries)
            .collect();
        let ids: Vec<String> = ids.iter().map(|id| escape(id)).collect();
        let marked = match finding.baseline {
            Some(mark) if against_baseline => format!("<td class=\"{mark}\">{mark}</td>"),
            _ => String::new(),
        };
        let _ = write!(
            out,
            "<tr class=\"finding {sev}\" data-id=\"{id}\"><td>{sev}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{marked}</tr>",
            escape(finding.interval.as_deref().unwrap_or("-")),
            escape(finding.op_key.as_deref().unwrap_or("-")),
            escape(&finding.message),
            ids.join("<br>"),
            sev = finding.severity,
            id = escape(&finding.id),
        );
    }
    out.push_str("</table>\n");
    if findings.len() > MAX_ROWS {
        let _ = writeln!(
            out,
            "<p class=\"more\">{} more {} findings in this DAG are not listed here; <code>--format json</code> lists every finding.</p>",
            findings.len() - MAX_ROWS,
            escape(code)
        );
    }
    out.push_str("</div>\n");
    out
}

/// The text under `## heading` in a rule's doc, as one paragraph.
fn doc_section(doc: &str, heading: &str) -> Option<String> {
    let start = doc.find(&format!("## {heading}\n"))? + heading.len() + 4;
    let rest = &doc[start..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    Some(rest[..end].split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Escaped text with its `backquoted` parts set as code.
fn with_code(text: &str) -> String {
    escape(text)
        .split('`')
        .enumerate()
        .map(|(index, part)| {
            if index % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_doc_section_is_the_text_up_to_the_next_heading() {
        let doc = "## What it detects\nTwo `live`\nobjects.\n\n## Why it matters\nMoney.\n\n## Repair\nVoid one.";
        assert_eq!(
            doc_section(doc, "What it detects").as_deref(),
            Some("Two `live` objects.")
        );
        assert_eq!(doc_section(doc, "Repair").as_deref(), Some("Void one."));
        assert_eq!(with_code("Two `a<b` c"), "Two <code>a&lt;b</code> c");
    }

    #[test]
    fn every_rule_explains_what_it_detects_and_its_repair_on_the_page() {
        for rule in crate::rules::REGISTRY {
            let doc = crate::rules::doc_text(*rule);
            for heading in ["What it detects", "Repair"] {
                assert!(
                    doc_section(&doc, heading).is_some_and(|text| !text.is_empty()),
                    "{} has no {heading}",
                    rule.code()
                );
            }
        }
    }
}
