//! Limits and edge cases: arithmetic that saturates instead of overflowing, cohort lending limits,
//! terminating ClusterQueues, clamped availability, no-op upserts, preemption messages.

use crate::common::*;
use sluice_engine::*;

fn single(nominal: Quantity) -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", nominal)])]),
        "ns",
    );
    env
}

// --- 1. Integer overflow on input ---

#[test]
fn oversized_second_pod_set_is_exceeds_max_quota_not_overflow() {
    let mut env = single(cpu(10));
    env.submit(
        wl("ns", "huge")
            .ps("a", 1, &[("cpu", cpu(5))])
            .ps("b", 1, &[("cpu", i64::MAX)]),
    );
    env.schedule();
    env.assert_pending("ns/huge", "ExceedsMaxQuota");
}

#[test]
fn count_times_request_saturates() {
    let mut env = single(cpu(10));
    env.submit(wl("ns", "many").ps("main", 4, &[("cpu", i64::MAX / 2)]));
    env.schedule();
    env.assert_pending("ns/many", "ExceedsMaxQuota");
}

#[test]
fn cohort_subtree_sum_saturates() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    for name in ["a", "b"] {
        env.cq(cq(name)
            .cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", i64::MAX)])]));
    }
    env.lq("ns", "main", "a");
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "default", cpu(1));
}

#[test]
fn huge_borrowing_limit_saturates() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("a").cohort("co").group(
            &["cpu"],
            vec![fq(
                "default",
                vec![rql("cpu", cpu(1), Some(i64::MAX), None)],
            )],
        ),
        "ns",
    );
    env.cq(cq("b").cohort("co").group(
        &["cpu"],
        vec![fq("default", vec![rql("cpu", cpu(4), None, Some(cpu(2)))])],
    ));
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(3))]));
    env.submit(
        wl("ns", "big")
            .created(1)
            .ps("main", 1, &[("cpu", i64::MAX)]),
    );
    env.schedule();
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "default", cpu(3));
    env.assert_pending("ns/big", "ExceedsMaxQuota");
}

#[test]
fn restored_admission_usage_sum_saturates() {
    let mut env = single(cpu(10));
    // Restored admissions beyond the quota are accepted as they are (Kueue does the same).
    env.check = false;
    env.admitted(
        wl("ns", "old")
            .ps("a", 1, &[("cpu", i64::MAX)])
            .ps("b", 1, &[("cpu", i64::MAX)]),
        "cq",
        &[("cpu", "default")],
    );
    env.assert_admitted("ns/old");
    let u = env.engine.cluster_queue_usage("cq").expect("usage");
    assert_eq!(u.flavors_reservation[0].resources[0].total, i64::MAX);
}

#[test]
fn partial_admission_count_sums_do_not_overflow() {
    let mut env = single(cpu(10));
    env.submit(
        wl("ns", "wide")
            .ps("a", i32::MAX, &[("cpu", 1)])
            .min(1)
            .ps("b", i32::MAX, &[("cpu", 1)])
            .min(1),
    );
    env.schedule();
    let a = env.assert_admitted("ns/wide");
    let total: i64 = a
        .pod_set_assignments
        .iter()
        .map(|p| p.resource_usage["cpu"])
        .sum();
    assert!(total <= cpu(10), "{a:?}");
}

// --- 2. Cohort lendingLimit above nominalQuota ---

#[test]
fn cohort_lending_limit_may_exceed_nominal() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let res = env.engine.apply(Event::UpsertCohort(Cohort {
        name: "mid".into(),
        parent: Some("root".into()),
        resource_groups: vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("default", vec![rql("cpu", cpu(2), None, Some(cpu(5)))])],
        }],
        fair_weight: 1.0,
    }));
    assert!(res.is_ok(), "{res:?}");
    env.cq(cq("a")
        .cohort("mid")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    env.cq_lq(
        cq("b")
            .cohort("root")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(2))]));
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "default", cpu(2));
}

#[test]
fn cluster_queue_lending_limit_above_nominal_is_still_rejected() {
    let mut env = Env::new();
    let res = env.engine.apply(Event::UpsertClusterQueue(
        cq("a")
            .cohort("co")
            .group(
                &["cpu"],
                vec![fq("default", vec![rql("cpu", cpu(2), None, Some(cpu(5)))])],
            )
            .build(),
    ));
    assert!(res.is_err());
}

// --- 3. Deleting a ClusterQueue that still holds admitted workloads ---

