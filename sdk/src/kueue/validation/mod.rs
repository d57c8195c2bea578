//! One validation per Kueue object, shared by the admission webhook and the engine's ingestion so neither accepts
//! what the other rejects.
//!
//! It reimplements, in one place, what Kueue v0.19.2 enforces through its CRD schemas (OpenAPI limits and CEL
//! rules) and its Go webhooks, with Kueue's and Kubernetes' messages. Enumerations that the v1beta2 types model as
//! Rust enums (stopPolicy, queueingStrategy, preemption policies, ...) are already enforced by decoding. Kueue's
//! feature gates are taken at their v0.19.2 defaults.
//!
//! ```
//! use sluice_sdk::kueue::decode::decode;
//! use sluice_sdk::kueue::validation::validate;
//!
//! let doc = serde_json::json!({
//!     "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
//!     "spec": {"resourceGroups": [{"coveredResources": ["cpu"],
//!         "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1", "lendingLimit": "2"}]}]}]}
//! });
//! let err = validate(&decode(doc).unwrap()).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "ClusterQueue \"cq\" is invalid: \
//!      spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: \"2\": must be nil when cohort is empty; \
//!      spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: \"2\": must be less than or equal to the nominalQuota"
//! );
//! ```

mod admissioncheck;
mod clusterqueue;
mod cohort;
mod common;
mod errors;
mod gates;
pub mod job;
pub mod jobset;
pub mod kubeflow;
mod localqueue;
pub mod lws;
mod names;
mod quantity;
pub mod ray;
mod resourceflavor;
mod topology;
pub mod trainer;
mod workload;
mod workload_status;
mod workloadpriorityclass;

pub use admissioncheck::{validate_admission_check, validate_admission_check_update};
pub use clusterqueue::{validate_cluster_queue, validate_cluster_queue_update};
pub use cohort::validate_cohort;
pub use errors::{ErrorKind, FieldError, ValidationErrors};
pub use localqueue::{validate_local_queue, validate_local_queue_update};
pub use resourceflavor::{validate_resource_flavor, validate_resource_flavor_update};
pub use topology::{validate_topology, validate_topology_update};
pub use workload::{has_quota_reservation, validate_workload, validate_workload_update};
pub use workloadpriorityclass::validate_workload_priority_class;

use super::decode::KueueObject;

/// Kueue's checks of a Configuration's `managedJobsNamespaceSelector`: a well-formed selector that leaves out
/// `kube-system` and Kueue's own namespace (`kueue_namespace`); the violations, none when it is good.
pub fn validate_managed_jobs_namespace_selector(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    kueue_namespace: Option<&str>,
) -> Vec<FieldError> {
    let mut errs = errors::Errors::default();
    let path = errors::Path::new("managedJobsNamespaceSelector");
    common::label_selector(&mut errs, &path, Some(selector));
    let prohibited =
        std::iter::once("kube-system").chain(kueue_namespace.filter(|n| !n.is_empty()));
    for ns in prohibited {
        if super::namespaces::selects_namespace(selector, ns, None) {
            errs.invalid_omitted(&path, format!("should not match the {ns:?} namespace"));
        }
    }
    errs.0
}

/// Validates an object for creation.
pub fn validate(obj: &KueueObject) -> Result<(), ValidationErrors> {
    match obj {
        KueueObject::ResourceFlavor(o) => validate_resource_flavor(o),
        KueueObject::ClusterQueue(o) => validate_cluster_queue(o),
        KueueObject::LocalQueue(o) => validate_local_queue(o),
        KueueObject::Cohort(o) => validate_cohort(o),
        KueueObject::Workload(o) => validate_workload(o),
        KueueObject::WorkloadPriorityClass(o) => validate_workload_priority_class(o),
        KueueObject::Topology(o) => validate_topology(o),
        KueueObject::AdmissionCheck(o) => validate_admission_check(o),
    }
}

/// Validates an update from `old` to `new`: every creation rule on `new`, plus the immutability rules.
pub fn validate_update(old: &KueueObject, new: &KueueObject) -> Result<(), ValidationErrors> {
    use KueueObject as K;
    match (old, new) {
        (K::ResourceFlavor(o), K::ResourceFlavor(n)) => validate_resource_flavor_update(o, n),
        (K::ClusterQueue(o), K::ClusterQueue(n)) => validate_cluster_queue_update(o, n),
        (K::LocalQueue(o), K::LocalQueue(n)) => validate_local_queue_update(o, n),
        (K::Workload(o), K::Workload(n)) => validate_workload_update(o, n),
        (K::Topology(o), K::Topology(n)) => validate_topology_update(o, n),
        (K::AdmissionCheck(o), K::AdmissionCheck(n)) => validate_admission_check_update(o, n),
        // Kueue has no update-only rules for these.
        (K::Cohort(_), K::Cohort(n)) => validate_cohort(n),
        (K::WorkloadPriorityClass(_), K::WorkloadPriorityClass(n)) => {
            validate_workload_priority_class(n)
        }
        (o, n) => Err(ValidationErrors {
            kind: n.kind().to_owned(),
            name: n.name().to_owned(),
            errors: vec![FieldError {
                field: "kind".to_owned(),
                kind: ErrorKind::Invalid,
                value: Some(format!("{:?}", n.kind())),
                message: format!("may not change from {:?}", o.kind()),
            }],
        }),
    }
}
