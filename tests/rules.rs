//! Every rule against its own fixture scenario (`fixtures/rules/<CODE>/{fires,near-miss}`), run
//! alone: it must fire on `fires` and stay silent on `near-miss`; `fixtures/rules/clean` gives no
//! finding from any rule. The findings are kept as insta snapshots, so a reviewer sees what each
//! rule reports (ids, keys, intervals, evidence), not assertions about internals.
//!
//! All scenarios share `fixtures/rules/onceonly.toml`; its relative snapshot paths are resolved
//! in the scenario's folder.

use std::path::{Path, PathBuf};

use onceonly::cells::{ints, texts};
use onceonly::config::Config;
use onceonly::engine::{self as audit, Audit, AuditOptions};
use onceonly::rules::{Finding, REGISTRY};

fn rules_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/rules")
}

/// Audits one scenario folder with the shared config; `rules` empty runs every rule.
fn audit_scenario(scenario: &str, rules: &[&str]) -> Audit {
    let options = AuditOptions {
        rules: rules.iter().map(|code| code.to_string()).collect(),
        ..Default::default()
    };
    audit_scenario_with(scenario, &options)
}

/// Audits one scenario folder with the shared config and the given options.
fn audit_scenario_with(scenario: &str, options: &AuditOptions) -> Audit {
    let config_path = rules_fixtures().join("onceonly.toml");
    let text = std::fs::read_to_string(&config_path)
        .unwrap_or_else(|err| panic!("{}: {err}", config_path.display()));
    let dir = rules_fixtures().join(scenario);
    assert!(dir.is_dir(), "no scenario folder {}", dir.display());
    let config = Config::parse(&text, &dir.join("onceonly.toml"))
        .unwrap_or_else(|err| panic!("config for {scenario}: {err}"));
    audit::run(&config, options).unwrap_or_else(|err| panic!("audit of {scenario}: {err}"))
}

/// Snapshot files are named after the scenario only (`tests/snapshots/D001_fires.snap`), so a
/// reviewer finds a rule's expected output by its code.
fn snapshot(name: &str, findings: &[Finding]) {
    insta::with_settings!({ prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!(name, findings);
    });
}

/// The rule fires on its `fires` scenario and only it reports there; it is silent on its
/// `near-miss`.
fn check_rule(code: &str) {
    let fires = audit_scenario(&format!("{code}/fires"), &[code])
        .report
        .findings;
    assert!(
        fires.iter().any(|finding| finding.code == code),
        "{code} did not fire on {code}/fires"
    );
    assert!(
        fires.iter().all(|finding| finding.code == code),
        "{code} ran alone, yet other codes reported: {fires:#?}"
    );
    snapshot(&format!("{code}_fires"), &fires);

    let near_miss = audit_scenario(&format!("{code}/near-miss"), &[code])
        .report
        .findings;
    assert!(
        near_miss.is_empty(),
        "{code} fired on {code}/near-miss: {near_miss:#?}"
    );
    snapshot(&format!("{code}_near_miss"), &near_miss);
}

/// Every registered rule against its own scenarios, so a new rule is tested by its fixture
/// folder (with a README.md per scenario) and its snapshots alone.
#[test]
fn every_rule_fires_on_its_scenario_and_not_on_its_near_miss() {
    for rule in REGISTRY {
        for variant in ["fires", "near-miss"] {
            let dir = rules_fixtures().join(rule.code()).join(variant);
            assert!(
                dir.join("README.md").is_file(),
                "{} lacks a README.md",
                dir.display()
            );
        }
        check_rule(rule.code());
    }
}

#[test]
fn clean_scenario_has_no_findings_from_any_rule() {
    let audit = audit_scenario("clean", &[]);
    let report = &audit.report;
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert!(report.coverage.rules_skipped.is_empty());
    // Not vacuous: four tries were audited, and the lost response of 2026-11-02 was reconciled.
    assert_eq!(report.coverage.tries, 4);
    assert_eq!(report.summary.reconciled_retries, 1);
    snapshot("clean", &report.findings);
}

/// `(run_id, try_number, verdict)` for every try of an audit, in the verdicts' order.
fn verdicts(audit: &Audit) -> Vec<(String, i64, String)> {
    let frame = audit.verdicts().expect("the verdicts frame");
    let runs = texts(frame, "run_id").expect("run_id");
    let tries = ints(frame, "try_number").expect("try_number");
    let verdicts = texts(frame, "verdict").expect("verdict");
    runs.into_iter()
        .zip(tries)
        .zip(verdicts)
        .map(|((run, number), verdict)| {
            (
                run.expect("run_id"),
                number.expect("try_number"),
                verdict.expect("verdict"),
            )
        })
        .collect()
}

