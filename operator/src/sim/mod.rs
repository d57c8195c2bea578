//! The simulator: a cluster described by manifests, fed to the engine, run to a fixed point or through virtual
//! time. It is a thin shell around the engine, as the controllers are: it turns objects into events and carries
//! out the engine's decisions on Workloads and Jobs.

mod checks;
pub mod config;
pub mod generate;
mod job;
mod load;
pub(crate) mod metrics;
mod output;
pub mod report;
mod timing;
pub mod topology;

pub use job::{JobKey, SimJob};
pub use load::{ClusterObjects, LoadError, Loaded, NsName};
pub use metrics::{Recorder, RunEnd, SimulationReport, jain};
pub use output::{render_final_state, render_report};
pub use timing::{ARRIVAL_TIME_ANNOTATION, RUN_TIME_ANNOTATION, STARTUP_ANNOTATION};

use crate::duration::{DurationError, format_duration, parse_duration};
use sluice_sdk::topology::GPU_RESOURCE;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;

use crate::admission_checks::{self, Verdict};
use crate::controller::config::WaitForPodsReady;
use crate::engine::{self, Decision, Engine, EngineConfig, Event, Time, WorkloadKey};
use crate::ingest::{self, IngestError};
use crate::jobs::{JobError, PodSetInfo, PriorityClasses, merge_check_updates, pod_set_infos};
use crate::manifest::Document;
use crate::status;

/// The simulation clock's zero: 2026-01-01T00:00:00Z, so that written timestamps look like real ones.
pub const SIM_EPOCH: Time = 1_767_225_600_000;

/// Anything that stops a simulation from starting.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A document could not be used.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// An object the engine refused.
    #[error("{origin}: {error}")]
    Ingest {
        /// Where the object came from.
        origin: String,
        /// Why.
        error: IngestError,
    },
    /// A Job that cannot become a Workload.
    #[error("{origin}: {error}")]
    Job {
        /// Where the Job came from.
        origin: String,
        /// Why.
        error: Box<JobError>,
    },
    /// The engine refused an object.
    #[error("{origin}: {message}")]
    Engine {
        /// Where the object came from.
        origin: String,
        /// The engine's message.
        message: String,
    },
    /// A timing annotation could not be read.
    #[error("{origin}: {object}: annotation `{annotation}`: {error}")]
    Timing {
        /// Where.
        origin: String,
        /// Which object.
        object: String,
        /// Which annotation.
        annotation: &'static str,
        /// Why.
        error: DurationError,
    },
}

/// One workload in the simulation, with the Job that owns it (if any).
#[derive(Clone, Debug)]
pub struct SimWorkload {
    /// The Workload as Kueue would store it, status included.
    pub workload: api::Workload,
    /// The job that owns it (kind, namespace, name).
    pub job: Option<JobKey>,
    /// When it arrives (virtual ms since the epoch).
    pub arrival: Time,
    /// How long it runs once admitted; None = until the end.
    pub run_time: Option<Time>,
    /// Pod set infos to restore the Job with after an eviction.
    original: Vec<PodSetInfo>,
    /// Total requests per pod set, shown while it waits.
    requests: Vec<api::PodSetRequest>,
    /// The engine's view of the workload, made (and validated) once when loaded; handed over on arrival.
    ingested: Option<(engine::Workload, Option<engine::Admission>)>,
    /// Incremented on each admission, so stale completions are ignored after an eviction.
    run: u64,
    /// Quota reservations so far (which simulated admission check answer comes next).
    reservations: u32,
    /// Its Job's pods are running (admitted; with admission checks, only once they passed).
    running: bool,
    /// Its queue-order time once an admission check sent it back (Kueue orders it by the eviction time).
    order_time: Option<Time>,
    /// How long its pods take to be ready after admission (`sluice.dev/simulated-startup`); None: never.
    startup: Option<Time>,
    /// Its pods are ready in the current run (Kueue's PodsReady condition).
    ready: bool,
    started: bool,
    finished: bool,
}

/// The pending reason of a preemptor waiting for its victims (Kueue's).
const WAITING_FOR_PREEMPTED: &str = "WaitingForPreemptedWorkloads";
/// Kueue's eviction reason when pods were not ready in time.
const PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";

/// A simulated cluster.
pub struct Simulation {
    /// The objects read from the manifests.
    pub objects: ClusterObjects,
    /// Workloads by key.
    pub workloads: BTreeMap<WorkloadKey, SimWorkload>,
    /// Jobs of every kind, updated as they are admitted and evicted.
    pub jobs: BTreeMap<JobKey, SimJob>,
    /// The engine.
    pub engine: Engine,
    /// The LimitRanges and RuntimeClasses read, which adjust the Workloads' requests as in Kueue.
    rules: crate::resource_rules::ResourceRules,
    timed: bool,
    fair_sharing: bool,
    detailed_pending_reasons: bool,
    cycles: u64,
    /// Evictions per workload at the instant `evicted_at`, to notice a preemption cycle.
    evicted_now: BTreeMap<WorkloadKey, u32>,
    evicted_at: Time,
    /// Gang placement figures and scheduled failures (topology-aware flavors).
    topo: topology::TopologyStats,
    failures: Vec<topology::Failure>,
    /// Each node's GPUs as the injected degradations and failures left them.
    gpus_now: BTreeMap<String, sluice_sdk::topology::NodeGpus>,
    /// Workloads moved off degrading GPUs, until those fail.
    moved_ahead: Vec<topology::MovedAhead>,
    /// Simulated admission check answers by AdmissionCheck (`sluice.dev/simulated-answers`).
    check_answers: BTreeMap<String, Vec<checks::Answer>>,
    /// waitForPodsReady (None: off).
    pods_ready: Option<WaitForPodsReady>,
    /// Flavors and nodes as objects, to charge the nodes of workloads that arrive already admitted with a
    /// topology assignment (as the operator does after a restart).
    restore: Option<(
        BTreeMap<String, api::ResourceFlavor>,
        BTreeMap<String, k8s_openapi::api::core::v1::Node>,
    )>,
}

