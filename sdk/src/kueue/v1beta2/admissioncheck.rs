//! AdmissionCheck: an external gate a workload must pass before admission.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of an AdmissionCheck.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "AdmissionCheck",
    plural = "admissionchecks",
    shortname = "ac",
    status = "AdmissionCheckStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "AdmissionCheck is the Schema for the admissionchecks API."
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// Name of the controller that handles this check (immutable).
    pub controller_name: String,
    /// Reference to a controller-specific parameters object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParametersReference>,
}

/// Reference to a parameters object of an AdmissionCheck.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckParametersReference {
    /// API group of the referenced object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Kind of the referenced object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the referenced object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Status of an AdmissionCheck.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    /// Conditions, notably `Active`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// State of one admission check on a workload.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum CheckState {
    /// The check has not decided yet.
    #[default]
    Pending,
    /// The check passed.
    Ready,
    /// The check asks to retry: quota is released and the workload requeued.
    Retry,
    /// The check rejected the workload, which gets deactivated.
    Rejected,
}
