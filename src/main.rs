//! Parse, run, map the outcome to an exit code: 0 clean, 1 findings, 2 bad input or error.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use onceonly::cli::{
    AuditArgs, Cli, Command, MergeArgs, PlanCheckArgs, PlanCommand, ReportArgs, SplitArgs,
};
use onceonly::commands::{audit, completions, demo, man, mock_provider, rule};
use onceonly::config::Config;
use onceonly::error::{Error, Result};
use onceonly::render;
use onceonly::{output, timestamp};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Audit(args) = &cli.command
        && args.from_snapshot.is_some()
    {
        onceonly::memory::configure_allocator();
    }
    onceonly::progress::install(onceonly::progress::Mode::from_environment(cli.quiet));
    render::style::configure(cli.color);
    // The mock provider ends on Ctrl-C by its own handler; every other command writes files.
    if !matches!(cli.command, Command::MockProvider(_)) {
        output::remove_temporaries_on_signal();
    }
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("onceonly: error: {err}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Rule { code } => {
            output::stdout(&rule::run(code.as_deref())?)?;
            Ok(0)
        }
        Command::Demo { format } => {
            let audit = demo::run()?;
            let verdicts = match format {
                render::Format::Html => Some(audit.verdicts()?),
                _ => None,
            };
            output::stdout(&render::render(&audit.report, format, verdicts)?)?;
            Ok(0)
        }
        Command::Completions { shell } => {
            output::stdout(&completions::script(Cli::command(), shell))?;
            Ok(0)
        }
        Command::Man { command } => {
            output::stdout(&man::page(Cli::command(), command.as_deref())?)?;
            Ok(0)
        }
        Command::Audit(args) => run_audit(&args),
        Command::Split(args) => run_split(&args),
        Command::Merge(args) => run_merge(&args),
        Command::Plan(PlanCommand::Check(args)) => run_plan_check(&args),
        Command::Trace(args) => run_trace(&args),
        Command::Doctor { config } => {
            let config = onceonly::commands::doctor::load(&config)?;
            let checks = onceonly::commands::doctor::run(&config)?;
            let mut text = String::new();
            for check in &checks {
                let verdict = match (check.ok, check.warning) {
                    (false, _) => "PROBLEM",
                    (true, true) => "warning",
                    (true, false) => "ok     ",
                };
                text.push_str(&format!(
                    "{verdict} {}\n        {}\n",
                    render::terminal_safe(&check.source),
                    render::terminal_safe(&check.detail)
                ));
            }
            output::stdout(&text)?;
            Ok(if checks.iter().all(|c| c.ok) { 0 } else { 2 })
        }
        Command::TtlRisk(args) => run_ttl_risk(&args),
        Command::MockProvider(args) => {
            let mut options = mock_provider::MockOptions::new(Vec::new(), args.pagination);
            options.page_size = args.page_size.max(1);
            options.latency = std::time::Duration::from_millis(args.latency);
            options.faults = args.faults;
            options.newest_first = args.newest_first;
            options.request_log = args.request_log;
            mock_provider::run(&args.state, &args.bind, args.port, options)?;
            Ok(0)
        }
        Command::Synth(args) => {
            let rates = onceonly::commands::synth::Rates::parse(&args.rates)
                .map_err(|message| Error::usage("--rates", message))?;
            let options = onceonly::commands::synth::SynthOptions {
                intervals: args.intervals,
                dags: args.dags,
                seed: args.seed,
                rates,
                layout: if args.glob_operation {
                    onceonly::commands::synth::Layout::GlobOperation
                } else {
                    onceonly::commands::synth::Layout::OperationPerDag
                },
                snapshot_only: args.snapshot_only,
                shuffle_rows: args.shuffle_rows,
            };
            let written = onceonly::commands::synth::run(&options, &args.out)?;
            output::stdout(&format!(
                "{}: {} intervals, {} findings injected; rows {:?}; cases {:?}\n",
                written.dir.display(),
                written.truth.intervals,
                written.truth.findings.len(),
                written.truth.rows,
                written.truth.cases
            ))?;
            Ok(0)
        }
    }
}

/// `plan check`: 0 when every action still holds, 1 when one does not.
fn run_plan_check(args: &PlanCheckArgs) -> Result<u8> {
    let flags = (args.dag.is_some() || args.since.is_some() || args.until.is_some()).then(|| {
        Ok::<_, Error>(onceonly::engine::AuditOptions {
            dag: args.dag.clone(),
            since: time("--since", &args.since)?,
            until: time("--until", &args.until)?,
            ..Default::default()
        })
    });
    let flags = flags.transpose()?;
    let config = Config::load(&args.config)?;
    let outcome = onceonly::commands::plan_check::run(&config, &args.plan, flags.as_ref())?;
    let text = match args.format {
        render::Format::Json => {
            let mut json = serde_json::to_string_pretty(&outcome).expect("serializes");
            json.push('\n');
            json
        }
        _ => outcome.text(),
    };
    output::stdout(&text)?;
    Ok(u8::from(!outcome.all_hold()))
}

