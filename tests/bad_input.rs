//! Bad input of every kind: exit 2, the file, row and column named, nothing panics.

use crate::scenario::{Scenario, stderr};

/// Runs the audit on a changed demo scenario and returns stderr, checking exit 2.
fn refused(change: impl FnOnce(&Scenario)) -> String {
    refused_in("demo", change)
}

/// [`refused`] on a changed copy of `fixture`.
fn refused_in(fixture: &str, change: impl FnOnce(&Scenario)) -> String {
    let scenario = Scenario::copy_of(fixture);
    change(&scenario);
    let output = scenario.audit(&["--format", "json"]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "stderr: {message}");
    assert!(
        output.stdout.is_empty(),
        "a refused input must not produce a report"
    );
    assert!(!message.contains("panicked"), "{message}");
    message
}

#[test]
fn missing_column_is_named() {
    let message = refused(|s| s.edit("provider.csv", "external_id,op_key", "id,op_key"));
    assert!(message.contains("provider.csv"), "{message}");
    assert!(message.contains("`id`"), "{message}");
}

#[test]
fn missing_required_column_is_named() {
    let message = refused(|s| {
        let text = s.read("provider.csv");
        let without: Vec<String> = text
            .lines()
            .map(|line| {
                line.split_once(',')
                    .map(|(_, rest)| rest)
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        s.write("provider.csv", &(without.join("\n") + "\n"));
    });
    assert!(
        message.contains("provider.csv") && message.contains("missing column `external_id`"),
        "{message}"
    );
}

#[test]
fn wrong_type_names_row_and_column() {
    let message = refused(|s| {
        s.edit(
            "attempts.csv",
            "export,-1,scheduled__2026-11-02T00:00:00+00:00,scheduled,1,",
            "export,-1,scheduled__2026-11-02T00:00:00+00:00,scheduled,one,",
        )
    });
    assert!(
        message.contains("attempts.csv, row 4, column `try_number`"),
        "{message}"
    );
    assert!(
        message.contains("\"one\" is not a valid integer"),
        "{message}"
    );
}

#[test]
fn unparseable_timestamp_names_row_and_column() {
    let message = refused(|s| s.edit("journal.csv", "2026-11-03T00:11:08Z", "03/11/2026 00:11"));
    assert!(
        message.contains("journal.csv, row 6, column `recorded_at`"),
        "{message}"
    );
}

#[test]
fn unknown_phase_value_is_named() {
    let message = refused(|s| s.edit("journal.csv", ",DONE,exp_102", ",FINISHED,exp_102"));
    assert!(
        message.contains("journal.csv, row 6, column `phase`"),
        "{message}"
    );
    assert!(
        message.contains("unknown phase value \"FINISHED\""),
        "{message}"
    );
}

#[test]
fn empty_file_is_refused() {
    let message = refused(|s| s.write("journal.csv", ""));
    assert!(
        message.contains("journal.csv") && message.contains("empty"),
        "{message}"
    );
}

#[test]
fn empty_required_value_is_refused() {
    let message = refused(|s| s.edit("provider.csv", "exp_102,", ","));
    assert!(
        message.contains("provider.csv, row 4, column `external_id`"),
        "{message}"
    );
}

#[test]
fn unknown_config_field_names_field_and_line() {
    let message = refused(|s| {
        s.edit(
            "onceonly.toml",
            "key_ttl = \"24h\"",
            "key_ttl = \"24h\"\nretention = \"24h\"",
        )
    });
    assert!(
        message.contains("onceonly.toml")
            && message.contains("line 21")
            && message.contains("retention"),
        "{message}"
    );
}

#[test]
fn malformed_ndjson_names_the_line() {
    let message = refused(|s| {
        s.edit(
            "onceonly.toml",
            "snapshot = \"provider.csv\"",
            "snapshot = \"provider.ndjson\"",
        );
        s.write(
            "provider.ndjson",
            "{\"external_id\": \"exp_1\", \"created_at\": \"2026-11-02T00:00:00Z\", \"status\": \"live\"}\n{\"external_id\": \"exp_2\", \"created_at\": true, \"status\": \"live\"}\n",
        );
    });
    assert!(
        message.contains("provider.ndjson, row 2, column `created_at`"),
        "{message}"
    );
    assert!(message.contains("true (a boolean)"), "{message}");
}

#[test]
fn bad_flags_exit_two() {
    let scenario = Scenario::copy_of("demo");
    for args in [
        &["--since", "last tuesday"][..],
        &["--since", "2026-11-05", "--until", "2026-11-01"],
        &["--rule", "Z123"],
        &["--slack", "soon"],
        &["--format", "xml"],
    ] {
        let output = scenario.audit(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn missing_config_file_is_named() {
    let output = crate::scenario::onceonly(&["audit", "--config", "/nonexistent/onceonly.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/nonexistent/onceonly.toml"));
}

/// A provider snapshot that lists an object twice (exports appended to each other): the same
/// copy twice is counted once, with a warning, and finds what the file with one copy finds;
/// two copies that differ are refused, naming the object, the column and both values.
#[test]
fn an_object_listed_twice_is_counted_once_or_refused() {
    let fixture = "airflow/out/airflow-3.3.2";
    let report = |scenario: &Scenario| {
        let output = scenario.audit(&["--format", "json"]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let once = report(&Scenario::copy_of(fixture));

    let twice = Scenario::copy_of(fixture);
    let listing = twice.read("provider.ndjson");
    let first = listing.lines().next().unwrap().to_string();
    let id = serde_json::from_str::<serde_json::Value>(&first).unwrap()["external_id"]
        .as_str()
        .unwrap()
        .to_string();
    twice.write("provider.ndjson", &format!("{listing}{first}\n"));
    let counted_once = report(&twice);
    assert_eq!(counted_once["findings"], once["findings"]);
    assert_eq!(counted_once["summary"], once["summary"]);
    assert_eq!(
        counted_once["coverage"]["sources"][2]["rows"],
        once["coverage"]["sources"][2]["rows"]
    );
    let warnings = counted_once["coverage"]["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "object `{id}` is listed twice with the same content"
        )),
        "{warnings}"
    );

    let message = refused_in(fixture, |s| {
        let changed = first.replace("\"status\": \"live\"", "\"status\": \"cancelled\"");
        assert_ne!(changed, first);
        s.write("provider.ndjson", &format!("{listing}{changed}\n"));
    });
    assert!(
        message.contains(&format!(
            "provider.ndjson, column `status`: object `{id}` is listed twice"
        )),
        "{message}"
    );
    assert!(
        message.contains("(\"live\" and \"cancelled\")"),
        "{message}"
    );
}
