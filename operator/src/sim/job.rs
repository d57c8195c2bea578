//! The jobs a simulation runs, whatever their kind: each is suspended while queued, run with its admission and
//! restored after an eviction through its kind's integration, as the operator does.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde_json::Value;
use sluice_sdk::jobset::{self, JobSet};
use sluice_sdk::kubeflow::{self, PyTorchJob};
use sluice_sdk::kueue::v1beta2 as api;

use crate::engine::Time;
use crate::jobs::{
    BatchJob, JobError, JobIntegration, JobSetJob, PodSetInfo, PriorityClasses, PyTorchJobJob,
    SuspendableJob,
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
}

impl SimJob {
    /// Its kind, as in [`JobKey`].
    pub fn kind(&self) -> &'static str {
        match self {
            SimJob::Batch(_) => BatchJob::KIND,
            SimJob::JobSet(_) => JobSetJob::KIND,
            SimJob::PyTorchJob(_) => PyTorchJobJob::KIND,
        }
    }

    /// Its metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            SimJob::Batch(j) => &j.metadata,
            SimJob::JobSet(j) => &j.metadata,
            SimJob::PyTorchJob(j) => &j.metadata,
        }
    }

    /// Its metadata, to change.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            SimJob::Batch(j) => &mut j.metadata,
            SimJob::JobSet(j) => &mut j.metadata,
            SimJob::PyTorchJob(j) => &mut j.metadata,
        }
    }

    /// Suspends it (queued, or evicted).
    pub fn suspend(&mut self) {
        match self {
            SimJob::Batch(j) => BatchJob::suspend(j),
            SimJob::JobSet(j) => JobSetJob::suspend(j),
            SimJob::PyTorchJob(j) => PyTorchJobJob::suspend(j),
        }
    }

    /// The Workload its kind builds for it.
    pub fn workload(&self, priorities: &PriorityClasses) -> Result<api::Workload, JobError> {
        match self {
            SimJob::Batch(j) => BatchJob::workload(j, priorities),
            SimJob::JobSet(j) => JobSetJob::workload(j, priorities),
            SimJob::PyTorchJob(j) => PyTorchJobJob::workload(j, priorities),
        }
    }

    /// Starts it with its admission.
    pub fn run_with(&mut self, infos: &[PodSetInfo]) -> Result<(), JobError> {
        match self {
            SimJob::Batch(j) => BatchJob::run_with(j, infos),
            SimJob::JobSet(j) => JobSetJob::run_with(j, infos),
            SimJob::PyTorchJob(j) => PyTorchJobJob::run_with(j, infos),
        }
    }

    /// Suspends it with its pod templates as queued, after an eviction.
    pub fn stop_and_restore(&mut self, originals: &[PodSetInfo]) {
        match self {
            SimJob::Batch(j) => {
                BatchJob::suspend(j);
                BatchJob::restore(j, originals);
            }
            SimJob::JobSet(j) => {
                JobSetJob::suspend(j);
                JobSetJob::restore(j, originals);
            }
            SimJob::PyTorchJob(j) => {
                PyTorchJobJob::suspend(j);
                PyTorchJobJob::restore(j, originals);
            }
        }
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
        }
    }

    /// The object as JSON, with its apiVersion and kind.
    pub fn to_value(&self) -> Value {
        let (v, api_version) = match self {
            SimJob::Batch(j) => (serde_json::to_value(j), BatchJob::API_VERSION),
            SimJob::JobSet(j) => (serde_json::to_value(j), JobSetJob::API_VERSION),
            SimJob::PyTorchJob(j) => (serde_json::to_value(j), PyTorchJobJob::API_VERSION),
        };
        let mut v = v.unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("apiVersion".into(), api_version.into());
            m.insert("kind".into(), self.kind().into());
        }
        v
    }
}
