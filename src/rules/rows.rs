//! Reading provider objects, journal rows and tries out of a rule's result, the same way for every rule.

use polars::prelude::*;

use crate::cells::{ints, texts};
use crate::error::Result;
use crate::model::Table;
use crate::prepare::Operations;
use crate::rules::Evidence;
use crate::timestamp;

/// The rows of `frame`, one of `table`'s, where `keep` yields true, gathered and sorted by
/// `by` then the table's own order ([`Table::sorted_by`]); left in the frame's order when `by`
/// is empty.
pub fn gather_sorted(
    frame: &DataFrame,
    table: Table,
    keep: impl Iterator<Item = bool>,
    by: &[&str],
    doing: &str,
) -> Result<DataFrame> {
    use crate::error::EngineContext;
    let rows: Vec<IdxSize> = keep
        .enumerate()
        .filter(|(_, keep)| *keep)
        .map(|(row, _)| row as IdxSize)
        .collect();
    let rows = frame
        .take(&IdxCa::from_vec("row".into(), rows))
        .engine(doing)?;
    if by.is_empty() {
        return Ok(rows);
    }
    rows.sort(table.sorted_by(by), Default::default())
        .engine(doing)
}

pub struct ObjectRows {
    pub external_id: Vec<Option<String>>,
    pub key: Vec<Option<String>>,
    pub created_at: Vec<Option<i64>>,
    pub dag_id: Vec<Option<String>>,
    pub operation: Vec<Option<String>>,
    pub interval: Vec<Option<String>>,
    /// The try that created the object, where the journal tells.
    pub by_run_id: Vec<Option<String>>,
    pub by_try_number: Vec<Option<i64>>,
    pub by_map_index: Vec<Option<i64>>,
}

impl ObjectRows {
    /// The rows of `df`, their operations named by `operations`.
    pub fn read(df: &DataFrame, operations: &Operations) -> Result<ObjectRows> {
        Ok(ObjectRows {
            external_id: texts(df, "external_id")?,
            key: texts(df, "key")?,
            created_at: ints(df, "created_at")?,
            dag_id: texts(df, "dag_id")?,
            operation: operations.of_rows(df)?,
            interval: crate::prepare::interval_texts(df)?,
            by_run_id: texts(df, "by_run_id")?,
            by_try_number: ints(df, "by_try_number")?,
            by_map_index: ints(df, "by_map_index")?,
        })
    }

    /// The creating try as evidence lists it, where known.
    pub fn creator(&self, row: usize) -> Option<String> {
        let run_id = self.by_run_id[row].as_deref()?;
        Some(super::try_ref(
            run_id,
            self.by_try_number[row],
            self.by_map_index[row],
        ))
    }

    pub fn id(&self, row: usize) -> &str {
        self.external_id[row].as_deref().unwrap_or("")
    }

