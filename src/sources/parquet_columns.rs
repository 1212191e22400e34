//! A Parquet file's flat columns decoded page by page straight into one array each.
//!
//! polars' reader decodes each row group into arrays of its own and then joins them into one
//! (`set_rechunk`), copying every column a second time; the audit reads each column as one
//! array. This decoder writes every page of a column into the array the column ends up in: an
//! integer or timestamp column's values into one vector, a text column's views into one vector,
//! their strings left in the decompressed page (or dictionary page) they were read from.
//!
//! It reads what onceonly's snapshots hold, and files like them: flat columns of text
//! (`BYTE_ARRAY` as UTF-8) and of 64-bit integers and timestamps (`INT64`), in data pages of
//! version 1 or 2, `PLAIN` or dictionary encoded, under any compression polars reads. For a file
//! with anything else (another type, a nested column, another encoding) and for any page it
//! cannot decode, [`decode`] gives None: the caller then reads the file with polars' reader,
//! which reads every case and names what is wrong with a file nothing can read. Where it gives a
//! frame, it is the frame polars' reader gives (`tests` compares the two).

use std::io::Cursor;

use polars::prelude::*;
use polars_arrow::array::{PrimitiveArray, Utf8ViewArray, View};
use polars_arrow::bitmap::MutableBitmap;
use polars_arrow::datatypes::ArrowDataType;
use polars_buffer::Buffer;
use polars_parquet::parquet::encoding::Encoding;
use polars_parquet::parquet::encoding::hybrid_rle::{HybridRleChunk, HybridRleDecoder};
use polars_parquet::parquet::metadata::FileMetadata;
use polars_parquet::parquet::page::{DataPage, DictPage, split_buffer};
use polars_parquet::parquet::read::{BasicDecompressor, get_page_iterator, read_metadata};
use polars_parquet::parquet::schema::types::PhysicalType;

/// The largest page (compressed or not) a page header may announce; past it the page is left
/// to polars' reader.
const MAX_PAGE: usize = 1 << 30;

/// The frame of `bytes` (a Parquet file) with the columns `keep` names (all of them when None),
/// in the file's order; None where this decoder does not read the file (see the module
/// documentation).
pub fn decode(bytes: &Buffer<u8>, keep: Option<&[String]>) -> Option<DataFrame> {
    let metadata = read_metadata(&mut Cursor::new(bytes.as_ref())).ok()?;
    let schema = polars_parquet::arrow::read::infer_schema(&metadata).ok()?;
    let rows: usize = metadata
        .row_groups
        .iter()
        .map(|group| group.num_rows())
        .sum();
    if rows != metadata.num_rows || rows == 0 {
        return None;
    }
    let columns: Vec<Wanted> = schema
        .iter_values()
        .filter(|field| keep.is_none_or(|keep| keep.iter().any(|name| name == field.name.as_str())))
        .map(|field| Wanted::of(&metadata, &field.name, &field.dtype))
        .collect::<Option<_>>()?;
    let decoded = crate::parallel::items(columns.len(), |at| {
        columns[at].decode(bytes, &metadata, rows)
    });
    let decoded: Vec<Column> = decoded.into_iter().collect::<Option<_>>()?;
    DataFrame::new(rows, decoded).ok()
}

/// What a column's values are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Values {
    Text,
    Int,
}

/// A column to decode: its name, the Arrow type polars gives it, and where its pages are.
struct Wanted {
    name: PlSmallStr,
    dtype: ArrowDataType,
    values: Values,
    /// Whether its pages carry definition levels (it may hold NULLs).
    nullable: bool,
    /// Its column chunk in each row group (the chunk's place among the group's), in order.
    chunks: Vec<usize>,
}

impl Wanted {
    /// None for a column this decoder does not read.
    fn of(metadata: &FileMetadata, name: &PlSmallStr, dtype: &ArrowDataType) -> Option<Wanted> {
        let values = match dtype {
            ArrowDataType::Utf8View | ArrowDataType::LargeUtf8 | ArrowDataType::Utf8 => {
                Values::Text
            }
            ArrowDataType::Int64 | ArrowDataType::Timestamp(..) => Values::Int,
            _ => return None,
        };
        let physical = match values {
            Values::Text => PhysicalType::ByteArray,
            Values::Int => PhysicalType::Int64,
        };
        let mut chunks = Vec::with_capacity(metadata.row_groups.len());
        let mut nullable = None;
        for group in &metadata.row_groups {
            let [index] = group.columns_idxs_under_root_iter(name)? else {
                return None;
            };
            let chunk = group.parquet_columns().get(*index)?;
            let descriptor = &chunk.descriptor().descriptor;
            if chunk.descriptor().path_in_schema.len() != 1
                || descriptor.primitive_type.physical_type != physical
                || descriptor.max_rep_level != 0
                || descriptor.max_def_level > 1
                || *nullable.get_or_insert(descriptor.max_def_level == 1)
                    != (descriptor.max_def_level == 1)
            {
                return None;
            }
            chunks.push(*index);
        }
        Some(Wanted {
            name: name.clone(),
            dtype: match values {
                Values::Text => ArrowDataType::Utf8View,
                Values::Int => dtype.clone(),
            },
            values,
            nullable: nullable.unwrap_or(false),
            chunks,
        })
    }

