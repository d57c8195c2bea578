//! The kinds defined by other projects' CRDs that wait with a suspend field (JobSet, Kubeflow PyTorchJob, KubeRay
//! RayJob, RayCluster and RayService, Kubeflow Trainer TrainJob), as one
//! [`Reconciled`] implementation: suspended while queued, unsuspended with their admission, and stopped in one
//! write (suspended with their pod templates restored), as Kueue's generic job reconciler stops kinds without a
//! custom stop. A kind is its [`CrdKind`] implementation: where it is cached and whether it is enabled.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use sluice_sdk::jobset::JobSet;
use sluice_sdk::kubeflow::PyTorchJob;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::ray::{RayCluster, RayJob, RayService};
use sluice_sdk::trainer::TrainJob;

use super::jobs::FAILED_TO_START;
use super::kinds::{KindQueues, Kinds};
use super::reconciler::{Reconciled, Release, StopReason, StopStep};
use super::writes::Cached;
use super::{Cache, EngineTask};
use crate::controller::config::OperatorConfig;
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::jobs::{
    JobSetJob, PodSetInfo, PyTorchJobJob, RayClusterJob, RayJobJob, RayServiceJob, SuspendableJob,
    TrainJobJob,
};
use crate::telemetry::EventSeverity;
use sluice_sdk::kueue::integrations;

/// A kind from another project's CRD, with a suspend field, keyed by (namespace, name).
pub(super) trait CrdKind: SuspendableJob<Job: Cached + Clone + Send + Sync> {
    /// Whether the Configuration enables it.
    fn enabled(config: &OperatorConfig) -> bool;
    /// Its dirty and unbuilt sets.
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)>;
    /// Its cached objects.
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), Self::Job>;
    /// Whether Kueue leaves this object to someone else (beside deletion, a missing queue name and a controller
    /// of a kind an enabled integration manages).
    fn not_kueues(_config: &OperatorConfig, _job: &Self::Job) -> bool {
        false
    }
    /// Whether a stop takes two steps, as Kueue's custom stop of a TrainJob: suspended first, its admission
    /// cleared only once nothing of it is active (the kind's own webhook refuses the change before).
    const STOPS_IN_TWO_STEPS: bool = false;
    /// Whether the admission is still written into the object (for a kind that stops in two steps).
    fn holds_admission(_job: &Self::Job) -> bool {
        false
    }
}

impl CrdKind for JobSetJob {
    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::JOBSET)
    }
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)> {
        &mut kinds.jobsets
    }
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), JobSet> {
        &cache.jobsets
    }
}

impl CrdKind for PyTorchJobJob {
    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::PYTORCHJOB)
    }
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)> {
        &mut kinds.pytorchjobs
    }
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), PyTorchJob> {
        &cache.pytorchjobs
    }
}

impl CrdKind for RayJobJob {
    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::RAYJOB)
    }
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)> {
        &mut kinds.rayjobs
    }
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), RayJob> {
        &cache.rayjobs
    }
    /// A RayJob on an existing cluster (`spec.clusterSelector`) holds no quota of its own, as in Kueue.
    fn not_kueues(_: &OperatorConfig, job: &RayJob) -> bool {
        job.uses_cluster_selector()
    }
}

impl CrdKind for RayClusterJob {
    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::RAYCLUSTER)
    }
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)> {
        &mut kinds.rayclusters
    }
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), RayCluster> {
        &cache.rayclusters
    }
}

impl CrdKind for RayServiceJob {
    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::RAYSERVICE)
    }
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)> {
        &mut kinds.rayservices
    }
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), RayService> {
        &cache.rayservices
    }
}

impl CrdKind for TrainJobJob {
    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::TRAINJOB)
    }
    fn queues(kinds: &mut Kinds) -> &mut KindQueues<(String, String)> {
        &mut kinds.trainjobs
    }
    fn cache(cache: &Cache) -> &BTreeMap<(String, String), TrainJob> {
        &cache.trainjobs
    }
    const STOPS_IN_TWO_STEPS: bool = true;
    fn holds_admission(job: &TrainJob) -> bool {
        TrainJobJob::holds_admission(job)
    }
}

