//! The rules Kueue's Kubeflow training webhooks enforce on a PyTorchJob: the job-framework labels on its metadata,
//! and the topology annotations of each replica type's pod template.

use std::collections::BTreeMap;

use super::errors::{Errors, Path, ValidationErrors};
use super::job::{meta_create_rules, meta_update_rules, name, template_topology_rules};
use crate::kubeflow::PyTorchJob;

/// How Kueue names a PyTorchJob in its errors.
const KIND: &str = "PyTorchJob.kubeflow.org";

/// Validates a PyTorchJob on creation.
pub fn validate_pytorchjob(job: &PyTorchJob) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    create_rules(&mut errs, job);
    errs.finish(KIND, name(&job.metadata))
}

/// Validates an update of a PyTorchJob; `default_queue_exists` says whether its namespace has a LocalQueue named
/// `default` (the queue-name label may then not be removed).
pub fn validate_pytorchjob_update(
    old: &PyTorchJob,
    new: &PyTorchJob,
    default_queue_exists: bool,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    meta_update_rules(
        &mut errs,
        &old.metadata,
        &new.metadata,
        old.is_suspended(),
        new.is_suspended(),
        default_queue_exists,
    );
    create_rules(&mut errs, new);
    errs.finish(KIND, name(&new.metadata))
}

fn create_rules(errs: &mut Errors, job: &PyTorchJob) {
    meta_create_rules(errs, &job.metadata);
    let empty = BTreeMap::new();
    for (replica_type, spec) in job.ordered_replicas() {
        let ann = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .unwrap_or(&empty);
        let path = Path::new("spec")
            .child("pytorchReplicaSpecs")
            .key(replica_type)
            .child("template")
            .child("metadata")
            .child("annotations");
        template_topology_rules(errs, ann, &path, spec.replicas.unwrap_or(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kueue::labels as l;
    use serde_json::json;

    fn job(labels: serde_json::Value, worker_annotations: serde_json::Value) -> PyTorchJob {
        serde_json::from_value(json!({
            "metadata": {"name": "mnist", "namespace": "ml", "labels": labels},
            "spec": {"runPolicy": {}, "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": []}}},
                "Worker": {"replicas": 3, "template": {"metadata": {"annotations": worker_annotations},
                    "spec": {"containers": []}}}
            }}
        }))
        .expect("pytorchjob")
    }

    #[test]
    fn labels_and_each_replica_types_topology_are_checked() {
        let e = validate_pytorchjob(&job(json!({l::QUEUE_NAME_LABEL: "Bad_Q"}), json!({})))
            .expect_err("bad queue name");
        assert!(
            e.to_string().starts_with(
                "PyTorchJob.kubeflow.org \"mnist\" is invalid: metadata.labels[kueue.x-k8s.io/queue-name]"
            ),
            "{e}"
        );
        let e = validate_pytorchjob(&job(
            json!({}),
            json!({l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                   l::PODSET_SLICE_SIZE_ANNOTATION: "4"}),
        ))
        .expect_err("slice larger than the replicas");
        let field = format!(
            "spec.pytorchReplicaSpecs[Worker].template.metadata.annotations[{}]",
            l::PODSET_SLICE_SIZE_ANNOTATION
        );
        assert!(
            e.has(&field, "must not be greater than pod set count 3"),
            "{e}"
        );
        assert!(validate_pytorchjob(&job(json!({l::QUEUE_NAME_LABEL: "q"}), json!({}))).is_ok());
    }
}
