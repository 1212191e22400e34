//! Writing results: stdout that tolerates a closed pipe, files written atomically.

use std::io::{ErrorKind, Write};
use std::path::Path;

use polars::prelude::*;

use crate::error::{EngineContext, Error, Result};

/// Writes to stdout; a reader that went away (`onceonly audit | head -1`) is not an error.
pub fn stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|err| Error::io("stdout", err)),
    }
}

/// Writes a file through a temporary sibling and a rename, so a reader never sees half of it.
pub fn file(path: &Path, bytes: &[u8]) -> Result<()> {
    let shown = path.display().to_string();
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temporary, bytes)
        .map_err(|err| Error::io(temporary.display().to_string(), err))?;
    std::fs::rename(&temporary, path).map_err(|err| {
        let _ = std::fs::remove_file(&temporary);
        Error::io(&shown, err)
    })
}

/// The version of the verdict files (docs/verdicts.schema.json), in every row's last column.
pub const VERDICTS_FORMAT_VERSION: u32 = 1;

/// Verdicts as CSV (`.csv`) or NDJSON (anything else), one row per try in the order of
/// `prepare::TRY`, timestamps in RFC 3339, each row ending with `format_version`.
pub fn write_verdicts(path: &Path, verdicts: &DataFrame) -> Result<()> {
    let mut frame = verdicts
        .clone()
        .lazy()
        .sort(crate::prepare::TRY.to_vec(), Default::default())
        .with_columns([
            col("start_date").dt().strftime("%Y-%m-%dT%H:%M:%S%.6fZ"),
            col("end_date").dt().strftime("%Y-%m-%dT%H:%M:%S%.6fZ"),
            lit(VERDICTS_FORMAT_VERSION).alias("format_version"),
        ])
        .collect()
        .engine("formatting verdicts")?;
    let mut bytes = Vec::new();
    let is_csv = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("csv"));
    if is_csv {
        // Run ids, keys and ids come from Airflow and the provider: a cell a spreadsheet would
        // run as a formula gets a leading quote, as in the CSV report. Numbers stay numbers.
        let columns = frame
            .columns()
            .iter()
            .map(|column| match column.str() {
                Ok(texts) => texts
                    .apply_values(|text| crate::render::csv::defuse(text).into())
                    .into_column(),
                Err(_) => column.clone(),
            })
            .collect();
        frame = DataFrame::new_infer_height(columns).engine("defusing verdicts")?;
        CsvWriter::new(&mut bytes)
            .finish(&mut frame)
            .engine("writing verdicts")?;
    } else {
        JsonWriter::new(&mut bytes)
            .with_json_format(JsonFormat::JsonLines)
            .finish(&mut frame)
            .engine("writing verdicts")?;
    }
    file(path, &bytes)
}
