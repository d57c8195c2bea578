//! Sluice's own API group, `sluice.dev`: the objects Kueue has no kind for.

/// API group of Sluice's own kinds.
pub const GROUP: &str = "sluice.dev";
/// Served and stored version of Sluice's own kinds.
pub const VERSION: &str = "v1alpha1";

pub mod node_gpu_topology;
pub mod policy_module;

/// Sluice's own CRDs (PolicyModule, NodeGpuTopology), their integer formats the ones Kubernetes knows.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::CustomResourceExt;
    [
        policy_module::PolicyModule::crd(),
        node_gpu_topology::NodeGpuTopology::crd(),
    ]
    .into_iter()
    .map(|crd| {
        // schemars writes `uint32`/`uint64` for unsigned fields, which the API server warns it does not know; it
        // also writes `minimum: 0` there, so the signed formats lose nothing.
        let mut v = serde_json::to_value(&crd).expect("a CRD is plain data");
        kubernetes_formats(&mut v);
        serde_json::from_value(v).unwrap_or(crd)
    })
    .collect()
}

fn kubernetes_formats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(f) = m.get_mut("format") {
                if f == "uint32" {
                    *f = "int32".into();
                } else if f == "uint64" {
                    *f = "int64".into();
                }
            }
            m.values_mut().for_each(kubernetes_formats);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(kubernetes_formats),
        _ => {}
    }
}

/// Sluice's own CRDs as multi-document YAML, as `sluice crds` prints them after Kueue's.
pub fn crds_yaml() -> String {
    crate::kueue::crds::to_yaml(&crds())
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_integer_formats_kubernetes_knows() {
        let yaml = super::crds_yaml();
        assert!(!yaml.contains("format: uint"), "{yaml}");
        assert!(yaml.contains("format: int64"));
    }
}
