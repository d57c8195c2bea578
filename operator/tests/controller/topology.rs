//! Topology-aware scheduling through the operator against the fake API server: the topologyAssignment written
//! in the admission, pods (of a Job or a pod group) ungated with their domain's node selector, and placements
//! restored after a restart.

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use serde_json::json;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::conversion::expand_topology_assignment;
use sluice_sdk::kueue::v1beta2 as api;

const HOST: &str = "kubernetes.io/hostname";

/// Namespace, Topology `dc` (rack, hostname), TAS flavor `tas`, ClusterQueue `cq` (32 GPUs), LocalQueue `lq`
/// and 4-GPU nodes: n1 and n2 in rack r1, n3 to n5 in rack r2.
fn seed(fake: &FakeApi) {
    fake.put(&yaml::<Namespace>("metadata: {name: team-a}"));
    fake.put(&yaml::<api::Topology>(&format!(
        "metadata: {{name: dc}}\nspec: {{levels: [{{nodeLabel: rack}}, {{nodeLabel: {HOST}}}]}}"
    )));
    fake.put(&yaml::<api::ResourceFlavor>(
        "metadata: {name: tas}\nspec: {topologyName: dc, nodeLabels: {pool: gpu}}",
    ));
    fake.put(&yaml::<api::ClusterQueue>(
        r#"
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: tas
      resources:
      - {name: cpu, nominalQuota: "64"}
      - {name: nvidia.com/gpu, nominalQuota: "32"}
"#,
    ));
    fake.put(&yaml::<api::LocalQueue>(
        "metadata: {name: lq, namespace: team-a}\nspec: {clusterQueue: cq}",
    ));
    for (n, rack) in [
        ("n1", "r1"),
        ("n2", "r1"),
        ("n3", "r2"),
        ("n4", "r2"),
        ("n5", "r2"),
    ] {
        fake.put(&yaml::<Node>(&format!(
            r#"
metadata: {{name: {n}, labels: {{pool: gpu, rack: {rack}, {HOST}: {n}}}}}
status:
  allocatable: {{cpu: "32", nvidia.com/gpu: "4", pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"#
        )));
    }
}

/// Hostname -> pods of the first pod set's topologyAssignment in a status body.
fn hosts(admission: &serde_json::Value) -> Vec<(String, i32)> {
    let ta: api::TopologyAssignment =
        serde_json::from_value(admission["podSetAssignments"][0]["topologyAssignment"].clone())
            .expect("topologyAssignment in v1beta2 form");
    let ex = expand_topology_assignment(&ta).expect("valid slices");
    assert_eq!(ex.levels, [HOST]);
    ex.domains
        .into_iter()
        .map(|d| (d.values[0].clone(), d.count))
        .collect()
}

fn admission_bodies(fake: &FakeApi, name: &str) -> Vec<serde_json::Value> {
    writes(fake, "PATCH", &format!("/workloads/{name}/status"))
        .into_iter()
        .filter_map(|r| r.body)
        .filter(|b| b["status"]["admission"].is_object())
        .map(|b| b["status"]["admission"].clone())
        .collect()
}

#[tokio::test]
async fn job_is_admitted_with_a_topology_assignment_and_its_pods_are_ungated_by_rank() {
    let fake = FakeApi::new();
    seed(&fake);
    fake.put(&yaml::<Job>(
        r#"
metadata: {name: train, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  suspend: true
  completionMode: Indexed
  parallelism: 2
  completions: 2
  template:
    metadata: {annotations: {kueue.x-k8s.io/podset-required-topology: rack}}
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: t, resources: {requests: {cpu: "1", nvidia.com/gpu: "4"}}}
"#,
    ));
    let op = start(&fake, "op", config());
    wait_for(10, "job started", || {
        fake.get::<Job>(Some("team-a"), "train")
            .and_then(|j| j.spec)
            .is_some_and(|s| s.suspend == Some(false))
    })
    .await;
    let wl = fake.list::<api::Workload>().pop().expect("workload");
    let wl_name = wl.metadata.name.clone().unwrap_or_default();

    // One admission, with both pods in rack r1, one per 4-GPU node.
    let adm = admission_bodies(&fake, &wl_name);
    assert_eq!(adm.len(), 1);
    assert_eq!(hosts(&adm[0]), [("n1".into(), 1), ("n2".into(), 1)]);

    // The Job's pods wait at the topology gate and name their Workload.
    let job = fake.get::<Job>(Some("team-a"), "train").expect("job");
    let tpl = job.spec.expect("spec").template;
    let gates: Vec<_> = tpl
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(gates, ["kueue.x-k8s.io/topology"]);
    let ann = tpl.metadata.and_then(|m| m.annotations).unwrap_or_default();
    assert_eq!(ann.get("kueue.x-k8s.io/workload"), Some(&wl_name));

    // The Job controller creates the pods (rank 1 first); each is ungated onto its rank's node.
    for (pod, rank) in [("train-1", 1), ("train-0", 0)] {
        fake.put(&yaml::<Pod>(&format!(
            r#"
metadata:
  name: {pod}
  namespace: team-a
  labels: {{kueue.x-k8s.io/podset: main, batch.kubernetes.io/job-completion-index: "{rank}"}}
  annotations: {{kueue.x-k8s.io/workload: {wl_name}}}
spec:
  schedulingGates: [{{name: kueue.x-k8s.io/topology}}]
  containers: [{{name: main, image: t}}]
"#
        )));
    }
    wait_for(10, "pods ungated", || {
        writes(&fake, "PATCH", "/pods/train-0").len() == 1
            && writes(&fake, "PATCH", "/pods/train-1").len() == 1
    })
    .await;
    for (pod, node) in [("train-0", "n1"), ("train-1", "n2")] {
        let patch = &writes(&fake, "PATCH", &format!("/pods/{pod}"))[0];
        assert_eq!(patch.path, format!("/api/v1/namespaces/team-a/pods/{pod}"));
        assert_eq!(
            patch.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
        let body = patch.body.clone().expect("body");
        assert_eq!(
            body["spec"],
            json!({"nodeSelector": {HOST: node}, "schedulingGates": null})
        );
        assert!(body["metadata"]["resourceVersion"].is_string(), "{body}");
        let stored = fake.get::<Pod>(Some("team-a"), pod).expect("pod");
        assert!(stored.spec.and_then(|s| s.scheduling_gates).is_none());
    }
    op.abort();
}

#[tokio::test]
async fn a_pod_group_requiring_a_rack_is_placed_in_one_and_its_pods_pinned_by_index() {
    let fake = FakeApi::new();
    seed(&fake);
    // Two 4-GPU pods of group `g`, as the webhook leaves them: both gates, the pod index copied to Kueue's label.
    for (pod, index) in [("g-1", 1), ("g-0", 0)] {
        fake.put(&yaml::<Pod>(&format!(
            r#"
metadata:
  name: {pod}
  namespace: team-a
  uid: uid-{pod}
  labels:
    kueue.x-k8s.io/queue-name: lq
    kueue.x-k8s.io/managed: "true"
    kueue.x-k8s.io/pod-group-name: g
    kueue.x-k8s.io/pod-group-pod-index: "{index}"
  annotations:
    kueue.x-k8s.io/pod-group-total-count: "2"
    kueue.x-k8s.io/podset-required-topology: rack
  finalizers: [kueue.x-k8s.io/managed]
spec:
  schedulingGates: [{{name: kueue.x-k8s.io/admission}}, {{name: kueue.x-k8s.io/topology}}]
  containers:
  - {{name: main, image: t, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}}}
"#
        )));
    }
    let op = start(&fake, "op", config());
    let ungated = |pod: &str| {
        fake.get::<Pod>(Some("team-a"), pod)
            .and_then(|p| p.spec)
            .is_some_and(|s| s.scheduling_gates.is_none())
    };
    wait_for(10, "both pods ungated", || ungated("g-0") && ungated("g-1")).await;
    // The Workload asked for one rack by the pods' annotation and ranks them by Kueue's pod-group index.
    let wl = fake.list::<api::Workload>().pop().expect("workload");
    let req = wl.spec.pod_sets[0]
        .topology_request
        .clone()
        .expect("request");
    assert_eq!(req.required.as_deref(), Some("rack"));
    assert_eq!(
        req.pod_index_label.as_deref(),
        Some("kueue.x-k8s.io/pod-group-pod-index")
    );
    let adm = admission_bodies(&fake, wl.metadata.name.as_deref().unwrap_or_default());
    assert_eq!(adm.len(), 1);
    assert_eq!(hosts(&adm[0]), [("n1".into(), 1), ("n2".into(), 1)]);
    // Each pod is on its index's node of that rack.
    for (pod, node) in [("g-0", "n1"), ("g-1", "n2")] {
        let stored = fake.get::<Pod>(Some("team-a"), pod).expect("pod");
        let selector = stored
            .spec
            .and_then(|s| s.node_selector)
            .unwrap_or_default();
        assert_eq!(selector.get(HOST).map(String::as_str), Some(node), "{pod}");
        assert_eq!(
            selector.get("pool").map(String::as_str),
            Some("gpu"),
            "{pod}"
        );
    }
    op.abort();
}

#[tokio::test]
async fn placements_recorded_in_status_are_restored_so_nodes_are_not_booked_twice() {
    let fake = FakeApi::new();
    seed(&fake);
    // Admitted before this operator started: holds all of rack r1 (n1 and n2).
    fake.put(&yaml::<api::Workload>(&format!(
        r#"
metadata: {{name: old, namespace: team-a}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 2
    topologyRequest: {{required: rack}}
    template:
      spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}}}]}}
status:
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 2
      flavors: {{cpu: tas, nvidia.com/gpu: tas}}
      resourceUsage: {{cpu: "2", nvidia.com/gpu: "8"}}
      topologyAssignment:
        levels: [{HOST}]
        slices:
        - domainCount: 2
          valuesPerLevel: [{{individual: {{prefix: n, roots: ["1", "2"]}}}}]
          podCounts: {{universal: 1}}
  conditions:
  - {{type: QuotaReserved, status: "True", reason: QuotaReserved, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z"}}
  - {{type: Admitted, status: "True", reason: Admitted, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z"}}
"#
    )));
    fake.put(&yaml::<api::Workload>(
        r#"
metadata: {name: new, namespace: team-a}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    topologyRequest: {required: rack}
    template:
      spec: {containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: "4"}}}]}
