//! The shape most rules' detection takes: pick the rows of a prepared table where a test over
//! their group holds (a window: "more than one key in the interval"), bring each group's rows
//! together in a fixed order, and write one finding per group.

use polars::prelude::*;

use crate::cells::groups;
use crate::error::{EngineContext, Result};
use crate::prepare::{PIPELINE_INTERVAL, in_pipeline_interval_order};
use crate::rules::Finding;

/// Rows of a rule's result, read in groups of equal group columns.
pub struct RowGroups {
    pub frame: DataFrame,
    /// Each group's first row and all its rows, in the frame's order.
    groups: Vec<(usize, Vec<usize>)>,
}

impl RowGroups {
    /// The rows of `rows` where `keep` holds, sorted by `order`, in groups of equal `group`.
    pub fn of(
        rows: LazyFrame,
        keep: Expr,
        order: Vec<&str>,
        group: &[&str],
        rule: &str,
    ) -> Result<RowGroups> {
        let frame = rows
            .filter(keep)
            .sort(order, Default::default())
            .collect()
            .engine(rule)?;
        RowGroups::sorted(frame, group)
    }

    /// The rows of `rows` where `keep` holds, grouped by pipeline interval, each interval's
    /// rows sorted by `then`.
    pub fn per_interval(
        rows: LazyFrame,
        keep: Expr,
        then: &[&'static str],
        rule: &str,
    ) -> Result<RowGroups> {
        RowGroups::of(
            rows,
            keep,
            in_pipeline_interval_order(then),
            &PIPELINE_INTERVAL,
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
