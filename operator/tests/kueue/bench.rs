//! Kueue and Sluice side by side, each on its own fresh control plane with the same objects (a benchmark, run by
//! tests/kueue/bench; not in CI): the API server's own ceiling for a Workload's create and admission, the rate of a
//! plain client making the writes a Kueue-compatible manager must make per Job, admission throughput and latency of
//! 1-pod Jobs over many ClusterQueues in cohorts, each system's API writes and webhook calls per Job (the API
//! server's counters), and each manager's memory.
//!
//! Settings come from the environment (the script sets them): SLUICE_BENCH_JOBS (default 10,000),
//! SLUICE_BENCH_QUICK=1 (1,000 Jobs, 20 ClusterQueues), SLUICE_BENCH_LIMIT (seconds one admission run may take,
//! default 600; a run that hits it reports the rate it reached), SLUICE_BENCH_SYSTEMS (which systems run, by slug,
//! comma-separated; default all; `none` runs the two client loops alone), SLUICE_BENCH_OPERATOR_ARGS (more flags for Sluice's operator, space-separated).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::kueue::{Kueue, kueue_dir, kueue_version};
use super::plane::{ControlPlane, repo_root};
use super::run::KUEUE_GATES;
use super::sluice::{Operator, Webhook};
use super::support::{install_webhook, sluice_stdout, wait_established};

mod perf;

/// Requests kept in flight by the load generators (creates, the ceiling's create-and-admit loop).
const IN_FLIGHT: usize = 16;
/// What one Job's pod asks for.
const JOB_CPU_MILLI: u64 = 100;
const JOB_MEM_MI: u64 = 64;
/// The share of each ClusterQueue's Jobs its quota holds.
const FIT_SHARE: f64 = 0.7;
/// The idle ClusterQueue's namespace (its Jobs are not part of the load).
const IDLE_NS: &str = "idle";

/// The benchmark's size.
#[derive(Clone, Copy, Debug, Serialize)]
struct Settings {
    jobs: usize,
    cluster_queues: usize,
    cohorts: usize,
    idle_jobs: usize,
    limit_seconds: u64,
}

impl Settings {
    /// From SLUICE_BENCH_* (see the module's doc).
    fn from_env() -> Settings {
        let num = |k: &str| std::env::var(k).ok().map(|v| v.parse::<u64>().expect(k));
        let quick = std::env::var("SLUICE_BENCH_QUICK").is_ok_and(|v| v == "1");
        let (jobs, cqs, idle) = if quick {
            (1_000, 20, 30)
        } else {
            (10_000, 100, 100)
        };
        Settings {
            jobs: num("SLUICE_BENCH_JOBS").map_or(jobs, |n| n as usize),
            cluster_queues: cqs,
            cohorts: cqs / 10,
            idle_jobs: idle,
            limit_seconds: num("SLUICE_BENCH_LIMIT").unwrap_or(600),
        }
    }

    /// Jobs each load ClusterQueue gets (Job i goes to ClusterQueue i mod cluster_queues).
    fn jobs_of(&self, cq: usize) -> usize {
        self.jobs / self.cluster_queues + usize::from(cq < self.jobs % self.cluster_queues)
    }

    /// Jobs a ClusterQueue's nominal quota holds.
    fn slots_of(&self, cq: usize) -> usize {
        (self.jobs_of(cq) as f64 * FIT_SHARE).ceil() as usize
    }

    /// How many load Jobs the quotas admit: per cohort (borrowing is unlimited and all Jobs are alike) the
    /// lesser of its Jobs and its summed slots.
    fn fit(&self) -> usize {
        (0..self.cohorts)
            .map(|c| {
                let cqs = (0..self.cluster_queues).filter(|q| q % self.cohorts == c);
                let (jobs, slots) = cqs.fold((0, 0), |(j, s), q| {
                    (j + self.jobs_of(q), s + self.slots_of(q))
                });
                jobs.min(slots)
            })
            .sum()
    }
}

/// The systems measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum System {
    /// Kueue with the client limits of its shipped Configuration (qps 300, burst 500 in v0.19; 50/100 before).
    KueueShipped,
    /// Kueue with qps 1000, burst 2000.
    KueueRaised,
    /// Sluice's operator and webhook (no client rate limit).
    Sluice,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            System::KueueShipped => "Kueue (shipped client limits)",
            System::KueueRaised => "Kueue (qps 1000/burst 2000)",
            System::Sluice => "Sluice",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            System::KueueShipped => "kueue-shipped",
            System::KueueRaised => "kueue-raised",
            System::Sluice => "sluice",
        }
    }
}

/// The systems SLUICE_BENCH_SYSTEMS names (all when unset), in the table's order.
fn systems() -> Vec<System> {
    let all = [System::KueueShipped, System::KueueRaised, System::Sluice];
    let Ok(list) = std::env::var("SLUICE_BENCH_SYSTEMS") else {
        return all.to_vec();
    };
    // The two ceilings alone.
    if list == "none" {
        return Vec::new();
    }
    let named: Vec<&str> = list.split(',').map(str::trim).collect();
    for n in &named {
        assert!(
            all.iter().any(|s| s.slug() == *n),
            "SLUICE_BENCH_SYSTEMS: unknown system {n:?} (kueue-shipped, kueue-raised, sluice, or none alone)"
        );
    }
    all.into_iter()
        .filter(|s| named.contains(&s.slug()))
        .collect()
}

/// The API server's ceiling.
#[derive(Debug, Default, Serialize)]
struct Ceiling {
    workloads: usize,
    seconds: f64,
    per_second: f64,
    retries: usize,
    apiserver_cpu_seconds: f64,
    etcd_cpu_seconds: f64,
    /// What the API server served per Workload.
    api: ApiCounts,
}

