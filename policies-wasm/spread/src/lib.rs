//! `spread`: spread the pods of a pod set across nodes and racks (inference-style availability).
//!
//! A thin wrapper: the scoring is the native `Spread` placement policy, so the same logic runs
//! natively (benchmarks) and as this WebAssembly module.

use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::builtin::Spread;
use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

/// The exported policy: the native scorer behind the module's configuration.
#[derive(Debug, Default)]
pub struct Policy(pub Spread);

impl PolicyInit for Policy {
    fn init(config: &str) -> Result<Self, String> {
        sluice_sdk::guest::no_config("spread", config).map(|()| Self(Spread))
    }
}

impl PlacementPolicy for Policy {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        self.0.score(request, nodes)
    }
}

#[cfg(target_arch = "wasm32")]
sluice_sdk::export_placement!(Policy);
