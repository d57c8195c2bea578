//! `topology-pack`: fill partially used nodes and tight NVLink islands first.

use super::fits;
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
        // Pass by pass over columns (see `fits`), not everything per node in one loop.
        let fit = fits(request, nodes);
        let mut out = NodeScores {
            score: vec![0.0; fit.len()],
            max_pods: fit
                .iter()
                .map(|&f| if f > 0 { u32::MAX } else { 0 })
                .collect(),
        };
        // Used share of the node's GPUs; a node without GPUs (or past the columns) scores 0.
        let gpus = nodes.gpu_free.iter().zip(&nodes.gpu_total);
        for ((s, &f), (&free, &total)) in out.score.iter_mut().zip(&fit).zip(gpus) {
            if f > 0 && total > 0 {
                *s = 1.0 - f64::from(free) / f64::from(total);
            }
        }
        let gpp = request.gpus_per_pod;
        if gpp > 0 {
            // Tightest island that still holds one pod's GPUs: an exact fit adds 1.
            let bounds = nodes.island_offsets.windows(2);
            for ((s, &f), w) in out.score.iter_mut().zip(&fit).zip(bounds) {
                let islands = nodes
                    .island_free
                    .get(w[0] as usize..w[1] as usize)
                    .unwrap_or_default();
                let mut tightest = u32::MAX;
                for &free in islands {
                    if free >= gpp && free < tightest {
                        tightest = free;
                    }
                }
                if f > 0 && tightest != u32::MAX {
                    *s += f64::from(gpp) / f64::from(tightest);
                }
            }
        }
        Ok(out)
    }
}
