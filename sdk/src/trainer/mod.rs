//! Kubeflow Trainer (`trainer.kubeflow.org/v1alpha1`, the API of `github.com/kubeflow/trainer/v2` v2.2): the
//! TrainJob fields Kueue's integration reads and writes, and the TrainingRuntime and ClusterTrainingRuntime a
//! TrainJob runs from. Fields Sluice does not read are kept as they came, so a TrainJob written back loses nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, LocalObjectReference, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jobset::JobSetSpec;

mod child;
pub mod merge;

pub use child::child_jobset;

/// API group of the Trainer kinds.
pub const GROUP: &str = "trainer.kubeflow.org";
/// Their version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of a TrainJob or a runtime.
pub const API_VERSION: &str = "trainer.kubeflow.org/v1alpha1";
/// Kind of a TrainJob.
pub const TRAIN_JOB_KIND: &str = "TrainJob";
/// Kind of a namespaced runtime.
pub const TRAINING_RUNTIME_KIND: &str = "TrainingRuntime";
/// Kind of a cluster-scoped runtime (what a `runtimeRef` names when its kind is unset).
pub const CLUSTER_TRAINING_RUNTIME_KIND: &str = "ClusterTrainingRuntime";
/// Manager of the runtime patch Kueue owns in each TrainJob's `spec.runtimePatches`.
pub const KUEUE_RUNTIME_PATCH_MANAGER: &str = "kueue.x-k8s.io/manager";
/// Label on a runtime's replicated-job template saying which step of a TrainJob it runs.
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
/// The ancestor step of the dataset initializer (also the name of its container).
pub const DATASET_INITIALIZER: &str = "dataset-initializer";
/// The ancestor step of the model initializer (also the name of its container).
pub const MODEL_INITIALIZER: &str = "model-initializer";
/// The ancestor step of the trainer nodes.
pub const ANCESTOR_TRAINER: &str = "trainer";
/// The trainer's container (and, under MPI, the nodes' replicated job).
pub const NODE: &str = "node";
/// Environment variable the initializers read their source from.
pub const STORAGE_URI_ENV: &str = "STORAGE_URI";
/// Pod label the coscheduling pod-group policy sets to the TrainJob's name.
pub const COSCHEDULING_POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// TrainJob condition type of a job that completed.
pub const COMPLETE: &str = "Complete";
/// TrainJob condition type of a job that failed.
pub const FAILED: &str = "Failed";

/// A TrainJob: a training run on a runtime's template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainJob {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<TrainJobSpec>,
    /// What the Trainer controller reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TrainJobStatus>,
    /// The runtime its reference names, as the reader that holds runtimes found it (never serialized): the spec,
    /// or Kueue's error for a runtime that is missing or of an unsupported kind. None until resolved.
    #[serde(skip)]
    pub runtime: Option<std::sync::Arc<Result<TrainingRuntimeSpec, String>>>,
}

/// The part of a TrainJob's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobSpec {
    /// The runtime it runs on.
    #[serde(default)]
    pub runtime_ref: RuntimeRef,
    /// The dataset and model initializers' settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initializer: Option<Initializer>,
    /// The trainer's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer: Option<Trainer>,
    /// Patches to the runtime's template, one per manager, applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_patches: Vec<RuntimePatch>,
    /// Whether the job waits (its JobSet suspended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The controller that manages the job (MultiKueue sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// Which runtime a TrainJob runs on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeRef {
    /// The runtime's name.
    #[serde(default)]
    pub name: String,
    /// Its API group (the CRD defaults it to `trainer.kubeflow.org`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// Its kind (the CRD defaults it to `ClusterTrainingRuntime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// The initializers' settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initializer {
    /// The dataset initializer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<InitializerSource>,
    /// The model initializer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<InitializerSource>,
}

/// Where one initializer fetches from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializerSource {
    /// The source's URI (`STORAGE_URI` in the container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_uri: Option<String>,
    /// Extra environment of its container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// A Secret whose keys become its container's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
}

