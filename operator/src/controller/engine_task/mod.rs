//! The single engine task: it owns the [`Engine`] and a cache of the API objects the watchers report, and while
//! this replica leads it runs scheduling cycles and carries out their decisions through the [`Writer`].
//!
//! The engine exists only while leading: it is built from the cache once every watch has listed its objects
//! (admitted Workloads restore their quota), so a replica that takes over never decides from a partial view.
//! Decisions are written before the next cycle runs; until a write succeeds the engine's state stays the truth
//! (an admission the API server has not seen yet is not given away to anyone else).
//!
//! This file is the hub: the task, its run loop and one round of leading. The rest, one concern a file:
//! [`absorb`] (watched objects into the cache and the engine), [`decisions`] (admissions, pending reasons,
//! evictions), [`checkpoints`] (the grace before a victim is evicted), [`timers`] (PodsReady, backoffs),
//! [`reconciler`] (the one job reconciler, generic over the kinds), [`kinds`] (the kinds and their queues: the
//! only list of them), [`owners`] (what every kind shares), [`jobs`] (batch Jobs), [`pod_groups`] (plain Pods),
//! [`ungate`]
//! (topology-aware pods), [`queue_status`] (queue status, gauges, visibility), [`writes`] (writes that keep the
//! cache current) and [`policy_sync`] (PolicyModules).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Namespace, Node, ObjectReference, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::{Api, Client, Resource};
use sluice_sdk::jobset::JobSet;
use sluice_sdk::kubeflow::PyTorchJob;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::lws::LeaderWorkerSet;
use sluice_sdk::ray::{RayCluster, RayJob, RayService};
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;
use sluice_sdk::sluice::policy_module::PolicyModule;
use sluice_sdk::trainer::{ClusterTrainingRuntime, TrainJob, TrainingRuntime};
use tokio::sync::mpsc;
use tokio::time::Instant;

mod absorb;
mod checkpoints;
mod checks;
mod crd_kinds;
mod decisions;
mod gpu_use;
mod jobs;
mod kinds;
mod leaderworkersets;
mod owners;
mod pod_groups;
mod policy_sync;
mod queue_status;
mod reconciler;
mod retention;
mod timers;
mod trainjobs;
mod ungate;
mod writes;

use super::ControllerError;
use super::checkpoint::PendingCheckpoint;
use super::config::OperatorConfig;
use super::policies::Policies;
use super::watch::Change;
use super::writer::Writer;
use crate::engine::{Decision, Engine, Time, WorkloadKey};
use crate::jobs::PriorityClasses;
use crate::leader::Leadership;
use crate::telemetry::{EventRecorder, EventSeverity, Health, Metrics};
use crate::visibility::SharedSnapshot;

/// What the watchers send the engine task.
// Objects move through the channel once each; boxing the big ones would only add an allocation per event.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Input {
    /// A ResourceFlavor changed.
    Flavor(Change<api::ResourceFlavor>),
    /// A ClusterQueue changed.
    ClusterQueue(Change<api::ClusterQueue>),
    /// A Cohort changed.
    Cohort(Change<api::Cohort>),
    /// A LocalQueue changed.
    LocalQueue(Change<api::LocalQueue>),
    /// A Namespace changed.
    Namespace(Change<Namespace>),
    /// A LimitRange changed (its defaults and bounds apply to the Workloads of its namespace).
    LimitRange(Change<LimitRange>),
    /// A RuntimeClass changed (its overhead applies to pods that name it).
    RuntimeClass(Change<RuntimeClass>),
    /// A Workload changed.
    Workload(Change<api::Workload>),
    /// A batch/v1 Job changed.
    Job(Change<Job>),
    /// A JobSet changed.
    JobSet(Change<JobSet>),
    /// A Kubeflow PyTorchJob changed.
    PyTorchJob(Change<PyTorchJob>),
    /// A KubeRay RayJob changed.
    RayJob(Change<RayJob>),
    /// A KubeRay RayCluster changed.
    RayCluster(Change<RayCluster>),
    /// A KubeRay RayService changed.
    RayService(Change<RayService>),
    /// A Kubeflow Trainer TrainJob changed.
    TrainJob(Change<TrainJob>),
    /// A LeaderWorkerSet changed.
    LeaderWorkerSet(Change<LeaderWorkerSet>),
    /// A StatefulSet of a LeaderWorkerSet changed.
    StatefulSet(Change<k8s_openapi::api::apps::v1::StatefulSet>),
    /// A Kubeflow Trainer TrainingRuntime changed.
    TrainingRuntime(Change<TrainingRuntime>),
    /// A Kubeflow Trainer ClusterTrainingRuntime changed.
    ClusterTrainingRuntime(Change<ClusterTrainingRuntime>),
    /// A WorkloadPriorityClass changed.
    WorkloadPriorityClass(Change<api::WorkloadPriorityClass>),
    /// A pod PriorityClass changed.
    PriorityClass(Change<PriorityClass>),
    /// A Node changed.
    Node(Change<Node>),
    /// A Kueue Topology changed.
    Topology(Change<api::Topology>),
    /// A Kueue AdmissionCheck changed.
    AdmissionCheck(Change<api::AdmissionCheck>),
    /// A node agent's NodeGpuTopology changed.
    NodeGpuTopology(Change<NodeGpuTopology>),
    /// A Pod changed (only pods of TAS pod sets and pods Kueue manages are kept).
    Pod(Change<Pod>),
    /// A PolicyModule changed.
    PolicyModule(Change<PolicyModule>),
    /// A ConfigMap a PolicyModule names changed.
    ConfigMap(Change<ConfigMap>),
    /// The watch of this kind has listed every object once.
    Synced(&'static str),
}

