//! Snapshot files of the canonical tables: CSV, NDJSON and Parquet.
//!
//! Each file is read into its table's canonical schema, checked value by value: a wrong type,
//! an unparseable timestamp or a missing column stops the run with the file, row and column
//! named. Nothing is skipped.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use polars::prelude::*;

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{ColumnSpec, Kind, Table};
use crate::timestamp;

/// How a file's columns relate to the canonical ones: the file's own name of each canonical
/// column (identity unless configured) and, for the journal, its phase values.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    pub columns: BTreeMap<String, String>,
    pub phases: Option<BTreeMap<String, String>>,
}

impl Mapping {
    fn own_name<'a>(&'a self, spec: &'a ColumnSpec) -> &'a str {
        self.columns
            .get(spec.name)
            .map(String::as_str)
            .unwrap_or(spec.name)
    }
}

/// What a snapshot file must hold, where the config says (`[provider] snapshot_rows`,
/// `snapshot_sha256`): a file that lost its last lines is refused, not audited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCheck {
    pub rows: Option<u64>,
    /// Lowercase hex.
    pub sha256: Option<String>,
}

impl FileCheck {
    /// Checks the file at `path`, read as `rows` rows, against what the config names.
    pub fn check(&self, path: &Path, rows: usize) -> Result<()> {
        let shown = path.display().to_string();
        if let Some(expected) = self.rows
            && expected != rows as u64
        {
            return Err(Error::input(
                Location::source(&shown),
                format!(
                    "the file holds {rows} objects, but [provider] snapshot_rows says {expected}: it is not the file the config names (cut short, or another one)"
                ),
            ));
        }
        if let Some(expected) = &self.sha256 {
            use sha2::Digest;
            use std::io::Read;
            let mut file = File::open(path).map_err(|err| Error::io(&shown, err))?;
            let mut hasher = sha2::Sha256::new();
            let mut buffer = vec![0u8; 1 << 20];
            loop {
                let read = file
                    .read(&mut buffer)
                    .map_err(|err| Error::io(&shown, err))?;
                if read == 0 {
                    break;
                }
                hasher.update(&buffer[..read]);
            }
            let found = super::content::hex(&hasher.finalize());
            if &found != expected {
                return Err(Error::input(
                    Location::source(&shown),
                    format!(
                        "the file's SHA-256 is {found}, but [provider] snapshot_sha256 says {expected}: it is not the file the config names (cut short, or changed)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The coverage's warning for a CSV or NDJSON file nothing checks (`check` None, or naming
/// neither a count nor a checksum): such a file cut at a line boundary reads as a whole one.
/// Parquet files carry their own row counts and end with their footer.
pub fn unchecked(path: &Path, check: Option<&FileCheck>) -> Option<String> {
    let extension = path
        .extension()
        .and_then(|ext| ext.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !matches!(extension.as_str(), "csv" | "ndjson" | "jsonl") {
        return None;
    }
    if check.is_some_and(|check| check.rows.is_some() || check.sha256.is_some()) {
        return None;
    }
    let how = if check.is_some() {
        "; [provider] snapshot_rows or snapshot_sha256 would check it"
    } else {
        "; an onceonly snapshot (--save-snapshot) carries its own"
    };
    Some(format!(
        "{} carries no row count or checksum: a file that lost its last lines would read as a whole one{how}",
        path.display()
    ))
}

/// Reads one table from a snapshot file, choosing the format by extension.
pub fn read(path: &Path, table: Table, mapping: &Mapping) -> Result<DataFrame> {
    let shown = path.display().to_string();
    let extension = path
        .extension()
        .and_then(|ext| ext.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let metadata = std::fs::metadata(path).map_err(|err| Error::io(&shown, err))?;
    if metadata.len() == 0 {
        return Err(Error::input(
            Location::source(&shown),
            format!(
                "the file is empty; a {} snapshot needs at least a header",
                table.name()
            ),
        ));
    }
    let progress = crate::progress::Line::open(table.name(), &format!("snapshot {shown}"));
    let read = match extension.as_str() {
        "csv" => read_csv(path, &shown, table, mapping),
        "ndjson" | "jsonl" => read_ndjson(path, &shown, table, mapping),
        "parquet" => read_parquet(path, &shown, table, mapping),
        other => Err(Error::input(
            Location::source(&shown),
            format!("unknown snapshot format `.{other}` (use .csv, .ndjson or .parquet)"),
        )),
    }?;
    progress.rows(read.height() as u64);
    progress.done();
    Ok(read)
}

/// A provider snapshot's objects, each once. A file that lists an object twice with the same
/// content (exports appended to each other) keeps its first copy, and a warning says how many
/// were counted once. Two copies that differ are refused: nothing in a file tells which one
/// is current, and either could change what is found.
pub fn each_object_once(provider: DataFrame, shown: &str) -> Result<(DataFrame, Vec<String>)> {
    let ids = crate::cells::text_column(&provider, "external_id")?;
    let mut first: PlHashMap<&str, usize> = PlHashMap::with_capacity(provider.height());
    let mut repeated: Vec<usize> = Vec::new();
    for (row, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        let Some(&earlier) = first.get(id) else {
            first.insert(id, row);
            continue;
        };
        let differs = provider
            .columns()
            .iter()
            .find(|column| column.get(earlier).ok() != column.get(row).ok());
        if let Some(column) = differs {
            let cell = |row: usize| {
                column
                    .get(row)
                    .map(|value| value.to_string())
                    .unwrap_or_default()
            };
            return Err(Error::input(
                Location::source(shown).column(column.name().as_str()),
                format!(
                    "object `{id}` is listed twice, as objects {} and {}, with different `{}` ({} and {}); a provider snapshot lists each object once: keep its current copy",
                    earlier + 1,
                    row + 1,
                    column.name(),
                    cell(earlier),
                    cell(row)
                ),
            ));
        }
        repeated.push(row);
    }
    if repeated.is_empty() {
        return Ok((provider, Vec::new()));
    }
    let first_repeated = ids.get(repeated[0]).unwrap_or_default();
    let warning = match repeated.len() {
        1 => format!(
            "{shown}: object `{first_repeated}` is listed twice with the same content; it is counted once"
        ),
        count => format!(
            "{shown}: {count} copies of objects listed before, with the same content (the first: `{first_repeated}`); each object is counted once"
        ),
    };
    let keep: BooleanChunked = (0..provider.height())
        .map(|row| repeated.binary_search(&row).is_err())
        .collect();
    let provider = provider
        .filter(&keep)
        .engine("counting each provider object once")?;
    Ok((provider, vec![warning]))
}

/// Typed values of one canonical column as they are read (shared by every source that
/// builds a table row by row).
pub(crate) enum Values {
    /// Built straight into polars' string column: no `String` per cell.
    Text(StringChunkedBuilder),
    Int(Vec<Option<i64>>),
    Time(Vec<Option<i64>>),
}

impl Values {
    pub(crate) fn new(kind: Kind) -> Values {
        match kind {
            Kind::Text => Values::Text(StringChunkedBuilder::new(PlSmallStr::EMPTY, 0)),
            Kind::Int => Values::Int(Vec::new()),
            Kind::Time => Values::Time(Vec::new()),
        }
    }

    /// A null appended in place of a cell that failed its check.
    pub(crate) fn push_null(&mut self) {
        match self {
            Values::Text(values) => values.append_null(),
            Values::Int(values) | Values::Time(values) => values.push(None),
        }
    }

    pub(crate) fn into_column(self, name: &str) -> Column {
        match self {
            Values::Text(values) => values.finish().with_name(name.into()).into_column(),
            Values::Int(values) => Column::new(name.into(), values),
            Values::Time(values) => crate::cells::numbers::<Int64Type>(name, values.into_iter())
                .into_datetime(crate::model::TIME_UNIT, None)
                .into_column(),
        }
    }
}

/// One cell as a source wrote it, before it is checked against its column.
pub(crate) enum Cell<'a> {
    Null,
    Text(&'a str),
    Json(&'a serde_json::Value),
}

/// The text columns that hold JSON documents, which a source may give as JSON objects.
const JSON_DOCUMENTS: [&str; 2] = ["conf", "raw"];

/// Checks one cell and appends it; `at` names the cell for the error. The same types hold for
/// every source: a file, a snapshot, a listing page.
pub(crate) fn push(
    values: &mut Values,
    spec: &ColumnSpec,
    cell: Cell<'_>,
    mapping: &Mapping,
    at: impl Fn() -> Location,
) -> Result<()> {
    let cell = match cell {
        Cell::Text("") | Cell::Json(serde_json::Value::Null) => Cell::Null,
        other => other,
    };
    if matches!(cell, Cell::Null) {
        if !spec.nullable {
            return Err(Error::input(
                at(),
                format!("`{}` is empty, but every row needs one", spec.name),
            ));
        }
        match values {
            Values::Text(v) => v.append_null(),
            Values::Int(v) => v.push(None),
            Values::Time(v) => v.push(None),
        }
        return Ok(());
    }
    let wrong = |shown: String| {
        Error::input(
            at(),
            format!("{shown} is not a valid {}", spec.kind.describe()),
        )
    };
    match values {
        Values::Text(v) => {
            let text: std::borrow::Cow<'_, str> = match cell {
                Cell::Text(text) => text.into(),
                Cell::Json(serde_json::Value::String(text)) => text.as_str().into(),
                // conf and raw hold JSON documents; NDJSON and listings give them unquoted.
                Cell::Json(
                    value @ (serde_json::Value::Object(_) | serde_json::Value::Array(_)),
                ) if JSON_DOCUMENTS.contains(&spec.name) => value.to_string().into(),
                // Providers number their objects: an integer id is the id written out. Keys,
                // statuses and hashes are text; a number there is a mapping gone wrong.
                Cell::Json(serde_json::Value::Number(number))
                    if spec.name == "external_id" && (number.is_i64() || number.is_u64()) =>
                {
                    number.to_string().into()
                }
                Cell::Json(value) => return Err(wrong(format!("{value} ({})", json_type(value)))),
                Cell::Null => unreachable!("nulls are handled above"),
            };
            match (&mapping.phases, spec.name) {
                (Some(phases), "phase") => {
                    let phase = phases.get(text.as_ref()).ok_or_else(|| {
                        let known: Vec<_> = phases.keys().map(|k| format!("{k:?}")).collect();
                        Error::input(
                            at(),
                            format!(
                                "unknown phase value {text:?} (the mapping knows {})",
                                known.join(", ")
                            ),
                        )
                    })?;
                    v.append_value(phase);
                }
                _ => v.append_value(text),
            }
        }
        Values::Int(v) => {
            let parsed = match cell {
                Cell::Text(text) => text.trim().parse::<i64>().ok(),
                Cell::Json(value) => value.as_i64(),
                Cell::Null => None,
            };
            v.push(Some(parsed.ok_or_else(|| wrong(shown(&cell)))?));
        }
        Values::Time(v) => {
            let parsed = match cell {
                Cell::Text(text) => timestamp::parse(text),
                Cell::Json(serde_json::Value::String(text)) => timestamp::parse(text),
                Cell::Json(serde_json::Value::Number(number)) => {
                    number.as_f64().and_then(timestamp::from_epoch_number)
                }
                _ => None,
            };
            v.push(Some(parsed.ok_or_else(|| wrong(shown(&cell)))?));
        }
    }
    Ok(())
}

fn shown(cell: &Cell<'_>) -> String {
    match cell {
        Cell::Null => "an empty value".into(),
        Cell::Text(text) => format!("{text:?}"),
        Cell::Json(value) => format!("{value} ({})", json_type(value)),
    }
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Finds each canonical column among a file's columns; refuses missing required columns and
/// columns the table does not have (a typo would otherwise read as an all-NULL column).
fn locate(
    headers: &[String],
    table: Table,
    mapping: &Mapping,
    shown: &str,
) -> Result<Vec<Option<usize>>> {
    let specs = table.columns();
    let own: Vec<&str> = specs.iter().map(|spec| mapping.own_name(spec)).collect();
    for (index, header) in headers.iter().enumerate() {
        if !own.contains(&header.as_str()) {
            return Err(Error::input(
                Location::source(shown).column(header),
                format!(
                    "column {} is not a column of `{}` (expected: {})",
                    index + 1,
                    table.name(),
                    own.join(", ")
                ),
            ));
        }
        if headers[..index].contains(header) {
            return Err(Error::input(
                Location::source(shown).column(header),
                "the column appears twice",
            ));
        }
    }
    specs
        .iter()
        .zip(&own)
        .map(|(spec, own)| {
            let found = headers.iter().position(|header| header == own);
            if found.is_none() && !spec.nullable {
                return Err(Error::input(
                    Location::source(shown).column(*own),
                    format!("missing column `{own}`, which `{}` requires", table.name()),
                ));
            }
            Ok(found)
        })
        .collect()
}

fn finish(table: Table, columns: Vec<Values>) -> Result<DataFrame> {
    let columns = table
        .columns()
        .iter()
        .zip(columns)
        .map(|(spec, values)| values.into_column(spec.name))
        .collect();
    DataFrame::new_infer_height(columns).engine("assembling a canonical table")
}

fn read_csv(path: &Path, shown: &str, table: Table, mapping: &Mapping) -> Result<DataFrame> {
    let file = File::open(path).map_err(|err| Error::io(shown, err))?;
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(file);
    let csv_error = |err: csv::Error| {
        let row = err.position().map(|pos| pos.line() as usize);
        let location = match row {
            Some(row) => Location::source(shown).row(row),
            None => Location::source(shown),
        };
        Error::input(location, format!("not valid CSV: {err}"))
    };
    let headers: Vec<String> = reader
        .headers()
        .map_err(csv_error)?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let positions = locate(&headers, table, mapping, shown)?;
    let specs = table.columns();
    let mut columns: Vec<Values> = specs.iter().map(|spec| Values::new(spec.kind)).collect();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(csv_error)? {
        let line = record
            .position()
            .map(|pos| pos.line() as usize)
            .unwrap_or(0);
        for ((spec, position), values) in specs.iter().zip(&positions).zip(columns.iter_mut()) {
            let cell = match position {
                Some(index) => Cell::Text(record.get(*index).unwrap_or("")),
                None => Cell::Null,
            };
            let at = || {
                Location::source(shown)
                    .row(line)
                    .column(mapping.own_name(spec))
            };
            push(values, spec, cell, mapping, at)?;
        }
    }
    finish(table, columns)
}

fn read_ndjson(path: &Path, shown: &str, table: Table, mapping: &Mapping) -> Result<DataFrame> {
    let file = File::open(path).map_err(|err| Error::io(shown, err))?;
    let specs = table.columns();
    let own: Vec<&str> = specs.iter().map(|spec| mapping.own_name(spec)).collect();
    let mut columns: Vec<Values> = specs.iter().map(|spec| Values::new(spec.kind)).collect();
    let mut rows = 0usize;
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let number = index + 1;
        let line = line.map_err(|err| {
            Error::input(
                Location::source(shown).row(number),
                format!("cannot read the line: {err}"),
            )
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line).map_err(|err| {
            Error::input(
                Location::source(shown).row(number),
                format!("not valid JSON: {err}"),
            )
        })?;
        let serde_json::Value::Object(object) = value else {
            return Err(Error::input(
                Location::source(shown).row(number),
                format!(
                    "each line must be a JSON object, found {}",
                    json_type(&value)
                ),
            ));
        };
        if let Some(unknown) = object.keys().find(|key| !own.contains(&key.as_str())) {
            return Err(Error::input(
                Location::source(shown).row(number).column(unknown),
                format!(
                    "not a field of `{}` (expected: {})",
                    table.name(),
                    own.join(", ")
                ),
            ));
        }
        for ((spec, name), values) in specs.iter().zip(&own).zip(columns.iter_mut()) {
            let cell = object.get(*name).map(Cell::Json).unwrap_or(Cell::Null);
            let at = || Location::source(shown).row(number).column(*name);
            push(values, spec, cell, mapping, at)?;
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(Error::input(
            Location::source(shown),
            "the file has no records",
        ));
    }
    finish(table, columns)
}

/// A canonical table from Parquet held in memory (a snapshot's file, once its hash is
/// checked), with the columns in `skip` (nullable ones, for reads that will not use them) left
/// NULL and undecoded. A skipped column whose type would have to be checked value by value, or
/// is refused, is read and checked all the same: leaving a column unread never lets a wrong
/// one through.
pub fn read_parquet_bytes(
    bytes: Vec<u8>,
    shown: &str,
    table: Table,
    skip: &[&str],
) -> Result<DataFrame> {
    parquet_frame(bytes, shown, table, &Mapping::default(), skip)
}

fn read_parquet(path: &Path, shown: &str, table: Table, mapping: &Mapping) -> Result<DataFrame> {
    let bytes = std::fs::read(path).map_err(|err| Error::io(shown, err))?;
    parquet_frame(bytes, shown, table, mapping, &[])
}

fn parquet_frame(
    bytes: Vec<u8>,
    shown: &str,
    table: Table,
    mapping: &Mapping,
    skip: &[&str],
) -> Result<DataFrame> {
    let unreadable = |err: PolarsError| {
        Error::input(
            Location::source(shown),
            format!("not a readable Parquet file: {err}"),
        )
    };
    let bytes = polars_buffer::Buffer::from(bytes);
    let mut reader = ParquetReader::new(std::io::Cursor::new(bytes.as_ref()));
    let mut kept: Option<Vec<String>> = None;
    if !skip.is_empty() {
        let schema = reader.schema().map_err(unreadable)?;
        let unread = |name: &str, field: &ArrowField| {
            skip.contains(&name)
                && table.columns().iter().any(|spec| {
                    spec.name == name
                        && spec.nullable
                        && taken_as_typed(spec, &DataType::from_arrow_field(field), mapping)
                            == Some(true)
                })
        };
        kept = Some(
            schema
                .iter()
                .filter(|(name, field)| !unread(name, field))
                .map(|(name, _)| name.to_string())
                .collect(),
        );
    }
    // One chunk per column: the audit reads columns as single arrays (`cells::one_chunk`).
    // The decoder writes each column into one array as it decodes it; a file it does not read
    // is read by polars, whose row groups are then joined.
    let df = match super::parquet_columns::decode(&bytes, kept.as_deref()) {
        Some(df) => df,
        None => reader
            .set_rechunk(true)
            .with_columns(kept)
            .finish()
            .map_err(unreadable)?,
    };
    let headers: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|name| name.to_string())
        .collect();
    let positions = locate(&headers, table, mapping, shown)?;
    let height = df.height();
    let mut out = Vec::with_capacity(positions.len());
    for (spec, position) in table.columns().iter().zip(positions) {
        let Some(index) = position else {
            out.push(Column::full_null(
                spec.name.into(),
                height,
                &spec.kind.dtype(),
            ));
            continue;
        };
        let column = &df.columns()[index];
        let own = mapping.own_name(spec);
        let converted = parquet_column(column, spec, mapping, shown, own)?;
        out.push(converted.with_name(spec.name.into()));
    }
    DataFrame::new(height, out).engine("assembling a canonical table from Parquet")
}

/// How a Parquet column of type `dtype` is read as `spec`: Some(true) as it is (matching
/// types), Some(false) checked value by value (text or integers where the column is text,
/// time or a mapped phase), None refused.
fn taken_as_typed(spec: &ColumnSpec, dtype: &DataType, mapping: &Mapping) -> Option<bool> {
    match (spec.kind, dtype) {
        (Kind::Text, DataType::String) => Some(mapping.phases.is_none() || spec.name != "phase"),
        (Kind::Int, dt) if dt.is_integer() => Some(true),
        (Kind::Time, DataType::Datetime(_, _)) => Some(true),
        (_, DataType::String) | (Kind::Time, _)
            if dtype.is_integer() || *dtype == DataType::String =>
        {
            Some(false)
        }
        (Kind::Text, DataType::Null)
        | (Kind::Int, DataType::Null)
        | (Kind::Time, DataType::Null) => Some(true),
        _ => None,
    }
}

/// Converts a Parquet column: matching types pass through; text holding timestamps or numbers
/// is checked value by value like CSV; anything else is refused.
fn parquet_column(
    column: &Column,
    spec: &ColumnSpec,
    mapping: &Mapping,
    shown: &str,
    own: &str,
) -> Result<Column> {
    let dtype = column.dtype().clone();
    let refuse = || {
        Error::input(
            Location::source(shown).column(own),
            format!(
                "has type {dtype}, but `{}` is a {}",
                spec.name,
                spec.kind.describe()
            ),
        )
    };
    let passthrough = match taken_as_typed(spec, &dtype, mapping) {
        Some(passthrough) => passthrough,
        None => return Err(refuse()),
    };
    let converted = if passthrough {
        let converted = match (spec.kind, &dtype) {
            // A zone-aware column already holds UTC instants; drop the zone, keep the instant.
            (Kind::Time, DataType::Datetime(unit, _)) => {
                column.cast(&DataType::Int64).and_then(|physical| {
                    let micros = match unit {
                        TimeUnit::Nanoseconds => physical
                            .as_materialized_series()
                            .i64()?
                            .apply_values(|v| v / 1_000),
                        TimeUnit::Microseconds => physical.as_materialized_series().i64()?.clone(),
                        // A product past i64 is out of range: it is refused below.
                        TimeUnit::Milliseconds => physical
                            .as_materialized_series()
                            .i64()?
                            .apply_values(|v| v.checked_mul(1_000).unwrap_or(i64::MAX)),
                    };
                    Ok(micros
                        .into_datetime(crate::model::TIME_UNIT, None)
                        .into_column())
                })
            }
            // Strict: an integer the column's type cannot hold (a UInt64 above i64::MAX) is
            // refused, not read as NULL.
            _ => column.strict_cast(&spec.kind.dtype()),
        };
        let converted = converted
            .map_err(|err| Error::input(Location::source(shown).column(own), err.to_string()))?;
        if spec.kind == Kind::Time {
            check_time_range(&converted, shown, own)?;
        }
        converted
    } else {
        let mut values = Values::new(spec.kind);
        let series = column.as_materialized_series();
        if let Ok(texts) = series.str() {
            for (row, text) in texts.iter().enumerate() {
                let cell = text.map(Cell::Text).unwrap_or(Cell::Null);
                push(&mut values, spec, cell, mapping, || {
                    Location::source(shown).row(row + 1).column(own)
                })?;
            }
        } else {
            let numbers = series.cast(&DataType::Int64).map_err(|_| refuse())?;
            for (row, number) in numbers.i64().map_err(|_| refuse())?.iter().enumerate() {
                let text = number.map(|n| n.to_string());
                let cell = text.as_deref().map(Cell::Text).unwrap_or(Cell::Null);
                push(&mut values, spec, cell, mapping, || {
                    Location::source(shown).row(row + 1).column(own)
                })?;
            }
        }
        values.into_column(spec.name)
    };
    if !spec.nullable && converted.null_count() > 0 {
        let row = converted
            .is_null()
            .iter()
            .position(|null| null == Some(true))
            .unwrap_or(0)
            + 1;
        return Err(Error::input(
            Location::source(shown).row(row).column(own),
            format!("`{}` is empty, but every row needs one", spec.name),
        ));
    }
    Ok(converted)
}

/// Refuses a typed time column holding an instant outside the canonical range
/// ([`timestamp::in_range`]), naming its first such row: text times are parsed into
/// that range, and every later step (key templates, labels, reports) formats them.
fn check_time_range(column: &Column, shown: &str, own: &str) -> Result<()> {
    let micros = column
        .cast(&DataType::Int64)
        .engine("checking a time column")?;
    let micros = micros.i64().engine("checking a time column")?;
    // One pass over each chunk's values, NULL slots included whatever they hold (a loop the
    // compiler vectorises): when they are all in range, so is every cell. Otherwise the cells
    // are read with their validity, for the first one out of range, if a NULL slot was not
    // all that was.
    let whole_in_range = micros.downcast_iter().all(|array| {
        let values = array.values().as_slice();
        let (low, high) = (values.iter()).fold((i64::MAX, i64::MIN), |(low, high), &value| {
            (low.min(value), high.max(value))
        });
        values.is_empty() || (timestamp::in_range(low) && timestamp::in_range(high))
    });
    if whole_in_range {
        return Ok(());
    }
    let in_range = |value: Option<i64>| value.is_none_or(timestamp::in_range);
    let Some(row) = micros.iter().position(|value| !in_range(value)) else {
        return Ok(());
    };
    Err(Error::input(
        Location::source(shown).row(row + 1).column(own),
        format!(
            "{} µs is not a time onceonly reads ({})",
            micros.get(row).unwrap_or_default(),
            timestamp::RANGE
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_parquet(df: &mut DataFrame) -> tempfile::NamedTempFile {
        let file = tempfile::Builder::new()
            .suffix(".parquet")
            .tempfile()
            .unwrap();
        ParquetWriter::new(std::fs::File::create(file.path()).unwrap())
            .finish(df)
            .unwrap();
        file
    }

    #[test]
    fn parquet_with_canonical_and_text_typed_columns() {
        // created_at as text and a zone-aware column must both arrive as UTC microseconds.
        let mut df = df! {
            "external_id" => ["exp_1", "exp_2"],
            "created_at" => ["2026-11-01T12:00:00+02:00", "1793527200"],
            "status" => ["live", "cancelled"],
            "interval_start" => [Some(1_793_527_200_000i64), None],
        }
        .unwrap();
        df.apply("interval_start", |column| {
            column
                .cast(&DataType::Datetime(TimeUnit::Milliseconds, None))
                .unwrap()
        })
        .unwrap();
        let file = write_parquet(&mut df);
        let provider = read(file.path(), Table::Provider, &Mapping::default()).unwrap();
        assert_eq!(provider.schema().as_ref(), &Table::Provider.schema());
        let created: Vec<Option<i64>> = crate::cells::ints(&provider, "created_at").unwrap();
        assert_eq!(
            created,
            vec![Some(1_793_527_200_000_000), Some(1_793_527_200_000_000)]
        );
        let start = crate::cells::ints(&provider, "interval_start").unwrap();
        assert_eq!(start, vec![Some(1_793_527_200_000_000), None]);
    }

    #[test]
    fn parquet_wrong_type_and_bad_text_are_named() {
        let mut df = df! {
            "external_id" => ["exp_1"],
            "created_at" => [true],
            "status" => ["live"],
        }
        .unwrap();
        let file = write_parquet(&mut df);
        let message = read(file.path(), Table::Provider, &Mapping::default())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("column `created_at`") && message.contains("timestamp"),
            "{message}"
        );

        let mut df = df! {
            "external_id" => ["exp_1", "exp_2"],
            "created_at" => ["2026-11-01T00:00:00Z", "noon"],
            "status" => ["live", "live"],
        }
        .unwrap();
        let file = write_parquet(&mut df);
        let message = read(file.path(), Table::Provider, &Mapping::default())
            .unwrap_err()
            .to_string();
        assert!(message.contains("row 2, column `created_at`"), "{message}");
    }

    /// A typed time outside years 0001–9999 (a milliseconds column whose microseconds overflow,
    /// or a microseconds one past the year 9999) is refused as bad input naming its row, as a
    /// text time would be, not left for a key template or a label to fail on.
    #[test]
    fn parquet_times_out_of_range_are_named() {
        let cases = [
            (TimeUnit::Milliseconds, i64::MAX / 10),
            (TimeUnit::Microseconds, 253_402_300_800_000_000),
            (TimeUnit::Microseconds, -62_135_596_800_000_001),
        ];
        for (unit, far) in cases {
            let mut df = df! {
                "external_id" => ["exp_1", "exp_2", "exp_3"],
                "created_at" => [Some(1_793_527_200_000i64), None, Some(far)],
                "status" => ["live", "live", "live"],
            }
            .unwrap();
            df.apply("created_at", |column| {
                column.cast(&DataType::Datetime(unit, None)).unwrap()
            })
            .unwrap();
            let file = write_parquet(&mut df);
            let err = read(file.path(), Table::Provider, &Mapping::default()).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains("row 3, column `created_at`") && message.contains("9999"),
                "{unit:?}: {message}"
            );
            assert!(matches!(err, Error::Input { .. }), "{unit:?}: {err:?}");
        }
    }

    /// What a NULL cell's slot holds is not a time: a slot out of range under a NULL is not
    /// refused, a cell out of range after it is, by its row.
    #[test]
    fn a_null_cells_slot_is_not_checked() {
        use polars_arrow::array::PrimitiveArray;
        use polars_arrow::bitmap::Bitmap;
        use polars_arrow::datatypes::ArrowDataType;
        let column = |values: Vec<i64>, valid: [bool; 3]| -> Column {
            let array = PrimitiveArray::new(
                ArrowDataType::Int64,
                values.into(),
                Some(Bitmap::from_iter(valid)),
            );
            Int64Chunked::with_chunk("created_at".into(), array)
                .into_series()
                .cast(&crate::model::utc())
                .unwrap()
                .into_column()
        };
        let (now, far) = (1_793_527_200_000_000, i64::MAX);
        let hidden = column(vec![now, far, now], [true, false, true]);
        check_time_range(&hidden, "provider.parquet", "created_at").unwrap();
        let shown = column(vec![now, far, far], [true, false, true]);
        let err = check_time_range(&shown, "provider.parquet", "created_at").unwrap_err();
        assert!(
            err.to_string().contains("row 3, column `created_at`"),
            "{err}"
        );
    }
}