"#,
    ));
    let op = start(&fake, "op", config());
    wait_for(10, "new admitted", || admitted(&fake, "new")).await;
    let adm = admission_bodies(&fake, "new");
    assert_eq!(adm.len(), 1);
    // Best fit alone picks the smaller rack r1 (n1); only the restored placement shows r1 full.
    assert_eq!(hosts(&adm[0]), [("n3".into(), 1)]);
    assert_eq!(
        admission_writes(&fake, "old"),
        0,
        "the old admission is kept"
    );
    op.abort();
}

/// The node agent's report of a 4-GPU node, GPU `degrading` (if any) degrading.
fn gpu_report(
    node: &str,
    degrading: Option<u32>,
) -> sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology {
    let gpus: Vec<serde_json::Value> = (0..4)
        .map(|i| {
            let health = if Some(i) == degrading {
                json!({"healthy": false, "degrading": true,
                       "reasons": ["Degrading: thermal slowdown at 88 C for 2 reads (clocks-event reasons 0x60)"]})
            } else {
                json!({"healthy": true})
            };
            json!({"index": i, "uuid": format!("GPU-{node}-{i}"), "model": "NVIDIA H100", "memoryMib": 81559,
                   "health": health})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "NodeGpuTopology", "metadata": {"name": node},
        "spec": {"nodeName": node, "gpus": gpus, "nvlinkIslands": [{"gpus": [0, 1, 2, 3]}]}
    }))
    .expect("report")
}

