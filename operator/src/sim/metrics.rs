//! What a discrete-event simulation measured: waits per queue, GPU utilisation over time, fairness.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::engine::{Time, WorkloadKey};

/// How a run of a workload ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RunEnd {
    /// Ran to completion.
    Finished,
    /// Evicted with this reason (e.g. Preempted).
    Evicted(String),
    /// Still running when the simulation ended.
    Running,
}

#[derive(Clone, Debug)]
struct Run {
    cluster_queue: String,
    /// "namespace/name" of its LocalQueue.
    local_queue: String,
    gpus: BTreeMap<String, i64>,
    /// GPUs held per node, when the run's placement is known.
    nodes: BTreeMap<String, i64>,
    start: Time,
    end: Option<(Time, RunEnd)>,
}

#[derive(Clone, Debug)]
struct Tracked {
    cluster_queue: String,
    /// "namespace/name" of its LocalQueue.
    local_queue: String,
    arrival: Time,
    first_admission: Option<Time>,
}

/// Records arrivals, admissions and run ends as the simulation goes.
#[derive(Debug, Default)]
pub struct Recorder {
    workloads: HashMap<WorkloadKey, Tracked>,
    runs: Vec<Run>,
    open: HashMap<WorkloadKey, usize>,
    evictions: Vec<EvictionRecord>,
    unsettled: Vec<Time>,
    /// Since when each preemptor has been waiting for its victims to leave.
    waiting: HashMap<WorkloadKey, Time>,
    /// Seconds from issuing preemptions to admission, per admitted preemptor.
    victim_waits: Vec<f64>,
}

/// One eviction on the timeline.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionRecord {
    /// Seconds from the start.
    pub at_seconds: f64,
    /// "namespace/name".
    pub workload: String,
    /// Its ClusterQueue.
    pub cluster_queue: String,
    /// Kueue's eviction reason, with the preemption reason when there is one.
    pub reason: String,
    /// GPU-hours of work lost (run time so far times GPUs held).
    pub lost_gpu_hours: f64,
}

impl Recorder {
    /// Scheduling kept changing decisions at `at` until the simulator's cycle limit.
    pub fn unsettled(&mut self, at: Time) {
        self.unsettled.push(at);
    }

    /// A preemptor issued preemptions and waits for its victims (the first time counts).
    pub fn waiting_for_victims(&mut self, key: &WorkloadKey, at: Time) {
        self.waiting.entry(key.clone()).or_insert(at);
    }

    /// A workload entered its queue (LocalQueue `local_queue` of its namespace).
    pub fn arrive(&mut self, key: &WorkloadKey, cluster_queue: &str, local_queue: &str, at: Time) {
        self.workloads
            .entry(key.clone())
            .or_insert_with(|| Tracked {
                cluster_queue: cluster_queue.to_string(),
                local_queue: format!("{}/{local_queue}", key.namespace),
                arrival: at,
                first_admission: None,
            });
    }

    /// When the workload's current run began, if it runs.
    pub fn run_start(&self, key: &WorkloadKey) -> Option<Time> {
        self.open.get(key).map(|&i| self.runs[i].start)
    }

    /// A workload was admitted holding `gpus` per flavor.
    pub fn admit(
        &mut self,
        key: &WorkloadKey,
        cluster_queue: &str,
        gpus: BTreeMap<String, i64>,
        at: Time,
    ) {
        if let Some(t) = self.workloads.get_mut(key) {
            t.first_admission.get_or_insert(at);
        }
        if let Some(since) = self.waiting.remove(key) {
            self.victim_waits.push((at - since) as f64 / 1000.0);
        }
        if self.open.insert(key.clone(), self.runs.len()).is_some() {
            tracing::warn!(workload = %key, "admitted while its previous run had not ended");
        }
        let local_queue = self
            .workloads
            .get(key)
            .map(|t| t.local_queue.clone())
            .unwrap_or_default();
        self.runs.push(Run {
            cluster_queue: cluster_queue.to_string(),
            local_queue,
            gpus,
            nodes: BTreeMap::new(),
            start: at,
            end: None,
        });
    }

    /// The workload's current run holds `gpus` GPUs on each named node (its placement, when one is computed).
    pub fn place(&mut self, key: &WorkloadKey, gpus: BTreeMap<String, i64>) {
        if let Some(&i) = self.open.get(key) {
            self.runs[i].nodes = gpus;
        }
    }

