//! The workload of `sluice bench`: a synthetic GPU cluster at scale, and the loop that schedules it to completion.
//!
//! The cluster follows Kueue's large-scale performance test in shape (cohorts of ClusterQueues, borrowing,
//! preemption within the queue and reclaim across it) with GPU flavors: every workload asks for GPUs, CPU and
//! memory; admitted workloads finish a few cycles later, so quota keeps turning over. It lives in the engine so
//! that the engine's own benchmarks, profiles and decision fingerprints run it without building the operator.
//! It is the crate's one reader of a clock: it times the engine, and never feeds it the time it reads.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::{
    BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueue, Decision, Engine, EngineConfig,
    EngineError, Event, FairSharingConfig, Flavor, FlavorFungibility, FlavorQuotas,
    FungibilityPolicy, LabelSelector, LocalQueue, Namespace, PodSet, PreemptionPolicy,
    QueueingStrategy, ReclaimPolicy, ResourceGroup, ResourceQuota, StopPolicy, WithinCqPolicy,
    Workload, WorkloadKey,
};

/// Scale and mix of the synthetic cluster.
#[derive(Clone, Debug)]
pub struct BenchShape {
    /// ClusterQueues.
    pub cluster_queues: usize,
    /// Cohorts the ClusterQueues are spread over.
    pub cohorts: usize,
    /// Pending workloads, spread evenly over the ClusterQueues.
    pub workloads: usize,
    /// Cycles an admitted workload runs before it finishes (0 counts as 1).
    pub run_cycles: u64,
    /// Enable fair sharing.
    pub fair_sharing: bool,
    /// Seed of the workload mix.
    pub seed: u64,
}

/// Figures of one benchmark run.
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// Time to load the cluster and queue every workload.
    pub setup_seconds: f64,
    /// Scheduling cycles run.
    pub cycles: usize,
    /// Workloads admitted (each admission counted).
    pub admissions: usize,
    /// Preemptions issued.
    pub evictions: usize,
    /// Time spent inside the engine (cycles and events).
    pub engine_seconds: f64,
    /// Admissions per second of engine time.
    pub admissions_per_second: f64,
    /// Cycle latency percentiles, microseconds.
    pub cycle_p50_us: f64,
    /// 99th percentile.
    pub cycle_p99_us: f64,
    /// Maximum.
    pub cycle_max_us: f64,
    /// Workloads still pending at the end.
    pub pending_at_end: usize,
}

/// A small deterministic generator (SplitMix64), so runs are repeatable without a dependency.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniformly chosen item.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next_u64() % items.len() as u64) as usize]
    }
}

/// `prefix` and `n` zero-padded to `width` digits, as `format!("{prefix}{n:0width$}")` writes it: the generator
/// names tens of thousands of objects, and the formatting machinery would be a visible share of a profiled run.
fn padded(prefix: &str, n: usize, width: usize) -> String {
    let digits = n.checked_ilog10().map_or(1, |l| l as usize + 1);
    let mut out = String::with_capacity(prefix.len() + digits.max(width));
    out.push_str(prefix);
    out.extend(std::iter::repeat_n('0', width.saturating_sub(digits)));
    crate::push_int(&mut out, n as i64);
    out
}

fn quota(name: &str, nominal: i64, borrowing: Option<i64>) -> ResourceQuota {
    ResourceQuota {
        name: name.into(),
        nominal,
        borrowing_limit: borrowing,
        lending_limit: None,
    }
}

