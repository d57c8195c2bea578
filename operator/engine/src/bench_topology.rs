//! The workload of `sluice bench --topology`: topology-aware fill of a large GPU cluster, and the time one gang's
//! placement takes once it is full.
//!
//! The cluster is the one of the issue "Speed at the scale of the largest GPU clusters": nodes of 8 GPUs (two NVLink
//! islands of 4) in racks and blocks, one topology-aware flavor, ClusterQueues (in cohorts or, by default, none)
//! whose nominal GPU quotas add up to a little more than the cluster's GPUs, so that quota and node capacity both
//! bind, and gangs of 1 to 128 GPUs that never finish. The fill schedules until nothing more can be admitted (the
//! fixed point); then probe gangs are placed one at a time on the full cluster, each deleted again so that every
//! probe sees the same cluster. Like [`crate::bench`] it reads a clock only to time the engine, never to feed it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use sluice_sdk::topology::{Gpu, GpuHealth, NodeGpus, NvlinkIsland};

use crate::bench::Rng;
use crate::{
    BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueue, Decision, Engine, EngineConfig,
    EngineError, Event, Flavor, FlavorQuotas, LabelSelector, LocalQueue, Namespace, Node, PodSet,
    PodSetTopology, PreemptionPolicy, ReclaimPolicy, ResourceGroup, ResourceQuota, StopPolicy,
    TOPOLOGY_PLACEMENT_FAILED, TopologyLevels, TopologyMode, WithinCqPolicy, Workload, WorkloadKey,
};

const GPU: &str = "nvidia.com/gpu";
const FLAVOR: &str = "h100";
const TOPOLOGY: &str = "datacenter";
const BLOCK_LABEL: &str = "sluice.dev/block";
const RACK_LABEL: &str = "sluice.dev/rack";
const HOST_LABEL: &str = "kubernetes.io/hostname";
/// CPU per GPU a pod asks for, and per node: below a node's share, so GPUs are what fills a node.
const CPU_PER_GPU: i64 = 12_000;
const NODE_CPU: i64 = 128_000;
/// GPUs per NVLink island of a node.
const ISLAND: u32 = 4;
/// The ClusterQueue the probes go to: outside every cohort, with quota for the whole cluster, so only node
/// capacity decides whether a probe is placed.
const PROBE_CQ: &str = "probe";
const PROBE_NS: &str = "ns-probe";
/// Largest figures accepted: beyond them a run would exhaust memory rather than measure anything.
const MAX_NODES: usize = 1_000_000;
const MAX_GANGS: usize = 10_000_000;

/// Scale and mix of the topology cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyShape {
    /// Nodes.
    pub nodes: usize,
    /// GPUs per node (NVLink islands of 4).
    pub gpus_per_node: u32,
    /// Nodes per rack.
    pub rack_nodes: usize,
    /// Nodes per block (a multiple of `rack_nodes`).
    pub block_nodes: usize,
    /// ClusterQueues of the fill.
    pub cluster_queues: usize,
    /// Cohorts the ClusterQueues are spread over (0: none, each queue keeps to its own quota).
    pub cohorts: usize,
    /// The fill's nominal GPU quotas together, in percent of the cluster's GPUs. Above 100 both quota and topology
    /// bind (some gangs within quota find no placement) and the fill leaves no GPU free, so every probe fails; below
    /// 100 only quota binds and the probes find room.
    pub quota_percent: u32,
    /// Gangs queued for the fill.
    pub gangs: usize,
    /// Gangs placed one at a time on the full cluster to time placement.
    pub probes: usize,
    /// Scheduling cycles the fill may run before it is reported as not reaching its fixed point.
    pub max_cycles: usize,
    /// Seed of the gang mix.
    pub seed: u64,
}

impl Default for TopologyShape {
    fn default() -> Self {
        Self {
            nodes: 10_000,
            gpus_per_node: 8,
            rack_nodes: 32,
            block_nodes: 1_024,
            cluster_queues: 100,
            cohorts: 0,
            quota_percent: 105,
            gangs: 20_000,
            probes: 200,
            max_cycles: 100_000,
            seed: 7,
        }
    }
}

