//! The provider listing types its fields as every other source does (`snapshot::push`): a
//! number where a key, status or hash belongs is refused naming the page, row and field (exit 2),
//! never taken as text; an integer id is the id written out, in a listing and a file alike.

use serde_json::Value;

use crate::provider_http::{audit_in, listing_scenario, mock, state};
use crate::scenario::{Scenario, stderr};
use onceonly::commands::mock_provider::MockPagination;

#[test]
fn a_number_for_a_key_or_a_status_is_refused_in_a_listing_and_a_file_alike() {
    for (field, column, value) in [
        ("idempotency_key", "op_key", Value::from(42)),
        ("status", "status", Value::from(5)),
        ("idempotency_key", "op_key", serde_json::json!({"key": "k"})),
    ] {
        let mut objects = state();
        objects[3][field] = value.clone();
        let mock = mock(objects, MockPagination::Page, &[]);
        let scenario = listing_scenario(&mock.url(), MockPagination::Page, "");
        let output = audit_in(&scenario, &[]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{field}={value}: {message}");
        assert!(output.stdout.is_empty(), "no report over a refused page");
        assert!(
            message.contains(&format!("`{field}`"))
                && message.contains("is not a valid text")
                && message.contains("page ")
                && message.contains("object "),
            "{field}={value}: {message}"
        );

        // The same value in the provider file of the snapshot is refused the same way.
        let file = Scenario::copy_of("airflow/out/airflow-3.3.2");
        let mut rows: Vec<Value> = file
            .read("provider.ndjson")
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        rows[0][column] = value.clone();
        file.write(
            "provider.ndjson",
            &rows
                .iter()
                .map(|row| format!("{row}\n"))
                .collect::<String>(),
        );
        let output = audit_in(&file, &[]);
        assert_eq!(output.status.code(), Some(2), "{column}={value}");
        assert!(
            stderr(&output).contains("is not a valid text"),
            "{}",
            stderr(&output)
        );
    }
}

#[test]
fn an_integer_id_is_the_id_written_out_in_a_listing_and_a_file_alike() {
    let mut objects = state();
    let original = objects[3]["id"].clone();
    objects[3]["id"] = Value::from(7_001);
    let mock = mock(objects, MockPagination::Page, &[]);
    let scenario = listing_scenario(&mock.url(), MockPagination::Page, "");
    let output = audit_in(&scenario, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    let file = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let text = file.read("provider.ndjson").replace(
        &format!("\"external_id\": {original}"),
        "\"external_id\": 7001",
    );
    assert!(text.contains("\"external_id\": 7001"), "{original}");
    file.write("provider.ndjson", &text);
    let output = audit_in(&file, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
}