/// A time flag (`--since`, ...): RFC 3339 or a date, in microseconds.
fn time(flag: &str, value: &Option<String>) -> Result<Option<i64>> {
    value
        .as_deref()
        .map(|text| {
            timestamp::parse(text).ok_or_else(|| {
                Error::usage(
                    flag,
                    format!("{text:?} is not a time (use RFC 3339 or YYYY-MM-DD)"),
                )
            })
        })
        .transpose()
}

/// `--slack`: a duration, in microseconds.
fn slack_flag(value: &Option<String>) -> Result<Option<i64>> {
    value
        .as_deref()
        .map(|text| {
            timestamp::parse_duration(text).ok_or_else(|| {
                Error::usage(
                    "--slack",
                    format!("{text:?} is not a duration (e.g. 1h, 30m)"),
                )
            })
        })
        .transpose()
}

fn run_audit(args: &AuditArgs) -> Result<u8> {
    let mut options = onceonly::engine::AuditOptions {
        dag: args.dag.clone(),
        since: time("--since", &args.since)?,
        until: time("--until", &args.until)?,
        interval_from: time("--interval-from", &args.interval_from)?,
        interval_to: time("--interval-to", &args.interval_to)?,
        slack: slack_flag(&args.slack)?,
        rules: args.rules.clone(),
        save_snapshot: args.save_snapshot.clone(),
        from_snapshot: args.from_snapshot.clone(),
        plan: args.report.plan.is_some() || args.report.sql.is_some(),
        baseline: args.report.baseline.clone(),
        provider_window: None,
        partition_out: None,
        without_verdicts_frame: false,
        allow_empty: args.allow_empty,
    };
    if let (Some(out), Some(dir)) = (&args.partition_out, &args.from_snapshot) {
        partition_options(args, dir, out, &mut options)?;
    }
    if let (Some(since), Some(until)) = (options.since, options.until)
        && since >= until
    {
        return Err(Error::usage("--since", "must be before --until"));
    }
    if let (Some(from), Some(to)) = (options.interval_from, options.interval_to)
        && from >= to
    {
        return Err(Error::usage(
            "--interval-from",
            "must be before --interval-to",
        ));
    }
    // A rule given by name is recorded by its code, as a part's result and the report name it.
    for code in &mut options.rules {
        match onceonly::rules::lookup(code) {
            Some(rule) => *code = rule.code().to_string(),
            None => {
                return Err(Error::usage(
                    "--rule",
                    format!("no rule {code:?}; `onceonly rule` lists them"),
                ));
            }
        }
    }
    let config = Config::load(&args.config)?;
    let outputs = outputs(&args.report);
    let report = audit::run(&config, &options, &outputs)?;
    let code = u8::from(report.fails(args.report.fail_on.threshold(), args.report.fail_on_new));
    // Not dropped: the process ends next, and its memory goes with it whole.
    std::mem::forget(report);
    Ok(code)
}

/// A partition's audit: the window and the provider window come from the part's
/// `partition.json`; flags that say otherwise, or scope it further, are refused.
fn partition_options(
    args: &AuditArgs,
    dir: &std::path::Path,
    out: &std::path::Path,
    options: &mut onceonly::engine::AuditOptions,
) -> Result<()> {
    let part = onceonly::partition::PartManifest::load(dir)?;
    if args.dag.is_some() || args.interval_from.is_some() || args.interval_to.is_some() {
        return Err(Error::usage(
            "--partition-out",
            "a partition audits its part whole: --dag and --interval-from/--interval-to are not taken",
        ));
    }
    let recorded = |flag: &str, given: Option<i64>, recorded: &Option<String>| {
        let recorded_at = recorded.as_deref().and_then(timestamp::parse);
        match given {
            Some(at) if Some(at) != recorded_at => Err(Error::usage(
                flag,
                format!(
                    "the part was split for {} {}",
                    flag,
                    recorded.as_deref().unwrap_or("(none)")
                ),
            )),
            _ => Ok(recorded_at),
        }
    };
    options.since = recorded("--since", options.since, &part.split.since)?;
    options.until = recorded("--until", options.until, &part.split.until)?;
    options.slack = part.split.slack;
    options.provider_window = Some(part.provider_window());
    options.partition_out = Some(onceonly::engine::PartitionOut {
        dir: out.to_path_buf(),
        part,
    });
    Ok(())
}

fn run_split(args: &SplitArgs) -> Result<u8> {
    let options = onceonly::commands::split::SplitOptions {
        since: time("--since", &args.since)?,
        until: time("--until", &args.until)?,
        slack: slack_flag(&args.slack)?,
        from_snapshot: args.from_snapshot.clone(),
        partitions: args.partitions,
    };
    let config = Config::load(&args.config)?;
    let dirs = onceonly::commands::split::run(&config, &options, &args.out)?;
    let mut text = String::new();
    for dir in dirs {
        text.push_str(&format!("{}\n", dir.display()));
    }
    output::stdout(&text)?;
    Ok(0)
}