/// The queue of future completions, when the simulation runs in virtual time.
type Completions<'a> = Option<&'a mut BinaryHeap<Reverse<(Time, SimEvent)>>>;

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SimEvent {
    // Completions sort before arrivals at the same instant, so freed quota is seen by new arrivals.
    Complete(WorkloadKey, u64),
    /// A run reached the workload's maximumExecutionTimeSeconds (a run that finished first ignores it).
    ExecLimit(WorkloadKey, u64),
    /// An evicted workload's pods are gone: its quota and nodes are free.
    EvictionDone(WorkloadKey),
    /// A simulated admission check answers for reservation `run` of the workload.
    CheckAnswer(WorkloadKey, u64, String),
    /// A workload an admission check sent back may be queued again (its requeueAt passed).
    Requeue(WorkloadKey, u64),
    /// Run `u64`'s pods are all ready.
    PodsReady(WorkloadKey, u64),
    /// Run `u64` reached waitForPodsReady's timeout (a run whose pods became ready first ignores it).
    PodsReadyTimeout(WorkloadKey, u64),
    /// A scheduled failure (index into the failure list).
    Fail(usize),
    Arrive(WorkloadKey),
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn key_of(wl: &api::Workload) -> WorkloadKey {
    WorkloadKey {
        namespace: wl.metadata.namespace.clone().unwrap_or_default(),
        name: wl.metadata.name.clone().unwrap_or_default(),
    }
}

/// A stable, UUID-shaped uid for objects given without one.
fn synthetic_uid(kind: &str, ns: &str, name: &str) -> String {
    use sha1::{Digest, Sha1};
    let h: String = Sha1::digest(format!("{kind}/{ns}/{name}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

impl Simulation {
    /// Builds a simulation from manifest documents.
    pub fn from_documents(docs: &[Document], config: EngineConfig) -> Result<Self, SimError> {
        Self::from_documents_with_fairness(docs, config, None)
    }

    /// Builds a simulation whose engine uses `fairness` (the built-in DRS when `None`).
    pub fn from_documents_with_fairness(
        docs: &[Document],
        config: EngineConfig,
        fairness: Option<std::sync::Arc<dyn crate::engine::EngineFairness>>,
    ) -> Result<Self, SimError> {
        Self::from_documents_counting(docs, config, fairness, Default::default())
    }

    /// Builds a simulation as [`Self::from_documents_with_fairness`] whose Workloads' requests are counted by
    /// `counting` (a Configuration's `resources`).
    pub fn from_documents_counting(
        docs: &[Document],
        config: EngineConfig,
        fairness: Option<std::sync::Arc<dyn crate::engine::EngineFairness>>,
        counting: crate::resource_rules::Counting,
    ) -> Result<Self, SimError> {
        // Kueue's samples create Jobs with generateName (`kubectl create -f`): name them as the API server would.
        let docs = crate::manifest::with_generated_names(docs);
        let objects = ClusterObjects::from_documents(&docs)?;
        let fair_sharing = config.fair_sharing.is_some();
        let mut engine = match fairness {
            Some(f) => Engine::with_fairness_policy(config, f),
            None => Engine::new(config),
        };
        let ingest_err = |origin: &crate::manifest::Origin| {
            let origin = origin.to_string();
            move |error| SimError::Ingest {
                origin: origin.clone(),
                error,
            }
        };
        let feed = |engine: &mut Engine, origin: &crate::manifest::Origin, ev: Event| {
            engine.apply(ev).map(|_| ()).map_err(|e| SimError::Engine {
                origin: origin.to_string(),
                message: e.to_string(),
            })
        };
        for f in objects.flavors.values() {
            feed(
                &mut engine,
                &f.origin,
                Event::UpsertFlavor(ingest::flavor(&f.object).map_err(ingest_err(&f.origin))?),
            )?;
        }
        // AdmissionChecks: one with simulated answers has a (simulated) controller that says it is Active; any
        // other is Active only when its status says so, as in Kueue.
        let mut check_answers: BTreeMap<String, Vec<checks::Answer>> = BTreeMap::new();
        for (name, ac) in &objects.admission_checks {
            if let Some(text) =
                annotation(&ac.object.metadata, checks::SIMULATED_ANSWERS_ANNOTATION)
            {
                let answers = checks::parse_answers(text).map_err(|why| SimError::Engine {
                    origin: ac.origin.to_string(),
                    message: format!(
                        "AdmissionCheck {name}: annotation `{}`: {why}",
                        checks::SIMULATED_ANSWERS_ANNOTATION
                    ),
                })?;
                check_answers.insert(name.clone(), answers);
            }
            let active =
                check_answers.contains_key(name) || admission_checks::is_active(&ac.object);
            feed(
                &mut engine,
                &ac.origin,
                Event::UpsertAdmissionCheck {
                    name: name.clone(),
                    active,
                },
            )?;
        }
        let mut topo = topology::TopologyStats::default();
        let mut failures = Vec::new();
        for t in objects.topologies.values() {
            let v = ingest::topology(&t.object).map_err(ingest_err(&t.origin))?;
            if topo.rack_label.is_none() && v.levels.len() >= 2 {
                topo.rack_label = Some(v.levels[v.levels.len() - 2].clone());
            }
            feed(&mut engine, &t.origin, Event::UpsertTopology(v))?;
        }
        for n in objects.nodes.values() {
            let v = ingest::node(&n.object).map_err(ingest_err(&n.origin))?;
            if let Some(rack) = topo.rack_label.as_ref().and_then(|l| v.labels.get(l)) {
                topo.rack_of.insert(v.name.clone(), rack.clone());
            }
            if let Some(at) = annotation(&n.object.metadata, topology::FAIL_AT_ANNOTATION) {
                let bad = |m: String| SimError::Ingest {
                    origin: n.origin.to_string(),
                    error: IngestError::Field {
                        object: format!("Node {}", v.name),
                        field: m,
                        message: "not a duration / list of GPU indexes".into(),
                    },
                };
                let at = parse_duration(at).map_err(|_| {
                    bad(format!(
                        "metadata.annotations[{}]",
                        topology::FAIL_AT_ANNOTATION
                    ))
                })?;
                let gpus = match annotation(&n.object.metadata, topology::FAIL_GPUS_ANNOTATION) {
                    None => Vec::new(),
                    Some(list) => list
                        .split(',')
                        .map(|g| g.trim().parse::<u32>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| {
                            bad(format!(
                                "metadata.annotations[{}]",
                                topology::FAIL_GPUS_ANNOTATION
                            ))
                        })?,
                };
                failures.push(topology::Failure {
                    at,
                    node: v.name.clone(),
                    gpus,
                    degrading: false,
                });
            }
            feed(&mut engine, &n.origin, Event::UpsertNode(v))?;
        }
        for g in objects.node_gpu_topologies.values() {
            let ev = ingest::node_gpu_topology(&g.object).map_err(ingest_err(&g.origin))?;
            let node = if g.object.spec.node_name.is_empty() {
                g.object.metadata.name.clone().unwrap_or_default()
            } else {
                g.object.spec.node_name.clone()
            };
            for (annotation_name, degrading) in [
                (topology::GPU_DEGRADES_AT_ANNOTATION, true),
                (topology::GPU_FAILS_AT_ANNOTATION, false),
            ] {
                let Some(value) = annotation(&g.object.metadata, annotation_name) else {
                    continue;
                };
                let pairs =
                    topology::parse_gpu_times(value).map_err(|message| SimError::Ingest {
                        origin: g.origin.to_string(),
                        error: IngestError::Field {
                            object: format!(
                                "NodeGpuTopology {}",
                                g.object.metadata.name.as_deref().unwrap_or_default()
                            ),
                            field: format!("metadata.annotations[{annotation_name}]"),
                            message,
                        },
                    })?;
                for (gpu, at) in pairs {
                    if !g.object.spec.gpus.gpus.iter().any(|x| x.index == gpu) {
                        return Err(SimError::Ingest {
                            origin: g.origin.to_string(),
                            error: IngestError::Field {
                                object: format!("NodeGpuTopology {node}"),
                                field: format!("metadata.annotations[{annotation_name}]"),
                                message: format!("the node has no GPU {gpu}"),
                            },
                        });
                    }
                    failures.push(topology::Failure {
                        at,
                        node: node.clone(),
                        gpus: vec![gpu],
                        degrading,
                    });
                }
            }
            if let Event::UpsertNodeGpus { node, gpus } = &ev {
                topo.islands.insert(
                    node.clone(),
                    gpus.complete_islands()
                        .into_iter()
                        .map(|i| i.gpus.into_iter().collect())
                        .collect(),
                );
            }
            feed(&mut engine, &g.origin, ev)?;
        }
        failures.sort();
        topo.report.placement = "topology-aware".into();
        topo.report.policy = "topology-pack".into();
        for c in objects.cohorts.values() {
            feed(
                &mut engine,
                &c.origin,
                Event::UpsertCohort(ingest::cohort(&c.object).map_err(ingest_err(&c.origin))?),
            )?;
        }
        for cq in objects.cluster_queues.values() {
            let v = ingest::cluster_queue(&cq.object).map_err(ingest_err(&cq.origin))?;
            feed(&mut engine, &cq.origin, Event::UpsertClusterQueue(v))?;
        }
        for ns in objects.namespaces.values() {
            feed(
                &mut engine,
                &ns.origin,
                Event::UpsertNamespace(
                    ingest::namespace(&ns.object).map_err(ingest_err(&ns.origin))?,
                ),
            )?;
        }
        // Namespaces that queues live in but no manifest defines exist without labels, as `kubectl create ns`
        // would make them.
        for ((ns, _), lq) in &objects.local_queues {
            if !objects.namespaces.contains_key(ns) {
                let mut object = k8s_openapi::api::core::v1::Namespace::default();
                object.metadata.name = Some(ns.clone());
                let implicit = ingest::namespace(&object).map_err(ingest_err(&lq.origin))?;
                feed(&mut engine, &lq.origin, Event::UpsertNamespace(implicit))?;
            }
        }
        for lq in objects.local_queues.values() {
            let v = ingest::local_queue(&lq.object).map_err(ingest_err(&lq.origin))?;
            let restore =
                ingest::local_queue_usage(&lq.object).map(|usage| Event::RestoreLocalQueueUsage {
                    namespace: v.namespace.clone(),
                    name: v.name.clone(),
                    usage,
                });
            feed(&mut engine, &lq.origin, Event::UpsertLocalQueue(v))?;
            if let Some(e) = restore {
                // Usage a LocalQueue's status carries (as `kubectl get -o yaml` shows it) starts the simulation.
                feed(&mut engine, &lq.origin, e)?;
            }
        }

        let mut priorities = PriorityClasses::default();
        for w in objects.workload_priority_classes.values() {
            priorities.upsert_workload_class(&w.object);
        }
        for p in objects.priority_classes.values() {
            priorities.upsert_pod_class(&p.object);
        }

        let mut rules = crate::resource_rules::ResourceRules::with_counting(counting);
        for lr in objects.limit_ranges.values() {
            rules.upsert_limit_range(lr.object.clone());
        }
        for rc in objects.runtime_classes.values() {
            rules.upsert_runtime_class(rc.object.clone());
        }
        let mut sim = Simulation {
            objects,
            rules,
            workloads: BTreeMap::new(),
            jobs: BTreeMap::new(),
            engine,
            timed: false,
            fair_sharing,
            detailed_pending_reasons: false,
            evicted_now: BTreeMap::new(),
            evicted_at: 0,
            cycles: 0,
            topo,
            failures,
            gpus_now: BTreeMap::new(),
            moved_ahead: Vec::new(),
            check_answers,
            pods_ready: None,
            restore: None,
        };
        // Answers come later: a simulation with an answering check runs in virtual time.
        sim.timed |= sim.check_answers.values().any(|a| !a.is_empty());
        let order = sim.objects.submission_order.clone();
        let mut timings = Vec::with_capacity(order.len());
        for (index, (kind, ns, name)) in order.iter().enumerate() {
            let key = (ns.clone(), name.clone());
            // Document order breaks ties between objects without timestamps, as creation order does in Kueue.
            let default_created = SIM_EPOCH + index as Time;
            let (wl, job, origin, meta) = if *kind != "Workload" {
                let jkey: JobKey = (kind, ns.clone(), name.clone());
                let loaded = &sim.objects.jobs[&jkey];
                let mut job = loaded.object.clone();
                job.metadata_mut()
                    .uid
                    .get_or_insert_with(|| synthetic_uid(kind, ns, name));
                job.suspend();
                let mut wl = job.workload(&priorities).map_err(|error| SimError::Job {
                    origin: loaded.origin.to_string(),
                    error: Box::new(error),
                })?;
                // A UID, as the API server gives every object: preemption messages name workloads by it.
                let wl_name = wl.metadata.name.clone().unwrap_or_default();
                wl.metadata
                    .uid
                    .get_or_insert_with(|| synthetic_uid("Workload", ns, &wl_name));
                let meta = job.metadata().clone();
                sim.jobs.insert(jkey.clone(), job);
                (wl, Some(jkey), loaded.origin.clone(), meta)
            } else {
                let loaded = &sim.objects.workloads[&key];
                let mut wl = loaded.object.clone();
                wl.metadata
                    .uid
                    .get_or_insert_with(|| synthetic_uid("Workload", ns, name));
                // A workload a stopped queue evicted, whose queue runs again in this input, is requeued as Kueue's
                // workload controller does.
                let lq = sim
                    .objects
                    .local_queues
                    .get(&(ns.clone(), wl.spec.queue_name.clone()))
                    .map(|l| &l.object.spec);
                let none = |p: api::StopPolicy| p == api::StopPolicy::None;
                let lq_active = lq.is_some_and(|l| none(l.stop_policy()));
                let cq_active = lq
                    .and_then(|l| sim.objects.cluster_queues.get(&l.cluster_queue))
                    .is_some_and(|c| none(c.object.spec.stop_policy()));
                if let Some(requeue) = status::restart_requeue(&wl, lq_active, cq_active)
                    .or_else(|| status::reactivation_requeue(&wl))
                {
                    requeue.apply(&mut wl, default_created);
                }
                // Kueue's WorkloadPriorityClass controller: a Workload takes the value of the class it names.
                if let Some(value) = priorities.class_priority_change(&wl) {
                    wl.spec.priority = Some(value);
                }
                let meta = wl.metadata.clone();
                (wl, None, loaded.origin.clone(), meta)
            };
            let object = format!("{kind} {ns}/{name}");
            let timing = |ann: &'static str| -> Result<Option<Time>, SimError> {
                annotation(&meta, ann)
                    .map(parse_duration)
                    .transpose()
                    .map_err(|error| SimError::Timing {
                        origin: origin.to_string(),
                        object: object.clone(),
                        annotation: ann,
                        error,
                    })
            };
            let arrival_offset = timing(ARRIVAL_TIME_ANNOTATION)?;
            let run_time = timing(RUN_TIME_ANNOTATION)?;
            let startup = match annotation(&meta, STARTUP_ANNOTATION).map(str::trim) {
                Some("never") => None,
                Some(_) => timing(STARTUP_ANNOTATION)?,
                None => Some(0),
            };
            sim.timed |= arrival_offset.is_some()
                || run_time.is_some()
                || annotation(&meta, STARTUP_ANNOTATION).is_some();
            let created = meta.creation_timestamp.as_ref().map(ingest::time_of);
            let original = wl
                .spec
                .pod_sets
                .iter()
                .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
                .collect();
            // Validate now, so bad input fails before anything runs.
            let ingested = ingest::workload_with(&wl, &sim.rules).map_err(ingest_err(&origin))?;
            let requests = status::resource_requests(&ingested.0);
            timings.push((key_of(&wl), arrival_offset, created, default_created));
            sim.workloads.insert(
                key_of(&wl),
                SimWorkload {
                    workload: wl,
                    job,
                    arrival: default_created,
                    run_time,
                    original,
                    requests,
                    ingested: Some(ingested),
                    run: 0,
                    reservations: 0,
                    running: false,
                    order_time: None,
                    startup,
                    ready: false,
                    started: false,
                    finished: false,
                },
            );
        }
        // In virtual time everything is measured from the start: arrival is the annotation's offset (0 without
        // one), never a creationTimestamp from another clock. Without timing, creationTimestamp orders the queue.
        for (key, offset, created, default_created) in timings {
            let arrival = match (sim.timed, offset, created) {
                (true, Some(off), _) => SIM_EPOCH + off,
                (true, None, _) => default_created,
                (false, _, Some(t)) => t,
                (false, _, None) => default_created,
            };
            if let Some(sw) = sim.workloads.get_mut(&key) {
                sw.arrival = arrival;
                sw.workload.metadata.creation_timestamp = Some(status::k8s_time(arrival));
                if let Some((wl, _)) = sw.ingested.as_mut() {
                    wl.creation_time = arrival;
                    // Status times come from another clock than virtual time: a recorded reservation is no
                    // later than the arrival.
                    if sim.timed {
                        wl.quota_reserved_at = wl.quota_reserved_at.map(|t| t.min(arrival));
                    }
                }
            }
        }
        Ok(sim)
    }

    /// Whether any Workload or Job carries timing annotations (then `run` is a discrete-event simulation).
    pub fn is_timed(&self) -> bool {
        self.timed
    }

    /// Writes Kueue's detailed QuotaReserved=False reasons (WaitingForQuota, NoMatchingFlavor, ...) as Kueue does
    /// with its UnadmittedWorkloadsObservability feature gate; off (plain "Pending"), as Kueue's default.
    pub fn set_detailed_pending_reasons(&mut self, on: bool) {
        self.detailed_pending_reasons = on;
    }

    /// Runs under Kueue's waitForPodsReady (None: off, as without it): pods slow to start
    /// (`sluice.dev/simulated-startup`) are evicted after the timeout and requeued with backoff, and
    /// blockAdmission (in the engine's config) waits for them.
    pub fn set_wait_for_pods_ready(&mut self, config: Option<WaitForPodsReady>) {
        self.pods_ready = config;
    }

    /// Whether fair sharing is on.
    pub fn fair_sharing(&self) -> bool {
        self.fair_sharing
    }

    /// Scheduling cycles run so far.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    fn arrive(
        &mut self,
        key: &WorkloadKey,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) -> Result<(), SimError> {
        let origin = self.origin_of(key);
        let Some(sw) = self.workloads.get_mut(key) else {
            return Ok(());
        };
        if sw.started {
            return Ok(());
        }
        sw.started = true;
        let finished = sw
            .workload
            .status
            .as_ref()
            .and_then(|s| status::condition(&s.conditions, labels::condition::FINISHED))
            .is_some_and(|c| c.status == "True");
        if finished {
            sw.finished = true;
            return Ok(());
        }
        let Some((mut wl, admission)) = sw.ingested.take() else {
            return Ok(());
        };
        // Already running: its pods are ready (blockAdmission does not wait for it).
        if admission.is_some() {
            sw.ready = true;
            wl.pods_ready = true;
        }
        let cq = match &admission {
            Some(a) => a.cluster_queue.clone(),
            None => self.cluster_queue_of(&wl.namespace, &wl.queue_name),
        };
        recorder.arrive(key, &cq, &wl.queue_name, now);
        if admission.is_none()
            && let Some(spec) = self.objects.cluster_queues.get(&cq).map(|c| &c.object.spec)
        {
            // Its check list follows its ClusterQueue before quota is reserved too (Kueue's workload controller).
            let checks = admission_checks::checks_for(spec, None);
            if !checks.is_empty()
                && let Some(sw) = self.workloads.get_mut(key)
            {
                admission_checks::sync(&mut sw.workload, &checks, now);
            }
        }
        if let Some(a) = &admission
            && let Some(sw) = self.workloads.get_mut(key)
        {
            // Already running: it holds its quota from now and finishes after its run time.
            sw.run += 1;
            sw.running = true;
            recorder.admit(
                key,
                &a.cluster_queue,
                ingest::gpus_by_flavor(a, GPU_RESOURCE),
                now,
            );
            if let (Some(rt), Some(heap)) = (sw.run_time, completions.as_deref_mut()) {
                heap.push(Reverse((now + rt, SimEvent::Complete(key.clone(), sw.run))));
            }
            schedule_exec_limit(key, sw, now, completions);
        }
        // Only a recorded topology assignment needs the engine's copy of the workload afterwards.
        let topology_assigned = admission.is_some()
            && self
                .workloads
                .get(key)
                .and_then(|sw| sw.workload.status.as_ref())
                .and_then(|s| s.admission.as_ref())
                .is_some_and(|a| {
                    a.pod_set_assignments
                        .iter()
                        .any(|p| p.topology_assignment.is_some())
                });
        let restored = topology_assigned.then(|| wl.clone());
        let mut decisions = self
            .engine
            .apply(Event::UpsertWorkload {
                workload: wl,
                admission,
            })
            .map_err(|e| SimError::Engine {
                origin: origin.clone(),
                message: e.to_string(),
            })?;
        if let Some(w) = restored {
            decisions.extend(self.restore_placement(key, &w, &origin)?);
        }
        self.carry_out(decisions, now, recorder, completions);
        Ok(())
    }

    /// Charges the nodes an already-admitted workload's recorded topology assignment holds, as Kueue counts
    /// every admitted assignment against node capacity.
    fn restore_placement(
        &mut self,
        key: &WorkloadKey,
        w: &engine::Workload,
        origin: &str,
    ) -> Result<Vec<Decision>, SimError> {
        let (flavors, nodes) = self.restore.get_or_insert_with(|| {
            (
                self.objects
                    .flavors
                    .iter()
                    .map(|(k, v)| (k.clone(), v.object.clone()))
                    .collect(),
                self.objects
                    .nodes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.object.clone()))
                    .collect(),
            )
        });
        let Some(sw) = self.workloads.get(key) else {
            return Ok(Vec::new());
        };
        let pod_sets = crate::controller::tas::restored_placements(&sw.workload, w, flavors, nodes)
            .map_err(|message| SimError::Engine {
                origin: origin.to_string(),
                message: format!("Workload {key}: {message}"),
            })?;
        if pod_sets.is_empty() {
            return Ok(Vec::new());
        }
        self.engine
            .apply(Event::RestorePlacement {
                workload: key.clone(),
                pod_sets,
            })
            .map_err(|e| SimError::Engine {
                origin: origin.to_string(),
                message: e.to_string(),
            })
    }

    /// Where a workload (or the Job that made it) was defined.
    fn origin_of(&self, key: &WorkloadKey) -> String {
        let sw = self.workloads.get(key);
        let job = sw
            .and_then(|sw| sw.job.as_ref())
            .and_then(|j| self.objects.jobs.get(j));
        let nsname = (key.namespace.clone(), key.name.clone());
        match (job, self.objects.workloads.get(&nsname)) {
            (Some(j), _) => j.origin.to_string(),
            (None, Some(w)) => w.origin.to_string(),
            (None, None) => key.to_string(),
        }
    }

    fn cluster_queue_of(&self, namespace: &str, queue: &str) -> String {
        self.objects
            .local_queues
            .get(&(namespace.to_string(), queue.to_string()))
            .map(|lq| lq.object.spec.cluster_queue.clone())
            .unwrap_or_default()
    }

    /// Carries out decisions on Workloads and Jobs. Evicted workloads' pods stop at once, so their eviction
    /// completes immediately. Returns whether any admission or eviction happened.
    fn carry_out(
        &mut self,
        decisions: Vec<Decision>,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) -> bool {
        let mut changed = false;
        let mut queue: std::collections::VecDeque<Decision> = decisions.into();
        while let Some(d) = queue.pop_front() {
            match d {
                Decision::Admit {
                    workload: key,
                    admission,
                    time,
                } => {
                    changed = true;
                    let placement = self.engine.placement(&key).map(<[_]>::to_vec);
                    let api_adm =
                        status::api_admission_with_placement(&admission, placement.as_deref());
                    let cq_spec = self
                        .objects
                        .cluster_queues
                        .get(&admission.cluster_queue)
                        .map(|cq| &cq.object.spec);
                    let Some(sw) = self.workloads.get_mut(&key) else {
                        continue;
                    };
                    if let Some(p) = &placement {
                        self.topo.admitted(p);
                    }
                    let checked =
                        admission_checks::reserve(&mut sw.workload, cq_spec, api_adm, time);
                    let checks: Vec<String> = sw
                        .workload
                        .status
                        .as_ref()
                        .map(|s| s.admission_checks.iter().map(|c| c.name.clone()).collect())
                        .unwrap_or_default();
                    sw.run += 1;
                    sw.reservations += 1;
                    if checked {
                        self.ask_checks(&key, &checks, now, completions);
                    } else {
                        self.start_run(&key, now, recorder, completions);
                    }
                }
                Decision::Pending {
                    workload: key,
                    reason,
                    message,
                } => {
                    if reason == WAITING_FOR_PREEMPTED {
                        recorder.waiting_for_victims(&key, now);
                    }
                    if let Some(sw) = self.workloads.get_mut(&key)
                        && !status::keeps_deactivation_message(&sw.workload, &reason)
                        && !status::pending_unwritten(
                            &sw.workload,
                            &reason,
                            self.detailed_pending_reasons,
                        )
                    {
                        let written =
                            status::written_pending_reason(&reason, self.detailed_pending_reasons);
                        status::pending(&mut sw.workload, written, &message, &sw.requests, now);
                    }
                }
                Decision::Evict {
                    workload: key,
                    reason,
                    preemption_reason,
                    message,
                    time,
                    graceful,
                    ..
                } => {
                    changed = true;
                    if reason == engine::NODE_FAILURES {
                        self.topo.report.node_failure_evictions += 1;
                        if graceful {
                            self.moved_off_degrading(&key, recorder);
                        }
                    }
                    let Some(sw) = self.workloads.get_mut(&key) else {
                        continue;
                    };
                    // The run is over: its pending completion must not finish the workload.
                    sw.run += 1;
                    // Pods that never started (an admission check sent it back) have nothing to stop.
                    let ran = std::mem::take(&mut sw.running);
                    *self.evicted_now.entry(key.clone()).or_default() += 1;
                    // Pods that did not start in time: Kueue records the cause, WaitForStart (they never fail
                    // after starting here).
                    let cause = if reason == PODS_READY_TIMEOUT {
                        labels::reason::WAIT_FOR_START
                    } else {
                        ""
                    };
                    status::evict_with_cause(
                        &mut sw.workload,
                        &reason,
                        cause,
                        preemption_reason.as_deref(),
                        &message,
                        time,
                    );
                    let label = match &preemption_reason {
                        Some(p) => format!("{reason}/{p}"),
                        None => reason.clone(),
                    };
                    recorder.end(&key, time, RunEnd::Evicted(label));
                    if let Some(job_key) = &sw.job
                        && let Some(job) = self.jobs.get_mut(job_key)
                    {
                        job.stop_and_restore(&sw.original);
                    }
                    // In virtual time the pods take their grace to stop, and the quota and nodes stay held
                    // until then, as on a cluster; a fixed-point run has no time to wait.
                    let grace = if ran { self.eviction_grace(&key) } else { 0 };
                    match completions.as_deref_mut() {
                        Some(heap) if grace > 0 => {
                            heap.push(Reverse((time + grace, SimEvent::EvictionDone(key.clone()))));
                        }
                        _ => queue.extend(self.eviction_done(&key, time, completions)),
                    }
                }
            }
        }
        changed
    }

    /// The workload is admitted (quota reserved and every admission check passed): its Job starts, and its
    /// run counts from now.
    fn start_run(
        &mut self,
        key: &WorkloadKey,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) {
        let Some(engine::WorkloadState::Admitted(admission)) = self.engine.workload_state(key)
        else {
            return;
        };
        let placement = self.engine.placement(key).map(<[_]>::to_vec);
        let Some(sw) = self.workloads.get_mut(key) else {
            return;
        };
        sw.running = true;
        recorder.admit(
            key,
            &admission.cluster_queue,
            ingest::gpus_by_flavor(&admission, GPU_RESOURCE),
            now,
        );
        if let Some(p) = &placement {
            recorder.place(key, gpus_by_node(p));
        }
        let api_adm = sw
            .workload
            .status
            .as_ref()
            .and_then(|s| s.admission.clone());
        if let Some(job_key) = &sw.job
            && let Some(job) = self.jobs.get_mut(job_key)
            && let Some(api_adm) = &api_adm
        {
            let lq = sw.workload.spec.queue_name.clone();
            let flavors = &self.objects.flavors;
            let flavor = |n: &str| flavors.get(n).map(|f| &f.object);
            let name = sw.workload.metadata.name.as_deref().unwrap_or_default();
            let checks = sw
                .workload
                .status
                .as_ref()
                .map(|s| &s.admission_checks[..])
                .unwrap_or(&[]);
            let infos = pod_set_infos(api_adm, &sw.workload.spec.pod_sets, &lq, name, flavor)
                .and_then(|mut infos| merge_check_updates(&mut infos, checks).map(|()| infos));
            match infos {
                Ok(infos) => {
                    if let Err(e) = job.run_with(&infos) {
                        tracing::warn!(job = %e, "could not start job");
                    }
                }
                Err(e) => {
                    tracing::warn!(workload = %key, error = %e, "could not build pod set infos")
                }
            }
        }
        sw.ready = false;
        // Pods that never start never finish; in a fixed-point run there is no time to wait, so they start now.
        let startup = match (sw.startup, completions.is_some()) {
            (Some(d), true) => Some(d),
            (Some(_), false) => Some(0),
            (None, _) => None,
        };
        if let (Some(rt), Some(heap), Some(d)) = (sw.run_time, completions.as_deref_mut(), startup)
        {
            heap.push(Reverse((
                now + d + rt,
                SimEvent::Complete(key.clone(), sw.run),
            )));
        }
        schedule_exec_limit(key, sw, now, completions);
        if let Some(heap) = completions.as_deref_mut() {
            if let Some(d) = startup.filter(|d| *d > 0) {
                heap.push(Reverse((now + d, SimEvent::PodsReady(key.clone(), sw.run))));
            }
            if let Some(cfg) = &self.pods_ready
                && startup != Some(0)
            {
                let at = now + cfg.timeout.as_millis() as Time;
                heap.push(Reverse((
                    at,
                    SimEvent::PodsReadyTimeout(key.clone(), sw.run),
                )));
            }
        }
        if startup == Some(0) {
            let run = sw.run;
            self.pods_become_ready(key, run, now);
        }
    }

    /// Run `run`'s pods are all ready: PodsReady=True on the Workload (under waitForPodsReady), and the engine
    /// learns it (blockAdmission waits for it).
    fn pods_become_ready(&mut self, key: &WorkloadKey, run: u64, now: Time) {
        let Some(sw) = current_run(&mut self.workloads, key, run) else {
            return;
        };
        if sw.ready {
            return;
        }
        sw.ready = true;
        if self.pods_ready.is_some() {
            let (ready, reason, message) = status::pods_ready_condition(&sw.workload, true);
            let st = sw.workload.status.get_or_insert_with(Default::default);
            status::set_condition(
                &mut st.conditions,
                labels::condition::PODS_READY,
                ready,
                reason,
                message,
                now,
            );
        }
        if self.engine.config().block_admission {
            self.engine.advance_clock(now);
            self.show_admitted(key);
        }
    }

    /// Run `run` reached waitForPodsReady's timeout with pods not ready: as Kueue's workload controller, evicted
    /// (PodsReadyTimeout) and requeued after a backoff, or deactivated once past `backoffLimitCount`.
    fn pods_ready_timeout(
        &mut self,
        key: &WorkloadKey,
        run: u64,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) {
        let Some(cfg) = self.pods_ready.clone() else {
            return;
        };
        let Some(sw) = current_run(&mut self.workloads, key, run) else {
            return;
        };
        if sw.ready || !sw.workload.spec.is_active() {
            return;
        }
        let Some((count, requeue_at)) =
            cfg.requeue_after_timeout(status::requeue_count(&sw.workload), now)
        else {
            self.deactivate(
                key,
                labels::reason::REQUEUING_LIMIT_EXCEEDED,
                "exceeding the maximum number of re-queuing retries",
                now,
                recorder,
                completions,
            );
            return;
        };
        status::set_requeue_state(&mut sw.workload, count, requeue_at);
        let evict = Decision::Evict {
            workload: key.clone(),
            reason: PODS_READY_TIMEOUT.into(),
            preemption_reason: None,
            preemptor: None,
            message: format!("Exceeded the PodsReady timeout {key}"),
            time: now,
            graceful: false,
        };
        self.carry_out(vec![evict], now, recorder, completions);
    }

    /// Quota is reserved in a ClusterQueue with admission checks: each check with simulated answers answers
    /// this reservation later (in virtual time; a fixed-point run has no later).
    fn ask_checks(
        &mut self,
        key: &WorkloadKey,
        checks: &[String],
        now: Time,
        completions: &mut Completions<'_>,
    ) {
        let (Some(sw), Some(heap)) = (self.workloads.get(key), completions.as_deref_mut()) else {
            return;
        };
        for check in checks {
            let answer = self
                .check_answers
                .get(check)
                .and_then(|a| checks::answer_for(a, sw.reservations));
            if let Some(a) = answer {
                heap.push(Reverse((
                    now + a.after,
                    SimEvent::CheckAnswer(key.clone(), sw.run, check.clone()),
                )));
            }
        }
    }

    /// A simulated check answers reservation `run`: the Workload's check state changes and Kueue's workload
    /// controller acts on it: all Ready admits (the Job starts), Retry evicts and requeues after the check's
    /// backoff, Rejected deactivates.
    fn answer_check(
        &mut self,
        key: &WorkloadKey,
        run: u64,
        check: &str,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) {
        let Some(sw) = current_run(&mut self.workloads, key, run) else {
            return;
        };
        let Some(answer) = self
            .check_answers
            .get(check)
            .and_then(|a| checks::answer_for(a, sw.reservations))
            .cloned()
        else {
            return;
        };
        let retries = sw
            .workload
            .status
            .as_ref()
            .and_then(|s| s.admission_checks.iter().find(|c| c.name == check))
            .and_then(|c| c.retry_count)
            .unwrap_or(0);
        admission_checks::set_state(
            &mut sw.workload,
            check,
            answer.state,
            "",
            answer.requeue_after(retries),
            now,
        );
        self.engine.advance_clock(now);
        if admission_checks::sync_admitted(&mut sw.workload, now)
            && admission_checks::all_ready(&sw.workload)
        {
            self.show_admitted(key);
            self.start_run(key, now, recorder, completions);
            return;
        }
        let Some(sw) = self.workloads.get_mut(key) else {
            return;
        };
        match admission_checks::verdict(&sw.workload) {
            Verdict::Wait => {}
            Verdict::Retry {
                message,
                requeue_at,
            } => {
                if let Some(at) = requeue_at {
                    admission_checks::hold_until(&mut sw.workload, at);
                }
                let evict = Decision::Evict {
                    workload: key.clone(),
                    reason: admission_checks::EVICTED_BY_ADMISSION_CHECK.into(),
                    preemption_reason: None,
                    preemptor: None,
                    message,
                    time: now,
                    graceful: false,
                };
                self.carry_out(vec![evict], now, recorder, completions);
            }
            Verdict::Rejected { message } => self.deactivate(
                key,
                admission_checks::EVICTED_BY_ADMISSION_CHECK,
                &message,
                now,
                recorder,
                completions,
            ),
        }
    }

    /// Tells the engine the workload's checks passed, so its queues count it as admitted.
    fn show_admitted(&mut self, key: &WorkloadKey) {
        let Some(engine::WorkloadState::Admitted(admission)) = self.engine.workload_state(key)
        else {
            return;
        };
        let Some(sw) = self.workloads.get(key) else {
            return;
        };
        let Ok((mut workload, _)) = ingest::workload_with(&sw.workload, &self.rules) else {
            return;
        };
        if let Some(t) = sw.order_time {
            workload.creation_time = t;
        }
        if let Err(e) = self.engine.apply(Event::UpsertWorkload {
            workload,
            admission: Some(admission),
        }) {
            tracing::warn!(workload = %key, error = %e, "admitted workload refused");
        }
    }

    /// Back in the queue after an admission check sent the workload back: Requeued=True (BackoffFinished), in
    /// queue order by its eviction time, as Kueue's workload controller and queue manager do.
    fn requeue(&mut self, key: &WorkloadKey, now: Time) -> Vec<Decision> {
        let Some(sw) = self.workloads.get_mut(key) else {
            return Vec::new();
        };
        if sw.finished || !sw.workload.spec.is_active() {
            return Vec::new();
        }
        status::finish_backoff(&mut sw.workload, now);
        let Ok((mut workload, _)) = ingest::workload_with(&sw.workload, &self.rules) else {
            return Vec::new();
        };
        if let Some(t) = sw.order_time {
            workload.creation_time = t;
        }
        self.engine.advance_clock(now);
        let _ = self.engine.apply(Event::DeleteWorkload(key.clone()));
        self.engine
            .apply(Event::UpsertWorkload {
                workload,
                admission: None,
            })
            .unwrap_or_else(|e| {
                tracing::warn!(workload = %key, error = %e, "requeue refused");
                Vec::new()
            })
    }

    /// How long an evicted workload's pods take to stop: the longest `terminationGracePeriodSeconds` of its pod
    /// sets (Kubernetes' 30 s when unset), after the checkpoint grace (`sluice.dev/checkpoint-grace` on its
    /// Workload or Job) when it asked for one, taken in full.
    fn eviction_grace(&self, key: &WorkloadKey) -> Time {
        const KUBERNETES_DEFAULT_GRACE_SECONDS: i64 = 30;
        let Some(sw) = self.workloads.get(key) else {
            return 0;
        };
        let pods = sw
            .workload
            .spec
            .pod_sets
            .iter()
            .map(|ps| {
                ps.template
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
                    .unwrap_or(KUBERNETES_DEFAULT_GRACE_SECONDS)
                    .max(0)
            })
            .max()
            .unwrap_or(KUBERNETES_DEFAULT_GRACE_SECONDS)
            .saturating_mul(1000);
        let grace_of = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            crate::controller::checkpoint::parse_grace(annotation(
                meta,
                crate::controller::checkpoint::GRACE_ANNOTATION,
            ))
            .ok()
            .flatten()
        };
        let checkpoint = grace_of(&sw.workload.metadata)
            .or_else(|| {
                let job = self.jobs.get(sw.job.as_ref()?)?;
                grace_of(job.metadata())
            })
            .unwrap_or(0);
        pods.saturating_add(checkpoint)
    }

    /// The evicted workload's pods are gone: it goes back to its queue, and the engine frees its quota and nodes.
    fn eviction_done(
        &mut self,
        key: &WorkloadKey,
        time: Time,
        completions: &mut Completions<'_>,
    ) -> Vec<Decision> {
        let mut by_check = None;
        let order_by_eviction = self
            .pods_ready
            .as_ref()
            .is_some_and(|c| c.order_by_eviction);
        if let Some(sw) = self.workloads.get_mut(key) {
            let by_timeout = status::evicted_for(&sw.workload, PODS_READY_TIMEOUT);
            if by_timeout
                || status::evicted_for(&sw.workload, admission_checks::EVICTED_BY_ADMISSION_CHECK)
            {
                let st = sw.workload.status.as_ref();
                let evicted_at = st
                    .and_then(|s| status::condition(&s.conditions, labels::condition::EVICTED))
                    .map(|c| c.last_transition_time.0.as_millisecond());
                let requeue_at = st
                    .and_then(|s| s.requeue_state.as_ref())
                    .and_then(|r| r.requeue_at.as_ref())
                    .map(|t| t.0.as_millisecond());
                // Kueue queues it again by its eviction time (for a timeout, unless requeuingStrategy says
                // Creation).
                if !by_timeout || order_by_eviction {
                    sw.order_time = evicted_at;
                }
                by_check = Some((requeue_at, sw.run));
            }
            status::requeue_after_eviction(&mut sw.workload, time);
        }
        let mut out = match self.engine.apply(Event::EvictionComplete {
            workload: key.clone(),
            time,
        }) {
            Ok(more) => more,
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "eviction completion refused");
                Vec::new()
            }
        };
        // Sent back by an admission check or a PodsReady timeout: out of the queue until its requeueAt, then
        // queued by eviction time.
        match by_check {
            Some((Some(at), run)) if at > time => {
                let _ = self.engine.apply(Event::DeleteWorkload(key.clone()));
                if let Some(heap) = completions.as_deref_mut() {
                    heap.push(Reverse((at, SimEvent::Requeue(key.clone(), run))));
                }
            }
            Some(_) => out.extend(self.requeue(key, time)),
            None => {}
        }
        out
    }

    /// Run `run` of the workload reached its maximumExecutionTimeSeconds: as Kueue's workload controller, it is
    /// deactivated (DeactivationTarget MaximumExecutionTimeExceeded, `spec.active=false`, accumulated time
    /// cleared) and the engine evicts it as Deactivated.
    fn exceed_execution_time(
        &mut self,
        key: &WorkloadKey,
        run: u64,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) {
        if current_run(&mut self.workloads, key, run).is_none() {
            return;
        }
        self.deactivate(
            key,
            labels::reason::MAXIMUM_EXECUTION_TIME_EXCEEDED,
            "exceeding the maximum execution time",
            now,
            recorder,
            completions,
        );
    }

    /// Kueue's deactivation: DeactivationTarget (`reason`, `message`) and `spec.active=false`; the engine then
    /// evicts the workload as Deactivated.
    fn deactivate(
        &mut self,
        key: &WorkloadKey,
        reason: &str,
        message: &str,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) {
        let Some(sw) = self.workloads.get_mut(key) else {
            return;
        };
        status::set_deactivation_target(&mut sw.workload, reason, message, now);
        sw.workload.spec.active = Some(false);
        self.engine.advance_clock(now);
        let decisions = ingest::workload_with(&sw.workload, &self.rules)
            .map_err(|e| e.to_string())
            .and_then(|(workload, _)| {
                // The engine keeps its own admission; only `active` changed.
                self.engine
                    .apply(Event::UpsertWorkload {
                        workload,
                        admission: None,
                    })
                    .map_err(|e| e.to_string())
            });
        match decisions {
            Ok(d) => {
                self.carry_out(d, now, recorder, completions);
            }
            Err(e) => tracing::warn!(workload = %key, error = %e, "deactivation refused"),
        }
    }

    /// Finishes the workload's run `run`; false when that run was already over (evicted or finished).
    fn complete(
        &mut self,
        key: &WorkloadKey,
        run: u64,
        now: Time,
        recorder: &mut Recorder,
    ) -> bool {
        let Some(sw) = current_run(&mut self.workloads, key, run) else {
            return false;
        };
        sw.finished = true;
        status::finish(&mut sw.workload, true, "Job finished successfully", now);
        recorder.end(key, now, RunEnd::Finished);
        if let Some(job_key) = &sw.job
            && let Some(job) = self.jobs.get_mut(job_key)
        {
            job.complete(now);
        }
        match self.engine.apply(Event::FinishWorkload(key.clone())) {
            Ok(more) => {
                self.carry_out(more, now, recorder, &mut None);
            }
            Err(e) => tracing::warn!(workload = %key, error = %e, "finish refused"),
        }
        true
    }

    /// Runs scheduling cycles at `now` until nothing more can change.
    fn settle(&mut self, now: Time, recorder: &mut Recorder, completions: &mut Completions<'_>) {
        // Preemptions can chase each other in a circle (each one allowed by Kueue's rules), and with evictions
        // completing at once nothing else breaks the circle at this instant. A workload evicted more than this
        // many times at one instant means that happened: stop here, say so in the report, and let time move.
        const MAX_EVICTIONS_PER_INSTANT: u32 = 3;
        // A bound well above what a fixed point needs: every workload admitted or preempted a few times.
        let limit = 4 * self.workloads.len() as u64 + 64;
        // Evictions completing later at this same instant belong to the same chase, so the count is kept
        // until time moves.
        if self.evicted_at != now {
            self.evicted_now.clear();
            self.evicted_at = now;
        }
        let mut quiet = std::collections::HashSet::new();
        for cycle in 0..limit {
            let decisions = self.engine.schedule(now);
            self.cycles += 1;
            let acted = self.carry_out(decisions, now, recorder, completions);
            let cycling = self
                .evicted_now
                .values()
                .any(|n| *n > MAX_EVICTIONS_PER_INSTANT);
            if cycling || cycle + 1 == limit {
                recorder.unsettled(now);
                // The report lists every such instant; the log says it as virtual time from the start.
                tracing::debug!(
                    at = %format_duration(now - SIM_EPOCH),
                    cycles = cycle + 1,
                    "scheduling did not settle"
                );
                break;
            }
            // Kueue pops every head in turn: a misfit goes to its queue's inadmissible list and the next
            // workload is tried in the next cycle. So this is a fixed point only when no ClusterQueue has a head
            // left that was not tried against the current state of its quota tree.
            if !acted && !self.engine.has_work() {
                break;
            }
            // Heads retried flavor after flavor while a preemptor waits for its victims: once a quiet cycle
            // leaves a state seen after an earlier quiet cycle, nothing changes until time moves.
            if acted {
                quiet.clear();
            } else if !quiet.insert(self.engine.cycle_digest()) {
                break;
            }
        }
    }

    /// Runs the simulation: to a fixed point when nothing is timed, else through virtual time until every
    /// event is processed (or `until`, a duration from the start, passes). `progress` is told each event.
    pub fn run(
        &mut self,
        until: Option<Time>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<SimulationReport, SimError> {
        let mut recorder = Recorder::default();
        let mut heap: BinaryHeap<Reverse<(Time, SimEvent)>> = BinaryHeap::new();
        for (key, sw) in &self.workloads {
            heap.push(Reverse((sw.arrival, SimEvent::Arrive(key.clone()))));
        }
        if self.timed {
            for (i, f) in self.failures.iter().enumerate() {
                heap.push(Reverse((SIM_EPOCH + f.at, SimEvent::Fail(i))));
            }
        }
        let total = self.workloads.len() as u64;
        let mut done = 0u64;
        let deadline = until.map(|u| SIM_EPOCH + u);
        let mut now = SIM_EPOCH;
        if !self.timed {
            // Everything is there at once; arrival order is creation order.
            while let Some(Reverse((t, ev))) = heap.pop() {
                if let SimEvent::Arrive(k) = ev {
                    self.arrive(&k, t, &mut recorder, &mut None)?;
                }
                now = now.max(t);
            }
            self.settle(now, &mut recorder, &mut None);
        } else {
            while let Some(Reverse((t, _))) = heap.peek() {
                let t = *t;
                if deadline.is_some_and(|d| t > d) {
                    now = deadline.unwrap_or(t);
                    break;
                }
                now = t;
                while heap.peek().is_some_and(|Reverse((t2, _))| *t2 == t) {
                    let Some(Reverse((_, ev))) = heap.pop() else {
                        break;
                    };
                    match ev {
                        SimEvent::Arrive(k) => {
                            self.arrive(&k, t, &mut recorder, &mut Some(&mut heap))?
                        }
                        SimEvent::Complete(k, run) => {
                            if self.complete(&k, run, t, &mut recorder) {
                                done += 1;
                            }
                            progress(done, total);
                        }
                        SimEvent::ExecLimit(k, run) => self.exceed_execution_time(
                            &k,
                            run,
                            t,
                            &mut recorder,
                            &mut Some(&mut heap),
                        ),
                        SimEvent::Fail(i) => self.fail(i, t, &mut recorder, &mut Some(&mut heap)),
                        SimEvent::EvictionDone(k) => {
                            let more = self.eviction_done(&k, t, &mut Some(&mut heap));
                            self.carry_out(more, t, &mut recorder, &mut Some(&mut heap));
                        }
                        SimEvent::CheckAnswer(k, run, check) => self.answer_check(
                            &k,
                            run,
                            &check,
                            t,
                            &mut recorder,
                            &mut Some(&mut heap),
                        ),
                        SimEvent::PodsReady(k, run) => self.pods_become_ready(&k, run, t),
                        SimEvent::PodsReadyTimeout(k, run) => {
                            self.pods_ready_timeout(&k, run, t, &mut recorder, &mut Some(&mut heap))
                        }
                        SimEvent::Requeue(k, run) => {
                            if self.workloads.get(&k).is_some_and(|sw| sw.run == run) {
                                let more = self.requeue(&k, t);
                                self.carry_out(more, t, &mut recorder, &mut Some(&mut heap));
                            }
                        }
                    }
                }
                self.settle(now, &mut recorder, &mut Some(&mut heap));
            }
        }
        progress(total, total);
        let mut report = recorder.report(
            SIM_EPOCH,
            now,
            &self.gpu_capacity(),
            &self.gpu_entitlement(),
            48,
        );
        report.unfinished = self.unfinished();
        if self.engine.config().admission_fair_sharing.is_some() {
            report.local_queues = recorder.local_queue_report(now);
        }
        if self.topo.report.gangs > 0 || self.topo.report.failures_injected > 0 {
            report.topology = Some(self.topo.finish());
        }
        Ok(report)
    }

    /// Places gangs ignoring topology levels and NVLink islands, to compare on the same trace.
    pub fn set_ignore_topology(&mut self, ignore: bool) {
        self.engine.set_topology_blind(ignore);
        self.topo.report.placement = if ignore {
            "ignoring topology".into()
        } else {
            "topology-aware".into()
        };
    }

    /// Scores nodes with `policy` (`topology-pack` by default).
    pub fn set_placement_policy(&mut self, policy: Box<dyn sluice_sdk::policy::PlacementPolicy>) {
        self.topo.report.policy = policy.name().to_string();
        self.engine.set_placement_policy(policy);
    }

    /// Injects failure `i`: the node goes NotReady, or its listed GPUs turn unhealthy.
    fn fail(
        &mut self,
        i: usize,
        now: Time,
        recorder: &mut Recorder,
        completions: &mut Completions<'_>,
    ) {
        let Some(f) = self.failures.get(i).cloned() else {
            return;
        };
        self.topo.report.failures_injected += 1;
        let event = if f.gpus.is_empty() {
            let Some(n) = self.objects.nodes.get(&f.node) else {
                return;
            };
            match ingest::node(&n.object) {
                Ok(mut node) => {
                    node.ready = false;
                    Event::UpsertNode(node)
                }
                Err(e) => {
                    tracing::warn!(node = %f.node, error = %e, "failure injection skipped");
                    return;
                }
            }
        } else {
            let Some(g) = self.objects.node_gpu_topologies.get(&f.node) else {
                tracing::warn!(node = %f.node, "GPU failure needs the node's NodeGpuTopology");
                return;
            };
            let mut gpus = self
                .gpus_now
                .get(&f.node)
                .cloned()
                .unwrap_or_else(|| g.object.spec.gpus.clone());
            for gpu in &mut gpus.gpus {
                if !f.gpus.contains(&gpu.index) {
                    continue;
                }
                let h = &mut gpu.health;
                if f.degrading {
                    if h.healthy {
                        self.topo.report.gpus_degraded += 1;
                        h.healthy = false;
                        h.degrading = true;
                        h.reasons
                            .push("Degrading: injected by sluice.dev/gpu-degrades-at".into());
                    }
                } else {
                    h.healthy = false;
                    h.degrading = false;
                    h.xid_errors.push(79);
                    h.reasons
                        .insert(0, "XID 79: GPU has fallen off the bus".into());
                }
            }
            if !f.degrading {
                self.count_saved(&f, now);
            }
            self.gpus_now.insert(f.node.clone(), gpus.clone());
            Event::UpsertNodeGpus {
                node: f.node.clone(),
                gpus,
            }
        };
        tracing::info!(node = %f.node, gpus = ?f.gpus, at = %format_duration(now - SIM_EPOCH), "injecting failure");
        self.engine.advance_clock(now);
        match self.engine.apply(event) {
            Ok(decisions) => {
                self.carry_out(decisions, now, recorder, completions);
            }
            Err(e) => tracing::warn!(node = %f.node, error = %e, "failure injection refused"),
        }
    }

    /// GPUs of `f` fail: the workloads moved off them ahead of time that would still be running now count
    /// the work they would have lost here as saved.
    fn count_saved(&mut self, f: &topology::Failure, now: Time) {
        let (hit, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.moved_ahead)
            .into_iter()
            .partition(|m| m.node == f.node && m.gpus.iter().any(|g| f.gpus.contains(g)));
        self.moved_ahead = rest;
        for m in hit {
            if m.would_end.is_none_or(|end| end > now) {
                self.topo.report.moved_ahead_of_failure += 1;
                self.topo.report.gpu_hours_saved +=
                    m.held as f64 * (now - m.start) as f64 / 3_600_000.0;
            }
        }
    }

    /// A workload evicted off a degrading GPU: remembered until the GPU fails.
    fn moved_off_degrading(&mut self, key: &WorkloadKey, recorder: &Recorder) {
        let Some(placement) = self.engine.placement(key) else {
            return;
        };
        let Some(start) = recorder.run_start(key) else {
            return;
        };
        let held: i64 = gpus_by_node(placement).values().sum();
        let would_end = self
            .workloads
            .get(key)
            .and_then(|sw| sw.run_time)
            .map(|r| start + r);
        let mut on: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for n in placement.iter().flat_map(|p| &p.nodes) {
            on.entry(n.node.clone()).or_default().extend(&n.gpus);
        }
        self.topo.report.moved_ahead += 1;
        for (node, gpus) in on {
            let degrading = self.gpus_now.get(&node).is_some_and(|g| {
                g.gpus
                    .iter()
                    .any(|x| x.health.degrading && gpus.contains(&x.index))
            });
            if degrading {
                self.moved_ahead.push(topology::MovedAhead {
                    node,
                    gpus,
                    held,
                    start,
                    would_end,
                });
            }
        }
    }

    /// Workloads that had not finished when the simulation ended, with their state.
    fn unfinished(&self) -> Vec<metrics::Unfinished> {
        self.workloads
            .iter()
            .filter(|(_, sw)| sw.started && !sw.finished)
            .map(|(key, _)| {
                let (state, message) = match self.engine.workload_state(key) {
                    Some(engine::WorkloadState::Admitted(a)) => {
                        (format!("Admitted in {}", a.cluster_queue), String::new())
                    }
                    Some(engine::WorkloadState::Pending { reason, message }) => {
                        (format!("Pending ({reason})"), message)
                    }
                    Some(other) => (format!("{other:?}"), String::new()),
                    None => ("Unknown".to_string(), String::new()),
                };
                metrics::Unfinished {
                    workload: key.to_string(),
                    state,
                    message,
                }
            })
            .collect()
    }

    /// GPUs per flavor: from Nodes matching the flavor's labels when Nodes are given, else from nominal quotas.
    pub fn gpu_capacity(&self) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (name, f) in &self.objects.flavors {
            let labels = &f.object.spec.node_labels;
            let from_nodes: i64 = self
                .objects
                .nodes
                .values()
                .filter(|n| {
                    let nl = n.object.metadata.labels.clone().unwrap_or_default();
                    labels.iter().all(|(k, v)| nl.get(k) == Some(v))
                })
                .filter_map(|n| {
                    n.object
                        .status
                        .as_ref()?
                        .allocatable
                        .as_ref()?
                        .get(GPU_RESOURCE)
                        .cloned()
                })
                .filter_map(|q| sluice_sdk::quantity::resource_value(GPU_RESOURCE, &q).ok())
                .sum();
            let from_quota = self.nominal_gpus(name);
            let gpus = if self.objects.nodes.is_empty() {
                from_quota
            } else {
                from_nodes
            };
            if gpus > 0 {
                out.insert(name.clone(), gpus);
            }
        }
        out
    }

    /// Nominal GPUs of one flavor over every ClusterQueue and Cohort.
    fn nominal_gpus(&self, flavor: &str) -> i64 {
        let groups = self
            .objects
            .cluster_queues
            .values()
            .flat_map(|cq| cq.object.spec.resource_groups.iter())
            .chain(
                self.objects
                    .cohorts
                    .values()
                    .flat_map(|c| c.object.spec.resource_groups.iter()),
            );
        gpu_nominal(groups, |f| f == flavor)
    }

    /// Nominal GPUs of each ClusterQueue, over all flavors.
    pub fn gpu_entitlement(&self) -> BTreeMap<String, i64> {
        self.objects
            .cluster_queues
            .iter()
            .map(|(name, cq)| {
                (
                    name.clone(),
                    gpu_nominal(cq.object.spec.resource_groups.iter(), |_| true),
                )
            })
            .collect()
    }
}

