//! Preemption: classical (Kueue's candidate generator with hierarchical reclaim) and fair sharing,
//! both simulated on the live quota tree (usage removal is exact and reverted afterwards).

use std::cmp::{Ordering, Reverse};

use super::fasthash::{FastMap, FastSet};

use super::assign::Assignment;
use super::fairness::{Share, compare as compare_shares, weighted_share};
use super::preemption_cost::{CostInput, PreemptionCost, PreemptionCosts};
use super::quota::{Fr, NodeId, Tree};
use super::topology::admit::TasParts;
use super::tree_fairness::TreeFairness;
use super::{
    BorrowWithinCohortPolicy, CqData, FairSharingConfig, FairSharingStrategy, Flavor, FrMask,
    Interner, Phase, ReclaimPolicy, ScanProgress, Time, WithinCqPolicy, Wl,
};

pub(crate) const IN_CLUSTER_QUEUE: &str = "InClusterQueue";
pub(crate) const IN_COHORT_RECLAMATION: &str = "InCohortReclamation";
pub(crate) const IN_COHORT_FAIR_SHARING: &str = "InCohortFairSharing";
pub(crate) const IN_COHORT_RECLAIM_WHILE_BORROWING: &str = "InCohortReclaimWhileBorrowing";

/// Kueue's human-readable preemption reasons.
pub(crate) fn human_reason(reason: &str) -> &'static str {
    match reason {
        IN_CLUSTER_QUEUE => "prioritization in the ClusterQueue",
        IN_COHORT_RECLAMATION => "reclamation within the cohort",
        IN_COHORT_FAIR_SHARING => "Fair Sharing within the cohort",
        IN_COHORT_RECLAIM_WHILE_BORROWING => "reclamation within the cohort while borrowing",
        _ => "UNKNOWN",
    }
}

/// A workload chosen for preemption.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Target {
    pub wl: u32,
    pub reason: &'static str,
    pub cq: NodeId,
}

/// The workload trying to get in.
#[derive(Clone, Debug)]
pub(crate) struct Preemptor {
    pub wl: u32,
    pub cq: NodeId,
    pub priority: i32,
    pub timestamp: Time,
    /// Where the flavor search resumes (None: from the first flavor).
    pub scan: Option<ScanProgress>,
    /// Pod counts not to exceed (a sticky preemptor's reduced size), None: the full counts.
    pub max_counts: Option<Vec<i32>>,
    /// Preempting for room on the nodes only (its quota fits): victims must have a lower priority.
    pub room_only: bool,
}

/// Split borrows of the engine for simulation: the tree is mutable, everything else read-only.
pub(crate) struct Sim<'a> {
    pub tree: &'a mut Tree,
    pub cqs: &'a [Option<CqData>],
    pub wls: &'a [Option<Wl>],
    pub flavors: &'a [Option<Flavor>],
    pub ids: &'a Interner,
    pub fairness: &'a TreeFairness,
    /// Whether shares count usage history (admission order) or not (preemption).
    pub with_history: bool,
    pub fair: Option<&'a FairSharingConfig>,
    pub pods_resource: u32,
    /// Resources no resource group covers are left out of the quota check (Kueue's IgnoreUndeclared).
    pub ignore_undeclared: bool,
    pub now: Time,
    /// Kueue Topology levels by name (TAS flavor matching checks requested levels).
    /// Shared, not borrowed: a topology-aware probe borrows the rest of the topology state mutably.
    pub topologies: std::sync::Arc<std::collections::HashMap<String, Vec<String>>>,
    /// Preemption-cost policies per ClusterQueue.
    pub costs: &'a PreemptionCosts,
    /// What the preemptor's policy said about the candidates of the current search.
    pub cost_of: FastMap<u32, PreemptionCost>,
    /// The preemptor's topology placement, checked as candidates are removed (TAS-aware victim search).
    pub tas: Option<TasProbe<'a>>,
    /// Workloads removed from the tree so far while `tas` is set (their nodes count as free).
    pub removed: Vec<u32>,
    /// Candidates tried before the others, in Kueue's order among themselves (those in one topology domain).
    pub prefer: Option<&'a FastSet<u32>>,
    /// The engine's reusable search buffers.
    pub scratch: &'a mut Scratch,
}

/// Places the preemptor's assignment as if the removed workloads were gone.
pub(crate) struct TasProbe<'a> {
    pub parts: TasParts<'a>,
    pub wl: u32,
    pub assignment: &'a Assignment,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    WithinCq,
    Hierarchical,
    ReclaimWithoutBorrowing,
    ReclaimWhileBorrowing,
}

impl Variant {
    fn reason(self) -> &'static str {
        match self {
            Variant::WithinCq => IN_CLUSTER_QUEUE,
            Variant::Hierarchical | Variant::ReclaimWithoutBorrowing => IN_COHORT_RECLAMATION,
            Variant::ReclaimWhileBorrowing => IN_COHORT_RECLAIM_WHILE_BORROWING,
        }
    }
}

/// Sort key of a preemption candidate: evicting first, other ClusterQueues first, lower
/// priority, most recently reserved, UID.
type CandidateKey<'a> = (
    Reverse<bool>,
    bool,
    Reverse<u64>,
    i64,
    Reverse<Time>,
    &'a str,
);

