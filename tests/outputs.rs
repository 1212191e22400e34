//! Every file output (`--output`, `--plan`, `--sql`, `--metrics`, `--verdicts`, trace's
//! `--html`, `--save-snapshot`) is written as the kind of file its path names: a regular file
//! atomically, a symbolic link's target with the link kept, a FIFO or character device in
//! place (never replaced by a regular file), `-` to stdout. An output that is an input or
//! another output is refused before anything is read; the temporary files are never reached
//! through a planted link; a failed or stopped run leaves the earlier files as they were.

use std::ffi::CString;
use std::io::{BufRead, Write};
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

/// The report's companions of an audit into `dir`, each flag with its file.
const COMPANIONS: [(&str, &str); 6] = [
    ("--output", "report.json"),
    ("--plan", "plan.json"),
    ("--sql", "repair.sql"),
    ("--metrics", "metrics.prom"),
    ("--verdicts", "verdicts.ndjson"),
    ("--html", "page.html"),
];

/// `flag path` for every companion of [`COMPANIONS`] in `dir`.
fn companion_flags(dir: &Path) -> Vec<String> {
    COMPANIONS
        .iter()
        .flat_map(|(flag, name)| [flag.to_string(), dir.join(name).display().to_string()])
        .collect()
}

/// Every file of `dir` (not links) by name: its length and SHA-256, or its text when short.
fn contents(dir: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let bytes = std::fs::read(&path).unwrap();
            let shown = match std::str::from_utf8(&bytes) {
                Ok(text) if text.len() <= 200 => text.to_string(),
                _ => {
                    use sha2::Digest;
                    let digest = sha2::Sha256::digest(&bytes);
                    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
                    format!("{} bytes, sha256 {hex}", bytes.len())
                }
            };
            (name, shown)
        })
        .collect()
}

/// Yesterday's files of every companion in `dir`, to be left alone by a run that fails.
fn earlier_night(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for (_, name) in COMPANIONS {
        std::fs::write(dir.join(name), format!("yesterday's {name}\n")).unwrap();
    }
}

#[test]
fn an_output_that_is_an_input_or_another_output_is_refused_before_reading() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let config = scenario.config();
    let inputs = [
        "journal.db",
        "airflow.db",
        "onceonly.toml",
        "provider.ndjson",
    ];
    std::os::unix::fs::symlink("journal.db", scenario.path("latest")).unwrap();
    let before = contents(scenario.dir.path());
    let refused = |args: &[String], flag: &str, names: &[&str]| {
        let mut all = vec!["audit", "--config", config.to_str().unwrap()];
        all.extend(args.iter().map(String::as_str));
        let output = onceonly(&all);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(message.contains(&format!("{flag}:")), "{args:?}: {message}");
        for name in names {
            assert!(
                message.contains(name),
                "{args:?} names no {name}: {message}"
            );
        }
        assert!(!message.contains("panicked"), "{message}");
    };
    for (flag, _) in COMPANIONS {
        for input in inputs {
            let at = scenario.path(input).display().to_string();
            refused(&[flag.to_string(), at], flag, &[input]);
        }
    }
    // Through a symbolic link, and an output written twice under two spellings of a file
    // not made yet.
    std::fs::create_dir(scenario.path("out")).unwrap();
    let link = scenario.path("latest").display().to_string();
    refused(
        &["--plan".into(), link],
        "--plan",
        &["latest", "journal.db"],
    );
    let dir = scenario.dir.path().display().to_string();
    refused(
        &[
            "--verdicts".into(),
            format!("{dir}/tonight.json"),
            "--plan".into(),
            format!("{dir}/./out/../tonight.json"),
        ],
        "--plan",
        &["--verdicts", "tonight.json"],
    );
    // Refused before the sources are read: a provider file that cannot be read is not reached.
    scenario.write("provider.ndjson", "{ not json\n");
    let at = scenario.path("airflow.db").display().to_string();
    refused(
        &["--metrics".into(), at],
        "--metrics",
        &["airflow.db", "[airflow]"],
    );
    // trace's --html is checked as audit's outputs are.
    let [first_day, ..] = crate::scenario::airflow_days("airflow-3.3.2");
    let journal = scenario.path("journal.db").display().to_string();
    let trace = onceonly(&[
        "trace",
        "--config",
        config.to_str().unwrap(),
        "--dag",
        "onceonly_a_stable_key",
        "--interval",
        &first_day,
        "--html",
        &journal,
    ]);
    assert_eq!(trace.status.code(), Some(2), "{}", stderr(&trace));
    assert!(stderr(&trace).contains("--html: "), "{}", stderr(&trace));
    let mut after = contents(scenario.dir.path());
    after.insert("provider.ndjson".into(), before["provider.ndjson"].clone());
    assert_eq!(after, before, "a refused run changed the scenario's files");
}

