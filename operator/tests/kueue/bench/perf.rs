//! Kueue's own scheduler performance scenarios, run by Kueue's runner against each system (tests/kueue/perf-scheduler
//! builds the runner and sets SLUICE_PERF_RUNNER, SLUICE_PERF_CONFIG and SLUICE_PERF_TIMEOUT_MINUTES). The runner
//! creates the scenario's objects, finishes each admitted Workload after its running time (and completes evictions,
//! as a job controller would), and writes `summary.yaml` when every ClusterQueue is idle again; this test starts the
//! system on a fresh control plane, runs the runner against it, and tabulates the summaries.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

use super::*;

/// What Kueue's recorder writes per ClusterQueue class (`summary.yaml`, `clusterQueueClasses`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
struct CqClass {
    /// CPU usage integrated over time (milli-CPU x ms).
    cpu_used: i64,
    /// Average usage over the monitored time (milli-CPU, summed over the class's ClusterQueues).
    cpu_average_usage: i64,
    /// The class's summed nominal quota (milli-CPU).
    nominal_quota: i64,
}

/// What Kueue's recorder writes per workload class (`workloadClasses`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
struct WlClass {
    count: i64,
    total_evictions: i64,
    average_time_to_admission_ms: i64,
    average_time_to_finish_ms: i64,
}

/// Kueue's `summary.yaml`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
struct Summary {
    cluster_queue_classes: BTreeMap<String, CqClass>,
    workload_classes: BTreeMap<String, WlClass>,
    dropped_workload_events: u64,
}

/// One system's run of the scenario.
#[derive(Debug, Serialize)]
struct PerfRun {
    system: String,
    /// From the runner's start to its exit (it exits when every ClusterQueue is idle).
    wall_seconds: f64,
    /// The runner's exit: 0 when it recorded to the end; otherwise no summary.
    runner_exit: Option<i32>,
    summary: Option<Summary>,
    processes: Vec<ProcessFigures>,
    /// The Workloads on the API server once the runner has left.
    census: Census,
}

/// The Workloads on the API server once the runner has left (its cleanup deletes their namespaces, which without
/// kube-controller-manager's namespace controller leaves them in place). The runner's recorder stops at the first
/// moment no ClusterQueue has a pending or reserving Workload after the generator is done, which can come before
/// the runner's own controller has seen every Workload when the system keeps up with the generator: then its
/// summary counts fewer Workloads than the config makes, and this says what happened to all of them.
#[derive(Debug, Default, Serialize)]
struct Census {
    total: usize,
    /// Finished (the runner finished them after their running time).
    finished: usize,
    /// Holding quota, not finished.
    holding_quota: usize,
    /// Neither.
    waiting: usize,
}