/// Buffers the classical search keeps between searches: it runs for most heads of every cycle.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scratch {
    /// Shares of this cycle (see [`TreeFairness::shares_cached_into`]); shares are asked for through `&Sim`.
    pub(crate) shares: crate::tree_fairness::SharedShareCache,
    candidates: Vec<Candidate>,
    /// The list of each candidate (0 hierarchy, 1 other queues, 2 own queue).
    lists: Vec<u8>,
    /// A flavor search's choices for the flavor being tried and for the best so far.
    pub(crate) flavor_choices: Vec<(u32, crate::assign::FlavorChoice)>,
    pub(crate) best_choices: Vec<(u32, crate::assign::FlavorChoice)>,
    /// The classical search's trial targets.
    targets: Vec<Target>,
    /// What remains of the preemptor's requests for each level of its cohort tree.
    remaining: Vec<(Fr, i64)>,
    /// The fair-sharing search's target ordering.
    ordering: OrderingBufs,
}

/// Sort key of the classical search's whole candidate list: flags (evicting first, the list: hierarchy, other
/// queues, own queue; preferred first; other queues first), then the rest of the candidate order.
type AllKey<'a> = (u8, Reverse<u64>, i64, Reverse<Time>, &'a str);

#[derive(Clone, Debug)]
struct Candidate {
    wl: u32,
    cq: NodeId,
    lca: Option<NodeId>,
    variant: Variant,
}

