//! A placement module with a built-in placement policy as the fallback of every decision.

use std::sync::Arc;

use sluice_sdk::policy::{NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, PolicyError};

use super::health::ModuleHealth;

/// Scores with a placement module; a failed call or a degraded module falls back to the
/// built-in policy for that decision (so callers always get scores).
#[derive(Debug)]
pub struct GuardedPlacement {
    name: String,
    module: Arc<dyn PlacementPolicy>,
    fallback: Arc<dyn PlacementPolicy>,
    health: Arc<ModuleHealth>,
}

impl GuardedPlacement {
    /// Guards `module` (named `name`) with `health`, falling back to `fallback`.
    pub fn new(
        name: &str,
        module: Arc<dyn PlacementPolicy>,
        fallback: Arc<dyn PlacementPolicy>,
        health: Arc<ModuleHealth>,
    ) -> Self {
        Self {
            name: name.to_string(),
            module,
            fallback,
            health,
        }
    }

    /// The module's health.
    pub fn health(&self) -> &Arc<ModuleHealth> {
        &self.health
    }
}

impl PlacementPolicy for GuardedPlacement {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        if self.health.is_degraded() {
            self.health.record_skipped();
            return self.fallback.score(request, nodes);
        }
        let answer = self
            .module
            .score(request, nodes)
            .and_then(|s| s.check(&self.name, nodes).map(|()| s));
        match answer {
            Ok(s) => {
                self.health.record_success();
                Ok(s)
            }
            Err(e) => {
                if self.health.record_failure(&e) {
                    tracing::warn!(module = %self.name, error = %e, fallback = self.fallback.name(), "placement module degraded: the built-in policy decides until it is replaced");
                } else {
                    tracing::warn!(module = %self.name, error = %e, fallback = self.fallback.name(), "placement module failed; the built-in policy decided");
                }
                self.fallback.score(request, nodes)
            }
        }
    }
}
