//! The agent's GPU observability with its fake NVML source and a fake kubelet pod-resources server:
//! the metric families and labels scraped from `/metrics` (against dcgm-exporter's default counters),
//! the pods joined to their GPUs, the health rules, and the NodeGpuTopology marked before a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_operator::agent::health::{HealthRules, HealthTracker};
use sluice_operator::agent::metrics::{self, Holders};
use sluice_operator::agent::podresources::{
    self, ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources,
    PodResourcesClient,
};
use sluice_operator::agent::publish::Publisher;
use sluice_operator::agent::{self, Agent, FakeSource, GpuSource, RawNode};
use sluice_operator::testing::FakeApi;
use sluice_sdk::sluice::node_gpu_topology::{GpuHolder, NodeGpuTopology};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fake-nvml/h100x8.yaml")
}

fn read_example() -> RawNode {
    FakeSource { path: example() }
        .read()
        .expect("the example parses")
}

/// A private copy of the example to edit between reads.
fn scratch(tag: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-gpu-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gpus.yaml");
    std::fs::copy(example(), &file).expect("copy");
    (dir, file)
}

fn edit(file: &Path, f: impl FnOnce(&mut RawNode)) {
    let mut raw: RawNode =
        serde_yaml::from_str(&std::fs::read_to_string(file).expect("read")).expect("parse");
    f(&mut raw);
    std::fs::write(file, serde_yaml::to_string(&raw).expect("yaml")).expect("write");
}

/// One parsed sample: family name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses OpenMetrics text (the subset prometheus-client writes: no escapes in these label values).
fn parse(text: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').expect("TYPE line");
            types.insert(name.to_string(), ty.to_string());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (head, value) = line.rsplit_once(' ').expect("sample line");
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (head, ""),
        };
        let labels = labels
            .split("\",")
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').expect("label");
                (k.to_string(), v.trim_matches('"').to_string())
            })
            .collect();
        samples.push((name.to_string(), labels, value.parse().expect("value")));
    }
    (types, samples)
}

fn value(samples: &[Sample], family: &str, gpu: &str) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == family && l.get("gpu").map(String::as_str) == Some(gpu))
        .map(|s| s.2)
}

/// dcgm-exporter 4.5's `etc/default-counters.csv` (the enabled `DCGM_FI_DEV_*` lines) and the
/// commented ECC and retired-page lines the issue asks for. The profiling (`DCGM_FI_PROF_*`) fields
/// need DCGM itself and are out of scope.
const DCGM_DEFAULT_DEV: &[&str] = &[
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_RETIRED_SBE",
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_RETIRED_PENDING",
];

/// The default counters the agent does not export, with why (docs/node-agent.md says the same).
const NOT_EXPORTED: &[&str] = &[
    // NVLink throughput counters: not read yet.
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    // vGPU licensing: not a data-centre GPU concern.
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
];

#[test]
fn the_example_exports_dcgm_exporters_families_with_its_labels() {
    let text = metrics::render(
        "gpu-0",
        &read_example(),
        &agent::derive(&read_example()),
        &Holders::new(),
    );
    let (types, samples) = parse(&text);
    let families: BTreeSet<&str> = types
        .keys()
        .map(String::as_str)
        .filter(|f| *f != metrics::HEALTH_FAMILY)
        .collect();
    assert!(types.contains_key(metrics::HEALTH_FAMILY));
    let expected: BTreeSet<&str> = DCGM_DEFAULT_DEV
        .iter()
        .copied()
        .filter(|f| !NOT_EXPORTED.contains(f))
        .chain([
            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
            "DCGM_FI_DEV_ROW_REMAP_PENDING",
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        ])
        .collect();
    assert_eq!(families, expected);
    assert_eq!(
        families,
        metrics::family_names().into_iter().collect::<BTreeSet<_>>()
    );
    // One series per GPU per family, with dcgm-exporter's labels and nothing of a pod.
    assert_eq!(samples.len(), types.len() * 8);
    let labels: BTreeSet<&str> = samples
        .iter()
        .filter(|(n, _, _)| n == "DCGM_FI_DEV_GPU_UTIL")
        .flat_map(|(_, l, _)| l.keys().map(String::as_str))
        .collect();
    assert_eq!(
        labels,
        BTreeSet::from([
            "gpu",
            "UUID",
            "pci_bus_id",
            "device",
            "modelName",
            "Hostname",
            "DCGM_FI_DRIVER_VERSION"
        ])
    );
    let gpu5 = samples
        .iter()
        .find(|(n, l, _)| n == "DCGM_FI_DEV_GPU_TEMP" && l["gpu"] == "5")
        .expect("GPU 5's temperature");
    assert_eq!(gpu5.1["device"], "nvidia5");
    assert_eq!(gpu5.1["UUID"], "GPU-00000005-a1b2-c3d4-e5f6-0123456789ab");
    assert_eq!(gpu5.1["modelName"], "NVIDIA H100 80GB HBM3");
    assert_eq!(gpu5.1["Hostname"], "gpu-0");
    assert_eq!(gpu5.2, 87.0);
    // Units as dcgm-exporter's: watts, MiB, MHz, the clocks-event bitmask.
    assert_eq!(value(&samples, "DCGM_FI_DEV_POWER_USAGE", "0"), Some(689.0));
    assert_eq!(value(&samples, "DCGM_FI_DEV_FB_USED", "0"), Some(71234.0));
    assert_eq!(value(&samples, "DCGM_FI_DEV_SM_CLOCK", "5"), Some(1245.0));
    assert_eq!(
        value(&samples, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "5"),
        Some(96.0)
    );
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
}

