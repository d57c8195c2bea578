//! Classical and fair-sharing preemption policies.

use crate::common::*;
use sluice_engine::*;

fn within_cq(policy: WithinCqPolicy) -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .preemption(ReclaimPolicy::Never, policy)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    env
}

#[test]
fn within_cluster_queue_never() {
    let mut env = within_cq(WithinCqPolicy::Never);
    env.admitted(
        wl("ns", "low").prio(-5).ps("main", 1, &[("cpu", cpu(10))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(wl("ns", "high").prio(5).ps("main", 1, &[("cpu", cpu(5))]));
    let ds = env.schedule();
    assert!(evictions(&ds).is_empty());
    env.assert_pending("ns/high", "WaitingForQuota");
}

#[test]
fn within_cluster_queue_lower_priority() {
    let mut env = within_cq(WithinCqPolicy::LowerPriority);
    env.admitted(
        wl("ns", "equal")
            .created(50)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "low").prio(-1).ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "new")
            .created(10)
            .ps("main", 1, &[("cpu", cpu(10))]),
    );
    let ds = env.schedule();
    // Only the lower-priority one qualifies; it isn't enough, so nothing is preempted.
    assert!(evictions(&ds).is_empty(), "{ds:?}");
    env.submit(
        wl("ns", "new")
            .created(10)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![("ns/low".to_string(), Some("InClusterQueue".to_string()))]
    );
}

#[test]
fn within_cluster_queue_lower_or_newer_equal_priority() {
    let mut env = within_cq(WithinCqPolicy::LowerOrNewerEqualPriority);
    env.admitted(
        wl("ns", "older")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "newer")
            .created(100)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "new")
            .created(10)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![("ns/newer".to_string(), Some("InClusterQueue".to_string()))]
    );
}

#[test]
fn fill_back_keeps_the_preemption_set_minimal() {
    let mut env = within_cq(WithinCqPolicy::LowerPriority);
    env.admitted(
        wl("ns", "small").prio(-3).ps("main", 1, &[("cpu", cpu(2))]),
        "cq",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "large").prio(-2).ps("main", 1, &[("cpu", cpu(8))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(wl("ns", "new").ps("main", 1, &[("cpu", cpu(8))]));
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![("ns/large".to_string(), Some("InClusterQueue".to_string()))]
    );
}

fn cohort_env(reclaim: ReclaimPolicy) -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let g = |c: CqB| {
        c.cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
    };
    env.cq(g(cq("a").preemption(reclaim, WithinCqPolicy::Never)));
    env.cq(g(cq("b")));
    env.lq("ns", "a", "a").lq("ns", "b", "b");
    // b borrows 5 from a's nominal quota.
    env.admitted(
        wl("ns", "b-nominal")
            .queue("b")
            .prio(10)
            .ps("main", 1, &[("cpu", cpu(10))]),
        "b",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "b-borrow")
            .queue("b")
            .prio(10)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "b",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "a-new")
            .queue("a")
            .ps("main", 1, &[("cpu", cpu(10))]),
    );
    env
}

#[test]
fn reclaim_within_cohort_never_and_lower_priority_do_not_reclaim_from_higher_priority() {
    for policy in [ReclaimPolicy::Never, ReclaimPolicy::LowerPriority] {
        let mut env = cohort_env(policy);
        let ds = env.schedule();
        assert!(evictions(&ds).is_empty(), "{policy:?}: {ds:?}");
        env.assert_pending("ns/a-new", "WaitingForQuota");
    }
}

#[test]
fn reclaim_within_cohort_any_reclaims_borrowed_quota() {
    let mut env = cohort_env(ReclaimPolicy::Any);
    let ds = env.schedule();
    // Kueue evicts the most recently reserved among equal priority; either frees enough, and
    // fill-back keeps a single one.
    let ev = evictions(&ds);
    assert_eq!(ev.len(), 1, "{ds:?}");
    assert_eq!(ev[0].1.as_deref(), Some("InCohortReclamation"));
    env.complete_evictions(&ds);
    env.schedule();
    env.assert_admitted("ns/a-new");
}

