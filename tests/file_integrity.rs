//! A provider file that lost its last lines reads as a whole one unless something says what it
//! should hold: the report's coverage says when nothing does, and `[provider] snapshot_rows` or
//! `snapshot_sha256` make a cut or changed file exit 2 instead of giving false findings.

use crate::scenario::{Scenario, stderr};

fn warnings(output: &std::process::Output) -> Vec<String> {
    let report: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("no JSON report: {}", stderr(output)));
    report["coverage"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|warning| warning.as_str().unwrap().to_string())
        .collect()
}

fn with_provider_keys(scenario: &Scenario, keys: &str) {
    scenario.edit(
        "onceonly.toml",
        "snapshot = \"provider.ndjson\"",
        &format!("snapshot = \"provider.ndjson\"\n{keys}"),
    );
}

fn sha256(path: &std::path::Path) -> String {
    let output = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(output.stdout).unwrap()[..64].to_string()
}

#[test]
fn a_provider_file_nothing_checks_is_named_in_the_coverage() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let named: Vec<String> = warnings(&output)
        .into_iter()
        .filter(|warning| warning.contains("carries no row count or checksum"))
        .collect();
    assert_eq!(named.len(), 1, "{named:?}");
    assert!(named[0].contains("provider.ndjson"), "{named:?}");

    // Checked by its count, it is not named.
    let lines = scenario.read("provider.ndjson").lines().count();
    with_provider_keys(&scenario, &format!("snapshot_rows = {lines}"));
    let output = scenario.audit(&["--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        !warnings(&output)
            .iter()
            .any(|warning| warning.contains("carries no row count")),
        "{:?}",
        warnings(&output)
    );
}

#[test]
fn a_provider_file_cut_at_a_line_boundary_is_refused_by_its_count_or_checksum() {
    for by_hash in [false, true] {
        let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
        let whole = scenario.read("provider.ndjson");
        let lines: Vec<&str> = whole.lines().collect();
        let keys = if by_hash {
            format!(
                "snapshot_sha256 = \"{}\"",
                sha256(&scenario.path("provider.ndjson"))
            )
        } else {
            format!("snapshot_rows = {}", lines.len())
        };
        with_provider_keys(&scenario, &keys);
        let output = scenario.audit(&["--format", "json"]);
        assert_eq!(
            output.status.code(),
            Some(1),
            "whole file: {}",
            stderr(&output)
        );

        let cut: String = lines[..lines.len() - 3]
            .iter()
            .map(|line| format!("{line}\n"))
            .collect();
        scenario.write("provider.ndjson", &cut);
        let output = scenario.audit(&["--format", "json"]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(output.stdout.is_empty(), "no report over a cut file");
        assert!(message.contains("provider.ndjson"), "{message}");
        let says = if by_hash {
            "snapshot_sha256 says".to_string()
        } else {
            format!(
                "holds {} objects, but [provider] snapshot_rows says {}",
                lines.len() - 3,
                lines.len()
            )
        };
        assert!(message.contains(&says), "{message}");
    }
}

#[test]
fn a_file_check_on_a_listing_or_a_malformed_checksum_is_a_config_error() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    with_provider_keys(&scenario, "snapshot_sha256 = \"abc\"");
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a SHA-256") && stderr(&output).contains("line"),
        "{}",
        stderr(&output)
    );
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    scenario.edit(
        "onceonly.toml",
        "snapshot = \"provider.ndjson\"",
        "url = \"http://127.0.0.1:9/exports\"\nsnapshot_rows = 3",
    );
    let output = scenario.audit(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("needs `snapshot`, not `url`"),
        "{}",
        stderr(&output)
    );
}
