//! ClusterQueue: a pool of quota with its queueing and preemption policies.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    AdmissionScope, FairSharing, FairSharingStatus, ResourceGroup, StopPolicy, fair_sharing_weight,
};

/// Spec of a ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterQueue",
    plural = "clusterqueues",
    shortname = "cq",
    status = "ClusterQueueStatus",
    printcolumn(
        name = "Cohort",
        type_ = "string",
        json_path = ".spec.cohortName",
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
    doc = "ClusterQueue is the Schema for the clusterQueue API."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// Resource groups with per-flavor quotas (at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Cohort this queue belongs to; empty means none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cohort_name: String,
    /// Queueing strategy; Kueue's default is BestEffortFIFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "BestEffortFIFO"))]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespaces allowed to submit; unset allows none, `{}` allows all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// How the flavor search proceeds when borrowing or preemption is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub flavor_fungibility: Option<FlavorFungibility>,
    /// Preemption policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub preemption: Option<ClusterQueuePreemption>,
    /// Admission checks required by workloads in this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    /// Whether the queue is stopped; Kueue's default is None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub stop_policy: Option<StopPolicy>,
    /// Fair-sharing weight of this queue within its cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// Admission fair sharing scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
    /// Concurrent admission (flavor migration) policy; alpha in Kueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_admission_policy: Option<ConcurrentAdmissionPolicy>,
}

impl ClusterQueueSpec {
    /// The queueing strategy, BestEffortFIFO when unset.
    pub fn queueing_strategy(&self) -> QueueingStrategy {
        self.queueing_strategy.unwrap_or_default()
    }

    /// The stop policy, None when unset.
    pub fn stop_policy(&self) -> StopPolicy {
        self.stop_policy.unwrap_or_default()
    }

    /// The flavor fungibility with Kueue's defaults filled in.
    pub fn flavor_fungibility(&self) -> FlavorFungibility {
        let f = self.flavor_fungibility.clone().unwrap_or_default();
        FlavorFungibility {
            when_can_borrow: Some(f.when_can_borrow()),
            when_can_preempt: Some(f.when_can_preempt()),
            preference: f.preference,
        }
    }

    /// The preemption policies with Kueue's defaults filled in.
    pub fn preemption(&self) -> ClusterQueuePreemption {
        let p = self.preemption.clone().unwrap_or_default();
        let bwc = p.borrow_within_cohort.clone().unwrap_or_default();
        ClusterQueuePreemption {
            reclaim_within_cohort: Some(p.reclaim_within_cohort()),
            borrow_within_cohort: Some(BorrowWithinCohort {
                policy: Some(bwc.policy()),
                max_priority_threshold: bwc.max_priority_threshold,
            }),
            within_cluster_queue: Some(p.within_cluster_queue()),
        }
    }

    /// The fair-sharing weight, 1 when unset.
    pub fn fair_sharing_weight(&self) -> Quantity {
        fair_sharing_weight(self.fair_sharing.as_ref())
    }

    /// The cohort name, if the queue belongs to one.
    pub fn cohort(&self) -> Option<&str> {
        (!self.cohort_name.is_empty()).then_some(self.cohort_name.as_str())
    }
}

/// Admission checks of a ClusterQueue and the flavors they apply to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionChecksStrategy {
    /// One rule per admission check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckStrategyRule>,
}

/// One admission check and the flavors it applies to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStrategyRule {
    /// AdmissionCheck name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub name: String,
    /// Flavors the check applies to; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_flavors: Vec<String>,
}

/// Order in which pending workloads are tried.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum QueueingStrategy {
    /// Strict order: the head blocks the queue until admitted.
    StrictFIFO,
    /// Ordered, but inadmissible heads do not block others (Kueue's default).
    #[default]
    BestEffortFIFO,
}

/// Concurrent admission policy (alpha gate ConcurrentAdmission).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionPolicy {
    /// How admitted workloads migrate between flavors.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub migration: ConcurrentAdmissionMigration,
}

/// Flavor migration settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionMigration {
    /// Migration mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ConcurrentAdmissionMigrationMode>,
    /// Limits on migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<ConcurrentAdmissionConstraints>,
}

/// Limits on flavor migration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionConstraints {
    /// Last flavor (in preference order) worth migrating to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_acceptable_flavor_name: Option<String>,
}

/// Flavor migration mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConcurrentAdmissionMigrationMode {
    /// Keep trying more preferred flavors.
    TryPreferredFlavors,
    /// Keep the first admission.
    RetainFirstAdmission,
}

