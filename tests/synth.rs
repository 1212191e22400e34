//! `onceonly synth`: the audit finds exactly what the generator injected, whichever way the
//! scenario is read (saved snapshot; Airflow SQLite + journal SQLite + the provider listed
//! from the loopback mock), and a seed always gives the same scenario.

use onceonly::commands::mock_provider::{self, MockOptions, MockPagination};
use onceonly::commands::synth::{self, Expected, Layout, Rates, SynthOptions};
use onceonly::config::Config;
use onceonly::engine::{self as audit, AuditOptions};
use onceonly::rules::Finding;

use crate::scenario::{onceonly, stderr, stdout};

/// Every fault at 2 %, so 2,000 intervals hold dozens of each.
fn options(seed: u64) -> SynthOptions {
    let faults = [
        "L001", "D001", "D002", "L002", "L003", "M001", "M002", "K002", "C001",
    ];
    let entries: Vec<String> = faults.iter().map(|code| format!("{code}=0.02")).collect();
    SynthOptions {
        intervals: 2_000,
        dags: 3,
        seed,
        rates: Rates::parse(&entries).unwrap(),
        layout: Layout::OperationPerDag,
        snapshot_only: false,
        shuffle_rows: false,
    }
}

/// The scenario in `dir` served by the loopback mock provider (cursor pages of 1,000, each
/// request logged to `log`), and a config that reads the Airflow and journal databases and lists
/// the provider from it.
fn listed(
    dir: &std::path::Path,
    log: Option<std::path::PathBuf>,
) -> (mock_provider::MockProvider, Config) {
    let objects = mock_provider::load_state(&dir.join("provider_state.json")).unwrap();
    let mut mock = MockOptions::new(objects, MockPagination::Cursor);
    mock.page_size = 1000;
    mock.request_log = log;
    let mock = mock_provider::start(mock, 0).unwrap();
    let listing = dir.join("listing.toml");
    std::fs::write(
        &listing,
        synth::config(3, Layout::OperationPerDag, Some(&mock.url())),
    )
    .unwrap();
    (mock, Config::load(&listing).unwrap())
}

fn found(findings: &[Finding]) -> Vec<Expected> {
    let mut found: Vec<Expected> = findings
        .iter()
        .map(|finding| Expected {
            code: finding.code.to_string(),
            dag_id: finding.dag_id.clone().unwrap_or_default(),
            interval: finding.interval.clone().unwrap_or_default(),
            op_key: finding.op_key.clone(),
            external_ids: finding.evidence.external_ids.clone(),
        })
        .collect();
    found.sort();
    found
}

fn assert_same(source: &str, seed: u64, findings: &[Finding], truth: &[Expected]) {
    let found = found(findings);
    let missing: Vec<_> = truth
        .iter()
        .filter(|e| !found.contains(e))
        .take(3)
        .collect();
    let extra: Vec<_> = found
        .iter()
        .filter(|f| !truth.contains(f))
        .take(3)
        .collect();
    assert!(
        found == truth,
        "{source}, seed {seed}: {} findings, {} injected; missing {missing:?}; extra {extra:?}",
        found.len(),
        truth.len()
    );
}

#[test]
fn findings_equal_the_injected_truth_from_every_source() {
    for seed in [1, 7, 42] {
        let dir = tempfile::tempdir().unwrap();
        let written = synth::run(&options(seed), dir.path()).unwrap();
        let truth = &written.truth.findings;
        for code in [
            "L001", "D001", "D002", "K001", "L002", "L003", "M001", "M002", "K002", "C001",
        ] {
            assert!(
                truth.iter().any(|f| f.code == code),
                "seed {seed} injected no {code}"
            );
        }

        // The saved snapshot, as `audit --from-snapshot DIR --config DIR/onceonly.toml`.
        let config = Config::load(&dir.path().join("onceonly.toml")).unwrap();
        let from_snapshot = AuditOptions {
            from_snapshot: Some(dir.path().to_path_buf()),
            ..AuditOptions::default()
        };
        let report = audit::run(&config, &from_snapshot).unwrap().report;
        assert_same("snapshot", seed, &report.findings, truth);
        assert_eq!(
            report.summary.reconciled_retries,
            written.truth.cases["reconciled"] + written.truth.cases["K002"],
            "every recovered lost response, and every re-run the provider replayed, is counted"
        );
        assert!(written.truth.cases["check-then-create"] > 0, "seed {seed}");
        assert_eq!(
            report.summary.verdicts["no-operation"],
            written.truth.cases["check-then-create"] + written.truth.cases["M002"],
            "a retry that skipped a committed export did nothing, and is no M002"
        );

        // Airflow's SQLite database and the journal database, the provider listed over HTTP.
        let (mock, config) = listed(dir.path(), None);
        let report = audit::run(&config, &AuditOptions::default())
            .unwrap()
            .report;
        assert_same("sqlite + mock provider", seed, &report.findings, truth);
        assert!(
            report.coverage.sources[0].source.contains("airflow.db"),
            "{:?}",
            report.coverage.sources
        );
        mock.stop();
    }
}

