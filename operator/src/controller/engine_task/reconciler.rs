//! The one job reconciler, generic over the job kinds (Kueue's jobframework shape): it creates a job's
//! Workload, starts the job on admission, stops it on eviction or when it runs without admission, keeps
//! PodsReady, and finishes the Workload with the job. What differs between kinds (how a job is loaded, started,
//! stopped and released) is the kind's [`Reconciled`] implementation; the order of the steps is here, once.

use std::future::Future;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use sluice_sdk::kueue::labels::{self, condition};
use sluice_sdk::kueue::v1beta2 as api;

use super::EngineTask;
use super::kinds::{KindQueues, Kinds};
use crate::controller::config::OperatorConfig;
use crate::controller::objects::*;
use crate::engine::WorkloadKey;
use crate::jobs::JobIntegration;
use crate::status;

/// How far a kind's stop got in one reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StopStep {
    /// A write was made and the stop goes on at the owner's next event (a Job stops in several writes).
    InProgress,
    /// Nothing is left to do; `wrote` says whether this reconcile wrote.
    Stopped {
        /// Whether anything was written.
        wrote: bool,
    },
}

impl StopStep {
    /// Whether the step wrote anything.
    pub(super) fn wrote(self) -> bool {
        match self {
            StopStep::InProgress => true,
            StopStep::Stopped { wrote } => wrote,
        }
    }
}

/// Why a job is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StopKind {
    /// Its Workload was evicted.
    Evicted,
    /// It runs without an admission.
    NotAdmitted,
    /// Its Workload is being deleted.
    WorkloadDeleted,
    /// It no longer matches the Workload holding its quota (it was changed); restored as the Workload has it.
    NoMatchingWorkload,
}

/// A stop with the reason and message Kueue writes on what it stops.
#[derive(Clone, Debug)]
pub(super) struct StopReason {
    /// Why.
    pub kind: StopKind,
    /// Kueue's reason (e.g. `WorkloadEvictedDueToPreempted`).
    pub reason: String,
    /// Kueue's message.
    pub message: String,
}

impl StopReason {
    fn evicted(wl: &api::Workload) -> Self {
        let evicted = wl
            .status
            .as_ref()
            .and_then(|s| status::condition(&s.conditions, condition::EVICTED));
        let reason = evicted.map(|c| c.reason.as_str()).unwrap_or_default();
        StopReason {
            kind: StopKind::Evicted,
            reason: format!("WorkloadEvictedDueTo{reason}"),
            message: evicted.map(|c| c.message.clone()).unwrap_or_default(),
        }
    }

    fn not_admitted() -> Self {
        StopReason {
            kind: StopKind::NotAdmitted,
            reason: "NotAdmitted".into(),
            message: "Not admitted by cluster queue".into(),
        }
    }

    fn no_matching_workload() -> Self {
        StopReason {
            kind: StopKind::NoMatchingWorkload,
            reason: "NoMatchingWorkload".into(),
            message: "No matching Workload; restoring pod templates according to existent Workload"
                .into(),
        }
    }

    fn workload_deleted() -> Self {
        StopReason {
            kind: StopKind::WorkloadDeleted,
            reason: "WorkloadDeleted".into(),
            message: "Workload is deleted".into(),
        }
    }
}

/// Which of a job's objects give up what the operator keeps on them (a pod's `kueue.x-k8s.io/managed`
/// finalizer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Release {
    /// All that are done (the Workload finished or went).
    All,
    /// Those being deleted.
    Deleting,
}

/// A job kind as the engine task reconciles it: its cache, its keys and how its objects are started and
/// stopped. Adding a kind is this implementation (with [`JobIntegration`]), its watch, and one line per
/// function in `kinds.rs`; [`EngineTask::reconcile`] does not change.
pub(super) trait Reconciled: JobIntegration<Job: Clone + Send + Sync> + Sized {
    /// What names one job in the dirty sets: a Job's (namespace, name), a pod group's key.
    type Key: Clone + Ord + std::fmt::Debug + Send + Sync;

    /// Event reason when its Workload cannot be built (Kueue's word for the kind).
    const NOT_BUILT_REASON: &'static str;
    /// Whether a Workload being deleted stops the job (Kueue's pods: yes; Sluice's Job carries on).
    const STOPS_ON_WORKLOAD_DELETION: bool;
    /// Whether a suspended job's Workload without quota is updated when the job changed (Kueue's
    /// `updateWorkloadToMatchJob`, for every kind but the composable pod groups, which match their pods otherwise).
    const UPDATES_UNMATCHED_WORKLOAD: bool = false;

    /// Whether the job's Workload follows a change of its queue-name label while suspended without admission
    /// (Kueue's `QueueNameChange`; a serving pod group's is left to its owner).
    fn follows_queue_name(_job: &Self::Job) -> bool {
        true
    }

