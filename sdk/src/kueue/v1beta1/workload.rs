//! v1beta1 Workload: `priorityClassName`/`priorityClassSource`, the misspelt accumulated-time field and the
//! uncompressed topology assignment.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kueue::v1beta2::{
    AdmissionCheckState, DelayedTopologyRequestState, PodSetRequest, ReclaimablePod, RequeueState,
    SchedulingStats, UnhealthyNode, default_pod_set_name,
};

/// `priorityClassSource` of a WorkloadPriorityClass.
pub const WORKLOAD_PRIORITY_CLASS_SOURCE: &str = "kueue.x-k8s.io/workloadpriorityclass";
/// `priorityClassSource` of a pod PriorityClass.
pub const POD_PRIORITY_CLASS_SOURCE: &str = "scheduling.k8s.io/priorityclass";

fn default_count() -> i32 {
    1
}

/// Spec of a v1beta1 Workload.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta1",
    kind = "Workload",
    plural = "workloads",
    namespaced,
    shortname = "kwl",
    shortname = "kueueworkload",
    shortname = "kueueworkloads",
    status = "WorkloadStatus",
    printcolumn(
        name = "Queue",
        type_ = "string",
        json_path = ".spec.queueName",
        description = "Name of the queue this workload was submitted to"
    ),
    printcolumn(
        name = "Reserved in",
        type_ = "string",
        json_path = ".status.admission.clusterQueue",
        description = "Name of the ClusterQueue where the workload is reserving quota"
    ),
    printcolumn(
        name = "Admitted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Admitted')].status",
        description = "Admission status"
    ),
    printcolumn(
        name = "Finished",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Finished')].status",
        description = "Workload finished"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time this workload was created"
    ),
    derive = "PartialEq",
    derive = "Default",
    deprecated = "This version is deprecated. Use v1beta2 instead.",
    doc = "Workload is the Schema for the workloads API."
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// Pod sets.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pod_sets: Vec<PodSet>,
    /// LocalQueue name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queue_name: String,
    /// Priority class name (v1beta2 `priorityClassRef.name`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
    /// Priority value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Where the priority class comes from: [`WORKLOAD_PRIORITY_CLASS_SOURCE`], [`POD_PRIORITY_CLASS_SOURCE`] or "".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("default" = ""))]
    pub priority_class_source: String,
    /// Whether the workload is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub active: Option<bool>,
    /// Maximum execution time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_execution_time_seconds: Option<i32>,
}

/// A v1beta1 pod set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// Pod set name.
    #[serde(default = "default_pod_set_name")]
    pub name: String,
    /// Pod template.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub template: PodTemplateSpec,
    /// Number of pods.
    #[serde(default = "default_count")]
    pub count: i32,
    /// Minimum count for partial admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<i32>,
    /// Topology request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<PodSetTopologyRequest>,
}

/// v1beta1 topology request (no multi-level slice constraints).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetTopologyRequest {
    /// Required level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<String>,
    /// Preferred level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
    /// Unconstrained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconstrained: Option<bool>,
    /// Pod index label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_index_label: Option<String>,
    /// Sub-group index label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_index_label: Option<String>,
    /// Sub-group count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_count: Option<i32>,
    /// Pod set group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_group_name: Option<String>,
    /// Slice required level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_required_topology: Option<String>,
    /// Slice size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_size: Option<i32>,
}

/// v1beta1 admission.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// ClusterQueue.
    pub cluster_queue: String,
    /// Assignments.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// v1beta1 pod set assignment.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// Pod set name.
    #[serde(default = "default_pod_set_name")]
    pub name: String,
    /// Flavor per resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
    /// Total usage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_usage: BTreeMap<String, Quantity>,
    /// Admitted count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Topology assignment, one entry per domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
    /// Delayed topology request state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_topology_request: Option<DelayedTopologyRequestState>,
}

/// v1beta1 topology assignment: the levels and one entry per domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// Level node labels.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub levels: Vec<String>,
    /// Domains with their pod counts.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub domains: Vec<TopologyDomainAssignment>,
}

/// One domain of a v1beta1 topology assignment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyDomainAssignment {
    /// Value per level.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub values: Vec<String>,
    /// Pods in the domain.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub count: i32,
}

/// Status of a v1beta1 Workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Requeue state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    /// Reclaimable pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaimable_pods: Vec<ReclaimablePod>,
    /// Admission check states.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckState>,
    /// Resource requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_requests: Vec<PodSetRequest>,
    /// Accumulated execution time (Kueue's v1beta1 spelling).
    #[serde(
        default,
        rename = "accumulatedPastExexcutionTimeSeconds",
        skip_serializing_if = "Option::is_none"
    )]
    pub accumulated_past_exexcution_time_seconds: Option<i32>,
    /// Scheduling statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_stats: Option<SchedulingStats>,
    /// MultiKueue nominated clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated_cluster_names: Vec<String>,
    /// MultiKueue chosen cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Unhealthy nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_nodes: Vec<UnhealthyNode>,
}
