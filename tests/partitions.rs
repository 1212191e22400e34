//! Partitioned audits: `split`, an `audit --partition-out` per part and `merge` give every
//! output of the one audit byte for byte (report in each format, HTML page, verdicts, plan, SQL
//! script, metrics), at N = 1, 2 and 7, on synth scenarios with every fault, one glob
//! operation, DAGs that share keys, and every rule's fixture; parts of another split or a
//! missing part are refused with exit 2.

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::scenario::{onceonly, stderr};

/// Every case synth injects, at rates that give each a few dozen intervals.
const EVERY_FAULT: &str = "L001=0.03,D001=0.03,D002=0.03,L002=0.03,L003=0.03,M001=0.03,M002=0.03,\
K002=0.03,C001=0.03,reconciled=0.03,retry=0.05,voided=0.03,check-then-create=0.05";

fn run(args: &[&str]) -> std::process::Output {
    let output = onceonly(args);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "onceonly {args:?}: {}",
        stderr(&output)
    );
    output
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The outputs of an audit (or a merge) into `dir`, by name, as written. The metrics' duration
/// line is the one thing that may differ: it is how long the run took.
/// `every_format`: the report in every format and the verdicts and plan in each of theirs;
/// else the JSON report (with the HTML page, NDJSON verdicts, JSON plan, SQL and metrics) and
/// the table, for scenarios that repeat what another checks.
fn outputs(dir: &Path, source: &[&str], config: &str, every_format: bool) -> Vec<(String, String)> {
    std::fs::create_dir_all(dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    let mut written = Vec::new();
    let formats: &[&str] = if every_format {
        &["json", "table", "ndjson", "csv", "markdown"]
    } else {
        &["json", "table"]
    };
    for &format in formats {
        let mut args: Vec<String> = source.iter().map(|arg| arg.to_string()).collect();
        args.extend(
            [
                "--config",
                config,
                "--fail-on",
                "info",
                "--format",
                format,
                "-o",
                &path(format),
            ]
            .map(String::from),
        );
        if format == "json" {
            for (flag, name) in [
                ("--html", "report.html"),
                ("--verdicts", "verdicts.ndjson"),
                ("--plan", "plan.json"),
                ("--metrics", "metrics.prom"),
            ] {
                args.extend([flag.to_string(), path(name)]);
            }
            // A SQL script needs a journal in a database.
            if text(Path::new(config)).contains("[journal]\nurl") {
                args.extend(["--sql".to_string(), path("repair.sql")]);
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let done = run(&args);
        written.push((
            format!("exit code ({format})"),
            format!("{:?}", done.status.code()),
        ));
    }
    let mut names = vec!["report.html", "verdicts.ndjson", "plan.json", "repair.sql"];
    names.extend(formats);
    if every_format {
        names.extend(["verdicts.csv", "plan.md"]);
        let args: Vec<String> = source
            .iter()
            .map(|arg| arg.to_string())
            .chain(
                [
                    "--config",
                    config,
                    "--format",
                    "json",
                    "-o",
                    &path("unused.json"),
                    "--verdicts",
                    &path("verdicts.csv"),
                    "--plan",
                    &path("plan.md"),
                ]
                .map(String::from),
            )
            .collect();
        run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    for name in names {
        let file = dir.join(name);
        if name != "repair.sql" || file.exists() {
            written.push((name.to_string(), text(&file)));
        }
    }
    let metrics: String = text(&dir.join("metrics.prom"))
        .lines()
        .filter(|line| !line.starts_with("onceonly_audit_duration_seconds"))
        .map(|line| format!("{line}\n"))
        .collect();
    written.push(("metrics.prom".to_string(), metrics));
    written
}

/// Splits into `partitions`, audits each part, merges; returns the part folders' results.
fn partitioned(work: &Path, source: &[&str], config: &str, partitions: usize) -> Vec<PathBuf> {
    let parts = work.join(format!("parts-{partitions}"));
    let n = partitions.to_string();
    let mut args: Vec<&str> = vec!["split", "--config", config];
    args.extend(source);
    let out = parts.display().to_string();
    args.extend(["--partitions", &n, "--out", &out]);
    let split = run(&args);
    assert_eq!(split.status.code(), Some(0), "{}", stderr(&split));
    (0..partitions)
        .map(|part| {
            let snapshot = parts.join(format!("part-{part}")).display().to_string();
            let result = parts.join(format!("result-{part}"));
            let result_arg = result.display().to_string();
            run(&[
                "audit",
                "--config",
                config,
                "--from-snapshot",
                &snapshot,
                "--partition-out",
                &result_arg,
                "--format",
                "json",
                "-o",
                "/dev/null",
            ]);
            result
        })
        .collect()
}

/// The one audit's outputs and the merged ones at each N are the same bytes.
fn check_identity(
    work: &Path,
    source: &[&str],
    config: &str,
    counts: &[usize],
    every_format: bool,
) {
    let audit: Vec<&str> = std::iter::once("audit")
        .chain(source.iter().copied())
        .collect();
    let single = outputs(&work.join("single"), &audit, config, every_format);
    for &partitions in counts {
        let results = partitioned(work, source, config, partitions);
        let mut merge: Vec<String> = vec!["merge".into()];
        merge.extend(results.iter().map(|dir| dir.display().to_string()));
        let merge: Vec<&str> = merge.iter().map(String::as_str).collect();
        let merged = outputs(
            &work.join(format!("merged-{partitions}")),
            &merge,
            config,
            every_format,
        );
        for ((name, one), (_, many)) in single.iter().zip(&merged) {
            assert!(
                one == many,
                "{name} of {partitions} partitions differs from the one audit's ({})",
                work.display()
            );
        }
    }
}

pub fn synth(out: &Path, seed: u64, extra: &[&str]) -> String {
    let seed = seed.to_string();
    let out_arg = out.display().to_string();
    let mut args = vec![
        "synth",
        "--intervals",
        "600",
        "--dags",
        "9",
        "--seed",
        &seed,
        "--out",
        &out_arg,
        "--rates",
        EVERY_FAULT,
    ];
    args.extend(extra);
    let made = onceonly(&args);
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    out.join("onceonly.toml").display().to_string()
}

#[test]
fn merged_partitions_equal_the_one_audit_on_synth_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    for (seed, extra, counts) in [
        (1, &[][..], &[1, 2, 7][..]),
        (2, &["--glob-operation"][..], &[1, 2, 7][..]),
        (5, &[][..], &[7][..]),
    ] {
        let work = dir.path().join(format!("seed-{seed}"));
        let scenario = work.join("scenario");
        let config = synth(&scenario, seed, extra);
        let snapshot = scenario.display().to_string();
        let source = ["--from-snapshot", snapshot.as_str()];
        check_identity(&work, &source, &config, counts, seed == 1);
    }
}

/// The same, read from the sources (SQLite Airflow and journal, a provider file) with an
/// activity window, so the provider window of the whole audit holds in every part.
#[test]
fn merged_partitions_equal_the_one_audit_read_from_the_sources_in_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("live");
    let scenario = work.join("scenario");
    let config = synth(&scenario, 3, &[]);
    check_identity(
        &work,
        &[
            "--since",
            "2024-01-01T20:00:00Z",
            "--until",
            "2024-01-03T00:00:00Z",
        ],
        &config,
        &[2, 7],
        false,
    );
}

/// What an audit notices beyond the sources' warnings adds up over the parts: an operation that
/// earlier ones shadow (a glob after the DAGs' own operations) and journal rows that name a try
/// Airflow does not have, in DAGs of several parts. The merged report says what the one audit
/// says, both warnings included.
#[test]
fn what_the_parts_notice_adds_up_to_what_the_one_audit_notices() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("noticed");
    let scenario = work.join("scenario");
    let config = synth(&scenario, 4, &[]);
    let glob = format!(
        "{}\n[[operation]]\nname = \"every_export\"\ndag_id = \"synth_*\"\ntask_id = \"export\"\n",
        text(Path::new(&config))
    );
    std::fs::write(&config, glob).unwrap();
    crate::scenario::change_sqlite(
        &scenario.join("journal.db"),
        "UPDATE export_journal SET map_index = 7 WHERE rowid % 97 = 0",
    );
    let one = run(&["audit", "--config", &config, "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    let warnings = report["coverage"]["warnings"].to_string();
    assert!(
        warnings.contains("[[operation]] `every_export`"),
        "{warnings}"
    );
    assert!(
        warnings.contains("a try Airflow does not have"),
        "{warnings}"
    );
    check_identity(&work, &[], &config, &[2, 7], false);
}

/// Rewrites a synth snapshot so that `from`'s keys become `to`'s: two DAGs that share keys
/// (K003), whose rows and objects must audit together.
fn share_keys(snapshot: &Path, out: &Path, from: &str, to: &str) {
    let (mut tables, manifest) = onceonly::sources::saved::load(snapshot, &[]).unwrap();
    let rename = |frame: &DataFrame| {
        let keys = frame.column("op_key").unwrap().str().unwrap();
        let keys = keys.apply_values(|key| key.replace(from, to).into());
        let mut frame = frame.clone();
        frame.with_column(keys.into_column()).unwrap();
        frame
    };
    tables.journal = rename(&tables.journal);
    tables.provider = rename(&tables.provider);
    onceonly::sources::saved::save(out, &tables, manifest.window).unwrap();
}

#[test]
fn dags_that_share_keys_audit_in_one_part_and_merge_to_the_one_audit() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("shared");
    let scenario = work.join("scenario");
    let config = synth(&scenario, 4, &[]);
    let shared = work.join("shared-keys");
    share_keys(&scenario, &shared, "synth:synth_002:", "synth:synth_006:");
    let snapshot = shared.display().to_string();
    let single = run(&[
        "audit",
        "--config",
        &config,
        "--from-snapshot",
        &snapshot,
        "--format",
        "json",
        "--rule",
        "K003",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&single.stdout).unwrap();
    assert!(
        report["summary"]["by_rule"]["K003"].as_u64().unwrap_or(0) > 0,
        "the shared keys are K003 of the one audit"
    );
    check_identity(
        &work,
        &["--from-snapshot", &snapshot],
        &config,
        &[2, 7],
        false,
    );
}

/// Every rule's `fires` scenario, read from its CSV files, as two and seven parts.
#[test]
fn merged_partitions_equal_the_one_audit_on_every_rule_fixture() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/rules");
    let dir = tempfile::tempdir().unwrap();
    for rule in onceonly::rules::REGISTRY {
        let work = dir.path().join(rule.code());
        let scenario = work.join("scenario");
        std::fs::create_dir_all(&scenario).unwrap();
        for file in ["attempts.csv", "journal.csv", "provider.csv"] {
            std::fs::copy(
                fixtures.join(rule.code()).join("fires").join(file),
                scenario.join(file),
            )
            .unwrap();
        }
        // The shared config cut to the scenario's DAGs: an operation matching no DAG is exit 2.
        let fitted = crate::scenario::Scenario::of_rules(&format!("{}/fires", rule.code()));
        std::fs::write(scenario.join("onceonly.toml"), fitted.read("onceonly.toml")).unwrap();
        let config = scenario.join("onceonly.toml").display().to_string();
        check_identity(&work, &[], &config, &[2], false);
    }
}

#[test]
fn a_missing_part_or_a_part_of_another_split_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario");
    let config = synth(&scenario, 6, &[]);
    let snapshot = scenario.display().to_string();
    let source = ["--from-snapshot", snapshot.as_str()];
    let three = partitioned(&dir.path().join("a"), &source, &config, 3);
    let four = partitioned(&dir.path().join("b"), &source, &config, 4);
    let shown = |dir: &PathBuf| dir.display().to_string();
    let merge = |parts: &[&PathBuf]| {
        let mut args = vec!["merge".to_string(), "--config".into(), config.clone()];
        args.extend(parts.iter().map(|dir| shown(dir)));
        onceonly(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let whole = merge(&[&three[0], &three[1], &three[2]]);
    assert!(
        matches!(whole.status.code(), Some(0 | 1)),
        "{}",
        stderr(&whole)
    );

    let missing = merge(&[&three[0], &three[2]]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("part 1 of split"),
        "{}",
        stderr(&missing)
    );

    let foreign = merge(&[&three[0], &four[1], &three[2]]);
    assert_eq!(foreign.status.code(), Some(2));
    assert!(
        stderr(&foreign).contains("part of another split"),
        "{}",
        stderr(&foreign)
    );
    assert!(
        stderr(&foreign).contains(&shown(&four[1])),
        "{}",
        stderr(&foreign)
    );

    let twice = merge(&[&three[0], &three[1], &three[1], &three[2]]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(stderr(&twice).contains("given twice"), "{}", stderr(&twice));

    // A part audited for another window than it was split for.
    let part = dir.path().join("a/parts-3/part-0").display().to_string();
    let out = dir.path().join("other").display().to_string();
    let other = onceonly(&[
        "audit",
        "--config",
        &config,
        "--from-snapshot",
        &part,
        "--partition-out",
        &out,
        "--since",
        "2024-01-02",
    ]);
    assert_eq!(other.status.code(), Some(2), "{}", stderr(&other));
    assert!(stderr(&other).contains("--since"), "{}", stderr(&other));
}

fn partitioned_dag() -> String {
    text(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/airflow/onceonly_partitioned_audit.py"),
    )
}

/// The DAG parses, with its tasks in order, and its runs audit whole days: the scheduler's
/// timetable (Airflow's own, from the parsed DAG) gives a scheduled run at midnight and a run
/// triggered at 06:00 the day before as their data interval, which the scripts audit.
#[test]
fn the_partitioned_dag_imports_in_real_airflow() {
    crate::examples::check_example_dag(
        "onceonly_partitioned_audit",
        "tasks = sorted(t.task_id for t in dag.tasks)
assert tasks == ['audit_part', 'merge', 'parts', 'split'], tasks
assert [t.task_id for t in dag.task_dict['merge'].upstream_list] == ['audit_part']",
    );
}

/// One of the DAG's bash scripts with Airflow's template values filled in for one night.
fn dag_script(name: &str, night: &str, next: &str) -> String {
    crate::examples::dag_script(&partitioned_dag(), name, night, next)
}

/// The DAG's split, part and merge scripts, run as its tasks would run them two nights in a
/// row, give the nightly audit's report, and fail on new findings only.
#[test]
fn the_partitioned_dag_scripts_give_the_nightly_report() {
    let scenario = crate::scenario::Scenario::copy_of("airflow/out/airflow-3.3.2");
    let reports = scenario.path("reports");
    let binary = Path::new(env!("CARGO_BIN_EXE_onceonly")).parent().unwrap();
    let path = format!(
        "{}:{}",
        binary.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let day = crate::scenario::airflow_run_day("airflow-3.3.2");
    let next = (chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d").unwrap()
        + chrono::Days::new(1))
    .to_string();
    let (start, end) = (
        format!("{day}T00:00:00+00:00"),
        format!("{next}T00:00:00+00:00"),
    );
    let task = |script: &str, env: &[(&str, &str)]| {
        let mut command = std::process::Command::new("bash");
        command
            .args(["-c", &dag_script(script, &start, &end)])
            .env("PATH", &path)
            .env("ONCEONLY_CONFIG", scenario.config())
            .env("ONCEONLY_REPORTS", &reports);
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let night = || {
        let split = task("SPLIT", &[("PARTITIONS", "3")]);
        assert_eq!(split.status.code(), Some(0), "{}", stderr(&split));
        for part in ["0", "1", "2"] {
            let audited = task("AUDIT_PART", &[("PART", part)]);
            assert_eq!(audited.status.code(), Some(0), "{}", stderr(&audited));
        }
        task("MERGE", &[])
    };
    let config = scenario.config().display().to_string();
    let single = |baseline: Option<&Path>| {
        let mut args = vec![
            "audit", "--config", &config, "--since", &start, "--until", &end, "--format", "json",
        ];
        let shown = baseline.map(|path| path.display().to_string());
        if let Some(shown) = &shown {
            args.extend(["--baseline", shown]);
        }
        onceonly(&args).stdout
    };
    let first = night();
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let merged = std::fs::read(reports.join(format!("{next}.json"))).unwrap();
    assert!(
        merged == single(None),
        "the merged report is the one audit's"
    );
    let latest = reports.join("latest.json");
    let expected = single(Some(&latest));
    // The next night nothing new happened: the known findings do not fail the job again.
    let second = night();
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let merged = std::fs::read(reports.join(format!("{next}.json"))).unwrap();
    assert!(
        merged == expected,
        "the merged report against the baseline is the one audit's"
    );
    for file in [
        format!("{next}.html"),
        format!("{next}.plan.md"),
        format!("{next}.repair.sql"),
        "onceonly.prom".to_string(),
        "report.html".to_string(),
    ] {
        assert!(reports.join(&file).exists(), "{file} missing");
    }
}
