//! The binary end to end: exit codes, formats, determinism, pipes.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

use crate::scenario::{Scenario, onceonly, stderr, stdout};

#[test]
fn demo_shows_findings_of_at_least_five_rules() {
    let output = onceonly(&["demo", "--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json report");
    let codes: BTreeSet<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|finding| finding["code"].as_str().expect("code"))
        .collect();
    assert!(codes.len() >= 5, "only {codes:?}");
    // The bundled real-Airflow run: scenario a and the two mapped tasks of f were replayed.
    assert_eq!(report["summary"]["reconciled_retries"], 3);
}

#[test]
fn demo_table_states_coverage_and_summary() {
    let output = onceonly(&["demo"]);
    let text = stdout(&output);
    assert!(
        text.starts_with("window: all tries in the sources"),
        "{text}"
    );
    // It reads the bundled metadata database that Airflow 3.3.2 wrote, in place.
    let expected = crate::scenario::airflow_expected("airflow-3.3.2");
    let counts = &expected["counts"];
    let rows = |source: &str, count: &serde_json::Value| format!("{source}: {count} rows from ");
    assert!(
        text.contains(&(rows("attempts", &counts["tries"]) + "sqlite://")),
        "{text}"
    );
    assert!(
        text.contains(&(rows("journal", &counts["journal_rows"]) + "sqlite://")),
        "{text}"
    );
    // ... and lists the provider over HTTP from the built-in mock on loopback.
    assert!(
        text.contains(
            &(rows("provider", &counts["provider_objects"]) + "provider listing http://127.0.0.1:")
        ),
        "{text}"
    );
    // The listing covers the tries' activity, from an hour (the slack) before the first try.
    let first = crate::scenario::airflow_try_starts("airflow-3.3.2")[0].clone();
    let from = chrono::DateTime::parse_from_rfc3339(&first).unwrap() - chrono::Duration::hours(1);
    assert!(
        text.contains(&format!(
            "provider coverage: objects created from {}",
            from.format("%Y-%m-%dT%H:%M:%S")
        )),
        "{text}"
    );
    // 3.3's @daily runs have zero-length intervals; the manual run has no logical date.
    let runs: usize = expected["dags"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r.as_array().unwrap().len())
        .sum();
    assert!(
        text.contains(&format!(
            "interval from: logical_date {}, run_after 1",
            runs - 1
        )),
        "{text}"
    );
    assert!(
        text.contains("13 findings (7 error, 4 warning, 2 info)"),
        "{text}"
    );
}

