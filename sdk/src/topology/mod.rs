//! The GPU topology model shared by the node agent, the engine and placement policies.
//!
//! One [`NodeGpus`] per node: its GPUs (identity, memory, MIG, health), which GPUs NVLink joins
//! ([`NvlinkIsland`]s, and the NVSwitch fabric clique when the node has one) and PCIe/NUMA affinity.
//! The node's place in the data-centre hierarchy comes from node labels named by Kueue's
//! `Topology` levels, so it is not part of what the agent discovers.

mod islands;

pub use islands::{GpuLink, LinkRemote, islands_from_links};

// The schema derives are for the NodeGpuTopology CRD (feature `api`); without it the model builds with serde alone,
// for the engine and for policy modules.
#[cfg(feature = "api")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pod template annotation: `nvlink` asks that each pod's GPUs on a node share one NVLink island.
pub const PODSET_REQUIRED_TOPOLOGY_ANNOTATION: &str = "sluice.dev/podset-required-topology";
/// Value of [`PODSET_REQUIRED_TOPOLOGY_ANNOTATION`] that asks for one NVLink island per pod.
pub const NVLINK: &str = "nvlink";
/// Extended resource name of whole NVIDIA GPUs.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Prefix of MIG profile resources (`nvidia.com/mig-1g.10gb`, ...).
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

/// GPU Feature Discovery's node labels, set by the node agent so existing tooling keeps working.
pub mod gfd {
    /// Number of GPUs on the node.
    pub const GPU_COUNT: &str = "nvidia.com/gpu.count";
    /// GPU product name, spaces replaced by dashes.
    pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
    /// Memory per GPU in MiB.
    pub const GPU_MEMORY: &str = "nvidia.com/gpu.memory";
    /// `<fabric cluster UUID>.<clique id>`, only on fabric-attached GPUs.
    pub const GPU_CLIQUE: &str = "nvidia.com/gpu.clique";
}

/// Health of one GPU as the node agent last saw it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GpuHealth {
    /// Schedulable: the agent's health rules found nothing failed or degrading (see `reasons`).
    pub healthy: bool,
    /// XID error codes seen since the agent started (most recent last, at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xid_errors: Vec<u64>,
    /// Volatile uncorrected ECC error count.
    #[serde(default)]
    pub ecc_uncorrected: u64,
    /// Some process runs on the GPU.
    #[serde(default)]
    pub in_use: bool,
    /// Unhealthy only because it is degrading (thermal slowdown, worn memory, a repair waiting for a reset):
    /// it still works, so nothing new is placed on it but what runs there stays, unless the operator is told
    /// to move it (`--evict-on-degraded-gpus`, with the checkpoint grace).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degrading: bool,
    /// Why the GPU is unhealthy (failed first, then degrading), from the agent's health rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// One MIG instance carved out of a GPU.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MigInstance {
    /// Profile name as the device plugin advertises it, e.g. `1g.10gb`.
    pub profile: String,
    /// Device UUID of the instance (`MIG-...`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uuid: String,
    /// Memory of the instance in MiB.
    #[serde(default)]
    pub memory_mib: u64,
}

/// One GPU of a node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// NVML index on the node.
    pub index: u32,
    /// GPU UUID (`GPU-...`).
    #[serde(default)]
    pub uuid: String,
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    #[serde(default)]
    pub model: String,
    /// Total memory in MiB.
    #[serde(default)]
    pub memory_mib: u64,
    /// PCI bus id (`00000000:18:00.0`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci_bus_id: String,
    /// NUMA node the GPU is attached to (None: unknown or not NUMA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i32>,
    /// MIG mode is enabled.
    #[serde(default)]
    pub mig_enabled: bool,
    /// MIG instances (empty unless MIG is enabled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_instances: Vec<MigInstance>,
    /// Health.
    #[serde(default)]
    pub health: GpuHealth,
}

