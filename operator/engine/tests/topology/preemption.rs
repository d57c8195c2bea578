//! Topology-aware preemption: a gang that fits its quota but finds no domain with room preempts inside one
//! domain, losing the least work, then with the fewest victims, and never evicts a workload whose removal does not
//! help it fit.

use std::collections::BTreeSet;

use crate::common::*;
use crate::placement::{GPU, RACK, env, gang, per_node, schedule};
use sluice_engine::*;

/// Racks of the fixture: r1 = x1, x2; r2 = x3; r3 = x4, x5, x6 (8 GPUs per node).
fn rack_of(node: &str) -> &'static str {
    match node {
        "x1" | "x2" => "r1",
        "x3" => "r2",
        _ => "r3",
    }
}

/// The fixture with preemption within the ClusterQueue, every GPU held by priority-0 work: one 3-pod gang
/// filling rack r3, one pod filling r2 (x3), and eight 2-GPU pods filling rack r1, admitted last (so Kueue's
/// candidate order, most recently admitted first, reaches them first).
fn full_cluster() -> Env {
    full_cluster_aged(0)
}

/// [`full_cluster`] with `idle` cycles (a second each) between the big workloads' admission and the small pods':
/// the gang in r3 and the pod in r2 have run that much longer when the small pods arrive.
fn full_cluster_aged(idle: usize) -> Env {
    let mut env = env();
    env.cq(cq("cq")
        .group(
            &["cpu", GPU],
            vec![fq("tas", vec![rq("cpu", cpu(1000)), rq(GPU, 1000)])],
        )
        .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority));
    env.submit(gang("r3-gang", 3, 8, TopologyMode::Required, Some(RACK)).prio(0));
    schedule(&mut env);
    env.submit(gang("r2-pod", 1, 8, TopologyMode::Required, Some(RACK)).prio(0));
    schedule(&mut env);
    for _ in 0..idle {
        schedule(&mut env);
    }
    for i in 0..8 {
        env.submit(
            gang(
                &format!("r1-small-{i}"),
                1,
                2,
                TopologyMode::Required,
                Some(RACK),
            )
            .prio(0),
        );
        schedule(&mut env);
    }
    for k in ["ns/r3-gang", "ns/r2-pod"] {
        env.assert_admitted(k);
    }
    assert_eq!(
        per_node(&env, "ns/r3-gang")
            .keys()
            .map(|n| rack_of(n))
            .collect::<BTreeSet<_>>(),
        ["r3"].into()
    );
    assert_eq!(
        per_node(&env, "ns/r2-pod").keys().collect::<Vec<_>>(),
        ["x3"]
    );
    for i in 0..8 {
        let k = format!("ns/r1-small-{i}");
        env.assert_admitted(&k);
        assert_eq!(rack_of(per_node(&env, &k).keys().next().unwrap()), "r1");
    }
    env
}

#[test]
fn a_gang_that_fits_the_quota_but_no_rack_preempts_inside_one_rack_with_the_fewest_victims() {
    let mut env = full_cluster();
    // Two 8-GPU pods in one rack: r1 needs its eight small pods gone, r3 needs only its one gang gone; r2 is
    // too small whatever is preempted.
    env.submit(gang("high", 2, 8, TopologyMode::Required, Some(RACK)).prio(10));
    let out = schedule(&mut env);
    assert_eq!(
        evictions(&out),
        vec![("ns/r3-gang".to_string(), Some("InClusterQueue".to_string()))]
    );
    env.assert_pending("ns/high", "WaitingForPreemptedWorkloads");
    // Nothing more happens while the victim's pods stop.
    assert!(evictions(&schedule(&mut env)).is_empty());
    assert_eq!(admitted_after(&mut env, &out), ["r3"].into());
}

/// Lets the victims in `out` go, runs a cycle, and returns the racks `ns/high` was admitted on.
fn admitted_after(env: &mut Env, out: &[Decision]) -> BTreeSet<&'static str> {
    env.complete_evictions(out);
    schedule(env);
    env.assert_admitted("ns/high");
    per_node(env, "ns/high")
        .keys()
        .map(|n| rack_of(n))
        .collect()
}

/// Where one domain's victims would lose more work than another's, the gang preempts where the least is lost,
/// even with more victims (Slurm's `preempt_youngest_first`): the gang in r3 ran 40 s when eight small pods in r1
/// ran 1 to 8 s each, so r1's eight pods go (36 pod-seconds lost, not 3 pods x 40 s).
#[test]
fn a_gang_preempts_where_the_least_work_is_lost_before_the_fewest_victims() {
    let mut env = full_cluster_aged(30);
    env.submit(gang("high", 2, 8, TopologyMode::Required, Some(RACK)).prio(10));
    let out = schedule(&mut env);
    let victims: BTreeSet<String> = evictions(&out).into_iter().map(|(w, _)| w).collect();
    let small: BTreeSet<String> = (0..8).map(|i| format!("ns/r1-small-{i}")).collect();
    assert_eq!(victims, small);
    assert_eq!(admitted_after(&mut env, &out), ["r1"].into());
    // The gang that ran longest was not touched.
    env.assert_admitted("ns/r3-gang");
}

