//! Health rules: which readings mark a GPU unhealthy, failed or merely degrading, so the engine stops
//! placing on hardware before it fails. The rules are evaluated over successive reads (a rate of
//! corrected ECC errors, throttling that lasts), so the evaluator keeps a little state per GPU.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::raw::{RawGpu, RawNode};

/// NVML clocks-event reason bits that mean heat (software and hardware thermal slowdown) or the
/// board's external slowdown signal (HW_SLOWDOWN, raised for over-temperature and power-brake).
pub const THERMAL_REASONS: u64 = 0x8 | 0x20 | 0x40;

/// The configurable rules (`--health-rules FILE`, YAML, every field optional).
#[derive(Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HealthRules {
    /// XIDs after which the GPU has failed (NVIDIA's catalogue: double-bit ECC, remapper failure,
    /// NVLink error, fallen off the bus, uncontained ECC, GSP errors).
    pub fatal_xids: Vec<u64>,
    /// XIDs that mean the GPU is degrading: page retirement or row-remap events, a high single-bit
    /// ECC rate, contained ECC errors. The GPU still works, but should take no new work.
    pub degrading_xids: Vec<u64>,
    /// Consecutive reads with a thermal slowdown reason before the GPU is marked (0: never). The mark
    /// clears after as many reads without one.
    pub thermal_reads: u32,
    /// Corrected (single-bit) ECC errors per hour above which the GPU is degrading (0: never). Once
    /// marked, the GPU stays marked until the agent restarts (worn memory does not heal).
    pub corrected_ecc_per_hour: u64,
    /// A page retirement or row remap waiting for a GPU reset marks the GPU until the reset.
    pub pending_repair: bool,
}

impl Default for HealthRules {
    fn default() -> Self {
        Self {
            fatal_xids: vec![48, 64, 74, 79, 95, 119, 120],
            degrading_xids: vec![63, 92, 94],
            thermal_reads: 2,
            corrected_ecc_per_hour: 100,
            pending_repair: true,
        }
    }
}

impl HealthRules {
    /// Reads rules from a YAML file; errors name the file and the field.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let de = serde_yaml::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de)
            .map_err(|e| format!("{}: field `{}`: {}", path.display(), e.path(), e.inner()))
    }
}

/// How a degrading (still working) reason begins; a reason without it means the GPU failed.
pub const DEGRADING: &str = "Degrading: ";

/// Why a GPU is unhealthy, most severe first; empty when it is healthy.
pub type Reasons = Vec<String>;

#[derive(Debug, Default, Clone)]
struct GpuState {
    thermal_run: u32,
    cool_run: u32,
    throttled: bool,
    /// (seconds, corrected volatile count) at the first read of the current rate window.
    ecc_since: Option<(f64, u64)>,
    ecc_degraded: Option<String>,
}

/// Evaluates [`HealthRules`] over successive reads.
#[derive(Debug, Default, Clone)]
pub struct HealthTracker {
    rules: HealthRules,
    gpus: BTreeMap<String, GpuState>,
}

/// How long the corrected-ECC rate is measured over before it is judged.
const ECC_WINDOW_SECS: f64 = 3600.0;
/// The shortest span a rate is computed from (a burst in two quick reads is not a rate).
const ECC_MIN_SPAN_SECS: f64 = 60.0;

impl HealthTracker {
    /// A tracker applying `rules`.
    pub fn new(rules: HealthRules) -> Self {
        Self {
            rules,
            gpus: BTreeMap::new(),
        }
    }

    /// The rules applied.
    pub fn rules(&self) -> &HealthRules {
        &self.rules
    }

    /// Judges one read taken at `now_secs` (any monotonic clock): the reasons per GPU UUID.
    pub fn evaluate(&mut self, raw: &RawNode, now_secs: f64) -> BTreeMap<String, Reasons> {
        raw.gpus
            .iter()
            .map(|g| {
                let state = self.gpus.entry(g.uuid.clone()).or_default();
                (g.uuid.clone(), judge(&self.rules, state, g, now_secs))
            })
            .collect()
    }
}

/// The reasons a single read gives on its own (no history: no rates, no lasting throttling).
pub fn judge_once(rules: &HealthRules, g: &RawGpu) -> Reasons {
    judge(rules, &mut GpuState::default(), g, 0.0)
}

fn judge(rules: &HealthRules, s: &mut GpuState, g: &RawGpu, now: f64) -> Reasons {
    let t = &g.telemetry;
    let mut failed = Vec::new();
    let mut degrading = Vec::new();
    if g.ecc_uncorrected > 0 {
        failed.push(format!(
            "UncorrectedECC: {} volatile uncorrected ECC errors",
            g.ecc_uncorrected
        ));
    }
    if t.row_remap_failure == Some(true) {
        failed.push("RowRemapFailure: a row remap failed; the GPU has no spare rows left".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for x in g.xids.iter().rev() {
        if !seen.insert(*x) {
            continue;
        }
        let msg = super::metrics::xid_message(*x);
        if rules.fatal_xids.contains(x) {
            failed.push(format!("XID {x}: {msg}"));
        } else if rules.degrading_xids.contains(x) {
            degrading.push(format!("{DEGRADING}XID {x}: {msg}"));
        }
    }
    if rules.pending_repair {
        if t.row_remap_pending == Some(true) {
            degrading.push(format!("{DEGRADING}a row remap waits for a GPU reset"));
        }
        if t.retired_pending == Some(true) {
            degrading.push(format!(
                "{DEGRADING}a page retirement waits for a GPU reset"
            ));
        }
    }
    if rules.thermal_reads > 0 {
        let reasons = t.clocks_event_reasons.unwrap_or(0);
        if reasons & THERMAL_REASONS != 0 {
            s.thermal_run += 1;
            s.cool_run = 0;
            if s.thermal_run >= rules.thermal_reads {
                s.throttled = true;
            }
        } else {
            s.cool_run += 1;
            s.thermal_run = 0;
            if s.cool_run >= rules.thermal_reads {
                s.throttled = false;
            }
        }
        if s.throttled {
            let temp = t
                .gpu_temp_c
                .map(|c| format!(" at {c} C"))
                .unwrap_or_default();
            degrading.push(format!(
                "Degrading: thermal slowdown{temp} for {} reads (clocks-event reasons {:#x})",
                s.thermal_run.max(1),
                reasons
            ));
        }
    }
    if rules.corrected_ecc_per_hour > 0
        && let Some(count) = t.ecc_sbe_volatile
    {
        match s.ecc_since {
            // A lower count means the driver reloaded: start again.
            Some((_, c0)) if count < c0 => s.ecc_since = Some((now, count)),
            None => s.ecc_since = Some((now, count)),
            Some((t0, c0)) => {
                let span = now - t0;
                if span >= ECC_MIN_SPAN_SECS {
                    let per_hour = (count - c0) as f64 * 3600.0 / span;
                    if per_hour > rules.corrected_ecc_per_hour as f64 {
                        s.ecc_degraded.get_or_insert_with(|| {
                            format!(
                                "Degrading: {per_hour:.0} corrected ECC errors per hour (limit {})",
                                rules.corrected_ecc_per_hour
                            )
                        });
                    }
                    if span >= ECC_WINDOW_SECS {
                        s.ecc_since = Some((now, count));
                    }
                }
            }
        }
    }
    if let Some(r) = &s.ecc_degraded {
        degrading.push(r.clone());
    }
    failed.extend(degrading);
    failed
}
