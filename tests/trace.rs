//! `onceonly trace`: one incident in one command's output, and its HTML timeline.

use crate::scenario::{Scenario, airflow_days, onceonly, stderr, stdout};

fn real_run() -> Scenario {
    Scenario::copy_of("airflow/out/airflow-3.3.2")
}

/// The first scheduled interval of the real run, where its scenarios put their faults.
fn first_day() -> String {
    let [first, _, _] = airflow_days("airflow-3.3.2");
    first
}

fn trace(scenario: &Scenario, args: &[&str]) -> std::process::Output {
    let config = scenario.config();
    let mut all = vec!["trace", "--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    onceonly(&all)
}

#[test]
fn one_command_shows_which_try_created_which_object_and_what_to_do() {
    let scenario = real_run();
    let day = first_day();
    let output = trace(
        &scenario,
        &[
            "--dag",
            "onceonly_b_unstable_key",
            "--interval",
            &day,
            "--format",
            "json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let tries = report["tries"].as_array().unwrap();
    assert_eq!(tries.len(), 2);
    assert_eq!(
        (tries[0]["verdict"].as_str(), tries[0]["state"].as_str()),
        (Some("lost-response"), Some("failed"))
    );
    assert_eq!(tries[1]["verdict"], "duplicate");
    // Which try created which object: the lost one by try 1, the committed one by try 2.
    let objects: Vec<&serde_json::Value> = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "provider")
        .collect();
    assert_eq!(objects.len(), 2);
    assert!(
        objects[0]["try"].as_str().unwrap().ends_with("#1")
            && objects[0]["marks"].to_string().contains("lost-response")
    );
    assert!(objects[1]["try"].as_str().unwrap().ends_with("#2"));
    // Events are in time order.
    let times: Vec<&str> = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["at"].as_str().unwrap())
        .collect();
    let mut sorted = times.clone();
    sorted.sort();
    assert_eq!(times, sorted);
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["D002", "K001", "L001"]);
    let repairs: Vec<&str> = report["repairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(repairs, ["void-duplicate", "fix-key-derivation"]);

    let table = stdout(&trace(
        &scenario,
        &["--dag", "onceonly_b_unstable_key", "--interval", &day],
    ));
    assert!(
        table.contains("lost-response") && table.contains("void-duplicate [needs approval]"),
        "{table}"
    );
}

#[test]
fn run_id_and_key_select_the_same_incident() {
    let scenario = real_run();
    let day = first_day();
    let run_id = format!("scheduled__{day}T00:00:00+00:00");
    let key = format!("exp:onceonly_d_rerun_after_success:export:{day}");
    let by_run = trace(
        &scenario,
        &[
            "--dag",
            "onceonly_d_rerun_after_success",
            "--run-id",
            &run_id,
            "--format",
            "json",
        ],
    );
    let by_key = trace(
        &scenario,
        &[
            "--dag",
            "onceonly_d_rerun_after_success",
            "--key",
            &key,
            "--format",
            "json",
        ],
    );
    let (by_run, by_key): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&by_run.stdout).unwrap(),
        serde_json::from_slice(&by_key.stdout).unwrap(),
    );
    assert_eq!(by_run["events"], by_key["events"]);
    let codes: Vec<&str> = by_run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["D001", "R001", "T001"]);
}

#[test]
fn nothing_to_trace_exits_two() {
    let scenario = real_run();
    let output = trace(
        &scenario,
        &[
            "--dag",
            "onceonly_b_unstable_key",
            "--interval",
            "2020-01-01",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("3 intervals"),
        "{}",
        stderr(&output)
    );
    let output = trace(&scenario, &["--dag", "onceonly_b_unstable_key"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "one of --interval, --run-id, --key is required"
    );
}

pub const HOSTILE_HTML: &str = "<img src=x onerror=alert(1)>\"'&<script>alert(2)</script>";

#[test]
fn the_html_timeline_is_self_contained_escaped_and_renders() {
    let (scenario, key, _) = crate::plan::hostile_lost_response(false);
    let object = serde_json::json!({
        "external_id": HOSTILE_HTML, "op_key": key, "created_at": "2026-11-02T00:05:30Z", "status": "succeeded",
    });
    scenario.write("provider.ndjson", &format!("{object}\n"));
    let html = scenario.path("trace.html");
    let output = trace(
        &scenario,
        &[
            "--dag",
            "orders",
            "--interval",
            "2026-11-01",
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = scenario.read("trace.html");
    assert!(
        !text.contains("<img") && !text.contains("<script"),
        "provider strings reached the HTML unescaped"
    );
    assert!(text.contains("&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;"));
    for external in ["src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(
            !text.contains(external),
            "the HTML loads something: {external}"
        );
    }
    assert_eq!(
        text.matches("class=\"try\"").count(),
        2,
        "a lane bar per try"
    );
    let terminal = stdout(&output);
    assert!(
        !terminal.contains('\u{1b}'),
        "no escape sequence reaches the terminal"
    );

    let Some(chromium) = crate::chromium::Chromium::find("the timeline's rendering") else {
        return;
    };
    let png = scenario.path("trace.png");
    chromium.screenshot(&html, &png, 1200, 900);
    let size = std::fs::metadata(&png).unwrap().len();
    assert!(
        size > 10_000,
        "the screenshot is nearly empty ({size} bytes)"
    );
    let dom = chromium.dom(&html);
    assert!(
        dom.contains("<svg") && dom.contains("onceonly trace"),
        "{dom}"
    );
    assert!(
        !dom.contains("<img"),
        "the injected element exists in the rendered page"
    );
}

/// Two DAGs under one glob operation share a day (fixtures/rules/glob-operation): tracing one
/// DAG's interval shows that DAG's tries and objects, and no finding pooled from the other's.
#[test]
fn a_glob_operations_dags_are_traced_apart() {
    let scenario = Scenario::of_rules("glob-operation");
    let output = trace(
        &scenario,
        &[
            "--dag",
            "reports_us",
            "--interval",
            "2026-11-01",
            "--format",
            "json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let verdicts: Vec<&str> = report["tries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["lost-response", "reconciled"]);
    let objects: Vec<&str> = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "provider")
        .map(|e| e["external_id"].as_str().unwrap())
        .collect();
    assert_eq!(objects, ["rep_201"]);
    assert_eq!(report["findings"], serde_json::json!([]), "{report:#}");
}
