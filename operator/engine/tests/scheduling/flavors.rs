//! Flavor assignment: taints, tolerations, node selectors/affinity, fungibility, resources.

use std::collections::BTreeMap;

use crate::common::*;
use sluice_engine::*;

fn two_flavor_env() -> Env {
    let mut env = Env::new();
    env.ns("ns", &[]);
    env.flavor_obj(Flavor {
        name: "gpu-tainted".into(),
        node_labels: BTreeMap::from([("pool".to_string(), "gpu".to_string())]),
        node_taints: vec![Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: TaintEffect::NoSchedule,
        }],
        ..Flavor::default()
    });
    env.flavor_obj(Flavor {
        name: "general".into(),
        node_labels: BTreeMap::from([("pool".to_string(), "general".to_string())]),
        ..Flavor::default()
    });
    env.cq_lq(
        cq("cq").group(
            &["cpu"],
            vec![
                fq("gpu-tainted", vec![rq("cpu", cpu(10))]),
                fq("general", vec![rq("cpu", cpu(10))]),
            ],
        ),
        "ns",
    );
    env
}

#[test]
fn untolerated_taint_skips_flavor() {
    let mut env = two_flavor_env();
    env.submit(wl("ns", "plain").ps("main", 1, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("ns/plain", "cpu", "general", cpu(1));
}

#[test]
fn toleration_allows_tainted_flavor() {
    let mut env = two_flavor_env();
    env.submit(
        wl("ns", "tol")
            .ps("main", 1, &[("cpu", cpu(1))])
            .tolerate(Toleration {
                key: Some("dedicated".into()),
                operator: TolerationOperator::Equal,
                value: Some("gpu".into()),
                effect: Some(TaintEffect::NoSchedule),
            }),
    );
    env.schedule();
    env.assert_admitted_on("ns/tol", "cpu", "gpu-tainted", cpu(1));
}

#[test]
fn flavor_tolerations_tolerate_its_own_taints() {
    let mut env = two_flavor_env();
    env.flavor_obj(Flavor {
        name: "gpu-tainted".into(),
        node_labels: BTreeMap::from([("pool".to_string(), "gpu".to_string())]),
        node_taints: vec![Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: TaintEffect::NoSchedule,
        }],
        tolerations: vec![Toleration {
            key: Some("dedicated".into()),
            operator: TolerationOperator::Exists,
            value: None,
            effect: None,
        }],
        topology_name: None,
    });
    env.submit(wl("ns", "plain").ps("main", 1, &[("cpu", cpu(1))]));
    env.schedule();
    env.assert_admitted_on("ns/plain", "cpu", "gpu-tainted", cpu(1));
}

#[test]
fn node_selector_filters_on_flavor_label_keys_only() {
    let mut env = two_flavor_env();
    env.submit(
        wl("ns", "sel")
            .ps("main", 1, &[("cpu", cpu(1))])
            .tolerate(Toleration {
                key: None,
                operator: TolerationOperator::Exists,
                value: None,
                effect: None,
            })
            .node_selector("pool", "general")
            .node_selector("zone", "ignored-by-flavors"),
    );
    env.schedule();
    env.assert_admitted_on("ns/sel", "cpu", "general", cpu(1));
}

#[test]
fn required_affinity_filters_flavors_and_reports_no_matching_flavor() {
    let mut env = two_flavor_env();
    env.submit(
        wl("ns", "aff")
            .ps("main", 1, &[("cpu", cpu(1))])
            .affinity(vec![NodeSelectorRequirement {
                key: "pool".into(),
                operator: NodeSelectorOperator::In,
                values: vec!["nowhere".into()],
            }]),
    );
    env.schedule();
    let msg = env.assert_pending("ns/aff", "NoMatchingFlavor");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: flavor general doesn't match node affinity, untolerated taint {dedicated gpu NoSchedule <nil>} in flavor gpu-tainted"
    );
}

#[test]
fn resource_not_covered_is_no_matching_flavor() {
    let mut env = two_flavor_env();
    env.submit(wl("ns", "gpu").ps("main", 1, &[("cpu", cpu(1)), ("nvidia.com/gpu", 1)]));
    env.schedule();
    let msg = env.assert_pending("ns/gpu", "NoMatchingFlavor");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"
    );
}

