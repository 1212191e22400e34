//! `onceonly doctor`: each source checked the way the audit reads it, problems in plain words.

use onceonly::commands::mock_provider::{self, MockOptions, MockPagination};

use crate::scenario::{Scenario, onceonly, stderr, stdout};

fn doctor(scenario: &Scenario) -> (Option<i32>, String) {
    let output = onceonly(&["doctor", "--config", scenario.config().to_str().unwrap()]);
    (
        output.status.code(),
        format!("{}{}", stdout(&output), stderr(&output)),
    )
}

/// The real 3.3.2 run with its provider served by the mock over the listing.
fn with_listing(options: MockOptions) -> (Scenario, mock_provider::MockProvider) {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let mock = mock_provider::start(options, 0).unwrap();
    let config = scenario.read("onceonly.toml");
    let (start, end) = (
        config.find("[provider]").unwrap(),
        config.find("[[operation]]").unwrap(),
    );
    let listing = format!(
        "[provider]\nurl = \"{}\"\npagination = \"cursor\"\npage_size = 3\ncreated_after_param = \"created_after\"\ncreated_before_param = \"created_before\"\ntime_format = \"epoch_seconds\"\nretries = 1\nbackoff = \"10ms\"\n\n[provider.fields]\nexternal_id = \"id\"\nop_key = \"idempotency_key\"\ncreated_at = \"created\"\n\n",
        mock.url()
    );
    scenario.write(
        "onceonly.toml",
        &format!("{}{listing}{}", &config[..start], &config[end..]),
    );
    (scenario, mock)
}

fn objects_created_now() -> Vec<serde_json::Value> {
    // The probe lists the last day, so the objects must be recent.
    let now = chrono::Utc::now().timestamp();
    (0..7)
        .map(|n| serde_json::json!({"id": format!("exp_{n}"), "idempotency_key": format!("k{n}"), "created": now - 60 * n, "status": "live"}))
        .collect()
}

#[test]
fn a_healthy_configuration_passes_every_check() {
    let (code, text) = doctor(&Scenario::copy_of("airflow/out/airflow-3.3.2"));
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("Airflow schema revision d2f4e1b3c5a7"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} rows; every mapped column present",
            crate::scenario::airflow_expected("airflow-3.3.2")["counts"]["journal_rows"]
        )),
        "{text}"
    );

    let (scenario, mock) = with_listing(MockOptions::new(
        objects_created_now(),
        MockPagination::Cursor,
    ));
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("the first page of the last day parses (more pages follow)"),
        "{text}"
    );
    assert!(mock.requests().iter().all(|r| r.starts_with("GET ")));
}

#[test]
fn each_problem_is_named_in_plain_words() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.edit(
        "onceonly.toml",
        "table = \"export_journal\"",
        "table = \"exports\"",
    );
    std::fs::write(scenario.path("airflow.db"), b"").unwrap();
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("PROBLEM airflow:") && text.contains("not an Airflow metadata database"),
        "{text}"
    );
    assert!(
        text.contains("PROBLEM journal:") && text.contains("no such table"),
        "{text}"
    );
    assert!(
        text.contains("ok      provider:"),
        "one bad source does not hide the others: {text}"
    );

    let mut options = MockOptions::new(objects_created_now(), MockPagination::Cursor);
    options.require_header = Some(("authorization".into(), "Bearer right".into()));
    let (scenario, _mock) = with_listing(options);
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("PROBLEM provider:") && text.contains("401"),
        "{text}"
    );

    let broken = Scenario::copy_of("airflow/out/airflow-3.3.2");
    broken.edit("onceonly.toml", "[provider]", "[provider]\nkey_tl = \"1d\"");
    let (code, text) = doctor(&broken);
    assert_eq!(code, Some(2));
    assert!(text.contains("key_tl"), "{text}");
}
