//! The published contracts (docs/*.schema.json): every kind of document onceonly writes, made
//! from the real-Airflow fixtures, a backfill, the demo, a synthesized scenario and hostile
//! provider strings, is valid against its JSON Schema; documents that break the contract are
//! not; and a reference implementation (Python's `jsonschema`, where the Airflow venv is
//! installed) agrees on both.
//!
//! The validator below implements the subset of JSON Schema draft 2020-12 the published
//! schemas use, and refuses a schema with any other keyword, so a schema cannot pass here by
//! using something this file silently ignores. (The `jsonschema` crate turns on
//! `serde_json/float_roundtrip` and `ahash/serde`, and `boon` turns on `idna/default`: any of
//! them would rebuild polars for the tests.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Long after the fixture runs: every key the fake provider remembered has expired, so
/// ttl-risk has intervals at risk and exits 1.
const AFTER_EVERY_KEY_EXPIRED: &str = "2030-01-01T00:00:00Z";

use serde_json::Value;

use crate::scenario::{Scenario, fixtures, onceonly, stderr, stdout, synthesized};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
}

/// Validates documents against the schemas in docs/, resolving `$ref`s between them.
struct Schemas {
    files: BTreeMap<String, Value>,
}

impl Schemas {
    fn load() -> Schemas {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(docs()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".schema.json") {
                let text = std::fs::read_to_string(&path).unwrap();
                let schema: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|err| panic!("{name} is not JSON: {err}"));
                assert_eq!(
                    schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
                    "{name}"
                );
                files.insert(name, schema);
            }
        }
        Schemas { files }
    }

    /// Every way `document` breaks the schema in `file`, each with the JSON pointer of the
    /// offending value.
    fn errors(&self, file: &str, document: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        self.check(file, &self.files[file], document, "", &mut errors);
        errors
    }

    fn resolve(&self, file: &str, reference: &str) -> (String, &Value) {
        let (target, pointer) = reference.split_once('#').unwrap_or((reference, ""));
        let target = if target.is_empty() { file } else { target };
        let schema = self
            .files
            .get(target)
            .unwrap_or_else(|| panic!("{file}: $ref to {target}, which docs/ does not have"));
        let resolved = schema
            .pointer(pointer)
            .unwrap_or_else(|| panic!("{file}: $ref {reference} points at nothing"));
        (target.to_string(), resolved)
    }

    fn check(&self, file: &str, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                errors.push(format!("{at}: no value is allowed here"));
                return;
            }
            Value::Object(schema) => schema,
            other => panic!("{file}: a schema is an object or a boolean, not {other}"),
        };
        for (keyword, argument) in schema {
            match keyword.as_str() {
                "$schema" | "$id" | "$comment" | "$defs" | "title" | "description" => {}
                annotation if annotation.starts_with("x-") => {}
                "$ref" => {
                    let (target, resolved) = self.resolve(file, argument.as_str().unwrap());
                    self.check(&target, resolved, value, at, errors);
                }
                "type" => {
                    let allowed: Vec<&str> = match argument {
                        Value::String(one) => vec![one.as_str()],
                        Value::Array(many) => many.iter().map(|t| t.as_str().unwrap()).collect(),
                        other => panic!("{file}: type {other}"),
                    };
                    if !allowed.iter().any(|kind| is_type(value, kind)) {
                        errors.push(format!("{at}: {value} is not of type {allowed:?}"));
                    }
                }
                "enum" => {
                    if !argument.as_array().unwrap().contains(value) {
                        errors.push(format!("{at}: {value} is not one of {argument}"));
                    }
                }
                "const" => {
                    if argument != value {
                        errors.push(format!("{at}: {value} is not {argument}"));
                    }
                }
                "required" => {
                    if let Value::Object(object) = value {
                        for name in argument.as_array().unwrap() {
                            let name = name.as_str().unwrap();
                            if !object.contains_key(name) {
                                errors.push(format!("{at}: `{name}` is missing"));
                            }
                        }
                    }
                }
                "properties" => {
                    if let Value::Object(object) = value {
                        for (name, property) in argument.as_object().unwrap() {
                            if let Some(field) = object.get(name) {
                                self.check(file, property, field, &format!("{at}/{name}"), errors);
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Value::Object(object) = value {
                        let declared = schema.get("properties").and_then(Value::as_object);
                        for (name, field) in object {
                            if declared.is_none_or(|declared| !declared.contains_key(name)) {
                                self.check(file, argument, field, &format!("{at}/{name}"), errors);
                            }
                        }
                    }
                }
                "propertyNames" => {
                    if let Value::Object(object) = value {
                        for name in object.keys() {
                            let key = Value::String(name.clone());
                            self.check(
                                file,
                                argument,
                                &key,
                                &format!("{at}/{name} (name)"),
                                errors,
                            );
                        }
                    }
                }
                "items" => {
                    if let Value::Array(items) = value {
                        for (index, item) in items.iter().enumerate() {
                            self.check(file, argument, item, &format!("{at}/{index}"), errors);
                        }
                    }
                }
                "minimum" => {
                    if let Some(number) = value.as_f64()
                        && number < argument.as_f64().unwrap()
                    {
                        errors.push(format!("{at}: {value} is below {argument}"));
                    }
                }
                "pattern" => {
                    if let Value::String(text) = value {
                        let pattern = regex::Regex::new(argument.as_str().unwrap()).unwrap();
                        if !pattern.is_match(text) {
                            errors.push(format!("{at}: {text:?} does not match {argument}"));
                        }
                    }
                }
                "allOf" | "anyOf" | "oneOf" => {
                    let branches: Vec<Vec<String>> = argument
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|branch| {
                            let mut branch_errors = Vec::new();
                            self.check(file, branch, value, at, &mut branch_errors);
                            branch_errors
                        })
                        .collect();
                    let passing = branches.iter().filter(|errors| errors.is_empty()).count();
                    let ok = match keyword.as_str() {
                        "allOf" => passing == branches.len(),
                        "anyOf" => passing >= 1,
                        _ => passing == 1,
                    };
                    if !ok {
                        // The branch that came closest says what is wrong.
                        let closest = branches
                            .iter()
                            .filter(|errors| !errors.is_empty())
                            .min_by_key(|errors| errors.len())
                            .map(|errors| errors.join("; "))
                            .unwrap_or_default();
                        errors.push(format!(
                            "{at}: {passing} of the {} {keyword} branches match ({closest})",
                            branches.len()
                        ));
                    }
                }
                other => panic!(
                    "{file} uses `{other}`, which tests/schemas.rs does not implement: add it there first"
                ),
            }
        }
    }
}

fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        other => panic!("unknown type {other}"),
    }
}

/// One document onceonly wrote, the schema it must satisfy, and where it came from.
#[derive(Clone)]
struct Document {
    schema: &'static str,
    origin: String,
    value: Value,
}

fn json(origin: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("{origin} is not JSON: {err}\n{text}"))
}

fn lines(schema: &'static str, origin: &str, text: &str) -> Vec<Document> {
    let documents: Vec<Document> = text
        .lines()
        .enumerate()
        .map(|(index, line)| Document {
            schema,
            origin: format!("{origin} line {}", index + 1),
            value: json(origin, line),
        })
        .collect();
    assert!(!documents.is_empty(), "{origin} is empty");
    documents
}

/// A verdict CSV's rows as the objects the schema describes: the header must be the schema's
/// `x-csv-columns`, an empty cell is null, and the integer columns hold integers.
fn csv_rows(origin: &str, text: &str, schema: &Value) -> Vec<Document> {
    let columns: Vec<&str> = schema["x-csv-columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, columns, "{origin}: the CSV's columns");
    let integer = |name: &str| {
        let kinds = &schema["properties"][name]["type"];
        kinds == "integer"
            || kinds
                .as_array()
                .is_some_and(|k| k.contains(&"integer".into()))
            || schema["properties"][name]
                .get("const")
                .is_some_and(Value::is_number)
    };
    reader
        .records()
        .enumerate()
        .map(|(index, record)| {
            let record = record.unwrap();
            let object = columns
                .iter()
                .zip(record.iter())
                .map(|(name, cell)| {
                    let value = match cell {
                        "" => Value::Null,
                        cell if integer(name) => cell
                            .parse::<i64>()
                            .map(Value::from)
                            .unwrap_or_else(|_| Value::from(cell)),
                        cell => Value::from(cell),
                    };
                    (name.to_string(), value)
                })
                .collect();
            Document {
                schema: "verdicts.schema.json",
                origin: format!("{origin} row {}", index + 1),
                value: Value::Object(object),
            }
        })
        .collect()
}

fn ran(output: &std::process::Output, codes: &[i32], what: &str) -> String {
    assert!(
        output
            .status
            .code()
            .is_some_and(|code| codes.contains(&code)),
        "{what}: exit {:?}\n{}",
        output.status.code(),
        stderr(output)
    );
    stdout(output)
}

/// Every kind of document, made once for all the tests of this module.
fn documents() -> &'static [Document] {
    static DOCUMENTS: OnceLock<Vec<Document>> = OnceLock::new();
    DOCUMENTS.get_or_init(produce)
}

