//! Key templates (SPEC §4): `orders:{interval_start:%Y-%m-%d}:{interval_end:%Y-%m-%d}`.
//!
//! A template turns every attempt into its **expected key**, so the rules can tell a try that
//! never wrote its operation from one whose key was derived from something unstable.

use chrono::format::{Item, StrftimeItems};
use polars::prelude::*;

/// Airflow's `{{ ts }}` form, used when a time placeholder has no format.
pub const DEFAULT_TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%S+00:00";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    /// A text or integer column of `attempts`: dag_id, task_id, map_index, run_id.
    Field(&'static str),
    /// A time column with its strftime format: interval_start, interval_end, logical_date.
    Time(&'static str, String),
    /// A top-level value of the run's conf.
    Conf(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    pub text: String,
    pub parts: Vec<Part>,
}

const FIELDS: [&str; 4] = ["dag_id", "task_id", "map_index", "run_id"];
const TIMES: [&str; 3] = ["interval_start", "interval_end", "logical_date"];

impl KeyTemplate {
    pub fn parse(text: &str) -> Result<KeyTemplate, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(ch) = chars.next() {
            match ch {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err("a lone `}` (write `}}` for a literal brace)".into()),
                '{' => {
                    let mut inner = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(ch) => inner.push(ch),
                            None => return Err(format!("`{{{inner}` is not closed")),
                        }
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(placeholder(&inner)?);
                }
                ch => literal.push(ch),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        if !parts.iter().any(|part| !matches!(part, Part::Literal(_))) {
            return Err("it has no placeholder, so every interval would share one key".into());
        }
        Ok(KeyTemplate {
            text: text.to_string(),
            parts,
        })
    }

    /// The conf values the template reads, so the caller can extract them into columns.
    pub fn conf_names(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Conf(name) => Some(name.as_str()),
            _ => None,
        })
    }

    /// The expected key as an expression over the prepared attempts (NULL where a placeholder
    /// is NULL, e.g. `logical_date` of a manual Airflow 3 run).
    pub fn expr(&self) -> Expr {
        let pieces: Vec<Expr> = self
            .parts
            .iter()
            .map(|part| match part {
                Part::Literal(text) => lit(text.clone()),
                Part::Field(name) => col(*name).cast(DataType::String),
                Part::Time(..) | Part::Conf(_) => col(column_of(part).unwrap_or_default()),
            })
            .collect();
        concat_str(pieces, "", false)
    }

    /// The times this template formats, as `(column, strftime format)`: `expr` reads each from
    /// the column `formatted_name` names, which `add_times` (or `format_times`) makes.
    pub fn times(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.parts.iter().filter_map(|part| match part {
            Part::Time(name, format) => Some((time_column(name), format.as_str())),
            _ => None,
        })
    }

    /// Adds the formatted time columns `expr` reads.
    pub fn add_times(&self, frame: &mut DataFrame) -> PolarsResult<()> {
        for (column, format) in self.times() {
            let formatted = format_times(frame, column, format)?;
            frame.with_column(formatted)?;
        }
        Ok(())
    }
}

/// The column holding `column` formatted with `format`.
pub fn formatted_name(column: &str, format: &str) -> String {
    format!("{column} as {format}")
}

/// Formats a UTC datetime column with a strftime format, each distinct time once: a million
/// tries have a few tens of thousands of distinct interval starts, and chrono's formatting,
/// not the lookup, was the cost (bench/scale).
pub fn format_times(frame: &DataFrame, column: &str, format: &str) -> PolarsResult<Column> {
    use std::fmt::Write;
    let items: Vec<Item> = StrftimeItems::new(format).collect();
    let times = frame.column(column)?.cast(&DataType::Int64)?;
    let times = times.i64()?;
    let mut texts: Vec<String> = Vec::new();
    let mut seen: polars::prelude::PlHashMap<i64, usize> = Default::default();
    let mut rows: Vec<Option<IdxSize>> = Vec::with_capacity(times.len());
    let mut previous: Option<(i64, usize)> = None;
    for time in times.iter() {
        let Some(time) = time else {
            rows.push(None);
            continue;
        };
        // Rows of one run (or one interval) often follow each other.
        let known = match previous {
            Some((before, index)) if before == time => Some(index),
            _ => seen.get(&time).copied(),
        };
        let index = match known {
            Some(index) => index,
            None => {
                let at = chrono::DateTime::from_timestamp_micros(time)
                    .ok_or_else(|| polars_err!(ComputeError: "{column}: {time} µs is not a time"))?
                    .naive_utc();
                let mut text = String::new();
                write!(text, "{}", at.format_with_items(items.iter()))
                    .map_err(|_| polars_err!(ComputeError: "`{format}` cannot format {column}"))?;
                texts.push(text);
                seen.insert(time, texts.len() - 1);
                texts.len() - 1
            }
        };
        previous = Some((time, index));
        rows.push(Some(index as IdxSize));
    }
    let name = formatted_name(column, format);
    Ok(crate::cells::repeated_texts(&name, &texts, rows.into_iter()).into_column())
}

