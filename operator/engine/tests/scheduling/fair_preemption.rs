//! Kueue's TestFairPreemptions table (preemption_fair_test.go), driven through full cycles.

use crate::common::*;
use sluice_engine::*;

/// (name, cq, milli-cpu, priority)
type Admitted = (&'static str, &'static str, i64, i32);

fn run_case(
    admitted: &[Admitted],
    incoming: (&str, &str, i64),
    strategies: Option<Vec<FairSharingStrategy>>,
) -> Vec<(String, Option<String>)> {
    let mut fs = FairSharingConfig::default();
    if let Some(s) = strategies {
        fs.preemption_strategies = s;
    }
    let mut env = Env::with_config(EngineConfig {
        fair_sharing: Some(fs),
        partial_admission: true,
        ..EngineConfig::default()
    });
    env.flavor("default").ns("ns", &[]);
    for q in ["a", "b", "c"] {
        env.cq(cq(q)
            .cohort("all")
            .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
            .borrow_within_cohort(Some(-3))
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(3))])]));
        env.lq("ns", q, q);
    }
    env.cq(cq("preemptible")
        .cohort("all")
        .group(&["cpu"], vec![fq("default", vec![rq("cpu", 0)])]));
    env.lq("ns", "preemptible", "preemptible");
    for &(name, q, milli, prio) in admitted {
        env.admitted(
            wl("ns", name)
                .queue(q)
                .prio(prio)
                .ps("main", 1, &[("cpu", milli)]),
            q,
            &[("cpu", "default")],
        );
    }
    let (name, q, milli) = incoming;
    env.submit(wl("ns", name).queue(q).ps("main", 1, &[("cpu", milli)]));
    let ds = env.schedule();
    evictions(&ds)
        .into_iter()
        .map(|(k, r)| (k.trim_start_matches("ns/").to_string(), r))
        .collect()
}

fn units(spec: &[(&'static str, &'static str)]) -> Vec<Admitted> {
    spec.iter().map(|&(n, q)| (n, q, cpu(1), 0)).collect()
}

fn want(v: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    let mut out: Vec<_> = v
        .iter()
        .map(|(k, r)| (k.to_string(), Some(r.to_string())))
        .collect();
    out.sort();
    out
}

const RECLAIM: &str = "InCohortReclamation";
const FAIR: &str = "InCohortFairSharing";
const IN_CQ: &str = "InClusterQueue";

fn heavy_b() -> Vec<Admitted> {
    units(&[
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("b4", "b"),
        ("b5", "b"),
        ("c1", "c"),
    ])
}

#[test]
fn reclaim_nominal_from_user_using_the_most() {
    assert_eq!(
        run_case(&heavy_b(), ("c_incoming", "c", cpu(1)), None),
        want(&[("b1", RECLAIM)])
    );
}

#[test]
fn reclaim_borrowable_quota_from_user_using_the_most() {
    assert_eq!(
        run_case(&heavy_b(), ("a_incoming", "a", cpu(1)), None),
        want(&[("b1", FAIR)])
    );
}

#[test]
fn preempt_one_from_each_cq_borrowing() {
    let adm = [
        ("a1", "a", 500, 0),
        ("a2", "a", 500, 0),
        ("a3", "a", cpu(3), 0),
        ("b1", "b", 500, 0),
        ("b2", "b", 500, 0),
        ("b3", "b", cpu(3), 0),
    ];
    assert_eq!(
        run_case(&adm, ("c_incoming", "c", cpu(2)), None),
        want(&[("a1", RECLAIM), ("b1", RECLAIM)])
    );
}

#[test]
fn cannot_preempt_when_everyone_under_nominal() {
    let adm = units(&[
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("c1", "c"),
        ("c2", "c"),
        ("c3", "c"),
    ]);
    assert!(run_case(&adm, ("c_incoming", "c", cpu(1)), None).is_empty());
}

#[test]
fn cannot_preempt_when_it_would_switch_the_imbalance() {
    let adm = units(&[
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("b4", "b"),
        ("b5", "b"),
    ]);
    assert!(run_case(&adm, ("a_incoming", "a", cpu(2)), None).is_empty());
}

#[test]
fn can_preempt_lower_priority_workloads_from_same_cq() {
    let mut adm = vec![("a1_low", "a", cpu(1), -1), ("a2_low", "a", cpu(1), -1)];
    adm.extend(units(&[
        ("a3", "a"),
        ("a4", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("b4", "b"),
        ("b5", "b"),
    ]));
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", cpu(2)), None),
        want(&[("a1_low", IN_CQ), ("a2_low", IN_CQ)])
    );
}

