//! Every file output (`--output`, `--plan`, `--sql`, `--metrics`, `--verdicts`, trace's
//! `--html`, `--save-snapshot`) is written as the kind of file its path names: a regular file
//! atomically, a symbolic link's target with the link kept, a FIFO or character device in
//! place (never replaced by a regular file), `-` to stdout.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::scenario::{Scenario, onceonly, stderr};

fn run(args: &[&str]) -> Output {
    let output = onceonly(args);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        output.status.code(),
        stderr(&output)
    );
    output
}

/// The scenario's audit as JSON, with `more` flags; it must complete.
fn report(scenario: &Scenario, more: &[&str]) -> Vec<u8> {
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(more);
    let output = scenario.audit(&args);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        output.status.code(),
        stderr(&output)
    );
    output.stdout
}

fn mkfifo(path: &Path) {
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .map(|metadata| metadata.file_type().is_fifo())
        .unwrap_or(false)
}

/// A process reading the FIFO at `path` with `command` (`cat`, `head -c N`).
fn reader(command: &[&str], path: &Path) -> Child {
    Command::new(command[0])
        .args(&command[1..])
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// What the reader read; a reader still waiting means nothing was ever written into the FIFO.
fn read_by(mut reader: Child) -> Vec<u8> {
    let started = Instant::now();
    while reader.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = reader.kill();
            let _ = reader.wait();
            panic!("the FIFO's reader never got anything: the FIFO was not written");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    reader.wait_with_output().unwrap().stdout
}

#[test]
fn symbolic_links_are_followed_and_kept() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let config = scenario.config();
    let config = config.to_str().unwrap();
    let dir = scenario.dir.path();
    std::fs::create_dir_all(dir.join("reports")).unwrap();
    std::fs::create_dir_all(dir.join("out/evidence")).unwrap();
    // Links with relative targets, to files that exist and to files not written yet.
    let links = [
        ("out/report.json", "../reports/report.json"),
        ("out/plan.json", "../reports/plan.json"),
        ("out/repair.sql", "../reports/repair.sql"),
        ("out/metrics.prom", "../reports/metrics.prom"),
        ("out/verdicts.ndjson", "../reports/verdicts.ndjson"),
        ("out/timeline.html", "../reports/timeline.html"),
        ("out/evidence/manifest.json", "../../reports/manifest.json"),
    ];
    for (link, target) in links {
        std::os::unix::fs::symlink(target, dir.join(link)).unwrap();
    }
    std::fs::write(dir.join("reports/report.json"), "yesterday's report").unwrap();
    std::fs::write(dir.join("reports/metrics.prom"), "yesterday's metrics").unwrap();

    let at = |name: &str| dir.join(name).display().to_string();
    let audit = run(&[
        "audit",
        "--config",
        config,
        "--format",
        "json",
        "--output",
        &at("out/report.json"),
        "--plan",
        &at("out/plan.json"),
        "--sql",
        &at("out/repair.sql"),
        "--metrics",
        &at("out/metrics.prom"),
        "--verdicts",
        &at("out/verdicts.ndjson"),
        "--save-snapshot",
        &at("out/evidence"),
    ]);
    assert!(audit.stdout.is_empty());
    let [first_day, ..] = crate::scenario::airflow_days("airflow-3.3.2");
    run(&[
        "trace",
        "--config",
        config,
        "--dag",
        "onceonly_a_stable_key",
        "--interval",
        &first_day,
        "--html",
        &at("out/timeline.html"),
    ]);
    for (link, target) in links {
        let path = dir.join(link);
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{link} is no longer a link"
        );
        assert_eq!(std::fs::read_link(&path).unwrap(), PathBuf::from(target));
        assert!(
            std::fs::metadata(&path).unwrap().is_file(),
            "{link}'s target"
        );
    }
    let read = |name: &str| std::fs::read_to_string(dir.join("reports").join(name)).unwrap();
    let report = report(&scenario, &[]);
    assert_eq!(read("report.json").as_bytes(), report);
    assert!(read("metrics.prom").contains("onceonly_findings"));
    assert!(serde_json::from_str::<serde_json::Value>(&read("plan.json")).is_ok());
    assert!(read("repair.sql").contains("BEGIN"));
    assert!(read("verdicts.ndjson").lines().count() > 1);
    assert!(read("timeline.html").contains("<html"));
    let offline = run(&[
        "audit",
        "--config",
        config,
        "--format",
        "json",
        "--from-snapshot",
        &at("out/evidence"),
    ]);
    assert_eq!(offline.stdout, report, "the snapshot read through its link");
}

#[test]
fn a_fifo_gets_the_report_and_stays_a_fifo() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let fifo = scenario.path("report.fifo");
    mkfifo(&fifo);
    let cat = reader(&["cat"], &fifo);
    report(&scenario, &["--output", fifo.to_str().unwrap()]);
    let received = read_by(cat);
    assert!(is_fifo(&fifo), "the FIFO was replaced by a regular file");
    assert_eq!(received, report(&scenario, &[]));
}

#[test]
fn a_fifo_reader_that_goes_away_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario");
    // Verdicts larger than a pipe's buffer, so the writer is still writing when `head` leaves.
    run(&[
        "synth",
        "--intervals",
        "400",
        "--dags",
        "2",
        "--out",
        scenario.to_str().unwrap(),
    ]);
    let fifo = dir.path().join("verdicts.fifo");
    mkfifo(&fifo);
    let head = reader(&["head", "-c", "100"], &fifo);
    let output = run(&[
        "audit",
        "--config",
        scenario.join("onceonly.toml").to_str().unwrap(),
        "--verdicts",
        fifo.to_str().unwrap(),
    ]);
    assert_eq!(read_by(head).len(), 100);
    assert!(is_fifo(&fifo), "the FIFO was replaced by a regular file");
    assert!(!stderr(&output).contains("error"), "{}", stderr(&output));
}

#[test]
fn a_character_device_stays_a_device() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    // A private node with /dev/null's numbers: writing to it discards, as /dev/null does.
    let device = scenario.path("null");
    let name = CString::new(device.as_os_str().as_bytes()).unwrap();
    let null = libc::makedev(1, 3);
    let made = if crate::skip::without("root") {
        Err("ONCEONLY_TEST_WITHOUT names root".to_string())
    } else if unsafe { libc::mknod(name.as_ptr(), libc::S_IFCHR | 0o666, null) } != 0 {
        Err(std::io::Error::last_os_error().to_string())
    } else {
        Ok(())
    };
    if let Err(why) = made {
        crate::skip::skipped(
            "writing to a character device",
            &format!("mknod needs root ({why})"),
        );
        return;
    }
    let config = scenario.config();
    let path = device.to_str().unwrap();
    run(&[
        "audit",
        "--config",
        config.to_str().unwrap(),
        "--output",
        path,
        "--metrics",
        path,
        "--plan",
        path,
    ]);
    let metadata = std::fs::symlink_metadata(&device).unwrap();
    assert!(
        metadata.file_type().is_char_device(),
        "the device was replaced by a regular file"
    );
    assert_eq!(metadata.rdev(), null);
}

#[test]
fn a_dash_is_stdout() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let config = scenario.config();
    // Run in the scenario's folder, where `-` as a file name would land.
    let output = Command::new(env!("CARGO_BIN_EXE_onceonly"))
        .args(["audit", "--config", config.to_str().unwrap()])
        .args(["--format", "json", "--output", "-"])
        .current_dir(scenario.dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        !scenario.path("-").exists(),
        "a file named - was written instead"
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&report(&scenario, &[]))
    );
}
