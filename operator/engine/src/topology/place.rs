//! Choosing domains, nodes and GPUs for one pod set.
//!
//! Algorithm (one call of the placement policy per pod set), Kueue v0.19's TAS with its default
//! Mixed profile:
//! 1. The flavor's cached static batch gets this moment's dynamic columns; the policy scores every
//!    node and may cap its pods. A node's capacity is the engine's own fit (taints, nodeSelector,
//!    required affinity, resources, healthy GPUs, NVLink islands when required, MIG instances)
//!    lowered by the policy's cap; excluded nodes are counted for Kueue's failure message.
//! 2. Domains are ordered as Kueue orders them: free capacity descending (ascending for
//!    LeastFreeCapacity), then level values. *Required* and *preferred* use BestFit: at level L
//!    the first domain with the fewest pods that still holds every pod; *required* fails
//!    otherwise, *preferred* climbs level by level and at the top takes whole domains in order
//!    (the best fit for the last). *Unconstrained* (and no request, implied TAS) uses
//!    LeastFreeCapacity at the lowest level: the first domain in ascending order that holds
//!    every pod, else domains from the least free up.
//! 3. Descending, the children of all chosen domains are pooled, ordered the same way and taken
//!    in order until every pod is placed (BestFit for the last). Inside a lowest-level domain that
//!    is not a node, the node with the best policy score holding every pod wins, else nodes are
//!    filled in score order.
//! 4. On each node, each pod's GPUs come from the NVLink island that fits them most tightly
//!    (required: only from one island), and MIG instances from the GPUs with the fewest free
//!    instances that still fit, so partitions stay packed on few GPUs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sluice_sdk::policy::builtin::TopologyPack;
use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, TopologyMode};
use sluice_sdk::topology::{GPU_RESOURCE, MIG_RESOURCE_PREFIX};

use super::TopoState;
use super::capacity::{PodNeeds, StaticBatch, batch_fit, fill_dynamic, node_fit, tolerates};
use crate::matching::node_affinity_matches;
use crate::types::{
    Flavor, NodePlacement, PodSet, PodSetPlacement, TopologyAssignment, TopologyDomain,
};

/// Node label whose level Kueue emits alone in assignments.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// What to place.
pub(crate) struct PlaceInput<'a> {
    pub flavor_id: u32,
    pub flavor: &'a Flavor,
    pub pod_set: &'a PodSet,
    pub count: u32,
    pub workload: &'a str,
    pub priority: i32,
    /// The policy scoring nodes (the workload's ClusterQueue's).
    pub policy: Arc<dyn PlacementPolicy>,
    /// The leader pod set of a pod-set group (one pod), placed with these pods as one unit.
    pub leader: Option<&'a PodSet>,
}

/// Candidate domain during selection.
struct Dom {
    members: Vec<usize>,
    /// Free pods.
    cap: u64,
    /// Free slices down to the slice level, free pods below it.
    units: u64,
    /// With a leader: leaders the domain can hold (0 or 1), free pods and units once it holds
    /// one (Kueue's `podCountWithLeader`, `sliceCountWithLeader`).
    leaders: u64,
    wl: u64,
    units_wl: u64,
    /// Kueue's tie-break position: rank by level values among the domains of its level.
    order: u32,
}

impl TopoState {
    /// Takes the flavor's static batch for the current inventory generation out of the cache
    /// (built when missing or stale); the caller puts it back.
    fn take_static_batch(
        &mut self,
        flavor_id: u32,
        flavor: &Flavor,
        levels: &[String],
    ) -> StaticBatch {
        match self.cache.remove(&flavor_id) {
            Some(sb) if sb.generation == self.generation && sb.levels == levels => sb,
            _ => StaticBatch::build(self, flavor, levels),
        }
    }

    /// Places `count` pods of a pod set (and its group's leader, placed first in the result) in
    /// a TAS flavor, or says why it cannot.
    pub(crate) fn place(&mut self, inp: &PlaceInput<'_>) -> Result<Vec<PodSetPlacement>, String> {
        let topo_name = inp.flavor.topology_name.clone().unwrap_or_default();
        let Some(levels) = self.topologies.get(&topo_name).cloned() else {
            return Err(format!("topology {topo_name:?} not found"));
        };
        let mut sb = self.take_static_batch(inp.flavor_id, inp.flavor, &levels);
        let out = self.place_in(inp, &mut sb, &topo_name, &levels);
        self.cache.insert(inp.flavor_id, sb);
        out
    }

