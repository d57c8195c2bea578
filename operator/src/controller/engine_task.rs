//! The single engine task: it owns the [`Engine`] and a cache of the API objects the watchers report, and while
//! this replica leads it runs scheduling cycles and carries out their decisions through the [`Writer`].
//!
//! The engine exists only while leading: it is built from the cache once every watch has listed its objects
//! (admitted Workloads restore their quota), so a replica that takes over never decides from a partial view.
//! Decisions are written before the next cycle runs; until a write succeeds the engine's state stays the truth
//! (an admission the API server has not seen yet is not given away to anyone else).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, ObjectReference, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::{Api, Client, Resource, ResourceExt};
use sluice_sdk::kueue::labels::{self, condition};
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;
use sluice_sdk::sluice::policy_module::PolicyModule;
use tokio::sync::mpsc;
use tokio::time::Instant;

mod pod_groups;
mod policy_sync;

use super::ControllerError;
use super::checkpoint::{self, PendingCheckpoint};
use super::config::OperatorConfig;
use super::objects::*;
use super::policies::Policies;
use super::tas;
use super::watch::Change;
use super::writer::{Endpoint, Writer};
use crate::engine::{self, Decision, Engine, Event, Time, WorkloadKey};
use crate::jobs::{
    BatchJob, JobIntegration, PodGroupKey, PodSetInfo, PriorityClasses, pod_set_infos,
};
use crate::leader::Leadership;
use crate::telemetry::{EventRecorder, EventSeverity, Health, Labels, Metrics};
use crate::visibility::{PendingEntry, SharedSnapshot, Snapshot};
use crate::{ingest, status};

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
    /// A Workload changed.
    Workload(Change<api::Workload>),
    /// A batch/v1 Job changed.
    Job(Change<Job>),
    /// A WorkloadPriorityClass changed.
    WorkloadPriorityClass(Change<api::WorkloadPriorityClass>),
    /// A pod PriorityClass changed.
    PriorityClass(Change<PriorityClass>),
    /// A Node changed.
    Node(Change<Node>),
    /// A Kueue Topology changed.
    Topology(Change<api::Topology>),
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
    "Workload",
    "Job",
    "WorkloadPriorityClass",
    "PriorityClass",
    "Node",
    "Topology",
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
    workloads: BTreeMap<WorkloadKey, api::Workload>,
    jobs: BTreeMap<(String, String), Job>,
    priorities: PriorityClasses,
    nodes: BTreeMap<String, Node>,
    topologies: BTreeMap<String, api::Topology>,
    node_gpus: BTreeMap<String, NodeGpuTopology>,
    /// Pods carrying Kueue's TAS workload annotation.
    pods: BTreeMap<(String, String), Pod>,
    /// Plain pods Kueue manages (label `kueue.x-k8s.io/managed`), single or in groups.
    managed_pods: pod_groups::ManagedPods,
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
    fn jobs(&self, ns: &str) -> Api<Job> {
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
    /// Decisions returned by `Engine::apply`, carried out with the next cycle's.
    queued: Vec<Decision>,
    dirty_workloads: BTreeSet<WorkloadKey>,
    dirty_jobs: BTreeSet<(String, String)>,
    /// Plain pods and pod groups to reconcile.
    dirty_pod_groups: BTreeSet<PodGroupKey>,
    /// Jobs and pod groups whose Workload could not be built (a priority class not seen yet: its watch may
    /// deliver it after the Job's), reconciled again when a priority class changes, as Kueue's requeue would.
    unbuilt_jobs: BTreeSet<(String, String)>,
    unbuilt_pod_groups: BTreeSet<PodGroupKey>,
    /// TAS workloads whose gated pods may need their node selector.
    dirty_ungates: BTreeSet<WorkloadKey>,
    deleted_jobs: Vec<Job>,
    queues_dirty: bool,
    /// Admitted workloads whose pods must all be ready by then (waitForPodsReady).
    ready_deadlines: BTreeMap<WorkloadKey, Time>,
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
            cache: Cache::default(),
            engine: None,
            synced: BTreeSet::new(),
            queued: Vec::new(),
            dirty_workloads: BTreeSet::new(),
            dirty_jobs: BTreeSet::new(),
            dirty_pod_groups: BTreeSet::new(),
            unbuilt_jobs: BTreeSet::new(),
            unbuilt_pod_groups: BTreeSet::new(),
            dirty_ungates: BTreeSet::new(),
            deleted_jobs: Vec::new(),
            queues_dirty: false,
            ready_deadlines: BTreeMap::new(),
            backoffs: BTreeMap::new(),
            admitted_at: BTreeMap::new(),
            checkpoints: BTreeMap::new(),
            role: "standby",
            policies,
            policies_dirty: false,
            config_map_watchers: policy_sync::ConfigMapWatchers::default(),
        }
    }

    /// Lets the task watch the ConfigMaps PolicyModules name, sending their changes on `input`.
    pub fn with_input(mut self, input: mpsc::WeakSender<Input>) -> Self {
        self.config_map_watchers.input = Some(input);
        self
    }

    fn synced_all(&self) -> bool {
        WATCHED_KINDS.iter().all(|k| self.synced.contains(k))
    }

    /// Runs until the input channel closes (Ok) or leadership is lost after leading (Err).
    pub async fn run(mut self, mut rx: mpsc::Receiver<Input>) -> Result<(), ControllerError> {
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
        [a, b, c, d].into_iter().flatten().min()
    }

    fn count_event(&self, kind: &str) {
        self.metrics
            .watch_events
            .get_or_create(&vec![("kind", kind.to_string())])
            .inc();
    }

    /// Takes one watch input into the cache (and the engine, when leading).
    fn absorb(&mut self, input: Input) {
        match input {
            Input::Synced(kind) => {
                self.synced.insert(kind);
            }
            Input::Flavor(c) => {
                self.count_event("ResourceFlavor");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.flavors.remove(&name);
                    self.engine_apply(Event::DeleteFlavor(name));
                } else {
                    self.cache.flavors.insert(name, obj.clone());
                    self.sync_flavor(&obj);
                }
                self.queues_dirty = true;
            }
            Input::ClusterQueue(c) => {
                self.count_event("ClusterQueue");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.cluster_queues.remove(&name);
                    self.engine_apply(Event::DeleteClusterQueue(name));
                } else {
                    self.cache.cluster_queues.insert(name, obj.clone());
                    self.sync_cluster_queue(&obj);
                }
                self.queues_dirty = true;
                self.policies_dirty = true;
            }
            Input::Cohort(c) => {
                self.count_event("Cohort");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.cohorts.remove(&name);
                    self.engine_apply(Event::DeleteCohort(name));
                } else {
                    self.cache.cohorts.insert(name, obj.clone());
                    match ingest::cohort(&obj) {
                        Ok(c) => self.engine_apply(Event::UpsertCohort(c)),
                        Err(e) => tracing::warn!(error = %e, "cohort ignored"),
                    }
                }
                self.queues_dirty = true;
                // A new parent can join trees: their fairness modules are chosen again.
                self.policies_dirty = true;
            }
            Input::LocalQueue(c) => {
                self.count_event("LocalQueue");
                let (obj, deleted) = split(c);
                let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                if deleted {
                    self.cache.local_queues.remove(&key);
                    self.engine_apply(Event::DeleteLocalQueue {
                        namespace: key.0,
                        name: key.1,
                    });
                } else {
                    self.cache.local_queues.insert(key, obj.clone());
                    match ingest::local_queue(&obj) {
                        Ok(l) => self.engine_apply(Event::UpsertLocalQueue(l)),
                        Err(e) => tracing::warn!(error = %e, "local queue ignored"),
                    }
                }
                self.queues_dirty = true;
            }
            Input::Namespace(c) => {
                self.count_event("Namespace");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.namespaces.remove(&name);
                    self.engine_apply(Event::DeleteNamespace(name));
                } else {
                    self.cache.namespaces.insert(name, obj.clone());
                    if let Ok(ns) = ingest::namespace(&obj) {
                        self.engine_apply(Event::UpsertNamespace(ns));
                    }
                }
            }
            Input::WorkloadPriorityClass(c) => {
                self.count_event("WorkloadPriorityClass");
                match c {
                    Change::Apply(o) => {
                        self.cache.priorities.upsert_workload_class(&o);
                        self.retry_unbuilt();
                    }
                    Change::Delete(o) => self.cache.priorities.delete_workload_class(&o.name_any()),
                }
            }
            Input::PriorityClass(c) => {
                self.count_event("PriorityClass");
                match c {
                    Change::Apply(o) => {
                        self.cache.priorities.upsert_pod_class(&o);
                        self.retry_unbuilt();
                    }
                    Change::Delete(o) => self.cache.priorities.delete_pod_class(&o.name_any()),
                }
            }
            Input::Node(c) => {
                self.count_event("Node");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.nodes.remove(&name);
                    self.engine_apply(Event::DeleteNode(name));
                } else {
                    self.cache.nodes.insert(name, obj.clone());
                    self.sync_node(&obj);
                }
            }
            Input::Topology(c) => {
                self.count_event("Topology");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.topologies.remove(&name);
                    self.engine_apply(Event::DeleteTopology(name));
                } else {
                    self.cache.topologies.insert(name, obj.clone());
                    self.sync_topology(&obj);
                }
                self.queues_dirty = true;
            }
            Input::NodeGpuTopology(c) => {
                self.count_event("NodeGpuTopology");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    let node = if obj.spec.node_name.is_empty() {
                        name.clone()
                    } else {
                        obj.spec.node_name.clone()
                    };
                    self.cache.node_gpus.remove(&name);
                    self.engine_apply(Event::DeleteNodeGpus(node));
                } else {
                    self.cache.node_gpus.insert(name, obj.clone());
                    self.sync_node_gpus(&obj);
                }
            }
            Input::Pod(c) => {
                self.count_event("Pod");
                let (obj, deleted) = split(c);
                self.absorb_managed_pod(&obj, deleted);
                let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                let Some((ns, wl)) = tas::pod_workload(&obj) else {
                    self.cache.pods.remove(&key);
                    return;
                };
                if deleted {
                    self.cache.pods.remove(&key);
                    return;
                }
                if let Some(cached) = self.cache.pods.get(&key)
                    && is_stale(cached, &obj)
                {
                    return;
                }
                if tas::is_gated(&obj) {
                    self.dirty_ungates.insert(WorkloadKey::new(ns, wl));
                }
                self.cache.pods.insert(key, obj);
            }
            Input::Workload(c) => {
                self.count_event("Workload");
                let (obj, deleted) = split(c);
                let key = workload_key(&obj);
                if deleted {
                    self.cache.workloads.remove(&key);
                } else {
                    if let Some(cached) = self.cache.workloads.get(&key)
                        && is_stale(cached, &obj)
                    {
                        return;
                    }
                    self.cache.workloads.insert(key.clone(), obj.clone());
                }
                if let Some(j) = owner_job(&obj) {
                    self.dirty_jobs.insert(j);
                }
                if let Some(g) = PodGroupKey::of_workload(&obj) {
                    self.dirty_pod_groups.insert(g);
                }
                if !deleted && has_topology_assignment(&obj) {
                    self.dirty_ungates.insert(key.clone());
                }
                self.sync_workload(&key);
                self.dirty_workloads.insert(key);
                self.queues_dirty = true;
            }
            Input::PolicyModule(c) => {
                self.count_event("PolicyModule");
                let (obj, deleted) = split(c);
                self.policies.module_changed(obj, deleted);
                self.policies_dirty = true;
            }
            Input::ConfigMap(c) => {
                self.count_event("ConfigMap");
                let (obj, deleted) = split(c);
                self.policies.config_map_changed(obj, deleted);
                self.policies_dirty = true;
            }
            Input::Job(c) => {
                self.count_event("Job");
                let (obj, deleted) = split(c);
                let key = job_key(&obj);
                if deleted {
                    self.cache.jobs.remove(&key);
                    self.deleted_jobs.push(obj);
                } else {
                    if let Some(cached) = self.cache.jobs.get(&key)
                        && is_stale(cached, &obj)
                    {
                        return;
                    }
                    self.cache.jobs.insert(key.clone(), obj);
                    self.dirty_jobs.insert(key);
                }
            }
        }
    }

    fn engine_apply(&mut self, event: Event) {
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        match engine.apply(event) {
            Ok(d) => self.queued.extend(d),
            Err(e) => tracing::warn!(error = %e, "engine refused an object"),
        }
    }

    fn sync_flavor(&mut self, rf: &api::ResourceFlavor) {
        if rf.meta().deletion_timestamp.is_some() {
            return;
        }
        match ingest::flavor(rf) {
            Ok(f) => self.engine_apply(Event::UpsertFlavor(f)),
            Err(e) => tracing::warn!(error = %e, "resource flavor ignored"),
        }
    }

    fn sync_cluster_queue(&mut self, cq: &api::ClusterQueue) {
        if cq.meta().deletion_timestamp.is_some() {
            // Kueue stops admitting to a ClusterQueue being deleted; its admitted workloads keep their quota
            // until they leave (the engine keeps it Terminating).
            self.engine_apply(Event::DeleteClusterQueue(cq.name_any()));
            return;
        }
        match ingest::cluster_queue(cq) {
            Ok(c) => self.engine_apply(Event::UpsertClusterQueue(c)),
            Err(e) => tracing::warn!(error = %e, "cluster queue ignored"),
        }
    }

    fn sync_node(&mut self, n: &Node) {
        match ingest::node(n) {
            Ok(n) => self.engine_apply(Event::UpsertNode(n)),
            Err(e) => tracing::warn!(error = %e, "node ignored"),
        }
    }

    fn sync_topology(&mut self, t: &api::Topology) {
        match ingest::topology(t) {
            Ok(t) => self.engine_apply(Event::UpsertTopology(t)),
            Err(e) => tracing::warn!(error = %e, "topology ignored"),
        }
    }

    fn sync_node_gpus(&mut self, t: &NodeGpuTopology) {
        match ingest::node_gpu_topology(t) {
            Ok(ev) => self.engine_apply(ev),
            Err(e) => tracing::warn!(error = %e, "NodeGpuTopology ignored"),
        }
    }

    /// Re-charges the nodes an admitted workload's recorded topology assignment holds, unless this engine
    /// placed it itself (its own placement also knows the GPUs).
    fn restore_placement(&mut self, key: &WorkloadKey, w: &engine::Workload) {
        let Some(engine) = self.engine.as_ref() else {
            return;
        };
        if engine.placement(key).is_some() {
            return;
        }
        let Some(wl) = self.cache.workloads.get(key) else {
            return;
        };
        match tas::restored_placements(wl, w, &self.cache.flavors, &self.cache.nodes) {
            Ok(p) if p.is_empty() => {}
            Ok(pod_sets) => self.engine_apply(Event::RestorePlacement {
                workload: key.clone(),
                pod_sets,
            }),
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "topology assignment not restored")
            }
        }
    }

    /// Brings the engine's view of one workload in line with the cache.
    fn sync_workload(&mut self, key: &WorkloadKey) {
        if self.engine.is_none() {
            return;
        }
        let Some(wl) = self.cache.workloads.get(key) else {
            self.engine_apply(Event::DeleteWorkload(key.clone()));
            return;
        };
        if wl.meta().deletion_timestamp.is_some() {
            self.engine_apply(Event::DeleteWorkload(key.clone()));
            return;
        }
        if is_finished(wl) {
            self.engine_apply(Event::FinishWorkload(key.clone()));
            return;
        }
        let now = now_ms();
        let until = match (requeue_at(wl), self.backoffs.get(key)) {
            (Some(a), Some(b)) => Some(a.max(*b)),
            (a, b) => a.or(b.copied()),
        };
        if !has_admission(wl)
            && let Some(t) = until.filter(|t| *t > now)
        {
            // Backing off: out of the queue until requeueAt, as Kueue keeps it inadmissible.
            self.backoffs.insert(key.clone(), t);
            self.engine_apply(Event::DeleteWorkload(key.clone()));
            return;
        }
        let evicted_by_timeout = cond_reason(wl, condition::EVICTED) == Some("PodsReadyTimeout");
        let eviction_time = cond_time(wl, condition::EVICTED);
        match ingest::workload(wl) {
            Ok((mut w, admission)) => {
                if evicted_by_timeout
                    && self
                        .config
                        .wait_for_pods_ready
                        .as_ref()
                        .is_some_and(|c| c.order_by_eviction)
                    && let Some(t) = eviction_time
                {
                    w.creation_time = t;
                }
                let admitted = admission.is_some();
                let restore = admitted.then(|| w.clone());
                self.engine_apply(Event::UpsertWorkload {
                    workload: w,
                    admission,
                });
                if let Some(w) = restore {
                    self.restore_placement(key, &w);
                }
            }
            Err(e) => tracing::warn!(error = %e, "workload ignored"),
        }
    }

    /// Builds the engine from the cache: quota objects first, then every workload (admitted ones restore their
    /// quota).
    fn rebuild(&mut self) {
        self.engine = Some(Engine::new(self.config.engine.clone()));
        self.policies.engine_rebuilt();
        self.policies_dirty = true;
        self.role = "leader";
        self.metrics.leader.set(1);
        let flavors: Vec<_> = self.cache.flavors.values().cloned().collect();
        for f in &flavors {
            self.sync_flavor(f);
        }
        // Topology and nodes before workloads: restored placements charge nodes the engine must know.
        let topologies: Vec<_> = self.cache.topologies.values().cloned().collect();
        for t in &topologies {
            self.sync_topology(t);
        }
        let nodes: Vec<_> = self.cache.nodes.values().cloned().collect();
        for n in &nodes {
            self.sync_node(n);
        }
        let gpus: Vec<_> = self.cache.node_gpus.values().cloned().collect();
        for g in &gpus {
            self.sync_node_gpus(g);
        }
        let cohorts: Vec<_> = self.cache.cohorts.values().cloned().collect();
        for c in &cohorts {
            if let Ok(c) = ingest::cohort(c) {
                self.engine_apply(Event::UpsertCohort(c));
            }
        }
        let cqs: Vec<_> = self.cache.cluster_queues.values().cloned().collect();
        for c in &cqs {
            self.sync_cluster_queue(c);
        }
        let nss: Vec<_> = self.cache.namespaces.values().cloned().collect();
        for n in &nss {
            if let Ok(ns) = ingest::namespace(n) {
                self.engine_apply(Event::UpsertNamespace(ns));
            }
        }
        let lqs: Vec<_> = self.cache.local_queues.values().cloned().collect();
        for l in &lqs {
            if let Ok(l) = ingest::local_queue(l) {
                self.engine_apply(Event::UpsertLocalQueue(l));
            }
        }
        let keys: Vec<_> = self.cache.workloads.keys().cloned().collect();
        // Admitted workloads first, so their quota is held before anything pending is considered.
        let (admitted, rest): (Vec<_>, Vec<_>) = keys
            .into_iter()
            .partition(|k| self.cache.workloads.get(k).is_some_and(has_admission));
        for k in admitted.iter().chain(rest.iter()) {
            self.sync_workload(k);
            self.dirty_workloads.insert(k.clone());
        }
        self.dirty_jobs.extend(self.cache.jobs.keys().cloned());
        let groups: Vec<_> = self.cache.managed_pods.groups().cloned().collect();
        self.dirty_pod_groups.extend(groups);
        self.queues_dirty = true;
        tracing::info!(
            workloads = self.cache.workloads.len(),
            cluster_queues = self.cache.cluster_queues.len(),
            "engine rebuilt from the API server's objects"
        );
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
        let mut idle = 0;
        for _ in 0..limit {
            if !self.leadership.is_leader() {
                return Err(ControllerError::LeadershipLost);
            }
            let mut did = false;
            for job in std::mem::take(&mut self.deleted_jobs) {
                did = true;
                self.job_deleted(&job).await;
            }
            for key in std::mem::take(&mut self.dirty_workloads) {
                self.reconcile_workload(&key).await;
            }
            for key in std::mem::take(&mut self.dirty_jobs) {
                did |= self.reconcile_job(&key).await;
            }
            for key in std::mem::take(&mut self.dirty_pod_groups) {
                did |= self.reconcile_pod_group(&key).await;
            }
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
            if any {
                self.metrics
                    .cycle_seconds
                    .observe(started.elapsed().as_secs_f64());
            }
            let more = !self.queued.is_empty()
                || !self.dirty_jobs.is_empty()
                || !self.dirty_workloads.is_empty()
                || !self.dirty_ungates.is_empty()
                || !self.dirty_pod_groups.is_empty()
                || !self.deleted_jobs.is_empty();
            if acted || did || more {
                idle = 0;
                continue;
            }
            idle += 1;
            let has_work = self.engine.as_ref().is_some_and(Engine::has_work);
            if !has_work || idle > self.cache.cluster_queues.len() + 2 {
                break;
            }
        }
        if self.queues_dirty {
            self.queues_dirty = false;
            self.write_queue_statuses().await;
            self.publish_visibility();
        }
        self.write_policy_statuses().await;
        Ok(())
    }

    fn record_attempts(&self, decisions: &[Decision], started: Instant) {
        let secs = started.elapsed().as_secs_f64();
        for d in decisions {
            let result = match d {
                Decision::Admit { .. } => "success",
                Decision::Pending { .. } => "inadmissible",
                Decision::Evict { .. } => continue,
            };
            let l: Labels = vec![
                ("result", result.to_string()),
                ("replica_role", self.role.to_string()),
            ];
            self.metrics.admission_attempts.get_or_create(&l).inc();
            self.metrics
                .admission_attempt_duration
                .get_or_create(&l)
                .observe(secs);
        }
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

    /// Writes a Workload status change computed by `mutate` and keeps the cache current.
    async fn write_workload_status(
        &mut self,
        key: &WorkloadKey,
        mutate: impl FnMut(&mut api::Workload) -> Result<bool, String>,
    ) -> Option<api::Workload> {
        let cached = self.cache.workloads.get(key)?.clone();
        let api = self.apis.workloads(&key.namespace);
        match self
            .writer
            .update(&api, cached, Endpoint::Status, mutate)
            .await
        {
            Ok(Some(w)) => {
                self.cache.workloads.insert(key.clone(), w.clone());
                Some(w)
            }
            Ok(None) => {
                self.cache.workloads.remove(key);
                self.engine_apply(Event::DeleteWorkload(key.clone()));
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "workload status write failed");
                None
            }
        }
    }

    async fn write_workload_main(
        &mut self,
        key: &WorkloadKey,
        mutate: impl FnMut(&mut api::Workload) -> Result<bool, String>,
    ) -> Option<api::Workload> {
        let cached = self.cache.workloads.get(key)?.clone();
        let api = self.apis.workloads(&key.namespace);
        match self
            .writer
            .update(&api, cached, Endpoint::Main, mutate)
            .await
        {
            Ok(Some(w)) => {
                self.cache.workloads.insert(key.clone(), w.clone());
                Some(w)
            }
            Ok(None) => {
                self.cache.workloads.remove(key);
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "workload write failed");
                None
            }
        }
    }

    async fn write_job(
        &mut self,
        key: &(String, String),
        mutate: impl FnMut(&mut Job) -> Result<bool, String>,
    ) -> Option<Job> {
        self.write_job_at(key, Endpoint::Main, mutate).await
    }

    /// Writes a Job (its object or its status) through the writer and caches what the API server returned.
    async fn write_job_at(
        &mut self,
        key: &(String, String),
        endpoint: Endpoint,
        mutate: impl FnMut(&mut Job) -> Result<bool, String>,
    ) -> Option<Job> {
        let cached = self.cache.jobs.get(key)?.clone();
        let api = self.apis.jobs(&key.0);
        match self.writer.update(&api, cached, endpoint, mutate).await {
            Ok(Some(j)) => {
                self.cache.jobs.insert(key.clone(), j.clone());
                Some(j)
            }
            Ok(None) => {
                self.cache.jobs.remove(key);
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "job write failed");
                if let Some(j) = self.cache.jobs.get(key) {
                    self.event(
                        reference(j),
                        EventSeverity::Warning,
                        "FailedToStart",
                        "Start",
                        e.to_string(),
                    );
                }
                None
            }
        }
    }

    /// Carries out the engine's decisions, and the ones those cause, in order.
    async fn carry_out(&mut self, decisions: Vec<Decision>) {
        let mut queue: std::collections::VecDeque<Decision> = decisions.into();
        while let Some(d) = queue.pop_front() {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    time,
                } => self.admit(&workload, &admission, time).await,
                Decision::Pending {
                    workload,
                    reason,
                    message,
                } => self.pending(&workload, &reason, &message).await,
                Decision::Evict {
                    workload,
                    reason,
                    preemption_reason,
                    preemptor,
                    message,
                    time,
                } => {
                    let grace = if preemption_reason.is_some() {
                        self.checkpoint_grace(&workload)
                    } else {
                        None
                    };
                    match grace {
                        Some(grace) if !self.checkpoints.contains_key(&workload) => {
                            let pending = PendingCheckpoint {
                                reason,
                                preemption_reason,
                                preemptor,
                                message,
                                requested: time,
                                deadline: now_ms() + grace,
                                cluster_queue: String::new(),
                            };
                            self.request_checkpoint(&workload, pending, grace).await
                        }
                        _ => {
                            self.evict(
                                &workload,
                                &reason,
                                preemption_reason.as_deref(),
                                preemptor.as_ref(),
                                &message,
                                time,
                            )
                            .await
                        }
                    }
                }
            }
            queue.extend(std::mem::take(&mut self.queued));
        }
    }

    async fn admit(&mut self, key: &WorkloadKey, admission: &engine::Admission, time: Time) {
        let has_checks = self
            .cache
            .cluster_queues
            .get(&admission.cluster_queue)
            .and_then(|cq| cq.spec.admission_checks_strategy.as_ref())
            .is_some_and(|s| !s.admission_checks.is_empty());
        let placement = self.engine.as_ref().and_then(|e| e.placement(key));
        let api_adm = ingest::api_admission_with_placement(admission, placement);
        let written = self
            .write_workload_status(key, |wl| {
                let before = wl.status.clone();
                status::admit(wl, api_adm.clone(), has_checks, time);
                Ok(wl.status != before)
            })
            .await;
        let Some(wl) = written else { return };
        self.admitted_at.insert(key.clone(), time);
        let cq = admission.cluster_queue.clone();
        let pc = Self::priority_class(&wl);
        let waited_since = cond_time(&wl, condition::REQUEUED)
            .filter(|_| cond_true(&wl, condition::REQUEUED))
            .or_else(|| wl.metadata.creation_timestamp.as_ref().map(ingest::time_of))
            .unwrap_or(time);
        let wait = ((time - waited_since).max(0) as f64) / 1000.0;
        let l: Labels = vec![
            ("cluster_queue", cq.clone()),
            ("priority_class", pc),
            ("replica_role", self.role.to_string()),
        ];
        self.metrics
            .quota_reserved_workloads
            .get_or_create(&l)
            .inc();
        self.metrics
            .quota_reserved_wait_time
            .get_or_create(&l)
            .observe(wait);
        if !has_checks {
            self.metrics.admitted_workloads.get_or_create(&l).inc();
            self.metrics
                .admission_wait_time
                .get_or_create(&l)
                .observe(wait);
        }
        self.event(
            reference(&wl),
            EventSeverity::Normal,
            "QuotaReserved",
            "Admission",
            format!("Quota reserved in ClusterQueue {cq}, wait time since queued was {wait:.0}s"),
        );
        if let Some(j) = owner_job(&wl) {
            self.dirty_jobs.insert(j);
        }
        if let Some(g) = PodGroupKey::of_workload(&wl) {
            self.dirty_pod_groups.insert(g);
        }
        self.dirty_workloads.insert(key.clone());
    }

    async fn pending(&mut self, key: &WorkloadKey, reason: &str, message: &str) {
        let Some(wl) = self.cache.workloads.get(key) else {
            return;
        };
        let requests = match ingest::workload(wl) {
            Ok((w, _)) => status::resource_requests(&w),
            Err(_) => Vec::new(),
        };
        let reason = status::written_pending_reason(reason, self.config.detailed_pending_reasons)
            .to_string();
        let now = now_ms();
        self.write_workload_status(key, |wl| {
            let before = wl.status.clone();
            status::pending(wl, &reason, message, &requests, now);
            Ok(wl.status != before)
        })
        .await;
    }

    async fn evict(
        &mut self,
        key: &WorkloadKey,
        reason: &str,
        preemption_reason: Option<&str>,
        preemptor: Option<&WorkloadKey>,
        message: &str,
        time: Time,
    ) {
        let written = self
            .write_workload_status(key, |wl| {
                if cond_true(wl, condition::EVICTED)
                    && cond_reason(wl, condition::EVICTED) == Some(reason)
                {
                    return Ok(false);
                }
                status::evict(wl, reason, preemption_reason, message, time);
                Ok(true)
            })
            .await;
        let Some(wl) = written else { return };
        let cq = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default();
        self.metrics
            .evicted_workloads
            .get_or_create(&vec![
                ("cluster_queue", cq.clone()),
                ("reason", reason.to_string()),
                ("underlying_cause", String::new()),
                ("priority_class", Self::priority_class(&wl)),
                ("replica_role", self.role.to_string()),
            ])
            .inc();
        if let Some(p) = preemption_reason {
            let preempting_cq = preemptor
                .and_then(|k| self.cache.workloads.get(k))
                .and_then(|w| {
                    let lq = (w.namespace().unwrap_or_default(), w.spec.queue_name.clone());
                    self.cache.local_queues.get(&lq)
                })
                .map(|lq| lq.spec.cluster_queue.clone())
                .unwrap_or_default();
            self.metrics
                .preempted_workloads
                .get_or_create(&vec![
                    ("preempting_cluster_queue", preempting_cq),
                    ("reason", p.to_string()),
                    ("replica_role", self.role.to_string()),
                ])
                .inc();
        }
        self.event(
            reference(&wl),
            EventSeverity::Normal,
            if preemption_reason.is_some() {
                "Preempted"
            } else {
                "Evicted"
            },
            "Eviction",
            message.to_string(),
        );
        match owner_job(&wl) {
            Some(j) if self.cache.jobs.contains_key(&j) => {
                self.dirty_jobs.insert(j);
            }
            // Pods cannot be suspended: the pod-group controller ends them, then completes the eviction.
            _ if self.pod_group_running(&wl) => {
                if let Some(g) = PodGroupKey::of_workload(&wl) {
                    self.dirty_pod_groups.insert(g);
                }
            }
            // No job to stop: the eviction is complete at once.
            _ => self.complete_eviction(key).await,
        }
    }

    /// The evicted workload's pods are gone: clear its admission, requeue it, release its quota.
    async fn complete_eviction(&mut self, key: &WorkloadKey) {
        let now = now_ms();
        let written = self
            .write_workload_status(key, |wl| {
                if !has_admission(wl) {
                    return Ok(false);
                }
                status::requeue_after_eviction(wl, now);
                Ok(true)
            })
            .await;
        if written.is_none() {
            return;
        }
        self.engine_apply(Event::EvictionComplete {
            workload: key.clone(),
            time: now,
        });
        // A requeue backoff (PodsReadyTimeout) keeps it out of the queue until requeueAt.
        self.sync_workload(key);
        self.queues_dirty = true;
    }

    /// Finalizers and waitForPodsReady deadlines of one workload.
    async fn reconcile_workload(&mut self, key: &WorkloadKey) {
        let Some(wl) = self.cache.workloads.get(key).cloned() else {
            self.ready_deadlines.remove(key);
            self.backoffs.remove(key);
            return;
        };
        if wl.meta().deletion_timestamp.is_some() {
            self.ready_deadlines.remove(key);
            self.backoffs.remove(key);
            if has_finalizer(&wl, labels::RESOURCE_IN_USE_FINALIZER) {
                self.write_workload_main(key, |w| {
                    Ok(set_finalizer(w, labels::RESOURCE_IN_USE_FINALIZER, false))
                })
                .await;
            }
            return;
        }
        if self.checkpoints.contains_key(key) {
            let done = wl
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(checkpoint::DONE_ANNOTATION))
                || cond_true(&wl, checkpoint::DONE_CONDITION);
            if done {
                self.finish_checkpoint(key, "done").await;
                return;
            }
        }
        if !is_admitted(&wl) {
            self.admitted_at.remove(key);
        }
        // An eviction under way with no Job left to stop (e.g. found so after a takeover) completes now.
        if is_evicting(&wl)
            && owner_job(&wl).is_none_or(|j| !self.cache.jobs.contains_key(&j))
            && !self.pod_group_running(&wl)
        {
            self.complete_eviction(key).await;
            return;
        }
        match &self.config.wait_for_pods_ready {
            Some(cfg)
                if is_admitted(&wl)
                    && !cond_true(&wl, condition::PODS_READY)
                    && wl.spec.is_active() =>
            {
                let since = self
                    .admitted_at
                    .get(key)
                    .copied()
                    .or_else(|| cond_time(&wl, condition::ADMITTED))
                    .or_else(|| cond_time(&wl, condition::QUOTA_RESERVED))
                    .unwrap_or_else(now_ms);
                self.ready_deadlines
                    .insert(key.clone(), since + cfg.timeout.as_millis() as Time);
            }
            _ => {
                self.ready_deadlines.remove(key);
            }
        }
    }

    /// Deadlines that passed: PodsReady timeouts, finished backoffs and checkpoint graces. Returns whether
    /// anything happened.
    async fn fire_timers(&mut self) -> bool {
        let now = now_ms();
        let mut did = false;
        let due: Vec<_> = self
            .checkpoints
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            did = true;
            self.finish_checkpoint(&key, "timeout").await;
        }
        let due: Vec<_> = self
            .ready_deadlines
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.ready_deadlines.remove(&key);
            did = true;
            self.pods_ready_timeout(&key).await;
        }
        let due: Vec<_> = self
            .backoffs
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.backoffs.remove(&key);
            did = true;
            let written = self
                .write_workload_status(&key, |wl| {
                    let st = wl.status.get_or_insert_with(Default::default);
                    let Some(rs) = st.requeue_state.as_mut() else {
                        return Ok(false);
                    };
                    if rs.requeue_at.is_none() {
                        return Ok(false);
                    }
                    rs.requeue_at = None;
                    status::set_condition(
                        &mut st.conditions,
                        condition::REQUEUED,
                        true,
                        "BackoffFinished",
                        "The workload backoff was finished",
                        now,
                    );
                    Ok(true)
                })
                .await;
            if written.is_some() {
                self.sync_workload(&key);
            }
        }
        did
    }

    async fn pods_ready_timeout(&mut self, key: &WorkloadKey) {
        let Some(cfg) = self.config.wait_for_pods_ready.clone() else {
            return;
        };
        let Some(wl) = self.cache.workloads.get(key).cloned() else {
            return;
        };
        if !is_admitted(&wl) || cond_true(&wl, condition::PODS_READY) || !wl.spec.is_active() {
            return;
        }
        let count = wl
            .status
            .as_ref()
            .and_then(|s| s.requeue_state.as_ref())
            .and_then(|r| r.count)
            .unwrap_or(0);
        let now = now_ms();
        if cfg
            .backoff_limit_count
            .is_some_and(|limit| count + 1 > limit)
        {
            // Over the limit: deactivate, as Kueue does (the engine then evicts it as Deactivated).
            self.write_workload_status(key, |wl| {
                let st = wl.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    condition::DEACTIVATION_TARGET,
                    true,
                    "RequeuingLimitExceeded",
                    "exceeding the maximum number of re-queuing retries",
                    now,
                ))
            })
            .await;
            if self
                .write_workload_main(key, |wl| {
                    if wl.spec.active == Some(false) {
                        return Ok(false);
                    }
                    wl.spec.active = Some(false);
                    Ok(true)
                })
                .await
                .is_some()
            {
                self.sync_workload(key);
            }
            return;
        }
        let message = format!("Exceeded the PodsReady timeout {key}");
        let requeue_at = now + cfg.backoff(count + 1).as_millis() as Time;
        let written = self
            .write_workload_status(key, |wl| {
                status::evict(wl, "PodsReadyTimeout", None, &message, now);
                let st = wl.status.get_or_insert_with(Default::default);
                let rs = st.requeue_state.get_or_insert_with(Default::default);
                rs.count = Some(count + 1);
                rs.requeue_at = Some(status::k8s_time(requeue_at));
                Ok(true)
            })
            .await;
        let Some(wl) = written else { return };
        self.backoffs.insert(key.clone(), requeue_at);
        let cq = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default();
        self.metrics
            .evicted_workloads
            .get_or_create(&vec![
                ("cluster_queue", cq),
                ("reason", "PodsReadyTimeout".to_string()),
                ("underlying_cause", String::new()),
                ("priority_class", Self::priority_class(&wl)),
                ("replica_role", self.role.to_string()),
            ])
            .inc();
        self.event(
            reference(&wl),
            EventSeverity::Normal,
            "EvictedDueToPodsReadyTimeout",
            "Eviction",
            message,
        );
        match owner_job(&wl) {
            Some(j) if self.cache.jobs.contains_key(&j) => {
                self.dirty_jobs.insert(j);
            }
            // Pods cannot be suspended: the pod-group controller ends them, then completes the eviction.
            _ if self.pod_group_running(&wl) => {
                if let Some(g) = PodGroupKey::of_workload(&wl) {
                    self.dirty_pod_groups.insert(g);
                }
            }
            _ => self.complete_eviction(key).await,
        }
    }

    /// The victim's checkpoint grace from its Workload's or Job's annotation (None: not opted in).
    fn checkpoint_grace(&self, key: &WorkloadKey) -> Option<Time> {
        let wl = self.cache.workloads.get(key)?;
        let from_wl = wl
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(checkpoint::GRACE_ANNOTATION))
            .cloned();
        let value = from_wl.or_else(|| {
            let job = self.cache.jobs.get(&owner_job(wl)?)?;
            job.metadata
                .annotations
                .as_ref()?
                .get(checkpoint::GRACE_ANNOTATION)
                .cloned()
        });
        match checkpoint::parse_grace(value.as_deref()) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "checkpoint grace ignored");
                None
            }
        }
    }

    /// Asks the victim to checkpoint: annotations on its Workload and pods, conditions on both sides.
    async fn request_checkpoint(
        &mut self,
        key: &WorkloadKey,
        mut pending: PendingCheckpoint,
        grace: Time,
    ) {
        let stamp = status::k8s_time(pending.requested).0.to_string();
        let now = now_ms();
        let preemptor = pending
            .preemptor
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        self.write_workload_main(key, |w| {
            let a = w.metadata.annotations.get_or_insert_with(Default::default);
            if a.get(checkpoint::REQUESTED_ANNOTATION) == Some(&stamp) {
                return Ok(false);
            }
            a.insert(checkpoint::REQUESTED_ANNOTATION.to_string(), stamp.clone());
            Ok(true)
        })
        .await;
        let secs = grace / 1000;
        let victim_msg = format!(
            "Preempted by {preemptor}; waiting up to {secs}s for a checkpoint before eviction"
        );
        let written = self
            .write_workload_status(key, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    checkpoint::REQUESTED_CONDITION,
                    true,
                    "Preemption",
                    &victim_msg,
                    now,
                ))
            })
            .await;
        pending.cluster_queue = written
            .as_ref()
            .and_then(|w| w.status.as_ref()?.admission.as_ref())
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default();
        if let Some(p) = pending.preemptor.clone() {
            let msg = format!("Waiting up to {secs}s for the checkpoint of {key}");
            self.write_workload_status(&p, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    checkpoint::WAITING_CONDITION,
                    true,
                    "CheckpointRequested",
                    &msg,
                    now,
                ))
            })
            .await;
        }
        if let Some(job) = written.as_ref().and_then(owner_job) {
            self.annotate_pods(&job, &stamp).await;
        }
        self.checkpoints.insert(key.clone(), pending);
    }

    async fn annotate_pods(&mut self, job: &(String, String), stamp: &str) {
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.apis.client.clone(), &job.0);
        let lp = kube::api::ListParams::default()
            .labels(&format!("batch.kubernetes.io/job-name={}", job.1));
        let pods = match api.list(&lp).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!(error = %e, job = %job.1, "cannot list the job's pods for a checkpoint request");
                return;
            }
        };
        for pod in pods {
            let r = self
                .writer
                .update(&api, pod, Endpoint::Main, |p| {
                    let a = p.metadata.annotations.get_or_insert_with(Default::default);
                    if a.get(checkpoint::REQUESTED_ANNOTATION).map(String::as_str) == Some(stamp) {
                        return Ok(false);
                    }
                    a.insert(
                        checkpoint::REQUESTED_ANNOTATION.to_string(),
                        stamp.to_string(),
                    );
                    Ok(true)
                })
                .await;
            if let Err(e) = r {
                tracing::warn!(error = %e, "pod checkpoint annotation failed");
            }
        }
    }

    /// The checkpoint is done (or the grace ran out): record the wait, update both conditions, evict.
    async fn finish_checkpoint(&mut self, key: &WorkloadKey, outcome: &str) {
        let Some(p) = self.checkpoints.remove(key) else {
            return;
        };
        let now = now_ms();
        self.metrics
            .checkpoint_wait
            .get_or_create(&vec![
                ("cluster_queue", p.cluster_queue.clone()),
                ("outcome", outcome.to_string()),
            ])
            .observe(((now - p.requested).max(0) as f64) / 1000.0);
        let (reason, msg) = if outcome == "done" {
            ("CheckpointDone", "Checkpoint reported done; evicting")
        } else {
            (
                "GracePeriodExpired",
                "No checkpoint within the grace period; evicting",
            )
        };
        self.write_workload_status(key, |w| {
            let st = w.status.get_or_insert_with(Default::default);
            Ok(status::set_condition(
                &mut st.conditions,
                checkpoint::REQUESTED_CONDITION,
                false,
                reason,
                msg,
                now,
            ))
        })
        .await;
        if let Some(pre) = &p.preemptor {
            self.write_workload_status(pre, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    checkpoint::WAITING_CONDITION,
                    false,
                    reason,
                    msg,
                    now,
                ))
            })
            .await;
        }
        self.evict(
            key,
            &p.reason,
            p.preemption_reason.as_deref(),
            p.preemptor.as_ref(),
            &p.message,
            now,
        )
        .await;
    }

    /// The Job integration: Workload creation, start on admission, stop on eviction, PodsReady, Finished.
    /// Returns whether it wrote anything.
    async fn reconcile_job(&mut self, key: &(String, String)) -> bool {
        if !self.config.batch_jobs {
            return false;
        }
        let Some(job) = self.cache.jobs.get(key).cloned() else {
            return false;
        };
        if job.meta().deletion_timestamp.is_some() {
            return false;
        }
        // With manageJobsWithoutQueueName a Job without the label is managed with no queue, as in Kueue: its
        // Workload waits ("LocalQueue  doesn't exist") until the label is set. The webhook has already given it
        // the namespace's `default` LocalQueue when there is one (LocalQueueDefaulting).
        if BatchJob::queue_name(&job).is_none() && !self.config.manage_jobs_without_queue_name {
            return false;
        }
        let Some(uid) = job.metadata.uid.clone() else {
            return false;
        };
        let wl_name =
            crate::jobs::workload_name(BatchJob::KIND, BatchJob::GROUP, &job.name_any(), &uid);
        let wkey = WorkloadKey::new(key.0.clone(), wl_name);
        let Some(wl) = self.cache.workloads.get(&wkey).cloned() else {
            return self.create_workload_for(key, &job).await;
        };
        if is_finished(&wl) {
            return false;
        }
        if let Some((success, message)) = BatchJob::finished(&job) {
            return self
                .finish_workload_with(&wkey, &wl, success, &message)
                .await;
        }
        // Kueue's job reconciler writes PodsReady before it handles an eviction or starts the job, for every
        // Workload of a job (WaitForStart while it is not admitted).
        self.update_pods_ready(&wkey, &wl, &job).await;
        let suspended = BatchJob::is_suspended(&job);
        if is_evicting(&wl) {
            // Kueue's stop, in three writes: the API server refuses a template change of a Job that has
            // started, so first suspend (marked stopping), then clear status.startTime, then restore the
            // template and drop the mark.
            if !suspended {
                self.write_job(key, |j| {
                    BatchJob::suspend(j);
                    j.metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert(labels::STOPPING_ANNOTATION.into(), "true".into());
                    Ok(true)
                })
                .await;
                return true;
            }
            if job.annotations().contains_key(labels::STOPPING_ANNOTATION) {
                if job.status.as_ref().is_some_and(|s| s.start_time.is_some()) {
                    self.write_job_at(key, Endpoint::Status, |j| {
                        if let Some(s) = j.status.as_mut() {
                            s.start_time = None;
                        }
                        Ok(true)
                    })
                    .await;
                    return true;
                }
                let originals = originals(&wl);
                self.write_job(key, |j| {
                    BatchJob::restore(j, &originals);
                    if let Some(a) = j.metadata.annotations.as_mut() {
                        a.remove(labels::STOPPING_ANNOTATION);
                    }
                    Ok(true)
                })
                .await;
                // Stopped pods show up as status.active dropping to 0 in a later Job event.
                if self
                    .cache
                    .jobs
                    .get(key)
                    .is_some_and(|j| active_pods(j) == 0)
                {
                    self.complete_eviction(&wkey).await;
                }
                return true;
            }
            if active_pods(&job) == 0 {
                self.complete_eviction(&wkey).await;
                return true;
            }
            return false;
        }
        if is_admitted(&wl) {
            if suspended {
                return self.start_job(key, &wl).await;
            }
            return false;
        }
        if !suspended {
            // Running without admission (created before Sluice saw it): stop it until admitted.
            self.write_job(key, |j| {
                BatchJob::suspend(j);
                Ok(true)
            })
            .await;
            return true;
        }
        false
    }

    /// Reconciles again the Jobs and pod groups whose Workload could not be built.
    fn retry_unbuilt(&mut self) {
        self.dirty_jobs.append(&mut self.unbuilt_jobs);
        self.dirty_pod_groups.append(&mut self.unbuilt_pod_groups);
    }

    async fn create_workload_for(&mut self, key: &(String, String), job: &Job) -> bool {
        if BatchJob::finished(job).is_some() {
            return false;
        }
        let mut wrote = false;
        if !BatchJob::is_suspended(job) {
            self.write_job(key, |j| {
                BatchJob::suspend(j);
                Ok(true)
            })
            .await;
            wrote = true;
        }
        let wl = match BatchJob::workload(job, &self.cache.priorities) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot build a workload for the job");
                self.unbuilt_jobs.insert(key.clone());
                self.event(
                    reference(job),
                    EventSeverity::Warning,
                    "CreatedWorkload",
                    "Create",
                    format!("Workload not created: {e}"),
                );
                return wrote;
            }
        };
        let api = self.apis.workloads(&key.0);
        match self.writer.create(&api, &wl).await {
            Ok(Some(created)) => {
                let wkey = workload_key(&created);
                self.event(
                    reference(job),
                    EventSeverity::Normal,
                    "CreatedWorkload",
                    "Create",
                    format!("Created Workload: {wkey}"),
                );
                self.cache.workloads.insert(wkey.clone(), created);
                self.sync_workload(&wkey);
                self.queues_dirty = true;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "workload creation failed"),
        }
        true
    }

    /// The admitting ClusterQueue and what each pod set of an admitted Workload must run with
    /// (node selector, tolerations, labels, count), for the job kinds' starters; `None` (logged with
    /// `what`) when the Workload is not admitted or its admission cannot be applied.
    fn admitted_infos<'w>(
        &self,
        wl: &'w api::Workload,
        what: &str,
    ) -> Option<(&'w str, Vec<PodSetInfo>)> {
        let admission = wl.status.as_ref()?.admission.as_ref()?;
        let flavors = &self.cache.flavors;
        pod_set_infos(
            admission,
            &wl.spec.pod_sets,
            &wl.spec.queue_name,
            &wl.name_any(),
            |n| flavors.get(n),
        )
        .map_err(
            |e| tracing::warn!(workload = %workload_key(wl), error = %e, "cannot start {what}"),
        )
        .ok()
        .map(|infos| (admission.cluster_queue.as_str(), infos))
    }

    async fn start_job(&mut self, key: &(String, String), wl: &api::Workload) -> bool {
        let Some((cluster_queue, infos)) = self.admitted_infos(wl, "job") else {
            return false;
        };
        let started = self
            .write_job(key, |j| {
                BatchJob::run_with(j, &infos).map_err(|e| e.to_string())?;
                Ok(true)
            })
            .await;
        if let Some(j) = started {
            self.event(
                reference(&j),
                EventSeverity::Normal,
                "Started",
                "Start",
                format!("Admitted by clusterQueue {cluster_queue}"),
            );
        }
        true
    }

    /// Lifts the topology gate from the workload's gated pods, each with its domain's node selector; returns
    /// whether any pod was written.
    async fn ungate_pods(&mut self, key: &WorkloadKey) -> bool {
        let Some(wl) = self.cache.workloads.get(key) else {
            return false;
        };
        if !is_admitted(wl) {
            return false;
        }
        let pods: Vec<&Pod> = self
            .cache
            .pods
            .values()
            .filter(|p| {
                tas::pod_workload(p).is_some_and(|(ns, w)| ns == key.namespace && w == key.name)
            })
            .collect();
        let plan = match tas::plan_ungates(wl, &pods) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "pods not ungated");
                return false;
            }
        };
        let mut wrote = false;
        for (name, selector) in plan {
            let pkey = (key.namespace.clone(), name);
            let Some(cached) = self.cache.pods.get(&pkey).cloned() else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &pkey.0);
            let result = self
                .writer
                .update(&api, cached, Endpoint::Main, |p| {
                    if !tas::is_gated(p) {
                        return Ok(false);
                    }
                    let spec = p.spec.get_or_insert_with(Default::default);
                    crate::jobs::topology::ungate(spec, &selector)?;
                    Ok(true)
                })
                .await;
            match result {
                Ok(Some(p)) => {
                    wrote = true;
                    self.cache.pods.insert(pkey, p);
                }
                Ok(None) => {
                    self.cache.pods.remove(&pkey);
                }
                Err(e) => tracing::error!(pod = %pkey.1, error = %e, "pod ungate failed"),
            }
        }
        wrote
    }

    async fn update_pods_ready(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        job: &Job,
    ) -> bool {
        if self.config.wait_for_pods_ready.is_none() {
            return false;
        }
        let ready = ready_pods(job) >= admitted_pods(wl);
        self.set_pods_ready(wkey, wl, ready).await
    }

    /// Writes the Workload's PodsReady condition for `ready` (waitForPodsReady); returns false (nothing for
    /// the job to do).
    async fn set_pods_ready(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        ready: bool,
    ) -> bool {
        let (ready, reason, message) = status::pods_ready_condition(wl, ready);
        if cond_true(wl, condition::PODS_READY) == ready
            && cond_reason(wl, condition::PODS_READY) == Some(reason)
        {
            // Kueue rewrites the condition only when its status or reason changes.
            return false;
        }
        let now = now_ms();
        let written = self
            .write_workload_status(wkey, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    condition::PODS_READY,
                    ready,
                    reason,
                    message,
                    now,
                ))
            })
            .await;
        if written.is_some() {
            self.dirty_workloads.insert(wkey.clone());
        }
        false
    }

    /// Marks the Workload Finished with `message` and releases its quota.
    async fn finish_workload_with(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        success: bool,
        message: &str,
    ) -> bool {
        let now = now_ms();
        let written = self
            .write_workload_status(wkey, |w| {
                status::finish(w, success, message, now);
                Ok(true)
            })
            .await;
        if written.is_some() {
            let cq = wl
                .status
                .as_ref()
                .and_then(|s| s.admission.as_ref())
                .map(|a| a.cluster_queue.clone())
                .unwrap_or_default();
            self.metrics
                .finished_workloads
                .get_or_create(&vec![
                    ("cluster_queue", cq),
                    ("priority_class", Self::priority_class(wl)),
                    ("replica_role", self.role.to_string()),
                ])
                .inc();
            self.engine_apply(Event::FinishWorkload(wkey.clone()));
            self.ready_deadlines.remove(wkey);
            self.queues_dirty = true;
        }
        true
    }

    /// A Job is gone. As Kueue v0.19 (FinishOrphanedWorkloads, on by default): its Workload is finished with
    /// reason OwnerNotFound, which releases its quota at once, and loses its finalizer; garbage collection then
    /// deletes it through its owner reference.
    async fn job_deleted(&mut self, job: &Job) {
        let Some(uid) = job.metadata.uid.clone() else {
            return;
        };
        let ns = job.namespace().unwrap_or_default();
        let name =
            crate::jobs::workload_name(BatchJob::KIND, BatchJob::GROUP, &job.name_any(), &uid);
        let wkey = WorkloadKey::new(ns.clone(), name.clone());
        let Some(wl) = self.cache.workloads.get(&wkey).cloned() else {
            return;
        };
        if wl.metadata.deletion_timestamp.is_none() && !is_finished(&wl) {
            let now = now_ms();
            let written = self
                .write_workload_status(&wkey, |w| {
                    status::finish_with_reason(
                        w,
                        labels::reason::OWNER_NOT_FOUND,
                        "The workload's owner no longer exists",
                        now,
                    );
                    Ok(true)
                })
                .await;
            if written.is_some() {
                self.engine_apply(Event::FinishWorkload(wkey.clone()));
                self.ready_deadlines.remove(&wkey);
                self.queues_dirty = true;
            }
        }
        self.write_workload_main(&wkey, |w| {
            Ok(set_finalizer(w, labels::RESOURCE_IN_USE_FINALIZER, false))
        })
        .await;
    }

    /// ClusterQueue, LocalQueue and Cohort status, finalizers of ClusterQueues and ResourceFlavors, queue gauges.
    async fn write_queue_statuses(&mut self) {
        let Some(engine) = self.engine.as_ref() else {
            return;
        };
        let now = now_ms();
        let fair = engine.fair_sharing();
        let mut cq_writes = Vec::new();
        let mut cq_active = BTreeMap::new();
        for (name, cq) in &self.cache.cluster_queues {
            let Some(usage) = engine.cluster_queue_usage(name) else {
                continue;
            };
            let stopped = cq.spec.stop_policy() != api::StopPolicy::None;
            cq_active.insert(
                name.clone(),
                status::cluster_queue_is_active(&usage, stopped),
            );
            let mut st = status::cluster_queue_status(&usage, stopped, fair, now);
            keep_transition_times(
                &mut st.conditions,
                cq.status
                    .as_ref()
                    .map(|s| s.conditions.as_slice())
                    .unwrap_or(&[]),
            );
            self.queue_gauges(name, cq, &usage, engine);
            let terminating = cq.meta().deletion_timestamp.is_some();
            let finalizer = if terminating {
                (usage.reserving_workloads == 0).then_some(false)
            } else {
                (!has_finalizer(cq, labels::RESOURCE_IN_USE_FINALIZER)).then_some(true)
            };
            if cq.status.as_ref() != Some(&st) || finalizer.is_some() {
                cq_writes.push((cq.clone(), st, finalizer));
            }
        }
        let mut lq_writes = Vec::new();
        for (key, lq) in &self.cache.local_queues {
            let Some(usage) = engine.local_queue_usage(&key.0, &key.1) else {
                continue;
            };
            let stopped = lq.spec.stop_policy() != api::StopPolicy::None;
            let active = if self
                .cache
                .cluster_queues
                .contains_key(&lq.spec.cluster_queue)
            {
                Some(
                    cq_active
                        .get(&lq.spec.cluster_queue)
                        .copied()
                        .unwrap_or(false),
                )
            } else {
                None
            };
            let mut st = status::local_queue_status(&usage, stopped, active, now);
            let old = lq.status.clone().unwrap_or_default();
            keep_transition_times(&mut st.conditions, &old.conditions);
            // Fields Sluice does not compute keep what is there.
            let mut merged = old.clone();
            merged.conditions = st.conditions;
            merged.pending_workloads = st.pending_workloads;
            merged.reserving_workloads = st.reserving_workloads;
            merged.admitted_workloads = st.admitted_workloads;
            merged.flavors_reservation = st.flavors_reservation;
            merged.flavors_usage = st.flavors_usage;
            if lq.status.as_ref() != Some(&merged) {
                lq_writes.push((lq.clone(), merged));
            }
        }
        let mut cohort_writes = Vec::new();
        if fair {
            for (name, c) in &self.cache.cohorts {
                let Some(share) = engine.cohort_weighted_share(name) else {
                    continue;
                };
                let st = api::CohortStatus {
                    fair_sharing: Some(api::FairSharingStatus {
                        weighted_share: share,
                    }),
                };
                if c.status.as_ref() != Some(&st) {
                    cohort_writes.push((c.clone(), st));
                }
            }
        }
        let mut flavor_writes = Vec::new();
        for (name, rf) in &self.cache.flavors {
            let in_use = self.cache.cluster_queues.values().any(|cq| {
                cq.spec
                    .resource_groups
                    .iter()
                    .any(|g| g.flavors.iter().any(|f| &f.name == name))
            });
            let want = if rf.meta().deletion_timestamp.is_some() {
                !in_use && has_finalizer(rf, labels::RESOURCE_IN_USE_FINALIZER)
            } else {
                !has_finalizer(rf, labels::RESOURCE_IN_USE_FINALIZER)
            };
            if want {
                flavor_writes.push((rf.clone(), rf.meta().deletion_timestamp.is_none()));
            }
        }
        for (cq, st, finalizer) in cq_writes {
            let name = cq.name_any();
            let api = self.apis.cluster_queues.clone();
            let mut cur = Some(cq);
            if let Some(add) = finalizer
                && let Some(c) = cur.take()
            {
                cur = self
                    .write(&api, c, Endpoint::Main, "cluster queue finalizer", |c| {
                        Ok(set_finalizer(c, labels::RESOURCE_IN_USE_FINALIZER, add))
                    })
                    .await;
            }
            if let Some(c) = cur
                && let Some(c) = self
                    .write(&api, c, Endpoint::Status, "cluster queue status", |c| {
                        replace_status(&mut c.status, &st)
                    })
                    .await
            {
                self.cache.cluster_queues.insert(name, c);
            }
        }
        for (lq, st) in lq_writes {
            let key = (lq.namespace().unwrap_or_default(), lq.name_any());
            let api = self.apis.local_queues(&key.0);
            if let Some(l) = self
                .write(&api, lq, Endpoint::Status, "local queue status", |l| {
                    replace_status(&mut l.status, &st)
                })
                .await
            {
                self.cache.local_queues.insert(key, l);
            }
        }
        for (c, st) in cohort_writes {
            let name = c.name_any();
            let api = self.apis.cohorts.clone();
            if let Some(c) = self
                .write(&api, c, Endpoint::Status, "cohort status", |c| {
                    replace_status(&mut c.status, &st)
                })
                .await
            {
                self.cache.cohorts.insert(name, c);
            }
        }
        for (rf, add) in flavor_writes {
            let name = rf.name_any();
            let api = self.apis.flavors.clone();
            if let Some(f) = self
                .write(&api, rf, Endpoint::Main, "resource flavor finalizer", |f| {
                    Ok(set_finalizer(f, labels::RESOURCE_IN_USE_FINALIZER, add))
                })
                .await
            {
                self.cache.flavors.insert(name, f);
            }
        }
    }

    /// One write through the writer; a failure is logged (the next status pass retries) and gives `None`.
    async fn write<K, F>(
        &self,
        api: &Api<K>,
        cached: K,
        endpoint: Endpoint,
        what: &str,
        mutate: F,
    ) -> Option<K>
    where
        K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
        K::DynamicType: Default,
        F: FnMut(&mut K) -> Result<bool, String>,
    {
        self.writer
            .update(api, cached, endpoint, mutate)
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "{what} write failed");
                None
            })
    }

    fn queue_gauges(
        &self,
        name: &str,
        cq: &api::ClusterQueue,
        usage: &engine::ClusterQueueUsage,
        engine: &Engine,
    ) {
        let role = self.role.to_string();
        let pending = i64::from(usage.pending_workloads);
        self.metrics
            .pending_workloads
            .get_or_create(&vec![
                ("cluster_queue", name.to_string()),
                ("status", "active".to_string()),
                ("replica_role", role.clone()),
            ])
            .set(pending);
        self.metrics
            .reserving_active_workloads
            .get_or_create(&vec![
                ("cluster_queue", name.to_string()),
                ("replica_role", role.clone()),
            ])
            .set(usage.reserving_workloads as i64);
        self.metrics
            .admitted_active_workloads
            .get_or_create(&vec![
                ("cluster_queue", name.to_string()),
                ("replica_role", role.clone()),
            ])
            .set(usage.admitted_workloads as i64);
        let cohort = cq.spec.cohort().unwrap_or_default().to_string();
        let series = |flavor: &str, resource: &str| -> Labels {
            vec![
                ("cohort", cohort.clone()),
                ("cluster_queue", name.to_string()),
                ("flavor", flavor.to_string()),
                ("resource", resource.to_string()),
                ("replica_role", role.clone()),
            ]
        };
        for f in &usage.flavors_usage {
            for r in &f.resources {
                self.metrics
                    .cluster_queue_resource_usage
                    .get_or_create(&series(&f.name, &r.name))
                    .set(r.total);
            }
        }
        for f in &usage.flavors_reservation {
            for r in &f.resources {
                self.metrics
                    .cluster_queue_resource_reservation
                    .get_or_create(&series(&f.name, &r.name))
                    .set(r.total);
            }
        }
        for g in &cq.spec.resource_groups {
            for f in &g.flavors {
                for r in &f.resources {
                    if let Ok(v) = sluice_sdk::quantity::resource_value(&r.name, &r.nominal_quota) {
                        self.metrics
                            .cluster_queue_nominal_quota
                            .get_or_create(&series(&f.name, &r.name))
                            .set(v);
                    }
                }
            }
        }
        let status = if cq.meta().deletion_timestamp.is_some() {
            "terminating"
        } else if usage.active {
            "active"
        } else {
            "pending"
        };
        for s in ["pending", "active", "terminating"] {
            self.metrics
                .cluster_queue_status
                .get_or_create(&vec![
                    ("cluster_queue", name.to_string()),
                    ("status", s.to_string()),
                    ("replica_role", role.clone()),
                ])
                .set(i64::from(s == status));
        }
        if engine.fair_sharing() {
            self.metrics
                .cluster_queue_weighted_share
                .get_or_create(&vec![
                    ("cluster_queue", name.to_string()),
                    ("cohort", cohort.clone()),
                    ("replica_role", role.clone()),
                ])
                .set(usage.weighted_share);
        }
    }

    fn publish_visibility(&self) {
        let Some(engine) = self.engine.as_ref() else {
            return;
        };
        let mut snap = Snapshot::default();
        for name in self.cache.cluster_queues.keys() {
            let entries = engine
                .pending_workloads(name)
                .into_iter()
                .filter_map(|k| {
                    let w = self.cache.workloads.get(&k)?;
                    Some(PendingEntry {
                        namespace: k.namespace.clone(),
                        name: k.name.clone(),
                        local_queue: w.spec.queue_name.clone(),
                        priority: w.spec.priority(),
                        created: w
                            .metadata
                            .creation_timestamp
                            .as_ref()
                            .map(ingest::time_of)
                            .unwrap_or(0),
                    })
                })
                .collect();
            snap.cluster_queues.insert(name.clone(), entries);
        }
        for (key, lq) in &self.cache.local_queues {
            snap.local_queues
                .insert(key.clone(), lq.spec.cluster_queue.clone());
        }
        self.snapshot.publish(snap);
    }
}

fn split<K>(c: Change<K>) -> (K, bool) {
    match c {
        Change::Apply(o) => (o, false),
        Change::Delete(o) => (o, true),
    }
}

/// What `run_with` changed in each pod set, recorded from the Workload's pod templates (the Job as queued).
fn originals(wl: &api::Workload) -> Vec<PodSetInfo> {
    wl.spec
        .pod_sets
        .iter()
        .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
        .collect()
}

/// Conditions whose status did not change keep their transition time, so a rewrite of the same status is a no-op.
fn keep_transition_times(
    new: &mut [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    old: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) {
    for c in new.iter_mut() {
        if let Some(o) = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}

/// Whether any pod set of the Workload's admission carries a topology assignment.
fn has_topology_assignment(wl: &api::Workload) -> bool {
    wl.status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .is_some_and(|a| {
            a.pod_set_assignments
                .iter()
                .any(|p| p.topology_assignment.is_some())
        })
}

/// Sets `slot` to `status` for the writer: whether it changed (unchanged objects are not written).
fn replace_status<S: PartialEq + Clone>(slot: &mut Option<S>, status: &S) -> Result<bool, String> {
    let changed = slot.as_ref() != Some(status);
    *slot = Some(status.clone());
    Ok(changed)
}
