//! --save-snapshot and --from-snapshot: evidence kept as it was seen, re-audited offline.

use crate::scenario::{Scenario, json_file, stderr};

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
    let counts = &crate::scenario::airflow_expected("airflow-3.3.2")["counts"];
    assert_eq!(manifest["tables"]["attempts"]["rows"], counts["tries"]);
    assert_eq!(
        manifest["tables"]["journal"]["rows"],
        counts["journal_rows"]
    );
    assert_eq!(
        manifest["tables"]["provider"]["rows"],
        counts["provider_objects"]
    );
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

/// The hex SHA-256 of a file's bytes, as a manifest records it.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Rewrites `table`'s Parquet file in the snapshot `dir` with `change` made to its rows, and
/// the file's SHA-256 in the manifest to match; returns the manifest, written.
fn rewrite_table(
    dir: &std::path::Path,
    table: &str,
    change: impl FnOnce(&mut polars::prelude::DataFrame),
) -> serde_json::Value {
    use polars::prelude::*;
    let path = dir.join(format!("{table}.parquet"));
    let mut frame = ParquetReader::new(std::fs::File::open(&path).unwrap())
        .finish()
        .unwrap();
    change(&mut frame);
    let mut bytes = Vec::new();
    ParquetWriter::new(&mut bytes).finish(&mut frame).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let manifest_path = dir.join("manifest.json");
    let mut manifest = json_file(&manifest_path);
    manifest["tables"][table]["sha256"] = sha256_hex(&bytes).into();
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    manifest
}

/// A snapshot saved before `attempts` had `dag_timezone`, and before manifests held the tables'
/// content hashes (format 1): the same audit's snapshot with that column taken out of
/// `attempts.parquet`, and the manifest written as format 1 wrote it (`content_hash` over the
/// files' SHA-256s).
fn without_dag_timezone(dir: &std::path::Path) {
    let mut manifest = rewrite_table(dir, "attempts", |attempts| {
        *attempts = attempts.drop("dag_timezone").unwrap();
    });
    manifest["format_version"] = 1.into();
    for table in ["attempts", "journal", "provider"] {
        manifest["tables"][table]
            .as_object_mut()
            .unwrap()
            .remove("content_sha256");
    }
    let hashes: Vec<&str> = ["attempts", "journal", "provider"]
        .iter()
        .map(|table| manifest["tables"][table]["sha256"].as_str().unwrap())
        .collect();
    manifest["content_hash"] = sha256_hex(hashes.join("\n").as_bytes()).into();
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
}

#[test]
fn a_snapshot_from_before_the_dags_zone_still_loads() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let dir = scenario.path("evidence");
    let dir = dir.to_str().unwrap();
    let now = scenario.audit(&["--format", "json", "--save-snapshot", dir]);
    assert_eq!(now.status.code(), Some(1), "{}", stderr(&now));
    without_dag_timezone(&scenario.path("evidence"));
    let plan = scenario.path("plan.json");
    let old = scenario.audit(&[
        "--format",
        "json",
        "--from-snapshot",
        dir,
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(old.status.code(), Some(1), "{}", stderr(&old));
    // A plan made from a format-1 snapshot quotes the content hash that snapshot recorded.
    assert_eq!(
        json_file(&plan)["inputs_fingerprint"],
        json_file(&scenario.path("evidence/manifest.json"))["content_hash"]
    );
    let report = |output: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let (now, old) = (report(&now), report(&old));
    // Without the zone the Berlin DAG's keys are expected in UTC; its tries journaled their
    // keys, so the findings and verdicts are those of the audit that knew the zone.
    assert_eq!(old["findings"], now["findings"]);
    assert_eq!(old["summary"], now["summary"]);
    assert_eq!(old["coverage"]["tries"], now["coverage"]["tries"]);
}

/// A plan's inputs fingerprint is the content hash of a snapshot of the same tables, however
/// the tables came: read from the sources, or from the snapshot, or saved again from it.
#[test]
fn a_plan_quotes_the_content_hash_of_a_snapshot_of_its_inputs() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let (first, again) = (scenario.path("first"), scenario.path("again"));
    let (plan, plan_again) = (scenario.path("plan.json"), scenario.path("again.json"));
    let audit = |args: &[&std::path::Path]| {
        let args: Vec<&str> = args.iter().map(|path| path.to_str().unwrap()).collect();
        let output = scenario.audit(&args);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    };
    let flag = std::path::Path::new;
    audit(&[flag("--save-snapshot"), &first, flag("--plan"), &plan]);
    audit(&[
        flag("--from-snapshot"),
        &first,
        flag("--save-snapshot"),
        &again,
        flag("--plan"),
        &plan_again,
    ]);
    let manifest = json_file(&first.join("manifest.json"));
    assert_eq!(manifest["format_version"], 2);
    for table in ["attempts", "journal", "provider"] {
        assert_eq!(
            manifest["tables"][table]["content_sha256"]
                .as_str()
                .unwrap()
                .len(),
            64
        );
    }
    let hash = &manifest["content_hash"];
    assert_eq!(&json_file(&plan)["inputs_fingerprint"], hash);
    assert_eq!(&json_file(&plan_again)["inputs_fingerprint"], hash);
    assert_eq!(
        &json_file(&again.join("manifest.json"))["content_hash"],
        hash
    );
}

