//! The agent's `/metrics`: per-GPU families under dcgm-exporter 4.5's names and labels, for the
//! fields NVML itself provides, so dashboards and alerts written for dcgm-exporter work unchanged.
//!
//! Every family is a gauge. dcgm-exporter types some of them `counter` in Prometheus' text format
//! without a `_total` suffix; OpenMetrics (what prometheus-client writes) requires the suffix on a
//! counter, and the name is what queries match, so the names stay dcgm-exporter's and the type is
//! gauge (`rate()` and `increase()` work the same on them).

use std::collections::BTreeMap;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use sluice_sdk::topology::NodeGpus;

use super::raw::{RawGpu, RawMig, RawNode, RawTelemetry};

/// One container holding a GPU or MIG instance, from the kubelet's pod-resources API.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    /// Pod name.
    pub pod: String,
    /// Pod namespace.
    pub namespace: String,
    /// Container name.
    pub container: String,
}

/// Who holds each device, keyed by the device id the device plugin allocated: a GPU UUID
/// (`GPU-...`) or a MIG instance UUID (`MIG-...`).
pub type Holders = BTreeMap<String, Vec<Holder>>;

/// A value of one field: whole numbers stay whole, power is in watts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Int(i64),
    Float(f64),
}

fn int<T: TryInto<i64>>(v: Option<T>) -> Option<Value> {
    v.and_then(|x| x.try_into().ok()).map(Value::Int)
}

fn flag(v: Option<bool>) -> Option<Value> {
    v.map(|b| Value::Int(i64::from(b)))
}

fn watts(mw: Option<u64>) -> Option<Value> {
    mw.map(|x| Value::Float(x as f64 / 1000.0))
}

type Field = (
    &'static str,
    &'static str,
    fn(&RawTelemetry) -> Option<Value>,
);

/// The GPU-level families: dcgm-exporter's name, its help text, and how to read the value.
const GPU_FIELDS: &[Field] = &[
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        |t| int(t.sm_clock_mhz),
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "Memory clock frequency (in MHz).",
        |t| int(t.mem_clock_mhz),
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "Memory temperature (in C).",
        |t| int(t.memory_temp_c),
    ),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", |t| {
        int(t.gpu_temp_c)
    }),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", |t| {
        watts(t.power_mw)
    }),
    (
        "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
        "Effective power limit the driver enforces (in W).",
        |t| watts(t.power_limit_mw),
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        |t| int(t.energy_mj),
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries.",
        |t| int(t.pcie_replays),
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", |t| {
        int(t.gpu_util)
    }),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        |t| int(t.mem_copy_util),
    ),
    ("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", |t| {
        int(t.enc_util)
    }),
    ("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", |t| {
        int(t.dec_util)
    }),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        |t| int(t.fb_free_mib),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        |t| int(t.fb_used_mib),
    ),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        "Framebuffer memory reserved (in MiB).",
        |t| int(t.fb_reserved_mib),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "Total number of single-bit volatile ECC errors.",
        |t| int(t.ecc_sbe_volatile),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "Total number of double-bit volatile ECC errors.",
        |t| int(t.ecc_dbe_volatile),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "Total number of single-bit persistent ECC errors.",
        |t| int(t.ecc_sbe_aggregate),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "Total number of double-bit persistent ECC errors.",
        |t| int(t.ecc_dbe_aggregate),
    ),
    (
        "DCGM_FI_DEV_RETIRED_SBE",
        "Total number of retired pages due to single-bit errors.",
        |t| int(t.retired_sbe),
    ),
    (
        "DCGM_FI_DEV_RETIRED_DBE",
        "Total number of retired pages due to double-bit errors.",
        |t| int(t.retired_dbe),
    ),
    (
        "DCGM_FI_DEV_RETIRED_PENDING",
        "Whether a page retirement waits for the next GPU reset (1) or not (0).",
        |t| flag(t.retired_pending),
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors.",
        |t| int(t.remapped_rows_uncorrectable),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors.",
        |t| int(t.remapped_rows_correctable),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "Whether remapping of rows has failed.",
        |t| flag(t.row_remap_failure),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "Whether a row remap waits for the next GPU reset (1) or not (0).",
        |t| flag(t.row_remap_pending),
    ),
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "Current clock event (throttle) reasons, NVML's bitmask.",
        |t| int(t.clocks_event_reasons),
    ),
];