/// The kinds whose first list must be complete before the engine is built.
pub const WATCHED_KINDS: &[&str] = &[
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "Namespace",
    "LimitRange",
    "RuntimeClass",
    "Workload",
    "Job",
    "WorkloadPriorityClass",
    "PriorityClass",
    "Node",
    "Topology",
    "AdmissionCheck",
    "NodeGpuTopology",
    "Pod",
    "PolicyModule",
];

/// The API objects as last seen.
#[derive(Default)]
struct Cache {
    flavors: BTreeMap<String, api::ResourceFlavor>,
    cluster_queues: BTreeMap<String, api::ClusterQueue>,
    cohorts: BTreeMap<String, api::Cohort>,
    local_queues: BTreeMap<(String, String), api::LocalQueue>,
    namespaces: BTreeMap<String, Namespace>,
    /// LimitRanges and RuntimeClasses, which Kueue reads to adjust a Workload's requests.
    resource_rules: crate::resource_rules::ResourceRules,
    workloads: BTreeMap<WorkloadKey, api::Workload>,
    jobs: BTreeMap<(String, String), Job>,
    jobsets: BTreeMap<(String, String), JobSet>,
    pytorchjobs: BTreeMap<(String, String), PyTorchJob>,
    rayjobs: BTreeMap<(String, String), RayJob>,
    rayclusters: BTreeMap<(String, String), RayCluster>,
    rayservices: BTreeMap<(String, String), RayService>,
    /// TrainJobs, each with its runtime resolved.
    trainjobs: BTreeMap<(String, String), TrainJob>,
    training_runtimes: BTreeMap<(String, String), TrainingRuntime>,
    cluster_training_runtimes: BTreeMap<String, ClusterTrainingRuntime>,
    /// LeaderWorkerSets and the pods their controller made, by (namespace, name).
    lws: leaderworkersets::LwsCache,
    priorities: PriorityClasses,
    nodes: BTreeMap<String, Node>,
    topologies: BTreeMap<String, api::Topology>,
    admission_checks: BTreeMap<String, api::AdmissionCheck>,
    node_gpus: BTreeMap<String, NodeGpuTopology>,
    /// Pods carrying Kueue's TAS workload annotation.
    pods: BTreeMap<(String, String), Pod>,
    /// Plain pods Kueue manages (label `kueue.x-k8s.io/managed`), single or in groups.
    managed_pods: pod_groups::ManagedPods,
    /// Pods requesting GPUs, with the UIDs that tie them to a Workload (for GPU use per Workload).
    gpu_pods: std::collections::HashMap<(String, String), Vec<String>>,
}

/// APIs by kind.
struct Apis {
    client: Client,
    flavors: Api<api::ResourceFlavor>,
    cluster_queues: Api<api::ClusterQueue>,
    cohorts: Api<api::Cohort>,
}

impl Apis {
    fn workloads(&self, ns: &str) -> Api<api::Workload> {
        Api::namespaced(self.client.clone(), ns)
    }
    fn local_queues(&self, ns: &str) -> Api<api::LocalQueue> {
        Api::namespaced(self.client.clone(), ns)
    }
}

