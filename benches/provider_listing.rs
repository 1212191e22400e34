//! Issue 4's speed target, run by hand: `cargo bench --bench provider_listing` (release) or
//! `cargo test --bench provider_listing` (a debug build).
//!
//! 1,000 pages at 50 ms latency each from the mock provider on loopback, concurrency 8: the
//! wall time as a ratio of the ideal (pages / concurrency × latency), for a page-number API
//! and for a cursor and a Stripe-style API read in created-at slices. Target: at most 1.3×
//! the ideal.

use std::path::Path;
use std::time::{Duration, Instant};

use onceonly::commands::mock_provider::{self, MockOptions, MockPagination};
use onceonly::config::{Config, Source};
use onceonly::sources::provider_http::{self, Window};
use serde_json::json;

const PAGES: usize = 1_000;
const PAGE_SIZE: usize = 10;
const LATENCY: Duration = Duration::from_millis(50);
const CONCURRENCY: usize = 8;
const START: i64 = 1_790_000_000;

fn main() {
    // Objects ten seconds apart: an even spread, as a day of exports would roughly be.
    let objects: Vec<_> = (0..PAGES * PAGE_SIZE)
        .map(|i| {
            json!({
                "id": format!("exp_{i:06}"),
                "created": START + 10 * i as i64,
                "status": "live",
                "idempotency_key": format!("orders:{i}"),
                "payload_sha256": format!("{i:064x}"),
            })
        })
        .collect();
    let window = Window {
        from: Some(START * 1_000_000),
        to: Some((START + 10 * (PAGES * PAGE_SIZE) as i64) * 1_000_000),
    };
    let ideal = LATENCY.as_secs_f64() * PAGES as f64 / CONCURRENCY as f64;
    println!(
        "{PAGES} pages of {PAGE_SIZE}, {} ms latency, concurrency {CONCURRENCY}: ideal {ideal:.2} s",
        LATENCY.as_millis()
    );
    for (style, pagination) in [
        (
            MockPagination::Page,
            "pagination = \"page\"\ntotal = \"total\"",
        ),
        (MockPagination::Cursor, "pagination = \"cursor\""),
        (MockPagination::Stripe, "pagination = \"stripe\""),
    ] {
        let mut options = MockOptions::new(objects.clone(), style);
        options.page_size = PAGE_SIZE;
        options.latency = LATENCY;
        let mock = mock_provider::start(options, 0).expect("mock provider");
        let text = format!(
            r#"[airflow]
snapshot = "a.csv"
[journal]
snapshot = "j.csv"
[provider]
url = "{}"
{pagination}
page_size = {PAGE_SIZE}
created_after_param = "created_after"
created_before_param = "created_before"
time_format = "epoch_seconds"
concurrency = {CONCURRENCY}
requests_per_second = 1000
max_pages = 5000
[provider.fields]
external_id = "id"
op_key = "idempotency_key"
created_at = "created"
payload_hash = "payload_sha256"
[[operation]]
dag_id = "*"
task_id = "export"
"#,
            mock.url()
        );
        let config = Config::parse(&text, Path::new("bench.toml")).expect("config");
        let Source::Listing(api) = config.provider.source else {
            panic!("not a listing")
        };
        let started = Instant::now();
        let listed = provider_http::list_blocking(&api, window).expect("listing");
        let wall = started.elapsed().as_secs_f64();
        assert_eq!(listed.provider.height(), PAGES * PAGE_SIZE);
        println!(
            "{style:?}: {} objects, {} pages, {} requests, {} slices: {wall:.2} s = {:.2}x ideal",
            listed.provider.height(),
            listed.coverage.pages,
            listed.coverage.requests,
            listed.coverage.sub_windows,
            wall / ideal
        );
    }
}
