//! What a partition's audit leaves for the merge (`audit --partition-out DIR`), and the merge
//! of every partition's into the report, verdicts and plan of the whole audit.
//!
//! A partition's folder holds `partition.json` (the split it belongs to, the rules it ran and
//! its report as `--format json` writes it, findings and all) and three Parquet files: its
//! verdicts, and the provider objects and journal rows its findings name (what a repair plan
//! reads). The merge adds up the counts, counts the objects every partition shares once and
//! sorts the findings as one audit does; `onceonly merge` builds the plan with the engine's plan
//! stage.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{PartManifest, SplitInfo};
use crate::error::{EngineContext, Error, Location, Result};
use crate::model::Table;
use crate::prepare::Prepared;
use crate::report::{Coverage, Noticed, Report, SkippedRule, SourceCoverage, Summary};
use crate::rules::{Evidence, Finding, Severity, repair};

pub const RESULT_FILE: &str = "partition.json";
const VERDICTS_FILE: &str = "verdicts.parquet";
const OBJECTS_FILE: &str = "plan_objects.parquet";
const JOURNAL_FILE: &str = "plan_journal.parquet";
pub const FORMAT_VERSION: u32 = 1;

/// `partition.json` of a partition's result.
#[derive(Debug, Serialize, Deserialize)]
struct PartitionResult {
    format_version: u32,
    part: usize,
    split: SplitInfo,
    /// The `--rule` codes the audit ran (empty: all).
    rules: Vec<String>,
    report: Value,
    /// Per finding of `report`, in its order: what its rule's repair needs beyond the report
    /// (`Rule::repair_input_text`), where the rule keeps something.
    repair_inputs: Vec<Option<String>>,
    /// What the part's audit noticed beyond the sources' warnings (its report's coverage
    /// warnings made from it), which the merge adds up over the parts. Absent from results
    /// written before it was: nothing noticed.
    #[serde(default)]
    noticed: Noticed,
}

/// Writes what the merge needs of one partition's audit into `dir`.
pub fn write(
    dir: &Path,
    part: &PartManifest,
    rules: &[String],
    report: &Report,
    verdicts: &DataFrame,
    prepared: &Prepared,
    noticed: &Noticed,
) -> Result<()> {
    let shown = dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|err| Error::io(&shown, err))?;
    let named_ids: BTreeSet<&str> = report
        .findings
        .iter()
        .flat_map(|finding| finding.evidence.external_ids.iter().map(String::as_str))
        .collect();
    let named_keys: BTreeSet<&str> = report
        .findings
        .iter()
        .filter_map(|finding| finding.op_key.as_deref())
        .collect();
    let objects = named_rows(
        &prepared.objects,
        "external_id",
        named_ids,
        &repair::OBJECT_COLUMNS,
    )?;
    let journal = named_rows(
        &prepared.journal,
        "op_key",
        named_keys,
        &repair::JOURNAL_COLUMNS,
    )?;
    for (file, frame) in [
        (VERDICTS_FILE, verdicts),
        (OBJECTS_FILE, &objects),
        (JOURNAL_FILE, &journal),
    ] {
        let mut bytes = Vec::new();
        ParquetWriter::new(&mut bytes)
            .finish(&mut frame.clone())
            .engine("writing a partition's result")?;
        crate::output::file(&dir.join(file), &bytes)?;
    }
    let result = PartitionResult {
        format_version: FORMAT_VERSION,
        part: part.part,
        split: part.split.clone(),
        rules: rules.iter().map(|code| code.to_ascii_uppercase()).collect(),
        report: serde_json::to_value(report).expect("a report always serializes"),
        repair_inputs: report
            .findings
            .iter()
            .map(|finding| {
                crate::rules::by_code(finding.code).and_then(|rule| rule.repair_input_text(finding))
            })
            .collect(),
        noticed: noticed.clone(),
    };
    let mut text = serde_json::to_string(&result).expect("a partition result always serializes");
    text.push('\n');
    crate::output::file(&dir.join(RESULT_FILE), text.as_bytes())
}

/// The rows of `frame` whose `column` is one of `values`, in `columns`.
fn named_rows(
    frame: &DataFrame,
    column: &str,
    values: BTreeSet<&str>,
    columns: &[&str],
) -> Result<DataFrame> {
    let values = Series::new("values".into(), values.into_iter().collect::<Vec<_>>());
    frame
        .clone()
        .lazy()
        .filter(col(column).is_in(lit(values).implode(false), false))
        .select(columns.iter().map(|name| col(*name)).collect::<Vec<_>>())
        .collect()
        .engine("selecting the findings' rows")
}

