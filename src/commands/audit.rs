//! `onceonly audit`: the engine's audit of the runs the flags pick, written where the flags
//! say: the report, and on request the verdicts, the plan, its SQL script, the metrics and a
//! page.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use polars::prelude::DataFrame;

use crate::config::{Config, Source};
use crate::engine::{self, AuditOptions};
use crate::error::{Error, Result};
use crate::output;
use crate::plan::Plan;
use crate::render::{self, Format};
use crate::report::Report;

/// Where the audit's results go.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// The report's format, to `output` (stdout when None).
    pub format: Format,
    pub output: Option<PathBuf>,
    /// The report as an HTML page too.
    pub html: Option<PathBuf>,
    /// Every try's verdict.
    pub verdicts: Option<PathBuf>,
    /// The repair plan: markdown (.md), text (.txt), else JSON.
    pub plan: Option<PathBuf>,
    /// The plan as a SQL script for the journal's database.
    pub sql: Option<PathBuf>,
    /// Prometheus metrics of the report.
    pub metrics: Option<PathBuf>,
}

impl Outputs {
    /// Whether any of the outputs shows every try's verdict: the verdicts file and the HTML
    /// page. The verdicts frame is made only then.
    pub fn show_verdicts(&self) -> bool {
        self.verdicts.is_some() || self.html.is_some() || self.format == Format::Html
    }
}

/// Audits and writes the results; the report, to tell the exit code.
pub fn run(config: &Config, options: &AuditOptions, outputs: &Outputs) -> Result<Report> {
    let started = std::time::Instant::now();
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    if let Some(path) = &options.baseline {
        inputs.push(("--baseline".to_string(), path.clone()));
    }
    if let Some(folder) = &options.from_snapshot {
        inputs.extend(folder_inputs("--from-snapshot's", folder));
    }
    check(config, outputs, inputs)?;
    let options = AuditOptions {
        without_verdicts_frame: !outputs.show_verdicts(),
        ..options.clone()
    };
    // The joined frames are the bulk of the memory and nothing below reads them: freed now,
    // the report is written in memory they leave rather than on top of it.
    let audit = engine::run(config, &options)?;
    crate::known::refuse_nothing(config, &options, &audit)?;
    let (report, verdicts, mut plan) = audit.into_results()?;
    if let Some(plan) = &mut plan {
        plan.scope = Some(crate::plan::Scope::of(&options, config));
    }
    write(config, outputs, &report, verdicts, plan.as_ref(), started)?;
    Ok(report)
}

/// Refuses, before anything is read, what the outputs could not be or would destroy: a `--sql`
/// with a journal that is no database, an output whose folder does not exist or that is a
/// directory, and an output that is an input, the config or another output of the run
/// ([`output::check`]). `inputs` are the run's inputs besides the config's sources (a
/// baseline, a snapshot's files, merge's parts' files).
pub fn check(config: &Config, outputs: &Outputs, inputs: Vec<(String, PathBuf)>) -> Result<()> {
    if outputs.sql.is_some() {
        sql_dialect(config)?;
    }
    let mut read = config_inputs(config);
    read.extend(inputs);
    let written: Vec<(String, &Path)> = [
        ("--output", &outputs.output),
        ("--html", &outputs.html),
        ("--verdicts", &outputs.verdicts),
        ("--plan", &outputs.plan),
        ("--sql", &outputs.sql),
        ("--metrics", &outputs.metrics),
    ]
    .into_iter()
    .filter_map(|(flag, path)| Some((flag.to_string(), path.as_deref()?)))
    .collect();
    output::check(&read, &written)
}

/// The files a config names: itself, and each source that is a file (a snapshot, an SQLite
/// database), by what the run calls them.
pub fn config_inputs(config: &Config) -> Vec<(String, PathBuf)> {
    fn file(source: &Source) -> Option<&Path> {
        match source {
            Source::Snapshot(path) => Some(path),
            Source::Database(database) => database.sqlite_path.as_deref(),
            _ => None,
        }
    }
    let mut inputs = vec![("the config".to_string(), config.path.clone())];
    for (what, source) in [
        ("[airflow]'s file", &config.attempts),
        ("[journal]'s file", &config.journal.source),
        ("[provider]'s file", &config.provider.source),
    ] {
        if let Some(path) = file(source) {
            inputs.push((what.to_string(), path.to_path_buf()));
        }
    }
    inputs
}

