//! Cohort: a node in the hierarchy of queues that share quota.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FairSharing, FairSharingStatus, ResourceGroup, fair_sharing_weight};

/// Spec of a Cohort.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Cohort",
    plural = "cohorts",
    shortname = "co",
    status = "CohortStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Cohort defines the Cohorts API."
)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// Parent cohort; empty means this is a root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_name: String,
    /// Extra quota shared by the cohort's members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    /// Fair-sharing weight within the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

impl CohortSpec {
    /// The parent cohort, if any.
    pub fn parent(&self) -> Option<&str> {
        (!self.parent_name.is_empty()).then_some(self.parent_name.as_str())
    }

    /// The fair-sharing weight, 1 when unset.
    pub fn fair_sharing_weight(&self) -> Quantity {
        fair_sharing_weight(self.fair_sharing.as_ref())
    }
}

/// Status of a Cohort.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    /// Fair-sharing status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}
