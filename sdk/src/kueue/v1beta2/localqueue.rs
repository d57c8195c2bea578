//! LocalQueue: a namespaced entry point that feeds one ClusterQueue.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FairSharing, StopPolicy, fair_sharing_weight};

/// Spec of a LocalQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "LocalQueue",
    plural = "localqueues",
    namespaced,
    shortname = "queue",
    shortname = "queues",
    shortname = "lq",
    status = "LocalQueueStatus",
    printcolumn(
        name = "ClusterQueue",
        type_ = "string",
        json_path = ".spec.clusterQueue",
        description = "Backing ClusterQueue"
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
        description = "Number of admitted workloads that haven't finished yet."
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "LocalQueue is the Schema for the localQueues API."
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// The backing ClusterQueue (immutable).
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub cluster_queue: String,
    /// Whether the queue is stopped; Kueue's default is None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub stop_policy: Option<StopPolicy>,
    /// Weight used by admission fair sharing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

impl LocalQueueSpec {
    /// The stop policy, None when unset.
    pub fn stop_policy(&self) -> StopPolicy {
        self.stop_policy.unwrap_or_default()
    }

    /// The fair-sharing weight, 1 when unset.
    pub fn fair_sharing_weight(&self) -> Quantity {
        fair_sharing_weight(self.fair_sharing.as_ref())
    }
}

/// Status of a LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Conditions, notably `Active`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Number of pending workloads.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pending_workloads: i32,
    /// Number of workloads holding a quota reservation.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub reserving_workloads: i32,
    /// Number of admitted, unfinished workloads.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub admitted_workloads: i32,
    /// Quota reserved by this queue's workloads, per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<LocalQueueFlavorUsage>,
    /// Quota used by this queue's admitted workloads, per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<LocalQueueFlavorUsage>,
    /// Fair-sharing status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<LocalQueueFairSharingStatus>,
}

/// Fair-sharing status of a LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFairSharingStatus {
    /// Weighted share.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub weighted_share: i64,
    /// Admission fair sharing usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing_status: Option<LocalQueueAdmissionFairSharingStatus>,
}

/// Decayed resource consumption tracked by admission fair sharing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueAdmissionFairSharingStatus {
    /// Consumed resources.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub consumed_resources: BTreeMap<String, Quantity>,
    /// When the consumption was last updated.
    pub last_update: Time,
}

/// Usage of one flavor by a LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFlavorUsage {
    /// Flavor name.
    pub name: String,
    /// Usage per resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<LocalQueueResourceUsage>,
}

/// Usage of one resource by a LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueResourceUsage {
    /// Resource name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub name: String,
    /// Total used.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub total: Quantity,
}