#[test]
fn ignore_undeclared_leaves_uncovered_resources_out_of_the_quota_check() {
    // Kueue's `resources.quotaCheckStrategy: IgnoreUndeclared`: the GPU no resource group covers is neither a
    // reason to stay pending nor part of the admission, while the covered cpu is still checked.
    let mut env = Env::with_config(EngineConfig {
        ignore_undeclared_resources: true,
        ..EngineConfig::default()
    });
    env.ns("ns", &[]).flavor("general");
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("general", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    env.submit(wl("ns", "gpu").ps("main", 2, &[("cpu", cpu(3)), ("nvidia.com/gpu", 1)]));
    env.schedule();
    let a = env.assert_admitted("ns/gpu");
    let ps = &a.pod_set_assignments[0];
    assert_eq!(
        ps.flavors,
        BTreeMap::from([("cpu".to_string(), "general".to_string())])
    );
    assert_eq!(
        ps.resource_usage,
        BTreeMap::from([("cpu".to_string(), cpu(6))])
    );
    env.submit(wl("ns", "more").ps("main", 1, &[("cpu", cpu(5)), ("nvidia.com/gpu", 1)]));
    env.schedule();
    let msg = env.assert_pending("ns/more", "WaitingForQuota");
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor general, 1 more needed"
    );
}

#[test]
fn pods_resource_is_counted_when_covered() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(
            &["cpu", "pods"],
            vec![fq("default", vec![rq("cpu", cpu(100)), rq("pods", 3)])],
        ),
        "ns",
    );
    env.submit(wl("ns", "four").ps("main", 4, &[("cpu", cpu(1))]));
    env.submit(
        wl("ns", "three")
            .created(1)
            .ps("main", 3, &[("cpu", cpu(1))]),
    );
    env.schedule();
    env.schedule();
    let msg = env.assert_pending("ns/four", "ExceedsMaxQuota");
    assert!(msg.contains("for pods in flavor default"), "{msg}");
    let a = env.assert_admitted("ns/three");
    assert_eq!(a.pod_set_assignments[0].resource_usage["pods"], 3);
}

fn fungibility_env(borrow: FungibilityPolicy, preempt: FungibilityPolicy) -> Env {
    let mut env = Env::new();
    env.flavor("first").flavor("second").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .cohort("co")
            .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
            .fungibility(borrow, preempt, None)
            .group(
                &["cpu"],
                vec![
                    fq("first", vec![rq("cpu", cpu(4))]),
                    fq("second", vec![rq("cpu", cpu(10))]),
                ],
            ),
        "ns",
    );
    env.cq(cq("lender").cohort("co").group(
        &["cpu"],
        vec![
            fq("first", vec![rq("cpu", cpu(10))]),
            fq("second", vec![rq("cpu", 0)]),
        ],
    ));
    env
}

#[test]
fn when_can_borrow_may_stop_search_borrows_in_first_flavor() {
    let mut env = fungibility_env(
        FungibilityPolicy::MayStopSearch,
        FungibilityPolicy::TryNextFlavor,
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(6))]));
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "first", cpu(6));
}

#[test]
fn when_can_borrow_try_next_flavor_prefers_non_borrowing_flavor() {
    let mut env = fungibility_env(
        FungibilityPolicy::TryNextFlavor,
        FungibilityPolicy::TryNextFlavor,
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(6))]));
    env.schedule();
    env.assert_admitted_on("ns/w", "cpu", "second", cpu(6));
}

#[test]
fn when_can_preempt_try_next_flavor_uses_fitting_second_flavor() {
    let mut env = fungibility_env(
        FungibilityPolicy::MayStopSearch,
        FungibilityPolicy::TryNextFlavor,
    );
    env.admitted(
        wl("ns", "low").prio(-1).ps("main", 1, &[("cpu", cpu(4))]),
        "cq",
        &[("cpu", "first")],
    );
    env.apply(Event::UpsertClusterQueue(
        cq("lender")
            .cohort("co")
            .group(
                &["cpu"],
                vec![
                    fq("first", vec![rq("cpu", 0)]),
                    fq("second", vec![rq("cpu", 0)]),
                ],
            )
            .build(),
    ));
    env.submit(wl("ns", "high").ps("main", 1, &[("cpu", cpu(4))]));
    let ds = env.schedule();
    assert!(evictions(&ds).is_empty());
    env.assert_admitted_on("ns/high", "cpu", "second", cpu(4));
}

#[test]
fn when_can_preempt_may_stop_search_preempts_in_first_flavor() {
    let mut env = fungibility_env(
        FungibilityPolicy::MayStopSearch,
        FungibilityPolicy::MayStopSearch,
    );
    env.admitted(
        wl("ns", "low").prio(-1).ps("main", 1, &[("cpu", cpu(4))]),
        "cq",
        &[("cpu", "first")],
    );
    env.apply(Event::UpsertClusterQueue(
        cq("lender")
            .cohort("co")
            .group(
                &["cpu"],
                vec![
                    fq("first", vec![rq("cpu", 0)]),
                    fq("second", vec![rq("cpu", 0)]),
                ],
            )
            .build(),
    ));
    env.submit(wl("ns", "high").ps("main", 1, &[("cpu", cpu(4))]));
    let ds = env.schedule();
    assert_eq!(
        evictions(&ds),
        vec![("ns/low".to_string(), Some("InClusterQueue".to_string()))]
    );
}

