//! The commands a plan prints to clear one task instance, so that Airflow runs it again: the
//! CLI's `airflow tasks clear` and the REST API's `clearTaskInstances`, each narrowed to the
//! one task instance the action repairs and never skipping Airflow's own confirmation.
//!
//! How far each one can be narrowed was read off real Airflow 2.10.5 and 3.3.2 (checked by
//! `tests/plan.rs` against copies of their databases):
//! - `airflow tasks clear` selects runs by logical date (`-s`/`-e`, both inclusive) and tasks by
//!   `-t`, which Airflow 2 takes as a regular expression (`^task$` is exact) and Airflow 3 as a
//!   part of the task id (`-t export` also matches `export_v2`). It has no map index and no run
//!   id: a mapped task instance, or a run without a logical date, has no exact CLI command.
//! - `clearTaskInstances` takes the run id and task ids; only Airflow 3's (`/api/v2`) takes a
//!   map index (`["task", 3]`). `only_failed` and `reset_dag_runs` are given, as their defaults
//!   differ between the versions; `dry_run` is true, so the first request only lists.

use serde::{Deserialize, Serialize};

use super::repair::RepairText;

/// One task instance to clear: the try to run again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInstanceRef {
    pub dag_id: String,
    pub task_id: String,
    pub run_id: String,
    /// -1 where the task is not mapped.
    pub map_index: i64,
    /// The run's logical date (µs), which the CLI selects runs by; None for an Airflow 3 run
    /// without one (a manual or asset-triggered run).
    pub logical_date: Option<i64>,
}

/// A command a plan prints, and which Airflow it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Command {
    /// `airflow 2 cli`, `airflow 3 cli`, `airflow 2 rest`, `airflow 3 rest`.
    pub via: &'static str,
    /// Pastes into a shell as it is.
    pub command: String,
    /// What to check before confirming, where the command cannot be exact by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl TaskInstanceRef {
    fn mapped(&self) -> bool {
        self.map_index >= 0
    }

    /// How the task instance is named in notes: `dag.task run [map]`.
    fn name(&self) -> String {
        let map = if self.mapped() {
            format!(" [{}]", self.map_index)
        } else {
            String::new()
        };
        format!(
            "{}.{} of run {}{map}",
            self.dag_id, self.task_id, self.run_id
        )
    }

    /// Every command that clears this task instance and nothing else, or says what else its
    /// confirmation list may show; with what cannot be narrowed left out, and said in `gaps`.
    pub fn commands(&self) -> (Vec<Command>, Vec<String>) {
        let mut commands = Vec::new();
        let mut gaps = Vec::new();
        match (self.mapped(), self.logical_date) {
            (true, _) => gaps.push(format!(
                "`airflow tasks clear` cannot select map index {} (it would clear every map index of {}): use Airflow 3's REST request",
                self.map_index, self.task_id
            )),
            (false, None) => gaps.push(format!(
                "run {} has no logical date, which `airflow tasks clear` selects runs by: use the REST request",
                self.run_id
            )),
            (false, Some(logical_date)) => {
                let date = crate::timestamp::format(logical_date);
                let cli = |task: String| {
                    format!(
                        "airflow tasks clear {} -t {} -s {date} -e {date}",
                        shell_word(&self.dag_id),
                        shell_word(&task)
                    )
                };
                commands.push(Command {
                    via: "airflow 2 cli",
                    command: cli(format!("^{}$", regex_escape(&self.task_id))),
                    note: None,
                });
                commands.push(Command {
                    via: "airflow 3 cli",
                    command: cli(self.task_id.clone()),
                    note: Some(format!(
                        "Airflow 3 takes -t as part of a task id: confirm only if the list it prints names {} alone",
                        self.name()
                    )),
                });
            }
        }
        if self.mapped() {
            gaps.push(format!(
                "Airflow 2's clearTaskInstances cannot select map index {} (it would clear every map index of {})",
                self.map_index, self.task_id
            ));
        } else {
            commands.push(self.rest("airflow 2 rest", "v1", serde_json::json!([self.task_id])));
        }
        let task = if self.mapped() {
            serde_json::json!([[self.task_id, self.map_index]])
        } else {
            serde_json::json!([self.task_id])
        };
        commands.push(self.rest("airflow 3 rest", "v2", task));
        (commands, gaps)
    }

    /// `clearTaskInstances` as curl, a dry run: what it lists is what the same request with
    /// `"dry_run": false` clears.
    fn rest(&self, via: &'static str, api: &str, task_ids: serde_json::Value) -> Command {
        let body = serde_json::json!({
            "dry_run": true,
            "dag_run_id": self.run_id,
            "task_ids": task_ids,
            "only_failed": false,
            "reset_dag_runs": true,
            "include_upstream": false,
            "include_downstream": false,
            "include_future": false,
            "include_past": false,
        });
        // Percent-encoded, a `$` in a dag_id too: the shell's double quotes around the URL
        // expand only `$AIRFLOW_URL`.
        let url = format!(
            "$AIRFLOW_URL/api/{api}/dags/{}/clearTaskInstances",
            crate::sources::database::percent_encode(&self.dag_id)
        );
        let auth = if api == "v1" {
            "-u \"$AIRFLOW_USER\""
        } else {
            "-H \"Authorization: Bearer $AIRFLOW_TOKEN\""
        };
        Command {
            via,
            command: format!(
                "curl -sS -X POST \"{url}\" {auth} -H 'Content-Type: application/json' -d {}",
                shell_word(&body.to_string())
            ),
            note: Some(format!(
                "a dry run: check that it lists {} alone, then send it again with \"dry_run\": false",
                self.name()
            )),
        }
    }
}

