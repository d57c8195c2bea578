//! A placement module behind the [`PlacementPolicy`] trait.

use std::time::Duration;

use super::instance::{Live, Module, world};
use crate::policy::PolicyError;
use crate::policy::placement::{
    NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, TopologyMode,
};

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "placement",
        // Export parameters borrow (`&[u32]` rather than `Vec<u32>`), so a call's node columns
        // are lowered straight from the caller's batch instead of being cloned first.
        ownership: Borrowing { duplicate_if_necessary: true },
    });
}

use bindings::sluice::policy::placement_types as wit;
use bindings::{Placement, PlacementPre};

world! {
    kind: Placement,
    bindings: Placement,
    pre: PlacementPre,
    init: (),
    resident: Resident,
}

/// What an instance holds resident beside itself.
#[derive(Default)]
pub(crate) struct Resident {
    /// Generation and node count of the inventory the guest holds.
    inventory: Option<(u64, usize)>,
    /// The `ready` column as bytes, reused per call (the other columns are lent as they are).
    ready: Vec<u8>,
}

/// A loaded placement module. Calls are serialised (one instance per module); an instance that
/// failed is discarded and rebuilt (with `init`) on the next call.
pub struct WasmPlacement {
    module: Module<Placement>,
}

impl std::fmt::Debug for WasmPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlacement")
            .field("name", &self.module.name)
            .field("sha256", &self.sha256())
            .field("deadline", &self.module.deadline)
            .field("memory_limit", &self.module.memory_limit)
            .finish_non_exhaustive()
    }
}

impl WasmPlacement {
    pub(crate) fn new(module: Module<Placement>) -> Self {
        Self { module }
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        self.module.sha256()
    }

    /// Deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.module.deadline
    }

    /// Scores with a fresh instance (instantiate + init + inventory + call), as a decision that
    /// keeps nothing between calls would; used to measure per-decision overhead.
    pub fn score_fresh(
        &self,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        let (mut live, ()) = self.module.instantiate()?;
        self.call(&mut live, request, nodes)
    }

    fn call(
        &self,
        live: &mut Live<Placement>,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        let key = (nodes.inventory_generation, nodes.len());
        if live.resident.inventory != Some(key) {
            let strings: Vec<&str> = nodes.strings.iter().map(String::as_str).collect();
            let inv = inventory(nodes, &strings);
            let b = &live.bindings;
            self.module
                .guarded(&mut live.store, |s| b.call_set_inventory(s, inv))?;
            live.resident.inventory = Some(key);
        }
        live.resident.ready.clear();
        live.resident
            .ready
            .extend(nodes.ready.iter().map(|&r| u8::from(r)));
        let state = wit::NodeState {
            ready: &live.resident.ready,
            gpu_total: &nodes.gpu_total,
            gpu_free: &nodes.gpu_free,
            island_offsets: &nodes.island_offsets,
            island_size: &nodes.island_size,
            island_free: &nodes.island_free,
            free: &nodes.free,
        };
        let resources: Vec<&str> = request.resources.iter().map(String::as_str).collect();
        let label_keys: Vec<&str> = request.labels.iter().map(|(k, _)| k.as_str()).collect();
        let label_values: Vec<&str> = request.labels.iter().map(|(_, v)| v.as_str()).collect();
        let req = request_to_wit(request, &resources, &label_keys, &label_values);
        let b = &live.bindings;
        let out = self
            .module
            .call(&mut live.store, |s| b.call_score(s, req, state))?;
        let scores = NodeScores {
            score: out.score,
            max_pods: out.max_pods,
        };
        scores.check(&self.module.name, nodes)?;
        Ok(scores)
    }
}

impl PlacementPolicy for WasmPlacement {
    fn name(&self) -> &str {
        &self.module.name
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        self.module
            .with_live(|live| self.call(live, request, nodes))
    }
}

fn inventory<'a>(n: &'a NodeBatch, strings: &'a [&'a str]) -> wit::NodeInventory<'a> {
    wit::NodeInventory {
        generation: n.inventory_generation,
        strings,
        levels: &n.levels,
        name: &n.name,
        domain: &n.domain,
        gpu_model: &n.gpu_model,
        gpu_memory_mib: &n.gpu_memory_mib,
        fabric_clique: &n.fabric_clique,
        label_offsets: &n.label_offsets,
        label_keys: &n.label_keys,
        label_values: &n.label_values,
    }
}

fn request_to_wit<'a>(
    r: &'a PodSetRequest,
    resources: &'a [&'a str],
    label_keys: &'a [&'a str],
    label_values: &'a [&'a str],
) -> wit::PodSetRequest<'a> {
    wit::PodSetRequest {
        workload: &r.workload,
        pod_set: &r.pod_set,
        count: r.count,
        min_count: r.min_count,
        resources,
        per_pod: &r.per_pod,
        gpus_per_pod: r.gpus_per_pod,
        topology_mode: match r.topology_mode {
            TopologyMode::None => wit::TopologyMode::None,
            TopologyMode::Required => wit::TopologyMode::Required,
            TopologyMode::Preferred => wit::TopologyMode::Preferred,
            TopologyMode::Unconstrained => wit::TopologyMode::Unconstrained,
        },
        topology_level: r.topology_level.as_deref(),
        nvlink_required: r.nvlink_required,
        priority: r.priority,
        label_keys,
        label_values,
    }
}
