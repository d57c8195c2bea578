//! Per-flavor node batches (static columns cached per inventory generation) and per-node fit.

use std::collections::HashMap;

use sluice_sdk::policy::{NodeBatch, next_dynamic_epoch};

use super::{NodeSlot, TopoState};
use crate::types::{Flavor, Taint, TaintEffect, Toleration, TolerationOperator};

/// The static part of a flavor's node batch and the domain path of every node.
#[derive(Clone, Debug, Default)]
pub(crate) struct StaticBatch {
    /// Inventory generation it was built for.
    pub generation: u64,
    /// Node label of each topology level, outermost first.
    pub levels: Vec<String>,
    /// Node ids, in batch order.
    pub nodes: Vec<u32>,
    /// Node-major, one entry per level: an id unique to the domain's full path (block/rack/...).
    pub path: Vec<u32>,
    /// Static columns; dynamic ones are filled per request.
    pub batch: NodeBatch,
    /// Position of each domain (by path id) among the domains of its level ordered by their
    /// level values in byte order, as Kueue breaks ties between domains.
    pub order: Vec<u32>,
    /// Batch position of each node id (`u32::MAX`: not in the batch).
    pub pos: Vec<u32>,
    /// Whether each batch node has a taint (the others pass the toleration check without a look).
    pub tainted: Vec<bool>,
    /// What the dynamic columns were last filled for, so the next fill updates only touched nodes.
    pub synced: Option<Synced>,
}

/// The state the dynamic columns of a batch reflect.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Synced {
    /// The inventory's touched-node sequence number at the fill.
    pub seq: u64,
    /// Resource ids of the `free` column, per node.
    pub resources: Vec<u32>,
    /// Whether islands were collapsed to one per node (topology-blind).
    pub blind: bool,
}

impl StaticBatch {
    /// Builds the batch of the nodes of `flavor` that carry every level label of its topology.
    pub(crate) fn build(state: &TopoState, flavor: &Flavor, levels: &[String]) -> Self {
        let mut strings: Vec<String> = vec![String::new()];
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut intern = |s: &str| -> u32 {
            if s.is_empty() {
                return 0;
            }
            if let Some(&i) = ids.get(s) {
                return i;
            }
            let i = strings.len() as u32;
            strings.push(s.to_string());
            ids.insert(s.to_string(), i);
            i
        };
        let mut b = NodeBatch {
            inventory_generation: state.generation,
            levels: levels.iter().map(|l| intern(l)).collect(),
            ..NodeBatch::default()
        };
        let mut paths: HashMap<(u32, u32), u32> = HashMap::new();
        let mut out = StaticBatch {
            generation: state.generation,
            levels: levels.to_vec(),
            ..StaticBatch::default()
        };
        b.label_offsets.push(0);
        for (id, slot) in state.nodes.iter().enumerate() {
            let labels = &slot.spec.labels;
            if !flavor
                .node_labels
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
            {
                continue;
            }
            if !levels.iter().all(|l| labels.contains_key(l)) {
                continue;
            }
            out.nodes.push(id as u32);
            out.tainted.push(!slot.spec.taints.is_empty());
            b.name.push(intern(&slot.spec.name));
            let mut parent = u32::MAX;
            for l in levels {
                let v = intern(labels.get(l).map_or("", String::as_str));
                b.domain.push(v);
                let next = paths.len() as u32;
                let p = *paths.entry((parent, v)).or_insert(next);
                out.path.push(p);
                parent = p;
            }
            let report = slot.report.as_ref();
            let model = report
                .and_then(|r| r.gpus.first())
                .map_or("", |g| g.model.as_str());
            b.gpu_model.push(intern(model));
            b.gpu_memory_mib.push(
                report
                    .and_then(|r| r.gpus.first())
                    .map_or(0, |g| g.memory_mib),
            );
            b.fabric_clique.push(intern(
                report
                    .and_then(|r| r.fabric_clique.as_deref())
                    .unwrap_or(""),
            ));
            for (k, v) in labels {
                b.label_keys.push(intern(k));
                b.label_values.push(intern(v));
            }
            b.label_offsets.push(b.label_keys.len() as u32);
        }
        // Level values of each path id (from its first node), then its rank in that order.
        let nlev = levels.len();
        let mut seen: Vec<Option<(usize, usize)>> = vec![None; paths.len()];
        for (n, chunk) in out.path.chunks(nlev.max(1)).enumerate() {
            for (l, &p) in chunk.iter().enumerate() {
                seen[p as usize].get_or_insert((n, l));
            }
        }
        let text = |n: usize, l: usize| -> Vec<&str> {
            (0..=l)
                .map(|k| strings[b.domain[n * nlev + k] as usize].as_str())
                .collect()
        };
        let mut ids: Vec<usize> = (0..paths.len()).collect();
        ids.sort_by_cached_key(|&p| seen[p].map(|(n, l)| text(n, l)).unwrap_or_default());
        out.order = vec![0; paths.len()];
        for (r, &p) in ids.iter().enumerate() {
            out.order[p] = r as u32;
        }
        out.pos = vec![u32::MAX; state.nodes.len()];
        for (i, &id) in out.nodes.iter().enumerate() {
            out.pos[id as usize] = i as u32;
        }
        b.strings = strings;
        out.batch = b;
        out
    }
}

