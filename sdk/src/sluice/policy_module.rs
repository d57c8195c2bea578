//! `PolicyModule` (`sluice.dev/v1alpha1`): a placement, fairness or preemption-cost policy compiled
//! to WebAssembly.
//!
//! Cluster-scoped, like the ClusterQueues that select it: a ClusterQueue names a module in the
//! annotation [`PLACEMENT_POLICY_ANNOTATION`], [`FAIRNESS_POLICY_ANNOTATION`] or
//! [`PREEMPTION_POLICY_ANNOTATION`], and an annotation has no namespace to resolve a namespaced
//! name in. The module bytes come inline
//! (`spec.module`, base64) or from a ConfigMap's `binaryData` (`spec.configMapRef`); either way
//! `spec.sha256` pins them.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// ClusterQueue annotation naming the PolicyModule that scores nodes for its workloads.
pub const PLACEMENT_POLICY_ANNOTATION: &str = "sluice.dev/placement-policy";
/// ClusterQueue annotation naming the PolicyModule that orders its cohort's heads.
pub const FAIRNESS_POLICY_ANNOTATION: &str = "sluice.dev/fairness-policy";
/// ClusterQueue annotation naming the PolicyModule that boosts or protects the candidates of the
/// preemptions its workloads make.
pub const PREEMPTION_POLICY_ANNOTATION: &str = "sluice.dev/preemption-policy";
/// Workload annotation the operator writes: the boost its preemptor's preemption-cost policy last gave it as a
/// candidate (absent when 0). Kueue's own `kueue.x-k8s.io/priority-boost` is never written.
pub const PRIORITY_BOOST_ANNOTATION: &str = "sluice.dev/priority-boost";
/// Workload annotation the operator writes: `"true"` while the last preemption-cost answer about it protected
/// it from preemption (absent otherwise).
pub const PREEMPTION_PROTECTED_ANNOTATION: &str = "sluice.dev/preemption-protected";
/// Condition type: the module compiled, passed the import and world checks, and `init` accepted its config.
pub const CONDITION_COMPILED: &str = "Compiled";
/// Condition type: the module failed too many calls in a row and is no longer called.
pub const CONDITION_DEGRADED: &str = "Degraded";

/// The world a module implements.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// `sluice:policy/placement`: scores candidate nodes for a pod set.
    #[default]
    Placement,
    /// `sluice:policy/fairness`: shares and order of competing heads.
    Fairness,
    /// `sluice:policy/preemption-cost`: a priority boost or a protection per preemption candidate.
    PreemptionCost,
}

impl PolicyKind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Placement => "placement",
            Self::Fairness => "fairness",
            Self::PreemptionCost => "preemptioncost",
        }
    }
}

/// Where the module bytes live when not inline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapModuleRef {
    /// Namespace of the ConfigMap.
    pub namespace: String,
    /// Name of the ConfigMap.
    pub name: String,
    /// Key in `binaryData`.
    pub key: String,
}

/// Spec of a PolicyModule.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "sluice.dev",
    version = "v1alpha1",
    kind = "PolicyModule",
    plural = "policymodules",
    shortname = "pm",
    status = "PolicyModuleStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.kind"}"#,
    printcolumn = r#"{"name":"Compiled","type":"string","jsonPath":".status.conditions[?(@.type==\"Compiled\")].status"}"#,
    printcolumn = r#"{"name":"Degraded","type":"string","jsonPath":".status.conditions[?(@.type==\"Degraded\")].status"}"#,
    doc = "A Sluice placement, fairness or preemption-cost policy compiled to a WebAssembly component (wasm32-wasip2)."
)]
#[serde(rename_all = "camelCase")]
pub struct PolicyModuleSpec {
    /// The world the module implements.
    pub kind: PolicyKind,
    /// The component bytes (base64 in YAML/JSON); exclusive with `configMapRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub module: Option<ByteString>,
    /// A ConfigMap `binaryData` entry holding the component bytes; exclusive with `module`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ConfigMapModuleRef>,
    /// Lower-case hex sha256 of the component bytes.
    pub sha256: String,
    /// JSON configuration passed to the module's `init`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Deadline of one call in milliseconds (host default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u32>,
    /// Memory cap of an instance in bytes (host default when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
}

/// Status of a PolicyModule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyModuleStatus {
    /// `Compiled` and `Degraded` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// sha256 of the bytes the operator loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Failed calls by class (trap, deadline, memory, malformed, rejected, degraded).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, u64>,
    /// Calls made to the loaded version (failed ones included), as last written by the operator.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub calls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The PolicyModule CRD as YAML.
pub fn crd_yaml() -> String {
    match serde_yaml::to_string(&PolicyModule::crd()) {
        Ok(y) => format!("---\n{y}"),
        Err(e) => format!("# cannot render the PolicyModule CRD: {e}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_is_cluster_scoped_under_sluice_dev() {
        let crd = PolicyModule::crd();
        assert_eq!(crd.spec.group, "sluice.dev");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.versions[0].name, "v1alpha1");
        assert!(crd_yaml().contains("policymodules.sluice.dev"));
    }

    #[test]
    fn module_bytes_round_trip_as_base64() {
        let doc = serde_json::json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModule", "metadata": {"name": "pack"},
            "spec": {"kind": "placement", "module": "AGFzbQ0AAQA=", "sha256": "ab", "deadlineMs": 3}
        });
        let pm: PolicyModule = serde_json::from_value(doc).unwrap();
        assert_eq!(pm.spec.module.as_ref().unwrap().0, b"\0asm\r\0\x01\0");
        assert_eq!(pm.spec.deadline_ms, Some(3));
        let back = serde_json::to_value(&pm).unwrap();
        assert_eq!(back["spec"]["module"], "AGFzbQ0AAQA=");
    }

    #[test]
    fn kinds_are_written_as_the_schema_lists_them() {
        let crd = serde_json::to_value(PolicyModule::crd()).unwrap();
        let listed = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["kind"]["enum"];
        assert_eq!(
            listed,
            &serde_json::json!(["placement", "fairness", "preemptioncost"])
        );
        for kind in [
            PolicyKind::Placement,
            PolicyKind::Fairness,
            PolicyKind::PreemptionCost,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
