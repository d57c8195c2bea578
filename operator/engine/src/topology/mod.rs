//! Topology-aware gang placement (Kueue's TAS, with NVLink islands and MIG below the node level).
//!
//! The node inventory (Nodes, NodeGpuTopology reports, Kueue Topology objects) and what admitted
//! workloads hold on each node live here; [`capacity`] builds the policy's node batch and the
//! engine's own per-node fit, [`place`] chooses domains, nodes and GPUs.

pub(crate) mod admit;
pub(crate) mod capacity;
pub(crate) mod place;

use std::collections::HashMap;
use std::sync::Arc;

use sluice_sdk::policy::PlacementPolicy;
use sluice_sdk::policy::builtin::TopologyPack;
use sluice_sdk::topology::{GPU_RESOURCE, MIG_RESOURCE_PREFIX, NodeGpus};

use super::fasthash::{FastMap, FastSet};
use super::types::{Node, PodSet, PodSetPlacement};
use capacity::StaticBatch;

/// One GPU of a node, as placement tracks it.
#[derive(Clone, Debug)]
pub(crate) struct GpuSlot {
    pub index: u32,
    pub healthy: bool,
    /// Unhealthy only because it is degrading (still working).
    pub degrading: bool,
    /// Schedulable as a whole `nvidia.com/gpu` (not MIG-partitioned).
    pub whole: bool,
    pub held: bool,
    /// MIG instances: (resource id of the profile, held).
    pub mig: Vec<(u32, bool)>,
}

/// A node with what admitted workloads hold on it.
#[derive(Clone, Debug)]
pub(crate) struct NodeSlot {
    pub spec: Node,
    /// Allocatable by resource id.
    pub alloc: Vec<i64>,
    /// Held by placed workloads, by resource id.
    pub used: Vec<i64>,
    /// The agent's report, when there is one.
    pub report: Option<NodeGpus>,
    pub gpus: Vec<GpuSlot>,
    /// GPU positions (into `gpus`) of each NVLink island.
    pub islands: Vec<Vec<usize>>,
}

impl NodeSlot {
    pub(crate) fn schedulable(&self) -> bool {
        self.spec.ready && !self.spec.unschedulable
    }

    pub(crate) fn free(&self, r: u32) -> i64 {
        let r = r as usize;
        self.alloc.get(r).copied().unwrap_or(0) - self.used.get(r).copied().unwrap_or(0)
    }

    /// The node with nothing held on it.
    fn emptied(&self) -> NodeSlot {
        let mut n = self.clone();
        n.used.clear();
        for g in &mut n.gpus {
            g.held = false;
            for m in &mut g.mig {
                m.1 = false;
            }
        }
        n
    }

    fn add_used(&mut self, r: u32, v: i64) {
        let r = r as usize;
        if self.used.len() <= r {
            self.used.resize(r + 1, 0);
        }
        self.used[r] = self.used[r].saturating_add(v);
    }

    /// Rebuilds the GPU slots from the agent's report, keeping what is held.
    fn rebuild_gpus(&mut self, res: &mut Resources) {
        let held: Vec<(u32, bool, Vec<bool>)> = self
            .gpus
            .iter()
            .map(|g| (g.index, g.held, g.mig.iter().map(|m| m.1).collect()))
            .collect();
        self.gpus.clear();
        self.islands.clear();
        let Some(report) = &self.report else { return };
        for isl in report.complete_islands() {
            let mut members = Vec::new();
            for idx in isl.gpus {
                let Some(g) = report.gpus.iter().find(|g| g.index == idx) else {
                    continue;
                };
                let old = held.iter().find(|h| h.0 == idx);
                let mig = g
                    .mig_instances
                    .iter()
                    .enumerate()
                    .map(|(k, m)| {
                        let r = res.id(&format!("{MIG_RESOURCE_PREFIX}{}", m.profile));
                        let was = old.and_then(|o| o.2.get(k).copied()).unwrap_or(false);
                        (r, was)
                    })
                    .collect();
                members.push(self.gpus.len());
                self.gpus.push(GpuSlot {
                    index: idx,
                    healthy: g.health.healthy,
                    degrading: !g.health.healthy && g.health.degrading,
                    whole: !g.mig_enabled,
                    held: old.is_some_and(|o| o.1),
                    mig,
                });
            }
            self.islands.push(members);
        }
    }
}

/// Interned resource names of the node inventory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Resources {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Resources {
    pub(crate) fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    pub(crate) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }
}

