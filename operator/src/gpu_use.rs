//! GPU use per Workload and ClusterQueue: the node agents' per-GPU use and holders (NodeGpuTopology
//! status) joined with the pods and the admitted Workloads. Pure, so the operator's metrics and
//! `sluice top workloads` compute the same figures.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::node_gpu_topology::{GpuUse, NodeGpuTopology};

use crate::engine::WorkloadKey;

/// Whether a pod asks for whole GPUs or MIG instances (only such pods can hold one).
pub fn requests_gpus(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.containers.iter().any(|c| {
        c.resources.as_ref().is_some_and(|r| {
            r.limits
                .iter()
                .chain(r.requests.iter())
                .flat_map(|m| m.keys())
                .any(|k| crate::agent::podresources::is_gpu_resource(k))
        })
    })
}

/// The UIDs that tie a pod to its Workload: its own (plain pods Kueue manages own their Workload) and its
/// owners' (a batch Job owns both its pods and its Workload).
pub fn pod_uids(pod: &Pod) -> Vec<String> {
    pod.metadata
        .uid
        .iter()
        .cloned()
        .chain(pod.owner_references().iter().map(|o| o.uid.clone()))
        .collect()
}

/// Admitted Workloads by the UIDs of their owners, with their ClusterQueue.
pub fn admitted_by_owner<'a>(
    workloads: impl IntoIterator<Item = &'a api::Workload>,
) -> HashMap<String, (WorkloadKey, String)> {
    let mut out = HashMap::new();
    for wl in workloads {
        let Some(cq) = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map(|a| a.cluster_queue.clone())
        else {
            continue;
        };
        let admitted = wl.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Admitted" && c.status == "True")
        });
        if !admitted {
            continue;
        }
        let key = WorkloadKey::new(wl.namespace().unwrap_or_default(), wl.name_any());
        for o in wl.owner_references() {
            out.insert(o.uid.clone(), (key.clone(), cq.clone()));
        }
    }
    out
}

/// One GPU held by a Workload, as its node agent last reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldGpu {
    /// Node.
    pub node: String,
    /// The GPU's use and history.
    pub gpu: GpuUse,
    /// When the agent read it.
    pub observed_at: Option<DateTime<Utc>>,
    /// The Workload's share of the GPU (1 unless pods share it by time-slicing or MIG).
    pub share: f64,
}

/// A Workload's GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadGpus {
    /// The Workload.
    pub key: WorkloadKey,
    /// Its ClusterQueue.
    pub cluster_queue: String,
    /// The GPUs its pods hold.
    pub gpus: Vec<HeldGpu>,
}

impl WorkloadGpus {
    /// GPUs held (shares summed).
    pub fn held(&self) -> f64 {
        self.gpus.iter().map(|g| g.share).sum()
    }

    /// Mean utilisation of the held GPUs, percent, over those that report one.
    pub fn utilization(&self) -> Option<f64> {
        let known: Vec<(f64, f64)> = self
            .gpus
            .iter()
            .filter_map(|g| g.gpu.utilization.map(|u| (f64::from(u), g.share)))
            .collect();
        let weight: f64 = known.iter().map(|k| k.1).sum();
        (weight > 0.0).then(|| known.iter().map(|(u, w)| u * w).sum::<f64>() / weight)
    }

    /// Busy GPU-equivalents: each held GPU's share times its utilisation.
    pub fn busy(&self) -> f64 {
        self.gpus
            .iter()
            .map(|g| g.share * f64::from(g.gpu.utilization.unwrap_or(0)) / 100.0)
            .sum()
    }
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Joins the agents' reports with the pods (by namespace and name, to their Workload-tying UIDs) and the
/// admitted Workloads: each Workload holding GPUs with them, sorted by Workload.
pub fn join<'a>(
    topologies: impl IntoIterator<Item = &'a NodeGpuTopology>,
    pods: &HashMap<(String, String), Vec<String>>,
    admitted: &HashMap<String, (WorkloadKey, String)>,
) -> Vec<WorkloadGpus> {
    let mut out: BTreeMap<WorkloadKey, WorkloadGpus> = BTreeMap::new();
    for t in topologies {
        let Some(status) = &t.status else { continue };
        let observed_at = status.observed_at.as_deref().and_then(parse_time);
        let node = if t.spec.node_name.is_empty() {
            t.name_any()
        } else {
            t.spec.node_name.clone()
        };
        for g in &status.gpus {
            let n = g.holders.len().max(1) as f64;
            for h in &g.holders {
                let Some(uids) = pods.get(&(h.namespace.clone(), h.pod.clone())) else {
                    continue;
                };
                let Some((key, cq)) = uids.iter().find_map(|u| admitted.get(u)) else {
                    continue;
                };
                let entry = out.entry(key.clone()).or_insert_with(|| WorkloadGpus {
                    key: key.clone(),
                    cluster_queue: cq.clone(),
                    gpus: Vec::new(),
                });
                // Several containers of one workload on one GPU count it once.
                if let Some(held) = entry
                    .gpus
                    .iter_mut()
                    .find(|x| x.node == node && x.gpu.uuid == g.uuid)
                {
                    held.share = (held.share + 1.0 / n).min(1.0);
                    continue;
                }
                entry.gpus.push(HeldGpu {
                    node: node.clone(),
                    gpu: g.clone(),
                    observed_at,
                    share: 1.0 / n,
                });
            }
        }
    }
    out.into_values().collect()
}

