//! `trace` for a terminal: the merged timeline, the tries with their verdicts, the findings
//! and the repair; and as JSON.

use super::table::terminal_table;
use super::terminal_safe;
use crate::report::trace::Trace;

/// The version of `trace --format json` (docs/trace.schema.json).
pub const FORMAT_VERSION: u32 = 1;

/// `trace --format json`: the trace with its `format_version`.
pub fn json(trace: &Trace) -> String {
    super::versioned_json(FORMAT_VERSION, trace)
}

pub fn text(trace: &Trace) -> String {
    let mut out = format!(
        "trace of {} by {}: interval {}\n\n",
        terminal_safe(&trace.dag_id),
        terminal_safe(&trace.selected_by),
        terminal_safe(&trace.intervals.join(", "))
    );
    let mut timeline = terminal_table(&["time", "event", "try", "key", "marks"]);
    for event in &trace.events {
        timeline.add_row(vec![
            event.at.clone(),
            terminal_safe(&event.what),
            terminal_safe(event.try_ref.as_deref().unwrap_or("-")),
            terminal_safe(event.op_key.as_deref().unwrap_or("-")),
            event.marks.join(" "),
        ]);
    }
    out.push_str(&timeline.to_string());
    out.push_str("\n\n");
    let mut tries = terminal_table(&[
        "try", "task", "state", "host", "pid", "start", "end", "verdict", "object",
    ]);
    for t in &trace.tries {
        tries.add_row(vec![
            terminal_safe(&t.try_ref),
            terminal_safe(&t.task_id),
            terminal_safe(t.state.as_deref().unwrap_or_default()),
            terminal_safe(t.hostname.as_deref().unwrap_or("-")),
            t.pid.map(|p| p.to_string()).unwrap_or_default(),
            t.start_date.clone().unwrap_or_default(),
            t.end_date.clone().unwrap_or_default(),
            t.verdict.clone(),
            terminal_safe(t.external_id.as_deref().unwrap_or("-")),
        ]);
    }
    out.push_str(&tries.to_string());
    out.push_str("\n\n");
    if trace.findings.is_empty() {
        out.push_str("findings: none\n");
    } else {
        out.push_str("findings:\n");
        for finding in &trace.findings {
            out.push_str(&format!(
                "  {} {} {}: {}\n",
                finding.severity,
                finding.code,
                finding.rule,
                terminal_safe(&finding.message)
            ));
        }
    }
    if !trace.repairs.is_empty() {
        out.push_str("repair:\n");
        for action in &trace.repairs {
            out.push_str(&format!(
                "  {} [{}] {}\n",
                action.kind.name(),
                super::plan::safety(action.safety),
                terminal_safe(&action.explanation)
            ));
        }
    }
    out
}
