//! Quota tree: borrowing and lending limits, hierarchical cohorts, cycles, status data, errors.

use crate::common::*;
use sluice_engine::*;

fn pair(bl: Option<i64>, ll: Option<i64>) -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("borrower").cohort("co").group(
            &["cpu"],
            vec![fq("default", vec![rql("cpu", cpu(5), bl, None)])],
        ),
        "ns",
    );
    env.cq(cq("lender").cohort("co").group(
        &["cpu"],
        vec![fq("default", vec![rql("cpu", cpu(10), None, ll)])],
    ));
    env
}

#[test]
fn borrowing_limit_caps_what_a_queue_can_take() {
    let mut env = pair(Some(cpu(2)), None);
    env.submit(wl("ns", "too-big").ps("main", 1, &[("cpu", cpu(8))]));
    env.submit(
        wl("ns", "fits")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(7))]),
    );
    env.schedule();
    env.schedule();
    let msg = env.assert_pending("ns/too-big", "ExceedsMaxQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered podsets requests (0) + current podset request (8) > maximum capacity (7)"
    );
    env.assert_admitted_on("ns/fits", "cpu", "default", cpu(7));
    let u = env.engine.cluster_queue_usage("borrower").unwrap();
    assert_eq!(
        u.flavors_reservation[0].resources[0],
        ResourceUsage {
            name: "cpu".into(),
            total: cpu(7),
            borrowed: cpu(2)
        }
    );
    assert_eq!(u.reserving_workloads, 1);
    assert_eq!(u.admitted_workloads, 1);
    assert_eq!(u.pending_workloads, 1);
}

#[test]
fn lending_limit_caps_what_a_queue_lends() {
    let mut env = pair(None, Some(cpu(3)));
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(9))]));
    env.schedule();
    let msg = env.assert_pending("ns/w", "ExceedsMaxQuota");
    assert!(msg.ends_with("> maximum capacity (8)"), "{msg}");
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(8))]));
    env.schedule();
    env.assert_admitted("ns/w");
}

#[test]
fn lender_keeps_capacity_it_does_not_lend() {
    let mut env = pair(None, Some(cpu(3)));
    env.lq("ns", "lender", "lender");
    env.admitted(
        wl("ns", "borrowing").ps("main", 1, &[("cpu", cpu(8))]),
        "borrower",
        &[("cpu", "default")],
    );
    env.submit(
        wl("ns", "own")
            .queue("lender")
            .ps("main", 1, &[("cpu", cpu(7))]),
    );
    env.schedule();
    env.assert_admitted("ns/own");
}

#[test]
fn cohort_quota_is_an_extra_shared_pool() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cohort(
        "root",
        None,
        vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("default", vec![rq("cpu", cpu(6))])],
        }],
    );
    env.cohort("mid", Some("root"), vec![]);
    env.cq_lq(
        cq("cq")
            .cohort("mid")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(1))])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(7))]));
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "default", cpu(7));
    env.submit(wl("ns", "w2").ps("main", 1, &[("cpu", 1)]));
    env.schedule();
    env.assert_pending("ns/w2", "WaitingForQuota");
}

#[test]
fn cohort_lending_limit_applies_towards_its_parent() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cohort("root", None, vec![]);
    env.cohort(
        "rich",
        Some("root"),
        vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("default", vec![rql("cpu", cpu(10), None, Some(cpu(4)))])],
        }],
    );
    env.cq(cq("rich-cq")
        .cohort("rich")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    env.cq_lq(
        cq("poor")
            .cohort("root")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(5))]));
    env.schedule();
    assert!(
        env.assert_pending("ns/w", "ExceedsMaxQuota")
            .ends_with("maximum capacity (4)")
    );
}

