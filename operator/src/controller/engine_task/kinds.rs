//! The job kinds the engine task reconciles, and the only place that lists them: each function below has one
//! line per kind, in the order the kinds are reconciled (batch Jobs, JobSets, PyTorchJobs, RayJobs, RayClusters, RayServices,
//! TrainJobs, then plain Pods and pod groups).

use std::collections::BTreeSet;

use sluice_sdk::kueue::v1beta2 as api;

use super::EngineTask;
use super::reconciler::Reconciled;
use crate::jobs::{
    BatchJob, JobSetJob, PodGroupKey, PodGroups, PyTorchJobJob, RayClusterJob, RayJobJob,
    RayServiceJob, TrainJobJob,
};

/// The jobs of one kind waiting to be reconciled.
pub(super) struct KindQueues<K> {
    /// Changed since their last reconcile.
    pub dirty: BTreeSet<K>,
    /// Whose Workload could not be built (a priority class not seen yet: its watch may deliver it after the
    /// job's), reconciled again when a priority class changes, as Kueue's requeue would.
    pub unbuilt: BTreeSet<K>,
}

impl<K> Default for KindQueues<K> {
    fn default() -> Self {
        Self {
            dirty: BTreeSet::new(),
            unbuilt: BTreeSet::new(),
        }
    }
}

/// Per kind, its queues.
#[derive(Default)]
pub(super) struct Kinds {
    /// batch/v1 Jobs, by (namespace, name).
    pub jobs: KindQueues<(String, String)>,
    /// JobSets, by (namespace, name).
    pub jobsets: KindQueues<(String, String)>,
    /// Kubeflow PyTorchJobs, by (namespace, name).
    pub pytorchjobs: KindQueues<(String, String)>,
    /// KubeRay RayJobs, by (namespace, name).
    pub rayjobs: KindQueues<(String, String)>,
    /// KubeRay RayClusters, by (namespace, name).
    pub rayclusters: KindQueues<(String, String)>,
    /// KubeRay RayServices, by (namespace, name).
    pub rayservices: KindQueues<(String, String)>,
    /// Kubeflow Trainer TrainJobs, by (namespace, name).
    pub trainjobs: KindQueues<(String, String)>,
    /// Plain pods and pod groups.
    pub pod_groups: KindQueues<PodGroupKey>,
}

impl EngineTask {
    /// Reconciles every dirty job of every kind, then creates the Workloads they built and starts the Jobs they
    /// admitted; returns whether anything was written.
    pub(super) async fn reconcile_dirty_jobs(&mut self) -> bool {
        // Each kind's reconcile future is large (a debug build's test threads overflowed their stacks once a
        // seventh kind was added): boxed, they live on the heap, one allocation per kind per round.
        let mut did = Box::pin(self.reconcile_dirty::<BatchJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<JobSetJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<PyTorchJobJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<RayJobJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<RayClusterJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<RayServiceJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<TrainJobJob>()).await;
        did |= Box::pin(self.reconcile_dirty::<PodGroups>()).await;
        self.create_owned_workloads().await;
        self.start_jobs().await;
        did
    }

    /// Whether any job of any kind waits to be reconciled.
    pub(super) fn any_dirty_job(&self) -> bool {
        !self.kinds.jobs.dirty.is_empty()
            || !self.kinds.jobsets.dirty.is_empty()
            || !self.kinds.pytorchjobs.dirty.is_empty()
            || !self.kinds.rayjobs.dirty.is_empty()
            || !self.kinds.rayclusters.dirty.is_empty()
            || !self.kinds.rayservices.dirty.is_empty()
            || !self.kinds.trainjobs.dirty.is_empty()
            || !self.kinds.pod_groups.dirty.is_empty()
    }

    /// Reconciles again the jobs whose Workload could not be built.
    pub(super) fn retry_unbuilt(&mut self) {
        self.retry_unbuilt_of::<BatchJob>();
        self.retry_unbuilt_of::<JobSetJob>();
        self.retry_unbuilt_of::<PyTorchJobJob>();
        self.retry_unbuilt_of::<RayJobJob>();
        self.retry_unbuilt_of::<RayClusterJob>();
        self.retry_unbuilt_of::<RayServiceJob>();
        self.retry_unbuilt_of::<TrainJobJob>();
        self.retry_unbuilt_of::<PodGroups>();
    }

