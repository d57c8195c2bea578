//! Placement: score a batch of candidate nodes for one pod set, in one call.
//!
//! The node batch is columnar (one vector per attribute, strings interned in one table) because a
//! list of records is copied element by element across the WebAssembly boundary, while a list of
//! integers is one bulk copy. Static columns (identity, topology, labels) change rarely; hosts may
//! keep them resident in a guest, keyed by [`NodeBatch::inventory_generation`].

use std::fmt::Debug;

use super::error::{PolicyError, PolicyFailure};

/// What a pod set asks of the topology (Kueue's pod-set topology annotations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TopologyMode {
    /// No topology request: any node of the flavor.
    #[default]
    None,
    /// All pods inside one domain of [`PodSetRequest::topology_level`], or not admitted.
    Required,
    /// As few domains as possible, starting at [`PodSetRequest::topology_level`] and climbing.
    Preferred,
    /// Topology-aware accounting without a level constraint.
    Unconstrained,
}

/// One pod set to place.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSetRequest {
    /// `namespace/name` of the workload.
    pub workload: String,
    /// Pod set name.
    pub pod_set: String,
    /// Pods to place.
    pub count: u32,
    /// Fewest pods acceptable with partial admission (equals `count` without it).
    pub min_count: u32,
    /// Resource names, in the order of [`Self::per_pod`] and of [`NodeBatch::free`]'s rows.
    pub resources: Vec<String>,
    /// Per-pod request of each resource, in Kueue's integer units (milli-CPU, bytes, counts).
    pub per_pod: Vec<i64>,
    /// GPUs each pod asks for (whole GPUs; MIG slices are ordinary resources).
    pub gpus_per_pod: u32,
    /// Topology request mode.
    pub topology_mode: TopologyMode,
    /// Level (node label key) of the topology request, when the mode names one.
    pub topology_level: Option<String>,
    /// `sluice.dev/podset-required-topology: nvlink`: each pod's GPUs on a node share one NVLink island.
    pub nvlink_required: bool,
    /// Workload priority.
    pub priority: i32,
    /// Workload labels.
    pub labels: Vec<(String, String)>,
}

/// Candidate nodes, one column per attribute; every column has one entry per node unless noted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeBatch {
    /// Changes whenever a static column changes (hosts may skip resending static columns).
    pub inventory_generation: u64,
    /// Interned strings; entry 0 is always the empty string.
    pub strings: Vec<String>,
    /// Static: topology level label keys (string ids), outermost (e.g. block) first, hostname last.
    pub levels: Vec<u32>,
    /// Static: node name (string id).
    pub name: Vec<u32>,
    /// Static: node-major, `levels.len()` entries per node: the node's domain value at each level (string id).
    pub domain: Vec<u32>,
    /// Static: GPU model (string id; 0 when the node has no GPU).
    pub gpu_model: Vec<u32>,
    /// Static: memory per GPU in MiB.
    pub gpu_memory_mib: Vec<u64>,
    /// Static: NVSwitch fabric clique (string id; 0 when none).
    pub fabric_clique: Vec<u32>,
    /// Static: label offsets, `nodes + 1` entries; node i's labels are `label_keys/values[off[i]..off[i+1]]`.
    pub label_offsets: Vec<u32>,
    /// Static: label keys (string ids).
    pub label_keys: Vec<u32>,
    /// Static: label values (string ids).
    pub label_values: Vec<u32>,
    /// Dynamic: the node is Ready and schedulable.
    pub ready: Vec<bool>,
    /// Dynamic: healthy GPUs on the node.
    pub gpu_total: Vec<u32>,
    /// Dynamic: healthy GPUs not held by admitted workloads.
    pub gpu_free: Vec<u32>,
    /// Dynamic: NVLink island offsets, `nodes + 1` entries, into `island_size`/`island_free`.
    pub island_offsets: Vec<u32>,
    /// Dynamic: healthy GPUs in each NVLink island.
    pub island_size: Vec<u32>,
    /// Dynamic: free healthy GPUs in each NVLink island.
    pub island_free: Vec<u32>,
    /// Dynamic: node-major, `request.resources.len()` entries per node: free amount of each requested resource.
    pub free: Vec<i64>,
    /// Host side, not sent: names this batch's run of dynamic columns ([`next_dynamic_epoch`]); 0 says nothing is
    /// known, so a module is sent every row.
    pub dynamic_epoch: u64,
    /// Host side, not sent: rows whose dynamic columns changed since `dynamic_epoch` began, oldest first (repeats
    /// allowed). A module that saw this epoch's first `k` changes is sent only the rows after them.
    pub changed_rows: Vec<u32>,
}