/// The trainer's settings, which override the runtime's `node` container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trainer {
    /// Container image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// How many nodes (pods) train.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<i32>,
    /// Each node's resources (they replace the runtime container's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_per_node: Option<ResourceRequirements>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// One manager's patch to the runtime's template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimePatch {
    /// Who owns the patch (its key in the list).
    #[serde(default)]
    pub manager: String,
    /// The patch: `{template: {metadata, spec: {replicatedJobs: [{name, template}]}}}`, each replicated job's
    /// template a strategic-merge patch of a batch/v1 JobTemplateSpec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_runtime_spec: Option<Value>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The part of a TrainJob's status Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobStatus {
    /// Conditions (`Complete`, `Failed`, `Suspended`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per replicated job of its JobSet, how many Jobs are in each state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs_status: Vec<JobStatus>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// How many Jobs of one replicated job are in each state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// The replicated job's name.
    #[serde(default)]
    pub name: String,
    /// Jobs whose pods are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<i32>,
    /// Jobs that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// Jobs that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    /// Jobs with a pod running or pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<i32>,
    /// Jobs suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<i32>,
}

/// A namespaced runtime: a JobSet template and the policies a TrainJob on it follows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainingRuntime {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The runtime.
    #[serde(default)]
    pub spec: TrainingRuntimeSpec,
}

/// A cluster-scoped runtime, as [`TrainingRuntime`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTrainingRuntime {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The runtime.
    #[serde(default)]
    pub spec: TrainingRuntimeSpec,
}

/// What a runtime holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrainingRuntimeSpec {
    /// The ML framework's policy (node count and framework).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ml_policy: Option<MlPolicy>,
    /// The gang-scheduling policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_policy: Option<PodGroupPolicy>,
    /// The JobSet each TrainJob on it becomes.
    #[serde(default)]
    pub template: JobSetTemplateSpec,
}

/// A runtime's ML policy: one framework source is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MlPolicy {
    /// Default node count of the trainer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<i32>,
    /// PyTorch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<Value>,
    /// MPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiPolicy>,
    /// JAX.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jax: Option<Value>,
    /// Every other source (flux, xgboost), as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The MPI source of an ML policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MpiPolicy {
    /// Whether the launcher also trains (then the `node` job runs one pod fewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_launcher_as_node: Option<bool>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A runtime's gang-scheduling policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupPolicy {
    /// The scheduler-plugins coscheduling source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coscheduling: Option<Value>,
    /// Every other source, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A runtime's JobSet template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetTemplateSpec {
    /// Labels and annotations of the JobSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The JobSet's spec.
    #[serde(default)]
    pub spec: JobSetSpec,
}

api_resource!(
    TrainJob,
    k8s_openapi::NamespaceResourceScope,
    TRAIN_JOB_KIND,
    "trainjobs"
);
api_resource!(
    TrainingRuntime,
    k8s_openapi::NamespaceResourceScope,
    TRAINING_RUNTIME_KIND,
    "trainingruntimes"
);
api_resource!(
    ClusterTrainingRuntime,
    k8s_openapi::ClusterResourceScope,
    CLUSTER_TRAINING_RUNTIME_KIND,
    "clustertrainingruntimes"
);

/// Which runtime a reference names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuntimeKey {
    /// A TrainingRuntime in the TrainJob's namespace: (namespace, name).
    Namespaced(String, String),
    /// A ClusterTrainingRuntime: its name.
    Cluster(String),
}

impl TrainJob {
    /// Whether the job is suspended (`spec.suspend`, false when unset).
    pub fn is_suspended(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }

    /// The runtime the job names, or Kueue's error for a reference to a kind that is no runtime
    /// (`unsupported runtime: <Kind>.<group>`).
    pub fn runtime_key(&self) -> Result<RuntimeKey, String> {
        let r = self
            .spec
            .as_ref()
            .map(|s| s.runtime_ref.clone())
            .unwrap_or_default();
        let group = r.api_group.as_deref().unwrap_or(GROUP);
        let kind = r.kind.as_deref().unwrap_or(CLUSTER_TRAINING_RUNTIME_KIND);
        if group != GROUP
            || (kind != TRAINING_RUNTIME_KIND && kind != CLUSTER_TRAINING_RUNTIME_KIND)
        {
            return Err(format!("unsupported runtime: {kind}.{group}"));
        }
        // Trainer reads a ClusterTrainingRuntime only when both group and kind say so exactly.
        Ok(if kind == CLUSTER_TRAINING_RUNTIME_KIND {
            RuntimeKey::Cluster(r.name)
        } else {
            RuntimeKey::Namespaced(self.metadata.namespace.clone().unwrap_or_default(), r.name)
        })
    }

