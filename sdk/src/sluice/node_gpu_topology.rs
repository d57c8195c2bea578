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
