//! `ttl-risk` for a terminal, and as JSON.

use super::table::terminal_table;
use super::terminal_safe;
use crate::report::ttl_risk::TtlRisk;

/// The version of `ttl-risk --format json` (docs/ttl-risk.schema.json).
pub const FORMAT_VERSION: u32 = 1;

/// `ttl-risk --format json`: the risk per interval with its `format_version`.
pub fn json(risk: &TtlRisk) -> String {
    super::versioned_json(FORMAT_VERSION, risk)
}

pub fn text(risk: &TtlRisk) -> String {
    let mut out = format!(
        "ttl-risk of {} for intervals {} to {}, re-run at {}\n",
        terminal_safe(&risk.dag_id),
        risk.from,
        risk.to,
        risk.at
    );
    if let (Some(id), Some(behavior)) = (risk.backfill_id, &risk.reprocess_behavior) {
        out.push_str(&format!(
            "backfill {id}, reprocess_behavior {}\n",
            terminal_safe(behavior)
        ));
    }
    out.push_str(&format!(
        "key TTL: {}\n\n",
        terminal_safe(risk.ttl_source.as_deref().unwrap_or("not known"))
    ));
    let mut table = terminal_table(&[
        "interval",
        "operation",
        "class",
        "key",
        "objects",
        "why",
        "repair",
    ]);
    // A glob's DAGs are told apart in the operation column.
    let several_dags = (risk.intervals.iter()).any(|i| i.dag_id != risk.intervals[0].dag_id);
    for interval in &risk.intervals {
        let mut operation = if interval.map_index >= 0 {
            format!("{}[{}]", interval.operation, interval.map_index)
        } else {
            interval.operation.clone()
        };
        if several_dags {
            operation = format!("{} ({})", operation, interval.dag_id);
        }
        table.add_row([
            terminal_safe(&interval.interval),
            terminal_safe(&operation),
            interval.class.to_string(),
            terminal_safe(interval.key.as_deref().unwrap_or("-")),
            terminal_safe(&interval.objects.join(", ")),
            terminal_safe(&interval.reason),
            terminal_safe(&interval.repair),
        ]);
    }
    out.push_str(&table.to_string());
    let counts: Vec<String> = risk
        .summary
        .iter()
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    out.push_str(&format!(
        "\n\n{} intervals: {}\n",
        risk.intervals.len(),
        counts.join(", ")
    ));
    let without = &risk.without_run;
    match without.count {
        Some(0) => out.push_str(&format!(
            "every interval of the range has a run (schedule: {})\n",
            terminal_safe(&without.schedule)
        )),
        Some(count) => {
            const SHOWN: usize = 5;
            let more = count.saturating_sub(SHOWN);
            out.push_str(&format!(
                "{count} intervals of the range have no run at all, not classed above (a backfill runs them for the first time): {}{} (schedule: {})\n",
                without.starts.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() },
                terminal_safe(&without.schedule)
            ));
        }
        None => out.push_str(&format!(
            "intervals of the range without a run: {}\n",
            terminal_safe(&without.schedule)
        )),
    }
    for warning in &risk.warnings {
        out.push_str(&format!("warning: {}\n", terminal_safe(warning)));
    }
    out
}
