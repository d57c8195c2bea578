//! Kueue's PriorityBoost gate: `kueue.x-k8s.io/priority-boost` adds to the priority the queue orders by and
//! preemption compares, only when the gate is on.

use crate::common::*;
use sluice_engine::*;

fn env(gate: bool) -> Env {
    let mut env = Env::with_config(EngineConfig {
        priority_boost: gate,
        ..EngineConfig::default()
    });
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    env
}

fn boosted(name: &str, priority: i32, boost: i32, created: Time) -> WlB {
    let mut w = wl("ns", name)
        .prio(priority)
        .created(created)
        .ps("main", 1, &[("cpu", cpu(10))]);
    w.0.priority_boost = boost;
    w
}

#[test]
fn the_boost_orders_the_queue_when_the_gate_is_on() {
    let mut env = env(true);
    env.submit(boosted("first", 0, 0, 10));
    env.submit(boosted("boosted", 0, 5, 20));
    let ds = env.schedule();
    assert_eq!(admits(&ds), vec!["ns/boosted".to_string()]);
}

#[test]
fn the_boost_is_ignored_when_the_gate_is_off() {
    let mut env = env(false);
    env.submit(boosted("first", 0, 0, 10));
    env.submit(boosted("boosted", 0, 5, 20));
    let ds = env.schedule();
    assert_eq!(admits(&ds), vec!["ns/first".to_string()]);
}

#[test]
fn a_boosted_workload_preempts_a_higher_base_priority() {
    let mut env = env(true);
    env.admitted(boosted("running", 3, 0, 10), "cq", &[("cpu", "default")]);
    env.submit(boosted("boosted", 1, 5, 20));
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![("ns/running".to_string(), Some("InClusterQueue".to_string()))]
    );
}

#[test]
fn a_negative_boost_makes_a_running_workload_a_victim() {
    // Kueue's reference booster lowers admitted workloads after a time-sharing window.
    let mut env = env(true);
    env.admitted(boosted("running", 3, -5, 10), "cq", &[("cpu", "default")]);
    env.submit(boosted("next", 0, 0, 20));
    let ds = env.schedule();
    assert_eq!(evictions(&ds).len(), 1);
    let mut off = self::env(false);
    off.admitted(boosted("running", 3, -5, 10), "cq", &[("cpu", "default")]);
    off.submit(boosted("next", 0, 0, 20));
    assert!(evictions(&off.schedule()).is_empty());
}
