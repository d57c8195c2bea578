//! Criterion benchmark of topology-aware gang placement: one 64-GPU gang (8 pods x 8 GPUs) on
//! 10,000 nodes with 8 GPUs each (two NVLink islands of 4), racks of 32 nodes, blocks of 16 racks,
//! with a quarter of the nodes partly used. One iteration = queue the gang, run one scheduling
//! cycle (policy call, domain choice, GPU choice, admission), delete it again.
//!
//! Run: `CARGO_INCREMENTAL=0 cargo bench -p sluice-engine --bench placement`.

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_engine::bench_topology::node_gpus;
use sluice_engine::*;

const GPU: &str = "nvidia.com/gpu";
const NODES: usize = 10_000;
const RACK: usize = 32;
const BLOCK: usize = 16 * RACK;

fn workload(name: &str, pods: i32, gpus: i64, mode: TopologyMode, level: Option<&str>) -> Workload {
    Workload {
        namespace: "ns".into(),
        name: name.into(),
        uid: name.into(),
        queue_name: "main".into(),
        active: true,
        pod_sets: vec![PodSet {
            name: "main".into(),
            count: pods,
            requests: [("cpu".to_string(), 8_000), (GPU.to_string(), gpus)].into(),
            topology: Some(PodSetTopology {
                mode,
                level: level.map(Into::into),
                nvlink: gpus <= 4,
                ..PodSetTopology::default()
            }),
            ..PodSet::default()
        }],
        ..Workload::default()
    }
}

fn cluster() -> Engine {
    let mut e = Engine::new(EngineConfig::default());
    let apply = |e: &mut Engine, ev| {
        e.apply(ev).expect("valid setup");
    };
    apply(
        &mut e,
        Event::UpsertTopology(TopologyLevels {
            name: "dc".into(),
            levels: vec![
                "block".into(),
                "rack".into(),
                "kubernetes.io/hostname".into(),
            ],
        }),
    );
    apply(
        &mut e,
        Event::UpsertFlavor(Flavor {
            name: "h100".into(),
            topology_name: Some("dc".into()),
            ..Flavor::default()
        }),
    );
    for i in 0..NODES {
        let name = format!("node-{i:05}");
        apply(
            &mut e,
            Event::UpsertNode(Node {
                name: name.clone(),
                labels: [
                    ("block".to_string(), format!("b{}", i / BLOCK)),
                    ("rack".to_string(), format!("r{}", i / RACK)),
                    ("kubernetes.io/hostname".to_string(), name.clone()),
                ]
                .into(),
                allocatable: [("cpu".to_string(), 128_000), (GPU.to_string(), 8)].into(),
                ready: true,
                ..Node::default()
            }),
        );
        apply(
            &mut e,
            Event::UpsertNodeGpus {
                node: name,
                gpus: node_gpus(8),
            },
        );
    }
    apply(
        &mut e,
        Event::UpsertClusterQueue(ClusterQueue {
            name: "cq".into(),
            namespace_selector: Some(LabelSelector::default()),
            resource_groups: vec![ResourceGroup {
                covered_resources: vec!["cpu".into(), GPU.into()],
                flavors: vec![FlavorQuotas {
                    flavor: "h100".into(),
                    resources: vec![
                        ResourceQuota {
                            name: "cpu".into(),
                            nominal: i64::MAX / 4,
                            borrowing_limit: None,
                            lending_limit: None,
                        },
                        ResourceQuota {
                            name: GPU.into(),
                            nominal: 1 << 40,
                            borrowing_limit: None,
                            lending_limit: None,
                        },
                    ],
                }],
            }],
            ..ClusterQueue::default()
        }),
    );
    apply(
        &mut e,
        Event::UpsertLocalQueue(LocalQueue {
            namespace: "ns".into(),
            name: "main".into(),
            cluster_queue: "cq".into(),
            stop_policy: StopPolicy::None,
            fair_sharing_weight: None,
        }),
    );
    // Background: 2,500 single-pod 4-GPU jobs, one admitted per cycle, leave nodes partly used.
    for k in 0..2_500 {
        let w = workload(&format!("bg-{k}"), 1, 4, TopologyMode::Unconstrained, None);
        apply(
            &mut e,
            Event::UpsertWorkload {
                workload: w,
                admission: None,
            },
        );
        e.schedule(k);
    }
    e
}

fn place(c: &mut Criterion) {
    let mut engine = cluster();
    let mut group = c.benchmark_group("place a 64-GPU gang on 10,000 nodes x 8 GPUs");
    let cases = [
        (
            "8x8 GPUs, required rack",
            8,
            8,
            TopologyMode::Required,
            Some("rack"),
        ),
        (
            "16x4 GPUs, NVLink, preferred block",
            16,
            4,
            TopologyMode::Preferred,
            Some("block"),
        ),
    ];
    for (label, pods, gpus, mode, level) in cases {
        let mut t = 1_000_000;
        group.bench_function(label, |b| {
            b.iter(|| {
                t += 1;
                let w = workload("gang", pods, gpus, mode, level);
                let key = w.key();
                engine
                    .apply(Event::UpsertWorkload {
                        workload: w,
                        admission: None,
                    })
                    .expect("valid gang");
                let out = engine.schedule(t);
                assert!(
                    matches!(out.first(), Some(Decision::Admit { .. })),
                    "gang not admitted: {out:?}"
                );
                engine
                    .apply(Event::DeleteWorkload(key))
                    .expect("delete gang");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, place);
criterion_main!(benches);
