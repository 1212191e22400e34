//! Checks that need what a newcomer's machine may lack (a PostgreSQL server, Chromium, Airflow's
//! venv, root, a man page renderer) are skipped there, never silently: `skipped` records each
//! one, and when the test binary exits they are listed under libtest's summary, so a green run
//! says what it did not check. Under CI (`CI` set, as CI services and `.ci/run` set it) a skip
//! fails its test instead: CI provides all of them.
//!
//! `ONCEONLY_TEST_WITHOUT=postgres,chromium,airflow,root,man` makes the checks act as if those
//! were missing, to see a newcomer's run on a machine that has them.

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Mutex;

/// What `ONCEONLY_TEST_WITHOUT` may name.
const REQUIREMENTS: [&str; 5] = ["postgres", "chromium", "airflow", "root", "man"];

static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether CI runs these tests: `CI` set to anything but empty, `0` or `false`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
}

/// Whether the tests act as if `requirement` were missing (`ONCEONLY_TEST_WITHOUT`).
pub fn without(requirement: &str) -> bool {
    assert!(REQUIREMENTS.contains(&requirement), "{requirement}");
    let listed = std::env::var("ONCEONLY_TEST_WITHOUT").unwrap_or_default();
    let listed: Vec<&str> = listed
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    if let Some(unknown) = listed.iter().find(|name| !REQUIREMENTS.contains(name)) {
        panic!("ONCEONLY_TEST_WITHOUT names {unknown:?}; it knows {REQUIREMENTS:?}");
    }
    listed.contains(&requirement)
}

/// Airflow's Python (`ONCEONLY_TEST_AIRFLOW_PYTHON`, which `.ci/postgres.sh` sets), or None
/// once `what` is recorded as not checked.
pub fn airflow_python(what: &str) -> Option<std::ffi::OsString> {
    let python = std::env::var_os("ONCEONLY_TEST_AIRFLOW_PYTHON").filter(|_| !without("airflow"));
    if python.is_none() {
        skipped(
            what,
            "no ONCEONLY_TEST_AIRFLOW_PYTHON (`source .ci/postgres.sh` sets it)",
        );
    }
    python
}

/// The running test did not check `what`, for want of `why`: recorded for the list at exit,
/// or, under CI, this test's failure.
pub fn skipped(what: &str, why: &str) {
    let thread = std::thread::current();
    // libtest names each test's thread after the test.
    let test = thread.name().unwrap_or("a test");
    assert!(
        !in_ci(),
        "{what} not checked: {why}. CI provides everything these tests need, so nothing may \
         skip there"
    );
    let mut skipped = SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if skipped.is_empty() {
        // SAFETY: `list_at_exit` is a plain function that only writes to stderr.
        unsafe { libc::atexit(list_at_exit) };
    }
    skipped.push(format!("{test}: {what} not checked: {why}"));
}

/// Runs when the test binary exits, after libtest's summary.
extern "C" fn list_at_exit() {
    let mut skipped = SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    skipped.sort();
    let mut text = format!(
        "\n{} check(s) skipped, counted as passed above (with CI=true each fails):\n",
        skipped.len()
    );
    if let Ok(without) = std::env::var("ONCEONLY_TEST_WITHOUT") {
        text.push_str(&format!(
            "  (ONCEONLY_TEST_WITHOUT={without}: acting as if these were missing)\n"
        ));
    }
    for line in skipped.iter() {
        text.push_str(&format!("  {line}\n"));
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// This test binary again, on one check told to act as if it ran without root: green with the
/// skip listed after the summary, and under CI a failure naming the check.
#[test]
fn a_skip_is_listed_after_the_summary_and_fails_under_ci() {
    let check = "outputs::a_character_device_stays_a_device";
    // stdout and stderr into one file, in the order they were written.
    let run = |ci: &str| {
        let mut log = tempfile::tempfile().unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", check])
            .env("ONCEONLY_TEST_WITHOUT", "root")
            .env("CI", ci)
            .stdout(log.try_clone().unwrap())
            .stderr(log.try_clone().unwrap())
            .status()
            .unwrap();
        let mut text = String::new();
        log.seek(SeekFrom::Start(0)).unwrap();
        log.read_to_string(&mut text).unwrap();
        (status, text)
    };
    let skip = "writing to a character device not checked: mknod needs root";

    let (status, text) = run("");
    assert!(status.success(), "{text}");
    let summary = text.find("test result: ok. 1 passed").expect(&text);
    let listed = text.find(&format!("  {check}: {skip}")).expect(&text);
    assert!(
        summary < listed && text[summary..listed].contains("1 check(s) skipped"),
        "{text}"
    );

    let (status, text) = run("true");
    assert_eq!(status.code(), Some(101), "{text}");
    assert!(
        text.contains(skip) && text.contains("nothing may skip"),
        "{text}"
    );
    assert!(!text.contains("check(s) skipped"), "{text}");
}
