//! Choosing domains, nodes and GPUs for one pod set.
//!
//! Algorithm (one call of the placement policy per pod set):
//! 1. The flavor's cached static batch gets this moment's dynamic columns; the policy scores every
//!    node and may cap its pods. A node's capacity is the engine's own fit (resources, healthy
//!    GPUs, NVLink islands when required, MIG instances) lowered by the policy's cap.
//! 2. Domains: *required* at level L takes the smallest domain of L that holds every pod (Kueue's
//!    BestFit) or fails; *preferred* tries L, then each level above, and at the top spreads over as
//!    few domains as possible (largest first, the smallest that fits for the rest); no request
//!    (or *unconstrained*) is preferred at the lowest level.
//! 3. Inside a chosen domain the same rule descends level by level; at the node level the node
//!    with the best score among those that hold every remaining pod wins, else nodes are filled
//!    in score order.
//! 4. On each node, each pod's GPUs come from the NVLink island that fits them most tightly
//!    (required: only from one island), and MIG instances from the GPUs with the fewest free
//!    instances that still fit, so partitions stay packed on few GPUs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sluice_sdk::policy::builtin::TopologyPack;
use sluice_sdk::policy::{NodeScores, PlacementPolicy, PodSetRequest, TopologyMode};
use sluice_sdk::topology::{GPU_RESOURCE, MIG_RESOURCE_PREFIX};

use super::TopoState;
use super::capacity::{PodNeeds, StaticBatch, fill_dynamic, node_fit, taints_tolerated};
use crate::engine::types::{
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
}

/// Candidate domain during selection.
struct Dom {
    members: Vec<usize>,
    cap: u64,
    score: f64,
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

    /// Places `count` pods of a pod set in a TAS flavor, or says why it cannot.
    pub(crate) fn place(&mut self, inp: &PlaceInput<'_>) -> Result<PodSetPlacement, String> {
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
    ) -> Result<PodSetPlacement, String> {
        let ps = inp.pod_set;
        let topo = ps.topology.clone().unwrap_or_default();
        let mut needs = PodNeeds {
            nvlink: topo.nvlink && !self.blind,
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
        let resources: Vec<u32> = needs.per_pod.iter().map(|&(r, _)| r).collect();
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
        let caps: Vec<u32> = sb
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let slot = &self.nodes[id as usize];
                let selected = ps
                    .node_selector
                    .iter()
                    .all(|(k, v)| slot.spec.labels.get(k) == Some(v));
                if !selected || !taints_tolerated(slot, &tolerations) {
                    return 0;
                }
                node_fit(slot, &needs, self.gpu_res, self.blind).min(scores.max_pods[i])
            })
            .collect();
        let nlev = levels.len();
        let sel = Selector {
            sb,
            caps: &caps,
            scores: &scores.score,
        };
        let all: Vec<usize> = (0..caps.len()).filter(|&i| caps[i] > 0).collect();
        let total: u64 = all.iter().map(|&i| u64::from(caps[i])).sum();
        let need = inp.count;
        let fail = |fit: u64| {
            if fit == 0 {
                format!("topology {topo_name:?} doesn't allow to fit any of {need} pod(s)")
            } else {
                format!("topology {topo_name:?} allows to fit only {fit} out of {need} pod(s)")
            }
        };
        let level_of = |l: &Option<String>| -> Result<usize, String> {
            match l {
                Some(l) => levels
                    .iter()
                    .position(|x| x == l)
                    .ok_or_else(|| format!("topology {topo_name:?} has no level {l:?}")),
                None => Ok(nlev.saturating_sub(1)),
            }
        };
        let mut chosen: Vec<(usize, u32)> = Vec::new();
        if self.blind || nlev == 0 {
            if total < u64::from(need) {
                return Err(fail(total));
            }
            sel.pick_nodes(&all, need, &mut chosen);
        } else {
            match topo.mode {
                TopologyMode::Required => {
                    let l = level_of(&topo.level)?;
                    let doms = sel.group(&all, l);
                    match best_fit(&doms, u64::from(need)) {
                        Some(d) => sel.fit_in(&doms[d].members, l + 1, need, &mut chosen),
                        None => return Err(fail(doms.iter().map(|d| d.cap).max().unwrap_or(0))),
                    }
                }
                TopologyMode::Preferred | TopologyMode::Unconstrained | TopologyMode::None => {
                    let start = if topo.mode == TopologyMode::Preferred {
                        level_of(&topo.level)?
                    } else {
                        nlev - 1
                    };
                    if total < u64::from(need) {
                        return Err(fail(total));
                    }
                    let mut done = false;
                    for l in (0..=start).rev() {
                        let doms = sel.group(&all, l);
                        if let Some(d) = best_fit(&doms, u64::from(need)) {
                            sel.fit_in(&doms[d].members, l + 1, need, &mut chosen);
                            done = true;
                            break;
                        }
                    }
                    if !done {
                        sel.fit_in(&all, 0, need, &mut chosen);
                    }
                }
            }
        }
        Ok(self.realise(inp, sb, &needs, levels, chosen))
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

/// Index of the smallest domain holding `need` pods (ties: higher score, then first).
fn best_fit(doms: &[Dom], need: u64) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, d) in doms.iter().enumerate() {
        if d.cap < need {
            continue;
        }
        best = match best {
            Some(b)
                if doms[b].cap < d.cap || (doms[b].cap == d.cap && doms[b].score >= d.score) =>
            {
                Some(b)
            }
            _ => Some(i),
        };
    }
    best
}

