//! Benchmark (run by hand, not a test): read the `attempts` table from an Airflow 3.x metadata
//! database on PostgreSQL and print how many rows came back and how long it took.
//!
//!     ONCEONLY_TEST_PG_URL=postgresql+psycopg2://airflow@127.0.0.1:5432/airflow \
//!     ONCEONLY_TEST_PG_PASSWORD=... \
//!     cargo run --release --example bench_read_attempts [-- MODE]
//!
//! bench/pg_read.sh creates the data (1,000,000 tries) and compares this against psql's
//! `\copy (same query) to /dev/null`. MODE is one of:
//!
//! * `read` (default): `onceonly::sources::airflow_db::read`, what `onceonly audit` does.
//!
//! The others are diagnostics, NOT onceonly's code path; they show where the time goes:
//!
//! * `any-rows`: the same query through sqlx's Any driver (as `read` uses), rows only counted.
//! * `pg-rows`: the same query through sqlx's native `PgConnection`, rows only counted.
//! * `pg-text`: native `PgConnection`, the same query, every cell decoded as `read` does
//!   (timestamps parsed from text by `onceonly::timestamp::parse`) into a polars DataFrame.
//! * `any-epoch`: Any driver, a variant query that selects times as epoch microseconds
//!   (`bigint`) instead of `to_char` text, decoded into a DataFrame.
//! * `pg-epoch`: native `PgConnection`, the epoch variant, decoded into a DataFrame.
//! * `parse`: no database; `onceonly::timestamp::parse` over 6,000,000 strings of the form
//!   the query returns (6 time columns x 1,000,000 rows).
//! * `epoch-sql`: prints the epoch variant query with its parameters substituted (for psql).
//!
//! Output is one line of `key=value` pairs, so the script can pick figures out of it.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use futures_util::TryStreamExt;
use onceonly::sources::airflow_db::{self, Filter};
use onceonly::sources::database::{Database, Dialect};
use polars::prelude::*;
use sqlx::postgres::PgConnection;
use sqlx::{AnyConnection, AssertSqlSafe, Connection, Row};

const QUERY: &str = include_str!("../queries/airflow/3/postgres/attempts.sql");

fn main() -> Result<()> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "read".into());
    if mode == "epoch-sql" {
        let (since, until) = Dialect::Postgres.window_bounds(None, None);
        let sql = epoch_query()
            .replace("$1", &format!("'{since}'"))
            .replace("$2", &format!("'{until}'"))
            .replace("$3", "'%'");
        // One line, without the comment lines, for psql's \copy.
        let sql: Vec<&str> = sql
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .collect();
        println!("{}", sql.join(" "));
        return Ok(());
    }
    if mode == "parse" {
        return parse_only();
    }
    let url = std::env::var("ONCEONLY_TEST_PG_URL").context("ONCEONLY_TEST_PG_URL is not set")?;
    let password = std::env::var("ONCEONLY_TEST_PG_PASSWORD").ok();
    let database = Database::parse(&url, Path::new("."), password).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    // `bytes`: the DataFrame's own size (polars' estimate), where there is one.
    let (rows, bytes) = runtime.block_on(async {
        match mode.as_str() {
            "read" => {
                let read = airflow_db::read(&database, &Filter::default())
                    .await
                    .map_err(|err| anyhow::anyhow!("{err:?}"))?;
                Ok((read.attempts.height(), read.attempts.estimated_size()))
            }
            "any-rows" => any_rows(&database).await,
            "pg-rows" => pg_rows(&database).await,
            "pg-text" => pg_frame(&database, QUERY.to_string(), false).await,
            "pg-epoch" => pg_frame(&database, epoch_query(), true).await,
            "any-epoch" => any_epoch(&database).await,
            other => bail!("unknown mode {other}"),
        }
    })?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "mode={mode} rows={rows} frame_mib={:.1} seconds={seconds:.3}",
        bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// The attempts query with every `to_char(X AT TIME ZONE 'UTC', '…')` replaced by
/// `(extract(epoch FROM X) * 1000000)::bigint`: microseconds since the epoch.
fn epoch_query() -> String {
    const TAIL: &str = " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
    let mut out = String::new();
    let mut rest = QUERY;
    while let Some(start) = rest.find("to_char(") {
        let after = &rest[start + "to_char(".len()..];
        let end = after
            .find(TAIL)
            .expect("to_char( ... AT TIME ZONE 'UTC', ...)");
        let expr = &after[..end];
        out.push_str(&rest[..start]);
        out.push_str(&format!("(extract(epoch FROM {expr}) * 1000000)::bigint"));
        rest = &after[end + TAIL.len()..];
    }
    out.push_str(rest);
    out
}

fn binds() -> (String, String, String) {
    let (since, until) = Dialect::Postgres.window_bounds(None, None);
    (since, until, "%".to_string())
}

async fn any_connection(database: &Database) -> Result<AnyConnection> {
    database
        .connect()
        .await
        .map_err(|err| anyhow::anyhow!("{err:?}"))
}

async fn pg_connection(database: &Database) -> Result<PgConnection> {
    let mut connection = PgConnection::connect(&database.url).await?;
    for statement in [
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
        "SET TIME ZONE 'UTC'",
    ] {
        sqlx::query(statement).execute(&mut connection).await?;
    }
    Ok(connection)
}

async fn any_rows(database: &Database) -> Result<(usize, usize)> {
    let mut connection = any_connection(database).await?;
    let (since, until, dag) = binds();
    let mut stream = sqlx::query(QUERY)
        .bind(since)
        .bind(until)
        .bind(dag)
        .fetch(&mut connection);
    let mut rows = 0;
    while let Some(_row) = stream.try_next().await? {
        rows += 1;
    }
    Ok((rows, 0))
}

