//! Workload: the unit of admission, one per job.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admissioncheck::CheckState;

/// Name Kueue gives a pod set when none is set.
pub const DEFAULT_POD_SET_NAME: &str = "main";

/// Serde default for pod set names.
pub fn default_pod_set_name() -> String {
    DEFAULT_POD_SET_NAME.to_owned()
}

fn default_count() -> i32 {
    1
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// Spec of a Workload.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
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
    doc = "Workload is the Schema for the workloads API."
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// Pod sets (1 to 18), keyed by name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pod_sets: Vec<PodSet>,
    /// LocalQueue name in the workload's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub queue_name: String,
    /// Priority class the priority came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_ref: Option<PriorityClassRef>,
    /// Priority value (required when priorityClassRef is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Whether the workload may be admitted; Kueue's default is true, false evicts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub active: Option<bool>,
    /// Maximum admitted run time before deactivation (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_execution_time_seconds: Option<i32>,
    /// Gates that block preemption by this workload while closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption_gates: Vec<PreemptionGate>,
}

impl WorkloadSpec {
    /// Whether the workload is active (true when unset).
    pub fn is_active(&self) -> bool {
        self.active.unwrap_or(true)
    }

    /// The priority value, 0 when unset.
    pub fn priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }
}

/// API group of a priority class.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PriorityClassGroup {
    /// Kueue's WorkloadPriorityClass.
    #[serde(rename = "kueue.x-k8s.io")]
    Kueue,
    /// Kubernetes' pod PriorityClass.
    #[serde(rename = "scheduling.k8s.io")]
    Scheduling,
}

/// Kind of a priority class.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PriorityClassKind {
    /// Kueue's WorkloadPriorityClass.
    WorkloadPriorityClass,
    /// Kubernetes' pod PriorityClass.
    PriorityClass,
}

/// Reference to the priority class of a workload.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClassRef {
    /// API group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<PriorityClassGroup>,
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<PriorityClassKind>,
    /// Name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl PriorityClassRef {
    /// A reference to a WorkloadPriorityClass.
    pub fn workload_priority_class(name: impl Into<String>) -> Self {
        Self {
            group: Some(PriorityClassGroup::Kueue),
            kind: Some(PriorityClassKind::WorkloadPriorityClass),
            name: name.into(),
        }
    }

    /// A reference to a pod PriorityClass.
    pub fn pod_priority_class(name: impl Into<String>) -> Self {
        Self {
            group: Some(PriorityClassGroup::Scheduling),
            kind: Some(PriorityClassKind::PriorityClass),
            name: name.into(),
        }
    }
}

/// A group of identical pods.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// Pod set name; Kueue's default is `main`.
    #[serde(default = "default_pod_set_name")]
    pub name: String,
    /// Pod template (metadata limited to labels and annotations).
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub template: PodTemplateSpec,
    /// Number of pods; Kueue's default is 1.
    #[serde(default = "default_count")]
    pub count: i32,
    /// Minimum acceptable count for partial admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<i32>,
    /// Topology-aware scheduling request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<PodSetTopologyRequest>,
}

impl Default for PodSet {
    fn default() -> Self {
        Self {
            name: default_pod_set_name(),
            template: PodTemplateSpec::default(),
            count: default_count(),
            min_count: None,
            topology_request: None,
        }
    }
}

/// Topology-aware scheduling request of a pod set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetTopologyRequest {
    /// Level all pods must share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<String>,
    /// Level pods should preferably share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
    /// No topology constraint, but scheduled by TAS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconstrained: Option<bool>,
    /// Pod label holding the pod index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_index_label: Option<String>,
    /// Pod label holding the sub-group index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_index_label: Option<String>,
    /// Number of sub-groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_count: Option<i32>,
    /// Pod sets with the same group name are placed together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_group_name: Option<String>,
    /// Level each slice must share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_required_topology: Option<String>,
    /// Pods per slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_size: Option<i32>,
    /// Multi-level slice constraints (at most 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub podset_slice_required_topology_constraints: Vec<PodsetSliceRequiredTopologyConstraint>,
}

/// One slice constraint: `size` pods per domain of `topology`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodsetSliceRequiredTopologyConstraint {
    /// Topology level.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub topology: String,
    /// Slice size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size: i32,
}

/// A named preemption gate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGate {
    /// Gate name.
    pub name: String,
}