/// Node inventory, holdings and the placement policy.
#[derive(Clone, Debug)]
pub(crate) struct TopoState {
    pub policy: Arc<dyn PlacementPolicy>,
    /// Placement policies of single ClusterQueues (by name), used instead of `policy`.
    pub overrides: HashMap<String, Arc<dyn PlacementPolicy>>,
    pub policy_failures: u64,
    pub last_policy_error: Option<String>,
    /// Ignore topology levels and NVLink islands (for comparisons in the simulator).
    pub blind: bool,
    pub res: Resources,
    pub gpu_res: u32,
    pub nodes: Vec<NodeSlot>,
    pub node_ids: HashMap<String, u32>,
    /// Shared so a preemption search can read the levels while it moves placements in and out.
    pub topologies: Arc<HashMap<String, Vec<String>>>,
    /// Bumped when static node data (labels, taints, allocatable, GPU inventory) changes.
    pub generation: u64,
    /// Placements held by admitted (and evicting) workloads.
    pub holdings: FastMap<u32, Vec<PodSetPlacement>>,
    /// Static node batch per TAS flavor, valid for one inventory generation.
    pub cache: FastMap<u32, StaticBatch>,
    /// Bumped whenever node usage changes (placements computed earlier may be stale).
    pub usage_gen: u64,
    /// Whether a request would place on the nodes with nothing held, by a digest of the request. It depends
    /// only on static inputs, so it is kept until one of them changes ([`TopoState::forget_fits`]); only
    /// answers of reusable placement policies are kept.
    pub empty_fits: FastMap<u64, Vec<(EmptyFitKey, EmptyFit)>>,
    /// The same inventory with nothing held, where empty-topology questions are placed: emptying this state
    /// instead would move every held placement out and back. Dropped with `empty_fits`.
    pub empty_twin: Option<Box<TopoState>>,
    /// Nodes whose usage or readiness changed, oldest first, so cached node batches catch up on them alone.
    pub touched: Vec<u32>,
    /// Sequence number of `touched[0]`: entries dropped from the front (a batch older than that rebuilds).
    pub touched_base: u64,
    /// Bumped when a workload's placements are recorded or released (not when a search moves them out and back).
    pub holdings_gen: u64,
    /// The holders of each domain of a level, most holders first, as of (`holdings_gen`, `generation`).
    pub domain_holders: Option<DomainHolders>,
    /// Node ids each holding workload's placements use, kept with `holdings` by `hold` and `release`.
    pub held_nodes: FastMap<u32, Vec<u32>>,
    /// A placement names a node the inventory does not know yet (a restored admission before its Node): the
    /// ids are looked up again when a node is added.
    pub held_unresolved: bool,
    /// Each node's domain (numbered in label order) at one level: (`generation`, level, domains by node id).
    pub level_index: Option<(u64, String, LevelIndex)>,
}

/// Each node's domain at one level, by node id (None: the node lacks the label).
pub(crate) type LevelIndex = Arc<Vec<Option<u32>>>;

/// The admitted workloads holding nodes in each domain of one topology level.
#[derive(Clone, Debug)]
pub(crate) struct DomainHolders {
    /// `holdings_gen` and `generation` it was built at.
    pub at: (u64, u64),
    /// The level (node label key).
    pub level: String,
    /// Holders per domain holding any, the most first (ties in the domains' label order).
    pub domains: Arc<Vec<FastSet<u32>>>,
}

/// What an empty-topology placement reads beyond static inputs: the placement policy that applies (by
/// address), per assigned pod set its index, pod count and flavor of each resource, and the pod sets.
pub(crate) type EmptyFitKey = (usize, Vec<(usize, i32, Vec<u32>)>, Vec<PodSet>);

/// Whether a request places on an empty topology; Err: (pod set index, message).
pub(crate) type EmptyFit = Result<(), (usize, String)>;

/// Answers kept at most, so a stable inventory with endless distinct requests does not grow without bound.
pub(crate) const MAX_EMPTY_FITS: usize = 4096;

impl Default for TopoState {
    fn default() -> Self {
        let mut res = Resources::default();
        let gpu_res = res.id(GPU_RESOURCE);
        Self {
            policy: Arc::new(TopologyPack),
            overrides: HashMap::new(),
            policy_failures: 0,
            last_policy_error: None,
            blind: false,
            res,
            gpu_res,
            nodes: Vec::new(),
            node_ids: HashMap::new(),
            topologies: Arc::default(),
            generation: 0,
            holdings: FastMap::default(),
            cache: FastMap::default(),
            usage_gen: 0,
            empty_fits: FastMap::default(),
            empty_twin: None,
            touched: Vec::new(),
            touched_base: 0,
            holdings_gen: 0,
            domain_holders: None,
            held_nodes: FastMap::default(),
            level_index: None,
            held_unresolved: false,
        }
    }
}

