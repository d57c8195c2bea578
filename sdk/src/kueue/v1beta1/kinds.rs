//! v1beta1 kinds whose JSON matches v1beta2 except for small details (ResourceFlavor, Topology,
//! WorkloadPriorityClass, Cohort, AdmissionCheck).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kueue::v1beta2::{
    AdmissionCheckParametersReference, AdmissionCheckStatus, FairSharing, ResourceGroup,
};

/// Spec of a v1beta1 ResourceFlavor (same fields as v1beta2).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "ResourceFlavor",
    plural = "resourceflavors",
    shortname = "flavor",
    shortname = "flavors",
    shortname = "rf",
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "ResourceFlavor is the Schema for the resourceflavors API."
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels of the nodes this flavor stands for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// Taints of those nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<Taint>,
    /// Tolerations added to admitted pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Topology used for topology-aware scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_name: Option<String>,
}

/// Spec of a v1beta1 Topology.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "Topology",
    plural = "topologies",
    shortname = "topo",
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "Topology is the Schema for the topology API."
)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// Levels from highest to lowest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<crate::kueue::v1beta2::TopologyLevel>,
}

/// Top-level fields of a v1beta1 WorkloadPriorityClass.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "WorkloadPriorityClass",
    plural = "workloadpriorityclasses",
    shortname = "wpc",
    no_spec,
    printcolumn(
        name = "Value",
        type_ = "integer",
        json_path = ".value",
        description = "Value of workloadPriorityClass's Priority"
    ),
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "WorkloadPriorityClass is the Schema for the workloadPriorityClass API."
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClassFields {
    /// Priority value.
    pub value: i32,
    /// Free-form description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 2048))]
    pub description: String,
}

/// Spec of a v1beta1 Cohort.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "Cohort",
    plural = "cohorts",
    shortname = "co",
    status = "CohortStatus",
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "Cohort defines the Cohorts API."
)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// Parent cohort.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_name: String,
    /// Extra shared quota.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Fair-sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

/// Status of a v1beta1 Cohort.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    /// Fair-sharing status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// v1beta1 fair-sharing status, which also carried admission-fair-sharing usage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// Weighted share.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub weighted_share: i64,
    /// Admission fair sharing usage (moved under LocalQueue status in v1beta2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing_status: Option<AdmissionFairSharingStatus>,
}

/// Decayed resource consumption tracked by admission fair sharing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionFairSharingStatus {
    /// Consumed resources.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub consumed_resources: BTreeMap<String, Quantity>,
    /// When the consumption was last updated.
    pub last_update: Time,
}

/// Spec of a v1beta1 AdmissionCheck.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "AdmissionCheck",
    plural = "admissionchecks",
    shortname = "ac",
    status = "AdmissionCheckStatus",
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "AdmissionCheck is the Schema for the admissionchecks API."
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// Controller handling the check.
    pub controller_name: String,
    /// Deprecated retry delay, dropped in v1beta2 (Kueue's default 15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 15))]
    pub retry_delay_minutes: Option<i64>,
    /// Parameters object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParametersReference>,
}
