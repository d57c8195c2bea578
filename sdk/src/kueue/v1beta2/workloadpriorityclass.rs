//! WorkloadPriorityClass: a named priority value for workloads.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Top-level fields of a WorkloadPriorityClass (Kueue puts them beside `metadata`, not in a spec).
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "WorkloadPriorityClass",
    plural = "workloadpriorityclasses",
    shortname = "wpc",
    no_spec,
    printcolumn(
        name = "Value",
        type_ = "integer",
        json_path = ".value",
        description = "Value of workloadPriorityClass's Priority"
    ),
    derive = "PartialEq",
    derive = "Default",
    doc = "WorkloadPriorityClass is the Schema for the workloadPriorityClass API."
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClassFields {
    /// Priority value of workloads using this class.
    pub value: i32,
    /// Free-form description (at most 2048 characters).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 2048))]
    pub description: String,
}
