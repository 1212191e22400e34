//! Reading columns and cells out of polars frames: as Rust values where findings are built,
//! and as arrays read row by row in the loops of the sources, prepare and the rules.

use polars::prelude::*;

use crate::error::{EngineContext, Result};

pub fn texts(df: &DataFrame, name: &str) -> Result<Vec<Option<String>>> {
    Ok(text_column(df, name)?
        .iter()
        .map(|value| value.map(str::to_string))
        .collect())
}

/// Integers, and timestamps as microseconds since the epoch.
pub fn ints(df: &DataFrame, name: &str) -> Result<Vec<Option<i64>>> {
    Ok(int_column(df, name)?.iter().collect())
}

/// A text column as polars holds it, for loops that borrow its cells instead of copying them.
/// A column of another type is cast to text (a text column is not copied).
pub fn text_column(df: &DataFrame, name: &str) -> Result<StringChunked> {
    Ok(cast(df, name, &DataType::String)?
        .str()
        .engine(name)?
        .clone())
}

/// An integer or timestamp column as `i64` (microseconds for timestamps), without copying the
/// values into a `Vec`.
pub fn int_column(df: &DataFrame, name: &str) -> Result<Int64Chunked> {
    Ok(cast(df, name, &DataType::Int64)?
        .i64()
        .engine(name)?
        .clone())
}

fn cast(df: &DataFrame, name: &str, to: &DataType) -> Result<Column> {
    df.column(name).engine(name)?.cast(to).engine(name)
}

/// A `u32` column: the row numbers and the dense key, id and run numbers `prepare` adds.
pub fn code_column(df: &DataFrame, name: &str) -> Result<UInt32Chunked> {
    Ok(df.column(name).engine(name)?.u32().engine(name)?.clone())
}

/// One array of text, for reading cells by row without finding the row's chunk first.
pub type TextArray = <StringType as PolarsDataType>::Array;
/// One array of integers, read by row like `TextArray`.
pub type IntArray = <Int64Type as PolarsDataType>::Array;

/// A column in one chunk, for reading cells by row (`get`) without finding the row's chunk
/// first (copied only if polars holds it in several).
pub fn one_chunk<T: PolarsDataType>(column: ChunkedArray<T>) -> ChunkedArray<T> {
    column.rechunk().into_owned()
}

/// A column's cells in one array (copied only if polars holds them in several chunks).
pub fn one_array<T: PolarsDataType>(column: &ChunkedArray<T>) -> T::Array
where
    T::Array: Clone,
{
    column.rechunk().downcast_as_array().clone()
}

/// The cells of a numeric column in row order, read from one array ([`one_array`]):
/// `ChunkedArray::iter` goes through an iterator over its chunks, flattened, several times
/// the work a cell.
pub fn each_number<T: PolarsNumericType>(
    column: &ChunkedArray<T>,
) -> impl Iterator<Item = Option<T::Native>> + use<T> {
    let array: polars_arrow::array::PrimitiveArray<T::Native> = one_array(column);
    (0..array.len()).map(move |row| array.get(row))
}

/// [`each_number`] for a boolean column.
pub fn each_flag(column: &BooleanChunked) -> impl Iterator<Item = Option<bool>> + use<> {
    let array = one_array(column);
    (0..array.len()).map(move |row| array.get(row))
}

/// A text column of few distinct values: row `i` is `distinct[rows[i]]`, NULL where
/// `rows[i]` is None. The values are written once and every row points at its own, so a
/// value's bytes are not copied once per row; each row's view is written in one pass.
pub fn repeated_texts<S: AsRef<str>>(
    name: &str,
    distinct: &[S],
    rows: impl Iterator<Item = Option<IdxSize>>,
) -> StringChunked {
    use polars_arrow::array::{Array, Utf8ViewArray, View};

    let values: StringChunked = distinct.iter().map(|text| Some(text.as_ref())).collect();
    let values = values.rechunk();
    let values = values.downcast_as_array();
    let distinct_views = values.views().as_slice();
    let mut views: Vec<View> = Vec::with_capacity(rows.size_hint().0);
    let mut validity = Validity::default();
    let mut bytes = 0usize;
    for row in rows {
        validity.push(row.is_some(), views.len());
        match row {
            Some(row) => {
                // Every row is below `distinct.len()`: the callers number the values they hold.
                let view = distinct_views[row as usize];
                bytes += view.length as usize;
                views.push(view);
            }
            None => views.push(View::default()),
        }
    }
    // SAFETY: every view is one of `values`' own (valid UTF-8 in its buffers, which the new
    // array shares) or the empty inline view of a NULL; `bytes` adds up their lengths.
    let array = unsafe {
        Utf8ViewArray::new_unchecked(
            values.dtype().clone(),
            views.into(),
            values.data_buffers().clone(),
            validity.finish(),
            Some(bytes),
            values.total_buffer_len(),
        )
    };
    StringChunked::with_chunk(name.into(), array)
}