#[test]
fn cohort_cycle_disables_the_tree() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cohort("a", Some("b"), vec![])
        .cohort("b", Some("a"), vec![]);
    env.cq_lq(
        cq("cq")
            .cohort("a")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(5))])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(1))]));
    assert_eq!(
        env.assert_pending("ns/w", "Inadmissible"),
        "ClusterQueue cq is inactive"
    );
    let u = env.engine.cluster_queue_usage("cq").unwrap();
    assert!(!u.active);
    assert_eq!(u.inactive_reason, "CohortHasCycle");
    assert!(admits(&env.schedule()).is_empty());
    // Breaking the cycle re-enables the queue.
    env.cohort("b", None, vec![]);
    env.schedule();
    env.assert_admitted("ns/w");
}

/// A new ClusterQueue is linked alone (not by relinking the whole forest): wherever it lands (under a Cohort tree
/// with quota of its own, a Cohort named before its object exists, a Cohort cycle), the forest, the quotas and the
/// queues' states are what a whole relink makes (`check_invariants`, run after every event, compares them).
#[test]
fn queues_added_one_by_one_link_as_the_whole_forest_would() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let group = |n| {
        vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("default", vec![rq("cpu", cpu(n))])],
        }]
    };
    env.cohort("root", None, group(4));
    env.cohort("mid", Some("root"), vec![]);
    env.cq_lq(
        cq("a")
            .cohort("mid")
            .group(&["cpu"], group(1)[0].flavors.clone()),
        "ns",
    );
    // Named before its Cohort object exists, which then puts it under root.
    env.cq(cq("b")
        .cohort("later")
        .group(&["cpu"], group(2)[0].flavors.clone()));
    env.cohort("later", Some("root"), vec![]);
    env.cq(cq("c")
        .cohort("mid")
        .group(&["cpu"], group(3)[0].flavors.clone()));
    // Under a cycle: inactive, as its tree is.
    env.cohort("x", Some("y"), vec![])
        .cohort("y", Some("x"), vec![]);
    env.cq(cq("d")
        .cohort("x")
        .group(&["cpu"], group(1)[0].flavors.clone()));
    assert_eq!(
        env.engine.cluster_queue_usage("d").unwrap().inactive_reason,
        "CohortHasCycle"
    );
    // a borrows the whole tree: its 1, c's 3, b's 2 and root's own 4.
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(10))]));
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "default", cpu(10));
}

#[test]
fn implicit_cohort_links_queues() {
    let mut env = pair(None, None);
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(15))]));
    env.schedule();
    env.assert_admitted("ns/w");
    // Moving the lender out of the cohort removes the borrowed capacity for new workloads (the
    // running one now exceeds the shrunken tree, which the invariant checker would flag).
    env.check = false;
    env.cq(cq("lender").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]));
    env.submit(wl("ns", "w2").ps("main", 1, &[("cpu", 1)]));
    env.schedule();
    env.assert_pending("ns/w2", "WaitingForQuota");
}

#[test]
fn local_queue_usage_reports_its_workloads() {
    let mut env = pair(None, None);
    env.submit(wl("ns", "w").ps("main", 2, &[("cpu", cpu(2))]));
    env.submit(wl("ns", "p").created(5).ps("main", 1, &[("cpu", cpu(100))]));
    env.schedule();
    env.schedule();
    let u = env.engine.local_queue_usage("ns", "main").unwrap();
    assert_eq!(u.reserving_workloads, 1);
    assert_eq!(u.admitted_workloads, 1);
    assert_eq!(u.pending_workloads, 1);
    assert_eq!(u.flavors_usage[0].name, "default");
    assert_eq!(u.flavors_usage[0].resources[0].total, cpu(4));
    assert!(env.engine.local_queue_usage("ns", "missing").is_none());
}

