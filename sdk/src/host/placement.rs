//! A placement module behind the [`PlacementPolicy`] trait.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::Store;

use super::sandbox::{StoreState, guarded, init_deadline, new_store};
use super::{Compiled, LoadError, Shared, hex};
use crate::policy::placement::{
    NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, TopologyMode,
};
use crate::policy::{PolicyError, PolicyFailure};

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

/// A live instance and what it holds resident.
struct Live {
    store: Store<StoreState>,
    bindings: Placement,
    /// Generation and node count of the inventory the guest holds.
    inventory: Option<(u64, usize)>,
    /// The `ready` column as bytes, reused per call (the other columns are lent as they are).
    ready: Vec<u8>,
}

/// A loaded placement module. Calls are serialised (one instance per module); an instance that
/// failed is discarded and rebuilt (with `init`) on the next call.
pub struct WasmPlacement {
    name: String,
    shared: Arc<Shared>,
    compiled: Arc<Compiled>,
    pre: PlacementPre<StoreState>,
    config: String,
    deadline: Duration,
    memory_limit: usize,
    live: Mutex<Option<Live>>,
}

impl std::fmt::Debug for WasmPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlacement")
            .field("name", &self.name)
            .field("sha256", &self.sha256())
            .field("deadline", &self.deadline)
            .field("memory_limit", &self.memory_limit)
            .finish_non_exhaustive()
    }
}

impl WasmPlacement {
    pub(crate) fn new(
        shared: Arc<Shared>,
        compiled: Arc<Compiled>,
        name: &str,
        config: &str,
        deadline: Duration,
        memory_limit: usize,
    ) -> Result<Self, LoadError> {
        let pre =
            PlacementPre::new(compiled.pre.clone()).map_err(|e| LoadError::WorldMismatch {
                kind: "placement",
                message: format!("{e:#}"),
            })?;
        let me = Self {
            name: name.to_string(),
            shared,
            compiled,
            pre,
            config: config.to_string(),
            deadline,
            memory_limit,
            live: Mutex::new(None),
        };
        let live = me.instantiate().map_err(|e| match e.failure {
            PolicyFailure::Rejected => LoadError::InitRejected(e.message),
            _ => LoadError::InitRejected(e.to_string()),
        })?;
        *me.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
        Ok(me)
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        hex(&self.compiled.sha256)
    }

    /// Deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// A fresh instance with `init` run; exposed to benchmarks to measure instantiation.
    fn instantiate(&self) -> Result<Live, PolicyError> {
        let mut store = new_store(&self.shared, self.memory_limit);
        let bindings = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            self.pre.instantiate(s)
        })?;
        let config = self.config.clone();
        let init = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            bindings.call_init(s, &config)
        })?;
        init.map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m))?;
        Ok(Live {
            store,
            bindings,
            inventory: None,
            ready: Vec::new(),
        })
    }

    /// Scores with a fresh instance (instantiate + init + inventory + call), as a decision that
    /// keeps nothing between calls would; used to measure per-decision overhead.
    pub fn score_fresh(
        &self,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        let mut live = self.instantiate()?;
        self.call(&mut live, request, nodes)
    }

    fn call(
        &self,
        live: &mut Live,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        let key = (nodes.inventory_generation, nodes.len());
        if live.inventory != Some(key) {
            let strings: Vec<&str> = nodes.strings.iter().map(String::as_str).collect();
            let inv = inventory(nodes, &strings);
            let b = &live.bindings;
            guarded(&mut live.store, &self.name, self.deadline, |s| {
                b.call_set_inventory(s, inv)
            })?;
            live.inventory = Some(key);
        }
        live.ready.clear();
        live.ready.extend(nodes.ready.iter().map(|&r| u8::from(r)));
        let state = wit::NodeState {
            ready: &live.ready,
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
        let out = guarded(&mut live.store, &self.name, self.deadline, |s| {
            b.call_score(s, req, state)
        })?
        .map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m))?;
        let scores = NodeScores {
            score: out.score,
            max_pods: out.max_pods,
        };
        scores.check(&self.name, nodes)?;
        Ok(scores)
    }
}

impl PlacementPolicy for WasmPlacement {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        let mut slot = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = match slot.take() {
            Some(l) => l,
            None => self.instantiate()?,
        };
        match self.call(&mut live, request, nodes) {
            Ok(s) => {
                *slot = Some(live);
                Ok(s)
            }
            // A module that trapped may be mid-update; malformed or refused answers leave it sound.
            Err(e)
                if matches!(
                    e.failure,
                    PolicyFailure::Malformed | PolicyFailure::Rejected
                ) =>
            {
                *slot = Some(live);
                Err(e)
            }
            Err(e) => Err(e),
        }
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
