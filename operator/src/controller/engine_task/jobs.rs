//! The batch Job as a [`Reconciled`] kind (suspended while queued, unsuspended on admission, stopped in three
//! writes), what every kind's start and finish share, and the Workload of a deleted Job.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Api, Resource, ResourceExt};
use sluice_sdk::kueue::integrations;
use sluice_sdk::kueue::labels::{self};
use sluice_sdk::kueue::v1beta2 as api;

use super::kinds::{KindQueues, Kinds};
use super::reconciler::{Reconciled, Release, StopKind, StopReason, StopStep};
use super::writes::in_flight;
use super::{EngineTask, now_ms, reference};
use crate::controller::config::OperatorConfig;
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::engine::{Event, WorkloadKey};
use crate::jobs::{
    BatchJob, JobIntegration, PodSetInfo, SuspendableJob, merge_check_updates, pod_set_infos,
};
use crate::status;
use crate::telemetry::EventSeverity;

/// Why an admitted Workload's pod set infos could not be built.
pub(super) enum InfosError {
    /// The admission names a flavor or pod set that cannot be applied.
    Admission(String),
    /// The admission checks' pod set updates conflict (Kueue finishes the Workload `FailedToStart`).
    Checks(String),
}

/// A Job to unsuspend with its admission, at the end of the round of job reconciles.
pub(super) struct JobStart {
    key: (String, String),
    cluster_queue: String,
    infos: Vec<PodSetInfo>,
}

/// Kueue's Finished reason when a job cannot be started and retrying cannot help.
pub(super) const FAILED_TO_START: &str = "FailedToStart";

/// Whether the object's controller is a kind an enabled integration manages (a JobSet's Jobs, a TrainJob's JobSet,
/// a RayJob's cluster and submitter, an external framework's children): Kueue leaves such an object to its owner's
/// integration, whose Workload holds the quota.
pub(super) fn controlled_by_managed_kind(
    config: &OperatorConfig,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    meta.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && config.integrations.manages_owner(&o.api_version, &o.kind)
    })
}