/// GPUs joined by NVLink (directly or through NVSwitches): a pod's GPUs inside one island talk at NVLink speed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NvlinkIsland {
    /// GPU indexes, ascending.
    pub gpus: Vec<u32>,
    /// The island goes through NVSwitches (all-to-all) rather than direct GPU links.
    #[serde(default)]
    pub nvswitch: bool,
}

/// PCIe distance between two GPUs (NVML's `topology_common_ancestor`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
pub enum PcieLevel {
    /// Same board (multi-GPU board).
    Internal,
    /// Behind one PCIe switch.
    Single,
    /// Behind several PCIe switches, no host bridge crossed.
    Multiple,
    /// Behind one host bridge.
    HostBridge,
    /// On one NUMA node (CPU socket).
    Node,
    /// Across CPU sockets.
    System,
}

/// The PCIe relation of one GPU pair.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GpuPair {
    /// Lower GPU index.
    pub a: u32,
    /// Higher GPU index.
    pub b: u32,
    /// Closest common PCIe ancestor.
    pub common_ancestor: PcieLevel,
}

/// What a node's agent discovered about its GPUs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "api", derive(JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeGpus {
    /// NVIDIA driver version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub driver_version: String,
    /// GPUs by index.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// NVLink islands; a GPU with no NVLink is its own island.
    #[serde(default)]
    pub nvlink_islands: Vec<NvlinkIsland>,
    /// NVSwitch fabric clique (`<cluster UUID>.<clique id>`) for multi-node NVLink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_clique: Option<String>,
    /// PCIe relation of each GPU pair.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pcie_pairs: Vec<GpuPair>,
}

/// A problem in a [`NodeGpus`] document.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Two GPUs share an index.
    #[error("node {node}: field `gpus`: GPU index {index} appears twice")]
    DuplicateGpu {
        /// Node name.
        node: String,
        /// Repeated index.
        index: u32,
    },
    /// An island names an unknown GPU or a GPU twice.
    #[error(
        "node {node}: field `nvlinkIslands[{island}]`: GPU {index} is unknown or already in an island"
    )]
    BadIsland {
        /// Node name.
        node: String,
        /// Island position.
        island: usize,
        /// Offending GPU index.
        index: u32,
    },
}

impl NodeGpus {
    /// Checks indexes are unique and islands partition known GPUs.
    pub fn validate(&self, node: &str) -> Result<(), TopologyError> {
        let mut seen = std::collections::BTreeSet::new();
        for g in &self.gpus {
            if !seen.insert(g.index) {
                return Err(TopologyError::DuplicateGpu {
                    node: node.into(),
                    index: g.index,
                });
            }
        }
        let mut placed = std::collections::BTreeSet::new();
        for (i, isl) in self.nvlink_islands.iter().enumerate() {
            for &g in &isl.gpus {
                if !seen.contains(&g) || !placed.insert(g) {
                    return Err(TopologyError::BadIsland {
                        node: node.into(),
                        island: i,
                        index: g,
                    });
                }
            }
        }
        Ok(())
    }

    /// Islands covering every GPU: the listed islands, plus one single-GPU island per GPU none lists.
    pub fn complete_islands(&self) -> Vec<NvlinkIsland> {
        let mut out = self.nvlink_islands.clone();
        for g in &self.gpus {
            if !out.iter().any(|i| i.gpus.contains(&g.index)) {
                out.push(NvlinkIsland {
                    gpus: vec![g.index],
                    nvswitch: false,
                });
            }
        }
        out
    }

    /// Healthy GPUs that are not MIG-partitioned (schedulable as whole `nvidia.com/gpu`).
    pub fn healthy_whole_gpus(&self) -> usize {
        self.gpus
            .iter()
            .filter(|g| g.health.healthy && !g.mig_enabled)
            .count()
    }

    /// The product name shared by the GPUs (the first GPU's), as GFD writes it (spaces -> dashes).
    pub fn gfd_product(&self) -> Option<String> {
        self.gpus.first().map(|g| g.model.trim().replace(' ', "-"))
    }
}

#[cfg(test)]
mod tests;
