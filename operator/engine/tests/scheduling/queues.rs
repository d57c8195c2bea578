//! Queueing behaviour: FIFO strategies, ordering, routing, namespace selectors, stop policies,
//! deactivation, eviction lifecycle and `has_work`.

use std::collections::BTreeMap;

use crate::common::*;
use sluice_engine::*;

fn single(strategy_strict: bool) -> Env {
    let mut env = busy_queue(EngineConfig::default(), strategy_strict);
    env.submit(wl("ns", "big").created(1).ps("main", 1, &[("cpu", cpu(5))]));
    env.submit(
        wl("ns", "small")
            .created(2)
            .ps("main", 1, &[("cpu", cpu(2))]),
    );
    env
}

#[test]
fn strict_fifo_head_blocks_the_queue() {
    let mut env = single(true);
    env.schedule();
    env.assert_pending("ns/big", "WaitingForQuota");
    assert!(!env.engine.has_work());
    let ds = env.schedule();
    assert!(admits(&ds).is_empty());
    assert!(matches!(
        env.state("ns/small"),
        WorkloadState::Pending { .. }
    ));
    assert_eq!(
        env.engine.pending_workloads("cq"),
        vec![key_of("ns/big"), key_of("ns/small")]
    );
    env.apply(Event::FinishWorkload(key_of("ns/running")));
    assert!(env.engine.has_work());
    env.schedule();
    env.assert_admitted("ns/big");
    env.schedule();
    env.assert_admitted("ns/small");
}

#[test]
fn best_effort_fifo_skips_inadmissible_head() {
    let mut env = single(false);
    env.schedule();
    env.assert_pending("ns/big", "WaitingForQuota");
    assert!(env.engine.has_work(), "next head can be tried");
    env.schedule();
    env.assert_admitted("ns/small");
    // The inadmissible head comes back once quota in its tree is freed.
    env.apply(Event::FinishWorkload(key_of("ns/running")));
    env.schedule();
    env.assert_admitted("ns/big");
    assert!(!env.engine.has_work());
}

#[test]
fn queue_order_is_priority_then_timestamp_then_uid() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]),
        "ns",
    );
    env.submit(
        wl("ns", "old-low")
            .created(1)
            .prio(1)
            .ps("main", 1, &[("cpu", 1)]),
    );
    env.submit(
        wl("ns", "new-high")
            .created(5)
            .prio(10)
            .ps("main", 1, &[("cpu", 1)]),
    );
    env.submit(
        wl("ns", "b-tie")
            .created(3)
            .prio(1)
            .ps("main", 1, &[("cpu", 1)]),
    );
    env.submit(
        wl("ns", "a-tie")
            .created(3)
            .prio(1)
            .ps("main", 1, &[("cpu", 1)]),
    );
    let order: Vec<String> = env
        .engine
        .pending_workloads("cq")
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(
        order,
        vec!["ns/new-high", "ns/old-low", "ns/a-tie", "ns/b-tie"]
    );
}

#[test]
fn higher_priority_head_admitted_first_across_cycle_ordering() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("a")
            .cohort("c")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]),
        "ns",
    );
    env.cq(cq("b")
        .cohort("c")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]));
    env.lq("ns", "b", "b");
    // Both borrow the same amount; the higher priority one wins the cohort capacity.
    env.submit(wl("ns", "low").created(0).ps("main", 1, &[("cpu", cpu(6))]));
    env.submit(
        wl("ns", "high")
            .queue("b")
            .prio(5)
            .created(1)
            .ps("main", 1, &[("cpu", cpu(6))]),
    );
    env.schedule();
    env.assert_admitted("ns/high");
    assert_eq!(
        env.assert_pending("ns/low", "WaitingForQuota"),
        "Workload no longer fits after processing another workload"
    );
}