/// Batch Jobs wait suspended, start unsuspended with their admission, and stop in three writes.
impl Reconciled for BatchJob {
    type Key = (String, String);
    const NOT_BUILT_REASON: &'static str = "CreatedWorkload";
    const STOPS_ON_WORKLOAD_DELETION: bool = false;
    const UPDATES_UNMATCHED_WORKLOAD: bool = true;

    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::BATCH_JOB)
    }

    fn queues(kinds: &mut Kinds) -> &mut KindQueues<Self::Key> {
        &mut kinds.jobs
    }

    fn load(task: &EngineTask, key: &Self::Key) -> Option<Job> {
        task.cache.jobs.get(key).cloned()
    }

    fn skip(task: &EngineTask, job: &Job) -> bool {
        // With manageJobsWithoutQueueName a Job without the label is managed with no queue, as in Kueue: its
        // Workload waits ("LocalQueue  doesn't exist") until the label is set. The webhook has already given it
        // the namespace's `default` LocalQueue when there is one (LocalQueueDefaulting).
        job.meta().deletion_timestamp.is_some()
            || (Self::queue_name(job).is_none() && !task.config.manage_jobs_without_queue_name)
            || controlled_by_managed_kind(&task.config, &job.metadata)
    }

    fn namespace(key: &Self::Key) -> String {
        key.0.clone()
    }

    fn owner_key(wl: &api::Workload) -> Option<Self::Key> {
        owner_job(wl)
    }

    fn all_keys(task: &EngineTask) -> Vec<Self::Key> {
        task.cache.jobs.keys().cloned().collect()
    }

    /// Whether the Job exists, not whether it runs: a suspended Job still has its template to restore.
    fn needs_stopping(task: &EngineTask, key: &Self::Key) -> bool {
        task.cache.jobs.contains_key(key)
    }

    /// A Job gone from the cache counts as holding pods: its eviction completes from its Workload's reconcile.
    fn holds_pods(task: &EngineTask, key: &Self::Key) -> bool {
        task.cache.jobs.get(key).is_none_or(Self::is_active)
    }

    fn event_owner(job: &Job) -> Option<ObjectReference> {
        Some(reference(job))
    }

    /// A running Job is suspended first, then its Workload is built from the Job as loaded.
    async fn prepare_create(
        task: &mut EngineTask,
        key: &Self::Key,
        job: Job,
    ) -> (bool, Option<Job>) {
        let mut wrote = false;
        if !Self::is_suspended(&job) {
            task.suspend_job(key, false).await;
            wrote = true;
        }
        (wrote, Some(job))
    }

    async fn start(task: &mut EngineTask, key: &Self::Key, wl: &api::Workload) -> bool {
        let Some((cluster_queue, infos)) = task.admitted_infos(wl, "job").await else {
            return false;
        };
        // Written with the round's other starts, at its end.
        task.job_starts.push(JobStart {
            key: key.clone(),
            cluster_queue,
            infos,
        });
        true
    }

    /// Kueue's stop after an eviction, in three writes: the API server refuses a template change of a Job that
    /// has started, so first suspend (marked stopping), then clear status.startTime, then restore the template
    /// and drop the mark. Without an admission the Job is only suspended.
    async fn stop(
        task: &mut EngineTask,
        key: &Self::Key,
        job: &Job,
        wl: &api::Workload,
        why: &StopReason,
    ) -> StopStep {
        // Evicted or replaced, a Job is restored as its Workload has it; otherwise only suspended.
        if !matches!(why.kind, StopKind::Evicted | StopKind::NoMatchingWorkload) {
            task.suspend_job(key, false).await;
            return StopStep::InProgress;
        }
        if !Self::is_suspended(job) {
            task.suspend_job(key, true).await;
            return StopStep::InProgress;
        }
        if !job.annotations().contains_key(labels::STOPPING_ANNOTATION) {
            return StopStep::Stopped { wrote: false };
        }
        if job.status.as_ref().is_some_and(|s| s.start_time.is_some()) {
            task.write_job(key, Endpoint::Status, |j| {
                if let Some(s) = j.status.as_mut() {
                    s.start_time = None;
                }
                Ok(true)
            })
            .await;
            return StopStep::InProgress;
        }
        // The API server lets a suspended Job's template change only once its pods are gone (Kubernetes 1.36's
        // MutableSchedulingDirectivesForSuspendedJobs: no active pods); they go in a later Job event.
        if Self::is_active(job) {
            return StopStep::InProgress;
        }
        let originals = originals(wl);
        let restored = task
            .write_job(key, Endpoint::Main, |j| {
                Self::restore(j, &originals);
                if let Some(a) = j.metadata.annotations.as_mut() {
                    a.remove(labels::STOPPING_ANNOTATION);
                }
                Ok(true)
            })
            .await;
        if restored.is_none() {
            // Refused (logged): tried again at the Job's next event, the stop not counted as done.
            return StopStep::InProgress;
        }
        StopStep::Stopped { wrote: true }
    }

    /// A Job carries no finalizer of the operator's.
    async fn finalize(_: &mut EngineTask, _: &Self::Key, _: Release) -> bool {
        false
    }
}

impl EngineTask {
    /// Suspends the Job, marked `kueue.x-k8s.io/stopping` when an eviction stops it.
    async fn suspend_job(&mut self, key: &(String, String), stopping: bool) {
        self.write_job(key, Endpoint::Main, |j| {
            BatchJob::suspend(j);
            if stopping {
                j.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(labels::STOPPING_ANNOTATION.into(), "true".into());
            }
            Ok(true)
        })
        .await;
    }

    /// The admitting ClusterQueue and what each pod set of an admitted Workload must run with
    /// (node selector, tolerations, labels, count, and its admission checks' podSetUpdates), for the job kinds'
    /// starters; `None` (logged with `what`) when the Workload is not admitted or its admission cannot be applied.
    /// A podSetUpdate contradicting the admission finishes the Workload (FailedToStart), as Kueue does.
    pub(super) async fn admitted_infos(
        &mut self,
        wl: &api::Workload,
        what: &str,
    ) -> Option<(String, Vec<PodSetInfo>)> {
        let cluster_queue = wl
            .status
            .as_ref()?
            .admission
            .as_ref()?
            .cluster_queue
            .clone();
        match self.infos_of_admission(wl)? {
            Ok(infos) => Some((cluster_queue, infos)),
            Err(InfosError::Admission(e)) => {
                tracing::warn!(workload = %workload_key(wl), error = %e, "cannot start {what}");
                None
            }
            Err(InfosError::Checks(message)) => {
                tracing::warn!(workload = %workload_key(wl), error = %message, "cannot start {what}");
                self.finish_workload_as(&workload_key(wl), wl, FAILED_TO_START, &message)
                    .await;
                None
            }
        }
    }

