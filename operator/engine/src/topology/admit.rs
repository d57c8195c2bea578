//! The engine's side of topology-aware admission: placing an assignment's TAS pod sets (all or
//! nothing), holding placements, and evicting workloads on failed nodes and GPUs.

use std::sync::Arc;

use sluice_sdk::policy::PlacementPolicy;
use sluice_sdk::topology::NodeGpus;

use super::place::PlaceInput;
use super::{EmptyFitKey, MAX_EMPTY_FITS, TopoState};
use crate::assign::{Assignment, Mode};
use crate::fasthash::FastSet;
use crate::preempt::{Preemptor, Target};
use crate::{CqData, Engine, Flavor, Node, PodSetPlacement, Wl, WorkloadKey};

/// QuotaReserved=False reason when quota fits but the topology does not.
pub const TOPOLOGY_PLACEMENT_FAILED: &str = "TopologyPlacementFailed";
/// Eviction reason for workloads on a failed node or GPU (Kueue's `NodeFailures`).
pub const NODE_FAILURES: &str = "NodeFailures";

impl Engine {
    /// Uses `policy` for placement scores instead of the built-in `topology-pack`.
    pub fn with_placement_policy(mut self, policy: Box<dyn PlacementPolicy>) -> Self {
        self.topo.policy = std::sync::Arc::from(policy);
        self.topo.forget_fits();
        self
    }

    /// Replaces the placement policy of a running engine.
    pub fn set_placement_policy(&mut self, policy: Box<dyn PlacementPolicy>) {
        self.topo.policy = std::sync::Arc::from(policy);
        self.topo.forget_fits();
    }

    /// Places the workloads of ClusterQueue `cq` with `policy` instead of the engine's default
    /// policy (from the next placement on; held placements stay where they are).
    pub fn set_placement_policy_for(&mut self, cq: &str, policy: Arc<dyn PlacementPolicy>) {
        self.topo.overrides.insert(cq.to_string(), policy);
        self.topo.forget_fits();
        self.requeue_all_inadmissible();
    }

    /// Puts ClusterQueue `cq` back on the engine's default placement policy.
    pub fn clear_placement_policy_for(&mut self, cq: &str) {
        if self.topo.overrides.remove(cq).is_some() {
            self.topo.forget_fits();
            self.requeue_all_inadmissible();
        }
    }

    /// Name of the placement policy ClusterQueue `cq` uses.
    pub fn placement_policy_name(&self, cq: &str) -> &str {
        self.topo
            .overrides
            .get(cq)
            .unwrap_or(&self.topo.policy)
            .name()
    }

    /// Places pods ignoring topology levels and NVLink islands (any nodes with room), for
    /// comparing topology-aware placement with plain capacity placement.
    pub fn set_topology_blind(&mut self, blind: bool) {
        self.topo.blind = blind;
    }

    /// Placement policy failures so far (the built-in answered each time) and the last message.
    pub fn placement_policy_failures(&self) -> (u64, Option<&str>) {
        (
            self.topo.policy_failures,
            self.topo.last_policy_error.as_deref(),
        )
    }

    /// Topology placement of an admitted (or evicting) workload's TAS pod sets.
    pub fn placement(&self, key: &WorkloadKey) -> Option<&[PodSetPlacement]> {
        let i = *self.wl_by_key.get(key)?;
        self.topo.holdings.get(&i).map(Vec::as_slice)
    }

    /// Whether any pod set of the assignment is in a flavor with a topology.
    pub(crate) fn uses_tas(&self, a: &Assignment) -> bool {
        a.podsets.iter().any(|ps| {
            self.tas_flavor(ps.flavors.values().map(|c| c.flavor))
                .is_some()
        })
    }

    fn tas_flavor(&self, flavors: impl Iterator<Item = u32>) -> Option<u32> {
        tas_flavor_in(&self.flavors, flavors)
    }