    /// Marks the job that owns `wl` for reconciling, whatever its kind.
    pub(super) fn mark_owner_dirty(&mut self, wl: &api::Workload) {
        self.mark_owner_of::<BatchJob>(wl);
        self.mark_owner_of::<JobSetJob>(wl);
        self.mark_owner_of::<PyTorchJobJob>(wl);
        self.mark_owner_of::<RayJobJob>(wl);
        self.mark_owner_of::<RayClusterJob>(wl);
        self.mark_owner_of::<RayServiceJob>(wl);
        self.mark_owner_of::<TrainJobJob>(wl);
        self.mark_owner_of::<PodGroups>(wl);
    }

    /// Whether the job that owns the evicted `wl` must stop before the eviction completes.
    pub(super) fn owner_needs_stopping(&self, wl: &api::Workload) -> bool {
        self.owner_of_needs_stopping::<BatchJob>(wl)
            || self.owner_of_needs_stopping::<JobSetJob>(wl)
            || self.owner_of_needs_stopping::<PyTorchJobJob>(wl)
            || self.owner_of_needs_stopping::<RayJobJob>(wl)
            || self.owner_of_needs_stopping::<RayClusterJob>(wl)
            || self.owner_of_needs_stopping::<RayServiceJob>(wl)
            || self.owner_of_needs_stopping::<TrainJobJob>(wl)
            || self.owner_of_needs_stopping::<PodGroups>(wl)
    }

    /// Marks every cached job for reconciling (after the engine is rebuilt).
    pub(super) fn mark_all_jobs_dirty(&mut self) {
        self.mark_all_of::<BatchJob>();
        self.mark_all_of::<JobSetJob>();
        self.mark_all_of::<PyTorchJobJob>();
        self.mark_all_of::<RayJobJob>();
        self.mark_all_of::<RayClusterJob>();
        self.mark_all_of::<RayServiceJob>();
        self.mark_all_of::<TrainJobJob>();
        self.mark_all_of::<PodGroups>();
        self.mark_all_lws();
    }

    /// Marks every cached job of namespace `ns` for reconciling (its Namespace was just seen).
    pub(super) fn mark_namespace_jobs_dirty(&mut self, ns: &str) {
        self.mark_namespace_of::<BatchJob>(ns);
        self.mark_namespace_of::<JobSetJob>(ns);
        self.mark_namespace_of::<PyTorchJobJob>(ns);
        self.mark_namespace_of::<RayJobJob>(ns);
        self.mark_namespace_of::<RayClusterJob>(ns);
        self.mark_namespace_of::<RayServiceJob>(ns);
        self.mark_namespace_of::<TrainJobJob>(ns);
        self.mark_namespace_of::<PodGroups>(ns);
    }

    fn mark_namespace_of<I: Reconciled>(&mut self, ns: &str) {
        let keys: Vec<I::Key> = I::all_keys(self)
            .into_iter()
            .filter(|k| I::namespace(k) == ns)
            .collect();
        I::queues(&mut self.kinds).dirty.extend(keys);
    }

    async fn reconcile_dirty<I: Reconciled>(&mut self) -> bool {
        let mut did = false;
        for key in std::mem::take(&mut I::queues(&mut self.kinds).dirty) {
            did |= self.reconcile_boxed::<I>(&key).await;
        }
        did
    }

    /// One job's reconcile, on the heap: inlined, every kind's reconcile future would sit in the engine task's, and
    /// debug builds keep a poll frame's every slot on the stack (a test thread's 2 MiB was nearly spent).
    fn reconcile_boxed<'a, I: Reconciled + 'a>(
        &'a mut self,
        key: &'a I::Key,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
        Box::pin(self.reconcile::<I>(key))
    }

    fn retry_unbuilt_of<I: Reconciled>(&mut self) {
        let q = I::queues(&mut self.kinds);
        q.dirty.append(&mut q.unbuilt);
    }

    fn mark_owner_of<I: Reconciled>(&mut self, wl: &api::Workload) {
        if let Some(k) = I::owner_key(wl) {
            I::queues(&mut self.kinds).dirty.insert(k);
        }
    }

    fn owner_of_needs_stopping<I: Reconciled>(&self, wl: &api::Workload) -> bool {
        I::owner_key(wl).is_some_and(|k| I::needs_stopping(self, &k))
    }

    fn mark_all_of<I: Reconciled>(&mut self) {
        let keys = I::all_keys(self);
        I::queues(&mut self.kinds).dirty.extend(keys);
    }
}