/// Sum of the GPU nominal quotas of the flavors `keep` selects in `groups`.
fn gpu_nominal<'a>(
    groups: impl Iterator<Item = &'a api::ResourceGroup>,
    keep: impl Fn(&str) -> bool,
) -> i64 {
    groups
        .flat_map(|rg| rg.flavors.iter())
        .filter(|fq| keep(&fq.name))
        .flat_map(|fq| fq.resources.iter())
        .filter(|r| r.name == GPU_RESOURCE)
        .filter_map(|r| sluice_sdk::quantity::resource_value(GPU_RESOURCE, &r.nominal_quota).ok())
        .sum()
}

/// The bundled example's files, embedded in the binary.
const BUNDLED_EXAMPLE: [(&str, &str); 5] = [
    (
        "examples/gpu-cluster/cluster.yaml",
        include_str!("../../examples/gpu-cluster/cluster.yaml"),
    ),
    (
        "examples/gpu-cluster/teams.yaml",
        include_str!("../../examples/gpu-cluster/teams.yaml"),
    ),
    (
        "examples/gpu-cluster/nodes.yaml",
        include_str!("../../examples/gpu-cluster/nodes.yaml"),
    ),
    (
        "examples/gpu-cluster/gpu-topology.yaml",
        include_str!("../../examples/gpu-cluster/gpu-topology.yaml"),
    ),
    (
        "examples/gpu-cluster/trace.yaml",
        include_str!("../../examples/gpu-cluster/trace.yaml"),
    ),
];