    /// The parts of the engine a placement reads and moves, borrowed apart from the quota tree.
    pub(crate) fn tas_parts(&mut self) -> TasParts<'_> {
        TasParts {
            topo: &mut self.topo,
            wls: &self.wls,
            cqs: &self.cqs,
            flavors: &self.flavors,
        }
    }

    /// Places every TAS pod set of `a` for workload `wl`, as if `victims` were gone; all or
    /// nothing. Err: (pod set index, message).
    pub(crate) fn place_assignment(
        &mut self,
        wl: u32,
        a: &Assignment,
        victims: &[u32],
    ) -> Result<Vec<PodSetPlacement>, (usize, String)> {
        self.tas_parts().place_assignment(wl, a, victims)
    }

    /// Checks a nominated assignment against the topology, as Kueue's TAS does: when the quota fits but the
    /// topology does not, smaller counts are tried first (partial admission), then preemption for room
    /// (victims chosen so that the placement fits, [`Engine::tas_targets`]); an assignment that would not fit
    /// even an empty topology becomes a TopologyPlacementFailed NoFit. Returns the placement when the
    /// assignment fits without preempting, or with `targets` gone.
    pub(crate) fn nominate_placement(
        &mut self,
        pre: &Preemptor,
        partial: bool,
        a: &mut Assignment,
        targets: &mut Vec<Target>,
    ) -> Option<Vec<PodSetPlacement>> {
        if a.mode() == Mode::NoFit || !self.uses_tas(a) {
            return None;
        }
        let victims: Vec<u32> = targets.iter().map(|t| t.wl).collect();
        let quota_fits = a.mode() == Mode::Fit;
        let err = if a.mode() == Mode::Fit || !victims.is_empty() {
            match self.place_assignment(pre.wl, a, &victims) {
                Ok(p) => return Some(p),
                Err(e) => Some(e),
            }
        } else {
            None
        };
        if partial
            && a.mode() == Mode::Fit
            && let Some((smaller, p)) = self.shrink_to_fit(pre, a)
        {
            *a = smaller;
            return Some(p);
        }
        // Would it fit with every placement gone? If not, no preemption can help.
        if let Err(e) = self.fits_empty_topology(pre.wl, a) {
            let (ps, message) = err.unwrap_or(e);
            if let Some(ps) = a.podsets.get_mut(ps) {
                ps.reasons = vec![crate::assign::FlavorReason::Text(message)];
            }
            a.forced_mode = Some(Mode::NoFit);
            a.no_fit_reason = TOPOLOGY_PLACEMENT_FAILED;
            targets.clear();
            return None;
        }
        // Without an error the quota needs preemption and no candidate set frees it: it waits as Kueue's
        // preemptor without targets does.
        let (ps, message) = err?;
        if let Some(ps) = a.podsets.get_mut(ps) {
            ps.reasons = vec![crate::assign::FlavorReason::Text(message)];
        }
        if quota_fits && let Some((later, p)) = self.later_flavor_with_room(pre, a) {
            *a = later;
            return Some(p);
        }
        // The quota is there, the room is not: shown as a placement failure while no victim can make room.
        a.no_fit_reason = TOPOLOGY_PLACEMENT_FAILED;
        self.mark_tas_preempt(a);
        let room = Preemptor {
            room_only: quota_fits,
            ..pre.clone()
        };
        *targets = self.tas_targets(&room, a);
        if targets.is_empty() {
            // Nothing to preempt now: it waits, holding its quota as Kueue's preemptor without targets does.
            return None;
        }
        let victims: Vec<u32> = targets.iter().map(|t| t.wl).collect();
        match self.place_assignment(pre.wl, a, &victims) {
            Ok(_) => None,
            Err((ps, message)) => {
                // The search checked this placement; a heuristic placement can still disagree.
                if let Some(ps) = a.podsets.get_mut(ps) {
                    ps.reasons = vec![crate::assign::FlavorReason::Text(message)];
                }
                a.forced_mode = Some(Mode::NoFit);
                a.no_fit_reason = TOPOLOGY_PLACEMENT_FAILED;
                targets.clear();
                None
            }
        }
    }

    /// A later flavor that takes the workload without preempting when its quota fits in the chosen flavor but the
    /// topology there has no room. Kueue preempts for room in the chosen flavor; Sluice first honours the ClusterQueue's
    /// `whenCanPreempt: TryNextFlavor` for room as Kueue does for quota (and its preference between borrowing and
    /// preempting), since an eviction costs work a free flavor would not. Not for a preemptor awaiting its victims:
    /// they were evicted for the assignment it holds. Not under fair sharing either: there, shares decide who runs,
    /// and the bundled example evicted far more with it (275 to 466).
    fn later_flavor_with_room(
        &mut self,
        pre: &Preemptor,
        a: &Assignment,
    ) -> Option<(Assignment, Vec<PodSetPlacement>)> {
        let fung = self.cq(pre.cq)?.spec.flavor_fungibility.clone();
        if fung.when_can_preempt != crate::FungibilityPolicy::TryNextFlavor
            || self.fair_sharing()
            || self.wl(pre.wl).is_some_and(|w| w.awaiting.is_some())
        {
            return None;
        }
        let mut tried = a.scan_progress();
        // Each round resumes the flavor search after the flavors tried, so it ends within the flavor count.
        while tried.iter().any(|m| m.values().any(|&i| i != -1)) {
            let later = Preemptor {
                scan: Some(crate::ScanProgress {
                    tried,
                    cycle: self.cycle,
                    cq_generation: 0,
                }),
                ..pre.clone()
            };
            let b = self
                .preemption_sim()
                .assign(&later, pre.max_counts.as_deref());
            if b.mode() != Mode::Fit {
                return None;
            }
            let borrows_more = b.borrowing > a.borrowing;
            if borrows_more
                && fung.preference == Some(crate::FlavorPreference::PreemptionOverBorrowing)
            {
                return None;
            }
            match self.place_assignment(pre.wl, &b, &[]) {
                Ok(p) => return Some((b, p)),
                Err(_) => tried = b.scan_progress(),
            }
        }
        None
    }

    /// Whether the assignment would place with every placement gone. With a reusable placement policy the
    /// answer depends only on static inputs (nodes, flavors, topologies, policies) and on the request, so it is
    /// remembered for identical requests until a static input changes.
    fn fits_empty_topology(&mut self, wl: u32, a: &Assignment) -> Result<(), (usize, String)> {
        let policy = self.tas_parts().placement_policy_of(wl);
        let Some(w) = self.wl(wl).filter(|_| policy.reusable()) else {
            return self.place_on_empty_twin(wl, a);
        };
        // The policy by identity: the ClusterQueue matters only through it, and every policy change forgets
        // the answers, so a ClusterQueue's status write does not.
        let policy_id = Arc::as_ptr(&policy) as *const () as usize;
        let shape: Vec<(usize, i32, Vec<u32>)> = a
            .podsets
            .iter()
            .map(|p| {
                (
                    p.ps,
                    p.count,
                    p.flavors.values().map(|c| c.flavor).collect(),
                )
            })
            .collect();
        let pod_sets = &w.spec.pod_sets;
        let digest = {
            use std::hash::{Hash, Hasher};
            let mut h = crate::fasthash::FastHasher::default();
            (policy_id, &shape).hash(&mut h);
            // A bucket, not an identity (the whole key is compared): what usually tells requests apart.
            for ps in pod_sets {
                (&ps.name, ps.count, &ps.requests, &ps.node_selector).hash(&mut h);
            }
            h.finish()
        };
        if let Some(known) = self.topo.empty_fits.get(&digest).and_then(|v| {
            v.iter()
                .find(|(k, _)| k.0 == policy_id && k.1 == shape && k.2 == *pod_sets)
        }) {
            return known.1.clone();
        }
        let key: EmptyFitKey = (policy_id, shape, pod_sets.clone());
        let fits = self.place_on_empty_twin(wl, a);
        if self.topo.empty_fits.len() >= MAX_EMPTY_FITS {
            self.topo.empty_fits.clear();
        }
        self.topo
            .empty_fits
            .entry(digest)
            .or_default()
            .push((key, fits.clone()));
        fits
    }

    /// Places the assignment on the inventory with nothing held; a failing placement policy counts here too.
    fn place_on_empty_twin(&mut self, wl: u32, a: &Assignment) -> Result<(), (usize, String)> {
        let twin = self.topo.empty_twin();
        let failures = twin.policy_failures;
        let fits = TasParts {
            topo: twin,
            wls: &self.wls,
            cqs: &self.cqs,
            flavors: &self.flavors,
        }
        .place_assignment(wl, a, &[])
        .map(|_| ());
        let twin = self.topo.empty_twin();
        let failed = twin.policy_failures - failures;
        let error = twin.last_policy_error.take();
        if failed > 0 {
            self.topo.policy_failures += failed;
            self.topo.last_policy_error = error;
        }
        fits
    }

    /// Marks the flavors of the assignment's TAS pod sets as needing preemption (Kueue's `updateMode(Preempt)`).
    fn mark_tas_preempt(&self, a: &mut Assignment) {
        for ps in &mut a.podsets {
            if self
                .tas_flavor(ps.flavors.values().map(|c| c.flavor))
                .is_some()
            {
                for c in ps.flavors.values_mut() {
                    if c.mode == Mode::Fit {
                        c.mode = Mode::Preempt;
                    }
                }
            }
        }
        if a.forced_mode == Some(Mode::Fit) {
            a.forced_mode = None;
        }
    }

    /// Preemption targets for a TAS assignment: Kueue's search (classical or fair sharing) where a candidate
    /// set is enough only when the quota fits and the placement fits with the candidates' nodes free. The
    /// search runs once in Kueue's candidate order and once per topology domain of the requested level with
    /// that domain's workloads tried first; the set with the lowest highest victim priority, then the least work
    /// lost, then the fewest victims wins (Kueue's order on ties). Every search re-adds each victim whose
    /// removal turns out not to help, so none is evicted for nothing.
    pub(crate) fn tas_targets(&mut self, pre: &Preemptor, a: &Assignment) -> Vec<Target> {
        /// Domains searched on their own, the most crowded with candidates first.
        const MAX_DOMAINS: usize = 32;
        if !self.may_preempt(pre.cq) {
            // Kueue's default ClusterQueue: no search can name a candidate, so none is run.
            return Vec::new();
        }
        let base = self.tas_search(pre, a);
        let Some(level) = self.requested_level(pre.wl, a) else {
            return base;
        };
        let mut best = (self.victims_cost(&base), base);
        let domains = self.topo.domain_holders(&level);
        // Preempting for room without a cost policy takes only lower priorities: a domain holding none tries no
        // candidate first, so its search would repeat Kueue's order, already searched.
        let plain_room = pre.room_only && !self.costs.any();
        for members in domains.iter().take(MAX_DOMAINS) {
            if plain_room
                && members
                    .iter()
                    .all(|&w| self.wl(w).is_none_or(|x| x.spec.priority >= pre.priority))
            {
                continue;
            }
            let t = self.tas_search_preferring(pre, a, Some(members));
            let cost = self.victims_cost(&t);
            if cost < best.0 {
                best = (cost, t);
            }
        }
        best.1
    }

    /// Whether the ClusterQueue's preemption policy allows any candidate at all: preemption within it, or
    /// reclaim within its cohort when it has one (borrowWithinCohort only widens reclaim).
    fn may_preempt(&self, cq: crate::quota::NodeId) -> bool {
        self.cq(cq).is_some_and(|c| {
            c.spec.preemption.within_cluster_queue != crate::WithinCqPolicy::Never
                || (self.tree.parent(cq).is_some()
                    && c.spec.preemption.reclaim_within_cohort != crate::ReclaimPolicy::Never)
        })
    }

    /// How bad a victim set is: its highest priority, then GPU-milliseconds of work lost, then its size (as Slurm's
    /// `preempt_youngest_first`: two victims that just started cost less than one that ran for hours). An empty
    /// set (nothing found) is worst.
    fn victims_cost(&self, targets: &[Target]) -> (i64, i128, usize) {
        if targets.is_empty() {
            return (i64::MAX, i128::MAX, usize::MAX);
        }
        let mut top = i64::MIN;
        let mut lost: i128 = 0;
        for t in targets {
            let Some(w) = self.wl(t.wl) else { continue };
            top = top.max(i64::from(w.spec.priority));
            let Some(adm) = &w.adm else { continue };
            let since = w
                .spec
                .checkpointed_at
                .filter(|&c| c >= adm.reserved_at)
                .unwrap_or(adm.reserved_at);
            let held: i64 = self
                .topo
                .holdings
                .get(&t.wl)
                .map(|ps| {
                    ps.iter()
                        .flat_map(|p| &p.nodes)
                        .map(|n| n.gpus.len().max(n.pods as usize) as i64)
                        .sum()
                })
                .unwrap_or(1);
            lost += i128::from(held) * i128::from(self.now.saturating_sub(since).max(0));
        }
        (top, lost, targets.len())
    }

    /// The topology level the assignment's first TAS pod set asks for (required or preferred).
    fn requested_level(&self, wl: u32, a: &Assignment) -> Option<String> {
        let w = self.wl(wl)?;
        a.podsets.iter().find_map(|psa| {
            self.tas_flavor(psa.flavors.values().map(|c| c.flavor))?;
            let t = w.spec.pod_sets.get(psa.ps)?.topology.as_ref()?;
            match t.mode {
                crate::TopologyMode::Required | crate::TopologyMode::Preferred => {
                    t.level.clone().or_else(|| t.slice_level.clone())
                }
                _ => t.slice_level.clone(),
            }
        })
    }

    fn tas_search(&mut self, pre: &Preemptor, a: &Assignment) -> Vec<Target> {
        self.tas_search_preferring(pre, a, None)
    }

    fn tas_search_preferring(
        &mut self,
        pre: &Preemptor,
        a: &Assignment,
        prefer: Option<&FastSet<u32>>,
    ) -> Vec<Target> {
        let mut sim = self.sim_with(false, Some((pre.wl, a)), prefer);
        let frs = a.frs_need_preemption(&sim);
        let usage = a.usage_vec();
        sim.get_targets(pre, &frs, &usage)
    }

    /// Largest pod counts down to minCount (Kueue's partial admission order) that fit both quota
    /// and topology.
    fn shrink_to_fit(
        &mut self,
        pre: &Preemptor,
        a: &Assignment,
    ) -> Option<(Assignment, Vec<PodSetPlacement>)> {
        let w = self.wl(pre.wl)?;
        let full: Vec<i32> = a.podsets.iter().map(|p| p.count).collect();
        let deltas: Vec<i64> = w
            .spec
            .pod_sets
            .iter()
            .zip(&full)
            .map(|(p, &c)| (i64::from(c) - i64::from(p.min_count.unwrap_or(p.count))).max(0))
            .collect();
        let total: i64 = deltas.iter().sum();
        if total <= 0 {
            return None;
        }
        let mut best = None;
        let (mut lo, mut hi) = (1i64, total + 1);
        while lo < hi {
            let h = lo + (hi - lo) / 2;
            let counts: Vec<i32> = full
                .iter()
                .zip(&deltas)
                .map(|(&c, &d)| (i64::from(c) - d * h / total) as i32)
                .collect();
            let cand = self.preemption_sim().assign(pre, Some(&counts));
            let ok = if cand.mode() == Mode::Fit {
                self.place_assignment(pre.wl, &cand, &[]).ok()
            } else {
                None
            };
            match ok {
                Some(p) => {
                    best = Some((cand, p));
                    hi = h;
                }
                None => lo = h + 1,
            }
        }
        best
    }

    /// Applies a Node event; evicts the workloads on a node that went NotReady.
    pub(crate) fn topo_upsert_node(&mut self, node: Node) {
        let name = node.name.clone();
        if self.topo.upsert_node(node) {
            self.evict_on(&name, None, "is not ready", false);
        }
        self.requeue_all_inadmissible();
    }

    /// Applies a Node deletion; evicts its workloads.
    pub(crate) fn topo_delete_node(&mut self, name: &str) {
        self.topo.delete_node(name);
        self.evict_on(name, None, "was deleted", false);
        self.requeue_all_inadmissible();
    }

    /// Applies an agent report; evicts workloads on GPUs that failed, and (when configured) with their
    /// checkpoint grace on GPUs that started degrading.
    pub(crate) fn topo_upsert_gpus(&mut self, node: &str, gpus: Option<NodeGpus>) {
        let (failed, degrading) = self.topo.upsert_gpus(node, gpus);
        let list = |g: &[u32]| g.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        if !failed.is_empty() {
            let why = format!("has unhealthy GPU(s) {}", list(&failed));
            self.evict_on(node, Some(&failed), &why, false);
        }
        if !degrading.is_empty() && self.config.evict_on_degraded_gpus {
            let why = format!("has degrading GPU(s) {}", list(&degrading));
            self.evict_on(node, Some(&degrading), &why, true);
        }
        self.requeue_all_inadmissible();
    }

    fn evict_on(&mut self, node: &str, gpus: Option<&[u32]>, why: &str, graceful: bool) {
        for w in self.topo.holders_on(node, gpus) {
            let now = self.now;
            self.evict_with(
                w,
                NODE_FAILURES,
                None,
                None,
                format!("Workload was evicted because node {node} {why}"),
                now,
                graceful,
            );
        }
    }
}

