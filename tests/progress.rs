//! Progress on stderr (SPEC §7): shown on a terminal, never in a pipe or with `--quiet`;
//! `NO_COLOR` and `TERM=dumb` honoured.
//!
//! The audit reads the real-Airflow 3.3.2 fixture with the provider listed from the mock on
//! loopback, two objects a page with latency, so the listing takes long enough to be drawn.
//! The terminal is a real pseudo-terminal: util-linux's `script` runs the audit on one and
//! copies what it wrote there to its own stdout.

use std::process::{Command, Output};
use std::time::Duration;

use onceonly::commands::mock_provider::{self, Fault, MockOptions, MockPagination, MockProvider};

use crate::provider_http::{listing_scenario, state};
use crate::scenario::{Scenario, stderr};

/// The mock, slow enough that progress is redrawn while it lists; `faults` as
/// `onceonly mock-provider --fault` takes them.
fn slow_mock(faults: &[&str]) -> MockProvider {
    let mut options = MockOptions::new(state(), MockPagination::Cursor);
    options.page_size = 2;
    options.latency = Duration::from_millis(60);
    options.faults = faults
        .iter()
        .map(|fault| fault.parse::<Fault>().expect("fault"))
        .collect();
    mock_provider::start(options, 0).expect("mock provider")
}

fn scenario(mock: &MockProvider) -> Scenario {
    listing_scenario(&mock.url(), MockPagination::Cursor, "page_size = 2")
}

/// `onceonly audit ARGS` on a pseudo-terminal 200 columns wide, with `env` set (TERM and
/// NO_COLOR are removed unless given): what appeared on the terminal, and the exit code.
fn audit_on_a_terminal(scenario: &Scenario, args: &str, env: &[(&str, &str)]) -> (String, i32) {
    let report = scenario.path("report.json");
    let command = format!(
        "stty cols 200 rows 40; exec {} audit --config {} --format json --output {} {args}",
        env!("CARGO_BIN_EXE_onceonly"),
        scenario.config().display(),
        report.display()
    );
    let mut script = Command::new("script");
    script
        .args([
            "--quiet",
            "--flush",
            "--return",
            "--command",
            &command,
            "/dev/null",
        ])
        .env_remove("ONCEONLY_CONFIG")
        .env_remove("NO_COLOR")
        .env_remove("TERM");
    for (name, value) in env {
        script.env(name, value);
    }
    let output = script.output().expect("util-linux's script runs");
    let code = output.status.code().unwrap_or(-1);
    let screen = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        report.exists(),
        "the audit wrote no report ({code}): {screen}{}",
        stderr(&output)
    );
    (screen, code)
}

fn audit_piped(scenario: &Scenario, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_onceonly"));
    command
        .args(["audit", "--format", "json", "--config"])
        .arg(scenario.config())
        .env_remove("ONCEONLY_CONFIG")
        .env_remove("NO_COLOR");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run onceonly")
}

/// A terminal's text without its escape sequences (CSI `ESC [ … letter`) and redraws.
fn plain(screen: &str) -> String {
    let mut out = String::new();
    let mut chars = screen.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[test]
fn a_terminal_shows_each_source_read_and_a_retry_waiting_a_pipe_shows_nothing() {
    // The second listing request is answered 429 with `Retry-After: 1`.
    let mock = slow_mock(&["rate-limit@2=1"]);
    let scenario = scenario(&mock);
    let (screen, code) = audit_on_a_terminal(&scenario, "", &[("TERM", "xterm-256color")]);
    assert_eq!(code, 1, "findings: {screen}");
    let text = plain(&screen);
    for expected in [
        "reading attempts",
        "reading journal",
        "reading provider",
        " objects/s",
        "waiting 1.0s (Retry-After) after HTTP 429 Too Many Requests",
        "from provider listing http://127.0.0.1:",
    ] {
        assert!(
            text.contains(expected),
            "no {expected:?} on the terminal: {text:?}"
        );
    }
    assert!(
        text.contains(" pages, "),
        "the pages read are counted: {text:?}"
    );
    // Lines are redrawn in place, in colour.
    assert!(screen.contains("\r\x1b[2K"), "not redrawn: {screen:?}");
    assert!(screen.contains("\x1b[36m"), "not coloured: {screen:?}");

    // The same audit with stderr in a pipe: the report, and not one byte of progress.
    let mock = slow_mock(&["rate-limit@2=1"]);
    let scenario = self::scenario(&mock);
    let output = audit_piped(&scenario, &[("TERM", "xterm-256color")]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let piped = stderr(&output);
    assert!(
        !piped.contains('\r') && !piped.contains('\x1b') && !piped.contains("reading"),
        "progress in a pipe: {piped:?}"
    );
    assert!(!output.stdout.is_empty());
}

#[test]
fn quiet_shows_nothing_even_on_a_terminal() {
    let mock = slow_mock(&[]);
    let scenario = scenario(&mock);
    let (screen, _) = audit_on_a_terminal(&scenario, "--quiet", &[("TERM", "xterm")]);
    assert!(
        !screen.contains("reading") && !screen.contains('\x1b'),
        "progress despite --quiet: {screen:?}"
    );
    let (screen, _) = audit_on_a_terminal(&scenario, "", &[("TERM", "xterm")]);
    assert!(screen.contains("reading provider"), "{screen:?}");
}

#[test]
fn no_color_draws_without_colour_and_a_dumb_terminal_gets_plain_lines() {
    let mock = slow_mock(&[]);
    let scenario = scenario(&mock);
    let (screen, _) = audit_on_a_terminal(&scenario, "", &[("TERM", "xterm"), ("NO_COLOR", "1")]);
    assert!(screen.contains("reading provider"), "{screen:?}");
    // Redrawn (erase line), but no SGR sequence: no colour, no bold.
    assert!(screen.contains("\x1b[2K"), "{screen:?}");
    assert!(!has_sgr(&screen), "colour: {screen:?}");

    let (screen, _) = audit_on_a_terminal(&scenario, "", &[("TERM", "dumb")]);
    assert!(
        screen.contains("onceonly: read provider in ")
            && screen.contains("onceonly: read attempts in "),
        "{screen:?}"
    );
    // No escape sequence, and no carriage return but the terminal's own before each newline.
    assert!(!screen.contains('\x1b'), "{screen:?}");
    assert!(!screen.replace("\r\n", "\n").contains('\r'), "{screen:?}");
}

/// Whether the text holds a Select Graphic Rendition sequence (`ESC [ … m`): colour or bold.
fn has_sgr(screen: &str) -> bool {
    screen.split('\x1b').skip(1).any(|after| {
        after.strip_prefix('[').is_some_and(|csi| {
            let end = csi.find(|c: char| c.is_ascii_alphabetic());
            end.is_some_and(|end| csi.as_bytes()[end] == b'm')
        })
    })
}
