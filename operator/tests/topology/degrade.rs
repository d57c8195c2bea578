//! The simulator's degrading GPUs: `sluice.dev/gpu-degrades-at` on a NodeGpuTopology degrades a GPU at a time
//! and `sluice.dev/gpu-fails-at` fails it later; with --evict-on-degraded-gpus the workloads on it move first,
//! and the report counts the work they would have lost at the failure.

use sluice_operator::engine::EngineConfig;
use sluice_operator::manifest::parse_documents;
use sluice_operator::sim::Simulation;

/// Two 8-GPU nodes in one rack; GPU 0 of n1 degrades at 1h and fails at 3h. Job `long` (8 GPUs, 10h) lands
/// on n1 first (n1 sorts first), `short` (8 GPUs, 30m) on n2.
fn cluster(annotations: &str) -> String {
    let node = |name: &str| {
        format!(
            r#"---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{rack: r1, kubernetes.io/hostname: {name}, pool: gpu}}
status:
  allocatable: {{cpu: "64", nvidia.com/gpu: "8"}}
---
apiVersion: sluice.dev/v1alpha1
kind: NodeGpuTopology
metadata:
  name: {name}
  annotations: {{{ann}}}
spec:
  nodeName: {name}
  gpus:
{gpus}
  nvlinkIslands:
  - {{gpus: [0, 1, 2, 3, 4, 5, 6, 7]}}
"#,
            ann = if name == "n1" { annotations } else { "" },
            gpus = (0..8)
                .map(|i| format!(
                    "  - {{index: {i}, uuid: GPU-{name}-{i}, model: NVIDIA H100 80GB HBM3, memoryMib: 81559, health: {{healthy: true}}}}\n"
                ))
                .collect::<String>(),
        )
    };
    let job = |name: &str, run: &str, arrive: &str| {
        format!(
            r#"---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: team
  labels: {{kueue.x-k8s.io/queue-name: lq}}
  annotations: {{sluice.dev/run-time: {run}, sluice.dev/arrival-time: {arrive}}}
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: trainer
        resources: {{requests: {{cpu: "1", nvidia.com/gpu: "8"}}}}
"#
        )
    };
    format!(
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: dc}}
spec:
  levels:
  - nodeLabel: rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: h100}}
spec:
  nodeLabels: {{pool: gpu}}
  topologyName: dc
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {{name: cpu, nominalQuota: "128"}}
      - {{name: nvidia.com/gpu, nominalQuota: "16"}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: team}}
spec: {{clusterQueue: cq}}
{}{}{}{}"#,
        node("n1"),
        node("n2"),
        job("long", "10h", "0s"),
        job("short", "30m", "1s"),
    )
}

fn run(annotations: &str, evict: bool) -> sluice_operator::sim::SimulationReport {
    let docs = parse_documents("cluster.yaml", &cluster(annotations)).expect("parses");
    let config = EngineConfig {
        evict_on_degraded_gpus: evict,
        ..EngineConfig::default()
    };
    let mut sim = Simulation::from_documents(&docs, config).expect("loads");
    sim.run(None, |_, _| {}).expect("runs")
}

const ANNOTATIONS: &str = "sluice.dev/gpu-degrades-at: 0@1h, sluice.dev/gpu-fails-at: 0@3h";

#[test]
fn moving_off_a_degrading_gpu_saves_the_work_the_failure_would_have_lost() {
    let moved = run(ANNOTATIONS, true);
    let t = moved.topology.clone().expect("topology figures");
    assert_eq!(t.gpus_degraded, 1);
    assert_eq!(t.failures_injected, 2, "the degradation and the failure");
    assert_eq!(t.moved_ahead, 1);
    assert_eq!(t.moved_ahead_of_failure, 1);
    // `long` held 8 GPUs from 0h; at the failure (3h) it would have lost 3h of 8 GPUs.
    assert!((t.gpu_hours_saved - 24.0).abs() < 0.01, "{t:?}");
    // The move is the only eviction, at 1h (it lost 1h of 8 GPUs then).
    assert_eq!(moved.evictions.len(), 1, "{:?}", moved.evictions);
    assert!((moved.evictions[0].at_seconds - 3600.0).abs() < 1.0);
    assert_eq!(moved.evictions[0].reason, "NodeFailures");

    // Without the flag, `long` stays on the degrading GPU and is evicted when it fails, losing 3h.
    let stayed = run(ANNOTATIONS, false);
    let t = stayed.topology.clone().expect("topology figures");
    assert_eq!(
        (t.gpus_degraded, t.moved_ahead, t.gpu_hours_saved),
        (1, 0, 0.0)
    );
    assert_eq!(stayed.evictions.len(), 1);
    assert!((stayed.evictions[0].at_seconds - 3.0 * 3600.0).abs() < 1.0);
    assert!((stayed.evictions[0].lost_gpu_hours - 24.0).abs() < 0.01);
    // Every workload still finishes either way.
    assert!(moved.unfinished.is_empty() && stayed.unfinished.is_empty());
}

#[test]
fn a_bad_degrades_at_annotation_names_the_object_and_field() {
    let docs = parse_documents("cluster.yaml", &cluster("sluice.dev/gpu-degrades-at: 0-1h"))
        .expect("parses");
    let err = Simulation::from_documents(&docs, EngineConfig::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("NodeGpuTopology n1"), "{err}");
    assert!(err.contains("sluice.dev/gpu-degrades-at"), "{err}");
    assert!(err.contains("GPU@TIME"), "{err}");
    let docs =
        parse_documents("cluster.yaml", &cluster("sluice.dev/gpu-fails-at: 9@1h")).expect("parses");
    let err = Simulation::from_documents(&docs, EngineConfig::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("no GPU 9"), "{err}");
}