/// The files of a snapshot or partition folder a run reads (`manifest.json`,
/// `partition.json`, `*.parquet`), named `what` and their path; none when it cannot be listed
/// (reading it says why).
pub fn folder_inputs(what: &str, folder: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name == crate::sources::saved::MANIFEST
                || name == crate::partition::merge::RESULT_FILE
                || name.ends_with(".parquet")
        })
        .map(|path| (what.to_string(), path))
        .collect()
}

/// The journal's SQL dialect, which a `--sql` script is written in.
fn sql_dialect(config: &Config) -> Result<crate::sources::database::Dialect> {
    match &config.journal.source {
        Source::Database(database) => Ok(database.dialect),
        _ => Err(Error::usage(
            "--sql",
            "the journal is a snapshot file; a SQL script needs [journal] url and table",
        )),
    }
}

/// Writes an audit's (or a merge's) results where `outputs` says; `started` is when the audit
/// began, for the metrics' duration. `verdicts` is the verdicts frame, which the outputs that
/// show verdicts ([`Outputs::show_verdicts`]) need. The files are written as one
/// [`output::Batch`]: each to a temporary file as it is made, all renamed over the earlier
/// ones at the end, so an error on the way leaves every earlier file as it was.
pub fn write(
    config: &Config,
    outputs: &Outputs,
    report: &Report,
    verdicts: Option<DataFrame>,
    plan: Option<&Plan>,
    started: std::time::Instant,
) -> Result<()> {
    let rendering = std::time::Instant::now();
    let verdicts = verdicts.as_ref();
    let mut files = output::Batch::new();
    if let Some(path) = &outputs.verdicts {
        let bytes = output::verdicts_bytes(path, render::verdicts_kept(verdicts)?)?;
        files.add(path, &bytes)?;
    }
    // JSON, the largest form of a report and a plan, is written as it is serialized, never
    // held whole. The other forms of the plan's text and the report's are made side by side,
    // and written in the order below.
    let plan_path = plan.zip(outputs.plan.as_deref());
    let report_json = outputs.format == Format::Json;
    let (plan_file, text) = crate::parallel::side_by_side(
        || plan_path.map(|(plan, path)| (path, plan_text(path, plan))),
        || match outputs.output {
            _ if report_json => Ok(None),
            Some(_) => render::render_for_file(report, outputs.format, verdicts).map(Some),
            None => render::render(report, outputs.format, verdicts).map(Some),
        },
    );
    if let Some(plan) = plan {
        match plan_file {
            Some((path, Some(text))) => files.add(path, text.as_bytes())?,
            Some((path, None)) => files.add_with(path, output::pretty_json(plan))?,
            None => {}
        }
        if let Some(path) = &outputs.sql {
            let script = crate::plan::sql::script(plan, &config.journal, sql_dialect(config)?)?;
            files.add(path, script.as_bytes())?;
        }
    }
    if let Some(path) = &outputs.metrics {
        let metrics = render::metrics::render(report, started.elapsed().as_secs_f64());
        files.add(path, metrics.as_bytes())?;
    }
    if let Some(path) = &outputs.html {
        let page = render::render(report, Format::Html, verdicts)?;
        files.add(path, page.as_bytes())?;
    }
    let text = text?;
    if let Some(path) = &outputs.output {
        match &text {
            Some(text) => files.add(path, text.as_bytes())?,
            None => files.add_with(path, output::pretty_json(report))?,
        }
    }
    files.commit()?;
    if outputs.output.is_none() {
        match &text {
            Some(text) => output::stdout(text)?,
            None => output::stdout_with(output::pretty_json(report))?,
        }
    }
    crate::timing::phase("render", rendering);
    if outputs.format == Format::Table && outputs.output.is_none() {
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

/// The form of a plan file its name asks for: markdown (.md), text (.txt), else the JSON
/// document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PlanForm {
    Markdown,
    Text,
    Json,
}

fn plan_form(path: &Path) -> PlanForm {
    match path
        .extension()
        .and_then(|ext| ext.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("md") => PlanForm::Markdown,
        Some("txt") => PlanForm::Text,
        _ => PlanForm::Json,
    }
}

/// The plan's text in the form its file name asks for; None for JSON, which is written as it
/// is serialized (`output::pretty_json`).
fn plan_text(path: &Path, plan: &Plan) -> Option<String> {
    match plan_form(path) {
        PlanForm::Markdown => Some(render::plan::markdown(plan)),
        PlanForm::Text => Some(render::plan::text(plan)),
        PlanForm::Json => None,
    }
}
