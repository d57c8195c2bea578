//! KubeRay (`ray.io/v1`, the API of `github.com/ray-project/kuberay/ray-operator` v1.6): the RayCluster and RayJob
//! fields Kueue's integrations read and write. Fields Sluice does not read are kept as they came, so an object
//! written back loses nothing of its Ray start parameters, services or autoscaler settings.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API group of the KubeRay kinds.
pub const GROUP: &str = "ray.io";
/// Their version.
pub const VERSION: &str = "v1";
/// `apiVersion` of a RayCluster or RayJob.
pub const API_VERSION: &str = "ray.io/v1";
/// Kind of a RayCluster.
pub const RAY_CLUSTER_KIND: &str = "RayCluster";
/// Kind of a RayJob.
pub const RAY_JOB_KIND: &str = "RayJob";
/// Kind of a RayService.
pub const RAY_SERVICE_KIND: &str = "RayService";
/// KubeRay's RayService condition saying the service takes requests (`RayServiceReady`).
pub const SERVICE_READY_CONDITION: &str = "Ready";
/// The head group's pod-set name (Kueue's; no worker group may take it).
pub const HEAD_POD_SET: &str = "head";
/// The submitter Job's pod-set name (a RayJob in `K8sJobMode`).
pub const SUBMITTER_POD_SET: &str = "submitter";
/// Submission mode in which KubeRay runs a submitter Kubernetes Job (the CRD's default).
pub const K8S_JOB_MODE: &str = "K8sJobMode";
/// Submission mode in which KubeRay adds a submitter container to the head pod.
pub const SIDECAR_MODE: &str = "SidecarMode";
/// Name KubeRay gives the submitter container.
pub const SUBMITTER_CONTAINER: &str = "ray-job-submitter";
/// Name KubeRay gives the autoscaler sidecar of the head pod.
pub const AUTOSCALER_CONTAINER: &str = "autoscaler";
/// Annotation that turns on GCS fault tolerance (KubeRay's `ray.io/ft-enabled`).
pub const FT_ENABLED_ANNOTATION: &str = "ray.io/ft-enabled";
/// A cluster's state once all its pods run.
pub const STATE_READY: &str = "ready";
/// A cluster's state after it failed.
pub const STATE_FAILED: &str = "failed";
/// A RayJob's deployment status before KubeRay has seen it.
pub const DEPLOYMENT_NEW: &str = "";
/// A RayJob's deployment status once it is suspended.
pub const DEPLOYMENT_SUSPENDED: &str = "Suspended";
/// A RayJob's deployment status once it completed.
pub const DEPLOYMENT_COMPLETE: &str = "Complete";
/// A RayJob's deployment status once it failed.
pub const DEPLOYMENT_FAILED: &str = "Failed";
/// `status.jobDeploymentStatus` of a RayJob KubeRay found invalid (Kueue puts it on hold).
pub const DEPLOYMENT_VALIDATION_FAILED: &str = "ValidationFailed";
/// A Ray job status that means success.
pub const JOB_SUCCEEDED: &str = "SUCCEEDED";

/// A RayCluster: a Ray head and groups of workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayCluster {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<RayClusterSpec>,
    /// What KubeRay reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RayClusterStatus>,
}

/// The part of a cluster's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterSpec {
    /// Whether the cluster waits (no pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The head pod.
    #[serde(default)]
    pub head_group_spec: HeadGroupSpec,
    /// The worker groups, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_group_specs: Vec<WorkerGroupSpec>,
    /// Whether KubeRay adds the Ray autoscaler to the head pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_in_tree_autoscaling: Option<bool>,
    /// The autoscaler's settings, among them its container's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler_options: Option<AutoscalerOptions>,
    /// GCS fault tolerance (present: on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs_fault_tolerance_options: Option<Value>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The head group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadGroupSpec {
    /// The head's pod template.
    #[serde(default)]
    pub template: PodTemplateSpec,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// One group of workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerGroupSpec {
    /// The group's name.
    #[serde(default)]
    pub group_name: String,
    /// How many replicas (1 when unset, as Kueue counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Hosts per replica (multi-host workers; counts when above 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_of_hosts: Option<i32>,
    /// The workers' pod template.
    #[serde(default)]
    pub template: PodTemplateSpec,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl WorkerGroupSpec {
    /// Pods the group runs, as Kueue counts them: replicas (1 when unset) times hosts per replica when above 1.
    pub fn pod_count(&self) -> i32 {
        let replicas = self.replicas.unwrap_or(1);
        match self.num_of_hosts {
            Some(h) if h > 1 => replicas.saturating_mul(h),
            _ => replicas,
        }
    }
}

/// The autoscaler's settings Kueue reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerOptions {
    /// The autoscaler container's resources (KubeRay's defaults when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A cluster's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterStatus {
    /// `ready`, `failed`, `suspended` or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Why it is in that state.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A RayJob: a Ray program run on a RayCluster that KubeRay creates for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayJob {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<RayJobSpec>,
    /// What KubeRay reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RayJobStatus>,
}

