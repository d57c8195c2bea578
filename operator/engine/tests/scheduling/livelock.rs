//! Fair sharing with partial admission: a preemptor that preempted for a reduced size must not
//! lose the freed quota to its own victim, cycle after cycle (the bundled example's livelock).

use crate::common::*;
use sluice_engine::*;

const GPU: &str = "nvidia.com/gpu";

/// Two ClusterQueues share 8 GPUs: `a` (nominal 5) holds 2, `b` (nominal 3) borrows 1 for `b/victim`.
/// `a/preemptor` asks for 6 pods (1 GPU each, min 1): the full size cannot preempt for fair
/// sharing, 3 pods can (within `a`'s nominal), and once the victim is gone all 6 would fit.
fn livelock_env() -> Env {
    let mut env = Env::fair();
    env.flavor("f").ns("a", &[]).ns("b", &[]);
    for (name, nominal) in [("a", 5), ("b", 3)] {
        env.cq_lq(
            cq(name)
                .cohort("pool")
                .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
                .group(&[GPU], vec![fq("f", vec![rq(GPU, nominal)])]),
            name,
        );
    }
    env.admitted(
        wl("a", "running")
            .queue("main")
            .created(10)
            .ps("main", 2, &[(GPU, 1)]),
        "a",
        &[(GPU, "f")],
    );
    env.admitted(
        wl("b", "victim")
            .queue("main")
            .created(20)
            .ps("main", 4, &[(GPU, 1)]),
        "b",
        &[(GPU, "f")],
    );
    env.submit(
        wl("a", "preemptor")
            .queue("main")
            .created(30)
            .ps("main", 6, &[(GPU, 1)])
            .min(1),
    );
    env
}

#[test]
fn preemptor_keeps_the_quota_it_freed() {
    let mut env = livelock_env();
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "b/victim".to_string(),
            Some("InCohortReclamation".to_string())
        )]
    );
    env.complete_evictions(&ds);
    let mut victim_evictions = 1;
    for _ in 0..10 {
        let ds = env.schedule();
        victim_evictions += evictions(&ds)
            .iter()
            .filter(|(k, _)| k == "b/victim")
            .count();
        env.complete_evictions(&ds);
    }
    assert_eq!(
        victim_evictions, 1,
        "the victim was preempted again and again"
    );
    // Admitted at the size its preemption was computed for, not the full 6 pods.
    env.assert_admitted_on("a/preemptor", GPU, "f", 3);
    assert!(matches!(
        env.state("b/victim"),
        WorkloadState::Pending { .. }
    ));
}

/// `a` (nominal 4) borrows 2 GPUs for `a/low`; `b` (nominal 4, never reclaims) holds 2.
/// `a/high` preempts `a/low` within its ClusterQueue; before the eviction completes `b/small`
/// arrives, and would fit without borrowing in the quota that `a/high` freed.
fn stealing_env(prioritize_preemptors: bool) -> Env {
    let mut env = Env::with_config(EngineConfig {
        fair_sharing: Some(FairSharingConfig::default()),
        prioritize_preemptor_workloads: prioritize_preemptors,
        ..EngineConfig::default()
    });
    env.flavor("f").ns("a", &[]).ns("b", &[]);
    env.cq_lq(
        cq("a")
            .cohort("pool")
            .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
            .group(&[GPU], vec![fq("f", vec![rq(GPU, 4)])]),
        "a",
    );
    env.cq_lq(
        cq("b")
            .cohort("pool")
            .group(&[GPU], vec![fq("f", vec![rq(GPU, 4)])]),
        "b",
    );
    env.admitted(
        wl("a", "low")
            .queue("main")
            .created(10)
            .ps("main", 6, &[(GPU, 1)]),
        "a",
        &[(GPU, "f")],
    );
    env.admitted(
        wl("b", "running")
            .queue("main")
            .created(10)
            .ps("main", 2, &[(GPU, 1)]),
        "b",
        &[(GPU, "f")],
    );
    env
}

/// `a/high` preempts `a/low`; while the victim's quota is freed, `b/small` arrives. Returns the decisions of the
/// next cycle, which decides who takes the freed quota.
fn preempt_then_compete(env: &mut Env) -> Vec<Decision> {
    env.submit(
        wl("a", "high")
            .queue("main")
            .prio(10)
            .created(30)
            .ps("main", 6, &[(GPU, 1)]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![("a/low".to_string(), Some("InClusterQueue".to_string()))]
    );
    env.submit(
        wl("b", "small")
            .queue("main")
            .created(20)
            .ps("main", 2, &[(GPU, 1)]),
    );
    env.complete_evictions(&ds);
    env.schedule()
}

/// With Kueue's PrioritizePreemptorWorkloads gate on, the preemptor goes first in the fair-sharing order.
#[test]
fn requeued_competitor_does_not_take_the_preemptors_quota() {
    let mut env = stealing_env(true);
    let ds = preempt_then_compete(&mut env);
    assert_eq!(admits(&ds), vec!["a/high".to_string()]);
    env.assert_admitted_on("a/high", GPU, "f", 6);
    assert!(matches!(
        env.state("b/small"),
        WorkloadState::Pending { .. }
    ));
}

/// Kueue's default (PrioritizePreemptorWorkloads off): the fair-sharing order alone decides, so the competitor
/// with the lower share goes first and takes the freed quota.
#[test]
fn without_the_gate_the_fair_sharing_order_alone_decides() {
    let mut env = stealing_env(false);
    let ds = preempt_then_compete(&mut env);
    assert_eq!(admits(&ds), vec!["b/small".to_string()], "{ds:?}");
}
