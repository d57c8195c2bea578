//! What the agent reads from the driver, before any derivation: one record per GPU, shaped after
//! NVML's queries so a fake file and the real library fill the same structure.

use serde::{Deserialize, Serialize};
use sluice_sdk::topology::PcieLevel;

/// The far end of an NVLink (NVML's `remote_device_type`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RemoteType {
    /// A GPU.
    Gpu,
    /// An NVSwitch.
    Switch,
    /// IBM NPU or unknown.
    Other,
}

/// One NVLink of a GPU.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RawLink {
    /// The link is up.
    pub active: bool,
    /// PCI bus id of the far end.
    pub remote_bus_id: String,
    /// What the far end is.
    pub remote_type: RemoteType,
}

/// One MIG instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RawMig {
    /// Profile, e.g. `1g.10gb`.
    pub profile: String,
    /// Instance UUID.
    #[serde(default)]
    pub uuid: String,
    /// Memory in MiB.
    #[serde(default)]
    pub memory_mib: u64,
}

/// One GPU as NVML reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RawGpu {
    /// NVML index.
    pub index: u32,
    /// UUID.
    pub uuid: String,
    /// Product name.
    pub name: String,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// PCI bus id.
    pub bus_id: String,
    /// NUMA node (None when unknown).
    #[serde(default)]
    pub numa_node: Option<i32>,
    /// Current MIG mode is enabled.
    #[serde(default)]
    pub mig_enabled: bool,
    /// MIG instances.
    #[serde(default)]
    pub mig: Vec<RawMig>,
    /// NVLinks (all of them; inactive ones are skipped by the derivation).
    #[serde(default)]
    pub links: Vec<RawLink>,
    /// Critical XID events seen.
    #[serde(default)]
    pub xids: Vec<u64>,
    /// Volatile uncorrected ECC errors.
    #[serde(default)]
    pub ecc_uncorrected: u64,
    /// Compute processes running.
    #[serde(default)]
    pub processes: u32,
    /// NVSwitch fabric: (cluster UUID, clique id) when the GPU is fabric-attached.
    #[serde(default)]
    pub fabric: Option<(String, u32)>,
}

/// What the agent read on one node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RawNode {
    /// Driver version.
    #[serde(default)]
    pub driver_version: String,
    /// GPUs.
    pub gpus: Vec<RawGpu>,
    /// `topology_common_ancestor` for GPU index pairs (a < b).
    #[serde(default)]
    pub pairs: Vec<(u32, u32, PcieLevel)>,
}