/// One `[[operation]]` whose dag_id is the glob `*` covers ten DAGs on one hourly schedule.
/// Each DAG is its own pipeline (SPEC §4): every rule finds exactly what was injected, nothing
/// pools the DAGs' intervals (no D002 or K001 over the hour the DAGs share, no rerun of one
/// DAG's interval blamed on another's), and every try is judged as with an operation per DAG.
#[test]
fn a_glob_operation_over_many_dags_finds_exactly_the_injected_truth() {
    for seed in [2, 13, 99] {
        let dir = tempfile::tempdir().unwrap();
        let mut options = options(seed);
        options.dags = 10;
        options.intervals = 3_000;
        options.layout = Layout::GlobOperation;
        let written = synth::run(&options, dir.path()).unwrap();
        let audit_with = |config: &Config| {
            let from_snapshot = AuditOptions {
                from_snapshot: Some(dir.path().to_path_buf()),
                ..AuditOptions::default()
            };
            audit::run(config, &from_snapshot).unwrap().report
        };
        let glob = Config::load(&dir.path().join("onceonly.toml")).unwrap();
        assert_eq!(glob.operations.len(), 1);
        let report = audit_with(&glob);
        assert_eq!(report.coverage.operations, ["export"]);
        assert_same(
            "glob operation",
            seed,
            &report.findings,
            &written.truth.findings,
        );

        let per_dag = dir.path().join("per-dag.toml");
        std::fs::write(&per_dag, synth::config(10, Layout::OperationPerDag, None)).unwrap();
        let per_dag = audit_with(&Config::load(&per_dag).unwrap());
        assert_eq!(
            report.summary.verdicts, per_dag.summary.verdicts,
            "seed {seed}: every try judged as with an operation per DAG"
        );
    }
}

/// Several lookups first try the row or number after the previous answer, a shortcut for
/// sources read in the same order (the journal as written, objects as created). Read in any
/// other order, the audit finds exactly the same, and judges every try the same.
#[test]
fn rows_in_any_order_give_the_same_audit() {
    use polars::prelude::{DataFrame, IdxCa, IdxSize};
    let dir = tempfile::tempdir().unwrap();
    let written = synth::run(&options(11), dir.path()).unwrap();
    let config = Config::load(&dir.path().join("onceonly.toml")).unwrap();
    let audit_of = |tables: &onceonly::sources::Tables| {
        audit::audit_tables(&config, tables, &AuditOptions::default())
            .unwrap()
            .report
    };
    let (mut tables, _) = onceonly::sources::saved::load(dir.path(), &[]).unwrap();
    let in_order = audit_of(&tables);
    assert_same(
        "rows in order",
        11,
        &in_order.findings,
        &written.truth.findings,
    );

    type Order = fn(usize, usize) -> usize;
    let orders: [(&str, Order); 2] = [
        ("reversed", |row, rows| rows - 1 - row),
        // 7,919 is prime, so this visits every row once unless it divides the row count.
        ("shuffled", |row, rows| (row * 7_919 + 13) % rows),
    ];
    for (name, order) in orders {
        let reorder = |frame: &DataFrame| {
            let rows = frame.height();
            assert_ne!(rows % 7_919, 0);
            let order: Vec<IdxSize> = (0..rows).map(|row| order(row, rows) as IdxSize).collect();
            let order = IdxCa::from_vec("order".into(), order);
            frame.take(&order).unwrap()
        };
        let (attempts, journal, provider) = (
            reorder(&tables.attempts),
            reorder(&tables.journal),
            reorder(&tables.provider),
        );
        tables.attempts = attempts;
        tables.journal = journal;
        tables.provider = provider;
        let report = audit_of(&tables);
        assert_same(name, 11, &report.findings, &written.truth.findings);
        assert_eq!(
            report.summary.verdicts, in_order.summary.verdicts,
            "{name}: every try judged alike"
        );
    }
}