impl<T: CrdKind> Reconciled for T {
    type Key = (String, String);
    const NOT_BUILT_REASON: &'static str = "CreatedWorkload";
    const STOPS_ON_WORKLOAD_DELETION: bool = false;
    const UPDATES_UNMATCHED_WORKLOAD: bool = true;

    fn enabled(config: &OperatorConfig) -> bool {
        <T as CrdKind>::enabled(config)
    }

    fn queues(kinds: &mut Kinds) -> &mut KindQueues<Self::Key> {
        <T as CrdKind>::queues(kinds)
    }

    fn load(task: &EngineTask, key: &Self::Key) -> Option<T::Job> {
        T::cache(&task.cache).get(key).cloned()
    }

    fn skip(task: &EngineTask, job: &T::Job) -> bool {
        job.meta().deletion_timestamp.is_some()
            || (T::queue_name(job).is_none() && !task.config.manage_jobs_without_queue_name)
            || T::not_kueues(&task.config, job)
            || super::jobs::controlled_by_managed_kind(&task.config, job.meta())
    }

    fn namespace(key: &Self::Key) -> String {
        key.0.clone()
    }

    fn owner_key(wl: &api::Workload) -> Option<Self::Key> {
        controller_owner(wl, T::API_VERSION, T::KIND)
    }

    fn all_keys(task: &EngineTask) -> Vec<Self::Key> {
        T::cache(&task.cache).keys().cloned().collect()
    }

    /// Whether the job exists: a suspended one still has its templates to restore.
    fn needs_stopping(task: &EngineTask, key: &Self::Key) -> bool {
        T::cache(&task.cache).contains_key(key)
    }

    /// A job gone from the cache counts as holding pods: its eviction completes from its Workload's reconcile.
    fn holds_pods(task: &EngineTask, key: &Self::Key) -> bool {
        T::cache(&task.cache).get(key).is_none_or(T::is_active)
    }

    fn event_owner(job: &T::Job) -> Option<ObjectReference> {
        Some(job.object_ref(&()))
    }

    /// A running job is suspended first, then its Workload is built from it as loaded.
    async fn prepare_create(
        task: &mut EngineTask,
        key: &Self::Key,
        job: T::Job,
    ) -> (bool, Option<T::Job>) {
        let mut wrote = false;
        if !T::is_suspended(&job) {
            task.write_cached::<T::Job>(key, Endpoint::Main, |j| {
                T::suspend(j);
                Ok(true)
            })
            .await;
            wrote = true;
        }
        (wrote, Some(job))
    }

    async fn start(task: &mut EngineTask, key: &Self::Key, wl: &api::Workload) -> bool {
        let Some((cluster_queue, infos)) = task.admitted_infos(wl, T::KIND).await else {
            return false;
        };
        // An admission the job cannot take (pod sets that do not match, a node selector it contradicts) will not
        // take later either: as Kueue, the Workload is finished (FailedToStart) and releases its quota.
        if let Some(mut trial) = T::cache(&task.cache).get(key).cloned()
            && let Err(e) = T::run_with(&mut trial, &infos)
        {
            let message = e.to_string();
            tracing::warn!(workload = %workload_key(wl), error = %message, "cannot start {}", T::KIND);
            task.finish_workload_as(&workload_key(wl), wl, FAILED_TO_START, &message)
                .await;
            return true;
        }
        let started = task
            .write_cached::<T::Job>(key, Endpoint::Main, |j| {
                T::run_with(j, &infos).map_err(|e| e.to_string())?;
                Ok(true)
            })
            .await;
        if let Some(job) = started {
            task.started_event(job.object_ref(&()), &cluster_queue);
        }
        true
    }

