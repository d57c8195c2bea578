//! One Kueue scheduling cycle: heads, nomination, ordering, admission/preemption, requeueing.

use std::collections::{BTreeMap, BTreeSet};

use super::fasthash::FastSet;

use super::assign::{Assignment, Mode, WAITING_FOR_QUOTA};
use super::fairness::OrderKey;
use super::preempt::{Preemptor, Sim, Target, human_reason};
use super::quota::{Fr, NodeId};
use super::{
    Awaiting, Decision, Engine, Phase, PodSetPlacement, QueueingStrategy, ReclaimPolicy,
    ScanProgress, Time,
};

const WAITING_FOR_PREEMPTED: &str = "WaitingForPreemptedWorkloads";
/// Kueue's QuotaReserved=False reason while blockAdmission holds a workload that fits.
pub const WAITING_FOR_PODS_READY: &str = "Waiting";
/// Kueue's message with it.
pub const WAITING_FOR_PODS_READY_MESSAGE: &str =
    "waiting for all admitted workloads to be in PodsReady condition";

/// How a non-admitted head goes back to its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Requeue {
    /// Back to the heap (retried next cycle).
    Immediate,
    /// To the inadmissible list in BestEffortFIFO (heap in StrictFIFO); its shape set aside for the cycle.
    NoFit,
    /// As `NoFit`, for a reason other than quota (Kueue's generic requeue reason): no shape set aside.
    Generic,
    /// Inadmissible regardless of strategy.
    Mismatch,
}

struct Entry {
    wl: u32,
    cq: NodeId,
    priority: i32,
    timestamp: Time,
    assignment: Assignment,
    targets: Vec<Target>,
    generation: u64,
    cq_generation: u64,
    /// Its ClusterQueue's sticky preemptor when popped, waiting for its victims to leave.
    preemptor: bool,
    /// Topology placement of its TAS pod sets, computed at nomination.
    placement: Option<Vec<PodSetPlacement>>,
    /// Node usage generation the placement was computed against.
    tas_gen: u64,
    /// The assignment its own preemptions freed (goes before other entries).
    pinned: bool,
    /// Its scan progress as the cycle found it, taken out of the workload until the entry is processed.
    last: Option<ScanProgress>,
}

/// The workloads this cycle's preemptions target, each with the root of the quota tree it holds quota in.
#[derive(Default)]
pub(crate) struct CycleVictims {
    set: FastSet<u32>,
    list: Vec<(NodeId, u32)>,
}