/// Held and busy GPUs per ClusterQueue.
pub fn by_cluster_queue(use_: &[WorkloadGpus]) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for w in use_ {
        let e = out.entry(w.cluster_queue.clone()).or_default();
        e.0 += w.held();
        e.1 += w.busy();
    }
    out
}

/// The highest utilisation of `gpu` over the `window` before `observed_at`; None when its history is
/// shorter than the window (the agent started since) or it reports no utilisation.
pub fn peak_over(
    gpu: &GpuUse,
    observed_at: DateTime<Utc>,
    window: chrono::Duration,
) -> Option<u32> {
    let from = observed_at - window;
    let since = gpu.sampled_since.as_deref().and_then(parse_time)?;
    if since > from {
        return None;
    }
    gpu.peaks
        .iter()
        .find(|p| parse_time(&p.since).is_some_and(|t| t >= from))
        .map(|p| p.peak)
}

/// Since when `gpu` has stayed below `percent` (exclusive of the last reading at or above it): the
/// history's start when it never reached it; None when it is at or above it now.
pub fn below_since(gpu: &GpuUse, percent: u32) -> Option<DateTime<Utc>> {
    match gpu.peaks.iter().rposition(|p| p.peak >= percent) {
        Some(i) if i + 1 == gpu.peaks.len() => None,
        Some(i) => parse_time(&gpu.peaks[i].since),
        None if gpu.peaks.is_empty() => None,
        None => gpu.sampled_since.as_deref().and_then(parse_time),
    }
}

/// A Workload whose every held GPU stayed below a threshold for a window.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleWorkload {
    /// The Workload and its GPUs.
    pub workload: WorkloadGpus,
    /// GPU-hours held below the threshold (each GPU's share times how long it has been below).
    pub idle_gpu_hours: f64,
    /// The longest any of its GPUs has been below the threshold.
    pub idle_for: chrono::Duration,
}

/// The Workloads whose every held GPU stayed below `percent` over the `window` before its agent's last
/// reading, by idle GPU-hours (most first).
pub fn idle(use_: &[WorkloadGpus], percent: u32, window: chrono::Duration) -> Vec<IdleWorkload> {
    let mut out: Vec<IdleWorkload> = use_
        .iter()
        .filter_map(|w| {
            let mut hours = 0.0;
            let mut longest = chrono::Duration::zero();
            for g in &w.gpus {
                let at = g.observed_at?;
                if peak_over(&g.gpu, at, window)? >= percent {
                    return None;
                }
                let since = below_since(&g.gpu, percent)?;
                let d = at - since;
                longest = longest.max(d);
                hours += g.share * d.num_seconds() as f64 / 3600.0;
            }
            (!w.gpus.is_empty()).then(|| IdleWorkload {
                workload: w.clone(),
                idle_gpu_hours: hours,
                idle_for: longest,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.idle_gpu_hours
            .total_cmp(&a.idle_gpu_hours)
            .then_with(|| a.workload.key.cmp(&b.workload.key))
    });
    out
}

#[cfg(test)]
mod tests {
    use sluice_sdk::sluice::node_gpu_topology::UtilizationPeak;

    use super::*;

    fn gpu(since: &str, peaks: &[(&str, u32)]) -> GpuUse {
        GpuUse {
            uuid: "GPU-x".into(),
            utilization: peaks.last().map(|p| p.1),
            sampled_since: Some(since.into()),
            peaks: peaks
                .iter()
                .map(|(t, p)| UtilizationPeak {
                    since: (*t).into(),
                    peak: *p,
                })
                .collect(),
            ..GpuUse::default()
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        parse_time(s).expect("time")
    }

    #[test]
    fn the_peak_over_a_window_is_the_first_step_inside_it() {
        // Busy at 90 until 10:00, then 40 at 10:20, then 3 from 11:00 to the last reading at 12:00.
        let g = gpu(
            "2026-12-04T08:00:00Z",
            &[
                ("2026-12-04T10:00:00Z", 90),
                ("2026-12-04T10:20:00Z", 40),
                ("2026-12-04T12:00:00Z", 3),
            ],
        );
        let now = at("2026-12-04T12:00:00Z");
        let h = chrono::Duration::hours;
        let m = chrono::Duration::minutes;
        assert_eq!(peak_over(&g, now, m(30)), Some(3));
        assert_eq!(peak_over(&g, now, m(100)), Some(40));
        assert_eq!(peak_over(&g, now, h(2)), Some(90));
        assert_eq!(peak_over(&g, now, h(4)), Some(90));
        // Longer than the history: unknown.
        assert_eq!(peak_over(&g, now, h(5)), None);
        assert_eq!(below_since(&g, 5), Some(at("2026-12-04T10:20:00Z")));
        assert_eq!(below_since(&g, 50), Some(at("2026-12-04T10:00:00Z")));
        assert_eq!(below_since(&g, 95), Some(at("2026-12-04T08:00:00Z")));
        assert_eq!(below_since(&g, 2), None);
    }
}