fn produce() -> Vec<Document> {
    let schemas = Schemas::load();
    let mut out = Vec::new();
    let mut one = |schema: &'static str, origin: &str, value: Value| {
        out.push(Document {
            schema,
            origin: origin.to_string(),
            value,
        })
    };

    // The real Airflow 3.3.2 run: report, plan, verdicts, snapshot, baseline, trace, ttl-risk.
    let real = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let path = |name: &str| real.path(name).to_str().unwrap().to_string();
    let output = real.audit(&[
        "--format",
        "json",
        "--output",
        &path("report.json"),
        "--plan",
        &path("plan.json"),
        "--verdicts",
        &path("verdicts.ndjson"),
        "--save-snapshot",
        &path("snapshot"),
    ]);
    ran(&output, &[1], "audit of the real run");
    one(
        "report.schema.json",
        "audit --format json",
        json("report", &real.read("report.json")),
    );
    one(
        "plan.schema.json",
        "audit --plan",
        json("plan", &real.read("plan.json")),
    );
    one(
        "snapshot-manifest.schema.json",
        "audit --save-snapshot",
        json("manifest", &real.read("snapshot/manifest.json")),
    );
    let verdicts = lines(
        "verdicts.schema.json",
        "audit --verdicts x.ndjson",
        &real.read("verdicts.ndjson"),
    );
    let ndjson = ran(
        &real.audit(&["--format", "ndjson"]),
        &[1],
        "audit --format ndjson",
    );
    let csv = {
        ran(
            &real.audit(&["--verdicts", &path("verdicts.csv")]),
            &[1],
            "audit --verdicts x.csv",
        );
        real.read("verdicts.csv")
    };
    // Yesterday's report held two D001 findings that are gone today: resolved, as the D001
    // audit checks them (the other rules' findings were not checked, and are not resolved).
    let mut yesterday: Value =
        serde_json::from_str(&real.read("report.json")).expect("the report is JSON");
    let gone = yesterday["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["code"] == "D001")
        .expect("a D001 finding")
        .clone();
    for n in 0..2 {
        let mut finding = gone.clone();
        finding["id"] = format!("D001-resolved{n}").into();
        yesterday["findings"].as_array_mut().unwrap().push(finding);
    }
    real.write("yesterday.json", &yesterday.to_string());
    let against_baseline = ran(
        &real.audit(&[
            "--rule",
            "D001",
            "--baseline",
            &path("yesterday.json"),
            "--format",
            "json",
        ]),
        &[1],
        "audit --baseline",
    );
    one(
        "report.schema.json",
        "audit --baseline",
        json("baseline report", &against_baseline),
    );
    let from_snapshot = ran(
        &real.audit(&["--from-snapshot", &path("snapshot"), "--format", "json"]),
        &[1],
        "audit --from-snapshot",
    );
    one(
        "report.schema.json",
        "audit --from-snapshot",
        json("report", &from_snapshot),
    );
    let config = path("onceonly.toml");
    let [first_day, _, last_day] = crate::scenario::airflow_days("airflow-3.3.2");
    // A scoped audit: the interval range and the objects it left out.
    let scoped = ran(
        &real.audit(&[
            "--dag",
            "onceonly_d_*",
            "--interval-from",
            &first_day,
            "--format",
            "json",
        ]),
        &[0, 1],
        "audit --dag --interval-from",
    );
    let scoped = json("scoped report", &scoped);
    assert!(
        scoped["coverage"]["objects_left_out"].is_object(),
        "{scoped}"
    );
    one("report.schema.json", "audit --dag --interval-from", scoped);
    let trace = ran(
        &onceonly(&[
            "trace",
            "--config",
            &config,
            "--dag",
            "onceonly_b_unstable_key",
            "--interval",
            &first_day,
            "--format",
            "json",
        ]),
        &[0],
        "trace",
    );
    one(
        "trace.schema.json",
        "trace --format json",
        json("trace", &trace),
    );
    let ttl_risk = |config: &str, args: &[&str], what: &str| {
        let mut all = vec!["ttl-risk", "--config", config, "--format", "json"];
        all.extend_from_slice(args);
        json(what, &ran(&onceonly(&all), &[1], what))
    };
    let risk = ttl_risk(
        &config,
        &[
            "--dag",
            "onceonly_d_rerun_after_success",
            "--from",
            &first_day,
            "--to",
            &last_day,
            "--at",
            AFTER_EVERY_KEY_EXPIRED,
        ],
        "ttl-risk",
    );
    one("ttl-risk.schema.json", "ttl-risk --format json", risk);

    // A backfill real Airflow planned: ttl-risk's backfill fields.
    let backfill = Scenario::copy_of("airflow/out/airflow-3.3.2");
    std::fs::copy(
        fixtures().join("airflow/out/airflow-3.3.2-backfill/airflow.db"),
        backfill.path("airflow.db"),
    )
    .unwrap();
    let planned = ttl_risk(
        backfill.config().to_str().unwrap(),
        &["--backfill-id", "1", "--at", AFTER_EVERY_KEY_EXPIRED],
        "ttl-risk --backfill-id",
    );
    one("ttl-risk.schema.json", "ttl-risk --backfill-id", planned);

    // Airflow 2.10.5's metadata: another schema revision, pickled conf.
    let old = Scenario::copy_of("airflow/out/airflow-2.10.5");
    let report = ran(
        &old.audit(&["--format", "json"]),
        &[0, 1],
        "audit of Airflow 2.10.5",
    );
    one(
        "report.schema.json",
        "audit of airflow 2.10.5",
        json("report", &report),
    );

    // The demo, listed over HTTP from the built-in mock provider.
    let demo = ran(&onceonly(&["demo", "--format", "json"]), &[0], "demo");
    one(
        "report.schema.json",
        "demo --format json",
        json("demo", &demo),
    );

    // Provider strings built to break out of their fields, and a rule skipped for want of a TTL.
    let (hostile, _, _) = crate::plan::hostile_lost_response(false);
    hostile.edit("onceonly.toml", "key_ttl = \"24h\"", "");
    let hostile_plan = hostile.path("plan.json");
    let report = ran(
        &hostile.audit(&["--format", "json", "--plan", hostile_plan.to_str().unwrap()]),
        &[1],
        "hostile audit",
    );
    let report = json("hostile report", &report);
    assert!(
        !report["coverage"]["rules_skipped"]
            .as_array()
            .unwrap()
            .is_empty(),
        "this scenario is here for its skipped rule"
    );
    one("report.schema.json", "hostile audit", report);
    one(
        "plan.schema.json",
        "hostile plan",
        json("plan", &hostile.read("plan.json")),
    );

    // A synthesized scenario with every kind of fault, audited from the snapshot it wrote.
    let (_synthesized, dir) = synthesized(
        "400",
        "3",
        "5",
        "L001=0.03,D001=0.03,D002=0.03,L002=0.03,L003=0.03,M001=0.03,M002=0.03,K002=0.03,C001=0.03,reconciled=0.05,retry=0.05,voided=0.03",
    );
    let dir = dir.as_str();
    one(
        "snapshot-manifest.schema.json",
        "synth's snapshot",
        json(
            "manifest",
            &std::fs::read_to_string(format!("{dir}/manifest.json")).unwrap(),
        ),
    );
    // A split of it into two parts, and one part's audit for the merge.
    let config = format!("{dir}/onceonly.toml");
    let split = format!("{dir}/split");
    let part = format!("{split}/part-0");
    let result = format!("{split}/result-0");
    ran(
        &onceonly(&[
            "split",
            "--config",
            &config,
            "--from-snapshot",
            dir,
            "--partitions",
            "2",
            "--out",
            &split,
        ]),
        &[0],
        "split",
    );
    one(
        "partition-part.schema.json",
        "split's part",
        json(
            "part",
            &std::fs::read_to_string(format!("{part}/partition.json")).unwrap(),
        ),
    );
    ran(
        &onceonly(&[
            "audit",
            "--config",
            &config,
            "--from-snapshot",
            &part,
            "--partition-out",
            &result,
        ]),
        &[0, 1],
        "audit --partition-out",
    );
    one(
        "partition-result.schema.json",
        "audit --partition-out",
        json(
            "result",
            &std::fs::read_to_string(format!("{result}/partition.json")).unwrap(),
        ),
    );
    let synth_plan = format!("{dir}/plan.json");
    let synth_verdicts = format!("{dir}/verdicts.csv");
    let report = ran(
        &onceonly(&[
            "audit",
            "--from-snapshot",
            dir,
            "--config",
            &format!("{dir}/onceonly.toml"),
            "--format",
            "json",
            "--plan",
            &synth_plan,
            "--verdicts",
            &synth_verdicts,
        ]),
        &[1],
        "audit of the synthesized scenario",
    );
    one(
        "report.schema.json",
        "synth audit",
        json("synth report", &report),
    );
    one(
        "plan.schema.json",
        "synth plan",
        json("plan", &std::fs::read_to_string(&synth_plan).unwrap()),
    );

    out.extend(verdicts);
    out.extend(lines(
        "report-ndjson.schema.json",
        "audit --format ndjson",
        &ndjson,
    ));
    let verdict_schema = &schemas.files["verdicts.schema.json"];
    out.extend(csv_rows("audit --verdicts x.csv", &csv, verdict_schema));
    out.extend(csv_rows(
        "synth audit --verdicts x.csv",
        &std::fs::read_to_string(&synth_verdicts).unwrap(),
        verdict_schema,
    ));
    out
}

