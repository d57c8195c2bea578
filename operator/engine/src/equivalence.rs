//! Kueue's scheduling equivalence (its SchedulingEquivalenceHashing gate): workloads of one scheduling shape fail
//! to fit alike, so once one of them fails in a BestEffortFIFO ClusterQueue (no fit, or no preemption candidates),
//! the others of that shape go to the inadmissible list without an attempt of their own, and new ones with it
//! skip the queue, until the ClusterQueue's inadmissible workloads are requeued (which forgets the shapes).

use std::hash::{BuildHasher, Hash, Hasher};

use super::quota::NodeId;
use super::{Engine, QueueingStrategy, Workload};

/// The hash of a workload's scheduling shape: its (effective) priority, and per pod set its name, count, per-pod
/// requests, minimum count, topology request, node selector, required affinity and tolerations, with the digest
/// of the rest of its pod spec Kueue covers ([`Workload::scheduling_shape`]). Namespace, LocalQueue and creation
/// time are left out, as in Kueue's `computeSchedulingHash`.
pub(crate) fn scheduling_hash(spec: &Workload) -> u64 {
    // foldhash's quality variant with a fixed seed: deterministic, well spread over structured input (a collision
    // would skip a workload that might fit), and a fraction of SipHash's cost.
    let mut h = foldhash::quality::FixedState::with_seed(0x5c4e_d01e_e9a1_7a5e).build_hasher();
    spec.priority.hash(&mut h);
    spec.pod_sets.hash(&mut h);
    spec.scheduling_shape.hash(&mut h);
    h.finish()
}

impl Engine {
    /// Whether the pending workload `key` waits untried because a workload of its scheduling shape failed in its
    /// ClusterQueue (it reads as `PendingEvaluation`, as in Kueue, until its queue is requeued).
    pub fn set_aside_for_an_equal(&self, key: &crate::WorkloadKey) -> bool {
        let Some(w) = self.wl_by_key.get(key).and_then(|&i| self.wl(i)) else {
            return false;
        };
        let (Some(n), Some(k), Some(h)) = (w.queued_in, w.qkey.as_ref(), w.hash) else {
            return false;
        };
        self.cq(n)
            .is_some_and(|c| c.inadmissible.contains(k) && c.failed_shapes.contains(&h))
    }

    /// Whether the pending workload `wl` has a shape that already failed in `cq` since its last requeue: it then
    /// goes to the inadmissible list instead of the queue.
    pub(crate) fn shape_failed_in(&self, wl: u32, cq: NodeId) -> bool {
        let (Some(w), Some(c)) = (self.wl(wl), self.cq(cq)) else {
            return false;
        };
        c.spec.queueing_strategy == QueueingStrategy::BestEffortFIFO
            && w.hash.is_some_and(|h| c.failed_shapes.contains(&h))
    }

    /// `wl` failed in `cq` and went to its inadmissible list: records its shape and moves the queued workloads of
    /// the same shape there too, unevaluated (Kueue's `handleInadmissibleHash`; they get no pending reason).
    pub(crate) fn set_shape_aside(&mut self, wl: u32, cq: NodeId) {
        let Some(hash) = self.wl(wl).and_then(|w| w.hash) else {
            return;
        };
        let Some(c) = self.cq(cq) else { return };
        if c.spec.queueing_strategy != QueueingStrategy::BestEffortFIFO {
            return;
        }
        let Some(c) = self.cq_mut(cq) else { return };
        c.failed_shapes.insert(hash);
        // Keys move from one set to the other in one pass, without copies or searches in the queue.
        let same = c.heap.extract_if(.., |k| k.shape == Some(hash));
        c.inadmissible.extend(same);
    }
}
