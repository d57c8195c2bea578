//! Types shared by several v1beta2 kinds: fair sharing, stop policy and resource groups.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Fair-sharing parameters of a ClusterQueue, Cohort or LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharing {
    /// Share weight; Kueue defaults it to 1, and 0 means an infinite share when borrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub weight: Option<Quantity>,
}

impl FairSharing {
    /// The weight, or Kueue's default of 1 when unset.
    pub fn weight(&self) -> Quantity {
        self.weight.clone().unwrap_or_else(default_weight)
    }
}

/// Kueue's default fair-sharing weight.
pub fn default_weight() -> Quantity {
    Quantity("1".to_owned())
}

/// The fair-sharing weight of an optional `fairSharing` block, defaulting to 1.
pub fn fair_sharing_weight(fs: Option<&FairSharing>) -> Quantity {
    fs.map_or_else(default_weight, FairSharing::weight)
}

/// Fair-sharing status of a ClusterQueue or Cohort.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// Dominant resource share divided by weight (MaxInt64 when weight is 0 and borrowing).
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub weighted_share: i64,
}

/// Admission-fair-sharing scope of a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionScope {
    /// How admission fair sharing is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_mode: Option<AdmissionMode>,
}

/// Admission fair sharing mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum AdmissionMode {
    /// Order admissions by LocalQueue usage.
    UsageBasedAdmissionFairSharing,
    /// No admission fair sharing.
    NoAdmissionFairSharing,
}

/// Whether a queue admits and keeps workloads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum StopPolicy {
    /// The queue is active (Kueue's default).
    #[default]
    None,
    /// No new admissions; admitted workloads keep running.
    Hold,
    /// No new admissions and admitted workloads are evicted.
    HoldAndDrain,
}

/// A group of resources whose flavors are tried together.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    /// Resources covered by this group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covered_resources: Vec<String>,
    /// Flavors in preference order, each listing quotas for every covered resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<FlavorQuotas>,
}

/// Quotas of one flavor within a resource group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// ResourceFlavor name.
    pub name: String,
    /// One quota per covered resource, in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceQuota>,
}

/// Quota of one resource in one flavor.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// Resource name.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub name: String,
    /// Quota owned by the queue.
    pub nominal_quota: Quantity,
    /// Maximum that can be borrowed from the cohort; unset means unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// Maximum that the cohort may borrow from this quota; unset means all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}