    fn place_in(
        &mut self,
        inp: &PlaceInput<'_>,
        sb: &mut StaticBatch,
        topo_name: &str,
        levels: &[String],
    ) -> Result<Vec<PodSetPlacement>, String> {
        let ps = inp.pod_set;
        let topo = ps.topology.clone().unwrap_or_default();
        let needs = self.needs_of(ps);
        let leader_needs = inp.leader.map(|l| self.needs_of(l));
        let mut resources: Vec<u32> = needs.per_pod.iter().map(|&(r, _)| r).collect();
        if let Some(ln) = &leader_needs {
            for &(r, _) in &ln.per_pod {
                if !resources.contains(&r) {
                    resources.push(r);
                }
            }
        }
        let mut batch = std::mem::take(&mut sb.batch);
        fill_dynamic(self, sb, &mut batch, &resources);
        sb.batch = batch;
        let batch = &sb.batch;
        let request = PodSetRequest {
            workload: inp.workload.to_string(),
            pod_set: ps.name.clone(),
            count: inp.count,
            min_count: inp.count,
            resources: ps.requests.keys().cloned().collect(),
            per_pod: ps.requests.values().copied().collect(),
            gpus_per_pod: needs.gpus,
            topology_mode: topo.mode,
            topology_level: topo.level.clone(),
            nvlink_required: needs.nvlink,
            priority: inp.priority,
            labels: Vec::new(),
        };
        let policy = inp.policy.clone();
        let scores = match policy
            .score(&request, batch)
            .and_then(|s| s.check(policy.name(), batch).map(|()| s))
        {
            Ok(s) => s,
            Err(e) => {
                self.policy_failed(e.to_string());
                TopologyPack
                    .score(&request, batch)
                    .unwrap_or_else(|_| NodeScores {
                        score: vec![0.0; batch.len()],
                        max_pods: vec![u32::MAX; batch.len()],
                    })
            }
        };
        let mut tolerations = ps.tolerations.clone();
        tolerations.extend(inp.flavor.tolerations.iter().cloned());
        let mut stats = Exclusions::default();
        let mut feasible = vec![false; sb.nodes.len()];
        let mut excluded_by: Vec<u64> = Vec::new();
        // Per node: the filters and the fit read the batch's columns; the node itself only when it has a
        // taint, the pod set a selector or affinity, or MIG instances are needed.
        let nres = resources.len();
        let plain = ps.node_selector.is_empty() && ps.required_affinity.is_empty();
        let caps: Vec<u32> = (0..sb.nodes.len())
            .map(|i| {
                if !batch.ready[i] {
                    return 0;
                }
                // Kueue's order of node filters: taints, nodeSelector, required affinity.
                stats.total += 1;
                if sb.tainted[i] || !plain {
                    let slot = &self.nodes[sb.nodes[i] as usize];
                    if let Some(t) = first_untolerated(slot, &tolerations) {
                        *stats.taints.entry(taint_key(t)).or_default() += 1;
                        return 0;
                    }
                    let labels = &slot.spec.labels;
                    if !ps
                        .node_selector
                        .iter()
                        .all(|(k, v)| labels.get(k) == Some(v))
                    {
                        stats.node_selector += 1;
                        return 0;
                    }
                    if !node_affinity_matches(&ps.required_affinity, labels) {
                        stats.affinity += 1;
                        return 0;
                    }
                }
                feasible[i] = true;
                let fit = if needs.mig.is_empty() {
                    batch_fit(batch, i, &needs, nres)
                } else {
                    node_fit(
                        &self.nodes[sb.nodes[i] as usize],
                        &needs,
                        self.gpu_res,
                        self.blind,
                    )
                };
                if fit == 0 {
                    // Counted by resource id; named only if a message is written.
                    let r = self.limiting_resource(batch, i, &needs, nres) as usize;
                    if excluded_by.len() <= r {
                        excluded_by.resize(r + 1, 0);
                    }
                    excluded_by[r] += 1;
                }
                fit.min(scores.max_pods[i])
            })
            .collect();
        for (r, &n) in excluded_by.iter().enumerate() {
            if n > 0 {
                stats
                    .resources
                    .insert(self.res.name(r as u32).to_string(), n);
            }
        }
        // Kueue counts node exclusions only when nodes are its leaf domains.
        if levels.last().is_none_or(|l| l != HOSTNAME) {
            stats = Exclusions::default();
        }
        let nlev = levels.len();
        let level_of = |l: &Option<String>| -> Result<usize, String> {
            match l {
                Some(l) => levels
                    .iter()
                    .position(|x| x == l)
                    .ok_or_else(|| format!("topology {topo_name:?} has no level {l:?}")),
                None => Ok(nlev.saturating_sub(1)),
            }
        };
        // Slices: `slice_size` pods that must share a domain of the slice level (default: one
        // pod per node-level domain, which is no constraint).
        let (slice_level, slice_size) = match &topo.slice_level {
            Some(l) => {
                let idx = levels
                    .iter()
                    .position(|x| x == l)
                    .ok_or_else(|| format!("no requested topology level for slices: {l}"))?;
                match topo.slice_size.filter(|&n| n > 0) {
                    Some(n) => (idx, u32::try_from(n).unwrap_or(u32::MAX)),
                    None => {
                        return Err(
                            "slice topology requested, but slice size not provided".to_string()
                        );
                    }
                }
            }
            None => (nlev.saturating_sub(1), 1),
        };
        if !inp.count.is_multiple_of(slice_size) {
            return Err(format!(
                "pod count {} is not a multiple of the slice size {slice_size}",
                inp.count
            ));
        }
        // With a leader: whether each node holds it, and its pods once it does.
        let lead_cols: Option<(Vec<u32>, Vec<u32>)> = leader_needs.as_ref().map(|ln| {
            (0..sb.nodes.len())
                .map(|i| {
                    let slot = &self.nodes[sb.nodes[i] as usize];
                    if !feasible[i] || node_fit(slot, ln, self.gpu_res, self.blind) == 0 {
                        return (0, caps[i]);
                    }
                    let mut rest = slot.clone();
                    for &(r, q) in &ln.per_pod {
                        rest.add_used(r, q);
                    }
                    let (g, m) = choose_gpus(slot, ln, 1);
                    for x in g {
                        if let Some(gs) = rest.gpus.iter_mut().find(|s| s.index == x) {
                            gs.held = true;
                        }
                    }
                    // MIG instances come grouped by profile, `per` of each.
                    let profiles = ln
                        .mig
                        .iter()
                        .flat_map(|&(r, per)| std::iter::repeat_n(r, per as usize));
                    for (x, r) in m.iter().zip(profiles) {
                        if let Some(gs) = rest.gpus.iter_mut().find(|s| s.index == *x)
                            && let Some(mi) = gs.mig.iter_mut().find(|mi| mi.0 == r && !mi.1)
                        {
                            mi.1 = true;
                        }
                    }
                    let wl =
                        node_fit(&rest, &needs, self.gpu_res, self.blind).min(scores.max_pods[i]);
                    (1, wl)
                })
                .unzip()
        });
        // Kueue fails early when the flavor has no (ready, schedulable) node at all.
        let no_domains = !batch.ready.iter().any(|&r| r);
        let sel = Selector {
            sb,
            caps: &caps,
            scores: &scores.score,
            slice_level,
            slice_size: u64::from(slice_size),
            lead: lead_cols
                .as_ref()
                .map(|(a, b)| (a.as_slice(), b.as_slice())),
        };
        let all: Vec<usize> = (0..caps.len())
            .filter(|&i| caps[i] > 0 || lead_cols.as_ref().is_some_and(|(l, _)| l[i] > 0))
            .collect();
        let total: u64 = all.iter().map(|&i| u64::from(caps[i])).sum();
        let need = inp.count;
        let units = need / slice_size;
        let unit = if slice_size == 1 { "pod" } else { "slice" };
        let fail = |fit: u64| {
            let mut m = if fit == 0 {
                format!("topology {topo_name:?} doesn't allow to fit any of {units} {unit}(s)")
            } else {
                format!("topology {topo_name:?} allows to fit only {fit} out of {units} {unit}(s)")
            };
            stats.append_to(&mut m);
            m
        };
        // Kueue's Mixed profile: LeastFreeCapacity for unconstrained (and implied) requests, BestFit
        // for required and preferred ones. Returns the level the search starts at, whether the
        // request is required, and whether it is least-free-capacity.
        let search = || -> Result<(usize, bool, bool), String> {
            let (start, required, lfc) = match topo.mode {
                TopologyMode::Required => (level_of(&topo.level)?, true, false),
                TopologyMode::Preferred => (level_of(&topo.level)?, false, false),
                // A slice-only request starts at the highest level.
                _ if topo.slice_level.is_some() => (0, false, true),
                TopologyMode::Unconstrained | TopologyMode::None => (nlev - 1, false, true),
            };
            if start > slice_level {
                return Err(format!(
                    "podset slice topology {} is above the podset topology {}",
                    levels[slice_level], levels[start]
                ));
            }
            if no_domains {
                return Err(format!("no topology domains at level: {}", levels[start]));
            }
            Ok((start, required, lfc))
        };
        let mut chosen: Vec<(usize, u32)> = Vec::new();
        let mut leader_node: Option<usize> = None;
        if self.blind || nlev == 0 {
            if total < u64::from(need) {
                return Err(fail(total));
            }
            if inp.leader.is_some() {
                leader_node = sel.pick_leader(&all);
                if leader_node.is_none() {
                    return Err(fail(0));
                }
            }
            sel.pick_nodes_with(&all, need, leader_node, &mut chosen);
        } else if inp.leader.is_some() {
            let (start, required, lfc) = search()?;
            let (fit_level, doms) = sel
                .fit_level_lead(&all, start, u64::from(units), required, lfc)
                .map_err(fail)?;
            let mut cur = sel.take_minimum_lead(doms, u64::from(units), 1, lfc, fit_level);
            for l in fit_level + 1..nlev {
                if l <= slice_level {
                    let members: Vec<usize> = cur
                        .iter()
                        .flat_map(|(d, _, _)| d.members.iter().copied())
                        .collect();
                    let doms = sel.sorted_lead(sel.group(&members, l), lfc);
                    cur = sel.take_minimum_lead(doms, u64::from(units), 1, lfc, l);
                } else {
                    let mut next = Vec::new();
                    for (d, pods, lead) in cur {
                        let doms = sel.sorted_lead(sel.group(&d.members, l), lfc);
                        next.extend(sel.take_minimum_lead(doms, pods, lead, lfc, l));
                    }
                    cur = next;
                }
            }
            for (d, n, lead) in cur {
                let here = if lead > 0 {
                    sel.pick_leader(&d.members)
                } else {
                    None
                };
                if here.is_some() {
                    leader_node = here;
                }
                sel.pick_nodes_with(
                    &d.members,
                    u32::try_from(n).unwrap_or(u32::MAX),
                    here,
                    &mut chosen,
                );
            }
            if leader_node.is_none() {
                return Err(fail(0));
            }
        } else {
            let (start, required, lfc) = search()?;
            let (fit_level, doms) = sel
                .fit_level(&all, start, u64::from(units), required, lfc)
                .map_err(fail)?;
            let mut cur = sel.take_minimum(doms, u64::from(units), lfc, fit_level);
            for l in fit_level + 1..nlev {
                if l <= slice_level {
                    // Down to the slice level the children of all chosen domains are pooled.
                    let members: Vec<usize> = cur
                        .iter()
                        .flat_map(|(d, _)| d.members.iter().copied())
                        .collect();
                    let doms = sel.sorted(sel.group(&members, l), lfc);
                    cur = sel.take_minimum(doms, u64::from(units), lfc, l);
                } else {
                    // Below it each domain's pods stay inside it.
                    let mut next = Vec::new();
                    for (d, pods) in cur {
                        let doms = sel.sorted(sel.group(&d.members, l), lfc);
                        next.extend(sel.take_minimum(doms, pods, lfc, l));
                    }
                    cur = next;
                }
            }
            for (d, n) in cur {
                sel.pick_nodes(
                    &d.members,
                    u32::try_from(n).unwrap_or(u32::MAX),
                    &mut chosen,
                );
            }
        }
        let (Some(lps), Some(ln), Some(li)) = (inp.leader, &leader_needs, leader_node) else {
            return Ok(vec![self.realise(inp, sb, &needs, levels, chosen)]);
        };
        // The leader's GPUs are taken first so that workers on its node get others.
        let linp = PlaceInput {
            pod_set: lps,
            count: 1,
            leader: None,
            policy: inp.policy.clone(),
            ..*inp
        };
        let lp = self.realise(&linp, sb, ln, levels, vec![(li, 1)]);
        self.apply(&lp, 1);
        let wp = self.realise(inp, sb, &needs, levels, chosen);
        self.apply(&lp, -1);
        Ok(vec![lp, wp])
    }