    fn decode(&self, bytes: &Buffer<u8>, metadata: &FileMetadata, rows: usize) -> Option<Column> {
        let mut column = Decoded::new(self.values, rows);
        for (&index, group) in self.chunks.iter().zip(&metadata.row_groups) {
            let start = column.len();
            let chunk = &group.parquet_columns()[index];
            let reader =
                get_page_iterator(chunk, Cursor::new(bytes.clone()), Vec::new(), MAX_PAGE).ok()?;
            let mut pages = BasicDecompressor::new(reader, Vec::new());
            let dictionary = match pages.read_dict_page().ok()? {
                Some(page) => Some(column.dictionary(page)?),
                None => None,
            };
            while let Some(page) = pages.next() {
                let page = page.ok()?.decompress(&mut pages).ok()?;
                if let Some(page) = column.page(page, self.nullable, dictionary.as_ref())? {
                    pages.reuse_page_buffer(page);
                }
                if column.len() > start + group.num_rows() {
                    return None;
                }
            }
            if column.len() != start + group.num_rows() {
                return None;
            }
        }
        column.into_column(self.name.clone(), self.dtype.clone())
    }
}

/// A column's values so far, and which of them are NULL.
struct Decoded {
    values: Cells,
    /// Which values are present.
    validity: crate::cells::Validity,
}

enum Cells {
    Int(Vec<i64>),
    Text {
        views: Vec<View>,
        /// The decompressed pages and dictionaries the views point into.
        buffers: Vec<Buffer<u8>>,
        /// The bytes of every string, for the array's metadata.
        bytes: usize,
    },
}

/// A column chunk's dictionary: its values, as the data pages' indices name them.
enum Dictionary {
    Int(Vec<i64>),
    Text(Vec<View>),
}

impl Dictionary {
    fn len(&self) -> usize {
        match self {
            Dictionary::Int(values) => values.len(),
            Dictionary::Text(views) => views.len(),
        }
    }
}

impl Decoded {
    fn new(values: Values, rows: usize) -> Decoded {
        Decoded {
            values: match values {
                Values::Int => Cells::Int(Vec::with_capacity(rows)),
                Values::Text => Cells::Text {
                    views: Vec::with_capacity(rows),
                    buffers: Vec::new(),
                    bytes: 0,
                },
            },
            validity: crate::cells::Validity::default(),
        }
    }

    fn len(&self) -> usize {
        match &self.values {
            Cells::Int(values) => values.len(),
            Cells::Text { views, .. } => views.len(),
        }
    }

    /// The values of a dictionary page (PLAIN encoded); a text dictionary's buffer is kept for
    /// the views that name its strings.
    fn dictionary(&mut self, page: DictPage) -> Option<Dictionary> {
        match &mut self.values {
            Cells::Int(_) => {
                let values = page.buffer.get(..page.num_values.checked_mul(8)?)?;
                Some(Dictionary::Int(
                    values.chunks_exact(8).map(little_endian).collect(),
                ))
            }
            Cells::Text { buffers, .. } => {
                let index = u32::try_from(buffers.len()).ok()?;
                let buffer = owned(page.buffer);
                let mut views = Vec::with_capacity(page.num_values);
                let mut strings = PlainStrings::new(&buffer, 0);
                for _ in 0..page.num_values {
                    let (offset, text) = strings.next()?;
                    views.push(View::new_from_bytes(text, index, offset));
                }
                if views.iter().any(|view| !view.is_inline()) {
                    buffers.push(buffer);
                }
                Some(Dictionary::Text(views))
            }
        }
    }