#[test]
fn missing_local_queue_and_cluster_queue_are_inadmissible() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.submit(wl("ns", "w").queue("lq").ps("main", 1, &[("cpu", 1)]));
    assert_eq!(
        env.assert_pending("ns/w", "Inadmissible"),
        "LocalQueue lq doesn't exist"
    );
    env.lq("ns", "lq", "cq");
    assert_eq!(
        env.assert_pending("ns/w", "Inadmissible"),
        "ClusterQueue cq doesn't exist"
    );
    env.cq(cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", 5)])]));
    env.schedule();
    env.assert_admitted("ns/w");
}

#[test]
fn namespace_selector_nil_empty_and_matching() {
    let mut env = Env::new();
    env.flavor("default")
        .ns("team-a", &[("team", "a")])
        .ns("team-b", &[("team", "b")]);
    let g = |c: CqB| c.group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]);
    env.cq(g(cq("none").ns_selector(None)));
    env.cq(g(cq("all").ns_selector(Some(LabelSelector::default()))));
    env.cq(g(cq("only-a").ns_selector(Some(LabelSelector {
        match_labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
        match_expressions: vec![],
    }))));
    for ns in ["team-a", "team-b"] {
        env.lq(ns, "none", "none")
            .lq(ns, "all", "all")
            .lq(ns, "only-a", "only-a");
    }
    for (ns, q) in [
        ("team-a", "none"),
        ("team-a", "all"),
        ("team-b", "all"),
        ("team-a", "only-a"),
        ("team-b", "only-a"),
    ] {
        env.submit(wl(ns, q).queue(q).ps("main", 1, &[("cpu", 1)]));
    }
    env.schedule();
    env.schedule();
    let mismatch = "workload namespace doesn't match ClusterQueue selector";
    assert_eq!(env.assert_pending("team-a/none", "Misconfigured"), mismatch);
    env.assert_admitted("team-a/all");
    env.assert_admitted("team-b/all");
    env.assert_admitted("team-a/only-a");
    assert_eq!(
        env.assert_pending("team-b/only-a", "Misconfigured"),
        mismatch
    );
    // Relabelling the namespace makes it admissible.
    env.ns("team-b", &[("team", "a")]);
    env.schedule();
    env.assert_admitted("team-b/only-a");
}

#[test]
fn a_misconfigured_workload_waits_and_blocks_only_a_strict_queue() {
    let why = "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: \
               Invalid value: [\"cpu\"]: requests must not be above the limitRange max";
    for strict in [false, true] {
        let mut env = busy_queue(EngineConfig::default(), strict);
        let mut bad = wl("ns", "bad").ps("main", 1, &[("cpu", cpu(1))]);
        bad.0.misconfigured = Some(why.into());
        env.submit(bad);
        env.submit(
            wl("ns", "fine")
                .created(1)
                .ps("main", 1, &[("cpu", cpu(1))]),
        );
        env.schedule();
        env.schedule();
        assert_eq!(env.assert_pending("ns/bad", "Misconfigured"), why);
        if strict {
            // Kueue requeues it to the heap: the head stays, the next waits behind it.
            assert!(matches!(
                env.state("ns/fine"),
                WorkloadState::Pending { .. }
            ));
        } else {
            env.assert_admitted("ns/fine");
        }
    }
}

#[test]
fn a_limit_range_bound_alone_waits_for_the_next_nomination_and_a_new_default_requeues() {
    // Kueue re-queues a waiting Workload when a LimitRange changes its adjusted spec, and otherwise only
    // updates it where it waits: the bounds are read again when it is next nominated.
    let why = "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: \
               Invalid value: [\"cpu\"]: requests must not be above the limitRange max";
    let mut env = busy_queue(EngineConfig::default(), false);
    let waits = wl("ns", "waits").ps("main", 1, &[("cpu", cpu(4))]);
    env.submit(waits.clone());
    env.schedule();
    let quota = env.assert_pending("ns/waits", "WaitingForQuota");
    let mut bounded = waits.clone();
    bounded.0.misconfigured = Some(why.into());
    env.submit(bounded);
    env.schedule();
    assert_eq!(env.assert_pending("ns/waits", "WaitingForQuota"), quota);
    // Quota freed: nominated again, and now refused by the bound.
    env.apply(Event::FinishWorkload(key_of("ns/running")));
    env.schedule();
    assert_eq!(env.assert_pending("ns/waits", "Misconfigured"), why);
    // A default that changes the adjusted spec (and lifts the refusal) re-queues it at once.
    let mut defaulted = waits;
    defaulted.0.adjusted_resources = 1;
    env.submit(defaulted);
    env.schedule();
    env.assert_admitted("ns/waits");
}

