//! Key templates (SPEC §4): `orders:{interval_start:%Y-%m-%d}:{interval_end:%Y-%m-%d}`.
//!
//! A template turns every attempt into its **expected key**, so the rules can tell a try that
//! never wrote its operation from one whose key was derived from something unstable.
//!
//! Airflow keeps times in UTC, but a DAG scheduled in `Europe/Berlin` often builds its key from
//! the local date. A time placeholder is formatted in a zone: the one it names
//! (`{interval_start:%Y-%m-%d@Europe/Berlin}`), else its operation's `timezone`, else the
//! DAG's own zone as Airflow serialized it (`attempts.dag_timezone`), else UTC.

use chrono::format::{Item, StrftimeItems};
use chrono::{FixedOffset, TimeZone};
use chrono_tz::Tz;
use polars::prelude::*;

use crate::error::{EngineContext, Error, Location};

/// Airflow's `{{ ts }}` form (`2026-10-25T00:00:00+02:00`), used when a time placeholder has
/// no format; in UTC it ends `+00:00`.
pub const DEFAULT_TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%:z";

/// The zone a time placeholder is formatted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Zone {
    /// An IANA zone; `Tz::UTC` is UTC.
    Named(Tz),
    /// A fixed offset: how Airflow serializes a DAG whose zone is one (seconds east of UTC).
    Offset(FixedOffset),
    /// Each try's DAG's own zone (`attempts.dag_timezone`), UTC where the metadata has none.
    OfDag,
}

/// UTC, the zone of every time in the canonical tables.
pub const UTC: Zone = Zone::Named(Tz::UTC);

impl Zone {
    /// An IANA zone name as a config or template gives it (`Europe/Berlin`, `UTC`).
    pub fn iana(name: &str) -> Result<Zone, String> {
        name.parse::<Tz>().map(Zone::Named).map_err(|_| {
            format!("`{name}` is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)")
        })
    }

    /// A DAG's zone as Airflow serializes it (`dag.timezone`): an IANA name, or the offset in
    /// seconds of a fixed zone.
    pub fn of_airflow(text: &str) -> Option<Zone> {
        match text.trim().parse::<i32>() {
            Ok(seconds) => FixedOffset::east_opt(seconds).map(Zone::Offset),
            Err(_) => text.trim().parse::<Tz>().ok().map(Zone::Named),
        }
    }

    /// How the zone is named in column names and messages.
    pub fn label(&self) -> String {
        match self {
            Zone::Named(tz) => tz.name().to_string(),
            Zone::Offset(offset) => offset.to_string(),
            Zone::OfDag => "the DAG's zone".to_string(),
        }
    }