/// The bundled example: four teams in a cohort on 15 H100 nodes (on-demand and spot) in racks of four,
/// topology-aware flavors and NVLink reports, one node failing after six hours, with a mixed
/// training/experiment/inference trace of 160 Jobs over about eighteen hours.
pub fn bundled_example() -> Result<Vec<Document>, crate::manifest::ManifestError> {
    let mut docs = Vec::new();
    for (name, text) in BUNDLED_EXAMPLE {
        docs.extend(crate::manifest::parse_documents(name, text)?);
    }
    Ok(docs)
}

/// In virtual time, queues the end of what is left of an admitted workload's maximumExecutionTimeSeconds after
/// its earlier admissions.
/// The workload while `run` is its current run (not evicted, finished or superseded since).
fn current_run<'a>(
    workloads: &'a mut BTreeMap<WorkloadKey, SimWorkload>,
    key: &WorkloadKey,
    run: u64,
) -> Option<&'a mut SimWorkload> {
    workloads
        .get_mut(key)
        .filter(|sw| sw.run == run && !sw.finished)
}

fn schedule_exec_limit(
    key: &WorkloadKey,
    sw: &SimWorkload,
    now: Time,
    completions: &mut Completions<'_>,
) {
    let (Some(left), Some(heap)) = (
        status::execution_time_left(&sw.workload),
        completions.as_deref_mut(),
    ) else {
        return;
    };
    heap.push(Reverse((
        now + left,
        SimEvent::ExecLimit(key.clone(), sw.run),
    )));
}

/// GPUs a placement holds per node: the GPUs it chose, or its pods' GPU requests where the node has no
/// GPU inventory (for the report's heat map).
fn gpus_by_node(placement: &[engine::PodSetPlacement]) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for p in placement {
        let per_pod = p.per_pod.get(GPU_RESOURCE).copied().unwrap_or(0);
        for n in &p.nodes {
            let held = if n.gpus.is_empty() {
                per_pod.saturating_mul(i64::from(n.pods))
            } else {
                n.gpus.len() as i64
            };
            if held > 0 {
                *out.entry(n.node.clone()).or_default() += held;
            }
        }
    }
    out
}