    /// The workload's current run ended (finished or evicted).
    pub fn end(&mut self, key: &WorkloadKey, at: Time, how: RunEnd) {
        let Some(i) = self.open.remove(key) else {
            // Evicted before its run began (an admission check sent it back while it held quota): an eviction
            // that lost no work.
            if let (RunEnd::Evicted(reason), Some(t)) = (&how, self.workloads.get(key)) {
                self.evictions.push(EvictionRecord {
                    at_seconds: at as f64 / 1000.0,
                    workload: key.to_string(),
                    cluster_queue: t.cluster_queue.clone(),
                    reason: reason.clone(),
                    lost_gpu_hours: 0.0,
                });
            }
            return;
        };
        let run = &mut self.runs[i];
        if let RunEnd::Evicted(reason) = &how {
            let held: i64 = run.gpus.values().sum();
            self.evictions.push(EvictionRecord {
                at_seconds: at as f64 / 1000.0,
                workload: key.to_string(),
                cluster_queue: run.cluster_queue.clone(),
                reason: reason.clone(),
                lost_gpu_hours: held as f64 * (at - run.start) as f64 / 3_600_000.0,
            });
        }
        run.end = Some((at, how));
    }

    /// Per LocalQueue: workloads, admissions, waits and GPU-hours up to `end` (for admission fair sharing, which
    /// orders LocalQueues within a ClusterQueue).
    pub fn local_queue_report(&self, end: Time) -> Vec<LocalQueueReport> {
        let mut out: BTreeMap<&str, (LocalQueueReport, Vec<f64>)> = BTreeMap::new();
        for t in self.workloads.values() {
            let (q, waits) = out.entry(t.local_queue.as_str()).or_insert_with(|| {
                (
                    LocalQueueReport {
                        local_queue: t.local_queue.clone(),
                        cluster_queue: t.cluster_queue.clone(),
                        workloads: 0,
                        admitted: 0,
                        wait_seconds: WaitSummary::of(&[]),
                        gpu_hours: 0.0,
                    },
                    Vec::new(),
                )
            });
            q.workloads += 1;
            if let Some(a) = t.first_admission {
                q.admitted += 1;
                waits.push((a - t.arrival) as f64 / 1000.0);
            }
        }
        for r in &self.runs {
            if let Some((q, _)) = out.get_mut(r.local_queue.as_str()) {
                let stop = r.end.as_ref().map_or(end, |e| e.0);
                let held: i64 = r.gpus.values().sum();
                q.gpu_hours += (held * (stop - r.start)) as f64 / 3_600_000.0;
            }
        }
        out.into_values()
            .map(|(mut q, mut w)| {
                w.sort_by(f64::total_cmp);
                q.wait_seconds = WaitSummary::of(&w);
                q
            })
            .collect()
    }

