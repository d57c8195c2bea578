//! `NodeGpuTopology`: one per node, published by the node agent.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::topology::NodeGpus;

/// Spec of a NodeGpuTopology: what the node's agent discovered. The object is named after its node.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "NodeGpuTopology",
    plural = "nodegputopologies",
    shortname = "ngt",
    derive = "PartialEq",
    derive = "Default",
    status = "NodeGpuTopologyStatus",
    doc = "NodeGpuTopology is the GPU topology of one node, as its node agent discovered it."
)]
#[serde(rename_all = "camelCase")]
pub struct NodeGpuTopologySpec {
    /// Name of the node.
    pub node_name: String,
    /// GPUs, NVLink islands, fabric clique and PCIe affinity.
    #[serde(flatten)]
    pub gpus: NodeGpus,
}

/// Status of a NodeGpuTopology: what the node's GPUs are doing and who holds them, as the agent last
/// read them (the operator joins this with its admissions, so it needs no metrics scraping).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGpuTopologyStatus {
    /// When the agent read the use below (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_at: Option<String>,
    /// One entry per GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuUse>,
}

/// One GPU's use and holders.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuUse {
    /// NVML index.
    pub index: u32,
    /// GPU UUID.
    pub uuid: String,
    /// GPU utilisation, percent (NVML's sample period); absent when the driver does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<u32>,
    /// Framebuffer used, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_mib: Option<u64>,
    /// Containers the kubelet allocated this GPU (or one of its MIG instances) to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<GpuHolder>,
    /// When the agent's utilisation history of this GPU begins (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_since: Option<String>,
    /// The utilisation history, compressed exactly: each entry says the highest utilisation read from
    /// `since` until `observedAt` was `peak`. Entries run oldest first with falling peaks, so "the most
    /// the GPU did over the last D" is the peak of the first entry at or after `observedAt - D`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peaks: Vec<UtilizationPeak>,
}

/// One step of a GPU's utilisation history: the highest utilisation from `since` on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UtilizationPeak {
    /// When the reading was taken (RFC 3339).
    pub since: String,
    /// The highest utilisation, percent, from `since` to the status' `observedAt`.
    pub peak: u32,
}

/// A container holding a GPU, from the kubelet's pod-resources API.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct GpuHolder {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// The MIG instance held (its UUID), when the container holds an instance rather than the GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_uuid: Option<String>,
}

#[cfg(test)]
mod tests {
    use kube::{CustomResourceExt, Resource};

    use super::*;

    #[test]
    fn crd_is_cluster_scoped_in_sluice_group() {
        let crd = NodeGpuTopology::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.group, super::super::GROUP);
        assert_eq!(NodeGpuTopology::api_version(&()), "sluice.dev/v1alpha1");
    }

    #[test]
    fn yaml_round_trips() {
        let doc = r#"
apiVersion: sluice.dev/v1alpha1
kind: NodeGpuTopology
metadata: {name: n1}
spec:
  nodeName: n1
  gpus:
  - {index: 0, uuid: GPU-a, model: NVIDIA H100, memoryMib: 81559, health: {healthy: true}}
  - {index: 1, uuid: GPU-b, model: NVIDIA H100, memoryMib: 81559, health: {healthy: false, xidErrors: [79]}}
  nvlinkIslands: [{gpus: [0, 1], nvswitch: true}]
  fabricClique: 7b96.1
"#;
        let t: NodeGpuTopology = serde_yaml::from_str(doc).unwrap();
        assert_eq!(t.spec.gpus.gpus[1].health.xid_errors, vec![79]);
        assert_eq!(t.spec.gpus.fabric_clique.as_deref(), Some("7b96.1"));
        let back: NodeGpuTopology =
            serde_yaml::from_str(&serde_yaml::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