impl TopoState {
    /// Drops every remembered empty-topology answer: a static input of placement (nodes, flavors, topologies,
    /// policies) changed.
    pub(crate) fn forget_fits(&mut self) {
        self.empty_fits.clear();
        self.empty_twin = None;
    }

    /// Static node data (labels, taints, allocatable, GPU inventory, flavors, topologies) changed: cached
    /// node batches and empty-topology answers are stale.
    pub(crate) fn inventory_changed(&mut self) {
        self.generation += 1;
        self.forget_fits();
    }

    /// Notes that a node's usage or readiness changed. The log is cut once it outgrows the inventory: a batch
    /// that far behind costs no more to rebuild than to catch up.
    fn touch(&mut self, id: u32) {
        if self.touched.len() > 2 * self.nodes.len() + 64 {
            self.touched_base += self.touched.len() as u64;
            self.touched.clear();
        }
        self.touched.push(id);
    }

    /// The holders of each domain of `level` (node label key), the domains with most holders first.
    pub(crate) fn domain_holders(&mut self, level: &str) -> Arc<Vec<FastSet<u32>>> {
        let at = (self.holdings_gen, self.generation);
        if let Some(d) = &self.domain_holders
            && d.at == at
            && d.level == level
        {
            return d.domains.clone();
        }
        let dom_of = self.level_index(level);
        let ndoms = dom_of
            .iter()
            .flatten()
            .map(|&d| d as usize + 1)
            .max()
            .unwrap_or(0);
        let mut sets: Vec<FastSet<u32>> = vec![FastSet::default(); ndoms];
        for (&w, ids) in &self.held_nodes {
            for &id in ids {
                if let Some(Some(d)) = dom_of.get(id as usize) {
                    sets[*d as usize].insert(w);
                }
            }
        }
        let mut domains: Vec<FastSet<u32>> = sets.into_iter().filter(|s| !s.is_empty()).collect();
        domains.sort_by_key(|d| std::cmp::Reverse(d.len()));
        let domains = Arc::new(domains);
        self.domain_holders = Some(DomainHolders {
            at,
            level: level.to_string(),
            domains: domains.clone(),
        });
        domains
    }

    /// Each node's domain at `level`, numbered in the order of the label values so that ties keep Kueue's order
    /// of domains; None for a node without the label. Kept until the inventory changes.
    fn level_index(&mut self, level: &str) -> LevelIndex {
        if let Some((g, l, idx)) = &self.level_index
            && *g == self.generation
            && l == level
        {
            return idx.clone();
        }
        let mut values: Vec<&str> = self
            .nodes
            .iter()
            .filter_map(|n| n.spec.labels.get(level).map(String::as_str))
            .collect();
        values.sort_unstable();
        values.dedup();
        let idx: LevelIndex = Arc::new(
            self.nodes
                .iter()
                .map(|n| {
                    let v = n.spec.labels.get(level)?;
                    values.binary_search(&v.as_str()).ok().map(|d| d as u32)
                })
                .collect(),
        );
        self.level_index = Some((self.generation, level.to_string(), idx.clone()));
        idx
    }

    /// Sequence number the next touched node gets.
    pub(crate) fn touched_seq(&self) -> u64 {
        self.touched_base + self.touched.len() as u64
    }

    /// This inventory with nothing held (built on first use after a static change).
    pub(crate) fn empty_twin(&mut self) -> &mut TopoState {
        self.empty_twin.get_or_insert_with(|| {
            // Nothing held, no caches: the rest as a fresh state has it.
            Box::new(TopoState {
                policy: self.policy.clone(),
                overrides: self.overrides.clone(),
                blind: self.blind,
                res: self.res.clone(),
                gpu_res: self.gpu_res,
                nodes: self.nodes.iter().map(NodeSlot::emptied).collect(),
                node_ids: self.node_ids.clone(),
                topologies: self.topologies.clone(),
                generation: self.generation,
                ..TopoState::default()
            })
        })
    }

