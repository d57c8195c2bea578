//! Stand-in for `sluice_sdk::policy::builtin::TopologyPack` until that native scorer lands; the
//! wrapper in `lib.rs` only needs `Default` and `PlacementPolicy` from it.

use std::collections::HashMap;

use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

/// Pods of `request` that node `i` can take by free GPUs (per NVLink island when required).
pub(crate) fn pods_fit(request: &PodSetRequest, nodes: &NodeBatch, i: usize) -> u32 {
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

/// Packs gangs into the fewest domains and fills partly used nodes first.
#[derive(Clone, Copy, Debug, Default)]
pub struct TopologyPack;

impl PlacementPolicy for TopologyPack {
    fn name(&self) -> &str {
        "topology-pack"
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        let n = nodes.len();
        let levels = nodes.levels.len();
        let fit: Vec<u32> = (0..n).map(|i| pods_fit(request, nodes, i)).collect();
        // Pods each domain can take, at every level above the node.
        let mut cap: Vec<HashMap<u32, u64>> = vec![HashMap::new(); levels.saturating_sub(1)];
        for (i, &f) in fit.iter().enumerate() {
            for (l, m) in cap.iter_mut().enumerate() {
                let d = nodes.domain.get(i * levels + l).copied().unwrap_or(0);
                *m.entry(d).or_default() += u64::from(f);
            }
        }
        let count = u64::from(request.count.max(1));
        let mut out = NodeScores {
            score: Vec::with_capacity(n),
            max_pods: Vec::with_capacity(n),
        };
        for (i, &f) in fit.iter().enumerate() {
            out.max_pods.push(f);
            if f == 0 {
                out.score.push(0.0);
                continue;
            }
            let mut s = 0.0;
            // Outer levels weigh more: a gang that fits one block, then one rack, goes there,
            // and among domains that fit, the tightest (least left over) wins.
            for (l, m) in cap.iter().enumerate() {
                let d = nodes.domain.get(i * levels + l).copied().unwrap_or(0);
                let c = m.get(&d).copied().unwrap_or(0);
                let w = 10f64.powi(6 - 2 * l as i32);
                if c >= count {
                    s += w * (1.0 + count as f64 / c as f64);
                } else {
                    s += w * (c as f64 / count as f64) * 0.5;
                }
            }
            // Fewer nodes: a node that takes more of the gang first.
            s += 100.0 * (u64::from(f).min(count) as f64 / count as f64);
            // Fragmentation: partly used nodes first, whole nodes kept free.
            let total = nodes.gpu_total.get(i).copied().unwrap_or(0).max(1) as f64;
            let free = nodes.gpu_free.get(i).copied().unwrap_or(0) as f64;
            s += 10.0 * (1.0 - free / total);
            out.score.push(s);
        }
        Ok(out)
    }
}