    /// One pod's needs of a pod set, in inventory resource ids.
    fn needs_of(&mut self, ps: &PodSet) -> PodNeeds {
        let nvlink = ps.topology.as_ref().is_some_and(|t| t.nvlink);
        let mut needs = PodNeeds {
            nvlink: nvlink && !self.blind,
            ..PodNeeds::default()
        };
        for (r, &q) in &ps.requests {
            let id = self.res.id(r);
            needs.per_pod.push((id, q));
            let q32 = u32::try_from(q.max(0)).unwrap_or(u32::MAX);
            if r == GPU_RESOURCE {
                needs.gpus = q32;
            } else if r.starts_with(MIG_RESOURCE_PREFIX) {
                needs.mig.push((id, q32));
            }
        }
        needs
    }

    /// Turns chosen (node, pods) pairs into a placement: GPUs per node and Kueue's assignment.
    fn realise(
        &self,
        inp: &PlaceInput<'_>,
        sb: &StaticBatch,
        needs: &PodNeeds,
        levels: &[String],
        mut chosen: Vec<(usize, u32)>,
    ) -> PodSetPlacement {
        chosen.sort_by_key(|&(i, _)| i);
        let hostname_only = levels.last().is_some_and(|l| l == HOSTNAME);
        let out_levels: Vec<String> = if hostname_only {
            vec![HOSTNAME.to_string()]
        } else {
            levels.to_vec()
        };
        let mut domains: BTreeMap<Vec<String>, i32> = BTreeMap::new();
        let mut nodes = Vec::with_capacity(chosen.len());
        for (i, pods) in chosen {
            let slot = &self.nodes[sb.nodes[i] as usize];
            let values: Vec<String> = out_levels
                .iter()
                .map(|l| slot.spec.labels.get(l).cloned().unwrap_or_default())
                .collect();
            let pods_i32 = i32::try_from(pods).unwrap_or(i32::MAX);
            *domains.entry(values).or_default() += pods_i32;
            let (gpus, mig_gpus) = choose_gpus(slot, needs, pods);
            nodes.push(NodePlacement {
                node: slot.spec.name.clone(),
                pods: pods_i32,
                gpus,
                mig_gpus,
            });
        }
        PodSetPlacement {
            pod_set: inp.pod_set.name.clone(),
            flavor: inp.flavor.name.clone(),
            per_pod: inp.pod_set.requests.clone(),
            assignment: TopologyAssignment {
                levels: out_levels,
                domains: domains
                    .into_iter()
                    .map(|(values, count)| TopologyDomain { values, count })
                    .collect(),
            },
            nodes,
        }
    }
}