/// Where `audit` and `merge` write what they produce.
fn outputs(report: &ReportArgs) -> audit::Outputs {
    audit::Outputs {
        format: report.format,
        output: report.output.clone(),
        html: report.html.clone(),
        verdicts: report.verdicts.clone(),
        plan: report.plan.clone(),
        sql: report.sql.clone(),
        metrics: report.metrics.clone(),
    }
}

fn run_merge(args: &MergeArgs) -> Result<u8> {
    let config = Config::load(&args.config)?;
    let outputs = outputs(&args.report);
    let report = onceonly::commands::merge::run(
        &config,
        &args.parts,
        args.report.baseline.as_deref(),
        &outputs,
    )?;
    Ok(u8::from(report.fails(
        args.report.fail_on.threshold(),
        args.report.fail_on_new,
    )))
}

fn run_trace(args: &onceonly::cli::TraceArgs) -> Result<u8> {
    use onceonly::commands::trace::{self, Selector};
    let selector = match (&args.interval, &args.run_id, &args.key) {
        (Some(text), _, _) => Selector::Interval(timestamp::parse(text).ok_or_else(|| {
            Error::usage("--interval", format!("{text:?} is not a date or time"))
        })?),
        (_, Some(run_id), _) => Selector::RunId(run_id.clone()),
        (_, _, Some(key)) => Selector::Key(key.clone()),
        _ => return Err(Error::usage("trace", "give --interval, --run-id or --key")),
    };
    let config = Config::load(&args.config)?;
    if let Some(path) = &args.html {
        output::check(
            &audit::config_inputs(&config),
            &[("--html".to_string(), path.as_path())],
        )?;
    }
    let trace = trace::run(&config, &args.dag, &selector)?;
    if let Some(path) = &args.html {
        output::file(path, render::timeline::html(&trace).as_bytes())?;
    }
    let text = match args.format {
        onceonly::cli::TraceFormat::Table => render::trace::text(&trace),
        onceonly::cli::TraceFormat::Json => render::trace::json(&trace),
    };
    output::stdout(&text)?;
    Ok(0)
}

fn run_ttl_risk(args: &onceonly::cli::TtlRiskArgs) -> Result<u8> {
    use onceonly::commands::ttl_risk::{self, PlannedBackfill, TtlRiskOptions};
    let time = |flag: &str, text: &str| {
        timestamp::parse(text)
            .ok_or_else(|| Error::usage(flag, format!("{text:?} is not a date or time")))
    };
    let config = Config::load(&args.config)?;
    let ttl = args
        .ttl
        .as_deref()
        .map(|text| {
            onceonly::retention::KeyTtl::parse(text).ok_or_else(|| {
                Error::usage(
                    "--ttl",
                    format!(
                        "{text:?} is neither a duration nor a preset ({})",
                        onceonly::retention::preset_names()
                    ),
                )
            })
        })
        .transpose()?;
    let at = match &args.at {
        Some(text) => time("--at", text)?,
        None => chrono::Utc::now().timestamp_micros(),
    };
    let options = match args.backfill_id {
        Some(id) => {
            let backfill = ttl_risk::backfill(&config, id)?;
            if let Some(dag) = &args.dag
                && !onceonly::glob::glob_match(dag, &backfill.dag_id)
            {
                return Err(Error::usage(
                    "--dag",
                    format!("backfill {id} is for {}, not {dag}", backfill.dag_id),
                ));
            }
            TtlRiskOptions {
                dag: backfill.dag_id,
                from: backfill.from,
                to: backfill.to,
                ttl,
                at,
                backfill: Some(PlannedBackfill {
                    id,
                    reprocess_behavior: backfill.reprocess_behavior,
                    left_alone: backfill.left_alone,
                }),
                allow_empty: args.allow_empty,
            }
        }
        None => {
            let (Some(from), Some(to)) = (&args.from, &args.to) else {
                return Err(Error::usage(
                    "--from",
                    "give --from and --to, or --backfill-id",
                ));
            };
            TtlRiskOptions {
                dag: args.dag.clone().unwrap_or_default(),
                from: time("--from", from)?,
                to: time("--to", to)?,
                ttl,
                at,
                backfill: None,
                allow_empty: args.allow_empty,
            }
        }
    };
    if options.from > options.to {
        return Err(Error::usage("--from", "must not be after --to"));
    }
    let risk = ttl_risk::run(&config, &options)?;
    let text = match args.format {
        onceonly::cli::TraceFormat::Table => render::ttl_risk::text(&risk),
        onceonly::cli::TraceFormat::Json => render::ttl_risk::json(&risk),
    };
    output::stdout(&text)?;
    // Like audit's findings: exit 0 only when every interval is `safe` or `deduplicated`; 1
    // when a re-run would (`at-risk`) or may (`unknown`) duplicate something.
    Ok(u8::from(
        (risk.intervals.iter()).any(|i| !matches!(i.class, "safe" | "deduplicated")),
    ))
}