/// A validity bitmap written only from the first NULL on: until then every cell is valid and
/// there is no bitmap.
#[derive(Default)]
pub struct Validity(Option<polars_arrow::bitmap::MutableBitmap>);

impl Validity {
    /// Records whether the cell at `at` (the cells before it recorded) is valid.
    #[inline]
    pub fn push(&mut self, valid: bool, at: usize) {
        if let Some(bits) = self.bits(valid, at) {
            bits.push(valid);
        }
    }

    /// Records `count` cells from `at` on, all valid or all NULL.
    pub fn extend(&mut self, count: usize, valid: bool, at: usize) {
        if let Some(bits) = self.bits(valid, at) {
            bits.extend_constant(count, valid);
        }
    }

    /// Records cells from `at` on, valid where `valid` is set.
    pub fn extend_from(&mut self, valid: &polars_arrow::bitmap::Bitmap, at: usize) {
        if valid.unset_bits() == 0 {
            self.extend(valid.len(), true, at);
        } else if let Some(bits) = self.bits(false, at) {
            bits.extend_from_bitmap(valid);
        }
    }

    /// The bitmap to record into: None while every cell is valid and `valid` is too.
    #[inline]
    fn bits(&mut self, valid: bool, at: usize) -> Option<&mut polars_arrow::bitmap::MutableBitmap> {
        if self.0.is_none() && !valid {
            let mut bits = polars_arrow::bitmap::MutableBitmap::new();
            bits.extend_constant(at, true);
            self.0 = Some(bits);
        }
        self.0.as_mut()
    }

    /// The bitmap, None when every cell is valid.
    pub fn finish(self) -> Option<polars_arrow::bitmap::Bitmap> {
        self.0.map(Into::into)
    }
}

/// `cell` of each cell of a text column, worked out once for each run of cells that share a
/// view ([`Runs`]).
pub fn each_text<T: Clone>(column: &StringChunked, cell: impl Fn(Option<&str>) -> T) -> Vec<T> {
    match Runs::of(&[column]) {
        Some(runs) => {
            // Runs are of a column in one array (`Runs::of`).
            let array = column.downcast_as_array();
            let per_run: Vec<T> = runs
                .starts()
                .iter()
                .map(|&row| cell(array.get(row as usize)))
                .collect();
            runs.spread(&per_run)
        }
        None => column.iter().map(cell).collect(),
    }
}

/// Rows in runs: rows one after another whose cells in each of some text columns have the same
/// view (the same bytes inline, or at the same place of the same buffer, as the cells of a
/// string a Parquet dictionary holds once) and the same validity hold the same values, so work
/// on their values is done once a run. Equal values in different views start runs of their
/// own: a run is never two values, but one value may be several runs.
pub struct Runs {
    /// The first row of each run.
    starts: Vec<u32>,
    rows: usize,
}

impl Runs {
    /// How many leading rows [`Runs::of`] looks at to tell whether runs are worth it.
    const SAMPLE: usize = 4096;

    /// The runs of `columns` (of one length); None where one has several chunks, or where the
    /// first rows are mostly runs of one row (each run would then be a row).
    pub fn of(columns: &[&StringChunked]) -> Option<Runs> {
        use polars_arrow::array::Array as _;

        let rows = columns.first()?.len();
        let mut arrays = Vec::with_capacity(columns.len());
        for column in columns {
            if column.chunks().len() != 1 || column.len() != rows {
                return None;
            }
            arrays.push(column.downcast_iter().next()?);
        }
        let cells: Vec<_> = arrays
            .iter()
            .map(|array| (array.views().as_slice(), array.validity()))
            .collect();
        // Whether each of the first `rows` rows starts a run, column by column: a pass over each
        // column's views (and validity) that compares each cell with the one before it.
        let run_starts = |rows: usize| {
            let mut starts = vec![false; rows];
            for (views, validity) in &cells {
                for (start, pair) in starts.iter_mut().skip(1).zip(views[..rows].windows(2)) {
                    *start |= pair[0].as_u128() != pair[1].as_u128();
                }
                if let Some(valid) = validity {
                    let (before, now) = (valid.iter(), valid.iter().skip(1));
                    for ((start, before), now) in starts.iter_mut().skip(1).zip(before).zip(now) {
                        *start |= before != now;
                    }
                }
            }
            starts
        };
        let sampled = rows.min(Self::SAMPLE);
        let sample_runs = run_starts(sampled).iter().skip(1).filter(|&&s| s).count() + 1;
        if sampled == 0 || sample_runs * 4 > sampled * 3 {
            return None;
        }
        let starts = std::iter::once(0)
            .chain(
                (1..rows as u32)
                    .zip(run_starts(rows).into_iter().skip(1))
                    .filter_map(|(row, start)| start.then_some(row)),
            )
            .collect();
        Some(Runs { starts, rows })
    }

    pub fn count(&self) -> usize {
        self.starts.len()
    }