#[test]
fn a_field_the_driver_does_not_report_is_left_out_and_the_last_xid_is_labelled() {
    let mut raw = read_example();
    for g in &mut raw.gpus {
        g.telemetry.memory_temp_c = None;
    }
    raw.gpus[2].xids = vec![13, 79];
    let (types, samples) = parse(&metrics::render(
        "gpu-0",
        &raw,
        &agent::derive(&raw),
        &Holders::new(),
    ));
    assert!(!types.contains_key("DCGM_FI_DEV_MEMORY_TEMP"));
    let xid = samples
        .iter()
        .find(|(n, l, _)| n == "DCGM_FI_DEV_XID_ERRORS" && l["gpu"] == "2")
        .expect("xid series");
    assert_eq!(xid.2, 79.0);
    assert_eq!(xid.1["err_code"], "79");
    assert_eq!(xid.1["err_msg"], "GPU has fallen off the bus");
}

#[test]
fn mig_instances_are_reported_per_gpu_instance() {
    let raw: RawNode = serde_yaml::from_str(
        r#"
gpus:
- index: 0
  uuid: GPU-m
  name: NVIDIA A100-SXM4-80GB
  memoryBytes: 85899345920
  busId: "00000000:07:00.0"
  migEnabled: true
  mig:
  - {profile: 3g.40gb, uuid: MIG-one, memoryMib: 40192, gpuInstanceId: 1, fbUsedMib: 1000, fbFreeMib: 39192}
  - {profile: 3g.40gb, uuid: MIG-two, memoryMib: 40192, gpuInstanceId: 2, fbUsedMib: 20, fbFreeMib: 40172}
  telemetry: {gpuUtil: 40}
"#,
    )
    .expect("raw");
    let mut holders = Holders::new();
    holders.insert(
        "MIG-two".into(),
        vec![metrics::Holder {
            pod: "infer-0".into(),
            namespace: "serving".into(),
            container: "server".into(),
        }],
    );
    let (_, samples) = parse(&metrics::render(
        "a100",
        &raw,
        &agent::derive(&raw),
        &holders,
    ));
    let fb: Vec<&Sample> = samples
        .iter()
        .filter(|(n, l, _)| n == "DCGM_FI_DEV_FB_USED" && l.contains_key("GPU_I_ID"))
        .collect();
    assert_eq!(fb.len(), 2);
    let two = fb
        .iter()
        .find(|(_, l, _)| l["GPU_I_ID"] == "2")
        .expect("instance 2");
    assert_eq!(two.1["GPU_I_PROFILE"], "3g.40gb");
    assert_eq!(two.1["pod"], "infer-0");
    assert_eq!(two.1["namespace"], "serving");
    assert_eq!(two.1["container"], "server");
    assert_eq!(two.2, 20.0);
    // The whole GPU's series carries no pod: its instances are held, not the GPU.
    let util = samples
        .iter()
        .find(|(n, _, _)| n == "DCGM_FI_DEV_GPU_UTIL")
        .expect("util");
    assert!(!util.1.contains_key("pod"));
}

