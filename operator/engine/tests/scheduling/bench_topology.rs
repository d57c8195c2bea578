//! `sluice bench --topology` at a small scale: its counts pinned, so that an engine change that alters topology-aware
//! decisions (admissions, preemptions, which probes fit the full cluster) is seen, and the full cluster checked for
//! over-allocation.

use sluice_engine::bench_topology::{
    TopologyBenchError, TopologyShape, gang_events, measure_topology, measure_topology_with,
};
use sluice_engine::{Engine, Event};

/// 512 nodes (16 racks, 2 blocks of 256), 20 ClusterQueues, 1,000 gangs, 20 probes: small enough for a debug
/// build. As by default, quota for 105% of the GPUs and no cohorts: the topology binds (gangs within quota find no
/// placement) and the cluster ends full, so no probe fits.
fn small() -> TopologyShape {
    TopologyShape {
        nodes: 512,
        block_nodes: 256,
        cluster_queues: 20,
        gangs: 1_000,
        probes: 20,
        ..TopologyShape::default()
    }
}

/// GPUs the fill's gangs hold on nodes, read from their placements (not from the bench's own count).
fn gpus_on_nodes(e: &Engine, shape: &TopologyShape) -> i64 {
    let gpus: usize = gang_events(shape)
        .filter_map(|ev| match ev {
            Event::UpsertWorkload { workload, .. } => e.placement(&workload.key()),
            _ => None,
        })
        .flatten()
        .flat_map(|p| &p.nodes)
        .map(|n| n.gpus.len())
        .sum();
    gpus as i64
}

/// Runs `shape`, checks what holds for every shape (a fixed point, no node over-allocated, the GPUs on nodes those
/// counted, the probes leaving the cluster as they found it) and returns the counts: (cycles, admissions,
/// preemptions, admitted at the end, pending for placement, GPUs allocated, probes placed).
fn counts(shape: &TopologyShape) -> (usize, usize, usize, usize, usize, i64, usize) {
    let (mut at_fixed_point, mut at_end) = (None, None);
    let r = measure_topology_with(
        shape,
        |e| {
            e.check_invariants().expect("invariants at the fixed point");
            e.check_topology_invariants()
                .expect("topology invariants at the fixed point");
            at_fixed_point = Some(gpus_on_nodes(e, shape));
        },
        |e| {
            e.check_invariants().expect("invariants after the probes");
            e.check_topology_invariants()
                .expect("topology invariants after the probes");
            at_end = Some(gpus_on_nodes(e, shape));
        },
    )
    .expect("valid shape");
    eprintln!("{r:?}");
    assert!(!r.cycle_bound_hit, "no fixed point in {} cycles", r.cycles);
    assert_eq!(r.cluster_gpus, shape.nodes as i64 * 8);
    assert_eq!(at_fixed_point, Some(r.gpus_allocated), "GPUs on nodes");
    assert_eq!(at_end, at_fixed_point, "the probes changed the cluster");
    assert!(
        r.gpus_allocated <= r.cluster_gpus,
        "{} GPUs allocated of {}",
        r.gpus_allocated,
        r.cluster_gpus
    );
    assert_eq!(r.admitted_at_end + r.pending_at_end, shape.gangs);
    assert!(r.pending_for_placement <= r.pending_at_end);
    assert_eq!(r.probes, shape.probes);
    (
        r.cycles,
        r.admissions,
        r.preemptions,
        r.admitted_at_end,
        r.pending_for_placement,
        r.gpus_allocated,
        r.probes_placed,
    )
}

/// The default mix at a small scale reaches its fixed point with the counts recorded here. A change meant to alter
/// decisions records new counts and says why.
#[test]
fn bench_topology_counts_unchanged() {
    assert_eq!(
        counts(&small()),
        // SchedulingEquivalenceHashing: 62 cycles and 101 pending for placement with the gate off.
        (49, 214, 0, 214, 68, 4_096, 0),
        "counts changed"
    );
}

/// With 4 cohorts and quota for exactly the cluster's GPUs, ClusterQueues reclaim what others borrowed and the fill
/// leaves GPUs free that some probes fit in: the paths the default shape does not take.
#[test]
fn bench_topology_counts_unchanged_with_cohorts() {
    let shape = TopologyShape {
        cohorts: 4,
        quota_percent: 100,
        ..small()
    };
    assert_eq!(
        counts(&shape),
        // SchedulingEquivalenceHashing: 321 admissions and 85 preemptions with the gate off.
        (344, 324, 88, 236, 0, 4_080, 11),
        "counts changed"
    );
}

/// A shape that cannot be built is refused with the field named, before anything runs.
#[test]
fn bench_topology_refuses_bad_shapes() {
    let cases = [
        (
            TopologyShape {
                nodes: 0,
                ..small()
            },
            "nodes",
        ),
        (
            TopologyShape {
                rack_nodes: 0,
                ..small()
            },
            "rack_nodes",
        ),
        (
            TopologyShape {
                block_nodes: 100,
                ..small()
            },
            "block_nodes",
        ),
        (
            TopologyShape {
                cluster_queues: 0,
                ..small()
            },
            "cluster_queues",
        ),
    ];
    for (shape, field) in cases {
        match measure_topology(&shape) {
            Err(TopologyBenchError::Shape { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected a shape error, got {other:?}"),
        }
    }
}
