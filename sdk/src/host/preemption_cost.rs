//! A preemption-cost module behind the batch [`PreemptionCostPolicy`] trait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::Store;

use super::sandbox::{StoreState, guarded, init_deadline, new_store};
use super::{Compiled, LoadError, Shared, hex};
use crate::policy::preemption_cost::{CandidateBatch, CostAnswers, PreemptionCostPolicy};
use crate::policy::{PolicyError, PolicyFailure};

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

struct Live {
    store: Store<StoreState>,
    bindings: PreemptionCost,
}

/// A loaded preemption-cost module. Calls are serialised; a failed instance is rebuilt on the next call.
pub struct WasmPreemptionCostPolicy {
    name: String,
    shared: Arc<Shared>,
    compiled: Arc<Compiled>,
    pre: PreemptionCostPre<StoreState>,
    config: String,
    deadline: Duration,
    memory_limit: usize,
    live: Mutex<Option<Live>>,
}

impl std::fmt::Debug for WasmPreemptionCostPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPreemptionCostPolicy")
            .field("name", &self.name)
            .field("sha256", &self.sha256())
            .field("deadline", &self.deadline)
            .field("memory_limit", &self.memory_limit)
            .finish_non_exhaustive()
    }
}

impl WasmPreemptionCostPolicy {
    pub(crate) fn new(
        shared: Arc<Shared>,
        compiled: Arc<Compiled>,
        name: &str,
        config: &str,
        deadline: Duration,
        memory_limit: usize,
    ) -> Result<Self, LoadError> {
        let pre =
            PreemptionCostPre::new(compiled.pre.clone()).map_err(|e| LoadError::WorldMismatch {
                kind: "preemption-cost",
                message: format!("{e:#}"),
            })?;
        let me = Self {
            name: name.to_string(),
            shared,
            compiled,
            pre,
            config: config.to_string(),
            deadline,
            memory_limit,
            live: Mutex::new(None),
        };
        let live = me.instantiate().map_err(|e| match e.failure {
            PolicyFailure::Rejected => LoadError::InitRejected(e.message),
            _ => LoadError::InitRejected(e.to_string()),
        })?;
        *me.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
        Ok(me)
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        hex(&self.compiled.sha256)
    }

    /// Deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    fn instantiate(&self) -> Result<Live, PolicyError> {
        let mut store = new_store(&self.shared, self.memory_limit);
        let bindings = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            self.pre.instantiate(s)
        })?;
        let config = self.config.clone();
        guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            bindings.call_init(s, &config)
        })?
        .map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m))?;
        Ok(Live { store, bindings })
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
        &self.name
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
        let mut slot = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = match slot.take() {
            Some(l) => l,
            None => self.instantiate()?,
        };
        let bi = &live.bindings;
        let r = guarded(&mut live.store, &self.name, self.deadline, |s| {
            bi.call_costs(s, b)
        })
        .and_then(|r| r.map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m)))
        .and_then(|out| {
            let answers = CostAnswers {
                boost: out.boost,
                protected: out.protected.iter().map(|&x| x != 0).collect(),
            };
            answers.check(&self.name, batch.len())?;
            Ok(answers)
        });
        // A module that trapped may be mid-update; malformed or refused answers leave it sound.
        let keep = match &r {
            Ok(_) => true,
            Err(e) => matches!(
                e.failure,
                PolicyFailure::Malformed | PolicyFailure::Rejected
            ),
        };
        if keep {
            *slot = Some(live);
        }
        r
    }
}
