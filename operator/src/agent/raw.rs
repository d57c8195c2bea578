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
    /// GPU instance id (`GPU_I_ID` in dcgm-exporter's labels).
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// Framebuffer used by the instance, MiB.
    #[serde(default)]
    pub fb_used_mib: Option<u64>,
    /// Framebuffer free in the instance, MiB.
    #[serde(default)]
    pub fb_free_mib: Option<u64>,
}

/// What NVML reports about a GPU's use and wear at the time of a read: the fields dcgm-exporter
/// exports that NVML itself provides. A field the driver does not support stays `None` and its
/// metric is left out, as dcgm-exporter leaves out blank fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RawTelemetry {
    /// GPU utilisation over the driver's last sample period, percent.
    pub gpu_util: Option<u32>,
    /// Memory copy (framebuffer read/write) utilisation, percent.
    pub mem_copy_util: Option<u32>,
    /// Encoder utilisation, percent.
    pub enc_util: Option<u32>,
    /// Decoder utilisation, percent.
    pub dec_util: Option<u32>,
    /// Framebuffer used, MiB.
    pub fb_used_mib: Option<u64>,
    /// Framebuffer free, MiB.
    pub fb_free_mib: Option<u64>,
    /// Framebuffer reserved by the driver, MiB.
    pub fb_reserved_mib: Option<u64>,
    /// GPU temperature, degrees C.
    pub gpu_temp_c: Option<u32>,
    /// Memory (HBM) temperature, degrees C.
    pub memory_temp_c: Option<u32>,
    /// Power draw, milliwatts.
    pub power_mw: Option<u64>,
    /// Enforced power limit, milliwatts.
    pub power_limit_mw: Option<u64>,
    /// Energy since the driver loaded, millijoules.
    pub energy_mj: Option<u64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<u32>,
    /// PCIe replays since the driver loaded.
    pub pcie_replays: Option<u64>,
    /// Corrected (single-bit) ECC errors since the driver loaded.
    pub ecc_sbe_volatile: Option<u64>,
    /// Uncorrected (double-bit) ECC errors since the driver loaded.
    pub ecc_dbe_volatile: Option<u64>,
    /// Corrected ECC errors over the GPU's life.
    pub ecc_sbe_aggregate: Option<u64>,
    /// Uncorrected ECC errors over the GPU's life.
    pub ecc_dbe_aggregate: Option<u64>,
    /// Pages retired for repeated single-bit errors.
    pub retired_sbe: Option<u64>,
    /// Pages retired for a double-bit error.
    pub retired_dbe: Option<u64>,
    /// A page retirement waits for the next reset.
    pub retired_pending: Option<bool>,
    /// Rows remapped for correctable errors.
    pub remapped_rows_correctable: Option<u64>,
    /// Rows remapped for uncorrectable errors.
    pub remapped_rows_uncorrectable: Option<u64>,
    /// A row remap waits for the next reset.
    pub row_remap_pending: Option<bool>,
    /// A row remap failed (the GPU has run out of spare rows in a bank).
    pub row_remap_failure: Option<bool>,
    /// Why the clocks are held down: NVML's clocks-event (throttle) reason bits.
    pub clocks_event_reasons: Option<u64>,
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
    /// Use and wear at the time of the read.
    #[serde(default)]
    pub telemetry: RawTelemetry,
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