    /// Inserts or updates a node. Returns whether it stopped being usable (NotReady).
    pub(crate) fn upsert_node(&mut self, node: Node) -> bool {
        let alloc = self.alloc_vec(&node);
        match self.node_ids.get(&node.name).copied() {
            Some(id) => {
                let slot = &mut self.nodes[id as usize];
                let failed = slot.spec.ready && !node.ready;
                let static_change = slot.spec.labels != node.labels
                    || slot.spec.taints != node.taints
                    || slot.alloc != alloc;
                let changed = static_change || slot.spec != node;
                slot.spec = node;
                slot.alloc = alloc;
                if static_change {
                    self.inventory_changed();
                } else if changed {
                    // Readiness and schedulability are dynamic columns of the batch.
                    self.forget_fits();
                    self.touch(id);
                }
                failed
            }
            None => {
                let id = self.nodes.len() as u32;
                self.node_ids.insert(node.name.clone(), id);
                self.nodes.push(NodeSlot {
                    spec: node,
                    alloc,
                    used: Vec::new(),
                    report: None,
                    gpus: Vec::new(),
                    islands: Vec::new(),
                });
                self.inventory_changed();
                if std::mem::take(&mut self.held_unresolved) {
                    let holdings = std::mem::take(&mut self.holdings);
                    for (&w, ps) in &holdings {
                        let ids = self.node_ids_of(ps);
                        self.held_nodes.insert(w, ids);
                    }
                    self.holdings = holdings;
                }
                false
            }
        }
    }

    fn alloc_vec(&mut self, node: &Node) -> Vec<i64> {
        let mut v = Vec::new();
        for (r, &q) in &node.allocatable {
            let id = self.res.id(r) as usize;
            if v.len() <= id {
                v.resize(id + 1, 0);
            }
            v[id] = q;
        }
        v
    }

    /// Marks a deleted node NotReady with nothing allocatable (holdings on it are released later).
    pub(crate) fn delete_node(&mut self, name: &str) {
        if let Some(&id) = self.node_ids.get(name) {
            let slot = &mut self.nodes[id as usize];
            slot.spec.ready = false;
            slot.spec.labels.clear();
            slot.alloc.clear();
            self.inventory_changed();
        }
    }

    /// Records an agent report; returns the GPU indexes that failed (were healthy or degrading) and those
    /// that started degrading (were healthy).
    pub(crate) fn upsert_gpus(
        &mut self,
        node: &str,
        report: Option<NodeGpus>,
    ) -> (Vec<u32>, Vec<u32>) {
        let Some(&id) = self.node_ids.get(node) else {
            // Reports may arrive before their Node: keep them on a placeholder that is NotReady.
            if report.is_some() {
                self.upsert_node(Node {
                    name: node.to_string(),
                    ..Node::default()
                });
                return self.upsert_gpus(node, report);
            }
            return (Vec::new(), Vec::new());
        };
        let slot = &mut self.nodes[id as usize];
        // Index -> degrading, for the GPUs that were working (healthy or degrading).
        let was_working: FastMap<u32, bool> = slot
            .gpus
            .iter()
            .filter(|g| g.healthy || g.degrading)
            .map(|g| (g.index, g.degrading))
            .collect();
        slot.report = report;
        slot.rebuild_gpus(&mut self.res);
        let mut failed = Vec::new();
        let mut degrading = Vec::new();
        for g in slot.gpus.iter().filter(|g| !g.healthy) {
            match was_working.get(&g.index) {
                Some(_) if !g.degrading => failed.push(g.index),
                Some(false) => degrading.push(g.index),
                _ => {}
            }
        }
        self.inventory_changed();
        (failed, degrading)
    }

    /// Charges (`sign` 1) or releases (-1) a placement on its nodes.
    pub(crate) fn apply(&mut self, p: &PodSetPlacement, sign: i64) {
        self.usage_gen += 1;
        let per_pod: Vec<(u32, i64)> = p
            .per_pod
            .iter()
            .map(|(r, &q)| (self.res.id(r), q))
            .collect();
        let mig: Vec<(u32, i64)> = per_pod
            .iter()
            .copied()
            .filter(|&(r, _)| self.res.name(r).starts_with(MIG_RESOURCE_PREFIX))
            .collect();
        for np in &p.nodes {
            let Some(&id) = self.node_ids.get(&np.node) else {
                continue;
            };
            self.touch(id);
            let slot = &mut self.nodes[id as usize];
            for &(r, q) in &per_pod {
                slot.add_used(r, sign * q.saturating_mul(i64::from(np.pods)));
            }
            for &g in &np.gpus {
                if let Some(s) = slot.gpus.iter_mut().find(|s| s.index == g) {
                    s.held = sign > 0;
                }
            }
            // MIG instances are listed by resource (name order), then by pod.
            let mut it = np.mig_gpus.iter();
            for &(r, per) in &mig {
                for _ in 0..per.saturating_mul(i64::from(np.pods)) {
                    let Some(&g) = it.next() else { break };
                    if let Some(s) = slot.gpus.iter_mut().find(|s| s.index == g)
                        && let Some(m) = s.mig.iter_mut().find(|m| m.0 == r && m.1 == (sign < 0))
                    {
                        m.1 = sign > 0;
                    }
                }
            }
        }
    }

