//! `topology-pack`: keep a gang inside the fewest NVLink islands, nodes, racks and blocks, and
//! fill partly used nodes first so whole nodes stay free for large gangs.
//!
//! A thin wrapper: the scoring is the native `TopologyPack` placement policy, so the same logic
//! runs natively (benchmarks, the engine's built-in) and as this WebAssembly module.

use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::builtin::TopologyPack;
use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

/// The exported policy: the native scorer behind the module's configuration.
#[derive(Debug, Default)]
pub struct Policy(pub TopologyPack);

impl PolicyInit for Policy {
    fn init(config: &str) -> Result<Self, String> {
        sluice_sdk::guest::no_config("topology-pack", config).map(|()| Self(TopologyPack))
    }
}

impl PlacementPolicy for Policy {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        self.0.score(request, nodes)
    }
    fn reusable(&self) -> bool {
        self.0.reusable()
    }
    fn row_local(&self) -> bool {
        self.0.row_local()
    }
}

#[cfg(target_arch = "wasm32")]
sluice_sdk::export_placement!(Policy);