    /// A time (microseconds since the epoch, UTC) formatted in this zone; `OfDag` is resolved
    /// by the caller.
    fn format(&self, micros: i64, items: &[Item<'_>], text: &mut String) -> std::fmt::Result {
        use std::fmt::Write;
        let Some(at) = chrono::DateTime::from_timestamp_micros(micros) else {
            return Err(std::fmt::Error);
        };
        match self {
            Zone::Named(tz) => write!(
                text,
                "{}",
                at.with_timezone(tz).format_with_items(items.iter())
            ),
            Zone::Offset(offset) => write!(
                text,
                "{}",
                offset
                    .from_utc_datetime(&at.naive_utc())
                    .format_with_items(items.iter())
            ),
            Zone::OfDag => Err(std::fmt::Error),
        }
    }
}

impl PartialOrd for Zone {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Zone {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.label().cmp(&other.label())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    /// A text or integer column of `attempts`: dag_id, task_id, map_index, run_id.
    Field(&'static str),
    /// A time column with its strftime format and zone: interval_start, interval_end,
    /// logical_date.
    Time(&'static str, String, Zone),
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

    /// The template with `zone` (an operation's `timezone`) for every time placeholder that
    /// names no zone of its own.
    pub fn in_zone(mut self, zone: Zone) -> KeyTemplate {
        for part in &mut self.parts {
            if let Part::Time(_, _, own @ Zone::OfDag) = part {
                *own = zone;
            }
        }
        self
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

    /// The times this template formats, as `(column, strftime format, zone)`: `expr` reads each
    /// from the column `formatted_name` names, which `add_times` (or `format_times`) makes.
    pub fn times(&self) -> impl Iterator<Item = (&'static str, &str, Zone)> {
        self.parts.iter().filter_map(|part| match part {
            Part::Time(name, format, zone) => Some((time_column(name), format.as_str(), *zone)),
            _ => None,
        })
    }

    /// Adds the formatted time columns `expr` reads.
    pub fn add_times(&self, frame: &mut DataFrame) -> crate::error::Result<()> {
        for (column, format, zone) in self.times() {
            let formatted = format_times(frame, column, format, zone)?;
            frame
                .with_column(formatted)
                .engine("formatting key times")?;
        }
        Ok(())
    }
}

/// The column holding `column` formatted with `format` in `zone`.
pub fn formatted_name(column: &str, format: &str, zone: Zone) -> String {
    format!("{column} as {format} in {}", zone.label())
}

/// The zone of each row for `Zone::OfDag`: the DAG's zone from `dag_timezone` (UTC where it is
/// NULL or the column is absent), as an index into the returned zones.
fn row_zones(frame: &DataFrame, zone: Zone) -> crate::error::Result<(Vec<Zone>, Vec<u32>)> {
    if zone != Zone::OfDag || frame.column("dag_timezone").is_err() {
        let zone = if zone == Zone::OfDag { UTC } else { zone };
        return Ok((vec![zone], Vec::new()));
    }
    let names = crate::cells::text_column(frame, "dag_timezone")?;
    let mut zones = vec![UTC];
    let mut seen: PlHashMap<&str, u32> = PlHashMap::default();
    let mut rows = Vec::with_capacity(names.len());
    for (row, name) in names.iter().enumerate() {
        let Some(name) = name else {
            rows.push(0);
            continue;
        };
        let index = match seen.get(name) {
            Some(index) => *index,
            None => {
                let zone = Zone::of_airflow(name).ok_or_else(|| {
                    let dag = crate::cells::text_column(frame, "dag_id")
                        .ok()
                        .and_then(|dags| dags.get(row).map(str::to_string))
                        .unwrap_or_default();
                    Error::input(
                        Location::source("attempts").column("dag_timezone"),
                        format!(
                            "DAG `{dag}`: time zone {name:?} is neither an IANA zone nor an offset in seconds"
                        ),
                    )
                })?;
                zones.push(zone);
                let index = (zones.len() - 1) as u32;
                seen.insert(name, index);
                index
            }
        };
        rows.push(index);
    }
    Ok((zones, rows))
}

/// Formats a UTC datetime column with a strftime format in a zone, each distinct (time, zone)
/// once: tries share few distinct interval starts, and formatting costs more than the lookup.
pub fn format_times(
    frame: &DataFrame,
    column: &str,
    format: &str,
    zone: Zone,
) -> crate::error::Result<Column> {
    let formatted = FormattedTimes::of(frame, column, format, zone)?;
    let name = formatted_name(column, format, zone);
    Ok(formatted.column(&name).into_column())
}

/// A datetime column formatted ([`format_times`]), as each row's place among the distinct texts.
pub struct FormattedTimes {
    texts: Vec<String>,
    /// Each row's text in `texts`, [`crate::dictionary::NULL`] for a NULL time.
    rows: Vec<u32>,
}

impl FormattedTimes {
    pub fn of(
        frame: &DataFrame,
        column: &str,
        format: &str,
        zone: Zone,
    ) -> crate::error::Result<FormattedTimes> {
        let items: Vec<Item> = StrftimeItems::new(format).collect();
        let (zones, zone_of_row) = row_zones(frame, zone)?;
        let times = frame
            .column(column)
            .and_then(|times| times.cast(&DataType::Int64))
            .engine("formatting key times")?;
        let times = times.i64().engine("formatting key times")?;
        let mut texts: Vec<String> = Vec::new();
        let mut formatted: Vec<(i64, u32)> = Vec::new();
        let mut dictionary = crate::dictionary::Dictionary::default();
        let mut rows: Vec<u32> = Vec::with_capacity(times.len());
        // Rows of one run (or one interval) often follow each other: the row before is the
        // guess.
        let mut previous: Option<u32> = None;
        for (row, time) in times.iter().enumerate() {
            let Some(time) = time else {
                rows.push(crate::dictionary::NULL);
                continue;
            };
            let key = (time, zone_of_row.get(row).copied().unwrap_or(0));
            let encoded = dictionary.encode(key, previous, |code| formatted[code as usize]);
            if let crate::dictionary::Encoded::New(_) = encoded {
                let mut text = String::new();
                zones[key.1 as usize]
                    .format(time, &items, &mut text)
                    .map_err(|_| Error::Engine {
                        doing: "formatting key times".into(),
                        message: format!("`{format}` cannot format {column} = {time} µs"),
                    })?;
                texts.push(text);
                formatted.push(key);
            }
            previous = Some(encoded.code());
            rows.push(encoded.code());
        }
        Ok(FormattedTimes { texts, rows })
    }

    /// The text of a row, None for a NULL time.
    pub fn get(&self, row: usize) -> Option<&str> {
        let at = *self.rows.get(row)?;
        self.texts.get(at as usize).map(String::as_str)
    }

    /// The texts as a column.
    pub fn column(&self, name: &str) -> StringChunked {
        let rows = self
            .rows
            .iter()
            .map(|&at| (at != crate::dictionary::NULL).then_some(at as polars::prelude::IdxSize));
        crate::cells::repeated_texts(name, &self.texts, rows)
    }
}

/// The column a time or conf part is read from: the formatted time (`format_times`) or the
/// extracted conf value; None for literals and fields.
pub fn column_of(part: &Part) -> Option<String> {
    match part {
        Part::Time(name, format, zone) => Some(formatted_name(time_column(name), format, *zone)),
        Part::Conf(name) => Some(conf_column(name)),
        Part::Literal(_) | Part::Field(_) => None,
    }
}

/// Interval placeholders read the audit interval (with its fallbacks), not the raw data interval.
pub fn time_column(name: &str) -> &'static str {
    match name {
        "interval_start" => "iv_start",
        "interval_end" => "iv_end",
        _ => "logical_date",
    }
}

/// What the column a conf value is extracted into is named with, before the value's name.
pub const CONF_PREFIX: &str = "conf.";

/// The column a conf value is extracted into.
pub fn conf_column(name: &str) -> String {
    format!("{CONF_PREFIX}{name}")
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
    // A zone follows the last `@` (`{interval_start:%Y-%m-%d@Europe/Berlin}`,
    // `{interval_start@Europe/Berlin}`); an `@` followed by a `%` is part of the format.
    let (name, format, zone) = match (name.split_once('@'), format) {
        (Some((name, zone)), None) => (name.trim(), None, Some(zone.trim())),
        (_, Some(format)) => match format.rsplit_once('@') {
            Some((format, zone)) if !zone.contains('%') => (name, Some(format), Some(zone.trim())),
            _ => (name, Some(format), None),
        },
        (None, None) => (name, None, None),
    };
    if let Some(field) = FIELDS.iter().find(|field| **field == name) {
        if format.is_some() || zone.is_some() {
            return Err(format!(
                "`{{{name}}}` takes no format or zone; only times do"
            ));
        }
        return Ok(Part::Field(field));
    }
    if let Some(time) = TIMES.iter().find(|time| **time == name) {
        let format = format.unwrap_or(DEFAULT_TIME_FORMAT);
        if format.is_empty() || StrftimeItems::new(format).any(|item| matches!(item, Item::Error)) {
            return Err(format!("`{format}` is not a strftime format"));
        }
        let zone = match zone {
            Some(zone) => Zone::iana(zone)?,
            None => Zone::OfDag,
        };
        return Ok(Part::Time(time, format.to_string(), zone));
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
                Part::Time("interval_start", "%Y-%m-%d".into(), Zone::OfDag),
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
            "{interval_start:%Y@Mars/Olympus}",
            "{interval_start@Europe/Berln}",
            "{run_id@Europe/Berlin}",
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

    /// Formats one UTC time (RFC 3339) with a template's single time placeholder.
    fn formatted(template: &str, at: &str, dag_timezone: Option<&str>) -> String {
        let template = KeyTemplate::parse(template).unwrap();
        let at = crate::timestamp::parse(at).unwrap();
        let mut df = df! {
            "dag_id" => ["d"],
            "iv_start" => [at],
            "dag_timezone" => [dag_timezone],
        }
        .unwrap()
        .lazy()
        .with_column(col("iv_start").cast(crate::model::utc()))
        .collect()
        .unwrap();
        template.add_times(&mut df).unwrap();
        let keys = df
            .lazy()
            .select([template.expr().alias("key")])
            .collect()
            .unwrap();
        keys.column("key")
            .unwrap()
            .str()
            .unwrap()
            .get(0)
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_zone_formats_local_time_on_both_sides_of_a_dst_change() {
        // Berlin's summer time ended on 2026-10-25 at 03:00 CEST (01:00 UTC): the local
        // midnights around it are 22:00 UTC before and 23:00 UTC after.
        let local = "{interval_start:%Y-%m-%dT%H:%M:%S%:z@Europe/Berlin}";
        assert_eq!(
            formatted(local, "2026-10-24T22:00:00Z", None),
            "2026-10-25T00:00:00+02:00"
        );
        assert_eq!(
            formatted(local, "2026-10-25T23:00:00Z", None),
            "2026-10-26T00:00:00+01:00"
        );
        // The hour that happens twice: 02:30 CEST, then 02:30 CET.
        let hour = "{interval_start:%H:%M %Z@Europe/Berlin}";
        assert_eq!(formatted(hour, "2026-10-25T00:30:00Z", None), "02:30 CEST");
        assert_eq!(formatted(hour, "2026-10-25T01:30:00Z", None), "02:30 CET");
        // Spring: 2026-03-29 02:00 CET does not exist; 01:00 UTC is 03:00 CEST.
        assert_eq!(formatted(hour, "2026-03-29T01:00:00Z", None), "03:00 CEST");
        // No format: Airflow's `ts` in the zone.
        assert_eq!(
            formatted(
                "{interval_start@America/New_York}",
                "2026-11-02T05:00:00Z",
                None
            ),
            "2026-11-02T00:00:00-05:00"
        );
    }

    #[test]
    fn without_a_zone_the_dags_own_zone_is_used_else_utc() {
        let date = "{interval_start:%Y-%m-%d}";
        let at = "2026-10-24T22:00:00Z";
        assert_eq!(formatted(date, at, Some("Europe/Berlin")), "2026-10-25");
        // Airflow serializes a fixed-offset zone as its offset in seconds.
        assert_eq!(formatted(date, at, Some("7200")), "2026-10-25");
        assert_eq!(formatted(date, at, Some("UTC")), "2026-10-24");
        assert_eq!(formatted(date, at, None), "2026-10-24");
        // A zone in the template wins over the DAG's.
        assert_eq!(
            formatted("{interval_start:%Y-%m-%d@UTC}", at, Some("Europe/Berlin")),
            "2026-10-24"
        );
        // The operation's zone fills in where the template names none.
        let template = KeyTemplate::parse(date)
            .unwrap()
            .in_zone(Zone::iana("Asia/Tokyo").unwrap());
        assert!(matches!(
            &template.parts[0],
            Part::Time(_, _, Zone::Named(chrono_tz::Tz::Asia__Tokyo))
        ));
    }

    #[test]
    fn an_unknown_dag_zone_is_bad_input_naming_the_dag() {
        let template = KeyTemplate::parse("{interval_start:%Y}").unwrap();
        let mut df = df! {
            "dag_id" => ["orders"],
            "iv_start" => [0i64],
            "dag_timezone" => ["Mars/Olympus"],
        }
        .unwrap()
        .lazy()
        .with_column(col("iv_start").cast(crate::model::utc()))
        .collect()
        .unwrap();
        let message = template.add_times(&mut df).unwrap_err().to_string();
        assert!(
            message.contains("orders")
                && message.contains("Mars/Olympus")
                && message.contains("dag_timezone"),
            "{message}"
        );
    }

    #[test]
    fn utc_default_format_is_unchanged() {
        assert_eq!(
            formatted("{interval_start}", "2026-11-01T00:00:00Z", None),
            "2026-11-01T00:00:00+00:00"
        );
    }
}
