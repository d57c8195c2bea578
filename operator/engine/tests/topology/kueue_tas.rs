//! Kueue v0.19 TAS fidelity: flavor matching (`checkPodSetAndFlavorMatchForTAS`), the Mixed
//! profile's algorithms and domain ordering, and the "doesn't fit" message with node exclusions.

use std::collections::BTreeMap;

use crate::common::*;
use crate::placement::{per_node, schedule};
use sluice_engine::*;

const GPU: &str = "nvidia.com/gpu";
const BLOCK: &str = "cloud.com/block";
const RACK: &str = "cloud.com/rack";
const HOST: &str = "kubernetes.io/hostname";

fn node(name: &str, block: &str, rack: &str, gpus: i64) -> Node {
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

/// Topology block/rack/hostname, TAS flavor `tas`, non-TAS flavor `plain`, and the nodes given.
fn base(nodes: &[(&str, &str, &str, i64)]) -> Env {
    let mut env = Env::new();
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
    env.flavor("plain");
    for &(n, b, r, g) in nodes {
        env.apply(Event::UpsertNode(node(n, b, r, g)));
    }
    env
}

fn quota(flavors: &[&str]) -> CqB {
    cq("cq").group(
        &["cpu", GPU],
        flavors
            .iter()
            .map(|f| fq(f, vec![rq("cpu", cpu(1000)), rq(GPU, 1000)]))
            .collect(),
    )
}

fn six_nodes() -> Vec<(&'static str, &'static str, &'static str, i64)> {
    vec![
        ("x1", "b1", "r1", 8),
        ("x2", "b1", "r1", 8),
        ("x3", "b1", "r2", 8),
        ("x4", "b2", "r3", 8),
        ("x5", "b2", "r3", 8),
        ("x6", "b2", "r3", 8),
    ]
}

fn gang(name: &str, pods: i32, gpus: i64, mode: TopologyMode, level: Option<&str>) -> WlB {
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

fn plain(name: &str, pods: i32, gpus: i64) -> WlB {
    wl("ns", name)
        .queue("main")
        .ps("main", pods, &[("cpu", cpu(1)), (GPU, gpus)])
}

// ---- item 10: flavor matching ----

#[test]
fn a_pod_set_without_topology_skips_a_tas_flavor_in_a_mixed_cluster_queue() {
    // checkPodSetAndFlavorMatchForTAS: no request and the CQ is not TAS-only, so the TAS flavor
    // "supports only TopologyAwareScheduling".
    let mut env = base(&six_nodes());
    env.cq_lq(quota(&["tas", "plain"]), "ns");
    env.submit(plain("a", 2, 8));
    schedule(&mut env);
    env.assert_admitted_on("ns/a", GPU, "plain", 16);
    assert!(env.engine.placement(&key_of("ns/a")).is_none());
}

#[test]
fn a_pod_set_asking_for_a_topology_skips_a_non_tas_flavor() {
    let mut env = base(&six_nodes());
    env.cq_lq(quota(&["plain", "tas"]), "ns");
    env.submit(gang("a", 2, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.assert_admitted_on("ns/a", GPU, "tas", 16);
    assert_eq!(per_node(&env, "ns/a").len(), 2);
}

#[test]
fn tas_is_implied_in_a_tas_only_cluster_queue() {
    let mut env = base(&six_nodes());
    env.cq_lq(quota(&["tas"]), "ns");
    env.submit(plain("a", 1, 8));
    schedule(&mut env);
    env.assert_admitted_on("ns/a", GPU, "tas", 8);
    assert_eq!(per_node(&env, "ns/a").len(), 1);
}

#[test]
fn only_flavors_mismatching_tas_give_no_matching_flavor_with_kueue_messages() {
    let mut env = base(&six_nodes());
    env.cq_lq(quota(&["plain", "tas"]), "ns");
    env.submit(gang(
        "a",
        1,
        8,
        TopologyMode::Required,
        Some("cloud.com/zone"),
    ));
    schedule(&mut env);
    let msg = env.assert_pending("ns/a", "NoMatchingFlavor");
    assert!(
        msg.contains("Flavor \"plain\" does not support TopologyAwareScheduling"),
        "{msg}"
    );
    assert!(
        msg.contains("Flavor \"tas\" does not contain the requested level"),
        "{msg}"
    );
}

#[test]
fn a_tas_flavor_whose_topology_is_unknown_is_skipped() {
    // The flavor names a Topology that does not exist: no TAS snapshot for it in Kueue.
    let mut env = base(&six_nodes());
    env.flavor_obj(Flavor {
        name: "lost".into(),
        node_labels: [("pool".to_string(), "gpu".to_string())].into(),
        topology_name: Some("missing".into()),
        ..Flavor::default()
    });
    env.cq_lq(quota(&["lost", "tas"]), "ns");
    env.submit(gang("a", 1, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    env.assert_admitted_on("ns/a", GPU, "tas", 8);
    env.submit(gang("b", 1, 8, TopologyMode::Required, Some(RACK)));
    env.engine
        .apply(Event::DeleteTopology("default".into()))
        .expect("delete topology");
    schedule(&mut env);
    let msg = env.assert_pending("ns/b", "NoMatchingFlavor");
    assert!(
        msg.contains("Flavor \"lost\" information missing in TAS cache"),
        "{msg}"
    );
}

// ---- item 11: algorithms and ordering ----

/// Pods of 2 GPUs fit x1: 4, x2: 2, x3: 4, x4: 1, x5: 4, x6: 4.
fn uneven() -> Env {
    let mut env = base(&[
        ("x1", "b1", "r1", 8),
        ("x2", "b1", "r1", 4),
        ("x3", "b1", "r2", 8),
        ("x4", "b2", "r3", 2),
        ("x5", "b2", "r3", 8),
        ("x6", "b2", "r3", 8),
    ]);
    env.cq_lq(quota(&["tas"]), "ns");
    env
}

#[test]
fn unconstrained_pod_sets_fill_the_least_free_domains_first() {
    // Mixed profile: unconstrained -> LeastFreeCapacity at the lowest level, ascending by
    // capacity, never climbing to a rack or block.
    let mut env = uneven();
    env.submit(gang("a", 7, 2, TopologyMode::Unconstrained, None));
    schedule(&mut env);
    assert_eq!(
        per_node(&env, "ns/a"),
        [("x1".into(), 4), ("x2".into(), 2), ("x4".into(), 1)].into()
    );
}

#[test]
fn implied_tas_pod_sets_fill_the_least_free_domains_first() {
    let mut env = uneven();
    env.submit(plain("a", 7, 2));
    schedule(&mut env);
    assert_eq!(
        per_node(&env, "ns/a"),
        [("x1".into(), 4), ("x2".into(), 2), ("x4".into(), 1)].into()
    );
}

#[test]
fn preferred_pod_sets_keep_best_fit() {
    // BestFit for the rest: 7 pods prefer a rack; r3 (x4, x5, x6) holds 9, the only rack that fits.
    let mut env = uneven();
    env.submit(gang("a", 7, 2, TopologyMode::Preferred, Some(RACK)));
    schedule(&mut env);
    let nodes = per_node(&env, "ns/a");
    assert!(
        nodes
            .keys()
            .all(|n| ["x4", "x5", "x6"].contains(&n.as_str())),
        "{nodes:?}"
    );
    // Descending by capacity, best fit for the last: x5 (4), then x6 (3 of 4).
    assert_eq!(nodes, [("x5".into(), 4), ("x6".into(), 3)].into());
}

#[test]
fn equal_domains_are_chosen_by_level_values() {
    // Nodes arrive rack rb first; Kueue orders equal domains by their level values (ra < rb).
    let mut env = base(&[("n-b", "b1", "rb", 8), ("n-a", "b1", "ra", 8)]);
    env.cq_lq(quota(&["tas"]), "ns");
    env.submit(gang("a", 1, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    assert_eq!(per_node(&env, "ns/a"), [("n-a".into(), 1)].into());
    // At the hostname level too: z1 sorts before z2 whatever the arrival order.
    let mut env = base(&[("z2", "b1", "r1", 8), ("z1", "b1", "r1", 8)]);
    env.cq_lq(quota(&["tas"]), "ns");
    env.submit(gang("a", 1, 8, TopologyMode::Required, Some(HOST)));
    schedule(&mut env);
    assert_eq!(per_node(&env, "ns/a"), [("z1".into(), 1)].into());
}

// ---- item 13: message with node exclusion statistics ----

#[test]
fn doesnt_fit_message_ends_with_node_exclusion_statistics() {
    let mut nodes: Vec<Node> = six_nodes()
        .into_iter()
        .map(|(n, b, r, g)| node(n, b, r, g))
        .collect();
    for n in &mut nodes[3..5] {
        n.taints.push(Taint {
            key: "maintenance".into(),
            value: Some("true".into()),
            effect: TaintEffect::NoSchedule,
        });
    }
    nodes[5].allocatable.insert(GPU.into(), 4);
    let mut env = base(&[]);
    for n in nodes {
        env.apply(Event::UpsertNode(n));
    }
    env.cq_lq(quota(&["tas"]), "ns");
    env.submit(gang("a", 4, 8, TopologyMode::Required, Some(BLOCK)));
    schedule(&mut env);
    let msg = env.assert_pending("ns/a", "TopologyPlacementFailed");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: topology \"default\" allows to fit only 3 out of 4 pod(s). \
         Total nodes: 6; excluded: resource \"nvidia.com/gpu\": 1, taint \"maintenance=true:NoSchedule\": 2"
    );
}

// ---- item 12: slices ----

/// b1 = r1 (x1, x2, x3) + r2 (x4); b2 = r3 (x5, x6) + r4 (x7, x8); 8 GPUs each.
fn sliced() -> Env {
    let mut env = base(&[
        ("x1", "b1", "r1", 8),
        ("x2", "b1", "r1", 8),
        ("x3", "b1", "r1", 8),
        ("x4", "b1", "r2", 8),
        ("x5", "b2", "r3", 8),
        ("x6", "b2", "r3", 8),
        ("x7", "b2", "r4", 8),
        ("x8", "b2", "r4", 8),
    ]);
    env.cq_lq(quota(&["tas"]), "ns");
    env
}

fn sliced_gang(name: &str, pods: i32, mode: TopologyMode, level: Option<&str>) -> WlB {
    let mut w = gang(name, pods, 8, mode, level);
    if let Some(t) = w.0.pod_sets[0].topology.as_mut() {
        t.slice_level = Some(RACK.into());
        t.slice_size = Some(2);
    }
    w
}

#[test]
fn slices_must_each_fit_in_one_slice_level_domain() {
    // Both blocks hold 4 pods, but only b2 holds two racks of 2 (b1: 3 + 1).
    let mut env = sliced();
    env.submit(sliced_gang("a", 4, TopologyMode::Required, Some(BLOCK)));
    schedule(&mut env);
    assert_eq!(
        per_node(&env, "ns/a"),
        [
            ("x5".into(), 1),
            ("x6".into(), 1),
            ("x7".into(), 1),
            ("x8".into(), 1)
        ]
        .into()
    );
}

#[test]
fn slices_that_do_not_fit_are_counted_in_slices() {
    let mut env = sliced();
    env.submit(sliced_gang("a", 6, TopologyMode::Required, Some(BLOCK)));
    schedule(&mut env);
    let msg = env.assert_pending("ns/a", "TopologyPlacementFailed");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: topology \"default\" allows to fit only 2 out of 3 slice(s)"
    );
}

#[test]
fn a_slice_only_request_is_placed_least_free_first_from_the_top() {
    // Slice-only: unconstrained from the highest level; b1 has the fewest free slices (at the
    // lowest level alone, x5 with room for 2 would be the least free node that holds both).
    let mut env = sliced();
    env.apply(Event::UpsertNode(node("x5", "b2", "r3", 16)));
    env.submit(sliced_gang("a", 2, TopologyMode::None, None));
    schedule(&mut env);
    assert_eq!(
        per_node(&env, "ns/a"),
        [("x1".into(), 1), ("x2".into(), 1)].into()
    );
}

// ---- item 12: pod-set groups ----

fn nodes_of(env: &Env, key: &str, pod_set: &str) -> BTreeMap<String, i32> {
    let p = env
        .engine
        .placement(&key_of(key))
        .unwrap_or_else(|| panic!("{key} has no placement"));
    p.iter()
        .find(|p| p.pod_set == pod_set)
        .unwrap_or_else(|| panic!("{key} has no placement for {pod_set}"))
        .nodes
        .iter()
        .map(|n| (n.node.clone(), n.pods))
        .collect()
}

#[test]
fn a_leader_and_its_workers_are_placed_as_one_unit_in_one_domain() {
    // Kueue's findLeaderAndWorkers: the pod set with fewer pods leads. Placed apart, the workers
    // would take r1 (x1, x2, the best fit for 2) and the leader r2 (x3); as one unit only r3 holds
    // the leader and both workers, the leader on x4 (loses a worker pod) and workers on x5, x6.
    let mut env = base(&six_nodes());
    env.cq_lq(quota(&["tas"]), "ns");
    let mut w = wl("ns", "a")
        .queue("main")
        .ps("leader", 1, &[("cpu", cpu(1)), (GPU, 4)])
        .ps("workers", 2, &[("cpu", cpu(1)), (GPU, 8)]);
    for ps in &mut w.0.pod_sets {
        ps.topology = Some(PodSetTopology {
            mode: TopologyMode::Required,
            level: Some(RACK.into()),
            group: Some("g".into()),
            ..PodSetTopology::default()
        });
    }
    env.submit(w);
    schedule(&mut env);
    env.assert_admitted("ns/a");
    assert_eq!(nodes_of(&env, "ns/a", "leader"), [("x4".into(), 1)].into());
    assert_eq!(
        nodes_of(&env, "ns/a", "workers"),
        [("x5".into(), 1), ("x6".into(), 1)].into()
    );
}

#[test]
fn a_flavor_without_nodes_has_no_topology_domains() {
    // findLevelWithFitDomains: no domain at the searched level at all.
    let mut env = base(&[]);
    env.cq_lq(quota(&["tas"]), "ns");
    env.submit(gang("a", 1, 8, TopologyMode::Required, Some(RACK)));
    schedule(&mut env);
    let msg = env.assert_pending("ns/a", "TopologyPlacementFailed");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: no topology domains at level: cloud.com/rack"
    );
}

fn sliced_group(name: &str, leader_gpus: i64) -> WlB {
    let mut w = wl("ns", name)
        .queue("main")
        .ps("workers", 4, &[("cpu", cpu(1)), (GPU, 8)])
        .ps("leader", 1, &[("cpu", cpu(1)), (GPU, leader_gpus)]);
    for ps in &mut w.0.pod_sets {
        ps.topology = Some(PodSetTopology {
            mode: TopologyMode::Required,
            level: Some(BLOCK.into()),
            slice_level: Some(RACK.into()),
            slice_size: Some(2),
            group: Some("g".into()),
            ..PodSetTopology::default()
        });
    }
    w
}

#[test]
fn a_leader_that_breaks_a_slice_leaves_the_group_unplaced() {
    // With the leader (4 GPUs) on one of its nodes, no rack of two 8-GPU nodes holds a slice of
    // two workers any more: each block holds 1 of the 2 slices with the leader.
    let mut env = sliced();
    env.submit(sliced_group("a", 4));
    schedule(&mut env);
    let msg = env.assert_pending("ns/a", "TopologyPlacementFailed");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set workers: topology \"default\" allows to fit only 1 out of 2 slice(s)"
    );
}

#[test]
fn a_cpu_only_leader_joins_its_workers_slices() {
    let mut env = sliced();
    env.submit(sliced_group("a", 0));
    schedule(&mut env);
    env.assert_admitted("ns/a");
    assert_eq!(nodes_of(&env, "ns/a", "leader"), [("x5".into(), 1)].into());
    assert_eq!(
        nodes_of(&env, "ns/a", "workers"),
        [
            ("x5".into(), 1),
            ("x6".into(), 1),
            ("x7".into(), 1),
            ("x8".into(), 1)
        ]
        .into()
    );
}

/// A group of one whole-node leader and `workers` whole-node workers, all asking for one rack.
fn whole_node_group(name: &str, workers: i32) -> WlB {
    let mut w = wl("ns", name)
        .queue("main")
        .ps("leader", 1, &[("cpu", cpu(1)), (GPU, 8)])
        .ps("worker", workers, &[("cpu", cpu(1)), (GPU, 8)]);
    for ps in &mut w.0.pod_sets {
        ps.topology = Some(PodSetTopology {
            mode: TopologyMode::Required,
            level: Some(RACK.into()),
            group: Some("g".into()),
            ..PodSetTopology::default()
        });
    }
    w
}

#[test]
fn whole_node_groups_take_one_rack_each() {
    // Two racks of four 8-GPU nodes: a leader and three workers of 8 GPUs each fill one rack, and a
    // second such group the other (a LeaderWorkerSet's groups, one Workload each).
    let nodes: Vec<(&str, &str, &str, i64)> = (0..8)
        .map(|i| {
            let name: &'static str = Box::leak(format!("n{i}").into_boxed_str());
            let rack = if i < 4 { "r1" } else { "r2" };
            (name, "b1", rack, 8)
        })
        .collect();
    let mut env = base(&nodes);
    env.cq_lq(quota(&["tas"]), "ns");
    env.submit(whole_node_group("a", 3));
    schedule(&mut env);
    env.assert_admitted("ns/a");
    env.submit(whole_node_group("b", 3));
    schedule(&mut env);
    env.assert_admitted("ns/b");
    for key in ["ns/a", "ns/b"] {
        let placed = env.engine.placement(&key_of(key)).unwrap();
        assert_eq!(
            placed.len(),
            2,
            "{key}: one placement per pod set: {placed:?}"
        );
        let leader = nodes_of(&env, key, "leader");
        let workers = nodes_of(&env, key, "worker");
        assert_eq!(leader.values().sum::<i32>(), 1, "{key}: {leader:?}");
        assert_eq!(workers.values().sum::<i32>(), 3, "{key}: {workers:?}");
        let mut all: Vec<&String> = leader.keys().chain(workers.keys()).collect();
        all.sort();
        all.dedup();
        assert_eq!(
            all.len(),
            4,
            "{key}: one node per pod: {leader:?} {workers:?}"
        );
        let racks: std::collections::BTreeSet<bool> = all
            .iter()
            .map(|n| n[1..].parse::<u32>().unwrap() < 4)
            .collect();
        assert_eq!(racks.len(), 1, "{key}: one rack: {all:?}");
    }
}
