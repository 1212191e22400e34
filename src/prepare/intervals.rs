//! The pipeline intervals of the tries (SPEC §4): each try's interval, coded, and the
//! interval of any frame's rows that name a try or an interval.

use polars::prelude::*;

use crate::ahead;
use crate::cells::IntArray;
use crate::dictionary::{Coded, Dictionary, NULL as NONE, Values};
use crate::error::Result;

/// The pipeline intervals (`PIPELINE_INTERVAL`) of the tries, coded. Pipelines are
/// coded already (`prepare`), so the intervals are hashed as integers.
///
/// `Prepared::early` codes them on a thread of its own once the tries are prepared, while
/// it goes on with the journal.
pub struct Intervals {
    /// The intervals' codes; an interval's value is the parts of the try that first had it.
    dictionary: Dictionary,
    first_tries: Vec<IdxSize>,
    /// The parts of each try's key.
    parts: IntervalParts,
    /// Each try's interval; None where one of its parts is NULL (it matches no object).
    of_try: Vec<Option<u32>>,
    /// When the earlier tries of each try's interval had ended (`earlier_tries_ended`).
    ended: Vec<Option<i64>>,
}

struct IntervalParts {
    pipeline: <UInt32Type as PolarsDataType>::Array,
    map_index: IntArray,
    iv_start: IntArray,
    iv_end: IntArray,
}

impl IntervalParts {
    /// The `PIPELINE_INTERVAL` columns of a frame.
    fn of(frame: &DataFrame) -> Result<IntervalParts> {
        let int = |name: &str| -> Result<IntArray> {
            Ok(crate::cells::one_array(&crate::cells::int_column(
                frame, name,
            )?))
        };
        Ok(IntervalParts {
            pipeline: crate::cells::one_array(&crate::cells::code_column(frame, "pipeline")?),
            map_index: int("map_index")?,
            iv_start: int("iv_start")?,
            iv_end: int("iv_end")?,
        })
    }

    fn key(&self, row: usize) -> IntervalKey {
        interval_key(
            self.pipeline.get(row),
            self.map_index.get(row),
            self.iv_start.get(row),
            self.iv_end.get(row),
        )
    }

    /// Asks for the memory [`key`](Self::key) reads for `row` ([`crate::ahead`]).
    fn ask(&self, row: usize) {
        ahead::ask(self.pipeline.values(), row);
        ahead::ask(self.map_index.values(), row);
        ahead::ask(self.iv_start.values(), row);
        ahead::ask(self.iv_end.values(), row);
    }
}

/// The intervals coded so far, each read back from the first row that had it: its row in
/// `rows` when the values coded are those rows' keys, else its row in the frame.
struct FirstRows<'p> {
    parts: &'p IntervalParts,
    firsts: &'p mut Vec<IdxSize>,
    rows: Option<&'p [IdxSize]>,
}

impl Values<IntervalKey> for FirstRows<'_> {
    fn value(&self, code: u32) -> IntervalKey {
        self.parts.key(self.firsts[code as usize] as usize)
    }

    fn ask(&self, code: u32) {
        if let Some(&row) = self.firsts.get(code as usize) {
            self.parts.ask(row as usize);
        }
    }
}

impl Coded<IntervalKey> for FirstRows<'_> {
    fn add(&mut self, _key: IntervalKey, at: usize) {
        let row = self.rows.map_or(at as IdxSize, |rows| rows[at]);
        self.firsts.push(row);
    }
}

/// (pipeline, which of the others are NULL, map index, interval start, interval end), packed
/// into 32 bytes, as small as the parts allow: the table holds one per interval.
type IntervalKey = (u32, u8, i64, i64, i64);

fn interval_key(
    pipeline: Option<u32>,
    map: Option<i64>,
    start: Option<i64>,
    end: Option<i64>,
) -> IntervalKey {
    let nulls =
        u8::from(map.is_none()) | u8::from(start.is_none()) << 1 | u8::from(end.is_none()) << 2;
    (
        pipeline.unwrap_or(NONE),
        nulls,
        map.unwrap_or_default(),
        start.unwrap_or_default(),
        end.unwrap_or_default(),
    )
}

impl Intervals {
    pub fn of(tries: &DataFrame) -> Result<Intervals> {
        let parts = IntervalParts::of(tries)?;
        let rows = tries.height();
        let mut dictionary = Dictionary::with_capacity(rows);
        let mut first_tries = Vec::new();
        // Whether each try's interval has all its parts: only those match objects.
        let mut whole = Vec::with_capacity(rows);
        // Each try's interval, NULL parts and all, for ordering its tries. A try's retries
        // often follow it: coded in turn, the interval of the try before is the guess.
        let keys = (0..rows).map(|row| {
            let key = parts.key(row);
            whole.push(complete(key));
            Some(key)
        });
        let ordering = dictionary.encode_all(
            keys,
            rows,
            &mut FirstRows {
                parts: &parts,
                firsts: &mut first_tries,
                rows: None,
            },
        );
        let of_try = ordering
            .iter()
            .zip(whole)
            .map(|(&group, whole)| whole.then_some(group))
            .collect();
        Ok(Intervals {
            dictionary,
            first_tries,
            parts,
            of_try,
            ended: earlier_tries_ended(tries, &ordering)?,
        })
    }