/// An audit of a snapshot decodes only the columns its rules and its plan read (`Rule::reads`,
/// `repair::plan_reads`; the others come back NULL). Each rule run alone on a snapshot of its
/// `fires` and `near-miss` scenarios finds what it finds with every column read, gives every
/// try the same verdict, and plans the same repairs: a rule or a repair that read a column it
/// does not declare would see NULL there and report otherwise.
#[test]
fn each_rule_alone_from_a_snapshot_finds_and_plans_what_it_does_with_every_column_read() {
    let scenarios = REGISTRY
        .iter()
        .flat_map(|rule| ["fires", "near-miss"].map(|variant| (*rule, variant)));
    for (rule, variant) in scenarios {
        let code = rule.code();
        let scenario = format!("{code}/{variant}");
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("snapshot");
        for plan in [false, true] {
            let options = AuditOptions {
                rules: vec![code.to_string()],
                plan,
                ..Default::default()
            };
            let whole = audit_scenario_with(
                &scenario,
                &AuditOptions {
                    save_snapshot: Some(snapshot.clone()),
                    ..options.clone()
                },
            );
            let unread = onceonly::engine::left_unread(&options);
            assert!(
                !unread.is_empty() && unread.iter().all(|column| !rule.reads().contains(column)),
                "{code}: {unread:?}"
            );
            let from_snapshot = audit_scenario_with(
                &scenario,
                &AuditOptions {
                    from_snapshot: Some(snapshot.clone()),
                    ..options
                },
            );
            let findings = |audit: &Audit| serde_json::to_value(&audit.report.findings).unwrap();
            let planned = |audit: &Audit| serde_json::to_value(&audit.plan).unwrap();
            assert_eq!(
                findings(&whole),
                findings(&from_snapshot),
                "{scenario}, plan {plan}: the findings"
            );
            assert_eq!(verdicts(&whole), verdicts(&from_snapshot), "{scenario}");
            assert_eq!(
                planned(&whole),
                planned(&from_snapshot),
                "{scenario}: the plan"
            );
            assert_eq!(
                whole.report.findings.is_empty(),
                variant == "near-miss",
                "{scenario}"
            );
        }
    }
}

const RUN: &str = "scheduled__2026-11-01T00:00:00+00:00";

#[test]
fn lost_response_then_replay_gives_lost_response_and_reconciled_verdicts() {
    // Try 1 created exp_101 and lost the response; try 2 got exp_101 back and committed it.
    let audit = audit_scenario("L001/near-miss", &[]);
    assert_eq!(
        verdicts(&audit),
        [
            (RUN.to_string(), 1, "lost-response".to_string()),
            (RUN.to_string(), 2, "reconciled".to_string()),
        ]
    );
    assert_eq!(audit.report.summary.reconciled_retries, 1);
}

#[test]
fn lost_response_then_new_object_gives_lost_response_and_duplicate_verdicts() {
    // Try 1 created exp_101 and lost the response; the provider ignored the key and try 2
    // created and committed exp_102 beside it.
    let audit = audit_scenario("D001/fires", &[]);
    assert_eq!(
        verdicts(&audit),
        [
            (RUN.to_string(), 1, "lost-response".to_string()),
            (RUN.to_string(), 2, "duplicate".to_string()),
        ]
    );
}

#[test]
fn another_intervals_object_is_not_a_reconciled_retry() {
    // K003: the 2026-11-02 run sent the monthly key and got 2026-11-01's inv_501 back. That is
    // a collision, not proof the protection works.
    let audit = audit_scenario("K003/fires", &[]);
    let verdicts = verdicts(&audit);
    let second = verdicts
        .iter()
        .find(|(run, _, _)| run.contains("2026-11-02"))
        .expect("the 11-02 try");
    assert_ne!(second.2, "reconciled", "{verdicts:?}");
    assert_eq!(audit.report.summary.reconciled_retries, 0);
}