/// The part of a RayJob's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayJobSpec {
    /// Whether the job waits (no cluster).
    #[serde(default)]
    pub suspend: bool,
    /// Whether KubeRay deletes the cluster once the job ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_after_job_finishes: Option<bool>,
    /// How the job is submitted (`K8sJobMode` when unset, the CRD's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_mode: Option<String>,
    /// Labels of an existing cluster to run on (such jobs are not Kueue's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cluster_selector: BTreeMap<String, String>,
    /// The cluster KubeRay creates for the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_spec: Option<RayClusterSpec>,
    /// The submitter Job's pod template (KubeRay's default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter_pod_template: Option<PodTemplateSpec>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A RayJob's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatus {
    /// KubeRay's phase of the job (`Initializing`, `Running`, `Complete`, `Failed`, `Suspended`...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_deployment_status: String,
    /// Ray's status of the program (`SUCCEEDED`, `FAILED`...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_status: String,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The status of the job's cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_status: Option<RayClusterStatus>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A RayService: Ray Serve applications on a RayCluster that KubeRay creates for it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayService {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<RayServiceSpec>,
    /// What KubeRay reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RayServiceStatus>,
}

/// The part of a RayService's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayServiceSpec {
    /// The cluster KubeRay creates for the service (its `suspend` is the service's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_config: Option<RayClusterSpec>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A RayService's status: its conditions; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RayServiceStatus {
    /// KubeRay's conditions (`Ready`, `UpgradeInProgress`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

api_resource!(
    RayCluster,
    k8s_openapi::NamespaceResourceScope,
    RAY_CLUSTER_KIND,
    "rayclusters"
);
api_resource!(
    RayJob,
    k8s_openapi::NamespaceResourceScope,
    RAY_JOB_KIND,
    "rayjobs"
);
api_resource!(
    RayService,
    k8s_openapi::NamespaceResourceScope,
    RAY_SERVICE_KIND,
    "rayservices"
);

impl RayClusterSpec {
    /// Whether GCS fault tolerance is on (KubeRay's test: the annotation, or fault-tolerance options present).
    pub fn gcs_fault_tolerance(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        let annotated = annotations
            .and_then(|a| a.get(FT_ENABLED_ANNOTATION))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        annotated || self.gcs_fault_tolerance_options.is_some()
    }

    /// Pod sets the cluster makes: the head and one per worker group.
    pub fn pod_set_count(&self) -> usize {
        self.worker_group_specs.len() + 1
    }
}

impl RayCluster {
    /// Whether it is suspended (`spec.suspend`, false when unset).
    pub fn is_suspended(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }
}

impl RayService {
    /// Whether it is suspended (`spec.rayClusterConfig.suspend`, false when unset).
    pub fn is_suspended(&self) -> bool {
        self.spec
            .as_ref()
            .and_then(|s| s.ray_cluster_config.as_ref())
            .and_then(|c| c.suspend)
            .unwrap_or(false)
    }

    /// Whether KubeRay says the service takes requests (its `Ready` condition is true).
    pub fn is_ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == SERVICE_READY_CONDITION && c.status == "True")
        })
    }
}

impl RayJob {
    /// Whether it is suspended (`spec.suspend`).
    pub fn is_suspended(&self) -> bool {
        self.spec.as_ref().is_some_and(|s| s.suspend)
    }

    /// Its submission mode: the API server fills in `K8sJobMode` when it is unset, so Sluice reads unset so too.
    pub fn submission_mode(&self) -> &str {
        self.spec
            .as_ref()
            .and_then(|s| s.submission_mode.as_deref())
            .unwrap_or(K8S_JOB_MODE)
    }

    /// Whether it runs on an existing cluster picked by labels (Kueue leaves such jobs alone).
    pub fn uses_cluster_selector(&self) -> bool {
        self.spec
            .as_ref()
            .is_some_and(|s| !s.cluster_selector.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_fields_survive_and_counts_follow_kueue() {
        let doc = serde_json::json!({
            "apiVersion": API_VERSION, "kind": RAY_JOB_KIND,
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {
                "entrypoint": "python train.py",
                "shutdownAfterJobFinishes": true,
                "rayClusterSpec": {
                    "rayVersion": "2.41.0",
                    "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": {"spec": {"containers": []}}},
                    "workerGroupSpecs": [
                        {"groupName": "GPU", "replicas": 2, "numOfHosts": 4, "minReplicas": 0, "template": {"spec": {"containers": []}}},
                        {"groupName": "cpu", "template": {"spec": {"containers": []}}}
                    ]
                }
            },
            "status": {"jobDeploymentStatus": "Running", "rayClusterName": "train-abc",
                "rayClusterStatus": {"state": "ready", "desiredCPU": "4"}}
        });
        let job: RayJob = serde_json::from_value(doc.clone()).unwrap();
        assert!(!job.is_suspended());
        assert_eq!(job.submission_mode(), K8S_JOB_MODE);
        let spec = job
            .spec
            .as_ref()
            .unwrap()
            .ray_cluster_spec
            .as_ref()
            .unwrap();
        let counts: Vec<i32> = spec
            .worker_group_specs
            .iter()
            .map(WorkerGroupSpec::pod_count)
            .collect();
        assert_eq!(counts, [8, 1]);
        assert_eq!(spec.pod_set_count(), 3);
        assert!(!spec.gcs_fault_tolerance(None));
        let back = serde_json::to_value(&job).unwrap();
        assert_eq!(back["spec"]["entrypoint"], "python train.py");
        assert_eq!(back["spec"]["rayClusterSpec"]["rayVersion"], "2.41.0");
        assert_eq!(
            back["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"],
            doc["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]
        );
        assert_eq!(
            back["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["minReplicas"],
            0
        );
        assert_eq!(back["status"]["rayClusterName"], "train-abc");
        assert_eq!(back["status"]["rayClusterStatus"]["desiredCPU"], "4");
        // Nothing is added that was not there.
        assert!(back["spec"].get("submissionMode").is_none());
        assert!(back["spec"]["rayClusterSpec"].get("suspend").is_none());
    }
}
