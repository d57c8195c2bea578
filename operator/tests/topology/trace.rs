//! The production-trace-shaped case: a seeded trace of single-pod tasks on a topology-aware pool, run to a
//! fixed point. Kueue tries every head in turn, so no workload is left untried however many misfits precede it.

use sluice_operator::engine::{EngineConfig, WorkloadState};
use sluice_operator::manifest::parse_documents;
use sluice_operator::sim::Simulation;
use sluice_operator::sim::generate::{TraceArgs, generate};

fn trace(nodes: usize, tasks: usize, admitted: usize) -> Simulation {
    trace_seeded(1, nodes, tasks, admitted)
}

fn trace_seeded(seed: u64, nodes: usize, tasks: usize, admitted: usize) -> Simulation {
    trace_with(TraceArgs {
        nodes,
        tasks,
        seed,
        admitted,
        timed: false,
    })
}

fn trace_with(args: TraceArgs) -> Simulation {
    let docs = parse_documents("trace.yaml", &generate(&args)).expect("the trace parses");
    Simulation::from_documents(&docs, EngineConfig::default()).expect("the trace loads")
}

fn untried(sim: &Simulation) -> usize {
    sim.workloads
        .keys()
        .filter(|k| {
            matches!(
                sim.engine.workload_state(k),
                Some(WorkloadState::Pending { reason, .. }) if reason == "PendingEvaluation"
            )
        })
        // One set aside because a workload of its shape just failed (Kueue's SchedulingEquivalenceHashing) was
        // answered by that attempt.
        .filter(|k| !sim.engine.set_aside_for_an_equal(k))
        .count()
}

fn admitted(sim: &Simulation) -> usize {
    sim.workloads
        .keys()
        .filter(|k| {
            matches!(
                sim.engine.workload_state(k),
                Some(WorkloadState::Admitted(_))
            )
        })
        .count()
}

#[test]
fn a_fixed_point_tries_every_head_behind_a_run_of_misfits() {
    let mut sim = trace(60, 500, 0);
    sim.run(None, |_, _| {}).expect("runs");
    assert_eq!(untried(&sim), 0, "every workload was tried");
    assert!(admitted(&sim) > 0);
}

#[test]
fn every_instant_of_a_timed_run_is_a_fixed_point() {
    // Tasks arrive over a day; stopping the run at an instant leaves that instant settled as Kueue would: every
    // head tried, misfits pending with their reason, none still PendingEvaluation.
    for hours in [2, 9] {
        let mut sim = trace_with(TraceArgs {
            nodes: 2,
            tasks: 600,
            seed: 3,
            admitted: 0,
            timed: true,
        });
        sim.run(Some(hours * 3_600_000), |_, _| {}).expect("runs");
        let pending = sim
            .workloads
            .keys()
            .filter(|k| {
                matches!(
                    sim.engine.workload_state(k),
                    Some(WorkloadState::Pending { .. })
                )
            })
            .count();
        assert!(
            pending > untried(&sim),
            "at {hours}h some arrived workloads wait for room"
        );
        assert_eq!(untried(&sim), 0, "at {hours}h every arrived head was tried");
    }
}

#[test]
fn the_generator_is_deterministic() {
    let args = TraceArgs {
        nodes: 10,
        tasks: 50,
        seed: 9,
        admitted: 2,
        timed: true,
    };
    assert_eq!(generate(&args), generate(&args));
}

/// Pods and requests booked on each node by every admitted workload's recorded topology assignment, restored
/// ones included, against the node's allocatable: (node, resource, booked, allocatable) for each overbooking.
fn overbooked(sim: &Simulation) -> Vec<(String, String, i64, i64)> {
    use sluice_sdk::kueue::conversion::expand_topology_assignment;
    use sluice_sdk::quantity::resource_value;
    use std::collections::BTreeMap;
    let mut booked: BTreeMap<(String, String), i64> = BTreeMap::new();
    for sw in sim.workloads.values() {
        if !matches!(
            sim.engine
                .workload_state(&sluice_operator::engine::WorkloadKey::new(
                    sw.workload.metadata.namespace.clone().unwrap_or_default(),
                    sw.workload.metadata.name.clone().unwrap_or_default(),
                )),
            Some(WorkloadState::Admitted(_) | WorkloadState::Evicting)
        ) {
            continue;
        }
        let Some(adm) = sw
            .workload
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
        else {
            continue;
        };
        for psa in &adm.pod_set_assignments {
            let Some(ta) = &psa.topology_assignment else {
                continue;
            };
            let ps = sw
                .workload
                .spec
                .pod_sets
                .iter()
                .find(|p| p.name == psa.name)
                .expect("pod set of the assignment");
            let requests = ps
                .template
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.resources.as_ref())
                .and_then(|r| r.requests.clone())
                .unwrap_or_default();
            for d in expand_topology_assignment(ta)
                .expect("valid assignment")
                .domains
            {
                let node = d.values.last().cloned().expect("hostname level");
                for (r, q) in &requests {
                    let v = resource_value(r, q).expect("quantity");
                    *booked.entry((node.clone(), r.clone())).or_default() += v * i64::from(d.count);
                }
            }
        }
    }
    let mut over = Vec::new();
    for ((node, r), v) in booked {
        let alloc = sim.objects.nodes[&node]
            .object
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(&r))
            .map(|q| resource_value(&r, q).expect("quantity"))
            .unwrap_or(0);
        if v > alloc {
            over.push((node, r, v, alloc));
        }
    }
    over
}

#[test]
fn restored_topology_assignments_hold_their_nodes() {
    // The first 20 nodes are fully booked by workloads that arrive already admitted.
    let mut sim = trace(40, 300, 20);
    sim.run(None, |_, _| {}).expect("runs");
    assert_eq!(overbooked(&sim), Vec::new());
    assert_eq!(untried(&sim), 0);
    sim.engine
        .check_topology_invariants()
        .expect("engine bookkeeping");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]

    /// Whatever the mix and however many nodes are already booked, no node is booked beyond its allocatable.
    #[test]
    fn no_node_is_booked_beyond_its_allocatable(
        seed in 0u64..1000,
        nodes in 2usize..24,
        tasks in 0usize..160,
        admitted in 0usize..24,
    ) {
        let mut sim = trace_seeded(seed, nodes, tasks, admitted);
        sim.run(None, |_, _| {}).expect("runs");
        proptest::prop_assert_eq!(overbooked(&sim), Vec::new());
        proptest::prop_assert_eq!(untried(&sim), 0);
    }
}
