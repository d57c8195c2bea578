//! The JobSet as a [`Reconciled`] kind: suspended while queued, unsuspended with its admission, and stopped in one
//! write (suspended with its pod templates restored), as Kueue's generic job reconciler stops kinds without a
//! custom stop.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use sluice_sdk::jobset::{self, JobSet};
use sluice_sdk::kueue::v1beta2 as api;

use super::kinds::{KindQueues, Kinds};
use super::reconciler::{PodsReadyAt, Reconciled, Release, StopReason, StopStep};
use super::writes::Cached;
use super::{Cache, EngineTask, reference};
use crate::controller::config::OperatorConfig;
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::jobs::{JobIntegration, JobSetJob, PodSetInfo, SuspendableJob};
use crate::telemetry::EventSeverity;

impl Reconciled for JobSetJob {
    type Key = (String, String);
    const NOT_BUILT_REASON: &'static str = "CreatedWorkload";
    const PODS_READY: PodsReadyAt = PodsReadyAt::EveryReconcile;
    const STOPS_ON_WORKLOAD_DELETION: bool = false;

    fn enabled(config: &OperatorConfig) -> bool {
        config.jobsets
    }

    fn queues(kinds: &mut Kinds) -> &mut KindQueues<Self::Key> {
        &mut kinds.jobsets
    }

    fn load(task: &EngineTask, key: &Self::Key) -> Option<JobSet> {
        task.cache.jobsets.get(key).cloned()
    }

    fn skip(task: &EngineTask, js: &JobSet) -> bool {
        js.meta().deletion_timestamp.is_some()
            || (Self::queue_name(js).is_none() && !task.config.manage_jobs_without_queue_name)
    }

    fn namespace(key: &Self::Key) -> String {
        key.0.clone()
    }

    fn owner_key(wl: &api::Workload) -> Option<Self::Key> {
        controller_owner(wl, jobset::API_VERSION, jobset::KIND)
    }

    fn all_keys(task: &EngineTask) -> Vec<Self::Key> {
        task.cache.jobsets.keys().cloned().collect()
    }

    /// Whether the JobSet exists: a suspended one still has its templates to restore.
    fn needs_stopping(task: &EngineTask, key: &Self::Key) -> bool {
        task.cache.jobsets.contains_key(key)
    }

    /// A JobSet gone from the cache counts as holding pods: its eviction completes from its Workload's reconcile.
    fn holds_pods(task: &EngineTask, key: &Self::Key) -> bool {
        task.cache.jobsets.get(key).is_none_or(Self::is_active)
    }

    fn event_owner(js: &JobSet) -> Option<ObjectReference> {
        Some(reference(js))
    }

    /// A running JobSet is suspended first, then its Workload is built from it as loaded.
    async fn prepare_create(
        task: &mut EngineTask,
        key: &Self::Key,
        js: JobSet,
    ) -> (bool, Option<JobSet>) {
        let mut wrote = false;
        if !Self::is_suspended(&js) {
            task.write_jobset(key, |j| {
                Self::suspend(j);
                Ok(true)
            })
            .await;
            wrote = true;
        }
        (wrote, Some(js))
    }

    async fn start(task: &mut EngineTask, key: &Self::Key, wl: &api::Workload) -> bool {
        let Some((cluster_queue, infos)) = task.admitted_infos(wl, "jobset").await else {
            return false;
        };
        let started = task
            .write_jobset(key, |j| {
                Self::run_with(j, &infos).map_err(|e| e.to_string())?;
                Ok(true)
            })
            .await;
        if let Some(js) = started {
            task.started_event(reference(&js), &cluster_queue);
        }
        true
    }

    /// Suspended with every replicated job's pod template restored, in one write; one already suspended is left
    /// as it is (Kueue's generic stop).
    async fn stop(
        task: &mut EngineTask,
        key: &Self::Key,
        js: &JobSet,
        wl: &api::Workload,
        why: &StopReason,
    ) -> StopStep {
        if Self::is_suspended(js) {
            return StopStep::Stopped { wrote: false };
        }
        let originals: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
            .collect();
        let written = task
            .write_jobset(key, |j| {
                Self::suspend(j);
                Self::restore(j, &originals);
                Ok(true)
            })
            .await;
        if let Some(js) = written {
            task.event(
                reference(&js),
                EventSeverity::Normal,
                "Stopped",
                "Stop",
                why.message.clone(),
            );
        }
        // Its Jobs' pods show up as no replicated job active in a later JobSet event.
        StopStep::Stopped { wrote: true }
    }

    /// A JobSet carries no finalizer of the operator's.
    async fn finalize(_: &mut EngineTask, _: &Self::Key, _: Release) -> bool {
        false
    }
}

/// A failed JobSet write (a start, a suspend, a restore) is announced as Kueue announces a failed start.
impl Cached for JobSet {
    const WRITE_FAILED_EVENT: Option<&'static str> = Some("FailedToStart");
    fn cached<'c>(cache: &'c Cache, key: &(String, String)) -> Option<&'c Self> {
        cache.jobsets.get(key)
    }
    fn put(cache: &mut Cache, key: (String, String), obj: Self) {
        cache.jobsets.insert(key, obj);
    }
    fn forget(cache: &mut Cache, key: &(String, String)) {
        cache.jobsets.remove(key);
    }
}

impl EngineTask {
    /// Writes a JobSet (never its status) and caches what the API server returned.
    async fn write_jobset(
        &mut self,
        key: &(String, String),
        mutate: impl FnMut(&mut JobSet) -> Result<bool, String>,
    ) -> Option<JobSet> {
        self.write_cached(key, Endpoint::Main, mutate).await
    }

    /// A JobSet is gone: its Workload is finished as its owner's loss requires (see [`Self::owner_gone`]).
    pub(super) async fn jobset_deleted(&mut self, js: &JobSet) {
        let Some(name) = JobSetJob::workload_name(js) else {
            return;
        };
        self.owner_gone(object_key(js).0, name).await;
    }
}
