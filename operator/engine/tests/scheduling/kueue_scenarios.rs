//! Kueue's TestSchedule / TestPreemption / TestScheduleForFairSharing scenarios (kueue.md §4).

use crate::common::*;
use sluice_engine::*;

fn fixture() -> Env {
    let mut env = Env::new();
    kueue_fixture(&mut env);
    env
}

#[test]
fn s01_admit_in_different_cohorts() {
    let mut env = fixture();
    env.submit(wl("sales", "new").ps("one", 1, &[("cpu", cpu(1))]));
    env.submit(wl("eng-alpha", "new").ps("one", 51, &[("cpu", cpu(1))]));
    let ds = env.schedule();
    assert_eq!(admits(&ds), vec!["eng-alpha/new", "sales/new"]);
    env.assert_admitted_on("sales/new", "cpu", "default", cpu(1));
    // Borrows 1 on on-demand and stops there (MayStopSearch) although spot has 100 free.
    env.assert_admitted_on("eng-alpha/new", "cpu", "on-demand", cpu(51));
}

#[test]
fn s02_admit_in_same_cohort_without_borrowing() {
    let mut env = fixture();
    env.submit(wl("eng-alpha", "new").ps("one", 40, &[("cpu", cpu(1))]));
    env.submit(wl("eng-beta", "new").ps("one", 40, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("eng-alpha/new", "cpu", "on-demand", cpu(40));
    env.assert_admitted_on("eng-beta/new", "cpu", "on-demand", cpu(40));
}

#[test]
fn s03_assign_multiple_resources_and_flavors() {
    let mut env = fixture();
    env.submit(
        wl("eng-beta", "new")
            .ps("one", 10, &[("cpu", cpu(6)), ("example.com/gpu", 1)])
            .ps("two", 40, &[("cpu", cpu(1))]),
    );
    env.schedule();
    let a = env.assert_admitted("eng-beta/new");
    let one = &a.pod_set_assignments[0];
    assert_eq!(one.flavors["cpu"], "on-demand");
    assert_eq!(one.flavors["example.com/gpu"], "model-a");
    assert_eq!(one.resource_usage["cpu"], cpu(60));
    assert_eq!(one.resource_usage["example.com/gpu"], 10);
    let two = &a.pod_set_assignments[1];
    assert_eq!(two.flavors["cpu"], "spot");
    assert_eq!(two.resource_usage["cpu"], cpu(40));
}

#[test]
fn s04_cannot_borrow_if_cohort_was_assigned_and_would_overadmit() {
    let mut env = fixture();
    env.submit(wl("eng-alpha", "new").ps("one", 45, &[("cpu", cpu(1))]));
    env.submit(wl("eng-beta", "new").ps("one", 56, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("eng-alpha/new", "cpu", "on-demand", cpu(45));
    let msg = env.assert_pending("eng-beta/new", "WaitingForQuota");
    assert_eq!(
        msg,
        "Workload no longer fits after processing another workload"
    );
    assert_eq!(
        env.engine.pending_workloads("eng-beta"),
        vec![key_of("eng-beta/new")]
    );
}

#[test]
fn s04b_can_borrow_if_cohort_was_assigned_and_will_not_overadmit() {
    let mut env = fixture();
    env.submit(wl("eng-alpha", "new").ps("one", 45, &[("cpu", cpu(1))]));
    env.submit(wl("eng-beta", "new").ps("one", 55, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("eng-alpha/new", "cpu", "on-demand", cpu(45));
    env.assert_admitted_on("eng-beta/new", "cpu", "on-demand", cpu(55));
}

#[test]
fn s05_not_enough_resources_to_borrow_fallback_to_next_flavor() {
    let mut env = fixture();
    env.admitted(
        wl("eng-beta", "existing").ps("one", 45, &[("cpu", cpu(1))]),
        "eng-beta",
        &[("cpu", "on-demand")],
    );
    env.submit(wl("eng-alpha", "new").ps("one", 60, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("eng-alpha/new", "cpu", "spot", cpu(60));
}

#[test]
fn s06_single_cluster_queue_full() {
    let mut env = fixture();
    env.admitted(
        wl("sales", "assigned").ps("one", 40, &[("cpu", cpu(1))]),
        "sales",
        &[("cpu", "default")],
    );
    env.submit(wl("sales", "new").ps("one", 11, &[("cpu", cpu(1))]));
    env.schedule();
    let msg = env.assert_pending("sales/new", "WaitingForQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor default, 1 more needed"
    );
    // StrictFIFO: stays at the head of the heap.
    assert_eq!(
        env.engine.pending_workloads("sales"),
        vec![key_of("sales/new")]
    );
    assert!(
        !env.engine.has_work(),
        "nothing changed since the head was tried"
    );
}

#[test]
fn s07_workload_exceeds_lending_limit_when_borrowing_in_cohort() {
    let mut env = fixture();
    env.admitted(
        wl("lend", "a").ps("main", 1, &[("cpu", cpu(2))]),
        "lend-b",
        &[("cpu", "default")],
    );
    env.submit(
        wl("lend", "b")
            .queue("lend-b-queue")
            .ps("main", 1, &[("cpu", cpu(3))]),
    );
    env.schedule();
    let msg = env.assert_pending("lend/b", "WaitingForQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"
    );
    let u = env.engine.cluster_queue_usage("lend-b").unwrap();
    assert_eq!(u.pending_workloads, 1);
}

fn hierarchical_lending(lending: Quantity, pending: i64) -> Env {
    let mut env = fixture();
    env.cohort("root", None, vec![])
        .cohort("child", Some("root"), vec![]);
    env.cq(cq("cq-lender").cohort("child").group(
        &["cpu"],
        vec![fq(
            "on-demand",
            vec![rql("cpu", cpu(10), None, Some(lending))],
        )],
    ));
    env.cq(cq("cq-borrower").cohort("child").group(
        &["cpu"],
        vec![fq(
            "on-demand",
            vec![rql("cpu", cpu(5), Some(cpu(10)), None)],
        )],
    ));
    env.lq("eng-alpha", "lq-borrower", "cq-borrower");
    env.admitted(
        wl("eng-alpha", "wl-existing").ps("main", 1, &[("cpu", cpu(5))]),
        "cq-borrower",
        &[("cpu", "on-demand")],
    );
    env.submit(wl("eng-alpha", "wl-pending").queue("lq-borrower").ps(
        "main",
        1,
        &[("cpu", cpu(pending))],
    ));
    env.schedule();
    env
}

#[test]
fn s08_hierarchical_cohort_respects_lending_limit() {
    let env = hierarchical_lending(cpu(3), 4);
    let msg = env.assert_pending("eng-alpha/wl-pending", "WaitingForQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed"
    );
    let env = hierarchical_lending(cpu(5), 5);
    env.assert_admitted_on("eng-alpha/wl-pending", "cpu", "on-demand", cpu(5));
}

#[test]
fn s09_preempt_workloads_in_cluster_queue_and_cohort() {
    let mut env = fixture();
    env.admitted(
        wl("eng-alpha", "use-all-spot").ps("main", 1, &[("cpu", cpu(100))]),
        "eng-alpha",
        &[("cpu", "spot")],
    );
    env.admitted(
        wl("eng-alpha", "borrower").ps("main", 1, &[("cpu", cpu(60))]),
        "eng-alpha",
        &[("cpu", "on-demand")],
    );
    env.admitted(
        wl("eng-beta", "low-1")
            .prio(-1)
            .ps("main", 1, &[("cpu", cpu(30))]),
        "eng-beta",
        &[("cpu", "on-demand")],
    );
    env.admitted(
        wl("eng-beta", "low-2")
            .prio(-2)
            .ps("main", 1, &[("cpu", cpu(10))]),
        "eng-beta",
        &[("cpu", "on-demand")],
    );
    env.submit(wl("eng-beta", "preemptor").ps("main", 1, &[("cpu", cpu(20))]));
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![
            (
                "eng-alpha/borrower".to_string(),
                Some("InCohortReclamation".to_string())
            ),
            (
                "eng-beta/low-2".to_string(),
                Some("InClusterQueue".to_string())
            ),
        ]
    );
    let msg = env.assert_pending("eng-beta/preemptor", "WaitingForPreemptedWorkloads");
    assert!(
        msg.ends_with(". Pending the preemption of 2 workload(s)"),
        "{msg}"
    );
    assert_eq!(
        env.state("eng-beta/low-1"),
        WorkloadState::Admitted(env.assert_admitted("eng-beta/low-1"))
    );
    let borrower_msg = ds
        .iter()
        .find_map(|d| match d {
            Decision::Evict {
                workload,
                message,
                preemptor,
                ..
            } if workload.name == "borrower" => {
                assert_eq!(preemptor.as_ref(), Some(&key_of("eng-beta/preemptor")));
                Some(message.clone())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(
        borrower_msg,
        "Preempted to accommodate a workload (UID: preemptor, JobUID: UNKNOWN) due to reclamation within the cohort; preemptor path: /eng/eng-beta; preemptee path: /eng/eng-alpha"
    );
    // No duplicate evictions while the victims are still terminating.
    let again = env.schedule();
    assert!(evictions(&again).is_empty(), "{again:?}");
    env.assert_pending("eng-beta/preemptor", "WaitingForPreemptedWorkloads");
    // Once the victims are gone the preemptor is admitted.
    env.complete_evictions(&ds);
    env.schedule();
    env.assert_admitted_on("eng-beta/preemptor", "cpu", "on-demand", cpu(20));
}

#[test]
fn s10_partial_admission_single_podset() {
    let mut env = fixture();
    env.submit(wl("sales", "new").ps("one", 50, &[("cpu", cpu(2))]).min(20));
    env.schedule();
    let a = env.assert_admitted("sales/new");
    assert_eq!(a.pod_set_assignments[0].count, 25);
    assert_eq!(a.pod_set_assignments[0].resource_usage["cpu"], cpu(50));
}

#[test]
fn s10b_partial_admission_multiple_podsets() {
    let mut env = fixture();
    env.submit(
        wl("sales", "new")
            .ps("one", 20, &[("cpu", cpu(1))])
            .ps("two", 30, &[("cpu", cpu(1))])
            .min(10)
            .ps("three", 15, &[("cpu", cpu(1))])
            .min(5),
    );
    env.schedule();
    let a = env.assert_admitted("sales/new");
    let counts: Vec<i32> = a.pod_set_assignments.iter().map(|p| p.count).collect();
    assert_eq!(counts, vec![20, 20, 10]);
}

#[test]
fn s10c_partial_admission_disabled_exceeds_max_quota() {
    let mut env = Env::with_config(EngineConfig {
        fair_sharing: None,
        partial_admission: false,
        ..EngineConfig::default()
    });
    kueue_fixture(&mut env);
    env.submit(
        wl("sales", "new")
            .ps("one", 20, &[("cpu", cpu(1))])
            .ps("two", 30, &[("cpu", cpu(1))])
            .min(10)
            .ps("three", 15, &[("cpu", cpu(1))])
            .min(5),
    );
    env.schedule();
    let msg = env.assert_pending("sales/new", "ExceedsMaxQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set three: insufficient quota for cpu in flavor default, previously considered podsets requests (50) + current podset request (15) > maximum capacity (50)"
    );
}

#[test]
fn s10d_full_assignment_with_preemption_beats_partial_admission() {
    let mut env = fixture();
    env.admitted(
        wl("eng-beta", "old")
            .prio(-4)
            .ps("one", 10, &[("example.com/gpu", 1)]),
        "eng-beta",
        &[("example.com/gpu", "model-a")],
    );
    env.submit(
        wl("eng-beta", "new")
            .prio(4)
            .ps("one", 20, &[("example.com/gpu", 1)])
            .min(10),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "eng-beta/old".to_string(),
            Some("InClusterQueue".to_string())
        )]
    );
    env.assert_pending("eng-beta/new", "WaitingForPreemptedWorkloads");
}

#[test]
fn s11_hierarchical_workload_borrowing_less_is_scheduled_first() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cohort("root", None, vec![]);
    env.cohort(
        "guaranteed",
        Some("root"),
        vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("default", vec![rq("cpu", cpu(4))])],
        }],
    );
    env.cq(cq("guaranteed")
        .cohort("guaranteed")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    env.cq(cq("best-effort")
        .cohort("root")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    env.lq("ns", "g", "guaranteed").lq("ns", "b", "best-effort");
    env.submit(
        wl("ns", "guaranteed")
            .queue("g")
            .ps("main", 1, &[("cpu", cpu(4))]),
    );
    env.submit(
        wl("ns", "best-effort")
            .queue("b")
            .prio(3)
            .ps("main", 1, &[("cpu", cpu(4))]),
    );
    env.schedule();
    env.assert_admitted_on("ns/guaranteed", "cpu", "default", cpu(4));
    let msg = env.assert_pending("ns/best-effort", "WaitingForQuota");
    assert_eq!(
        msg,
        "Workload no longer fits after processing another workload"
    );
}

fn preference_env(pref: FlavorPreference) -> (Env, Vec<Decision>) {
    let mut env = Env::new();
    env.flavor("on-demand").flavor("spot").ns("default", &[]);
    env.cq(cq("pob-cq")
        .cohort("pob-cohort")
        .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
        .fungibility(
            FungibilityPolicy::TryNextFlavor,
            FungibilityPolicy::TryNextFlavor,
            Some(pref),
        )
        .group(
            &["cpu"],
            vec![
                fq("on-demand", vec![rql("cpu", cpu(5), Some(0), None)]),
                fq("spot", vec![rql("cpu", 0, Some(cpu(5)), None)]),
            ],
        ));
    env.cq(cq("pob-lender").cohort("pob-cohort").group(
        &["cpu"],
        vec![
            fq("on-demand", vec![rq("cpu", 0)]),
            fq("spot", vec![rq("cpu", cpu(5))]),
        ],
    ));
    env.lq("default", "pob-queue", "pob-cq");
    env.admitted(
        wl("default", "low")
            .queue("pob-queue")
            .prio(-1)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "pob-cq",
        &[("cpu", "on-demand")],
    );
    env.submit(
        wl("default", "high")
            .queue("pob-queue")
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    let ds = env.schedule();
    (env, ds)
}

#[test]
fn s12_flavor_preference_preemption_over_borrowing() {
    let (env, ds) = preference_env(FlavorPreference::PreemptionOverBorrowing);
    assert_eq!(
        evictions(&ds),
        vec![(
            "default/low".to_string(),
            Some("InClusterQueue".to_string())
        )]
    );
    let msg = env.assert_pending("default/high", "WaitingForPreemptedWorkloads");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 5 more needed. Pending the preemption of 1 workload(s)"
    );
    let evict_msg = ds
        .iter()
        .find_map(|d| match d {
            Decision::Evict { message, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        evict_msg,
        "Preempted to accommodate a workload (UID: high, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: /pob-cohort/pob-cq; preemptee path: /pob-cohort/pob-cq"
    );
}

#[test]
fn s12b_flavor_preference_borrowing_over_preemption() {
    let (env, ds) = preference_env(FlavorPreference::BorrowingOverPreemption);
    assert!(evictions(&ds).is_empty());
    env.assert_admitted_on("default/high", "cpu", "spot", cpu(5));
}

#[test]
fn s13_prefer_reclamation_over_cluster_queue_priority_preemption() {
    let mut env = Env::new();
    env.flavor("on-demand").flavor("spot").ns("default", &[]);
    let gpu = "example.com/gpu";
    env.cq(cq("other-alpha")
        .cohort("other")
        .preemption(ReclaimPolicy::LowerPriority, WithinCqPolicy::LowerPriority)
        .group(
            &[gpu],
            vec![
                fq("on-demand", vec![rq(gpu, 10)]),
                fq("spot", vec![rq(gpu, 10)]),
            ],
        ));
    env.cq(cq("other-beta")
        .cohort("other")
        .preemption(ReclaimPolicy::LowerPriority, WithinCqPolicy::LowerPriority)
        .group(
            &[gpu],
            vec![
                fq("on-demand", vec![rq(gpu, 0)]),
                fq("spot", vec![rq(gpu, 0)]),
            ],
        ));
    env.lq("default", "alpha", "other-alpha")
        .lq("default", "beta", "other-beta");
    env.admitted(
        wl("default", "a1")
            .queue("alpha")
            .prio(50)
            .ps("main", 1, &[(gpu, 5)]),
        "other-alpha",
        &[(gpu, "on-demand")],
    );
    env.admitted(
        wl("default", "b1")
            .queue("beta")
            .prio(50)
            .ps("main", 1, &[(gpu, 5)]),
        "other-beta",
        &[(gpu, "spot")],
    );
    env.submit(
        wl("default", "preemptor")
            .queue("alpha")
            .prio(100)
            .ps("main", 1, &[(gpu, 6)]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "default/b1".to_string(),
            Some("InCohortReclamation".to_string())
        )]
    );
}

fn borrow_within_cohort_env() -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("default", &[]);
    let mk = |name: &str, nominal: i64, bl: i64| {
        cq(name)
            .cohort("with_shared_cq")
            .preemption(ReclaimPolicy::LowerPriority, WithinCqPolicy::Never)
            .borrow_within_cohort(Some(0))
            .group(
                &["cpu"],
                vec![fq(
                    "default",
                    vec![rql("cpu", cpu(nominal), Some(cpu(bl)), None)],
                )],
            )
    };
    env.cq(mk("a_standard", 1, 12))
        .cq(mk("b_standard", 1, 12))
        .cq(mk("a_best_effort", 1, 12))
        .cq(mk("b_best_effort", 0, 13));
    env.cq(cq("shared")
        .cohort("with_shared_cq")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]));
    for q in ["a_standard", "b_standard", "a_best_effort", "b_best_effort"] {
        env.lq("default", q, q);
    }
    env
}

#[test]
fn s14_borrow_within_cohort_reclaims_while_borrowing() {
    let mut env = borrow_within_cohort_env();
    env.admitted(
        wl("default", "a_best_effort_low")
            .queue("a_best_effort")
            .prio(-1)
            .ps("main", 1, &[("cpu", cpu(10))]),
        "a_best_effort",
        &[("cpu", "default")],
    );
    env.submit(
        wl("default", "incoming")
            .queue("a_standard")
            .ps("main", 1, &[("cpu", cpu(10))]),
    );
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "default/a_best_effort_low".to_string(),
            Some("InCohortReclaimWhileBorrowing".to_string())
        )]
    );
}

#[test]
fn s14b_borrow_within_cohort_respects_threshold() {
    let mut env = borrow_within_cohort_env();
    env.admitted(
        wl("default", "b_standard")
            .queue("b_standard")
            .prio(1)
            .ps("main", 1, &[("cpu", cpu(10))]),
        "b_standard",
        &[("cpu", "default")],
    );
    env.submit(wl("default", "incoming").queue("a_standard").prio(2).ps(
        "main",
        1,
        &[("cpu", cpu(10))],
    ));
    let ds = env.schedule();
    assert!(evictions(&ds).is_empty(), "{ds:?}");
    env.assert_pending("default/incoming", "WaitingForQuota");
}

#[test]
fn s14c_borrow_within_cohort_reclaims_without_borrowing() {
    let mut env = borrow_within_cohort_env();
    env.admitted(
        wl("default", "b_standard")
            .queue("b_standard")
            .prio(1)
            .ps("main", 1, &[("cpu", cpu(13))]),
        "b_standard",
        &[("cpu", "default")],
    );
    env.submit(wl("default", "incoming").queue("a_standard").prio(2).ps(
        "main",
        1,
        &[("cpu", cpu(1))],
    ));
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![(
            "default/b_standard".to_string(),
            Some("InCohortReclamation".to_string())
        )]
    );
}

