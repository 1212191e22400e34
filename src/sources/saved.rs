//! Saved snapshots (SPEC §2): what a run read, kept as evidence and re-read offline.
//!
//! `--save-snapshot DIR` writes one Parquet file per canonical table and `manifest.json`: the
//! sources as the report names them, the audit's window, row counts, each file's SHA-256, each
//! table's content hash ([`content`]) and one content hash over all three, which a plan made
//! from the same tables quotes as its inputs' fingerprint. `--from-snapshot DIR` checks every
//! file's hash before reading, so an audit from a snapshot is an audit of exactly what was
//! seen, and gives the same report.
//!
//! A snapshot of format 1 (before the tables' content hashes) is still read: its content hash
//! is over the files' hashes, and a plan made from it quotes that value, as it did then.
//! Secrets never reach a snapshot: sources are named as reports name them, without passwords.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{EngineContext, Error, Location, Result};
use crate::model::{ProviderWindow, SourceColumn, Table};
use crate::sources::Tables;
use crate::sources::{content, snapshot};

pub const MANIFEST: &str = "manifest.json";
/// Format 2: each table's content hash, and `content_hash` over those. Format 1 had neither
/// (its `content_hash` is over the files' SHA-256s); it is still read.
const FORMAT_VERSION: u32 = 2;
const FORMAT_FILES_HASHED: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format_version: u32,
    pub written_by: String,
    /// The audit's filters when the snapshot was taken.
    pub window: Window,
    pub tables: BTreeMap<String, TableEntry>,
    pub warnings: Vec<String>,
    /// SHA-256 over the tables' content hashes in table order (format 1: over the files'
    /// SHA-256s): one value to quote in an incident, and what a plan of these tables quotes.
    pub content_hash: String,
    /// When the saved tables were read from their sources, RFC 3339 (snapshots saved before
    /// it was kept have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Window {
    pub dag: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    /// The created-at window the provider was listed for, when it was listed.
    #[serde(default)]
    pub provider_from: Option<String>,
    #[serde(default)]
    pub provider_to: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TableEntry {
    pub file: String,
    pub source: String,
    pub rows: usize,
    /// The file's SHA-256.
    pub sha256: String,
    /// The table's content hash ([`content`]); absent from a format-1 snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_sha256: Option<String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    content::hex(&Sha256::digest(bytes))
}

/// A table as a snapshot file holds it.
fn parquet_bytes(frame: &DataFrame) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    ParquetWriter::new(&mut bytes)
        .with_statistics(StatisticsOptions::empty())
        .finish(&mut frame.clone())
        .engine("writing a snapshot table")?;
    Ok(bytes)
}

/// The inputs' fingerprint: the content hash a snapshot of these tables would have, so a plan
/// made from a snapshot and the snapshot's manifest quote the same value. Tables read from a
/// snapshot already have it, from the manifest, and are not hashed again.
pub fn fingerprint(tables: &Tables) -> Result<String> {
    if let Some(hash) = &tables.snapshot_hash {
        return Ok(hash.clone());
    }
    let hashes: Vec<String> = Table::ALL
        .iter()
        .map(|table| content::table_hash(tables.get(*table)))
        .collect::<Result<_>>()?;
    Ok(fingerprint_of(&hashes))
}

/// [`fingerprint`] from the hashes of the attempts, the journal and the provider
/// ([`content::table_hash`]), in that order.
pub fn fingerprint_of(hashes: &[String]) -> String {
    sha256_hex(hashes.join("\n").as_bytes())
}

/// The manifest's content hash from its tables' entries: over their content hashes, or for a
/// format-1 manifest over their files' hashes. None when a table has no hash of that kind.
fn content_hash(format_version: u32, tables: &BTreeMap<String, TableEntry>) -> Option<String> {
    let hashes: Option<Vec<String>> = Table::ALL
        .iter()
        .map(|table| {
            let entry = tables.get(table.name())?;
            if format_version == FORMAT_FILES_HASHED {
                Some(entry.sha256.clone())
            } else {
                entry.content_sha256.clone()
            }
        })
        .collect();
    Some(fingerprint_of(&hashes?))
}

/// Writes the tables and the manifest into `dir` (created if missing).
pub fn save(dir: &Path, tables: &Tables, window: Window) -> Result<Manifest> {
    let shown = dir.display().to_string();
    std::fs::create_dir_all(dir).map_err(|err| Error::io(&shown, err))?;
    // Each table is encoded and hashed on a thread of its own; the files are written in table
    // order, so the first error in that order is the one reported.
    // (the file's bytes, their SHA-256, the table's content hash)
    let encoded: Vec<Result<(Vec<u8>, String, String)>> = std::thread::scope(|threads| {
        let encoding: Vec<_> = Table::ALL
            .iter()
            .map(|&table| {
                threads.spawn(move || {
                    let started = std::time::Instant::now();
                    let frame = tables.get(table);
                    let bytes = parquet_bytes(frame)?;
                    let sha256 = sha256_hex(&bytes);
                    let content_sha256 = content::table_hash(frame)?;
                    crate::timing::phase(&format!("save:{}", table.name()), started);
                    Ok((bytes, sha256, content_sha256))
                })
            })
            .collect();
        encoding
            .into_iter()
            .map(|thread| thread.join().expect("saving a table does not panic"))
            .collect()
    });
    let mut entries = BTreeMap::new();
    for (table, encoded) in Table::ALL.into_iter().zip(encoded) {
        let (bytes, sha256, content_sha256) = encoded?;
        let frame = tables.get(table);
        let file = format!("{}.parquet", table.name());
        crate::output::file(&dir.join(&file), &bytes)?;
        entries.insert(
            table.name().to_string(),
            TableEntry {
                file,
                source: tables.origin(table).to_string(),
                rows: frame.height(),
                sha256,
                content_sha256: Some(content_sha256),
            },
        );
    }
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        written_by: format!("onceonly {}", env!("CARGO_PKG_VERSION")),
        window,
        content_hash: content_hash(FORMAT_VERSION, &entries)
            .expect("every table saved has its content hash"),
        tables: entries,
        warnings: tables.warnings.clone(),
        read_at: tables.read_at.map(crate::timestamp::format),
    };
    let mut text = serde_json::to_string_pretty(&manifest).expect("a manifest always serializes");
    text.push('\n');
    crate::output::file(&dir.join(MANIFEST), text.as_bytes())?;
    Ok(manifest)
}

