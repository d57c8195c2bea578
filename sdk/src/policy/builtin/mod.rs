//! Built-in placement policies, written against the contract types only (so they also build for
//! WebAssembly guests): [`TopologyPack`] (the engine's default) and [`Spread`].

mod pack;
mod spread;

pub use pack::TopologyPack;
pub use spread::Spread;

use super::placement::{NodeBatch, PodSetRequest};

/// Pods of `request` that node `i` of `nodes` can take, by its free resources, GPUs and (with
/// `nvlink_required`) NVLink islands; 0 for a node that is not ready.
pub fn pods_fitting(request: &PodSetRequest, nodes: &NodeBatch, i: usize) -> u32 {
    if !nodes.ready.get(i).copied().unwrap_or(false) {
        return 0;
    }
    let mut fit = u32::MAX;
    let k = request.resources.len();
    // Entries of `per_pod` past `resources` have no column and are ignored.
    for (r, &need) in request.per_pod.iter().take(k).enumerate() {
        if need <= 0 {
            continue;
        }
        let free = nodes.free.get(i * k + r).copied().unwrap_or(0).max(0);
        fit = fit.min(u32::try_from(free / need).unwrap_or(u32::MAX));
    }
    let gpp = request.gpus_per_pod;
    let by_gpu = if request.nvlink_required {
        island_range(nodes, i)
            .map(|j| {
                let free = nodes.island_free.get(j).copied().unwrap_or(0);
                free.checked_div(gpp).unwrap_or(u32::MAX)
            })
            .fold(0u32, u32::saturating_add)
    } else {
        let free = nodes.gpu_free.get(i).copied().unwrap_or(0);
        free.checked_div(gpp).unwrap_or(u32::MAX)
    };
    if gpp > 0 {
        fit = fit.min(by_gpu);
    }
    fit
}

/// [`pods_fitting`] of every node, a column at a time: one short loop per resource rather than
/// a nested loop per node. Cranelift (which compiles WebAssembly) spills values around every
/// loop of a busy body and checks the deadline on every back-edge, so small loops bring the
/// module's code much closer to native; native code gets a little faster too. Nodes missing
/// from a column count as having none of it.
pub fn fits(request: &PodSetRequest, nodes: &NodeBatch) -> Vec<u32> {
    let n = nodes.len();
    let mut fit = vec![0u32; n];
    for (f, &ready) in fit.iter_mut().zip(&nodes.ready) {
        *f = if ready { u32::MAX } else { 0 };
    }
    per_request_column(request, nodes, &mut fit, 0, |f, free, need| {
        *f = (*f).min(u32::try_from(free.max(0) / need).unwrap_or(u32::MAX));
    });
    let gpp = request.gpus_per_pod;
    if gpp == 0 {
        return fit;
    }
    if request.nvlink_required {
        for (i, f) in fit.iter_mut().enumerate() {
            if *f > 0 {
                let by_island = island_range(nodes, i)
                    .map(|j| nodes.island_free.get(j).map_or(0, |&free| free / gpp))
                    .fold(0u32, u32::saturating_add);
                *f = (*f).min(by_island);
            }
        }
    } else {
        let mut seen = 0;
        for (f, &free) in fit.iter_mut().zip(&nodes.gpu_free) {
            *f = (*f).min(free / gpp);
            seen += 1;
        }
        fit[seen..].fill(0);
    }
    fit
}

/// Calls `f(entry, free, need)` for every node's entry and every resource the request asks for,
/// a column at a time; entries of nodes missing from a column are set to `missing`.
pub(crate) fn per_request_column<T: Copy>(
    request: &PodSetRequest,
    nodes: &NodeBatch,
    out: &mut [T],
    missing: T,
    f: impl Fn(&mut T, i64, i64),
) {
    let k = request.resources.len();
    // Entries of `per_pod` past `resources` have no column and are ignored.
    for (r, &need) in request.per_pod.iter().take(k).enumerate() {
        if need <= 0 {
            continue;
        }
        let column = nodes.free.get(r..).unwrap_or_default().iter().step_by(k);
        let mut seen = 0;
        for (o, &free) in out.iter_mut().zip(column) {
            f(o, free, need);
            seen += 1;
        }
        out[seen..].fill(missing);
    }
}

/// Indexes into `island_size`/`island_free` of node `i`'s islands.
pub fn island_range(nodes: &NodeBatch, i: usize) -> std::ops::Range<usize> {
    let lo = nodes.island_offsets.get(i).copied().unwrap_or(0) as usize;
    let hi = nodes.island_offsets.get(i + 1).copied().unwrap_or(0) as usize;
    lo..hi.max(lo)
}

/// Share of node `i`'s healthy GPUs that are free (1.0 for a node without GPUs).
pub fn free_share(nodes: &NodeBatch, i: usize) -> f64 {
    let total = nodes.gpu_total.get(i).copied().unwrap_or(0);
    if total == 0 {
        return 1.0;
    }
    f64::from(nodes.gpu_free.get(i).copied().unwrap_or(0)) / f64::from(total)
}

#[cfg(test)]
mod tests;