    /// `exp_1 (created 2026-11-01T10:00:00Z), exp_2 (...)`.
    pub fn listing(&self, rows: &[usize]) -> String {
        rows.iter()
            .map(|row| {
                format!(
                    "{} (created {})",
                    self.id(*row),
                    timestamp::format_opt(self.created_at[*row])
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn evidence(&self, rows: &[usize]) -> Evidence {
        Evidence {
            external_ids: rows.iter().map(|row| self.id(*row).to_string()).collect(),
            run_ids: rows
                .iter()
                .filter_map(|row| self.by_run_id[*row].clone())
                .collect(),
            tries: rows.iter().filter_map(|row| self.creator(*row)).collect(),
            keys: rows
                .iter()
                .filter_map(|row| self.key[*row].clone())
                .collect(),
            times: rows
                .iter()
                .map(|row| {
                    let by = self
                        .creator(*row)
                        .map(|by| format!(" by {by}"))
                        .unwrap_or_default();
                    format!(
                        "{} created={}{by}",
                        self.id(*row),
                        timestamp::format_opt(self.created_at[*row])
                    )
                })
                .collect(),
        }
        .normalized()
    }
}

pub struct JournalRows {
    pub op_key: Vec<Option<String>>,
    pub dag_id: Vec<Option<String>>,
    pub run_id: Vec<Option<String>>,
    pub try_number: Vec<Option<i64>>,
    pub map_index: Vec<Option<i64>>,
    pub phase: Vec<Option<String>>,
    pub external_id: Vec<Option<String>>,
    pub recorded_at: Vec<Option<i64>>,
    pub operation: Vec<Option<String>>,
    pub interval: Vec<Option<String>>,
}

impl JournalRows {
    /// The rows of `df`, their operations named by `operations`.
    pub fn read(df: &DataFrame, operations: &Operations) -> Result<JournalRows> {
        Ok(JournalRows {
            op_key: texts(df, "op_key")?,
            dag_id: texts(df, "dag_id")?,
            run_id: texts(df, "run_id")?,
            try_number: ints(df, "try_number")?,
            map_index: ints(df, "map_index")?,
            phase: texts(df, "phase")?,
            external_id: texts(df, "external_id")?,
            recorded_at: ints(df, "recorded_at")?,
            operation: operations.of_rows(df)?,
            interval: crate::prepare::interval_texts(df)?,
        })
    }

    pub fn try_ref(&self, row: usize) -> String {
        super::try_ref(
            self.run_id[row].as_deref().unwrap_or(""),
            self.try_number[row],
            self.map_index[row],
        )
    }

    /// Tries, runs, keys and times of the given rows.
    pub fn evidence(&self, rows: &[usize]) -> Evidence {
        Evidence {
            external_ids: rows
                .iter()
                .filter_map(|row| self.external_id[*row].clone())
                .collect(),
            keys: rows
                .iter()
                .filter_map(|row| self.op_key[*row].clone())
                .collect(),
            run_ids: rows
                .iter()
                .filter_map(|row| self.run_id[*row].clone())
                .collect(),
            tries: rows.iter().map(|row| self.try_ref(*row)).collect(),
            times: rows
                .iter()
                .map(|row| {
                    format!(
                        "{} {}={}",
                        self.try_ref(*row),
                        self.phase[*row].as_deref().unwrap_or(""),
                        timestamp::format_opt(self.recorded_at[*row])
                    )
                })
                .collect(),
        }
        .normalized()
    }
}

pub struct TryRows {
    pub dag_id: Vec<Option<String>>,
    pub run_id: Vec<Option<String>>,
    pub try_number: Vec<Option<i64>>,
    pub map_index: Vec<Option<i64>>,
    pub start_date: Vec<Option<i64>>,
    pub end_date: Vec<Option<i64>>,
    pub operation: Vec<Option<String>>,
    pub interval: Vec<Option<String>>,
    pub expected_key: Vec<Option<String>>,
}

impl TryRows {
    /// The rows of `df`, their operations named by `operations`.
    pub fn read(df: &DataFrame, operations: &Operations) -> Result<TryRows> {
        Ok(TryRows {
            dag_id: texts(df, "dag_id")?,
            run_id: texts(df, "run_id")?,
            try_number: ints(df, "try_number")?,
            map_index: ints(df, "map_index")?,
            start_date: ints(df, "start_date")?,
            end_date: ints(df, "end_date")?,
            operation: operations.of_rows(df)?,
            interval: crate::prepare::interval_texts(df)?,
            expected_key: texts(df, "expected_key")?,
        })
    }

    pub fn try_ref(&self, row: usize) -> String {
        super::try_ref(
            self.run_id[row].as_deref().unwrap_or(""),
            self.try_number[row],
            self.map_index[row],
        )
    }

    pub fn evidence(&self, rows: &[usize]) -> Evidence {
        Evidence {
            run_ids: rows
                .iter()
                .filter_map(|row| self.run_id[*row].clone())
                .collect(),
            tries: rows.iter().map(|row| self.try_ref(*row)).collect(),
            keys: rows
                .iter()
                .filter_map(|row| self.expected_key[*row].clone())
                .collect(),
            times: rows
                .iter()
                .map(|row| {
                    format!(
                        "{} start={} end={}",
                        self.try_ref(*row),
                        timestamp::format_opt(self.start_date[*row]),
                        timestamp::format_opt(self.end_date[*row])
                    )
                })
                .collect(),
            ..Evidence::default()
        }
        .normalized()
    }
}
