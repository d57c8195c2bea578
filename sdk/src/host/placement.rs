//! A placement module behind the [`PlacementPolicy`] trait.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::instance::{Live, Module, world};
use super::placement_legacy::{self, LegacyPlacement};
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
    /// The dynamic rows the guest holds: the batch's epoch, how many of its changed rows were sent, and the
    /// resources of each `free` row.
    dynamic: Option<(u64, usize, Vec<String>)>,
    /// The `ready` column as bytes, reused per call (the other columns are lent as they are).
    ready: Vec<u8>,
    /// Buffers of the changed rows, reused per call.
    delta: Delta,
}

/// The changed rows of one call, in `node-state-delta`'s layout.
#[derive(Default)]
struct Delta {
    nodes: Vec<u32>,
    ready: Vec<u8>,
    gpu_total: Vec<u32>,
    gpu_free: Vec<u32>,
    island_size: Vec<u32>,
    island_free: Vec<u32>,
    free: Vec<i64>,
}

impl Delta {
    /// Collects the rows `changed` lists (deduplicated, ascending) from `b`, `nres` entries of `free` per row.
    fn fill(&mut self, b: &NodeBatch, changed: &[u32], nres: usize) {
        self.nodes.clear();
        self.nodes
            .extend(changed.iter().copied().filter(|&i| (i as usize) < b.len()));
        self.nodes.sort_unstable();
        self.nodes.dedup();
        for v in [
            &mut self.gpu_total,
            &mut self.gpu_free,
            &mut self.island_size,
            &mut self.island_free,
        ] {
            v.clear();
        }
        self.ready.clear();
        self.free.clear();
        for &n in &self.nodes {
            let i = n as usize;
            self.ready.push(u8::from(b.ready[i]));
            self.gpu_total.push(b.gpu_total[i]);
            self.gpu_free.push(b.gpu_free[i]);
            let (lo, hi) = (
                b.island_offsets[i] as usize,
                b.island_offsets[i + 1] as usize,
            );
            self.island_size.extend_from_slice(&b.island_size[lo..hi]);
            self.island_free.extend_from_slice(&b.island_free[lo..hi]);
            self.free
                .extend_from_slice(&b.free[i * nres..(i + 1) * nres]);
        }
    }
}

/// A delta is sent while it lists at most this share of the nodes; beyond it the whole state is cheaper.
const DELTA_MAX_SHARE: usize = 4;

/// A loaded placement module. Calls are serialised (one instance per module); an instance that
/// failed is discarded and rebuilt (with `init`) on the next call.
pub struct WasmPlacement {
    module: Loaded,
    /// Calls answered with the whole node state sent, and with only the changed rows.
    sent_whole: AtomicU64,
    sent_delta: AtomicU64,
}

/// How a placement module's calls were sent their node state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateSends {
    /// Calls sent every row (`score`).
    pub whole: u64,
    /// Calls sent only the rows changed since the module's last call (`score-delta`).
    pub delta: u64,
}

/// A placement module of the current contract, or of 0.1.0 (sent the whole node state on every call). One
/// per loaded module, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Loaded {
    Current(Module<Placement>),
    Legacy(Module<LegacyPlacement>),
}

impl Loaded {
    fn name(&self) -> &str {
        match self {
            Loaded::Current(m) => &m.name,
            Loaded::Legacy(m) => &m.name,
        }
    }

    fn sha256(&self) -> String {
        match self {
            Loaded::Current(m) => m.sha256(),
            Loaded::Legacy(m) => m.sha256(),
        }
    }

    fn deadline(&self) -> Duration {
        match self {
            Loaded::Current(m) => m.deadline,
            Loaded::Legacy(m) => m.deadline,
        }
    }

    fn memory_limit(&self) -> usize {
        match self {
            Loaded::Current(m) => m.memory_limit,
            Loaded::Legacy(m) => m.memory_limit,
        }
    }
}

impl std::fmt::Debug for WasmPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlacement")
            .field("name", &self.module.name())
            .field("contract", &self.contract_version())
            .field("sha256", &self.sha256())
            .field("deadline", &self.module.deadline())
            .field("memory_limit", &self.module.memory_limit())
            .finish_non_exhaustive()
    }
}

impl WasmPlacement {
    pub(crate) fn new(module: Module<Placement>) -> Self {
        Self::with(Loaded::Current(module))
    }

    /// A module built against `sluice:policy@0.1.0`.
    pub(crate) fn legacy(module: Module<LegacyPlacement>) -> Self {
        Self::with(Loaded::Legacy(module))
    }

    fn with(module: Loaded) -> Self {
        Self {
            module,
            sent_whole: AtomicU64::new(0),
            sent_delta: AtomicU64::new(0),
        }
    }

