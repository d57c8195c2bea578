//! ResourceFlavor: a class of nodes, matched by labels and taints.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of a ResourceFlavor.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ResourceFlavor",
    plural = "resourceflavors",
    shortname = "flavor",
    shortname = "flavors",
    shortname = "rf",
    derive = "PartialEq",
    derive = "Default",
    doc = "ResourceFlavor is the Schema for the resourceflavors API."
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels of the nodes this flavor stands for (at most 8).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// Taints of those nodes (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<Taint>,
    /// Tolerations added to admitted pods (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Topology used for topology-aware scheduling in this flavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_name: Option<String>,
}
