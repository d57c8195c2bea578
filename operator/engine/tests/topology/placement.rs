//! Topology-aware gang placement: Kueue's TAS semantics (required / preferred / unconstrained),
//! NVLink islands, MIG packing, all-or-nothing, node and GPU failures.

use std::collections::BTreeMap;

use crate::common::*;
use sluice_engine::*;
use sluice_sdk::policy::{
    NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError, PolicyFailure,
};
use sluice_sdk::topology::{Gpu, GpuHealth, MigInstance, NodeGpus, NvlinkIsland};

pub(crate) const GPU: &str = "nvidia.com/gpu";
const BLOCK: &str = "cloud.com/block";
pub(crate) const RACK: &str = "cloud.com/rack";
const HOST: &str = "kubernetes.io/hostname";

pub(crate) fn node(name: &str, block: &str, rack: &str, gpus: i64) -> Node {
    Node {
        name: name.into(),
        labels: [(BLOCK, block), (RACK, rack), (HOST, name), ("pool", "gpu")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        allocatable: [("cpu".to_string(), cpu(64)), (GPU.to_string(), gpus)].into(),
        ready: true,
        ..Node::default()
    }
}

pub(crate) fn gpus_report(n: u32, islands: &[&[u32]], unhealthy: &[u32]) -> NodeGpus {
    NodeGpus {
        gpus: (0..n)
            .map(|i| Gpu {
                index: i,
                uuid: format!("GPU-{i}"),
                model: "NVIDIA H100 80GB HBM3".into(),
                memory_mib: 81_559,
                health: GpuHealth {
                    healthy: !unhealthy.contains(&i),
                    ..GpuHealth::default()
                },
                ..Gpu::default()
            })
            .collect(),
        nvlink_islands: islands
            .iter()
            .map(|g| NvlinkIsland {
                gpus: g.to_vec(),
                nvswitch: false,
            })
            .collect(),
        ..NodeGpus::default()
    }
}

/// Kueue's TAS fixture shape: block b1 = racks r1 (x1, x2) and r2 (x3); block b2 = rack r3
/// (x4, x5, x6). 8 GPUs per node; one TAS flavor with ample quota.
pub(crate) fn env() -> Env {
    env_with(EngineConfig::default())
}

/// [`env`] with an engine configured by `config`.
pub(crate) fn env_with(config: EngineConfig) -> Env {
    let mut env = Env::with_config(config);
    env.apply(Event::UpsertTopology(TopologyLevels {
        name: "default".into(),
        levels: vec![BLOCK.into(), RACK.into(), HOST.into()],
    }));
    env.flavor_obj(Flavor {
        name: "tas".into(),
        node_labels: [("pool".to_string(), "gpu".to_string())].into(),
        topology_name: Some("default".into()),
        ..Flavor::default()
    });
    for (n, b, r) in [
        ("x1", "b1", "r1"),
        ("x2", "b1", "r1"),
        ("x3", "b1", "r2"),
        ("x4", "b2", "r3"),
        ("x5", "b2", "r3"),
        ("x6", "b2", "r3"),
    ] {
        env.apply(Event::UpsertNode(node(n, b, r, 8)));
    }
    env.cq_lq(
        cq("cq").group(
            &["cpu", GPU],
            vec![fq("tas", vec![rq("cpu", cpu(1000)), rq(GPU, 1000)])],
        ),
        "ns",
    );
    env
}

pub(crate) fn gang(
    name: &str,
    pods: i32,
    gpus: i64,
    mode: TopologyMode,
    level: Option<&str>,
) -> WlB {
    let mut w = wl("ns", name)
        .queue("main")
        .ps("main", pods, &[("cpu", cpu(1)), (GPU, gpus)]);
    w.0.pod_sets[0].topology = Some(PodSetTopology {
        mode,
        level: level.map(Into::into),
        ..PodSetTopology::default()
    });
    w
}

/// Pods per node of the workload's first pod set.
pub(crate) fn per_node(env: &Env, key: &str) -> BTreeMap<String, i32> {
    let p = env
        .engine
        .placement(&key_of(key))
        .unwrap_or_else(|| panic!("{key} has no placement"));
    p[0].nodes
        .iter()
        .map(|n| (n.node.clone(), n.pods))
        .collect()
}

/// One cycle, then the TAS bookkeeping invariants.
pub(crate) fn schedule(env: &mut Env) -> Vec<Decision> {
    let out = env.schedule();
    env.engine
        .check_topology_invariants()
        .expect("TAS invariants");
    out
}

#[test]
fn required_rack_takes_the_smallest_rack_that_fits() {
    let mut env = env();
    env.submit(gang("a", 2, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.assert_admitted("ns/a");
    // r1 (2 nodes) fits exactly; r3 (3 nodes) also fits but is bigger.
    assert_eq!(
        per_node(&env, "ns/a"),
        [("x1".into(), 1), ("x2".into(), 1)].into()
    );
    let p = env.engine.placement(&key_of("ns/a")).unwrap();
    assert_eq!(
        p[0].assignment.levels,
        vec![HOST.to_string()],
        "hostname level alone"
    );
    assert_eq!(p[0].assignment.domains.len(), 2);
    assert_eq!(p[0].nodes[0].gpus.len(), 0, "no GPU report: no GPU indexes");
}

#[test]
fn required_rack_that_no_rack_holds_fails_with_kueue_message() {
    let mut env = env();
    env.submit(gang("a", 4, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    let msg = env.assert_pending("ns/a", "TopologyPlacementFailed");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: topology \"default\" allows to fit only 3 out of 4 pod(s)"
    );
}

#[test]
fn preferred_rack_climbs_to_block_then_spreads_over_blocks() {
    let mut env = env();
    // 3 pods: no rack but r3 holds them.
    env.submit(gang("a", 3, 8, TopologyMode::Preferred, Some(RACK)));
    schedule(&mut env);
    assert_eq!(per_node(&env, "ns/a").len(), 3);
    assert!(
        per_node(&env, "ns/a")
            .keys()
            .all(|n| ["x4", "x5", "x6"].contains(&n.as_str()))
    );
    // 3 more pods: only b1 is left (r1 + r2): climbs to block level.
    env.submit(gang("b", 3, 8, TopologyMode::Preferred, Some(RACK)));
    schedule(&mut env);
    assert_eq!(
        per_node(&env, "ns/b"),
        [("x1".into(), 1), ("x2".into(), 1), ("x3".into(), 1)].into()
    );
}

#[test]
fn preferred_gang_larger_than_any_block_spreads_over_fewest_blocks() {
    let mut env = env();
    env.submit(gang("a", 4, 8, TopologyMode::Preferred, Some(RACK)));
    schedule(&mut env);
    let nodes = per_node(&env, "ns/a");
    assert_eq!(nodes.values().sum::<i32>(), 4);
    // Largest block first (both hold 3, so one whole block), the rest from the other.
    let in_b2 = nodes
        .keys()
        .filter(|n| ["x4", "x5", "x6"].contains(&n.as_str()))
        .count();
    assert!(in_b2 == 3 || in_b2 == 1, "{nodes:?}");
}

#[test]
fn unconstrained_and_unannotated_pod_sets_use_any_nodes_with_room() {
    let mut env = env();
    env.submit(gang("a", 5, 8, TopologyMode::Unconstrained, None));
    env.submit(
        wl("ns", "b")
            .queue("main")
            .ps("main", 8, &[("cpu", cpu(1)), (GPU, 1)]),
    );
    schedule(&mut env);
    schedule(&mut env);
    assert_eq!(per_node(&env, "ns/a").values().sum::<i32>(), 5);
    // 8 single-GPU pods fit on the one node left.
    assert_eq!(per_node(&env, "ns/b").len(), 1);
    env.submit(gang("c", 1, 1, TopologyMode::Unconstrained, None));
    schedule(&mut env);
    env.assert_pending("ns/c", "TopologyPlacementFailed");
}

#[test]
fn unannotated_pods_take_the_fullest_rack_among_equally_free_nodes() {
    // Every node is equally free, so Kueue's least-free-capacity order would take x1 (first by
    // level values) and leave no rack for the three-pod gang. Sluice breaks the tie by the
    // parent's free pods: x3 (rack r2, one free node) first, then r1 before r3.
    let mut env = env();
    env.submit(gang("single", 1, 8, TopologyMode::None, None));
    schedule(&mut env);
    assert_eq!(per_node(&env, "ns/single"), [("x3".to_string(), 1)].into());
    env.submit(gang("second", 1, 8, TopologyMode::None, None));
    schedule(&mut env);
    // Ties inside one rack keep Kueue's order.
    assert_eq!(per_node(&env, "ns/second"), [("x1".to_string(), 1)].into());
    env.submit(gang("three", 3, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    let nodes: Vec<String> = per_node(&env, "ns/three").into_keys().collect();
    assert_eq!(nodes, ["x4", "x5", "x6"]);
}

#[test]
fn quota_fit_is_not_enough_and_freed_nodes_admit_the_waiting_gang() {
    let mut env = env();
    env.submit(gang("big", 3, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.submit(gang("a", 2, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.submit(gang("b", 2, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.assert_pending("ns/b", "TopologyPlacementFailed");
    env.apply(Event::FinishWorkload(key_of("ns/a")));
    schedule(&mut env);
    assert_eq!(
        per_node(&env, "ns/b"),
        [("x1".into(), 1), ("x2".into(), 1)].into()
    );
}

#[test]
fn partial_admission_shrinks_a_gang_to_what_the_topology_holds() {
    let mut env = env();
    env.submit(gang("a", 5, 8, TopologyMode::Required, Some(BLOCK)).min(2));
    schedule(&mut env);
    let a = env.assert_admitted("ns/a");
    assert_eq!(a.pod_set_assignments[0].count, 3);
    assert_eq!(per_node(&env, "ns/a").values().sum::<i32>(), 3);
}

#[test]
fn preemption_frees_the_rack_for_a_higher_priority_gang() {
    let mut env = env();
    env.cq(cq("cq")
        .group(
            &["cpu", GPU],
            vec![fq("tas", vec![rq("cpu", cpu(1000)), rq(GPU, 48)])],
        )
        .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority));
    env.submit(gang("low", 6, 8, TopologyMode::Unconstrained, None).prio(0));
    schedule(&mut env);
    env.assert_admitted("ns/low");
    env.submit(gang("high", 2, 8, TopologyMode::Required, Some(RACK)).prio(10));
    let out = schedule(&mut env);
    assert_eq!(evictions(&out).len(), 1);
    env.complete_evictions(&out);
    schedule(&mut env);
    env.assert_admitted("ns/high");
}

#[test]
fn nvlink_required_pods_take_one_island_each() {
    let mut env = env();
    // x1: islands {0..3} {4..7} with GPU 0 and 4 unhealthy: 6 healthy GPUs, no island of 4.
    env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]], &[0, 4]),
    });
    for n in ["x2", "x3", "x4", "x5", "x6"] {
        let mut down = node(n, "b", "r", 8);
        down.ready = false;
        env.apply(Event::UpsertNode(down));
    }
    let mut w = gang("a", 1, 4, TopologyMode::Unconstrained, None);
    w.0.pod_sets[0].topology.as_mut().unwrap().nvlink = true;
    env.submit(w);
    schedule(&mut env);
    env.assert_pending("ns/a", "TopologyPlacementFailed");
    // Without the NVLink requirement the 6 healthy GPUs hold one 4-GPU pod, split over islands.
    env.submit(gang("b", 1, 4, TopologyMode::Unconstrained, None));
    schedule(&mut env);
    let p = env.engine.placement(&key_of("ns/b")).unwrap();
    let mut g = p[0].nodes[0].gpus.clone();
    g.sort_unstable();
    assert_eq!(g.len(), 4);
    assert!(
        !g.contains(&0) && !g.contains(&4),
        "unhealthy GPUs never assigned: {g:?}"
    );
}

#[test]
fn nvlink_pods_fill_the_tightest_island() {
    let mut env = env();
    env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3], &[4, 5, 6, 7]], &[]),
    });
    let mut w = gang("a", 3, 2, TopologyMode::Required, Some(HOST));
    w.0.pod_sets[0].topology.as_mut().unwrap().nvlink = true;
    env.submit(w);
    schedule(&mut env);
    let p = env.engine.placement(&key_of("ns/a")).unwrap();
    assert_eq!(
        p[0].nodes[0].node, "x1",
        "the node with a GPU report ranks first"
    );
    let gpus = &p[0].nodes[0].gpus;
    assert_eq!(gpus.len(), 6);
    for pod in gpus.chunks(2) {
        assert_eq!(
            pod[0] / 4,
            pod[1] / 4,
            "each pod inside one island: {gpus:?}"
        );
    }
    // The second pod goes to the island the first one started (tightest fit).
    assert_eq!(gpus[..4].iter().filter(|&&g| g < 4).count(), 4, "{gpus:?}");
}

#[test]
fn mig_instances_are_packed_onto_the_fewest_gpus() {
    let mut env = env();
    let mig = "nvidia.com/mig-1g.10gb";
    let mut n = node("m1", "b3", "r9", 0);
    n.allocatable.insert(mig.into(), 14);
    env.apply(Event::UpsertNode(n));
    let mut report = gpus_report(2, &[], &[]);
    for g in &mut report.gpus {
        g.mig_enabled = true;
        g.mig_instances = (0..7)
            .map(|k| MigInstance {
                profile: "1g.10gb".into(),
                uuid: format!("MIG-{}-{k}", g.index),
                memory_mib: 9_856,
            })
            .collect();
    }
    env.apply(Event::UpsertNodeGpus {
        node: "m1".into(),
        gpus: report,
    });
    env.cq(cq("cq").group(
        &["cpu", GPU, mig],
        vec![fq(
            "tas",
            vec![rq("cpu", cpu(1000)), rq(GPU, 1000), rq(mig, 100)],
        )],
    ));
    env.submit(
        wl("ns", "a")
            .queue("main")
            .ps("main", 1, &[("cpu", cpu(1)), (mig, 2)]),
    );
    schedule(&mut env);
    env.submit(
        wl("ns", "b")
            .queue("main")
            .ps("main", 1, &[("cpu", cpu(1)), (mig, 3)]),
    );
    schedule(&mut env);
    let a = env.engine.placement(&key_of("ns/a")).unwrap()[0].nodes[0]
        .mig_gpus
        .clone();
    let b = env.engine.placement(&key_of("ns/b")).unwrap()[0].nodes[0]
        .mig_gpus
        .clone();
    assert_eq!(a.len(), 2);
    assert_eq!(b.len(), 3);
    assert!(
        a.iter().chain(&b).all(|&g| g == a[0]),
        "one GPU holds all five: {a:?} {b:?}"
    );
    // Three more than the first GPU's remaining two: the other GPU.
    env.submit(
        wl("ns", "c")
            .queue("main")
            .ps("main", 1, &[("cpu", cpu(1)), (mig, 3)]),
    );
    schedule(&mut env);
    let c = env.engine.placement(&key_of("ns/c")).unwrap()[0].nodes[0]
        .mig_gpus
        .clone();
    assert!(c.iter().all(|&g| g != a[0]), "{c:?}");
}

#[test]
fn node_not_ready_evicts_with_node_failures_and_requeues() {
    let mut env = env();
    env.submit(gang("a", 2, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    assert!(per_node(&env, "ns/a").contains_key("x1"));
    let mut down = node("x1", "b1", "r1", 8);
    down.ready = false;
    let out = env.apply(Event::UpsertNode(down));
    assert_eq!(evictions(&out), vec![("ns/a".to_string(), None)]);
    let Decision::Evict {
        reason, message, ..
    } = &out[0]
    else {
        panic!("{out:?}")
    };
    assert_eq!(reason, "NodeFailures");
    assert!(message.contains("x1"), "{message}");
    env.complete_evictions(&out);
    schedule(&mut env);
    // Requeued and placed again, away from the failed node (r3 is the only rack with 2 nodes up).
    let nodes = per_node(&env, "ns/a");
    assert!(
        !nodes.contains_key("x1") && nodes.values().sum::<i32>() == 2,
        "{nodes:?}"
    );
}

#[test]
fn unhealthy_gpu_evicts_only_workloads_on_that_gpu() {
    let mut env = env();
    env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3, 4, 5, 6, 7]], &[]),
    });
    env.submit(gang("a", 1, 2, TopologyMode::Required, Some(HOST)));
    schedule(&mut env);
    env.submit(gang("b", 1, 2, TopologyMode::Required, Some(HOST)));
    schedule(&mut env);
    let ga = env.engine.placement(&key_of("ns/a")).unwrap()[0].nodes[0].clone();
    let gb = env.engine.placement(&key_of("ns/b")).unwrap()[0].nodes[0].clone();
    assert_eq!(
        (ga.node.as_str(), gb.node.as_str()),
        ("x1", "x1"),
        "packed on one node"
    );
    let bad = ga.gpus[0];
    let out = env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3, 4, 5, 6, 7]], &[bad]),
    });
    assert_eq!(evictions(&out), vec![("ns/a".to_string(), None)]);
    env.complete_evictions(&out);
    schedule(&mut env);
    let again = env.engine.placement(&key_of("ns/a")).unwrap()[0].nodes[0].clone();
    assert!(
        !(again.node == "x1" && again.gpus.contains(&bad)),
        "{again:?}"
    );
}

