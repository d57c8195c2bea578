//! `sluice top gpus`: GPU use per node (allocatable GPUs against the GPUs running pods hold, with the
//! health and NVLink islands its node agent reports) and per ClusterQueue (Kueue's usage against
//! nominal quota). `sluice top workloads`: the admitted Workloads whose GPUs sit idle, from what the
//! node agents read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::node_gpu_topology::{NodeGpuTopology, NodeGpuTopologyStatus};
use sluice_sdk::topology::NodeGpus as Reported;

use super::{CliError, Output};
use crate::output::{OutputFormat, encode, table};
use sluice_sdk::topology::GPU_RESOURCE;

/// `sluice top ...`.
#[derive(clap::Subcommand, Debug)]
pub enum TopCommand {
    /// GPUs per node and per ClusterQueue.
    #[command(alias = "gpu")]
    Gpus {
        #[command(flatten)]
        out: Output,
    },
    /// Admitted Workloads whose every GPU stayed below a utilisation for a while, by idle GPU-hours.
    #[command(alias = "workload")]
    Workloads {
        /// A GPU is idle below this utilisation (percent, 1-100).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
        idle_below: u32,
        /// For at least this long before its agent's last reading (e.g. "30m", "2h").
        #[arg(long = "for", default_value = "30m", value_parser = parse_window)]
        window: chrono::Duration,
        /// List every Workload holding GPUs, idle or not.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        out: Output,
    },
}

fn parse_window(s: &str) -> Result<chrono::Duration, String> {
    let ms = crate::duration::parse_duration(s).map_err(|e| e.to_string())?;
    if ms <= 0 {
        return Err(format!("--for {s:?} must be positive"));
    }
    Ok(chrono::Duration::milliseconds(ms))
}

/// One Workload's GPUs as `sluice top workloads` shows them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRow {
    /// Namespace.
    pub namespace: String,
    /// Workload name.
    pub workload: String,
    /// ClusterQueue.
    pub cluster_queue: String,
    /// GPUs its pods hold.
    pub gpus: f64,
    /// Mean utilisation now, percent.
    pub utilization: Option<f64>,
    /// Whether every GPU stayed below the threshold for the window.
    pub idle: bool,
    /// The longest any of its GPUs has been below the threshold, seconds (idle ones only).
    pub idle_seconds: Option<i64>,
    /// GPU-hours held below the threshold (idle ones only).
    pub idle_gpu_hours: Option<f64>,
}

/// The rows: idle Workloads first by idle GPU-hours, then (with `all`) the others by name.
pub fn workload_rows(
    use_: &[crate::gpu_use::WorkloadGpus],
    idle_below: u32,
    window: chrono::Duration,
    all: bool,
) -> Vec<WorkloadRow> {
    let idle = crate::gpu_use::idle(use_, idle_below, window);
    let row = |w: &crate::gpu_use::WorkloadGpus| WorkloadRow {
        namespace: w.key.namespace.clone(),
        workload: w.key.name.clone(),
        cluster_queue: w.cluster_queue.clone(),
        gpus: w.held(),
        utilization: w.utilization(),
        idle: false,
        idle_seconds: None,
        idle_gpu_hours: None,
    };
    let mut rows: Vec<WorkloadRow> = idle
        .iter()
        .map(|i| WorkloadRow {
            idle: true,
            idle_seconds: Some(i.idle_for.num_seconds()),
            idle_gpu_hours: Some(i.idle_gpu_hours),
            ..row(&i.workload)
        })
        .collect();
    if all {
        rows.extend(
            use_.iter()
                .filter(|w| !idle.iter().any(|i| i.workload.key == w.key))
                .map(row),
        );
    }
    rows
}

fn hours_minutes(secs: i64) -> String {
    let m = secs / 60;
    if secs < 60 {
        format!("{secs}s")
    } else if m >= 60 {
        format!("{}h{:02}m", m / 60, m % 60)
    } else {
        format!("{m}m")
    }
}