async fn pg_rows(database: &Database) -> Result<(usize, usize)> {
    let mut connection = pg_connection(database).await?;
    let (since, until, dag) = binds();
    let mut stream = sqlx::query(QUERY)
        .bind(since)
        .bind(until)
        .bind(dag)
        .fetch(&mut connection);
    let mut rows = 0;
    while let Some(_row) = stream.try_next().await? {
        rows += 1;
    }
    Ok((rows, 0))
}

/// Column builders in the order of the query's select list.
enum Builder {
    Text(&'static str, Vec<Option<String>>),
    Int(&'static str, Vec<Option<i64>>),
    Time(&'static str, Vec<Option<i64>>),
}

fn builders() -> Vec<Builder> {
    use Builder::*;
    vec![
        Text("dag_id", Vec::new()),
        Text("task_id", Vec::new()),
        Int("map_index", Vec::new()),
        Text("run_id", Vec::new()),
        Text("run_type", Vec::new()),
        Int("try_number", Vec::new()),
        Text("state", Vec::new()),
        Time("start_date", Vec::new()),
        Time("end_date", Vec::new()),
        Text("hostname", Vec::new()),
        Int("pid", Vec::new()),
        Time("queued_at", Vec::new()),
        Time("interval_start", Vec::new()),
        Time("interval_end", Vec::new()),
        Time("logical_date", Vec::new()),
        Time("run_after", Vec::new()),
        Text("conf", Vec::new()),
        Int("clear_number", Vec::new()),
    ]
}

fn frame(builders: Vec<Builder>) -> Result<DataFrame> {
    let columns = builders
        .into_iter()
        .map(|builder| match builder {
            Builder::Text(name, values) => Column::new(name.into(), values),
            Builder::Int(name, values) => Column::new(name.into(), values),
            Builder::Time(name, values) => {
                Int64Chunked::from_iter_options(name.into(), values.into_iter())
                    .into_datetime(TimeUnit::Microseconds, None)
                    .into_column()
            }
        })
        .collect();
    Ok(DataFrame::new_infer_height(columns)?)
}

/// Decodes one row (native or Any) into the builders: text as `String`, integers as `i64`,
/// times either parsed from text (`epoch == false`) or taken as epoch microseconds.
macro_rules! push_row {
    ($row:expr, $builders:expr, $epoch:expr) => {
        for (index, builder) in $builders.iter_mut().enumerate() {
            match builder {
                Builder::Text(_, values) => values.push($row.try_get::<Option<String>, _>(index)?),
                Builder::Int(_, values) => values.push($row.try_get::<Option<i64>, _>(index)?),
                Builder::Time(name, values) if $epoch => {
                    let _ = name;
                    values.push($row.try_get::<Option<i64>, _>(index)?)
                }
                Builder::Time(name, values) => {
                    let text: Option<String> = $row.try_get(index)?;
                    let value = match text.as_deref() {
                        None | Some("") => None,
                        Some(text) => Some(
                            onceonly::timestamp::parse(text)
                                .with_context(|| format!("{name}: {text:?}"))?,
                        ),
                    };
                    values.push(value)
                }
            }
        }
    };
}

async fn pg_frame(database: &Database, sql: String, epoch: bool) -> Result<(usize, usize)> {
    let mut connection = pg_connection(database).await?;
    let (since, until, dag) = binds();
    let mut builders = builders();
    // Our own query text (the bundled file, or its epoch rewrite), not user input.
    let mut stream = sqlx::query(AssertSqlSafe(sql))
        .bind(since)
        .bind(until)
        .bind(dag)
        .fetch(&mut connection);
    while let Some(row) = stream.try_next().await? {
        push_row!(row, builders, epoch);
    }
    drop(stream);
    let frame = frame(builders)?;
    Ok((frame.height(), frame.estimated_size()))
}

async fn any_epoch(database: &Database) -> Result<(usize, usize)> {
    let mut connection = any_connection(database).await?;
    let (since, until, dag) = binds();
    let mut builders = builders();
    let sql = epoch_query();
    let mut stream = sqlx::query(AssertSqlSafe(sql))
        .bind(since)
        .bind(until)
        .bind(dag)
        .fetch(&mut connection);
    while let Some(row) = stream.try_next().await? {
        push_row!(row, builders, true);
    }
    drop(stream);
    let frame = frame(builders)?;
    Ok((frame.height(), frame.estimated_size()))
}

/// `onceonly::timestamp::parse` alone, over strings of the form the query produces
/// (`to_char(..., 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`).
fn parse_only() -> Result<()> {
    let texts: Vec<String> = (0..6_000_000i64)
        .map(|i| {
            let micros = 1_725_148_800_000_000 + i * 37_000_123;
            chrono::DateTime::from_timestamp_micros(micros)
                .expect("in range")
                .format("%Y-%m-%dT%H:%M:%S%.6fZ")
                .to_string()
        })
        .collect();
    assert!(texts[0].ends_with('Z') && texts[0].len() == "2024-09-01T00:00:00.000000Z".len());
    let started = Instant::now();
    let mut sum = 0i64;
    for text in &texts {
        sum = sum.wrapping_add(onceonly::timestamp::parse(text).context("parse")?);
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "mode=parse values={} seconds={seconds:.3} ns_per_value={:.0} checksum={sum} sample={}",
        texts.len(),
        seconds * 1e9 / texts.len() as f64,
        texts[1]
    );
    Ok(())
}
