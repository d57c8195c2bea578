//! Guest side of the `preemption-cost` world: the policy value and the batch conversions.

use std::cell::RefCell;

use super::PolicyInit;
use super::preemption_cost_bindings::sluice::policy::preemption_cost_types as wit;
use crate::policy::preemption_cost::{CandidateBatch, PreemptionCostPolicy};

thread_local! {
    /// The policy built by `init` (a module instance is single-threaded).
    static POLICY: RefCell<Option<Box<dyn PreemptionCostPolicy>>> = const { RefCell::new(None) };
}

/// Builds the policy from its configuration (called by [`export_preemption_cost!`](crate::export_preemption_cost)).
pub fn init<T: PolicyInit + PreemptionCostPolicy + 'static>(config: &str) -> Result<(), String> {
    let policy = T::init(config)?;
    POLICY.with(|p| *p.borrow_mut() = Some(Box::new(policy)));
    Ok(())
}

/// The contract's batch from the WIT record: string ids resolved against the batch's table.
pub fn batch_from_wit(b: wit::CandidateBatch) -> Result<CandidateBatch, String> {
    let count = b.names.len();
    let out_of_range = |id: u32| format!("string id {id} is outside the batch's {count} names");
    let mut names: Vec<Option<String>> = b.names.into_iter().map(Some).collect();
    // ClusterQueue names repeat, so they are copied; a workload is named once per search, so its name is
    // moved out of the table (copied from where it went should an id come twice), saving an allocation each.
    let cluster_queue = b
        .cluster_queue
        .iter()
        .map(|&id| {
            names
                .get(id as usize)
                .and_then(Option::as_ref)
                .cloned()
                .ok_or_else(|| out_of_range(id))
        })
        .collect::<Result<Vec<String>, String>>()?;
    let mut moved_to: Vec<Option<usize>> = vec![None; count];
    let mut workload: Vec<String> = Vec::with_capacity(b.workload.len());
    for &id in &b.workload {
        let slot = id as usize;
        let name = match names.get_mut(slot).ok_or_else(|| out_of_range(id))?.take() {
            Some(n) => n,
            None => moved_to
                .get(slot)
                .copied()
                .flatten()
                .map(|at| workload[at].clone())
                .unwrap_or_default(),
        };
        moved_to[slot] = moved_to[slot].or(Some(workload.len()));
        workload.push(name);
    }
    Ok(CandidateBatch {
        workload,
        cluster_queue,
        priority: b.priority,
        admitted_seconds: b.admitted_seconds,
        since_checkpoint_seconds: b.since_checkpoint_seconds,
        times_preempted: b.times_preempted,
        gpus: b.gpus,
        gpu_hours_at_stake: b.gpu_hours_at_stake,
        preemptor_priority: b.preemptor_priority,
    })
}

/// Answers one preemption search.
pub fn costs(b: wit::CandidateBatch) -> Result<wit::CostAnswers, String> {
    let batch = batch_from_wit(b)?;
    POLICY.with(|p| {
        let p = p.borrow();
        let policy = p.as_deref().ok_or("costs called before init")?;
        let a = policy.costs(&batch).map_err(|e| e.message)?;
        Ok(wit::CostAnswers {
            boost: a.boost,
            protected: a.protected.iter().map(|&x| u8::from(x)).collect(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(names: &[&str], workload: &[u32], cluster_queue: &[u32]) -> wit::CandidateBatch {
        let n = workload.len();
        wit::CandidateBatch {
            names: names.iter().map(|s| s.to_string()).collect(),
            workload: workload.to_vec(),
            cluster_queue: cluster_queue.to_vec(),
            priority: vec![0; n],
            admitted_seconds: vec![1.0; n],
            since_checkpoint_seconds: vec![1.0; n],
            times_preempted: vec![0; n],
            gpus: vec![1; n],
            gpu_hours_at_stake: vec![0.0; n],
            preemptor_priority: 5,
        }
    }

    #[test]
    fn ids_resolve_to_names_whether_they_repeat_or_not() {
        let b = batch_from_wit(record(&["", "t/a", "cq", "t/b"], &[1, 3, 1], &[2, 2, 2]))
            .expect("valid ids");
        assert_eq!(b.workload, ["t/a", "t/b", "t/a"]);
        assert_eq!(b.cluster_queue, ["cq", "cq", "cq"]);
        assert_eq!(b.preemptor_priority, 5);
        // A name used as both a ClusterQueue and a workload is both.
        let b = batch_from_wit(record(&["", "x"], &[1], &[1])).expect("valid ids");
        assert_eq!(
            (b.workload, b.cluster_queue),
            (vec!["x".into()], vec!["x".into()])
        );
    }

    #[test]
    fn an_id_outside_the_table_is_refused() {
        let e = batch_from_wit(record(&["", "t/a"], &[2], &[1])).expect_err("id 2 of 2 names");
        assert_eq!(e, "string id 2 is outside the batch's 2 names");
        let e = batch_from_wit(record(&["", "t/a"], &[1], &[7])).expect_err("id 7 of 2 names");
        assert!(e.contains("string id 7"), "{e}");
    }
}