/// The XID family: value and `err_code` are the last XID seen (0 for none).
pub const XID_FAMILY: &str = "DCGM_FI_DEV_XID_ERRORS";

/// The MIG-instance families (framebuffer per GPU instance).
type MigField = (&'static str, &'static str, fn(&RawMig) -> Option<Value>);

const MIG_FIELDS: &[MigField] = &[
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        |m| int(m.fb_free_mib),
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        |m| int(m.fb_used_mib),
    ),
];

/// The agent's own verdict per GPU: `state` is healthy, degrading or failed (value 1).
pub const HEALTH_FAMILY: &str = "sluice_gpu_health";

/// Every dcgm-exporter family name the agent can export (for tests and docs).
pub fn family_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = GPU_FIELDS.iter().map(|f| f.0).collect();
    names.push(XID_FAMILY);
    names.sort_unstable();
    names
}

/// A short name for the XIDs NVIDIA documents most, as dcgm-exporter's `err_msg` label gives one.
pub fn xid_message(xid: u64) -> &'static str {
    match xid {
        0 => "No Error",
        13 => "Graphics Engine Exception",
        31 => "GPU memory page fault",
        43 => "GPU stopped processing",
        45 => "Preemptive cleanup, due to previous errors",
        48 => "Double Bit ECC Error",
        61 => "Internal micro-controller breakpoint/warning",
        62 => "Internal micro-controller halt",
        63 => "ECC page retirement or row remapping recording event",
        64 => "ECC page retirement or row remapper recording failure",
        74 => "NVLINK Error",
        79 => "GPU has fallen off the bus",
        92 => "High single-bit ECC error rate",
        94 => "Contained ECC error",
        95 => "Uncontained ECC error",
        119 => "GSP RPC Timeout",
        120 => "GSP Error",
        _ => "Unknown Error",
    }
}