fn pod(name: &str, container: &str, resource: &str, ids: &[&str]) -> PodResources {
    PodResources {
        name: name.into(),
        namespace: "team-a".into(),
        containers: vec![ContainerResources {
            name: container.into(),
            devices: vec![ContainerDevices {
                resource_name: resource.into(),
                device_ids: ids.iter().map(|s| s.to_string()).collect(),
            }],
        }],
    }
}

/// The scripted API server with the agent's Node in it (the agent labels its node).
fn api() -> FakeApi {
    let fake = FakeApi::new();
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"}
    }))
    .expect("node");
    fake.put(&node);
    fake
}

fn uuid(i: u32) -> String {
    format!("GPU-{i:08x}-a1b2-c3d4-e5f6-0123456789ab")
}

#[tokio::test]
async fn pods_from_the_kubelets_pod_resources_label_their_gpus_and_are_published() {
    let (dir, file) = scratch("podres");
    let socket = dir.join("kubelet.sock");
    let answer = Arc::new(Mutex::new(ListPodResourcesResponse {
        pod_resources: vec![
            pod(
                "train-0",
                "trainer",
                "nvidia.com/gpu",
                &[&uuid(0), &uuid(1), &uuid(2), &uuid(3)],
            ),
            // Not a GPU: ignored.
            pod("nic-user", "app", "example.com/nic", &["nic-0"]),
            // A time-sliced replica counts for its GPU.
            pod(
                "notebook",
                "jupyter",
                "nvidia.com/gpu",
                &[&format!("{}::1", uuid(4))],
            ),
        ],
    }));
    let server = podresources::fake::serve(&socket, answer.clone()).expect("serves");

    let client = PodResourcesClient::new(&socket, Duration::from_secs(5));
    let listed = client.list().await.expect("List answers");
    assert_eq!(listed.pod_resources.len(), 3);

    let fake = api();
    let mut agent = Agent::new(
        "gpu-0",
        Box::new(FakeSource { path: file.clone() }),
        HealthRules::default(),
    );
    agent.pod_resources = Some(client);
    agent.publisher = Some(Publisher::new(
        fake.client("agent"),
        "gpu-0",
        Duration::from_secs(600),
    ));
    let tick = agent.tick().await.expect("tick");
    assert!(tick.sent.topology && tick.sent.status, "{:?}", tick.sent);

    let (_, samples) = parse(&agent.metrics.get());
    let held: BTreeSet<(String, String, String)> = samples
        .iter()
        .filter(|(n, _, _)| n == "DCGM_FI_DEV_GPU_UTIL")
        .filter_map(|(_, l, _)| {
            Some((
                l["gpu"].clone(),
                l.get("pod")?.clone(),
                l.get("container")?.clone(),
            ))
        })
        .collect();
    let expected: BTreeSet<_> = (0..4)
        .map(|g| (g.to_string(), "train-0".to_string(), "trainer".to_string()))
        .chain([("4".into(), "notebook".into(), "jupyter".into())])
        .collect();
    assert_eq!(held, expected);
    assert!(
        samples
            .iter()
            .filter(|(_, l, _)| l.get("pod").is_some())
            .all(|(_, l, _)| l["namespace"] == "team-a")
    );

    // The status carries each GPU's use and holder, so the operator needs no scraping.
    let t = fake
        .get::<NodeGpuTopology>(None, "gpu-0")
        .expect("published");
    let status = t.status.expect("status");
    assert_eq!(status.gpus.len(), 8);
    assert_eq!(status.gpus[0].utilization, Some(97));
    assert_eq!(status.gpus[0].memory_used_mib, Some(71234));
    assert_eq!(
        status.gpus[0].holders,
        vec![GpuHolder {
            namespace: "team-a".into(),
            pod: "train-0".into(),
            container: "trainer".into(),
            mig_uuid: None
        }]
    );
    assert!(status.gpus[5].holders.is_empty());

    // Unchanged use is not sent again; a new holder is.
    let again = agent.tick().await.expect("tick");
    assert!(!again.sent.status);
    answer.lock().expect("lock").pod_resources.push(pod(
        "eval-1",
        "eval",
        "nvidia.com/gpu",
        &[&uuid(6)],
    ));
    let moved = agent.tick().await.expect("tick");
    assert!(moved.sent.status);
    let t = fake
        .get::<NodeGpuTopology>(None, "gpu-0")
        .expect("published");
    assert_eq!(t.status.expect("status").gpus[6].holders[0].pod, "eval-1");

    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_missing_pod_resources_socket_is_a_clear_error() {
    let client = PodResourcesClient::new("/nonexistent/kubelet.sock", Duration::from_secs(2));
    let err = client.list().await.expect_err("no socket").to_string();
    assert!(
        err.contains("/nonexistent/kubelet.sock"),
        "names the socket: {err}"
    );
}

#[tokio::test]
async fn a_thermally_throttling_gpu_is_marked_before_it_fails() {
    let (dir, file) = scratch("thermal");
    let fake = api();
    let mut agent = Agent::new(
        "gpu-0",
        Box::new(FakeSource { path: file.clone() }),
        HealthRules::default(),
    );
    agent.publisher = Some(Publisher::new(
        fake.client("agent"),
        "gpu-0",
        Duration::from_secs(600),
    ));
    let healthy = |fake: &FakeApi| -> Vec<bool> {
        fake.get::<NodeGpuTopology>(None, "gpu-0")
            .expect("published")
            .spec
            .gpus
            .gpus
            .iter()
            .map(|g| g.health.healthy)
            .collect()
    };
    // One read of a hot GPU is not yet a pattern.
    agent.tick().await.expect("tick");
    assert!(healthy(&fake).iter().all(|h| *h));
    // The second read in a row marks it; nothing has failed (no XID, no ECC error).
    let t = agent.tick().await.expect("tick");
    assert!(t.sent.topology, "the mark is published at once");
    let h = healthy(&fake);
    assert_eq!(h.iter().filter(|x| !**x).count(), 1);
    assert!(!h[5]);
    let published = fake
        .get::<NodeGpuTopology>(None, "gpu-0")
        .expect("published");
    let g5 = &published.spec.gpus.gpus[5].health;
    assert!(g5.degrading, "degrading, not failed");
    assert!(g5.xid_errors.is_empty() && g5.ecc_uncorrected == 0);
    let (_, samples) = parse(&agent.metrics.get());
    let state = |gpu: &str| {
        samples
            .iter()
            .find(|(n, l, _)| n == metrics::HEALTH_FAMILY && l["gpu"] == gpu)
            .map(|(_, l, _)| l["state"].clone())
    };
    assert_eq!(state("5").as_deref(), Some("degrading"));
    assert_eq!(state("4").as_deref(), Some("healthy"));
    assert!(
        g5.reasons[0].starts_with("Degrading: thermal slowdown at 87 C"),
        "{:?}",
        g5.reasons
    );
    // It cools down: two clean reads clear the mark.
    edit(&file, |raw| {
        raw.gpus[5].telemetry.clocks_event_reasons = Some(0);
        raw.gpus[5].telemetry.gpu_temp_c = Some(55);
    });
    agent.tick().await.expect("tick");
    assert!(!healthy(&fake)[5], "one cool read is not enough");
    agent.tick().await.expect("tick");
    assert!(healthy(&fake)[5]);
    // Then it falls off the bus: failed, at once.
    edit(&file, |raw| raw.gpus[5].xids = vec![79]);
    agent.tick().await.expect("tick");
    let published = fake
        .get::<NodeGpuTopology>(None, "gpu-0")
        .expect("published");
    let g5 = &published.spec.gpus.gpus[5].health;
    assert!(!g5.healthy && !g5.degrading);
    assert_eq!(g5.reasons, vec!["XID 79: GPU has fallen off the bus"]);
    let (_, samples) = parse(&agent.metrics.get());
    assert!(
        samples.iter().any(|(n, l, _)| n == metrics::HEALTH_FAMILY
            && l["gpu"] == "5"
            && l["state"] == "failed")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rising_corrected_ecc_rate_pending_repairs_and_degrading_xids_mark_the_gpu() {
    let mut raw = read_example();
    for g in &mut raw.gpus {
        g.telemetry.clocks_event_reasons = Some(0);
    }
    let mut tracker = HealthTracker::new(HealthRules::default());
    let reasons = |t: &mut HealthTracker, raw: &RawNode, at: f64| t.evaluate(raw, at);
    assert!(reasons(&mut tracker, &raw, 0.0).values().all(Vec::is_empty));
    // GPU 1: 50 corrected errors in 10 minutes is 300 an hour, over the default 100.
    raw.gpus[1].telemetry.ecc_sbe_volatile = Some(50);
    // GPU 2: a row remap waits for a reset. GPU 3: XID 92, a high single-bit rate.
    raw.gpus[2].telemetry.row_remap_pending = Some(true);
    raw.gpus[3].xids = vec![92];
    // GPU 4: a few corrected errors, well under the limit.
    raw.gpus[4].telemetry.ecc_sbe_volatile = Some(2);
    let r = reasons(&mut tracker, &raw, 600.0);
    assert_eq!(
        r[&uuid(1)],
        vec!["Degrading: 300 corrected ECC errors per hour (limit 100)"]
    );
    assert_eq!(
        r[&uuid(2)],
        vec!["Degrading: a row remap waits for a GPU reset"]
    );
    assert_eq!(
        r[&uuid(3)],
        vec!["Degrading: XID 92: High single-bit ECC error rate"]
    );
    assert!(r[&uuid(4)].is_empty());
    assert!(r[&uuid(0)].is_empty());
    // Worn memory stays marked even when the rate settles; the remap clears after the reset.
    raw.gpus[2].telemetry.row_remap_pending = Some(false);
    let r = reasons(&mut tracker, &raw, 1200.0);
    assert!(!r[&uuid(1)].is_empty());
    assert!(r[&uuid(2)].is_empty());
    // Rules are configurable: with no ECC-rate rule and XID 92 not degrading, neither marks.
    let rules: HealthRules =
        serde_yaml::from_str("correctedEccPerHour: 0\ndegradingXids: []").expect("rules");
    let mut lenient = HealthTracker::new(rules);
    reasons(&mut lenient, &read_example(), 0.0);
    let r = reasons(&mut lenient, &raw, 600.0);
    assert!(r[&uuid(1)].is_empty() && r[&uuid(3)].is_empty());
}

#[test]
fn a_health_rules_file_with_a_typo_names_the_field() {
    let dir = std::env::temp_dir().join(format!("sluice-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("rules.yaml");
    std::fs::write(&file, "thermalReeds: 3\n").expect("write");
    let err = HealthRules::load(&file).expect_err("typo");
    assert!(err.contains("thermalReeds"), "{err}");
    assert!(err.contains("rules.yaml"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_endpoint_serves_the_last_read() {
    let mut agent = Agent::new(
        "gpu-0",
        Box::new(FakeSource { path: example() }),
        HealthRules::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let router = metrics::router(agent.metrics.clone());
    let served = tokio::spawn(async move { axum::serve(listener, router).await });
    let get = |path: &'static str| async move {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    };
    let before = get("/metrics").await;
    assert!(before.ends_with("\r\n\r\n# EOF\n"), "{before}");
    agent.tick().await.expect("tick");
    let after = get("/metrics").await;
    assert!(after.starts_with("HTTP/1.0 200"), "{after}");
    assert!(after.contains("application/openmetrics-text"));
    assert!(after.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
    assert!(get("/healthz").await.ends_with("ok"));
    served.abort();
}

/// A source that counts its reads and can be woken, as the NVML source is by an XID event.
struct Woken {
    inner: FakeSource,
    reads: Arc<std::sync::atomic::AtomicUsize>,
    wake: Arc<tokio::sync::Notify>,
}

impl GpuSource for Woken {
    fn read(&mut self) -> Result<RawNode, agent::AgentError> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.read()
    }
    fn wake(&self) -> Option<Arc<tokio::sync::Notify>> {
        Some(self.wake.clone())
    }
}

#[tokio::test]
async fn an_event_triggers_a_read_at_once_instead_of_waiting_for_the_interval() {
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let wake = Arc::new(tokio::sync::Notify::new());
    let source = Woken {
        inner: FakeSource { path: example() },
        reads: reads.clone(),
        wake: wake.clone(),
    };
    let mut agent = Agent::new("gpu-0", Box::new(source), HealthRules::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        // An hour between reads: only the first tick and the events read.
        agent
            .run(Duration::from_secs(3600), async {
                let _ = stopped.await;
            })
            .await;
    });
    let count = || reads.load(std::sync::atomic::Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while count() < 1 {
        assert!(tokio::time::Instant::now() < deadline, "no first read");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(count(), 1, "nothing more until the interval or an event");
    wake.notify_one();
    while count() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the event caused no read"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.send(()).expect("running");
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("stops")
        .expect("no panic");
}