    /// The `sluice:policy` version the module was built against.
    pub fn contract_version(&self) -> &'static str {
        match self.module {
            Loaded::Current(_) => super::CONTRACT_VERSION,
            Loaded::Legacy(_) => "0.1.0",
        }
    }

    /// How this module's calls were sent their node state so far.
    pub fn state_sends(&self) -> StateSends {
        StateSends {
            whole: self.sent_whole.load(Ordering::Relaxed),
            delta: self.sent_delta.load(Ordering::Relaxed),
        }
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        self.module.sha256()
    }

    /// Deadline of one call.
    pub fn deadline(&self) -> Duration {
        self.module.deadline()
    }

    /// Scores with a fresh instance (instantiate + init + inventory + call), as a decision that
    /// keeps nothing between calls would; used to measure per-decision overhead.
    pub fn score_fresh(
        &self,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        match &self.module {
            Loaded::Current(m) => {
                let (mut live, ()) = m.instantiate()?;
                self.call(m, &mut live, request, nodes)
            }
            Loaded::Legacy(m) => {
                let (mut live, ()) = m.instantiate()?;
                self.call_legacy(m, &mut live, request, nodes)
            }
        }
    }

    /// A 0.1.0 module's call: every row, every time.
    fn call_legacy(
        &self,
        m: &Module<LegacyPlacement>,
        live: &mut Live<LegacyPlacement>,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        let scores = placement_legacy::call(m, live, request, nodes)?;
        self.sent_whole.fetch_add(1, Ordering::Relaxed);
        scores.check(&m.name, nodes)?;
        Ok(scores)
    }

    fn call(
        &self,
        module: &Module<Placement>,
        live: &mut Live<Placement>,
        request: &PodSetRequest,
        nodes: &NodeBatch,
    ) -> Result<NodeScores, PolicyError> {
        let key = (nodes.inventory_generation, nodes.len());
        if live.resident.inventory != Some(key) {
            let strings: Vec<&str> = nodes.strings.iter().map(String::as_str).collect();
            let inv = inventory(nodes, &strings);
            let b = &live.bindings;
            module.guarded(&mut live.store, |s| b.call_set_inventory(s, inv))?;
            live.resident.inventory = Some(key);
            live.resident.dynamic = None;
        }
        let resources: Vec<&str> = request.resources.iter().map(String::as_str).collect();
        let label_keys: Vec<&str> = request.labels.iter().map(|(k, _)| k.as_str()).collect();
        let label_values: Vec<&str> = request.labels.iter().map(|(_, v)| v.as_str()).collect();
        let req = || request_to_wit(request, &resources, &label_keys, &label_values);
        let b = &live.bindings;
        // Only the rows changed since the guest's last call, when it holds this batch's earlier rows.
        let seen = match &live.resident.dynamic {
            Some((epoch, seen, res))
                if *epoch == nodes.dynamic_epoch
                    && *seen <= nodes.changed_rows.len()
                    && nodes.changed_rows.len() - seen <= nodes.len() / DELTA_MAX_SHARE
                    && *res == request.resources =>
            {
                Some(*seen)
            }
            _ => None,
        };
        live.resident.dynamic = None;
        let mut out = None;
        if let Some(seen) = seen {
            let d = &mut live.resident.delta;
            d.fill(nodes, &nodes.changed_rows[seen..], request.resources.len());
            let delta = wit::NodeStateDelta {
                nodes: &d.nodes,
                ready: &d.ready,
                gpu_total: &d.gpu_total,
                gpu_free: &d.gpu_free,
                island_size: &d.island_size,
                island_free: &d.island_free,
                free: &d.free,
            };
            // A refused delta (rows that do not fit what the guest holds) is answered by the whole state.
            out = module
                .guarded(&mut live.store, |s| b.call_score_delta(s, req(), delta))?
                .ok();
        }
        let out = match out {
            Some(o) => {
                self.sent_delta.fetch_add(1, Ordering::Relaxed);
                o
            }
            None => {
                self.sent_whole.fetch_add(1, Ordering::Relaxed);
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
                module.call(&mut live.store, |s| b.call_score(s, req(), state))?
            }
        };
        if nodes.dynamic_epoch != 0 {
            live.resident.dynamic = Some((
                nodes.dynamic_epoch,
                nodes.changed_rows.len(),
                request.resources.clone(),
            ));
        }
        let scores = NodeScores {
            score: out.score,
            max_pods: out.max_pods,
        };
        scores.check(&module.name, nodes)?;
        Ok(scores)
    }
}

impl PlacementPolicy for WasmPlacement {
    fn name(&self) -> &str {
        self.module.name()
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        match &self.module {
            Loaded::Current(m) => m.with_live(|live| self.call(m, live, request, nodes)),
            Loaded::Legacy(m) => m.with_live(|live| self.call_legacy(m, live, request, nodes)),
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