#[test]
fn a_gated_workload_waits_unqueued_until_its_gates_are_lifted() {
    let mut env = busy_queue(EngineConfig::default(), false);
    let mut gated = wl("ns", "gated").ps("main", 1, &[("cpu", cpu(1))]);
    gated.0.admission_gated_by = Some("example.com/approval".into());
    env.submit(gated.clone());
    env.schedule();
    assert_eq!(
        env.assert_pending("ns/gated", "AdmissionGated"),
        "Admission is gated by: example.com/approval"
    );
    assert!(env.engine.pending_workloads("cq").is_empty(), "not queued");
    gated.0.admission_gated_by = None;
    env.submit(gated);
    env.schedule();
    env.assert_admitted("ns/gated");
}

fn stop_env() -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    env.admitted(
        wl("ns", "running").ps("main", 1, &[("cpu", cpu(4))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(wl("ns", "waiting").ps("main", 1, &[("cpu", cpu(4))]));
    env
}

#[test]
fn cluster_queue_hold_stops_admissions_only() {
    let mut env = stop_env();
    let ds = env.apply(Event::UpsertClusterQueue(
        cq("cq")
            .stop(StopPolicy::Hold)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
            .build(),
    ));
    assert!(evictions(&ds).is_empty());
    assert_eq!(
        env.assert_pending("ns/waiting", "Inadmissible"),
        "ClusterQueue cq is inactive"
    );
    assert!(!env.engine.has_work());
    assert!(admits(&env.schedule()).is_empty());
    env.assert_admitted("ns/running");
    assert!(!env.engine.cluster_queue_usage("cq").unwrap().active);
    env.apply(Event::UpsertClusterQueue(
        cq("cq")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
            .build(),
    ));
    env.schedule();
    env.assert_admitted("ns/waiting");
}

#[test]
fn cluster_queue_hold_and_drain_evicts_admitted() {
    let mut env = stop_env();
    let ds = env.apply(Event::UpsertClusterQueue(
        cq("cq")
            .stop(StopPolicy::HoldAndDrain)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
            .build(),
    ));
    assert_eq!(evictions(&ds), vec![("ns/running".to_string(), None)]);
    assert!(
        ds.iter()
            .any(|d| matches!(d, Decision::Evict { reason, message, .. }
        if reason == "ClusterQueueStopped" && message == "The ClusterQueue is stopped"))
    );
    assert_eq!(env.state("ns/running"), WorkloadState::Evicting);
    env.complete_evictions(&ds);
    assert!(matches!(
        env.state("ns/running"),
        WorkloadState::Pending { .. }
    ));
    assert!(admits(&env.schedule()).is_empty());
}

#[test]
fn local_queue_hold_and_drain() {
    let mut env = stop_env();
    let ds = env.apply(Event::UpsertLocalQueue(LocalQueue {
        namespace: "ns".into(),
        name: "main".into(),
        cluster_queue: "cq".into(),
        stop_policy: StopPolicy::HoldAndDrain,
        fair_sharing_weight: None,
    }));
    assert!(ds.iter().any(|d| matches!(d, Decision::Evict { workload, reason, message, .. }
        if workload.name == "running" && reason == "LocalQueueStopped" && message == "The LocalQueue is stopped")));
    assert_eq!(
        env.assert_pending("ns/waiting", "Inadmissible"),
        "LocalQueue main is inactive"
    );
    env.lq("ns", "main", "cq");
    env.complete_evictions(&ds);
    env.schedule();
    env.schedule();
    env.assert_admitted("ns/running");
    env.assert_admitted("ns/waiting");
}

#[test]
fn local_queue_hold_keeps_running_workloads() {
    let mut env = stop_env();
    let ds = env.apply(Event::UpsertLocalQueue(LocalQueue {
        namespace: "ns".into(),
        name: "main".into(),
        cluster_queue: "cq".into(),
        stop_policy: StopPolicy::Hold,
        fair_sharing_weight: None,
    }));
    assert!(evictions(&ds).is_empty());
    env.schedule();
    env.assert_admitted("ns/running");
    env.assert_pending("ns/waiting", "Inadmissible");
}

#[test]
fn inactive_workloads_are_not_admitted_and_admitted_ones_are_evicted() {
    let mut env = stop_env();
    env.submit(wl("ns", "off").inactive().ps("main", 1, &[("cpu", 1)]));
    assert_eq!(
        env.assert_pending("ns/off", "Deactivated"),
        "The workload is deactivated"
    );
    let ds = env.apply(Event::UpsertWorkload {
        workload: wl("ns", "running")
            .inactive()
            .ps("main", 1, &[("cpu", cpu(4))])
            .build(),
        admission: None,
    });
    assert!(
        ds.iter()
            .any(|d| matches!(d, Decision::Evict { reason, message, .. }
        if reason == "Deactivated" && message == "The workload is deactivated"))
    );
    env.complete_evictions(&ds);
    assert_eq!(
        env.assert_pending("ns/running", "Deactivated"),
        "The workload is deactivated"
    );
    let ds = env.schedule();
    assert_eq!(admits(&ds), vec!["ns/waiting"]);
    // Reactivation requeues it.
    env.submit(wl("ns", "off").ps("main", 1, &[("cpu", 1)]));
    env.schedule();
    env.assert_admitted("ns/off");
}

#[test]
fn deleting_and_finishing_release_quota() {
    let mut env = stop_env();
    env.submit(
        wl("ns", "third")
            .created(5)
            .ps("main", 1, &[("cpu", cpu(4))]),
    );
    env.schedule();
    env.assert_admitted("ns/waiting");
    env.schedule();
    env.assert_pending("ns/third", "WaitingForQuota");
    env.apply(Event::DeleteWorkload(key_of("ns/running")));
    assert!(env.engine.workload_state(&key_of("ns/running")).is_none());
    env.schedule();
    env.assert_admitted("ns/third");
    env.apply(Event::FinishWorkload(key_of("ns/third")));
    assert_eq!(env.state("ns/third"), WorkloadState::Finished);
    let u = env.engine.cluster_queue_usage("cq").unwrap();
    assert_eq!(u.flavors_reservation[0].resources[0].total, cpu(4));
}

#[test]
fn has_work_tracks_changes() {
    let mut env = stop_env();
    assert!(env.engine.has_work());
    env.submit(
        wl("ns", "huge")
            .created(9)
            .ps("main", 1, &[("cpu", cpu(20))]),
    );
    env.schedule();
    env.schedule();
    env.assert_pending("ns/huge", "ExceedsMaxQuota");
    assert!(!env.engine.has_work());
    assert!(env.schedule().is_empty());
}

#[test]
fn local_queue_pending_workloads_follow_cluster_queue_order() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]),
        "ns",
    );
    env.lq("ns", "other", "cq");
    env.submit(wl("ns", "a").created(1).ps("main", 1, &[("cpu", 1)]));
    env.submit(
        wl("ns", "b")
            .queue("other")
            .created(2)
            .ps("main", 1, &[("cpu", 1)]),
    );
    env.submit(
        wl("ns", "c")
            .prio(5)
            .created(3)
            .ps("main", 1, &[("cpu", 1)]),
    );
    assert_eq!(
        env.engine.local_queue_pending_workloads("ns", "main"),
        vec![key_of("ns/c"), key_of("ns/a")]
    );
    assert_eq!(
        env.engine.local_queue_pending_workloads("ns", "other"),
        vec![key_of("ns/b")]
    );
    assert!(
        env.engine
            .local_queue_pending_workloads("ns", "missing")
            .is_empty()
    );
}

