//! The node agent and the CLI against a real API server: `sluice node-agent --fake` publishes a NodeGpuTopology
//! and GFD labels on a real Node; `sluice top gpus`, `sluice list`, `sluice stop/resume` work on the same
//! cluster; the operator's visibility API lists the pending workloads.

use std::process::Command;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use sluice_sdk::kueue::v1beta2::{ClusterQueue, Workload};

use super::kubelet::FakeNode;
use super::plane::ControlPlane;
use super::sluice::Process;
use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_agent_cli_and_visibility_work_on_the_cluster() {
    let Some(plane) = ControlPlane::up("cli") else {
        return;
    };
    let installed = install(&plane, None, vec![FakeNode::new("gpu-0", 32, 8)]).await;
    let client = installed.client.clone();

    // The node agent publishes the fake HGX node's topology and GFD labels on the real Node.
    let fixture = format!(
        "{}/tests/fixtures/agent-hgx.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let args: Vec<String> = [
        "node-agent",
        "--node-name",
        "gpu-0",
        "--fake",
        &fixture,
        "--interval",
        "1s",
    ]
    .map(String::from)
    .to_vec();
    let _agent = Process::start(&plane, "node-agent", &args, &[]);
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(60, "GFD labels on gpu-0", || async {
        let labels = nodes.get("gpu-0").await.ok()?.metadata.labels?;
        (labels.get("nvidia.com/gpu.count").map(String::as_str) == Some("8")
            && labels
                .get("nvidia.com/gpu.product")
                .is_some_and(|p| p.contains("H100")))
        .then_some(())
    })
    .await;
    let topo = plane.kubectl(&["get", "nodegputopologies", "gpu-0", "-o", "json"], None);
    let topo: serde_json::Value = serde_json::from_str(&topo).expect("json");
    assert_eq!(
        topo["spec"]["gpus"].as_array().map(Vec::len),
        Some(8),
        "{topo}"
    );
    let top = sluice_on(&plane, &["top", "gpus"]);
    assert!(top.contains("gpu-0"), "{top}");

    // Two 8-GPU Jobs on 8 GPUs of quota: one admitted, one pending.
    plane.kubectl(&["apply", "-f", "-"], Some(&lab_gpu_queues()));
    plane.kubectl(&["apply", "-f", "-"], Some(&lab_gpu_job("first", 8)));
    let first = workload_of(&client, "lab", "first").await;
    let first_name = first.metadata.name.clone().expect("name");
    let wls: Api<Workload> = Api::namespaced(client.clone(), "lab");
    eventually(60, "first admitted", || async {
        has_condition(&wls.get(&first_name).await.ok()?, "Admitted").then_some(())
    })
    .await;
    plane.kubectl(&["apply", "-f", "-"], Some(&lab_gpu_job("second", 8)));
    let second = workload_of(&client, "lab", "second").await;
    let second_name = second.metadata.name.clone().expect("name");

    let list = sluice_on(&plane, &["list", "workloads", "-n", "lab"]);
    assert!(
        list.contains(&first_name) && list.contains(&second_name),
        "{list}"
    );
    let cqs = sluice_on(&plane, &["list", "clusterqueues"]);
    assert!(cqs.contains("research"), "{cqs}");

    // The visibility API: the second workload is pending, first in its ClusterQueue and LocalQueue.
    let url = format!(
        "http://{}/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/research/pendingworkloads",
        installed.operator.visibility
    );
    let pending = eventually(
        30,
        "the visibility API to list the pending workload",
        || async {
            let out = Command::new("curl").args(["-sf", &url]).output().ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let items = v["items"].as_array()?.clone();
            (items.len() == 1).then_some(items)
        },
    )
    .await;
    assert_eq!(pending[0]["metadata"]["name"], second_name.as_str());
    assert_eq!(pending[0]["localQueueName"], "main");
    assert_eq!(pending[0]["positionInClusterQueue"], 0);

    // `sluice stop clusterqueue` drains it (HoldAndDrain): the admitted workload is evicted; resume readmits.
    sluice_on(&plane, &["stop", "clusterqueue", "research"]);
    let cqs_api: Api<ClusterQueue> = Api::all(client.clone());
    let cq = cqs_api.get("research").await.expect("cq");
    assert_eq!(
        serde_json::to_value(cq.spec.stop_policy).expect("json"),
        serde_json::json!("HoldAndDrain")
    );
    eventually(60, "first evicted with ClusterQueueStopped", || async {
        let w = wls.get(&first_name).await.ok()?;
        condition(&w, "Evicted")
            .is_some_and(|c| c.status == "True" && c.reason == "ClusterQueueStopped")
            .then_some(())
    })
    .await;
    sluice_on(&plane, &["resume", "clusterqueue", "research"]);
    eventually(60, "one workload admitted again after resume", || async {
        let admitted = workloads(&client, "lab")
            .await
            .iter()
            .filter(|w| has_condition(w, "Admitted"))
            .count();
        (admitted == 1).then_some(())
    })
    .await;
}
