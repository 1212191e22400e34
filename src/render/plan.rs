//! A plan for people: the terminal and markdown renderings of the plan document.

use super::terminal_safe;
use crate::plan::{Plan, Safety};

pub(crate) fn safety(safety: Safety) -> &'static str {
    match safety {
        Safety::Automatic => "automatic",
        Safety::NeedsApproval => "needs approval",
        Safety::Manual => "manual",
    }
}

/// Text for a terminal: one block per action, provider strings made harmless.
pub fn text(plan: &Plan) -> String {
    let mut out = format!(
        "repair plan (format {}, inputs {}): {} actions\n",
        plan.format_version,
        plan.inputs_fingerprint,
        plan.actions.len()
    );
    for action in &plan.actions {
        out.push('\n');
        out.push_str(&format!(
            "{} {} [{}] {}\n",
            action.id,
            action.kind.name(),
            safety(action.safety),
            action.reason
        ));
        let place = [
            action.dag_id.as_deref(),
            action.interval.as_deref(),
            action.op_key.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("  ");
        if !place.is_empty() {
            out.push_str(&format!("  where:   {}\n", terminal_safe(&place)));
        }
        if let (Some(keep), Some(reason)) = (&action.keep, action.keep_reason) {
            out.push_str(&format!("  keep:    {} ({reason})\n", terminal_safe(keep)));
        }
        if !action.targets.is_empty() {
            out.push_str(&format!(
                "  targets: {}\n",
                terminal_safe(&action.targets.join(", "))
            ));
        }
        out.push_str(&format!("  answers: {}\n", action.answers.join(", ")));
        out.push_str(&format!(
            "  do:      {}\n",
            terminal_safe(&action.explanation)
        ));
        for precondition in &action.preconditions {
            out.push_str(&format!("  only if: {}\n", terminal_safe(precondition)));
        }
        for command in &action.commands {
            out.push_str(&format!(
                "  {}:\n    {}\n",
                command.via,
                terminal_safe(&command.command)
            ));
            if let Some(note) = &command.note {
                out.push_str(&format!("    ({})\n", terminal_safe(note)));
            }
        }
    }
    out
}

/// Markdown for a ticket.
pub fn markdown(plan: &Plan) -> String {
    let mut out = format!(
        "# onceonly repair plan\n\nFormat {}, inputs fingerprint `{}`, {} actions.\n",
        plan.format_version,
        plan.inputs_fingerprint,
        plan.actions.len()
    );
    for action in &plan.actions {
        out.push_str(&format!(
            "\n## {} `{}`\n\n- safety: {}\n- reason: {}\n- answers: {}\n",
            action.kind.name(),
            action.id,
            safety(action.safety),
            action.reason,
            action.answers.join(", ")
        ));
        for (label, value) in [
            ("dag", &action.dag_id),
            ("interval", &action.interval),
            ("key", &action.op_key),
            ("keep", &action.keep),
        ] {
            if let Some(value) = value {
                out.push_str(&format!("- {label}: {}\n", super::markdown::escape(value)));
            }
        }
        if !action.targets.is_empty() {
            out.push_str(&format!(
                "- targets: {}\n",
                super::markdown::escape(&action.targets.join(", "))
            ));
        }
        out.push_str(&format!(
            "\n{}\n",
            super::markdown::escape(&action.explanation)
        ));
        if !action.preconditions.is_empty() {
            out.push_str("\nOnly if:\n\n");
            for precondition in &action.preconditions {
                out.push_str(&format!("- {}\n", super::markdown::escape(precondition)));
            }
        }
        for command in &action.commands {
            out.push_str(&format!("\n{}:\n\n", command.via));
            out.push_str(&super::markdown::code_block("sh", &command.command));
            if let Some(note) = &command.note {
                out.push_str(&format!("\n{}\n", super::markdown::escape(note)));
            }
        }
    }
    out
}
