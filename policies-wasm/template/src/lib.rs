//! Template of a Sluice placement policy module. Copy this crate, rename it, change `score`.
//!
//! Build: `cargo build --release --target wasm32-wasip2 -p sluice-policy-template`, then
//! `sluice policy test target/wasm32-wasip2/release/sluice_policy_template.wasm cases.yaml` and
//! `sluice policy push ... --name my-policy --kind placement`.
//!
//! This example prefers the node with the most free GPUs and rejects nodes that are not Ready or
//! cannot take one pod.

use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

/// The policy; fields would hold parsed configuration.
#[derive(Debug, Default)]
pub struct MostFree;

impl PolicyInit for MostFree {
    fn init(config: &str) -> Result<Self, String> {
        // Parse the JSON configuration here (e.g. with serde_json) and refuse bad values with a
        // message naming the field; this template takes none.
        sluice_sdk::guest::no_config("most-free", config).map(|()| MostFree)
    }
}

impl PlacementPolicy for MostFree {
    fn name(&self) -> &str {
        "most-free"
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        let per_pod = request.gpus_per_pod.max(1);
        let mut out = NodeScores::default();
        for i in 0..nodes.len() {
            let free = nodes.gpu_free.get(i).copied().unwrap_or(0);
            let ready = nodes.ready.get(i).copied().unwrap_or(false);
            let fits = if ready { free / per_pod } else { 0 };
            out.score.push(f64::from(free));
            out.max_pods.push(fits);
        }
        Ok(out)
    }
}

#[cfg(target_arch = "wasm32")]
sluice_sdk::export_placement!(MostFree);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_free_nodes_and_rejects_full_ones() {
        let nodes = NodeBatch {
            name: vec![0, 0],
            ready: vec![true, true],
            gpu_free: vec![8, 1],
            ..NodeBatch::default()
        };
        let req = PodSetRequest {
            count: 1,
            gpus_per_pod: 2,
            ..PodSetRequest::default()
        };
        let s = MostFree.score(&req, &nodes).unwrap();
        assert_eq!(s.max_pods, vec![4, 0]);
        assert!(s.score[0] > s.score[1]);
    }
}