    /// Builds the report at time `end`. `capacity` is GPUs per flavor; `entitlement` is each ClusterQueue's
    /// nominal GPUs (its fair share is its part of their sum).
    pub fn report(
        &self,
        start: Time,
        end: Time,
        capacity: &BTreeMap<String, i64>,
        entitlement: &BTreeMap<String, i64>,
        samples: usize,
    ) -> SimulationReport {
        let span = (end - start).max(1);
        let runs: Vec<(&Run, Time)> = self
            .runs
            .iter()
            .map(|r| (r, r.end.as_ref().map_or(end, |e| e.0)))
            .collect();

        let mut gpu_ms: BTreeMap<&str, f64> = BTreeMap::new();
        let mut node_gpu_hours: BTreeMap<String, f64> = BTreeMap::new();
        for (r, stop) in &runs {
            let held: i64 = r.gpus.values().sum();
            *gpu_ms.entry(r.cluster_queue.as_str()).or_default() +=
                (held * (stop - r.start)) as f64;
            for (node, &g) in &r.nodes {
                *node_gpu_hours.entry(node.clone()).or_default() +=
                    (g * (stop - r.start)) as f64 / 3_600_000.0;
            }
        }

        let mut queues: BTreeMap<String, QueueReport> = BTreeMap::new();
        let total_entitlement: i64 = entitlement.values().sum();
        for cq in entitlement.keys() {
            queues.insert(cq.clone(), QueueReport::empty(cq));
        }
        let mut waits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for t in self.workloads.values() {
            let q = queues
                .entry(t.cluster_queue.clone())
                .or_insert_with(|| QueueReport::empty(&t.cluster_queue));
            q.workloads += 1;
            match t.first_admission {
                Some(a) => {
                    q.admitted += 1;
                    waits
                        .entry(t.cluster_queue.clone())
                        .or_default()
                        .push((a - t.arrival) as f64 / 1000.0);
                }
                None => q.pending_at_end += 1,
            }
        }
        for e in &self.evictions {
            if let Some(q) = queues.get_mut(&e.cluster_queue) {
                q.evictions += 1;
            }
        }
        let total_gpu_ms: f64 = gpu_ms.values().sum();
        for (cq, q) in queues.iter_mut() {
            let mut w = waits.remove(cq).unwrap_or_default();
            w.sort_by(f64::total_cmp);
            q.wait_seconds = WaitSummary::of(&w);
            q.wait_samples = w;
            let used = gpu_ms.get(cq.as_str()).copied().unwrap_or(0.0);
            q.gpu_hours = used / 3_600_000.0;
            q.usage_share = if total_gpu_ms > 0.0 {
                used / total_gpu_ms
            } else {
                0.0
            };
            q.entitlement_share = match (entitlement.get(cq), total_entitlement) {
                (Some(&e), t) if t > 0 => e as f64 / t as f64,
                _ => 0.0,
            };
        }

        let flavors = capacity
            .iter()
            .map(|(flavor, &gpus)| {
                let used_ms: f64 = runs
                    .iter()
                    .map(|(r, stop)| {
                        (r.gpus.get(flavor).copied().unwrap_or(0) * (stop - r.start)) as f64
                    })
                    .sum();
                let series = (0..=samples)
                    .map(|i| {
                        let t = start + span * i as i64 / samples.max(1) as i64;
                        let used: i64 = runs
                            .iter()
                            .filter(|(r, stop)| r.start <= t && t < *stop)
                            .map(|(r, _)| r.gpus.get(flavor).copied().unwrap_or(0))
                            .sum();
                        UtilisationSample {
                            at_seconds: (t - start) as f64 / 1000.0,
                            gpus_in_use: used,
                        }
                    })
                    .collect();
                FlavorUtilisation {
                    flavor: flavor.clone(),
                    steps: steps(&runs, flavor, start, end),
                    gpus,
                    mean_utilisation: if gpus > 0 {
                        used_ms / (gpus as f64 * span as f64)
                    } else {
                        0.0
                    },
                    series,
                }
            })
            .collect();

        let queues: Vec<QueueReport> = queues.into_values().collect();
        let normalised: Vec<f64> = queues
            .iter()
            .filter(|q| q.entitlement_share > 0.0)
            .map(|q| q.usage_share / q.entitlement_share)
            .collect();
        SimulationReport {
            duration_seconds: span as f64 / 1000.0,
            workloads: self.workloads.len(),
            admitted: self
                .workloads
                .values()
                .filter(|t| t.first_admission.is_some())
                .count(),
            finished: self
                .runs
                .iter()
                .filter(|r| matches!(r.end, Some((_, RunEnd::Finished))))
                .count(),
            fairness: Fairness {
                jain_index_gpu_hours: jain(&queues.iter().map(|q| q.gpu_hours).collect::<Vec<_>>()),
                jain_index_vs_entitlement: jain(&normalised),
            },
            queues,
            flavors,
            node_gpu_hours,
            evictions: self
                .evictions
                .iter()
                .map(|e| EvictionRecord {
                    at_seconds: e.at_seconds - start as f64 / 1000.0,
                    ..e.clone()
                })
                .collect(),
            unfinished: Vec::new(),
            unsettled_at_seconds: self
                .unsettled
                .iter()
                .map(|t| (t - start) as f64 / 1000.0)
                .collect(),
            topology: None,
            local_queues: Vec::new(),
            victim_wait: {
                let mut w = self.victim_waits.clone();
                w.sort_by(f64::total_cmp);
                VictimWait {
                    preemptors: w.len(),
                    total_seconds: w.iter().sum(),
                    seconds: WaitSummary::of(&w),
                }
            },
        }
    }
}

/// How long preemptors waited for their victims to leave before they were admitted.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VictimWait {
    /// Admissions that followed the workload's own preemptions.
    pub preemptors: usize,
    /// Their waits added up.
    pub total_seconds: f64,
    /// From issuing preemptions to admission.
    pub seconds: WaitSummary,
}

/// Every change in `flavor`'s GPUs in use between `start` and `end`, as (seconds from the start, GPUs in use
/// from then on).
fn steps(runs: &[(&Run, Time)], flavor: &str, start: Time, end: Time) -> Vec<UtilisationSample> {
    let mut deltas: BTreeMap<Time, i64> = BTreeMap::new();
    for (r, stop) in runs {
        let g = r.gpus.get(flavor).copied().unwrap_or(0);
        if g != 0 && r.start < *stop {
            *deltas.entry(r.start.max(start)).or_default() += g;
            *deltas.entry((*stop).min(end)).or_default() -= g;
        }
    }
    let mut in_use = 0;
    let mut out = vec![UtilisationSample {
        at_seconds: 0.0,
        gpus_in_use: 0,
    }];
    for (t, d) in deltas {
        in_use += d;
        out.push(UtilisationSample {
            at_seconds: (t - start) as f64 / 1000.0,
            gpus_in_use: in_use,
        });
    }
    out
}

