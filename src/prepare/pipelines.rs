//! The pipelines (SPEC §4): each DAG's task an operation covers, coded, and the operation each
//! one is.
//!
//! The prepared frames keep each row's pipeline code, not its operation's name: an operation
//! is a function of its pipeline, so its name is kept once per pipeline ([`Operations`]) and
//! written out only for the rows a finding, a verdict or a question prints.

use polars::prelude::*;

use crate::config::Config;
use crate::dictionary::{Dictionary, Encoded, NULL};
use crate::error::{EngineContext, Result};

use super::model::interval;

/// Whether rows of tasks no `[[operation]]` names belong to a pipeline all the same.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unnamed {
    /// No: the row is not an operation's (tries of other tasks are left out).
    Null,
    /// Yes, as operation `dag_id.task_id`: journal rows of such tasks still describe
    /// operations.
    DagTask,
}

/// The pipelines coded so far: each DAG's task, coded densely from 0 in the order first seen,
/// the same `(dag_id, task_id)` having the same code in the tries and the journal. There are
/// few of them (a DAG's operation tasks), so their values are kept as owned pairs.
#[derive(Default)]
pub struct Pipelines {
    dictionary: Dictionary,
    pairs: Vec<(String, String)>,
    /// Per code: the name of the `[[operation]]` that covers the DAG's task, if one does. The
    /// config's globs are matched once per pipeline, not once per row.
    configured: Vec<Option<String>>,
}

impl Pipelines {
    /// The code of a DAG's task; `guess`: the code of the row before.
    fn code(&mut self, config: &Config, dag: &str, task: &str, guess: Option<u32>) -> u32 {
        let pairs = &self.pairs;
        let encoded = self.dictionary.encode((dag, task), guess, |code| {
            let (dag, task) = &pairs[code as usize];
            (dag.as_str(), task.as_str())
        });
        if let Encoded::New(_) = encoded {
            self.pairs.push((dag.to_string(), task.to_string()));
            self.configured
                .push(config.operation_for(dag, task).map(|op| op.name.clone()));
        }
        encoded.code()
    }

    /// The name of the `[[operation]]` that covers a pipeline, if one does.
    pub(super) fn configured(&self, pipeline: u32) -> Option<&str> {
        self.configured[pipeline as usize].as_deref()
    }

    /// `code`, where it is a pipeline: its task is an `[[operation]]`'s, or `unnamed` makes
    /// every DAG's task one.
    fn named(&self, code: u32, unnamed: Unnamed) -> Option<u32> {
        (self.configured[code as usize].is_some() || unnamed == Unnamed::DagTask).then_some(code)
    }

    /// The `pipeline` column of a frame's rows (`dag_id`, `task_id`): each row's code, NULL
    /// where the row belongs to no pipeline (a NULL DAG or task, or, with [`Unnamed::Null`], a
    /// task no `[[operation]]` names).
    pub(super) fn column(
        &mut self,
        config: &Config,
        frame: &DataFrame,
        unnamed: Unnamed,
    ) -> Result<Column> {
        let dags = crate::cells::text_column(frame, "dag_id")?;
        let tasks = crate::cells::text_column(frame, "task_id")?;
        let (dag_cells, task_cells) = (
            crate::cells::one_array(&dags),
            crate::cells::one_array(&tasks),
        );
        let mut previous: Option<u32> = None;
        // Rows of one DAG's task often follow each other (cells::Runs): each run is coded once.
        let runs = crate::cells::Runs::of(&[&dags, &tasks]);
        let count = runs.as_ref().map_or(frame.height(), |runs| runs.count());
        let mut pipeline = Vec::with_capacity(count);
        let pairs: Box<dyn Iterator<Item = (Option<&str>, Option<&str>)>> = match &runs {
            Some(runs) => Box::new(
                runs.starts()
                    .iter()
                    .map(|&row| (dag_cells.get(row as usize), task_cells.get(row as usize))),
            ),
            None => Box::new(dag_cells.iter().zip(task_cells.iter())),
        };
        for pair in pairs {
            let (Some(dag), Some(task)) = pair else {
                pipeline.push(None);
                continue;
            };
            let code = self.code(config, dag, task, previous);
            previous = Some(code);
            pipeline.push(self.named(code, unnamed));
        }
        if let Some(runs) = &runs {
            pipeline = runs.spread(&pipeline);
        }
        Ok(
            crate::cells::numbers::<UInt32Type>(interval::PIPELINE, pipeline.into_iter())
                .into_column(),
        )
    }