/// The whole audit, put together from its partitions.
pub struct Merged {
    pub report: Report,
    pub verdicts: DataFrame,
    /// With `plan`: the provider objects and journal rows the findings name, as prepare has
    /// them, for the engine's plan stage (`engine::plan_of`).
    pub plan_rows: Option<(DataFrame, DataFrame)>,
    /// The content hash of the whole audit's tables (a plan quotes it).
    pub inputs_fingerprint: String,
    /// Which runs the whole audit read (a plan records it).
    pub scope: crate::plan::Scope,
}

/// `partition.json` without its report: what tells whether the parts belong together. The
/// merge reads every part's header first, then one part's report at a time, so it never holds
/// the reports of all parts as JSON values at once.
#[derive(Debug, Deserialize)]
struct PartitionHeader {
    format_version: u32,
    part: usize,
    split: SplitInfo,
    rules: Vec<String>,
}

struct Loaded {
    dir: PathBuf,
    result: PartitionHeader,
}

/// Reads `dir`'s `partition.json` as `T` (its header, or all of it).
fn read_result<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<T> {
    let path = dir.join(RESULT_FILE);
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|err| Error::io(&shown, err))?;
    serde_json::from_str(&text).map_err(|err| {
        Error::input(
            Location::source(&shown),
            format!("not a partition's result (`audit --partition-out` writes one): {err}"),
        )
    })
}

fn load(dir: &Path) -> Result<Loaded> {
    let result: PartitionHeader = read_result(dir)?;
    if result.format_version != FORMAT_VERSION {
        let shown = dir.join(RESULT_FILE).display().to_string();
        return Err(Error::input(
            Location::source(&shown),
            format!(
                "partition result format {} is not one this onceonly reads ({FORMAT_VERSION})",
                result.format_version
            ),
        ));
    }
    Ok(Loaded {
        dir: dir.to_path_buf(),
        result,
    })
}

/// Checks that `parts` are every part of one split, once each, audited with the same rules;
/// returns them in part order.
fn complete(mut parts: Vec<Loaded>) -> Result<Vec<Loaded>> {
    let Some(first) = parts.first() else {
        return Err(Error::usage("merge", "name the partitions' result folders"));
    };
    let (split, rules) = (first.result.split.clone(), first.result.rules.clone());
    let shown = |loaded: &Loaded| loaded.dir.join(RESULT_FILE).display().to_string();
    for loaded in &parts {
        let result = &loaded.result;
        if result.split.split_id != split.split_id {
            return Err(Error::input(
                Location::source(shown(loaded)),
                format!(
                    "part of another split ({}, not {} of {})",
                    result.split.split_id,
                    split.split_id,
                    shown(first)
                ),
            ));
        }
        if result.split != split || result.part >= split.partitions {
            return Err(Error::input(
                Location::source(shown(loaded)),
                format!(
                    "part {} does not fit split {} of {} parts",
                    result.part, split.split_id, split.partitions
                ),
            ));
        }
        if result.rules != rules {
            return Err(Error::input(
                Location::source(shown(loaded)),
                format!(
                    "audited with rules {:?}, {} with {:?}: every part must run the same rules",
                    result.rules,
                    shown(first),
                    rules
                ),
            ));
        }
    }
    parts.sort_by_key(|loaded| loaded.result.part);
    for pair in parts.windows(2) {
        if pair[0].result.part == pair[1].result.part {
            return Err(Error::input(
                Location::source(shown(&pair[1])),
                format!(
                    "part {} is given twice (also {})",
                    pair[1].result.part,
                    shown(&pair[0])
                ),
            ));
        }
    }
    let given: BTreeSet<usize> = parts.iter().map(|loaded| loaded.result.part).collect();
    if let Some(missing) = (0..split.partitions).find(|part| !given.contains(part)) {
        return Err(Error::usage(
            "merge",
            format!(
                "part {missing} of split {} ({} parts) is missing: merge every part's result",
                split.split_id, split.partitions
            ),
        ));
    }
    Ok(parts)
}

