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
//!   text form, tagged with the type's name), a zero byte, and the row count as 8 bytes;
//! * then each of the column's rows: a zero byte for NULL, else a one byte and the value: an
//!   integer or timestamp as 8 bytes, a boolean as one byte, a text as its length in 8 bytes and
//!   its UTF-8 bytes.
//!
//! Every number is little-endian.

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
    Ok(super::saved::hex(&hashing.finish()))
}

fn column_content(hashing: &mut Hashing, series: &Series) -> Result<()> {
    let tag = match series.dtype() {
        DataType::String => "text".to_string(),
        DataType::Int64 => "int".to_string(),
        DataType::Datetime(TimeUnit::Microseconds, None) => "time".to_string(),
        DataType::Boolean => "bool".to_string(),
        other => other.to_string(),
    };
    hashing.bytes(series.name().as_bytes());
    hashing.bytes(&[0]);
    hashing.bytes(tag.as_bytes());
    hashing.bytes(&[0]);
    hashing.bytes(&(series.len() as u64).to_le_bytes());
    match series.dtype() {
        DataType::String => texts(hashing, series.str().engine("hashing a text column")?),
        DataType::Int64 | DataType::Datetime(TimeUnit::Microseconds, None) => {
            let physical = series.to_physical_repr();
            integers(hashing, physical.i64().engine("hashing an integer column")?);
        }
        DataType::Boolean => {
            for value in series.bool().engine("hashing a boolean column")?.iter() {
                match value {
                    None => hashing.bytes(&[0]),
                    Some(value) => hashing.bytes(&[1, value as u8]),
                }
            }
        }
        _ => {
            let text = series
                .cast(&DataType::String)
                .engine("hashing a column as text")?;
            texts(hashing, text.str().engine("hashing a column as text")?);
        }
    }
    Ok(())
}

fn texts(hashing: &mut Hashing, column: &StringChunked) {
    for array in column.downcast_iter() {
        for value in array.iter() {
            match value {
                None => hashing.bytes(&[0]),
                Some(text) => {
                    hashing.bytes(&[1]);
                    hashing.bytes(&(text.len() as u64).to_le_bytes());
                    hashing.bytes(text.as_bytes());
                }
            }
        }
    }
}

fn integers(hashing: &mut Hashing, column: &Int64Chunked) {
    for array in column.downcast_iter() {
        for value in array.iter() {
            match value {
                None => hashing.bytes(&[0]),
                Some(value) => {
                    hashing.bytes(&[1]);
                    hashing.bytes(&value.to_le_bytes());
                }
            }
        }
    }
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
    /// in one.
    #[test]
    fn the_same_rows_in_other_chunks_have_the_same_hash() {
        let ids: Vec<String> = (0..50_000).map(|row| format!("object-{row}")).collect();
        let ids: Vec<Option<&str>> = ids.iter().map(|id| Some(id.as_str())).collect();
        let times: Vec<Option<i64>> = (0..50_000).map(Some).collect();
        let whole = frame(&ids, &times);
        let mut pieces = frame(&ids[..20_000], &times[..20_000]);
        pieces
            .vstack_mut(&frame(&ids[20_000..], &times[20_000..]))
            .unwrap();
        assert!(pieces.first_col_n_chunks() > 1);
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