/// One process's resources at the end of a run.
#[derive(Debug, Serialize)]
struct ProcessFigures {
    name: String,
    rss_mib: f64,
    /// Of which anonymous memory (heap, stacks), not the mapped binary's pages.
    anon_rss_mib: f64,
    peak_rss_mib: f64,
    /// CPU time during the load (user + system).
    cpu_seconds: f64,
}

/// One system's admission run.
#[derive(Debug, Default, Serialize)]
struct Run {
    system: String,
    jobs: usize,
    create_seconds: f64,
    creates_per_second: f64,
    create_retries: usize,
    fit: usize,
    admitted: usize,
    /// From the first create until the last Job that fits is admitted; None when the limit came first.
    all_fit_seconds: Option<f64>,
    /// Admissions per second over the run (to the last admission that fits, or to the limit).
    admissions_per_second: f64,
    /// Admitted 3 s after all that fit were (more than `fit` would be a bug).
    admitted_after_settle: usize,
    idle_p50_ms: f64,
    idle_p99_ms: f64,
    load_p50_ms: f64,
    load_p99_ms: f64,
    processes: Vec<ProcessFigures>,
    /// What the API server served per load Job, from the first create to the end of the run.
    api: ApiCounts,
}

/// Everything measured, written as JSON.
#[derive(Debug, Serialize)]
struct Report {
    kueue_version: String,
    settings: Settings,
    /// Flags given to Sluice's operator beyond the harness's own.
    operator_args: String,
    ceiling: Ceiling,
    /// A plain client making each Job's trip as a manager must ([`manager_path`]).
    manager_path: Ceiling,
    runs: Vec<Run>,
}

// --- a Workload as the watch needs it: decoding only metadata and conditions keeps the client's CPU low.

#[derive(Clone, Debug, Deserialize)]
struct SlimWorkload {
    metadata: ObjectMeta,
    #[serde(default)]
    status: Option<SlimStatus>,
}

#[derive(Clone, Debug, Deserialize)]
struct SlimStatus {
    #[serde(default)]
    conditions: Vec<SlimCondition>,
}

#[derive(Clone, Debug, Deserialize)]
struct SlimCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl Resource for SlimWorkload {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Workload".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "kueue.x-k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1beta2".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "workloads".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl SlimWorkload {
    fn admitted(&self) -> bool {
        self.condition_true("Admitted")
    }

    fn condition_true(&self, type_: &str) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
    }

    /// (namespace, owning Job's name).
    fn job(&self) -> Option<(String, String)> {
        let owner = self
            .metadata
            .owner_references
            .as_ref()?
            .iter()
            .find(|o| o.kind == "Job")?;
        Some((self.metadata.namespace.clone()?, owner.name.clone()))
    }
}

/// When each Job's Workload was first seen Admitted on a watch (client clock).
#[derive(Default)]
struct Admissions {
    first: Mutex<HashMap<(String, String), Instant>>,
    notify: Notify,
    synced: Notify,
}

impl Admissions {
    /// Watches all Workloads until the returned task is aborted; returns once the initial list is in.
    async fn watch(client: &Client) -> (Arc<Admissions>, tokio::task::JoinHandle<()>) {
        let me = Arc::new(Admissions::default());
        let sink = me.clone();
        let api: Api<SlimWorkload> = Api::all(client.clone());
        let synced = me.synced.notified();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => sink.seen(&w),
                    Ok(watcher::Event::InitDone) => sink.synced.notify_one(),
                    _ => {}
                }
            }
        });
        synced.await;
        (me, task)
    }

    fn seen(&self, w: &SlimWorkload) {
        if !w.admitted() {
            return;
        }
        let Some(key) = w.job() else { return };
        self.first
            .lock()
            .expect("admissions")
            .entry(key)
            .or_insert_with(Instant::now);
        self.notify.notify_waiters();
    }

    fn at(&self, key: &(String, String)) -> Option<Instant> {
        self.first.lock().expect("admissions").get(key).copied()
    }

    /// Admitted load Jobs, and when the last of them was seen.
    fn load(&self) -> (usize, Option<Instant>) {
        let first = self.first.lock().expect("admissions");
        let load = first.iter().filter(|((ns, _), _)| ns != IDLE_NS);
        load.fold((0, None), |(n, last), (_, t)| (n + 1, last.max(Some(*t))))
    }

    /// Waits until `key` is admitted, at most `limit`.
    async fn wait_for(&self, key: &(String, String), limit: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(t) = self.at(key) {
                return Some(t);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }
}

// --- processes: pid, memory and CPU from /proc.

/// Pids whose command line contains `needle` (and `arg` as one of its arguments) and whose KUBECONFIG is `kubeconfig`.
fn pids(needle: &str, arg: Option<&str>, kubeconfig: &Path) -> Vec<u32> {
    let want = format!("KUBECONFIG={}", kubeconfig.display());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            let has = |s: &str| args.contains(&s.as_bytes());
            let first =
                String::from_utf8_lossy(args.first().copied().unwrap_or_default()).into_owned();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            first.contains(needle)
                && arg.is_none_or(has)
                && env.split(|b| *b == 0).any(|e| e == want.as_bytes())
        })
        .collect()
}