#[test]
fn can_preempt_a_combination_of_same_cq_and_highest_user() {
    let mut adm = vec![("a_low", "a", cpu(1), -1)];
    adm.extend(units(&[
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("b4", "b"),
        ("b5", "b"),
        ("b6", "b"),
    ]));
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", cpu(2)), None),
        want(&[("a_low", IN_CQ), ("b1", FAIR)])
    );
}

#[test]
fn preempt_huge_workload_if_target_gets_lower_share() {
    assert_eq!(
        run_case(&[("b1", "b", cpu(9), 0)], ("a_incoming", "a", cpu(2)), None),
        want(&[("b1", RECLAIM)])
    );
}

#[test]
fn cannot_preempt_huge_workload_if_incoming_is_also_huge() {
    let adm = [("a1", "a", cpu(2), 0), ("b1", "b", cpu(7), 0)];
    assert!(run_case(&adm, ("a_incoming", "a", cpu(5)), None).is_empty());
}

#[test]
fn cannot_preempt_two_smaller_workloads_if_incoming_is_huge() {
    let adm = [
        ("b1", "b", cpu(2), 0),
        ("b2", "b", cpu(2), 0),
        ("b3", "b", cpu(3), 0),
    ];
    assert!(run_case(&adm, ("a_incoming", "a", cpu(6)), None).is_empty());
}

#[test]
fn preempt_from_target_and_others_even_if_over_nominal() {
    let adm = [
        ("a1_low", "a", cpu(2), -1),
        ("a2_low", "a", cpu(1), -1),
        ("b1", "b", cpu(3), 0),
        ("b2", "b", cpu(3), 0),
    ];
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", cpu(4)), None),
        want(&[("a1_low", IN_CQ), ("b1", FAIR)])
    );
}

#[test]
fn prefer_preempting_workloads_that_do_not_make_target_the_biggest_share() {
    let adm = [
        ("b1", "b", cpu(2), 0),
        ("b2", "b", cpu(1), 0),
        ("b3", "b", cpu(2), 0),
        ("c1", "c", cpu(1), 0),
    ];
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", 3500), None),
        want(&[("b2", FAIR)])
    );
}

#[test]
fn preempt_from_different_cqs_if_end_result_has_smaller_max_share() {
    let adm = [
        ("b1", "b", cpu(2), 0),
        ("b2", "b", 2500, 0),
        ("c1", "c", cpu(2), 0),
        ("c2", "c", 2500, 0),
    ];
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", 3500), None),
        want(&[("b1", FAIR), ("c1", FAIR)])
    );
}

#[test]
fn scenario_above_does_not_flap() {
    let adm = [
        ("a1", "a", 3500, 0),
        ("b2", "b", 2500, 0),
        ("c2", "c", 2500, 0),
    ];
    assert!(run_case(&adm, ("b_incoming", "b", cpu(2)), None).is_empty());
}

#[test]
fn cannot_preempt_if_candidate_cq_would_go_under_nominal() {
    let adm = [
        ("b1", "b", cpu(3), 0),
        ("b2", "b", cpu(3), 0),
        ("c1", "c", cpu(3), 0),
    ];
    assert!(run_case(&adm, ("a_incoming", "a", cpu(4)), None).is_empty());
}

#[test]
fn workloads_under_priority_threshold_not_capriciously_preempted() {
    let mut adm = units(&[
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
    ]);
    adm.extend([
        ("preemptible1", "preemptible", cpu(1), -3),
        ("preemptible2", "preemptible", cpu(1), -3),
        ("preemptible3", "preemptible", cpu(1), -3),
    ]);
    assert!(run_case(&adm, ("a_incoming", "a", cpu(2)), None).is_empty());
}

#[test]
fn less_than_initial_share_preempts_lower_priority_first_even_if_big() {
    let adm = [
        ("a1", "a", cpu(3), 0),
        ("b_low", "b", cpu(5), 0),
        ("b_high", "b", cpu(1), 1),
    ];
    let s = Some(vec![FairSharingStrategy::LessThanInitialShare]);
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", cpu(1)), s),
        want(&[("b_low", FAIR)])
    );
}