/// A running 4-GPU Job opted in to a checkpoint grace, on a node whose agent then reports a GPU degrading.
/// Returns its Workload's name.
async fn degrade_under_running_job(fake: &FakeApi, evict: bool) -> String {
    seed(fake);
    for n in ["n1", "n2", "n3", "n4", "n5"] {
        fake.put(&gpu_report(n, None));
    }
    fake.put(&yaml::<Job>(
        r#"
metadata:
  name: train
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: lq}
  annotations: {sluice.dev/checkpoint-grace: 1m}
spec:
  suspend: true
  parallelism: 1
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: t, resources: {requests: {cpu: "1", nvidia.com/gpu: "4"}}}
"#,
    ));
    let mut cfg = config();
    cfg.engine.evict_on_degraded_gpus = evict;
    let _op = start(fake, "op", cfg);
    wait_for(10, "job started", || {
        fake.get::<Job>(Some("team-a"), "train")
            .and_then(|j| j.spec)
            .is_some_and(|s| s.suspend == Some(false))
    })
    .await;
    let wl_name = fake
        .list::<api::Workload>()
        .pop()
        .expect("workload")
        .metadata
        .name
        .unwrap_or_default();
    let node = hosts(&admission_bodies(fake, &wl_name)[0])[0].0.clone();
    fake.put(&gpu_report(&node, Some(2)));
    wl_name
}

#[tokio::test]
async fn a_degrading_gpu_moves_its_workload_with_the_checkpoint_grace_when_asked() {
    let fake = FakeApi::new();
    let wl = degrade_under_running_job(&fake, true).await;
    wait_for(10, "checkpoint requested", || {
        get_workload(&fake, &wl).is_some_and(|w| {
            condition(&w, "CheckpointRequested")
                .is_some_and(|c| c == ("True".into(), "NodeFailures".into()))
        })
    })
    .await;
    let w = get_workload(&fake, &wl).expect("workload");
    let c = w
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "CheckpointRequested")
        })
        .expect("condition");
    assert!(
        c.message
            .contains("has degrading GPU(s) 2; waiting up to 60s for a checkpoint before eviction"),
        "{}",
        c.message
    );
    // Still admitted while it checkpoints.
    assert!(admitted(&fake, &wl));
}

#[tokio::test]
async fn a_degrading_gpu_keeps_its_workload_by_default() {
    let fake = FakeApi::new();
    let wl = degrade_under_running_job(&fake, false).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let w = get_workload(&fake, &wl).expect("workload");
    assert!(condition(&w, "CheckpointRequested").is_none());
    assert!(condition(&w, "Evicted").is_none_or(|c| c.0 == "False"));
    assert!(admitted(&fake, &wl));
}