    /// [`column`](Self::column) for a frame whose rows may name a try (`tries`, by row; its
    /// pipeline `pipeline_of`): such a row takes its try's pipeline, as its DAG and task are
    /// the try's; only the other rows are coded from their texts, in row order, so every row
    /// gets the code `column` would give it.
    pub(super) fn column_through_tries(
        &mut self,
        config: &Config,
        frame: &DataFrame,
        unnamed: Unnamed,
        tries: impl Iterator<Item = Option<IdxSize>>,
        pipeline_of: impl Fn(IdxSize) -> Option<u32>,
    ) -> Result<Column> {
        let dags = crate::cells::one_array(&crate::cells::text_column(frame, "dag_id")?);
        let tasks = crate::cells::one_array(&crate::cells::text_column(frame, "task_id")?);
        let mut previous: Option<u32> = None;
        let mut pipeline = Vec::with_capacity(frame.height());
        for (row, named_try) in tries.enumerate() {
            let code = match named_try.and_then(&pipeline_of) {
                Some(code) => code,
                None => {
                    let (Some(dag), Some(task)) = (dags.get(row), tasks.get(row)) else {
                        pipeline.push(NULL);
                        continue;
                    };
                    let code = self.code(config, dag, task, previous);
                    previous = Some(code);
                    code
                }
            };
            pipeline.push(self.named(code, unnamed).unwrap_or(NULL));
        }
        Ok(crate::cells::codes(interval::PIPELINE, pipeline, NULL).into_column())
    }

    /// The operation of each pipeline, once every frame's pipelines are coded.
    pub fn operations(self) -> Operations {
        let names: Vec<String> = (self.pairs.iter().zip(self.configured))
            .map(|((dag, task), configured)| configured.unwrap_or_else(|| format!("{dag}.{task}")))
            .collect();
        let mut sorted: Vec<u32> = (0..names.len() as u32).collect();
        sorted.sort_by(|&a, &b| {
            let of = |code: u32| (&names[code as usize], &self.pairs[code as usize].0, code);
            of(a).cmp(&of(b))
        });
        let mut rank = vec![0; names.len()];
        for (place, &code) in sorted.iter().enumerate() {
            rank[code as usize] = place as u32;
        }
        Operations { names, rank }
    }
}

/// The operation of each pipeline: the prepared frames' `pipeline` column stands for it.
#[derive(Debug, Clone)]
pub struct Operations {
    /// Per pipeline code: the `[[operation]]` name, or `dag_id.task_id` for a pipeline only
    /// journal rows of a task no operation names have.
    names: Vec<String>,
    /// Per pipeline code: its place among the pipelines sorted by operation name, then DAG,
    /// then code.
    rank: Vec<u32>,
}

impl Operations {
    /// The operation of a pipeline.
    pub fn name(&self, pipeline: u32) -> &str {
        &self.names[pipeline as usize]
    }

    /// The operation of each row of `frame` (a prepared frame, or rows taken from one), None
    /// where it has no pipeline.
    pub fn of_rows(&self, frame: &DataFrame) -> Result<Vec<Option<String>>> {
        let pipelines = crate::cells::code_column(frame, interval::PIPELINE)?;
        Ok(pipelines
            .iter()
            .map(|pipeline| pipeline.map(|code| self.name(code).to_string()))
            .collect())
    }

    /// The operation of each row of `frame` as a column, `operation`, for the frames that show
    /// it (the verdicts frame, a question's answer).
    pub fn column(&self, frame: &DataFrame) -> Result<Column> {
        let pipelines = crate::cells::code_column(frame, interval::PIPELINE)?;
        let rows = pipelines
            .iter()
            .map(|code| code.map(|code| code as IdxSize));
        Ok(crate::cells::repeated_texts(interval::OPERATION, &self.names, rows).into_column())
    }

