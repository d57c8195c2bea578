//! Guest side of the `placement` world: the policy value and the resident node inventory.

use std::cell::RefCell;

use super::PolicyInit;
use super::placement_bindings::sluice::policy::placement_types as wit;
use crate::policy::placement::{NodeBatch, PlacementPolicy, PodSetRequest, TopologyMode};

thread_local! {
    /// The policy built by `init` (a module instance is single-threaded).
    static POLICY: RefCell<Option<Box<dyn PlacementPolicy>>> = const { RefCell::new(None) };
    /// The node batch: static columns resident between calls, dynamic columns replaced per call.
    static BATCH: RefCell<NodeBatch> = RefCell::new(NodeBatch::default());
}

/// Builds the policy from its configuration (called by [`export_placement!`](crate::export_placement)).
pub fn init<T: PolicyInit + PlacementPolicy + 'static>(config: &str) -> Result<(), String> {
    let policy = T::init(config)?;
    POLICY.with(|p| *p.borrow_mut() = Some(Box::new(policy)));
    Ok(())
}

/// Replaces the resident static node columns.
pub fn set_inventory(inv: wit::NodeInventory) {
    BATCH.with(|b| {
        let mut b = b.borrow_mut();
        b.inventory_generation = inv.generation;
        b.strings = inv.strings;
        b.levels = inv.levels;
        b.name = inv.name;
        b.domain = inv.domain;
        b.gpu_model = inv.gpu_model;
        b.gpu_memory_mib = inv.gpu_memory_mib;
        b.fabric_clique = inv.fabric_clique;
        b.label_offsets = inv.label_offsets;
        b.label_keys = inv.label_keys;
        b.label_values = inv.label_values;
    });
}

/// The contract's request from the WIT record.
pub fn request_from_wit(r: wit::PodSetRequest) -> PodSetRequest {
    PodSetRequest {
        workload: r.workload,
        pod_set: r.pod_set,
        count: r.count,
        min_count: r.min_count,
        resources: r.resources,
        per_pod: r.per_pod,
        gpus_per_pod: r.gpus_per_pod,
        topology_mode: match r.topology_mode {
            wit::TopologyMode::None => TopologyMode::None,
            wit::TopologyMode::Required => TopologyMode::Required,
            wit::TopologyMode::Preferred => TopologyMode::Preferred,
            wit::TopologyMode::Unconstrained => TopologyMode::Unconstrained,
        },
        topology_level: r.topology_level,
        nvlink_required: r.nvlink_required,
        priority: r.priority,
        labels: r.label_keys.into_iter().zip(r.label_values).collect(),
    }
}

/// Scores the resident inventory with this call's dynamic columns.
pub fn score(
    request: wit::PodSetRequest,
    state: wit::NodeState,
) -> Result<wit::NodeScores, String> {
    let request = request_from_wit(request);
    BATCH.with(|b| {
        let mut b = b.borrow_mut();
        b.ready = state.ready.iter().map(|&r| r != 0).collect();
        b.gpu_total = state.gpu_total;
        b.gpu_free = state.gpu_free;
        b.island_offsets = state.island_offsets;
        b.island_size = state.island_size;
        b.island_free = state.island_free;
        b.free = state.free;
        POLICY.with(|p| {
            let p = p.borrow();
            let policy = p.as_ref().ok_or("score called before init")?;
            let scores = policy.score(&request, &b).map_err(|e| e.message)?;
            Ok(wit::NodeScores {
                score: scores.score,
                max_pods: scores.max_pods,
            })
        })
    })
}
