//! The shape most rules' detection takes: pick the rows of a prepared table where a test over
//! their group holds (a window: "more than one key in the interval"), bring each group's rows
//! together in a fixed order, and write one finding per group.
//!
//! The test is a polars window ([`RowGroups::per_interval`] with [`over`]), or, for "more than
//! one distinct value in the group", a pass over coded columns ([`ManyValues`], then
//! [`RowGroups::of_rows`] with the rows it picked): the window sorts or hashes every row of the
//! table with all its columns, the pass reads two codes a row and only the picked rows are
//! sorted.

use polars::prelude::*;

use crate::cells::groups;
use crate::error::{EngineContext, Result};
use crate::model::Table;
use crate::prepare::{Operations, PIPELINE_INTERVAL, Prepared, in_pipeline_interval_order};
use crate::rules::Finding;

/// Rows of a rule's result, read in groups of equal group columns.
pub struct RowGroups {
    pub frame: DataFrame,
    /// Each group's first row and all its rows, in the frame's order.
    groups: Vec<(usize, Vec<usize>)>,
}

impl RowGroups {
    /// The rows of `rows` where `keep` holds, grouped by pipeline interval, each interval's
    /// rows sorted by `then`; `operations` name the pipelines, which are sorted by them.
    pub fn per_interval(
        rows: LazyFrame,
        table: Table,
        keep: Expr,
        then: &[&'static str],
        operations: &Operations,
        rule: &str,
    ) -> Result<RowGroups> {
        let kept = rows.filter(keep).collect().engine(rule)?;
        RowGroups::in_interval_order(kept, table, then, operations, rule)
    }

    /// `frame` sorted by pipeline interval, then `then`, then `table`'s own order, in groups
    /// of one pipeline interval.
    fn in_interval_order(
        frame: DataFrame,
        table: Table,
        then: &[&'static str],
        operations: &Operations,
        rule: &str,
    ) -> Result<RowGroups> {
        let order = in_pipeline_interval_order(then);
        let frame = operations
            .with_rank(frame)?
            .sort(table.sorted_by(&order), Default::default())
            .engine(rule)?;
        RowGroups::sorted(frame, &PIPELINE_INTERVAL)
    }

    /// `rows` of `frame`, `table`'s (in ascending order, as a filter keeps them), sorted by
    /// `order` then the table's own order, in groups of equal `group`: the rows picked by a
    /// pass over codes, where [`RowGroups::per_interval`] takes those a window keeps.
    pub fn of_rows(
        frame: &DataFrame,
        table: Table,
        rows: Vec<IdxSize>,
        order: Vec<&str>,
        group: &[&str],
        rule: &str,
    ) -> Result<RowGroups> {
        let frame = frame
            .take(&IdxCa::from_vec("rows".into(), rows))
            .and_then(|picked| picked.sort(table.sorted_by(&order), Default::default()))
            .engine(rule)?;
        RowGroups::sorted(frame, group)
    }

    /// [`RowGroups::of_rows`] grouped by pipeline interval, each interval's rows sorted by
    /// `then`; `operations` name the pipelines, which are sorted by them.
    pub fn of_interval_rows(
        frame: &DataFrame,
        table: Table,
        rows: Vec<IdxSize>,
        then: &[&'static str],
        operations: &Operations,
        rule: &str,
    ) -> Result<RowGroups> {
        let picked = frame
            .take(&IdxCa::from_vec("rows".into(), rows))
            .engine(rule)?;
        RowGroups::in_interval_order(picked, table, then, operations, rule)
    }

    /// The `rows` of `table`'s prepared frame (in ascending order) whose pipeline interval
    /// holds more than one distinct `value` (a code; NULL counts as a value), grouped by
    /// pipeline interval, each interval's rows sorted by `then`: `per_interval` with
    /// `over_interval(n_unique) > 1`, as a pass over codes.
    pub fn of_intervals_with_many(
        prepared: &Prepared,
        table: Table,
        rows: Vec<IdxSize>,
        value: impl Fn(IdxSize) -> u32,
        then: &[&'static str],
        rule: &str,
    ) -> Result<RowGroups> {
        let (intervals, count) = prepared.code_interval_rows(table, &rows)?;
        let mut values = ManyValues::new(count);
        for (&row, &interval) in rows.iter().zip(&intervals) {
            values.see(interval, value(row));
        }
        let picked = (rows.iter().zip(&intervals))
            .filter(|(_, interval)| values.holds(**interval))
            .map(|(row, _)| *row)
            .collect();
        RowGroups::of_interval_rows(
            prepared.frame(table),
            table,
            picked,
            then,
            &prepared.operations,
            rule,
        )
    }

    /// A frame already sorted so that each group's rows are together.
    pub fn sorted(frame: DataFrame, group: &[&str]) -> Result<RowGroups> {
        let groups = groups(&frame, group)?;
        Ok(RowGroups { frame, groups })
    }

    /// One finding per group, from its first row and all its rows.
    pub fn findings(
        &self,
        finding: impl Fn(usize, &[usize]) -> Result<Finding>,
    ) -> Result<Vec<Finding>> {
        self.groups
            .iter()
            .map(|(first, members)| finding(*first, members))
            .collect()
    }
}

/// `expr` worked out over the rows of each group of `columns` (a window).
pub fn over(expr: Expr, columns: &[&str]) -> Result<Expr> {
    let columns: Vec<Expr> = columns.iter().map(|name| col(*name)).collect();
    expr.over(columns).engine("window")
}

/// `expr` worked out over the rows of each pipeline interval.
pub fn over_interval(expr: Expr) -> Result<Expr> {
    over(expr, &PIPELINE_INTERVAL)
}

/// Per group code: whether its rows hold more than one distinct value code. The coded form of
/// `over(col(value).n_unique(), group).gt(1)`: a NULL value ([`crate::dictionary::NULL`]) is
/// a value of its own, as `n_unique` counts it.
pub struct ManyValues {
    first: Vec<Option<u32>>,
    many: Vec<bool>,
}

impl ManyValues {
    /// For `groups` groups, coded from 0.
    pub fn new(groups: usize) -> ManyValues {
        ManyValues {
            first: vec![None; groups],
            many: vec![false; groups],
        }
    }

    /// A row of `group` holds `value`.
    pub fn see(&mut self, group: u32, value: u32) {
        let group = group as usize;
        match self.first[group] {
            None => self.first[group] = Some(value),
            Some(first) if first != value => self.many[group] = true,
            Some(_) => {}
        }
    }

    /// Whether the rows of `group` held more than one value.
    pub fn holds(&self, group: u32) -> bool {
        self.many[group as usize]
    }
}

/// The cells of a text column at `rows`, coded from 0 (equal strings, equal codes; NULL cells
/// [`crate::dictionary::NULL`]).
pub fn text_codes(frame: &DataFrame, column: &str, rows: &[IdxSize]) -> Result<Vec<u32>> {
    let cells = crate::cells::one_array(&crate::cells::text_column(frame, column)?);
    let mut dictionary = crate::dictionary::TextDictionary::default();
    Ok(dictionary.encode_cells(rows.iter().map(|&row| cells.get(row as usize))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_holds_many_values_when_two_of_its_rows_differ_null_counting_as_a_value() {
        let null = crate::dictionary::NULL;
        let mut values = ManyValues::new(4);
        for (group, value) in [(0, 5), (0, 5), (1, 5), (1, 6), (2, 7), (2, null), (3, null)] {
            values.see(group, value);
        }
        let held: Vec<bool> = (0..4).map(|group| values.holds(group)).collect();
        assert_eq!(held, [false, true, true, false]);
    }

    #[test]
    fn equal_texts_get_equal_codes_and_null_cells_none() {
        let frame = df!("dag_id" => [Some("a"), Some("b"), None, Some("a"), Some("c")]).unwrap();
        let codes = text_codes(&frame, "dag_id", &[4, 0, 1, 2, 3]).unwrap();
        assert_eq!(codes, [0, 1, 2, crate::dictionary::NULL, 1]);
    }
}