/// Merges the partitions' results in `dirs`; with `plan`, keeps the rows a repair plan reads.
pub fn merge(dirs: &[PathBuf], plan: bool) -> Result<Merged> {
    let parts = complete(dirs.iter().map(|dir| load(dir)).collect::<Result<_>>()?)?;
    let split = parts[0].result.split.clone();
    // Findings by id from the partitions merged so far: a finding about an object no DAG
    // claims is reported by every partition, and counted once. (Two findings of one partition
    // may share an id, C001's of two DAGs with the same run id: both stay.)
    let mut findings: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
    let mut verdict_counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut basis: BTreeMap<String, usize> = BTreeMap::new();
    let (mut runs, mut tries) = (0, 0);
    let mut audited = [0usize; 3];
    let mut in_flight = crate::in_flight::InFlightCoverage::default();
    let mut verdicts = Vec::new();
    let (mut objects, mut journal) = (Vec::new(), Vec::new());
    // The whole audit's coverage is the first part's, with the counts of all and what all
    // noticed.
    let mut first_coverage = Value::Null;
    let mut first_noticed = Noticed::default();
    let mut noticed = Noticed::default();
    for loaded in &parts {
        let shown = loaded.dir.join(RESULT_FILE).display().to_string();
        let result: PartitionResult = read_result(&loaded.dir)?;
        let report = &result.report;
        let bad = |what: &str| {
            Error::input(
                Location::source(&shown),
                format!("the report's {what} is not as `audit` writes it"),
            )
        };
        let mut found: Vec<Finding> = Vec::new();
        let values = report["findings"]
            .as_array()
            .ok_or_else(|| bad("findings"))?;
        let repair_inputs = &result.repair_inputs;
        if repair_inputs.len() != values.len() {
            return Err(Error::input(
                Location::source(&shown),
                format!(
                    "{} repair inputs for {} findings: one per finding, as `audit --partition-out` writes them",
                    repair_inputs.len(),
                    values.len()
                ),
            ));
        }
        for (value, repair_input) in values.iter().zip(repair_inputs) {
            let finding = finding(value, repair_input.as_deref()).ok_or_else(|| bad("findings"))?;
            let earlier = findings.get(&finding.id);
            if earlier.is_none_or(|earlier| !earlier.contains(&finding)) {
                found.push(finding);
            }
        }
        for finding in found {
            findings
                .entry(finding.id.clone())
                .or_default()
                .push(finding);
        }
        let summary = &report["summary"]["verdicts"];
        add_counts(&mut verdict_counts, summary).ok_or_else(|| bad("summary.verdicts"))?;
        let coverage = &report["coverage"];
        if first_coverage.is_null() {
            first_coverage = coverage.clone();
            first_noticed = result.noticed.clone();
        }
        noticed.add(result.noticed.clone());
        if let Some(part) = coverage.get("in_flight") {
            let part =
                serde_json::from_value(part.clone()).map_err(|_| bad("coverage.in_flight"))?;
            in_flight.add(part);
        }
        add_counts(&mut basis, &coverage["interval_basis"])
            .ok_or_else(|| bad("coverage.interval_basis"))?;
        runs += coverage["runs"]
            .as_u64()
            .ok_or_else(|| bad("coverage.runs"))? as usize;
        tries += coverage["tries"]
            .as_u64()
            .ok_or_else(|| bad("coverage.tries"))? as usize;
        for (index, source) in coverage["sources"]
            .as_array()
            .filter(|sources| sources.len() == 3)
            .ok_or_else(|| bad("coverage.sources"))?
            .iter()
            .enumerate()
        {
            audited[index] += source["rows_audited"]
                .as_u64()
                .ok_or_else(|| bad("coverage.sources"))? as usize;
        }
        let read = |file: &str| read_parquet(&loaded.dir.join(file));
        verdicts.push(read(VERDICTS_FILE)?);
        if plan {
            objects.push(read(OBJECTS_FILE)?);
            journal.push(read(JOURNAL_FILE)?);
        }
    }
    // The objects no DAG claims were audited by every partition.
    audited[2] -= split.shared_objects * (split.partitions - 1);
    let mut findings: Vec<Finding> = findings.into_values().flatten().collect();
    crate::rules::sort_findings(&mut findings);
    let first = &first_coverage;
    let shown = parts[0].dir.join(RESULT_FILE).display().to_string();
    let mut coverage = coverage(first, &split, audited, basis, runs, tries).ok_or_else(|| {
        Error::input(
            Location::source(&shown),
            "the report's coverage is not as `audit` writes it",
        )
    })?;
    coverage.in_flight = in_flight;
    // The first part's warnings are the sources' (the same in every part), then what it
    // noticed: those are replaced by what all parts noticed.
    let its_own = first_noticed.warnings();
    coverage
        .warnings
        .retain(|warning| !its_own.contains(warning));
    coverage.warnings.extend(noticed.warnings());
    let summary = Summary::new(&findings, verdict_counts);
    let verdicts = concat(verdicts)?;
    let plan_rows = if plan {
        Some((concat(objects)?, concat(journal)?))
    } else {
        None
    };
    Ok(Merged {
        report: Report {
            format_version: crate::report::FORMAT_VERSION,
            coverage,
            summary,
            findings,
            baseline: None,
        },
        verdicts,
        plan_rows,
        scope: crate::plan::Scope::of_split(&split, &parts[0].result.rules),
        inputs_fingerprint: split.inputs_fingerprint,
    })
}