/// A shape the benchmark cannot build, or an event the engine refused.
#[derive(Debug, thiserror::Error)]
pub enum TopologyBenchError {
    /// A field of the shape is out of range.
    #[error("topology bench: {field} {reason}")]
    Shape {
        /// The field.
        field: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// The engine refused a generated event.
    #[error("topology bench: {0}")]
    Engine(#[from] EngineError),
}

impl TopologyShape {
    /// Checks that the cluster can be built: positive sizes, blocks made of whole racks, sizes that fit memory.
    pub fn validate(&self) -> Result<(), TopologyBenchError> {
        let bad = |field, reason: &str| {
            Err(TopologyBenchError::Shape {
                field,
                reason: reason.to_string(),
            })
        };
        if self.nodes == 0 || self.nodes > MAX_NODES {
            return bad("nodes", &format!("must be between 1 and {MAX_NODES}"));
        }
        if self.gpus_per_node == 0 || self.gpus_per_node > 64 {
            return bad("gpus_per_node", "must be between 1 and 64");
        }
        if self.rack_nodes == 0 {
            return bad("rack_nodes", "must be at least 1");
        }
        if self.block_nodes == 0 || !self.block_nodes.is_multiple_of(self.rack_nodes) {
            return bad("block_nodes", "must be a positive multiple of rack_nodes");
        }
        if self.cluster_queues == 0 || self.cluster_queues > MAX_NODES {
            return bad(
                "cluster_queues",
                &format!("must be between 1 and {MAX_NODES}"),
            );
        }
        if self.quota_percent == 0 || self.quota_percent > 1_000 {
            return bad("quota_percent", "must be between 1 and 1000");
        }
        if self.gangs > MAX_GANGS || self.probes > MAX_GANGS {
            return bad("gangs and probes", &format!("must be at most {MAX_GANGS}"));
        }
        Ok(())
    }

    /// GPUs of the whole cluster.
    pub fn cluster_gpus(&self) -> i64 {
        self.nodes as i64 * i64::from(self.gpus_per_node)
    }
}

/// Figures of one run. Everything but the times is a deterministic function of the shape.
#[derive(Clone, Debug)]
pub struct TopologyResult {
    /// GPUs of the cluster.
    pub cluster_gpus: i64,
    /// Time to load the cluster and queue every gang (engine time only, not generation).
    pub setup_seconds: f64,
    /// Time from the first scheduling cycle to the fixed point (cycles and completed evictions).
    pub fixed_point_seconds: f64,
    /// Scheduling cycles of the fill.
    pub cycles: usize,
    /// The fill stopped at `max_cycles` without reaching its fixed point.
    pub cycle_bound_hit: bool,
    /// Admissions during the fill (a gang admitted again after a preemption counts twice).
    pub admissions: usize,
    /// Preemptions during the fill.
    pub preemptions: usize,
    /// Gangs holding quota at the fixed point.
    pub admitted_at_end: usize,
    /// Gangs still pending at the fixed point.
    pub pending_at_end: usize,
    /// Of those, gangs within quota that found no placement (their last pending reason is
    /// [`TOPOLOGY_PLACEMENT_FAILED`]): where the topology, not quota, binds.
    pub pending_for_placement: usize,
    /// GPUs the gangs holding quota were admitted with.
    pub gpus_allocated: i64,
    /// Probe gangs timed.
    pub probes: usize,
    /// Probes the full cluster had room for.
    pub probes_placed: usize,
    /// Time of one probe's scheduling cycle, percentiles in microseconds.
    pub placement_p50_us: f64,
    /// 99th percentile.
    pub placement_p99_us: f64,
    /// Maximum.
    pub placement_max_us: f64,
}

/// A node's GPUs as its agent reports them: healthy H100s in NVLink islands of [`ISLAND`] (4).
pub fn node_gpus(gpus: u32) -> NodeGpus {
    NodeGpus {
        gpus: (0..gpus)
            .map(|index| Gpu {
                index,
                model: "NVIDIA H100 80GB HBM3".into(),
                memory_mib: 81_559,
                health: GpuHealth {
                    healthy: true,
                    ..GpuHealth::default()
                },
                ..Gpu::default()
            })
            .collect(),
        nvlink_islands: (0..gpus.div_ceil(ISLAND))
            .map(|i| NvlinkIsland {
                gpus: (i * ISLAND..((i + 1) * ISLAND).min(gpus)).collect(),
                nvswitch: false,
            })
            .collect(),
        ..NodeGpus::default()
    }
}

fn quota(name: &str, nominal: i64) -> ResourceQuota {
    ResourceQuota {
        name: name.into(),
        nominal,
        borrowing_limit: None,
        lending_limit: None,
    }
}

fn cluster_queue(name: String, cohort: Option<String>, gpus: i64) -> ClusterQueue {
    ClusterQueue {
        name,
        cohort,
        resource_groups: vec![ResourceGroup {
            covered_resources: vec!["cpu".into(), GPU.into()],
            flavors: vec![FlavorQuotas {
                flavor: FLAVOR.into(),
                resources: vec![quota("cpu", gpus * CPU_PER_GPU), quota(GPU, gpus)],
            }],
        }],
        namespace_selector: Some(LabelSelector::default()),
        // Reclaim only. Every gang is queued before the first cycle, so priority preemption within a queue would act
        // only on requeued victims, and with it on as well the engine does not reach a fixed point on this mix: a
        // preemptor's freed quota goes to a higher-priority gang of another queue, its victims reclaim theirs from
        // the cohort, and the loop repeats (the thrashing of Kueue's issue #13662).
        preemption: PreemptionPolicy {
            reclaim_within_cohort: ReclaimPolicy::Any,
            within_cluster_queue: WithinCqPolicy::Never,
            borrow_within_cohort: BorrowWithinCohort {
                policy: BorrowWithinCohortPolicy::Never,
                max_priority_threshold: None,
            },
        },
        ..ClusterQueue::default()
    }
}

fn queue_events(cq: &ClusterQueue, namespace: &str, queue: &str) -> [Event; 3] {
    [
        Event::UpsertClusterQueue(cq.clone()),
        Event::UpsertNamespace(Namespace {
            name: namespace.into(),
            labels: BTreeMap::new(),
        }),
        Event::UpsertLocalQueue(LocalQueue {
            namespace: namespace.into(),
            name: queue.into(),
            cluster_queue: cq.name.clone(),
            stop_policy: StopPolicy::None,
            fair_sharing_weight: None,
        }),
    ]
}

/// The fill's ClusterQueues: weights 1 to 4 in turn, nominal GPUs in proportion, adding up to about
/// `quota_percent` of the cluster's GPUs; borrowing within a cohort is unlimited, so a big gang can use its cohort's
/// idle quota.
pub fn fill_cluster_queues(shape: &TopologyShape) -> Vec<ClusterQueue> {
    let weight = |i: usize| 1 + (i % 4) as i64;
    let total: i64 = (0..shape.cluster_queues).map(weight).sum();
    let quota = shape.cluster_gpus() * i64::from(shape.quota_percent) / 100;
    (0..shape.cluster_queues)
        .map(|i| {
            let gpus = quota * weight(i) / total.max(1);
            let cohort = (shape.cohorts > 0).then(|| format!("cohort-{:03}", i % shape.cohorts));
            cluster_queue(format!("cq-{i:04}"), cohort, gpus)
        })
        .collect()
}

/// Events of the cluster: the topology, its flavor, nodes with their GPU reports, the fill's queues and the probe
/// queue. Produced lazily, so that a large cluster is never held twice in memory.
pub fn cluster_events(shape: &TopologyShape) -> impl Iterator<Item = Event> + '_ {
    let head = [
        Event::UpsertTopology(TopologyLevels {
            name: TOPOLOGY.into(),
            levels: vec![BLOCK_LABEL.into(), RACK_LABEL.into(), HOST_LABEL.into()],
        }),
        Event::UpsertFlavor(Flavor {
            name: FLAVOR.into(),
            topology_name: Some(TOPOLOGY.into()),
            ..Flavor::default()
        }),
    ];
    let nodes = (0..shape.nodes).flat_map(move |i| {
        let name = format!("node-{i:06}");
        [
            Event::UpsertNode(Node {
                name: name.clone(),
                labels: BTreeMap::from([
                    (
                        BLOCK_LABEL.to_string(),
                        format!("block-{:04}", i / shape.block_nodes),
                    ),
                    (
                        RACK_LABEL.to_string(),
                        format!("rack-{:05}", i / shape.rack_nodes),
                    ),
                    (HOST_LABEL.to_string(), name.clone()),
                ]),
                allocatable: BTreeMap::from([
                    (
                        "cpu".to_string(),
                        NODE_CPU.max(CPU_PER_GPU * i64::from(shape.gpus_per_node)),
                    ),
                    (GPU.to_string(), i64::from(shape.gpus_per_node)),
                ]),
                ready: true,
                ..Node::default()
            }),
            Event::UpsertNodeGpus {
                node: name,
                gpus: node_gpus(shape.gpus_per_node),
            },
        ]
    });
    let fill = fill_cluster_queues(shape)
        .into_iter()
        .enumerate()
        .flat_map(|(i, cq)| queue_events(&cq, &format!("ns-{i:04}"), "default"));
    let probe = cluster_queue(PROBE_CQ.into(), None, shape.cluster_gpus());
    head.into_iter()
        .chain(nodes)
        .chain(fill)
        .chain(queue_events(&probe, PROBE_NS, PROBE_CQ))
}

/// One gang of the mix, drawn from `rng`:
/// - 40%: a single pod of 1, 2, 4 or 8 GPUs, its GPUs on one NVLink island when it asks for 4 or fewer;
/// - 20%: 2 to 16 pods of 8 GPUs that must share a rack (16 to 128 GPUs);
/// - 20%: 2 to 16 pods of 8 GPUs preferably in one block;
/// - 20%: unconstrained, 2 to 16 pods of 2, 4 or 8 GPUs (NVLink within a pod when 4 or fewer).
///
/// Priorities 0, 100 and 1,000, most often 0: they order each queue, and with cohorts a reclaim takes the lowest first.
fn gang(
    rng: &mut Rng,
    namespace: &str,
    queue: &str,
    name: String,
    priority: Option<i32>,
) -> Workload {
    let kind = rng.next_u64() % 10;
    let (pods, gpus, mode, level) = match kind {
        0..=3 => (1, rng.pick(&[1i64, 1, 2, 4, 8]), TopologyMode::None, None),
        4 | 5 => (
            2 + (rng.next_u64() % 15) as i32,
            8,
            TopologyMode::Required,
            Some(RACK_LABEL),
        ),
        6 | 7 => (
            2 + (rng.next_u64() % 15) as i32,
            8,
            TopologyMode::Preferred,
            Some(BLOCK_LABEL),
        ),
        _ => (
            2 + (rng.next_u64() % 15) as i32,
            rng.pick(&[2i64, 4, 8]),
            TopologyMode::Unconstrained,
            None,
        ),
    };
    let priority = priority.unwrap_or_else(|| rng.pick(&[0, 0, 0, 100, 100, 1_000]));
    Workload {
        namespace: namespace.into(),
        uid: format!("uid-{name}"),
        name,
        queue_name: queue.into(),
        priority,
        active: true,
        pod_sets: vec![PodSet {
            name: "main".into(),
            count: pods,
            requests: BTreeMap::from([("cpu".into(), gpus * CPU_PER_GPU), (GPU.into(), gpus)]),
            topology: Some(PodSetTopology {
                mode,
                level: level.map(Into::into),
                nvlink: gpus <= i64::from(ISLAND),
                ..PodSetTopology::default()
            }),
            ..PodSet::default()
        }],
        ..Workload::default()
    }
}

/// The fill's gangs, each in a seeded random ClusterQueue, created one time unit apart.
pub fn gang_events(shape: &TopologyShape) -> impl Iterator<Item = Event> + '_ {
    let mut rng = Rng(shape.seed);
    (0..shape.gangs).map(move |g| {
        let cq = (rng.next_u64() % shape.cluster_queues.max(1) as u64) as usize;
        let mut w = gang(
            &mut rng,
            &format!("ns-{cq:04}"),
            "default",
            format!("gang-{g:07}"),
            None,
        );
        w.creation_time = g as i64;
        Event::UpsertWorkload {
            workload: w,
            admission: None,
        }
    })
}

