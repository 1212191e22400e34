//! Parse, run, map the outcome to an exit code: 0 clean, 1 findings, 2 bad input or error.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use onceonly::cli::{AuditArgs, Cli, Command};
use onceonly::commands::{audit, demo, rule};
use onceonly::config::Config;
use onceonly::error::{Error, Result};
use onceonly::render::{self, Format};
use onceonly::{output, timestamp};

fn main() -> ExitCode {
    let cli = Cli::parse();
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
            output::stdout(&render::render(&audit.report, format))?;
            Ok(0)
        }
        Command::Audit(args) => run_audit(&args),
    }
}

fn run_audit(args: &AuditArgs) -> Result<u8> {
    let time = |flag: &str, value: &Option<String>| -> Result<Option<i64>> {
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
    };
    let options = audit::AuditOptions {
        dag: args.dag.clone(),
        since: time("--since", &args.since)?,
        until: time("--until", &args.until)?,
        slack: timestamp::parse_duration(&args.slack).ok_or_else(|| {
            Error::usage(
                "--slack",
                format!("{:?} is not a duration (e.g. 1h, 30m)", args.slack),
            )
        })?,
        rules: args.rules.clone(),
        save_snapshot: args.save_snapshot.clone(),
        from_snapshot: args.from_snapshot.clone(),
    };
    if let (Some(since), Some(until)) = (options.since, options.until)
        && since >= until
    {
        return Err(Error::usage("--since", "must be before --until"));
    }
    for code in &options.rules {
        if onceonly::rules::lookup(code).is_none() {
            return Err(Error::usage(
                "--rule",
                format!("no rule {code:?}; `onceonly rule` lists them"),
            ));
        }
    }
    let config = Config::load(&args.config)?;
    let audit = audit::run(&config, &options)?;
    if let Some(path) = &args.verdicts {
        output::write_verdicts(path, &audit.verdicts)?;
    }
    let text = render::render(&audit.report, args.format);
    match &args.output {
        Some(path) => output::file(path, text.as_bytes())?,
        None => output::stdout(&text)?,
    }
    if args.format == Format::Table && args.output.is_none() {
        let _ = std::io::stdout().flush();
    }
    Ok(u8::from(audit.report.fails(args.fail_on.threshold())))
}