/// Where a workload holds quota.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// ClusterQueue holding the reservation.
    pub cluster_queue: String,
    /// One assignment per pod set.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// Flavors and usage assigned to one pod set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// Pod set name.
    #[serde(default = "default_pod_set_name")]
    pub name: String,
    /// Flavor per resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
    /// Total usage of all pods of the pod set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_usage: BTreeMap<String, Quantity>,
    /// Admitted pod count (may be lower than requested with partial admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Topology assignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
    /// State of a delayed topology request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_topology_request: Option<DelayedTopologyRequestState>,
}

impl Default for PodSetAssignment {
    fn default() -> Self {
        Self {
            name: default_pod_set_name(),
            flavors: BTreeMap::new(),
            resource_usage: BTreeMap::new(),
            count: None,
            topology_assignment: None,
            delayed_topology_request: None,
        }
    }
}

/// State of a delayed topology request.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DelayedTopologyRequestState {
    /// The topology assignment is still to come.
    Pending,
    /// The topology assignment is done.
    Ready,
}

/// Compressed topology assignment: domains grouped into slices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// Node labels of the levels the values refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<String>,
    /// Slices of domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<TopologyAssignmentSlice>,
}

/// A run of domains encoded together.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlice {
    /// Number of domains in the slice.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub domain_count: i32,
    /// Domain values, one entry per level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_per_level: Vec<TopologyAssignmentSliceLevelValues>,
    /// Pod counts per domain.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub pod_counts: TopologyAssignmentSlicePodCounts,
}

/// Values of one level across a slice: one shared value or one per domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelValues {
    /// Value shared by every domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<String>,
    /// One value per domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub individual: Option<TopologyAssignmentSliceLevelIndividualValues>,
}

/// Per-domain values as `prefix + root + suffix`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelIndividualValues {
    /// Common prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Common suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// Distinct middle parts, one per domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
}

/// Pod counts of a slice: one shared count or one per domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlicePodCounts {
    /// Count shared by every domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<i32>,
    /// One count per domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub individual: Vec<i32>,
}

/// Status of a Workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// Conditions (QuotaReserved, Admitted, Evicted, Finished, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Quota reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Requeue backoff state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    /// Pods that finished and whose quota can be released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaimable_pods: Vec<ReclaimablePod>,
    /// States of the admission checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckState>,
    /// Resource requests per pod set while not admitted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_requests: Vec<PodSetRequest>,
    /// Run time accumulated in earlier admissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_past_execution_time_seconds: Option<i32>,
    /// Scheduling statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_stats: Option<SchedulingStats>,
    /// MultiKueue worker clusters considered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated_cluster_names: Vec<String>,
    /// MultiKueue worker cluster chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Nodes of the assignment found unhealthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_nodes: Vec<UnhealthyNode>,
    /// States of the preemption gates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption_gates: Vec<PreemptionGateState>,
}

/// Scheduling statistics of a workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingStats {
    /// Eviction counts by reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<WorkloadSchedulingStatsEviction>,
}

/// Count of evictions for one reason.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSchedulingStatsEviction {
    /// Eviction reason.
    pub reason: String,
    /// Underlying cause (may be empty).
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub underlying_cause: String,
    /// Number of evictions.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub count: i32,
}

/// An unhealthy node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyNode {
    /// Node name.
    pub name: String,
}

/// Requeue backoff state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    /// Times the workload was requeued after eviction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// When the workload may be requeued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}

/// State of one admission check on a workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    /// AdmissionCheck name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub name: String,
    /// Check state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<CheckState>,
    /// When the state last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Human-readable message.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub message: String,
    /// Delay before a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<i32>,
    /// Number of retries so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<i32>,
    /// Changes the check requires on the pod sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_set_updates: Vec<PodSetUpdate>,
}

/// Changes to apply to a pod set's pods on admission.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetUpdate {
    /// Pod set name.
    pub name: String,
    /// Labels to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Node selector entries to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// Finished pods of a pod set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReclaimablePod {
    /// Pod set name.
    pub name: String,
    /// Number of finished pods.
    pub count: i32,
}

/// Resource requests of one pod set (per pod).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetRequest {
    /// Pod set name.
    pub name: String,
    /// Requests per resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
}

/// Position of a preemption gate.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum PreemptionGatePosition {
    /// The gate blocks preemption.
    Closed,
    /// The gate lets preemption through.
    Open,
}

/// State of one preemption gate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGateState {
    /// Gate name.
    pub name: String,
    /// Gate position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<PreemptionGatePosition>,
    /// When the position last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