#[test]
fn less_than_or_equal_to_final_share_preempts_what_does_not_transfer_imbalance() {
    let adm = [
        ("a1", "a", cpu(3), 0),
        ("b_low", "b", cpu(5), 0),
        ("b_high", "b", cpu(1), 1),
    ];
    let s = Some(vec![FairSharingStrategy::LessThanOrEqualToFinalShare]);
    assert_eq!(
        run_case(&adm, ("a_incoming", "a", cpu(1)), s),
        want(&[("b_high", FAIR)])
    );
}

fn pool(n: i64) -> Vec<ResourceGroup> {
    vec![ResourceGroup {
        covered_resources: vec!["cpu".into()],
        flavors: vec![fq("default", vec![rq("cpu", cpu(n))])],
    }]
}

/// TestFairPreemptions "hierarchical preemption": weights on ClusterQueues and Cohorts.
#[test]
fn hierarchical_fair_preemption_with_weights() {
    let mut env = Env::fair();
    env.flavor("default").ns("ns", &[]);
    env.cohort("ROOT", None, pool(5));
    env.apply(Event::UpsertCohort(Cohort {
        name: "LEFT".into(),
        parent: Some("ROOT".into()),
        resource_groups: pool(5),
        fair_weight: 2.0,
    }));
    env.cohort("RIGHT", Some("ROOT"), pool(5));
    let q = |name: &str, co: &str, w: f64| {
        cq(name)
            .cohort(co)
            .weight(w)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(1))])])
    };
    env.cq(q("a", "LEFT", 2.0).preemption(ReclaimPolicy::Any, WithinCqPolicy::Never));
    env.cq(q("b", "LEFT", 1.0))
        .cq(q("c", "ROOT", 1.0))
        .cq(q("d", "RIGHT", 1.0))
        .cq(q("e", "RIGHT", 0.99));
    for name in ["a", "b", "c", "d", "e"] {
        env.lq("ns", name, name);
        if name == "a" {
            continue;
        }
        for p in 1..=5 {
            let w = format!("{name}{p}");
            env.admitted(
                wl("ns", &w)
                    .queue(name)
                    .prio(p)
                    .ps("main", 1, &[("cpu", cpu(1))]),
                name,
                &[("cpu", "default")],
            );
        }
    }
    env.submit(
        wl("ns", "unit")
            .queue("a")
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    let ds = env.schedule();
    let got: Vec<_> = evictions(&ds)
        .into_iter()
        .map(|(k, r)| (k.trim_start_matches("ns/").to_string(), r))
        .collect();
    assert_eq!(
        got,
        want(&[
            ("b1", FAIR),
            ("b2", FAIR),
            ("c1", FAIR),
            ("c2", FAIR),
            ("e1", FAIR)
        ])
    );
}

/// TestFairPreemptions "can preempt anything borrowing from CQ with 0 weight" and
/// "can't preempt nominal from CQ with 0 weight".
#[test]
fn zero_weight_queues_lose_borrowed_quota_but_keep_nominal() {
    let setup = |with_c: bool, admitted: &[(&'static str, &'static str)], incoming: i64| {
        let mut env = Env::fair();
        env.flavor("default").ns("ns", &[]);
        let q = |name: &str| {
            cq(name)
                .cohort("all")
                .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
                .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(3))])])
        };
        env.cq(q("a")).cq(q("b").weight(0.0));
        if with_c {
            env.cq(q("c"));
        }
        env.lq("ns", "a", "a");
        for &(n, c) in admitted {
            env.admitted(
                wl("ns", n).queue(c).ps("main", 1, &[("cpu", cpu(1))]),
                c,
                &[("cpu", "default")],
            );
        }
        env.submit(
            wl("ns", "a_incoming")
                .queue("a")
                .ps("main", 1, &[("cpu", cpu(incoming))]),
        );
        let ds = env.schedule();
        evictions(&ds)
            .into_iter()
            .map(|(k, r)| (k.trim_start_matches("ns/").to_string(), r))
            .collect::<Vec<_>>()
    };
    let borrowing = [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
        ("b4", "b"),
        ("b5", "b"),
        ("b6", "b"),
    ];
    assert_eq!(
        setup(true, &borrowing, 3),
        want(&[("b1", FAIR), ("b2", FAIR), ("b3", FAIR)])
    );
    let nominal = [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
    ];
    assert!(setup(false, &nominal, 1).is_empty());
}
