//! Where an audit spends its time, for `bench/scale` and for whoever makes it faster.
//!
//! * `ONCEONLY_TIMINGS=1`: each phase's wall time and the peak memory so far go to stderr;
//!   `ONCEONLY_TIMINGS=columns` also prints the size of each column of the tables measured;
//! * `ONCEONLY_PROFILE=1`: each polars query also prints its plan nodes with their start and
//!   end in microseconds.

use std::time::Instant;

use polars::prelude::*;

use crate::error::{EngineContext, Result};

/// Prints `onceonly timing: PHASE SECONDS peak-rss KB cpu SECONDS rss KB at SECONDS` when
/// `ONCEONLY_TIMINGS` is set. `cpu` is the processor time of the whole process so far, all
/// threads: the difference between two lines over their wall time says how many cores the work
/// between them used. `peak-rss` is the most memory the process has held so far, `rss` what it
/// holds now. `at` is when the phase ended, seconds since the process started (to 1/100 s):
/// phases that overlap (the listing and the tries' preparing) line up on it.
pub fn phase(name: &str, since: Instant) {
    if std::env::var_os("ONCEONLY_TIMINGS").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name).map(|kb| kb.trim().to_string()))
            .unwrap_or_else(|| "unknown".into())
    };
    let cpu = process_cpu().map_or_else(|| "unknown".into(), |cpu| format!("{cpu:.2}s"));
    let at = process_age().map_or_else(|| "unknown".into(), |age| format!("{age:.2}s"));
    eprintln!(
        "onceonly timing: {name} {:.3}s peak-rss {} cpu {cpu} rss {} at {at}",
        since.elapsed().as_secs_f64(),
        field("VmHWM:"),
        field("VmRSS:"),
    );
}

/// Seconds since the process started: the system's uptime less the process's start time
/// (field 22 of `/proc/self/stat`, clock ticks of 1/100 s since boot).
fn process_age() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let started: f64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let uptime: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    Some(uptime - started / 100.0)
}

/// User plus system time of the process, from `/proc/self/stat` (clock ticks of 1/100 s).
fn process_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it are counted from its
    // closing parenthesis: utime and stime are the 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let user: f64 = fields.next()?.parse().ok()?;
    let system: f64 = fields.next()?.parse().ok()?;
    Some((user + system) / 100.0)
}

/// Prints `onceonly timing: size NAME ROWS rows MiB` (polars' estimate of the frame's memory)
/// when `ONCEONLY_TIMINGS` is set; with `ONCEONLY_TIMINGS=columns`, a line `size NAME.COLUMN
/// TYPE MiB` for each column besides. Columns that share buffers (views of the same texts)
/// each count them whole, so the columns can add up to more than the frame holds.
pub fn size(name: &str, frame: &DataFrame) {
    if std::env::var_os("ONCEONLY_TIMINGS").is_none() {
        return;
    }
    // polars estimates a column of one repeated value (a NULL column a snapshot's read left
    // undecoded) by building it whole: it is counted as nothing, which it nearly is, so that
    // measuring does not add to the memory measured.
    let bytes: usize = (frame.columns().iter())
        .map(|column| match column {
            Column::Scalar(_) => 0,
            _ => column.as_materialized_series().estimated_size(),
        })
        .sum();
    eprintln!(
        "onceonly timing: size {name} {} rows {:.0} MiB",
        frame.height(),
        bytes as f64 / (1024.0 * 1024.0)
    );
    if std::env::var_os("ONCEONLY_TIMINGS").is_some_and(|v| v == "columns") {
        for column in frame.columns() {
            let bytes = match column {
                Column::Scalar(_) => 0,
                _ => column.as_materialized_series().estimated_size(),
            };
            eprintln!(
                "onceonly timing: size {name}.{} {} {:.1} MiB",
                column.name(),
                column.dtype(),
                bytes as f64 / (1024.0 * 1024.0)
            );
        }
    }
}

/// `lazy.run("doing what")`: collects, naming the step in errors and in profiles.
pub trait Run {
    fn run(self, doing: &str) -> Result<DataFrame>;
}

impl Run for LazyFrame {
    fn run(self, doing: &str) -> Result<DataFrame> {
        collect(self, doing)
    }
}

/// Runs a query; with `ONCEONLY_PROFILE` set, prints how long each node of its plan took.
pub fn collect(frame: LazyFrame, doing: &str) -> Result<DataFrame> {
    if std::env::var_os("ONCEONLY_PROFILE").is_none() {
        return frame.collect().engine(doing);
    }
    let started = Instant::now();
    let (out, nodes) = frame.profile().engine(doing)?;
    let names = crate::cells::texts(&nodes, "node")?;
    let ends = nodes.column("end").engine(doing)?.u64().engine(doing)?;
    let starts = nodes.column("start").engine(doing)?.u64().engine(doing)?;
    eprintln!(
        "onceonly profile: {doing} {:.3}s",
        started.elapsed().as_secs_f64()
    );
    let mut rows: Vec<(u64, u64, String)> = names
        .into_iter()
        .zip(starts.iter().zip(ends.iter()))
        .map(|(name, (start, end))| {
            let name: String = name.unwrap_or_default().chars().take(90).collect();
            (start.unwrap_or(0), end.unwrap_or(0), name)
        })
        .collect();
    rows.sort_by_key(|row| row.1);
    for (start, end, name) in rows {
        eprintln!(
            "    {:>8} µs  {}",
            end.saturating_sub(start),
            name.replace('\n', " ")
        );
    }
    Ok(out)
}
