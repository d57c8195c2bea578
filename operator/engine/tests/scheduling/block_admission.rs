//! Kueue's `waitForPodsReady.blockAdmission`: once a workload holds quota without being PodsReady, the next one
//! that fits waits ("Waiting") and the scheduler admits nothing more, in any ClusterQueue, until every quota
//! holder is PodsReady (Kueue's scheduler blocks on its cache's WorkloadsNotReady).

use crate::common::*;
use sluice_engine::*;

fn blocking_env() -> Env {
    let mut env = Env::with_config(EngineConfig {
        block_admission: true,
        ..EngineConfig::default()
    });
    env.flavor("default").ns("ns", &[]);
    for name in ["a", "b"] {
        let c = cq(name).group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(8))])]);
        env.cq(c).lq("ns", name, name);
    }
    env
}

fn job(name: &str, queue: &str) -> WlB {
    wl("ns", name)
        .queue(queue)
        .ps("main", 1, &[("cpu", cpu(1))])
}

/// The shell reads the Workload again once its PodsReady condition is True.
fn pods_ready(env: &mut Env, name: &str, queue: &str) {
    let admission = env.assert_admitted(&format!("ns/{name}"));
    let mut w = job(name, queue).build();
    w.pods_ready = true;
    env.apply(Event::UpsertWorkload {
        workload: w,
        admission: Some(admission),
    });
}

#[test]
fn the_next_workload_waits_until_the_admitted_ones_are_ready() {
    let mut env = blocking_env();
    env.submit(job("w1", "a").created(1));
    env.submit(job("w2", "a").created(2));
    env.submit(job("w3", "b").created(3));
    let out = env.schedule();
    // One admission per cycle at most while the first is not ready: the one after it waits with Kueue's words.
    assert_eq!(admits(&out), vec!["ns/w1"]);
    let waiting: Vec<_> = ["ns/w2", "ns/w3"]
        .into_iter()
        .filter(|k| matches!(env.state(k), WorkloadState::Pending { ref reason, .. } if reason == "Waiting"))
        .collect();
    assert_eq!(waiting.len(), 1, "exactly one nominee waits: {waiting:?}");
    let message = env.assert_pending(waiting[0], WAITING_FOR_PODS_READY);
    assert_eq!(
        message,
        "waiting for all admitted workloads to be in PodsReady condition"
    );
    // Blocked: no cycle admits, and the engine says there is nothing to do.
    assert!(!env.engine.has_work());
    assert!(admits(&env.schedule()).is_empty());
    // w1's pods are ready: the scheduler goes on, and again admits one before blocking.
    pods_ready(&mut env, "w1", "a");
    assert!(env.engine.has_work());
    let out = env.schedule();
    assert_eq!(admits(&out).len(), 1, "{out:?}");
    assert!(!env.engine.has_work());
}

#[test]
fn every_workload_is_admitted_once_each_before_it_is_ready() {
    let mut env = blocking_env();
    for (i, q) in ["a", "b", "a", "b"].into_iter().enumerate() {
        env.submit(job(&format!("w{i}"), q).created(i as i64));
    }
    let mut order = Vec::new();
    for _ in 0..8 {
        let out = env.schedule();
        for k in admits(&out) {
            let name = k.trim_start_matches("ns/").to_string();
            let queue = if name == "w0" || name == "w2" {
                "a"
            } else {
                "b"
            };
            pods_ready(&mut env, &name, queue);
            order.push(name);
        }
    }
    assert_eq!(order.len(), 4, "{order:?}");
}

#[test]
fn a_holder_that_is_not_ready_blocks_even_after_a_restart() {
    // A workload restored as admitted (the operator restarted) without PodsReady holds the scheduler too.
    let mut env = blocking_env();
    env.admitted(job("old", "a"), "a", &[("cpu", "default")]);
    env.submit(job("new", "b"));
    assert!(admits(&env.schedule()).is_empty());
    env.assert_pending("ns/new", "Waiting");
    // Its eviction completes (quota freed): nothing holds quota unready, and the new one is admitted.
    let out = env.apply(Event::DeleteWorkload(key_of("ns/old")));
    env.complete_evictions(&out);
    assert!(env.engine.has_work());
    assert_eq!(admits(&env.schedule()), vec!["ns/new"]);
}

#[test]
fn preemptions_are_still_issued_before_the_block() {
    // The block sits just before admitting (as in Kueue's scheduler): a preemptor evicts its victims.
    let mut env = blocking_env();
    let c = cq("small")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(1))])])
        .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority);
    env.cq(c).lq("ns", "small", "small");
    env.admitted(job("low", "small").prio(0), "small", &[("cpu", "default")]);
    env.submit(job("high", "small").prio(10));
    let out = env.schedule();
    assert_eq!(evictions(&out).len(), 1, "{out:?}");
}

#[test]
fn without_block_admission_readiness_is_not_read() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let c = cq("a").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(8))])]);
    env.cq(c).lq("ns", "a", "a");
    env.submit(job("w1", "a").created(1));
    env.submit(job("w2", "a").created(2));
    let mut admitted = admits(&env.schedule());
    admitted.extend(admits(&env.schedule()));
    assert_eq!(admitted, vec!["ns/w1", "ns/w2"]);
}
