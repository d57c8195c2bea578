//! `spread`: spread a pod set's pods over nodes and racks.

use super::{fits, free_share};
use crate::policy::error::PolicyError;
use crate::policy::placement::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest};

/// Spreads pods: each node takes at most `ceil(count / nodes that fit one pod)` pods, and emptier
/// nodes in emptier racks (the level above the node's last level) score higher.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spread;

impl Spread {
    /// Name of the policy.
    pub const NAME: &'static str = "spread";
}

impl PlacementPolicy for Spread {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn reusable(&self) -> bool {
        true
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        let n = nodes.len();
        let fits = fits(request, nodes);
        let eligible = fits.iter().filter(|&&f| f > 0).count().max(1) as u32;
        let cap = request.count.div_ceil(eligible).max(1);
        // Rack = the second-lowest level when there are two or more levels.
        let levels = nodes.levels.len();
        let rack_of = |i: usize| -> Option<u32> {
            (levels >= 2)
                .then(|| nodes.domain.get(i * levels + levels - 2).copied())
                .flatten()
        };
        let mut racks: std::collections::HashMap<u32, (u64, u64)> = Default::default();
        for i in 0..n {
            if let Some(r) = rack_of(i) {
                let e = racks.entry(r).or_default();
                e.0 += u64::from(nodes.gpu_free.get(i).copied().unwrap_or(0));
                e.1 += u64::from(nodes.gpu_total.get(i).copied().unwrap_or(0));
            }
        }
        let mut out = NodeScores {
            score: Vec::with_capacity(n),
            max_pods: Vec::with_capacity(n),
        };
        for (i, &fit) in fits.iter().enumerate() {
            if fit == 0 {
                out.score.push(0.0);
                out.max_pods.push(0);
                continue;
            }
            let rack_share = match rack_of(i).and_then(|r| racks.get(&r)) {
                Some(&(free, total)) if total > 0 => free as f64 / total as f64,
                _ => 1.0,
            };
            out.score.push(free_share(nodes, i) + rack_share);
            out.max_pods.push(cap);
        }
        Ok(out)
    }
}
