//! More of Kueue's TestSchedule cases, ported with their expected reasons and messages.

use crate::common::*;
use sluice_engine::*;

fn tainted(name: &str, value: &str) -> Flavor {
    Flavor {
        name: name.into(),
        node_taints: vec![Taint {
            key: "key".into(),
            value: Some(value.into()),
            effect: TaintEffect::NoSchedule,
        }],
        ..Flavor::default()
    }
}

fn fixture() -> Env {
    let mut env = Env::new();
    kueue_fixture(&mut env);
    env.flavor_obj(tainted("spot-tainted", "val"))
        .flavor_obj(tainted("spot-tainted-2", "val2"));
    env
}

#[test]
fn flavors_with_mixed_misconfiguration_and_insufficient_quota() {
    let mut env = fixture();
    env.cq(cq("custom-cq").strict().group(
        &["cpu"],
        vec![
            fq(
                "spot-tainted",
                vec![rql("cpu", cpu(20), Some(cpu(20)), None)],
            ),
            fq("on-demand", vec![rql("cpu", cpu(15), Some(cpu(15)), None)]),
        ],
    ));
    env.lq("sales", "custom-q", "custom-cq");
    env.admitted(
        wl("sales", "existing")
            .queue("custom-q")
            .ps("main", 1, &[("cpu", cpu(10))]),
        "custom-cq",
        &[("cpu", "on-demand")],
    );
    env.submit(
        wl("sales", "new-job")
            .queue("custom-q")
            .ps("main", 1, &[("cpu", cpu(10))]),
    );
    env.schedule();
    assert_eq!(
        env.assert_pending("sales/new-job", "WaitingForQuota"),
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 5 more needed, untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted"
    );
    assert_eq!(
        env.engine.pending_workloads("custom-cq"),
        vec![key_of("sales/new-job")]
    );
}

#[test]
fn flavors_with_mixed_taint_mismatch_and_exceeding_limits() {
    let mut env = fixture();
    env.cq(cq("custom-cq2").strict().group(
        &["cpu"],
        vec![
            fq("spot-tainted", vec![rq("cpu", cpu(20))]),
            fq("on-demand", vec![rq("cpu", cpu(5))]),
        ],
    ));
    env.lq("sales", "custom-q2", "custom-cq2");
    env.submit(
        wl("sales", "new-job2")
            .queue("custom-q2")
            .ps("main", 1, &[("cpu", cpu(10))]),
    );
    env.schedule();
    assert_eq!(
        env.assert_pending("sales/new-job2", "ExceedsMaxQuota"),
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor on-demand, previously considered podsets requests (0) + current podset request (10) > maximum capacity (5), untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted"
    );
}

#[test]
fn flavors_are_structurally_incompatible() {
    let mut env = fixture();
    env.cq(cq("custom-cq3").strict().group(
        &["cpu"],
        vec![
            fq("spot-tainted", vec![rq("cpu", cpu(20))]),
            fq("spot-tainted-2", vec![rq("cpu", cpu(5))]),
        ],
    ));
    env.lq("sales", "custom-q3", "custom-cq3");
    env.submit(
        wl("sales", "new-job3")
            .queue("custom-q3")
            .ps("main", 1, &[("cpu", cpu(1))]),
    );
    env.schedule();
    assert_eq!(
        env.assert_pending("sales/new-job3", "NoMatchingFlavor"),
        "couldn't assign flavors to pod set main: untolerated taint {key val NoSchedule <nil>} in flavor spot-tainted, untolerated taint {key val2 NoSchedule <nil>} in flavor spot-tainted-2"
    );
}

fn capacity_env(reclaim: ReclaimPolicy) -> Env {
    let mut env = fixture();
    env.cq(cq("ClusterQueueA")
        .cohort("root")
        .preemption(reclaim, WithinCqPolicy::Never)
        .group(&["gpu"], vec![fq("on-demand", vec![rq("gpu", 2)])]));
    env.cq(cq("ClusterQueueB")
        .cohort("root")
        .group(&["gpu"], vec![fq("on-demand", vec![rq("gpu", 0)])]));
    env.lq("eng-alpha", "lq", "ClusterQueueA")
        .lq("eng-beta", "lq", "ClusterQueueB");
    env.admitted(
        wl("eng-alpha", "a1-admitted")
            .queue("lq")
            .ps("main", 1, &[("gpu", 1)]),
        "ClusterQueueA",
        &[("gpu", "on-demand")],
    );
    env.submit(
        wl("eng-alpha", "a2-pending")
            .queue("lq")
            .ps("main", 1, &[("gpu", 2)]),
    );
    env.submit(
        wl("eng-beta", "b1-pending")
            .queue("lq")
            .ps("main", 1, &[("gpu", 1)]),
    );
    env.schedule();
    env
}

