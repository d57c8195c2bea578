//! The jobs a simulation runs, whatever their kind: each is suspended while queued, run with its admission and
//! restored after an eviction through its kind's integration, as the operator does.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde_json::Value;
use sluice_sdk::jobset::{self, JobSet};
use sluice_sdk::kubeflow::{self, PyTorchJob};
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::ray::{self, RayCluster, RayJob, RayService};
use sluice_sdk::trainer::{self, TrainJob};

use crate::engine::Time;
use crate::jobs::{
    BatchJob, JobError, JobIntegration, JobSetJob, LwsGroup, LwsGroupJob, PodSetInfo,
    PriorityClasses, PyTorchJobJob, RayClusterJob, RayJobJob, RayServiceJob, SuspendableJob,
    TrainJobJob,
};
use crate::status;

/// Which job: its kind ("Job", "JobSet"), namespace and name.
pub type JobKey = (&'static str, String, String);

/// A job of one of the kinds the simulator runs (held once per job: the size difference costs nothing).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum SimJob {
    /// A batch/v1 Job.
    Batch(Job),
    /// A JobSet.
    JobSet(JobSet),
    /// A Kubeflow PyTorchJob.
    PyTorchJob(PyTorchJob),
    /// A KubeRay RayJob.
    RayJob(RayJob),
    /// A KubeRay RayCluster.
    RayCluster(RayCluster),
    /// A KubeRay RayService.
    RayService(RayService),
    /// A Kubeflow Trainer TrainJob (with its runtime resolved).
    TrainJob(TrainJob),
    /// One group of a LeaderWorkerSet.
    LwsGroup(LwsGroup),
}

/// Runs `$body` with `$j` bound to the job of whatever kind `$job` is and `$K` naming that kind's integration.
macro_rules! each_kind {
    ($job:expr, |$j:ident, $K:ident| $body:expr) => {
        match $job {
            SimJob::Batch($j) => {
                type $K = BatchJob;
                $body
            }
            SimJob::JobSet($j) => {
                type $K = JobSetJob;
                $body
            }
            SimJob::PyTorchJob($j) => {
                type $K = PyTorchJobJob;
                $body
            }
            SimJob::RayJob($j) => {
                type $K = RayJobJob;
                $body
            }
            SimJob::RayCluster($j) => {
                type $K = RayClusterJob;
                $body
            }
            SimJob::RayService($j) => {
                type $K = RayServiceJob;
                $body
            }
            SimJob::TrainJob($j) => {
                type $K = TrainJobJob;
                $body
            }
            SimJob::LwsGroup($j) => {
                type $K = LwsGroupJob;
                $body
            }
        }
    };
}

impl SimJob {
    /// Its kind, as in [`JobKey`].
    pub fn kind(&self) -> &'static str {
        each_kind!(self, |_j, K| K::KIND)
    }

    /// Its metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        each_kind!(self, |j, _K| &j.metadata)
    }

    /// Its metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        each_kind!(self, |j, _K| &mut j.metadata)
    }

    /// Suspends it (queued, or evicted).
    pub fn suspend(&mut self) {
        each_kind!(self, |j, K| K::suspend(j))
    }

    /// The Workload its kind builds for it.
    pub fn workload(&self, priorities: &PriorityClasses) -> Result<api::Workload, JobError> {
        each_kind!(self, |j, K| K::workload(j, priorities))
    }

    /// Starts it with its admission.
    pub fn run_with(&mut self, infos: &[PodSetInfo]) -> Result<(), JobError> {
        each_kind!(self, |j, K| K::run_with(j, infos))
    }

    /// Suspends it with its pod templates as queued, after an eviction.
    pub fn stop_and_restore(&mut self, originals: &[PodSetInfo]) {
        each_kind!(self, |j, K| {
            K::suspend(j);
            K::restore(j, originals);
        })
    }

    /// Marks it completed at `now`, as its controller would.
    pub fn complete(&mut self, now: Time) {
        match self {
            SimJob::Batch(j) => {
                let st = j.status.get_or_insert_with(Default::default);
                st.conditions
                    .get_or_insert_with(Vec::new)
                    .push(JobCondition {
                        type_: "Complete".into(),
                        status: "True".into(),
                        last_transition_time: Some(status::k8s_time(now)),
                        ..Default::default()
                    });
            }
            SimJob::JobSet(j) => {
                let st = j.status.get_or_insert_with(Default::default);
                st.conditions.push(Condition {
                    type_: jobset::COMPLETED.into(),
                    status: "True".into(),
                    reason: "AllJobsCompleted".into(),
                    message: "jobset completed successfully".into(),
                    last_transition_time: status::k8s_time(now),
                    observed_generation: None,
                });
            }
            SimJob::PyTorchJob(j) => {
                let st = j.status.get_or_insert_with(Default::default);
                st.conditions.push(kubeflow::JobCondition {
                    type_: kubeflow::SUCCEEDED.into(),
                    status: "True".into(),
                    reason: "PyTorchJobSucceeded".into(),
                    message: "simulated run completed".into(),
                    other: Default::default(),
                });
            }
            SimJob::RayJob(j) => {
                let st = j.status.get_or_insert_with(Default::default);
                st.job_deployment_status = ray::DEPLOYMENT_COMPLETE.into();
                st.job_status = ray::JOB_SUCCEEDED.into();
                st.message = "simulated run completed".into();
            }
            SimJob::TrainJob(j) => {
                let st = j.status.get_or_insert_with(Default::default);
                st.conditions.push(Condition {
                    type_: trainer::COMPLETE.into(),
                    status: "True".into(),
                    reason: "JobsCompleted".into(),
                    message: "simulated run completed".into(),
                    last_transition_time: status::k8s_time(now),
                    observed_generation: None,
                });
            }
            // A cluster or a service never finishes by itself: the end of its simulated run stands for its owner
            // deleting it.
            SimJob::RayCluster(_) | SimJob::RayService(_) | SimJob::LwsGroup(_) => {}
        }
    }

    /// The object as JSON, with its apiVersion and kind (a LeaderWorkerSet once, with its first group; Null for
    /// its other groups).
    pub fn to_value(&self) -> Value {
        if let SimJob::LwsGroup(g) = self {
            if g.index != 0 {
                return Value::Null;
            }
            let mut v = serde_json::to_value(&g.set).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert("apiVersion".into(), LwsGroupJob::API_VERSION.into());
                m.insert("kind".into(), self.kind().into());
            }
            return v;
        }
        let (v, api_version) = each_kind!(self, |j, K| (serde_json::to_value(j), K::API_VERSION));
        let mut v = v.unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("apiVersion".into(), api_version.into());
            m.insert("kind".into(), self.kind().into());
        }
        v
    }
}
