//! One page of a provider listing, as the client reads it: any bytes are an answer, and the
//! answer is rows or an `Incomplete` error, never a panic.
#![no_main]

use std::collections::BTreeMap;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use onceonly::sources::provider_http::{
    Auth, JsonPath, MoreFlag, Pagination, ProviderApi, Window, parse_page,
};
use onceonly::sources::retry::RetryPolicy;

fn api(nested: bool) -> ProviderApi {
    let path = |text: &str| JsonPath::parse(text).expect("a fixed path");
    let mut fields = BTreeMap::new();
    if nested {
        // A provider whose objects keep the interesting fields one level down.
        fields.insert("external_id".to_string(), path("id"));
        fields.insert("op_key".to_string(), path("metadata.key"));
        fields.insert("created_at".to_string(), path("created"));
        fields.insert("interval_start".to_string(), path("metadata.window.0"));
        fields.insert("interval_end".to_string(), path("metadata.window.1"));
    }
    ProviderApi {
        url: "http://127.0.0.1:1/exports".into(),
        shown: "provider listing http://127.0.0.1:1/exports".into(),
        pagination: Pagination::Cursor {
            param: "cursor".into(),
            next: path("next_cursor"),
        },
        page_size_param: Some("limit".into()),
        page_size: 100,
        items: path(if nested { "result.items" } else { "data" }),
        total: None,
        has_more: MoreFlag::IfPresent(path("has_more")),
        created_after_param: None,
        created_before_param: None,
        time_format: onceonly::sources::provider_http::TimeFormat::Rfc3339,
        query: BTreeMap::new(),
        fields,
        auth: Auth::None,
        concurrency: 1,
        min_interval: None,
        retry: RetryPolicy {
            retries: 0,
            backoff: Duration::from_millis(1),
            timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(1),
        },
        max_pages: 1,
        max_page_bytes: 1 << 20,
        max_objects: 1_000,
        sub_windows: 1,
        slack: 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let api = api(selector & 1 == 1);
    let window = if selector & 2 == 2 {
        // 2026-11-01 .. 2026-11-03
        Window {
            from: Some(1_793_491_200_000_000),
            to: Some(1_793_664_000_000_000),
        }
    } else {
        Window::unbounded()
    };
    match parse_page(&api, body, window) {
        Ok(provider) => {
            let names: Vec<&str> = provider
                .get_column_names()
                .iter()
                .map(|name| name.as_str())
                .collect();
            let expected: Vec<&str> = onceonly::model::PROVIDER
                .iter()
                .map(|spec| spec.name)
                .collect();
            assert_eq!(names, expected);
            // Every row keeps its object as JSON text that reads back.
            let raw = provider.column("raw").unwrap().str().unwrap();
            for text in raw.iter().flatten() {
                serde_json::from_str::<serde_json::Value>(text).expect("raw is JSON");
            }
            // external_id is never null or empty.
            let ids = provider.column("external_id").unwrap().str().unwrap();
            assert_eq!(ids.null_count(), 0);
        }
        Err(err) => {
            let message = err.to_string();
            assert!(!message.is_empty());
        }
    }
});
