//! The content hash of a canonical table: what a plan quotes as its inputs' fingerprint and a
//! snapshot's manifest records (`content_sha256`, and `content_hash` over the three tables).
//!
//! It hashes the table's columns and values, not a file that holds them, so the same rows give
//! the same hash however they are encoded, chunked or compressed, and whichever polars version
//! writes the snapshot's Parquet. The encoding, fed to SHA-256 in this order:
//!
//! * `onceonly table content 1\n`;
//! * for each column, in the table's order: its name, a zero byte, its type's tag (`text`,
//!   `int`, `time` for microseconds since the epoch, `bool`; any other type is hashed as its
//!   text form, tagged with the type's name), a zero byte, the row count and the count of NULLs
//!   (8 bytes each);
//! * if the column has a NULL: a byte a row, 1 for a value and 0 for NULL;
//! * then a value a row, a NULL's being its type's zero (0, false, the empty text): an integer
//!   or timestamp as 8 bytes, a boolean as one byte, a text as its length in 4 bytes and its
//!   UTF-8 bytes.
//!
//! Every number is little-endian. The rows are framed as little as that, since SHA-256 over the
//! encoding is most of the time the hash takes.

use polars::prelude::*;
use sha2::{Digest, Sha256};

use crate::error::{EngineContext, Result};

/// The hex SHA-256 of a table's content (module docs).
pub fn table_hash(frame: &DataFrame) -> Result<String> {
    let mut hashing = Hashing::default();
    hashing.bytes(b"onceonly table content 1\n");
    for column in frame.columns() {
        column_content(&mut hashing, column.as_materialized_series())?;
    }
    Ok(hex(&hashing.finish()))
}

/// A digest as lowercase hex, as manifests and plans write it.
pub(super) fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn column_content(hashing: &mut Hashing, series: &Series) -> Result<()> {
    let (tag, series) = match series.dtype() {
        DataType::String => ("text".to_string(), series.clone()),
        DataType::Int64 => ("int".to_string(), series.clone()),
        DataType::Datetime(TimeUnit::Microseconds, None) => {
            ("time".to_string(), series.to_physical_repr().into_owned())
        }
        DataType::Boolean => ("bool".to_string(), series.clone()),
        other => (
            other.to_string(),
            series
                .cast(&DataType::String)
                .engine("hashing a column as text")?,
        ),
    };
    hashing.bytes(series.name().as_bytes());
    hashing.bytes(&[0]);
    hashing.bytes(tag.as_bytes());
    hashing.bytes(&[0]);
    hashing.bytes(&(series.len() as u64).to_le_bytes());
    hashing.bytes(&(series.null_count() as u64).to_le_bytes());
    if series.null_count() > 0 {
        for valid in series.is_not_null().iter() {
            hashing.bytes(&[valid == Some(true)].map(u8::from));
        }
    }
    match series.dtype() {
        DataType::String => {
            for array in series
                .str()
                .engine("hashing a text column")?
                .downcast_iter()
            {
                for value in array.iter() {
                    let text = value.unwrap_or_default();
                    hashing.bytes(&(text.len() as u32).to_le_bytes());
                    hashing.bytes(text.as_bytes());
                }
            }
        }
        DataType::Int64 => {
            let whole = series.null_count() == 0;
            for array in series
                .i64()
                .engine("hashing an integer column")?
                .downcast_iter()
            {
                if whole {
                    for values in array.values().chunks(BUFFER / 16) {
                        hashing.each(values, |value| value.to_le_bytes());
                    }
                } else {
                    for value in array.iter() {
                        hashing.bytes(&value.copied().unwrap_or_default().to_le_bytes());
                    }
                }
            }
        }
        _ => {
            for value in series.bool().engine("hashing a boolean column")?.iter() {
                hashing.bytes(&[value == Some(true)].map(u8::from));
            }
        }
    }
    Ok(())
}

/// SHA-256 fed through a buffer of its own: a table is tens of millions of small pieces, and
/// one `update` a piece costs more than the hashing.
struct Hashing {
    sha: Sha256,
    buffer: Vec<u8>,
}

const BUFFER: usize = 64 * 1024;

impl Default for Hashing {
    fn default() -> Self {
        Hashing {
            sha: Sha256::new(),
            buffer: Vec::with_capacity(BUFFER),
        }
    }
}

