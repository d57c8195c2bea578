//! The rules Kueue's JobSet webhook enforces: the job-framework labels on the JobSet's metadata, the topology
//! annotations of each replicated job's pod template, and the pod-set groups they form.

use std::collections::BTreeMap;

use super::errors::{Errors, Path, ValidationErrors};
use super::job::{
    GroupMember, meta_create_rules, meta_update_rules, name, pod_set_group_rules,
    template_topology_rules,
};
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
    let mut members = Vec::new();
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
        members.push(GroupMember {
            count: rj.pods_count(),
            annotations: ann,
            path,
        });
    }
    pod_set_group_rules(errs, &members);
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

    /// A JobSet whose driver (1 pod) and workers (4 pods) carry `driver` and `workers` annotations.
    fn grouped(driver: serde_json::Value, workers: serde_json::Value) -> JobSet {
        let mut js = jobset(json!({}), workers);
        let driver_template = js.spec.as_mut().unwrap().replicated_jobs[0].pod_template_mut();
        driver_template.metadata =
            Some(serde_json::from_value(json!({"annotations": driver})).unwrap());
        js
    }

    #[test]
    fn pod_set_groups_are_pairs_with_a_single_pod_at_one_level() {
        let g = l::PODSET_GROUP_NAME_ANNOTATION;
        let rack = |group: &str| json!({l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack", g: group});
        let workers = "spec.replicatedJobs[1].template.spec.template.metadata.annotations";
        let driver = "spec.replicatedJobs[0].template.spec.template.metadata.annotations";
        // The driver and its workers in one rack: a valid pair.
        assert!(validate_jobset(&grouped(rack("train"), rack("train"))).is_ok());
        // A group of one.
        let e = validate_jobset(&grouped(json!({}), rack("train"))).expect_err("alone");
        assert!(
            e.has(
                &format!("{workers}[{g}]"),
                "can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
            ),
            "{e}"
        );
        // Not at the same level: both annotations are named, each pointing at the other.
        let e = validate_jobset(&grouped(
            json!({l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "rack", g: "train"}),
            rack("train"),
        ))
        .expect_err("preferred against required");
        let expected = format!(
            "{driver}: Invalid value: must specify '{}' or '{}' topology consistent with '{workers}' in group 'train'",
            l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
            l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION
        );
        assert!(e.to_string().contains(&expected), "{e}");
        assert_eq!(e.at(workers).len(), 1, "{e}");
        // A group name needs a level of its own, and is no number.
        let e = validate_jobset(&grouped(json!({g: "7"}), json!({}))).expect_err("bare group name");
        assert!(
            e.has(&format!("{driver}[{g}]"), "must not be a number"),
            "{e}"
        );
        assert!(
            e.has(
                &format!("{driver}[{g}]"),
                &format!(
                    "may not be set when neither '{}' nor '{}' is specified",
                    l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
                    l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION
                )
            ),
            "{e}"
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