/// A pid from a control plane's pid file.
fn pid_file(plane: &ControlPlane, name: &str) -> Option<u32> {
    std::fs::read_to_string(plane.file(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A field of /proc/PID/status in KiB (VmRSS, RssAnon, VmHWM).
fn status_kib(pid: u32, field: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// User + system CPU seconds a process used so far (clock ticks of 1/100 s, Linux's USER_HZ).
fn cpu_seconds(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), counted from the state (field 3).
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}

/// Processes to measure, with their CPU seconds when the load starts.
struct Watched(Vec<(String, u32, f64)>);

impl Watched {
    fn start(list: Vec<(String, Option<u32>)>) -> Watched {
        Watched(
            list.into_iter()
                .filter_map(|(n, p)| p.map(|p| (n, p, cpu_seconds(p))))
                .collect(),
        )
    }

    fn figures(&self) -> Vec<ProcessFigures> {
        let mib = |kib: f64| (kib / 1024.0 * 10.0).round() / 10.0;
        self.0
            .iter()
            .map(|(name, pid, cpu0)| ProcessFigures {
                name: name.clone(),
                rss_mib: mib(status_kib(*pid, "VmRSS")),
                anon_rss_mib: mib(status_kib(*pid, "RssAnon")),
                peak_rss_mib: mib(status_kib(*pid, "VmHWM")),
                cpu_seconds: ((cpu_seconds(*pid) - cpu0) * 10.0).round() / 10.0,
            })
            .collect()
    }
}

// --- the API server's own counters: what each system asks of it per Job.

/// Writes (create, update, patch, apply, delete) the API server served, by resource, and its calls to admission
/// webhooks; read from its /metrics (`apiserver_request_total`,
/// `apiserver_admission_webhook_admission_duration_seconds_count`).
#[derive(Clone, Debug, Default, Serialize)]
struct ApiCounts {
    /// "resource" or "resource/subresource" -> writes.
    writes: std::collections::BTreeMap<String, f64>,
    webhook_calls: f64,
}

impl ApiCounts {
    async fn read(client: &Client) -> ApiCounts {
        let req = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("a /metrics request");
        let text = client
            .request_text(req)
            .await
            .expect("the API server's /metrics");
        ApiCounts::parse(&text)
    }

    /// Sums the two counter families in Prometheus text.
    fn parse(text: &str) -> ApiCounts {
        let mut out = ApiCounts::default();
        for line in text.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let Some((name, labels)) = series.split_once('{') else {
                continue;
            };
            let label = |key: &str| -> &str {
                labels
                    .split("\",")
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix("=\""))
                    .map_or("", |v| v.trim_end_matches(['"', '}']))
            };
            match name {
                "apiserver_request_total"
                    if matches!(label("verb"), "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE") =>
                {
                    let key = match label("subresource") {
                        "" => label("resource").to_string(),
                        sub => format!("{}/{sub}", label("resource")),
                    };
                    *out.writes.entry(key).or_default() += value;
                }
                "apiserver_admission_webhook_admission_duration_seconds_count" => {
                    out.webhook_calls += value;
                }
                _ => {}
            }
        }
        out
    }

    /// What happened between `before` and `self`, per `jobs` Jobs.
    fn per_job_since(&self, before: &ApiCounts, jobs: usize) -> ApiCounts {
        let n = jobs.max(1) as f64;
        let round = |x: f64| (x / n * 100.0).round() / 100.0;
        ApiCounts {
            writes: self
                .writes
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        round(v - before.writes.get(k).copied().unwrap_or(0.0)),
                    )
                })
                .filter(|(_, v)| *v > 0.0)
                .collect(),
            webhook_calls: round(self.webhook_calls - before.webhook_calls),
        }
    }

    fn total_writes(&self) -> f64 {
        self.writes.values().sum()
    }

    /// "7.0 (jobs 1.0, workloads 1.0, ...)".
    fn worded(&self) -> String {
        let parts: Vec<String> = self
            .writes
            .iter()
            .map(|(k, v)| format!("{k} {v:.2}"))
            .collect();
        format!("{:.2} ({})", self.total_writes(), parts.join(", "))
    }
}

// --- control planes and objects.

/// A fresh control plane without kube-controller-manager: its Job controller would make a Pod for every
/// unsuspended Job, which admission does not need.
async fn plane(name: &str) -> Option<ControlPlane> {
    let name = name.to_string();
    let plane = tokio::task::spawn_blocking(move || ControlPlane::up(&name))
        .await
        .expect("control plane")?;
    if let Some(pid) = pid_file(&plane, "kube-controller-manager.pid") {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    Some(plane)
}

/// Creates objects from a JSON list with kubectl.
fn kubectl_create(plane: &ControlPlane, items: Vec<Value>) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    tokio::task::block_in_place(|| plane.kubectl(&["create", "-f", "-"], Some(&list)));
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn load_ns(cq: usize) -> String {
    format!("ns-{cq}")
}

/// A ClusterQueue over the one flavor with room for `slots` Jobs, in `cohort` if any.
fn cluster_queue(name: &str, cohort: Option<String>, slots: u64) -> Value {
    let mut spec = json!({
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": format!("{}m", slots * JOB_CPU_MILLI)},
            {"name": "memory", "nominalQuota": format!("{}Mi", slots * JOB_MEM_MI)},
        ]}]}],
    });
    if let Some(c) = cohort {
        spec["cohortName"] = json!(c);
    }
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
}

fn local_queue(ns: &str, cq: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": cq}})
}

/// The flavor, the load's ClusterQueues in cohorts with a LocalQueue each in its own namespace, and an idle
/// ClusterQueue (no cohort, roomy) for the idle latency.
fn queues(s: &Settings) -> Vec<Value> {
    let mut items = vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "default"}}),
    ];
    for q in 0..s.cluster_queues {
        items.push(namespace(&load_ns(q)));
        let cohort = format!("cohort-{}", q % s.cohorts);
        items.push(cluster_queue(
            &format!("cq-{q}"),
            Some(cohort),
            s.slots_of(q) as u64,
        ));
        items.push(local_queue(&load_ns(q), &format!("cq-{q}")));
    }
    items.push(namespace(IDLE_NS));
    items.push(cluster_queue(IDLE_NS, None, 10_000));
    items.push(local_queue(IDLE_NS, IDLE_NS));
    items
}

