//! JobSet (`jobset.x-k8s.io/v1alpha2`, the API of `sigs.k8s.io/jobset` v0.12): the fields Kueue's JobSet
//! integration reads and writes. Fields Sluice does not read are kept as they came, so that a JobSet written back
//! loses nothing of its success policy, failure policy, network or startup policy.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API group of JobSet.
pub const GROUP: &str = "jobset.x-k8s.io";
/// The version Kueue's integration watches.
pub const VERSION: &str = "v1alpha2";
/// `apiVersion` of a JobSet.
pub const API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";
/// Kind.
pub const KIND: &str = "JobSet";
/// Label the JobSet controller puts on each child Job's pods with the Job's index within its replicated job.
pub const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
/// Label the JobSet controller puts on its pods with the JobSet's name.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// Condition type of a JobSet that completed.
pub const COMPLETED: &str = "Completed";
/// Condition type of a JobSet that failed.
pub const FAILED: &str = "Failed";

/// A JobSet: a group of replicated Jobs run together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSet {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSetSpec>,
    /// What the JobSet controller reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobSetStatus>,
}

/// The part of a JobSet's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    /// The groups of identical Jobs.
    #[serde(default)]
    pub replicated_jobs: Vec<ReplicatedJob>,
    /// Whether the JobSet waits (its Jobs suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The controller that manages the JobSet (MultiKueue sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// One group of identical Jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    /// Its name, unique within the JobSet (Kueue's pod-set name, lowercased).
    pub name: String,
    /// How many Jobs (the API server defaults it to 1).
    #[serde(default = "one")]
    pub replicas: i32,
    /// The template of each Job.
    #[serde(default)]
    pub template: JobTemplateSpec,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

fn one() -> i32 {
    1
}

/// The part of a JobSet's status Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetStatus {
    /// Conditions (`Completed`, `Failed`, `Suspended`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per replicated job, how many of its Jobs are in each state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicated_jobs_status: Vec<ReplicatedJobStatus>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// How many Jobs of one replicated job are in each state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJobStatus {
    /// The replicated job's name.
    pub name: String,
    /// Jobs whose pods are all ready.
    #[serde(default)]
    pub ready: i32,
    /// Jobs that succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Jobs that failed.
    #[serde(default)]
    pub failed: i32,
    /// Jobs with at least one pod running or pending.
    #[serde(default)]
    pub active: i32,
    /// Jobs suspended.
    #[serde(default)]
    pub suspended: i32,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

api_resource!(JobSet, k8s_openapi::NamespaceResourceScope, KIND, "jobsets");

impl ReplicatedJob {
    /// Pods one of its Jobs runs at once: min(parallelism, completions), parallelism defaulting to 1.
    pub fn pods_per_job(&self) -> i32 {
        let spec = self.template.spec.as_ref();
        let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
        let completions = spec.and_then(|s| s.completions).unwrap_or(parallelism);
        parallelism.min(completions)
    }

    /// Pods of all its Jobs: replicas x pods per Job (Kueue's pod-set count).
    pub fn pods_count(&self) -> i32 {
        self.replicas.saturating_mul(self.pods_per_job())
    }

    /// Its Jobs' pod template, created empty when absent.
    pub fn pod_template_mut(&mut self) -> &mut k8s_openapi::api::core::v1::PodTemplateSpec {
        &mut self
            .template
            .spec
            .get_or_insert_with(Default::default)
            .template
    }

    /// Its Jobs' pod template, if the Job template has a spec.
    pub fn pod_template(&self) -> Option<&k8s_openapi::api::core::v1::PodTemplateSpec> {
        self.template.spec.as_ref().map(|s| &s.template)
    }
}

impl JobSet {
    /// Whether the JobSet is suspended (`spec.suspend`, false when unset).
    pub fn is_suspended(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }

    /// Its replicated jobs (none without a spec).
    pub fn replicated_jobs(&self) -> &[ReplicatedJob] {
        self.spec
            .as_ref()
            .map(|s| &s.replicated_jobs[..])
            .unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sluice_does_not_read_survive_a_round_trip() {
        let doc = serde_json::json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {
                "suspend": true,
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["workers"]},
                "network": {"enableDNSHostnames": true},
                "replicatedJobs": [{
                    "name": "workers", "replicas": 4, "dependsOn": [{"name": "driver", "status": "Ready"}],
                    "template": {"spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": [
                        {"name": "c", "image": "i"}]}}}}
                }]
            },
            "status": {"restarts": 1, "replicatedJobsStatus": [{"name": "workers", "active": 4, "ready": 3}]}
        });
        let js: JobSet = serde_json::from_value(doc.clone()).unwrap();
        assert_eq!(js.replicated_jobs()[0].pods_count(), 8);
        assert!(js.is_suspended());
        let back = serde_json::to_value(&js).unwrap();
        assert_eq!(back["spec"]["successPolicy"], doc["spec"]["successPolicy"]);
        assert_eq!(back["spec"]["network"], doc["spec"]["network"]);
        assert_eq!(
            back["spec"]["replicatedJobs"][0]["dependsOn"],
            doc["spec"]["replicatedJobs"][0]["dependsOn"]
        );
        assert_eq!(back["status"]["restarts"], 1);
        assert_eq!(back["status"]["replicatedJobsStatus"][0]["ready"], 3);
    }

    #[test]
    fn replicas_default_to_one_and_completions_cap_the_pods_per_job() {
        let rj: ReplicatedJob = serde_json::from_value(serde_json::json!({
            "name": "w", "template": {"spec": {"parallelism": 4, "completions": 3,
                "template": {"spec": {"containers": []}}}}
        }))
        .unwrap();
        assert_eq!(rj.replicas, 1);
        assert_eq!(rj.pods_count(), 3);
    }
}
