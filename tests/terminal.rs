//! The default terminal report: one line per finding grouped by interval, at the terminal's
//! width (`COLUMNS`; 80 when piped), severities coloured only when asked or on a terminal.

use crate::scenario::{Scenario, stderr};

fn audit(scenario: &Scenario, envs: &[(&str, &str)], args: &[&str]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_onceonly"));
    command
        .arg("audit")
        .args(args)
        .arg("--config")
        .arg(scenario.config())
        .env_remove("ONCEONLY_CONFIG")
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS");
    for (name, value) in envs {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_report_fits_80_and_200_columns_one_incident_per_interval() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    for width in [80, 200] {
        let text = audit(&scenario, &[("COLUMNS", &width.to_string())], &[]);
        // The findings' lines (indented) fit; coverage and summary lines stay whole.
        for line in text.lines().filter(|line| line.starts_with("  ")) {
            // A word longer than the width (a key) may stand alone on its line.
            assert!(
                line.chars().count() <= width || !line.trim().contains(' '),
                "{width}: {line:?}"
            );
        }
        // The scenario's folder has a random name of fixed length: the wrapping is the same.
        let folder = scenario.path("").display().to_string();
        let text = text.replace(folder.trim_end_matches('/'), "/tmp/scenario");
        insta::with_settings!({ prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(format!("terminal_{width}_columns"), text);
        });
    }
    // Piped without COLUMNS: 80.
    assert_eq!(
        audit(&scenario, &[], &[]),
        audit(&scenario, &[("COLUMNS", "80")], &[])
    );
}

#[test]
fn severities_are_coloured_only_when_asked() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let plain = audit(&scenario, &[], &[]);
    assert!(!plain.contains('\x1b'), "piped: no colour");
    let coloured = audit(&scenario, &[], &["--color", "always"]);
    assert!(coloured.contains("\x1b[1;31merror  \x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[34minfo   \x1b[0m"), "{coloured}");
    let never = audit(&scenario, &[], &["--color", "never"]);
    assert_eq!(never, plain);
    // Written to a file, the report is never coloured.
    let file = scenario.path("report.txt");
    audit(
        &scenario,
        &[],
        &["--color", "always", "--output", file.to_str().unwrap()],
    );
    assert_eq!(scenario.read("report.txt"), plain);
}

#[test]
fn the_full_table_is_one_flag_away() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let full = audit(&scenario, &[], &["--format", "full"]);
    assert!(full.contains("│ severity"), "{full}");
}