/// Times that tie. A journal or a provider that records times to the second has rows of one try,
/// one key or one interval at the same time; here the times are cut to the minute, so that
/// such rows are the rule rather than a few. Read in any order, the audit writes the same
/// report, byte for byte, and judges every try the same.
#[test]
fn times_that_tie_in_any_order_give_the_same_audit() {
    use onceonly::render::{Format, render};
    use polars::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    synth::run(&options(5), dir.path()).unwrap();
    let config = Config::load(&dir.path().join("onceonly.toml")).unwrap();
    let (mut tables, _) = onceonly::sources::saved::load(dir.path(), &[]).unwrap();
    let to_the_minute = |frame: &mut DataFrame, name: &str| {
        let seconds: Int64Chunked = frame
            .column(name)
            .unwrap()
            .cast(&DataType::Int64)
            .unwrap()
            .i64()
            .unwrap()
            .apply_values(|micros| micros.div_euclid(60_000_000) * 60_000_000);
        let seconds = seconds.into_series().cast(&onceonly::model::utc()).unwrap();
        frame
            .with_column(seconds.with_name(name.into()).into_column())
            .unwrap();
    };
    to_the_minute(&mut tables.journal, "recorded_at");
    to_the_minute(&mut tables.provider, "created_at");
    let audit_of = |tables: &onceonly::sources::Tables| {
        let (report, verdicts, _) = audit::audit_tables(&config, tables, &AuditOptions::default())
            .unwrap()
            .into_results()
            .unwrap();
        let verdicts = verdicts
            .expect("verdicts asked for")
            .sort(onceonly::model::TRY.to_vec(), Default::default())
            .unwrap();
        (
            render(&report, Format::Json, Some(&verdicts)).unwrap(),
            verdicts,
        )
    };
    let (in_order, in_order_verdicts) = audit_of(&tables);
    let recorded = tables.journal.column("recorded_at").unwrap().clone();
    let distinct = recorded.n_unique().unwrap();
    assert!(
        distinct * 2 < recorded.len(),
        "the journal's times tie: {distinct} distinct of {} rows",
        recorded.len()
    );
    let reversed = |frame: &DataFrame| frame.reverse();
    let shuffled = |frame: &DataFrame| {
        let rows = frame.height();
        assert_ne!(rows % 7_919, 0);
        let order: Vec<IdxSize> = (0..rows)
            .map(|row| ((row * 7_919 + 13) % rows) as IdxSize)
            .collect();
        frame.take(&IdxCa::from_vec("order".into(), order)).unwrap()
    };
    type Order<'o> = &'o dyn Fn(&DataFrame) -> DataFrame;
    let orders: [(&str, Order); 2] = [("reversed", &reversed), ("shuffled", &shuffled)];
    for (name, order) in orders {
        let tables = onceonly::sources::Tables {
            attempts: order(&tables.attempts),
            journal: order(&tables.journal),
            provider: order(&tables.provider),
            ..tables.clone()
        };
        let (report, verdicts) = audit_of(&tables);
        assert!(report == in_order, "{name}: the report differs");
        assert!(
            verdicts.equals_missing(&in_order_verdicts),
            "{name}: a try is judged otherwise"
        );
    }
}