    /// `frame` with its operation column ([`Operations::column`]) after its others.
    pub fn with_column(&self, frame: &DataFrame) -> Result<DataFrame> {
        let mut out = frame.clone();
        out.with_column(self.column(frame)?)
            .engine("naming operations")?;
        Ok(out)
    }

    /// Each row's pipeline in the order of operation name, DAG, then pipeline code, as a
    /// column (`pipeline_rank`), NULL where the row has no pipeline: what
    /// [`super::in_pipeline_interval_order`] sorts by first.
    pub fn rank_column(&self, frame: &DataFrame) -> Result<Column> {
        let pipelines = crate::cells::code_column(frame, interval::PIPELINE)?;
        let ranks = pipelines
            .iter()
            .map(|code| code.map(|code| self.rank[code as usize]));
        Ok(crate::cells::numbers::<UInt32Type>(interval::PIPELINE_RANK, ranks).into_column())
    }

    /// `frame` with its `pipeline_rank` column, ready to be sorted in
    /// [`super::in_pipeline_interval_order`].
    pub fn with_rank(&self, frame: DataFrame) -> Result<DataFrame> {
        let mut frame = frame;
        let rank = self.rank_column(&frame)?;
        frame.with_column(rank).engine("ranking pipelines")?;
        Ok(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config of snapshot sources and the given `[[operation]]` tables.
    fn config(operations: &str) -> Config {
        let text = format!(
            "airflow = {{ snapshot = \"attempts.csv\" }}\n\
             journal = {{ snapshot = \"journal.csv\" }}\n\
             provider = {{ snapshot = \"provider.csv\" }}\n{operations}"
        );
        Config::parse(&text, std::path::Path::new("/etc/onceonly/onceonly.toml")).unwrap()
    }

    fn frame(rows: &[(Option<&str>, Option<&str>)]) -> DataFrame {
        let dags: Vec<Option<&str>> = rows.iter().map(|(dag, _)| *dag).collect();
        let tasks: Vec<Option<&str>> = rows.iter().map(|(_, task)| *task).collect();
        DataFrame::new_infer_height(vec![
            Column::new("dag_id".into(), dags),
            Column::new("task_id".into(), tasks),
        ])
        .unwrap()
    }

    /// The frames keep pipeline codes; the operations named and ranked from them must be what
    /// the rows' DAGs and tasks say, in the order the rows would sort by operation name, DAG,
    /// then pipeline.
    #[test]
    fn operations_name_and_rank_each_pipeline_as_its_rows_would() {
        let config = config(
            r#"
[[operation]]
name = "zeta"
dag_id = "b_*"
task_id = "export"
[[operation]]
name = "alpha"
dag_id = "a"
task_id = "export"
"#,
        );
        let try_rows = [
            (Some("b_2"), Some("export")),
            (Some("a"), Some("export")),
            (Some("b_1"), Some("export")),
            (Some("b_1"), Some("export")),
            (Some("c"), Some("other")),
            (None, Some("export")),
        ];
        let journal_rows = [
            (Some("c"), Some("other")),
            (Some("a"), None),
            (Some("b_1"), Some("export")),
            (Some("d"), Some("export")),
        ];
        let (tries, journal) = (frame(&try_rows), frame(&journal_rows));
        let mut pipelines = Pipelines::default();
        let try_codes = pipelines.column(&config, &tries, Unnamed::Null).unwrap();
        let journal_codes = pipelines
            .column(&config, &journal, Unnamed::DagTask)
            .unwrap();
        let codes =
            |column: &Column| -> Vec<Option<u32>> { column.u32().unwrap().iter().collect() };
        // A task no operation names has no pipeline among the tries, and one named after it in
        // the journal; the same DAG's task has the same code in both.
        assert_eq!(
            codes(&try_codes),
            [Some(0), Some(1), Some(2), Some(2), None, None]
        );
        assert_eq!(codes(&journal_codes), [Some(3), None, Some(2), Some(4)]);
        let operations = pipelines.operations();
        let named: Vec<&str> = (0..5).map(|code| operations.name(code)).collect();
        assert_eq!(named, ["zeta", "alpha", "zeta", "c.other", "d.export"]);

        // Every row of both frames, sorted by rank, comes in the order of its operation's
        // name, its DAG, then its pipeline code.
        let mut rows: Vec<(u32, Option<u32>, Option<&str>)> = Vec::new();
        for (frame, read, column) in [
            (&tries, &try_rows[..], &try_codes),
            (&journal, &journal_rows[..], &journal_codes),
        ] {
            let with_codes = frame.hstack(std::slice::from_ref(column)).unwrap();
            let ranks = operations.rank_column(&with_codes).unwrap();
            let ranks = ranks.u32().unwrap().iter().zip(codes(column));
            for ((rank, code), (dag, _)) in ranks.zip(read) {
                if let (Some(rank), Some(_)) = (rank, code) {
                    rows.push((rank, code, *dag));
                }
            }
        }
        let mut by_rank = rows.clone();
        by_rank.sort_by_key(|&(rank, _, _)| rank);
        let mut by_text = rows.clone();
        by_text.sort_by_key(|&(_, code, dag)| {
            let code = code.unwrap();
            (operations.name(code), dag, code)
        });
        let order = |rows: &[(u32, Option<u32>, Option<&str>)]| -> Vec<Option<u32>> {
            rows.iter().map(|&(_, code, _)| code).collect()
        };
        assert_eq!(order(&by_rank), order(&by_text));
        assert_eq!(
            order(&by_rank),
            [
                Some(1),
                Some(3),
                Some(4),
                Some(2),
                Some(2),
                Some(2),
                Some(0)
            ]
        );
        // Rows without a pipeline have no rank.
        let ranks = operations
            .rank_column(&tries.hstack(&[try_codes]).unwrap())
            .unwrap();
        assert_eq!(ranks.null_count(), 2);
    }

    /// A journal row that names its try takes the try's pipeline instead of coding its DAG
    /// and task: every row must get the code `column` gives it, rows without a try (a task no
    /// try has, a NULL task, a DAG only the journal has) coded in row order as `column` codes
    /// them.
    #[test]
    fn rows_named_through_their_tries_get_the_codes_of_their_texts() {
        let config = config(
            r#"
[[operation]]
name = "exports"
dag_id = "b_*"
task_id = "export"
"#,
        );
        let tries = frame(&[
            (Some("b_2"), Some("export")),
            (Some("b_1"), Some("export")),
            (Some("c"), Some("other")),
        ]);
        let journal_rows = [
            (Some("b_1"), Some("export")),
            (Some("e"), Some("load")),
            (Some("b_2"), Some("export")),
            (Some("b_1"), None),
            (Some("d"), Some("export")),
            (Some("b_3"), Some("export")),
            (Some("e"), Some("load")),
            (Some("b_2"), Some("export")),
        ];
        // The try each journal row names: rows 0, 2 and 7 name tries of their DAG and task;
        // row 7 names none although a try has its DAG and task (its own try was purged).
        let named = [Some(1), None, Some(0), None, None, None, None, None];
        let journal = frame(&journal_rows);
        let codes =
            |column: &Column| -> Vec<Option<u32>> { column.u32().unwrap().iter().collect() };

        let mut by_texts = Pipelines::default();
        let try_codes = by_texts.column(&config, &tries, Unnamed::Null).unwrap();
        let expected = by_texts
            .column(&config, &journal, Unnamed::DagTask)
            .unwrap();

        let mut through_tries = Pipelines::default();
        let try_codes_again = through_tries
            .column(&config, &tries, Unnamed::Null)
            .unwrap();
        assert_eq!(codes(&try_codes), codes(&try_codes_again));
        let of_try = codes(&try_codes);
        let got = through_tries
            .column_through_tries(
                &config,
                &journal,
                Unnamed::DagTask,
                named.iter().copied(),
                |row| of_try[row as usize],
            )
            .unwrap();
        assert_eq!(codes(&got), codes(&expected));
        assert_eq!(
            codes(&got),
            [
                Some(1),
                Some(3),
                Some(0),
                None,
                Some(4),
                Some(5),
                Some(3),
                Some(0)
            ]
        );
        let (by_texts, through_tries) = (by_texts.operations(), through_tries.operations());
        for code in 0..6 {
            assert_eq!(by_texts.name(code), through_tries.name(code));
        }
    }
}
