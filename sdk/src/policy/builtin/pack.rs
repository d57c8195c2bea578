//! `topology-pack`: fill partially used nodes and tight NVLink islands first.

use super::{free_share, island_range, pods_fitting};
use crate::policy::error::PolicyError;
use crate::policy::placement::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest};

/// Packs gangs: nodes already partly used score higher (whole nodes stay free for whole-node
/// gangs), and a node whose NVLink island fits a pod's GPUs most tightly scores higher still. The
/// engine's domain choice (fewest racks/blocks) and node order (fewest nodes) do the rest.
#[derive(Clone, Copy, Debug, Default)]
pub struct TopologyPack;

impl TopologyPack {
    /// Name of the policy.
    pub const NAME: &'static str = "topology-pack";
}

impl PlacementPolicy for TopologyPack {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        let n = nodes.len();
        let mut out = NodeScores {
            score: Vec::with_capacity(n),
            max_pods: Vec::with_capacity(n),
        };
        let gpp = request.gpus_per_pod;
        for i in 0..n {
            let fit = pods_fitting(request, nodes, i);
            if fit == 0 {
                out.score.push(0.0);
                out.max_pods.push(0);
                continue;
            }
            let mut score = 1.0 - free_share(nodes, i);
            if gpp > 0 {
                // Tightest island that still holds one pod's GPUs: an exact fit adds 1.
                let tightest = island_range(nodes, i)
                    .filter_map(|j| nodes.island_free.get(j).copied())
                    .filter(|&f| f >= gpp)
                    .min();
                if let Some(f) = tightest {
                    score += f64::from(gpp) / f64::from(f);
                }
            }
            out.score.push(score);
            out.max_pods.push(u32::MAX);
        }
        Ok(out)
    }
}