#[test]
fn deleted_cluster_queue_keeps_usage_until_its_last_workload_leaves() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]).ns("other", &[]);
    env.cq_lq(
        cq("a")
            .cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    env.cq_lq(
        cq("b")
            .cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]),
        "other",
    );
    env.submit(wl("ns", "old").ps("main", 1, &[("cpu", cpu(8))]));
    env.schedule();
    env.assert_admitted("ns/old");

    env.apply(Event::DeleteClusterQueue("a".into()));
    let u = env
        .engine
        .cluster_queue_usage("a")
        .expect("a is terminating");
    assert!(!u.active);
    assert_eq!(u.inactive_reason, "Terminating");
    assert_eq!(
        u.inactive_message,
        "Can't admit new workloads; clusterQueue is terminating"
    );
    assert_eq!(u.reserving_workloads, 1);

    // a stays in the cohort: its unused 2 cpu can be borrowed, its 8 used cpu cannot.
    env.submit(wl("other", "b7").ps("main", 1, &[("cpu", cpu(7))]));
    env.submit(wl("ns", "new").ps("main", 1, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("other/b7", "cpu", "default", cpu(7));
    env.submit(
        wl("other", "b1")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(1))]),
    );
    env.schedule();
    env.schedule();
    assert!(
        !matches!(env.state("other/b1"), WorkloadState::Admitted(_)),
        "a's usage must still count"
    );
    // A terminating ClusterQueue admits nothing.
    assert!(!matches!(env.state("ns/new"), WorkloadState::Admitted(_)));

    // b's borrowing ends first, so removing a's quota leaves the cohort within its quota.
    env.apply(Event::FinishWorkload(key_of("other/b7")));
    assert!(env.engine.cluster_queue_usage("a").is_some());
    env.apply(Event::FinishWorkload(key_of("ns/old")));
    assert!(env.engine.cluster_queue_usage("a").is_none());
    let msg = env.assert_pending("ns/new", "Inadmissible");
    assert_eq!(msg, "ClusterQueue a doesn't exist");
}

#[test]
fn deleted_empty_cluster_queue_goes_at_once() {
    let mut env = single(cpu(10));
    env.apply(Event::DeleteClusterQueue("cq".into()));
    assert!(env.engine.cluster_queue_usage("cq").is_none());
}

// --- 4. Available quota clamped at zero ---

fn over_admitted() -> Env {
    let mut env = Env::new();
    env.check = false;
    env.flavor("default").ns("ns", &[]);
    let group = |cpu_nominal| {
        cq("cq").group(
            &["cpu", "memory"],
            vec![fq(
                "default",
                vec![rq("cpu", cpu_nominal), rq("memory", 100)],
            )],
        )
    };
    env.cq_lq(group(cpu(10)), "ns");
    env.admitted(
        wl("ns", "old").ps("main", 1, &[("cpu", cpu(8))]),
        "cq",
        &[("cpu", "default")],
    );
    // The quota shrinks below what is already admitted.
    env.cq(group(cpu(5)));
    env
}

#[test]
fn over_admitted_queue_still_admits_a_zero_request() {
    let mut env = over_admitted();
    env.submit(wl("ns", "mem").ps("main", 1, &[("cpu", 0), ("memory", 10)]));
    env.schedule();
    env.assert_admitted("ns/mem");
}

#[test]
fn more_needed_excludes_the_overdraft() {
    let mut env = over_admitted();
    env.submit(wl("ns", "two").ps("main", 1, &[("cpu", cpu(2))]));
    env.schedule();
    let msg = env.assert_pending("ns/two", "WaitingForQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed"
    );
}

// --- 5. An UpsertWorkload that changes nothing scheduling-relevant ---

#[test]
fn unchanged_upsert_keeps_an_inadmissible_workload_parked() {
    let mut env = single(cpu(5));
    let w = || wl("ns", "big").ps("main", 1, &[("cpu", cpu(4))]);
    env.admitted(
        wl("ns", "holder").ps("main", 1, &[("cpu", cpu(3))]),
        "cq",
        &[("cpu", "default")],
    );
    env.submit(w());
    env.schedule();
    env.assert_pending("ns/big", "WaitingForQuota");
    assert!(!env.engine.has_work());
    // A status-only update arrives: same spec.
    env.submit(w());
    assert!(
        !env.engine.has_work(),
        "the workload must stay inadmissible"
    );
    // A scheduling-relevant change does requeue it.
    env.submit(w().prio(1));
    assert!(env.engine.has_work());
}