impl Engine {
    /// Checks TAS bookkeeping: no node holds more than it has, every held placement belongs to an
    /// admitted or evicting workload and places exactly its admitted pod count.
    pub fn check_topology_invariants(&self) -> Result<(), String> {
        for slot in &self.topo.nodes {
            for (r, &u) in slot.used.iter().enumerate() {
                let a = slot.alloc.get(r).copied().unwrap_or(0);
                if u < 0 || (u > a && slot.spec.ready) {
                    return Err(format!(
                        "node {}: {} used {u} of {a}",
                        slot.spec.name,
                        self.topo.res.name(r as u32)
                    ));
                }
            }
            let mut seen = std::collections::BTreeSet::new();
            for ps in self.topo.holdings.values() {
                for p in ps {
                    for n in p.nodes.iter().filter(|n| n.node == slot.spec.name) {
                        for g in &n.gpus {
                            if !seen.insert(*g) {
                                return Err(format!("node {}: GPU {g} held twice", slot.spec.name));
                            }
                        }
                    }
                }
            }
        }
        for (&w, ps) in &self.topo.holdings {
            let Some(wl) = self.wl(w) else {
                return Err(format!("placement held by unknown workload {w}"));
            };
            let Some(adm) = &wl.adm else {
                return Err(format!("{}: placement without admission", wl.key));
            };
            for p in ps {
                let placed: i32 = p.nodes.iter().map(|n| n.pods).sum();
                let in_domains: i32 = p.assignment.domains.iter().map(|d| d.count).sum();
                let admitted = adm
                    .admission
                    .pod_set_assignments
                    .iter()
                    .find(|a| a.name == p.pod_set)
                    .map(|a| a.count);
                if Some(placed) != admitted || placed != in_domains {
                    return Err(format!(
                        "{} pod set {}: {placed} pods placed, {in_domains} in domains, admitted {admitted:?}",
                        wl.key, p.pod_set
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What placing a workload reads (workloads, ClusterQueues, flavors) and moves (node usage), without the quota
/// tree, so a preemption search can check placements while it simulates quota.
pub(crate) struct TasParts<'a> {
    pub topo: &'a mut TopoState,
    pub wls: &'a [Option<Wl>],
    pub cqs: &'a [Option<CqData>],
    pub flavors: &'a [Option<Flavor>],
}

fn tas_flavor_in(flavors: &[Option<Flavor>], mut ids: impl Iterator<Item = u32>) -> Option<u32> {
    ids.find(|&f| {
        flavors
            .get(f as usize)
            .and_then(|x| x.as_ref())
            .is_some_and(|x| x.topology_name.is_some())
    })
}

impl TasParts<'_> {
    fn tas_flavor(&self, ids: impl Iterator<Item = u32>) -> Option<u32> {
        tas_flavor_in(self.flavors, ids)
    }

    /// The placement policy of the ClusterQueue holding (or queueing) workload `wl`.
    fn placement_policy_of(&self, wl: u32) -> Arc<dyn PlacementPolicy> {
        let cq = self
            .wls
            .get(wl as usize)
            .and_then(|w| w.as_ref())
            .and_then(|w| w.adm.as_ref().map(|a| a.cq).or(w.queued_in))
            .and_then(|n| self.cqs.get(n as usize).and_then(|c| c.as_ref()));
        cq.and_then(|c| self.topo.overrides.get(&c.spec.name))
            .unwrap_or(&self.topo.policy)
            .clone()
    }

    /// Places every TAS pod set of `a` for workload `wl`, as if `victims` were gone; all or
    /// nothing. Err: (pod set index, message).
    pub(crate) fn place_assignment(
        &mut self,
        wl: u32,
        a: &Assignment,
        victims: &[u32],
    ) -> Result<Vec<PodSetPlacement>, (usize, String)> {
        // The victims' placements are taken out and put back rather than copied: a search moves many.
        let mut removed = Vec::new();
        for &v in victims {
            if let Some(ps) = self.topo.holdings.remove(&v) {
                for p in &ps {
                    self.topo.apply(p, -1);
                }
                removed.push((v, ps));
            }
        }
        let mut placed: Vec<PodSetPlacement> = Vec::new();
        let mut result = Ok(());
        let policy = self.placement_policy_of(wl);
        if let Some(w) = self.wls.get(wl as usize).and_then(|w| w.as_ref()) {
            let workload = w.key.to_string();
            let priority = w.spec.priority;
            let pod_sets = w.spec.pod_sets.clone();
            let group_of = |k: usize| -> Option<&str> {
                let psa = a.podsets.get(k)?;
                pod_sets.get(psa.ps)?.topology.as_ref()?.group.as_deref()
            };
            let mut done = vec![false; a.podsets.len()];
            for (k, psa) in a.podsets.iter().enumerate() {
                if done[k] {
                    continue;
                }
                let Some(fid) = self.tas_flavor(psa.flavors.values().map(|c| c.flavor)) else {
                    continue;
                };
                let (Some(Some(flavor)), Some(_)) = (
                    self.flavors.get(fid as usize).cloned(),
                    pod_sets.get(psa.ps),
                ) else {
                    continue;
                };
                // Kueue places the pod sets of a group in one flavor as one unit: the one with
                // fewer pods is the leader (the second on a tie).
                let mates: Vec<usize> = match group_of(k) {
                    Some(g) => (k + 1..a.podsets.len())
                        .filter(|&j| {
                            group_of(j) == Some(g)
                                && self.tas_flavor(a.podsets[j].flavors.values().map(|c| c.flavor))
                                    == Some(fid)
                        })
                        .collect(),
                    None => Vec::new(),
                };
                if mates.len() > 1 {
                    result = Err((
                        k,
                        format!(
                            "pod set group {:?} has more than two pod sets",
                            group_of(k).unwrap_or_default()
                        ),
                    ));
                    break;
                }
                let (mut wk, mut lk) = (k, mates.first().copied());
                // Both pod sets of the group are placed now, whichever leads (a later mate must not be placed
                // again on its own).
                if let Some(&m) = mates.first() {
                    done[m] = true;
                }
                if let Some(j) = lk
                    && a.podsets[j].count > a.podsets[k].count
                {
                    (wk, lk) = (j, Some(k));
                }
                if let Some(j) = lk
                    && a.podsets[j].count != 1
                {
                    result = Err((
                        j,
                        format!(
                            "pod set group {:?}: the leader pod set must have one pod",
                            group_of(k).unwrap_or_default()
                        ),
                    ));
                    break;
                }
                let Some(wps) = pod_sets.get(a.podsets[wk].ps) else {
                    continue;
                };
                let inp = PlaceInput {
                    flavor_id: fid,
                    flavor: &flavor,
                    pod_set: wps,
                    count: u32::try_from(a.podsets[wk].count.max(0)).unwrap_or(0),
                    workload: &workload,
                    priority,
                    policy: policy.clone(),
                    leader: lk.and_then(|j| pod_sets.get(a.podsets[j].ps)),
                };
                match self.topo.place(&inp) {
                    Ok(ps) => {
                        for p in ps {
                            self.topo.apply(&p, 1);
                            placed.push(p);
                        }
                    }
                    Err(m) => {
                        result = Err((wk, m));
                        break;
                    }
                }
            }
        }
        for p in &placed {
            self.topo.apply(p, -1);
        }
        for (v, ps) in removed {
            for p in &ps {
                self.topo.apply(p, 1);
            }
            self.topo.holdings.insert(v, ps);
        }
        result.map(|()| placed)
    }
}

#[cfg(test)]
mod tests {
    //! Per-ClusterQueue placement policies in one engine.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

    use crate::*;

    const GPU: &str = "nvidia.com/gpu";
    const HOST: &str = "kubernetes.io/hostname";

    /// Lets pods only onto one named node.
    #[derive(Debug)]
    struct OnlyOn(&'static str);

    impl PlacementPolicy for OnlyOn {
        fn name(&self) -> &str {
            self.0
        }
        fn score(&self, _: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
            let mine: Vec<bool> = nodes
                .name
                .iter()
                .map(|&s| nodes.strings.get(s as usize).is_some_and(|n| n == self.0))
                .collect();
            Ok(NodeScores {
                score: mine.iter().map(|&m| f64::from(u8::from(m))).collect(),
                max_pods: mine.iter().map(|&m| if m { u32::MAX } else { 0 }).collect(),
            })
        }
    }

    /// Topology `dc` (hostname), TAS flavor `tas`, nodes x1..x4 with 8 GPUs, and ClusterQueues `a` and `b`
    /// with LocalQueues `a/main` and `b/main`.
    fn engine() -> Engine {
        let mut e = Engine::new(EngineConfig::default());
        let mut apply = |ev: Event| {
            e.apply(ev).unwrap_or_else(|err| panic!("{err}"));
        };
        apply(Event::UpsertTopology(TopologyLevels {
            name: "dc".into(),
            levels: vec![HOST.into()],
        }));
        apply(Event::UpsertFlavor(Flavor {
            name: "tas".into(),
            topology_name: Some("dc".into()),
            ..Flavor::default()
        }));
        for n in ["x1", "x2", "x3", "x4"] {
            apply(Event::UpsertNode(Node {
                name: n.into(),
                labels: BTreeMap::from([(HOST.to_string(), n.to_string())]),
                allocatable: BTreeMap::from([(GPU.to_string(), 8)]),
                ready: true,
                ..Node::default()
            }));
        }
        for cq in ["a", "b"] {
            apply(Event::UpsertClusterQueue(ClusterQueue {
                name: cq.into(),
                namespace_selector: Some(LabelSelector::default()),
                resource_groups: vec![ResourceGroup {
                    covered_resources: vec![GPU.into()],
                    flavors: vec![FlavorQuotas {
                        flavor: "tas".into(),
                        resources: vec![ResourceQuota {
                            name: GPU.into(),
                            nominal: 64,
                            borrowing_limit: None,
                            lending_limit: None,
                        }],
                    }],
                }],
                ..ClusterQueue::default()
            }));
            apply(Event::UpsertLocalQueue(LocalQueue {
                namespace: cq.into(),
                name: "main".into(),
                cluster_queue: cq.into(),
                stop_policy: StopPolicy::None,
                fair_sharing_weight: None,
            }));
        }
        e
    }

    /// Submits an 8-GPU one-pod workload `ns/name` and runs cycles; returns its hosts (empty: not placed).
    fn place(e: &mut Engine, ns: &str, name: &str, now: &mut Time) -> Vec<String> {
        let workload = Workload {
            namespace: ns.into(),
            name: name.into(),
            uid: format!("{ns}-{name}"),
            queue_name: "main".into(),
            active: true,
            creation_time: *now,
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                requests: BTreeMap::from([(GPU.to_string(), 8)]),
                ..PodSet::default()
            }],
            ..Workload::default()
        };
        e.apply(Event::UpsertWorkload {
            workload,
            admission: None,
        })
        .unwrap_or_else(|err| panic!("{err}"));
        for _ in 0..20 {
            if !e.has_work() {
                break;
            }
            *now += 1000;
            e.schedule(*now);
        }
        e.placement(&WorkloadKey::new(ns, name))
            .map(|p| p[0].nodes.iter().map(|n| n.node.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn cluster_queues_with_their_own_placement_policies_place_differently() {
        let mut e = engine();
        let mut now = 0;
        e.set_placement_policy_for("a", Arc::new(OnlyOn("x4")));
        e.set_placement_policy_for("b", Arc::new(OnlyOn("x2")));
        assert_eq!(e.placement_policy_name("a"), "x4");
        assert_eq!(place(&mut e, "a", "w1", &mut now), ["x4"]);
        assert_eq!(place(&mut e, "b", "w2", &mut now), ["x2"]);
        // x4 is full: a's policy allows nothing else.
        assert!(place(&mut e, "a", "w3", &mut now).is_empty());

        // Cleared: b is back on the default policy, which may use any node with room.
        e.clear_placement_policy_for("b");
        assert_eq!(e.placement_policy_name("b"), "topology-pack");
        let hosts = place(&mut e, "b", "w4", &mut now);
        assert_eq!(hosts.len(), 1);
        assert!(hosts[0] == "x1" || hosts[0] == "x3", "{hosts:?}");
        e.check_topology_invariants()
            .unwrap_or_else(|err| panic!("{err}"));
    }

    #[test]
    fn a_replaced_fairness_policy_is_the_one_in_use() {
        let mut e = engine();
        assert_eq!(e.fairness_policy_name(), "drs");
        #[derive(Debug)]
        struct Named;
        impl EngineFairness for Named {
            fn name(&self) -> &str {
                "named"
            }
            fn shares(&self, inputs: &[ShareInput<'_>], out: &mut Vec<Share>) {
                DrsPolicy.shares(inputs, out)
            }
            fn order(&self, keys: &[OrderKey]) -> Vec<usize> {
                DrsPolicy.order(keys)
            }
        }
        e.set_fairness_policy(Arc::new(Named));
        assert_eq!(e.fairness_policy_name(), "named");
    }
}
