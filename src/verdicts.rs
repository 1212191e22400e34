//! A verdict for every try of an operation task (SPEC §5), so a try Airflow recorded as
//! failed but that did cause the side effect is visible.
//!
//! | verdict | the try ... |
//! |---|---|
//! | `committed` | committed an object that it created, the first for its interval |
//! | `reconciled` | committed an object an earlier try of its interval had created (the provider replayed the key), or wrote a `reconciled` row |
//! | `duplicate` | created or committed an object while an earlier live object of its interval existed |
//! | `lost-response` | created an object under its key but committed nothing |
//! | `intent-only` | wrote an intent, no outcome, and nothing was created |
//! | `failed-before-effect` | failed with nothing created (a `failed` row, or no journal row at all) |
//! | `no-operation` | did not fail, wrote no journal row and created nothing under its key |

use polars::prelude::*;

use crate::error::{EngineContext, Result};
use crate::prepare::{OPERATION_INTERVAL, Prepared};
use crate::timing::Run;

pub const VERDICTS: [&str; 7] = [
    "committed",
    "reconciled",
    "duplicate",
    "lost-response",
    "intent-only",
    "failed-before-effect",
    "no-operation",
];

/// One row per operation try: the try's identity, its state, its key, the object it is tied
/// to and its verdict.
pub fn compute(prepared: &Prepared) -> Result<DataFrame> {
    // `try_row`: the row of `prepared.tries` a journal row's try is (prepare matched them).
    let on = [col("try_row")];
    let journal = prepared
        .journal()
        .filter(col("try_row").is_not_null())
        .sort(["recorded_at"], Default::default())
        .group_by(on.clone())
        .agg([
            col("op_key").first().alias("try_key"),
            col("phase").eq(lit("intent")).any(true).alias("has_intent"),
            col("phase").eq(lit("failed")).any(true).alias("has_failed"),
            col("phase")
                .eq(lit("reconciled"))
                .any(true)
                .alias("has_reconciled"),
            col("external_id")
                .filter(crate::model::is_done(col("phase")))
                .drop_nulls()
                .first()
                .alias("committed_id"),
        ]);
    let committed_objects = prepared.objects().select([
        col("external_id").alias("committed_id"),
        col("created_at").alias("committed_created"),
        col("iv_start").alias("committed_interval"),
    ]);

    let mut tries = prepared.tries.clone();
    tries
        .with_column(earlier_tries_ended(&prepared.tries)?)
        .engine("earlier_tries_ended")?;
    let tries = tries
        .lazy()
        .with_row_index("try_row", None)
        .join(
            journal,
            on.clone(),
            on.clone(),
            JoinArgs::new(JoinType::Left),
        )
        .join(
            committed_objects,
            [col("committed_id")],
            [col("committed_id")],
            JoinArgs::new(JoinType::Left),
        )
        .with_column(coalesce(&[col("try_key"), col("expected_key")]).alias("op_key"));

    // The earliest object the try created under its key while it ran.
    let created = tries
        .clone()
        .filter(col("start_date").is_not_null())
        .select(
            on.iter()
                .cloned()
                .chain([col("op_key"), col("start_date"), col("end_date")])
                .collect::<Vec<_>>(),
        )
        .join(
            prepared.objects().select([
                col("key"),
                col("external_id").alias("created_id"),
                col("created_at").alias("created_created"),
            ]),
            [col("op_key")],
            [col("key")],
            JoinArgs::new(JoinType::Inner),
        )
        .filter(
            // Providers often give whole seconds: an object stamped in the second the try
            // started was created by it.
            (col("created_created").cast(DataType::Int64) + lit(1_000_000i64))
                .gt(col("start_date").cast(DataType::Int64))
                .and(
                    col("end_date")
                        .is_null()
                        .or(col("created_created").lt_eq(col("end_date"))),
                ),
        )
        .sort(["created_created", "created_id"], Default::default())
        .group_by(on.clone())
        .agg([col("created_id").first(), col("created_created").first()]);

    let group: Vec<Expr> = OPERATION_INTERVAL.iter().map(|name| col(*name)).collect();
    let first_live = prepared
        .live_in_intervals()
        .sort(["created_at", "external_id"], Default::default())
        .group_by(group.clone())
        .agg([
            col("external_id").first().alias("first_live_id"),
            col("created_at").first().alias("first_live_created"),
        ]);

    let object = coalesce(&[col("committed_id"), col("created_id")]);
    // A duplicate: a live object of the interval already existed when this one was created.
    let created_at = coalesce(&[col("committed_created"), col("created_created")]);
    let is_later_duplicate = col("first_live_id")
        .is_not_null()
        .and(col("first_live_id").neq(object.clone()))
        .and(col("first_live_created").lt(created_at));
    let failed = col("state").is_in(
        lit(Series::new(
            "failed".into(),
            ["failed", "up_for_retry", "upstream_failed"],
        ))
        .implode(false),
        false,
    );
    // An object of another interval (a key collision, K003) is not this interval's replay.
    let own_interval = col("committed_interval")
        .is_null()
        .or(col("committed_interval").eq(col("iv_start")));
    let verdict = when(
        col("committed_id").is_not_null().and(own_interval).and(
            col("has_reconciled")
                .fill_null(lit(false))
                .or(col("committed_created").lt_eq(col("earlier_tries_ended"))),
        ),
    )
    .then(lit("reconciled"))
    .when(
        col("committed_id")
            .is_not_null()
            .and(is_later_duplicate.clone()),
    )
    .then(lit("duplicate"))
    .when(col("committed_id").is_not_null())
    .then(lit("committed"))
    .when(col("created_id").is_not_null().and(is_later_duplicate))
    .then(lit("duplicate"))
    .when(col("created_id").is_not_null())
    .then(lit("lost-response"))
    .when(
        col("has_intent")
            .fill_null(lit(false))
            .and(col("has_failed").fill_null(lit(false)).not())
            .and(failed.clone().not()),
    )
    .then(lit("intent-only"))
    .when(col("has_failed").fill_null(lit(false)).or(failed))
    .then(lit("failed-before-effect"))
    .when(col("has_intent").fill_null(lit(false)))
    .then(lit("intent-only"))
    .otherwise(lit("no-operation"));

    tries
        .join(created, on.clone(), on, JoinArgs::new(JoinType::Left))
        .join(
            first_live,
            group.clone(),
            group,
            JoinArgs::new(JoinType::Left),
        )
        .select([
            col("dag_id"),
            col("task_id"),
            col("map_index"),
            col("run_id"),
            col("try_number"),
            col("operation"),
            col("interval"),
            col("basis"),
            col("state"),
            col("start_date"),
            col("end_date"),
            col("hostname"),
            col("pid"),
            col("op_key"),
            object.alias("external_id"),
            verdict.alias("verdict"),
        ])
        .run("computing verdicts")
}

