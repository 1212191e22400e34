//! `onceonly.toml`'s `[airflow]` and `[provider]` tables: every config the repository ships or
//! documents still reads, and a key in the wrong place or of the wrong type is refused at its
//! line, saying where it belongs.

use std::path::Path;

use onceonly::config::{Config, Source};
use onceonly::sources::provider_http::Pagination;

use crate::scenario::fixtures;

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("/etc/onceonly/onceonly.toml")).map_err(|err| err.to_string())
}

/// The ```toml blocks of the README, in order.
fn readme_blocks() -> Vec<String> {
    let text = std::fs::read_to_string(fixtures().join("../README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// `full` with its `[provider]` table replaced by `provider`.
fn with_provider(full: &str, provider: &str) -> String {
    let start = full.find("[provider]").expect("[provider]");
    let end = full.find("[[operation]]").expect("[[operation]]");
    format!("{}{provider}\n{}", &full[..start], &full[end..])
}

#[test]
fn every_config_in_the_repository_and_readme_still_reads() {
    use onceonly::commands::synth::{self, Layout};
    for file in [
        "airflow/out/airflow-2.10.5/onceonly.toml",
        "airflow/out/airflow-3.3.2/onceonly.toml",
        "rules/onceonly.toml",
        "demo/onceonly.toml",
    ] {
        Config::load(&fixtures().join(file)).unwrap_or_else(|err| panic!("{file}: {err}"));
    }
    for (what, text) in [
        ("synth", synth::config(3, Layout::OperationPerDag, None)),
        ("synth glob", synth::config(3, Layout::GlobOperation, None)),
        (
            "synth listing",
            synth::config(
                3,
                Layout::OperationPerDag,
                Some("http://127.0.0.1:9/exports"),
            ),
        ),
    ] {
        parse(&text).unwrap_or_else(|err| panic!("{what}: {err}"));
    }

    let blocks = readme_blocks();
    let full = &blocks[0];
    parse(full).expect("the README's configuration");
    // The REST API lines of `[airflow]`, uncommented, instead of the database.
    let api = full
        .replace(
            "url = \"sqlite:////opt/airflow/airflow.db\"",
            "api = \"http://127.0.0.1:8080\"",
        )
        .replace("# api_version = ", "api_version = ")
        .replace("# username = ", "username = ")
        .replace("# page_size = ", "page_size = ")
        .replace("# retries = ", "retries = ")
        .replace("# backoff = ", "backoff = ")
        .replace("# timeout = ", "timeout = ")
        .replace("# deadline = ", "deadline = ")
        .replace(
            "# token_env = \"AIRFLOW_API_TOKEN\"",
            "token_env = \"PATH\"",
        );
    match parse(&api).expect("the README's REST API lines").attempts {
        Source::Api(api) => assert_eq!(api.retry.retries, 5),
        other => panic!("not the API: {other:?}"),
    }
    // The listing example (its secret's variable swapped for one that is always set).
    let listing = blocks
        .iter()
        .find(|block| block.contains("pagination = "))
        .expect("the listing example");
    let config = parse(&with_provider(
        full,
        &listing.replace("PROVIDER_API_TOKEN", "PATH"),
    ))
    .expect("the README's listing example");
    let Source::Listing(api) = config.provider.source else {
        panic!("not a listing");
    };
    assert!(matches!(api.pagination, Pagination::Cursor { .. }));
    assert_eq!(api.fields.len(), 6);
}

/// A config whose `[provider]` is `provider`, `[airflow]` is `airflow`.
fn config(airflow: &str, provider: &str) -> String {
    format!(
        "[airflow]\n{airflow}\n[journal]\nsnapshot = \"j.csv\"\n[provider]\n{provider}\n[[operation]]\ndag_id = \"*\"\ntask_id = \"export\"\n"
    )
}

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(message) => {
            assert!(message.contains("/etc/onceonly/onceonly.toml"), "{message}");
            message
        }
    }
}

#[test]
fn keys_of_another_style_kind_or_source_are_refused_at_their_line() {
    let listing = "url = \"http://127.0.0.1:9/exports\"";
    let snapshot = "snapshot = \"a.csv\"";
    let cases = [
        (
            config(
                snapshot,
                &format!("{listing}\npagination = \"page\"\nnext_cursor = \"next\""),
            ),
            "line 8: [provider] `next_cursor` does not apply to pagination = \"page\": it is a key of \"cursor\"",
        ),
        (
            config(
                snapshot,
                &format!("{listing}\npagination = \"stripe\"\nhas_next_page = \"pageInfo.more\""),
            ),
            "line 8: [provider] `has_next_page` does not apply to pagination = \"stripe\": it is a key of \"relay\"",
        ),
        (
            config(
                snapshot,
                &format!("{listing}\npagination = \"offset\"\ncursor_param = \"after\""),
            ),
            "it is a key of \"cursor\", \"stripe\" or \"relay\"",
        ),
        (
            config(
                snapshot,
                "snapshot = \"p.csv\"\nvoid_statuses = []\npagination = \"relay\"",
            ),
            "line 8: [provider] `pagination` applies to the listing API: it needs `url`, not `snapshot`",
        ),
        (
            config(
                snapshot,
                "snapshot = \"p.csv\"\n[provider.auth]\nkind = \"bearer\"\nenv = \"PATH\"",
            ),
            "[provider] `auth` applies to the listing API",
        ),
        (
            config(
                snapshot,
                &format!(
                    "{listing}\npagination = \"cursor\"\n[provider.auth]\nkind = \"bearer\"\nenv = \"PATH\"\nheader = \"X-Api-Key\""
                ),
            ),
            "line 11: [provider.auth] `header` applies to kind = \"header\", not \"bearer\"",
        ),
        (
            config(
                snapshot,
                &format!(
                    "{listing}\npagination = \"cursor\"\n[provider.auth]\nkind = \"basic\"\nuser = \"a\"\nheader = \"X\"\nenv = \"PATH\""
                ),
            ),
            "line 11: [provider.auth] `header` applies to kind = \"header\", not \"basic\"",
        ),
        (
            config(
                snapshot,
                &format!(
                    "{listing}\npagination = \"cursor\"\n[provider.auth]\nkind = \"token\"\nenv = \"PATH\""
                ),
            ),
            "line 9: [provider.auth] kind = \"token\": unknown variant `token`, expected one of `bearer`, `basic`, `header`",
        ),
        (
            config(
                snapshot,
                &format!("{listing}\npagination = \"cursor\"\nnext_cursr = \"n\""),
            ),
            "line 8: [provider] unknown key `next_cursr` (known: ",
        ),
        (
            config(snapshot, listing),
            "line 6: [provider] the listing needs `pagination`: \"cursor\", \"link\", \"page\", \"offset\", \"stripe\" or \"relay\"",
        ),
        (
            config(snapshot, &format!("{listing}\npagination = \"graphql\"")),
            "line 7: [provider] pagination = \"graphql\": unknown variant `graphql`, expected one of `cursor`, `link`, `page`, `offset`, `stripe`, `relay`",
        ),
        (
            config(
                "url = \"sqlite:///a.db\"\nretries = 3",
                "snapshot = \"p.csv\"",
            ),
            "line 3: [airflow] `retries` applies to the REST API: it needs `api`",
        ),
        (
            config(
                "snapshot = \"a.csv\"\ntoken_env = \"X\"",
                "snapshot = \"p.csv\"",
            ),
            "line 3: [airflow] `token_env` applies to the REST API: it needs `api`",
        ),
        (
            config(
                "api = \"http://127.0.0.1:8080\"\ntoken_env = \"PATH\"\nretrys = 3",
                "snapshot = \"p.csv\"",
            ),
            "line 4: [airflow] unknown key `retrys`",
        ),
    ];
    for (text, needle) in cases {
        let message = refused(&text);
        assert!(message.contains(needle), "{needle:?} not in {message:?}");
    }
}

#[test]
fn values_of_the_wrong_type_are_named_at_their_line() {
    let listing = "url = \"http://127.0.0.1:9/exports\"";
    let cases = [
        (
            config(
                "snapshot = \"a.csv\"",
                &format!("{listing}\npagination = \"page\"\nfirst_page = \"one\""),
            ),
            "line 8: [provider] invalid type: string \"one\", expected i64",
        ),
        (
            config(
                "snapshot = \"a.csv\"",
                &format!("{listing}\npagination = \"relay\"\nend_cursor = 5"),
            ),
            "line 8: [provider] invalid type: integer `5`, expected a string",
        ),
        (
            config(
                "snapshot = \"a.csv\"",
                &format!("{listing}\npagination = \"stripe\"\n\nretries = -1"),
            ),
            "line 9: [provider] invalid value: integer `-1`, expected u32",
        ),
        (
            config(
                "api = \"http://127.0.0.1:8080\"\ntoken_env = \"PATH\"\nbackoff = \"soon\"",
                "snapshot = \"p.csv\"",
            ),
            "line 4: [airflow] backoff = \"soon\" is not a duration",
        ),
        (
            config(
                "snapshot = \"a.csv\"",
                &format!("{listing}\npagination = \"cursor\"\n[provider.fields]\nexternal_id = 7"),
            ),
            "line 9: [provider.fields] invalid type: integer `7`, expected a string",
        ),
    ];
    for (text, needle) in cases {
        let message = refused(&text);
        assert!(message.contains(needle), "{needle:?} not in {message:?}");
    }
}

#[test]
fn stripe_and_relay_take_their_defaults_and_the_airflow_api_its_retries() {
    let listing = "url = \"http://127.0.0.1:9/exports\"";
    let read = |style: &str| {
        let config = parse(&config(
            "api = \"http://127.0.0.1:8080\"\ntoken_env = \"PATH\"\nretries = 2\nbackoff = \"50ms\"\ntimeout = \"5s\"\ndeadline = \"2m\"",
            &format!("{listing}\npagination = \"{style}\""),
        ))
        .unwrap();
        let Source::Api(airflow) = config.attempts else {
            panic!("not the API")
        };
        assert_eq!(airflow.retry.retries, 2);
        assert_eq!(airflow.retry.backoff, std::time::Duration::from_millis(50));
        assert_eq!(airflow.retry.timeout, std::time::Duration::from_secs(5));
        assert_eq!(airflow.retry.deadline, std::time::Duration::from_secs(120));
        let Source::Listing(api) = config.provider.source else {
            panic!("not a listing")
        };
        format!("{:?} {:?}", api.pagination, api.has_more)
    };
    assert_eq!(
        read("stripe"),
        "Stripe { param: \"starting_after\" } Required(JsonPath([\"has_more\"]))"
    );
    assert_eq!(
        read("relay"),
        "Relay { param: \"after\", has_next_page: JsonPath([\"pageInfo\", \"hasNextPage\"]), end_cursor: JsonPath([\"pageInfo\", \"endCursor\"]) } IfPresent(JsonPath([\"has_more\"]))"
    );
}
