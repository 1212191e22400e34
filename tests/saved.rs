//! --save-snapshot and --from-snapshot: evidence kept as it was seen, re-audited offline.

use crate::scenario::{Scenario, stderr};

#[test]
fn a_saved_snapshot_gives_the_same_report_offline() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let dir = scenario.path("evidence");
    let dir = dir.to_str().unwrap();
    let first = scenario.audit(&["--format", "json", "--save-snapshot", dir]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let table = scenario.audit(&[]).stdout;
    // Offline: the sources are gone, the snapshot is all there is.
    for source in ["airflow.db", "journal.db", "provider.ndjson"] {
        std::fs::remove_file(scenario.path(source)).unwrap();
    }
    let again = scenario.audit(&["--format", "json", "--from-snapshot", dir]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        first.stdout == again.stdout,
        "the report from the snapshot differs"
    );
    assert!(table == scenario.audit(&["--from-snapshot", dir]).stdout);

    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(scenario.path("evidence/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["tables"]["attempts"]["rows"], 31);
    assert_eq!(manifest["tables"]["journal"]["rows"], 58);
    assert_eq!(manifest["tables"]["provider"]["rows"], 23);
    assert_eq!(manifest["content_hash"].as_str().unwrap().len(), 64);
}

#[test]
fn a_changed_or_incomplete_snapshot_is_refused() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let dir = scenario.path("evidence");
    let dir_text = dir.to_str().unwrap();
    scenario.audit(&["--save-snapshot", dir_text]);

    let journal = dir.join("journal.parquet");
    let mut bytes = std::fs::read(&journal).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&journal, &bytes).unwrap();
    let output = scenario.audit(&["--from-snapshot", dir_text]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("journal.parquet") && stderr(&output).contains("changed since"),
        "{}",
        stderr(&output)
    );
    assert!(output.stdout.is_empty());

    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    let output = scenario.audit(&["--from-snapshot", dir_text]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("manifest.json"),
        "{}",
        stderr(&output)
    );
}