    /// The pod set infos an admitted Workload's job runs with (Kueue's `getPodSetsInfoFromStatus`): the admission's
    /// flavors, with its admission checks' updates merged in. None when it holds no admission.
    pub(super) fn infos_of_admission(
        &self,
        wl: &api::Workload,
    ) -> Option<Result<Vec<PodSetInfo>, InfosError>> {
        let st = wl.status.as_ref()?;
        let admission = st.admission.as_ref()?;
        let flavors = &self.cache.flavors;
        let infos = pod_set_infos(
            admission,
            &wl.spec.pod_sets,
            &wl.spec.queue_name,
            &wl.name_any(),
            |n| flavors.get(n),
        )
        .map_err(InfosError::Admission)
        .and_then(|mut infos| {
            merge_check_updates(&mut infos, &st.admission_checks).map_err(InfosError::Checks)?;
            Ok(infos)
        });
        Some(infos)
    }

    /// Starts the Jobs this round's reconciles admitted, with up to `writes_in_flight` (configuration) writes in
    /// flight at once: a cycle's admissions start together instead of one Job after another.
    pub(super) async fn start_jobs(&mut self) {
        let starts = std::mem::take(&mut self.job_starts);
        if starts.is_empty() {
            return;
        }
        let (writer, client, cache) = (&self.writer, &self.apis.client, &self.cache);
        let mut writes = Vec::with_capacity(starts.len());
        for start in starts {
            let cached = cache.jobs.get(&start.key).cloned();
            let api: Api<Job> = Api::namespaced(client.clone(), &start.key.0);
            writes.push(async move {
                let result = match cached {
                    Some(c) => {
                        let run = |j: &mut Job| {
                            BatchJob::run_with(j, &start.infos).map_err(|e| e.to_string())?;
                            Ok(true)
                        };
                        Some(writer.update(&api, c, Endpoint::Main, run).await)
                    }
                    None => None,
                };
                (start, result)
            });
        }
        for (start, result) in in_flight(writes, self.config.writes_in_flight).await {
            let started =
                result.and_then(|r| self.settle_cached::<Job>(&start.key, Endpoint::Main, r));
            if let Some(j) = started {
                self.started_event(reference(&j), &start.cluster_queue);
            }
        }
    }

    /// Announces on a started job (or pod) which ClusterQueue admitted it.
    pub(super) fn started_event(&self, on: ObjectReference, cluster_queue: &str) {
        self.event(
            on,
            EventSeverity::Normal,
            "Started",
            "Start",
            format!("Admitted by clusterQueue {cluster_queue}"),
        );
    }

    /// Marks the Workload Finished with `message` and releases its quota.
    pub(super) async fn finish_workload_with(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        success: bool,
        message: &str,
    ) -> bool {
        let reason = if success { "Succeeded" } else { "Failed" };
        self.finish_workload_as(wkey, wl, reason, message).await
    }

    /// Marks the Workload Finished with `reason` and `message` and releases its quota.
    pub(super) async fn finish_workload_as(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        reason: &str,
        message: &str,
    ) -> bool {
        let now = now_ms();
        let written = self
            .write_workload_status(wkey, |w| {
                status::finish_with_reason(w, reason, message, now);
                Ok(true)
            })
            .await;
        if written.is_some() {
            let cq = admitted_cluster_queue(wl);
            self.metrics
                .finished(&cq, &Self::priority_class(wl), self.role);
            self.engine_apply(Event::FinishWorkload(wkey.clone()));
            self.ready_deadlines.remove(wkey);
            self.queues_changed();
        }
        true
    }

    /// A Job is gone. As Kueue v0.19 (FinishOrphanedWorkloads, on by default): its Workload is finished with
    /// reason OwnerNotFound, which releases its quota at once, and loses its finalizer; garbage collection then
    /// deletes it through its owner reference.
    pub(super) async fn job_deleted(&mut self, job: &Job) {
        let ns = job.namespace().unwrap_or_default();
        let Some(name) = BatchJob::workload_name(job) else {
            return;
        };
        self.owner_gone(ns, name).await;
    }

    /// The owner of Workload `namespace/name` is gone: the Workload is finished (OwnerNotFound) unless it is
    /// already, and loses its finalizer.
    pub(super) async fn owner_gone(&mut self, ns: String, name: String) {
        let wkey = WorkloadKey::new(ns, name);
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
                self.queues_changed();
            }
        }
        self.release_workload_finalizer(&wkey).await;
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
