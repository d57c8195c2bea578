//! `topology-pack`: fill partially used nodes and tight NVLink islands first.

use super::per_request_column;
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

    fn reusable(&self) -> bool {
        true
    }

    fn row_local(&self) -> bool {
        true
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        // Readiness and the per-pod requests, a column at a time; then one pass per node for
        // the GPUs, which needs the node's islands anyway. Only "takes one pod" matters (the
        // engine counts pods), so nothing is divided. In a batch whose columns are short (the
        // engine never sends one), a node missing from `ready`, `free`, `gpu_free`, `gpu_total` or
        // `island_offsets` scores 0 and takes no pod, and a node whose islands run past
        // `island_free` has none.
        let ok = takes_by_resources(request, nodes);
        let n = ok.len();
        let mut score = vec![0.0; n];
        let mut max_pods = vec![0u32; n];
        let gpp = request.gpus_per_pod;
        let nvlink = request.nvlink_required;
        let gpus = nodes.gpu_free.iter().zip(&nodes.gpu_total);
        let bounds = nodes.island_offsets.windows(2);
        let rows = score.iter_mut().zip(max_pods.iter_mut()).zip(&ok);
        for (((s, m), &ok), ((&free, &total), w)) in rows.zip(gpus.zip(bounds)) {
            let islands = nodes
                .island_free
                .get(w[0] as usize..w[1] as usize)
                .unwrap_or_default();
            // Tightest island that still holds one pod's GPUs.
            let mut tightest = u32::MAX;
            for &f in islands {
                if f >= gpp && f < tightest {
                    tightest = f;
                }
            }
            let takes = ok
                && (gpp == 0
                    || if nvlink {
                        tightest != u32::MAX
                    } else {
                        free >= gpp
                    });
            if !takes {
                continue;
            }
            *m = u32::MAX;
            if total > 0 {
                *s = 1.0 - f64::from(free) / f64::from(total);
            }
            if gpp > 0 && tightest != u32::MAX {
                *s += f64::from(gpp) / f64::from(tightest);
            }
        }
        Ok(NodeScores { score, max_pods })
    }
}

/// Whether each node is ready and has room for one pod's requests, one pass per resource.
fn takes_by_resources(request: &PodSetRequest, nodes: &NodeBatch) -> Vec<bool> {
    let mut ok: Vec<bool> = nodes.ready.clone();
    ok.resize(nodes.len(), false);
    per_request_column(request, nodes, &mut ok, false, |o, free, need| {
        *o &= free >= need;
    });
    ok
}