fn now_ms() -> Time {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

/// The engine task's state.
pub struct EngineTask {
    config: OperatorConfig,
    apis: Apis,
    writer: Writer,
    metrics: Arc<Metrics>,
    events: Option<EventRecorder>,
    leadership: Leadership,
    health: Health,
    snapshot: SharedSnapshot,
    cache: Cache,
    engine: Option<Engine>,
    synced: BTreeSet<&'static str>,
    /// Kinds beyond [`WATCHED_KINDS`] whose first list must be complete before leading.
    also_synced: Vec<&'static str>,
    /// Decisions returned by `Engine::apply`, carried out with the next cycle's.
    queued: Vec<Decision>,
    dirty_workloads: BTreeSet<WorkloadKey>,
    /// Jobs of every kind to reconcile.
    kinds: kinds::Kinds,
    /// TAS workloads whose gated pods may need their node selector.
    dirty_ungates: BTreeSet<WorkloadKey>,
    deleted_jobs: Vec<Job>,
    /// Workloads (namespace, name) whose owner of a [`crd_kinds::CrdKind`] was deleted.
    owners_gone: Vec<(String, String)>,
    /// Per Workload updated to match its changed job, the spec written: never written twice, so an API server
    /// that changes what it stores cannot make the update repeat.
    matched_specs: BTreeMap<WorkloadKey, api::WorkloadSpec>,
    /// Workloads built by this round's job reconciles, created together at its end (with the owner to announce
    /// them on).
    creates: Vec<(Option<ObjectReference>, api::Workload)>,
    /// Jobs admitted by this round's job reconciles, started together at its end.
    job_starts: Vec<jobs::JobStart>,
    queues_dirty: bool,
    /// Queue contents changed since the visibility snapshot was published (every round, unlike the statuses: it
    /// is memory only, and Kueue's visibility API reads its queues live).
    visibility_dirty: bool,
    /// Admitted workloads whose pods must all be ready by then (waitForPodsReady).
    ready_deadlines: BTreeMap<WorkloadKey, Time>,
    /// Admitted workloads deactivated then unless finished (maximumExecutionTimeSeconds).
    exec_deadlines: BTreeMap<WorkloadKey, Time>,
    /// Finished or deactivated workloads whose retention (objectRetentionPolicies) ends then.
    retention_deadlines: BTreeMap<WorkloadKey, Time>,
    /// Workloads in a requeue backoff, kept out of the engine until then (ms precision: status times are
    /// whole seconds).
    backoffs: BTreeMap<WorkloadKey, Time>,
    /// When this replica admitted a workload (ms precision, for the PodsReady timeout).
    admitted_at: BTreeMap<WorkloadKey, Time>,
    /// Preemption victims waiting for their checkpoint before eviction.
    checkpoints: BTreeMap<WorkloadKey, PendingCheckpoint>,
    /// "leader" or "standby": Kueue's replica_role label.
    role: &'static str,
    /// PolicyModules and what each ClusterQueue uses.
    policies: Policies,
    /// PolicyModules, ConfigMaps or ClusterQueues changed since the policies were last routed.
    policies_dirty: bool,
    /// Watchers of the ConfigMaps PolicyModules name (spawned on demand, sending on `input`).
    config_map_watchers: policy_sync::ConfigMapWatchers,
    /// GPU use per Workload and ClusterQueue is due for recomputing then (agents' reports, pods or
    /// admissions changed).
    gpu_use_due: Option<Time>,
    /// When GPU use was last computed.
    gpu_use_at: Time,
    /// The last round ended on its time budget with work left, after this many idle cycles in a row: the next
    /// starts as soon as the events that came meanwhile are in, and goes on counting.
    resume: Option<usize>,
    /// When the last pass over the queue statuses ended.
    queue_statuses_at: Option<Instant>,
}

impl EngineTask {
    /// A task over `client` (not started).
    pub fn new(
        client: Client,
        config: OperatorConfig,
        metrics: Arc<Metrics>,
        events: Option<EventRecorder>,
        leadership: Leadership,
        health: Health,
        snapshot: SharedSnapshot,
    ) -> Self {
        let writer = Writer::new(config.retry_base, config.retry_max, metrics.clone());
        let policies = Policies::new(
            config.policy_host.clone(),
            config.policy_degrade_after,
            config.policy_status_interval,
        );
        let cache = Cache {
            resource_rules: crate::resource_rules::ResourceRules::with_counting(
                config.resource_counting.clone(),
            ),
            ..Cache::default()
        };
        Self {
            apis: Apis {
                flavors: Api::all(client.clone()),
                cluster_queues: Api::all(client.clone()),
                cohorts: Api::all(client.clone()),
                client,
            },
            config,
            writer,
            metrics,
            events,
            leadership,
            health,
            snapshot,
            cache,
            engine: None,
            synced: BTreeSet::new(),
            also_synced: Vec::new(),
            queued: Vec::new(),
            dirty_workloads: BTreeSet::new(),
            kinds: kinds::Kinds::default(),
            dirty_ungates: BTreeSet::new(),
            deleted_jobs: Vec::new(),
            owners_gone: Vec::new(),
            matched_specs: BTreeMap::new(),
            creates: Vec::new(),
            job_starts: Vec::new(),
            queues_dirty: false,
            visibility_dirty: false,
            ready_deadlines: BTreeMap::new(),
            exec_deadlines: BTreeMap::new(),
            retention_deadlines: BTreeMap::new(),
            backoffs: BTreeMap::new(),
            admitted_at: BTreeMap::new(),
            checkpoints: BTreeMap::new(),
            role: "standby",
            policies,
            policies_dirty: false,
            config_map_watchers: policy_sync::ConfigMapWatchers::default(),
            gpu_use_due: None,
            gpu_use_at: 0,
            resume: None,
            queue_statuses_at: None,
        }
    }

    /// Lets the task watch the ConfigMaps PolicyModules name, sending their changes on `input`.
    pub fn with_input(mut self, input: mpsc::WeakUnboundedSender<Input>) -> Self {
        self.config_map_watchers.input = Some(input);
        self
    }

    /// Also waits for the first list of these kinds (optional integrations whose API was served at start).
    pub fn with_synced_kinds(mut self, kinds: Vec<&'static str>) -> Self {
        self.also_synced = kinds;
        self
    }

    fn synced_all(&self) -> bool {
        WATCHED_KINDS
            .iter()
            .chain(&self.also_synced)
            .all(|k| self.synced.contains(k))
    }

    /// Runs until the input channel closes (Ok) or leadership is lost after leading (Err).
    pub async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Input>,
    ) -> Result<(), ControllerError> {
        let mut leader_rx = self.leadership.subscribe();
        let mut leader_open = true;
        loop {
            let next = self.next_deadline();
            let sleep = async {
                match next {
                    Some(t) => {
                        let wait = (t - now_ms()).max(0) as u64;
                        tokio::time::sleep(std::time::Duration::from_millis(wait)).await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                m = rx.recv() => match m {
                    Some(i) => {
                        self.absorb(i);
                        // Absorb what is already waiting before scheduling: one cycle for a burst of events.
                        let mut n = 0;
                        while n < 4096 {
                            match rx.try_recv() {
                                Ok(i) => self.absorb(i),
                                Err(_) => break,
                            }
                            n += 1;
                        }
                    }
                    None => return Ok(()),
                },
                r = leader_rx.changed(), if leader_open => {
                    if r.is_err() {
                        leader_open = false;
                    }
                }
                _ = sleep => {}
            }
            if self.synced_all() {
                self.health.set_ready(true);
            }
            let leading = self.leadership.is_leader();
            if self.engine.is_some() && !leading {
                self.metrics.leader.set(0);
                return Err(ControllerError::LeadershipLost);
            }
            if leading && self.synced_all() {
                self.lead().await?;
            }
        }
    }

    fn next_deadline(&self) -> Option<Time> {
        self.engine.as_ref()?;
        let a = self.ready_deadlines.values().min().copied();
        let b = self.backoffs.values().min().copied();
        let c = self.checkpoints.values().map(|c| c.deadline).min();
        let d = self.policy_deadline();
        let e = self.exec_deadlines.values().min().copied();
        let g = self.retention_deadlines.values().min().copied();
        let f = self
            .engine
            .as_ref()
            .and_then(Engine::next_admission_usage_sample);
        let now = now_ms();
        // Work left by a round cut short goes on at once; queue statuses held back wait out their interval.
        let resume = self.resume.map(|_| now);
        let queues = self
            .queues_dirty
            .then(|| now + self.queue_status_wait().as_millis() as Time);
        [a, b, c, d, e, f, g, self.gpu_use_due, resume, queues]
            .into_iter()
            .flatten()
            .min()
    }

    /// How long until the queue statuses may be written again (zero: now).
    fn queue_status_wait(&self) -> std::time::Duration {
        self.queue_statuses_at
            .map(|t| {
                self.config
                    .queue_status_interval
                    .saturating_sub(t.elapsed())
            })
            .unwrap_or_default()
    }

    /// One round of leading: controllers, timers, scheduling cycles, queue status.
    async fn lead(&mut self) -> Result<(), ControllerError> {
        if self.engine.is_none() {
            self.rebuild();
        }
        if std::mem::take(&mut self.policies_dirty) {
            self.sync_policies().await;
        }
        let limit = 4 * self.cache.workloads.len() + 64;
        // Cycles in a row that changed nothing, counted across rounds cut short, so a queue that cannot move ends
        // its retries as in one long round.
        let mut idle = self.resume.take().unwrap_or(0);
        let round = Instant::now();
        for _ in 0..limit {
            if !self.leadership.is_leader() {
                return Err(ControllerError::LeadershipLost);
            }
            let mut did = false;
            for job in std::mem::take(&mut self.deleted_jobs) {
                did = true;
                self.job_deleted(&job).await;
            }
            for (ns, name) in std::mem::take(&mut self.owners_gone) {
                did = true;
                self.owner_gone(ns, name).await;
            }
            for key in std::mem::take(&mut self.dirty_workloads) {
                self.reconcile_workload(&key).await;
            }
            did |= self.reconcile_dirty_jobs().await;
            did |= self.reconcile_dirty_lws().await;
            for key in std::mem::take(&mut self.dirty_ungates) {
                did |= self.ungate_pods(&key).await;
            }
            did |= self.fire_timers().await;
            let mut decisions = std::mem::take(&mut self.queued);
            let started = Instant::now();
            let cycle = match self.engine.as_mut() {
                Some(e) if e.has_work() => {
                    let d = e.schedule(now_ms());
                    self.record_attempts(&d, started);
                    d
                }
                _ => Vec::new(),
            };
            let acted = cycle.iter().any(|d| !matches!(d, Decision::Pending { .. }));
            decisions.extend(cycle);
            let any = !decisions.is_empty();
            self.carry_out(decisions).await;
            self.show_preemption_costs().await;
            if any {
                self.metrics
                    .cycle_seconds
                    .observe(started.elapsed().as_secs_f64());
            }
            let more = !self.queued.is_empty()
                || self.any_dirty_job()
                || !self.dirty_workloads.is_empty()
                || !self.dirty_ungates.is_empty()
                || !self.cache.lws.dirty.is_empty()
                || !self.deleted_jobs.is_empty()
                || !self.owners_gone.is_empty();
            if acted || did || more {
                idle = 0;
            } else {
                idle += 1;
                let has_work = self.engine.as_ref().is_some_and(Engine::has_work);
                if !has_work || idle > self.cache.cluster_queues.len() + 2 {
                    break;
                }
            }
            if round.elapsed() >= self.config.round_budget {
                // The watch events that came meanwhile (finished Workloads, new ones) go in first.
                self.resume = Some(idle);
                break;
            }
        }
        if self.queues_dirty && self.queue_status_wait().is_zero() {
            self.queues_dirty = false;
            let started = Instant::now();
            self.write_queue_statuses().await;
            self.queue_statuses_at = Some(Instant::now());
            tracing::debug!(
                seconds = started.elapsed().as_secs_f64(),
                "queue statuses written"
            );
        }
        if std::mem::take(&mut self.visibility_dirty) {
            self.publish_visibility();
        }
        self.write_policy_statuses().await;
        self.export_gpu_use();
        Ok(())
    }

    /// Queue contents or counts changed: the queue statuses are due (at their interval) and the visibility
    /// snapshot (at the end of the round).
    fn queues_changed(&mut self) {
        self.queues_dirty = true;
        self.visibility_dirty = true;
    }

    fn event(
        &self,
        obj: ObjectReference,
        sev: EventSeverity,
        reason: &str,
        action: &str,
        note: String,
    ) {
        if let Some(r) = &self.events {
            r.publish(obj, sev, reason, action, note);
        }
    }

    fn priority_class(wl: &api::Workload) -> String {
        wl.spec
            .priority_class_ref
            .as_ref()
            .map(|p| p.name.clone())
            .unwrap_or_default()
    }
}