fn number(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// The Workloads table (or list).
pub fn render_workloads(
    rows: &[WorkloadRow],
    idle_below: u32,
    window: chrono::Duration,
    output: OutputFormat,
) -> Result<String, CliError> {
    if output != OutputFormat::Table {
        return encode(&json!({"workloads": rows}), output);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.namespace.clone(),
                r.workload.clone(),
                r.cluster_queue.clone(),
                number(r.gpus),
                r.utilization
                    .map_or_else(|| "-".into(), |u| format!("{u:.0}%")),
                r.idle_seconds.map_or_else(|| "-".into(), hours_minutes),
                r.idle_gpu_hours
                    .map_or_else(|| "-".into(), |h| format!("{h:.1}")),
            ]
        })
        .collect();
    let idle = rows.iter().filter(|r| r.idle).count();
    let wasted: f64 = rows.iter().filter_map(|r| r.idle_gpu_hours).sum();
    Ok(format!(
        "{}\nIdle workloads (every GPU below {idle_below}% for {}): {idle}, {wasted:.1} idle GPU-hours\n",
        table(
            &[
                "NAMESPACE",
                "WORKLOAD",
                "CLUSTERQUEUE",
                "GPUS",
                "UTIL",
                "IDLE FOR",
                "IDLE GPU-H"
            ],
            &cells
        ),
        hours_minutes(window.num_seconds()),
    ))
}

/// One node's GPUs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGpus {
    /// Node name.
    pub node: String,
    /// GPU model (nvidia.com/gpu.product label).
    pub product: String,
    /// Allocatable GPUs.
    pub allocatable: i64,
    /// GPUs held by running or pending-bound pods on the node.
    pub in_use: i64,
    /// Unhealthy GPUs its node agent reports (XID, ECC); `None` without a NodeGpuTopology.
    pub unhealthy: Option<usize>,
    /// NVLink islands its node agent reports, e.g. "4+4" or "8 nvswitch"; empty without a report.
    pub nvlink: String,
    /// Mean GPU utilisation (percent) its node agent last read; `None` without one.
    pub utilization: Option<f64>,
}

/// One ClusterQueue's GPUs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueGpus {
    /// ClusterQueue name.
    pub cluster_queue: String,
    /// GPUs its admitted workloads use (status.flavorsUsage).
    pub in_use: i64,
    /// Of which borrowed from the cohort.
    pub borrowed: i64,
    /// Nominal GPU quota over its flavors.
    pub nominal: i64,
}

fn gpu(q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> i64 {
    q.and_then(|q| sluice_sdk::quantity::resource_value(GPU_RESOURCE, q).ok())
        .unwrap_or(0)
}

/// GPUs a pod holds: per container the limit (or request), with init containers' peak (Kubernetes'
/// effective request).
fn pod_gpus(pod: &Pod) -> i64 {
    let Some(spec) = &pod.spec else { return 0 };
    let of = |c: &k8s_openapi::api::core::v1::Container| {
        let r = c.resources.as_ref();
        let limit = r
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get(GPU_RESOURCE));
        let request = r
            .and_then(|r| r.requests.as_ref())
            .and_then(|l| l.get(GPU_RESOURCE));
        gpu(limit.or(request))
    };
    let app: i64 = spec.containers.iter().map(of).sum();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(of)
        .max()
        .unwrap_or(0);
    app.max(init)
}

/// Per-node GPU use from Nodes and the Pods bound to them (finished pods hold nothing).
pub fn node_gpus(
    nodes: &[Node],
    pods: &[Pod],
    reports: &BTreeMap<String, Reported>,
    usage: &BTreeMap<String, NodeGpuTopologyStatus>,
) -> Vec<NodeGpus> {
    let mut used: BTreeMap<&str, i64> = BTreeMap::new();
    for p in pods {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *used.entry(node).or_default() += pod_gpus(p);
        }
    }
    nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            let allocatable = gpu(n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .and_then(|a| a.get(GPU_RESOURCE)));
            let in_use = used.get(name).copied().unwrap_or(0);
            let report = reports.get(name);
            (allocatable > 0 || in_use > 0).then(|| NodeGpus {
                node: name.to_string(),
                product: n
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("nvidia.com/gpu.product"))
                    .cloned()
                    .or_else(|| report.and_then(|r| r.gpus.first()).map(|g| g.model.clone()))
                    .unwrap_or_else(|| "-".into()),
                allocatable,
                in_use,
                unhealthy: report.map(|r| r.gpus.iter().filter(|g| !g.health.healthy).count()),
                nvlink: report.map(islands).unwrap_or_default(),
                utilization: usage.get(name).and_then(|s| {
                    let u: Vec<f64> = s
                        .gpus
                        .iter()
                        .filter_map(|g| g.utilization.map(f64::from))
                        .collect();
                    (!u.is_empty()).then(|| u.iter().sum::<f64>() / u.len() as f64)
                }),
            })
        })
        .collect()
}

