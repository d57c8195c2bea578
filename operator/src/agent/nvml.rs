//! The real GPU source: NVML through `nvml-wrapper`, which loads `libnvidia-ml.so.1` at run time
//! (so the agent builds and starts without a driver, and says so clearly when there is none).

use std::sync::mpsc::{Receiver, channel};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, RetirementCause, TemperatureSensor, TopologyLevel,
};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_MEMORY_TEMP;
use sluice_sdk::topology::PcieLevel;

use super::AgentError;
use super::raw::{RawGpu, RawLink, RawMig, RawNode, RawTelemetry, RemoteType};

/// Most NVLinks per GPU NVML knows of (`NVML_NVLINK_MAX_LINKS`).
const MAX_LINKS: u32 = 18;
/// NVML's "MIG enabled" mode value.
const MIG_ENABLED: u32 = 1;

fn nvml_err(what: &str) -> impl Fn(NvmlError) -> AgentError + '_ {
    move |e| AgentError::Nvml {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// Reads GPUs through NVML; XID events arrive on a watcher thread between reads.
pub struct NvmlSource {
    nvml: Nvml,
    xids: Receiver<(String, u64)>,
    seen: std::collections::BTreeMap<String, Vec<u64>>,
    wake: std::sync::Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource").finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// Loads NVML; fails with [`AgentError::NoNvml`] when there is no driver or no GPU.
    pub fn open() -> Result<Self, AgentError> {
        let nvml = Nvml::init().map_err(|e| AgentError::NoNvml(e.to_string()))?;
        let count = nvml.device_count().map_err(nvml_err("device count"))?;
        if count == 0 {
            return Err(AgentError::NoNvml("the driver sees no GPU".into()));
        }
        let (tx, rx) = channel();
        let wake = std::sync::Arc::new(tokio::sync::Notify::new());
        let waker = wake.clone();
        // The watcher has its own NVML handle (NVML counts initialisations), so its event set
        // does not borrow from the source.
        std::thread::spawn(move || {
            let Ok(nvml) = Nvml::init() else { return };
            let Ok(mut set) = nvml.create_event_set() else {
                return;
            };
            for i in 0..count {
                if let Ok(d) = nvml.device_by_index(i) {
                    match d.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                        Ok(s) => set = s,
                        Err(e) => {
                            tracing::warn!(gpu = i, error = %e, "XID events unavailable");
                            return;
                        }
                    }
                }
            }
            loop {
                match set.wait(10_000) {
                    Ok(ev) => {
                        let Some(XidError::Value(xid)) = ev.event_data else {
                            continue;
                        };
                        let uuid = ev.device.uuid().unwrap_or_default();
                        if tx.send((uuid, xid)).is_err() {
                            return;
                        }
                        // An XID is read into the model at once, not at the next interval.
                        waker.notify_one();
                    }
                    Err(NvmlError::Timeout) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "XID watcher stopped");
                        return;
                    }
                }
            }
        });
        Ok(Self {
            nvml,
            xids: rx,
            seen: Default::default(),
            wake,
        })
    }

    fn gpu(&self, d: &Device<'_>) -> Result<RawGpu, AgentError> {
        let uuid = d.uuid().map_err(nvml_err("uuid"))?;
        let bus_id = d.pci_info().map_err(nvml_err("PCI info"))?.bus_id;
        let mig_enabled = d
            .mig_mode()
            .map(|m| m.current == MIG_ENABLED)
            .unwrap_or(false);
        let mut mig = Vec::new();
        if mig_enabled {
            let max = d.mig_device_count().unwrap_or(0);
            for k in 0..max {
                let Ok(m) = d.mig_device_by_index(k) else {
                    continue;
                };
                let name = m.name().unwrap_or_default();
                // MIG device names end in the profile: "NVIDIA H100 80GB HBM3 MIG 1g.10gb".
                let profile = name.rsplit(' ').next().unwrap_or_default().to_string();
                let memory = m.memory_info().ok();
                mig.push(RawMig {
                    profile,
                    uuid: m.uuid().unwrap_or_default(),
                    memory_mib: memory.as_ref().map_or(0, |i| i.total / MIB),
                    gpu_instance_id: ffi::gpu_instance_id(&self.nvml, &m),
                    fb_used_mib: memory.as_ref().map(|i| i.used / MIB),
                    fb_free_mib: memory.as_ref().map(|i| i.free / MIB),
                });
            }
        }
        let mut links = Vec::new();
        for l in 0..MAX_LINKS {
            let link = d.link_wrapper_for(l);
            let Ok(active) = link.is_active() else {
                continue;
            };
            if !active {
                continue;
            }
            let remote_bus_id = link.remote_pci_info().map(|p| p.bus_id).unwrap_or_default();
            let remote_type = ffi::remote_type(&self.nvml, d, l);
            links.push(RawLink {
                active,
                remote_bus_id,
                remote_type,
            });
        }
        Ok(RawGpu {
            index: d.index().map_err(nvml_err("index"))?,
            name: d.name().map_err(nvml_err("name"))?,
            memory_bytes: d.memory_info().map_err(nvml_err("memory"))?.total,
            numa_node: numa_node(&bus_id),
            mig_enabled,
            mig,
            links,
            xids: self.seen.get(&uuid).cloned().unwrap_or_default(),
            ecc_uncorrected: d
                .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                .unwrap_or(0),
            processes: d
                .running_compute_processes()
                .map(|p| p.len() as u32)
                .unwrap_or(0),
            fabric: ffi::fabric_clique(&self.nvml, d),
            telemetry: telemetry(&self.nvml, d),
            bus_id,
            uuid,
        })
    }
}