/// One pod's needs, in inventory resource ids.
#[derive(Clone, Debug, Default)]
pub(crate) struct PodNeeds {
    /// Every requested resource (whole GPUs and MIG profiles included), name order.
    pub per_pod: Vec<(u32, i64)>,
    /// Whole GPUs per pod.
    pub gpus: u32,
    /// MIG instances per pod, by profile resource id.
    pub mig: Vec<(u32, u32)>,
    /// One NVLink island per pod on each node.
    pub nvlink: bool,
}

/// Whether the tolerations tolerate the taint (PreferNoSchedule always is).
pub(crate) fn tolerates(ts: &[Toleration], taint: &Taint) -> bool {
    taint.effect == TaintEffect::PreferNoSchedule
        || ts.iter().any(|t| {
            t.effect.is_none_or(|e| e == taint.effect)
                && match &t.key {
                    None => t.operator == TolerationOperator::Exists,
                    Some(k) if *k != taint.key => false,
                    Some(_) => {
                        t.operator == TolerationOperator::Exists
                            || t.value.as_deref().unwrap_or("")
                                == taint.value.as_deref().unwrap_or("")
                    }
                }
        })
}

/// Healthy whole GPUs of a node and how many are free; from the agent's report when there is
/// one (capped by what allocatable leaves), else from allocatable `nvidia.com/gpu`.
pub(crate) fn gpu_counts(slot: &NodeSlot, gpu_res: u32) -> (u32, u32) {
    let alloc_free = u32::try_from(slot.free(gpu_res).max(0)).unwrap_or(u32::MAX);
    if slot.gpus.is_empty() {
        let total = slot
            .alloc
            .get(gpu_res as usize)
            .map_or(0, |&a| u32::try_from(a.max(0)).unwrap_or(u32::MAX));
        return (total, alloc_free);
    }
    let healthy = slot.gpus.iter().filter(|g| g.healthy && g.whole);
    let total = healthy.clone().count() as u32;
    let free = healthy.filter(|g| !g.held).count() as u32;
    (total, free.min(alloc_free))
}

/// Healthy whole GPUs and the free ones, of each island (one island of everything without a report), in
/// island order; called per node per placement, so it allocates nothing.
pub(crate) fn for_each_island(slot: &NodeSlot, gpu_res: u32, mut f: impl FnMut(u32, u32)) {
    if slot.gpus.is_empty() {
        let (t, free) = gpu_counts(slot, gpu_res);
        if t > 0 {
            f(t, free);
        }
        return;
    }
    for members in &slot.islands {
        let (mut total, mut free) = (0u32, 0u32);
        for g in members.iter().filter_map(|&p| slot.gpus.get(p)) {
            if g.healthy && g.whole {
                total += 1;
                free += u32::from(!g.held);
            }
        }
        f(total, free);
    }
}

/// Pods the node can take: the engine's own, authoritative count (policies can only lower it).
pub(crate) fn node_fit(slot: &NodeSlot, needs: &PodNeeds, gpu_res: u32, blind: bool) -> u32 {
    if !slot.schedulable() {
        return 0;
    }
    let mut fit = u32::MAX;
    for &(r, q) in &needs.per_pod {
        if q > 0 {
            fit = fit.min(u32::try_from(slot.free(r).max(0) / q).unwrap_or(u32::MAX));
        }
    }
    let by_gpu = if needs.gpus == 0 {
        u32::MAX
    } else if needs.nvlink && !blind {
        let mut pods = 0u32;
        for_each_island(slot, gpu_res, |_, f| {
            pods = pods.saturating_add(f.checked_div(needs.gpus).unwrap_or(u32::MAX));
        });
        pods
    } else {
        gpu_counts(slot, gpu_res)
            .1
            .checked_div(needs.gpus)
            .unwrap_or(u32::MAX)
    };
    fit = fit.min(by_gpu);
    if !slot.gpus.is_empty() {
        for &(r, per) in &needs.mig {
            let known = slot.gpus.iter().any(|g| g.mig.iter().any(|m| m.0 == r));
            if !known || per == 0 {
                continue;
            }
            let free = slot
                .gpus
                .iter()
                .filter(|g| g.healthy)
                .flat_map(|g| &g.mig)
                .filter(|m| m.0 == r && !m.1)
                .count() as u32;
            fit = fit.min(free / per);
        }
    }
    fit
}

