//! GPU use per Workload and ClusterQueue: the agents' NodeGpuTopology status joined with the pods holding
//! the GPUs and the admitted Workloads, exported as `sluice_` metrics.

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use sluice_operator::controller::Operator;
use sluice_operator::leader::Leadership;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;

/// A running pod of Job `job` holding GPUs.
fn pod(name: &str, job: &Job) -> Pod {
    yaml(&format!(
        r#"
metadata:
  name: {name}
  namespace: team-a
  labels: {{batch.kubernetes.io/job-name: {job_name}}}
  ownerReferences:
  - {{apiVersion: batch/v1, kind: Job, name: {job_name}, uid: {uid}, controller: true}}
spec:
  nodeName: gpu-node
  containers:
  - name: main
    image: trainer
    resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"#,
        job_name = job.name_any(),
        uid = job.uid().expect("uid"),
    ))
}

/// The node's agent report: GPU 0 held by `busy-0` at `busy`%, GPU 1 by `idle-0` at `idle`%.
fn topology(busy: u32, idle: u32) -> NodeGpuTopology {
    yaml(&format!(
        r#"
metadata: {{name: gpu-node}}
spec:
  nodeName: gpu-node
  gpus:
  - {{index: 0, uuid: GPU-0, model: NVIDIA A100, memoryMib: 81920, health: {{healthy: true}}}}
  - {{index: 1, uuid: GPU-1, model: NVIDIA A100, memoryMib: 81920, health: {{healthy: true}}}}
status:
  observedAt: "2026-12-04T12:00:00Z"
  gpus:
  - {{index: 0, uuid: GPU-0, utilization: {busy}, holders: [{{namespace: team-a, pod: busy-0, container: main}}]}}
  - {{index: 1, uuid: GPU-1, utilization: {idle}, holders: [{{namespace: team-a, pod: idle-0, container: main}}]}}
"#
    ))
}

fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

#[tokio::test]
async fn held_and_busy_gpus_per_cluster_queue_and_utilization_per_workload() {
    let fake = FakeApi::new();
    seed_queues(&fake, 2);
    fake.put(&job("busy", 1, 1, None));
    fake.put(&job("idle", 1, 1, None));
    let op = Operator::new(fake.client("op"), config(), Leadership::always()).without_events();
    let metrics = op.metrics.clone();
    let task = tokio::spawn(op.run());
    wait_for(10, "both admitted", || {
        fake.list::<api::Workload>()
            .iter()
            .filter(|w| {
                w.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Admitted" && c.status == "True")
                })
            })
            .count()
            == 2
    })
    .await;
    let busy: Job = fake.get(Some("team-a"), "busy").expect("job");
    let idle: Job = fake.get(Some("team-a"), "idle").expect("job");
    fake.put(&pod("busy-0", &busy));
    fake.put(&pod("idle-0", &idle));
    fake.put(&topology(90, 2));

    let held = "sluice_clusterqueue_gpus_held{cluster_queue=\"cq\"}";
    wait_for(10, "GPU use exported", || {
        line(&metrics.render(), held).is_some()
    })
    .await;
    let text = metrics.render();
    assert_eq!(line(&text, held), Some(&*format!("{held} 2.0")));
    let busy_line = "sluice_clusterqueue_gpus_busy{cluster_queue=\"cq\"}";
    assert_eq!(line(&text, busy_line), Some(&*format!("{busy_line} 0.92")));
    let wl_name = |job: &str| {
        fake.list::<api::Workload>()
            .into_iter()
            .find(|w| w.owner_references().iter().any(|o| o.name == job))
            .map(|w| w.name_any())
            .expect("workload of the job")
    };
    let util = |job: &str| {
        format!(
            "sluice_workload_gpu_utilization{{namespace=\"team-a\",workload=\"{}\",cluster_queue=\"cq\"}}",
            wl_name(job)
        )
    };
    assert_eq!(
        line(&text, &util("busy")),
        Some(&*format!("{} 90.0", util("busy")))
    );
    assert_eq!(
        line(&text, &util("idle")),
        Some(&*format!("{} 2.0", util("idle")))
    );

    // The agent reports new use: the metrics follow.
    fake.put(&topology(40, 60));
    wait_for(10, "new use exported", || {
        line(&metrics.render(), busy_line) == Some(&*format!("{busy_line} 1.0"))
    })
    .await;

    // The idle pod goes: its Workload no longer holds a GPU, and its series drops.
    let idle_series = util("idle");
    fake.remove::<Pod>(Some("team-a"), "idle-0");
    wait_for(10, "the pod's GPU released", || {
        let t = metrics.render();
        line(&t, held) == Some(&*format!("{held} 1.0")) && line(&t, &idle_series).is_none()
    })
    .await;
    task.abort();
}
