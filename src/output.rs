//! Writing results: stdout that tolerates a closed pipe; files written as the kind of thing
//! their path names, so that writing a report never destroys what it is written to.

use std::fs::FileType;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{EngineContext, Error, Result};

/// Writes to stdout; a reader that went away (`onceonly audit | head -1`) is not an error.
pub fn stdout(text: &str) -> Result<()> {
    stdout_bytes(text.as_bytes())
}

fn stdout_bytes(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|err| Error::io("stdout", err)),
    }
}

/// Writes `bytes` to the file `path` names, as the kind of file it is:
///
/// * `-`: stdout.
/// * a regular file or a path that does not exist yet: a temporary sibling renamed over it, so
///   a reader never sees half of it (an existing file keeps its permissions);
/// * a symbolic link: followed to the file it names, which is written as above; the link
///   stays (a link to nothing creates its target);
/// * a character device or a FIFO (`/dev/null`, `/dev/stdout`, a named pipe): written in
///   place, because a rename would replace the device or pipe with a regular file. A reader
///   of the pipe that went away is not an error.
///
/// A directory, block device or socket is refused.
pub fn file(path: &Path, bytes: &[u8]) -> Result<()> {
    if path == Path::new("-") {
        return stdout_bytes(bytes);
    }
    let shown = path.display().to_string();
    let target = follow_links(path).map_err(|err| Error::io(&shown, err))?;
    match std::fs::metadata(&target) {
        Err(err) if err.kind() == ErrorKind::NotFound => replace(&target, bytes, None, &shown),
        Err(err) => Err(Error::io(&shown, err)),
        Ok(metadata) if metadata.is_file() => {
            replace(&target, bytes, Some(metadata.permissions()), &shown)
        }
        Ok(metadata) if in_place(metadata.file_type()) => write_in_place(&target, bytes, &shown),
        Ok(metadata) => Err(Error::io(
            &shown,
            std::io::Error::other(format!(
                "is {}, not a file onceonly can write",
                kind(metadata.file_type())
            )),
        )),
    }
}

/// Where a chain of symbolic links ends: the path itself when it is no link, else the path
/// the last link names (relative targets taken from the link's folder), existing or not.
fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    // As many links as Linux follows before ELOOP.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(folder) if target.is_relative() => folder.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(current),
            Err(err) if err.kind() == ErrorKind::NotFound => return Ok(current),
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

fn in_place(file_type: FileType) -> bool {
    file_type.is_char_device() || file_type.is_fifo()
}

fn kind(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "an unknown kind of file"
    }
}

/// Writes `target` through a temporary sibling and a rename.
fn replace(
    target: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
    shown: &str,
) -> Result<()> {
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().to_string())
        .unwrap_or_default();
    let temporary = target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&temporary, bytes).and_then(|()| match permissions {
        Some(permissions) => std::fs::set_permissions(&temporary, permissions),
        None => Ok(()),
    });
    written
        .and_then(|()| std::fs::rename(&temporary, target))
        .map_err(|err| {
            let _ = std::fs::remove_file(&temporary);
            Error::io(shown, err)
        })
}

/// Writes into a device or pipe as it is (opening a FIFO waits for its reader).
fn write_in_place(target: &Path, bytes: &[u8], shown: &str) -> Result<()> {
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(target)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.flush()));
    match written {
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|err| Error::io(shown, err)),
    }
}

/// A cell starting with `= + - @` (or a tab or carriage return) is a formula to a spreadsheet;
/// a leading `'` keeps it text. Every CSV onceonly writes passes its text cells through here.
pub fn defuse(cell: &str) -> String {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{cell}"),
        _ => cell.to_string(),
    }
}

/// The version of the verdict files (docs/verdicts.schema.json), in every row's last column.
pub const VERDICTS_FORMAT_VERSION: u32 = 1;

/// Verdicts as CSV (`.csv`) or NDJSON (anything else), one row per try in the order of
/// [`crate::model::TRY`], timestamps in RFC 3339, each row ending with `format_version`.
pub fn write_verdicts(path: &Path, verdicts: &DataFrame) -> Result<()> {
    let mut frame = verdicts
        .clone()
        .lazy()
        .sort(crate::model::TRY.to_vec(), Default::default())
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
                Ok(texts) => texts.apply_values(|text| defuse(text).into()).into_column(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_of_links_is_followed_to_its_end_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("reports")).unwrap();
        std::os::unix::fs::symlink("reports/latest", dir.path().join("report")).unwrap();
        std::os::unix::fs::symlink("night-1.json", dir.path().join("reports/latest")).unwrap();
        file(&dir.path().join("report"), b"{}").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("reports/night-1.json")).unwrap(),
            b"{}"
        );
        assert!(
            std::fs::symlink_metadata(dir.path().join("reports/latest"))
                .unwrap()
                .file_type()
                .is_symlink()
        );

        let refused = file(&dir.path().join("reports"), b"{}").unwrap_err();
        assert!(refused.to_string().contains("is a directory"), "{refused}");
        std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
        assert!(file(&dir.path().join("loop"), b"{}").is_err());
    }
}
