//! Benchmark (run by hand, not a test): read the `attempts` table from an Airflow metadata
//! database on PostgreSQL with `onceonly::sources::airflow_db::read`, the code path of
//! `onceonly audit` (connection, schema version and column checks, the query, every row into
//! the polars DataFrame), and print how many rows came back and how long it took.
//!
//!     ONCEONLY_TEST_PG_URL=postgresql+psycopg2://airflow@127.0.0.1:5432/airflow \
//!     ONCEONLY_TEST_PG_PASSWORD=... \
//!     cargo run --release --example bench_read_attempts
//!
//! bench/pg_read.sh creates the data (1,000,000 tries) and compares this with psql's `\copy`
//! of the same rows. Output is one line of `key=value` pairs, for the script to pick from.
//!
//! An SQLite file is read the same way: `ONCEONLY_TEST_PG_URL=sqlite:////path/to/airflow.db`
//! (a `synth` scenario's `airflow.db`; bench/scale/README.md, issue 18, stop 25).

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use onceonly::sources::airflow_db::{self, Filter};
use onceonly::sources::database::Database;

fn main() -> ExitCode {
    let url = std::env::var("ONCEONLY_TEST_PG_URL").unwrap_or_default();
    let password = std::env::var("ONCEONLY_TEST_PG_PASSWORD").ok();
    let database = match Database::parse(&url, Path::new("."), password) {
        Ok(database) => database,
        Err(message) => {
            eprintln!("bench_read_attempts: ONCEONLY_TEST_PG_URL: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let started = Instant::now();
    match runtime.block_on(airflow_db::read(&database, &Filter::default())) {
        Ok(read) => {
            println!(
                "mode=read rows={} frame_mib={:.1} seconds={:.3}",
                read.attempts.height(),
                read.attempts.estimated_size() as f64 / (1024.0 * 1024.0),
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("bench_read_attempts: {err}");
            ExitCode::from(2)
        }
    }
}