fn job(ns: &str, name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["pause"],
                "resources": {"requests": {"cpu": format!("{JOB_CPU_MILLI}m"), "memory": format!("{JOB_MEM_MI}Mi")}}}],
        }}},
    }))
    .expect("Job")
}

/// Creates a Job, retrying what the API server or a webhook refused for load; returns the retries.
async fn create_job(api: &Api<Job>, job: &Job) -> usize {
    for attempt in 0..30 {
        match api.create(&PostParams::default(), job).await {
            Ok(_) => return attempt,
            // An earlier attempt went through after the client gave up on it.
            Err(kube::Error::Api(e)) if e.code == 409 && attempt > 0 => return attempt,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("creating Job {:?} failed 30 times", job.metadata.name);
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind),
        plural,
    )
}

/// How many objects of the kind have condition Active=True.
async fn active(client: &Client, kind: &str, plural: &str) -> usize {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, plural));
    let list = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.iter()
        .filter(|o| {
            o.data["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Active" && c["status"] == "True")
            })
        })
        .count()
}

/// Waits until every ClusterQueue and LocalQueue is Active.
async fn wait_active(client: &Client, s: &Settings, log: impl Fn() -> String) {
    let want = s.cluster_queues + 1;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let cqs = active(client, "ClusterQueue", "clusterqueues").await;
        let lqs = active(client, "LocalQueue", "localqueues").await;
        if cqs >= want && lqs >= want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{cqs} ClusterQueues and {lqs} LocalQueues of {want} Active after 180 s: {}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// p-quantile of sorted durations in milliseconds (0 when empty).
fn quantile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    (sorted[i].as_secs_f64() * 1000.0 * 10.0).round() / 10.0
}

// --- 1. the API server's ceiling.

fn workload(ns: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "resources": {"requests": {"cpu": format!("{JOB_CPU_MILLI}m"), "memory": format!("{JOB_MEM_MI}Mi")}}}],
        }}}]},
    }))
    .expect("Workload")
}

/// An admission as a manager writes it: status.admission and the QuotaReserved and Admitted conditions.
fn admission(cq: &str) -> Value {
    // A fixed transition time: the API server only checks its format.
    let cond = |t: &str| {
        json!({"type": t, "status": "True", "reason": t, "message": format!("Quota reserved in ClusterQueue {cq}"),
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
    };
    json!({"status": {
        "admission": {"clusterQueue": cq, "podSetAssignments": [{"name": "main", "count": 1,
            "flavors": {"cpu": "default", "memory": "default"},
            "resourceUsage": {"cpu": format!("{JOB_CPU_MILLI}m"), "memory": format!("{JOB_MEM_MI}Mi")}}]},
        "conditions": [cond("QuotaReserved"), cond("Admitted")],
    }})
}

/// Creates a Workload and admits it through the status subresource; returns the retries.
async fn create_and_admit(client: &Client, ns: &str, name: &str, cq: &str) -> usize {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource("Workload", "workloads"));
    let mut retries = 0;
    let wl = workload(ns, name);
    while let Err(e) = api.create(&PostParams::default(), &wl).await {
        if matches!(&e, kube::Error::Api(a) if a.code == 409) {
            break;
        }
        retries += 1;
        assert!(retries < 30, "creating Workload {ns}/{name}: {e}");
    }
    let patch = admission(cq);
    while let Err(e) = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        retries += 1;
        assert!(retries < 30, "admitting Workload {ns}/{name}: {e}");
    }
    retries
}

/// A plain client's loop on a fresh control plane with the CRDs and the load namespaces, no manager: `trip(client,
/// i)` for every load Job i, IN_FLIGHT at a time (each returns its retries), timed, with the API server's counters.
async fn client_loop<F, Fut>(s: &Settings, name: &str, trip: F) -> Option<Ceiling>
where
    F: Fn(Client, usize) -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let plane = plane(name).await?;
    let crds = sluice_stdout(&["crds"]);
    tokio::task::block_in_place(|| {
        plane.kubectl(&["apply", "--server-side", "-f", "-"], Some(&crds));
        wait_established(
            &plane,
            crds.matches("kind: CustomResourceDefinition").count(),
        );
    });
    kubectl_create(
        &plane,
        (0..s.cluster_queues)
            .map(|q| namespace(&load_ns(q)))
            .collect(),
    );
    let client = plane.client().await;
    let watched = Watched::start(vec![
        (
            "kube-apiserver".into(),
            pid_file(&plane, "kube-apiserver.pid"),
        ),
        ("etcd".into(), pid_file(&plane, "etcd.pid")),
    ]);
    let counts0 = ApiCounts::read(&client).await;
    let start = Instant::now();
    let retries: usize = futures::stream::iter(0..s.jobs)
        .map(|i| trip(client.clone(), i))
        .buffer_unordered(IN_FLIGHT)
        .fold(0, |a, r| async move { a + r })
        .await;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = watched.figures();
    Some(Ceiling {
        workloads: s.jobs,
        seconds,
        per_second: s.jobs as f64 / seconds,
        retries,
        apiserver_cpu_seconds: cpu[0].cpu_seconds,
        etcd_cpu_seconds: cpu.get(1).map_or(0.0, |f| f.cpu_seconds),
        api: ApiCounts::read(&client)
            .await
            .per_job_since(&counts0, s.jobs),
    })
}

