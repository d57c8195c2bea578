//! The Kubeflow Trainer TrainJob integration against the fake API server: a TrainJob waits for its runtime, is
//! admitted as its runtime's pod sets and started in one write into Kueue's runtime patch, and a preemption stops it
//! in Kueue's two steps (suspended at once; its admission cleared, and the preemptor admitted, only once none of its
//! Jobs is active). The JobSet Trainer makes for it gets no Workload of its own.

use crate::support::*;
use serde_json::Value;
use sluice_operator::testing::FakeApi;
use sluice_sdk::jobset::JobSet;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::trainer::{ClusterTrainingRuntime, TrainJob};

const RUNTIME: &str = r#"
metadata: {name: torch}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: node, image: torch}]}}}
"#;

/// A queued, suspended TrainJob with Kueue's runtime patch (as the webhook leaves it): 2 nodes of 4 GPUs.
fn trainjob(name: &str, priority_class: Option<&str>) -> TrainJob {
    let pc = priority_class
        .map(|p| format!("    kueue.x-k8s.io/priority-class: {p}\n"))
        .unwrap_or_default();
    yaml(&format!(
        r#"
metadata:
  name: {name}
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: lq
{pc}spec:
  suspend: true
  runtimeRef: {{name: torch, apiGroup: trainer.kubeflow.org, kind: ClusterTrainingRuntime}}
  trainer: {{numNodes: 2, resourcesPerNode: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}}}
  runtimePatches:
  - manager: kueue.x-k8s.io/manager
    trainingRuntimeSpec: {{template: {{spec: {{}}}}}}
"#
    ))
}

/// A fake API server serving Trainer's kinds, with the queues of [`seed_queues`] (8 GPUs).
fn trainer_api() -> FakeApi {
    let fake = FakeApi::new();
    fake.serve_api(
        "trainer.kubeflow.org/v1alpha1",
        &["trainjobs", "trainingruntimes", "clustertrainingruntimes"],
    );
    seed_queues(&fake, 8);
    fake
}

fn trainjob_of(fake: &FakeApi, name: &str) -> TrainJob {
    fake.get::<TrainJob>(Some("team-a"), name)
        .expect("trainjob")
}

fn workload_of(fake: &FakeApi, kind: &str, owner: &str) -> Option<api::Workload> {
    fake.list::<api::Workload>().into_iter().find(|w| {
        w.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == kind && o.name == owner)
    })
}

/// The admitted flavor Kueue's runtime patch gives the `node` replicated job, if it carries an admission.
fn patched_flavor(tj: &TrainJob) -> Option<String> {
    let spec = tj.kueue_patch()?.training_runtime_spec.as_ref()?;
    let jobs = spec.pointer("/template/spec/replicatedJobs")?.as_array()?;
    let node = jobs.iter().find(|j| j["name"] == "node")?;
    node.pointer("/template/spec/template/spec/nodeSelector/gpu.example.com~1model")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Writes `status.jobsStatus` as Trainer's controller would: `active` Jobs of `node`.
fn set_active(fake: &FakeApi, name: &str, active: i32) {
    let mut tj = trainjob_of(fake, name);
    tj.status = Some(yaml(&format!(
        "jobsStatus: [{{name: node, active: {active}, ready: {active}, succeeded: 0, failed: 0, suspended: 0}}]"
    )));
    fake.put(&tj);
}

#[tokio::test]
async fn a_trainjob_waits_for_its_runtime_starts_in_one_write_and_stops_in_two() {
    let fake = trainer_api();
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: high}\nvalue: 1000",
    ));
    fake.put(&trainjob("low", None));
    let op = start(&fake, "op", config());
    // No runtime yet: no Workload (Kueue's `runtime 'torch' not found`).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(workload_of(&fake, "TrainJob", "low").is_none());

    fake.put(&yaml::<ClusterTrainingRuntime>(RUNTIME));
    wait_for(10, "low started", || {
        !trainjob_of(&fake, "low").is_suspended()
    })
    .await;
    let wl = workload_of(&fake, "TrainJob", "low").expect("workload");
    assert!(
        wl.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("trainjob-low-")
    );
    let sets: Vec<(&str, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("node", 2)]);
    let started = trainjob_of(&fake, "low");
    assert_eq!(patched_flavor(&started).as_deref(), Some("a100"));
    let starts = writes(&fake, "PATCH", "/trainjobs/low").len()
        + writes(&fake, "PUT", "/trainjobs/low").len();
    assert_eq!(starts, 1, "started in one write");

    // Trainer runs its Jobs; the higher-priority job needs all 8 GPUs.
    set_active(&fake, "low", 2);
    fake.put(&trainjob("high", Some("high")));
    wait_for(10, "low suspended", || {
        trainjob_of(&fake, "low").is_suspended()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let low = trainjob_of(&fake, "low");
    assert_eq!(
        patched_flavor(&low).as_deref(),
        Some("a100"),
        "the admission stays while Jobs are active"
    );
    assert!(trainjob_of(&fake, "high").is_suspended());
    let w = get_workload(&fake, wl.metadata.name.as_deref().unwrap()).unwrap();
    assert_eq!(
        condition(&w, "Preempted"),
        Some(("True".into(), "InClusterQueue".into()))
    );

    // Its Jobs end: the admission is cleared and the preemptor starts.
    set_active(&fake, "low", 0);
    wait_for(10, "high started", || {
        !trainjob_of(&fake, "high").is_suspended()
    })
    .await;
    let low = trainjob_of(&fake, "low");
    assert!(low.is_suspended());
    assert_eq!(patched_flavor(&low), None);
    // Kueue's patch itself stays, emptied.
    assert!(low.kueue_patch().is_some());
    op.abort();
}

#[tokio::test]
async fn the_jobset_of_a_trainjob_gets_no_workload() {
    let fake = trainer_api();
    fake.serve_api("jobset.x-k8s.io/v1alpha2", &["jobsets"]);
    fake.put(&yaml::<ClusterTrainingRuntime>(RUNTIME));
    let parent = fake.put(&trainjob("parent", None));
    let uid = parent["metadata"]["uid"].as_str().unwrap().to_string();
    // The JobSet Trainer makes for it, carrying its labels.
    let mut js: JobSet = yaml(
        r#"
metadata: {name: parent, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  replicatedJobs:
  - name: node
    template: {spec: {template: {spec: {containers: [{name: node, image: torch}]}}}}
"#,
    );
    js.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "trainer.kubeflow.org/v1alpha1".into(),
            kind: "TrainJob".into(),
            name: "parent".into(),
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    fake.put(&js);
    let op = start(&fake, "op", config());
    wait_for(10, "the TrainJob's Workload", || {
        workload_of(&fake, "TrainJob", "parent").is_some()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(workload_of(&fake, "JobSet", "parent").is_none());
    assert!(writes(&fake, "PATCH", "/jobsets/parent").is_empty());
    op.abort();
}
