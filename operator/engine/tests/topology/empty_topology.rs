//! A gang that would not fit even with every placement gone is NoFit, and one that would preempts for room.
//! The engine remembers the empty-topology answer for identical requests, so every inventory change must
//! make it ask again: each test fills the cluster, changes the inventory, and expects the preemption.

use crate::common::*;
use crate::placement::{RACK, env, gang, gpus_report, node, schedule};
use sluice_engine::*;
use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

const HOST: &str = "kubernetes.io/hostname";

/// The fixture with preemption of lower priorities.
fn busy() -> Env {
    let mut env = env();
    env.cq(cq("cq")
        .group(
            &["cpu", crate::placement::GPU],
            vec![fq(
                "tas",
                vec![rq("cpu", cpu(1000)), rq(crate::placement::GPU, 1000)],
            )],
        )
        .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority));
    env
}

/// `fillers` one-node 8-GPU pods of priority 0, each admitted.
fn fill(env: &mut Env, fillers: usize) {
    for i in 0..fillers {
        let name = format!("filler-{i}");
        env.submit(gang(&name, 1, 8, TopologyMode::Required, Some(HOST)).prio(0));
        schedule(env);
        env.assert_admitted(&format!("ns/{name}"));
    }
}

/// `pods` 8-GPU pods in one rack, above the fillers' priority.
fn high(pods: i32) -> WlB {
    gang("high", pods, 8, TopologyMode::Required, Some(RACK)).prio(10)
}

/// The high gang waits without preempting anyone: not even an empty topology holds it.
fn assert_hopeless(env: &mut Env) {
    let out = schedule(env);
    assert!(evictions(&out).is_empty(), "{:?}", evictions(&out));
    env.assert_pending("ns/high", "TopologyPlacementFailed");
    // Asked again (a remembered answer), still nothing.
    assert!(evictions(&schedule(env)).is_empty());
}

/// After the inventory change the high gang preempts fillers of one rack.
fn assert_preempts(env: &mut Env) {
    let out = schedule(env);
    let victims = evictions(&out);
    assert!(
        !victims.is_empty(),
        "no preemption after the inventory changed"
    );
    env.assert_pending("ns/high", "WaitingForPreemptedWorkloads");
}

#[test]
fn a_gang_no_rack_holds_preempts_once_a_node_joins_the_rack() {
    let mut env = busy();
    fill(&mut env, 6);
    env.submit(high(4));
    let out = schedule(&mut env);
    assert!(evictions(&out).is_empty());
    let msg = env.assert_pending("ns/high", "TopologyPlacementFailed");
    assert!(msg.contains("any of 4 pod(s)"), "{msg}");
    assert_hopeless(&mut env);
    env.apply(Event::UpsertNode(node("x7", "b2", "r3", 8)));
    assert_preempts(&mut env);
}

#[test]
fn a_gang_preempts_once_a_not_ready_node_of_its_rack_is_ready_again() {
    let mut env = busy();
    let mut down = node("x6", "b2", "r3", 8);
    down.ready = false;
    env.apply(Event::UpsertNode(down));
    fill(&mut env, 5);
    env.submit(high(3));
    assert_hopeless(&mut env);
    // Readiness is not part of the static inventory the placement batch caches: only the answer is forgotten.
    env.apply(Event::UpsertNode(node("x6", "b2", "r3", 8)));
    assert_preempts(&mut env);
}

#[test]
fn a_gang_preempts_once_the_gpu_that_kept_it_out_is_healthy_again() {
    let mut env = busy();
    let islands: &[&[u32]] = &[&[0, 1, 2, 3, 4, 5, 6, 7]];
    env.apply(Event::UpsertNodeGpus {
        node: "x6".into(),
        gpus: gpus_report(8, islands, &[3]),
    });
    // Five fillers take x1-x5; x6 has seven healthy GPUs.
    fill(&mut env, 5);
    env.submit(high(3));
    assert_hopeless(&mut env);
    env.apply(Event::UpsertNodeGpus {
        node: "x6".into(),
        gpus: gpus_report(8, islands, &[]),
    });
    assert_preempts(&mut env);
}

/// Also a flavor's node labels were cached with the placement batch until the inventory changed.
#[test]
fn a_gang_preempts_once_its_flavor_stops_excluding_a_node() {
    let mut env = busy();
    // x6 loses the flavor's label: rack r3 has two nodes for the flavor.
    let mut off = node("x6", "b2", "r3", 8);
    off.labels.insert("pool".into(), "cpu".into());
    env.apply(Event::UpsertNode(off));
    fill(&mut env, 5);
    env.submit(high(3));
    assert_hopeless(&mut env);
    // The flavor now selects every node.
    env.flavor_obj(Flavor {
        name: "tas".into(),
        node_labels: Default::default(),
        topology_name: Some("default".into()),
        ..Flavor::default()
    });
    assert_preempts(&mut env);
}

/// Takes no pod anywhere; reusable, so its answers are remembered too.
#[derive(Debug)]
struct Nowhere;

impl PlacementPolicy for Nowhere {
    fn name(&self) -> &str {
        "nowhere"
    }
    fn score(&self, _: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        Ok(NodeScores {
            score: vec![0.0; nodes.len()],
            max_pods: vec![0; nodes.len()],
        })
    }
    fn reusable(&self) -> bool {
        true
    }
}

/// Answers are remembered per placement policy: the same request from a ClusterQueue with another policy is
/// asked again, not answered from the first queue's memory.
#[test]
fn a_remembered_answer_is_not_shared_between_placement_policies() {
    let mut env = busy();
    env.cq_lq(
        cq("picky")
            .group(
                &["cpu", crate::placement::GPU],
                vec![fq(
                    "tas",
                    vec![rq("cpu", cpu(1000)), rq(crate::placement::GPU, 1000)],
                )],
            )
            .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority),
        "picky-ns",
    );
    env.engine
        .set_placement_policy_for("picky", std::sync::Arc::new(Nowhere));
    fill(&mut env, 6);
    let mut picky = high(3);
    picky.0.namespace = "picky-ns".into();
    picky.0.uid = "picky-high".into();
    env.submit(picky);
    let out = schedule(&mut env);
    assert!(evictions(&out).is_empty(), "{:?}", evictions(&out));
    env.assert_pending("picky-ns/high", "TopologyPlacementFailed");
    // The same pod sets under the default policy: the answer is "fits", so fillers are preempted.
    env.submit(high(3));
    assert_preempts(&mut env);
}