    /// The code of the interval `key`, None if no try has it.
    fn find(&self, key: IntervalKey) -> Option<u32> {
        self.dictionary.find(key, None, |n| {
            self.parts.key(self.first_tries[n as usize] as usize)
        })
    }

    /// When the earlier tries of a try's interval had ended (`earlier_tries_ended`).
    pub fn earlier_ended(&self, row: usize) -> Option<i64> {
        self.ended[row]
    }

    /// How many intervals there are: every interval's number is below it.
    pub fn count(&self) -> usize {
        self.first_tries.len()
    }

    /// The interval of a try (a row of `tries`), None where a part of it is NULL.
    pub fn of_try(&self, row: usize) -> Option<u32> {
        self.of_try[row]
    }

    /// The interval a try has of each of `rows` (rows of `frame`, which has the
    /// `PIPELINE_INTERVAL` columns), None where no try has it. `try_of` names the try whose
    /// interval a row's is, where the row has one (a journal row's own try, an object's home
    /// try): such a row takes that try's interval; the others are found by their parts, which
    /// are read only for them.
    pub fn of_rows(
        &self,
        frame: &DataFrame,
        rows: impl Iterator<Item = IdxSize>,
        try_of: impl Fn(IdxSize) -> Option<IdxSize>,
    ) -> Result<Vec<Option<u32>>> {
        let parts = IntervalParts::of(frame)?;
        Ok(rows
            .map(|row| match try_of(row) {
                Some(try_row) => self.of_try[try_row as usize],
                None => {
                    let key = parts.key(row as usize);
                    complete(key).then(|| self.find(key)).flatten()
                }
            })
            .collect())
    }
}

/// Whether an interval has all its parts: only those match objects.
fn complete(key: IntervalKey) -> bool {
    key.0 != NONE && key.1 == 0
}

/// When the earlier tries of each try's pipeline interval had ended (the latest end among the
/// interval's tries that started before it; ties in start go by try number, then run id). An
/// object created by then was not created by this try. (Not "before this try started":
/// providers often round creation times to the second, which would make every object look
/// older.) `ordering` is each try's interval number.
fn earlier_tries_ended(tries: &DataFrame, ordering: &[u32]) -> Result<Vec<Option<i64>>> {
    let int = |name: &str| crate::cells::int_column(tries, name);
    let (start, end, try_number) = (int("start_date")?, int("end_date")?, int("try_number")?);
    let run_id = crate::cells::one_array(&crate::cells::text_column(tries, "run_id")?);
    // (interval, start, try number, row): the order tries follow in an interval, the run
    // id (read only on a tie) last.
    type Place = (u32, Option<i64>, Option<i64>, u32);
    let mut order: Vec<Place> = ordering
        .iter()
        .zip(crate::cells::each_number(&start).zip(crate::cells::each_number(&try_number)))
        .enumerate()
        .map(|(row, (&group, (start, number)))| (group, start, number, row as u32))
        .collect();
    order.sort_unstable_by(|a, b| {
        (a.0, a.1, a.2)
            .cmp(&(b.0, b.1, b.2))
            .then_with(|| run_id.get(a.3 as usize).cmp(&run_id.get(b.3 as usize)))
            .then(a.3.cmp(&b.3))
    });
    let end = crate::cells::one_array(&end);
    let mut ended: Vec<Option<i64>> = vec![None; tries.height()];
    let mut latest: Option<i64> = None;
    for (position, &(group, .., row)) in order.iter().enumerate() {
        if position == 0 || order[position - 1].0 != group {
            latest = None;
        }
        let row = row as usize;
        ended[row] = latest;
        latest = latest.max(end.get(row));
    }
    Ok(ended)
}

impl Intervals {
    /// The pipeline interval (`PIPELINE_INTERVAL`) of each of `rows` (rows of `frame`), coded
    /// NULL parts and all (equal parts, equal codes, as polars groups them), whether a try has
    /// the interval or not; and how many codes there can be. An interval some try has keeps
    /// its code here (below [`count`](Self::count)); the others are coded after those.
    ///
    /// `try_of` names the try whose interval a row's is, where the row has one (a journal
    /// row's own try, an object's home try: their interval columns are that try's), so those
    /// rows take the try's code without their parts being looked up.
    pub fn code_rows(
        &self,
        frame: &DataFrame,
        rows: &[IdxSize],
        try_of: impl Fn(IdxSize) -> Option<IdxSize>,
    ) -> Result<(Vec<u32>, usize)> {
        let parts = IntervalParts::of(frame)?;
        let mut codes = Vec::with_capacity(rows.len());
        let mut others: Vec<usize> = Vec::new();
        for (at, &row) in rows.iter().enumerate() {
            let code = (try_of(row).and_then(|try_row| self.of_try[try_row as usize]))
                .or_else(|| self.find(parts.key(row as usize)));
            if code.is_none() {
                others.push(at);
            }
            codes.push(code.unwrap_or(NONE));
        }
        let tries = self.count();
        let other_rows: Vec<IdxSize> = others.iter().map(|&at| rows[at]).collect();
        let (other_codes, other_count) = code_rows(frame, &other_rows)?;
        for (at, code) in others.into_iter().zip(other_codes) {
            codes[at] = tries as u32 + code;
        }
        Ok((codes, tries + other_count))
    }
}