    /// Whether the operator's configuration enables the kind.
    fn enabled(config: &OperatorConfig) -> bool;
    /// The kind's dirty and unbuilt sets.
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<Self::Key>;
    /// The job as cached; None when there is nothing to reconcile.
    fn load(task: &EngineTask, key: &Self::Key) -> Option<Self::Job>;
    /// Whether the job is left alone (being deleted, or not queued and not managed without a queue).
    fn skip(task: &EngineTask, job: &Self::Job) -> bool;
    /// The namespace of the job (and of its Workload).
    fn namespace(key: &Self::Key) -> String;
    /// The job a Workload belongs to, if it is of this kind.
    fn owner_key(wl: &api::Workload) -> Option<Self::Key>;
    /// Every cached job (reconciled after the engine is rebuilt).
    fn all_keys(task: &EngineTask) -> Vec<Self::Key>;
    /// Whether an evicted Workload's job must be reconciled to stop (else the eviction completes at once).
    fn needs_stopping(task: &EngineTask, key: &Self::Key) -> bool;
    /// Whether, after its stop, the job still holds pods on nodes (the eviction then waits for its next event).
    fn holds_pods(task: &EngineTask, key: &Self::Key) -> bool;
    /// Where its Workload's creation is announced.
    fn event_owner(job: &Self::Job) -> Option<ObjectReference>;

    /// Before a Workload is created: what is written first (a running Job is suspended, deleted pods released),
    /// and the job to build the Workload from (None: not now). Returns (wrote, job).
    fn prepare_create(
        task: &mut EngineTask,
        key: &Self::Key,
        job: Self::Job,
    ) -> impl Future<Output = (bool, Option<Self::Job>)> + Send;
    /// Starts the job (not running) with its admitted Workload; returns whether it wrote.
    fn start(
        task: &mut EngineTask,
        key: &Self::Key,
        wl: &api::Workload,
    ) -> impl Future<Output = bool> + Send;
    /// Stops the job for `why`.
    fn stop(
        task: &mut EngineTask,
        key: &Self::Key,
        job: &Self::Job,
        wl: &api::Workload,
        why: &StopReason,
    ) -> impl Future<Output = StopStep> + Send;
    /// The owner references a job adds to its prebuilt Workload when it takes it: None (the default) for one
    /// controller reference to the job; for a pod group, every pod as a plain owner (Kueue's
    /// `EnsureWorkloadOwnedByAllMembers`).
    fn prebuilt_owners(_task: &EngineTask, _job: &Self::Job) -> Option<Vec<OwnerReference>> {
        None
    }
    /// Whether the job still fits its prebuilt Workload (else it is finished `OutOfSync`); by default Kueue's
    /// `EquivalentToWorkload` on the Workload the job would build, tolerations compared when `tolerations`.
    fn fits_prebuilt(
        task: &EngineTask,
        job: &Self::Job,
        wl: &api::Workload,
        tolerations: bool,
    ) -> Result<bool, crate::jobs::JobError> {
        fits_as_built::<Self>(task, job, wl, tolerations)
    }
    /// Releases what the operator keeps on the job's objects; returns whether it wrote.
    fn finalize(
        task: &mut EngineTask,
        key: &Self::Key,
        which: Release,
    ) -> impl Future<Output = bool> + Send;
    /// Before the job is reconciled against its unfinished Workload: what is written first, and the job as the
    /// rest of the reconcile sees it (a pod group's excess pods deleted and left out). Returns (wrote, job); the
    /// default changes nothing.
    fn trim(
        _task: &mut EngineTask,
        _wl: &api::Workload,
        job: Self::Job,
    ) -> impl Future<Output = (bool, Self::Job)> + Send {
        async move { (false, job) }
    }
}

impl EngineTask {
    /// Whether jobs in namespace `ns` are Kueue's (`managedJobsNamespaceSelector`, on the Namespace's labels; a
    /// Namespace not seen yet is judged by its name alone).
    pub(super) fn namespace_managed(&self, ns: &str) -> bool {
        sluice_sdk::kueue::namespaces::selects_namespace(
            &self.config.managed_jobs_namespace_selector,
            ns,
            self.cache
                .namespaces
                .get(ns)
                .and_then(|n| n.metadata.labels.as_ref()),
        )
    }

