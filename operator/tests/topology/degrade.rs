//! The simulator's degrading GPUs: `sluice.dev/gpu-degrades-at` on a NodeGpuTopology degrades a GPU at a time
//! and `sluice.dev/gpu-fails-at` fails it later; with --evict-on-degraded-gpus the workloads on it move first,
//! and the report counts the work they would have lost at the failure.

use sluice_operator::engine::EngineConfig;
use sluice_operator::manifest::parse_documents;
use sluice_operator::sim::Simulation;

/// The example `operator/examples/degrading-gpu/cluster.yaml` (two 8-GPU nodes; Job `long`, 8 GPUs for 10h,
/// on n1; `short` on n2), with n1's annotations `degrades-at 0@1h`, `fails-at 0@3h` replaced by `annotations`.
fn cluster(annotations: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/degrading-gpu/cluster.yaml");
    let text = std::fs::read_to_string(path).expect("example");
    let original =
        "    sluice.dev/gpu-degrades-at: \"0@1h\"\n    sluice.dev/gpu-fails-at: \"0@3h\"\n";
    assert!(text.contains(original), "the example's annotations moved");
    text.replace(original, &format!("    {annotations}\n"))
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

const ANNOTATIONS: &str = "sluice.dev/gpu-degrades-at: 0@1h\n    sluice.dev/gpu-fails-at: 0@3h";

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