#[test]
fn every_document_onceonly_writes_matches_its_published_schema() {
    let schemas = Schemas::load();
    let documents = documents();
    let mut failures = Vec::new();
    for document in documents {
        for error in schemas.errors(document.schema, &document.value) {
            failures.push(format!(
                "{} ({}): {error}",
                document.origin, document.schema
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every schema is checked against something the binary wrote, and every document has one.
    let covered: std::collections::BTreeSet<&str> =
        documents.iter().map(|document| document.schema).collect();
    let published: std::collections::BTreeSet<&str> =
        schemas.files.keys().map(String::as_str).collect();
    assert_eq!(covered, published);
    // What the documents are here for: every plan action kind that the scenarios produce, a
    // baseline section, and every verdict but `no-operation` and `intent-only`.
    let values = |schema: &str, pointer: &str| -> std::collections::BTreeSet<String> {
        documents
            .iter()
            .filter(|document| document.schema == schema)
            .flat_map(|document| match document.value.pointer(pointer) {
                Some(Value::Array(items)) => items.clone(),
                Some(one) => vec![one.clone()],
                None => Vec::new(),
            })
            .map(|value| value.to_string())
            .collect()
    };
    assert!(values("report.schema.json", "/baseline/resolved").len() > 1);
    assert!(values("ttl-risk.schema.json", "/backfill_id").contains("1"));
    let verdicts = values("verdicts.schema.json", "/verdict");
    for verdict in [
        "committed",
        "reconciled",
        "duplicate",
        "lost-response",
        "failed-before-effect",
    ] {
        assert!(
            verdicts.contains(&format!("\"{verdict}\"")),
            "{verdict}: {verdicts:?}"
        );
    }
}

/// Documents that break the contract in the ways a consumer would notice, each with the
/// schema it claims to follow.
fn broken() -> Vec<(&'static str, &'static str, Value)> {
    let pick = |schema: &str| {
        documents()
            .iter()
            .find(|document| document.schema == schema)
            .unwrap()
            .value
            .clone()
    };
    let report = pick("report.schema.json");
    let edit = |base: &Value, change: &dyn Fn(&mut Value)| {
        let mut copy = base.clone();
        change(&mut copy);
        copy
    };
    let plan = pick("plan.schema.json");
    vec![
        (
            "report.schema.json",
            "a newer format_version",
            edit(&report, &|r| r["format_version"] = 2.into()),
        ),
        (
            "report.schema.json",
            "coverage without runs",
            edit(&report, &|r| {
                r["coverage"].as_object_mut().unwrap().remove("runs");
            }),
        ),
        (
            "report.schema.json",
            "a finding's op_key renamed",
            edit(&report, &|r| {
                let finding = r["findings"][0].as_object_mut().unwrap();
                let key = finding.remove("op_key").unwrap();
                finding.insert("key".into(), key);
            }),
        ),
        (
            "report.schema.json",
            "an unknown severity",
            edit(&report, &|r| r["findings"][0]["severity"] = "fatal".into()),
        ),
        (
            "report.schema.json",
            "a count as text",
            edit(&report, &|r| r["summary"]["findings"] = "13".into()),
        ),
        (
            "report.schema.json",
            "a window that is not a time",
            edit(&report, &|r| r["coverage"]["since"] = "yesterday".into()),
        ),
        (
            "plan.schema.json",
            "an action of no known kind",
            edit(&plan, &|p| {
                p["actions"][0]["kind"] = "delete-everything".into()
            }),
        ),
        (
            "plan.schema.json",
            "a fingerprint that is not a SHA-256",
            edit(&plan, &|p| p["inputs_fingerprint"] = "abc".into()),
        ),
        (
            "verdicts.schema.json",
            "an unknown verdict",
            edit(&pick("verdicts.schema.json"), &|v| {
                v["verdict"] = "maybe".into()
            }),
        ),
        (
            "report-ndjson.schema.json",
            "a line of no known type",
            edit(&pick("report-ndjson.schema.json"), &|l| {
                l["type"] = "total".into()
            }),
        ),
        (
            "snapshot-manifest.schema.json",
            "a manifest without its journal",
            edit(&pick("snapshot-manifest.schema.json"), &|m| {
                m["tables"].as_object_mut().unwrap().remove("journal");
            }),
        ),
        (
            "trace.schema.json",
            "an event of no known kind",
            edit(&pick("trace.schema.json"), &|t| {
                t["events"][0]["kind"] = "rumour".into()
            }),
        ),
        (
            "ttl-risk.schema.json",
            "an interval of no known class",
            edit(&pick("ttl-risk.schema.json"), &|t| {
                t["intervals"][0]["class"] = "fine".into()
            }),
        ),
    ]
}

#[test]
fn a_document_that_breaks_its_contract_fails_and_an_added_field_does_not() {
    let schemas = Schemas::load();
    for (schema, what, document) in broken() {
        assert!(
            !schemas.errors(schema, &document).is_empty(),
            "{schema} accepted {what}"
        );
    }
    // The published policy: fields are added without a new format_version, so a consumer's
    // validation must not fail on one (docs/*.schema.json: additionalProperties true).
    let mut report = documents()
        .iter()
        .find(|document| document.schema == "report.schema.json")
        .unwrap()
        .value
        .clone();
    report["coverage"]["a_field_added_later"] = 1.into();
    report["findings"][0]["another_one"] = "x".into();
    let errors = schemas.errors("report.schema.json", &report);
    assert!(errors.is_empty(), "{errors:?}");
}

/// Python's `jsonschema` (a dependency of Airflow, so in its venv): checks each schema against
/// the draft 2020-12 meta-schema and gives the same verdict as the validator above on every
/// document, valid and broken.
#[test]
fn a_reference_validator_agrees() {
    let Some(python) = crate::skip::airflow_python("Python's jsonschema verdicts") else {
        return;
    };
    let cases: Vec<Value> = documents()
        .iter()
        .map(|document| {
            serde_json::json!({"schema": document.schema, "what": document.origin, "valid": true, "document": document.value})
        })
        .chain(broken().into_iter().map(|(schema, what, document)| {
            serde_json::json!({"schema": schema, "what": what, "valid": false, "document": document})
        }))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let cases_file = dir.path().join("cases.json");
    std::fs::write(&cases_file, serde_json::to_vec(&cases).unwrap()).unwrap();
    let script = r#"
import json, pathlib, sys
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
docs = pathlib.Path(sys.argv[1])
schemas = {p.name: json.loads(p.read_text()) for p in docs.glob("*.schema.json")}
for name, schema in schemas.items():
    Draft202012Validator.check_schema(schema)
registry = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema)) for schema in schemas.values())
wrong = []
for case in json.loads(pathlib.Path(sys.argv[2]).read_text()):
    validator = Draft202012Validator(schemas[case["schema"]], registry=registry)
    errors = [e.message for e in validator.iter_errors(case["document"])]
    if (not errors) != case["valid"]:
        wrong.append(f'{case["what"]} ({case["schema"]}): expected valid={case["valid"]}, got {errors[:3]}')
print(len(schemas), "schemas,", len(json.loads(pathlib.Path(sys.argv[2]).read_text())), "cases")
if wrong:
    print("\n".join(wrong))
    sys.exit(1)
"#;
    let output = std::process::Command::new(python)
        .args(["-c", script])
        .arg(docs())
        .arg(&cases_file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}
