//! Test harness for policy authors: load a compiled module, build fixture nodes and pod sets,
//! call the policy, assert scores and orders, and measure call latency.
//!
//! ```no_run
//! use sluice_sdk::harness::{Harness, NodeBatchBuilder, NodeSpec, PodSetBuilder};
//! use sluice_sdk::policy::PlacementPolicy;
//!
//! let h = Harness::new().unwrap();
//! let policy = h.placement_file("target/wasm32-wasip2/release/my_policy.wasm", "{}").unwrap();
//! let nodes = NodeBatchBuilder::new(&["rack"])
//!     .node(NodeSpec::gpu("a", 8, 8).path(&["r1"]))
//!     .node(NodeSpec::gpu("b", 8, 2).path(&["r1"]))
//!     .build();
//! let request = PodSetBuilder::new("team/job", 1).gpus_per_pod(2).build();
//! let scores = policy.score(&request, &nodes).unwrap();
//! assert_eq!(sluice_sdk::harness::ranking(&scores, &nodes)[0], "b");
//! ```

mod builders;
pub mod cases;
mod gang;
mod latency;

use std::path::Path;

pub use builders::{NodeBatchBuilder, NodeSpec, PodSetBuilder, churn, synthetic_cluster};
pub use gang::{GangPlacement, place_gang};
pub use latency::{Percentiles, measure};

use crate::host::{
    HostConfig, LoadError, ModuleLimits, PolicyHost, WasmFairness, WasmPlacement,
    WasmPreemptionCostPolicy,
};
use crate::policy::placement::{NodeBatch, NodeScores};

/// Why the harness could not load a module.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The module file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// File path.
        path: String,
        /// I/O error.
        error: std::io::Error,
    },
    /// The host refused the module.
    #[error("{path}: {error}")]
    Load {
        /// File path (or "bytes").
        path: String,
        /// Why.
        error: LoadError,
    },
}

/// A policy host configured like the operator's, for tests.
#[derive(Clone, Debug)]
pub struct Harness {
    host: PolicyHost,
    limits: ModuleLimits,
}

impl Harness {
    /// A harness with the host's default limits.
    pub fn new() -> Result<Self, LoadError> {
        Self::with_config(HostConfig::default())
    }

    /// A harness with explicit host settings.
    pub fn with_config(config: HostConfig) -> Result<Self, LoadError> {
        Ok(Self {
            host: PolicyHost::new(config)?,
            limits: ModuleLimits::default(),
        })
    }

    /// Sets the per-module limits used by the next loads.
    pub fn limits(mut self, limits: ModuleLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The underlying host.
    pub fn host(&self) -> &PolicyHost {
        &self.host
    }

    /// Loads a placement module from bytes.
    pub fn placement(&self, bytes: &[u8], config: &str) -> Result<WasmPlacement, HarnessError> {
        let name = format!("sha256:{}", &crate::host::sha256_hex(bytes)[..12]);
        self.host
            .load_placement(&name, bytes, config, self.limits)
            .map_err(|error| HarnessError::Load {
                path: "bytes".into(),
                error,
            })
    }

    /// Loads a placement module from a file.
    pub fn placement_file(
        &self,
        path: impl AsRef<Path>,
        config: &str,
    ) -> Result<WasmPlacement, HarnessError> {
        let (name, bytes) = read(path.as_ref())?;
        self.host
            .load_placement(&name, &bytes, config, self.limits)
            .map_err(|error| HarnessError::Load { path: name, error })
    }

    /// Loads a fairness module from bytes.
    pub fn fairness(&self, bytes: &[u8], config: &str) -> Result<WasmFairness, HarnessError> {
        let name = format!("sha256:{}", &crate::host::sha256_hex(bytes)[..12]);
        self.host
            .load_fairness(&name, bytes, config, self.limits)
            .map_err(|error| HarnessError::Load {
                path: "bytes".into(),
                error,
            })
    }

    /// Loads a fairness module from a file.
    pub fn fairness_file(
        &self,
        path: impl AsRef<Path>,
        config: &str,
    ) -> Result<WasmFairness, HarnessError> {
        let (name, bytes) = read(path.as_ref())?;
        self.host
            .load_fairness(&name, &bytes, config, self.limits)
            .map_err(|error| HarnessError::Load { path: name, error })
    }

    /// Loads a preemption-cost module from bytes.
    pub fn preemption_cost(
        &self,
        bytes: &[u8],
        config: &str,
    ) -> Result<WasmPreemptionCostPolicy, HarnessError> {
        let name = format!("sha256:{}", &crate::host::sha256_hex(bytes)[..12]);
        self.host
            .load_preemption_cost(&name, bytes, config, self.limits)
            .map_err(|error| HarnessError::Load {
                path: "bytes".into(),
                error,
            })
    }

    /// Loads a preemption-cost module from a file.
    pub fn preemption_cost_file(
        &self,
        path: impl AsRef<Path>,
        config: &str,
    ) -> Result<WasmPreemptionCostPolicy, HarnessError> {
        let (name, bytes) = read(path.as_ref())?;
        self.host
            .load_preemption_cost(&name, &bytes, config, self.limits)
            .map_err(|error| HarnessError::Load { path: name, error })
    }
}

fn read(path: &Path) -> Result<(String, Vec<u8>), HarnessError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|error| HarnessError::Read {
        path: name.clone(),
        error,
    })?;
    Ok((name, bytes))
}

/// Names of the accepted nodes (pod cap above 0), best score first (ties by batch order).
pub fn ranking(scores: &NodeScores, nodes: &NodeBatch) -> Vec<String> {
    let mut idx: Vec<usize> = (0..nodes.len().min(scores.score.len()))
        .filter(|&i| scores.max_pods.get(i).is_some_and(|&m| m > 0))
        .collect();
    idx.sort_by(|&a, &b| scores.score[b].total_cmp(&scores.score[a]).then(a.cmp(&b)));
    idx.into_iter()
        .map(|i| nodes.string(nodes.name[i]).to_string())
        .collect()
}

/// Names of the nodes the policy rejected (pod cap 0).
pub fn rejected(scores: &NodeScores, nodes: &NodeBatch) -> Vec<String> {
    (0..nodes.len().min(scores.max_pods.len()))
        .filter(|&i| scores.max_pods[i] == 0)
        .map(|i| nodes.string(nodes.name[i]).to_string())
        .collect()
}