/// Per-ClusterQueue GPU use from Kueue's status.
pub fn queue_gpus(queues: &[api::ClusterQueue]) -> Vec<QueueGpus> {
    queues
        .iter()
        .map(|cq| {
            let usage = cq.status.iter().flat_map(|s| s.flavors_usage.iter());
            let gpu_usage: Vec<_> = usage
                .flat_map(|f| f.resources.iter())
                .filter(|r| r.name == GPU_RESOURCE)
                .collect();
            QueueGpus {
                cluster_queue: cq.metadata.name.clone().unwrap_or_default(),
                in_use: gpu_usage.iter().map(|r| gpu(Some(&r.total))).sum(),
                borrowed: gpu_usage.iter().map(|r| gpu(Some(&r.borrowed))).sum(),
                nominal: cq
                    .spec
                    .resource_groups
                    .iter()
                    .flat_map(|g| g.flavors.iter())
                    .flat_map(|f| f.resources.iter())
                    .filter(|r| r.name == GPU_RESOURCE)
                    .map(|r| gpu(Some(&r.nominal_quota)))
                    .sum(),
            }
        })
        .collect()
}

/// Island sizes joined by "+", with "nvswitch" when a switch joins them ("-" when no GPU shares NVLink).
fn islands(r: &Reported) -> String {
    if r.nvlink_islands.is_empty() {
        return "-".into();
    }
    let sizes: Vec<String> = r
        .nvlink_islands
        .iter()
        .map(|i| i.gpus.len().to_string())
        .collect();
    let switched = r.nvlink_islands.iter().any(|i| i.nvswitch);
    format!(
        "{}{}",
        sizes.join("+"),
        if switched { " nvswitch" } else { "" }
    )
}

fn percent(part: i64, whole: i64) -> String {
    if whole > 0 {
        format!("{:.0}%", 100.0 * part as f64 / whole as f64)
    } else {
        "-".into()
    }
}

/// Both tables, or both lists as one object.
pub fn render(
    nodes: &[NodeGpus],
    queues: &[QueueGpus],
    output: OutputFormat,
) -> Result<String, CliError> {
    if output != OutputFormat::Table {
        return encode(&json!({"nodes": nodes, "clusterQueues": queues}), output);
    }
    let node_rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            vec![
                n.node.clone(),
                n.product.clone(),
                n.allocatable.to_string(),
                n.in_use.to_string(),
                percent(n.in_use, n.allocatable),
                n.unhealthy.map_or_else(|| "-".into(), |u| u.to_string()),
                if n.nvlink.is_empty() {
                    "-".into()
                } else {
                    n.nvlink.clone()
                },
                n.utilization
                    .map_or_else(|| "-".into(), |u| format!("{u:.0}%")),
            ]
        })
        .collect();
    let queue_rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| {
            vec![
                q.cluster_queue.clone(),
                q.in_use.to_string(),
                q.borrowed.to_string(),
                q.nominal.to_string(),
                percent(q.in_use, q.nominal),
            ]
        })
        .collect();
    let total_alloc: i64 = nodes.iter().map(|n| n.allocatable).sum();
    let total_used: i64 = nodes.iter().map(|n| n.in_use).sum();
    Ok(format!(
        "{}\nGPU nodes: {}, GPUs {}/{} in use ({})\n\n{}",
        table(
            &[
                "NODE",
                "PRODUCT",
                "GPUS",
                "IN USE",
                "USE",
                "UNHEALTHY",
                "NVLINK",
                "GPU UTIL"
            ],
            &node_rows
        ),
        nodes.len(),
        total_used,
        total_alloc,
        percent(total_used, total_alloc),
        table(
            &[
                "CLUSTERQUEUE",
                "GPUS IN USE",
                "BORROWED",
                "NOMINAL",
                "OF NOMINAL"
            ],
            &queue_rows
        ),
    ))
}