/// `reports` binds the glob `reports_*`: two DAGs on one daily schedule are two pipelines. Their
/// objects for the day they share are not a duplicate (D002), their keys are not one unstable
/// key (K001), one DAG's late run is not a re-run of the other's interval (R001, T001), and a
/// retry that got its own object back is reconciled. A key both DAGs used is K003.
#[test]
fn a_glob_operation_keeps_each_dag_its_own_pipeline() {
    let audit = audit_scenario("glob-operation", &[]);
    let findings = &audit.report.findings;
    let codes: Vec<&str> = findings.iter().map(|finding| finding.code).collect();
    assert_eq!(codes, ["K002", "K003"], "{findings:#?}");
    let collision = &findings[1];
    assert_eq!(collision.op_key.as_deref(), Some("reports:2026-11-02"));
    assert!(
        collision.message.contains("reports_eu") && collision.message.contains("reports_us"),
        "{}",
        collision.message
    );
    snapshot("glob_operation", findings);

    let frame = audit.verdicts().expect("the verdicts frame");
    let dags = texts(frame, "dag_id").expect("dag_id");
    let judged: Vec<(String, String, i64, String)> = dags
        .into_iter()
        .zip(verdicts(&audit))
        .map(|(dag, (run, number, verdict))| (dag.expect("dag_id"), run, number, verdict))
        .collect();
    let verdict_of = |dag: &str, day: &str, number: i64| {
        judged
            .iter()
            .find(|(d, run, n, _)| d == dag && run.contains(day) && *n == number)
            .map(|(.., verdict)| verdict.as_str())
    };
    assert_eq!(verdict_of("reports_eu", "2026-11-01", 1), Some("committed"));
    assert_eq!(
        verdict_of("reports_us", "2026-11-01", 1),
        Some("lost-response")
    );
    assert_eq!(
        verdict_of("reports_us", "2026-11-01", 2),
        Some("reconciled")
    );
    assert_eq!(verdict_of("reports_eu", "2026-11-02", 1), Some("committed"));
    // reports_us got reports_eu's object back: a collision, not its own replay.
    assert_eq!(verdict_of("reports_us", "2026-11-02", 1), Some("committed"));
    assert_eq!(audit.report.summary.reconciled_retries, 1);
}

/// A retry that finds its key committed in the journal and skips the provider succeeds without
/// a row (fixtures/rules/M002/near-miss): its verdict is `no-operation` and it is no M002, also
/// when the run that committed is outside the audited window.
#[test]
fn check_then_create_retries_are_no_operation_not_unrecorded_successes() {
    let audit = audit_scenario("M002/near-miss", &[]);
    let judged = verdicts(&audit);
    let verdict_of = |run: &str, number: i64| {
        judged
            .iter()
            .find(|(r, n, _)| r == run && *n == number)
            .map(|(.., verdict)| verdict.as_str())
    };
    let (scheduled, manual) = (
        "scheduled__2026-11-02T00:00:00+00:00",
        "manual__2026-11-10T09:00:00+00:00",
    );
    assert_eq!(verdict_of(scheduled, 1), Some("committed"));
    assert_eq!(verdict_of(scheduled, 2), Some("no-operation"));
    assert_eq!(verdict_of(manual, 1), Some("no-operation"));
    assert!(
        audit.report.findings.iter().all(|f| f.code != "M002"),
        "{:#?}",
        audit.report.findings
    );

    // Only the manual re-trigger ran in the window: the committed row is another run's.
    let windowed = AuditOptions {
        rules: vec!["M002".into()],
        since: onceonly::timestamp::parse("2026-11-09"),
        ..Default::default()
    };
    let audit = audit_scenario_with("M002/near-miss", &windowed);
    assert_eq!(audit.report.coverage.tries, 1);
    assert!(
        audit.report.findings.is_empty(),
        "{:#?}",
        audit.report.findings
    );
}

