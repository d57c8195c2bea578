//! Topology in the simulator: how compactly gangs were placed, and injected node/GPU failures.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::engine::{PodSetPlacement, Time};

/// Node annotation: virtual time from the start at which the node (or its `fail-gpus`) fails.
pub const FAIL_AT_ANNOTATION: &str = "sluice.dev/fail-at";
/// Node annotation: comma-separated GPU indexes that turn unhealthy at `fail-at` (default: the whole node goes NotReady).
pub const FAIL_GPUS_ANNOTATION: &str = "sluice.dev/fail-gpus";

/// NodeGpuTopology annotation: `GPU@TIME` pairs (comma-separated), each GPU starting to degrade (still working,
/// as a node agent's health rules report a thermal slowdown or a rising ECC rate) at that virtual time.
pub const GPU_DEGRADES_AT_ANNOTATION: &str = "sluice.dev/gpu-degrades-at";
/// NodeGpuTopology annotation: `GPU@TIME` pairs, each GPU failing (XID 79) at that virtual time.
pub const GPU_FAILS_AT_ANNOTATION: &str = "sluice.dev/gpu-fails-at";

/// One scheduled failure.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Failure {
    /// Offset from the start of the simulation.
    pub at: Time,
    /// Node.
    pub node: String,
    /// GPUs that fail; empty: the node goes NotReady.
    pub gpus: Vec<u32>,
    /// The GPUs start degrading rather than fail.
    pub degrading: bool,
}

/// Parses a `GPU@TIME[,GPU@TIME...]` annotation value into (GPU, offset) pairs.
pub fn parse_gpu_times(value: &str) -> Result<Vec<(u32, Time)>, String> {
    value
        .split(',')
        .map(|pair| {
            let (gpu, at) = pair
                .trim()
                .split_once('@')
                .ok_or_else(|| format!("{pair:?} is not GPU@TIME (e.g. 5@2h)"))?;
            let gpu = gpu
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("{gpu:?} is not a GPU index"))?;
            let at = crate::duration::parse_duration(at.trim())
                .map_err(|_| format!("{at:?} is not a duration"))?;
            Ok((gpu, at))
        })
        .collect()
}

/// A workload moved off a degrading GPU, remembered until that GPU fails.
#[derive(Clone, Debug, PartialEq)]
pub struct MovedAhead {
    /// Node of the degrading GPU.
    pub node: String,
    /// The GPUs it held on that node.
    pub gpus: Vec<u32>,
    /// GPUs it held in all.
    pub held: i64,
    /// When its run began.
    pub start: Time,
    /// When that run would have finished (None: it runs to the end).
    pub would_end: Option<Time>,
}

/// How compactly gangs were placed (every admission counted, re-admissions included).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TopologyReport {
    /// "topology-aware" or "ignoring topology".
    pub placement: String,
    /// Placement policy scoring the nodes.
    pub policy: String,
    /// Admissions of multi-pod gangs in TAS flavors.
    pub gangs: u64,
    /// Of those, gangs whose pods all sit in one rack.
    pub gangs_in_one_rack: u64,
    /// Share of gangs in one rack.
    pub one_rack_share: f64,
    /// Admitted pods with two or more GPUs, no more than the largest NVLink island of their node.
    pub multi_gpu_pods: u64,
    /// Of those, pods whose GPUs share one NVLink island.
    pub pods_in_one_island: u64,
    /// Share of multi-GPU pods inside one NVLink island.
    pub one_island_share: f64,
    /// Failures injected.
    pub failures_injected: u64,
    /// Evictions with reason NodeFailures.
    pub node_failure_evictions: u64,
    /// GPUs that started degrading (`sluice.dev/gpu-degrades-at`).
    pub gpus_degraded: u64,
    /// Workloads moved off a degrading GPU (with --evict-on-degraded-gpus).
    pub moved_ahead: u64,
    /// Of those, workloads that would still have been running on the GPU when it failed.
    pub moved_ahead_of_failure: u64,
    /// GPU-hours those would have lost had they stayed until the failure (GPUs times their run until then).
    pub gpu_hours_saved: f64,
}

/// Collects [`TopologyReport`] figures as admissions happen.
#[derive(Clone, Debug, Default)]
pub struct TopologyStats {
    /// Node label of the rack level (the level above the last one of the first Topology).
    pub rack_label: Option<String>,
    /// Rack of each node.
    pub rack_of: BTreeMap<String, String>,
    /// NVLink island (GPU index sets) of each node with a report.
    pub islands: BTreeMap<String, Vec<BTreeSet<u32>>>,
    /// Figures so far.
    pub report: TopologyReport,
}

impl TopologyStats {
    /// Records one admission's placement.
    pub fn admitted(&mut self, placement: &[PodSetPlacement]) {
        let pods: i32 = placement
            .iter()
            .flat_map(|p| &p.nodes)
            .map(|n| n.pods)
            .sum();
        if pods > 1 {
            self.report.gangs += 1;
            let racks: BTreeSet<Option<&String>> = placement
                .iter()
                .flat_map(|p| &p.nodes)
                .map(|n| self.rack_of.get(&n.node))
                .collect();
            if racks.len() == 1 && !racks.contains(&None) {
                self.report.gangs_in_one_rack += 1;
            }
        }
        for p in placement {
            let per_pod = p
                .per_pod
                .get(sluice_sdk::topology::GPU_RESOURCE)
                .copied()
                .unwrap_or(0);
            let Ok(per_pod) = usize::try_from(per_pod) else {
                continue;
            };
            if per_pod < 2 {
                continue;
            }
            for n in &p.nodes {
                let Some(islands) = self.islands.get(&n.node) else {
                    continue;
                };
                // A pod larger than every island cannot be inside one: not counted.
                if islands.iter().map(BTreeSet::len).max().unwrap_or(0) < per_pod {
                    continue;
                }
                for pod in n.gpus.chunks(per_pod) {
                    self.report.multi_gpu_pods += 1;
                    if islands.iter().any(|i| pod.iter().all(|g| i.contains(g))) {
                        self.report.pods_in_one_island += 1;
                    }
                }
            }
        }
    }

    /// The report with shares filled in.
    pub fn finish(&self) -> TopologyReport {
        let share = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        TopologyReport {
            one_rack_share: share(self.report.gangs_in_one_rack, self.report.gangs),
            one_island_share: share(self.report.pods_in_one_island, self.report.multi_gpu_pods),
            ..self.report.clone()
        }
    }
}