/// One MiB in bytes.
const MIB: u64 = 1024 * 1024;

/// Reads the dcgm-exporter fields NVML provides; a query the GPU does not support leaves its field
/// empty (so an older GPU or driver loses a metric, not the whole read).
fn telemetry(nvml: &Nvml, d: &Device<'_>) -> RawTelemetry {
    let util = d.utilization_rates().ok();
    let memory = d.memory_info().ok();
    let ecc = |e: MemoryError, c: EccCounter| d.total_ecc_errors(e, c).ok();
    let retired = |c: RetirementCause| d.retired_pages(c).ok().map(|p| p.len() as u64);
    let remap = ffi::remapped_rows(nvml, d);
    let memory_temp = d
        .field_values_for(&[FieldId(NVML_FI_DEV_MEMORY_TEMP)])
        .ok()
        .and_then(|v| v.into_iter().next())
        .and_then(|r| r.ok())
        .and_then(|s| s.value.ok())
        .and_then(|v| match v {
            SampleValue::U32(x) => Some(x),
            SampleValue::U64(x) => u32::try_from(x).ok(),
            SampleValue::I64(x) => u32::try_from(x).ok(),
            SampleValue::F64(x) if x >= 0.0 => Some(x as u32),
            SampleValue::F64(_) => None,
        });
    RawTelemetry {
        gpu_util: util.as_ref().map(|u| u.gpu),
        mem_copy_util: util.as_ref().map(|u| u.memory),
        enc_util: d.encoder_utilization().ok().map(|u| u.utilization),
        dec_util: d.decoder_utilization().ok().map(|u| u.utilization),
        fb_used_mib: memory.as_ref().map(|m| m.used / MIB),
        fb_free_mib: memory.as_ref().map(|m| m.free / MIB),
        fb_reserved_mib: memory.as_ref().map(|m| m.reserved / MIB),
        gpu_temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
        memory_temp_c: memory_temp,
        power_mw: d.power_usage().ok().map(u64::from),
        power_limit_mw: d.enforced_power_limit().ok().map(u64::from),
        energy_mj: d.total_energy_consumption().ok(),
        sm_clock_mhz: d.clock_info(Clock::SM).ok(),
        mem_clock_mhz: d.clock_info(Clock::Memory).ok(),
        pcie_replays: d.pcie_replay_counter().ok().map(u64::from),
        ecc_sbe_volatile: ecc(MemoryError::Corrected, EccCounter::Volatile),
        ecc_dbe_volatile: ecc(MemoryError::Uncorrected, EccCounter::Volatile),
        ecc_sbe_aggregate: ecc(MemoryError::Corrected, EccCounter::Aggregate),
        ecc_dbe_aggregate: ecc(MemoryError::Uncorrected, EccCounter::Aggregate),
        retired_sbe: retired(RetirementCause::MultipleSingleBitEccErrors),
        retired_dbe: retired(RetirementCause::DoubleBitEccError),
        retired_pending: d.are_pages_pending_retired().ok(),
        remapped_rows_correctable: remap.map(|r| r.correctable),
        remapped_rows_uncorrectable: remap.map(|r| r.uncorrectable),
        row_remap_pending: remap.map(|r| r.pending),
        row_remap_failure: remap.map(|r| r.failure),
        clocks_event_reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
    }
}