/// Jain's fairness index: 1 when all values are equal, 1/n when one takes everything.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let sq: f64 = values.iter().map(|v| v * v).sum();
    if values.is_empty() || sq == 0.0 {
        1.0
    } else {
        sum * sum / (values.len() as f64 * sq)
    }
}

/// The outcome of a discrete-event simulation.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulationReport {
    /// Virtual seconds simulated.
    pub duration_seconds: f64,
    /// Workloads that arrived.
    pub workloads: usize,
    /// Workloads admitted at least once.
    pub admitted: usize,
    /// Runs that finished.
    pub finished: usize,
    /// Fairness across ClusterQueues.
    pub fairness: Fairness,
    /// Per ClusterQueue.
    pub queues: Vec<QueueReport>,
    /// GPU utilisation per flavor.
    pub flavors: Vec<FlavorUtilisation>,
    /// GPU-hours held on each node, for runs whose placement was recorded (empty when none was).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_gpu_hours: BTreeMap<String, f64>,
    /// Every eviction, in time order.
    pub evictions: Vec<EvictionRecord>,
    /// Workloads still running or waiting when the simulation ended.
    pub unfinished: Vec<Unfinished>,
    /// Instants (seconds from the start) at which scheduling did not settle within the simulator's cycle limit:
    /// the engine kept admitting and preempting.
    pub unsettled_at_seconds: Vec<f64>,
    /// Preemptors' waits for their victims.
    pub victim_wait: VictimWait,
    /// Gang placement figures, when some flavor is topology-aware.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<super::topology::TopologyReport>,
    /// Per LocalQueue, under admission fair sharing (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub local_queues: Vec<LocalQueueReport>,
}

/// One LocalQueue's figures.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueReport {
    /// "namespace/name".
    pub local_queue: String,
    /// Its ClusterQueue.
    pub cluster_queue: String,
    /// Workloads that arrived.
    pub workloads: usize,
    /// Workloads admitted at least once.
    pub admitted: usize,
    /// Time from arrival to first admission.
    pub wait_seconds: WaitSummary,
    /// GPU-hours its workloads held.
    pub gpu_hours: f64,
}

/// A workload that had not finished when the simulation ended.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unfinished {
    /// "namespace/name".
    pub workload: String,
    /// Admitted or Pending (with the reason).
    pub state: String,
    /// Why it waits, when pending.
    pub message: String,
}

/// Fairness indices.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fairness {
    /// Jain's index of GPU-hours per ClusterQueue.
    pub jain_index_gpu_hours: f64,
    /// Jain's index of (share of GPU-hours / share of nominal GPUs) per ClusterQueue with an entitlement.
    pub jain_index_vs_entitlement: f64,
}

/// One ClusterQueue's figures.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueReport {
    /// Its name.
    pub cluster_queue: String,
    /// Workloads that arrived.
    pub workloads: usize,
    /// Workloads admitted at least once.
    pub admitted: usize,
    /// Workloads never admitted.
    pub pending_at_end: usize,
    /// Evictions of its workloads.
    pub evictions: usize,
    /// Time from arrival to first admission.
    pub wait_seconds: WaitSummary,
    /// Every admitted workload's wait, in seconds, sorted (for distributions; not serialised).
    #[serde(skip)]
    pub wait_samples: Vec<f64>,
    /// GPU-hours its workloads held.
    pub gpu_hours: f64,
    /// Its part of all GPU-hours.
    pub usage_share: f64,
    /// Its part of all nominal GPUs.
    pub entitlement_share: f64,
}

impl QueueReport {
    fn empty(cq: &str) -> Self {
        QueueReport {
            cluster_queue: cq.to_string(),
            workloads: 0,
            admitted: 0,
            pending_at_end: 0,
            evictions: 0,
            wait_seconds: WaitSummary::of(&[]),
            wait_samples: Vec::new(),
            gpu_hours: 0.0,
            usage_share: 0.0,
            entitlement_share: 0.0,
        }
    }
}