    /// Reconciles one job of kind `I`; returns whether it wrote anything.
    pub(super) async fn reconcile<I: Reconciled>(&mut self, key: &I::Key) -> bool {
        if !I::enabled(&self.config) {
            return false;
        }
        let Some(job) = I::load(self, key) else {
            return false;
        };
        if I::skip(self, &job) {
            return false;
        }
        // A job whose uid is not known yet (or a single pod that is gone: its Workload is left to garbage
        // collection, the pod owns it).
        let Some(wl_name) = I::workload_name(&job) else {
            return false;
        };
        let wkey = WorkloadKey::new(I::namespace(key), wl_name);
        let prebuilt = I::prebuilt_workload(&job).is_some();
        let Some(wl) = self.cache.workloads.get(&wkey).cloned() else {
            // Outside managedJobsNamespaceSelector a job gets no Workload. One it has already (its namespace was
            // selected before) is still followed, so that its pods' finalizers and its quota are released.
            if !self.namespace_managed(&I::namespace(key)) {
                return false;
            }
            if prebuilt {
                return self.await_prebuilt::<I>(key, job).await;
            }
            return self.create_workload::<I>(key, job).await;
        };
        if is_finished(&wl) {
            return I::finalize(self, key, Release::All).await;
        }
        let (trimmed, job) = if wl.meta().deletion_timestamp.is_none() {
            I::trim(self, &wl, job).await
        } else {
            (false, job)
        };
        if trimmed {
            // The deletions' watch events reconcile the job again, with those pods gone.
            return true;
        }
        if prebuilt {
            match self.adopt_prebuilt::<I>(&wkey, &wl, &job).await {
                Prebuilt::Ours => {}
                Prebuilt::Wrote => return true,
                Prebuilt::NotOurs => return false,
            }
        }
        if I::STOPS_ON_WORKLOAD_DELETION && wl.meta().deletion_timestamp.is_some() {
            // As Kueue: a deleted Workload ends every pod of its group, finished or not.
            let stopped = I::stop(self, key, &job, &wl, &StopReason::workload_deleted()).await;
            return I::finalize(self, key, Release::All).await || stopped.wrote();
        }
        // Kueue's step 2: a job on hold gives its quota back and is otherwise left alone.
        if I::is_on_hold(&job) {
            if !has_admission(&wl) && !cond_true(&wl, condition::QUOTA_RESERVED) {
                return false;
            }
            let now = super::now_ms();
            let written = self
                .write_workload_status(&wkey, |w| Ok(status::put_on_hold(w, now)))
                .await;
            if written.is_some() {
                self.sync_workload(&wkey);
                self.queues_changed();
            }
            return written.is_some();
        }
        match I::finished(&job) {
            Ok(Some((success, message))) => {
                self.finish_workload_with(&wkey, &wl, success, &message)
                    .await;
                I::finalize(self, key, Release::All).await;
                return true;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "job not reconciled");
                return false;
            }
        }
        // Kueue's ensureOneWorkload: the Workload follows a change of the job's workload priority class.
        // Decided without awaiting, written by a boxed future: a future built here grows every kind's reconcile
        // poll frame, which debug builds keep whole on the stack (a RayJob's overflowed a test thread's).
        // Kueue's ensureOneWorkload: the Workload follows the job's admission gates (AdmissionGatedBy) first.
        let (gate_change, priority_change) = if prebuilt {
            (None, None)
        } else {
            self.job_changes::<I>(&job, &wkey, &wl)
        };
        if let Some(gates) = gate_change {
            let owner = I::event_owner(&job);
            if self.write_gates(&wkey, gates, owner).await {
                return true;
            }
        }
        if let Some((class, priority)) = priority_change {
            let owner = I::event_owner(&job);
            if self.write_priority(&wkey, class, priority, owner).await {
                return true;
            }
        }
        // Kueue's step 1 (ensureOneWorkload): a job changed while its Workload holds quota is stopped, and the
        // Workload replaced by one built from the job as it is now.
        if I::UPDATES_UNMATCHED_WORKLOAD
            && !prebuilt
            && cond_true(&wl, condition::QUOTA_RESERVED)
            && !self.matches_reserved::<I>(&job, &wl)
        {
            return self.replace_unmatched::<I>(key, &job, &wkey, &wl).await;
        }
        // Kueue's step 4: the pods that finished for good give their quota back.
        if let Some(reclaimable) = I::reclaimable_pods(&job)
            && self.write_reclaimable(&wkey, &wl, reclaimable).await
        {
            return true;
        }
        let wait_for_pods_ready = self.config.wait_for_pods_ready.is_some();
        if wait_for_pods_ready {
            // Kueue's job reconciler writes PodsReady before it handles an eviction or starts the job, for every
            // Workload of a job, pod groups' too (WaitForStart while it is not admitted, so also once evicted).
            self.set_pods_ready(&wkey, &wl, I::pods_ready(&job, &wl))
                .await;
        }
        if is_evicting(&wl) {
            return match I::stop(self, key, &job, &wl, &StopReason::evicted(&wl)).await {
                // Never complete the eviction while a stop is under way.
                StopStep::InProgress => true,
                StopStep::Stopped { wrote } => {
                    if I::holds_pods(self, key) {
                        wrote
                    } else {
                        self.complete_eviction(&wkey).await;
                        true
                    }
                }
            };
        }
        if is_admitted(&wl) {
            return I::is_suspended(&job) && I::start(self, key, &wl).await;
        }
        // A queued job that was changed (its pod counts, containers, tolerations or maximum execution time):
        // its Workload takes the job's new shape before it gets quota.
        let updated = I::UPDATES_UNMATCHED_WORKLOAD
            && I::is_suspended(&job)
            && !cond_true(&wl, condition::QUOTA_RESERVED)
            && self.match_workload_to_job::<I>(&job, &wkey, &wl).await;
        // Kueue's handleQueueNameChange: a suspended job's Workload without admission follows its queue-name label.
        let moved = !updated
            && I::is_suspended(&job)
            && I::follows_queue_name(&job)
            && self
                .follow_queue_name(I::queue_name(&job), &wkey, &wl)
                .await;
        // Running without an admission (created before Sluice saw it, or its Workload was recreated): stop it
        // until admitted.
        let stopped = !I::is_suspended(&job)
            && I::stop(self, key, &job, &wl, &StopReason::not_admitted())
                .await
                .wrote();
        // Without an admission nothing needs a deleted object to be kept for counting.
        I::finalize(self, key, Release::Deleting).await || stopped || updated || moved
    }

    /// Kueue's `QueueNameChange`: the Workload's `spec.queueName` set to the job's queue-name label when they
    /// differ; resolves to whether it wrote. Boxed here, so that the callers' futures (and their poll frames,
    /// which debug builds keep on the stack) hold a pointer, not this future.
    fn follow_queue_name<'a>(
        &'a mut self,
        queue: Option<String>,
        wkey: &'a WorkloadKey,
        wl: &'a api::Workload,
    ) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let queue = queue.unwrap_or_default();
            if queue == wl.spec.queue_name {
                return false;
            }
            let written = self
                .write_workload_main(wkey, |w| {
                    if w.spec.queue_name == queue {
                        return Ok(false);
                    }
                    w.spec.queue_name = queue.clone();
                    Ok(true)
                })
                .await;
            if written.is_some() {
                self.sync_workload(wkey);
                self.queues_changed();
            }
            written.is_some()
        })
    }

    /// What the Workload must take from the job as it is now ([`Self::gate_change`], [`Self::priority_change`]),
    /// from one Workload built from the job. Not async, so that the built Workload never sits in the reconcile's
    /// poll frame.
    #[inline(never)]
    #[allow(clippy::type_complexity)]
    fn job_changes<I: Reconciled>(
        &self,
        job: &I::Job,
        wkey: &WorkloadKey,
        wl: &api::Workload,
    ) -> (
        Option<Option<String>>,
        Option<(Option<api::PriorityClassRef>, Option<i32>)>,
    ) {
        match I::compose(job, &self.cache.priorities) {
            Ok(Some(fresh)) => (
                Self::gate_change(&fresh, wl),
                Self::priority_change(&fresh, wl),
            ),
            Ok(None) => (None, None),
            Err(e) => {
                tracing::warn!(workload = %wkey, error = %e, "job's admission gates and priority not read");
                (None, None)
            }
        }
    }

    /// Kueue's `UpdateWorkloadPriority`: a Workload whose priority comes from a WorkloadPriorityClass (or that has
    /// none, and no quota yet) takes the priority class and value the job resolves to now, once the job's
    /// `kueue.x-k8s.io/priority-class` names another class; a pod PriorityClass's Workload is left alone. Returns
    /// the class and value to write, if any.
    fn priority_change(
        fresh: &api::Workload,
        wl: &api::Workload,
    ) -> Option<(Option<api::PriorityClassRef>, Option<i32>)> {
        let is_workload_class = |r: &api::PriorityClassRef| {
            r.kind == Some(api::PriorityClassKind::WorkloadPriorityClass)
                && r.group == Some(api::PriorityClassGroup::Kueue)
        };
        let current = wl.spec.priority_class_ref.as_ref();
        match current {
            // Once quota is reserved the API server refuses to add a class.
            None if cond_true(wl, condition::QUOTA_RESERVED) || has_admission(wl) => return None,
            Some(r) if !is_workload_class(r) => return None,
            _ => {}
        }
        let wanted = fresh
            .spec
            .priority_class_ref
            .as_ref()
            .filter(|r| is_workload_class(r))
            .map(|r| r.name.as_str())
            .unwrap_or_default();
        if wanted == current.map(|r| r.name.as_str()).unwrap_or_default()
            || (fresh.spec.priority_class_ref == wl.spec.priority_class_ref
                && fresh.spec.priority == wl.spec.priority)
        {
            return None;
        }
        Some((fresh.spec.priority_class_ref.clone(), fresh.spec.priority))
    }

    /// The job's `kueue.x-k8s.io/admission-gated-by` when its Workload carries other gates (Kueue's
    /// `PropagateAdmissionGatedByAnnotation`): `Some(None)` removes them.
    fn gate_change(fresh: &api::Workload, wl: &api::Workload) -> Option<Option<String>> {
        let wanted = crate::jobs::admission_gates(&fresh.metadata);
        (wanted != crate::jobs::admission_gates(&wl.metadata)).then(|| wanted.map(str::to_string))
    }

    /// Writes the Workload's admission gates ([`Self::gate_change`]), with Kueue's event on the job; resolves to
    /// whether it wrote. Boxed as [`Self::follow_queue_name`] is.
    fn write_gates<'a>(
        &'a mut self,
        wkey: &'a WorkloadKey,
        gates: Option<String>,
        owner: Option<ObjectReference>,
    ) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let key = sluice_sdk::kueue::labels::ADMISSION_GATED_BY_ANNOTATION;
            let written = self
                .write_workload_main(wkey, |w| {
                    let annotations = w.metadata.annotations.get_or_insert_with(Default::default);
                    match &gates {
                        Some(g) => annotations.insert(key.to_string(), g.clone()),
                        None => annotations.remove(key),
                    };
                    Ok(true)
                })
                .await;
            if written.is_some() {
                let note = format!(
                    "Updated workload AdmissionGatedBy to {:?}",
                    gates.unwrap_or_default()
                );
                self.workload_updated(wkey, owner, note);
            }
            written.is_some()
        })
    }

    /// After a write of a Workload's spec or metadata the job asked for: the engine and the queues follow, and
    /// Kueue's `UpdatedWorkload` event goes to the job.
    fn workload_updated(
        &mut self,
        wkey: &WorkloadKey,
        owner: Option<ObjectReference>,
        note: String,
    ) {
        self.sync_workload(wkey);
        self.queues_changed();
        if let Some(owner) = owner {
            self.event(
                owner,
                crate::telemetry::EventSeverity::Normal,
                "UpdatedWorkload",
                "UpdatedWorkload",
                note,
            );
        }
    }

    /// Writes the Workload's priority class and value ([`Self::priority_change`]), with Kueue's event on the job;
    /// resolves to whether it wrote. Boxed as [`Self::follow_queue_name`] is.
    fn write_priority<'a>(
        &'a mut self,
        wkey: &'a WorkloadKey,
        class: Option<api::PriorityClassRef>,
        priority: Option<i32>,
        owner: Option<ObjectReference>,
    ) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(self.write_priority_now(wkey, class, priority, owner))
    }

    async fn write_priority_now(
        &mut self,
        wkey: &WorkloadKey,
        class: Option<api::PriorityClassRef>,
        priority: Option<i32>,
        owner: Option<ObjectReference>,
    ) -> bool {
        let written = self
            .write_workload_main(wkey, |w| {
                w.spec.priority_class_ref = class.clone();
                w.spec.priority = priority;
                Ok(true)
            })
            .await;
        if written.is_some() {
            let note = format!("Updated workload priority class: {wkey}");
            self.workload_updated(wkey, owner, note);
        }
        written.is_some()
    }

    /// Writes the job's reclaimable pods into its Workload's status when they changed (each capped at its pod
    /// set's count, pod sets the Workload lacks left out, as Kueue's `LimitReclaimablePodsToPodSetSizes`); returns
    /// whether it wrote.
    async fn write_reclaimable(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        reclaimable: Vec<(String, i32)>,
    ) -> bool {
        let limited: Vec<api::ReclaimablePod> = reclaimable
            .into_iter()
            .filter_map(|(name, count)| {
                let ps = wl.spec.pod_sets.iter().find(|p| p.name == name)?;
                Some(api::ReclaimablePod {
                    name,
                    count: count.min(ps.count),
                })
            })
            .collect();
        let current = wl
            .status
            .as_ref()
            .map(|s| &s.reclaimable_pods[..])
            .unwrap_or_default();
        let same = limited.len() == current.len()
            && limited.iter().all(|r| {
                current
                    .iter()
                    .any(|c| c.name == r.name && c.count == r.count)
            });
        if same {
            return false;
        }
        self.write_workload_status(wkey, |w| {
            w.status
                .get_or_insert_with(Default::default)
                .reclaimable_pods = limited.clone();
            Ok(true)
        })
        .await
        .is_some()
    }

    /// Updates the spec of the job's Workload (all but `active`) to what the job builds now when the two no
    /// longer match as Kueue compares them; returns whether it wrote.
    async fn match_workload_to_job<I: Reconciled>(
        &mut self,
        job: &I::Job,
        wkey: &WorkloadKey,
        wl: &api::Workload,
    ) -> bool {
        let fresh = match I::compose(job, &self.cache.priorities) {
            Ok(Some(fresh)) => fresh,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(workload = %wkey, error = %e, "changed job's Workload not rebuilt");
                return false;
            }
        };
        if equivalent(&fresh, wl, true) || self.matched_specs.get(wkey) == Some(&fresh.spec) {
            return false;
        }
        let spec = fresh.spec;
        self.matched_specs.insert(wkey.clone(), spec.clone());
        let written = self
            .write_workload_main(wkey, |w| {
                let active = w.spec.active;
                w.spec = spec.clone();
                w.spec.active = active;
                Ok(true)
            })
            .await;
        if written.is_some()
            && let Some(owner) = I::event_owner(job)
        {
            self.event(
                owner,
                crate::telemetry::EventSeverity::Normal,
                "UpdatedWorkload",
                "UpdatedWorkload",
                format!("Updated not matching Workload for suspended job: {wkey}"),
            );
        }
        written.is_some()
    }

    /// Whether the job still matches its Workload, which holds quota (Kueue's `EquivalentToWorkload`): a job that
    /// cannot be built now is taken as matching.
    fn matches_reserved<I: Reconciled>(&self, job: &I::Job, wl: &api::Workload) -> bool {
        match I::compose(job, &self.cache.priorities) {
            Ok(Some(fresh)) => {
                let infos = self.running_infos(wl);
                equivalent_reserved(&fresh, wl, I::is_suspended(job), infos.as_deref())
            }
            Ok(None) => true,
            Err(e) => {
                tracing::warn!(workload = %workload_key(wl), error = %e, "changed job's Workload not compared");
                true
            }
        }
    }

    /// What each pod set of a Workload holding quota runs with (its flavors' node labels and tolerations, its
    /// admission checks' updates), as Kueue's `getPodSetsInfoFromStatus`; None when that cannot be told.
    fn running_infos(&self, wl: &api::Workload) -> Option<Vec<crate::jobs::PodSetInfo>> {
        self.infos_of_admission(wl)?.ok()
    }

    /// Kueue's handling of a job that no longer matches the Workload holding its quota: a running job is stopped
    /// (its pod templates restored as the Workload has them), then the Workload is deleted (finalizer first); the
    /// job's next reconcile, once the deletion is seen, builds a new one, which queues again.
    async fn replace_unmatched<I: Reconciled>(
        &mut self,
        key: &I::Key,
        job: &I::Job,
        wkey: &WorkloadKey,
        wl: &api::Workload,
    ) -> bool {
        // The kind's stop is a no-op for a job already stopped, and finishes one stopping in several writes.
        let step = I::stop(self, key, job, wl, &StopReason::no_matching_workload()).await;
        if step == StopStep::InProgress {
            return true;
        }
        self.release_workload_finalizer(wkey).await;
        let api: kube::Api<api::Workload> = self.apis.workloads(&wkey.namespace);
        if let Err(e) = self.writer.delete(&api, &wkey.name).await {
            tracing::error!(workload = %wkey, error = %e, "not matching workload not deleted");
            return true;
        }
        if let Some(owner) = I::event_owner(job) {
            self.event(
                owner,
                crate::telemetry::EventSeverity::Normal,
                "DeletedWorkload",
                "DeletedWorkload",
                format!("Deleted not matching Workload: {wkey}"),
            );
        }
        true
    }

    /// A job whose prebuilt Workload does not exist (yet): a running one is suspended (Kueue stops it, "missing
    /// workload"), and it waits, retried when a Workload appears; no Workload is built for it.
    async fn await_prebuilt<I: Reconciled>(&mut self, key: &I::Key, job: I::Job) -> bool {
        if matches!(I::finished(&job), Ok(Some(_))) {
            return I::finalize(self, key, Release::All).await;
        }
        let (wrote, _) = I::prepare_create(self, key, job).await;
        I::queues(&mut self.kinds).unbuilt.insert(key.clone());
        tracing::debug!(?key, "prebuilt workload not found");
        wrote
    }

    /// Kueue's handling of a job's prebuilt Workload: one another object controls is left alone; one nobody
    /// controls is adopted (controller owner reference and `kueue.x-k8s.io/job-uid` label); one whose pod sets no
    /// longer match the job while it holds no quota is finished `OutOfSync`.
    async fn adopt_prebuilt<I: Reconciled>(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        job: &I::Job,
    ) -> Prebuilt {
        if let Some(refs) = I::prebuilt_owners(self, job) {
            return match self.add_owner_references(wkey, wl, refs).await {
                None => Prebuilt::NotOurs,
                Some(true) => Prebuilt::Wrote,
                Some(false) => self.check_prebuilt_in_sync::<I>(wkey, wl, job).await,
            };
        }
        let Some(owner) = I::event_owner(job).filter(|o| o.uid.is_some()) else {
            return Prebuilt::NotOurs;
        };
        let uid = owner.uid.clone().unwrap_or_default();
        let controller = wl
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true));
        match controller {
            Some(c) if c.uid != uid => {
                tracing::warn!(workload = %wkey, controller = %c.name, "prebuilt workload controlled by another object");
                return Prebuilt::NotOurs;
            }
            Some(_) => {}
            None => {
                let reference = OwnerReference {
                    api_version: I::API_VERSION.to_string(),
                    kind: I::KIND.to_string(),
                    name: owner.name.clone().unwrap_or_default(),
                    uid: uid.clone(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                };
                let adopted = self
                    .write_workload_main(wkey, |w| {
                        let refs = w.metadata.owner_references.get_or_insert_with(Vec::new);
                        refs.retain(|r| r.uid != reference.uid);
                        refs.push(reference.clone());
                        w.metadata
                            .labels
                            .get_or_insert_with(Default::default)
                            .insert(labels::JOB_UID_LABEL.to_string(), reference.uid.clone());
                        Ok(true)
                    })
                    .await;
                return if adopted.is_some() {
                    Prebuilt::Wrote
                } else {
                    Prebuilt::NotOurs
                };
            }
        }
        self.check_prebuilt_in_sync::<I>(wkey, wl, job).await
    }

    /// Sets `refs` among the Workload's owner references as Kueue's `EnsureWorkloadOwnedByAllMembers` does: one per
    /// kind and name (a pod made again under its old name takes its reference's place), written, with event
    /// `OwnerReferencesAdded`, only when that adds references. Some(whether it wrote), None when the write failed.
    pub(super) async fn add_owner_references(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        refs: Vec<OwnerReference>,
    ) -> Option<bool> {
        let same = |a: &OwnerReference, b: &OwnerReference| a.kind == b.kind && a.name == b.name;
        let existing = wl.metadata.owner_references.as_deref().unwrap_or_default();
        let added = refs
            .iter()
            .filter(|r| !existing.iter().any(|o| same(o, r)))
            .count();
        if added == 0 {
            return Some(false);
        }
        let w = self
            .write_workload_main(wkey, |w| {
                let owners = w.metadata.owner_references.get_or_insert_with(Vec::new);
                let before = owners.len();
                for r in &refs {
                    match owners.iter_mut().find(|o| same(o, r)) {
                        Some(o) => *o = r.clone(),
                        None => owners.push(r.clone()),
                    }
                }
                Ok(owners.len() > before)
            })
            .await?;
        self.event(
            super::reference(&w),
            crate::telemetry::EventSeverity::Normal,
            "OwnerReferencesAdded",
            "OwnerReferencesAdded",
            format!("Added {added} owner reference(s)"),
        );
        Some(true)
    }

    /// A job's own prebuilt Workload that no longer fits the job is finished `OutOfSync`.
    async fn check_prebuilt_in_sync<I: Reconciled>(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        job: &I::Job,
    ) -> Prebuilt {
        // A running job is not compared (Kueue compares it against its admission's templates); a suspended one is
        // compared with the Workload's pod sets, tolerations aside once it holds quota.
        let admitted = has_admission(wl);
        if admitted && !I::is_suspended(job) {
            return Prebuilt::Ours;
        }
        let in_sync = match I::fits_prebuilt(self, job, wl, !admitted) {
            Ok(fits) => fits,
            Err(e) => {
                tracing::warn!(workload = %wkey, error = %e, "job's pod sets not built");
                return Prebuilt::NotOurs;
            }
        };
        if in_sync {
            return Prebuilt::Ours;
        }
        self.finish_workload_as(
            wkey,
            wl,
            "OutOfSync",
            "The prebuilt workload is out of sync with its user job",
        )
        .await;
        Prebuilt::Wrote
    }

    /// A job without a Workload: one that finished is released; otherwise its kind prepares it and its Workload
    /// is created (or recorded as not buildable, retried when a priority class changes).
    async fn create_workload<I: Reconciled>(&mut self, key: &I::Key, job: I::Job) -> bool {
        if matches!(I::finished(&job), Ok(Some(_))) {
            return I::finalize(self, key, Release::All).await;
        }
        let (wrote, source) = I::prepare_create(self, key, job).await;
        let Some(source) = source else {
            return wrote;
        };
        let built = I::compose(&source, &self.cache.priorities).and_then(|wl| {
            let Some(mut wl) = wl else {
                return Ok(None);
            };
            // Kueue's labelKeysToCopy, once, at creation.
            let copied = I::copied_labels(&source, &self.config.label_keys_to_copy)?;
            crate::jobs::add_copied_labels(&mut wl, copied);
            Ok(Some(wl))
        });
        match built {
            Ok(Some(wl)) => {
                // Created with the round's other new Workloads, at the end of the round.
                self.creates.push((I::event_owner(&source), wl));
                true
            }
            Ok(None) => wrote,
            Err(e) => {
                I::queues(&mut self.kinds).unbuilt.insert(key.clone());
                self.workload_not_built(I::event_owner(&source), I::NOT_BUILT_REASON, &e);
                wrote
            }
        }
    }
}