    /// The first row of each run.
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// Each row's value, from each run's.
    pub fn spread<T: Clone>(&self, per_run: &[T]) -> Vec<T> {
        let mut all = Vec::with_capacity(self.rows);
        for (at, value) in per_run.iter().enumerate() {
            let end = self
                .starts
                .get(at + 1)
                .map_or(self.rows, |&next| next as usize);
            all.resize(end, value.clone());
        }
        all
    }
}

/// A numeric column of optional values, written in one pass: the values, and a validity
/// bitmap only if one is None.
pub fn numbers<T: PolarsNumericType>(
    name: &str,
    values: impl Iterator<Item = Option<T::Native>>,
) -> ChunkedArray<T> {
    let mut out: Vec<T::Native> = Vec::with_capacity(values.size_hint().0);
    let mut validity = Validity::default();
    for value in values {
        validity.push(value.is_some(), out.len());
        out.push(value.unwrap_or_default());
    }
    ChunkedArray::from_vec_validity(name.into(), out, validity.finish())
}

/// A code column from codes with `null` for a NULL cell: the codes become the column's values
/// as they are, and a validity bitmap is written only if one is `null`.
pub fn codes(name: &str, codes: Vec<u32>, null: u32) -> UInt32Chunked {
    let validity = codes
        .contains(&null)
        .then(|| codes.iter().map(|&code| code != null).collect());
    UInt32Chunked::from_vec_validity(name.into(), codes, validity)
}

/// A boolean column as polars holds it.
pub fn flag_column(df: &DataFrame, name: &str) -> Result<BooleanChunked> {
    Ok(df.column(name).engine(name)?.bool().engine(name)?.clone())
}

pub fn bools(df: &DataFrame, name: &str) -> Result<Vec<Option<bool>>> {
    let column = df.column(name).engine(name)?;
    Ok(column.bool().engine(name)?.iter().collect())
}

/// Splits a frame sorted by `key` columns into runs of equal keys: `(first row, rows)`.
pub fn groups(df: &DataFrame, key: &[&str]) -> Result<Vec<(usize, Vec<usize>)>> {
    let keys: Vec<Vec<Option<String>>> = key
        .iter()
        .map(|name| texts(df, name))
        .collect::<Result<_>>()?;
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for row in 0..df.height() {
        let same = out
            .last()
            .is_some_and(|(first, _)| keys.iter().all(|column| column[*first] == column[row]));
        if same {
            out.last_mut().expect("checked").1.push(row);
        } else {
            out.push((row, vec![row]));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column of several chunks, NULLs among them, is read cell by cell in row order.
    #[test]
    fn each_cell_is_read_in_row_order_across_chunks() {
        let mut numbers = Int64Chunked::new("n".into(), [Some(3), None, Some(-7)]);
        numbers
            .append(&Int64Chunked::new("n".into(), [None, Some(i64::MAX)]))
            .unwrap();
        assert_eq!(numbers.chunks().len(), 2);
        let read: Vec<Option<i64>> = each_number(&numbers).collect();
        assert_eq!(read, [Some(3), None, Some(-7), None, Some(i64::MAX)]);
        let mut flags = BooleanChunked::new("f".into(), [Some(true), None]);
        flags
            .append(&BooleanChunked::new("f".into(), [Some(false)]))
            .unwrap();
        let read: Vec<Option<bool>> = each_flag(&flags).collect();
        assert_eq!(read, [Some(true), None, Some(false)]);
    }

    /// No bitmap while every cell is valid; from the first NULL on, each cell as recorded.
    #[test]
    fn validity_is_written_from_the_first_null() {
        let mut all_valid = Validity::default();
        all_valid.push(true, 0);
        all_valid.extend(3, true, 1);
        all_valid.extend_from(&[true, true].into_iter().collect(), 4);
        assert!(all_valid.finish().is_none());

        let mut some_null = Validity::default();
        some_null.extend(2, true, 0);
        some_null.push(false, 2);
        some_null.extend_from(&[true, false].into_iter().collect(), 3);
        some_null.extend(2, true, 5);
        let bits: Vec<bool> = some_null.finish().unwrap().iter().collect();
        assert_eq!(bits, [true, true, false, true, false, true, true]);
    }

    #[test]
    fn repeated_texts_point_every_row_at_its_value() {
        let rows = [Some(1), None, Some(0), Some(1)].into_iter();
        let column = repeated_texts("basis", &["data_interval", "run_after"], rows);
        let cells: Vec<Option<&str>> = column.iter().collect();
        assert_eq!(
            cells,
            [
                Some("run_after"),
                None,
                Some("data_interval"),
                Some("run_after")
            ]
        );
        assert_eq!(column.name().as_str(), "basis");
    }

    #[test]
    fn repeated_texts_of_no_values_are_all_null() {
        // No try belongs to an operation: every row is NULL and there is nothing to point at.
        let none: [&str; 0] = [];
        let column = repeated_texts("operation", &none, [None, None].into_iter());
        assert_eq!(column.len(), 2);
        assert_eq!(column.null_count(), 2);
        let empty = repeated_texts("operation", &none, std::iter::empty());
        assert_eq!(empty.len(), 0);
    }
}