/// A plain client creating and admitting `jobs` Workloads, IN_FLIGHT at a time, on the CRDs alone.
async fn ceiling(s: &Settings) -> Option<Ceiling> {
    let cqs = s.cluster_queues;
    client_loop(s, "bench-ceiling", move |client, i| async move {
        let q = i % cqs;
        create_and_admit(&client, &load_ns(q), &format!("wl-{i}"), &format!("cq-{q}")).await
    })
    .await
}

/// Events Kueue records per admitted Job: CreatedWorkload and Started on the Job, QuotaReserved and Admitted on
/// its Workload.
const EVENTS_PER_JOB: usize = 4;

/// One Job's trip through the API server as a manager must make it, by a plain client and without webhooks: the
/// Job created suspended, its Workload created, admitted through status, the Job resumed, and Kueue's events.
async fn manager_path(client: &Client, ns: &str, name: &str, cq: &str) -> usize {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let wls: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &resource("Workload", "workloads"));
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let mut retries = 0;
    let mut retry = |what: &str, e: &kube::Error| {
        retries += 1;
        assert!(retries < 30, "{what} {ns}/{name}: {e}");
    };
    let mut suspended = job(ns, name);
    if let Some(spec) = suspended.spec.as_mut() {
        spec.suspend = Some(true);
    }
    let job = loop {
        match jobs.create(&PostParams::default(), &suspended).await {
            Ok(j) => break j,
            Err(e) => retry("creating Job", &e),
        }
    };
    let wl_name = format!("job-{name}");
    let mut wl = workload(ns, &wl_name);
    wl.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: name.into(),
            uid: job.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    while let Err(e) = wls.create(&PostParams::default(), &wl).await {
        if matches!(&e, kube::Error::Api(a) if a.code == 409) {
            break;
        }
        retry("creating Workload", &e);
    }
    let admit = admission(cq);
    while let Err(e) = wls
        .patch_status(&wl_name, &PatchParams::default(), &Patch::Merge(&admit))
        .await
    {
        retry("admitting Workload", &e);
    }
    let resume = json!({"spec": {"suspend": false}});
    while let Err(e) = jobs
        .patch(name, &PatchParams::default(), &Patch::Merge(&resume))
        .await
    {
        retry("resuming Job", &e);
    }
    for (k, reason) in ["CreatedWorkload", "QuotaReserved", "Admitted", "Started"]
        .into_iter()
        .take(EVENTS_PER_JOB)
        .enumerate()
    {
        let (kind, api_version, object) = if k == 1 || k == 2 {
            ("Workload", "kueue.x-k8s.io/v1beta2", wl_name.as_str())
        } else {
            ("Job", "batch/v1", name)
        };
        let ev: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
            "metadata": {"name": format!("{object}.{k}"), "namespace": ns},
            "involvedObject": {"kind": kind, "apiVersion": api_version, "name": object, "namespace": ns},
            "reason": reason, "message": format!("{reason} {object}"), "type": "Normal",
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1,
            "source": {"component": "bench"},
        }))
        .expect("Event");
        while let Err(e) = events.create(&PostParams::default(), &ev).await {
            if matches!(&e, kube::Error::Api(a) if a.code == 409) {
                break;
            }
            retry("recording an event", &e);
        }
    }
    retries
}

/// A plain client making every load Job's trip of [`manager_path`], IN_FLIGHT at a time: the most Jobs per second
/// any manager that writes what Kueue writes could admit here, before scheduling or webhooks cost anything.
async fn manager_floor(s: &Settings) -> Option<Ceiling> {
    let cqs = s.cluster_queues;
    client_loop(s, "bench-manager-path", move |client, i| async move {
        let q = i % cqs;
        manager_path(
            &client,
            &load_ns(q),
            &format!("job-{i}"),
            &format!("cq-{q}"),
        )
        .await
    })
    .await
}

// --- 2-4. admission runs.

/// What runs for one system; kept alive until the run's figures are read.
enum Manager {
    Kueue(Kueue),
    Sluice(Webhook, Operator),
}

/// Kueue's Configuration: its shipped controller concurrency, with these client limits (None: the shipped ones).
fn kueue_config(limits: Option<(u32, u32)>) -> String {
    let shipped = std::fs::read_to_string(kueue_dir().join("config/configuration.yaml"))
        .expect("Kueue's Configuration");
    let shipped: serde_yaml::Value = serde_yaml::from_str(&shipped).expect("Kueue's Configuration");
    let mut config = serde_yaml::Mapping::new();
    config.insert("controller".into(), shipped["controller"].clone());
    let client = match limits {
        Some((qps, burst)) => {
            serde_yaml::from_str(&format!("{{qps: {qps}, burst: {burst}}}")).expect("limits")
        }
        None => shipped["clientConnection"].clone(),
    };
    config.insert("clientConnection".into(), client);
    serde_yaml::to_string(&config).expect("Configuration")
}

/// Starts the system on `plane`; returns it and the processes to measure.
async fn start(which: System, plane: &ControlPlane) -> (Manager, Vec<(String, Option<u32>)>) {
    let kc = plane.kubeconfig();
    match which {
        System::KueueShipped | System::KueueRaised => {
            let config = if which == System::KueueShipped {
                kueue_config(None)
            } else {
                kueue_config(Some((1000, 2000)))
            };
            let kueue =
                tokio::task::block_in_place(|| Kueue::start(plane, Some(&config), KUEUE_GATES));
            let pid = pids("kueue/bin/kueue", None, &kc).first().copied();
            (Manager::Kueue(kueue), vec![("kueue manager".into(), pid)])
        }
        System::Sluice => {
            let webhook = install_webhook(plane).await;
            let mut flags = vec!["--leader-elect=false".to_string()];
            let extra = std::env::var("SLUICE_BENCH_OPERATOR_ARGS").unwrap_or_default();
            flags.extend(extra.split_whitespace().map(String::from));
            let operator =
                tokio::task::block_in_place(|| Operator::start(plane, "operator", &flags));
            let exe = env!("CARGO_BIN_EXE_sluice");
            let op = pids(exe, Some("operator"), &kc).first().copied();
            let wh = pids(exe, Some("webhook"), &kc).first().copied();
            let procs = vec![
                ("sluice operator".into(), op),
                ("sluice webhook".into(), wh),
            ];
            (Manager::Sluice(webhook, operator), procs)
        }
    }
}

