//! Topology: the node hierarchy used by topology-aware scheduling.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of a Topology.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Topology",
    plural = "topologies",
    shortname = "topo",
    derive = "PartialEq",
    derive = "Default",
    doc = "Topology is the Schema for the topology API."
)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// Levels from the highest (e.g. block) to the lowest (e.g. hostname), 1 to 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// Node label whose value names the domain at this level.
    #[serde(default)]
    #[schemars(transform = crate::kueue::schema::no_default)]
    pub node_label: String,
}
