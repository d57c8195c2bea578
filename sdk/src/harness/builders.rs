//! Builders for fixture node batches and pod sets.

use std::collections::HashMap;

use crate::policy::placement::{NodeBatch, PodSetRequest, TopologyMode};

/// One fixture node.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    name: String,
    path: Vec<String>,
    gpu_model: String,
    gpu_memory_mib: u64,
    gpu_total: u32,
    gpu_free: u32,
    islands: Vec<(u32, u32)>,
    ready: bool,
    labels: Vec<(String, String)>,
    free: Vec<(String, i64)>,
}

impl NodeSpec {
    /// A Ready node with `total` GPUs (one NVLink island), `free` of them free.
    pub fn gpu(name: &str, total: u32, free: u32) -> Self {
        Self {
            name: name.into(),
            path: Vec::new(),
            gpu_model: "NVIDIA-H100-80GB-HBM3".into(),
            gpu_memory_mib: 81_559,
            gpu_total: total,
            gpu_free: free.min(total),
            islands: vec![(total, free.min(total))],
            ready: true,
            labels: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Domain values above the node, outermost first (one per level of the batch, hostname excluded).
    pub fn path(mut self, path: &[&str]) -> Self {
        self.path = path.iter().map(|s| s.to_string()).collect();
        self
    }

    /// NVLink islands as `(size, free)`.
    pub fn islands(mut self, islands: &[(u32, u32)]) -> Self {
        self.islands = islands.to_vec();
        self
    }

    /// GPU model and memory per GPU.
    pub fn model(mut self, model: &str, memory_mib: u64) -> Self {
        self.gpu_model = model.into();
        self.gpu_memory_mib = memory_mib;
        self
    }

    /// Marks the node not Ready.
    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// Free amount of a requested resource (the GPU resource defaults to the free GPUs).
    pub fn free(mut self, resource: &str, amount: i64) -> Self {
        self.free.push((resource.into(), amount));
        self
    }
}

/// Builds a [`NodeBatch`] from [`NodeSpec`]s.
#[derive(Clone, Debug)]
pub struct NodeBatchBuilder {
    levels: Vec<String>,
    resources: Vec<String>,
    nodes: Vec<NodeSpec>,
    generation: u64,
}

impl NodeBatchBuilder {
    /// A batch whose topology levels are `levels` (outermost first); the hostname level is added last.
    pub fn new(levels: &[&str]) -> Self {
        Self {
            levels: levels.iter().map(|s| s.to_string()).collect(),
            resources: vec!["nvidia.com/gpu".into()],
            nodes: Vec::new(),
            generation: 1,
        }
    }

    /// The requested resources, in the order of the pod set's (default: `nvidia.com/gpu`).
    pub fn resources(mut self, resources: &[&str]) -> Self {
        self.resources = resources.iter().map(|s| s.to_string()).collect();
        self
    }

    /// The inventory generation.
    pub fn generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    /// Adds a node.
    pub fn node(mut self, node: NodeSpec) -> Self {
        self.nodes.push(node);
        self
    }

    /// Builds the columns.
    pub fn build(self) -> NodeBatch {
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut b = NodeBatch {
            inventory_generation: self.generation,
            strings: vec![String::new()],
            ..NodeBatch::default()
        };
        let mut intern = |b: &mut NodeBatch, s: &str| -> u32 {
            if s.is_empty() {
                return 0;
            }
            *ids.entry(s.to_string()).or_insert_with(|| {
                b.strings.push(s.to_string());
                (b.strings.len() - 1) as u32
            })
        };
        let mut levels: Vec<String> = self.levels.clone();
        levels.push("kubernetes.io/hostname".into());
        for l in &levels {
            let id = intern(&mut b, l);
            b.levels.push(id);
        }
        b.label_offsets.push(0);
        b.island_offsets.push(0);
        for n in &self.nodes {
            let id = intern(&mut b, &n.name);
            b.name.push(id);
            for i in 0..self.levels.len() {
                let v = n.path.get(i).map_or("", String::as_str);
                let id = intern(&mut b, v);
                b.domain.push(id);
            }
            let id = intern(&mut b, &n.name);
            b.domain.push(id);
            let id = intern(&mut b, &n.gpu_model);
            b.gpu_model.push(id);
            b.gpu_memory_mib.push(n.gpu_memory_mib);
            b.fabric_clique.push(0);
            for (k, v) in &n.labels {
                let (k, v) = (intern(&mut b, k), intern(&mut b, v));
                b.label_keys.push(k);
                b.label_values.push(v);
            }
            b.label_offsets.push(b.label_keys.len() as u32);
            b.ready.push(n.ready);
            b.gpu_total.push(n.gpu_total);
            b.gpu_free.push(n.gpu_free);
            for &(size, free) in &n.islands {
                b.island_size.push(size);
                b.island_free.push(free);
            }
            b.island_offsets.push(b.island_size.len() as u32);
            for r in &self.resources {
                let explicit = n.free.iter().find(|(k, _)| k == r).map(|(_, v)| *v);
                let v = explicit.unwrap_or(if r == "nvidia.com/gpu" {
                    i64::from(n.gpu_free)
                } else {
                    0
                });
                b.free.push(v);
            }
        }
        b
    }
}

/// Takes one GPU on every `step`-th node from `offset` (frees one where none is free), as admissions and
/// evictions would, together with one unit of each resource of the node's `free` row, and lists the rows in
/// `changed_rows` (starting an epoch when the batch has none), so a module holding the batch is sent only them.
pub fn churn(b: &mut NodeBatch, step: usize, offset: usize) {
    // As the engine does: a log longer than the batch starts a new epoch (the module is sent everything once).
    if b.dynamic_epoch == 0 || b.changed_rows.len() > b.len() {
        b.dynamic_epoch = crate::policy::next_dynamic_epoch();
        b.changed_rows.clear();
    }
    let nres = b.free.len().checked_div(b.len()).unwrap_or(0);
    for i in (offset..b.len()).step_by(step.max(1)) {
        let (lo, hi) = (
            b.island_offsets[i] as usize,
            b.island_offsets[i + 1] as usize,
        );
        let take = (lo..hi).find(|&k| b.island_free[k] > 0);
        let delta: i64 = match take {
            Some(k) => {
                b.island_free[k] -= 1;
                -1
            }
            None => match (lo..hi).find(|&k| b.island_free[k] < b.island_size[k]) {
                Some(k) => {
                    b.island_free[k] += 1;
                    1
                }
                None => 0,
            },
        };
        b.gpu_free[i] = b.gpu_free[i].saturating_add_signed(delta as i32);
        for v in &mut b.free[i * nres..(i + 1) * nres] {
            *v += delta;
        }
        b.changed_rows.push(i as u32);
    }
}

/// Builds a [`PodSetRequest`].
#[derive(Clone, Debug)]
pub struct PodSetBuilder {
    r: PodSetRequest,
}

impl PodSetBuilder {
    /// `count` pods of workload `workload` (pod set `main`), one GPU each.
    pub fn new(workload: &str, count: u32) -> Self {
        Self {
            r: PodSetRequest {
                workload: workload.into(),
                pod_set: "main".into(),
                count,
                min_count: count,
                resources: vec!["nvidia.com/gpu".into()],
                per_pod: vec![1],
                gpus_per_pod: 1,
                ..PodSetRequest::default()
            },
        }
    }

    /// GPUs per pod (also the per-pod `nvidia.com/gpu` request).
    pub fn gpus_per_pod(mut self, gpus: u32) -> Self {
        self.r.gpus_per_pod = gpus;
        if let Some(i) = self.r.resources.iter().position(|r| r == "nvidia.com/gpu") {
            self.r.per_pod[i] = i64::from(gpus);
        }
        self
    }

    /// Topology request.
    pub fn topology(mut self, mode: TopologyMode, level: &str) -> Self {
        self.r.topology_mode = mode;
        self.r.topology_level = Some(level.into());
        self
    }

    /// Requires each pod's GPUs in one NVLink island.
    pub fn nvlink(mut self) -> Self {
        self.r.nvlink_required = true;
        self
    }

    /// Priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.r.priority = p;
        self
    }

    /// Adds a workload label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.r.labels.push((k.into(), v.into()));
        self
    }

    /// The request.
    pub fn build(self) -> PodSetRequest {
        self.r
    }
}

/// A synthetic cluster of `nodes` 8-GPU nodes (two 4-GPU NVLink islands each) in blocks of 16
/// racks of 8 nodes, with a deterministic spread of free GPUs; used by benchmarks.
pub fn synthetic_cluster(nodes: usize) -> NodeBatch {
    let mut b = NodeBatchBuilder::new(&[
        "cloud.provider.com/topology-block",
        "cloud.provider.com/topology-rack",
    ]);
    for i in 0..nodes {
        // A cheap deterministic mix: about a third whole-free, a third partly used, a third full.
        let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59;
        let free = match h % 3 {
            0 => 8,
            1 => (h % 7) as u32 + 1,
            _ => 0,
        };
        let a = free.min(4);
        let rack = i / 8;
        let block = rack / 16;
        b = b.node(
            NodeSpec::gpu(&format!("node-{i}"), 8, free)
                .path(&[&format!("block-{block}"), &format!("rack-{rack}")])
                .islands(&[(4, a), (4, free - a)]),
        );
    }
    b.build()
}
