//! Rows put in time order before they are prepared, when they come in none.
//!
//! Preparing codes keys and ids, and joins tries, journal rows and objects by those codes
//! (`crate::dictionary`). Rows written as things happened (Airflow's tables, a journal
//! appended to, a listing in creation order) hold related rows near each other: a try's
//! journal rows, the object it created, the next try. Coding them touches memory the cache
//! has just seen. Rows in no order (a snapshot written by another tool, a table rewritten
//! in hash order) make each lookup a trip to memory, and preparing and the verdicts wait on
//! it row after row.
//!
//! So a table whose rows come in no time order is put in the order of its time column
//! (attempts: `start_date`; journal: `recorded_at`; provider: `created_at`; NULL last),
//! keeping the order of rows with equal times, before anything is prepared. Its texts are
//! laid out again in the new order, since a text column's cells point into buffers in the
//! old one. The audit's results do not depend on its rows' order: only how fast it gets
//! them does.

use std::sync::Mutex;

use polars::prelude::*;
use polars_arrow::array::{Array, Utf8ViewArray, View};
use polars_arrow::datatypes::ArrowDataType;
use polars_buffer::Buffer;

use crate::error::{EngineContext, Result};
use crate::model::Table;
use crate::sources::Tables;

/// Tables of fewer rows are left as they are: their texts fit in the cache in any order.
pub const FEWEST_ROWS: usize = 1 << 16;

/// Puts each of `tables` whose rows come in no time order in time order (see the module
/// documentation); the others are left as they are. Returns the tables it put in order.
pub fn in_time_order(tables: &mut Tables) -> Result<Vec<Table>> {
    put_in_time_order(tables, FEWEST_ROWS)
}

/// [`in_time_order`] for tables of at least `fewest` rows.
fn put_in_time_order(tables: &mut Tables, fewest: usize) -> Result<Vec<Table>> {
    let orders = crate::parallel::items(Table::ALL.len(), |item| {
        let table = Table::ALL[item];
        time_order(tables.get(table), table, fewest)
    });
    let mut ordered = Vec::new();
    for (table, order) in Table::ALL.into_iter().zip(orders) {
        if let Some(order) = order? {
            ordered.push((table, order));
        }
    }
    if ordered.is_empty() {
        return Ok(Vec::new());
    }
    // What the read freed goes back before the new columns are allocated. Kept, it would be
    // reused by them, and the freed old columns left over for the phases after, whose peak
    // would then be higher (bench/scale/README.md, issue 18, stop 31).
    crate::memory::release_free();
    for (table, order) in &ordered {
        reorder(tables.get_mut(*table), order)?;
    }
    Ok(ordered.into_iter().map(|(table, _)| table).collect())
}

/// Puts `frame`'s rows in `order`. The columns are shared out over the cores, each old column
/// freed as soon as its cells are copied, so only a column or two are held twice at a time.
fn reorder(frame: &mut DataFrame, order: &IdxCa) -> Result<()> {
    let height = frame.height();
    let old: Vec<Mutex<Option<Column>>> = (std::mem::take(frame).into_columns().into_iter())
        .map(|column| Mutex::new(Some(column)))
        .collect();
    let columns = crate::parallel::items(old.len(), |item| {
        let column = old[item].lock().map(|mut column| column.take());
        let column = column.ok().flatten().expect("each column is taken once");
        in_order(&column, order)
    });
    let columns = columns.into_iter().collect::<Result<Vec<_>>>()?;
    *frame = DataFrame::new(height, columns).engine("putting rows in time order")?;
    Ok(())
}

/// The order that puts `frame`'s rows in time order, None if they already come in it.
fn time_order(frame: &DataFrame, table: Table, fewest: usize) -> Result<Option<IdxCa>> {
    if frame.height() < fewest {
        return Ok(None);
    }
    let Ok(times) = frame.column(table.time_column()) else {
        return Ok(None);
    };
    let times = times
        .as_materialized_series()
        .to_physical_repr()
        .i64()
        .map(|times| crate::cells::one_chunk(times.clone()))
        .engine("reading times to order rows by")?;
    if !in_no_order(&times) {
        return Ok(None);
    }
    Ok(Some(
        times.arg_sort(
            SortOptions::default()
                .with_nulls_last(true)
                .with_maintain_order(true)
                .with_multithreaded(false),
        ),
    ))
}

/// `column`'s cells in `order`; texts laid out in that order ([`texts_in_order`]).
fn in_order(column: &Column, order: &IdxCa) -> Result<Column> {
    // A column of one value (a column the read left out) is the same in any order.
    if let Column::Scalar(_) = column {
        return Ok(column.clone());
    }
    let texts = match column.str() {
        Ok(texts)
            if texts
                .downcast_iter()
                .any(|array| array.total_buffer_len() > 0) =>
        {
            texts
        }
        // Numbers, times, and texts short enough to live in their views: gathered as they are.
        _ => return column.take(order).engine("putting rows in time order"),
    };
    let order = crate::cells::one_array(order);
    let laid_out = texts_in_order(&crate::cells::one_array(texts), order.values())?;
    Ok(StringChunked::with_chunk(texts.name().clone(), laid_out).into_column())
}

