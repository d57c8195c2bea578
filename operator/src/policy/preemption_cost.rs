//! A preemption-cost module in the engine, with the neutral answer (Kueue's preemption: no boost,
//! nothing protected) as the fallback of every search.

use std::sync::Arc;

use sluice_sdk::policy::{CandidateBatch, CostAnswers, PolicyError, PreemptionCostPolicy};

use super::health::ModuleHealth;

/// Asks a preemption-cost module once per preemption search; a failed call (trap, deadline,
/// memory, malformed answer) or a degraded module gives the neutral answer for that search, so
/// preemption goes on as Kueue's would.
#[derive(Debug)]
pub struct GuardedPreemptionCost {
    name: String,
    module: Arc<dyn PreemptionCostPolicy>,
    health: Arc<ModuleHealth>,
}

impl GuardedPreemptionCost {
    /// Guards `module` (named `name`) with `health`.
    pub fn new(
        name: &str,
        module: Arc<dyn PreemptionCostPolicy>,
        health: Arc<ModuleHealth>,
    ) -> Self {
        Self {
            name: name.to_string(),
            module,
            health,
        }
    }

    /// The module's health.
    pub fn health(&self) -> &Arc<ModuleHealth> {
        &self.health
    }
}

impl PreemptionCostPolicy for GuardedPreemptionCost {
    fn name(&self) -> &str {
        &self.name
    }

    fn costs(&self, batch: &CandidateBatch) -> Result<CostAnswers, PolicyError> {
        if self.health.is_degraded() {
            self.health.record_skipped();
            return Ok(CostAnswers::neutral(batch.len()));
        }
        let answer = self
            .module
            .costs(batch)
            .and_then(|a| a.check(&self.name, batch.len()).map(|()| a));
        match answer {
            Ok(a) => {
                self.health.record_success();
                Ok(a)
            }
            Err(e) => {
                if self.health.record_failure(&e) {
                    tracing::warn!(module = %self.name, error = %e, "preemption-cost module degraded: preemption runs without boosts or protections until it is replaced");
                } else {
                    tracing::warn!(module = %self.name, error = %e, "preemption-cost module failed; this search ran without boosts or protections");
                }
                Ok(CostAnswers::neutral(batch.len()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_sdk::policy::PolicyFailure;

    use super::*;

    /// Answers one boost too few.
    #[derive(Debug)]
    struct Short;

    impl PreemptionCostPolicy for Short {
        fn name(&self) -> &str {
            "short"
        }
        fn costs(&self, batch: &CandidateBatch) -> Result<CostAnswers, PolicyError> {
            let mut a = CostAnswers::neutral(batch.len());
            a.boost.pop();
            Ok(a)
        }
    }

    fn two() -> CandidateBatch {
        let mut b = CandidateBatch::default();
        b.push("t/a", "cq", 0, 10.0, 10.0, 0, 1);
        b.push("t/b", "cq", 0, 10.0, 10.0, 0, 1);
        b
    }

    #[test]
    fn a_sound_answer_passes_through() {
        let g = GuardedPreemptionCost::new(
            "anti-thrash",
            Arc::new(sluice_policy_anti_thrash::AntiThrash::default()),
            Arc::new(ModuleHealth::new(2)),
        );
        let mut b = two();
        b.times_preempted[1] = 3;
        let a = g.costs(&b).expect("answers");
        assert_eq!(a.boost, vec![0, 300]);
        assert_eq!(a.protected, vec![true, true]);
        assert_eq!(g.health().snapshot().calls, 1);
    }

    #[test]
    fn a_malformed_answer_is_neutral_counted_and_degrades() {
        let g =
            GuardedPreemptionCost::new("short", Arc::new(Short), Arc::new(ModuleHealth::new(2)));
        for _ in 0..3 {
            assert_eq!(g.costs(&two()), Ok(CostAnswers::neutral(2)));
        }
        let h = g.health().snapshot();
        assert!(h.degraded);
        assert_eq!(h.failures.get(PolicyFailure::Malformed.as_str()), Some(&2));
        assert_eq!(h.failures.get("degraded"), Some(&1));
        assert!(
            h.last_message
                .is_some_and(|m| m.contains("1 boosts and 2 protection flags")),
        );
    }
}