/// What a job's prebuilt Workload is to it.
enum Prebuilt {
    /// Adopted and in sync: reconciled on as the job's Workload.
    Ours,
    /// Written to (adopted, or finished out of sync): the Workload's event reconciles the job again.
    Wrote,
    /// Controlled by another object (or not readable now): the job is left alone.
    NotOurs,
}

/// Kueue's `EquivalentToWorkload` for a prebuilt Workload: the Workload the job builds now (none yet: in sync)
/// against it.
pub(super) fn fits_as_built<I: JobIntegration>(
    task: &EngineTask,
    job: &I::Job,
    wl: &api::Workload,
    tolerations: bool,
) -> Result<bool, crate::jobs::JobError> {
    Ok(match I::compose(job, &task.cache.priorities)? {
        Some(fresh) => equivalent(&fresh, wl, tolerations),
        None => true,
    })
}

/// Kueue's `EquivalentToWorkload` for a Workload that holds quota: the job (built now, `fresh`) against the pod sets
/// it runs with (`infos`, what the admission adds, merged in; a partially admissible Workload's pod sets at their
/// admitted counts), or, while the job is suspended, against the Workload as built; without `infos`, against the
/// Workload as built. Tolerations are not compared once admitted.
pub(super) fn equivalent_reserved(
    fresh: &api::Workload,
    wl: &api::Workload,
    suspended: bool,
    infos: Option<&[crate::jobs::PodSetInfo]>,
) -> bool {
    let tolerations = !is_admitted(wl);
    match running_pod_sets(wl, infos) {
        Some(running) => {
            equivalent(fresh, &running, tolerations)
                || (suspended && equivalent(fresh, wl, tolerations))
        }
        None => equivalent(fresh, wl, tolerations),
    }
}