/// Pods batch node `i` can take, from its dynamic columns: [`node_fit`] for requests without MIG instances
/// (the first `needs.per_pod.len()` entries of a `free` row are those resources, `nres` per row).
pub(crate) fn batch_fit(b: &NodeBatch, i: usize, needs: &PodNeeds, nres: usize) -> u32 {
    if !b.ready[i] {
        return 0;
    }
    let mut fit = u32::MAX;
    for (k, &(_, q)) in needs.per_pod.iter().enumerate() {
        if q > 0 {
            fit = fit.min(u32::try_from(b.free[i * nres + k].max(0) / q).unwrap_or(u32::MAX));
        }
    }
    let by_gpu = if needs.gpus == 0 {
        u32::MAX
    } else if needs.nvlink {
        let (lo, hi) = (
            b.island_offsets[i] as usize,
            b.island_offsets[i + 1] as usize,
        );
        b.island_free[lo..hi].iter().fold(0u32, |pods, &f| {
            pods.saturating_add(f.checked_div(needs.gpus).unwrap_or(u32::MAX))
        })
    } else {
        b.gpu_free[i].checked_div(needs.gpus).unwrap_or(u32::MAX)
    };
    fit.min(by_gpu)
}

/// Fills the dynamic columns of `b` (the static batch's own) for one request: only the rows of nodes touched
/// since the last fill when it was for the same resources, else every row.
pub(crate) fn fill_dynamic(
    state: &TopoState,
    sb: &mut StaticBatch,
    b: &mut NodeBatch,
    resources: &[u32],
) {
    let seq = state.touched_seq();
    let caught_up = match &sb.synced {
        Some(s)
            if s.resources == resources
                && s.blind == state.blind
                && s.seq >= state.touched_base =>
        {
            let from = (s.seq - state.touched_base) as usize;
            state.touched[from..]
                .iter()
                .all(|&id| match sb.pos.get(id as usize) {
                    Some(&i) if i != u32::MAX => {
                        b.changed_rows.push(i);
                        update_row(state, b, i as usize, id, resources)
                    }
                    _ => true,
                })
        }
        _ => false,
    };
    // A policy module is sent the rows changed in this epoch; a full fill (or a log longer than the batch)
    // starts a new one, and the module is sent everything once.
    if !caught_up || b.changed_rows.len() > b.len() {
        if !caught_up {
            fill_all(state, sb, b, resources);
        }
        b.dynamic_epoch = next_dynamic_epoch();
        b.changed_rows.clear();
    }
    match &mut sb.synced {
        // The usual case: the same request shape again, so only the log position moves.
        Some(s) if s.resources == resources => {
            s.seq = seq;
            s.blind = state.blind;
        }
        _ => {
            sb.synced = Some(Synced {
                seq,
                resources: resources.to_vec(),
                blind: state.blind,
            })
        }
    }
}

/// Rewrites node `id`'s dynamic row `i` in place; false when its island count changed (a full fill is due).
fn update_row(state: &TopoState, b: &mut NodeBatch, i: usize, id: u32, resources: &[u32]) -> bool {
    let slot = &state.nodes[id as usize];
    b.ready[i] = slot.schedulable();
    let (t, f) = gpu_counts(slot, state.gpu_res);
    b.gpu_total[i] = t;
    b.gpu_free[i] = f;
    let (lo, hi) = (
        b.island_offsets[i] as usize,
        b.island_offsets[i + 1] as usize,
    );
    let mut k = lo;
    let mut fits = true;
    let mut put = |size: u32, free: u32| {
        if k < hi {
            b.island_size[k] = size;
            b.island_free[k] = free;
        } else {
            fits = false;
        }
        k += 1;
    };
    if state.blind {
        if t > 0 {
            put(t, f);
        }
    } else {
        for_each_island(slot, state.gpu_res, &mut put);
    }
    if !fits || k != hi {
        return false;
    }
    let row = &mut b.free[i * resources.len()..(i + 1) * resources.len()];
    for (v, &r) in row.iter_mut().zip(resources) {
        *v = slot.free(r);
    }
    true
}

/// Fills every dynamic row.
fn fill_all(state: &TopoState, sb: &StaticBatch, b: &mut NodeBatch, resources: &[u32]) {
    // The columns keep their buffers from the last request.
    let n = sb.nodes.len();
    for col in [
        &mut b.gpu_total,
        &mut b.gpu_free,
        &mut b.island_size,
        &mut b.island_free,
    ] {
        col.clear();
    }
    b.ready.clear();
    b.free.clear();
    b.island_offsets.clear();
    b.ready.reserve(n);
    b.gpu_total.reserve(n);
    b.gpu_free.reserve(n);
    b.island_offsets.reserve(n + 1);
    b.free.reserve(n * resources.len());
    b.island_offsets.push(0);
    for &id in &sb.nodes {
        let slot = &state.nodes[id as usize];
        b.ready.push(slot.schedulable());
        let (t, f) = gpu_counts(slot, state.gpu_res);
        b.gpu_total.push(t);
        b.gpu_free.push(f);
        if state.blind {
            if t > 0 {
                b.island_size.push(t);
                b.island_free.push(f);
            }
        } else {
            for_each_island(slot, state.gpu_res, |size, free| {
                b.island_size.push(size);
                b.island_free.push(free);
            });
        }
        b.island_offsets.push(b.island_size.len() as u32);
        for &r in resources {
            b.free.push(slot.free(r));
        }
    }
}