/// Kueue's workload controller evicts every admitted workload of a HoldAndDrain ClusterQueue on each reconcile,
/// so one the engine learns of after the queue stopped (a restart, the simulator's load order) is drained too.
#[test]
fn cluster_queue_hold_and_drain_evicts_workloads_restored_after_it_stopped() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .stop(StopPolicy::HoldAndDrain)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    let ds = env.restore(
        wl("ns", "running").ps("main", 1, &[("cpu", cpu(4))]),
        "cq",
        &[("cpu", "default")],
    );
    assert!(
        ds.iter().any(
            |d| matches!(d, Decision::Evict { workload, reason, message, .. }
            if workload.name == "running" && reason == "ClusterQueueStopped"
                && message == "The ClusterQueue is stopped")
        ),
        "{ds:?}"
    );
    assert_eq!(env.state("ns/running"), WorkloadState::Evicting);
}

/// The LocalQueue is checked before the ClusterQueue, as in Kueue's workload controller.
#[test]
fn local_queue_hold_and_drain_evicts_workloads_restored_after_it_stopped() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq(cq("cq")
        .stop(StopPolicy::HoldAndDrain)
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]));
    env.apply(Event::UpsertLocalQueue(LocalQueue {
        namespace: "ns".into(),
        name: "main".into(),
        cluster_queue: "cq".into(),
        stop_policy: StopPolicy::HoldAndDrain,
        fair_sharing_weight: None,
    }));
    let ds = env.restore(
        wl("ns", "running").ps("main", 1, &[("cpu", cpu(4))]),
        "cq",
        &[("cpu", "default")],
    );
    assert_eq!(evictions(&ds).len(), 1, "{ds:?}");
    assert!(
        ds.iter()
            .any(|d| matches!(d, Decision::Evict { reason, message, .. }
            if reason == "LocalQueueStopped" && message == "The LocalQueue is stopped")),
        "{ds:?}"
    );
}