/// The Workload with each pod set as it runs (Kueue's `expectedRunningPodSets`); None when a pod set has no info or
/// its info does not merge.
fn running_pod_sets(
    wl: &api::Workload,
    infos: Option<&[crate::jobs::PodSetInfo]>,
) -> Option<api::Workload> {
    let infos = infos?;
    let partial = wl.spec.pod_sets.iter().any(|ps| ps.min_count.is_some());
    let mut running = wl.clone();
    for ps in running.spec.pod_sets.iter_mut() {
        let info = infos.iter().find(|i| i.name == ps.name)?;
        info.merge_into(&mut ps.template).ok()?;
        if partial && ps.min_count.is_some() {
            ps.count = info.count;
        }
    }
    Some(running)
}

/// Whether the Workload the job builds now matches the existing one as Kueue's `EquivalentToWorkload` compares
/// them: the maximum execution time, and per pod set in order its count, minimum count, tolerations (when
/// `tolerations`; Kueue ignores them for an admitted Workload), init containers and containers.
pub(super) fn equivalent(
    fresh: &api::Workload,
    existing: &api::Workload,
    tolerations: bool,
) -> bool {
    let spec_of = |ps: &api::PodSet| ps.template.spec.clone().unwrap_or_default();
    fresh.spec.maximum_execution_time_seconds == existing.spec.maximum_execution_time_seconds
        && fresh.spec.pod_sets.len() == existing.spec.pod_sets.len()
        && fresh
            .spec
            .pod_sets
            .iter()
            .zip(&existing.spec.pod_sets)
            .all(|(a, b)| {
                let (sa, sb) = (spec_of(a), spec_of(b));
                a.count == b.count
                    && a.min_count == b.min_count
                    && (!tolerations
                        || sa.tolerations.unwrap_or_default() == sb.tolerations.unwrap_or_default())
                    && sa.init_containers.unwrap_or_default()
                        == sb.init_containers.unwrap_or_default()
                    && sa.containers == sb.containers
            })
}