    /// Appends a data page's rows. Gives the page back when its buffer can be reused for the
    /// next one (the column keeps the buffers its views point into).
    fn page(
        &mut self,
        mut page: DataPage,
        nullable: bool,
        dictionary: Option<&Dictionary>,
    ) -> Option<Option<DataPage>> {
        let rows = page.num_values();
        let split = split_buffer(&page).ok()?;
        if !split.rep.is_empty() {
            return None;
        }
        let before = self.len();
        // Which rows of the page are present, where some are not.
        let present = if nullable {
            if page.definition_level_encoding() != Encoding::Rle {
                return None;
            }
            levels(split.def, rows)?
        } else {
            None
        };
        let count = present.as_ref().map_or(rows, |present| present.set_bits());
        let values = split.values;
        // Where the values start in the page's buffer, for views into it.
        let values_at = values.as_ptr() as usize - page.buffer().as_ptr() as usize;
        let mut keep_buffer = false;
        match (page.encoding(), dictionary, &mut self.values) {
            (Encoding::Plain, _, Cells::Int(out)) => {
                let values = values.get(..count.checked_mul(8)?)?;
                let values = values.chunks_exact(8).map(little_endian);
                push_present(out, present.as_ref(), rows, values)?;
            }
            (Encoding::Plain, _, Cells::Text { views, buffers, .. }) => {
                let index = u32::try_from(buffers.len()).ok()?;
                let mut strings = PlainStrings::new(values, values_at);
                let mut failed = false;
                let strings = std::iter::from_fn(|| {
                    let view = strings
                        .next()
                        .map(|(offset, text)| View::new_from_bytes(text, index, offset));
                    failed |= view.is_none();
                    keep_buffer |= view.is_some_and(|view| !view.is_inline());
                    view
                });
                push_present(views, present.as_ref(), rows, strings)?;
                if failed {
                    return None;
                }
            }
            (Encoding::RleDictionary | Encoding::PlainDictionary, Some(dictionary), cells) => {
                let (&width, indices) = values.split_first()?;
                if width > 32 {
                    return None;
                }
                let indices = HybridRleDecoder::new(indices, u32::from(width), count)
                    .collect()
                    .ok()?;
                if indices.len() != count
                    || indices
                        .iter()
                        .any(|&index| index as usize >= dictionary.len())
                {
                    return None;
                }
                match (dictionary, cells) {
                    (Dictionary::Int(values), Cells::Int(out)) => {
                        let cells = indices.iter().map(|&index| values[index as usize]);
                        push_present(out, present.as_ref(), rows, cells)?;
                    }
                    (Dictionary::Text(values), Cells::Text { views, .. }) => {
                        let cells = indices.iter().map(|&index| values[index as usize]);
                        push_present(views, present.as_ref(), rows, cells)?;
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
        if let Cells::Text { views, bytes, .. } = &mut self.values {
            *bytes += views[before..]
                .iter()
                .map(|view| view.length as usize)
                .sum::<usize>();
        }
        match present {
            Some(present) => self.validity.extend_from(&present.into(), before),
            None => self.validity.extend(rows, true, before),
        }
        if !keep_buffer {
            return Some(Some(page));
        }
        if let Cells::Text { buffers, .. } = &mut self.values {
            buffers.push(Buffer::from(std::mem::take(page.buffer_mut())));
        }
        Some(None)
    }

    fn into_column(self, name: PlSmallStr, dtype: ArrowDataType) -> Option<Column> {
        let validity = self.validity.finish();
        let array: Box<dyn polars_arrow::array::Array> = match self.values {
            Cells::Int(values) => Box::new(PrimitiveArray::new(dtype, values.into(), validity)),
            Cells::Text {
                views,
                buffers,
                bytes,
            } => {
                let total = buffers.iter().map(|buffer| buffer.len()).sum();
                // SAFETY: every view was made by `View::new_from_bytes` from bytes of the buffer
                // it names (its index among `buffers`, its offset in it) or inline, every
                // string was checked as UTF-8 (`PlainStrings`), a NULL row's view is the
                // default (empty, inline) one, `bytes` adds up the views' lengths and `total`
                // the buffers' lengths.
                Box::new(unsafe {
                    Utf8ViewArray::new_unchecked(
                        dtype,
                        views.into(),
                        buffers.into(),
                        validity,
                        Some(bytes),
                        total,
                    )
                })
            }
        };
        Series::from_arrow(name, array).ok().map(Column::from)
    }
}

/// A buffer the column can keep: the dictionary page's own, or a copy of the file's bytes it
/// was borrowed from.
fn owned(buffer: polars_parquet::parquet::CowBuffer) -> Buffer<u8> {
    match buffer {
        polars_parquet::parquet::CowBuffer::Borrowed(bytes) => bytes,
        polars_parquet::parquet::CowBuffer::Owned(bytes) => Buffer::from(bytes),
    }
}

fn little_endian(bytes: &[u8]) -> i64 {
    i64::from_le_bytes(bytes.try_into().expect("chunks of eight bytes"))
}

/// Appends a page's `rows` rows to `out`: the next of `values` for a present row, the default
/// for a NULL one. None when the values run out before the present rows do. With every row
/// present, the values are appended in one `extend` (for values of known length, as a slice's
/// indices or its eight-byte chunks give them, without a check a row).
fn push_present<T: Default>(
    out: &mut Vec<T>,
    present: Option<&MutableBitmap>,
    rows: usize,
    mut values: impl Iterator<Item = T>,
) -> Option<()> {
    match present {
        None => {
            let before = out.len();
            out.extend(values.by_ref().take(rows));
            (out.len() - before == rows).then_some(())
        }
        Some(present) => {
            out.reserve(rows);
            for present in present.iter().take(rows) {
                out.push(if present {
                    values.next()?
                } else {
                    T::default()
                });
            }
            Some(())
        }
    }
}

/// Which of `rows` rows are present, from their definition levels (one bit each, RLE/bit-packed
/// hybrid); None as the first value when every row is.
fn levels(encoded: &[u8], rows: usize) -> Option<Option<MutableBitmap>> {
    let mut present = MutableBitmap::with_capacity(rows);
    let mut levels = Vec::new();
    for chunk in HybridRleDecoder::new(encoded, 1, rows).into_chunk_iter() {
        match chunk.ok()? {
            HybridRleChunk::Rle(level, count) => present.extend_constant(count, level == 1),
            HybridRleChunk::Bitpacked(decoder) => {
                levels.clear();
                decoder.collect_into(&mut levels);
                for &level in &levels {
                    present.push(level == 1);
                }
            }
        }
    }
    if present.len() != rows {
        return None;
    }
    Some((present.unset_bits() > 0).then_some(present))
}

/// PLAIN-encoded strings (a four-byte length, then the bytes), each checked as UTF-8, with its
/// offset in the buffer the bytes are part of (`at`: where they start in it).
struct PlainStrings<'a> {
    bytes: &'a [u8],
    read: usize,
    at: usize,
    /// Whether every byte is ASCII, so every string is UTF-8 without checking it alone.
    ascii: bool,
}

impl<'a> PlainStrings<'a> {
    fn new(bytes: &'a [u8], at: usize) -> PlainStrings<'a> {
        PlainStrings {
            bytes,
            read: 0,
            at,
            ascii: bytes.is_ascii(),
        }
    }

    /// The next string's offset and bytes; None past the end or for a string that is not
    /// UTF-8.
    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        let length = self.bytes.get(self.read..self.read + 4)?;
        let length = u32::from_le_bytes(length.try_into().ok()?) as usize;
        let start = self.read + 4;
        let text = self.bytes.get(start..start.checked_add(length)?)?;
        if !self.ascii {
            std::str::from_utf8(text).ok()?;
        }
        self.read = start + length;
        Some((u32::try_from(self.at + start).ok()?, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parquet(
        frame: &DataFrame,
        options: impl Fn(ParquetWriter<&mut Vec<u8>>) -> ParquetWriter<&mut Vec<u8>>,
    ) -> Vec<u8> {
        let mut bytes = Vec::new();
        options(ParquetWriter::new(&mut bytes))
            .finish(&mut frame.clone())
            .unwrap();
        bytes
    }

    fn by_polars(bytes: &[u8]) -> DataFrame {
        ParquetReader::new(std::io::Cursor::new(bytes))
            .set_rechunk(true)
            .finish()
            .unwrap()
    }

    /// A frame with what snapshots hold: texts short and long, repeated and not, some not
    /// ASCII, with and without NULLs; integers and timestamps likewise.
    fn frame(rows: usize) -> DataFrame {
        let text = |row: usize| match row % 7 {
            0 => None,
            1 => Some(format!("orders:{}:a-key-longer-than-twelve-bytes", row / 3)),
            2 => Some("short".to_string()),
            3 => Some(format!("é{row}—ünïcode long enough to not be inline")),
            4 => Some(String::new()),
            _ => Some(format!("dag_{}", row % 20)),
        };
        let every = |row: usize| format!("exp_{row:09}");
        let int = |row: usize| (!row.is_multiple_of(5)).then_some(row as i64 * 1_000_003 - 7);
        let time =
            |row: usize| (!row.is_multiple_of(3)).then_some(1_700_000_000_000_000 + row as i64);
        DataFrame::new_infer_height(vec![
            Column::new("texts".into(), (0..rows).map(text).collect::<Vec<_>>()),
            Column::new("ids".into(), (0..rows).map(every).collect::<Vec<_>>()),
            Column::new(
                "low".into(),
                (0..rows)
                    .map(|row| format!("s{}", row % 3))
                    .collect::<Vec<_>>(),
            ),
            Column::new("ints".into(), (0..rows).map(int).collect::<Vec<_>>()),
            Column::new(
                "required".into(),
                (0..rows).map(|row| row as i64 % 11).collect::<Vec<_>>(),
            ),
            Column::new("times".into(), (0..rows).map(time).collect::<Vec<_>>())
                .cast(&DataType::Datetime(TimeUnit::Microseconds, None))
                .unwrap(),
            Column::new("nothing".into(), vec![None::<&str>; rows]),
        ])
        .unwrap()
    }

    fn same(expected: &DataFrame, decoded: &DataFrame) {
        assert_eq!(expected.schema(), decoded.schema());
        for (a, b) in expected.columns().iter().zip(decoded.columns()) {
            assert_eq!(a.null_count(), b.null_count(), "{}", a.name());
            assert!(
                a.as_materialized_series()
                    .equals_missing(b.as_materialized_series()),
                "{}",
                a.name()
            );
        }
    }

    /// Across row groups, page sizes and compressions, the frame is the one polars' reader
    /// gives, in one chunk per column.
    #[test]
    fn decodes_what_polars_decodes() {
        let frame = frame(20_000);
        let compressions = [
            ParquetCompression::Uncompressed,
            ParquetCompression::Zstd(None),
            ParquetCompression::Snappy,
            ParquetCompression::Lz4Raw,
        ];
        for compression in compressions {
            for (groups, page) in [
                (None, None),
                (Some(1_000), Some(4_096)),
                (Some(7_001), None),
            ] {
                let bytes = parquet(&frame, |writer| {
                    writer
                        .with_compression(compression)
                        .with_row_group_size(groups)
                        .with_data_page_size(page)
                });
                let decoded = decode(&Buffer::from(bytes.clone()), None)
                    .unwrap_or_else(|| panic!("{compression:?} {groups:?} {page:?}"));
                same(&by_polars(&bytes), &decoded);
                same(&frame, &decoded);
                assert!(
                    decoded
                        .columns()
                        .iter()
                        .all(|column| column.n_chunks() == 1)
                );
            }
        }
    }

    /// Only the columns asked for, in the file's order.
    #[test]
    fn decodes_the_columns_kept() {
        let frame = frame(100);
        let bytes = parquet(&frame, |writer| writer);
        let keep = ["times".to_string(), "texts".to_string()];
        let decoded = decode(&Buffer::from(bytes), Some(&keep)).unwrap();
        assert_eq!(decoded.get_column_names(), ["texts", "times"]);
        same(&frame.select(["texts", "times"]).unwrap(), &decoded);
    }

    /// A file with a type it does not read, a damaged page, or no rows is left to polars'
    /// reader.
    #[test]
    fn leaves_what_it_does_not_read_to_polars() {
        let floats =
            DataFrame::new_infer_height(vec![Column::new("x".into(), [1.5f64, 2.5])]).unwrap();
        assert!(decode(&Buffer::from(parquet(&floats, |writer| writer)), None).is_none());

        let empty = frame(0);
        assert!(decode(&Buffer::from(parquet(&empty, |writer| writer)), None).is_none());

        let frame = frame(5_000);
        let bytes = parquet(&frame, |writer| {
            writer.with_compression(ParquetCompression::Uncompressed)
        });
        assert!(decode(&Buffer::from(bytes.clone()), None).is_some());
        // Every byte of the pages' data, changed in turn: the decoder never panics, and what
        // it does decode is still a frame of the right shape.
        let metadata = read_metadata(&mut Cursor::new(&bytes[..])).unwrap();
        let end = metadata.row_groups[0].parquet_columns()[0]
            .byte_range()
            .start as usize
            + 400;
        for at in (4..end).step_by(3) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x5a;
            if let Some(decoded) = decode(&Buffer::from(damaged), None) {
                assert_eq!(decoded.height(), 5_000);
            }
        }
        // A string that is not UTF-8 is not decoded as text.
        let texts = DataFrame::new_infer_height(vec![Column::new(
            "t".into(),
            ["abcdefghijklmnop-1", "abcdefghijklmnop-2"],
        )])
        .unwrap();
        let mut bytes = parquet(&texts, |writer| {
            writer.with_compression(ParquetCompression::Uncompressed)
        });
        let at = bytes
            .windows(18)
            .position(|window| window == b"abcdefghijklmnop-2")
            .unwrap();
        bytes[at] = 0xff;
        assert!(decode(&Buffer::from(bytes), None).is_none());
    }
}
