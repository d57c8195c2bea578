//! Kubeflow training v1 (`kubeflow.org/v1`, the API of `github.com/kubeflow/training-operator` v1.9): the
//! PyTorchJob fields Kueue's integration reads and writes. Fields Sluice does not read are kept as they came, so a
//! PyTorchJob written back loses nothing of its elastic policy, run policy or replica specs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API group of the Kubeflow training v1 kinds.
pub const GROUP: &str = "kubeflow.org";
/// Their version.
pub const VERSION: &str = "v1";
/// `apiVersion` of a PyTorchJob.
pub const API_VERSION: &str = "kubeflow.org/v1";
/// Kind of a PyTorchJob.
pub const PYTORCH_JOB_KIND: &str = "PyTorchJob";
/// Label the training operator puts on each pod with its index within its replica type.
pub const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";
/// Condition type of a job that succeeded.
pub const SUCCEEDED: &str = "Succeeded";
/// Condition type of a job that failed.
pub const FAILED: &str = "Failed";
/// Condition type of a job whose pods all run.
pub const RUNNING: &str = "Running";
/// A PyTorchJob's replica types in Kueue's pod-set order.
pub const PYTORCH_REPLICA_TYPES: &[&str] = &["Master", "Worker"];

/// A PyTorchJob: a distributed PyTorch training run of master and worker replicas.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchJob {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PyTorchJobSpec>,
    /// What the training operator reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobStatus>,
}

/// The part of a PyTorchJob's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchJobSpec {
    /// Suspension, scheduling policy and the rest of the run policy.
    #[serde(default)]
    pub run_policy: RunPolicy,
    /// The replicas by replica type (`Master`, `Worker`).
    #[serde(default, rename = "pytorchReplicaSpecs")]
    pub replica_specs: BTreeMap<String, ReplicaSpec>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The part of a run policy Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// Whether the job waits (no pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Gang-scheduling hints, among them a priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The part of a scheduling policy Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    /// A pod PriorityClass name for the whole job.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class: String,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The replicas of one type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// How many (1 when unset, as Kueue counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Their pod template.
    #[serde(default)]
    pub template: PodTemplateSpec,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A training job's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Conditions (`Created`, `Running`, `Succeeded`, `Failed`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
    /// Per replica type, its pods in each state.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_statuses: BTreeMap<String, ReplicaStatus>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// One condition of a training job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Its type.
    #[serde(rename = "type")]
    pub type_: String,
    /// "True", "False" or "Unknown".
    pub status: String,
    /// Why, in a word.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// Pods of one replica type in each state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// Running or pending pods.
    #[serde(default)]
    pub active: i32,
    /// Succeeded pods.
    #[serde(default)]
    pub succeeded: i32,
    /// Failed pods.
    #[serde(default)]
    pub failed: i32,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

api_resource!(
    PyTorchJob,
    k8s_openapi::NamespaceResourceScope,
    PYTORCH_JOB_KIND,
    "pytorchjobs"
);

impl PyTorchJob {
    /// Whether it is suspended (`spec.runPolicy.suspend`, false when unset).
    pub fn is_suspended(&self) -> bool {
        self.spec
            .as_ref()
            .and_then(|s| s.run_policy.suspend)
            .unwrap_or(false)
    }

    /// Its replica types present, in Kueue's order (`Master`, then `Worker`), with their specs.
    pub fn ordered_replicas(&self) -> Vec<(&'static str, &ReplicaSpec)> {
        let Some(spec) = self.spec.as_ref() else {
            return Vec::new();
        };
        PYTORCH_REPLICA_TYPES
            .iter()
            .filter_map(|t| spec.replica_specs.get(*t).map(|r| (*t, r)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_types_come_in_kueues_order_and_unread_fields_survive() {
        let doc = serde_json::json!({
            "apiVersion": API_VERSION, "kind": PYTORCH_JOB_KIND,
            "metadata": {"name": "mnist", "namespace": "ml"},
            "spec": {
                "runPolicy": {"cleanPodPolicy": "None", "suspend": true},
                "elasticPolicy": {"minReplicas": 1},
                "pytorchReplicaSpecs": {
                    "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": {"spec": {"containers": []}}},
                    "Master": {"replicas": 1, "template": {"spec": {"containers": []}}}
                }
            },
            "status": {"replicaStatuses": {"Worker": {"active": 2, "selector": "x"}},
                "conditions": [{"type": "Running", "status": "True", "lastUpdateTime": "2026-12-04T00:00:00Z"}]}
        });
        let job: PyTorchJob = serde_json::from_value(doc.clone()).unwrap();
        assert!(job.is_suspended());
        let types: Vec<&str> = job.ordered_replicas().iter().map(|(t, _)| *t).collect();
        assert_eq!(types, ["Master", "Worker"]);
        let back = serde_json::to_value(&job).unwrap();
        assert_eq!(back["spec"]["elasticPolicy"], doc["spec"]["elasticPolicy"]);
        assert_eq!(back["spec"]["runPolicy"]["cleanPodPolicy"], "None");
        assert_eq!(
            back["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"],
            "OnFailure"
        );
        assert_eq!(back["status"]["replicaStatuses"]["Worker"]["selector"], "x");
        assert_eq!(
            back["status"]["conditions"][0]["lastUpdateTime"],
            "2026-12-04T00:00:00Z"
        );
    }
}