/// Reads a saved snapshot, refusing one whose files do not match their recorded hashes.
/// The columns in `unread` (nullable ones, `model::READ_ON_DEMAND`) are left NULL rather than
/// decoded: an audit that reads none of them (the provider's `raw` JSON, the largest column of
/// the three tables, most of all) does not pay for them.
pub fn load(dir: &Path, unread: &[SourceColumn]) -> Result<(Tables, Manifest)> {
    let manifest_path = dir.join(MANIFEST);
    let shown = manifest_path.display().to_string();
    let text = std::fs::read_to_string(&manifest_path).map_err(|err| Error::io(&shown, err))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|err| {
        Error::input(
            Location::source(&shown),
            format!("not a snapshot manifest: {err}"),
        )
    })?;
    if ![FORMAT_FILES_HASHED, FORMAT_VERSION].contains(&manifest.format_version) {
        return Err(Error::input(
            Location::source(&shown),
            format!(
                "snapshot format {} is not one this onceonly reads ({FORMAT_FILES_HASHED} or {FORMAT_VERSION})",
                manifest.format_version
            ),
        ));
    }
    let mut entries = Vec::new();
    for table in Table::ALL {
        let entry = manifest.tables.get(table.name()).ok_or_else(|| {
            Error::input(
                Location::source(&shown),
                format!("the manifest lists no `{}` table", table.name()),
            )
        })?;
        if entry.file.contains('/') || entry.file.contains('\\') || entry.file.starts_with('.') {
            return Err(Error::input(
                Location::source(&shown),
                format!("file name {:?} leaves the snapshot folder", entry.file),
            ));
        }
        if manifest.format_version != FORMAT_FILES_HASHED && entry.content_sha256.is_none() {
            return Err(Error::input(
                Location::source(&shown),
                format!("the `{}` table has no content_sha256", table.name()),
            ));
        }
        entries.push((table, entry));
    }
    if content_hash(manifest.format_version, &manifest.tables).as_ref()
        != Some(&manifest.content_hash)
    {
        return Err(Error::input(
            Location::source(&shown),
            "content_hash does not match the tables' hashes",
        ));
    }
    // The tables are read, checked and decoded each on a thread of its own; the first error in
    // table order is the one reported.
    let mut frames = std::thread::scope(|threads| {
        let reading: Vec<_> = entries
            .iter()
            .map(|&(table, entry)| threads.spawn(move || read_table(dir, table, entry, unread)))
            .collect();
        reading
            .into_iter()
            .map(|thread| thread.join().expect("reading a table does not panic"))
            .collect::<Result<Vec<DataFrame>>>()
    })?;
    let origins: Vec<String> = entries
        .iter()
        .map(|(_, entry)| entry.source.clone())
        .collect();
    let provider = frames.pop().expect("three tables");
    let journal = frames.pop().expect("three tables");
    let attempts = frames.pop().expect("three tables");
    // Named as when they were read, so the audit from the snapshot is byte for byte the same.
    let origins: [String; 3] = origins.try_into().expect("three tables");
    Ok((
        Tables {
            attempts,
            journal,
            provider,
            warnings: manifest.warnings.clone(),
            origins,
            listed_window: manifest
                .window
                .provider_from
                .as_deref()
                .map(|_| ProviderWindow {
                    from: manifest
                        .window
                        .provider_from
                        .as_deref()
                        .and_then(crate::timestamp::parse),
                    to: manifest
                        .window
                        .provider_to
                        .as_deref()
                        .and_then(crate::timestamp::parse),
                }),
            snapshot_hash: Some(manifest.content_hash.clone()),
            read_at: manifest
                .read_at
                .as_deref()
                .and_then(crate::timestamp::parse),
        },
        manifest,
    ))
}

/// One table of a snapshot: its file's bytes, checked against the manifest's SHA-256, then
/// decoded (the very bytes that were checked, not the file read again) and counted.
fn read_table(
    dir: &Path,
    table: Table,
    entry: &TableEntry,
    unread: &[SourceColumn],
) -> Result<DataFrame> {
    let path = dir.join(&entry.file);
    let shown = path.display().to_string();
    let bytes = std::fs::read(&path).map_err(|err| Error::io(&shown, err))?;
    if sha256_hex(&bytes) != entry.sha256 {
        return Err(Error::input(
            Location::source(&shown),
            "the file changed since the snapshot was saved (its SHA-256 differs from the manifest's)",
        ));
    }
    let skip: Vec<&str> = unread
        .iter()
        .filter(|column| column.table == table)
        .map(|column| column.name)
        .collect();
    let frame = snapshot::read_parquet_bytes(bytes, &shown, table, &skip)?;
    if frame.height() != entry.rows {
        return Err(Error::input(
            Location::source(&shown),
            format!("{} rows, the manifest says {}", frame.height(), entry.rows),
        ));
    }
    Ok(frame)
}
