//! v1beta1 LocalQueue: `status.flavorUsage` and the flavor list.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kinds::FairSharingStatus;
use crate::kueue::v1beta2::{FairSharing, LocalQueueFlavorUsage, StopPolicy};

/// Spec of a v1beta1 LocalQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
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
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "LocalQueue is the Schema for the localQueues API."
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// Backing ClusterQueue.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub cluster_queue: String,
    /// Stop policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub stop_policy: Option<StopPolicy>,
    /// Fair-sharing weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

/// Status of a v1beta1 LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
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
    /// Reservations per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<LocalQueueFlavorUsage>,
    /// Usage per flavor (v1beta2 `flavorsUsage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavor_usage: Vec<LocalQueueFlavorUsage>,
    /// Flavors of the backing ClusterQueue (removed in v1beta2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<LocalQueueFlavorStatus>,
    /// Fair-sharing status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// A flavor of the backing ClusterQueue as shown on a v1beta1 LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFlavorStatus {
    /// Flavor name.
    pub name: String,
    /// Resources the flavor covers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Node labels of the flavor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// Node taints of the flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<Taint>,
    /// Topology of the flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyInfo>,
}

/// Topology of a flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyInfo {
    /// Topology name.
    pub name: String,
    /// Level node labels.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub levels: Vec<String>,
}