#[test]
fn unchanged_upsert_keeps_the_flavor_scan_progress() {
    let mut env = Env::new();
    env.flavor("f1").flavor("f2").ns("ns", &[]);
    env.cq_lq(
        cq("x").cohort("co").group(
            &["cpu"],
            vec![
                fq("f1", vec![rq("cpu", 0)]),
                fq("f2", vec![rq("cpu", cpu(10))]),
            ],
        ),
        "ns",
    );
    env.cq(cq("y").cohort("co").group(
        &["cpu"],
        vec![fq("f1", vec![rq("cpu", 0)]), fq("f2", vec![rq("cpu", 0)])],
    ));
    env.cq(cq("lender").cohort("co").group(
        &["cpu"],
        vec![
            fq("f1", vec![rq("cpu", cpu(5))]),
            fq("f2", vec![rq("cpu", 0)]),
        ],
    ));
    env.lq("ns", "y", "y");
    let x1 = || wl("ns", "x1").ps("main", 1, &[("cpu", cpu(5))]);
    env.submit(x1());
    env.submit(
        wl("ns", "y1")
            .queue("y")
            .prio(1)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.schedule();
    env.assert_admitted_on("ns/y1", "cpu", "f1", cpu(5));
    env.apply(Event::FinishWorkload(key_of("ns/y1")));
    env.submit(x1());
    env.schedule();
    env.assert_admitted_on("ns/x1", "cpu", "f2", cpu(5));
}

// --- 6. JobUID in preemption messages ---

fn preemption_message(job_uid: Option<&str>) -> String {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]),
        "ns",
    );
    env.admitted(
        wl("ns", "low").ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
    let mut high = wl("ns", "high").prio(10).ps("main", 1, &[("cpu", cpu(5))]);
    high.0.job_uid = job_uid.map(Into::into);
    env.submit(high);
    let ds = env.schedule();
    ds.iter()
        .find_map(|d| match d {
            Decision::Evict { message, .. } => Some(message.clone()),
            _ => None,
        })
        .expect("low is preempted")
}

#[test]
fn preemption_message_names_the_job_uid() {
    assert_eq!(
        preemption_message(Some("job-123")),
        "Preempted to accommodate a workload (UID: high, JobUID: job-123) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    );
}

#[test]
fn preemption_message_without_job_uid_says_unknown() {
    for uid in [None, Some("")] {
        assert!(
            preemption_message(uid).contains("JobUID: UNKNOWN"),
            "{uid:?}"
        );
    }
}

// --- 7. Namespace mismatch is Misconfigured ---

#[test]
fn namespace_mismatch_is_misconfigured() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .ns_selector(None)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", 1)]));
    env.schedule();
    assert_eq!(
        env.assert_pending("ns/w", "Misconfigured"),
        "workload namespace doesn't match ClusterQueue selector"
    );
}

#[test]
fn reserving_capacity_with_a_huge_borrowing_limit_saturates() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("a")
            .cohort("co")
            .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
            .group(
                &["cpu"],
                vec![fq(
                    "default",
                    vec![rql("cpu", cpu(5), Some(i64::MAX), None)],
                )],
            ),
        "ns",
    );
    env.cq(cq("b")
        .cohort("co")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]));
    env.admitted(
        wl("ns", "held").prio(10).ps("main", 1, &[("cpu", cpu(5))]),
        "a",
        &[("cpu", "default")],
    );
    env.admitted(
        wl("ns", "lent").prio(10).ps("main", 1, &[("cpu", cpu(5))]),
        "a",
        &[("cpu", "default")],
    );
    env.submit(wl("ns", "new").ps("main", 1, &[("cpu", cpu(3))]));
    env.schedule();
    env.assert_pending("ns/new", "WaitingForQuota");
}

#[test]
fn fair_share_of_huge_lendable_quota_saturates() {
    let mut env = Env::fair();
    env.flavor("f1").flavor("f2").ns("ns", &[]);
    env.cq_lq(
        cq("a").cohort("co").group(
            &["cpu"],
            vec![fq("f1", vec![rq("cpu", 0)]), fq("f2", vec![rq("cpu", 0)])],
        ),
        "ns",
    );
    env.cq(cq("lender").cohort("co").group(
        &["cpu"],
        vec![
            fq("f1", vec![rq("cpu", i64::MAX)]),
            fq("f2", vec![rq("cpu", i64::MAX)]),
        ],
    ));
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted("ns/w");
    let u = env.engine.cluster_queue_usage("a").expect("usage");
    // 1 cpu borrowed out of an effectively unbounded lendable amount: the smallest share.
    assert!(u.weighted_share <= 1, "{}", u.weighted_share);
}