/// Distribution of waits, in seconds.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitSummary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl WaitSummary {
    /// Summarises sorted values (nearest-rank percentiles).
    pub fn of(sorted: &[f64]) -> Self {
        let pct = |p: f64| {
            if sorted.is_empty() {
                0.0
            } else {
                let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
                sorted[rank - 1]
            }
        };
        WaitSummary {
            mean: if sorted.is_empty() {
                0.0
            } else {
                sorted.iter().sum::<f64>() / sorted.len() as f64
            },
            p50: pct(0.5),
            p90: pct(0.9),
            p99: pct(0.99),
            max: sorted.last().copied().unwrap_or(0.0),
        }
    }
}

/// GPU use of one flavor.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUtilisation {
    /// The flavor.
    pub flavor: String,
    /// GPUs it has.
    pub gpus: i64,
    /// Mean fraction of them in use over the simulation.
    pub mean_utilisation: f64,
    /// GPUs in use at evenly spaced times.
    pub series: Vec<UtilisationSample>,
    /// GPUs in use at every change (a step function; not serialised).
    #[serde(skip)]
    pub steps: Vec<UtilisationSample>,
}

/// GPUs in use at one time.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UtilisationSample {
    /// Seconds from the start.
    pub at_seconds: f64,
    /// GPUs held by admitted workloads.
    pub gpus_in_use: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> WorkloadKey {
        WorkloadKey {
            namespace: "ns".into(),
            name: n.into(),
        }
    }

    #[test]
    fn jain_bounds() {
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[3.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn waits_utilisation_and_evictions() {
        let mut r = Recorder::default();
        let gpus = |n| BTreeMap::from([("h100".to_string(), n)]);
        r.arrive(&key("a"), "team-a", "main", 0);
        r.arrive(&key("b"), "team-b", "main", 0);
        r.admit(&key("a"), "team-a", gpus(4), 0);
        r.admit(&key("b"), "team-b", gpus(4), 3_600_000);
        r.end(&key("a"), 1_800_000, RunEnd::Evicted("Preempted".into()));
        r.end(&key("b"), 7_200_000, RunEnd::Finished);
        let cap = BTreeMap::from([("h100".to_string(), 8)]);
        let ent = BTreeMap::from([("team-a".to_string(), 4), ("team-b".to_string(), 4)]);
        let rep = r.report(0, 7_200_000, &cap, &ent, 4);
        assert_eq!(rep.admitted, 2);
        assert_eq!(rep.finished, 1);
        let b = rep
            .queues
            .iter()
            .find(|q| q.cluster_queue == "team-b")
            .unwrap();
        assert_eq!(b.wait_seconds.max, 3600.0);
        assert!((b.gpu_hours - 4.0).abs() < 1e-9);
        // 4 GPUs for 0.5 h + 4 GPUs for 1 h over 2 h of 8 GPUs.
        assert!((rep.flavors[0].mean_utilisation - 6.0 / 16.0).abs() < 1e-9);
        assert_eq!(rep.evictions.len(), 1);
        assert!((rep.evictions[0].lost_gpu_hours - 2.0).abs() < 1e-9);
        assert!(rep.fairness.jain_index_gpu_hours < 1.0);
    }

    #[test]
    fn steps_and_node_placement() {
        let mut r = Recorder::default();
        let gpus = |n| BTreeMap::from([("h100".to_string(), n)]);
        r.arrive(&key("a"), "q", "main", 0);
        r.arrive(&key("b"), "q", "main", 0);
        r.admit(&key("a"), "q", gpus(4), 0);
        r.place(
            &key("a"),
            BTreeMap::from([("n0".to_string(), 3), ("n1".to_string(), 1)]),
        );
        r.admit(&key("b"), "q", gpus(2), 1_000);
        r.end(&key("a"), 3_600_000, RunEnd::Finished);
        let cap = BTreeMap::from([("h100".to_string(), 8)]);
        let rep = r.report(0, 7_200_000, &cap, &BTreeMap::new(), 2);
        let steps: Vec<(f64, i64)> = rep.flavors[0]
            .steps
            .iter()
            .map(|s| (s.at_seconds, s.gpus_in_use))
            .collect();
        // b is still running at the end, so its GPUs come off at the end.
        assert_eq!(
            steps,
            vec![(0.0, 0), (0.0, 4), (1.0, 6), (3600.0, 2), (7200.0, 0)]
        );
        assert_eq!(rep.node_gpu_hours.len(), 2);
        assert!((rep.node_gpu_hours["n0"] - 3.0).abs() < 1e-9);
        assert!((rep.node_gpu_hours["n1"] - 1.0).abs() < 1e-9);
        assert_eq!(rep.queues[0].wait_samples, vec![0.0, 1.0]);
    }
}
