//! Renderers: a report in, text out. They know nothing of sources or rules.

pub(crate) mod csv;
pub mod html;
mod markdown;
pub mod metrics;
pub mod plan;
pub mod style;
mod table;
pub mod timeline;
pub mod trace;
pub mod ttl_risk;

use std::fmt::Write as _;

use polars::prelude::DataFrame;

use crate::error::Result;
use crate::report::Report;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per finding, grouped by interval, at the terminal's width.
    Table,
    /// Every finding's every field, in a table.
    Full,
    Json,
    Ndjson,
    Csv,
    Markdown,
    /// One self-contained page with a picture of every DAG's intervals.
    Html,
}

/// The report in `format`. `verdicts` (a row per try, as the audit judged them) is read only
/// by the HTML page, for its picture of the intervals: other formats are rendered without it.
pub fn render(report: &Report, format: Format, verdicts: Option<&DataFrame>) -> Result<String> {
    Ok(match format {
        Format::Table => table::concise(report, style::Style::current()),
        Format::Full => table::render(report),
        Format::Json => {
            let mut out = serde_json::to_string_pretty(report).expect("a report always serializes");
            out.push('\n');
            out
        }
        Format::Ndjson => ndjson(report),
        Format::Csv => csv::render(report),
        Format::Markdown => markdown::render(report),
        Format::Html => html::page(report, &html::Intervals::of(verdicts_kept(verdicts)?)?),
    })
}

/// The report in `format` for a file: as [`render`], never coloured.
pub fn render_for_file(
    report: &Report,
    format: Format,
    verdicts: Option<&DataFrame>,
) -> Result<String> {
    match format {
        Format::Table => Ok(table::concise(
            report,
            style::Style {
                color: false,
                ..style::Style::current()
            },
        )),
        other => render(report, other, verdicts),
    }
}

/// The verdicts frame an output that shows verdicts was given; an error, not a page or file
/// without them, where the caller did not keep it.
pub fn verdicts_kept(verdicts: Option<&DataFrame>) -> Result<&DataFrame> {
    verdicts.ok_or_else(|| crate::error::Error::Engine {
        doing: "writing the verdicts".into(),
        message: "the audit's verdicts were not kept for this output".into(),
    })
}

/// One JSON object per line: the coverage, each finding, then the summary. Every line carries
/// its `type` and the report's `format_version`, so a consumer that reads one line knows both.
fn ndjson(report: &Report) -> String {
    fn line<T: serde::Serialize>(out: &mut String, kind: &str, value: &T) {
        let mut object = serde_json::Map::new();
        object.insert("type".into(), kind.into());
        object.insert(
            "format_version".into(),
            crate::report::FORMAT_VERSION.into(),
        );
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(value) {
            object.extend(fields);
        }
        let _ = writeln!(out, "{}", serde_json::Value::Object(object));
    }
    let mut out = String::new();
    line(&mut out, "coverage", &report.coverage);
    for finding in &report.findings {
        line(&mut out, "finding", finding);
    }
    line(&mut out, "summary", &report.summary);
    out
}

/// A document as pretty JSON with `format_version` first, for documents whose type does not
/// carry one (`trace`, `ttl-risk`).
pub(crate) fn versioned_json<T: serde::Serialize>(format_version: u32, document: &T) -> String {
    #[derive(serde::Serialize)]
    struct Versioned<'a, T> {
        format_version: u32,
        #[serde(flatten)]
        document: &'a T,
    }
    let mut json = serde_json::to_string_pretty(&Versioned {
        format_version,
        document,
    })
    .expect("a document of plain fields always serializes");
    json.push('\n');
    json
}

/// Makes text from sources safe for a terminal: control characters (ANSI escapes among them)
/// become visible `\u{..}` escapes instead of being interpreted.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if ch.is_control() || is_bidi(ch) {
            let _ = write!(out, "\\u{{{:x}}}", ch as u32);
        } else {
            out.push(ch);
        }
    }
    out
}