#[test]
fn capacity_not_blocked_when_lending_queue_can_reclaim() {
    let env = capacity_env(ReclaimPolicy::Any);
    assert_eq!(
        env.assert_pending("eng-alpha/a2-pending", "WaitingForQuota"),
        "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed"
    );
    env.assert_admitted_on("eng-beta/b1-pending", "gpu", "on-demand", 1);
}

#[test]
fn capacity_blocked_when_lending_queue_is_not_guaranteed_to_reclaim() {
    for policy in [ReclaimPolicy::LowerPriority, ReclaimPolicy::Never] {
        let env = capacity_env(policy);
        env.assert_pending("eng-alpha/a2-pending", "WaitingForQuota");
        assert_eq!(
            env.assert_pending("eng-beta/b1-pending", "WaitingForQuota"),
            "Workload no longer fits after processing another workload",
            "{policy:?}"
        );
    }
}

#[test]
fn workload_waiting_for_preemption_does_not_block_borrowing_workload_in_another_cq() {
    let mut env = fixture();
    let bwc = |c: CqB| {
        c.cohort("pwb")
            .preemption(ReclaimPolicy::LowerPriority, WithinCqPolicy::Never)
            .borrow_within_cohort(None)
    };
    env.cq(cq("cq_shared").cohort("pwb").group(
        &["cpu"],
        vec![fq("default", vec![rql("cpu", cpu(4), Some(0), None)])],
    ));
    env.cq(bwc(cq("cq_a")).group(
        &["cpu"],
        vec![fq("default", vec![rql("cpu", 0, Some(cpu(3)), None)])],
    ));
    env.cq(bwc(cq("cq_b")).group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    env.lq("eng-alpha", "lq_a", "cq_a")
        .lq("eng-beta", "lq_b", "cq_b");
    env.admitted(
        wl("eng-alpha", "admitted_a")
            .queue("lq_a")
            .ps("main", 1, &[("cpu", cpu(2))]),
        "cq_a",
        &[("cpu", "default")],
    );
    env.submit(
        wl("eng-alpha", "a")
            .queue("lq_a")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(3))]),
    );
    env.submit(
        wl("eng-beta", "b")
            .queue("lq_b")
            .created(2)
            .ps("main", 1, &[("cpu", cpu(1))]),
    );
    let ds = env.schedule();
    assert!(evictions(&ds).is_empty());
    assert_eq!(
        env.assert_pending("eng-alpha/a", "WaitingForQuota"),
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed"
    );
    env.assert_admitted_on("eng-beta/b", "cpu", "default", cpu(1));
}

#[test]
fn preemption_only_when_the_workload_fits_within_nominal_quota() {
    let mut env = fixture();
    env.cq(cq("other-alpha")
        .cohort("other")
        .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
        .group(&["cpu"], vec![fq("on-demand", vec![rq("cpu", cpu(2))])]));
    env.cq(cq("other-beta")
        .cohort("other")
        .group(&["cpu"], vec![fq("on-demand", vec![rq("cpu", cpu(2))])]));
    env.lq("eng-alpha", "other", "other-alpha")
        .lq("eng-beta", "other", "other-beta");
    env.admitted(
        wl("eng-alpha", "a1")
            .queue("other")
            .prio(-1)
            .ps("main", 1, &[("cpu", cpu(1))]),
        "other-alpha",
        &[("cpu", "on-demand")],
    );
    env.admitted(
        wl("eng-beta", "b1")
            .queue("other")
            .prio(-1)
            .ps("main", 1, &[("cpu", cpu(1))]),
        "other-beta",
        &[("cpu", "on-demand")],
    );
    env.submit(wl("eng-alpha", "incoming").queue("other").prio(1).ps(
        "main",
        1,
        &[("cpu", cpu(3))],
    ));
    let ds = env.schedule();
    assert!(evictions(&ds).is_empty(), "{ds:?}");
    assert_eq!(
        env.assert_pending("eng-alpha/incoming", "WaitingForQuota"),
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed"
    );
}

fn cpu_group(n: i64) -> Vec<ResourceGroup> {
    vec![ResourceGroup {
        covered_resources: vec!["cpu".into()],
        flavors: vec![fq("default", vec![rq("cpu", cpu(n))])],
    }]
}