fn log_tail(m: &Manager) -> String {
    match m {
        Manager::Kueue(k) => k.tail(),
        Manager::Sluice(_, o) => o.process.tail(),
    }
}

/// Idle latency: Jobs created one at a time, each waited for; sorted.
async fn idle_latencies(client: &Client, admissions: &Admissions, n: usize) -> Vec<Duration> {
    let api: Api<Job> = Api::namespaced(client.clone(), IDLE_NS);
    let mut out = Vec::new();
    for i in 0..n {
        let name = format!("idle-{i}");
        create_job(&api, &job(IDLE_NS, &name)).await;
        let created = Instant::now();
        let key = (IDLE_NS.to_string(), name);
        let at = admissions.wait_for(&key, Duration::from_secs(60)).await;
        let at = at.unwrap_or_else(|| panic!("idle Job {} not admitted within 60 s", key.1));
        out.push(at.saturating_duration_since(created));
    }
    out.sort();
    out
}

/// When each load Job's create returned.
type Created = Arc<Mutex<HashMap<(String, String), Instant>>>;

/// Creates the load's Jobs IN_FLIGHT at a time; returns when the creates returned and the retries.
async fn create_load(client: Client, s: Settings, created: Created) -> (Instant, usize) {
    let retries = futures::stream::iter(0..s.jobs)
        .map(|i| {
            let (client, created) = (client.clone(), created.clone());
            async move {
                let ns = load_ns(i % s.cluster_queues);
                let name = format!("job-{i}");
                let api: Api<Job> = Api::namespaced(client, &ns);
                let r = create_job(&api, &job(&ns, &name)).await;
                created
                    .lock()
                    .expect("created")
                    .insert((ns, name), Instant::now());
                r
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .fold(0, |a, r| async move { a + r })
        .await;
    (Instant::now(), retries)
}

/// Waits until `fit` load Jobs are admitted or `limit` passed since `t0`; returns the admitted count and when
/// the last was seen.
async fn wait_fit(
    admissions: &Admissions,
    fit: usize,
    t0: Instant,
    limit: Duration,
) -> (usize, Option<Instant>) {
    loop {
        let (n, last) = admissions.load();
        if n >= fit || t0.elapsed() >= limit {
            return (n, last);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One system's run on a fresh control plane.
async fn admission_run(which: System, s: &Settings) -> Option<Run> {
    let plane = plane(&format!("bench-{}", which.slug())).await?;
    let (manager, procs) = start(which, &plane).await;
    let client = plane.client().await;
    kubectl_create(&plane, queues(s));
    wait_active(&client, s, || log_tail(&manager)).await;
    let (admissions, watch) = Admissions::watch(&client).await;
    let idle = idle_latencies(&client, &admissions, s.idle_jobs).await;
    eprintln!(
        "{}: idle latency measured, loading {} Jobs",
        which.label(),
        s.jobs
    );

    let mut procs = procs;
    procs.push((
        "kube-apiserver".into(),
        pid_file(&plane, "kube-apiserver.pid"),
    ));
    procs.push(("etcd".into(), pid_file(&plane, "etcd.pid")));
    let watched = Watched::start(procs);
    let counts0 = ApiCounts::read(&client).await;
    let created: Created = Arc::default();
    let t0 = Instant::now();
    let creator = tokio::spawn(create_load(client.clone(), *s, created.clone()));
    let fit = s.fit();
    let (admitted, last) =
        wait_fit(&admissions, fit, t0, Duration::from_secs(s.limit_seconds)).await;
    let (created_at, create_retries) = creator.await.expect("creates");
    let done = admitted >= fit;
    let end = if done {
        last.expect("an admission")
    } else {
        Instant::now()
    };
    let run_seconds = end.duration_since(t0).as_secs_f64();
    // Anything admitted beyond what fits would show now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let processes = watched.figures();
    let api = ApiCounts::read(&client)
        .await
        .per_job_since(&counts0, s.jobs);
    watch.abort();

    let mut load: Vec<Duration> = {
        let created = created.lock().expect("created");
        let first = admissions.first.lock().expect("admissions");
        first
            .iter()
            .filter_map(|(k, at)| Some(at.saturating_duration_since(*created.get(k)?)))
            .collect()
    };
    load.sort();
    let create_seconds = created_at.duration_since(t0).as_secs_f64();
    let run = Run {
        system: which.label().into(),
        jobs: s.jobs,
        create_seconds,
        creates_per_second: s.jobs as f64 / create_seconds,
        create_retries,
        fit,
        admitted,
        all_fit_seconds: done.then_some(run_seconds),
        admissions_per_second: admitted.min(fit) as f64 / run_seconds,
        admitted_after_settle: admissions.load().0,
        idle_p50_ms: quantile_ms(&idle, 0.5),
        idle_p99_ms: quantile_ms(&idle, 0.99),
        load_p50_ms: quantile_ms(&load, 0.5),
        load_p99_ms: quantile_ms(&load, 0.99),
        processes,
        api,
    };
    drop(manager);
    Some(run)
}

// --- the report.

fn row(out: &mut String, name: &str, cells: impl Iterator<Item = String>) {
    let cells: Vec<String> = cells.collect();
    out.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
}

fn figure<'a>(r: &'a Run, name: &str) -> Option<&'a ProcessFigures> {
    r.processes.iter().find(|p| p.name == name)
}

/// A memory figure summed over the manager's own processes (Sluice's operator and webhook; Kueue's one).
fn manager_mib(r: &Run, figure: fn(&ProcessFigures) -> f64) -> f64 {
    manager_sum(&r.processes, figure)
}

/// A figure summed over the manager's own processes among `processes` (0, not f64's empty sum -0, when none).
fn manager_sum(processes: &[ProcessFigures], figure: fn(&ProcessFigures) -> f64) -> f64 {
    processes
        .iter()
        .filter(|p| p.name.starts_with("kueue") || p.name.starts_with("sluice"))
        .map(figure)
        .fold(0.0, |a, x| a + x)
}

fn table(report: &Report) -> String {
    let s = &report.settings;
    let c = &report.ceiling;
    let runs = &report.runs;
    let mut out = format!(
        "Kueue {} and Sluice side by side: {} Jobs (1 pod, {JOB_CPU_MILLI}m cpu, {JOB_MEM_MI}Mi) over {} ClusterQueues \
         in {} cohorts (one LocalQueue each, own namespace, one ResourceFlavor), quotas for {} of them; {IN_FLIGHT} \
         creates in flight. Each system on a fresh control plane with kube-controller-manager stopped (no Job \
         controller, so no Pods: admission does not need them).\n\n",
        report.kueue_version,
        s.jobs,
        s.cluster_queues,
        s.cohorts,
        s.fit()
    );
    if !report.operator_args.is_empty() {
        out.push_str(&format!(
            "Sluice's operator ran with {}.\n\n",
            report.operator_args
        ));
    }
    out.push_str(&format!(
        "API server ceiling (no manager; create a Workload and admit it through status, {IN_FLIGHT} in flight): \
         {} Workloads in {:.1} s = {:.0} Workloads/s ({} retries; CPU: kube-apiserver {:.1} s, etcd {:.1} s; writes \
         per Workload {})\n\n",
        c.workloads,
        c.seconds,
        c.per_second,
        c.retries,
        c.apiserver_cpu_seconds,
        c.etcd_cpu_seconds,
        c.api.worded()
    ));
    let m = &report.manager_path;
    out.push_str(&format!(
        "A manager's path (no manager, no webhook; per Job: the Job created suspended, its Workload created and \
         admitted through status, the Job resumed, {EVENTS_PER_JOB} events as Kueue records them; {IN_FLIGHT} Jobs \
         in flight): {} Jobs in {:.1} s = {:.0} Jobs/s ({} retries; CPU: kube-apiserver {:.1} s, etcd {:.1} s; writes \
         per Job {})\n\n",
        m.workloads,
        m.seconds,
        m.per_second,
        m.retries,
        m.apiserver_cpu_seconds,
        m.etcd_cpu_seconds,
        m.api.worded()
    ));
    row(&mut out, "", runs.iter().map(|r| r.system.clone()));
    row(&mut out, "---", runs.iter().map(|_| "---".into()));
    row(
        &mut out,
        "Jobs created / s (retries)",
        runs.iter()
            .map(|r| format!("{:.0} ({})", r.creates_per_second, r.create_retries)),
    );
    row(
        &mut out,
        "admitted of fit",
        runs.iter()
            .map(|r| format!("{} of {}", r.admitted.min(r.fit), r.fit)),
    );
    row(
        &mut out,
        "time to all fit admitted",
        runs.iter().map(|r| match r.all_fit_seconds {
            Some(t) => format!("{t:.1} s"),
            None => format!("not within {} s", s.limit_seconds),
        }),
    );
    row(
        &mut out,
        "admissions / s",
        runs.iter()
            .map(|r| format!("{:.1}", r.admissions_per_second)),
    );
    row(
        &mut out,
        "admitted 3 s later",
        runs.iter().map(|r| r.admitted_after_settle.to_string()),
    );
    row(
        &mut out,
        "latency idle p50 / p99",
        runs.iter()
            .map(|r| format!("{:.0} / {:.0} ms", r.idle_p50_ms, r.idle_p99_ms)),
    );
    row(
        &mut out,
        "latency under load p50 / p99",
        runs.iter()
            .map(|r| format!("{:.0} / {:.0} ms", r.load_p50_ms, r.load_p99_ms)),
    );
    for name in [
        "kueue manager",
        "sluice operator",
        "sluice webhook",
        "kube-apiserver",
        "etcd",
    ] {
        if runs.iter().all(|r| figure(r, name).is_none()) {
            continue;
        }
        row(
            &mut out,
            &format!("{name} RSS (anon; peak), CPU s"),
            runs.iter().map(|r| match figure(r, name) {
                Some(p) => format!(
                    "{:.0} MiB ({:.0}; {:.0}), {:.1} s",
                    p.rss_mib, p.anon_rss_mib, p.peak_rss_mib, p.cpu_seconds
                ),
                None => "-".into(),
            }),
        );
    }
    row(
        &mut out,
        "API server writes per load Job (by resource)",
        runs.iter().map(|r| r.api.worded()),
    );
    row(
        &mut out,
        "admission webhook calls per load Job",
        runs.iter().map(|r| format!("{:.2}", r.api.webhook_calls)),
    );
    out.push('\n');
    out.push_str(&targets(report));
    out
}

/// Sluice against the targets.
fn targets(report: &Report) -> String {
    let find = |label: &str| report.runs.iter().find(|r| r.system == label);
    let (Some(s), Some(k)) = (
        find(System::Sluice.label()),
        find(System::KueueRaised.label()),
    ) else {
        return String::new();
    };
    let speedup = s.admissions_per_second / k.admissions_per_second;
    let of_ceiling = report.ceiling.per_second / s.admissions_per_second;
    let memory = manager_mib(k, |p| p.rss_mib) / manager_mib(s, |p| p.rss_mib);
    let anon = manager_mib(k, |p| p.anon_rss_mib) / manager_mib(s, |p| p.anon_rss_mib);
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    format!(
        "Targets: Sluice {speedup:.1}x raised Kueue's admissions/s (target >= 10x: {}); the ceiling is {of_ceiling:.1}x \
         Sluice's admissions/s (target <= 2x: {}); Kueue's manager RSS is {memory:.1}x Sluice's operator+webhook \
         (target > 1x: {}; anonymous memory alone {anon:.1}x).\n",
        mark(speedup >= 10.0),
        mark(of_ceiling <= 2.0),
        mark(memory > 1.0)
    ) + &reachable(report, s.admissions_per_second, k.admissions_per_second)
}

/// Whether the throughput targets are within what a manager's path allows on this machine at all.
fn reachable(report: &Report, sluice: f64, kueue: f64) -> String {
    let path = report.manager_path.per_second;
    let side = |x: f64| if x > path { "above" } else { "within" };
    format!(
        "A manager's path allows {path:.0} Jobs/s here; Sluice reaches {:.0}% of it. 10x Kueue ({:.0}/s) is {} it; \
         half the ceiling ({:.0}/s) is {} it.\n",
        sluice / path * 100.0,
        10.0 * kueue,
        side(10.0 * kueue),
        report.ceiling.per_second / 2.0,
        side(report.ceiling.per_second / 2.0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: run by tests/kueue/bench"]
async fn side_by_side() {
    let Some(version) = kueue_version() else {
        panic!(
            "Kueue is not built in {}: run tests/kueue/build first",
            kueue_dir().display()
        );
    };
    let s = Settings::from_env();
    eprintln!("settings: {s:?}, fit {}", s.fit());
    let ceiling = ceiling(&s)
        .await
        .expect("no control plane: run tests/control-plane/build");
    eprintln!("ceiling: {:.0} Workloads/s", ceiling.per_second);
    let manager_path = manager_floor(&s).await.expect("no control plane");
    eprintln!("a manager's path: {:.0} Jobs/s", manager_path.per_second);
    let mut runs = Vec::new();
    for which in systems() {
        let run = admission_run(which, &s).await.expect("no control plane");
        eprintln!(
            "{}: {:.1} admissions/s",
            which.label(),
            run.admissions_per_second
        );
        runs.push(run);
    }
    let report = Report {
        kueue_version: version,
        settings: s,
        operator_args: std::env::var("SLUICE_BENCH_OPERATOR_ARGS").unwrap_or_default(),
        ceiling,
        manager_path,
        runs,
    };
    let text = table(&report);
    println!("{text}");
    write(&report, &text);
}

/// Writes the table and the figures to target/kueue-bench/, as the latest and stamped with the time.
fn write(report: &Report, text: &str) {
    let dir = repo_root().join("target/kueue-bench");
    std::fs::create_dir_all(&dir).expect("target/kueue-bench");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let json = serde_json::to_string_pretty(report).expect("JSON");
    for name in ["report".to_string(), format!("report-{stamp}")] {
        std::fs::write(dir.join(format!("{name}.txt")), text).expect("report");
        std::fs::write(dir.join(format!("{name}.json")), &json).expect("figures");
    }
}

#[test]
fn api_counts_sum_the_writes_by_resource_and_the_webhook_calls() {
    let before = ApiCounts::parse(
        "# TYPE apiserver_request_total counter\n\
         apiserver_request_total{code=\"201\",group=\"batch\",resource=\"jobs\",subresource=\"\",verb=\"POST\",version=\"v1\"} 10\n\
         apiserver_admission_webhook_admission_duration_seconds_count{name=\"a\",operation=\"CREATE\",rejected=\"false\",type=\"admit\"} 4\n",
    );
    let after = ApiCounts::parse(
        "apiserver_request_total{code=\"201\",group=\"batch\",resource=\"jobs\",subresource=\"\",verb=\"POST\",version=\"v1\"} 30\n\
         apiserver_request_total{code=\"409\",group=\"batch\",resource=\"jobs\",subresource=\"\",verb=\"POST\",version=\"v1\"} 2\n\
         apiserver_request_total{code=\"200\",group=\"batch\",resource=\"jobs\",subresource=\"\",verb=\"GET\",version=\"v1\"} 99\n\
         apiserver_request_total{code=\"200\",group=\"kueue.x-k8s.io\",resource=\"workloads\",subresource=\"status\",verb=\"PATCH\",version=\"v1beta2\"} 20\n\
         apiserver_request_total{code=\"201\",group=\"\",resource=\"events\",subresource=\"\",verb=\"POST\",version=\"v1\"} 80\n\
         apiserver_admission_webhook_admission_duration_seconds_count{name=\"a\",operation=\"CREATE\",rejected=\"false\",type=\"admit\"} 24\n\
         apiserver_admission_webhook_admission_duration_seconds_count{name=\"b\",operation=\"CREATE\",rejected=\"false\",type=\"validating\"} 20\n\
         apiserver_admission_webhook_admission_duration_seconds_sum{name=\"b\",operation=\"CREATE\",rejected=\"false\",type=\"validating\"} 7\n",
    );
    let per_job = after.per_job_since(&before, 20);
    assert_eq!(
        per_job.worded(),
        "6.10 (events 4.00, jobs 1.10, workloads/status 1.00)"
    );
    assert_eq!(per_job.webhook_calls, 2.0);
}
