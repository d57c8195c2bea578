//! GPU observability on a real API server: the node agent with the fake NVML example and a fake kubelet
//! pod-resources socket labels its metrics with the pods and publishes their GPU use in NodeGpuTopology status;
//! the operator exports held-vs-busy GPUs per ClusterQueue; `sluice top workloads` lists the idle Workload.

use std::process::Command;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use sluice_operator::agent::podresources::{
    ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources, fake,
};
use sluice_sdk::kueue::v1beta2::Workload;

use super::kubelet::FakeNode;
use super::plane::ControlPlane;
use super::sluice::{Process, free_port, sluice};
use super::support::*;

/// The example's GPU UUIDs (operator/examples/fake-nvml/h100x8.yaml).
fn uuid(i: u32) -> String {
    format!("GPU-{i:08x}-a1b2-c3d4-e5f6-0123456789ab")
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", &format!("http://{addr}{path}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_use_per_cluster_queue_and_idle_workloads_from_the_node_agent() {
    let Some(plane) = ControlPlane::up("gpu-use") else {
        return;
    };
    let installed = install(&plane, None, vec![FakeNode::new("gpu-0", 32, 8)]).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(&lab_gpu_queues()));
    // Two 4-GPU Jobs: `train` gets the example's busy GPUs 0-3, `notebook` its idle GPUs 4-7.
    plane.kubectl(&["apply", "-f", "-"], Some(&lab_gpu_job("train", 4)));
    plane.kubectl(&["apply", "-f", "-"], Some(&lab_gpu_job("notebook", 4)));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "lab");
    let running = eventually(90, "both Jobs' pods bound to gpu-0", || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let bound: Vec<(String, String)> = list
            .items
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("gpu-0"))
            .filter_map(|p| {
                let job = p.labels().get("batch.kubernetes.io/job-name")?.clone();
                Some((job, p.name_any()))
            })
            .collect();
        (bound.len() == 2).then_some(bound)
    })
    .await;
    let pod_of = |job: &str| {
        running
            .iter()
            .find(|(j, _)| j == job)
            .map(|(_, p)| p.clone())
            .expect("pod")
    };
    let holder = |pod: String, gpus: std::ops::Range<u32>| PodResources {
        name: pod,
        namespace: "lab".into(),
        containers: vec![ContainerResources {
            name: "main".into(),
            devices: vec![ContainerDevices {
                resource_name: "nvidia.com/gpu".into(),
                device_ids: gpus.map(uuid).collect(),
            }],
        }],
    };
    // The kubelet's side: which pod holds which GPU.
    let socket = plane.file("pod-resources.sock");
    let answer = Arc::new(Mutex::new(ListPodResourcesResponse {
        pod_resources: vec![
            holder(pod_of("train"), 0..4),
            holder(pod_of("notebook"), 4..8),
        ],
    }));
    let _kubelet = fake::serve(&socket, answer).expect("pod-resources socket");

    let example = format!(
        "{}/examples/fake-nvml/h100x8.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let metrics = format!("127.0.0.1:{}", free_port());
    let args: Vec<String> = [
        "node-agent",
        "--node-name",
        "gpu-0",
        "--fake",
        &example,
        "--interval",
        "1s",
        // Status re-sent every 2 s, so its utilisation history reaches the API server while unchanged.
        "--resync",
        "2s",
        "--pod-resources-socket",
        &socket.display().to_string(),
        "--metrics-listen",
        &metrics,
    ]
    .map(String::from)
    .to_vec();
    let _agent = Process::start(&plane, "node-agent", &args, &[]);

    // The agent's metrics carry the pod holding each GPU, as dcgm-exporter's do.
    let scraped = eventually(60, "the agent's metrics with pod labels", || async {
        let text = http_get(&metrics, "/metrics")?;
        text.contains(&format!("pod=\"{}\"", pod_of("notebook")))
            .then_some(text)
    })
    .await;
    assert!(
        scraped
            .lines()
            .any(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"5\"")
                && l.contains(&format!("pod=\"{}\"", pod_of("notebook")))
                && l.contains("namespace=\"lab\"")),
        "{scraped}"
    );

    // The operator joins the agent's status with its admissions: 8 GPUs held, about 3.84 busy.
    let op = installed.operator.metrics.to_string();
    let held = "sluice_clusterqueue_gpus_held{cluster_queue=\"research\"} 8.0";
    let text = eventually(60, "held GPUs per ClusterQueue", || async {
        let text = http_get(&op, "/metrics")?;
        text.contains(held).then_some(text)
    })
    .await;
    let busy = text
        .lines()
        .find(|l| l.starts_with("sluice_clusterqueue_gpus_busy{cluster_queue=\"research\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .expect("busy GPUs");
    // GPUs 0-3 at 97, 95, 99, 93 %; 4-7 at 3, 0, 1, 0 %.
    assert!((busy - 3.88).abs() < 0.01, "{busy}\n{text}");
    let wls: Api<Workload> = Api::namespaced(client.clone(), "lab");
    let notebook_wl = workload_of(&client, "lab", "notebook").await.name_any();
    assert!(wls.get(&notebook_wl).await.is_ok());
    assert!(
        text.contains(&format!(
            "sluice_workload_gpu_utilization{{namespace=\"lab\",workload=\"{notebook_wl}\",cluster_queue=\"research\"}} 1.0"
        )),
        "{text}"
    );

    // `sluice top workloads` lists the notebook: every GPU under 5% for the last 2 seconds.
    let top = eventually(60, "the idle workload listed", || async {
        let out = sluice()
            .args(["top", "workloads", "--for", "2s"])
            .env("KUBECONFIG", plane.kubeconfig())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.contains(&notebook_wl).then_some(text)
    })
    .await;
    let train_wl = workload_of(&client, "lab", "train").await.name_any();
    assert!(!top.contains(&train_wl), "{top}");
    assert!(
        top.contains("Idle workloads (every GPU below 5% for 2s): 1"),
        "{top}"
    );
}