/// A priority-10 pod of 8 GPUs that must sit on one host: any single node freed is enough.
fn one_whole_node(name: &str) -> WlB {
    gang(
        name,
        1,
        8,
        TopologyMode::Required,
        Some("kubernetes.io/hostname"),
    )
    .prio(10)
}

#[test]
fn no_victim_is_evicted_whose_removal_does_not_help_the_placement() {
    let mut env = full_cluster();
    // One 8-GPU pod in one host: any single node freed is enough. Kueue's order would take the most recent
    // small pods first; only victims on one node may go, and as few as possible.
    env.submit(one_whole_node("high"));
    let out = schedule(&mut env);
    let victims: Vec<String> = evictions(&out).into_iter().map(|(w, _)| w).collect();
    assert!(!victims.is_empty());
    env.complete_evictions(&out);
    schedule(&mut env);
    env.assert_admitted("ns/high");
    let node = per_node(&env, "ns/high").keys().next().cloned().unwrap();
    // Every victim held GPUs on the node the preemptor took: removing any other would not have helped.
    for v in &victims {
        let w = v.trim_start_matches("ns/");
        let on = match w {
            "r2-pod" => vec!["x3"],
            "r3-gang" => vec!["x4", "x5", "x6"],
            _ => vec!["x1", "x2"],
        };
        assert!(
            on.contains(&node.as_str()),
            "{v} was evicted but the preemptor went to {node}"
        );
    }
    // The single pod on x3 is the one victim that frees a whole node.
    assert_eq!(victims, vec!["ns/r2-pod".to_string()]);
}

#[test]
fn a_gang_that_no_rack_could_hold_even_empty_preempts_nothing() {
    let mut env = full_cluster();
    // 32 GPUs in one rack: the largest rack has 24.
    env.submit(gang("huge", 4, 8, TopologyMode::Required, Some(RACK)).prio(10));
    let out = schedule(&mut env);
    assert!(evictions(&out).is_empty());
    env.assert_pending("ns/huge", "TopologyPlacementFailed");
}

/// [`full_cluster`] plus a second topology flavor, `spare`, with one empty 8-GPU node (x7, pool `spare`), listed
/// after `tas` in the ClusterQueue whose flavor fungibility is `when_can_preempt`.
fn full_cluster_with_a_spare_flavor(when_can_preempt: FungibilityPolicy) -> Env {
    let mut env = full_cluster();
    env.flavor_obj(Flavor {
        name: "spare".into(),
        node_labels: [("pool".to_string(), "spare".to_string())].into(),
        topology_name: Some("default".into()),
        ..Flavor::default()
    });
    let mut x7 = crate::placement::node("x7", "b3", "r4", 8);
    x7.labels.insert("pool".into(), "spare".into());
    env.apply(Event::UpsertNode(x7));
    env.cq(cq("cq")
        .group(
            &["cpu", GPU],
            vec![
                fq("tas", vec![rq("cpu", cpu(1000)), rq(GPU, 1000)]),
                fq("spare", vec![rq("cpu", cpu(1000)), rq(GPU, 1000)]),
            ],
        )
        .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
        .fungibility(FungibilityPolicy::MayStopSearch, when_can_preempt, None));
    schedule(&mut env);
    env
}

#[test]
fn a_later_flavor_with_room_comes_before_preempting_for_room_under_try_next_flavor() {
    let mut env = full_cluster_with_a_spare_flavor(FungibilityPolicy::TryNextFlavor);
    // The quota of `tas` fits, its nodes are full; `spare` has a free node.
    env.submit(one_whole_node("high"));
    let out = schedule(&mut env);
    assert!(evictions(&out).is_empty(), "{out:?}");
    env.assert_admitted("ns/high");
    assert_eq!(per_node(&env, "ns/high").keys().collect::<Vec<_>>(), ["x7"]);
}

#[test]
fn a_queue_that_stops_at_a_flavor_needing_preemption_preempts_for_room_there() {
    let mut env = full_cluster_with_a_spare_flavor(FungibilityPolicy::MayStopSearch);
    env.submit(one_whole_node("high"));
    let out = schedule(&mut env);
    assert_eq!(
        evictions(&out),
        vec![("ns/r2-pod".to_string(), Some("InClusterQueue".to_string()))]
    );
    env.complete_evictions(&out);
    schedule(&mut env);
    env.assert_admitted("ns/high");
    assert_eq!(per_node(&env, "ns/high").keys().collect::<Vec<_>>(), ["x3"]);
}