/// NUMA node of a PCI device from sysfs (NVML's bus id has an 8-digit domain, sysfs a 4-digit one).
fn numa_node(bus_id: &str) -> Option<i32> {
    let short = bus_id
        .get(bus_id.len().checked_sub(12)?..)?
        .to_ascii_lowercase();
    let text = std::fs::read_to_string(format!("/sys/bus/pci/devices/{short}/numa_node")).ok()?;
    text.trim().parse::<i32>().ok().filter(|n| *n >= 0)
}

fn pcie_level(l: TopologyLevel) -> PcieLevel {
    match l {
        TopologyLevel::Internal => PcieLevel::Internal,
        TopologyLevel::Single => PcieLevel::Single,
        TopologyLevel::Multiple => PcieLevel::Multiple,
        TopologyLevel::HostBridge => PcieLevel::HostBridge,
        TopologyLevel::Node => PcieLevel::Node,
        TopologyLevel::System => PcieLevel::System,
    }
}

impl super::GpuSource for NvmlSource {
    fn wake(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        Some(self.wake.clone())
    }

    fn read(&mut self) -> Result<RawNode, AgentError> {
        while let Ok((uuid, xid)) = self.xids.try_recv() {
            self.seen.entry(uuid).or_default().push(xid);
        }
        let count = self.nvml.device_count().map_err(nvml_err("device count"))?;
        let mut gpus = Vec::new();
        let mut devices = Vec::new();
        for i in 0..count {
            let d = self
                .nvml
                .device_by_index(i)
                .map_err(nvml_err("device by index"))?;
            gpus.push(self.gpu(&d)?);
            devices.push(d);
        }
        let mut pairs = Vec::new();
        for a in 0..devices.len() {
            for b in a + 1..devices.len() {
                let Ok(other) = self.nvml.device_by_index(b as u32) else {
                    continue;
                };
                if let Ok(level) = devices[a].topology_common_ancestor(other) {
                    pairs.push((gpus[a].index, gpus[b].index, pcie_level(level)));
                }
            }
        }
        Ok(RawNode {
            driver_version: self.nvml.sys_driver_version().unwrap_or_default(),
            gpus,
            pairs,
        })
    }
}

/// Raw NVML calls through `nvml-wrapper-sys`: the fabric clique (not wrapped) and the NVLink
/// remote device type (the wrapper's `remote_device_type` discards the driver's answer).
mod ffi {
    use nvml_wrapper::{Device, Nvml};
    use nvml_wrapper_sys::bindings::{
        NVML_GPU_FABRIC_STATE_COMPLETED, nvmlGpuFabricInfoV_t,
        nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU,
        nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH, nvmlIntNvLinkDeviceType_t,
        nvmlReturn_enum_NVML_SUCCESS,
    };

    use super::RemoteType;

