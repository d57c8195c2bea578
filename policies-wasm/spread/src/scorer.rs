//! Stand-in for `sluice_sdk::policy::builtin::Spread` until that native scorer lands; the
//! wrapper in `lib.rs` only needs `Default` and `PlacementPolicy` from it.

use std::collections::HashMap;

use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

/// Pods of `request` that node `i` can take by free GPUs (per NVLink island when required).
fn pods_fit(request: &PodSetRequest, nodes: &NodeBatch, i: usize) -> u32 {
    if !nodes.ready.get(i).copied().unwrap_or(false) {
        return 0;
    }
    let per = request.gpus_per_pod;
    if per == 0 {
        return request.count;
    }
    let lo = nodes.island_offsets.get(i).copied().unwrap_or(0) as usize;
    let hi = nodes.island_offsets.get(i + 1).copied().unwrap_or(0) as usize;
    if request.nvlink_required && hi > lo {
        nodes
            .island_free
            .get(lo..hi)
            .unwrap_or(&[])
            .iter()
            .map(|f| f / per)
            .sum()
    } else {
        nodes.gpu_free.get(i).copied().unwrap_or(0) / per
    }
}

/// Spreads pods across racks (round robin by rank within the rack) and nodes (few pods each).
#[derive(Clone, Copy, Debug, Default)]
pub struct Spread;

impl PlacementPolicy for Spread {
    fn name(&self) -> &str {
        "spread"
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        let n = nodes.len();
        let levels = nodes.levels.len();
        // The level just above the node (the rack), or none.
        let rack_of = |i: usize| -> u32 {
            if levels >= 2 {
                nodes
                    .domain
                    .get(i * levels + levels - 2)
                    .copied()
                    .unwrap_or(0)
            } else {
                0
            }
        };
        let fit: Vec<u32> = (0..n).map(|i| pods_fit(request, nodes, i)).collect();
        let eligible = fit.iter().filter(|&&f| f > 0).count().max(1) as u32;
        let per_node = request.count.div_ceil(eligible).max(1);
        // Rank of each node within its rack by free GPUs (most free first).
        let mut by_rack: HashMap<u32, Vec<usize>> = HashMap::new();
        for i in (0..n).filter(|&i| fit[i] > 0) {
            by_rack.entry(rack_of(i)).or_default().push(i);
        }
        let mut rank = vec![0usize; n];
        for members in by_rack.values_mut() {
            members.sort_by(|&a, &b| nodes.gpu_free[b].cmp(&nodes.gpu_free[a]).then(a.cmp(&b)));
            for (r, &i) in members.iter().enumerate() {
                rank[i] = r;
            }
        }
        let mut out = NodeScores {
            score: Vec::with_capacity(n),
            max_pods: Vec::with_capacity(n),
        };
        for i in 0..n {
            if fit[i] == 0 {
                out.score.push(0.0);
                out.max_pods.push(0);
                continue;
            }
            let total = nodes.gpu_total.get(i).copied().unwrap_or(0).max(1) as f64;
            let free = nodes.gpu_free.get(i).copied().unwrap_or(0) as f64;
            // Every rack's best node ranks above any rack's second best, and so on.
            out.score.push(1000.0 * (n - rank[i]) as f64 + free / total);
            out.max_pods.push(fit[i].min(per_node));
        }
        Ok(out)
    }
}