/// `synth --shuffle-rows` writes the same snapshot with every table's rows in another order;
/// audited, it gives the report of the snapshot in generated order, byte for byte, and holds
/// exactly the injected findings.
#[test]
fn a_snapshot_written_in_shuffled_row_order_gives_the_same_report() {
    let (plain, shuffled) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let written = synth::run(&options(5), plain.path()).unwrap();
    let mut shuffling = options(5);
    shuffling.shuffle_rows = true;
    synth::run(&shuffling, shuffled.path()).unwrap();

    let load = |dir: &std::path::Path| onceonly::sources::saved::load(dir, &[]).unwrap().0;
    let (a, b) = (load(plain.path()), load(shuffled.path()));
    for (name, a, b) in [
        ("attempts", &a.attempts, &b.attempts),
        ("journal", &a.journal, &b.journal),
        ("provider", &a.provider, &b.provider),
    ] {
        assert!(!a.equals_missing(b), "{name}: the rows were not reordered");
        let sorted = |frame: &polars::prelude::DataFrame| {
            let columns: Vec<String> = frame
                .get_column_names()
                .iter()
                .map(|name| name.to_string())
                .collect();
            frame.sort(columns, Default::default()).unwrap()
        };
        assert!(
            sorted(a).equals_missing(&sorted(b)),
            "{name}: the same rows in another order"
        );
    }

    let report_of = |dir: &std::path::Path| {
        let config = Config::load(&dir.join("onceonly.toml")).unwrap();
        let options = AuditOptions {
            from_snapshot: Some(dir.to_path_buf()),
            ..AuditOptions::default()
        };
        let report = audit::run(&config, &options).unwrap().report;
        // What the audit found; the coverage names the scenario's folder, which differs.
        let found = serde_json::to_string(&(&report.summary, &report.findings)).unwrap();
        (report, found)
    };
    let (_, in_order) = report_of(plain.path());
    let (report, found) = report_of(shuffled.path());
    assert_same(
        "shuffled snapshot",
        5,
        &report.findings,
        &written.truth.findings,
    );
    assert_eq!(found, in_order, "the report of the rows in generated order");
}

/// A shuffled snapshot large enough that the audit puts its rows in time order first
/// (`engine::order`) gives what the snapshot in generated order gives: the report, every
/// try's verdict, and the plan (but for the fingerprint, which is each snapshot's own hash).
#[test]
fn a_shuffled_snapshot_put_in_time_order_gives_the_same_report_verdicts_and_plan() {
    let (plain, shuffled) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut generating = options(17);
    generating.intervals = 70_000;
    generating.snapshot_only = true;
    synth::run(&generating, plain.path()).unwrap();
    generating.shuffle_rows = true;
    let written = synth::run(&generating, shuffled.path()).unwrap();

    let audit_of = |dir: &std::path::Path| {
        let (tables, _) = onceonly::sources::saved::load(dir, &[]).unwrap();
        for table in onceonly::model::Table::ALL {
            assert!(
                tables.get(table).height() >= audit::FEWEST_ROWS_PUT_IN_ORDER,
                "{}: too few rows to be put in order",
                table.name()
            );
        }
        let config = Config::load(&dir.join("onceonly.toml")).unwrap();
        let options = AuditOptions {
            from_snapshot: Some(dir.to_path_buf()),
            plan: true,
            ..AuditOptions::default()
        };
        let (report, verdicts, plan) = audit::run(&config, &options)
            .unwrap()
            .into_results()
            .unwrap();
        let verdicts = verdicts.expect("verdicts asked for");
        let mut plan = serde_json::to_value(plan.unwrap()).unwrap();
        plan.as_object_mut().unwrap().remove("inputs_fingerprint");
        (report, verdicts, plan)
    };
    let (report, verdicts, plan) = audit_of(shuffled.path());
    let (in_order, in_order_verdicts, in_order_plan) = audit_of(plain.path());
    assert_same(
        "shuffled, put in order",
        17,
        &report.findings,
        &written.truth.findings,
    );
    assert_eq!(
        serde_json::to_string(&(&report.summary, &report.findings)).unwrap(),
        serde_json::to_string(&(&in_order.summary, &in_order.findings)).unwrap()
    );
    // A verdict file lists the tries by their identity, whatever order they were read in.
    let by_try = |verdicts: &polars::prelude::DataFrame| {
        let key = onceonly::model::TRY.to_vec();
        verdicts.sort(key, Default::default()).unwrap()
    };
    assert!(
        by_try(&verdicts).equals_missing(&by_try(&in_order_verdicts)),
        "every try's verdict"
    );
    assert_eq!(plan, in_order_plan);
}