#[test]
fn exit_code_follows_fail_on() {
    let scenario = Scenario::copy_of("demo");
    assert_eq!(scenario.audit(&[]).status.code(), Some(1));
    assert_eq!(
        scenario.audit(&["--fail-on", "never"]).status.code(),
        Some(0)
    );
    assert_eq!(
        scenario.audit(&["--fail-on", "error"]).status.code(),
        Some(1)
    );
    // Only the info-level orphan intent remains when auditing that one rule.
    assert_eq!(
        scenario
            .audit(&["--rule", "L002", "--fail-on", "warning"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        scenario
            .audit(&["--rule", "L002", "--fail-on", "info"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn clean_input_exits_zero_and_says_so() {
    let scenario = Scenario::copy_of("demo");
    // Keep only the orders interval of 2026-11-02, a retry the provider reconciled.
    let keep = |name: &str, needle: &str| {
        let text = scenario.read(name);
        let mut lines = text.lines();
        let header = lines.next().expect("header").to_string();
        let rows: Vec<&str> = lines.filter(|line| line.contains(needle)).collect();
        scenario.write(name, &format!("{header}\n{}\n", rows.join("\n")));
    };
    keep("attempts.csv", "2026-11-02T00:00:00+00:00");
    keep("journal.csv", "2026-11-02T00:00:00+00:00");
    keep("provider.csv", "exp_102");
    // The invoices DAG is gone with its rows: so goes its operation, which would match no DAG.
    let config = scenario.read("onceonly.toml");
    let invoices = config
        .find("# No template")
        .expect("the invoices operation");
    scenario.write("onceonly.toml", &config[..invoices]);
    let output = scenario.audit(&[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(stdout(&output).contains("no findings over the coverage above; 1 reconciled retries"));
}

#[test]
fn every_format_renders_the_same_findings() {
    let scenario = Scenario::copy_of("demo");
    let json: serde_json::Value =
        serde_json::from_slice(&scenario.audit(&["--format", "json"]).stdout).expect("json");
    let ids: Vec<String> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|finding| finding["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(ids.len(), 10);

    let ndjson = stdout(&scenario.audit(&["--format", "ndjson"]));
    let lines: Vec<serde_json::Value> = ndjson
        .lines()
        .map(|line| serde_json::from_str(line).expect("ndjson line"))
        .collect();
    assert_eq!(lines.first().expect("first")["type"], "coverage");
    assert_eq!(lines.last().expect("last")["type"], "summary");
    let ndjson_ids: Vec<&str> = lines
        .iter()
        .filter(|line| line["type"] == "finding")
        .map(|line| line["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ndjson_ids, ids);

    let csv = stdout(&scenario.audit(&["--format", "csv"]));
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let csv_ids: Vec<String> = reader
        .records()
        .map(|record| record.expect("csv record")[0].to_string())
        .collect();
    assert_eq!(csv_ids, ids);

    let markdown = stdout(&scenario.audit(&["--format", "markdown"]));
    assert!(markdown.starts_with("# onceonly audit"));
    assert_eq!(
        markdown
            .lines()
            .filter(|line| line.starts_with("| error")
                || line.starts_with("| warning")
                || line.starts_with("| info"))
            .count(),
        10
    );
}

#[test]
fn output_is_byte_identical_across_runs_and_row_orders() {
    let scenario = Scenario::copy_of("demo");
    let first = scenario.audit(&["--format", "json"]).stdout;
    assert_eq!(first, scenario.audit(&["--format", "json"]).stdout);
    // The same rows in another order are the same input.
    for name in ["attempts.csv", "journal.csv", "provider.csv"] {
        let text = scenario.read(name);
        let mut lines: Vec<&str> = text.lines().collect();
        lines[1..].reverse();
        scenario.write(name, &(lines.join("\n") + "\n"));
    }
    assert_eq!(
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&scenario.audit(&["--format", "json"]).stdout)
    );
}

#[test]
fn output_and_verdict_files() {
    let scenario = Scenario::copy_of("demo");
    let report = scenario.path("report.md");
    let verdicts = scenario.path("verdicts.csv");
    let output = scenario.audit(&[
        "--format",
        "markdown",
        "--output",
        report.to_str().unwrap(),
        "--verdicts",
        verdicts.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(
        std::fs::read_to_string(&report)
            .unwrap()
            .starts_with("# onceonly audit")
    );
    let verdicts = std::fs::read_to_string(&verdicts).unwrap();
    let mut reader = csv::Reader::from_reader(verdicts.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 12, "one verdict per try");
    let verdict_of = |dag: &str, run: &str, try_number: &str| {
        rows.iter()
            .find(|row| {
                &row[column("dag_id")] == dag
                    && row[column("run_id")].contains(run)
                    && &row[column("try_number")] == try_number
            })
            .map(|row| row[column("verdict")].to_string())
            .unwrap()
    };
    assert_eq!(
        verdict_of("invoices_export", "2026-11-03", "1"),
        "lost-response"
    );
    assert_eq!(
        verdict_of("invoices_export", "2026-11-03", "2"),
        "duplicate"
    );
    assert_eq!(verdict_of("orders_export", "2026-11-02", "2"), "reconciled");
    assert_eq!(verdict_of("orders_export", "2026-11-01", "1"), "committed");
    assert_eq!(verdict_of("orders_export", "2026-11-01", "2"), "duplicate");
    assert_eq!(
        verdict_of("orders_export", "2026-11-04", "3"),
        "failed-before-effect"
    );
    assert_eq!(
        verdict_of("orders_export", "2026-11-05", "1"),
        "no-operation"
    );
}

#[test]
fn dag_and_window_filters_narrow_the_audit() {
    let scenario = Scenario::copy_of("demo");
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        serde_json::from_slice(&scenario.audit(&all).stdout).expect("json")
    };
    let invoices = json(&["--dag", "invoices_*"]);
    let dags: BTreeSet<&str> = invoices["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["dag_id"].as_str())
        .collect();
    assert_eq!(dags, BTreeSet::from(["invoices_export"]));

    // Only the clear on 2026-11-20 was active in this window: the run it re-ran is audited with
    // all its tries, and the provider is read from its first try minus the 1 h slack to its
    // last try plus the slack, so the re-run duplicate is still found.
    let window = json(&["--since", "2026-11-20", "--until", "2026-11-21"]);
    assert_eq!(window["coverage"]["runs"], 1);
    assert_eq!(window["coverage"]["provider_from"], "2026-11-01T23:05:00Z");
    assert_eq!(window["coverage"]["provider_to"], "2026-11-20T10:00:30Z");
    let codes: BTreeSet<&str> = window["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert_eq!(codes, BTreeSet::from(["D001", "R001", "T001"]));
}

#[test]
fn rule_prints_its_documentation() {
    let output = onceonly(&["rule", "L001"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    for heading in [
        "L001 lost-response (error)",
        "## What it detects",
        "## Why it matters",
        "## Example",
        "## Repair",
    ] {
        assert!(text.contains(heading), "{text}");
    }
    let listing = stdout(&onceonly(&["rule"]));
    assert_eq!(listing.lines().count(), 14);
    let unknown = onceonly(&["rule", "X999"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("X999"));
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let scenario = Scenario::copy_of("demo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_onceonly"))
        .args(["audit", "--config", scenario.config().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Close the reading end before onceonly writes: its write meets a closed pipe.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    assert_eq!(stderr(&output), "", "a closed pipe printed an error");
    assert_eq!(
        output.status.code(),
        Some(1),
        "exit code still reports the findings"
    );
}

/// A `--dag` audit reports nothing that belongs elsewhere (SPEC §7). Beside the two DAGs of
/// fixtures/rules/glob-operation the provider lists `rep_301` under a key reports_us's template
/// makes (no journal row knows it) and `adhoc_1` under a key no template makes. The unscoped
/// audit reports both as unjournaled; an audit of reports_eu reports neither and counts them
/// among the objects it left out, with reports_us's journalled `rep_201`; an audit of
/// reports_us reports its own `rep_301` and leaves out `adhoc_1`.
#[test]
fn a_dag_audit_reports_nothing_that_belongs_elsewhere() {
    let scenario = Scenario::of_rules("glob-operation");
    let provider = scenario.read("provider.csv");
    scenario.write(
        "provider.csv",
        &format!(
            "{provider}rep_301,reports:reports_us:2026-10-31,2026-11-03T03:30:00Z,succeeded,sha256:0d1e,2026-10-31T00:00:00Z,2026-11-01T00:00:00Z,\n\
             adhoc_1,adhoc-2026-11-01,2026-11-03T03:40:00Z,succeeded,sha256:0d1f,,,\n"
        ),
    );
    let json = |args: &[&str]| audit_json(&scenario, args);
    let unjournaled = |report: &serde_json::Value| -> BTreeSet<String> {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "L003")
            .map(|f| {
                f["evidence"]["external_ids"][0]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let everything = json(&[]);
    assert_eq!(
        unjournaled(&everything),
        BTreeSet::from(["adhoc_1".to_string(), "rep_301".to_string()])
    );
    assert!(everything["coverage"].get("objects_left_out").is_none());

    let eu = json(&["--dag", "reports_eu"]);
    let dags: BTreeSet<&str> = eu["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["dag_id"].as_str().unwrap_or("(none)"))
        .collect();
    assert!(dags.iter().all(|dag| *dag == "reports_eu"), "{eu:#}");
    assert_eq!(
        eu["coverage"]["objects_left_out"],
        serde_json::json!({"claimed_elsewhere": 2, "unclaimed": 1})
    );
    assert_eq!(eu["coverage"]["sources"][2]["rows_audited"], 2);

    let us = json(&["--dag", "reports_us"]);
    assert_eq!(unjournaled(&us), BTreeSet::from(["rep_301".to_string()]));
    assert_eq!(us["coverage"]["objects_left_out"]["unclaimed"], 1);

    let table = stdout(&scenario.audit(&["--dag", "reports_eu", "--fail-on", "never"]));
    assert!(
        table.contains("left out: 3 provider objects (2 claimed by other DAGs"),
        "{table}"
    );
}

/// `--interval-from/--interval-to` audit the runs whose data interval starts in the range,
/// whenever they ran; with `--since/--until` both must hold. The provider is still read around
/// when the audited tries ran (SPEC §3), so a clear of an old interval is covered.
#[test]
fn interval_range_selects_runs_by_data_interval() {
    let scenario = Scenario::copy_of("demo");
    let json = |args: &[&str]| audit_json(&scenario, args);
    let codes = |report: &serde_json::Value| -> BTreeSet<String> {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect()
    };
    // 2026-11-01 ran on 11-02 and was cleared and re-run on 11-20.
    let first = json(&[
        "--interval-from",
        "2026-11-01",
        "--interval-to",
        "2026-11-02",
    ]);
    assert_eq!(first["coverage"]["runs"], 1);
    assert_eq!(first["coverage"]["tries"], 2);
    assert_eq!(first["coverage"]["interval_from"], "2026-11-01T00:00:00Z");
    assert_eq!(first["coverage"]["provider_from"], "2026-11-01T23:05:00Z");
    assert_eq!(first["coverage"]["provider_to"], "2026-11-20T10:00:30Z");
    assert_eq!(
        codes(&first),
        BTreeSet::from(["D001", "R001", "T001"].map(String::from))
    );
    let later = json(&[
        "--interval-from",
        "2026-11-02",
        "--interval-to",
        "2026-11-05",
    ]);
    assert_eq!(later["coverage"]["runs"], 3, "11-02, 11-03 and 11-04");
    // Active on 11-20 was only 2026-11-01's run: outside the range, so nothing is audited,
    // which is refused unless --allow-empty accepts it.
    let nothing = scenario.audit(&["--interval-from", "2026-11-02", "--since", "2026-11-20"]);
    assert_eq!(nothing.status.code(), Some(2));
    assert!(
        stderr(&nothing).contains("nothing was audited"),
        "{}",
        stderr(&nothing)
    );
    let both = json(&[
        "--interval-from",
        "2026-11-02",
        "--since",
        "2026-11-20",
        "--allow-empty",
    ]);
    assert_eq!(both["coverage"]["runs"], 0);
    let both = json(&["--interval-to", "2026-11-02", "--since", "2026-11-20"]);
    assert_eq!(both["coverage"]["runs"], 1);

    let table = stdout(&scenario.audit(&[
        "--interval-from",
        "2026-11-01",
        "--interval-to",
        "2026-11-02",
    ]));
    assert!(
        table.contains(
            "data intervals starting from 2026-11-01T00:00:00Z to before 2026-11-02T00:00:00Z"
        ),
        "{table}"
    );
    let backwards = scenario.audit(&[
        "--interval-from",
        "2026-11-05",
        "--interval-to",
        "2026-11-01",
    ]);
    assert_eq!(backwards.status.code(), Some(2));
    assert!(
        stderr(&backwards).contains("--interval-from"),
        "{}",
        stderr(&backwards)
    );
}

/// `--rule` takes a rule's code or its name, in any case, and both run the same rule: a name
/// must not pass the check and then select nothing (an empty report would read as all clear).
#[test]
fn a_rule_given_by_name_runs_as_by_code() {
    let scenario = Scenario::copy_of("demo");
    let by_code = audit_json(&scenario, &["--rule", "D001"]);
    assert!(
        by_code["summary"]["by_rule"]["D001"].as_u64().unwrap_or(0) > 0,
        "the demo has a D001 finding"
    );
    for name in ["duplicate-export", "Duplicate-Export", "d001"] {
        assert_eq!(
            audit_json(&scenario, &["--rule", name])["findings"],
            by_code["findings"],
            "--rule {name}"
        );
    }
}

/// The JSON report of an audit of `scenario` that must not fail (`--fail-on never`).
fn audit_json(scenario: &Scenario, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--format", "json", "--fail-on", "never"];
    all.extend_from_slice(args);
    let output = scenario.audit(&all);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("json")
}