/// A manifest whose content hash is not that of its tables' content hashes is refused, by name.
#[test]
fn a_manifest_whose_content_hashes_disagree_is_refused() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let dir = scenario.path("evidence");
    let output = scenario.audit(&["--save-snapshot", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let path = dir.join("manifest.json");
    let mut manifest = json_file(&path);
    manifest["tables"]["journal"]["content_sha256"] = "0".repeat(64).into();
    std::fs::write(&path, manifest.to_string()).unwrap();
    let output = scenario.audit(&["--from-snapshot", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("manifest.json") && stderr(&output).contains("content_hash"),
        "{}",
        stderr(&output)
    );

    // A format-2 manifest without a table's content hash names the table.
    manifest["tables"]["provider"]
        .as_object_mut()
        .unwrap()
        .remove("content_sha256");
    std::fs::write(&path, manifest.to_string()).unwrap();
    let output = scenario.audit(&["--from-snapshot", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("`provider` table has no content_sha256"),
        "{}",
        stderr(&output)
    );
}

/// A copy of the Airflow 3.3.2 fixture and the snapshot its audit saved (`evidence/`).
fn saved_airflow_snapshot() -> (Scenario, std::path::PathBuf) {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let dir = scenario.path("evidence");
    let saved = scenario.audit(&["--save-snapshot", dir.to_str().unwrap()]);
    assert_eq!(saved.status.code(), Some(1), "{}", stderr(&saved));
    (scenario, dir)
}

/// A five-rule audit of a snapshot without verdicts leaves each try's worker and process
/// undecoded; one that shows its verdicts (a file, the HTML page) reads them: they are the ones
/// the sources gave.
#[test]
fn a_snapshots_verdicts_show_the_workers_the_sources_gave() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let dir = scenario.path("evidence");
    let dir = dir.to_str().unwrap();
    let live = scenario.path("live.csv");
    let saved = scenario.audit(&["--save-snapshot", dir, "--verdicts", live.to_str().unwrap()]);
    assert_eq!(saved.status.code(), Some(1), "{}", stderr(&saved));
    let html = scenario.path("report.html");
    let offline = scenario.path("offline.csv");
    let again = scenario.audit(&[
        "--from-snapshot",
        dir,
        "--rule",
        "D001",
        "--verdicts",
        offline.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    let columns = |path: &std::path::Path| -> Vec<(String, String)> {
        let mut reader = csv::Reader::from_path(path).unwrap();
        let header = reader.headers().unwrap().clone();
        let at = |name: &str| header.iter().position(|c| c == name).unwrap();
        let (host, pid) = (at("hostname"), at("pid"));
        reader
            .records()
            .map(|row| {
                let row = row.unwrap();
                (row[host].to_string(), row[pid].to_string())
            })
            .collect()
    };
    let (live, offline) = (columns(&live), columns(&offline));
    assert!(
        live.iter()
            .any(|(host, pid)| !host.is_empty() && !pid.is_empty()),
        "the real Airflow run records its workers: {live:?}"
    );
    assert_eq!(live, offline);
}

/// An audit of a snapshot leaves the columns its rules do not read undecoded, but not
/// unchecked: a column of the wrong type is refused, naming the file and the column, whether
/// the audit's rules read it (K002 reads the journal's payload hashes) or not (D001 does not).
#[test]
fn a_wrongly_typed_column_is_refused_by_an_audit_that_does_not_read_it() {
    let (scenario, dir) = saved_airflow_snapshot();
    let dir_text = dir.to_str().unwrap();
    rewrite_table(&dir, "journal", |journal| {
        let flags =
            polars::prelude::Column::new("payload_hash".into(), vec![true; journal.height()]);
        journal.with_column(flags).unwrap();
    });
    for rule in ["D001", "K002"] {
        let output = scenario.audit(&["--from-snapshot", dir_text, "--rule", rule]);
        assert_eq!(output.status.code(), Some(2), "{rule}: {}", stderr(&output));
        let message = stderr(&output);
        assert!(
            message.contains("journal.parquet")
                && message.contains("payload_hash")
                && message.contains("has type"),
            "{rule}: {message}"
        );
    }
}

/// An integer column whose values do not fit the table's 64-bit signed integers (a UInt64
/// column written by another tool) is refused, naming the file and the column, instead of
/// the values that do not fit being read as NULL.
#[test]
fn an_integer_too_large_for_its_column_is_refused_not_read_as_null() {
    let (scenario, dir) = saved_airflow_snapshot();
    let dir_text = dir.to_str().unwrap();
    rewrite_table(&dir, "attempts", |attempts| {
        let mut maps = vec![7_u64; attempts.height()];
        maps[0] = u64::MAX;
        let maps = polars::prelude::Column::new("map_index".into(), maps);
        attempts.with_column(maps).unwrap();
    });
    let output = scenario.audit(&["--from-snapshot", dir_text]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("attempts.parquet") && message.contains("map_index"),
        "{message}"
    );
    assert!(output.stdout.is_empty());
}