/// An orphan intent is safe to retry with the same key only when its interval has no live
/// object, by key or by interval (fixtures/rules/L002/fires): otherwise the finding names what
/// exists and the plan investigates instead of retrying blindly.
#[test]
fn an_orphan_intent_is_retried_only_when_its_interval_has_no_live_object() {
    let options = AuditOptions {
        rules: vec!["L002".into()],
        plan: true,
        ..Default::default()
    };
    let audit = audit_scenario_with("L002/fires", &options);
    let findings = &audit.report.findings;
    let by_key = |key: &str| {
        findings
            .iter()
            .find(|f| f.op_key.as_deref() == Some(key))
            .unwrap_or_else(|| panic!("no L002 for {key}: {findings:#?}"))
    };
    let empty = by_key("orders:2026-11-01");
    assert!(empty.message.ends_with("safe to retry with the same key"));
    assert!(empty.evidence.external_ids.is_empty());
    let unkeyed = by_key("orders:2026-11-02");
    assert_eq!(unkeyed.evidence.external_ids, ["exp_102"]);
    assert!(
        unkeyed.message.contains("exp_102") && !unkeyed.message.contains("safe to retry"),
        "{}",
        unkeyed.message
    );
    let other_key = by_key("orders:2026-11-03:try1");
    assert_eq!(other_key.evidence.external_ids, ["exp_103"]);

    let plan = audit.plan.expect("a plan was asked for");
    let kind_for = |finding: &onceonly::rules::Finding| {
        let actions: Vec<&str> = plan
            .actions
            .iter()
            .filter(|action| action.answers.contains(&finding.id))
            .map(|action| action.kind.name())
            .collect();
        actions
    };
    assert_eq!(kind_for(empty), ["retry-same-key"]);
    assert_eq!(kind_for(unkeyed), ["investigate"]);
    assert_eq!(kind_for(other_key), ["investigate"]);
}

/// `[provider] replay = "reject"`: a provider that answers a changed body under a known key with
/// 422 never applied it. K002 says which payload never reached it and which one the export
/// keeps (fixtures/rules/K002/fires); with the default (`frozen`) it says what it always did.
#[test]
fn a_provider_that_rejects_changed_bodies_is_described_in_k002() {
    let config_path = rules_fixtures().join("onceonly.toml");
    let text = std::fs::read_to_string(&config_path).unwrap();
    let dir = rules_fixtures().join("K002/fires");
    let with_replay = text.replacen(
        "key_ttl = \"24h\"",
        "key_ttl = \"24h\"\nreplay = \"reject\"",
        1,
    );
    assert_ne!(with_replay, text);
    let config = Config::parse(&with_replay, &dir.join("onceonly.toml")).unwrap();
    let options = AuditOptions {
        rules: vec!["K002".into()],
        ..Default::default()
    };
    let findings = audit::run(&config, &options).unwrap().report.findings;
    let frozen = audit_scenario("K002/fires", &["K002"]).report.findings;
    assert_eq!(findings.len(), frozen.len());
    for (rejecting, replaying) in findings.iter().zip(&frozen) {
        assert_eq!(rejecting.id, replaying.id, "the same finding");
        assert!(
            rejecting.message.starts_with(&replaying.message)
                && rejecting.message.contains("(replay = reject)")
                && rejecting.message.contains("never reached it"),
            "{}",
            rejecting.message
        );
        assert!(
            !replaying.message.contains("replay"),
            "{}",
            replaying.message
        );
    }
}

/// What a rule's `## Repair` documentation (shown by `onceonly rule CODE`) says the plan does
/// is what the plans of its scenarios do: every action kind it names in backticks answers some
/// finding of the rule in `fires` or `near-miss`, and no other kind answers one.
#[test]
fn each_rules_repair_documentation_names_the_actions_its_findings_get() {
    use std::collections::{BTreeMap, BTreeSet};
    const KINDS: [&str; 6] = [
        "adopt-external-id",
        "void-duplicate",
        "retry-same-key",
        "reexport-new-version",
        "fix-key-derivation",
        "investigate",
    ];
    let mut given: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for rule in REGISTRY {
        for case in ["fires", "near-miss"] {
            let options = AuditOptions {
                plan: true,
                ..Default::default()
            };
            let audit = audit_scenario_with(&format!("{}/{case}", rule.code()), &options);
            let code_of: BTreeMap<&str, &str> = audit
                .report
                .findings
                .iter()
                .map(|finding| (finding.id.as_str(), finding.code))
                .collect();
            for action in &audit.plan.as_ref().expect("a plan").actions {
                for answered in &action.answers {
                    given
                        .entry(code_of[answered.as_str()])
                        .or_default()
                        .insert(action.kind.name());
                }
            }
        }
    }
    for rule in REGISTRY {
        let doc = onceonly::rules::doc_text(*rule);
        let repair = doc.split("## Repair").nth(1).expect("a Repair section");
        let named: BTreeSet<&str> = KINDS
            .into_iter()
            .filter(|kind| repair.contains(&format!("`{kind}`")))
            .collect();
        assert_eq!(
            named,
            given.get(rule.code()).cloned().unwrap_or_default(),
            "{}: the action kinds its Repair section names (left) and those its findings get",
            rule.code()
        );
    }
}