/// preemption_hierarchical_test.go: "prefer to preempt hierarchical candidate".
#[test]
fn hierarchical_candidate_is_preferred_over_lower_priority_in_own_queue() {
    let mut env = fixture();
    env.cohort("r", None, vec![])
        .cohort("c", Some("r"), cpu_group(2));
    let p = |c: CqB| {
        c.preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])])
    };
    env.cq(p(cq("q").cohort("c")))
        .cq(p(cq("q_borrowing").cohort("r")));
    env.lq("ns", "q", "q")
        .lq("ns", "qb", "q_borrowing")
        .ns("ns", &[]);
    env.admitted(
        wl("ns", "admitted_borrowing")
            .queue("qb")
            .prio(1)
            .ps("main", 1, &[("cpu", cpu(1))]),
        "q_borrowing",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "admitted_same_queue")
            .queue("q")
            .prio(-2)
            .ps("main", 1, &[("cpu", cpu(1))]),
        "q",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "incoming")
            .queue("q")
            .ps("main", 1, &[("cpu", cpu(1))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "ns/admitted_borrowing".to_string(),
            Some("InCohortReclamation".to_string())
        )]
    );
    assert!(ds.iter().any(|d| matches!(d, Decision::Evict { message, .. } if message.ends_with("preemptor path: /r/c/q; preemptee path: /r/q_borrowing"))));
}

/// preemption_hierarchical_test.go: "forced to preempt priority candidate".
#[test]
fn forced_to_preempt_priority_candidate_while_borrowing() {
    let mut env = fixture();
    env.cohort("r", None, vec![])
        .cohort("c", Some("r"), cpu_group(2));
    env.cq(cq("q")
        .cohort("c")
        .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
        .borrow_within_cohort(Some(0))
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    let p = |c: CqB, n: i64| {
        c.preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(n))])])
    };
    env.cq(p(cq("q_nominal").cohort("r"), 2))
        .cq(p(cq("q_same_cohort").cohort("c"), 0));
    env.lq("ns", "q", "q")
        .lq("ns", "qn", "q_nominal")
        .lq("ns", "qs", "q_same_cohort")
        .ns("ns", &[]);
    env.admitted(
        wl("ns", "admitted_nominal")
            .queue("qn")
            .prio(-10)
            .ps("main", 1, &[("cpu", cpu(2))]),
        "q_nominal",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "admitted_same_cohort")
            .queue("qs")
            .prio(-1)
            .ps("main", 1, &[("cpu", cpu(2))]),
        "q_same_cohort",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "incoming")
            .queue("q")
            .ps("main", 1, &[("cpu", cpu(2))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "ns/admitted_same_cohort".to_string(),
            Some("InCohortReclaimWhileBorrowing".to_string())
        )]
    );
    assert!(ds.iter().any(|d| matches!(d, Decision::Evict { message, .. }
        if message.contains("due to reclamation within the cohort while borrowing; preemptor path: /r/c/q; preemptee path: /r/c/q_same_cohort"))));
}

/// scheduler_fs_test.go: "hierarchical fair sharing schedule workload which wins tournament".
#[test]
fn hierarchical_fair_sharing_tournament_winner() {
    let mut env = Env::fair();
    kueue_fixture(&mut env);
    env.apply(Event::UpsertCohort(Cohort {
        name: "A".into(),
        parent: None,
        resource_groups: vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("on-demand", vec![rq("cpu", cpu(200))])],
        }],
        fair_weight: 1.0,
    }));
    env.cohort("B", Some("A"), vec![])
        .cohort("C", Some("A"), vec![]);
    for (q, co) in [("d", "B"), ("e", "B"), ("f", "C"), ("g", "C")] {
        env.cq(cq(q)
            .cohort(co)
            .group(&["cpu"], vec![fq("on-demand", vec![rq("cpu", 0)])]));
        env.lq("eng-alpha", &format!("lq-{q}"), q);
    }
    let w = |n: &str, q: &str, c: i64| {
        wl("eng-alpha", n)
            .queue(&format!("lq-{q}"))
            .ps("one", 1, &[("cpu", cpu(c))])
    };
    env.admitted(w("d0", "d", 10), "d", &[("cpu", "on-demand")]);
    env.admitted(w("e0", "e", 20), "e", &[("cpu", "on-demand")]);
    env.admitted(w("g0", "g", 100), "g", &[("cpu", "on-demand")]);
    for (n, q, c) in [
        ("d1", "d", 70),
        ("e1", "e", 61),
        ("f1", "f", 1),
        ("g1", "g", 1),
    ] {
        env.submit(w(n, q, c));
    }
    let ds = env.schedule();
    assert_eq!(admits(&ds), vec!["eng-alpha/d1"]);
    for k in ["eng-alpha/e1", "eng-alpha/f1", "eng-alpha/g1"] {
        assert_eq!(
            env.assert_pending(k, "WaitingForQuota"),
            "Workload no longer fits after processing another workload",
            "{k}"
        );
    }
}