/// Zero-width and bidirectional controls: invisible, yet they reorder what a reader sees
/// (a key that reads `exp_1` may be `1_pxe`).
pub(crate) fn is_bidi(ch: char) -> bool {
    matches!(ch, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The coverage lines every human-readable format starts with.
fn coverage_lines(report: &Report) -> Vec<String> {
    let coverage = &report.coverage;
    let mut lines = Vec::new();
    let window = match (&coverage.since, &coverage.until) {
        (None, None) => "all tries in the sources".to_string(),
        (since, until) => format!(
            "tries active from {} to {}",
            since.as_deref().unwrap_or("the beginning"),
            until.as_deref().unwrap_or("now")
        ),
    };
    let intervals = match (&coverage.interval_from, &coverage.interval_to) {
        (None, None) => String::new(),
        (from, to) => format!(
            ", data intervals starting from {} to before {}",
            from.as_deref().unwrap_or("the beginning"),
            to.as_deref().unwrap_or("now")
        ),
    };
    lines.push(format!(
        "window: {window}{intervals}{}",
        coverage
            .dag
            .as_ref()
            .map(|dag| format!(", dag {dag}"))
            .unwrap_or_default()
    ));
    for source in &coverage.sources {
        lines.push(format!(
            "{}: {} rows from {} ({} audited)",
            source.table, source.rows, source.source, source.rows_audited
        ));
    }
    let provider = match (&coverage.provider_from, &coverage.provider_to) {
        (None, None) => "everything the source holds".to_string(),
        (from, to) => format!(
            "objects created from {} to {}",
            from.as_deref().unwrap_or("the beginning"),
            to.as_deref().unwrap_or("now")
        ),
    };
    lines.push(format!("provider coverage: {provider}"));
    if let Some(left_out) = &coverage.objects_left_out {
        let other_intervals = match left_out.other_intervals {
            0 => String::new(),
            n => format!(", {n} of intervals outside the range"),
        };
        lines.push(format!(
            "left out: {} provider objects ({} claimed by other DAGs or runs outside the audit, {} by no DAG: an audit without --dag reports those{other_intervals})",
            left_out.total(),
            left_out.claimed_elsewhere,
            left_out.unclaimed
        ));
    }
    let basis: Vec<String> = coverage
        .interval_basis
        .iter()
        .map(|(basis, n)| format!("{basis} {n}"))
        .collect();
    lines.push(format!(
        "audited: {} runs, {} tries of {} operation(s); interval from: {}",
        coverage.runs,
        coverage.tries,
        coverage.operations.len(),
        if basis.is_empty() {
            "-".to_string()
        } else {
            basis.join(", ")
        }
    ));
    for warning in &coverage.warnings {
        lines.push(format!("warning: {warning}"));
    }
    for skipped in &coverage.rules_skipped {
        lines.push(format!(
            "not checked: {} ({})",
            skipped.code, skipped.reason
        ));
    }
    lines.extend(in_flight_lines(&coverage.in_flight));
    lines
}

/// The coverage's lines on the tries in flight and the probably dead ones.
fn in_flight_lines(in_flight: &crate::in_flight::InFlightCoverage) -> Vec<String> {
    let mut lines = Vec::new();
    if in_flight.intervals > 0 || in_flight.tries > 0 {
        let withheld = match in_flight.findings_withheld {
            0 => String::new(),
            n => format!(", {n} finding(s) of rules that reason from an absence withheld"),
        };
        lines.push(format!(
            "in flight: {} tries not finished and {} runs not finished when read: {} interval(s) judged when they finish (no plan actions for them{withheld})",
            in_flight.tries, in_flight.runs_not_finished, in_flight.intervals
        ));
    }
    let shown = |entry: &crate::in_flight::TryInFlight| {
        let heartbeat = match &entry.heartbeat_at {
            Some(at) => format!(", last heartbeat {at}"),
            None => String::new(),
        };
        format!(
            "{} {} {} {}{heartbeat}",
            entry.dag_id,
            entry.task_id,
            crate::rules::try_ref(&entry.run_id, Some(entry.try_number), Some(entry.map_index)),
            entry.state.as_deref().unwrap_or("no state"),
        )
    };
    for entry in &in_flight.listed {
        lines.push(format!("  in flight: {}", shown(entry)));
    }
    if in_flight.tries > in_flight.listed.len() {
        lines.push(format!(
            "  ... and {} more tries in flight",
            in_flight.tries - in_flight.listed.len()
        ));
    }
    for entry in &in_flight.probably_dead {
        lines.push(format!(
            "probably dead: {} (older than [airflow] heartbeat_timeout: Airflow will fail it; judged as failed)",
            shown(entry)
        ));
    }
    lines
}

/// Against `--baseline`: how many findings are new, persisting and resolved, and how many
/// earlier ones went unchecked; None without a baseline.
fn baseline_line(report: &Report) -> Option<String> {
    let baseline = report.baseline.as_ref()?;
    let unchecked = match baseline.not_checked {
        0 => String::new(),
        n => format!(", {n} not checked (their rules did not run)"),
    };
    Some(format!(
        "against {}: {} new, {} persisting, {} resolved{unchecked}",
        baseline.file,
        baseline.new,
        baseline.persisting,
        baseline.resolved.len()
    ))
}

fn summary_line(report: &Report) -> String {
    let summary = &report.summary;
    if summary.findings == 0 {
        let waiting = match report.coverage.in_flight.intervals {
            0 => String::new(),
            n => format!("; {n} interval(s) in flight, judged when they finish"),
        };
        return format!(
            "no findings over the coverage above{waiting}; {} reconciled retries",
            summary.reconciled_retries
        );
    }
    let rules: Vec<String> = summary
        .by_rule
        .iter()
        .map(|(code, n)| format!("{code} {n}"))
        .collect();
    let severities: Vec<String> = summary
        .by_severity
        .iter()
        .rev()
        .map(|(severity, n)| format!("{n} {severity}"))
        .collect();
    format!(
        "{} findings ({}): {}; {} reconciled retries",
        summary.findings,
        severities.join(", "),
        rules.join(", "),
        summary.reconciled_retries
    )
}