    /// `nvmlDeviceGetRemappedRows`' answer (Ampere and later).
    #[derive(Clone, Copy)]
    pub(super) struct RemappedRows {
        pub correctable: u64,
        pub uncorrectable: u64,
        pub pending: bool,
        pub failure: bool,
    }

    /// Rows remapped on `d`; None where the GPU or driver has no row remapper.
    pub(super) fn remapped_rows(nvml: &Nvml, d: &Device<'_>) -> Option<RemappedRows> {
        let f = nvml.lib().nvmlDeviceGetRemappedRows.as_ref().ok()?;
        let (mut corr, mut unc, mut pending, mut failure) = (0, 0, 0, 0);
        // SAFETY: the handle belongs to the live `nvml`, and the four outputs outlive the call.
        let rc = unsafe { f(d.handle(), &mut corr, &mut unc, &mut pending, &mut failure) };
        (rc == nvmlReturn_enum_NVML_SUCCESS).then_some(RemappedRows {
            correctable: u64::from(corr),
            uncorrectable: u64::from(unc),
            pending: pending != 0,
            failure: failure != 0,
        })
    }

    /// The GPU instance id of MIG device `d`.
    pub(super) fn gpu_instance_id(nvml: &Nvml, d: &Device<'_>) -> Option<u32> {
        let f = nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref().ok()?;
        let mut id = 0;
        // SAFETY: the handle belongs to the live `nvml`, and `id` outlives the call.
        let rc = unsafe { f(d.handle(), &mut id) };
        (rc == nvmlReturn_enum_NVML_SUCCESS).then_some(id)
    }

    /// NVML's `NVML_STRUCT_VERSION(GpuFabricInfo, 3)`: size in the low bits, version in the top byte.
    fn fabric_info_version() -> u32 {
        (std::mem::size_of::<nvmlGpuFabricInfoV_t>() as u32) | (3 << 24)
    }

    /// What is at the far end of NVLink `link` of `d`.
    pub(super) fn remote_type(nvml: &Nvml, d: &Device<'_>, link: u32) -> RemoteType {
        let Ok(f) = nvml.lib().nvmlDeviceGetNvLinkRemoteDeviceType.as_ref() else {
            return RemoteType::Other;
        };
        let mut t: nvmlIntNvLinkDeviceType_t = 0;
        // SAFETY: the handle belongs to the live `nvml`, and `t` outlives the call.
        let rc = unsafe { f(d.handle(), link, &mut t) };
        match t {
            _ if rc != nvmlReturn_enum_NVML_SUCCESS => RemoteType::Other,
            x if x == nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU => RemoteType::Gpu,
            x if x == nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH => {
                RemoteType::Switch
            }
            _ => RemoteType::Other,
        }
    }

    /// (cluster UUID, clique id) once the GPU's fabric registration completed; None when the
    /// driver lacks the call or the GPU is not fabric-attached.
    pub(super) fn fabric_clique(nvml: &Nvml, d: &Device<'_>) -> Option<(String, u32)> {
        let f = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref().ok()?;
        // SAFETY: a zeroed plain C struct is a valid input once its version is set.
        let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
        info.version = fabric_info_version();
        // SAFETY: the handle belongs to the live `nvml`, and `info` outlives the call.
        let rc = unsafe { f(d.handle(), &mut info) };
        if rc != nvmlReturn_enum_NVML_SUCCESS
            || info.status != nvmlReturn_enum_NVML_SUCCESS
            || u32::from(info.state) != NVML_GPU_FABRIC_STATE_COMPLETED
        {
            return None;
        }
        let u = info.clusterUuid;
        if u.iter().all(|&b| b == 0) {
            return None;
        }
        let hex =
            |r: std::ops::Range<usize>| u[r].iter().map(|b| format!("{b:02x}")).collect::<String>();
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            hex(0..4),
            hex(4..6),
            hex(6..8),
            hex(8..10),
            hex(10..16)
        );
        Some((uuid, info.cliqueId))
    }
}
