//! v1beta1 ClusterQueue: `spec.cohort`, `spec.admissionChecks`, old fungibility values and the pending-workloads
//! status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kinds::FairSharingStatus;
use crate::kueue::v1beta2::{
    AdmissionChecksStrategy, AdmissionScope, ClusterQueuePreemption, FairSharing,
    FlavorFungibilityPreference, FlavorUsage, QueueingStrategy, ResourceGroup, StopPolicy,
};

/// Spec of a v1beta1 ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "ClusterQueue",
    plural = "clusterqueues",
    shortname = "cq",
    status = "ClusterQueueStatus",
    printcolumn(
        name = "Cohort",
        type_ = "string",
        json_path = ".spec.cohort",
        description = "Cohort that this ClusterQueue belongs to"
    ),
    printcolumn(
        name = "Strategy",
        type_ = "string",
        json_path = ".spec.queueingStrategy",
        description = "The queueing strategy used to prioritize workloads",
        priority = 1
    ),
    printcolumn(
        name = "Pending Workloads",
        type_ = "integer",
        json_path = ".status.pendingWorkloads",
        description = "Number of pending workloads"
    ),
    printcolumn(
        name = "Admitted Workloads",
        type_ = "integer",
        json_path = ".status.admittedWorkloads",
        description = "Number of admitted workloads that haven't finished yet",
        priority = 1
    ),
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "ClusterQueue is the Schema for the clusterQueue API."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// Resource groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Cohort (v1beta2 `cohortName`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cohort: String,
    /// Queueing strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "BestEffortFIFO"))]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespace selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Flavor fungibility (accepts the old `Borrow`/`Preempt` values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// Preemption policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub preemption: Option<ClusterQueuePreemption>,
    /// Admission checks applying to all flavors (folded into admissionChecksStrategy in v1beta2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<String>,
    /// Admission checks per flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    /// Stop policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub stop_policy: Option<StopPolicy>,
    /// Fair-sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// Admission fair sharing scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
}

/// v1beta1 flavor fungibility policy values, including the deprecated aliases.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum FlavorFungibilityPolicy {
    /// Stop at this flavor.
    MayStopSearch,
    /// Try the next flavor.
    TryNextFlavor,
    /// Old name of MayStopSearch for whenCanBorrow.
    Borrow,
    /// Old name of MayStopSearch for whenCanPreempt.
    Preempt,
}

/// v1beta1 flavor fungibility.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorFungibility {
    /// whenCanBorrow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "MayStopSearch"))]
    pub when_can_borrow: Option<FlavorFungibilityPolicy>,
    /// whenCanPreempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "TryNextFlavor"))]
    pub when_can_preempt: Option<FlavorFungibilityPolicy>,
    /// preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<FlavorFungibilityPreference>,
}

/// Status of a v1beta1 ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Reservations per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<FlavorUsage>,
    /// Usage per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    /// Pending workloads.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pending_workloads: i32,
    /// Reserving workloads.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub reserving_workloads: i32,
    /// Admitted workloads.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub admitted_workloads: i32,
    /// Head of the pending queue (removed in v1beta2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_workloads_status: Option<ClusterQueuePendingWorkloadsStatus>,
    /// Fair-sharing status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// Head of a ClusterQueue's pending workloads.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueuePendingWorkloadsStatus {
    /// Pending workloads at the head.
    #[serde(
        default,
        rename = "clusterQueuePendingWorkload",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub head: Vec<ClusterQueuePendingWorkload>,
    /// When the list last changed.
    pub last_change_time: Time,
}

/// A pending workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueuePendingWorkload {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
}
