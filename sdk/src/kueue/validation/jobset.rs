//! The rules Kueue's JobSet webhook enforces: the job-framework labels on the JobSet's metadata, and the topology
//! annotations of each replicated job's pod template.

use std::collections::BTreeMap;

use super::errors::{Errors, Path, ValidationErrors};
use super::job::{meta_create_rules, meta_update_rules, name, template_topology_rules};
use crate::jobset::JobSet;

/// How Kueue names a JobSet in its errors.
const KIND: &str = "JobSet.jobset.x-k8s.io";

/// Validates a JobSet on creation.
pub fn validate_jobset(js: &JobSet) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    create_rules(&mut errs, js);
    errs.finish(KIND, name(&js.metadata))
}

/// Validates an update of a JobSet; `default_queue_exists` says whether its namespace has a LocalQueue named
/// `default` (the queue-name label may then not be removed).
pub fn validate_jobset_update(
    old: &JobSet,
    new: &JobSet,
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

fn create_rules(errs: &mut Errors, js: &JobSet) {
    meta_create_rules(errs, &js.metadata);
    let empty = BTreeMap::new();
    for (i, rj) in js.replicated_jobs().iter().enumerate() {
        let ann = rj
            .pod_template()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .unwrap_or(&empty);
        let path = Path::new("spec")
            .child("replicatedJobs")
            .index(i)
            .child("template")
            .child("spec")
            .child("template")
            .child("metadata")
            .child("annotations");
        template_topology_rules(errs, ann, &path, rj.pods_count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kueue::labels as l;
    use serde_json::json;

    fn jobset(labels: serde_json::Value, worker_annotations: serde_json::Value) -> JobSet {
        serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml", "labels": labels},
            "spec": {"replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {"template": {"spec": {"containers": []}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2, "completions": 2,
                    "template": {"metadata": {"annotations": worker_annotations}, "spec": {"containers": []}}}}}
            ]}
        }))
        .expect("jobset")
    }

    #[test]
    fn the_queue_name_label_is_checked_as_on_a_job() {
        let e = validate_jobset(&jobset(json!({l::QUEUE_NAME_LABEL: "Bad_Q"}), json!({})))
            .expect_err("invalid");
        assert!(
            e.to_string().starts_with(
                "JobSet.jobset.x-k8s.io \"train\" is invalid: metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Bad_Q\""
            ),
            "{e}"
        );
        assert!(validate_jobset(&jobset(json!({l::QUEUE_NAME_LABEL: "team"}), json!({}))).is_ok());
    }

    #[test]
    fn topology_annotations_are_checked_per_replicated_job_against_its_pod_count() {
        let e = validate_jobset(&jobset(
            json!({}),
            json!({l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                   l::PODSET_SLICE_SIZE_ANNOTATION: "5"}),
        ))
        .expect_err("slice larger than the pod set");
        let field = format!(
            "spec.replicatedJobs[1].template.spec.template.metadata.annotations[{}]",
            l::PODSET_SLICE_SIZE_ANNOTATION
        );
        assert!(
            e.has(&field, "must not be greater than pod set count 4"),
            "{e}"
        );
        let e = validate_jobset(&jobset(
            json!({}),
            json!({l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                   l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "block"}),
        ))
        .expect_err("two topology annotations");
        assert!(
            !e.at("spec.replicatedJobs[1].template.spec.template.metadata.annotations")
                .is_empty()
        );
    }

    #[test]
    fn the_queue_name_may_not_change_once_running() {
        let mut old = jobset(json!({l::QUEUE_NAME_LABEL: "a"}), json!({}));
        old.spec.as_mut().unwrap().suspend = Some(false);
        let mut new = old.clone();
        new.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(l::QUEUE_NAME_LABEL.into(), "b".into());
        let e = validate_jobset_update(&old, &new, false).expect_err("changed while running");
        assert!(
            !e.at("metadata.labels[kueue.x-k8s.io/queue-name]")
                .is_empty(),
            "{e}"
        );
        let mut suspended = old.clone();
        suspended.spec.as_mut().unwrap().suspend = Some(true);
        let mut moved = suspended.clone();
        moved
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(l::QUEUE_NAME_LABEL.into(), "b".into());
        assert!(validate_jobset_update(&suspended, &moved, false).is_ok());
    }
}
