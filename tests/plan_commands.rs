//! The commands a plan prints to clear a task instance, run against real Airflow 2.10.5 and
//! 3.3.2 (their CLIs, installed from PyPI) on copies of the real scheduler's databases: each
//! CLI command, answered `n` at Airflow's own confirmation, lists exactly the task instance its
//! action repairs; each REST request's body is one the version's own request schema accepts,
//! as a dry run naming that task instance.
//!
//! Not checked here: the REST requests sent to a running api-server (the fixtures' generator
//! talks to one; these tests validate the body with the server's own schema instead).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::scenario::{Scenario, fixtures, stderr};

/// The `airflow` of a version's venv: 3.3.2's beside `ONCEONLY_TEST_AIRFLOW_PYTHON`, 2.10.5's
/// at `ONCEONLY_TEST_AIRFLOW2_PYTHON` (both set by `.ci/run`), else /opt/venvs.
fn airflow(version: &str) -> Option<PathBuf> {
    let variable = if version.starts_with('2') {
        "ONCEONLY_TEST_AIRFLOW2_PYTHON"
    } else {
        "ONCEONLY_TEST_AIRFLOW_PYTHON"
    };
    let python = std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/opt/venvs/airflow-{version}/bin/python")));
    let airflow = python.with_file_name("airflow");
    if crate::skip::without("airflow") || !airflow.is_file() {
        crate::skip::skipped(
            &format!("plan commands against Airflow {version}"),
            &format!("no {} (`.ci/run` installs it)", airflow.display()),
        );
        return None;
    }
    Some(airflow)
}

/// The plan's `retry-same-key` actions for a copy of the fixture of `version`.
fn retries(scenario: &Scenario) -> Vec<serde_json::Value> {
    let plan = scenario.path("plan.json");
    let output = scenario.audit(&["--plan", plan.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let plan: serde_json::Value = serde_json::from_str(&scenario.read("plan.json")).unwrap();
    let retries: Vec<serde_json::Value> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|action| action["kind"] == "retry-same-key")
        .cloned()
        .collect();
    assert!(!retries.is_empty(), "the fixture's L002 gives a retry");
    retries
}

/// The words of a command as a POSIX shell splits them (`sh -c 'printf "%s\0" …'`), so the
/// test runs what a person pasting it would.
fn shell_words(command: &str) -> Vec<String> {
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\0' {command}"))
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .unwrap()
        .split('\0')
        .filter(|word| !word.is_empty())
        .map(str::to_string)
        .collect()
}

/// What `airflow tasks clear` lists before asking, as `dag.task run` pairs: answered `n`, so
/// nothing is cleared.
fn confirmation_list(
    airflow: &std::path::Path,
    scenario: &Scenario,
    words: &[String],
) -> Vec<String> {
    assert_eq!(&words[..3], ["airflow", "tasks", "clear"]);
    let home = scenario.path("airflow-home");
    let mut child = Command::new(airflow)
        .args(&words[1..])
        .env("AIRFLOW_HOME", &home)
        .env(
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
            format!("sqlite:///{}", scenario.path("airflow.db").display()),
        )
        .env(
            "AIRFLOW__CORE__DAGS_FOLDER",
            fixtures().join("airflow/dags"),
        )
        .env("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{words:?}: {text}{}",
        stderr(&output)
    );
    // `<TaskInstance: dag.task run [state]>`, one per line (2.10) or in one list (3.x).
    text.split("<TaskInstance: ")
        .skip(1)
        .map(|item| {
            let mut parts = item.split_whitespace();
            format!("{} {}", parts.next().unwrap(), parts.next().unwrap())
        })
        .collect()
}

fn check_version(version: &str) {
    let Some(airflow) = airflow(version) else {
        return;
    };
    let major = &version[..1];
    let scenario = Scenario::copy_of(&format!("airflow/out/airflow-{version}"));
    for action in retries(&scenario) {
        let commands = action["commands"].as_array().unwrap();
        // The task instance the action repairs, as the plan's dry runs name it.
        let rest = commands
            .iter()
            .find(|c| c["via"] == "airflow 3 rest")
            .expect("every retry has Airflow 3's REST request");
        let body = rest_body(rest["command"].as_str().unwrap());
        let task = body["task_ids"][0].as_str().unwrap().to_string();
        let run = body["dag_run_id"].as_str().unwrap().to_string();
        let target = format!("{}.{task} {run}", action["dag_id"].as_str().unwrap());
        for command in commands {
            let text = command["command"].as_str().unwrap();
            assert!(
                !text.contains("--yes") && !shell_words(text).iter().any(|w| w == "-y"),
                "{text}"
            );
            if command["via"] == format!("airflow {major} cli").as_str() {
                let listed = confirmation_list(&airflow, &scenario, &shell_words(text));
                assert_eq!(listed, std::slice::from_ref(&target), "{version}: {text}");
            }
            if command["via"] == format!("airflow {major} rest").as_str() {
                accepted_by_airflow(&airflow, version, &rest_body(text));
            }
        }
        assert!(
            commands
                .iter()
                .any(|c| c["via"] == format!("airflow {major} cli").as_str()),
            "{version}: an unmapped scheduled run has a CLI command: {action:#}"
        );
    }
}

/// The JSON a curl command sends (`-d BODY`).
fn rest_body(command: &str) -> serde_json::Value {
    let words = shell_words(command);
    let at = words.iter().position(|w| w == "-d").unwrap();
    serde_json::from_str(&words[at + 1]).unwrap()
}

/// The body loads with the version's own request schema (2.10's marshmallow form, 3.x's
/// pydantic model, which forbids unknown fields) as a dry run of exactly one task.
fn accepted_by_airflow(airflow: &std::path::Path, version: &str, body: &serde_json::Value) {
    let python = airflow.with_file_name("python");
    let script = if version.starts_with('2') {
        "import json, sys\n\
         from airflow.api_connexion.schemas.task_instance_schema import ClearTaskInstanceFormSchema\n\
         form = ClearTaskInstanceFormSchema().load(json.loads(sys.argv[1]))\n\
         print(json.dumps({'dry_run': form['dry_run'], 'task_ids': form['task_ids'], 'only_failed': form['only_failed']}))\n"
    } else {
        "import json, sys\n\
         from airflow.api_fastapi.core_api.datamodels.task_instances import ClearTaskInstancesBody\n\
         form = ClearTaskInstancesBody.model_validate(json.loads(sys.argv[1]))\n\
         print(json.dumps({'dry_run': form.dry_run, 'task_ids': [list(t) if isinstance(t, tuple) else t for t in form.task_ids], 'only_failed': form.only_failed}))\n"
    };
    let output = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(body.to_string())
        .env(
            "AIRFLOW_HOME",
            std::env::temp_dir().join("onceonly-plan-commands-home"),
        )
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{version}: {body}: {}",
        stderr(&output)
    );
    let form: serde_json::Value = serde_json::from_slice(
        output
            .stdout
            .split(|b| *b == b'\n')
            .rfind(|line| !line.is_empty())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(form["dry_run"], true, "{version}");
    assert_eq!(form["only_failed"], false, "{version}");
    assert_eq!(form["task_ids"].as_array().unwrap().len(), 1, "{version}");
}

#[test]
fn airflow_2_10_lists_exactly_the_task_instance_each_plan_command_repairs() {
    check_version("2.10.5");
}

#[test]
fn airflow_3_3_lists_exactly_the_task_instance_each_plan_command_repairs() {
    check_version("3.3.2");
}