/// The column a time or conf part is read from: the formatted time (`format_times`) or the
/// extracted conf value; None for literals and fields.
pub fn column_of(part: &Part) -> Option<String> {
    match part {
        Part::Time(name, format) => Some(formatted_name(time_column(name), format)),
        Part::Conf(name) => Some(conf_column(name)),
        Part::Literal(_) | Part::Field(_) => None,
    }
}

/// Interval placeholders read the audit interval (with its fallbacks), not the raw data interval.
fn time_column(name: &str) -> &'static str {
    match name {
        "interval_start" => "iv_start",
        "interval_end" => "iv_end",
        _ => "logical_date",
    }
}

/// The column a conf value is extracted into.
pub fn conf_column(name: &str) -> String {
    format!("conf.{name}")
}

fn placeholder(inner: &str) -> Result<Part, String> {
    let (name, format) = match inner.split_once(':') {
        Some((name, format)) => (name.trim(), Some(format)),
        None => (inner.trim(), None),
    };
    if let Some(conf) = name.strip_prefix("conf.") {
        if conf.is_empty() {
            return Err("`{conf.}` names no conf value".into());
        }
        if format.is_some() {
            return Err(format!("`{{{name}}}` is text and takes no format"));
        }
        return Ok(Part::Conf(conf.to_string()));
    }
    if let Some(field) = FIELDS.iter().find(|field| **field == name) {
        if format.is_some() {
            return Err(format!("`{{{name}}}` takes no format; only times do"));
        }
        return Ok(Part::Field(field));
    }
    if let Some(time) = TIMES.iter().find(|time| **time == name) {
        let format = format.unwrap_or(DEFAULT_TIME_FORMAT);
        if format.is_empty() || StrftimeItems::new(format).any(|item| matches!(item, Item::Error)) {
            return Err(format!("`{format}` is not a strftime format"));
        }
        if format.contains("%z") || format.contains("%Z") || format.contains("%:z") {
            return Err("times are UTC; write the offset as a literal (e.g. +00:00)".into());
        }
        return Ok(Part::Time(time, format.to_string()));
    }
    Err(format!(
        "unknown placeholder `{{{name}}}` (known: {}, {}, conf.NAME)",
        FIELDS.join(", "),
        TIMES.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_placeholders_and_literals() {
        let template =
            KeyTemplate::parse("orders:{interval_start:%Y-%m-%d}:{{x}}:{conf.region}").unwrap();
        assert_eq!(
            template.parts,
            vec![
                Part::Literal("orders:".into()),
                Part::Time("interval_start", "%Y-%m-%d".into()),
                Part::Literal(":{x}:".into()),
                Part::Conf("region".into()),
            ]
        );
    }

    #[test]
    fn refuses_what_cannot_be_a_key() {
        for text in [
            "orders",
            "{try_number}",
            "{dag_id:%Y}",
            "{interval_start:%Q}",
            "{run_id",
            "a}b",
        ] {
            assert!(KeyTemplate::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn expected_key_expression_formats_rows() {
        let template = KeyTemplate::parse("{dag_id}/{map_index}/{logical_date:%Y-%m-%d}").unwrap();
        let df = df! {
            "dag_id" => ["d", "d"],
            "map_index" => [-1i64, 3],
            "logical_date" => [Some(1_793_527_200_000_000i64), None],
        }
        .unwrap()
        .lazy()
        .with_column(col("logical_date").cast(crate::model::utc()))
        .collect()
        .unwrap();
        let mut df = df;
        template.add_times(&mut df).unwrap();
        let df = df
            .lazy()
            .select([template.expr().alias("key")])
            .collect()
            .unwrap();
        let keys: Vec<_> = df.column("key").unwrap().str().unwrap().iter().collect();
        assert_eq!(keys, vec![Some("d/-1/2026-11-01"), None]);
    }
}