#[test]
fn invalid_cluster_queues_are_rejected_with_field() {
    let mut engine = Engine::new(EngineConfig::default());
    let bad = cq("bad")
        .group(&["cpu", "memory"], vec![fq("default", vec![rq("cpu", 1)])])
        .build();
    let err = engine.apply(Event::UpsertClusterQueue(bad)).unwrap_err();
    let EngineError::Invalid {
        kind, name, field, ..
    } = &err;
    assert_eq!(
        (*kind, name.as_str(), field.as_str()),
        (
            "ClusterQueue",
            "bad",
            "spec.resourceGroups[0].flavors[0].resources"
        )
    );
    let negative = cq("neg")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", -1)])])
        .build();
    let err = engine
        .apply(Event::UpsertClusterQueue(negative))
        .unwrap_err();
    assert!(err.to_string().contains("nominalQuota"), "{err}");
    let lend_too_much = cq("l")
        .cohort("c")
        .group(
            &["cpu"],
            vec![fq("default", vec![rql("cpu", 1, None, Some(2))])],
        )
        .build();
    let err = engine
        .apply(Event::UpsertClusterQueue(lend_too_much))
        .unwrap_err();
    assert!(err.to_string().contains("lendingLimit"), "{err}");
    let bad_wl = wl("ns", "w").ps("main", 2, &[("cpu", 1)]).min(3).build();
    let err = engine
        .apply(Event::UpsertWorkload {
            workload: bad_wl,
            admission: None,
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("spec.podSets[0].minCount"),
        "{err}"
    );
    // Unknown resources are not an error at ingestion.
    let ok = wl("ns", "w")
        .ps("main", 1, &[("example.com/unknown", 1)])
        .build();
    assert!(
        engine
            .apply(Event::UpsertWorkload {
                workload: ok,
                admission: None
            })
            .is_ok()
    );
}

#[test]
fn deleting_a_cohort_object_removes_its_pool_but_keeps_the_implicit_cohort() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cohort(
        "co",
        None,
        vec![ResourceGroup {
            covered_resources: vec!["cpu".into()],
            flavors: vec![fq("default", vec![rq("cpu", cpu(6))])],
        }],
    );
    env.cq_lq(
        cq("a")
            .cohort("co")
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(1))])]),
        "ns",
    );
    env.cq(cq("b")
        .cohort("")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(4))])]));
    env.apply(Event::DeleteCohort("co".into()));
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(2))]));
    env.schedule();
    assert!(
        env.assert_pending("ns/w", "ExceedsMaxQuota")
            .ends_with("maximum capacity (1)")
    );
    env.cq(cq("b")
        .cohort("co")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(4))])]));
    env.schedule();
    env.assert_admitted("ns/w");
}

#[test]
fn reclaimable_pods_give_their_quota_back_to_waiting_workloads() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("q").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(8))])]),
        "ns",
    );
    // Four pods of 2 CPUs fill the queue; the next workload waits for 4.
    let job = || wl("ns", "job").ps("main", 4, &[("cpu", cpu(2))]);
    env.submit(job());
    env.schedule();
    env.assert_admitted_on("ns/job", "cpu", "default", cpu(8));
    env.submit(
        wl("ns", "next")
            .created(1)
            .ps("main", 1, &[("cpu", cpu(4))]),
    );
    env.schedule();
    env.assert_pending("ns/next", "WaitingForQuota");
    // One pod finished: not enough yet.
    let mut one = job().build();
    one.reclaimable = vec![("main".into(), 1)];
    env.apply(Event::UpsertWorkload {
        workload: one,
        admission: None,
    });
    env.schedule();
    env.assert_pending("ns/next", "WaitingForQuota");
    assert_eq!(
        env.engine
            .cluster_queue_usage("q")
            .unwrap()
            .flavors_reservation[0]
            .resources[0]
            .total,
        cpu(6)
    );
    // Two finished: their 4 CPUs go to the waiting workload, the job's admission itself unchanged.
    let mut two = job().build();
    two.reclaimable = vec![("main".into(), 2)];
    env.apply(Event::UpsertWorkload {
        workload: two,
        admission: None,
    });
    env.schedule();
    env.assert_admitted("ns/next");
    assert_eq!(
        env.assert_admitted("ns/job").pod_set_assignments[0].count,
        4
    );
    assert_eq!(
        env.engine
            .cluster_queue_usage("q")
            .unwrap()
            .flavors_reservation[0]
            .resources[0]
            .total,
        cpu(8)
    );
}