#[test]
fn overlapping_preemption_targets_are_skipped() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let g = |c: CqB, n: i64| {
        c.cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(n))])])
    };
    env.cq(g(
        cq("a").preemption(ReclaimPolicy::Any, WithinCqPolicy::Never),
        5,
    ));
    env.cq(g(
        cq("b").preemption(ReclaimPolicy::Any, WithinCqPolicy::Never),
        5,
    ));
    env.cq(g(cq("c"), 0));
    env.lq("ns", "a", "a").lq("ns", "b", "b").lq("ns", "c", "c");
    env.admitted(
        wl("ns", "hog")
            .queue("c")
            .ps("main", 1, &[("cpu", cpu(10))]),
        "c",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "from-a")
            .queue("a")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.submit(
        wl("ns", "from-b")
            .queue("b")
            .created(2)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "ns/hog".to_string(),
            Some("InCohortReclamation".to_string())
        )]
    );
    env.assert_pending("ns/from-a", "WaitingForPreemptedWorkloads");
    assert_eq!(
        env.assert_pending("ns/from-b", "WaitingForQuota"),
        "Workload has overlapping preemption targets with another workload"
    );
    env.complete_evictions(&ds);
    env.schedule();
    env.assert_admitted("ns/from-a");
    env.assert_admitted("ns/from-b");
}

#[test]
fn fair_sharing_preempts_from_the_highest_share_and_respects_weights() {
    let mut env = Env::fair();
    env.flavor("default").ns("ns", &[]);
    let g = |c: CqB| {
        c.cohort("co")
            .preemption(ReclaimPolicy::Any, WithinCqPolicy::Never)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
    };
    env.cq(g(cq("a"))).cq(g(cq("b"))).cq(g(cq("c")));
    env.lq("ns", "a", "a").lq("ns", "b", "b").lq("ns", "c", "c");
    // a uses 10 + 4 borrowed, b uses 10 + 6 borrowed (higher share); c wants its nominal back.
    env.admitted(
        wl("ns", "a1").queue("a").ps("main", 1, &[("cpu", cpu(10))]),
        "a",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "a2").queue("a").ps("main", 1, &[("cpu", cpu(4))]),
        "a",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "b1").queue("b").ps("main", 1, &[("cpu", cpu(10))]),
        "b",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "b2").queue("b").ps("main", 1, &[("cpu", cpu(6))]),
        "b",
        &[("cpu", "default")],
    );
    let ua = env.engine.cluster_queue_usage("a").unwrap();
    let ub = env.engine.cluster_queue_usage("b").unwrap();
    assert!(ub.weighted_share > ua.weighted_share, "{ua:?} {ub:?}");
    // a borrows 4 of the 30 cpu its cohort could lend: ceil(4000/30) per mille.
    assert_eq!(ua.weighted_share, 134);
    assert_eq!(
        env.engine.cohort_weighted_share("co"),
        Some(0),
        "root cohorts have no share"
    );
    assert_eq!(env.engine.cohort_weighted_share("missing"), None);
    env.submit(wl("ns", "c1").queue("c").ps("main", 1, &[("cpu", cpu(6))]));
    let ds = env.schedule();
    // c stays within nominal: reclamation from the highest-share ClusterQueue, first candidate by
    // Kueue's ordering (equal priority and reservation time: UID).
    assert_eq!(
        evictions(&ds),
        vec![("ns/b1".to_string(), Some("InCohortReclamation".to_string()))]
    );
}