impl Census {
    async fn take(client: &Client) -> Census {
        let api: Api<SlimWorkload> = Api::all(client.clone());
        let mut out = Census::default();
        let mut params = ListParams::default().limit(5_000);
        loop {
            let page = api.list(&params).await.expect("listing Workloads");
            for w in &page.items {
                out.total += 1;
                if w.condition_true("Finished") {
                    out.finished += 1;
                } else if w.condition_true("QuotaReserved") {
                    out.holding_quota += 1;
                } else {
                    out.waiting += 1;
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        out
    }
}

fn env_path(name: &str) -> PathBuf {
    std::env::var_os(name)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{name} is not set: run tests/kueue/perf-scheduler"))
}

/// Waits until the system's webhooks take a ResourceFlavor (a server-side dry run), so that the runner's first
/// creates are not refused while the system is still starting.
fn wait_ready(plane: &ControlPlane) {
    let flavor = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "readiness-probe"}})
    .to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = plane.kubectl_output(&["create", "--dry-run=server", "-f", "-"], Some(&flavor));
        if out.status.success() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the system did not take a ResourceFlavor within 120 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Runs the scenario against one system on a fresh control plane.
async fn perf_run(which: System, runner: &Path, config: &Path, minutes: u64) -> PerfRun {
    let plane = plane(&format!("perf-{}", which.slug()))
        .await
        .expect("no control plane: run tests/control-plane/build");
    let (manager, mut procs) = start(which, &plane).await;
    tokio::task::block_in_place(|| wait_ready(&plane));
    procs.push((
        "kube-apiserver".into(),
        pid_file(&plane, "kube-apiserver.pid"),
    ));
    procs.push(("etcd".into(), pid_file(&plane, "etcd.pid")));
    let out = repo_root().join("target/kueue-perf").join(which.slug());
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("target/kueue-perf");
    let log = std::fs::File::create(out.join("runner.log")).expect("runner.log");
    let watched = Watched::start(procs);
    let t0 = Instant::now();
    let mut child = std::process::Command::new(runner)
        .env("KUBECONFIG", plane.kubeconfig())
        // Kueue's test utilities look for its source tree at start (PROJECT_DIR's parent, else a Makefile above
        // the working directory); the runner reads nothing there.
        .env("PROJECT_DIR", out.join("project"))
        .current_dir(&out)
        .arg(format!("--o={}", out.display()))
        .arg(format!("--generatorConfig={}", config.display()))
        .args(["--qps=1000", "--burst=2000"])
        .arg(format!("--timeout={minutes}m"))
        .stdout(Stdio::from(log.try_clone().expect("runner.log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("Kueue's runner");
    // The runner stops recording at its timeout; a little more for it to write its files and leave.
    let limit = Duration::from_secs(minutes * 60 + 120);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t0.elapsed() < limit => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let wall_seconds = t0.elapsed().as_secs_f64();
    let processes = watched.figures();
    let census = Census::take(&plane.client().await).await;
    let summary = std::fs::read_to_string(out.join("summary.yaml"))
        .ok()
        .map(|s| serde_yaml::from_str(&s).expect("Kueue's summary.yaml"));
    eprintln!(
        "{}: runner exit {:?} after {wall_seconds:.0} s{}",
        which.label(),
        status.and_then(|s| s.code()),
        if summary.is_none() {
            format!(
                " without a summary; see {}",
                out.join("runner.log").display()
            )
        } else {
            String::new()
        }
    );
    drop(manager);
    PerfRun {
        system: which.label().into(),
        wall_seconds,
        runner_exit: status.and_then(|s| s.code()),
        summary,
        processes,
        census,
    }
}

/// The table: per system its wall time, per workload class time to admission (and evictions), per ClusterQueue
/// class average usage, the manager's memory and CPU.
fn perf_table(config: &Path, runs: &[PerfRun]) -> String {
    let mut out = format!(
        "Kueue's scheduler performance scenario {} (Kueue's runner, qps 1000 / burst 2000)\n\n",
        config.display()
    );
    out.push_str(&format!(
        "| | {} |\n| --- |{}\n",
        runs.iter()
            .map(|r| r.system.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        " --- |".repeat(runs.len())
    ));
    row(
        &mut out,
        "wall time (runner start to all ClusterQueues idle)",
        runs.iter().map(|r| {
            if r.summary.is_some() {
                format!("{:.1} s", r.wall_seconds)
            } else {
                format!(
                    "not done ({:.0} s, exit {:?})",
                    r.wall_seconds, r.runner_exit
                )
            }
        }),
    );
    // One row per class any run reported: its cell in each run, "-" where a run has no summary or not that class.
    let mut class_rows =
        |name: &dyn Fn(&str) -> String,
         classes: fn(&Summary) -> Vec<String>,
         cell_of: &dyn Fn(&Summary, &str) -> Option<String>| {
            let all: std::collections::BTreeSet<String> = runs
                .iter()
                .filter_map(|r| r.summary.as_ref())
                .flat_map(classes)
                .collect();
            for c in &all {
                row(
                    &mut out,
                    &name(c),
                    runs.iter().map(|r| {
                        r.summary
                            .as_ref()
                            .and_then(|s| cell_of(s, c))
                            .unwrap_or_else(|| "-".into())
                    }),
                );
            }
        };
    class_rows(
        &|c| format!("{c}: workloads, average time to admission, evictions"),
        |s| s.workload_classes.keys().cloned().collect(),
        &|s, c| {
            s.workload_classes.get(c).map(|w| {
                format!(
                    "{}, {:.1} s, {}",
                    w.count,
                    w.average_time_to_admission_ms as f64 / 1000.0,
                    w.total_evictions
                )
            })
        },
    );
    class_rows(
        &|c| format!("ClusterQueue class {c}: average usage of nominal quota"),
        |s| s.cluster_queue_classes.keys().cloned().collect(),
        &|s, c| {
            // As Kueue's checker reads it: the average against the class's summed nominal quota.
            s.cluster_queue_classes.get(c).map(|q| {
                format!(
                    "{:.1}%",
                    q.cpu_average_usage as f64 * 100.0 / q.nominal_quota.max(1) as f64
                )
            })
        },
    );
    row(
        &mut out,
        "Workloads on the API server after the run: finished / holding quota / waiting (of all)",
        runs.iter().map(|r| {
            let c = &r.census;
            format!(
                "{} / {} / {} (of {})",
                c.finished, c.holding_quota, c.waiting, c.total
            )
        }),
    );
    row(
        &mut out,
        "manager resident memory after the run (peak)",
        runs.iter().map(|r| {
            format!(
                "{:.0} MiB ({:.0})",
                manager_sum(&r.processes, |p| p.rss_mib),
                manager_sum(&r.processes, |p| p.peak_rss_mib)
            )
        }),
    );
    row(
        &mut out,
        "CPU seconds: manager; kube-apiserver",
        runs.iter().map(|r| {
            let api = r
                .processes
                .iter()
                .find(|p| p.name == "kube-apiserver")
                .map_or(0.0, |p| p.cpu_seconds);
            format!(
                "{:.1}; {api:.1}",
                manager_sum(&r.processes, |p| p.cpu_seconds)
            )
        }),
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: tests/kueue/perf-scheduler runs it"]
async fn kueue_scheduler_perf() {
    assert!(
        kueue_version().is_some(),
        "Kueue is not built in {}: run tests/kueue/build first",
        kueue_dir().display()
    );
    let runner = env_path("SLUICE_PERF_RUNNER");
    let config = env_path("SLUICE_PERF_CONFIG");
    let minutes: u64 = std::env::var("SLUICE_PERF_TIMEOUT_MINUTES")
        .ok()
        .map_or(15, |v| {
            v.parse().expect("SLUICE_PERF_TIMEOUT_MINUTES is a number")
        });
    let mut runs = Vec::new();
    for which in systems() {
        runs.push(perf_run(which, &runner, &config, minutes).await);
    }
    let text = perf_table(&config, &runs);
    println!("{text}");
    let dir = repo_root().join("target/kueue-perf");
    std::fs::write(dir.join("report.txt"), &text).expect("report");
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&runs).expect("JSON"),
    )
    .expect("figures");
}

#[test]
fn the_table_reads_kueues_summary_as_its_checker_does() {
    let summary: Summary = serde_yaml::from_str(
        "clusterQueueClasses:\n  cq:\n    cpuAverageUsage: 415439\n    cpuUsed: 1\n    nominalQuota: 600000\n\
         workloadClasses:\n  large:\n    averageTimeToAdmissionMs: 65670\n    count: 1500\n    totalEvictions: 1\n",
    )
    .expect("a summary");
    let runs = [
        PerfRun {
            system: "Kueue".into(),
            wall_seconds: 481.04,
            runner_exit: Some(0),
            summary: Some(summary),
            processes: vec![ProcessFigures {
                name: "kueue manager".into(),
                rss_mib: 395.0,
                anon_rss_mib: 300.0,
                peak_rss_mib: 396.0,
                cpu_seconds: 192.5,
            }],
            census: Census {
                total: 15_000,
                finished: 14_990,
                holding_quota: 4,
                waiting: 6,
            },
        },
        PerfRun {
            system: "Sluice".into(),
            wall_seconds: 900.0,
            runner_exit: Some(1),
            summary: None,
            processes: Vec::new(),
            census: Census::default(),
        },
    ];
    let table = perf_table(Path::new("baseline/generator.yaml"), &runs);
    for line in [
        "| wall time (runner start to all ClusterQueues idle) | 481.0 s | not done (900 s, exit Some(1)) |",
        "| large: workloads, average time to admission, evictions | 1500, 65.7 s, 1 | - |",
        "| ClusterQueue class cq: average usage of nominal quota | 69.2% | - |",
        "| manager resident memory after the run (peak) | 395 MiB (396) | 0 MiB (0) |",
        "| Workloads on the API server after the run: finished / holding quota / waiting (of all) | 14990 / 4 / 6 (of 15000) | 0 / 0 / 0 (of 0) |",
    ] {
        assert!(table.contains(line), "{line} not in\n{table}");
    }
}