/// Index of the first domain with the fewest pods that still holds `need` (Kueue's BestFit;
/// `doms` are in Kueue's order, so ties go to the first).
/// Moves whole domains from `rest` (in order; the best fit for the last one under BestFit) to `out` until
/// `left` units are covered; returns the units still missing.
fn take_in_order(mut rest: Vec<Dom>, mut left: u64, lfc: bool, out: &mut Vec<Dom>) -> u64 {
    while left > 0 && !rest.is_empty() {
        let i = if !lfc && rest[0].units >= left {
            best_fit(&rest, left).unwrap_or(0)
        } else {
            0
        };
        let d = rest.remove(i);
        left = left.saturating_sub(d.units);
        out.push(d);
    }
    left
}

fn best_fit(doms: &[Dom], need: u64) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, d) in doms.iter().enumerate() {
        if d.units >= need && best.is_none_or(|b| d.units < doms[b].units) {
            best = Some(i);
        }
    }
    best
}

/// Pod counts per node exclusion reason, for Kueue's "doesn't fit" message.
#[derive(Default)]
struct Exclusions {
    total: u64,
    node_selector: u64,
    affinity: u64,
    taints: BTreeMap<String, u64>,
    resources: BTreeMap<String, u64>,
}

impl Exclusions {
    /// Appends `. Total nodes: N; excluded: ...` (reasons sorted) when a node was excluded.
    fn append_to(&self, m: &mut String) {
        let mut reasons: Vec<String> = Vec::new();
        if self.node_selector > 0 {
            reasons.push(format!("nodeSelector: {}", self.node_selector));
        }
        if self.affinity > 0 {
            reasons.push(format!("affinity: {}", self.affinity));
        }
        for (t, n) in &self.taints {
            reasons.push(format!("taint {t:?}: {n}"));
        }
        for (r, n) in &self.resources {
            reasons.push(format!("resource {r:?}: {n}"));
        }
        if reasons.is_empty() {
            return;
        }
        reasons.sort();
        m.push_str(&format!(
            ". Total nodes: {}; excluded: {}",
            self.total,
            reasons.join(", ")
        ));
    }
}

