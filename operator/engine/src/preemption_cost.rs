//! Preemption-cost policies: per ClusterQueue, a boost or a protection for each candidate of that
//! ClusterQueue's preemption searches (the `sluice.dev/preemption-policy` annotation).
//!
//! The ClusterQueue that preempts chooses how careful its preemptions are, so a team cannot shield
//! its borrowed capacity from the lender that reclaims it by annotating its own queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_sdk::policy::{CandidateBatch, CostAnswers, PreemptionCostPolicy};
use sluice_sdk::topology::GPU_RESOURCE;

use super::fasthash::FastMap;
use super::quota::NodeId;
use super::{CqData, Engine, Interner, Time, Wl, WorkloadKey};

/// What a preemption-cost policy said about one candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreemptionCost {
    /// Added to the candidate's priority in the search.
    pub boost: i32,
    /// Not evicted by the search.
    pub protected: bool,
}

/// The policies in use and their failures.
#[derive(Debug, Default)]
pub(crate) struct PreemptionCosts {
    /// The policy of every ClusterQueue without its own.
    default: Option<Arc<dyn PreemptionCostPolicy>>,
    /// Per ClusterQueue name.
    overrides: HashMap<String, Arc<dyn PreemptionCostPolicy>>,
    /// Calls that failed (the search then ran without boosts or protections) and the last message.
    failures: Mutex<(u64, Option<String>)>,
    /// The latest answer per candidate since the shell last took them (to show on the Workload).
    given: Mutex<HashMap<WorkloadKey, PreemptionCost>>,
}

impl Clone for PreemptionCosts {
    fn clone(&self) -> Self {
        let failures = self.failures.lock().map(|f| f.clone()).unwrap_or_default();
        let given = self.given.lock().map(|g| g.clone()).unwrap_or_default();
        Self {
            default: self.default.clone(),
            overrides: self.overrides.clone(),
            failures: Mutex::new(failures),
            given: Mutex::new(given),
        }
    }
}

impl PreemptionCosts {
    fn policy_of(&self, cq: &str) -> Option<&Arc<dyn PreemptionCostPolicy>> {
        self.overrides.get(cq).or(self.default.as_ref())
    }

    /// Whether any ClusterQueue has a policy (searches without one skip building batches).
    pub(crate) fn any(&self) -> bool {
        self.default.is_some() || !self.overrides.is_empty()
    }

    /// Asks the preemptor's ClusterQueue's policy about `candidates`; empty without a policy, and
    /// neutral (no boost, nothing protected) when the call fails.
    pub(crate) fn costs(
        &self,
        inp: &CostInput<'_>,
        preemptor_cq: NodeId,
        preemptor_priority: i32,
        candidates: &[u32],
    ) -> FastMap<u32, PreemptionCost> {
        let Some(cq) = inp.cqs.get(preemptor_cq as usize).and_then(|c| c.as_ref()) else {
            return FastMap::default();
        };
        let Some(policy) = self.policy_of(&cq.spec.name) else {
            return FastMap::default();
        };
        let mut batch = CandidateBatch {
            preemptor_priority,
            ..CandidateBatch::default()
        };
        let mut ids = Vec::with_capacity(candidates.len());
        for &c in candidates {
            let Some(w) = inp.wls.get(c as usize).and_then(|w| w.as_ref()) else {
                continue;
            };
            let Some(adm) = w.adm.as_ref() else { continue };
            let admitted = seconds(inp.now.saturating_sub(adm.reserved_at));
            let since_checkpoint = w
                .spec
                .checkpointed_at
                .filter(|&t| t >= adm.reserved_at)
                .map_or(admitted, |t| seconds(inp.now.saturating_sub(t)));
            let gpus: i64 = adm
                .usage
                .iter()
                .filter(|(fr, _)| inp.ids.resource_name(inp.ids.fr_parts(*fr).1) == GPU_RESOURCE)
                .map(|(_, v)| *v)
                .sum();
            batch.push(
                w.key.to_string(),
                adm.admission.cluster_queue.clone(),
                w.spec.priority,
                admitted,
                since_checkpoint,
                w.preemptions,
                u32::try_from(gpus.max(0)).unwrap_or(u32::MAX),
            );
            ids.push(c);
        }
        let answers = match policy.costs(&batch) {
            Ok(a) => match a.check(policy.name(), batch.len()) {
                Ok(()) => a,
                Err(e) => self.failed(e.to_string(), batch.len()),
            },
            Err(e) => self.failed(e.to_string(), batch.len()),
        };
        let costs: FastMap<u32, PreemptionCost> = ids
            .iter()
            .zip(answers.boost.iter().zip(&answers.protected))
            .map(|(&c, (&boost, &protected))| (c, PreemptionCost { boost, protected }))
            .collect();
        if let Ok(mut given) = self.given.lock() {
            for (&c, &cost) in &costs {
                if let Some(w) = inp.wls.get(c as usize).and_then(|w| w.as_ref()) {
                    given.insert(w.key.clone(), cost);
                }
            }
        }
        costs
    }

    fn failed(&self, message: String, n: usize) -> CostAnswers {
        tracing::warn!(error = %message, "preemption-cost policy failed; preempting without it");
        if let Ok(mut f) = self.failures.lock() {
            f.0 += 1;
            f.1 = Some(message);
        }
        CostAnswers::neutral(n)
    }
}

/// The engine state a cost batch is built from.
pub(crate) struct CostInput<'a> {
    pub cqs: &'a [Option<CqData>],
    pub wls: &'a [Option<Wl>],
    pub ids: &'a Interner,
    pub now: Time,
}

fn seconds(ms: Time) -> f64 {
    ms as f64 / 1000.0
}

impl Engine {
    /// Puts every ClusterQueue without its own preemption-cost policy on `policy` (None: none).
    pub fn set_preemption_cost_policy(&mut self, policy: Option<Arc<dyn PreemptionCostPolicy>>) {
        self.costs.default = policy;
        self.requeue_all_inadmissible();
    }

    /// Gives ClusterQueue `cq` its own preemption-cost policy.
    pub fn set_preemption_cost_policy_for(
        &mut self,
        cq: &str,
        policy: Arc<dyn PreemptionCostPolicy>,
    ) {
        self.costs.overrides.insert(cq.to_string(), policy);
        self.requeue_all_inadmissible();
    }

    /// Puts ClusterQueue `cq` back on the default preemption-cost policy (if any).
    pub fn clear_preemption_cost_policy_for(&mut self, cq: &str) {
        if self.costs.overrides.remove(cq).is_some() {
            self.requeue_all_inadmissible();
        }
    }

    /// Name of the preemption-cost policy of ClusterQueue `cq`, if it has one.
    pub fn preemption_cost_policy_name(&self, cq: &str) -> Option<&str> {
        self.costs.policy_of(cq).map(|p| p.name())
    }

    /// What preemption-cost policies said about each workload they were asked about since the last call, the
    /// latest answer per workload (the operator shows it on the Workload as `sluice.dev/priority-boost`).
    pub fn take_preemption_costs(&mut self) -> Vec<(WorkloadKey, PreemptionCost)> {
        let Ok(mut given) = self.costs.given.lock() else {
            return Vec::new();
        };
        let mut out: Vec<_> = given.drain().collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Preemption-cost policy calls that failed so far (searches then ran without it) and the last message.
    pub fn preemption_cost_failures(&self) -> (u64, Option<String>) {
        self.costs
            .failures
            .lock()
            .map(|f| (f.0, f.1.clone()))
            .unwrap_or_default()
    }
}