fn fair_fixture() -> Env {
    let mut env = Env::fair();
    kueue_fixture(&mut env);
    env.cq(cq("eng-shared")
        .cohort("eng")
        .group(&["cpu"], vec![fq("on-demand", vec![rq("cpu", cpu(10))])]));
    env
}

#[test]
fn s15_fair_sharing_admits_lower_share_first() {
    let mut env = fair_fixture();
    env.admitted(
        wl("eng-alpha", "all").ps("main", 50, &[("cpu", cpu(1))]),
        "eng-alpha",
        &[("cpu", "on-demand")],
    );
    env.admitted(
        wl("eng-beta", "all").ps("main", 55, &[("cpu", cpu(1))]),
        "eng-beta",
        &[("cpu", "on-demand")],
    );
    env.submit(
        wl("eng-beta", "older_new")
            .created(0)
            .ps("main", 1, &[("cpu", cpu(1))]),
    );
    env.submit(
        wl("eng-alpha", "new")
            .created(10)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.schedule();
    env.assert_admitted_on("eng-alpha/new", "cpu", "on-demand", cpu(5));
    env.assert_pending("eng-beta/older_new", "WaitingForQuota");
}

#[test]
fn s15b_fair_sharing_preemption() {
    let mut env = Env::fair();
    kueue_fixture(&mut env);
    // Kueue's fixture puts 70 cpu into eng-gamma (nominal 50, borrowingLimit 0).
    env.check = false;
    env.cq(cq("eng-gamma").cohort("eng").group(
        &["cpu"],
        vec![fq("on-demand", vec![rql("cpu", cpu(50), Some(0), None)])],
    ));
    env.lq("eng-gamma", "main", "eng-gamma")
        .ns("eng-gamma", &[("dep", "eng")]);
    for i in 1..=4 {
        env.admitted(
            wl("eng-alpha", &format!("a{i}")).ps("main", 1, &[("cpu", cpu(20))]),
            "eng-alpha",
            &[("cpu", "on-demand")],
        );
    }
    env.admitted(
        wl("eng-alpha", "a-spot").ps("main", 1, &[("cpu", cpu(100))]),
        "eng-alpha",
        &[("cpu", "spot")],
    );
    env.admitted(
        wl("eng-gamma", "g1").ps("main", 1, &[("cpu", cpu(10))]),
        "eng-gamma",
        &[("cpu", "on-demand")],
    );
    for i in 2..=4 {
        env.admitted(
            wl("eng-gamma", &format!("g{i}")).ps("main", 1, &[("cpu", cpu(20))]),
            "eng-gamma",
            &[("cpu", "on-demand")],
        );
    }
    env.submit(wl("eng-beta", "preemptor").ps("main", 1, &[("cpu", cpu(30))]));
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![
            (
                "eng-alpha/a1".to_string(),
                Some("InCohortReclamation".to_string())
            ),
            (
                "eng-gamma/g1".to_string(),
                Some("InCohortReclamation".to_string())
            ),
        ]
    );
}