/// Auditing one DAG reads only its runs' journal rows, and the keys and ids of those rows are
/// numbered apart from the whole journal's: each DAG's audit finds exactly that DAG's faults.
///
/// It reports nothing that belongs elsewhere (SPEC §7): the other DAGs' objects, journalled or
/// not (their unjournaled L003 objects carry keys the glob-free template claims for their DAG),
/// are left out, and the report says how many.
#[test]
fn each_dag_audited_alone_finds_exactly_its_own_faults() {
    let dir = tempfile::tempdir().unwrap();
    let written = synth::run(&options(5), dir.path()).unwrap();
    let config = Config::load(&dir.path().join("onceonly.toml")).unwrap();
    let mut dags: Vec<&str> = written
        .truth
        .findings
        .iter()
        .map(|f| f.dag_id.as_str())
        .collect();
    dags.sort();
    dags.dedup();
    assert_eq!(dags.len(), 3, "every DAG has faults: {dags:?}");
    let provider_rows = written.truth.rows["provider"];
    let mut audited_objects = 0;
    for dag in dags {
        let options = AuditOptions {
            from_snapshot: Some(dir.path().to_path_buf()),
            dag: Some(dag.to_string()),
            ..AuditOptions::default()
        };
        let report = audit::run(&config, &options).unwrap().report;
        let truth: Vec<Expected> = written
            .truth
            .findings
            .iter()
            .filter(|f| f.dag_id == dag)
            .cloned()
            .collect();
        assert_same(&format!("--dag {dag}"), 5, &report.findings, &truth);
        let audited = report.coverage.sources[2].rows_audited;
        let left_out = report
            .coverage
            .objects_left_out
            .expect("a scoped audit says");
        assert_eq!(
            left_out.unclaimed, 0,
            "--dag {dag}: every object is some DAG's"
        );
        assert_eq!(
            audited + left_out.claimed_elsewhere,
            provider_rows,
            "--dag {dag}"
        );
        audited_objects += audited;
    }
    assert_eq!(audited_objects, provider_rows, "each object is one DAG's");
}