    /// Records and charges a workload's placements.
    pub(crate) fn hold(&mut self, wl: u32, placements: Vec<PodSetPlacement>) {
        self.release(wl);
        self.holdings_gen += 1;
        for p in &placements {
            self.apply(p, 1);
        }
        if !placements.is_empty() {
            let ids = self.node_ids_of(&placements);
            self.held_nodes.insert(wl, ids);
            self.holdings.insert(wl, placements);
        }
    }

    /// The known node ids `placements` use, sorted; notes a node not known yet.
    fn node_ids_of(&mut self, placements: &[PodSetPlacement]) -> Vec<u32> {
        let mut ids = Vec::new();
        for n in placements.iter().flat_map(|p| &p.nodes) {
            match self.node_ids.get(&n.node) {
                Some(&id) => ids.push(id),
                None => self.held_unresolved = true,
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Releases what a workload holds; returns whether it held anything.
    pub(crate) fn release(&mut self, wl: u32) -> bool {
        let Some(ps) = self.holdings.remove(&wl) else {
            return false;
        };
        self.holdings_gen += 1;
        self.held_nodes.remove(&wl);
        for p in &ps {
            self.apply(p, -1);
        }
        true
    }

    /// Workloads holding pods on `node` (any GPU when `gpus` is None, else one of those GPUs).
    pub(crate) fn holders_on(&self, node: &str, gpus: Option<&[u32]>) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .holdings
            .iter()
            .filter(|(_, ps)| {
                ps.iter().any(|p| {
                    p.nodes.iter().any(|n| {
                        n.node == node
                            && gpus.is_none_or(|bad| {
                                n.gpus.iter().chain(&n.mig_gpus).any(|g| bad.contains(g))
                            })
                    })
                })
            })
            .map(|(&w, _)| w)
            .collect();
        out.sort_unstable();
        out
    }

    /// Records a policy failure (the built-in policy answered instead).
    pub(crate) fn policy_failed(&mut self, message: String) {
        self.policy_failures += 1;
        tracing::warn!(%message, "placement policy failed; using topology-pack");
        self.last_policy_error = Some(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{NodePlacement, TopologyAssignment};

    fn on(node: &str) -> PodSetPlacement {
        PodSetPlacement {
            pod_set: "main".into(),
            flavor: "f".into(),
            per_pod: [(GPU_RESOURCE.to_string(), 1)].into(),
            assignment: TopologyAssignment::default(),
            nodes: vec![NodePlacement {
                node: node.into(),
                pods: 1,
                gpus: Vec::new(),
                mig_gpus: Vec::new(),
            }],
        }
    }

    fn node(name: &str, rack: &str) -> Node {
        Node {
            name: name.into(),
            labels: [("rack".to_string(), rack.to_string())].into(),
            allocatable: [(GPU_RESOURCE.to_string(), 8)].into(),
            ready: true,
            ..Node::default()
        }
    }

    /// The holders per domain follow holds, releases and relabels, and a placement restored before its Node is
    /// counted once the Node arrives; domains with more holders come first, ties in label order.
    #[test]
    fn domain_holders_follow_holdings_and_late_nodes() {
        let mut t = TopoState::default();
        t.upsert_node(node("a", "r2"));
        t.hold(1, vec![on("a")]);
        t.hold(2, vec![on("late")]);
        assert!(t.held_unresolved);
        let sets = |t: &mut TopoState| -> Vec<Vec<u32>> {
            t.domain_holders("rack")
                .iter()
                .map(|s| {
                    let mut v: Vec<u32> = s.iter().copied().collect();
                    v.sort_unstable();
                    v
                })
                .collect()
        };
        assert_eq!(sets(&mut t), vec![vec![1]]);
        t.upsert_node(node("late", "r1"));
        assert!(!t.held_unresolved);
        // r1 and r2 hold one each: label order.
        assert_eq!(sets(&mut t), vec![vec![2], vec![1]]);
        t.hold(3, vec![on("a")]);
        assert_eq!(sets(&mut t), vec![vec![1, 3], vec![2]]);
        t.release(1);
        t.upsert_node(node("a", "r0"));
        assert_eq!(sets(&mut t), vec![vec![3], vec![2]]);
    }
}