/// Adds `earlier_tries_ended`: when the earlier tries of the try's operation interval had ended
/// (the latest end among the interval's tries that started before it; ties in start go by try
/// number, then run id). An object created by then was not created by this try. (Not "before
/// this try started": providers often round creation times to the second, which would make
/// every object look older.)
///
/// Computed here rather than as a polars window over four key columns, which took seconds at a
/// million tries.
fn earlier_tries_ended(prepared: &DataFrame) -> Result<Column> {
    let text = |name: &str| crate::cells::text_column(prepared, name);
    let int = |name: &str| crate::cells::int_column(prepared, name);
    let (operation, run_id) = (text("operation")?, text("run_id")?);
    let (map_index, try_number) = (int("map_index")?, int("try_number")?);
    let (iv_start, iv_end) = (int("iv_start")?, int("iv_end")?);
    let (start, end) = (int("start_date")?, int("end_date")?);

    let mut groups: PlHashMap<_, u32> = PlHashMap::with_capacity(prepared.height());
    // (interval group, start, try number, run id, row): the order tries follow in a group.
    type Place<'a> = (u32, Option<i64>, Option<i64>, Option<&'a str>, usize);
    let mut order: Vec<Place<'_>> = Vec::with_capacity(prepared.height());
    let interval = operation
        .iter()
        .zip(map_index.iter())
        .zip(iv_start.iter().zip(iv_end.iter()));
    let when = start.iter().zip(try_number.iter()).zip(run_id.iter());
    for (row, (interval, ((start, number), run))) in interval.zip(when).enumerate() {
        let next = groups.len() as u32;
        let group = *groups.entry(interval).or_insert(next);
        order.push((group, start, number, run, row));
    }
    order.sort_unstable();
    let end: Vec<Option<i64>> = end.iter().collect();
    let mut ended: Vec<Option<i64>> = vec![None; prepared.height()];
    let mut latest: Option<i64> = None;
    for (position, &(group, .., row)) in order.iter().enumerate() {
        if position == 0 || order[position - 1].0 != group {
            latest = None;
        }
        ended[row] = latest;
        latest = latest.max(end[row]);
    }
    Series::new("earlier_tries_ended".into(), ended)
        .cast(&crate::model::utc())
        .map(Column::from)
        .engine("earlier_tries_ended")
}
