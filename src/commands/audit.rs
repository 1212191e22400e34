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
    let options = AuditOptions {
        without_verdicts_frame: !outputs.show_verdicts(),
        ..options.clone()
    };
    // The joined frames are the bulk of the memory and nothing below reads them: freed now,
    // the report is written in memory they leave rather than on top of it.
    let audit = engine::run(config, &options)?;
    crate::known::refuse_nothing(config, &options, &audit)?;
    let (report, verdicts, plan) = audit.into_results()?;
    write(config, outputs, &report, verdicts, plan.as_ref(), started)?;
    Ok(report)
}

/// Writes an audit's (or a merge's) results where `outputs` says; `started` is when the audit
/// began, for the metrics' duration. `verdicts` is the verdicts frame, which the outputs that
/// show verdicts ([`Outputs::show_verdicts`]) need.
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
    if let Some(path) = &outputs.verdicts {
        output::write_verdicts(path, render::verdicts_kept(verdicts)?)?;
    }
    // The plan's text and the report's are made side by side (the larger outputs of an audit
    // with a plan), and written in the order below.
    let (plan_file, text) = crate::parallel::side_by_side(
        || {
            plan.zip(outputs.plan.as_deref())
                .map(|(plan, path)| (path, plan_text(path, plan)))
        },
        || render::render(report, outputs.format, verdicts),
    );
    if let Some(plan) = plan {
        if let Some((path, text)) = plan_file {
            output::file(path, text.as_bytes())?;
        }
        if let Some(path) = &outputs.sql {
            let dialect = match &config.journal.source {
                Source::Database(database) => database.dialect,
                _ => {
                    return Err(Error::usage(
                        "--sql",
                        "the journal is a snapshot file; a SQL script needs [journal] url and table",
                    ));
                }
            };
            output::file(
                path,
                crate::plan::sql::script(plan, &config.journal, dialect)?.as_bytes(),
            )?;
        }
    }
    if let Some(path) = &outputs.metrics {
        let metrics = render::metrics::render(report, started.elapsed().as_secs_f64());
        output::file(path, metrics.as_bytes())?;
    }
    if let Some(path) = &outputs.html {
        let page = render::render(report, Format::Html, verdicts)?;
        output::file(path, page.as_bytes())?;
    }
    let text = text?;
    match &outputs.output {
        Some(path) => output::file(path, text.as_bytes())?,
        None => output::stdout(&text)?,
    }
    crate::timing::phase("render", rendering);
    if outputs.format == Format::Table && outputs.output.is_none() {
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

/// The plan as the file name asks: markdown (.md), text (.txt), else the JSON document.
fn plan_text(path: &Path, plan: &Plan) -> String {
    match path
        .extension()
        .and_then(|ext| ext.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("md") => render::plan::markdown(plan),
        Some("txt") => render::plan::text(plan),
        _ => {
            let mut json = serde_json::to_string_pretty(plan).expect("a plan always serializes");
            json.push('\n');
            json
        }
    }
}
