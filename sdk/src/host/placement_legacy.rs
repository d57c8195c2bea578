//! Placement modules built against `sluice:policy@0.1.0` (before `score-delta`): they are sent every node's
//! dynamic row on every call, as that contract asks.

use super::instance::{Live, Module, world};
use crate::policy::PolicyError;
use crate::policy::placement::{NodeBatch, NodeScores, PodSetRequest, TopologyMode};

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit-legacy/0.1.0",
        world: "placement",
        ownership: Borrowing { duplicate_if_necessary: true },
    });
}

pub(crate) use bindings::Placement as LegacyPlacement;
use bindings::PlacementPre;
use bindings::sluice::policy::placement_types as wit;

world! {
    kind: Placement,
    bindings: LegacyPlacement,
    pre: PlacementPre,
    init: (),
    resident: Resident,
}

/// What an instance holds resident beside itself.
#[derive(Default)]
pub(crate) struct Resident {
    /// Generation and node count of the inventory the guest holds.
    inventory: Option<(u64, usize)>,
    /// The `ready` column as bytes, reused per call.
    ready: Vec<u8>,
}

/// Scores `nodes` for `request` on a 0.1.0 module's instance.
pub(crate) fn call(
    module: &Module<LegacyPlacement>,
    live: &mut Live<LegacyPlacement>,
    request: &PodSetRequest,
    nodes: &NodeBatch,
) -> Result<NodeScores, PolicyError> {
    let key = (nodes.inventory_generation, nodes.len());
    if live.resident.inventory != Some(key) {
        let strings: Vec<&str> = nodes.strings.iter().map(String::as_str).collect();
        let inv = wit::NodeInventory {
            generation: nodes.inventory_generation,
            strings: &strings,
            levels: &nodes.levels,
            name: &nodes.name,
            domain: &nodes.domain,
            gpu_model: &nodes.gpu_model,
            gpu_memory_mib: &nodes.gpu_memory_mib,
            fabric_clique: &nodes.fabric_clique,
            label_offsets: &nodes.label_offsets,
            label_keys: &nodes.label_keys,
            label_values: &nodes.label_values,
        };
        let b = &live.bindings;
        module.guarded(&mut live.store, |s| b.call_set_inventory(s, inv))?;
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
    let req = wit::PodSetRequest {
        workload: &request.workload,
        pod_set: &request.pod_set,
        count: request.count,
        min_count: request.min_count,
        resources: &resources,
        per_pod: &request.per_pod,
        gpus_per_pod: request.gpus_per_pod,
        topology_mode: match request.topology_mode {
            TopologyMode::None => wit::TopologyMode::None,
            TopologyMode::Required => wit::TopologyMode::Required,
            TopologyMode::Preferred => wit::TopologyMode::Preferred,
            TopologyMode::Unconstrained => wit::TopologyMode::Unconstrained,
        },
        topology_level: request.topology_level.as_deref(),
        nvlink_required: request.nvlink_required,
        priority: request.priority,
        label_keys: &label_keys,
        label_values: &label_values,
    };
    let b = &live.bindings;
    let out = module.call(&mut live.store, |s| b.call_score(s, req, state))?;
    Ok(NodeScores {
        score: out.score,
        max_pods: out.max_pods,
    })
}
