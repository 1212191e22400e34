//! Read-only by construction: the commands that read production leave the SQLite metadata
//! database and journal byte for byte as they were, and ask the provider with GET only.
//! (That a PostgreSQL session cannot write is tests/postgres.rs
//! `postgres_sessions_cannot_write`.)

use std::collections::BTreeMap;
use std::path::Path;

use onceonly::commands::mock_provider::{self, MockOptions, MockPagination, MockProvider};
use onceonly::sources::database::Database;

use crate::scenario::{Scenario, onceonly, stderr};

/// Every file of the scenario folder and its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect()
}

/// The commands that read production, against the real Airflow 3.3.2 run.
fn readers(config: &str) -> Vec<(&'static str, Vec<String>)> {
    let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let [first, _, last] = crate::scenario::airflow_days("airflow-3.3.2");
    let after = format!(
        "{}T23:59:59Z",
        crate::scenario::airflow_run_day("airflow-3.3.2")
    );
    vec![
        (
            "audit",
            args(&["audit", "--config", config, "--format", "json"]),
        ),
        (
            "trace",
            args(&[
                "trace",
                "--config",
                config,
                "--dag",
                "onceonly_b_unstable_key",
                "--interval",
                &first,
            ]),
        ),
        (
            "ttl-risk",
            args(&[
                "ttl-risk",
                "--config",
                config,
                "--dag",
                "onceonly_d_rerun_after_success",
                "--from",
                &first,
                "--to",
                &last,
                "--at",
                &after,
            ]),
        ),
        ("doctor", args(&["doctor", "--config", config])),
    ]
}

fn run(name: &str, args: &[String]) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = onceonly(&args);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{name}: exit {:?}: {}",
        output.status.code(),
        stderr(&output)
    );
}

#[test]
fn sqlite_metadata_and_journal_are_unchanged_byte_for_byte() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let config = scenario.config();
    let before = files(scenario.dir.path());
    assert!(before.contains_key("airflow.db") && before.contains_key("journal.db"));
    for (name, args) in readers(config.to_str().unwrap()) {
        run(name, &args);
        let after = files(scenario.dir.path());
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "{name} left a file behind (a -journal, -wal or -shm?)"
        );
        for (file, bytes) in &before {
            assert!(after[file] == *bytes, "{name} changed {file}");
        }
    }
}

#[test]
fn a_sqlite_connection_cannot_write() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let before = std::fs::read(scenario.path("airflow.db")).unwrap();
    let database = Database::parse("sqlite:///airflow.db", scenario.dir.path(), None).unwrap();
    let error = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut connection = database.connect().await.unwrap();
            sqlx::query("CREATE TABLE onceonly_was_here (id int)")
                .execute(&mut connection)
                .await
                .unwrap_err()
        });
    assert!(error.to_string().contains("readonly"), "{error}");
    assert!(std::fs::read(scenario.path("airflow.db")).unwrap() == before);
}

/// The real run with its provider served by the mock's listing API.
fn with_listing() -> (Scenario, MockProvider) {
    let state = mock_provider::load_state(
        &crate::scenario::fixtures().join("airflow/out/airflow-3.3.2/provider_state.json"),
    )
    .unwrap();
    let mock = mock_provider::start(MockOptions::new(state, MockPagination::Cursor), 0).unwrap();
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let config = scenario.read("onceonly.toml");
    let (start, end) = (
        config.find("[provider]").unwrap(),
        config.find("[[operation]]").unwrap(),
    );
    let listing = format!(
        "[provider]\nurl = \"{}\"\npagination = \"cursor\"\npage_size = 3\ncreated_after_param = \"created_after\"\ncreated_before_param = \"created_before\"\ntime_format = \"epoch_seconds\"\nrequests_per_second = 500\nretries = 1\nbackoff = \"10ms\"\nvoid_statuses = [\"cancelled\"]\n\n[provider.fields]\nexternal_id = \"id\"\nop_key = \"idempotency_key\"\ncreated_at = \"created\"\npayload_hash = \"payload_sha256\"\n\n",
        mock.url()
    );
    scenario.write(
        "onceonly.toml",
        &format!("{}{listing}{}", &config[..start], &config[end..]),
    );
    (scenario, mock)
}

#[test]
fn readers_send_the_provider_nothing_but_get() {
    let (scenario, mock) = with_listing();
    let config = scenario.config();
    let mut seen = 0;
    for (name, args) in readers(config.to_str().unwrap()) {
        run(name, &args);
        let requests = mock.requests();
        assert!(
            requests.len() > seen,
            "{name} did not read the provider: {requests:?}"
        );
        for request in &requests[seen..] {
            assert!(
                request.starts_with("GET /exports"),
                "{name} sent {request:?}"
            );
        }
        seen = requests.len();
    }
}