impl<'a> Sim<'a> {
    pub(crate) fn wl(&self, i: u32) -> Option<&'a Wl> {
        self.wls.get(i as usize).and_then(|w| w.as_ref())
    }

    pub(crate) fn cq(&self, n: NodeId) -> Option<&'a CqData> {
        self.cqs.get(n as usize).and_then(|c| c.as_ref())
    }

    pub(crate) fn can_preempt_while_borrowing(&self, cq: NodeId) -> bool {
        let Some(c) = self.cq(cq) else { return false };
        c.spec.preemption.borrow_within_cohort.policy != BorrowWithinCohortPolicy::Never
            || (self.fair.is_some()
                && c.spec.preemption.reclaim_within_cohort != ReclaimPolicy::Never)
    }

    /// Removes admitted workloads' usage from the tree (simulation).
    pub(crate) fn remove_workloads(&mut self, wls: &[u32]) {
        for &w in wls {
            self.shift(w, None, -1);
        }
    }

    /// Re-adds admitted workloads' usage (reverts [`Sim::remove_workloads`]).
    pub(crate) fn add_workloads(&mut self, wls: &[u32]) {
        for &w in wls {
            self.shift(w, None, 1);
        }
    }

    /// Removes (`sign` -1) or re-adds (1) an admitted workload's usage: all of it, or (`only`) just its usage of
    /// those flavor-resources. The classical search reads no others, so the rest need not move (a third of the
    /// work per trial when one resource is short). Pairs of calls leave the tree as it was.
    fn shift(&mut self, w: u32, only: Option<&[(Fr, i64)]>, sign: i64) {
        if self.tas.is_some() {
            if sign < 0 {
                self.removed.push(w);
            } else {
                self.removed.retain(|&x| x != w);
            }
        }
        if let Some(adm) = self.wl(w).and_then(|x| x.adm.as_ref()) {
            for &(fr, v) in &adm.usage {
                if only.is_none_or(|only| only.iter().any(|&(f, _)| f == fr)) {
                    self.tree.add_usage(adm.cq, fr, sign * v);
                }
            }
        }
    }

    pub(crate) fn add_usage(&mut self, cq: NodeId, usage: &[(Fr, i64)], sign: i64) {
        for &(fr, v) in usage {
            self.tree.add_usage(cq, fr, sign * v);
        }
    }

    fn uses_resources(&self, wl: u32, frs: &[Fr]) -> bool {
        self.uses_any(wl, FrMask::of(frs.iter().copied()), frs)
    }

    /// [`Sim::uses_resources`] with the mask of `frs` computed by the caller.
    fn uses_any(&self, wl: u32, mask: FrMask, frs: &[Fr]) -> bool {
        self.wl(wl).and_then(|w| w.adm.as_ref()).is_some_and(|a| {
            a.frs
                .intersects(mask)
                .unwrap_or_else(|| a.usage.iter().any(|(fr, _)| frs.contains(fr)))
        })
    }

    /// A candidate's priority in this search: its own plus the boost its preemptor's cost policy gave it.
    fn effective_priority(&self, w: &Wl, i: u32) -> i64 {
        // Without a cost policy the map is empty: no lookup.
        let boost = if self.cost_of.is_empty() {
            0
        } else {
            self.cost_of.get(&i).map_or(0, |c| c.boost)
        };
        i64::from(w.spec.priority) + i64::from(boost)
    }

    fn satisfies(&self, pre: &Preemptor, cand: u32, policy: PolicyKind) -> bool {
        let Some(c) = self.wl(cand) else { return false };
        if !self.cost_of.is_empty() && self.cost_of.get(&cand).is_some_and(|c| c.protected) {
            return false;
        }
        let cand_p = self.effective_priority(c, cand);
        let pre_p = i64::from(pre.priority);
        let lower = pre_p > cand_p;
        match policy {
            PolicyKind::Never => false,
            PolicyKind::Lower => lower,
            PolicyKind::LowerOrNewerEqual => {
                lower || (pre_p == cand_p && pre.timestamp < c.spec.creation_time)
            }
            PolicyKind::Any => true,
        }
    }

    /// Kueue's CandidatesOrdering: evicted first, other ClusterQueues first, lower priority,
    /// most recently reserved, UID.
    fn candidate_cmp(&self, a: u32, b: u32, cq: NodeId) -> Ordering {
        let (Some(wa), Some(wb)) = (self.wl(a), self.wl(b)) else {
            return Ordering::Equal;
        };
        let ev_a = wa.phase == Phase::Evicting;
        let ev_b = wb.phase == Phase::Evicting;
        let same_a = wa.adm.as_ref().is_some_and(|x| x.cq == cq);
        let same_b = wb.adm.as_ref().is_some_and(|x| x.cq == cq);
        let ra = wa.adm.as_ref().map(|x| x.reserved_at).unwrap_or(self.now);
        let rb = wb.adm.as_ref().map(|x| x.reserved_at).unwrap_or(self.now);
        // Admission fair sharing: of two candidates of one ClusterQueue from different LocalQueues, the one whose
        // LocalQueue used more goes first (Kueue's CandidatesOrdering).
        let cq_a = wa.adm.as_ref().map(|x| x.cq);
        let by_usage =
            if cq_a == wb.adm.as_ref().map(|x| x.cq) && wa.spec.queue_name != wb.spec.queue_name {
                wb.afs.cmp(&wa.afs)
            } else {
                Ordering::Equal
            };
        ev_b.cmp(&ev_a)
            .then(same_a.cmp(&same_b))
            .then(by_usage)
            .then(
                self.effective_priority(wa, a)
                    .cmp(&self.effective_priority(wb, b)),
            )
            .then(rb.cmp(&ra))
            .then(wa.spec.uid.cmp(&wb.spec.uid))
    }

    /// [`Sim::candidate_cmp`] as a sort key (None when the workload is unknown).
    /// With `by_usage`, candidates are ordered by their LocalQueue's admission usage after the ClusterQueue rule
    /// (a sort key cannot compare it only between candidates of one ClusterQueue as Kueue's pairwise rule does,
    /// so the caller asks for it where every candidate in that position shares a ClusterQueue).
    fn candidate_key(&self, w: u32, cq: NodeId, by_usage: bool) -> Option<CandidateKey<'a>> {
        let wl = self.wl(w)?;
        let adm = wl.adm.as_ref();
        let same = adm.is_some_and(|x| x.cq == cq);
        Some((
            Reverse(wl.phase == Phase::Evicting),
            same,
            Reverse(if same || by_usage { wl.afs } else { 0 }),
            self.effective_priority(wl, w),
            Reverse(adm.map(|x| x.reserved_at).unwrap_or(self.now)),
            wl.spec.uid.as_str(),
        ))
    }

    /// Stable sort in [`Sim::candidate_cmp`] order, extracting each key once instead of per
    /// comparison; the preferred candidates (if any) go first.
    fn sort_candidates<T: Clone>(&self, items: &mut [T], wl_of: impl Fn(&T) -> u32, cq: NodeId) {
        self.sort_in_kueue_order(items, &wl_of, cq);
        if let Some(prefer) = self.prefer {
            // A stable partition keeps Kueue's order on each side.
            let (mut first, rest): (Vec<T>, Vec<T>) = items
                .iter()
                .cloned()
                .partition(|x| prefer.contains(&wl_of(x)));
            first.extend(rest);
            for (slot, x) in items.iter_mut().zip(first) {
                *slot = x;
            }
        }
    }

    /// Whether the candidates (by the ClusterQueue holding each) outside `cq` all hold quota in one
    /// ClusterQueue: only then are they ordered by LocalQueue usage.
    fn one_other_cq(holders: impl Iterator<Item = NodeId>, cq: NodeId) -> bool {
        let mut others = holders.filter(|&q| q != cq);
        others.next().is_none_or(|first| others.all(|q| q == first))
    }

    fn sort_in_kueue_order<T: Clone>(
        &self,
        items: &mut [T],
        wl_of: &impl Fn(&T) -> u32,
        cq: NodeId,
    ) {
        // Candidates from other ClusterQueues are ordered by LocalQueue usage only when they all share one.
        let holders = items
            .iter()
            .filter_map(|x| self.wl(wl_of(x)).and_then(|w| w.adm.as_ref()).map(|a| a.cq));
        let one_other = Self::one_other_cq(holders, cq);
        let keyed: Option<Vec<(CandidateKey<'a>, T)>> = items
            .iter()
            .map(|x| {
                self.candidate_key(wl_of(x), cq, one_other)
                    .map(|k| (k, x.clone()))
            })
            .collect();
        match keyed {
            Some(mut keyed) => {
                keyed.sort_by(|a, b| a.0.cmp(&b.0));
                for (slot, (_, x)) in items.iter_mut().zip(keyed) {
                    *slot = x;
                }
            }
            None => items.sort_by(|a, b| self.candidate_cmp(wl_of(a), wl_of(b), cq)),
        }
    }

    fn classify(
        &self,
        pre: &Preemptor,
        cand: u32,
        cand_cq: NodeId,
        (mask, frs): (FrMask, &[Fr]),
        hierarchical: bool,
    ) -> Option<Variant> {
        if !self.uses_any(cand, mask, frs) {
            return None;
        }
        let c = self.cq(pre.cq)?;
        let policy = if cand_cq == pre.cq {
            PolicyKind::from_within(c.spec.preemption.within_cluster_queue)
        } else {
            PolicyKind::from_reclaim(c.spec.preemption.reclaim_within_cohort)
        }
        .for_preemptor(pre);
        if !self.satisfies(pre, cand, policy) {
            return None;
        }
        if cand_cq == pre.cq {
            return Some(Variant::WithinCq);
        }
        if hierarchical {
            return Some(Variant::Hierarchical);
        }
        let bwc = &c.spec.preemption.borrow_within_cohort;
        if bwc.policy == BorrowWithinCohortPolicy::Never {
            return Some(Variant::ReclaimWithoutBorrowing);
        }
        let cand_p = self.effective_priority(self.wl(cand)?, cand);
        let above = cand_p >= i64::from(pre.priority)
            || bwc
                .max_priority_threshold
                .is_some_and(|t| cand_p > i64::from(t));
        Some(if above {
            Variant::ReclaimWithoutBorrowing
        } else {
            Variant::ReclaimWhileBorrowing
        })
    }

    fn candidates_from_cq(
        &self,
        pre: &Preemptor,
        cq: NodeId,
        lca: Option<NodeId>,
        frs: &[Fr],
        hierarchical: bool,
        out: &mut Vec<Candidate>,
    ) {
        let Some(c) = self.cq(cq) else { return };
        let mask = FrMask::of(frs.iter().copied());
        for &w in &c.admitted {
            if let Some(variant) = self.classify(pre, w, cq, (mask, frs), hierarchical) {
                out.push(Candidate {
                    wl: w,
                    cq,
                    lca,
                    variant,
                });
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn collect_in_subtree(
        &self,
        pre: &Preemptor,
        cohort: NodeId,
        subtree_root: NodeId,
        skip: Option<NodeId>,
        frs: &[Fr],
        hierarchical: bool,
        out: &mut Vec<Candidate>,
    ) {
        let node = self.tree.node(cohort);
        for &child in &node.child_cohorts {
            if Some(child) == skip || self.tree.within_nominal_in(child, frs) {
                continue;
            }
            self.collect_in_subtree(pre, child, subtree_root, skip, frs, hierarchical, out);
        }
        for &child in &node.child_cqs {
            if child == pre.cq {
                continue;
            }
            if !self.tree.within_nominal_in(child, frs) {
                self.candidates_from_cq(pre, child, Some(subtree_root), frs, hierarchical, out);
            }
        }
    }

    fn candidate_valid(&self, pre: &Preemptor, c: &Candidate, borrow: bool, frs: &[Fr]) -> bool {
        if c.cq == pre.cq {
            return true;
        }
        if borrow && c.variant == Variant::ReclaimWithoutBorrowing {
            return false;
        }
        if self.tree.within_nominal_in(c.cq, frs) {
            return false;
        }
        // Up to the lowest common ancestor.
        self.tree
            .ancestors_iter(c.cq)
            .take_while(|&a| Some(a) != c.lca)
            .all(|a| !self.tree.within_nominal_in(a, frs))
    }

    /// Kueue's workloadFits: the quota, then (in a TAS-aware search) the placement with the removed workloads'
    /// nodes free.
    fn workload_fits(&mut self, cq: NodeId, usage: &[(Fr, i64)], allow_borrowing: bool) -> bool {
        let quota = usage.iter().all(|&(fr, v)| {
            (allow_borrowing || !self.tree.borrowing_with(cq, fr, v))
                && v <= self.tree.cq_available(cq, fr)
        });
        if !quota {
            return false;
        }
        match &mut self.tas {
            Some(t) => t
                .parts
                .place_assignment(t.wl, t.assignment, &self.removed)
                .is_ok(),
            None => true,
        }
    }

    /// Chooses preemption targets so that `usage` fits; empty when impossible.
    pub(crate) fn get_targets(
        &mut self,
        pre: &Preemptor,
        frs: &[Fr],
        usage: &[(Fr, i64)],
    ) -> Vec<Target> {
        self.ask_cost_policy(pre, frs);
        if self.fair.is_some() {
            self.fair_preemptions(pre, frs, usage)
        } else {
            self.classical_preemptions(pre, frs, usage)
        }
    }

    fn classical_preemptions(
        &mut self,
        pre: &Preemptor,
        frs: &[Fr],
        usage: &[(Fr, i64)],
    ) -> Vec<Target> {
        let Some(c) = self.cq(pre.cq) else {
            return Vec::new();
        };
        // Candidates in collection order, each with its list: 0 reclaim from the hierarchy, 1 from other
        // queues by priority, 2 from the preemptor's own queue. The buffer is the engine's, kept between searches.
        let forbidden =
            c.spec.preemption.borrow_within_cohort.policy == BorrowWithinCohortPolicy::Never;
        let under_nominal = frs
            .iter()
            .all(|&fr| self.tree.quota(pre.cq, fr).nominal > self.tree.usage(pre.cq, fr));
        let mut cands = std::mem::take(&mut self.scratch.candidates);
        cands.clear();
        if c.spec.preemption.within_cluster_queue != WithinCqPolicy::Never {
            self.candidates_from_cq(pre, pre.cq, None, frs, false, &mut cands);
        }
        let own = cands.len();
        let mut lists = std::mem::take(&mut self.scratch.lists);
        lists.clear();
        lists.resize(own, 2);
        if self.tree.parent(pre.cq).is_some()
            && c.spec.preemption.reclaim_within_cohort != ReclaimPolicy::Never
        {
            let mut remaining = std::mem::take(&mut self.scratch.remaining);
            remaining.clear();
            remaining.extend_from_slice(usage);
            let mut adv = self.tree.quantities_fit_in_quota(pre.cq, &mut remaining);
            let mut prev = None;
            let mut next = self.tree.parent(pre.cq);
            while let Some(anc) = next {
                next = self.tree.parent(anc);
                // Outside the hierarchy's reclaim, a ClusterQueue that never preempts while borrowing only gets
                // candidates it may take without borrowing: none while it is over its nominal quota (the search
                // then only borrows), so they are not collected.
                if adv || !forbidden || under_nominal {
                    self.collect_in_subtree(pre, anc, anc, prev, frs, adv, &mut cands);
                }
                lists.resize(cands.len(), if adv { 0 } else { 1 });
                let fits = self.tree.quantities_fit_in_quota(anc, &mut remaining);
                adv = adv || fits;
                prev = Some(anc);
            }
            self.scratch.remaining = remaining;
        }
        let no_other = cands.len() == own;
        let no_hier = !lists.contains(&0);
        // Kueue's order: evicting candidates first, then reclaim from the hierarchy, from other queues by
        // priority, and from the preemptor's own queue, each list in its candidate order with the preferred
        // (one topology domain) first. One keyed sort gives that order without building the lists again.
        // Per list, whether its candidates from other queues all come from one (a candidate's queue holds it).
        let one_other: [bool; 3] = std::array::from_fn(|rank| {
            let holders = cands
                .iter()
                .zip(&lists)
                .filter(|&(_, &l)| usize::from(l) == rank)
                .map(|(c, _)| c.cq);
            Self::one_other_cq(holders, pre.cq)
        });
        let attempts: &[bool] = if no_other || (forbidden && !under_nominal) {
            &[true]
        } else if forbidden && no_hier {
            &[false, true]
        } else {
            &[true, false]
        };
        // With borrowing as the only attempt, a candidate that may only be reclaimed without borrowing is never
        // valid: it is left out of the sort (in a loaded cohort most are).
        let only_borrowing = attempts == [true];
        let mut keyed: Vec<(AllKey<'a>, u32)> = Vec::with_capacity(cands.len());
        for (i, (cand, &rank)) in cands.iter().zip(&lists).enumerate() {
            if only_borrowing && cand.variant == Variant::ReclaimWithoutBorrowing {
                continue;
            }
            let Some(k) = self.candidate_key(cand.wl, pre.cq, one_other[usize::from(rank)]) else {
                continue;
            };
            let preferred = self.prefer.is_some_and(|p| p.contains(&cand.wl));
            // The flags in one byte: evicting first, then the list, preferred first, own queue last.
            let flags =
                (u8::from(!k.0.0) << 4) | (rank << 2) | (u8::from(!preferred) << 1) | u8::from(k.1);
            keyed.push(((flags, k.2, k.3, k.4, k.5), i as u32));
        }
        // The position breaks ties, so the unstable sort orders exactly as a stable one would.
        keyed.sort_unstable();
        let mut found = Vec::new();
        // Trial targets go into the engine's buffer: most searches find no set, and one that does copies it out.
        let mut targets = std::mem::take(&mut self.scratch.targets);
        'attempts: for &borrow in attempts {
            targets.clear();
            for &(_, i) in &keyed {
                let cand = &cands[i as usize];
                if !self.candidate_valid(pre, cand, borrow, frs) {
                    continue;
                }
                self.shift(cand.wl, Some(usage), -1);
                targets.push(Target {
                    wl: cand.wl,
                    reason: cand.variant.reason(),
                    cq: cand.cq,
                });
                if self.workload_fits(pre.cq, usage, borrow) {
                    self.fill_back(pre.cq, usage, &mut targets, borrow, Some(usage));
                    for t in &targets {
                        self.shift(t.wl, Some(usage), 1);
                    }
                    found = targets.clone();
                    break 'attempts;
                }
            }
            for t in &targets {
                self.shift(t.wl, Some(usage), 1);
            }
        }
        self.scratch.targets = targets;
        self.scratch.candidates = cands;
        self.scratch.lists = lists;
        found
    }

    /// Asks the preemptor's ClusterQueue's cost policy about every admitted workload of its cohort tree that
    /// uses one of `frs` (one call per search); without a policy the search runs on plain priorities.
    fn ask_cost_policy(&mut self, pre: &Preemptor, frs: &[Fr]) {
        self.cost_of.clear();
        if !self.costs.any() {
            return;
        }
        let root = self.tree.root(pre.cq);
        let mut cands = Vec::new();
        for cq in self.subtree_cqs(root) {
            if let Some(c) = self.cq(cq) {
                cands.extend(
                    c.admitted
                        .iter()
                        .copied()
                        .filter(|&w| self.uses_resources(w, frs)),
                );
            }
        }
        let inp = CostInput {
            cqs: self.cqs,
            wls: self.wls,
            ids: self.ids,
            now: self.now,
        };
        self.cost_of = self.costs.costs(&inp, pre.cq, pre.priority, &cands);
    }

    /// Re-adds targets (newest first) whose removal turns out unnecessary; all stay removed on return. Targets
    /// were removed with [`Sim::shift`] for `moved` (all their usage when `None`) and move the same way.
    fn fill_back(
        &mut self,
        cq: NodeId,
        usage: &[(Fr, i64)],
        targets: &mut Vec<Target>,
        borrow: bool,
        moved: Option<&[(Fr, i64)]>,
    ) {
        if targets.len() < 2 {
            return;
        }
        let mut i = targets.len() - 1;
        while i > 0 {
            i -= 1;
            let w = targets[i].wl;
            self.shift(w, moved, 1);
            if self.workload_fits(cq, usage, borrow) {
                targets.swap_remove(i);
            } else {
                self.shift(w, moved, -1);
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Fair sharing

    /// The node's share, with its current (possibly simulated) usage.
    pub(crate) fn share(&self, n: NodeId) -> Share {
        let mut cache = self.scratch.shares.lock();
        self.fairness
            .share_cached(self.tree, self.ids, self.with_history, n, &mut cache)
    }

    /// The shares of several nodes, in one policy call.
    pub(crate) fn shares(&self, nodes: &[NodeId]) -> Vec<Share> {
        let mut out = Vec::with_capacity(nodes.len());
        self.shares_into(nodes, &mut out);
        out
    }

    /// [`Sim::shares`] written into `out` (replacing what it held).
    pub(crate) fn shares_into(&self, nodes: &[NodeId], out: &mut Vec<Share>) {
        let mut cache = self.scratch.shares.lock();
        self.fairness.shares_cached_into(
            self.tree,
            self.ids,
            self.with_history,
            nodes,
            &mut cache,
            out,
        );
    }

    fn cq_borrowing_any(&self, cq: NodeId, frs: &[Fr]) -> bool {
        self.tree.parent(cq).is_some() && frs.iter().any(|&fr| self.tree.borrowing_with(cq, fr, 0))
    }

    fn subtree_cqs(&self, root: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            let node = self.tree.node(n);
            if node.is_cq {
                out.push(n);
            } else {
                stack.extend(node.child_cohorts.iter().rev().copied());
                stack.extend(node.child_cqs.iter().rev().copied());
            }
        }
        out.sort_unstable();
        out
    }

    fn fair_preemptions(
        &mut self,
        pre: &Preemptor,
        frs: &[Fr],
        usage: &[(Fr, i64)],
    ) -> Vec<Target> {
        let Some(c) = self.cq(pre.cq) else {
            return Vec::new();
        };
        let mut cands: Vec<(u32, NodeId)> = Vec::new();
        let within =
            PolicyKind::from_within(c.spec.preemption.within_cluster_queue).for_preemptor(pre);
        if within != PolicyKind::Never {
            for &w in &c.admitted {
                if self.satisfies(pre, w, within) && self.uses_resources(w, frs) {
                    cands.push((w, pre.cq));
                }
            }
        }
        let reclaim =
            PolicyKind::from_reclaim(c.spec.preemption.reclaim_within_cohort).for_preemptor(pre);
        if self.tree.parent(pre.cq).is_some() && reclaim != PolicyKind::Never {
            let root = self.tree.root(pre.cq);
            for other in self.subtree_cqs(root) {
                if other == pre.cq || !self.cq_borrowing_any(other, frs) {
                    continue;
                }
                let Some(oc) = self.cq(other) else { continue };
                for &w in &oc.admitted {
                    if self.satisfies(pre, w, reclaim) && self.uses_resources(w, frs) {
                        cands.push((w, other));
                    }
                }
            }
        }
        if cands.is_empty() {
            return Vec::new();
        }
        self.sort_candidates(&mut cands, |c| c.0, pre.cq);
        const DEFAULT_STRATEGIES: [FairSharingStrategy; 2] = [
            FairSharingStrategy::LessThanOrEqualToFinalShare,
            FairSharingStrategy::LessThanInitialShare,
        ];
        let strategies: &[FairSharingStrategy] = match self.fair {
            Some(f) if !f.preemption_strategies.is_empty() => &f.preemption_strategies,
            _ => &DEFAULT_STRATEGIES,
        };
        self.add_usage(pre.cq, usage, 1);
        let (mut fits, mut targets, retry) =
            self.fs_first_strategy(pre, frs, usage, &cands, strategies[0]);
        if !fits && strategies.len() > 1 {
            let (f2, t2) = self.fs_second_strategy(pre, usage, retry, targets);
            fits = f2;
            targets = t2;
        }
        self.add_usage(pre.cq, usage, -1);
        let victims: Vec<u32> = targets.iter().map(|t| t.wl).collect();
        if !fits {
            self.add_workloads(&victims);
            return Vec::new();
        }
        self.fill_back(pre.cq, usage, &mut targets, true, None);
        let victims: Vec<u32> = targets.iter().map(|t| t.wl).collect();
        self.add_workloads(&victims);
        targets
    }

    fn fits_for_fair_sharing(&mut self, pre: &Preemptor, usage: &[(Fr, i64)]) -> bool {
        self.add_usage(pre.cq, usage, -1);
        let fits = self.workload_fits(pre.cq, usage, true);
        self.add_usage(pre.cq, usage, 1);
        fits
    }

    fn strategy_passes(
        &self,
        s: FairSharingStrategy,
        pre_new: &Share,
        tgt_old: &Share,
        tgt_new: &Share,
    ) -> bool {
        match s {
            FairSharingStrategy::LessThanOrEqualToFinalShare => {
                compare_shares(pre_new, tgt_new) != Ordering::Greater
            }
            FairSharingStrategy::LessThanInitialShare => {
                compare_shares(pre_new, tgt_old) == Ordering::Less
            }
        }
    }

    fn fs_first_strategy(
        &mut self,
        pre: &Preemptor,
        frs: &[Fr],
        usage: &[(Fr, i64)],
        cands: &[(u32, NodeId)],
        strategy: FairSharingStrategy,
    ) -> (bool, Vec<Target>, Vec<(u32, NodeId)>) {
        let mut ord = TargetOrdering::new(self, pre.cq, cands);
        let found = self.fs_first_strategy_with(&mut ord, pre, frs, usage, strategy);
        ord.recycle(self);
        found
    }

    fn fs_first_strategy_with(
        &mut self,
        ord: &mut TargetOrdering,
        pre: &Preemptor,
        frs: &[Fr],
        usage: &[(Fr, i64)],
        strategy: FairSharingStrategy,
    ) -> (bool, Vec<Target>, Vec<(u32, NodeId)>) {
        let mut targets = Vec::new();
        let mut retry = Vec::new();
        let within_nominal = !frs
            .iter()
            .any(|&fr| self.tree.borrowing_with(pre.cq, fr, 0));
        while let Some(tcq) = ord.next(self, pre) {
            // Within its own queue, or while it stays within nominal quota, the preemptor takes victims
            // without comparing shares.
            if tcq == pre.cq || within_nominal {
                let reason = if tcq == pre.cq {
                    IN_CLUSTER_QUEUE
                } else {
                    IN_COHORT_RECLAMATION
                };
                let Some(w) = ord.pop(tcq) else { continue };
                self.remove_workloads(&[w]);
                targets.push(Target {
                    wl: w,
                    reason,
                    cq: tcq,
                });
                if self.fits_for_fair_sharing(pre, usage) {
                    return (true, targets, Vec::new());
                }
                continue;
            }
            let (pre_new, tgt_old) = self.compute_shares(pre.cq, tcq);
            let pinf = weighted_share(&pre_new) == i64::MAX;
            let tinf = weighted_share(&tgt_old) == i64::MAX;
            if pinf && !tinf {
                while let Some(w) = ord.pop(tcq) {
                    retry.push((w, tcq));
                }
                continue;
            }
            while let Some(w) = ord.pop(tcq) {
                let tgt_new = self.target_share_after_removal(pre.cq, tcq, w);
                if self.strategy_passes(strategy, &pre_new, &tgt_old, &tgt_new) {
                    self.remove_workloads(&[w]);
                    targets.push(Target {
                        wl: w,
                        reason: IN_COHORT_FAIR_SHARING,
                        cq: tcq,
                    });
                    if self.fits_for_fair_sharing(pre, usage) {
                        return (true, targets, Vec::new());
                    }
                    break;
                }
                retry.push((w, tcq));
            }
        }
        (false, targets, retry)
    }

    fn fs_second_strategy(
        &mut self,
        pre: &Preemptor,
        usage: &[(Fr, i64)],
        retry: Vec<(u32, NodeId)>,
        targets: Vec<Target>,
    ) -> (bool, Vec<Target>) {
        let mut ord = TargetOrdering::new(self, pre.cq, &retry);
        let found = self.fs_second_strategy_with(&mut ord, pre, usage, targets);
        ord.recycle(self);
        found
    }

    fn fs_second_strategy_with(
        &mut self,
        ord: &mut TargetOrdering,
        pre: &Preemptor,
        usage: &[(Fr, i64)],
        mut targets: Vec<Target>,
    ) -> (bool, Vec<Target>) {
        while let Some(tcq) = ord.next(self, pre) {
            let (pre_new, tgt_old) = self.compute_shares(pre.cq, tcq);
            let passed = self.strategy_passes(
                FairSharingStrategy::LessThanInitialShare,
                &pre_new,
                &tgt_old,
                &tgt_old,
            );
            let Some(w) = ord.pop(tcq) else { continue };
            if passed {
                self.remove_workloads(&[w]);
                targets.push(Target {
                    wl: w,
                    reason: IN_COHORT_FAIR_SHARING,
                    cq: tcq,
                });
                if self.fits_for_fair_sharing(pre, usage) {
                    return (true, targets);
                }
            }
            ord.prune(tcq);
        }
        (false, targets)
    }

    /// Shares of the children of the least common ancestor on the preemptor's and target's paths.
    fn compute_shares(&self, pre_cq: NodeId, tcq: NodeId) -> (Share, Share) {
        let (a, b) = self.almost_lcas(pre_cq, tcq);
        let s = self.shares(&[a, b]);
        (s[0], s[1])
    }

    /// The children of the lowest common ancestor on the paths from `x` and `y` (`(x, y)` when
    /// one lies on the other's path or they share no ancestor). Walks parent links without
    /// allocating: trees are shallow.
    fn almost_lcas(&self, x: NodeId, y: NodeId) -> (NodeId, NodeId) {
        let mut below_x: Option<NodeId> = None;
        let mut cx = Some(x);
        while let Some(a) = cx {
            let mut below_y: Option<NodeId> = None;
            let mut cy = Some(y);
            while let Some(b) = cy {
                if b == a {
                    return match below_x {
                        Some(bx) => (bx, below_y.unwrap_or(y)),
                        None => (x, y),
                    };
                }
                below_y = Some(b);
                cy = self.tree.parent(b);
            }
            below_x = Some(a);
            cx = self.tree.parent(a);
        }
        (x, y)
    }

    fn target_share_after_removal(&mut self, pre_cq: NodeId, tcq: NodeId, w: u32) -> Share {
        self.remove_workloads(&[w]);
        let (_, b) = self.almost_lcas(pre_cq, tcq);
        let s = self.share(b);
        self.add_workloads(&[w]);
        s
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PolicyKind {
    Never,
    Lower,
    LowerOrNewerEqual,
    Any,
}

impl PolicyKind {
    fn from_within(p: WithinCqPolicy) -> Self {
        match p {
            WithinCqPolicy::Never => PolicyKind::Never,
            WithinCqPolicy::LowerPriority => PolicyKind::Lower,
            WithinCqPolicy::LowerOrNewerEqualPriority => PolicyKind::LowerOrNewerEqual,
        }
    }

    fn from_reclaim(p: ReclaimPolicy) -> Self {
        match p {
            ReclaimPolicy::Never => PolicyKind::Never,
            ReclaimPolicy::LowerPriority => PolicyKind::Lower,
            ReclaimPolicy::Any => PolicyKind::Any,
        }
    }

    /// The rule for this preemptor. Preempting only for room on the nodes (its quota fits), evicting an equal or
    /// higher priority workload (Kueue's newer-equal and reclaim-any rules) would trade one running gang for
    /// another of the same standing, which is churn, not priority: only lower priorities make room.
    fn for_preemptor(self, pre: &Preemptor) -> Self {
        if pre.room_only && self != PolicyKind::Never {
            PolicyKind::Lower
        } else {
            self
        }
    }
}

/// Buffers of a fair-sharing target ordering, kept between searches (one runs for most heads of a cycle under fair
/// sharing, and each step of it needed four vectors before).
#[derive(Clone, Debug, Default)]
pub(crate) struct OrderingBufs {
    /// The candidates grouped by ClusterQueue, each group in candidate order.
    items: Vec<u32>,
    /// Per node: its group's next and end position in `items`.
    ranges: Vec<(u32, u32)>,
    /// Pruned nodes, indexed by NodeId.
    pruned: Vec<bool>,
    ancestors: Vec<NodeId>,
    /// One level's children and their shares.
    nodes: Vec<NodeId>,
    shares: Vec<Share>,
}

/// Kueue's fair-sharing target ordering: descend from the root, always into the child with the
/// highest share, pruning subtrees that don't borrow.
struct TargetOrdering {
    preemptor_cq: NodeId,
    b: OrderingBufs,
}

impl TargetOrdering {
    /// An ordering of `cands` (in candidate order) with the search's kept buffers; [`TargetOrdering::recycle`]
    /// gives them back.
    fn new(sim: &mut Sim<'_>, cq: NodeId, cands: &[(u32, NodeId)]) -> Self {
        let mut b = std::mem::take(&mut sim.scratch.ordering);
        let n = cands
            .iter()
            .map(|&(_, c)| c as usize + 1)
            .max()
            .unwrap_or(0)
            .max(sim.tree.nodes.len());
        // Counting sort by ClusterQueue, stable: each group keeps the candidates' order.
        b.ranges.clear();
        b.ranges.resize(n, (0, 0));
        for &(_, c) in cands {
            b.ranges[c as usize].1 += 1;
        }
        let mut at = 0u32;
        for r in &mut b.ranges {
            let count = r.1;
            *r = (at, at);
            at += count;
        }
        b.items.clear();
        b.items.resize(cands.len(), 0);
        for &(w, c) in cands {
            let r = &mut b.ranges[c as usize];
            b.items[r.1 as usize] = w;
            r.1 += 1;
        }
        b.pruned.clear();
        b.pruned.resize(n, false);
        b.ancestors.clear();
        b.ancestors.extend(sim.tree.ancestors_iter(cq));
        Self {
            preemptor_cq: cq,
            b,
        }
    }

    /// Gives the buffers back to the search.
    fn recycle(self, sim: &mut Sim<'_>) {
        sim.scratch.ordering = self.b;
    }

    fn is_pruned(&self, n: NodeId) -> bool {
        self.b.pruned.get(n as usize).copied().unwrap_or(false)
    }

    fn prune(&mut self, n: NodeId) {
        if let Some(p) = self.b.pruned.get_mut(n as usize) {
            *p = true;
        }
    }

    fn has_wl(&self, cq: NodeId) -> bool {
        self.b.ranges.get(cq as usize).is_some_and(|r| r.0 < r.1)
    }

    /// The ClusterQueue's next candidate, left in place.
    fn first(&self, cq: NodeId) -> Option<u32> {
        let r = self.b.ranges.get(cq as usize)?;
        (r.0 < r.1).then(|| self.b.items[r.0 as usize])
    }

    fn pop(&mut self, cq: NodeId) -> Option<u32> {
        let w = self.first(cq)?;
        self.b.ranges[cq as usize].0 += 1;
        Some(w)
    }

    fn next(&mut self, sim: &Sim<'_>, pre: &Preemptor) -> Option<NodeId> {
        if sim.tree.parent(self.preemptor_cq).is_none() {
            let cq = self.preemptor_cq;
            return (!self.is_pruned(cq) && self.has_wl(cq)).then_some(cq);
        }
        let root = sim.tree.root(self.preemptor_cq);
        while !self.is_pruned(root) {
            if let Some(t) = self.next_target(sim, pre, root) {
                return Some(t);
            }
        }
        None
    }

    fn next_target(&mut self, sim: &Sim<'_>, pre: &Preemptor, cohort: NodeId) -> Option<NodeId> {
        let node = sim.tree.node(cohort);
        // This level's ClusterQueues with candidates, then its cohorts; a ClusterQueue without candidates is
        // pruned whatever its share.
        let mut nodes = std::mem::take(&mut self.b.nodes);
        nodes.clear();
        for &cq in &node.child_cqs {
            if self.is_pruned(cq) {
                continue;
            }
            if !self.has_wl(cq) {
                self.prune(cq);
                continue;
            }
            nodes.push(cq);
        }
        let cqs = nodes.len();
        nodes.extend(
            node.child_cohorts
                .iter()
                .copied()
                .filter(|&c| !self.is_pruned(c)),
        );
        // Every share this level needs, in one policy call.
        let mut shares = std::mem::take(&mut self.b.shares);
        sim.shares_into(&nodes, &mut shares);
        let mut best_cq: Option<(NodeId, Share)> = None;
        for (&cq, &drs) in nodes[..cqs].iter().zip(&shares[..cqs]) {
            if !drs.borrowing && cq != self.preemptor_cq {
                self.prune(cq);
                continue;
            }
            match &best_cq {
                None => best_cq = Some((cq, drs)),
                Some((bcq, bdrs)) => match compare_shares(&drs, bdrs) {
                    Ordering::Greater => best_cq = Some((cq, drs)),
                    Ordering::Equal => {
                        if let (Some(a), Some(b)) = (self.first(cq), self.first(*bcq))
                            && sim.candidate_cmp(a, b, pre.cq) == Ordering::Less
                        {
                            best_cq = Some((cq, drs));
                        }
                    }
                    Ordering::Less => {}
                },
            }
        }
        let mut best_cohort: Option<(NodeId, Share)> = None;
        for (&c, &drs) in nodes[cqs..].iter().zip(&shares[cqs..]) {
            if !drs.borrowing && !self.b.ancestors.contains(&c) {
                self.prune(c);
            } else if best_cohort
                .as_ref()
                .is_none_or(|(_, b)| compare_shares(&drs, b) != Ordering::Less)
            {
                best_cohort = Some((c, drs));
            }
        }
        self.b.nodes = nodes;
        self.b.shares = shares;
        match (best_cq, best_cohort) {
            (None, None) => {
                self.prune(cohort);
                None
            }
            (Some((cq, _)), None) => Some(cq),
            (None, Some((c, _))) => self.next_target(sim, pre, c),
            (Some((cq, cqd)), Some((c, cd))) => {
                if compare_shares(&cd, &cqd) != Ordering::Less {
                    self.next_target(sim, pre, c)
                } else {
                    Some(cq)
                }
            }
        }
    }
}