#[test]
fn fair_sharing_strategies_preempt_borrower_with_higher_share() {
    let mut env = Env::fair();
    env.flavor("default").ns("ns", &[]);
    let g = |c: CqB| {
        c.cohort("co")
            .preemption(ReclaimPolicy::Any, WithinCqPolicy::Never)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
    };
    env.cq(g(cq("a"))).cq(g(cq("b"))).cq(g(cq("c")));
    env.lq("ns", "a", "a").lq("ns", "b", "b");
    // b holds 20 borrowed on top of its nominal in small pieces; a is at nominal.
    env.admitted(
        wl("ns", "a1").queue("a").ps("main", 1, &[("cpu", cpu(10))]),
        "a",
        &[("cpu", "default")],
    );
    for i in 0..4 {
        env.admitted(
            wl("ns", &format!("b{i}"))
                .queue("b")
                .ps("main", 1, &[("cpu", cpu(5))]),
            "b",
            &[("cpu", "default")],
        );
    }
    // a wants to borrow 5: its share after admission (5) is below b's share after losing 5 (5): passes.
    env.submit(wl("ns", "a2").queue("a").ps("main", 1, &[("cpu", cpu(5))]));
    let ds = env.schedule();
    let ev = evictions(&ds);
    assert_eq!(ev.len(), 1, "{ds:?}");
    assert!(ev[0].0.starts_with("ns/b"));
    assert_eq!(ev[0].1.as_deref(), Some("InCohortFairSharing"));
}

#[test]
fn fair_sharing_zero_weight_share_is_max() {
    let mut env = Env::fair();
    env.flavor("default").ns("ns", &[]);
    env.cq(cq("a")
        .cohort("co")
        .weight(0.0)
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(1))])]));
    env.cq(cq("b")
        .cohort("co")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]));
    env.admitted(
        wl("ns", "a1").queue("a").ps("main", 1, &[("cpu", cpu(3))]),
        "a",
        &[("cpu", "default")],
    );
    assert_eq!(
        env.engine.cluster_queue_usage("a").unwrap().weighted_share,
        i64::MAX
    );
    assert_eq!(
        env.engine.cluster_queue_usage("b").unwrap().weighted_share,
        0
    );
}

#[test]
fn fair_sharing_tournament_prefers_lower_share() {
    let mut env = Env::fair();
    env.flavor("default").ns("ns", &[]);
    let g = |c: CqB| {
        c.cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])])
    };
    env.cq(g(cq("a"))).cq(g(cq("b"))).cq(g(cq("idle")));
    env.lq("ns", "a", "a").lq("ns", "b", "b");
    env.admitted(
        wl("ns", "a-run")
            .queue("a")
            .ps("main", 1, &[("cpu", cpu(14))]),
        "a",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "b-run")
            .queue("b")
            .ps("main", 1, &[("cpu", cpu(11))]),
        "b",
        &[("cpu", "default")],
    );
    // 5 cpu left in the cohort; both want 5. b (lower share) wins although a's workload is older
    // and higher priority.
    env.submit(
        wl("ns", "a-new")
            .queue("a")
            .prio(10)
            .created(0)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.submit(
        wl("ns", "b-new")
            .queue("b")
            .created(100)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.schedule();
    env.assert_admitted("ns/b-new");
    env.assert_pending("ns/a-new", "WaitingForQuota");
}

/// Kueue orders preemption candidates of equal priority by their QuotaReserved condition's lastTransitionTime,
/// newest first. A workload that arrives already admitted keeps the reservation time in its status, not its
/// creation time: here the older workload reserved later, so it is the one preempted.
#[test]
fn restored_admissions_keep_their_reservation_time_for_victim_order() {
    let mut env = within_cq(WithinCqPolicy::LowerPriority);
    env.admitted(
        wl("ns", "created-first-reserved-last")
            .prio(-1)
            .created(0)
            .reserved(9_000)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "created-last-reserved-first")
            .prio(-1)
            .created(5_000)
            .reserved(6_000)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "high")
            .created(10_000)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds)
            .into_iter()
            .map(|(w, _)| w)
            .collect::<Vec<_>>(),
        vec!["ns/created-first-reserved-last".to_string()],
        "{ds:?}"
    );
}