/// A process-wide fresh value for [`NodeBatch::dynamic_epoch`] (never 0), so two batches never share one.
pub fn next_dynamic_epoch() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl NodeBatch {
    /// Number of nodes in the batch.
    pub fn len(&self) -> usize {
        self.name.len()
    }

    /// Whether the batch has no node.
    pub fn is_empty(&self) -> bool {
        self.name.is_empty()
    }

    /// The interned string `id` ("" when out of range).
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", String::as_str)
    }
}

/// A policy's answer: one score and one pod cap per node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeScores {
    /// Higher is better; finite numbers only.
    pub score: Vec<f64>,
    /// Most pods of this pod set the node may take: 0 rejects the node, `u32::MAX` leaves it to capacity.
    pub max_pods: Vec<u32>,
}

impl NodeScores {
    /// Checks the answer against the batch it scored: lengths match and every score is finite.
    pub fn check(&self, policy: &str, nodes: &NodeBatch) -> Result<(), PolicyError> {
        let n = nodes.len();
        if self.score.len() != n || self.max_pods.len() != n {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Malformed,
                format!(
                    "returned {} scores and {} pod caps for {n} nodes",
                    self.score.len(),
                    self.max_pods.len()
                ),
            ));
        }
        // A branch-free scan first (it vectorises); the position only when something is wrong.
        let all_finite = self.score.iter().fold(true, |ok, s| ok & s.is_finite());
        if let Some(i) = (!all_finite)
            .then(|| self.score.iter().position(|s| !s.is_finite()))
            .flatten()
        {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Malformed,
                format!(
                    "score of node {} is {}",
                    nodes.string(nodes.name[i]),
                    self.score[i]
                ),
            ));
        }
        Ok(())
    }
}

/// Scores candidate nodes for a pod set; the engine's gang placement uses the scores to choose
/// domains and nodes. Implementations: the built-in default, native policies, WebAssembly modules.
pub trait PlacementPolicy: Debug + Send + Sync {
    /// Name used in metrics, events and errors.
    fn name(&self) -> &str;
    /// Scores every node of `nodes` for `request` in one call.
    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError>;
    /// Whether the scores depend only on what is asked for (pod set and nodes), not on which workload asks
    /// (its name, its priority) nor on when, so the engine may reuse an answer for an identical request.
    fn reusable(&self) -> bool {
        false
    }
    /// Whether a node's score and cap depend only on its own row of `nodes` and on the request's resources,
    /// per-pod amounts, GPUs per pod and NVLink requirement: not on other nodes, nor on which workload asks. A
    /// module's guest then rescores only the rows that changed since its last call for such a request.
    fn row_local(&self) -> bool {
        false
    }
}

/// A shared policy is a policy (the operator shares one module between ClusterQueues).
impl<P: PlacementPolicy + ?Sized> PlacementPolicy for std::sync::Arc<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn score(&self, request: &PodSetRequest, nodes: &NodeBatch) -> Result<NodeScores, PolicyError> {
        (**self).score(request, nodes)
    }

    fn reusable(&self) -> bool {
        (**self).reusable()
    }

    fn row_local(&self) -> bool {
        (**self).row_local()
    }
}