/// Builds the synthetic cluster as engine events (flavors, namespaces, queues, then workloads).
pub fn synthetic_cluster(args: &BenchShape) -> (Vec<Event>, Vec<Event>) {
    let mut setup = Vec::new();
    for (name, spot) in [("h100", false), ("h100-spot", true)] {
        setup.push(Event::UpsertFlavor(Flavor {
            name: name.into(),
            node_labels: BTreeMap::from([(
                "sluice.dev/capacity".into(),
                if spot { "spot" } else { "on-demand" }.into(),
            )]),
            ..Default::default()
        }));
    }
    let cohorts = args.cohorts.max(1);
    for i in 0..args.cluster_queues {
        let name = padded("cq-", i, 4);
        let gpu = 8 * (1 + (i % 4) as i64);
        setup.push(Event::UpsertClusterQueue(ClusterQueue {
            name: name.clone(),
            cohort: Some(padded("cohort-", i % cohorts, 3)),
            resource_groups: vec![ResourceGroup {
                covered_resources: vec!["cpu".into(), "memory".into(), "nvidia.com/gpu".into()],
                flavors: vec![
                    FlavorQuotas {
                        flavor: "h100".into(),
                        resources: vec![
                            quota("cpu", gpu * 16_000, None),
                            quota("memory", gpu * (128 << 30), None),
                            quota("nvidia.com/gpu", gpu, Some(gpu * 2)),
                        ],
                    },
                    FlavorQuotas {
                        flavor: "h100-spot".into(),
                        resources: vec![
                            quota("cpu", gpu * 8_000, None),
                            quota("memory", gpu * (64 << 30), None),
                            quota("nvidia.com/gpu", gpu / 2, None),
                        ],
                    },
                ],
            }],
            queueing_strategy: QueueingStrategy::BestEffortFIFO,
            namespace_selector: Some(LabelSelector::default()),
            flavor_fungibility: FlavorFungibility {
                when_can_borrow: FungibilityPolicy::MayStopSearch,
                when_can_preempt: FungibilityPolicy::TryNextFlavor,
                preference: None,
            },
            preemption: PreemptionPolicy {
                reclaim_within_cohort: ReclaimPolicy::Any,
                within_cluster_queue: WithinCqPolicy::LowerPriority,
                borrow_within_cohort: BorrowWithinCohort {
                    policy: BorrowWithinCohortPolicy::Never,
                    max_priority_threshold: None,
                },
            },
            stop_policy: StopPolicy::None,
            fair_weight: 1.0,
            admission_checks: Vec::new(),
            admission_fair_sharing: false,
        }));
        setup.push(Event::UpsertNamespace(Namespace {
            name: padded("ns-", i, 4),
            labels: BTreeMap::new(),
        }));
        setup.push(Event::UpsertLocalQueue(LocalQueue {
            namespace: padded("ns-", i, 4),
            name: "default".into(),
            cluster_queue: name,
            stop_policy: StopPolicy::None,
            fair_sharing_weight: None,
        }));
    }
    let mut rng = Rng(args.seed);
    let mut workloads = Vec::with_capacity(args.workloads);
    for w in 0..args.workloads {
        let cq = w % args.cluster_queues.max(1);
        let gpus = rng.pick(&[1i64, 1, 2, 4, 8]);
        let pods = rng.pick(&[1i32, 1, 1, 2, 4]);
        let priority = rng.pick(&[50, 50, 100, 200]);
        workloads.push(Event::UpsertWorkload {
            workload: Workload {
                namespace: padded("ns-", cq, 4),
                name: padded("wl-", w, 6),
                uid: padded("uid-", w, 6),
                queue_name: "default".into(),
                priority,
                creation_time: w as i64,
                active: true,
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: pods,
                    requests: BTreeMap::from([
                        ("cpu".into(), gpus * 12_000),
                        ("memory".into(), gpus * (96 << 30)),
                        ("nvidia.com/gpu".into(), gpus),
                    ]),
                    ..Default::default()
                }],
                job_uid: None,
                admitted: false,
                pods_ready: false,
                reclaimable: Vec::new(),
                scheduling_shape: 0,
                misconfigured: None,
                admission_gated_by: None,
                adjusted_resources: 0,
                quota_reserved_at: None,
                checkpointed_at: None,
                priority_boost: 0,
            },
            admission: None,
        });
    }
    (setup, workloads)
}