#[test]
fn earlier_pod_sets_count_against_the_same_flavor() {
    let mut env = Env::new();
    env.flavor("a").flavor("b").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(
            &["cpu"],
            vec![
                fq("a", vec![rq("cpu", cpu(5))]),
                fq("b", vec![rq("cpu", cpu(5))]),
            ],
        ),
        "ns",
    );
    env.submit(
        wl("ns", "w")
            .ps("p1", 1, &[("cpu", cpu(3))])
            .ps("p2", 1, &[("cpu", cpu(3))]),
    );
    env.schedule();
    let a = env.assert_admitted("ns/w");
    assert_eq!(a.pod_set_assignments[0].flavors["cpu"], "a");
    assert_eq!(a.pod_set_assignments[1].flavors["cpu"], "b");
}

#[test]
fn missing_flavor_makes_cluster_queue_inactive() {
    let mut env = Env::new();
    env.ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("later", vec![rq("cpu", cpu(5))])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(1))]));
    assert_eq!(
        env.assert_pending("ns/w", "Inadmissible"),
        "ClusterQueue cq is inactive"
    );
    assert_eq!(
        env.engine
            .cluster_queue_usage("cq")
            .unwrap()
            .inactive_reason,
        "FlavorNotFound"
    );
    env.flavor("later");
    env.schedule();
    env.assert_admitted("ns/w");
}

#[test]
fn flavor_scan_progress_resumes_after_the_last_tried_flavor() {
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
    env.submit(wl("ns", "x1").ps("main", 1, &[("cpu", cpu(5))]));
    env.submit(
        wl("ns", "y1")
            .queue("y")
            .prio(1)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.schedule();
    env.assert_admitted_on("ns/y1", "cpu", "f1", cpu(5));
    assert_eq!(
        env.assert_pending("ns/x1", "WaitingForQuota"),
        "Workload no longer fits after processing another workload"
    );
    // f1 is free again, but x1 resumes its scan after f1 (Kueue's FlavorFungibilityPreserveScanProgress).
    env.apply(Event::FinishWorkload(key_of("ns/y1")));
    assert!(env.engine.has_work());
    env.schedule();
    env.assert_admitted_on("ns/x1", "cpu", "f2", cpu(5));
}

/// Workloads admitted alike share an admission, and one that differs in any part of it (pod set name, count,
/// flavor, ClusterQueue) gets its own: each admission reads exactly as if it were built for that workload alone.
#[test]
fn admissions_shared_between_alike_workloads_are_exact() {
    let mut env = two_flavor_env();
    env.cq_lq(
        cq("other").group(&["cpu"], vec![fq("general", vec![rq("cpu", cpu(10))])]),
        "ns2",
    );
    env.ns("ns2", &[]);
    env.submit(wl("ns", "a").ps("main", 2, &[("cpu", cpu(1))]));
    env.submit(wl("ns", "b").ps("main", 2, &[("cpu", cpu(1))]));
    env.submit(wl("ns", "c").ps("workers", 2, &[("cpu", cpu(1))]));
    env.submit(wl("ns", "d").ps("main", 3, &[("cpu", cpu(1))]));
    env.submit(wl("ns2", "e").ps("main", 2, &[("cpu", cpu(1))]));
    // Pod sets asking for nothing differ only in their counts.
    env.submit(wl("ns", "f").ps("main", 1, &[("cpu", 0)]));
    env.submit(wl("ns", "g").ps("main", 2, &[("cpu", 0)]));
    // One head per ClusterQueue per cycle.
    for _ in 0..6 {
        env.schedule();
    }
    let expect = |cq: &str, name: &str, count: i32| Admission {
        cluster_queue: cq.into(),
        pod_set_assignments: vec![PodSetAssignment {
            name: name.into(),
            flavors: BTreeMap::from([("cpu".to_string(), "general".to_string())]),
            resource_usage: BTreeMap::from([("cpu".to_string(), cpu(i64::from(count)))]),
            count,
        }],
    };
    assert_eq!(env.assert_admitted("ns/a"), expect("cq", "main", 2));
    assert_eq!(env.assert_admitted("ns/b"), expect("cq", "main", 2));
    assert_eq!(env.assert_admitted("ns/c"), expect("cq", "workers", 2));
    assert_eq!(env.assert_admitted("ns/d"), expect("cq", "main", 3));
    assert_eq!(env.assert_admitted("ns2/e"), expect("other", "main", 2));
    for (name, count) in [("ns/f", 1), ("ns/g", 2)] {
        let a = env.assert_admitted(name);
        assert_eq!(a.pod_set_assignments[0].count, count, "{name}");
    }
}