/// Runs `onceonly args` in a shell that prints its process id and waits for a line on stdin
/// before it becomes onceonly (keeping its id): `plant` gets the id first.
fn with_known_pid(args: &[String], plant: impl FnOnce(u32)) -> Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("echo $$; read go; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_onceonly"))
        .args(args)
        .env_remove("ONCEONLY_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    plant(line.trim().parse().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn links_planted_at_predictable_temporary_names_are_never_followed() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let out = scenario.path("out");
    earlier_night(&out);
    std::fs::write(scenario.path("victim"), "precious\n").unwrap();
    let config = scenario.config().display().to_string();
    let mut args: Vec<String> = ["audit", "--config", &config, "--format", "json"]
        .map(String::from)
        .to_vec();
    args.extend(companion_flags(&out));
    let mut planted = Vec::new();
    let output = with_known_pid(&args, |pid| {
        // The names temporary files had: `.NAME.PID.tmp` beside each output. Half point at a
        // file that exists, half at one that does not.
        for (n, (_, name)) in COMPANIONS.iter().enumerate() {
            let link = out.join(format!(".{name}.{pid}.tmp"));
            let target = if n % 2 == 0 {
                scenario.path("victim")
            } else {
                scenario.path(&format!("made-through-{name}"))
            };
            std::os::unix::fs::symlink(&target, &link).unwrap();
            planted.push((link, target));
        }
    });
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(
        scenario.read("victim"),
        "precious\n",
        "a planted link was written through"
    );
    for (link, target) in &planted {
        let metadata = std::fs::symlink_metadata(link).unwrap();
        assert!(
            metadata.file_type().is_symlink(),
            "{} was replaced",
            link.display()
        );
        assert_eq!(&std::fs::read_link(link).unwrap(), target);
        if !target.ends_with("victim") {
            assert!(
                !target.exists(),
                "{} was made through a link",
                target.display()
            );
        }
    }
    for (_, name) in COMPANIONS {
        let metadata = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(metadata.is_file(), "{name} is not a regular file");
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        assert!(!text.starts_with("yesterday"), "{name} was not written");
    }
    assert_eq!(
        std::fs::read(out.join("report.json")).unwrap(),
        report(&scenario, &[])
    );
}

/// The temporary files (`.NAME....tmp`) left in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| name.starts_with('.') && name.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_failed_run_writes_none_of_its_files() {
    let scenario = Scenario::copy_of("airflow/out/airflow-3.3.2");
    let out = scenario.path("out");
    earlier_night(&out);
    let before = contents(&out);
    let config = scenario.config();
    // Every companion in `out`, the metrics at `metrics`.
    let failed = |metrics: &str, names: &str| {
        let mut args = vec!["audit".to_string(), "--config".into()];
        args.push(config.display().to_string());
        let mut flags = companion_flags(&out);
        let at = flags.iter().position(|flag| flag == "--metrics").unwrap();
        flags[at + 1] = metrics.to_string();
        args.extend(flags);
        let more = [metrics];
        let all: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = onceonly(&all);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{more:?}: {}",
            stderr(&output)
        );
        assert!(stderr(&output).contains(names), "{}", stderr(&output));
        assert_eq!(
            contents(&out),
            before,
            "{more:?}: the earlier files changed"
        );
        assert_eq!(temporaries(&out), Vec::<String>::new(), "{more:?}");
    };
    // A folder that does not exist: refused before the audit.
    let missing = scenario.path("missing/metrics.prom").display().to_string();
    failed(&missing, "missing");
    // A device that takes no bytes: the metrics fail while being written, after the
    // verdicts, the plan and the SQL were made.
    if Path::new("/dev/full").exists() {
        failed("/dev/full", "/dev/full");
    }
    // A --sql for a journal that is no database: refused before the audit.
    let rules = Scenario::of_rules("D001/fires");
    let out = rules.path("out");
    earlier_night(&out);
    let before = contents(&out);
    let mut args = vec!["audit".to_string(), "--config".into()];
    args.push(rules.config().display().to_string());
    args.extend(companion_flags(&out));
    let all: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = onceonly(&all);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("--sql"), "{}", stderr(&output));
    assert_eq!(contents(&out), before, "the earlier files changed");
}

#[test]
fn a_run_stopped_by_a_signal_removes_its_temporary_files_and_keeps_the_earlier_ones() {
    let (_dir, synthesized) =
        crate::scenario::synthesized("30000", "3", "7", "L001=0.02,D001=0.02");
    let synthesized = PathBuf::from(synthesized);
    for (signal, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let out = synthesized.join(format!("out-{signal}"));
        earlier_night(&out);
        let before = contents(&out);
        let mut child = Command::new(env!("CARGO_BIN_EXE_onceonly"))
            .args(["audit", "--format", "json", "--config"])
            .arg(synthesized.join("onceonly.toml"))
            .arg("--from-snapshot")
            .arg(&synthesized)
            .args(companion_flags(&out))
            .env_remove("ONCEONLY_CONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Signalled as soon as the first temporary file is there: mid-write.
        let started = Instant::now();
        let seen = loop {
            if !temporaries(&out).is_empty() {
                break true;
            }
            if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(120) {
                break false;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        unsafe { libc::kill(child.id() as i32, signal) };
        let output = child.wait_with_output().unwrap();
        assert!(seen, "no temporary file was seen: {}", stderr(&output));
        assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
        assert_eq!(contents(&out), before, "the earlier files changed");
        assert_eq!(temporaries(&out), Vec::<String>::new(), "left behind");
    }
}