struct Selector<'a> {
    sb: &'a StaticBatch,
    caps: &'a [u32],
    scores: &'a [f64],
}

impl Selector<'_> {
    /// Members grouped by their domain at `level`, in first-seen order.
    fn group(&self, members: &[usize], level: usize) -> Vec<Dom> {
        let nlev = self.sb.levels.len();
        let mut idx: HashMap<u32, usize> = HashMap::new();
        let mut doms: Vec<Dom> = Vec::new();
        for &i in members {
            let key = self.sb.path[i * nlev + level];
            let d = *idx.entry(key).or_insert_with(|| {
                doms.push(Dom {
                    members: Vec::new(),
                    cap: 0,
                    score: 0.0,
                });
                doms.len() - 1
            });
            doms[d].members.push(i);
            doms[d].cap += u64::from(self.caps[i]);
            doms[d].score += self.scores[i];
        }
        doms
    }

    /// Places `need` pods among `members` (whose capacity suffices), descending from `level`.
    fn fit_in(&self, members: &[usize], level: usize, need: u32, out: &mut Vec<(usize, u32)>) {
        if level >= self.sb.levels.len() {
            self.pick_nodes(members, need, out);
            return;
        }
        let mut doms = self.group(members, level);
        if let Some(d) = best_fit(&doms, u64::from(need)) {
            self.fit_in(&doms[d].members, level + 1, need, out);
            return;
        }
        doms.sort_by(|a, b| b.cap.cmp(&a.cap).then(b.score.total_cmp(&a.score)));
        let mut left = need;
        let mut rest: &mut [Dom] = &mut doms;
        while left > 0 && !rest.is_empty() {
            if let Some(d) = best_fit(rest, u64::from(left)) {
                self.fit_in(&rest[d].members, level + 1, left, out);
                return;
            }
            let (first, tail) = rest.split_at_mut(1);
            let take = u32::try_from(first[0].cap).unwrap_or(u32::MAX).min(left);
            self.fit_in(&first[0].members, level + 1, take, out);
            left -= take;
            rest = tail;
        }
    }

    /// Node level: the best-scored node holding every pod, else nodes in score order.
    fn pick_nodes(&self, members: &[usize], need: u32, out: &mut Vec<(usize, u32)>) {
        let single = members
            .iter()
            .copied()
            .filter(|&i| self.caps[i] >= need)
            .max_by(|&a, &b| {
                self.scores[a]
                    .total_cmp(&self.scores[b])
                    .then(self.caps[b].cmp(&self.caps[a]))
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
                .then(self.caps[b].cmp(&self.caps[a]))
                .then(a.cmp(&b))
        });
        let mut left = need;
        for i in order {
            if left == 0 {
                break;
            }
            let take = self.caps[i].min(left);
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