    /// Suspended with every pod template restored, in one write; one already suspended is left as it is
    /// (Kueue's generic stop).
    async fn stop(
        task: &mut EngineTask,
        key: &Self::Key,
        job: &T::Job,
        wl: &api::Workload,
        why: &StopReason,
    ) -> StopStep {
        if T::STOPS_IN_TWO_STEPS {
            return stop_in_two_steps::<T>(task, key, job, why).await;
        }
        if T::is_suspended(job) {
            return StopStep::Stopped { wrote: false };
        }
        let originals: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
            .collect();
        let written = task
            .write_cached::<T::Job>(key, Endpoint::Main, |j| {
                T::suspend(j);
                T::restore(j, &originals);
                Ok(true)
            })
            .await;
        if let Some(job) = written {
            task.event(
                job.object_ref(&()),
                EventSeverity::Normal,
                "Stopped",
                "Stop",
                why.message.clone(),
            );
        }
        // Its pods show up as gone (nothing active) in a later event of the job.
        StopStep::Stopped { wrote: true }
    }

    /// These kinds carry no finalizer of the operator's.
    async fn finalize(_: &mut EngineTask, _: &Self::Key, _: Release) -> bool {
        false
    }
}

/// Kueue's custom stop of a TrainJob: suspend it; once none of its Jobs is active, clear its admission (the
/// restore). While Jobs are active the stop waits for the kind's next status change.
async fn stop_in_two_steps<T: CrdKind>(
    task: &mut EngineTask,
    key: &(String, String),
    job: &T::Job,
    why: &StopReason,
) -> StopStep {
    let mut current = job.clone();
    let mut wrote = false;
    if !T::is_suspended(job) {
        let Some(suspended) = task
            .write_cached::<T::Job>(key, Endpoint::Main, |j| {
                T::suspend(j);
                Ok(true)
            })
            .await
        else {
            // The failed write is logged; nothing may be counted as stopped.
            return StopStep::InProgress;
        };
        task.event(
            suspended.object_ref(&()),
            EventSeverity::Normal,
            "Stopped",
            "Stop",
            why.message.clone(),
        );
        current = suspended;
        wrote = true;
    }
    if T::is_active(&current) || !T::holds_admission(&current) {
        return StopStep::Stopped { wrote };
    }
    let restored = task
        .write_cached::<T::Job>(key, Endpoint::Main, |j| {
            T::restore(j, &[]);
            Ok(true)
        })
        .await;
    StopStep::Stopped {
        wrote: wrote || restored.is_some(),
    }
}

/// `Cached` for a CRD kind's object type, stored in `cache.$field`: a failed write of it (a start, a suspend, a
/// restore) is announced as Kueue announces a failed start.
macro_rules! cached_in {
    ($ty:ty, $field:ident) => {
        impl Cached for $ty {
            const WRITE_FAILED_EVENT: Option<&'static str> = Some("FailedToStart");
            fn cached<'c>(cache: &'c Cache, key: &(String, String)) -> Option<&'c Self> {
                cache.$field.get(key)
            }
            fn put(cache: &mut Cache, key: (String, String), obj: Self) {
                cache.$field.insert(key, obj);
            }
            fn forget(cache: &mut Cache, key: &(String, String)) {
                cache.$field.remove(key);
            }
        }
    };
}

cached_in!(JobSet, jobsets);
cached_in!(PyTorchJob, pytorchjobs);
cached_in!(RayJob, rayjobs);
cached_in!(RayCluster, rayclusters);
cached_in!(RayService, rayservices);

/// What the engine task does with a watch event of a [`CrdKind`]: caches the object and marks it dirty, or on
/// deletion forgets it and returns its Workload's (namespace, name), whose owner is then gone.
pub(super) fn absorb_change<T: CrdKind>(
    cache: &mut BTreeMap<(String, String), T::Job>,
    kinds: &mut Kinds,
    obj: T::Job,
    deleted: bool,
) -> Option<(String, String)> {
    let key = object_key(&obj);
    if deleted {
        cache.remove(&key);
        return T::workload_name(&obj).map(|name| (key.0, name));
    }
    if let Some(cached) = cache.get(&key)
        && is_stale(cached, &obj)
    {
        return None;
    }
    cache.insert(key.clone(), obj);
    <T as CrdKind>::queues(kinds).dirty.insert(key);
    None
}
