//! A preemption-cost module behind the batch [`PreemptionCostPolicy`] trait.

use std::collections::HashMap;
use std::time::Duration;

use super::instance::{Module, world};
use crate::policy::PolicyError;
use crate::policy::preemption_cost::{CandidateBatch, CostAnswers, PreemptionCostPolicy};

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "preemption-cost",
        // Export parameters borrow, so a batch's columns are lowered straight from the caller's
        // batch instead of being cloned first.
        ownership: Borrowing { duplicate_if_necessary: true },
    });
}

use bindings::sluice::policy::preemption_cost_types as wit;
use bindings::{PreemptionCost, PreemptionCostPre};

world! {
    kind: PreemptionCost,
    bindings: PreemptionCost,
    pre: PreemptionCostPre,
    init: (),
    resident: (),
}

/// A loaded preemption-cost module. Calls are serialised; a failed instance is rebuilt on the next call.
pub struct WasmPreemptionCostPolicy {
    module: Module<PreemptionCost>,
}

impl std::fmt::Debug for WasmPreemptionCostPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPreemptionCostPolicy")
            .field("name", &self.module.name)
            .field("sha256", &self.sha256())
            .field("deadline", &self.module.deadline)
            .field("memory_limit", &self.module.memory_limit)
            .finish_non_exhaustive()
    }
}

impl WasmPreemptionCostPolicy {
    pub(crate) fn new(module: Module<PreemptionCost>) -> Self {
        Self { module }
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        self.module.sha256()
    }

    /// Deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.module.deadline
    }
}

/// The batch's names in one table (entry 0 the empty string) and each name column as ids. Workloads are
/// distinct within a search, so each is appended as it is (hashing them was a large part of the
/// host's time); ClusterQueue names repeat and are interned, checked first against the previous
/// candidate's, as candidates of one ClusterQueue tend to come together.
fn intern(batch: &CandidateBatch) -> (Vec<&str>, Vec<u32>, Vec<u32>) {
    let n = batch.workload.len();
    let mut names: Vec<&str> = Vec::with_capacity(n + 1);
    names.push("");
    let workload: Vec<u32> = (1..=n as u32).collect();
    names.extend(batch.workload.iter().map(String::as_str));
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut last: Option<(&str, u32)> = None;
    let cluster_queue = batch
        .cluster_queue
        .iter()
        .map(|q| match last {
            Some((l, id)) if l == q.as_str() => id,
            _ => {
                let id = *ids.entry(q.as_str()).or_insert_with(|| {
                    names.push(q.as_str());
                    (names.len() - 1) as u32
                });
                last = Some((q.as_str(), id));
                id
            }
        })
        .collect();
    (names, workload, cluster_queue)
}

impl PreemptionCostPolicy for WasmPreemptionCostPolicy {
    fn name(&self) -> &str {
        &self.module.name
    }

    fn costs(&self, batch: &CandidateBatch) -> Result<CostAnswers, PolicyError> {
        let (names, workload, cluster_queue) = intern(batch);
        let b = wit::CandidateBatch {
            names: &names,
            workload: &workload,
            cluster_queue: &cluster_queue,
            priority: &batch.priority,
            admitted_seconds: &batch.admitted_seconds,
            since_checkpoint_seconds: &batch.since_checkpoint_seconds,
            times_preempted: &batch.times_preempted,
            gpus: &batch.gpus,
            gpu_hours_at_stake: &batch.gpu_hours_at_stake,
            preemptor_priority: batch.preemptor_priority,
        };
        self.module.with_live(|live| {
            let bi = &live.bindings;
            let out = self.module.call(&mut live.store, |s| bi.call_costs(s, b))?;
            let answers = CostAnswers {
                boost: out.boost,
                protected: out.protected.iter().map(|&x| x != 0).collect(),
            };
            answers.check(&self.module.name, batch.len())?;
            Ok(answers)
        })
    }
}