fn read_parquet(path: &Path) -> Result<DataFrame> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|err| Error::io(&shown, err))?;
    ParquetReader::new(file).finish().map_err(|err| {
        Error::input(
            Location::source(&shown),
            format!("not a partition's Parquet file: {err}"),
        )
    })
}

fn concat(frames: Vec<DataFrame>) -> Result<DataFrame> {
    let mut frames = frames.into_iter();
    let mut all = frames.next().unwrap_or_default();
    for frame in frames {
        all.vstack_mut(&frame)
            .engine("putting partitions together")?;
    }
    all.rechunk_mut();
    Ok(all)
}

/// Adds a JSON object of counts into `counts`; None when it is not one.
fn add_counts(counts: &mut BTreeMap<String, usize>, value: &Value) -> Option<()> {
    for (name, count) in value.as_object()? {
        *counts.entry(name.clone()).or_default() += count.as_u64()? as usize;
    }
    Some(())
}

fn texts(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|text| text.as_str().map(str::to_string))
        .collect()
}

fn text(value: &Value) -> Option<Option<String>> {
    match value {
        Value::Null => Some(None),
        Value::String(text) => Some(Some(text.clone())),
        _ => None,
    }
}

/// A finding as a partition's JSON report has it, with its repair input as the partition's
/// result carries it.
fn finding(value: &Value, repair_input: Option<&str>) -> Option<Finding> {
    let rule = crate::rules::lookup(value["code"].as_str()?)?;
    let severity = match value["severity"].as_str()? {
        "info" => Severity::Info,
        "warning" => Severity::Warning,
        "error" => Severity::Error,
        _ => return None,
    };
    let evidence = &value["evidence"];
    Some(Finding {
        id: value["id"].as_str()?.to_string(),
        code: rule.code(),
        rule: rule.name(),
        severity,
        dag_id: text(&value["dag_id"])?,
        operation: text(&value["operation"])?,
        interval: text(&value["interval"])?,
        op_key: text(&value["op_key"])?,
        message: value["message"].as_str()?.to_string(),
        evidence: Evidence {
            external_ids: texts(&evidence["external_ids"])?,
            keys: texts(&evidence["keys"])?,
            run_ids: texts(&evidence["run_ids"])?,
            tries: texts(&evidence["tries"])?,
            times: texts(&evidence["times"])?,
        },
        baseline: None,
        in_flight: value["in_flight"].as_bool().unwrap_or(false),
        repair_input: match repair_input {
            Some(text) => rule.repair_input_of_text(text)?,
            None => Default::default(),
        },
    })
}

/// The whole audit's coverage: the first partition's, with the counts of all.
fn coverage(
    first: &Value,
    split: &SplitInfo,
    audited: [usize; 3],
    interval_basis: BTreeMap<String, usize>,
    runs: usize,
    tries: usize,
) -> Option<Coverage> {
    let sources = first["sources"]
        .as_array()?
        .iter()
        .zip(Table::ALL)
        .enumerate()
        .map(|(index, (source, table))| {
            Some(SourceCoverage {
                table: table.name(),
                source: source["source"].as_str()?.to_string(),
                rows: split.rows[index],
                rows_audited: audited[index],
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let rules_skipped = first["rules_skipped"]
        .as_array()?
        .iter()
        .map(|skipped| {
            Some(SkippedRule {
                code: crate::rules::lookup(skipped["code"].as_str()?)?.code(),
                reason: skipped["reason"].as_str()?.to_string(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Coverage {
        since: text(&first["since"])?,
        until: text(&first["until"])?,
        interval_from: None,
        interval_to: None,
        dag: None,
        sources,
        provider_from: text(&first["provider_from"])?,
        provider_to: text(&first["provider_to"])?,
        interval_basis,
        operations: texts(&first["operations"])?,
        runs,
        tries,
        rules_skipped,
        warnings: texts(&first["warnings"])?,
        objects_left_out: None,
        in_flight: Default::default(),
    })
}