/// The pipeline interval (`PIPELINE_INTERVAL`) of each of `rows` (rows of `frame`), coded
/// densely from 0 in the order first seen, NULL parts and all (equal parts, equal codes, as
/// polars groups them); and how many intervals there are. Unlike [`Intervals`], any
/// interval gets a code, whether a try has it or not.
fn code_rows(frame: &DataFrame, rows: &[IdxSize]) -> Result<(Vec<u32>, usize)> {
    // An interval's value is read back from its first row (a copy of each would add 32 bytes
    // an interval beside the rules' other work).
    let parts = IntervalParts::of(frame)?;
    let mut dictionary = Dictionary::with_capacity(rows.len());
    let mut first_rows: Vec<IdxSize> = Vec::new();
    let codes = dictionary.encode_all(
        rows.iter().map(|&row| Some(parts.key(row as usize))),
        rows.len(),
        &mut FirstRows {
            parts: &parts,
            firsts: &mut first_rows,
            rows: Some(rows),
        },
    );
    Ok((codes, first_rows.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parts = (Option<u32>, Option<i64>, Option<i64>, Option<i64>);

    fn frame(rows: &[Parts]) -> DataFrame {
        let column = |name: &str, values: Vec<Option<i64>>| Column::new(name.into(), values);
        let times = |name: &str, values: Vec<Option<i64>>| {
            column(name, values).cast(&crate::model::utc()).unwrap()
        };
        let pipelines: Vec<Option<u32>> = rows.iter().map(|parts| parts.0).collect();
        DataFrame::new_infer_height(vec![
            Column::new("pipeline".into(), pipelines),
            column("map_index", rows.iter().map(|parts| parts.1).collect()),
            times("iv_start", rows.iter().map(|parts| parts.2).collect()),
            times("iv_end", rows.iter().map(|parts| parts.3).collect()),
            times("start_date", vec![Some(0); rows.len()]),
            times("end_date", vec![Some(1); rows.len()]),
            column("try_number", vec![Some(1); rows.len()]),
            Column::new("run_id".into(), vec!["run"; rows.len()]),
        ])
        .unwrap()
    }

    /// Rows that name their try take its code, the others are coded by their parts: equal
    /// parts get equal codes either way, NULL parts and all, whether a try has the interval
    /// (a code below `count`) or not, and every code is below the count returned.
    #[test]
    fn rows_coded_through_their_try_and_by_their_parts_agree() {
        let tries: Vec<Parts> = vec![
            (Some(0), Some(-1), Some(10), Some(20)),
            (Some(0), Some(-1), Some(20), Some(30)),
            (Some(1), Some(3), Some(10), Some(20)),
            (Some(0), Some(-1), None, None),
            (Some(0), Some(-1), Some(10), Some(20)),
        ];
        let intervals = Intervals::of(&frame(&tries)).unwrap();
        // (parts, the try the row names)
        let rows: Vec<(Parts, Option<IdxSize>)> = vec![
            (tries[1], Some(1)),
            (tries[0], None),
            (tries[0], Some(4)),
            (tries[3], Some(3)),
            (tries[3], None),
            (tries[2], None),
            (tries[2], Some(2)),
            ((Some(0), Some(-1), Some(30), Some(40)), None),
            ((Some(2), Some(-1), Some(10), Some(20)), None),
            ((Some(0), Some(-1), Some(30), Some(40)), None),
            ((None, Some(-1), Some(10), Some(20)), None),
            ((Some(0), None, Some(10), Some(20)), None),
            ((Some(0), None, Some(10), Some(20)), None),
        ];
        let parts: Vec<Parts> = rows.iter().map(|row| row.0).collect();
        let frame = frame(&parts);
        // Picked in another order than the frame's, each twice.
        let picked: Vec<IdxSize> = (0..rows.len() as IdxSize)
            .rev()
            .chain(0..rows.len() as IdxSize)
            .collect();
        let (codes, count) = intervals
            .code_rows(&frame, &picked, |row| rows[row as usize].1)
            .unwrap();
        assert_eq!(codes.len(), picked.len());
        for (a, &row_a) in picked.iter().enumerate() {
            let parts_a = parts[row_a as usize];
            assert!((codes[a] as usize) < count, "row {row_a}");
            assert_eq!(
                (codes[a] as usize) < intervals.count(),
                tries.contains(&parts_a),
                "row {row_a}: a try's interval keeps its code"
            );
            for (b, &row_b) in picked.iter().enumerate() {
                assert_eq!(
                    codes[a] == codes[b],
                    parts_a == parts[row_b as usize],
                    "rows {row_a} and {row_b}"
                );
            }
        }
    }
}
