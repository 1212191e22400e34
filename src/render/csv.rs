//! Findings as CSV, one row each. Cells a spreadsheet would run as a formula are defused.

use crate::output::defuse;
use crate::report::Report;

const HEADER: [&str; 12] = [
    "id",
    "code",
    "rule",
    "severity",
    "dag_id",
    "operation",
    "interval",
    "op_key",
    "message",
    "external_ids",
    "run_ids",
    "tries",
];

pub fn render(report: &Report) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let _ = writer.write_record(HEADER);
    for finding in &report.findings {
        let opt = |value: &Option<String>| value.clone().unwrap_or_default();
        let record = [
            finding.id.clone(),
            finding.code.to_string(),
            finding.rule.to_string(),
            finding.severity.to_string(),
            opt(&finding.dag_id),
            opt(&finding.operation),
            opt(&finding.interval),
            opt(&finding.op_key),
            finding.message.clone(),
            finding.evidence.external_ids.join(";"),
            finding.evidence.run_ids.join(";"),
            finding.evidence.tries.join(";"),
        ];
        let _ = writer.write_record(record.iter().map(|cell| defuse(cell)));
    }
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}