/// The probe gangs: the same mix from a stream of their own (so the fill does not depend on how many there are),
/// in the probe queue, at the lowest priority.
pub fn probe_gangs(shape: &TopologyShape) -> impl Iterator<Item = Workload> + '_ {
    let mut rng = Rng(shape.seed ^ 0x5052_4F42_455F_5345);
    (0..shape.probes).map(move |p| {
        let mut w = gang(
            &mut rng,
            PROBE_NS,
            PROBE_CQ,
            format!("probe-{p:06}"),
            Some(-1_000),
        );
        w.creation_time = (shape.gangs + p) as i64;
        w
    })
}

/// GPUs of an admission, summed over its pod sets.
fn admitted_gpus(d: &Decision) -> i64 {
    match d {
        Decision::Admit { admission, .. } => admission
            .pod_set_assignments
            .iter()
            .map(|a| a.resource_usage.get(GPU).copied().unwrap_or(0))
            .sum(),
        _ => 0,
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((p * sorted.len() as f64).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0)
}

/// Runs the benchmark.
pub fn measure_topology(shape: &TopologyShape) -> Result<TopologyResult, TopologyBenchError> {
    measure_topology_with(shape, |_| {}, |_| {})
}

/// Runs the benchmark, showing `at_fixed_point` the engine when the fill has stopped and `at_end` the engine after
/// the probes (tests check invariants there).
pub fn measure_topology_with(
    shape: &TopologyShape,
    at_fixed_point: impl FnOnce(&Engine),
    at_end: impl FnOnce(&Engine),
) -> Result<TopologyResult, TopologyBenchError> {
    shape.validate()?;
    let mut engine = Engine::new(EngineConfig::default());
    // Only the engine's part is timed: generating an event is the benchmark's work, not the engine's.
    let mut setup = Duration::ZERO;
    for ev in cluster_events(shape).chain(gang_events(shape)) {
        let t = Instant::now();
        engine.apply(ev)?;
        setup += t.elapsed();
    }

    // The fill. Gangs never finish, and an eviction completes at once (its pods are gone in the next instant), so
    // the fixed point is a cycle that admits and evicts nothing after which the engine has nothing to retry, or
    // whose state is the one of the previous such cycle (it would repeat forever).
    let mut held: HashMap<WorkloadKey, i64> = HashMap::new();
    // Whether each gang's last pending reason was a failed placement.
    let mut placement_failed: HashMap<WorkloadKey, bool> = HashMap::new();
    let (mut admissions, mut preemptions, mut cycles) = (0usize, 0usize, 0usize);
    let mut last_idle_digest = None;
    let mut cycle_bound_hit = true;
    let start = Instant::now();
    while cycles < shape.max_cycles {
        cycles += 1;
        let now = cycles as i64 * 1_000;
        let mut queue: VecDeque<Decision> = engine.schedule(now).into();
        let mut acted = false;
        while let Some(d) = queue.pop_front() {
            match &d {
                Decision::Admit { workload, .. } => {
                    admissions += 1;
                    acted = true;
                    held.insert(workload.clone(), admitted_gpus(&d));
                }
                Decision::Evict { workload, .. } => {
                    preemptions += 1;
                    acted = true;
                    held.remove(workload);
                    queue.extend(engine.apply(Event::EvictionComplete {
                        workload: workload.clone(),
                        time: now,
                    })?);
                }
                Decision::Pending {
                    workload, reason, ..
                } => {
                    placement_failed.insert(workload.clone(), reason == TOPOLOGY_PLACEMENT_FAILED);
                }
            }
        }
        if acted {
            last_idle_digest = None;
            continue;
        }
        let digest = engine.cycle_digest();
        if !engine.has_work() || last_idle_digest == Some(digest) {
            cycle_bound_hit = false;
            break;
        }
        last_idle_digest = Some(digest);
    }
    let fixed_point = start.elapsed();
    let pending_for_placement = placement_failed
        .iter()
        .filter(|&(key, &failed)| failed && !held.contains_key(key))
        .count();
    drop(placement_failed);
    at_fixed_point(&engine);

    // Hold the fill's queues: a probe that was placed releases node capacity when it is deleted, which makes every
    // queue retry its head; held queues keep each probe's cycle to the probe alone.
    for cq in fill_cluster_queues(shape) {
        engine.apply(Event::UpsertClusterQueue(ClusterQueue {
            stop_policy: StopPolicy::Hold,
            ..cq
        }))?;
    }
    let mut times = Vec::with_capacity(shape.probes);
    let mut probes_placed = 0;
    let mut now = (cycles as i64 + 1) * 1_000;
    for w in probe_gangs(shape) {
        let key = w.key();
        engine.apply(Event::UpsertWorkload {
            workload: w,
            admission: None,
        })?;
        now += 1_000;
        let t = Instant::now();
        let out = engine.schedule(now);
        times.push(t.elapsed().as_secs_f64() * 1e6);
        if out
            .iter()
            .any(|d| matches!(d, Decision::Admit { workload, .. } if *workload == key))
        {
            probes_placed += 1;
        }
        engine.apply(Event::DeleteWorkload(key))?;
    }
    at_end(&engine);
    times.sort_by(f64::total_cmp);
    Ok(TopologyResult {
        cluster_gpus: shape.cluster_gpus(),
        setup_seconds: setup.as_secs_f64(),
        fixed_point_seconds: fixed_point.as_secs_f64(),
        cycles,
        cycle_bound_hit,
        admissions,
        preemptions,
        admitted_at_end: held.len(),
        pending_at_end: shape.gangs - held.len(),
        pending_for_placement,
        gpus_allocated: held.values().sum(),
        probes: times.len(),
        probes_placed,
        placement_p50_us: percentile(&times, 0.5),
        placement_p99_us: percentile(&times, 0.99),
        placement_max_us: times.last().copied().unwrap_or(0.0),
    })
}
