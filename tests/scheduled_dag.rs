//! examples/airflow/onceonly_partitioned_audit.py run by a real Airflow 3.3.2 (from PyPI): its
//! scheduler, dag-processor and api-server with LocalExecutor on loopback ports, in a private
//! AIRFLOW_HOME with a SQLite metadata database, on a synth scenario with every fault. Two
//! triggered DAG runs of one night: split, one mapped audit per part (`.expand`), merge; every
//! output the merge writes is byte for byte what the one `onceonly audit` of that night writes
//! with the same flags, and each run ends as `--fail-on-new` says it should. Slow (about a minute
//! on a 2-core machine); CI runs it (`.ci/run`), as every Airflow check.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::scenario::{onceonly, stderr};

const DAG: &str = "onceonly_partitioned_audit";
const PARTS: usize = 3;
/// The night the runs audit (their data interval) and the night before it, in the synth
/// scenario's days (its tries run from 2024-01-01 to 2024-01-03).
const NIGHT: (&str, &str) = ("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00");
const NIGHT_BEFORE: (&str, &str) = ("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00");
/// The password of the api-server's one user, who triggers the runs.
const PASSWORD: &str = "onceonly-test-password";
/// How long a DAG run may take; on a loaded 2-core machine one takes about 20 s.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// A private Airflow: AIRFLOW_HOME in a temporary folder, its services each in a process group
/// of its own. Dropping it stops them, the test passed or not: the groups, then any process
/// of this AIRFLOW_HOME still running (a task a service left behind).
struct Airflow {
    home: PathBuf,
    venv_bin: PathBuf,
    env: Vec<(String, String)>,
    services: Vec<(&'static str, Child)>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Airflow {
    /// The settings of fixtures/airflow/generate.sh for Airflow 3 (LocalExecutor, a SQLite
    /// database, the execution API on loopback, short heartbeats), and no schedule of its own:
    /// only triggered runs run. `extra` is the environment the DAG's tasks read.
    fn new(python: &Path, home: PathBuf, extra: &[(&str, String)]) -> Airflow {
        let venv_bin = python.parent().unwrap().to_path_buf();
        std::fs::create_dir_all(home.join("dags")).unwrap();
        // As /proc shows working folders.
        let home = home.canonicalize().unwrap();
        std::fs::write(
            home.join("passwords.json"),
            serde_json::json!({"admin": PASSWORD}).to_string(),
        )
        .unwrap();
        let api_port = free_port();
        let shown = |path: &str| home.join(path).display().to_string();
        let mut env: Vec<(String, String)> = [
            ("AIRFLOW_HOME", home.display().to_string()),
            (
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
                format!("sqlite:///{}", shown("airflow.db")),
            ),
            ("AIRFLOW__CORE__LOAD_EXAMPLES", "False".into()),
            ("AIRFLOW__CORE__DAGS_FOLDER", shown("dags")),
            ("AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION", "False".into()),
            ("AIRFLOW__CORE__DEFAULT_TIMEZONE", "utc".into()),
            ("AIRFLOW__CORE__FERNET_KEY", String::new()),
            ("AIRFLOW__CORE__EXECUTOR", "LocalExecutor".into()),
            ("AIRFLOW__CORE__PARALLELISM", PARTS.to_string()),
            (
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
                format!("http://127.0.0.1:{api_port}/execution/"),
            ),
            (
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS",
                "admin:admin".into(),
            ),
            (
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE",
                shown("passwords.json"),
            ),
            ("AIRFLOW__LOGGING__BASE_LOG_FOLDER", shown("logs")),
            (
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT",
                free_port().to_string(),
            ),
            ("AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE", "False".into()),
            ("AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC", "1".into()),
            ("AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC", "1".into()),
            (
                "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME",
                "0.5".into(),
            ),
            ("AIRFLOW__API__HOST", "127.0.0.1".into()),
            ("AIRFLOW__API__PORT", api_port.to_string()),
            ("AIRFLOW__API__WORKERS", "1".into()),
            (
                "AIRFLOW__API__BASE_URL",
                format!("http://127.0.0.1:{api_port}"),
            ),
            ("AIRFLOW__API__SECRET_KEY", "onceonly-test-secret".into()),
            (
                "AIRFLOW__API_AUTH__JWT_SECRET",
                "onceonly-test-jwt-secret-0123456789abcdef".into(),
            ),
            ("AIRFLOW__API_AUTH__JWT_ISSUER", "onceonly-test".into()),
            ("AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL", "5".into()),
            ("AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES", "1".into()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        env.extend(
            extra
                .iter()
                .map(|(name, value)| (name.to_string(), value.clone())),
        );
        Airflow {
            home,
            venv_bin,
            env,
            services: Vec::new(),
        }
    }

    fn api_port(&self) -> &str {
        &self
            .env
            .iter()
            .find(|(name, _)| name == "AIRFLOW__API__PORT")
            .unwrap()
            .1
    }

    fn airflow(&self) -> Command {
        let mut command = Command::new(self.venv_bin.join("airflow"));
        command
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .current_dir(&self.home);
        command
    }

    /// `airflow ARGS`, which must succeed.
    fn cli(&self, args: &[&str]) -> Output {
        let output = self.airflow().args(args).output().unwrap();
        assert!(
            output.status.success(),
            "airflow {args:?}: {}",
            stderr(&output)
        );
        output
    }

    /// Starts `airflow ARGS` in a process group of its own, its output in NAME.log.
    fn start(&mut self, name: &'static str, args: &[&str]) {
        let log = std::fs::File::create(self.home.join(format!("{name}.log"))).unwrap();
        let mut command = self.airflow();
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        // SAFETY: prctl(2) in the child before exec, nothing else. A service is told to stop
        // (and stops its own children) when the test's thread is gone, even killed, before
        // Drop could run.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        };
        let child = command.spawn().unwrap();
        self.services.push((name, child));
    }

    /// Panics, with the end of its log, if a service has stopped.
    fn check_services(&mut self) {
        let stopped = self
            .services
            .iter_mut()
            .find_map(|(name, child)| Some((*name, child.try_wait().unwrap()?)));
        if let Some((name, status)) = stopped {
            panic!("airflow {name} stopped ({status}):\n{}", self.log_end(name));
        }
    }

    fn log_end(&self, name: &str) -> String {
        let log =
            std::fs::read_to_string(self.home.join(format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Waits until `ready` holds, checking on the services meanwhile; at the timeout, shows the
    /// task instances and the scheduler's log.
    fn wait_for(&mut self, what: &str, timeout: Duration, mut ready: impl FnMut(&Self) -> bool) {
        let start = Instant::now();
        while !ready(self) {
            self.check_services();
            assert!(
                start.elapsed() < timeout,
                "{what}: not after {timeout:?}\ntask instances (run, task, map index, state, try): \
                 {}\nscheduler:\n{}",
                serde_json::to_string(&self.query(
                    "SELECT run_id, task_id, map_index, state, try_number FROM task_instance"
                ))
                .unwrap(),
                self.log_end("scheduler")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The status code and body of an HTTP request to the api-server (None if it does not
    /// answer).
    fn http(&self, method: &str, path: &str, headers: &str, body: &str) -> Option<(u16, String)> {
        let address = format!("127.0.0.1:{}", self.api_port());
        let mut stream = std::net::TcpStream::connect(address).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let status = answer.get(9..12)?.parse().ok()?;
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        Some((status, body.to_string()))
    }

    /// The header that authorizes a request: a token for the admin's password, which the
    /// simple auth manager keeps in its passwords file.
    fn login(&self) -> String {
        let body = serde_json::json!({"username": "admin", "password": PASSWORD}).to_string();
        let (status, answer) = self.http("POST", "/auth/token", "", &body).unwrap();
        assert!(matches!(status, 200 | 201), "POST /auth/token: {answer}");
        let token: serde_json::Value = serde_json::from_str(&answer).unwrap();
        format!(
            "Authorization: Bearer {}\r\n",
            token["access_token"].as_str().unwrap()
        )
    }

    fn api_up(&self) -> bool {
        self.http("GET", "/api/v2/version", "", "")
            .is_some_and(|(status, _)| status == 200)
    }

    /// The rows of a query of Airflow's metadata database, as JSON arrays.
    fn query(&self, sql: &str) -> Vec<Vec<serde_json::Value>> {
        let output = Command::new(self.venv_bin.join("python"))
            .args([
                "-c",
                "import json, sqlite3, sys\n\
                 db = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True, timeout=30)\n\
                 print(json.dumps(db.execute(sys.argv[2]).fetchall()))",
            ])
            .arg(self.home.join("airflow.db"))
            .arg(sql)
            .output()
            .unwrap();
        assert!(output.status.success(), "{sql}: {}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// Triggers a run of the DAG for the data interval `night` and waits until it has ended;
    /// its state. The logical date is `logical_date`: a run for a logical date before the
    /// DAG's start date would have no tasks.
    fn run_dag(&mut self, run_id: &str, logical_date: &str, night: (&str, &str)) -> String {
        // Through the REST API, as the UI does: `airflow dags trigger` takes no data interval.
        let body = serde_json::json!({
            "dag_run_id": run_id,
            "logical_date": logical_date,
            "data_interval_start": night.0,
            "data_interval_end": night.1,
        });
        let path = format!("/api/v2/dags/{DAG}/dagRuns");
        let (status, answer) = self
            .http("POST", &path, &self.login(), &body.to_string())
            .unwrap();
        assert_eq!(status, 200, "POST {path}: {answer}");
        let state = format!("SELECT state FROM dag_run WHERE run_id = '{run_id}'");
        let mut ended = String::new();
        self.wait_for(&format!("DAG run {run_id}"), RUN_TIMEOUT, |airflow| {
            ended = airflow.query(&state)[0][0]
                .as_str()
                .unwrap_or("")
                .to_string();
            matches!(ended.as_str(), "success" | "failed")
        });
        ended
    }

    /// Each task instance of a run: (task_id, map_index, state, try_number), in that order.
    fn task_instances(&self, run_id: &str) -> Vec<(String, i64, String, i64)> {
        self.query(&format!(
            "SELECT task_id, map_index, state, try_number FROM task_instance \
             WHERE dag_id = '{DAG}' AND run_id = '{run_id}' ORDER BY task_id, map_index"
        ))
        .into_iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                row[1].as_i64().unwrap(),
                row[2].as_str().unwrap_or("none").to_string(),
                row[3].as_i64().unwrap(),
            )
        })
        .collect()
    }

    /// The log of a task's first try.
    fn task_log(&self, run_id: &str, task_id: &str) -> String {
        let path = self.home.join(format!(
            "logs/dag_id={DAG}/run_id={run_id}/task_id={task_id}/attempt=1.log"
        ));
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    /// The processes this Airflow started: those working in its AIRFLOW_HOME (where the
    /// services start; the api-server writes its title over its environment) or with it in
    /// their environment (tasks, which work in a folder of their own).
    fn processes(&self) -> Vec<i32> {
        let marker = format!("AIRFLOW_HOME={}\0", self.home.display());
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == self.home)
                    || std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                        environ
                            .split_inclusive(|&byte| byte == 0)
                            .any(|entry| entry == marker.as_bytes())
                    })
            })
            .collect()
    }

    /// Stops the services: SIGTERM to each group, up to 30 s to end, then SIGKILL to what is
    /// left, groups and stragglers alike.
    fn stop(&mut self) {
        for (_, child) in &self.services {
            // SAFETY: kill(2) on the process group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30)
            && self
                .services
                .iter_mut()
                .any(|(_, child)| child.try_wait().unwrap().is_none())
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        for (_, child) in &mut self.services {
            // SAFETY: as above; the group is gone if it ended.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
        }
        self.services.clear();
        for pid in self.processes() {
            // SAFETY: kill(2) on a process running with this test's AIRFLOW_HOME.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

impl Drop for Airflow {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the merge task writes for a night whose data interval ends on `day`, by name; the
/// metrics without their duration line (how long the run took).
fn night_outputs(reports: &Path, day: &str) -> Vec<(String, Vec<u8>)> {
    let read = |name: &str| {
        let path = reports.join(name);
        std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    };
    let mut outputs: Vec<(String, Vec<u8>)> = ["json", "html", "plan.md", "repair.sql"]
        .iter()
        .map(|ext| (ext.to_string(), read(&format!("{day}.{ext}"))))
        .collect();
    let metrics = String::from_utf8(read("onceonly.prom")).unwrap();
    let metrics: String = metrics
        .lines()
        .filter(|line| !line.starts_with("onceonly_audit_duration_seconds"))
        .map(|line| format!("{line}\n"))
        .collect();
    outputs.push(("prom".to_string(), metrics.into_bytes()));
    outputs
}

/// The one audit of `night` with the merge task's flags, into `out`; its exit code.
fn single_audit(config: &str, night: (&str, &str), baseline: &Path, out: &Path) -> i32 {
    std::fs::create_dir_all(out).unwrap();
    let day = &night.1[..10];
    let path = |ext: &str| out.join(format!("{day}.{ext}")).display().to_string();
    let baseline = baseline.display().to_string();
    let args = [
        "audit",
        "--config",
        config,
        "--since",
        night.0,
        "--until",
        night.1,
        "--format",
        "json",
        "--output",
        &path("json"),
        "--html",
        &path("html"),
        "--plan",
        &path("plan.md"),
        "--sql",
        &path("repair.sql"),
        "--metrics",
        &out.join("onceonly.prom").display().to_string(),
        "--baseline",
        &baseline,
        "--fail-on-new",
    ];
    let done = onceonly(&args);
    assert!(
        matches!(done.status.code(), Some(0 | 1)),
        "{}",
        stderr(&done)
    );
    done.status.code().unwrap()
}

/// Asserts a run's task instances: split and the parts list once each, one mapped audit per
/// part (map indexes 0..PARTS), all succeeded on their first try, and the merge in `merge`.
fn assert_tasks(airflow: &Airflow, run_id: &str, merge: &str) {
    let once = |task: &str, state: &str| (task.to_string(), -1, state.to_string(), 1);
    let mut expected: Vec<_> = (0..PARTS as i64)
        .map(|part| ("audit_part".to_string(), part, "success".to_string(), 1))
        .collect();
    expected.extend([
        once("merge", merge),
        once("parts", "success"),
        once("split", "success"),
    ]);
    assert_eq!(airflow.task_instances(run_id), expected, "run {run_id}");
}

fn assert_same_outputs(merged: &[(String, Vec<u8>)], single: &[(String, Vec<u8>)], run: &str) {
    assert_eq!(merged.len(), single.len());
    for ((name, merged), (_, single)) in merged.iter().zip(single) {
        assert!(
            merged == single,
            "run {run}: the merge task's {name} differs from the one audit's"
        );
    }
}

#[test]
fn a_real_scheduler_runs_the_partitioned_dag_to_the_one_audits_outputs() {
    let Some(python) = crate::skip::airflow_python("the partitioned DAG run by a real scheduler")
    else {
        return;
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let config = crate::partitions::synth(&dir.path().join("scenario"), 1, &[]);
    let reports = dir.path().join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_onceonly")).parent().unwrap();
    let path = format!(
        "{}:{}:{}",
        binary.display(),
        Path::new(&python).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut airflow = Airflow::new(
        Path::new(&python),
        dir.path().join("airflow"),
        &[
            ("PATH", path),
            ("ONCEONLY_CONFIG", config.clone()),
            ("ONCEONLY_REPORTS", reports.display().to_string()),
            ("ONCEONLY_PARTITIONS", PARTS.to_string()),
        ],
    );
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/airflow/{DAG}.py")),
        airflow.home.join(format!("dags/{DAG}.py")),
    )
    .unwrap();
    airflow.cli(&["db", "migrate"]);
    airflow.start("api-server", &["api-server"]);
    airflow.start("dag-processor", &["dag-processor"]);
    airflow.start("scheduler", &["scheduler", "--skip-serve-logs"]);
    // Tasks report to the api-server: trigger once it answers and the DAG is parsed.
    airflow.wait_for("the api-server", Duration::from_secs(180), Airflow::api_up);
    let parsed = format!("SELECT count(*) FROM serialized_dag WHERE dag_id = '{DAG}'");
    airflow.wait_for("the DAG parsed", Duration::from_secs(120), |airflow| {
        airflow.query(&parsed)[0][0] == 1
    });
    let ready = started.elapsed();
    // What stop() looks for finds the services (and after it, nothing).
    let running = airflow.processes();
    for (name, service) in &airflow.services {
        assert!(
            running.contains(&(service.id() as i32)),
            "{name}: {running:?}"
        );
    }

    // The previous night's report, as the nightly runs leave it.
    let before = onceonly(&[
        "audit",
        "--config",
        &config,
        "--since",
        NIGHT_BEFORE.0,
        "--until",
        NIGHT_BEFORE.1,
        "--format",
        "json",
        "--output",
        &reports.join("latest.json").display().to_string(),
    ]);
    assert!(
        matches!(before.status.code(), Some(0 | 1)),
        "{}",
        stderr(&before)
    );
    let latest = reports.join("latest.json");
    let day = &NIGHT.1[..10];

    // The night has findings the night before did not: the merge fails (exit 1), once, and
    // with it the run; its report becomes latest.json all the same.
    let expected = single_audit(&config, NIGHT, &latest, &dir.path().join("single-a"));
    assert_eq!(expected, 1, "the night has new findings");
    let state = airflow.run_dag("night-a", "2026-01-02T00:00:00+00:00", NIGHT);
    assert_tasks(&airflow, "night-a", "failed");
    assert_eq!(state, "failed");
    let merge_log = airflow.task_log("night-a", "merge");
    assert!(merge_log.contains("exit code 1"), "{merge_log}");
    let merged = night_outputs(&reports, day);
    assert_same_outputs(
        &merged,
        &night_outputs(&dir.path().join("single-a"), day),
        "night-a",
    );
    let report: serde_json::Value = serde_json::from_slice(&merged[0].1).unwrap();
    assert!(report["baseline"]["new"].as_u64().unwrap() > 0, "{report}");
    assert!(std::fs::read(&latest).unwrap() == merged[0].1);
    assert!(std::fs::read(reports.join("report.html")).unwrap() == merged[1].1);
    let first_run = started.elapsed() - ready;

    // The same night again: nothing is new since the report the failed run left, so the
    // merge and the run succeed.
    let expected = single_audit(&config, NIGHT, &latest, &dir.path().join("single-b"));
    assert_eq!(expected, 0);
    let state = airflow.run_dag("night-b", "2026-01-03T00:00:00+00:00", NIGHT);
    assert_tasks(&airflow, "night-b", "success");
    assert_eq!(state, "success");
    assert_same_outputs(
        &night_outputs(&reports, day),
        &night_outputs(&dir.path().join("single-b"), day),
        "night-b",
    );

    airflow.stop();
    assert_eq!(
        airflow.processes(),
        Vec::<i32>::new(),
        "processes left running"
    );
    eprintln!(
        "scheduled_dag: services ready after {ready:.1?}, first run {first_run:.1?}, all \
         {:.1?}",
        started.elapsed()
    );
}