/// Carried through a partition's result to the merge as JSON.
impl RepairText for TaskInstanceRef {
    fn text(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }
    fn of_text(text: &str) -> Option<TaskInstanceRef> {
        serde_json::from_str(text).ok()
    }
}

/// A word for a POSIX shell: as it is where it holds no character the shell treats specially,
/// else in single quotes (a quote inside written as `'\''`).
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.,:+/=@%-".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// `text` matched literally by a Python regular expression.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !c.is_ascii_alphanumeric() && c != '_' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(map_index: i64, logical_date: Option<i64>) -> TaskInstanceRef {
        TaskInstanceRef {
            dag_id: "orders".into(),
            task_id: "grp.export".into(),
            run_id: "manual__it's".into(),
            map_index,
            logical_date,
        }
    }

    #[test]
    fn an_unmapped_task_with_a_logical_date_gets_both_clis_and_both_apis() {
        let (commands, gaps) = target(-1, Some(1_796_083_200_000_000)).commands();
        assert!(gaps.is_empty(), "{gaps:?}");
        let vias: Vec<&str> = commands.iter().map(|c| c.via).collect();
        assert_eq!(
            vias,
            [
                "airflow 2 cli",
                "airflow 3 cli",
                "airflow 2 rest",
                "airflow 3 rest"
            ]
        );
        assert_eq!(
            commands[0].command,
            "airflow tasks clear orders -t '^grp\\.export$' -s 2026-12-01T00:00:00Z -e 2026-12-01T00:00:00Z"
        );
        assert!(
            commands
                .iter()
                .all(|c| !c.command.contains("--yes") && !c.command.contains(" -y"))
        );
        // The run id's quote is closed, escaped and reopened: the shell gives the JSON back.
        assert!(
            commands[3]
                .command
                .contains(r#""dag_run_id":"manual__it'\''s""#),
            "{}",
            commands[3].command
        );
    }

    #[test]
    fn a_mapped_task_or_a_run_without_a_logical_date_has_no_cli_command() {
        let (commands, gaps) = target(3, Some(0)).commands();
        let vias: Vec<&str> = commands.iter().map(|c| c.via).collect();
        assert_eq!(vias, ["airflow 3 rest"]);
        assert!(
            commands[0]
                .command
                .contains(r#""task_ids":[["grp.export",3]]"#)
        );
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        let (commands, gaps) = target(-1, None).commands();
        let vias: Vec<&str> = commands.iter().map(|c| c.via).collect();
        assert_eq!(vias, ["airflow 2 rest", "airflow 3 rest"]);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
    }

    #[test]
    fn text_round_trips() {
        let target = target(2, None);
        let text = target.text().unwrap();
        assert_eq!(TaskInstanceRef::of_text(&text), Some(target));
        assert_eq!(TaskInstanceRef::of_text("not json"), None);
    }
}
