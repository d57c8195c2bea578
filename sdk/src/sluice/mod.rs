//! Sluice's own API group, `sluice.dev`: the objects Kueue has no kind for.

/// API group of Sluice's own kinds.
pub const GROUP: &str = "sluice.dev";
/// Served and stored version of Sluice's own kinds.
pub const VERSION: &str = "v1alpha1";

pub mod node_gpu_topology;
pub mod policy_module;

/// Sluice's own CRDs (PolicyModule, NodeGpuTopology) as multi-document YAML, as `sluice crds` prints them after
/// Kueue's.
pub fn crds_yaml() -> String {
    use kube::CustomResourceExt;
    let mut out = String::new();
    for crd in [
        policy_module::PolicyModule::crd(),
        node_gpu_topology::NodeGpuTopology::crd(),
    ] {
        out.push_str("---\n");
        match serde_yaml::to_string(&crd) {
            Ok(y) => out.push_str(&y),
            Err(e) => out.push_str(&format!("# cannot render {:?}: {e}\n", crd.metadata.name)),
        }
    }
    out
}
