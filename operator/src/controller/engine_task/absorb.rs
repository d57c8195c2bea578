//! Watched objects into the cache and the engine: each change absorbed, the engine's view of a workload kept
//! in line with the cache, and the engine rebuilt from the cache on taking the lead.

use k8s_openapi::api::core::v1::Node;
use kube::{Resource, ResourceExt};
use sluice_sdk::kueue::labels::condition;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;

use super::{EngineTask, Input, crd_kinds, now_ms, trainjobs};
use crate::controller::objects::*;
use crate::controller::tas;
use crate::controller::watch::Change;
use crate::engine::{self, Engine, Event, WorkloadKey};
use crate::ingest;
use crate::jobs::PriorityClasses;
use crate::jobs::{JobSetJob, PyTorchJobJob, RayClusterJob, RayJobJob, RayServiceJob};

impl EngineTask {
    fn count_event(&self, kind: &str) {
        self.metrics.watch_event(kind);
    }

    /// Takes one watch input into the cache (and the engine, when leading).
    pub(super) fn absorb(&mut self, input: Input) {
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
                self.queues_changed();
            }
            Input::ClusterQueue(c) => {
                self.count_event("ClusterQueue");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.cluster_queues.remove(&name);
                    self.engine_apply(Event::DeleteClusterQueue(name));
                } else {
                    // An event older than the copy this task wrote is not the truth any more: it would make the
                    // next status write conflict.
                    if let Some(cached) = self.cache.cluster_queues.get(&name)
                        && is_stale(cached, &obj)
                    {
                        return;
                    }
                    let old = self.cache.cluster_queues.insert(name.clone(), obj.clone());
                    if old.is_none_or(|o| {
                        o.spec.admission_checks_strategy != obj.spec.admission_checks_strategy
                            || o.spec.stop_policy() != obj.spec.stop_policy()
                    }) {
                        // Its workloads' check lists follow its checks, and those its stop evicted are requeued
                        // when it runs again (Kueue's workload controller).
                        self.mark_workloads_of_cluster_queue_dirty(&name);
                    }
                    self.sync_cluster_queue(&obj);
                }
                self.queues_changed();
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
                self.queues_changed();
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
                    if let Some(cached) = self.cache.local_queues.get(&key)
                        && is_stale(cached, &obj)
                    {
                        return;
                    }
                    let old = self.cache.local_queues.insert(key.clone(), obj.clone());
                    if old.is_some_and(|o| o.spec.stop_policy() != obj.spec.stop_policy()) {
                        // Those its stop evicted are requeued when it runs again (Kueue's workload controller).
                        self.mark_workloads_of_local_queue_dirty(&key.0, &key.1);
                    }
                    match ingest::local_queue(&obj) {
                        Ok(l) => {
                            let restore = ingest::local_queue_usage(&obj).map(|usage| {
                                Event::RestoreLocalQueueUsage {
                                    namespace: l.namespace.clone(),
                                    name: l.name.clone(),
                                    usage,
                                }
                            });
                            self.engine_apply(Event::UpsertLocalQueue(l));
                            if let Some(e) = restore {
                                self.engine_apply(e);
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "local queue ignored"),
                    }
                }
                self.queues_changed();
            }
            Input::Namespace(c) => {
                self.count_event("Namespace");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.namespaces.remove(&name);
                    self.engine_apply(Event::DeleteNamespace(name));
                } else {
                    let first_seen = self
                        .cache
                        .namespaces
                        .insert(name.clone(), obj.clone())
                        .is_none();
                    // A job seen before its Namespace was judged by the namespace's name alone: with a selector on
                    // other labels, judge that namespace's jobs again.
                    if first_seen
                        && sluice_sdk::kueue::namespaces::reads_other_labels(
                            &self.config.managed_jobs_namespace_selector,
                        )
                    {
                        self.mark_namespace_jobs_dirty(&name);
                    }
                    if let Ok(ns) = ingest::namespace(&obj) {
                        self.engine_apply(Event::UpsertNamespace(ns));
                    }
                }
            }
            Input::LimitRange(c) => {
                self.count_event("LimitRange");
                let (obj, deleted) = split(c);
                let ns = obj.namespace().unwrap_or_default();
                if deleted {
                    self.cache
                        .resource_rules
                        .remove_limit_range(&ns, &obj.name_any());
                } else {
                    self.cache.resource_rules.upsert_limit_range(obj);
                }
                self.refresh_waiting(|k, _| k.namespace == ns);
            }
            Input::RuntimeClass(c) => {
                self.count_event("RuntimeClass");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.resource_rules.remove_runtime_class(&name);
                } else {
                    self.cache.resource_rules.upsert_runtime_class(obj);
                }
                self.refresh_waiting(|_, wl| {
                    wl.spec.pod_sets.iter().any(|ps| {
                        ps.template
                            .spec
                            .as_ref()
                            .and_then(|s| s.runtime_class_name.as_deref())
                            == Some(name.as_str())
                    })
                });
            }
            Input::WorkloadPriorityClass(c) => {
                self.count_event("WorkloadPriorityClass");
                match c {
                    Change::Apply(o) => {
                        let name = o.name_any();
                        let changed =
                            self.cache.priorities.workload_class(&name) != Some(o.spec.value);
                        self.cache.priorities.upsert_workload_class(&o);
                        if changed {
                            // Kueue's WorkloadPriorityClass controller: the Workloads naming it take its value.
                            let keys = self
                                .cache
                                .workloads
                                .iter()
                                .filter(|(_, w)| {
                                    PriorityClasses::workload_class_of(w) == Some(name.as_str())
                                })
                                .map(|(k, _)| k.clone());
                            self.dirty_workloads.extend(keys);
                        }
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
                self.queues_changed();
            }
            Input::AdmissionCheck(c) => {
                self.count_event("AdmissionCheck");
                let (obj, deleted) = split(c);
                let name = obj.name_any();
                if deleted {
                    self.cache.admission_checks.remove(&name);
                    self.engine_apply(Event::DeleteAdmissionCheck(name));
                } else {
                    self.cache.admission_checks.insert(name, obj.clone());
                    self.sync_admission_check(&obj);
                }
                self.queues_changed();
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
                    let spec_changed = self
                        .cache
                        .node_gpus
                        .get(&name)
                        .is_none_or(|old| old.spec != obj.spec);
                    self.cache.node_gpus.insert(name, obj.clone());
                    // A status-only change (the GPUs' use) leaves the engine's model as it is.
                    if spec_changed {
                        self.sync_node_gpus(&obj);
                    }
                }
                self.gpu_use_changed();
            }
            Input::Pod(c) => {
                self.count_event("Pod");
                let (obj, deleted) = split(c);
                self.absorb_lws_pod(&obj, deleted);
                self.absorb_managed_pod(&obj, deleted);
                self.absorb_gpu_pod(&obj, deleted);
                let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                let Some((ns, wl)) = tas::pod_workload(&obj) else {
                    self.cache.pods.remove(&key);
                    return;
                };
                // Every admitted pod names its Workload; only those of topology-assigned pod sets are kept (while
                // the Workload is not seen yet, a pod is kept in case).
                let wkey = WorkloadKey::new(ns.clone(), wl.clone());
                let topology_pod = tas::is_gated(&obj)
                    || self
                        .cache
                        .workloads
                        .get(&wkey)
                        .is_none_or(|w| tas::in_topology_pod_set(w, &obj));
                if deleted || !topology_pod {
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
                    self.matched_specs.remove(&key);
                } else {
                    if let Some(cached) = self.cache.workloads.get(&key)
                        && is_stale(cached, &obj)
                    {
                        return;
                    }
                    self.cache.workloads.insert(key.clone(), obj.clone());
                }
                self.mark_owner_dirty(&obj);
                self.absorb_lws_workload(&obj);
                // A Workload nobody controls may be a job's prebuilt one, which that job waits for.
                if !deleted
                    && !obj
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.controller == Some(true))
                {
                    self.retry_unbuilt();
                }
                if !deleted && has_topology_assignment(&obj) {
                    self.dirty_ungates.insert(key.clone());
                }
                self.sync_workload(&key);
                self.dirty_workloads.insert(key);
                self.queues_changed();
                if !self.cache.gpu_pods.is_empty() {
                    self.gpu_use_changed();
                }
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
            Input::JobSet(c) => {
                self.count_event("JobSet");
                let (obj, deleted) = split(c);
                let gone = crd_kinds::absorb_change::<JobSetJob>(
                    &mut self.cache.jobsets,
                    &mut self.kinds,
                    obj,
                    deleted,
                );
                self.owners_gone.extend(gone);
            }
            Input::PyTorchJob(c) => {
                self.count_event("PyTorchJob");
                let (obj, deleted) = split(c);
                let gone = crd_kinds::absorb_change::<PyTorchJobJob>(
                    &mut self.cache.pytorchjobs,
                    &mut self.kinds,
                    obj,
                    deleted,
                );
                self.owners_gone.extend(gone);
            }
            Input::RayJob(c) => {
                self.count_event("RayJob");
                let (obj, deleted) = split(c);
                let gone = crd_kinds::absorb_change::<RayJobJob>(
                    &mut self.cache.rayjobs,
                    &mut self.kinds,
                    obj,
                    deleted,
                );
                self.owners_gone.extend(gone);
            }
            Input::RayCluster(c) => {
                self.count_event("RayCluster");
                let (obj, deleted) = split(c);
                let gone = crd_kinds::absorb_change::<RayClusterJob>(
                    &mut self.cache.rayclusters,
                    &mut self.kinds,
                    obj,
                    deleted,
                );
                self.owners_gone.extend(gone);
            }
            Input::RayService(c) => {
                self.count_event("RayService");
                let (obj, deleted) = split(c);
                let gone = crd_kinds::absorb_change::<RayServiceJob>(
                    &mut self.cache.rayservices,
                    &mut self.kinds,
                    obj,
                    deleted,
                );
                self.owners_gone.extend(gone);
            }
            Input::TrainJob(c) => {
                self.count_event("TrainJob");
                let (obj, deleted) = split(c);
                let gone =
                    trainjobs::absorb_trainjob(&mut self.cache, &mut self.kinds, obj, deleted);
                self.owners_gone.extend(gone);
            }
            Input::LeaderWorkerSet(c) => {
                self.count_event("LeaderWorkerSet");
                let (obj, deleted) = split(c);
                self.absorb_lws(obj, deleted);
            }
            Input::StatefulSet(c) => {
                self.count_event("StatefulSet");
                let (obj, deleted) = split(c);
                self.absorb_lws_statefulset(&obj, deleted);
            }
            Input::TrainingRuntime(c) => {
                self.count_event("TrainingRuntime");
                let (obj, deleted) = split(c);
                self.absorb_training_runtime(obj, deleted);
            }
            Input::ClusterTrainingRuntime(c) => {
                self.count_event("ClusterTrainingRuntime");
                let (obj, deleted) = split(c);
                self.absorb_cluster_training_runtime(obj, deleted);
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
                    self.kinds.jobs.dirty.insert(key);
                }
            }
        }
    }

    pub(super) fn engine_apply(&mut self, event: Event) {
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

    /// Every workload queued through LocalQueue `namespace`/`name` is reconciled again.
    fn mark_workloads_of_local_queue_dirty(&mut self, namespace: &str, name: &str) {
        let keys = self
            .cache
            .workloads
            .iter()
            .filter(|(k, w)| k.namespace == namespace && w.spec.queue_name == name)
            .map(|(k, _)| k.clone());
        self.dirty_workloads.extend(keys);
    }

    /// Kueue's resourceUpdatesHandler: after a LimitRange or RuntimeClass change, the Workloads it applies to that
    /// wait without QuotaReserved=True (Kueue's index counts a missing condition as False) are taken again with
    /// the adjustments as they are now (the engine re-queues one whose adjusted requests changed, and only updates
    /// one whose admissibility alone changed).
    fn refresh_waiting(&mut self, applies: impl Fn(&WorkloadKey, &api::Workload) -> bool) {
        let keys: Vec<WorkloadKey> = self
            .cache
            .workloads
            .iter()
            .filter(|(k, wl)| {
                !has_admission(wl) && !cond_true(wl, condition::QUOTA_RESERVED) && applies(k, wl)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.sync_workload(&key);
        }
    }

    /// Every workload queued through a LocalQueue of ClusterQueue `cq` is reconciled again.
    fn mark_workloads_of_cluster_queue_dirty(&mut self, cq: &str) {
        let local_queues = &self.cache.local_queues;
        let keys = self
            .cache
            .workloads
            .iter()
            .filter(|(k, w)| {
                local_queues
                    .get(&(k.namespace.clone(), w.spec.queue_name.clone()))
                    .is_some_and(|lq| lq.spec.cluster_queue == cq)
            })
            .map(|(k, _)| k.clone());
        self.dirty_workloads.extend(keys);
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
    pub(super) fn sync_workload(&mut self, key: &WorkloadKey) {
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
        if !has_admission(wl)
            && (crate::status::is_on_hold(wl)
                || cond_true(wl, super::pod_groups::WAITING_FOR_REPLACEMENT_PODS))
        {
            // As Kueue (`IsAdmissible`): a Workload whose job is on hold, or whose pod group waits for replacement
            // pods, stays out of the queue.
            self.engine_apply(Event::DeleteWorkload(key.clone()));
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
        // Kueue's queue order after some evictions is the eviction time: a PodsReady timeout (with the Eviction
        // timestamp) and an admission check's Retry.
        let evicted_by = cond_reason(wl, condition::EVICTED);
        let by_eviction_time = match evicted_by {
            Some("PodsReadyTimeout") => self
                .config
                .wait_for_pods_ready
                .as_ref()
                .is_some_and(|c| c.order_by_eviction),
            Some(crate::admission_checks::EVICTED_BY_ADMISSION_CHECK) => true,
            _ => false,
        };
        let eviction_time = cond_time(wl, condition::EVICTED);
        match ingest::workload_with(wl, &self.cache.resource_rules) {
            Ok((mut w, admission)) => {
                if by_eviction_time && let Some(t) = eviction_time {
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

    /// An AdmissionCheck into the engine: a ClusterQueue naming it is active only while its controller says the
    /// check is Active.
    fn sync_admission_check(&mut self, check: &api::AdmissionCheck) {
        self.engine_apply(Event::UpsertAdmissionCheck {
            name: check.name_any(),
            active: crate::admission_checks::is_active(check),
        });
    }

    /// Builds the engine from the cache: quota objects first, then every workload (admitted ones restore their
    /// quota).
    pub(super) fn rebuild(&mut self) {
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
        let checks: Vec<_> = self.cache.admission_checks.values().cloned().collect();
        for c in &checks {
            self.sync_admission_check(c);
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
            if let Ok(e) = ingest::local_queue(l) {
                let restore =
                    ingest::local_queue_usage(l).map(|usage| Event::RestoreLocalQueueUsage {
                        namespace: e.namespace.clone(),
                        name: e.name.clone(),
                        usage,
                    });
                self.engine_apply(Event::UpsertLocalQueue(e));
                if let Some(r) = restore {
                    self.engine_apply(r);
                }
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
        self.mark_all_jobs_dirty();
        self.queues_changed();
        tracing::info!(
            workloads = self.cache.workloads.len(),
            cluster_queues = self.cache.cluster_queues.len(),
            "engine rebuilt from the API server's objects"
        );
    }
}

fn split<K>(c: Change<K>) -> (K, bool) {
    match c {
        Change::Apply(o) => (*o, false),
        Change::Delete(o) => (*o, true),
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