/// The first NoSchedule/NoExecute taint of the node the tolerations do not tolerate.
fn first_untolerated<'a>(
    slot: &'a super::NodeSlot,
    tolerations: &[crate::types::Toleration],
) -> Option<&'a crate::types::Taint> {
    slot.spec.taints.iter().find(|t| !tolerates(tolerations, t))
}

/// A taint as Kubernetes prints it: `key=value:Effect`, or `key:Effect` without a value.
fn taint_key(t: &crate::types::Taint) -> String {
    let effect = match t.effect {
        crate::types::TaintEffect::NoSchedule => "NoSchedule",
        crate::types::TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        crate::types::TaintEffect::NoExecute => "NoExecute",
    };
    match t.value.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => format!("{}={v}:{effect}", t.key),
        None => format!("{}:{effect}", t.key),
    }
}

impl TopoState {
    /// The resource that leaves no room for one pod on batch node `i` (fewest pods, ties by name: `per_pod` is
    /// in name order, and its resources head the batch's `free` row).
    fn limiting_resource(&self, b: &NodeBatch, i: usize, needs: &PodNeeds, nres: usize) -> u32 {
        let mut worst: Option<(i64, u32)> = None;
        for (k, &(r, q)) in needs.per_pod.iter().enumerate() {
            if q > 0 {
                let pods = b.free[i * nres + k].max(0) / q;
                if worst.is_none_or(|(w, _)| pods < w) {
                    worst = Some((pods, r));
                }
            }
        }
        match worst {
            Some((0, r)) => r,
            // Room by allocatable, but not in healthy GPUs, islands or MIG instances.
            _ if needs.gpus > 0 => self.gpu_res,
            _ => needs.mig.first().map_or(self.gpu_res, |&(r, _)| r),
        }
    }
}

struct Selector<'a> {
    sb: &'a StaticBatch,
    caps: &'a [u32],
    scores: &'a [f64],
    /// Level index of the slices (the lowest level without a slice request).
    slice_level: usize,
    /// Pods per slice (1 without a slice request).
    slice_size: u64,
    /// With a leader, per node: whether it holds the leader, and the pods it holds with it.
    lead: Option<(&'a [u32], &'a [u32])>,
}

/// Kueue's per-domain counts with a leader (`fillInCountsHelper`).
#[derive(Clone, Copy, Default)]
struct LeadStats {
    pods: u64,
    wl: u64,
    leaders: u64,
    slices: u64,
    slices_wl: u64,
}