impl Engine {
    pub(crate) fn sim(&mut self) -> Sim<'_> {
        self.sim_for(true)
    }

    /// A simulation for choosing assignments and preemption victims: shares without usage history.
    /// History orders admission (as in Kueue's admission fair sharing) but never picks victims: a
    /// queue's past usage does not shrink when one of its workloads is evicted, so a share that
    /// counted it would keep finding victims (the bundled example with fair-credits evicted 4,152
    /// times).
    pub(crate) fn preemption_sim(&mut self) -> Sim<'_> {
        self.sim_for(false)
    }

    fn sim_for(&mut self, with_history: bool) -> Sim<'_> {
        self.sim_with(with_history, None, None)
    }

    /// A simulation of the quota tree; with `probe` (workload, assignment) a candidate set counts as enough only
    /// when the workload's topology placement also fits, and with `prefer` those workloads are tried first.
    pub(crate) fn sim_with<'a>(
        &'a mut self,
        with_history: bool,
        probe: Option<(u32, &'a crate::assign::Assignment)>,
        prefer: Option<&'a crate::fasthash::FastSet<u32>>,
    ) -> Sim<'a> {
        Sim {
            tree: &mut self.tree,
            cqs: &self.cqs,
            wls: &self.wls,
            flavors: &self.flavors,
            ids: &self.ids,
            fairness: &self.fairness,
            with_history,
            fair: self.config.fair_sharing.as_ref(),
            pods_resource: self.pods_resource,
            ignore_undeclared: self.config.ignore_undeclared_resources,
            now: self.now,
            topologies: self.topo.topologies.clone(),
            costs: &self.costs,
            cost_of: Default::default(),
            tas: probe.map(|(wl, assignment)| crate::preempt::TasProbe {
                parts: crate::topology::admit::TasParts {
                    topo: &mut self.topo,
                    wls: &self.wls,
                    cqs: &self.cqs,
                    flavors: &self.flavors,
                },
                wl,
                assignment,
            }),
            removed: Vec::new(),
            prefer,
            scratch: &mut self.preempt_scratch,
        }
    }

    /// The head a cycle would pop from a ClusterQueue.
    pub(crate) fn head_of(&self, n: NodeId) -> Option<u32> {
        let c = self.cq(n)?;
        let first = c.heap.first()?;
        // Under admission fair sharing a less used LocalQueue goes even before the sticky preemptor, as in Kueue.
        if let Some(s) = c.sticky
            && let Some(k) = self.wl(s).and_then(|w| w.qkey.as_ref())
            && k.afs <= first.afs
            && c.heap.contains(k)
        {
            return Some(s);
        }
        Some(first.wl)
    }

    /// Whether a cycle could change anything: some active ClusterQueue has a head that was not
    /// already tried against the current state of its quota tree.
    pub fn has_work(&self) -> bool {
        if self.waiting_for_pods_ready {
            // Blocked until every quota holder is PodsReady; then every head is worth a new try.
            return !self.holders_not_ready()
                && (0..self.cqs.len() as NodeId).any(|n| self.head_of(n).is_some());
        }
        (0..self.cqs.len() as NodeId).any(|n| self.cq_has_work(n))
    }

    /// Whether some workload holding quota (admitted or being evicted) is not PodsReady: under blockAdmission
    /// Kueue admits nothing more until all are (its cache's WorkloadsNotReady, across every ClusterQueue).
    pub(crate) fn holders_not_ready(&self) -> bool {
        self.wls
            .iter()
            .flatten()
            .any(|w| matches!(w.phase, Phase::Admitted | Phase::Evicting) && !w.spec.pods_ready)
    }

    /// A digest of everything the next cycle's decisions depend on besides quota usage: each ClusterQueue's
    /// queue, sticky preemptor and last try, and its head's flavor scan progress. Two cycles that admit and
    /// evict nothing and leave the same digest would repeat forever (a head retried on each flavor in turn
    /// while a preemptor waits for its victims), so a caller looping to a fixed point can stop there.
    pub fn cycle_digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (n, c) in self.cqs.iter().enumerate() {
            let Some(c) = c else { continue };
            n.hash(&mut h);
            c.heap.len().hash(&mut h);
            c.inadmissible.len().hash(&mut h);
            c.sticky.hash(&mut h);
            c.tried.hash(&mut h);
            if let Some(head) = self.head_of(n as NodeId) {
                head.hash(&mut h);
                if let Some(w) = self.wl(head) {
                    w.last.as_ref().map(|l| &l.tried).hash(&mut h);
                    w.phase.hash(&mut h);
                }
            }
        }
        self.tree
            .nodes
            .iter()
            .map(|x| x.generation)
            .sum::<u64>()
            .hash(&mut h);
        h.finish()
    }

    fn cq_has_work(&self, n: NodeId) -> bool {
        let Some(c) = self.cq(n) else { return false };
        if !c.active || !self.tree.node(n).alive {
            return false;
        }
        let Some(head) = self.head_of(n) else {
            return false;
        };
        let generation = self.tree.node(self.tree.root(n)).generation;
        c.tried != Some((head, generation))
    }

    fn namespace_matches(&self, wl: u32, cq: NodeId) -> bool {
        let (Some(w), Some(c)) = (self.wl(wl), self.cq(cq)) else {
            return false;
        };
        match &c.spec.namespace_selector {
            None => false,
            // The empty selector matches every namespace: no label lookup needed.
            Some(sel) if sel.match_labels.is_empty() && sel.match_expressions.is_empty() => true,
            Some(sel) => {
                let empty = BTreeMap::new();
                sel.matches(self.namespaces.get(&w.spec.namespace).unwrap_or(&empty))
            }
        }
    }

    /// Time passed: decisions that events cause from now on (an eviction of a failed node's workloads, of a
    /// deactivated one) carry `now`, not the time of the last cycle.
    pub fn advance_clock(&mut self, now: Time) {
        self.now = self.now.max(now);
    }

    /// Runs exactly one scheduling cycle at time `now`.
    pub fn schedule(&mut self, now: Time) -> Vec<Decision> {
        self.now = self.now.max(now);
        if self.waiting_for_pods_ready {
            if self.holders_not_ready() {
                return Vec::new();
            }
            self.waiting_for_pods_ready = false;
            for c in self.cqs.iter_mut().flatten() {
                c.tried = None;
            }
        }
        // Under blockAdmission, whether this cycle may admit at all; the first admission closes it.
        self.block_now = self.config.block_admission && self.holders_not_ready();
        self.cycle += 1;
        self.fairness.advance(&self.tree, self.now);
        // Shares cached in the last cycle may predate events and the history just advanced.
        self.preempt_scratch.shares.clear();
        self.sample_admission_usage(self.now);
        // A tree where no head changed and no quota moved since the last cycle would produce the
        // same outcome again, so only trees with work take part.
        let mut live_roots = vec![false; self.tree.nodes.len()];
        for n in 0..self.cqs.len() as NodeId {
            if self.cq_has_work(n) {
                live_roots[self.tree.root(n) as usize] = true;
            }
        }
        let mut heads = Vec::new();
        for n in 0..self.cqs.len() as NodeId {
            let Some(c) = self.cq(n) else { continue };
            if !c.active || !self.tree.node(n).alive || !live_roots[self.tree.root(n) as usize] {
                continue;
            }
            if let Some(h) = self.head_of(n) {
                let generation = self.tree.node(self.tree.root(n)).generation;
                if let (Some(key), Some(Some(c))) = (
                    self.wls
                        .get(h as usize)
                        .and_then(|w| w.as_ref())
                        .and_then(|w| w.qkey.as_ref()),
                    self.cqs.get_mut(n as usize),
                ) {
                    // The head is almost always the queue's first key: popped without a search.
                    if c.heap.first().is_some_and(|f| f.wl == h) {
                        c.heap.pop_first();
                    } else {
                        c.heap.remove(key);
                    }
                }
                heads.push((h, n, generation));
            }
        }
        let mut requeues: Vec<(u32, NodeId, Requeue)> = Vec::new();
        // Most heads end in one decision: room for them at once instead of growing from empty.
        self.out.reserve(heads.len());
        let mut entries = Vec::with_capacity(heads.len());
        let partial = self.config.partial_admission;
        for (wl, cq, generation) in heads {
            if let Some(c) = self.cq_mut(cq) {
                c.tried = Some((wl, generation));
            }
            if !self.namespace_matches(wl, cq) {
                // Kueue's reason with UnadmittedWorkloadsObservability on; callers map it to
                // "Pending" when the gate is off.
                self.set_pending(
                    wl,
                    "Misconfigured",
                    "workload namespace doesn't match ClusterQueue selector",
                );
                requeues.push((wl, cq, Requeue::Mismatch));
                continue;
            }
            let Some(w) = self.wl(wl) else { continue };
            if let Some(why) = &w.spec.misconfigured {
                // Kueue's admissibility checks, after the namespace's: requeued as any inadmissible workload.
                let why = why.clone();
                self.set_pending(wl, "Misconfigured", why.as_str());
                requeues.push((wl, cq, Requeue::Generic));
                continue;
            }
            let cq_generation = self.cq(cq).map(|c| c.generation).unwrap_or(0);
            // A sticky preemptor asks again for no more than the size its preemptions were
            // computed for: the freed quota justified that size, not the full one.
            let sticky = self.cq(cq).is_some_and(|c| c.sticky == Some(wl));
            let max_counts = w.preempted_for.clone().filter(|_| sticky);
            let (priority, timestamp) = (w.spec.priority, w.spec.creation_time);
            // Kueue keeps the scan progress for the next cycle, or while the ClusterQueue's
            // allocatable generation is unchanged. It is moved out, not copied: processing the entry writes the
            // new progress into it (or puts it back).
            let last = self.wl_mut(wl).and_then(|w| w.last.take());
            let fresh = last
                .as_ref()
                .is_some_and(|l| self.cycle - l.cycle <= 1 || l.cq_generation >= cq_generation);
            let (scan, stale) = if fresh { (last, None) } else { (None, last) };
            let mut pre = Preemptor {
                wl,
                cq,
                priority,
                timestamp,
                scan,
                max_counts,
                room_only: false,
            };
            let (mut assignment, mut targets) =
                self.preemption_sim().get_assignments(&pre, partial);
            // TAS: quota is not enough, every pod needs a place (as if the targets were gone).
            let mut placement =
                self.nominate_placement(&pre, partial, &mut assignment, &mut targets);
            let mut pinned = false;
            if sticky
                && assignment.mode() != Mode::Fit
                && let Some((a, p)) = self.freed_assignment(wl)
            {
                assignment = a;
                targets.clear();
                placement = p;
                pinned = true;
            }
            if assignment.mode() == Mode::NoFit {
                targets.clear();
            }
            let tas_gen = self.topo.usage_gen;
            let last = pre.scan.take().or(stale);
            entries.push(Entry {
                wl,
                cq,
                priority: pre.priority,
                timestamp: pre.timestamp,
                assignment,
                targets,
                generation,
                cq_generation,
                preemptor: sticky,
                placement,
                tas_gen,
                pinned,
                last,
            });
        }

        for e in &entries {
            tracing::trace!(
                workload = e.wl,
                cluster_queue = %self.tree.node(e.cq).name,
                borrowing = e.assignment.borrowing,
                priority = e.priority,
                mode = ?e.assignment.mode(),
                targets = e.targets.len(),
                "nominated"
            );
        }
        let mut reserved: Vec<(NodeId, Vec<(Fr, i64)>)> = Vec::new();
        let mut preempted = CycleVictims::default();
        // A preemptor whose victims are gone takes what they freed before anyone else can: otherwise a victim
        // that sorts first takes its place back and is preempted again, in a circle.
        // Entries are large: they are moved only when some preemptor is pinned (rare).
        let first: Vec<Entry> = if entries.iter().any(|e| e.pinned) {
            let (first, rest) = entries.into_iter().partition(|e| e.pinned);
            entries = rest;
            first
        } else {
            Vec::new()
        };
        for e in first {
            self.process(e, now, &mut reserved, &mut preempted, &mut requeues);
        }
        if self.fair_sharing() {
            // Each pick goes to the tree holding the lowest-numbered remaining ClusterQueue and
            // only looks at that tree's entries, so entries are grouped by tree once, keyed by
            // their lowest ClusterQueue.
            let mut groups: BTreeMap<NodeId, Vec<Entry>> = BTreeMap::new();
            for e in entries {
                groups.entry(self.tree.root(e.cq)).or_default().push(e);
            }
            let mut order: BTreeSet<(NodeId, NodeId)> = groups
                .iter()
                .filter_map(|(&root, es)| es.iter().map(|e| e.cq).min().map(|m| (m, root)))
                .collect();
            while let Some((_, root)) = order.pop_first() {
                let Some(group) = groups.get_mut(&root) else {
                    continue;
                };
                let idx = self.fair_pick(group);
                let e = group.swap_remove(idx);
                if let Some(m) = group.iter().map(|e| e.cq).min() {
                    order.insert((m, root));
                }
                self.process(e, now, &mut reserved, &mut preempted, &mut requeues);
            }
        } else {
            // Entries are large: their keys are sorted (the position breaks ties, as a stable sort keeps them).
            let mut order: Vec<(i32, std::cmp::Reverse<i32>, Time, usize)> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    (
                        e.assignment.borrowing,
                        std::cmp::Reverse(e.priority),
                        e.timestamp,
                        i,
                    )
                })
                .collect();
            order.sort_unstable();
            let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
            for (.., i) in order {
                if let Some(e) = slots[i].take() {
                    self.process(e, now, &mut reserved, &mut preempted, &mut requeues);
                }
            }
        }
        for (cq, usage) in reserved {
            self.sim().add_usage(cq, &usage, -1);
        }
        for (wl, cq, how) in requeues {
            self.requeue(wl, cq, how);
        }
        std::mem::take(&mut self.out)
    }

    fn requeue(&mut self, wl: u32, cq: NodeId, how: Requeue) {
        let Some(key) = self.wl(wl).and_then(|w| w.qkey.clone()) else {
            return;
        };
        let Some(c) = self.cq_mut(cq) else { return };
        let to_heap = match how {
            Requeue::Immediate => true,
            Requeue::NoFit | Requeue::Generic => {
                c.spec.queueing_strategy == QueueingStrategy::StrictFIFO
            }
            Requeue::Mismatch => false,
        };
        if to_heap {
            c.heap.insert(key);
        } else {
            c.inadmissible.insert(key);
            if how == Requeue::NoFit && self.config.scheduling_equivalence_hashing {
                self.set_shape_aside(wl, cq);
            }
        }
    }

    /// The entry's assignment message, worded only where a pending status says it (an admission does not), and
    /// reused while its reasons stay the same.
    fn word(&mut self, e: &Entry) -> std::sync::Arc<str> {
        let last = self.wl_mut(e.wl).and_then(|w| w.worded.take());
        let worded = e.assignment.worded(&self.sim(), e.wl, last);
        let message = worded.text.clone();
        if let Some(w) = self.wl_mut(e.wl) {
            w.worded = Some(worded);
        }
        message
    }

    fn process(
        &mut self,
        e: Entry,
        now: Time,
        reserved: &mut Vec<(NodeId, Vec<(Fr, i64)>)>,
        preempted: &mut CycleVictims,
        requeues: &mut Vec<(u32, NodeId, Requeue)>,
    ) {
        let mut e = e;
        if self.waiting_for_pods_ready {
            // Kueue's scheduler is blocked: the rest of the cycle waits, untouched.
            if let Some(w) = self.wl_mut(e.wl) {
                w.last = e.last.take();
            }
            requeues.push((e.wl, e.cq, Requeue::Immediate));
            return;
        }
        let mode = e.assignment.mode();
        // The new progress reuses the old one's buffers.
        let mut progress = e.last.take().unwrap_or_default();
        e.assignment.fill_scan_progress(&mut progress.tried);
        progress.cycle = self.cycle;
        progress.cq_generation = e.cq_generation;
        let pending_flavors = progress.pending_flavors();
        if pending_flavors && let Some(c) = self.cq_mut(e.cq) {
            // The next attempt resumes from another flavor: the head is worth retrying.
            c.tried = None;
        }
        if let Some(w) = self.wl_mut(e.wl) {
            w.last = Some(progress);
        }
        let no_fit_requeue = if pending_flavors {
            Requeue::Immediate
        } else {
            Requeue::NoFit
        };
        if mode == Mode::NoFit {
            let reason = if e.assignment.no_fit_reason.is_empty() {
                "Pending"
            } else {
                e.assignment.no_fit_reason
            };
            let message = self.word(&e);
            self.set_pending(e.wl, reason, message);
            requeues.push((e.wl, e.cq, no_fit_requeue));
            return;
        }
        if mode == Mode::Preempt && e.targets.is_empty() {
            let reason = if e.assignment.no_fit_reason.is_empty() {
                WAITING_FOR_QUOTA
            } else {
                e.assignment.no_fit_reason
            };
            let message = self.word(&e);
            self.set_pending(e.wl, reason, message);
            requeues.push((e.wl, e.cq, no_fit_requeue));
            let reclaim_any = self
                .cq(e.cq)
                .is_some_and(|c| c.spec.preemption.reclaim_within_cohort == ReclaimPolicy::Any);
            if !reclaim_any {
                let usage = self.capacity_to_reserve(&e);
                self.sim().add_usage(e.cq, &usage, 1);
                reserved.push((e.cq, usage));
            }
            return;
        }
        if e.targets.iter().any(|t| preempted.set.contains(&t.wl)) {
            self.set_pending(
                e.wl,
                WAITING_FOR_QUOTA,
                "Workload has overlapping preemption targets with another workload",
            );
            requeues.push((e.wl, e.cq, Requeue::Immediate));
            return;
        }
        let usage = e.assignment.usage_vec();
        let fits = {
            // Only victims holding quota in this ClusterQueue's tree change what it has available.
            let root = self.tree.root(e.cq);
            let mut removed: Vec<u32> = preempted
                .list
                .iter()
                .filter(|&&(r, _)| r == root)
                .map(|&(_, w)| w)
                .collect();
            removed.extend(
                e.targets
                    .iter()
                    .map(|t| t.wl)
                    .filter(|w| !preempted.set.contains(w)),
            );
            removed.sort_unstable();
            let mut sim = self.sim();
            if !removed.is_empty() {
                sim.remove_workloads(&removed);
            }
            let fits = usage
                .iter()
                .all(|&(fr, v)| v <= sim.tree.cq_available(e.cq, fr));
            if !removed.is_empty() {
                sim.add_workloads(&removed);
            }
            fits
        };
        if !fits {
            self.set_pending(
                e.wl,
                WAITING_FOR_QUOTA,
                "Workload no longer fits after processing another workload",
            );
            requeues.push((e.wl, e.cq, Requeue::Immediate));
            return;
        }
        for t in &e.targets {
            if preempted.set.insert(t.wl) {
                let root = self.tree.root(t.cq);
                preempted.list.push((root, t.wl));
            }
        }
        if mode == Mode::Preempt {
            self.sim().add_usage(e.cq, &usage, 1);
            reserved.push((e.cq, usage));
            if tracing::enabled!(tracing::Level::DEBUG) {
                let name = |w: u32| self.wl(w).map(|x| x.key.to_string()).unwrap_or_default();
                let victims: Vec<String> = e.targets.iter().map(|t| name(t.wl)).collect();
                tracing::debug!(
                    workload = %name(e.wl),
                    borrowing = e.assignment.borrowing,
                    ?victims,
                    "issuing preemptions"
                );
            }
            let issued = self.issue_preemptions(&e, now);
            if issued == 0
                && let Some(c) = self.cq_mut(e.cq)
            {
                // Every victim is already on its way out: nothing changes until one is gone (the quota tree's
                // generation moves then), however many flavors are left to try.
                c.tried = Some((e.wl, e.generation));
            }
            let counts: Vec<i32> = e.assignment.podsets.iter().map(|p| p.count).collect();
            let victims: Vec<_> = e
                .targets
                .iter()
                .filter_map(|t| self.wl(t.wl).map(|v| v.key.clone()))
                .collect();
            if let Some(w) = self.wl_mut(e.wl) {
                w.last = None;
                let full = w.spec.pod_sets.iter().map(|p| p.count);
                w.preempted_for = (!counts.iter().copied().eq(full)).then_some(counts);
                w.awaiting = Some(Awaiting {
                    assignment: e.assignment.clone(),
                    victims,
                });
            }
            let n = e.targets.len();
            let message = self.word(&e);
            self.set_pending(
                e.wl,
                WAITING_FOR_PREEMPTED,
                format!("{message}. Pending the preemption of {n} workload(s)"),
            );
            if let Some(c) = self.cq_mut(e.cq)
                && c.spec.queueing_strategy == QueueingStrategy::BestEffortFIFO
            {
                c.sticky = Some(e.wl);
            }
            requeues.push((e.wl, e.cq, Requeue::Immediate));
            return;
        }
        let placement = match e.placement {
            Some(p) if self.topo.usage_gen == e.tas_gen => Some(p),
            Some(_) => match self.place_assignment(e.wl, &e.assignment, &[]) {
                Ok(p) => Some(p),
                Err(_) => {
                    self.set_pending(
                        e.wl,
                        WAITING_FOR_QUOTA,
                        "Workload no longer fits after processing another workload",
                    );
                    requeues.push((e.wl, e.cq, Requeue::Immediate));
                    return;
                }
            },
            None => None,
        };
        if self.block_now {
            // Kueue's blockAdmission: the workload that fits waits, and so does the scheduler, until every quota
            // holder is PodsReady.
            self.set_pending(e.wl, WAITING_FOR_PODS_READY, WAITING_FOR_PODS_READY_MESSAGE);
            self.waiting_for_pods_ready = true;
            requeues.push((e.wl, e.cq, Requeue::Immediate));
            return;
        }
        self.block_now = self.config.block_admission;
        let admission = self.shared_admission(&e.assignment, e.cq, e.wl);
        if let Some(w) = self.wl_mut(e.wl) {
            w.awaiting = None;
        }
        self.dequeue(e.wl);
        let usage = e.assignment.usage_vec();
        debug_assert_eq!(usage, self.admission_usage(&admission));
        self.reserve_with_usage(e.wl, e.cq, admission.clone(), usage, now);
        self.afs_entered(e.wl, e.cq);
        if let Some(p) = placement {
            self.topo.hold(e.wl, p);
        }
        if let Some(c) = self.cq_mut(e.cq)
            && c.tried.is_some_and(|(w, g)| w == e.wl && g == e.generation)
        {
            c.tried = None;
        }
        if let Some(w) = self.wl(e.wl) {
            let key = w.key.clone();
            tracing::debug!(workload = %key, cluster_queue = %admission.cluster_queue, "quota reserved");
            self.out.push(Decision::Admit {
                workload: key,
                admission,
                time: now,
            });
        }
    }

    /// The admission of an entry that fits: the one an earlier workload admitted alike in its ClusterQueue got
    /// (same assignment shape and pod set names), or a new one kept for the next.
    fn shared_admission(
        &mut self,
        assignment: &Assignment,
        cq: NodeId,
        wl: u32,
    ) -> std::sync::Arc<crate::Admission> {
        use std::hash::{BuildHasher, Hash, Hasher};
        /// Distinct admissions kept at most (the shapes of a cluster's workloads are few; a flood is forgotten).
        const KEPT: usize = 4096;
        let mut h = foldhash::fast::FixedState::with_seed(0x0ad3_15c0).build_hasher();
        for part in assignment.admission_shape() {
            part.hash(&mut h);
        }
        let key = (cq, h.finish());
        if let (Some(kept), Some(w)) = (self.admissions.get(&key), self.wl(wl))
            // Equal shapes hold one header entry per pod set, so the pod set counts are equal too.
            && assignment.admission_shape().eq(kept.shape.iter().copied())
            && kept
                .admission
                .pod_set_assignments
                .iter()
                .zip(&assignment.podsets)
                .all(|(psa, ps)| {
                    w.spec
                        .pod_sets
                        .get(ps.ps)
                        .is_some_and(|p| p.name == psa.name)
                })
        {
            return kept.admission.clone();
        }
        let admission = std::sync::Arc::new(assignment.to_admission(&self.sim(), cq, wl));
        if self.admissions.len() >= KEPT {
            self.admissions.clear();
        }
        let shared = crate::SharedAdmission {
            shape: assignment.admission_shape().collect(),
            admission: admission.clone(),
        };
        self.admissions.insert(key, shared);
        admission
    }

    /// The assignment a preemptor's own preemptions freed, when every victim is gone and it fits the quota
    /// and the topology now (Fit mode, with its placement).
    fn freed_assignment(&mut self, wl: u32) -> Option<(Assignment, Option<Vec<PodSetPlacement>>)> {
        let w = self.wl(wl)?;
        let awaiting = w.awaiting.clone()?;
        let cq = w.queued_in?;
        let gone = awaiting.victims.iter().all(|k| {
            self.wl_by_key
                .get(k)
                .and_then(|&i| self.wl(i))
                .is_none_or(|v| v.phase != Phase::Evicting)
        });
        if !gone {
            return None;
        }
        let mut a = awaiting.assignment;
        let fits = a
            .usage
            .iter()
            .all(|(&fr, &v)| v <= self.tree.cq_available(cq, fr));
        if !fits {
            return None;
        }
        let placement = if self.uses_tas(&a) {
            Some(self.place_assignment(wl, &a, &[]).ok()?)
        } else {
            None
        };
        a.forced_mode = Some(Mode::Fit);
        a.no_fit_reason = "";
        Some((a, placement))
    }

    /// Kueue's quotaResourcesToReserve for a preempting entry that found no targets.
    fn capacity_to_reserve(&self, e: &Entry) -> Vec<(Fr, i64)> {
        e.assignment
            .usage
            .iter()
            .map(|(&fr, &u)| {
                let q = self.tree.quota(e.cq, fr);
                let used = self.tree.usage(e.cq, fr);
                let v = if e.assignment.borrowing > 0 {
                    match q.borrowing_limit {
                        None => u,
                        Some(bl) => u.min(q.nominal.saturating_add(bl).saturating_sub(used)),
                    }
                } else {
                    u.min(q.nominal.saturating_sub(used)).max(0)
                };
                (fr, v)
            })
            .collect()
    }

    fn cq_path(&self, cq: NodeId) -> String {
        let mut parts = vec![self.tree.node(cq).name.clone()];
        for a in self.tree.ancestors(cq) {
            parts.push(self.tree.node(a).name.clone());
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    /// Evicts the entry's targets that are still admitted; returns how many.
    fn issue_preemptions(&mut self, e: &Entry, now: Time) -> usize {
        let Some(w) = self.wl(e.wl) else { return 0 };
        let uid = if w.spec.uid.is_empty() {
            "UNKNOWN".to_string()
        } else {
            w.spec.uid.clone()
        };
        // Kueue prints UNKNOWN for a missing or empty job-uid label.
        let job_uid = w
            .spec
            .job_uid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "UNKNOWN".to_string());
        let preemptor = w.key.clone();
        let preemptor_path = self.cq_path(e.cq);
        let mut issued = 0;
        for t in &e.targets {
            let already = self.wl(t.wl).is_none_or(|v| v.phase != Phase::Admitted);
            if already {
                continue;
            }
            let message = format!(
                "Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {}; preemptor path: {preemptor_path}; preemptee path: {}",
                human_reason(t.reason),
                self.cq_path(t.cq)
            );
            self.evict(
                t.wl,
                "Preempted",
                Some(t.reason.to_string()),
                Some(preemptor.clone()),
                message,
                now,
            );
            issued += 1;
        }
        issued
    }

    /// Fair-sharing tournament among the entries of one tree: picks the next entry to process.
    fn fair_pick(&mut self, entries: &[Entry]) -> usize {
        let Some(first) = (0..entries.len()).min_by_key(|&i| entries[i].cq) else {
            return 0;
        };
        let cq = entries[first].cq;
        if self.tree.parent(cq).is_none() {
            return first;
        }
        let root = self.tree.root(cq);
        // Per (cohort, entry): the share of the cohort's child on the entry's path, with the entry added.
        let mut keys: BTreeMap<(NodeId, usize), OrderKey> = BTreeMap::new();
        let mut in_tree: Vec<usize> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            if self.tree.root(e.cq) != root || self.tree.parent(e.cq).is_none() {
                continue;
            }
            in_tree.push(i);
            let usage = e.assignment.usage_vec();
            let mut sim = self.sim();
            sim.add_usage(e.cq, &usage, 1);
            // One batch per entry: the shares of every node on its path (with the entry added).
            let path: Vec<(NodeId, NodeId)> = {
                let mut child = e.cq;
                let mut p = Vec::new();
                for anc in sim.tree.ancestors(e.cq) {
                    p.push((anc, child));
                    child = anc;
                }
                p
            };
            let children: Vec<NodeId> = path.iter().map(|&(_, c)| c).collect();
            let shares = sim.shares(&children);
            for (&(anc, child), share) in path.iter().zip(shares) {
                let borrowing_on_requested = usage.iter().any(|&(fr, v)| {
                    v > 0 && sim.tree.usage(child, fr) > sim.tree.subtree(child, fr)
                });
                keys.insert(
                    (anc, i),
                    OrderKey {
                        borrowing_on_requested,
                        share,
                        priority: e.priority,
                        timestamp: e.timestamp,
                    },
                );
            }
            sim.add_usage(e.cq, &usage, -1);
        }
        let by_cq: BTreeMap<NodeId, usize> = in_tree.iter().map(|&i| (entries[i].cq, i)).collect();
        let preemptors: FastSet<usize> = in_tree
            .iter()
            .copied()
            .filter(|&i| entries[i].preemptor)
            .collect();
        self.tournament(root, &by_cq, &keys, &preemptors)
            .unwrap_or(first)
    }

    fn tournament(
        &self,
        cohort: NodeId,
        by_cq: &BTreeMap<NodeId, usize>,
        keys: &BTreeMap<(NodeId, usize), OrderKey>,
        preemptors: &FastSet<usize>,
    ) -> Option<usize> {
        let node = self.tree.node(cohort);
        let mut cands: Vec<usize> = Vec::new();
        for &c in &node.child_cohorts {
            if let Some(w) = self.tournament(c, by_cq, keys, preemptors) {
                cands.push(w);
            }
        }
        for c in &node.child_cqs {
            if let Some(&i) = by_cq.get(c) {
                cands.push(i);
            }
        }
        cands.first()?;
        // With Kueue's PrioritizePreemptorWorkloads gate a workload whose preemptions were
        // issued goes first, so a requeued victim with a lower share cannot take the quota it
        // freed back (and be preempted for it again).
        let preempting: Vec<usize> = if self.config.prioritize_preemptor_workloads {
            cands
                .iter()
                .copied()
                .filter(|c| preemptors.contains(c))
                .collect()
        } else {
            Vec::new()
        };
        let pool = if preempting.is_empty() {
            cands
        } else {
            preempting
        };
        if pool.len() == 1 {
            return Some(pool[0]);
        }
        // All the candidates at this level go to the policy in one call.
        let (with_keys, keyed): (Vec<usize>, Vec<OrderKey>) = pool
            .iter()
            .filter_map(|&c| keys.get(&(cohort, c)).map(|k| (c, *k)))
            .unzip();
        let policy = self.fairness.policy_of(&self.tree, cohort);
        let best = match policy.order(&keyed).first() {
            Some(&k) => with_keys.get(k).copied().unwrap_or(pool[0]),
            None => pool[0],
        };
        Some(best)
    }
}
