//! Preemption-cost policies: a protected candidate is never a victim, a boosted one is compared at its boosted
//! priority, and what the policy said is reported once per workload for the operator to show.

use std::sync::Arc;

use crate::common::*;
use sluice_engine::*;
use sluice_sdk::policy::{CandidateBatch, CostAnswers, PolicyError, PreemptionCostPolicy};

/// Protects workloads whose name contains "keep"; boosts those containing "boost" by 10.
#[derive(Debug)]
struct ByName;

impl PreemptionCostPolicy for ByName {
    fn name(&self) -> &str {
        "by-name"
    }
    fn costs(&self, batch: &CandidateBatch) -> Result<CostAnswers, PolicyError> {
        Ok(CostAnswers {
            boost: batch
                .workload
                .iter()
                .map(|w| if w.contains("boost") { 10 } else { 0 })
                .collect(),
            protected: batch.workload.iter().map(|w| w.contains("keep")).collect(),
        })
    }
}

fn env() -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq")
            .preemption(ReclaimPolicy::Never, WithinCqPolicy::LowerPriority)
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]),
        "ns",
    );
    env.engine
        .set_preemption_cost_policy(Some(Arc::new(ByName)));
    env
}

fn running(env: &mut Env, name: &str, created: Time) {
    env.admitted(
        wl("ns", name)
            .prio(0)
            .created(created)
            .ps("main", 1, &[("cpu", cpu(5))]),
        "cq",
        &[("cpu", "default")],
    );
}

/// A priority-5 workload that needs one of the two running workloads' room; one scheduling cycle.
fn urgent(env: &mut Env) -> Vec<Decision> {
    env.submit(
        wl("ns", "urgent")
            .prio(5)
            .created(30)
            .ps("main", 1, &[("cpu", cpu(5))]),
    );
    env.schedule()
}

#[test]
fn protected_and_boosted_candidates_are_passed_over_and_reported_once() {
    let mut env = env();
    running(&mut env, "keep-me", 10);
    running(&mut env, "boost-me", 20);
    let ds = urgent(&mut env);
    // Neither candidate may go: one is protected, the other outranks the preemptor once boosted.
    assert!(evictions(&ds).is_empty(), "{:?}", evictions(&ds));
    let given = env.engine.take_preemption_costs();
    assert_eq!(
        given,
        vec![
            (
                key_of("ns/boost-me"),
                PreemptionCost {
                    boost: 10,
                    protected: false
                }
            ),
            (
                key_of("ns/keep-me"),
                PreemptionCost {
                    boost: 0,
                    protected: true
                }
            ),
        ]
    );
    assert!(env.engine.take_preemption_costs().is_empty());
}

#[test]
fn an_unprotected_candidate_is_taken_and_reported() {
    let mut env = env();
    running(&mut env, "keep-me", 10);
    running(&mut env, "plain", 20);
    let ds = urgent(&mut env);
    assert_eq!(
        evictions(&ds),
        vec![("ns/plain".to_string(), Some("InClusterQueue".to_string()))]
    );
    let given = env.engine.take_preemption_costs();
    assert!(
        given.contains(&(key_of("ns/plain"), PreemptionCost::default())),
        "{given:?}"
    );
}