#[test]
fn a_cluster_queue_update_requeues_only_its_own_cohort_tree() {
    // Cohort a: a1 and a2 (4 cpu each); cohort b: b1 (4 cpu).
    let mut env = Env::new();
    env.flavor("default").ns("ns-a", &[]).ns("ns-b", &[]);
    let queue = |name: &str, cohort: &str, cores: i64| {
        cq(name)
            .cohort(cohort)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(cores))])])
    };
    env.cq_lq(queue("a1", "a", 4), "ns-a")
        .cq(queue("a2", "a", 4))
        .cq_lq(queue("b1", "b", 4), "ns-b");
    env.admitted(
        wl("ns-a", "fill").ps("main", 1, &[("cpu", cpu(4))]),
        "a1",
        &[("cpu", "default")],
    );
    // 6 of the 4 cpu left in cohort a: tried once, then set aside.
    env.submit(
        wl("ns-a", "big")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(6))]),
    );
    env.schedule();
    env.assert_pending("ns-a/big", "WaitingForQuota");
    assert!(!env.engine.has_work());
    // Cohort b's ClusterQueue changes: as in Kueue, cohort a's workloads stay aside.
    env.cq(queue("b1", "b", 6));
    assert!(
        !env.engine.has_work(),
        "a change in cohort b requeued cohort a"
    );
    // A change in cohort a gives big another try.
    env.cq(queue("a2", "a", 5));
    assert!(env.engine.has_work());
}