/// Runs the benchmark, showing `observe` every decision carried out (with its cycle) and `at_end` the engine
/// after the last cycle: the decision-fingerprint test drives exactly this loop.
pub fn measure_with(
    args: &BenchShape,
    mut observe: impl FnMut(u64, &Decision),
    at_end: impl FnOnce(&Engine),
) -> Result<BenchResult, EngineError> {
    let (setup, workloads) = synthetic_cluster(args);
    let config = EngineConfig {
        fair_sharing: args.fair_sharing.then(FairSharingConfig::default),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(config);
    let start = Instant::now();
    for ev in setup.into_iter().chain(workloads) {
        engine.apply(ev)?;
    }
    let setup_time = start.elapsed();

    let mut cycle_times: Vec<Duration> = Vec::new();
    let mut engine_time = Duration::ZERO;
    // Finish times by cycle; an eviction bumps the workload's run number so its old finish is ignored.
    let mut running: BTreeMap<u64, Vec<(WorkloadKey, u64)>> = BTreeMap::new();
    let mut runs: crate::fasthash::NameMap<WorkloadKey, u64> = Default::default();
    let (mut admissions, mut evictions) = (0usize, 0usize);
    let mut cycle = 0u64;
    let mut idle = 0;
    let limit = 40 * args.workloads as u64 + 1000;
    while cycle < limit {
        cycle += 1;
        let t0 = Instant::now();
        // Decisions from events (finishes, completed evictions) are carried out like the cycle's own.
        let mut queue: VecDeque<Decision> = VecDeque::new();
        if let Some(done) = running.remove(&cycle) {
            for (key, run) in done {
                if runs.get(&key) == Some(&run) {
                    queue.extend(engine.apply(Event::FinishWorkload(key))?);
                }
            }
        }
        let now = cycle as i64 * 1000;
        let t1 = Instant::now();
        queue.extend(engine.schedule(now));
        cycle_times.push(t1.elapsed());
        let mut acted = false;
        while let Some(d) = queue.pop_front() {
            observe(cycle, &d);
            match d {
                Decision::Admit { workload, .. } => {
                    admissions += 1;
                    acted = true;
                    let run = runs.entry(workload.clone()).or_default();
                    *run += 1;
                    running
                        .entry(cycle + args.run_cycles.max(1))
                        .or_default()
                        .push((workload, *run));
                }
                Decision::Evict { workload, .. } => {
                    evictions += 1;
                    acted = true;
                    *runs.entry(workload.clone()).or_default() += 1;
                    queue.extend(engine.apply(Event::EvictionComplete {
                        workload,
                        time: now,
                    })?);
                }
                Decision::Pending { .. } => {}
            }
        }
        engine_time += t0.elapsed();
        if acted || !running.is_empty() {
            idle = 0;
        } else {
            idle += 1;
            if !engine.has_work() || idle > 3 {
                break;
            }
        }
    }
    at_end(&engine);
    let mut us: Vec<f64> = cycle_times.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        us.get(((p * us.len() as f64).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    let pending_at_end = (0..args.cluster_queues)
        .map(|i| {
            engine
                .cluster_queue_usage(&padded("cq-", i, 4))
                .map_or(0, |u| u.pending_workloads as usize)
        })
        .sum();
    Ok(BenchResult {
        setup_seconds: setup_time.as_secs_f64(),
        cycles: cycle_times.len(),
        admissions,
        evictions,
        engine_seconds: engine_time.as_secs_f64(),
        admissions_per_second: admissions as f64 / engine_time.as_secs_f64().max(1e-9),
        cycle_p50_us: pct(0.5),
        cycle_p99_us: pct(0.99),
        cycle_max_us: us.last().copied().unwrap_or(0.0),
        pending_at_end,
    })
}

#[cfg(test)]
mod tests {
    use super::padded;

    #[test]
    fn padded_names_read_as_format_writes_them() {
        for n in [0usize, 7, 42, 999, 1_000, 12_345, 1_234_567] {
            assert_eq!(padded("wl-", n, 6), format!("wl-{n:06}"));
            assert_eq!(padded("cq-", n, 4), format!("cq-{n:04}"));
        }
    }
}