type Labels = Vec<(&'static str, String)>;

/// dcgm-exporter's labels of a GPU on `host`.
fn gpu_labels(host: &str, driver: &str, g: &RawGpu) -> Labels {
    vec![
        ("gpu", g.index.to_string()),
        ("UUID", g.uuid.clone()),
        ("pci_bus_id", g.bus_id.clone()),
        ("device", format!("nvidia{}", g.index)),
        ("modelName", g.name.clone()),
        ("Hostname", host.to_string()),
        ("DCGM_FI_DRIVER_VERSION", driver.to_string()),
    ]
}

/// One label set per holder of `device` (dcgm-exporter repeats a shared GPU's series per pod), or
/// the base set alone when no pod holds it.
fn with_holders(base: Labels, device: &str, holders: &Holders) -> Vec<Labels> {
    match holders.get(device) {
        Some(hs) if !hs.is_empty() => hs
            .iter()
            .map(|h| {
                let mut l = base.clone();
                l.push(("container", h.container.clone()));
                l.push(("namespace", h.namespace.clone()));
                l.push(("pod", h.pod.clone()));
                l
            })
            .collect(),
        _ => vec![base],
    }
}

enum Fam {
    Int(Family<Labels, Gauge>),
    Float(Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>),
}

impl Fam {
    fn set(&self, labels: &Labels, v: Value) {
        match (self, v) {
            (Fam::Int(f), Value::Int(x)) => {
                f.get_or_create(labels).set(x);
            }
            (Fam::Float(f), Value::Float(x)) => {
                f.get_or_create(labels).set(x);
            }
            (Fam::Int(f), Value::Float(x)) => {
                f.get_or_create(labels).set(x as i64);
            }
            (Fam::Float(f), Value::Int(x)) => {
                f.get_or_create(labels).set(x as f64);
            }
        }
    }
}

/// The exposition text for one read of `raw` on `host`, with the health verdicts of `model` (the model
/// derived from that read) and the pods holding each device.
pub fn render(host: &str, raw: &RawNode, model: &NodeGpus, holders: &Holders) -> String {
    let mut registry = Registry::default();
    let mut families: BTreeMap<&'static str, Fam> = BTreeMap::new();
    // Registering lazily keeps a family the driver never filled out of the output, as
    // dcgm-exporter leaves out fields it cannot read.
    let mut series: Vec<(&'static str, &'static str, Labels, Value)> = Vec::new();
    for g in &raw.gpus {
        let base = gpu_labels(host, &raw.driver_version, g);
        let sets = if g.mig_enabled {
            vec![base.clone()]
        } else {
            with_holders(base.clone(), &g.uuid, holders)
        };
        for (name, help, read) in GPU_FIELDS {
            if let Some(v) = read(&g.telemetry) {
                for l in &sets {
                    series.push((name, help, l.clone(), v));
                }
            }
        }
        if let Some(h) = model
            .gpus
            .iter()
            .find(|m| m.uuid == g.uuid)
            .map(|m| &m.health)
        {
            let state = match (h.healthy, h.degrading) {
                (true, _) => "healthy",
                (false, true) => "degrading",
                (false, false) => "failed",
            };
            let mut l = base.clone();
            l.push(("state", state.to_string()));
            series.push((
                HEALTH_FAMILY,
                "The node agent's health verdict on the GPU: 1 for its state (healthy, degrading or failed)",
                l,
                Value::Int(1),
            ));
        }
        let xid = g.xids.last().copied().unwrap_or(0);
        for l in &sets {
            let mut l = l.clone();
            l.push(("err_code", xid.to_string()));
            l.push(("err_msg", xid_message(xid).to_string()));
            series.push((
                XID_FAMILY,
                "Value of the last XID error encountered.",
                l,
                Value::Int(i64::try_from(xid).unwrap_or(i64::MAX)),
            ));
        }
        for m in &g.mig {
            let mut mig = base.clone();
            // dcgm-exporter puts the instance labels before Hostname.
            let at = mig.iter().position(|(k, _)| *k == "Hostname").unwrap_or(0);
            mig.insert(
                at,
                (
                    "GPU_I_ID",
                    m.gpu_instance_id.map(|i| i.to_string()).unwrap_or_default(),
                ),
            );
            mig.insert(at, ("GPU_I_PROFILE", m.profile.clone()));
            for (name, help, read) in MIG_FIELDS {
                if let Some(v) = read(m) {
                    for l in with_holders(mig.clone(), &m.uuid, holders) {
                        series.push((name, help, l, v));
                    }
                }
            }
        }
    }
    for (name, help, labels, v) in series {
        let fam = families.entry(name).or_insert_with(|| match v {
            Value::Float(_) => {
                let f = Family::default();
                registry.register(name, help, f.clone());
                Fam::Float(f)
            }
            Value::Int(_) => {
                let f = Family::default();
                registry.register(name, help, f.clone());
                Fam::Int(f)
            }
        });
        fam.set(&labels, v);
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}

/// The exposition text of the agent's last read, shared with the endpoint.
#[derive(Debug, Clone, Default)]
pub struct MetricsText(std::sync::Arc<std::sync::RwLock<String>>);

impl MetricsText {
    /// Replaces the text.
    pub fn set(&self, text: String) {
        if let Ok(mut t) = self.0.write() {
            *t = text;
        }
    }

    /// The current text (OpenMetrics' bare terminator before the first read).
    pub fn get(&self) -> String {
        match self.0.read() {
            Ok(t) if !t.is_empty() => t.clone(),
            _ => "# EOF\n".to_string(),
        }
    }
}

/// The agent's endpoint: `/metrics` and `/healthz`.
pub fn router(text: MetricsText) -> axum::Router {
    use axum::http::header;
    use axum::routing::get;
    axum::Router::new()
        .route(
            "/metrics",
            get(
                |axum::extract::State(t): axum::extract::State<MetricsText>| async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        t.get(),
                    )
                },
            ),
        )
        .route("/healthz", get(|| async { "ok" }))
        .with_state(text)
}