/// Runs `sluice top ...` with `client`.
pub async fn execute(client: &kube::Client, command: TopCommand) -> Result<String, CliError> {
    match command {
        TopCommand::Gpus { out } => gpus(client, out).await,
        TopCommand::Workloads {
            idle_below,
            window,
            all,
            out,
        } => workloads(client, idle_below, window, all, out).await,
    }
}

async fn workloads(
    client: &kube::Client,
    idle_below: u32,
    window: chrono::Duration,
    all: bool,
    out: Output,
) -> Result<String, CliError> {
    let topologies = match Api::<NodeGpuTopology>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => {
            return Err(CliError::Missing(
                "no NodeGpuTopology CRD: GPU use comes from Sluice's node agents (install the chart with nodeAgent.enabled)"
                    .into(),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let pods: std::collections::HashMap<(String, String), Vec<String>> =
        Api::<Pod>::all(client.clone())
            .list(&ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed"))
            .await?
            .items
            .iter()
            .filter(|p| crate::gpu_use::requests_gpus(p))
            .map(|p| {
                (
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    ),
                    crate::gpu_use::pod_uids(p),
                )
            })
            .collect();
    let workloads = Api::<api::Workload>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let admitted = crate::gpu_use::admitted_by_owner(&workloads);
    let joined = crate::gpu_use::join(&topologies, &pods, &admitted);
    render_workloads(
        &workload_rows(&joined, idle_below, window, all),
        idle_below,
        window,
        out.output,
    )
}

async fn gpus(client: &kube::Client, out: Output) -> Result<String, CliError> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed"))
        .await?
        .items;
    let queues = Api::<api::ClusterQueue>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    // Without the node agent (or its CRD) the health and NVLink columns stay empty.
    let topologies = match Api::<NodeGpuTopology>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let usage = topologies
        .iter()
        .filter_map(|t| Some((t.spec.node_name.clone(), t.status.clone()?)))
        .collect();
    let reports = topologies
        .into_iter()
        .map(|t| (t.spec.node_name, t.spec.gpus))
        .collect();
    render(
        &node_gpus(&nodes, &pods, &reports, &usage),
        &queue_gpus(&queues),
        out.output,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::cli::test_support::{cluster_queues, mock, run_with};

    fn node(name: &str, gpus: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
               "status": {"allocatable": {"cpu": "128", "nvidia.com/gpu": gpus}}})
    }

    fn pod(name: &str, node: &str, gpus: &str, phase: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"},
               "spec": {"nodeName": node, "containers": [
                   {"name": "c", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": gpus}}},
                   {"name": "sidecar", "image": "logs"}]},
               "status": {"phase": phase}})
    }

    /// A NodeGpuTopology for `node`: 8 GPUs in two NVLink islands of four, GPU 5 unhealthy (XID 79).
    fn report(node: &str) -> Value {
        let gpus: Vec<Value> = (0..8)
            .map(|i| {
                json!({"index": i, "uuid": format!("GPU-{i}"), "model": "NVIDIA H100 80GB HBM3",
                            "memoryMib": 81559, "pciBusId": format!("0000:{i:02x}:00.0"),
                            "health": if i == 5 { json!({"healthy": false, "xidErrors": [79]}) }
                                      else { json!({"healthy": true}) }})
            })
            .collect();
        // The agent read GPUs 0-3 at 90% and 4-7 at 10%: 50% on average.
        let usage: Vec<Value> = (0..8)
            .map(|i| json!({"index": i, "uuid": format!("GPU-{i}"), "utilization": if i < 4 { 90 } else { 10 }}))
            .collect();
        json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "NodeGpuTopology", "metadata": {"name": node},
               "spec": {"nodeName": node, "gpus": gpus,
                        "nvlinkIslands": [{"gpus": [0, 1, 2, 3]}, {"gpus": [4, 5, 6, 7]}]},
               "status": {"observedAt": "2026-12-04T12:00:00Z", "gpus": usage}})
    }

    #[test]
    fn top_gpus_per_node_and_queue() -> Result<(), CliError> {
        let m = mock(vec![
            (
                "GET",
                "/api/v1/nodes".into(),
                json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                       "items": [node("gpu-0", "8"), node("gpu-1", "8"), node("cpu-0", "0")]}),
            ),
            (
                "GET",
                "/api/v1/pods".into(),
                json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                       "items": [pod("a", "gpu-0", "4", "Running"), pod("b", "gpu-0", "2", "Running"),
                                 pod("c", "gpu-1", "8", "Succeeded")]}),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/clusterqueues".into(),
                cluster_queues(),
            ),
            (
                "GET",
                "/apis/sluice.dev/v1alpha1/nodegputopologies".into(),
                json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "NodeGpuTopologyList", "metadata": {},
                       "items": [report("gpu-0")]}),
            ),
        ]);
        let t = run_with(&m, &["top", "gpus"])?;
        let cells = |first: &str| -> Vec<String> {
            t.lines()
                .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
                .find(|c| c.first().map(String::as_str) == Some(first))
                .unwrap_or_default()
        };
        // gpu-0's agent reports one unhealthy GPU and two NVLink islands of four.
        assert_eq!(
            cells("gpu-0"),
            [
                "gpu-0",
                "NVIDIA-H100-80GB-HBM3",
                "8",
                "6",
                "75%",
                "1",
                "4+4",
                "50%"
            ]
        );
        // The finished pod holds nothing; gpu-1 has no agent report; the CPU node is not listed.
        assert_eq!(
            cells("gpu-1"),
            [
                "gpu-1",
                "NVIDIA-H100-80GB-HBM3",
                "8",
                "0",
                "0%",
                "-",
                "-",
                "-"
            ]
        );
        assert!(cells("cpu-0").is_empty());
        assert!(t.contains("GPU nodes: 2, GPUs 6/16 in use (38%)"), "{t}");
        assert_eq!(cells("team-a"), ["team-a", "20", "4", "16", "125%"]);
        assert_eq!(cells("team-b"), ["team-b", "0", "0", "0", "-"]);
        // The pod list asks the API server to leave out finished pods.
        let pods = m.calls().into_iter().find(|c| c.path == "/api/v1/pods");
        assert!(pods.is_some());

        let v: Value = serde_json::from_str(&run_with(&m, &["top", "gpus", "-o", "json"])?)?;
        assert_eq!(
            v["nodes"][0],
            json!({"node": "gpu-0", "product": "NVIDIA-H100-80GB-HBM3", "allocatable": 8, "inUse": 6,
                   "unhealthy": 1, "nvlink": "4+4", "utilization": 50.0})
        );
        assert_eq!(v["nodes"][1]["unhealthy"], Value::Null);
        assert_eq!(v["clusterQueues"][0]["borrowed"], 4);
        Ok(())
    }

    #[test]
    fn top_gpus_without_the_node_agent_crd_leaves_its_columns_empty() -> Result<(), CliError> {
        // No route for nodegputopologies: the mock answers 404, as a cluster without the CRD does.
        let m = mock(vec![
            (
                "GET",
                "/api/v1/nodes".into(),
                json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [node("gpu-0", "8")]}),
            ),
            (
                "GET",
                "/api/v1/pods".into(),
                json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/clusterqueues".into(),
                cluster_queues(),
            ),
        ]);
        let t = run_with(&m, &["top", "gpus"])?;
        let row: Vec<&str> = t
            .lines()
            .find(|l| l.starts_with("gpu-0"))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert_eq!(
            row,
            [
                "gpu-0",
                "NVIDIA-H100-80GB-HBM3",
                "8",
                "0",
                "0%",
                "-",
                "-",
                "-"
            ]
        );
        Ok(())
    }

    #[test]
    fn init_containers_count_at_their_peak() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n", "initContainers": [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": "4"}}}],
                     "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}))
        .unwrap_or_default();
        assert_eq!(pod_gpus(&p), 4);
    }

    fn admitted_workload(name: &str, owner_uid: &str) -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
               "metadata": {"name": name, "namespace": "team-a",
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": owner_uid}]},
               "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
               "status": {"admission": {"clusterQueue": "team-a", "podSetAssignments": []},
                          "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                          "lastTransitionTime": "2026-12-04T08:00:00Z"}]}})
    }

    fn gpu_pod(name: &str, owner_uid: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "team-a", "uid": format!("pod-{name}"),
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": owner_uid}]},
               "spec": {"nodeName": "gpu-0", "containers": [
                   {"name": "c", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
               "status": {"phase": "Running"}})
    }

    /// gpu-0's agent: GPU 0 (pod `stuck-0`) at 80% until 10:00 and 1% since, GPU 1 (pod `train-0`) busy.
    fn report_with_use() -> Value {
        json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "NodeGpuTopology", "metadata": {"name": "gpu-0"},
               "spec": {"nodeName": "gpu-0", "gpus": []},
               "status": {"observedAt": "2026-12-04T12:00:00Z", "gpus": [
                   {"index": 0, "uuid": "GPU-0", "utilization": 1, "sampledSince": "2026-12-04T08:00:00Z",
                    "peaks": [{"since": "2026-12-04T10:00:00Z", "peak": 80}, {"since": "2026-12-04T12:00:00Z", "peak": 1}],
                    "holders": [{"namespace": "team-a", "pod": "stuck-0", "container": "c"}]},
                   {"index": 1, "uuid": "GPU-1", "utilization": 95, "sampledSince": "2026-12-04T08:00:00Z",
                    "peaks": [{"since": "2026-12-04T12:00:00Z", "peak": 95}],
                    "holders": [{"namespace": "team-a", "pod": "train-0", "container": "c"}]}]}})
    }

    fn use_routes() -> Vec<(&'static str, String, Value)> {
        vec![
            (
                "GET",
                "/apis/sluice.dev/v1alpha1/nodegputopologies".into(),
                json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "NodeGpuTopologyList", "metadata": {},
                       "items": [report_with_use()]}),
            ),
            (
                "GET",
                "/api/v1/pods".into(),
                json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                       "items": [gpu_pod("stuck-0", "job-stuck"), gpu_pod("train-0", "job-train"),
                                 pod("cpu-only", "gpu-0", "0", "Running")]}),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/workloads".into(),
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadList", "metadata": {},
                       "items": [admitted_workload("stuck", "job-stuck"), admitted_workload("train", "job-train")]}),
            ),
        ]
    }

    #[test]
    fn top_workloads_lists_the_idle_ones_by_idle_gpu_hours() -> Result<(), CliError> {
        let m = mock(use_routes());
        let t = run_with(&m, &["top", "workloads"])?;
        let rows: Vec<Vec<&str>> = t
            .lines()
            .filter(|l| l.starts_with("team-a"))
            .map(|l| l.split_whitespace().collect())
            .collect();
        // Below 5% since its last reading at 80% (10:00), to the agent's last reading at 12:00.
        assert_eq!(
            rows,
            vec![vec!["team-a", "stuck", "team-a", "1", "1%", "2h00m", "2.0"]]
        );
        assert!(
            t.contains("Idle workloads (every GPU below 5% for 30m): 1, 2.0 idle GPU-hours"),
            "{t}"
        );
        // A window longer than the idle spell: nothing is idle.
        let t = run_with(&m, &["top", "workloads", "--for", "3h"])?;
        assert!(!t.contains("stuck"), "{t}");
        // Everything holding GPUs with --all; the busy one is not idle.
        let v: Value =
            serde_json::from_str(&run_with(&m, &["top", "workloads", "--all", "-o", "json"])?)?;
        assert_eq!(v["workloads"][0]["workload"], "stuck");
        assert_eq!(v["workloads"][0]["idle"], true);
        assert_eq!(v["workloads"][1]["workload"], "train");
        assert_eq!(v["workloads"][1]["idle"], false);
        assert_eq!(v["workloads"][1]["utilization"], 95.0);
        Ok(())
    }

    #[test]
    fn top_workloads_rejects_a_threshold_out_of_range() {
        use clap::Parser;
        let e = crate::cli::test_support::Args::try_parse_from([
            "sluice",
            "top",
            "workloads",
            "--idle-below",
            "0",
        ])
        .err()
        .expect("0 is out of range")
        .to_string();
        assert!(e.contains("--idle-below"), "{e}");
        let e = crate::cli::test_support::Args::try_parse_from([
            "sluice",
            "top",
            "workloads",
            "--for",
            "0s",
        ])
        .err()
        .expect("a zero window")
        .to_string();
        assert!(e.contains("--for"), "{e}");
    }
}