impl Hashing {
    #[inline]
    fn bytes(&mut self, bytes: &[u8]) {
        if self.buffer.len() + bytes.len() > BUFFER {
            self.sha.update(&self.buffer);
            self.buffer.clear();
            if bytes.len() > BUFFER {
                self.sha.update(bytes);
                return;
            }
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// Each value's bytes, `N` a value, for at most `BUFFER / N` values.
    fn each<T: Copy, const N: usize>(&mut self, values: &[T], bytes: impl Fn(T) -> [u8; N]) {
        if self.buffer.len() + values.len() * N > BUFFER {
            self.sha.update(&self.buffer);
            self.buffer.clear();
        }
        self.buffer
            .extend(values.iter().flat_map(|&value| bytes(value)));
    }

    fn finish(mut self) -> Vec<u8> {
        self.sha.update(&self.buffer);
        self.sha.finalize().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ids: &[Option<&str>], times: &[Option<i64>]) -> DataFrame {
        let ids = Column::new("id".into(), ids);
        let times = Column::new("created".into(), times)
            .cast(&crate::model::utc())
            .unwrap();
        DataFrame::new_infer_height(vec![ids, times]).unwrap()
    }

    /// The hash is the rows', not their memory's: a table in several chunks hashes as it does
    /// in one, with or without NULLs.
    #[test]
    fn the_same_rows_in_other_chunks_have_the_same_hash() {
        let ids: Vec<String> = (0..50_000).map(|row| format!("object-{row}")).collect();
        // Every seventh id and every eleventh time NULL, in both pieces.
        let ids: Vec<Option<&str>> = (ids.iter().enumerate())
            .map(|(row, id)| (row % 7 != 0).then_some(id.as_str()))
            .collect();
        let times: Vec<Option<i64>> = (0..50_000)
            .map(|row| (row % 11 != 0).then_some(row))
            .collect();
        let whole = frame(&ids, &times);
        let mut pieces = frame(&ids[..20_000], &times[..20_000]);
        pieces
            .vstack_mut(&frame(&ids[20_000..], &times[20_000..]))
            .unwrap();
        assert!(pieces.first_col_n_chunks() > 1);
        assert_eq!(table_hash(&whole).unwrap(), table_hash(&pieces).unwrap());
        let (whole, pieces) = (
            whole.drop_nulls::<String>(None).unwrap(),
            pieces.drop_nulls::<String>(None).unwrap(),
        );
        assert!(pieces.first_col_n_chunks() > 1 && whole.height() < 50_000);
        assert_eq!(table_hash(&whole).unwrap(), table_hash(&pieces).unwrap());
    }

    /// Each part of the content counts: a value, a NULL against an empty text or a zero, a
    /// text's boundary, a column's name, its type, the columns' order.
    #[test]
    fn any_change_to_the_content_changes_the_hash() {
        let base = frame(&[Some("a"), Some("bc")], &[Some(1), Some(2)]);
        let hash = table_hash(&base).unwrap();
        let changed = [
            frame(&[Some("a"), Some("bd")], &[Some(1), Some(2)]),
            frame(&[Some("ab"), Some("c")], &[Some(1), Some(2)]),
            frame(&[Some("a"), Some("bc")], &[Some(1), Some(3)]),
            frame(&[Some(""), Some("bc")], &[Some(1), Some(2)]),
            frame(&[None, Some("bc")], &[Some(1), Some(2)]),
            frame(&[Some("a"), Some("bc")], &[Some(0), Some(2)]),
            frame(&[Some("a"), Some("bc")], &[None, Some(2)]),
            base.clone().rename("id", "key".into()).unwrap().clone(),
            {
                let mut other = base.clone();
                other
                    .with_column(
                        other
                            .column("created")
                            .unwrap()
                            .cast(&DataType::Int64)
                            .unwrap(),
                    )
                    .unwrap();
                other
            },
            base.select(["created", "id"]).unwrap(),
        ];
        for (index, other) in changed.iter().enumerate() {
            assert_ne!(table_hash(other).unwrap(), hash, "change {index}");
        }
        assert_eq!(table_hash(&base.clone()).unwrap(), hash);
    }
}