impl Selector<'_> {
    /// Members grouped by their domain at `level`, ordered by the domains' level values, with
    /// their capacity in units of that level (slices down to the slice level, pods below).
    fn group(&self, members: &[usize], level: usize) -> Vec<Dom> {
        let nlev = self.sb.levels.len();
        // Domain index by path id: path ids are dense, so a vector beats hashing every member.
        let mut idx: Vec<u32> = vec![u32::MAX; self.sb.order.len()];
        let mut doms: Vec<Dom> = Vec::new();
        // Pods per slice-level domain inside each domain (levels above the slice level).
        let mut inner: Vec<HashMap<u32, u64>> = Vec::new();
        for &i in members {
            let key = self.sb.path[i * nlev + level];
            let slot = &mut idx[key as usize];
            if *slot == u32::MAX {
                *slot = doms.len() as u32;
                doms.push(Dom {
                    members: Vec::new(),
                    cap: 0,
                    units: 0,
                    leaders: 0,
                    wl: 0,
                    units_wl: 0,
                    order: self.sb.order.get(key as usize).copied().unwrap_or(u32::MAX),
                });
                inner.push(HashMap::new());
            }
            let d = *slot as usize;
            doms[d].members.push(i);
            doms[d].cap += u64::from(self.caps[i]);
            if level < self.slice_level && self.slice_size > 1 {
                let sk = self.sb.path[i * nlev + self.slice_level];
                *inner[d].entry(sk).or_default() += u64::from(self.caps[i]);
            }
        }
        for (d, dom) in doms.iter_mut().enumerate() {
            if self.lead.is_some() {
                let st = self.lead_stats(&dom.members, level);
                dom.leaders = st.leaders;
                dom.wl = st.wl;
                (dom.units, dom.units_wl) = if level <= self.slice_level {
                    (st.slices, st.slices_wl)
                } else {
                    (st.pods, st.wl)
                };
                continue;
            }
            dom.units = match level.cmp(&self.slice_level) {
                _ if self.slice_size == 1 => dom.cap,
                std::cmp::Ordering::Less => inner[d].values().map(|c| c / self.slice_size).sum(),
                std::cmp::Ordering::Equal => dom.cap / self.slice_size,
                std::cmp::Ordering::Greater => dom.cap,
            };
        }
        doms.sort_by_key(|d| d.order);
        doms
    }

    /// Counts of the domain of `level` holding `members`, rolled up from its children as
    /// Kueue does: with a leader, the children able to hold it give the smallest loss.
    fn lead_stats(&self, members: &[usize], level: usize) -> LeadStats {
        let Some((lead, wl)) = self.lead else {
            return LeadStats::default();
        };
        let nlev = self.sb.levels.len();
        let children: Vec<LeadStats> = if level + 1 < nlev {
            let mut by: Vec<(u32, Vec<usize>)> = Vec::new();
            for &i in members {
                let key = self.sb.path[i * nlev + level + 1];
                match by.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, v)) => v.push(i),
                    None => by.push((key, vec![i])),
                }
            }
            by.iter()
                .map(|(_, ms)| self.lead_stats(ms, level + 1))
                .collect()
        } else {
            // Nodes: the children of the lowest level.
            members
                .iter()
                .map(|&i| {
                    let pods = u64::from(self.caps[i]);
                    let l = u64::from(lead[i]);
                    let w = if l > 0 { u64::from(wl[i]) } else { pods };
                    LeadStats {
                        pods,
                        wl: w,
                        leaders: l,
                        slices: pods,
                        slices_wl: w,
                    }
                })
                .collect()
        };
        let mut st = LeadStats::default();
        let mut loss: Option<(u64, u64)> = None;
        for c in &children {
            st.pods += c.pods;
            st.slices += c.slices;
            st.leaders = st.leaders.max(c.leaders);
            if c.leaders > 0 {
                let (lp, ls) = (
                    c.pods - c.wl.min(c.pods),
                    c.slices - c.slices_wl.min(c.slices),
                );
                loss = Some(loss.map_or((lp, ls), |(a, b)| (a.min(lp), b.min(ls))));
            }
        }
        if let Some((lp, ls)) = loss {
            st.wl = st.pods - lp;
            st.slices_wl = st.slices - ls;
        }
        if level == self.slice_level {
            st.slices = st.pods / self.slice_size;
            st.slices_wl = st.wl / self.slice_size;
        }
        st
    }

    /// Kueue's order with a leader: domains holding it first, then free units with it
    /// descending (ascending for LeastFreeCapacity), then pods with it ascending, level values.
    fn sorted_lead(&self, mut doms: Vec<Dom>, lfc: bool) -> Vec<Dom> {
        if lfc {
            doms.sort_by_key(|d| (std::cmp::Reverse(d.leaders), d.units_wl, d.wl));
        } else {
            doms.sort_by_key(|d| {
                (
                    std::cmp::Reverse(d.leaders),
                    std::cmp::Reverse(d.units_wl),
                    d.wl,
                )
            });
        }
        doms
    }

    /// Kueue's BestFit with leaders: among domains holding `leaders`, the first with the fewest
    /// units that still holds `need` (with the leader when one is wanted); else the first.
    fn best_fit_lead(doms: &[Dom], need: u64, leaders: u64) -> usize {
        let mut best: Option<usize> = None;
        for (i, d) in doms.iter().enumerate() {
            if d.leaders < leaders {
                continue;
            }
            let n = if leaders > 0 { d.units_wl } else { d.units };
            let cur = best.map(|b| {
                if leaders > 0 {
                    doms[b].units_wl
                } else {
                    doms[b].units
                }
            });
            if n >= need && cur.is_none_or(|c| n < c) {
                best = Some(i);
            }
        }
        best.unwrap_or(0)
    }

    /// Kueue's `prioritizeLeaderDomain`: moves to the front the first domain holding the leader
    /// whose loss of units still leaves room for every unit.
    fn prioritize_leader(doms: &mut [Dom], need: u64, leaders: u64) {
        if leaders == 0 || doms.len() < 2 {
            return;
        }
        let avail: u64 = doms.iter().map(|d| d.units).sum();
        for i in 0..doms.len() {
            let d = &doms[i];
            if d.leaders < leaders {
                continue;
            }
            let loss = d.units.saturating_sub(d.units_wl);
            if avail.saturating_sub(loss) < need {
                continue;
            }
            doms[..=i].rotate_right(1);
            return;
        }
    }

    /// `fit_level` with a leader (Kueue's `findLevelWithFitDomains` with a leader count of 1).
    fn fit_level_lead(
        &self,
        all: &[usize],
        level: usize,
        need: u64,
        required: bool,
        lfc: bool,
    ) -> Result<(usize, Vec<Dom>), u64> {
        let mut doms = self.sorted_lead(self.group(all, level), lfc);
        if doms.is_empty() {
            return Err(0);
        }
        let mut top = 0;
        if !lfc && doms[0].units_wl >= need && doms[0].leaders >= 1 {
            top = Self::best_fit_lead(&doms, need, 1);
        }
        if lfc {
            if let Some(i) = doms
                .iter()
                .position(|d| d.leaders >= 1 && d.units_wl >= need)
            {
                return Ok((level, vec![doms.swap_remove(i)]));
            }
            if required {
                return Err(doms.last().map_or(0, |d| d.cap));
            }
        }
        if doms[top].units_wl < need || doms[top].leaders < 1 {
            if required {
                return Err(doms[top].units);
            }
            if level > 0 && !lfc {
                return self.fit_level_lead(all, level - 1, need, required, lfc);
            }
            Self::prioritize_leader(&mut doms, need, 1);
            // One leader: the first domain holds it (or the best fit when it fits everything).
            if doms[0].leaders == 0 {
                return Err(0);
            }
            let pick = if !lfc && doms[0].units_wl >= need {
                Self::best_fit_lead(&doms, need, 1)
            } else {
                0
            };
            let first = doms.remove(pick);
            let left = need.saturating_sub(first.units_wl);
            let mut chosen = vec![first];
            let left = take_in_order(self.sorted(doms, lfc), left, lfc, &mut chosen);
            if left > 0 {
                return Err(need - left);
            }
            return Ok((level, chosen));
        }
        Ok((level, vec![doms.swap_remove(top)]))
    }

    /// `take_minimum` with leaders (Kueue's `updateCountsToMinimumGeneric` and
    /// `consumeWithLeadersGeneric`): returns (domain, pods, leaders) of each domain used.
    fn take_minimum_lead(
        &self,
        mut doms: Vec<Dom>,
        need: u64,
        leaders: u64,
        lfc: bool,
        level: usize,
    ) -> Vec<(Dom, u64, u64)> {
        let unit = self.unit_at(level);
        let mut left = need;
        let mut left_leaders = leaders;
        Self::prioritize_leader(&mut doms, need, leaders);
        let mut out = Vec::new();
        while (left > 0 || left_leaders > 0) && !doms.is_empty() {
            if left_leaders > 0 {
                let mut i = 0;
                if !lfc && doms[0].units_wl >= left && doms[0].leaders >= left_leaders {
                    i = Self::best_fit_lead(&doms, left, left_leaders);
                }
                let d = doms.remove(i);
                if d.units_wl >= left && d.leaders >= left_leaders {
                    out.push((d, left * unit, left_leaders));
                    return out;
                }
                let n = d.units_wl.min(left);
                let l = d.leaders.min(left_leaders);
                left -= n;
                left_leaders -= l;
                if n > 0 || l > 0 {
                    out.push((d, n * unit, l));
                }
                continue;
            }
            let i = if !lfc && doms[0].units >= left {
                best_fit(&doms, left).unwrap_or(0)
            } else {
                0
            };
            let d = doms.remove(i);
            let n = d.units.min(left);
            left -= n;
            if n > 0 {
                out.push((d, n * unit, 0));
            }
        }
        out
    }

    /// The node of a domain to hold the leader: holds it and loses the fewest worker pods
    /// (ties: best policy score, then batch order).
    fn pick_leader(&self, members: &[usize]) -> Option<usize> {
        let (lead, wl) = self.lead?;
        members
            .iter()
            .copied()
            .filter(|&i| lead[i] > 0)
            .min_by(|&a, &b| {
                let la = self.caps[a].saturating_sub(wl[a]);
                let lb = self.caps[b].saturating_sub(wl[b]);
                la.cmp(&lb)
                    .then(self.scores[b].total_cmp(&self.scores[a]))
                    .then(a.cmp(&b))
            })
    }

    /// Pods in one unit at `level`: a slice down to the slice level, else one pod.
    fn unit_at(&self, level: usize) -> u64 {
        if level <= self.slice_level {
            self.slice_size
        } else {
            1
        }
    }

    /// Kueue's domain order: free units descending (ascending for LeastFreeCapacity), then free
    /// pods ascending, then level values.
    fn sorted(&self, mut doms: Vec<Dom>, lfc: bool) -> Vec<Dom> {
        // `group` already orders by level values; a stable sort keeps that for ties.
        if lfc {
            doms.sort_by_key(|d| (d.units, d.cap));
        } else {
            doms.sort_by_key(|d| (std::cmp::Reverse(d.units), d.cap));
        }
        doms
    }

    /// Kueue's `findLevelWithFitDomains`: the level and domains to place `need` units in, or
    /// the number that fit for the failure message.
    fn fit_level(
        &self,
        all: &[usize],
        level: usize,
        need: u64,
        required: bool,
        lfc: bool,
    ) -> Result<(usize, Vec<Dom>), u64> {
        let mut doms = self.sorted(self.group(all, level), lfc);
        if doms.is_empty() {
            return Err(0);
        }
        if lfc {
            if let Some(i) = doms.iter().position(|d| d.units >= need) {
                let i = self.in_fullest_parent(all, &doms, i, level);
                return Ok((level, vec![doms.swap_remove(i)]));
            }
            if required {
                // Kueue reports the largest domain's pods here.
                return Err(doms.last().map_or(0, |d| d.cap));
            }
        } else if doms[0].units >= need {
            let i = best_fit(&doms, need).unwrap_or(0);
            return Ok((level, vec![doms.swap_remove(i)]));
        }
        if required {
            return Err(doms[0].units);
        }
        if level > 0 && !lfc {
            return self.fit_level(all, level - 1, need, required, lfc);
        }
        // Top level (or unconstrained): whole domains in order, the best fit for the last.
        let mut out = Vec::new();
        let left = take_in_order(doms, need, lfc, &mut out);
        if left > 0 {
            return Err(need - left);
        }
        Ok((level, out))
    }

    /// Among the domains tied with `doms[first]` in Kueue's least-free-capacity order, the one
    /// whose parent domain has the fewest free pods (then grandparent, and so on; remaining ties
    /// keep Kueue's order). Kueue takes the first by level values, which fills every rack a little;
    /// this keeps whole racks and blocks free for gangs, as Slurm's topology/tree best fit does.
    fn in_fullest_parent(&self, all: &[usize], doms: &[Dom], first: usize, level: usize) -> usize {
        let tied = doms[first..]
            .iter()
            .take_while(|d| (d.units, d.cap) == (doms[first].units, doms[first].cap))
            .count();
        if level == 0 || tied < 2 {
            return first;
        }
        let nlev = self.sb.levels.len();
        // Free pods per domain at each level above, by path id (dense).
        let mut free: Vec<Vec<u64>> = vec![vec![0; self.sb.order.len()]; level];
        for &i in all {
            for (l, col) in free.iter_mut().enumerate() {
                col[self.sb.path[i * nlev + l] as usize] += u64::from(self.caps[i]);
            }
        }
        // Nearest ancestor first.
        let key = |d: &Dom| -> Vec<u64> {
            let node = d.members[0];
            (0..level)
                .rev()
                .map(|l| free[l][self.sb.path[node * nlev + l] as usize])
                .collect()
        };
        (first..first + tied)
            .min_by_key(|&j| key(&doms[j]))
            .unwrap_or(first)
    }

    /// Kueue's `updateCountsToMinimum`: units per domain of `level` taking domains in order, the
    /// best fit for the last (BestFit only), until `need` units are placed; returns pods.
    fn take_minimum(&self, doms: Vec<Dom>, need: u64, lfc: bool, level: usize) -> Vec<(Dom, u64)> {
        let unit = self.unit_at(level);
        // Whole domains in order until one holds the rest (BestFit: the best fit from there).
        let mut whole = 0;
        let mut left = need;
        let mut last = None;
        while left > 0 && whole < doms.len() {
            if doms[whole].units >= left {
                let j = if lfc {
                    whole
                } else {
                    whole + best_fit(&doms[whole..], left).unwrap_or(0)
                };
                last = Some((j, left));
                break;
            }
            left -= doms[whole].units;
            whole += 1;
        }
        let mut slots: Vec<Option<Dom>> = doms.into_iter().map(Some).collect();
        let mut out = Vec::new();
        for slot in slots.iter_mut().take(whole) {
            if let Some(d) = slot.take().filter(|d| d.units > 0) {
                let n = d.units * unit;
                out.push((d, n));
            }
        }
        if let Some((j, n)) = last
            && let Some(d) = slots.get_mut(j).and_then(Option::take)
        {
            out.push((d, n * unit));
        }
        out
    }

    /// Node level: the best-scored node holding every pod, else nodes in score order.
    fn pick_nodes(&self, members: &[usize], need: u32, out: &mut Vec<(usize, u32)>) {
        self.pick_nodes_with(members, need, None, out);
    }

    /// `pick_nodes` with the leader on node `leader` (which then holds fewer worker pods).
    fn pick_nodes_with(
        &self,
        members: &[usize],
        need: u32,
        leader: Option<usize>,
        out: &mut Vec<(usize, u32)>,
    ) {
        let cap = |i: usize| match (leader, self.lead) {
            (Some(l), Some((_, wl))) if l == i => wl[i],
            _ => self.caps[i],
        };
        if need == 0 {
            return;
        }
        let single = members
            .iter()
            .copied()
            .filter(|&i| cap(i) >= need)
            .max_by(|&a, &b| {
                self.scores[a]
                    .total_cmp(&self.scores[b])
                    .then(cap(b).cmp(&cap(a)))
                    .then(b.cmp(&a))
            });
        if let Some(i) = single {
            out.push((i, need));
            return;
        }
        let mut order: Vec<usize> = members.to_vec();
        order.sort_by(|&a, &b| {
            self.scores[b]
                .total_cmp(&self.scores[a])
                .then(cap(b).cmp(&cap(a)))
                .then(a.cmp(&b))
        });
        let mut left = need;
        for i in order {
            if left == 0 {
                break;
            }
            let take = cap(i).min(left);
            if take > 0 {
                out.push((i, take));
                left -= take;
            }
        }
    }
}