/// Status of a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Conditions, notably `Active`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Quota reserved by workloads, per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<FlavorUsage>,
    /// Quota used by admitted workloads, per flavor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
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
    /// Fair-sharing status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}

/// Usage of one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    /// Flavor name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub name: String,
    /// Usage per resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceUsage>,
}

/// Usage of one resource in a flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    /// Resource name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub name: String,
    /// Total used.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub total: Quantity,
    /// Part of the total borrowed from the cohort.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub borrowed: Quantity,
}

/// Preemption policy for reclaiming quota or preempting within a queue.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PreemptionPolicy {
    /// Never preempt (Kueue's default).
    #[default]
    Never,
    /// Preempt lower-priority workloads.
    LowerPriority,
    /// Preempt lower-priority workloads or newer ones of equal priority.
    LowerOrNewerEqualPriority,
    /// Preempt any workload (reclaimWithinCohort only).
    Any,
}

/// What the flavor search does when a flavor needs borrowing or preemption.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum FlavorFungibilityPolicy {
    /// Stop at this flavor if it fits that way.
    MayStopSearch,
    /// Try the next flavor first.
    TryNextFlavor,
}

/// Which of borrowing and preemption is preferred when both policies are TryNextFlavor.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum FlavorFungibilityPreference {
    /// Prefer borrowing (Kueue's behaviour when unset).
    #[default]
    BorrowingOverPreemption,
    /// Prefer preemption.
    PreemptionOverBorrowing,
}

/// Flavor fungibility settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorFungibility {
    /// Behaviour when the flavor fits by borrowing; default MayStopSearch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "MayStopSearch"))]
    pub when_can_borrow: Option<FlavorFungibilityPolicy>,
    /// Behaviour when the flavor fits by preempting; default TryNextFlavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "TryNextFlavor"))]
    pub when_can_preempt: Option<FlavorFungibilityPolicy>,
    /// Preference between borrowing and preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<FlavorFungibilityPreference>,
}

impl FlavorFungibility {
    /// whenCanBorrow, MayStopSearch when unset.
    pub fn when_can_borrow(&self) -> FlavorFungibilityPolicy {
        self.when_can_borrow
            .unwrap_or(FlavorFungibilityPolicy::MayStopSearch)
    }

    /// whenCanPreempt, TryNextFlavor when unset.
    pub fn when_can_preempt(&self) -> FlavorFungibilityPolicy {
        self.when_can_preempt
            .unwrap_or(FlavorFungibilityPolicy::TryNextFlavor)
    }

    /// preference, BorrowingOverPreemption when unset.
    pub fn preference(&self) -> FlavorFungibilityPreference {
        self.preference.unwrap_or_default()
    }
}

/// Preemption settings of a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueuePreemption {
    /// Reclaiming nominal quota lent to the cohort: Never, LowerPriority or Any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub reclaim_within_cohort: Option<PreemptionPolicy>,
    /// Preempting in the cohort while borrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
    /// Preempting within this queue: Never, LowerPriority or LowerOrNewerEqualPriority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub within_cluster_queue: Option<PreemptionPolicy>,
}

impl ClusterQueuePreemption {
    /// reclaimWithinCohort, Never when unset.
    pub fn reclaim_within_cohort(&self) -> PreemptionPolicy {
        self.reclaim_within_cohort.unwrap_or_default()
    }

    /// withinClusterQueue, Never when unset.
    pub fn within_cluster_queue(&self) -> PreemptionPolicy {
        self.within_cluster_queue.unwrap_or_default()
    }

    /// borrowWithinCohort.policy, Never when unset.
    pub fn borrow_within_cohort_policy(&self) -> BorrowWithinCohortPolicy {
        self.borrow_within_cohort
            .as_ref()
            .map(BorrowWithinCohort::policy)
            .unwrap_or_default()
    }
}

/// Preemption while borrowing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum BorrowWithinCohortPolicy {
    /// Never (Kueue's default).
    #[default]
    Never,
    /// Preempt lower-priority workloads.
    LowerPriority,
}

/// Settings for preemption while borrowing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    /// Policy; default Never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub policy: Option<BorrowWithinCohortPolicy>,
    /// Only workloads with priority at most this are preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

impl BorrowWithinCohort {
    /// policy, Never when unset.
    pub fn policy(&self) -> BorrowWithinCohortPolicy {
        self.policy.unwrap_or_default()
    }
}