/// An 8-GPU report with the `degrading` GPUs unhealthy only because they are degrading.
fn degrading_report(degrading: &[u32]) -> NodeGpus {
    let mut r = gpus_report(8, &[&[0, 1, 2, 3, 4, 5, 6, 7]], &[]);
    for &d in degrading {
        let h = &mut r.gpus[d as usize].health;
        h.healthy = false;
        h.degrading = true;
        h.reasons = vec!["Degrading: thermal slowdown at 87 C for 2 reads".into()];
    }
    r
}

/// Workload `a` on two GPUs of x1 (alone there); returns the GPUs it holds.
fn one_on_x1(env: &mut Env) -> Vec<u32> {
    env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3, 4, 5, 6, 7]], &[]),
    });
    env.submit(gang("a", 1, 2, TopologyMode::Required, Some(HOST)));
    schedule(env);
    let ga = env.engine.placement(&key_of("ns/a")).unwrap()[0].nodes[0].clone();
    assert_eq!(ga.node, "x1");
    ga.gpus
}

fn graceful_evictions(ds: &[Decision]) -> Vec<(String, bool, String)> {
    ds.iter()
        .filter_map(|d| match d {
            Decision::Evict {
                workload,
                graceful,
                message,
                reason,
                ..
            } => {
                assert_eq!(reason, "NodeFailures");
                Some((workload.to_string(), *graceful, message.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_degrading_gpu_takes_no_new_work_but_keeps_what_runs_there_by_default() {
    let mut env = env();
    let held = one_on_x1(&mut env);
    let g = held[0];
    // a's GPU and a free one start degrading: a stays where it is.
    let free = (0..8).find(|i| !held.contains(i)).unwrap();
    let out = env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: degrading_report(&[g, free]),
    });
    assert!(graceful_evictions(&out).is_empty(), "{out:?}");
    env.assert_admitted("ns/a");
    // x1 has six GPUs free, one of them degrading: a gang of six needing one host goes elsewhere.
    env.submit(gang("b", 1, 6, TopologyMode::Required, Some(HOST)));
    schedule(&mut env);
    let gb = env.engine.placement(&key_of("ns/b")).unwrap()[0].nodes[0].clone();
    assert_ne!(gb.node, "x1", "{gb:?}");
    // When it then fails, what still runs on it is evicted at once, without a grace.
    let out = env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3, 4, 5, 6, 7]], &[g]),
    });
    assert_eq!(
        graceful_evictions(&out),
        vec![(
            "ns/a".to_string(),
            false,
            format!("Workload was evicted because node x1 has unhealthy GPU(s) {g}")
        )]
    );
}

