//! The engine's side of topology-aware admission: placing an assignment's TAS pod sets (all or
//! nothing), holding placements, and evicting workloads on failed nodes and GPUs.

use std::sync::Arc;

use sluice_sdk::policy::PlacementPolicy;
use sluice_sdk::topology::NodeGpus;

use super::place::PlaceInput;
use crate::engine::assign::{Assignment, Mode};
use crate::engine::preempt::Preemptor;
use crate::engine::{Engine, Node, PodSetPlacement, WorkloadKey};

/// QuotaReserved=False reason when quota fits but the topology does not.
pub const TOPOLOGY_PLACEMENT_FAILED: &str = "TopologyPlacementFailed";
/// Eviction reason for workloads on a failed node or GPU (Kueue's `NodeFailures`).
pub const NODE_FAILURES: &str = "NodeFailures";

impl Engine {
    /// Uses `policy` for placement scores instead of the built-in `topology-pack`.
    pub fn with_placement_policy(mut self, policy: Box<dyn PlacementPolicy>) -> Self {
        self.topo.policy = std::sync::Arc::from(policy);
        self
    }

    /// Replaces the placement policy of a running engine.
    pub fn set_placement_policy(&mut self, policy: Box<dyn PlacementPolicy>) {
        self.topo.policy = std::sync::Arc::from(policy);
    }

    /// Places the workloads of ClusterQueue `cq` with `policy` instead of the engine's default
    /// policy (from the next placement on; held placements stay where they are).
    pub fn set_placement_policy_for(&mut self, cq: &str, policy: Arc<dyn PlacementPolicy>) {
        self.topo.overrides.insert(cq.to_string(), policy);
        self.requeue_all_inadmissible();
    }

    /// Puts ClusterQueue `cq` back on the engine's default placement policy.
    pub fn clear_placement_policy_for(&mut self, cq: &str) {
        if self.topo.overrides.remove(cq).is_some() {
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

    /// The placement policy of the ClusterQueue holding (or queueing) workload `wl`.
    fn placement_policy_of(&self, wl: u32) -> Arc<dyn PlacementPolicy> {
        let cq = self
            .wl(wl)
            .and_then(|w| w.adm.as_ref().map(|a| a.cq).or(w.queued_in))
            .and_then(|n| self.cq(n));
        cq.and_then(|c| self.topo.overrides.get(&c.spec.name))
            .unwrap_or(&self.topo.policy)
            .clone()
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

    fn tas_flavor(&self, mut flavors: impl Iterator<Item = u32>) -> Option<u32> {
        flavors.find(|&f| {
            self.flavors
                .get(f as usize)
                .and_then(|x| x.as_ref())
                .is_some_and(|x| x.topology_name.is_some())
        })
    }

    /// Places every TAS pod set of `a` for workload `wl`, as if `victims` were gone; all or
    /// nothing. Err: (pod set index, message).
    pub(crate) fn place_assignment(
        &mut self,
        wl: u32,
        a: &Assignment,
        victims: &[u32],
    ) -> Result<Vec<PodSetPlacement>, (usize, String)> {
        let mut removed = Vec::new();
        for v in victims {
            if let Some(ps) = self.topo.holdings.get(v).cloned() {
                for p in &ps {
                    self.topo.apply(p, -1);
                }
                removed.extend(ps);
            }
        }
        let mut placed: Vec<PodSetPlacement> = Vec::new();
        let mut result = Ok(());
        let policy = self.placement_policy_of(wl);
        if let Some(w) = self.wl(wl) {
            let workload = w.key.to_string();
            let priority = w.spec.priority;
            let pod_sets = w.spec.pod_sets.clone();
            for (k, psa) in a.podsets.iter().enumerate() {
                let Some(fid) = self.tas_flavor(psa.flavors.values().map(|c| c.flavor)) else {
                    continue;
                };
                let (Some(Some(flavor)), Some(ps)) = (
                    self.flavors.get(fid as usize).cloned(),
                    pod_sets.get(psa.ps),
                ) else {
                    continue;
                };
                let inp = PlaceInput {
                    flavor_id: fid,
                    flavor: &flavor,
                    pod_set: ps,
                    count: u32::try_from(psa.count.max(0)).unwrap_or(0),
                    workload: &workload,
                    priority,
                    policy: policy.clone(),
                };
                match self.topo.place(&inp) {
                    Ok(p) => {
                        self.topo.apply(&p, 1);
                        placed.push(p);
                    }
                    Err(m) => {
                        result = Err((k, m));
                        break;
                    }
                }
            }
        }
        for p in &placed {
            self.topo.apply(p, -1);
        }
        for p in &removed {
            self.topo.apply(p, 1);
        }
        result.map(|()| placed)
    }

    /// Checks a nominated assignment against the topology; on failure tries smaller counts
    /// (partial admission) and else turns the assignment into a TopologyPlacementFailed NoFit.
    pub(crate) fn nominate_placement(
        &mut self,
        pre: &Preemptor,
        partial: bool,
        a: &mut Assignment,
        victims: &[u32],
    ) -> Option<Vec<PodSetPlacement>> {
        if a.mode() == Mode::NoFit || !self.uses_tas(a) {
            return None;
        }
        let err = match self.place_assignment(pre.wl, a, victims) {
            Ok(p) => return Some(p),
            Err(e) => e,
        };
        if partial
            && a.mode() == Mode::Fit
            && victims.is_empty()
            && let Some((smaller, p)) = self.shrink_to_fit(pre, a)
        {
            *a = smaller;
            return Some(p);
        }
        if let Some(ps) = a.podsets.get_mut(err.0) {
            ps.reasons = vec![err.1];
        }
        a.forced_mode = Some(Mode::NoFit);
        a.no_fit_reason = TOPOLOGY_PLACEMENT_FAILED;
        None
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
            let cand = self.sim().assign(pre, Some(&counts));
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
            self.evict_on(&name, None, "is not ready");
        }
        self.requeue_all_inadmissible();
    }

    /// Applies a Node deletion; evicts its workloads.
    pub(crate) fn topo_delete_node(&mut self, name: &str) {
        self.topo.delete_node(name);
        self.evict_on(name, None, "was deleted");
        self.requeue_all_inadmissible();
    }

    /// Applies an agent report; evicts workloads on GPUs that turned unhealthy.
    pub(crate) fn topo_upsert_gpus(&mut self, node: &str, gpus: Option<NodeGpus>) {
        let bad = self.topo.upsert_gpus(node, gpus);
        if !bad.is_empty() {
            let list = bad.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            self.evict_on(node, Some(&bad), &format!("has unhealthy GPU(s) {list}"));
        }
        self.requeue_all_inadmissible();
    }

    fn evict_on(&mut self, node: &str, gpus: Option<&[u32]>, why: &str) {
        for w in self.topo.holders_on(node, gpus) {
            let now = self.now;
            self.evict(
                w,
                NODE_FAILURES,
                None,
                None,
                format!("Workload was evicted because node {node} {why}"),
                now,
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
