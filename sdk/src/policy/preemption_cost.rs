//! Preemption cost: a priority boost or a protection for each preemption candidate, in batches.
//!
//! The engine sends every admitted workload that a preemption search may choose from in one call,
//! with the runtime signals that make evicting it expensive. The answer changes only which
//! candidates the search may take and in what order: a boost raises the candidate's effective
//! priority for the preemption rules and the candidate order, a protection removes it from the
//! candidates of this search.

use std::fmt::Debug;

use super::error::{PolicyError, PolicyFailure};

/// Preemption candidates, one column per signal.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CandidateBatch {
    /// Per candidate: `namespace/name` of the Workload.
    pub workload: Vec<String>,
    /// Per candidate: the ClusterQueue holding it.
    pub cluster_queue: Vec<String>,
    /// Per candidate: base priority (the Workload's priority, before any boost).
    pub priority: Vec<i32>,
    /// Per candidate: seconds since its quota was reserved (this admission).
    pub admitted_seconds: Vec<f64>,
    /// Per candidate: seconds since its last checkpoint (`admitted_seconds` when it never reported one).
    pub since_checkpoint_seconds: Vec<f64>,
    /// Per candidate: how many times it was preempted before.
    pub times_preempted: Vec<u32>,
    /// Per candidate: GPUs it holds.
    pub gpus: Vec<u32>,
    /// Per candidate: GPU-hours of work lost if it is evicted now (GPUs × hours since its last checkpoint).
    pub gpu_hours_at_stake: Vec<f64>,
    /// The preemptor's priority.
    pub preemptor_priority: i32,
}

impl CandidateBatch {
    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.priority.len()
    }

    /// Whether the batch has no candidate.
    pub fn is_empty(&self) -> bool {
        self.priority.is_empty()
    }

    /// Appends one candidate.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        workload: impl Into<String>,
        cluster_queue: impl Into<String>,
        priority: i32,
        admitted_seconds: f64,
        since_checkpoint_seconds: f64,
        times_preempted: u32,
        gpus: u32,
    ) {
        self.workload.push(workload.into());
        self.cluster_queue.push(cluster_queue.into());
        self.priority.push(priority);
        self.admitted_seconds.push(admitted_seconds);
        self.since_checkpoint_seconds.push(since_checkpoint_seconds);
        self.times_preempted.push(times_preempted);
        self.gpus.push(gpus);
        self.gpu_hours_at_stake
            .push(f64::from(gpus) * since_checkpoint_seconds.max(0.0) / 3600.0);
    }
}

/// The answer for a [`CandidateBatch`]: one boost and one protection flag per candidate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostAnswers {
    /// Added to the candidate's priority wherever the preemption search compares priorities.
    pub boost: Vec<i32>,
    /// The candidate is not taken by this search, whatever its priority.
    pub protected: Vec<bool>,
}

impl CostAnswers {
    /// Checks an answer for `n` candidates: one boost and one flag each.
    pub fn check(&self, policy: &str, n: usize) -> Result<(), PolicyError> {
        if self.boost.len() != n || self.protected.len() != n {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Malformed,
                format!(
                    "returned {} boosts and {} protection flags for {n} candidates",
                    self.boost.len(),
                    self.protected.len()
                ),
            ));
        }
        Ok(())
    }

    /// The neutral answer: no boost, nothing protected.
    pub fn neutral(n: usize) -> Self {
        Self {
            boost: vec![0; n],
            protected: vec![false; n],
        }
    }
}

/// Boosts and protections for preemption candidates; one call per preemption search.
pub trait PreemptionCostPolicy: Debug + Send + Sync {
    /// Name used in metrics, events and errors.
    fn name(&self) -> &str;
    /// One boost and one protection flag per candidate of `batch`.
    fn costs(&self, batch: &CandidateBatch) -> Result<CostAnswers, PolicyError>;
}
