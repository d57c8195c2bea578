//! Kueue's SchedulingEquivalenceHashing (beta, on by default in v0.19): in a BestEffortFIFO ClusterQueue, once a
//! workload fails to fit, the queued workloads of the same scheduling shape go to the inadmissible list without an
//! attempt (and no pending reason), new ones of that shape skip the queue, and a requeue forgets the shape.
//! After Kueue's cluster_queue_test.go (`TestRecordInadmissibleHash`, `TestRequeueHashTriggerByReason`).

use crate::common::*;
use sluice_engine::*;

/// A ClusterQueue of 10 cpu, 8 held by `running`; `big-1` and `big-2` (5 cpu, one shape) and `small` (2 cpu)
/// queued in that order.
fn queue(config: EngineConfig, strict: bool) -> Env {
    let mut env = busy_queue(config, strict);
    for (i, name) in ["big-1", "big-2"].iter().enumerate() {
        env.submit(
            wl("ns", name)
                .created(1 + i as Time)
                .ps("main", 1, &[("cpu", cpu(5))]),
        );
    }
    env.submit(
        wl("ns", "small")
            .created(3)
            .ps("main", 1, &[("cpu", cpu(2))]),
    );
    env
}

fn not_evaluated(env: &Env, key: &str) {
    env.assert_pending(key, "PendingEvaluation");
}

#[test]
fn a_failed_shape_sets_its_equals_aside_unevaluated() {
    let mut env = queue(EngineConfig::default(), false);
    env.schedule();
    env.assert_pending("ns/big-1", "WaitingForQuota");
    // big-2 was set aside with big-1: the next cycle's head is small.
    not_evaluated(&env, "ns/big-2");
    env.schedule();
    env.assert_admitted("ns/small");
    not_evaluated(&env, "ns/big-2");
    assert!(!env.engine.has_work(), "nothing left to try");
    // Quota comes back: both are requeued and tried afresh.
    env.apply(Event::FinishWorkload(key_of("ns/running")));
    env.schedule();
    env.assert_admitted("ns/big-1");
    env.schedule();
    env.assert_pending("ns/big-2", "WaitingForQuota");
}

#[test]
fn a_new_workload_of_a_failed_shape_skips_the_queue() {
    let mut env = queue(EngineConfig::default(), false);
    env.schedule();
    env.submit(
        wl("ns", "big-3")
            .created(4)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    // Another shape (a higher priority) is queued and tried.
    env.submit(
        wl("ns", "big-high")
            .created(5)
            .prio(10)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.schedule();
    env.assert_pending("ns/big-high", "WaitingForQuota");
    env.schedule();
    env.assert_admitted("ns/small");
    not_evaluated(&env, "ns/big-3");
    assert!(!env.engine.has_work());
}

#[test]
fn strict_fifo_and_the_gate_off_try_every_head() {
    // StrictFIFO keeps its head in the queue: nothing is set aside, the head blocks.
    let mut env = queue(EngineConfig::default(), true);
    env.schedule();
    env.schedule();
    env.assert_pending("ns/big-1", "WaitingForQuota");
    not_evaluated(&env, "ns/big-2");
    assert!(matches!(
        env.state("ns/small"),
        WorkloadState::Pending { .. }
    ));
    // With the gate off, big-2 gets its own attempt before small.
    let config = EngineConfig {
        scheduling_equivalence_hashing: false,
        ..EngineConfig::default()
    };
    let mut env = queue(config, false);
    env.schedule();
    env.schedule();
    env.assert_pending("ns/big-2", "WaitingForQuota");
    assert!(matches!(
        env.state("ns/small"),
        WorkloadState::Pending { .. }
    ));
    env.schedule();
    env.assert_admitted("ns/small");
}