    /// The runtime's name as the job's reference gives it.
    pub fn runtime_name(&self) -> &str {
        self.spec
            .as_ref()
            .map(|s| s.runtime_ref.name.as_str())
            .unwrap_or("")
    }

    /// Kueue's runtime patch, if the job has one.
    pub fn kueue_patch(&self) -> Option<&RuntimePatch> {
        self.spec
            .as_ref()?
            .runtime_patches
            .iter()
            .find(|p| p.manager == KUEUE_RUNTIME_PATCH_MANAGER)
    }

    /// Kueue's runtime patch, mutable, if the job has one.
    pub fn kueue_patch_mut(&mut self) -> Option<&mut RuntimePatch> {
        self.spec
            .as_mut()?
            .runtime_patches
            .iter_mut()
            .find(|p| p.manager == KUEUE_RUNTIME_PATCH_MANAGER)
    }

    /// Kueue's error for a runtime that cannot be found (`runtime '<name>' not found`).
    pub fn runtime_not_found(&self) -> String {
        format!("runtime '{}' not found", self.runtime_name())
    }

    /// The child JobSet on its resolved runtime; Kueue's error when the runtime is unresolved, missing or of
    /// an unsupported kind.
    pub fn child_jobset(&self) -> Result<crate::jobset::JobSet, String> {
        match self.runtime.as_deref() {
            Some(Ok(runtime)) => child_jobset(self, runtime),
            Some(Err(e)) => Err(e.clone()),
            None => Err(self.runtime_not_found()),
        }
    }

    /// Whether any replicated job of its JobSet has an active Job.
    pub fn is_active(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.jobs_status.iter().any(|j| j.active.unwrap_or(0) > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sluice_does_not_read_survive_a_round_trip() {
        let doc = serde_json::json!({
            "apiVersion": API_VERSION, "kind": TRAIN_JOB_KIND,
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "activeDeadlineSeconds": 600,
                "trainer": {"numNodes": 2, "numProcPerNode": 4},
                "runtimePatches": [{"manager": "me", "time": "2026-01-01T00:00:00Z",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}]}}}}]
            },
            "status": {"trainerStatus": {"progressPercentage": 5}, "jobsStatus": [{"name": "node", "active": 2}]}
        });
        let tj: TrainJob = serde_json::from_value(doc.clone()).unwrap();
        assert!(tj.is_active());
        assert_eq!(
            tj.runtime_key(),
            Ok(RuntimeKey::Cluster("torch-distributed".into()))
        );
        let back = serde_json::to_value(&tj).unwrap();
        assert_eq!(back["spec"], doc["spec"]);
        assert_eq!(
            back["status"]["trainerStatus"],
            doc["status"]["trainerStatus"]
        );
    }

    #[test]
    fn a_reference_to_something_else_is_an_unsupported_runtime() {
        let mut tj = TrainJob::default();
        tj.metadata.namespace = Some("ml".into());
        let spec = tj.spec.get_or_insert_with(Default::default);
        spec.runtime_ref = RuntimeRef {
            name: "r".into(),
            api_group: Some(GROUP.into()),
            kind: Some(TRAINING_RUNTIME_KIND.into()),
        };
        assert_eq!(
            tj.runtime_key(),
            Ok(RuntimeKey::Namespaced("ml".into(), "r".into()))
        );
        tj.spec.as_mut().unwrap().runtime_ref.kind = Some("ConfigMap".into());
        assert_eq!(
            tj.runtime_key(),
            Err("unsupported runtime: ConfigMap.trainer.kubeflow.org".into())
        );
    }
}