#[test]
fn with_evict_on_degraded_gpus_the_workload_moves_with_its_grace_before_the_failure() {
    let mut env = env_with(EngineConfig {
        evict_on_degraded_gpus: true,
        ..EngineConfig::default()
    });
    let g = one_on_x1(&mut env)[0];
    let out = env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: degrading_report(&[g]),
    });
    assert_eq!(
        graceful_evictions(&out),
        vec![(
            "ns/a".to_string(),
            true,
            format!("Workload was evicted because node x1 has degrading GPU(s) {g}")
        )]
    );
    env.complete_evictions(&out);
    schedule(&mut env);
    let again = env.engine.placement(&key_of("ns/a")).unwrap()[0].nodes[0].clone();
    assert!(
        !(again.node == "x1" && again.gpus.contains(&g)),
        "{again:?}"
    );
    // The failure that follows finds nothing to evict on that GPU.
    let out = env.apply(Event::UpsertNodeGpus {
        node: "x1".into(),
        gpus: gpus_report(8, &[&[0, 1, 2, 3, 4, 5, 6, 7]], &[g]),
    });
    assert!(graceful_evictions(&out).is_empty(), "{out:?}");
}

#[derive(Debug)]
struct Broken;

impl PlacementPolicy for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn score(&self, _: &PodSetRequest, _: &NodeBatch) -> Result<NodeScores, PolicyError> {
        Err(PolicyError::new(
            "broken",
            PolicyFailure::Trap,
            "unreachable executed",
        ))
    }
}

#[test]
fn a_failing_policy_falls_back_to_the_builtin_and_is_counted() {
    let mut env = env();
    env.engine = std::mem::replace(&mut env.engine, Engine::new(EngineConfig::default()))
        .with_placement_policy(Box::new(Broken));
    env.submit(gang("a", 2, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.assert_admitted("ns/a");
    let (n, msg) = env.engine.placement_policy_failures();
    assert_eq!(n, 1);
    assert!(msg.is_some_and(|m| m.contains("unreachable")));
}

#[test]
fn non_tas_flavors_are_untouched() {
    let mut env = Env::new();
    env.flavor("plain");
    env.cq_lq(
        cq("cq").group(&[GPU], vec![fq("plain", vec![rq(GPU, 16)])]),
        "ns",
    );
    env.submit(wl("ns", "a").queue("main").ps("main", 2, &[(GPU, 8)]));
    schedule(&mut env);
    env.assert_admitted("ns/a");
    assert!(env.engine.placement(&key_of("ns/a")).is_none());
}
