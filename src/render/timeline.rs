//! `trace --html`: one self-contained HTML file (no external assets) drawing the interval's
//! timeline: a lane per try, markers for journal records and provider objects, lost responses
//! and duplicates coloured so they are seen at a glance. Every string from Airflow, the journal
//! or the provider is escaped.

use std::fmt::Write as _;

use super::html::{document, escape};
use crate::report::trace::Trace;

fn verdict_colour(verdict: &str) -> &'static str {
    match verdict {
        "lost-response" => "#d62728",
        "duplicate" => "#ff7f0e",
        "committed" | "reconciled" => "#2ca02c",
        "intent-only" => "#bcbd22",
        _ => "#9e9e9e",
    }
}

const WIDTH: f64 = 1150.0;
const LABEL: f64 = 380.0;
const LANE: f64 = 34.0;

pub fn html(trace: &Trace) -> String {
    let times: Vec<i64> = trace
        .events
        .iter()
        .map(|e| e.micros)
        .chain(trace.tries.iter().filter_map(|t| t.start))
        .chain(trace.tries.iter().filter_map(|t| t.end))
        .collect();
    let (min, max) = (
        times.iter().min().copied().unwrap_or(0),
        times.iter().max().copied().unwrap_or(1),
    );
    let span = ((max - min).max(1)) as f64;
    let x = |micros: i64| LABEL + 10.0 + (micros - min) as f64 / span * (WIDTH - LABEL - 30.0);
    // Lanes: one per try, then one for objects no try can be tied to.
    let mut lanes: Vec<String> = trace.tries.iter().map(|t| t.try_ref.clone()).collect();
    let orphan_lane = lanes.len();
    lanes.push("provider (no try known)".to_string());
    let lane_of = |who: Option<&str>| {
        who.and_then(|w| lanes.iter().position(|l| l == w))
            .unwrap_or(orphan_lane)
    };
    let height = 40.0 + LANE * lanes.len() as f64 + 30.0;

    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" role="img" aria-label="timeline">"#
    );
    for (index, lane) in lanes.iter().enumerate() {
        let y = 40.0 + LANE * index as f64;
        let verdict = trace
            .tries
            .get(index)
            .map(|t| t.verdict.as_str())
            .unwrap_or("");
        let label = if verdict.is_empty() {
            lane.clone()
        } else {
            format!("{lane} — {verdict}")
        };
        let _ = write!(
            svg,
            r##"<line x1="{LABEL}" y1="{y:.1}" x2="{WIDTH}" y2="{y:.1}" stroke="#e0e0e0"/><text x="4" y="{:.1}" font-size="11" fill="{}">{}</text>"##,
            y + 4.0,
            if verdict.is_empty() {
                "#555"
            } else {
                verdict_colour(verdict)
            },
            escape(&label)
        );
        if let Some(t) = trace.tries.get(index)
            && let Some(start) = t.start
        {
            let end = t.end.unwrap_or(max);
            let (x1, x2) = (x(start), x(end).max(x(start) + 3.0));
            let _ = write!(
                svg,
                r#"<rect class="try" x="{x1:.1}" y="{:.1}" width="{:.1}" height="12" rx="3" fill="{}" opacity="0.75"><title>{}</title></rect>"#,
                y - 6.0,
                x2 - x1,
                verdict_colour(&t.verdict),
                escape(&format!(
                    "{} {} {} → {}",
                    t.try_ref,
                    t.state.as_deref().unwrap_or(""),
                    t.start_date.as_deref().unwrap_or(""),
                    t.end_date.as_deref().unwrap_or("running")
                ))
            );
        }
    }
    for event in &trace.events {
        let lane = lane_of(event.try_ref.as_deref());
        let (cx, cy) = (x(event.micros), 40.0 + LANE * lane as f64);
        let title = escape(&format!("{} {}", event.at, event.what));
        match event.kind {
            "journal" => {
                let _ = write!(
                    svg,
                    r##"<circle class="journal" cx="{cx:.1}" cy="{:.1}" r="5" fill="#1f77b4" stroke="white"><title>{title}</title></circle>"##,
                    cy - 12.0
                );
            }
            "provider" => {
                let fill = if event.marks.contains(&"duplicate") {
                    "#ff7f0e"
                } else if event.marks.contains(&"lost-response") {
                    "#d62728"
                } else if event.marks.contains(&"void") {
                    "#9e9e9e"
                } else {
                    "#2ca02c"
                };
                let _ = write!(
                    svg,
                    r#"<path class="object" d="M {cx:.1} {:.1} l 7 7 l -7 7 l -7 -7 z" fill="{fill}" stroke="black"><title>{title}</title></path>"#,
                    cy + 2.0
                );
            }
            _ => {}
        }
    }
    let _ = write!(
        svg,
        r##"<text x="{LABEL}" y="{:.1}" font-size="10" fill="#555">{}</text><text x="{:.1}" y="{:.1}" font-size="10" fill="#555" text-anchor="end">{}</text></svg>"##,
        height - 8.0,
        escape(&crate::timestamp::format(min)),
        WIDTH - 10.0,
        height - 8.0,
        escape(&crate::timestamp::format(max))
    );

    let mut events = String::new();
    for event in &trace.events {
        let _ = write!(
            events,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&event.marks.join(" ")),
            escape(&event.at),
            escape(&event.what),
            escape(event.try_ref.as_deref().unwrap_or("-")),
            escape(event.op_key.as_deref().unwrap_or("-")),
            escape(&event.marks.join(" ")),
        );
    }
    let mut findings = String::new();
    for finding in &trace.findings {
        let _ = write!(
            findings,
            "<li><b>{} {}</b> ({}): {}</li>",
            escape(finding.code),
            escape(finding.rule),
            finding.severity,
            escape(&finding.message)
        );
    }
    if findings.is_empty() {
        findings.push_str("<li>none</li>");
    }
    let mut repairs = String::new();
    for action in &trace.repairs {
        let _ = write!(
            repairs,
            "<li><b>{}</b> [{}]: {}</li>",
            action.kind.name(),
            super::plan::safety(action.safety),
            escape(&action.explanation)
        );
    }
    if repairs.is_empty() {
        repairs.push_str("<li>none</li>");
    }
    let body = format!(
        r##"<h1>onceonly trace</h1>
<p>DAG <b>{dag}</b>, selected by {selected}, interval {intervals}</p>
<p class="legend"><span style="color:#2ca02c">■ committed / reconciled</span><span style="color:#d62728">■ lost response</span><span style="color:#ff7f0e">■ duplicate</span><span style="color:#9e9e9e">■ failed before effect / void</span><span style="color:#1f77b4">● journal record</span><span>◆ provider object</span></p>
{svg}
<h2>Findings</h2><ul>{findings}</ul>
<h2>Repair</h2><ul>{repairs}</ul>
<h2>Events</h2>
<table><tr><th>time</th><th>event</th><th>try</th><th>key</th><th>marks</th></tr>{events}</table>
"##,
        dag = escape(&trace.dag_id),
        selected = escape(&trace.selected_by),
        intervals = escape(&trace.intervals.join(", ")),
    );
    document(
        &format!(
            "onceonly trace: {} {}",
            trace.dag_id,
            trace.intervals.join(", ")
        ),
        "tr.lost-response td, tr.duplicate td { background: #fde8e8; }\n.legend span { display: inline-block; margin-right: 14px; }\n",
        &body,
    )
}
