//! A fairness policy per cohort tree: each tree's admissions follow its own policy, and moving a
//! cohort under another root moves it onto that tree's policy.

use std::sync::Arc;

use crate::common::*;
use sluice_engine::*;

/// DRS shares, but the newest candidate goes first (the opposite of DRS on equal shares).
#[derive(Debug)]
struct NewestFirst;

impl EngineFairness for NewestFirst {
    fn name(&self) -> &str {
        "newest-first"
    }
    fn shares(&self, inputs: &[ShareInput<'_>], out: &mut Vec<Share>) {
        DrsPolicy.shares(inputs, out);
    }
    fn order(&self, keys: &[OrderKey]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        idx.sort_by_key(|&i| std::cmp::Reverse(keys[i].timestamp));
        idx
    }
}

/// Two trees alike: cohort `<t>` with queues `<t>1` and `<t>2` of 1 cpu each, and one 2-cpu
/// workload per queue, `<t>1`'s the older; only one of each tree's two fits.
fn two_contended_trees() -> Env {
    let mut env = Env::fair();
    env.flavor("default").ns("ns", &[]);
    for t in ["x", "y"] {
        for i in 1..=2 {
            let q = format!("{t}{i}");
            env.cq(cq(&q)
                .cohort(t)
                .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(1))])]));
            env.lq("ns", &q, &q);
        }
    }
    for (t, age) in [("x", 0), ("y", 0)] {
        for i in 1..=2 {
            let q = format!("{t}{i}");
            env.submit(
                wl("ns", &format!("{q}-job"))
                    .queue(&q)
                    .created(age + i64::from(i) * 10)
                    .ps("main", 1, &[("cpu", cpu(2))]),
            );
        }
    }
    env
}

#[test]
fn each_cohort_tree_is_ordered_by_its_own_policy() {
    let mut env = two_contended_trees();
    env.engine
        .set_fairness_policy_for_tree("x", Some(Arc::new(NewestFirst)));
    assert_eq!(
        env.engine.fairness_policy_name_of("x1"),
        Some("newest-first")
    );
    assert_eq!(env.engine.fairness_policy_name_of("y1"), Some("drs"));
    assert_eq!(env.engine.fairness_policy_name(), "drs");
    let mut admitted = admits(&env.schedule());
    admitted.sort();
    // Tree x takes its newest workload, tree y (DRS, equal shares) its oldest.
    assert_eq!(admitted, ["ns/x2-job", "ns/y1-job"]);
}

#[test]
fn without_tree_policies_every_tree_uses_the_default() {
    let mut env = two_contended_trees();
    env.engine
        .set_fairness_policy_for_tree("x", Some(Arc::new(NewestFirst)));
    env.engine.set_fairness_policy_for_tree("x", None);
    assert_eq!(env.engine.fairness_policy_name_of("x1"), Some("drs"));
    let mut admitted = admits(&env.schedule());
    admitted.sort();
    assert_eq!(admitted, ["ns/x1-job", "ns/y1-job"]);
}

#[test]
fn a_cohort_moved_under_another_root_follows_that_roots_policy() {
    let mut env = two_contended_trees();
    env.engine
        .set_fairness_policy_for_tree("x", Some(Arc::new(NewestFirst)));
    // y's own selection is not consulted once y is no longer a root.
    env.engine
        .set_fairness_policy_for_tree("y", Some(Arc::new(DrsPolicy)));
    assert_eq!(env.engine.cohort_root_of("y1"), Some("y"));
    env.cohort("y", Some("x"), vec![]);
    assert_eq!(env.engine.cohort_root_of("y1"), Some("x"));
    assert_eq!(
        env.engine.fairness_policy_name_of("y2"),
        Some("newest-first")
    );
    assert_eq!(env.engine.cohort_root_of("nope"), None);
    // One tree of four queues with 4 cpu, each workload wanting 2: the two newest go first.
    let mut admitted = admits(&env.schedule());
    admitted.sort();
    assert_eq!(admitted, ["ns/x2-job", "ns/y2-job"]);
}