#[test]
fn a_seed_gives_the_same_scenario_and_the_cli_writes_it() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = synth::run(&options(3), one.path()).unwrap();
    let second = synth::run(&options(3), two.path()).unwrap();
    assert_eq!(first.truth.findings, second.truth.findings);
    let manifest = |dir: &std::path::Path| {
        let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["content_hash"].clone()
    };
    assert_eq!(manifest(one.path()), manifest(two.path()));
    let other = synth::generate(&options(4)).unwrap();
    assert_ne!(other.truth.findings, first.truth.findings);

    // Through the binary: synth, then audit the snapshot it wrote.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let out = out.to_str().unwrap();
    let synth_into = |out: &str, more: &[&str]| {
        let args = [
            "synth",
            "--intervals",
            "500",
            "--dags",
            "2",
            "--seed",
            "9",
            "--out",
            out,
            "--rates",
            "L001=0.05,M002=0.05",
        ];
        let made = onceonly(&[&args[..], more].concat());
        assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    };
    synth_into(out, &[]);
    let config = format!("{out}/onceonly.toml");
    let audited = onceonly(&[
        "audit",
        "--from-snapshot",
        out,
        "--config",
        &config,
        "--format",
        "json",
    ]);
    assert_eq!(audited.status.code(), Some(1), "{}", stderr(&audited));
    let report: serde_json::Value = serde_json::from_str(&stdout(&audited)).unwrap();
    let truth: synth::Truth =
        serde_json::from_str(&std::fs::read_to_string(format!("{out}/truth.json")).unwrap())
            .unwrap();
    let codes = |findings: &serde_json::Value| {
        let mut codes: Vec<String> = findings
            .as_array()
            .unwrap()
            .iter()
            .map(|f| format!("{} {}", f["code"], f["op_key"]))
            .collect();
        codes.sort();
        codes
    };
    let mut expected: Vec<String> = truth
        .findings
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                serde_json::json!(f.code),
                serde_json::json!(f.op_key)
            )
        })
        .collect();
    expected.sort();
    assert_eq!(codes(&report["findings"]), expected);

    // --snapshot-only writes the same snapshot, config and truth, and nothing the snapshot
    // does not need: no databases, no provider state, no listing config pointing at it.
    let lean = dir.path().join("lean");
    let lean = lean.to_str().unwrap();
    synth_into(lean, &["--snapshot-only"]);
    assert_eq!(
        manifest(std::path::Path::new(lean)),
        manifest(std::path::Path::new(out))
    );
    for file in ["truth.json", "onceonly.toml", "attempts.parquet"] {
        assert_eq!(
            std::fs::read(format!("{lean}/{file}")).unwrap(),
            std::fs::read(format!("{out}/{file}")).unwrap(),
            "{file}"
        );
    }
    for file in [
        "airflow.db",
        "journal.db",
        "provider_state.json",
        "onceonly-listing.toml",
    ] {
        assert!(std::path::Path::new(&format!("{out}/{file}")).exists());
        assert!(
            !std::path::Path::new(&format!("{lean}/{file}")).exists(),
            "{file}"
        );
    }

    let bad = onceonly(&["synth", "--out", out, "--rates", "X001=0.1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("X001"), "{}", stderr(&bad));
}

/// Rows turned into frames chunk by chunk give the scenario generated in one piece.
#[test]
fn a_scenario_generated_in_chunks_is_the_scenario_generated_at_once() {
    let whole = synth::generate_in_chunks(&options(6), usize::MAX).unwrap();
    for chunk in [1, 333, 1_999] {
        let chunked = synth::generate_in_chunks(&options(6), chunk).unwrap();
        assert_eq!(
            chunked.truth.findings, whole.truth.findings,
            "chunk {chunk}"
        );
        assert_eq!(chunked.truth.rows, whole.truth.rows, "chunk {chunk}");
        for table in onceonly::model::Table::ALL {
            let (a, b) = (chunked.tables.get(table), whole.tables.get(table));
            assert!(
                a.equals_missing(b),
                "chunk {chunk}: {} differs",
                table.name()
            );
            assert_eq!(a.first_col_n_chunks(), 1, "chunk {chunk}: {}", table.name());
        }
    }
}

/// A listed provider is asked only for the window the audited tries need (SPEC §3): with
/// `--interval-from/--interval-to` over a day of a scenario spanning weeks, every listing
/// request is bounded by that day's tries plus the slack, and the audit still finds exactly
/// the faults injected in those intervals.
#[test]
fn the_listing_covers_only_the_window_the_audited_tries_need() {
    let dir = tempfile::tempdir().unwrap();
    let written = synth::run(&options(21), dir.path()).unwrap();
    let log = dir.path().join("requests.log");
    let (mock, config) = listed(dir.path(), Some(log.clone()));
    let day = |text: &str| onceonly::timestamp::parse(text).unwrap();
    let options = AuditOptions {
        interval_from: Some(day("2024-01-10")),
        interval_to: Some(day("2024-01-11")),
        ..AuditOptions::default()
    };
    let report = audit::run(&config, &options).unwrap().report;
    mock.stop();

    let in_range: Vec<Expected> = written
        .truth
        .findings
        .iter()
        .filter(|f| f.interval.starts_with("2024-01-10"))
        .cloned()
        .collect();
    assert!(!in_range.is_empty());
    assert_same("one day of intervals", 21, &report.findings, &in_range);
    // Tries of 2024-01-10's hourly intervals start an hour after each, and a K002 re-run a day
    // later: the window is those tries' span plus the hour of slack, not the whole provider.
    let seconds = |bound: &Option<String>| day(bound.as_deref().unwrap()) / 1_000_000;
    let (from, to) = (
        seconds(&report.coverage.provider_from),
        seconds(&report.coverage.provider_to),
    );
    assert!(
        from >= day("2024-01-10") / 1_000_000 && to <= day("2024-01-13") / 1_000_000,
        "{from}..{to}"
    );
    // Objects created in that window for neighbouring intervals, which no journal row knows,
    // are another interval's audit's, by their own interval fields.
    let left_out = report.coverage.objects_left_out.expect("a range states it");
    assert!(left_out.other_intervals > 0, "{left_out:?}");
    let requests = std::fs::read_to_string(&log).unwrap();
    assert!(!requests.is_empty());
    for request in requests.lines() {
        let param = |name: &str| -> i64 {
            let (_, rest) = request
                .split_once(&format!("{name}="))
                .unwrap_or_else(|| panic!("{request} has no {name}"));
            rest.split('&').next().unwrap().parse().unwrap()
        };
        // Each request may reach a second past the window (providers round their bounds).
        assert!(param("created_after") >= from - 2, "{request}");
        assert!(param("created_before") <= to + 2, "{request}");
    }
}