/// How many texts [`texts_in_order`] remembers having copied, to point a repeat at.
const RECENT: usize = 1 << 12;

/// The cells of `texts` at `order`, their bytes copied into new buffers in that order.
///
/// * A text read from the Parquet's dictionary is held once, however many rows have it (its
///   rows' views point at the same bytes). A row whose bytes are those of a text copied a
///   little before (one of the last [`RECENT`] by place) points at that copy rather than
///   copying them again: rows in time order repeat a key a few rows apart, so the table
///   takes about as much memory as it did.
/// * Rows in no order read views and bytes all over memory: each row asks for those of the
///   rows a few places on ([`crate::ahead`]) while it is copied.
fn texts_in_order(texts: &Utf8ViewArray, order: &[IdxSize]) -> Result<Utf8ViewArray> {
    let (views, buffers) = (texts.views().as_slice(), texts.data_buffers());
    let row = |at: usize| order[at] as usize;
    let mut laid: Vec<View> = Vec::with_capacity(order.len());
    let mut done: Vec<Buffer<u8>> = Vec::new();
    let mut bytes: Vec<u8> = Vec::with_capacity(
        (texts.total_buffer_len()).min(polars_arrow::array::BINVIEW_ARROW_BUFFER_LEN_LIMIT),
    );
    // By a hash of a text's place in `buffers`: its view there and its copy's view.
    let mut recent = vec![(0u128, View::default()); RECENT];
    crate::ahead::each_row(
        0..order.len(),
        |at| crate::ahead::ask(views, row(at)),
        |at| {
            let view = views[row(at)];
            if view.length > View::MAX_INLINE_SIZE {
                crate::ahead::ask(&buffers[view.buffer_idx as usize], view.offset as usize);
            }
        },
        |at| {
            let view = views[row(at)];
            if view.length <= View::MAX_INLINE_SIZE {
                laid.push(view);
                return;
            }
            // A NULL's view may still name bytes: they are not copied.
            if texts.is_null(row(at)) {
                laid.push(View::default());
                return;
            }
            let place = (u64::from(view.buffer_idx) << 32) | u64::from(view.offset);
            let slot = (place.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % RECENT;
            if recent[slot].0 == view.as_u128() {
                laid.push(recent[slot].1);
                return;
            }
            let start = view.offset as usize;
            let text = &buffers[view.buffer_idx as usize][start..start + view.length as usize];
            if bytes.len() + text.len() > polars_arrow::array::BINVIEW_ARROW_BUFFER_LEN_LIMIT {
                done.push(Buffer::from(std::mem::take(&mut bytes)));
            }
            // The offset fits in 32 bits: a buffer is kept under 2 GiB (above).
            let copy = View::new_from_bytes(text, done.len() as u32, bytes.len() as u32);
            bytes.extend_from_slice(text);
            recent[slot] = (view.as_u128(), copy);
            laid.push(copy);
        },
    );
    done.push(Buffer::from(bytes));
    let validity = texts.validity().map(|valid| {
        order
            .iter()
            .map(|&row| valid.get_bit(row as usize))
            .collect()
    });
    Utf8ViewArray::try_new(ArrowDataType::Utf8View, laid.into(), done.into(), validity)
        .engine("putting texts in time order")
}

/// Whether rows come in no time order: most rows' times are far from the row before's (more
/// than a 1,024th of the table's span apart). Rows written as things happened move on by a
/// little at a time, even where runs overlap; rows in no order jump anywhere.
fn in_no_order(times: &Int64Chunked) -> bool {
    let (Some(first), Some(last)) = (times.min(), times.max()) else {
        return false;
    };
    let far = (last.abs_diff(first) / 1024).max(1);
    let (mut jumps, mut steps) = (0usize, 0usize);
    let mut before: Option<i64> = None;
    for time in times.iter().flatten() {
        if let Some(before) = before {
            steps += 1;
            jumps += usize::from(time.abs_diff(before) > far);
        }
        before = Some(time);
    }
    jumps * 2 > steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrambled(count: usize) -> Vec<usize> {
        crate::testing::scrambled(count, 88_172_645_463_325_252)
    }

    fn times(values: impl IntoIterator<Item = Option<i64>>) -> Int64Chunked {
        Int64Chunked::from_iter_options("t".into(), values.into_iter())
    }

    #[test]
    fn rows_written_as_things_happened_are_left_in_their_order() {
        const HOUR: i64 = 3_600_000_000;
        // Twenty DAGs' tries an hour, each starting a few minutes into it in no order: the
        // rows step back as often as forward, but only ever by minutes.
        let jitter = scrambled(20_000);
        let runs_overlap = times((0..20_000).map(|row| {
            Some((row as i64 / 20) * HOUR + (jitter[row] % 600) as i64 * 100_000_000 / 10)
        }));
        assert!(!in_no_order(&runs_overlap));
        // One row in eight moved anywhere, as updates leave a table.
        let moved = times((0..20_000).map(|row| {
            let hour = if row % 8 == 0 {
                jitter[row] % 1_000
            } else {
                row / 20
            };
            Some(hour as i64 * HOUR)
        }));
        assert!(!in_no_order(&moved));
        assert!(!in_no_order(&times([None, None, None])));
        assert!(!in_no_order(&times([Some(5), Some(5), Some(5)])));

        let shuffled = times(jitter.iter().map(|&at| Some((at % 1_000) as i64 * HOUR)));
        assert!(in_no_order(&shuffled));
        // NULLs in between count for nothing either way.
        let with_nulls =
            times((jitter.iter()).flat_map(|&at| [Some((at % 1_000) as i64 * HOUR), None]));
        assert!(in_no_order(&with_nulls));
    }

    #[test]
    fn texts_are_copied_in_the_new_order_each_repeat_near_another_once() {
        let long = |n: usize| format!("synth:synth_{n:03}:2024-01-01T00");
        // 0..50: texts rows have; 50: a text only NULL rows' views name; 51: a short one.
        let mut values: Vec<String> = (0..51).map(long).collect();
        values.push("short".to_string());
        let dictionary =
            StringChunked::from_iter_values("key".into(), values.iter().map(String::as_str));
        // Rows of a Parquet dictionary: views into one copy of each distinct text (a gather
        // keeps the views), and NULLs whose views still name bytes.
        let picks = scrambled(5_000);
        let pick = |at: usize| match at % 7 {
            0 => 50,
            1 => 51,
            _ => at % 50,
        };
        let rows: Vec<IdxSize> = picks.iter().map(|&at| pick(at) as IdxSize).collect();
        let rows = dictionary
            .take(&IdxCa::from_vec("rows".into(), rows))
            .unwrap();
        let valid: polars_arrow::bitmap::Bitmap = picks.iter().map(|&at| at % 7 != 0).collect();
        let array = crate::cells::one_array(&rows).with_validity(Some(valid));
        assert!(
            array.total_buffer_len() < 52 * 40,
            "the rows share their texts' bytes"
        );

        let order: Vec<IdxSize> = (0..5_000).rev().collect();
        let laid_out = texts_in_order(&array, &order).unwrap();
        let expected: Vec<Option<&str>> =
            order.iter().map(|&row| array.get(row as usize)).collect();
        let got: Vec<Option<&str>> = laid_out.iter().collect();
        assert_eq!(got, expected);
        assert!(got.contains(&Some("short")) && got.contains(&None));
        // Each text rows have is copied once; the one only NULLs name is not copied.
        let copied = laid_out.total_buffer_len();
        assert_eq!(copied, (0..50).map(|n| long(n).len()).sum::<usize>());
    }

    #[test]
    fn a_table_in_no_order_is_put_in_time_order_and_one_in_order_is_left() {
        let rows = 3_000;
        let jitter = scrambled(rows);
        let frame = |times: Vec<Option<i64>>| {
            let texts: Vec<Option<String>> = (times.iter())
                .map(|time| time.map(|time| format!("a text long enough to be copied {time}")))
                .collect();
            DataFrame::new(
                rows,
                vec![
                    Column::new("start_date".into(), times.clone()),
                    Column::new("recorded_at".into(), times.clone()),
                    Column::new("created_at".into(), times),
                    Column::new("text".into(), texts),
                ],
            )
            .unwrap()
        };
        let shuffled: Vec<Option<i64>> = (jitter.iter())
            .map(|&at| (at % 10 != 0).then_some((at % 100_000) as i64))
            .collect();
        let in_order: Vec<Option<i64>> = (0..rows as i64).map(Some).collect();
        let mut tables = Tables {
            attempts: frame(shuffled.clone()),
            journal: frame(in_order),
            provider: frame(shuffled),
            warnings: Vec::new(),
            origins: Default::default(),
            listed_window: None,
            snapshot_hash: None,
            read_at: None,
        };
        let before = tables.clone();
        assert_eq!(
            put_in_time_order(&mut tables.clone(), rows + 1).unwrap(),
            []
        );
        let ordered = put_in_time_order(&mut tables, 0).unwrap();
        assert_eq!(ordered, [Table::Attempts, Table::Provider]);
        assert!(tables.journal.equals_missing(&before.journal));
        for table in ordered {
            let (now, was) = (tables.get(table), before.get(table));
            let times = crate::cells::int_column(now, table.time_column()).unwrap();
            let times: Vec<Option<i64>> = times.iter().collect();
            let mut sorted = times.clone();
            sorted.sort_by_key(|time| (time.is_none(), *time));
            assert_eq!(times, sorted, "{}: in time order, NULL last", table.name());
            let all = |frame: &DataFrame| {
                frame
                    .sort(["start_date", "text"], SortMultipleOptions::default())
                    .unwrap()
            };
            assert!(all(now).equals_missing(&all(was)), "the same rows");
        }
    }
}
