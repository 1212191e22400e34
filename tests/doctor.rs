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

/// A listing that answers but has no object parsed nothing: a warning that says so, not "all
/// fields parse".
#[test]
fn a_listing_with_no_object_is_a_warning_not_a_pass() {
    let (scenario, _mock) = with_listing(MockOptions::new(Vec::new(), MockPagination::Cursor));
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("warning provider:"), "{text}");
    assert!(
        text.contains("has no object; but no field of an object was parsed: nothing to check"),
        "{text}"
    );
    assert!(!text.contains("all fields parse"), "{text}");
}

/// Every environment variable the config names that is not set is named at once, not only
/// the first.
#[test]
fn every_unset_environment_variable_is_named() {
    let (scenario, _mock) = with_listing(MockOptions::new(
        objects_created_now(),
        MockPagination::Cursor,
    ));
    scenario.edit(
        "onceonly.toml",
        "table = \"export_journal\"",
        "table = \"export_journal\"\npassword_env = \"ONCEONLY_TEST_UNSET_JOURNAL_PASSWORD\"",
    );
    scenario.edit(
        "onceonly.toml",
        "[provider.fields]",
        "[provider.auth]\nkind = \"bearer\"\nenv = \"ONCEONLY_TEST_UNSET_PROVIDER_TOKEN\"\n\n[provider.fields]",
    );
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("2 environment variables the config names are not set: ONCEONLY_TEST_UNSET_JOURNAL_PASSWORD ([journal] password_env), ONCEONLY_TEST_UNSET_PROVIDER_TOKEN ([provider.auth] env)"),
        "{text}"
    );
}

/// Operations are checked against the DAGs and tasks of the metadata database: a misspelt
/// task_id is a problem naming the operation and the task nearest it.
#[test]
fn an_operation_that_matches_no_task_is_a_problem() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(
            "ok      operations: 10 [[operation]]\n        each matches a DAG and a task of"
        ),
        "{text}"
    );
    scenario.edit(
        "onceonly.toml",
        "dag_id = \"onceonly_j_check_then_create\"\ntask_id = \"export\"",
        "dag_id = \"onceonly_j_check_then_create\"\ntask_id = \"exports\"",
    );
    let (code, text) = doctor(&scenario);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("PROBLEM operations: 10 [[operation]]\n        [[operation]] `j`: task_id \"exports\" matches no task of onceonly_j_check_then_create"),
        "{text}"
    );
    assert!(text.contains("the closest: export\n"), "{text}");
}

/// A provider whose host does not resolve, or that refuses the connection, is said to in
/// plain words, not as a listing "only partly read".
#[test]
fn an_unreachable_provider_says_why() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (host, why) in [
        (format!("127.0.0.1:{port}"), "the connection was refused"),
        (
            "no-such-host.invalid".to_string(),
            "the host does not resolve",
        ),
    ] {
        let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
        let config = scenario.read("onceonly.toml");
        let (start, end) = (
            config.find("[provider]").unwrap(),
            config.find("[[operation]]").unwrap(),
        );
        let listing = format!(
            "[provider]\nurl = \"http://{host}/exports\"\npagination = \"cursor\"\nretries = 1\nbackoff = \"10ms\"\n\n[provider.fields]\nexternal_id = \"id\"\nop_key = \"idempotency_key\"\ncreated_at = \"created\"\n\n"
        );
        scenario.write(
            "onceonly.toml",
            &format!("{}{listing}{}", &config[..start], &config[end..]),
        );
        let (code, text) = doctor(&scenario);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains(&format!("cannot connect: {why}")), "{text}");
        assert!(!text.contains("only partly read"), "{text}");
    }
}