/// GPUs for `pods` pods on one node: whole GPUs by island, MIG instances packed on few GPUs.
fn choose_gpus(slot: &super::NodeSlot, needs: &PodNeeds, pods: u32) -> (Vec<u32>, Vec<u32>) {
    let mut gpus = Vec::new();
    let mut mig = Vec::new();
    if slot.gpus.is_empty() {
        return (gpus, mig);
    }
    if needs.gpus > 0 {
        let mut free: Vec<Vec<u32>> = slot
            .islands
            .iter()
            .map(|m| {
                m.iter()
                    .filter_map(|&p| slot.gpus.get(p))
                    .filter(|g| g.healthy && g.whole && !g.held)
                    .map(|g| g.index)
                    .collect()
            })
            .collect();
        let k = needs.gpus as usize;
        for _ in 0..pods {
            let tight = (0..free.len())
                .filter(|&i| free[i].len() >= k)
                .min_by_key(|&i| (free[i].len(), i));
            if let Some(i) = tight {
                gpus.extend(free[i].drain(..k));
                continue;
            }
            // Not required to share an island: largest islands first, fewest islands touched.
            let mut left = k;
            while left > 0 {
                let Some(i) = (0..free.len())
                    .filter(|&i| !free[i].is_empty())
                    .max_by_key(|&i| (free[i].len(), std::cmp::Reverse(i)))
                else {
                    break;
                };
                let take = free[i].len().min(left);
                gpus.extend(free[i].drain(..take));
                left -= take;
            }
        }
    }
    for &(r, per) in &needs.mig {
        let mut free: Vec<(u32, u32)> = slot
            .gpus
            .iter()
            .filter(|g| g.healthy)
            .map(|g| {
                (
                    g.index,
                    g.mig.iter().filter(|m| m.0 == r && !m.1).count() as u32,
                )
            })
            .filter(|&(_, n)| n > 0)
            .collect();
        for _ in 0..pods {
            let mut left = per;
            while left > 0 {
                let pick = (0..free.len())
                    .filter(|&i| free[i].1 >= left)
                    .min_by_key(|&i| (free[i].1, i))
                    .or_else(|| {
                        (0..free.len())
                            .filter(|&i| free[i].1 > 0)
                            .max_by_key(|&i| (free[i].1, std::cmp::Reverse(i)))
                    });
                let Some(i) = pick else { break };
                let take = free[i].1.min(left);
                for _ in 0..take {
                    mig.push(free[i].0);
                }
                free[i].1 -= take;
                left -= take;
            }
        }
    }
    (gpus, mig)
}
