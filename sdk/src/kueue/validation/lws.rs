//! The rules Kueue's LeaderWorkerSet webhook enforces: the queue name, the replica count, the topology
//! annotations of the leader and worker templates; on update, while Kueue manages the LeaderWorkerSet, templates
//! whose pod shapes stay as they were and a group size that does not change (gate LWSImmutableGroupSize, on).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::errors::{Errors, Path, ValidationErrors, quote};
use super::job::{
    GroupMember, IMMUTABLE, name, pod_set_group_rules, pod_spec_shape, queue_name_rules,
    template_topology_rules,
};
use crate::kueue::labels as l;
use crate::lws::{LeaderWorkerSet, MAX_REPLICAS};

/// How Kueue names a LeaderWorkerSet in its errors.
const KIND: &str = "LeaderWorkerSet.leaderworkerset.x-k8s.io";

/// Validates a LeaderWorkerSet on creation.
pub fn validate_lws(lws: &LeaderWorkerSet) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    create_rules(&mut errs, lws);
    errs.finish(KIND, name(&lws.metadata))
}

/// Validates an update of a LeaderWorkerSet; `managed` says whether Kueue manages the new object (it has a queue
/// name, or jobs without one are managed), which freezes its pod shapes and group size.
pub fn validate_lws_update(
    old: &LeaderWorkerSet,
    new: &LeaderWorkerSet,
    managed: bool,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    create_rules(&mut errs, new);
    let label = |lws: &LeaderWorkerSet, key: &str| -> String {
        lws.metadata
            .labels
            .as_ref()
            .and_then(|m| m.get(key))
            .cloned()
            .unwrap_or_default()
    };
    // Kueue counts a LeaderWorkerSet with no ready group as suspended.
    let suspended = old.ready_replicas() == 0;
    let (old_q, new_q) = (
        label(old, l::QUEUE_NAME_LABEL),
        label(new, l::QUEUE_NAME_LABEL),
    );
    if (!suspended || new_q.is_empty()) && new_q != old_q {
        errs.immutable(
            &Path::new("metadata")
                .child("labels")
                .key(l::QUEUE_NAME_LABEL),
            quote(&new_q),
            IMMUTABLE,
        );
    }
    let wpc_path = Path::new("metadata")
        .child("labels")
        .key(l::PRIORITY_CLASS_LABEL);
    let (old_wpc, new_wpc) = (
        label(old, l::PRIORITY_CLASS_LABEL),
        label(new, l::PRIORITY_CLASS_LABEL),
    );
    if !suspended && old_wpc.is_empty() && !new_wpc.is_empty() {
        errs.invalid_str(
            &wpc_path,
            &new_wpc,
            "WorkloadPriorityClass cannot be added to a non-suspended workload",
        );
    } else if new_wpc.is_empty() && !old_wpc.is_empty() {
        errs.invalid_str(
            &wpc_path,
            &new_wpc,
            "WorkloadPriorityClass cannot be removed from a workload",
        );
    }
    if managed {
        let lwt = Path::new("spec").child("leaderWorkerTemplate");
        let (o, n) = (
            &old.spec.leader_worker_template,
            &new.spec.leader_worker_template,
        );
        immutable_template(
            &mut errs,
            n.leader_template.as_ref(),
            o.leader_template.as_ref(),
            &lwt.child("leaderTemplate"),
        );
        immutable_template(
            &mut errs,
            Some(&n.worker_template),
            Some(&o.worker_template),
            &lwt.child("workerTemplate"),
        );
        if new.size() != old.size() {
            errs.immutable(&lwt.child("size"), new.size().to_string(), IMMUTABLE);
        }
    }
    errs.finish(KIND, name(&new.metadata))
}

fn create_rules(errs: &mut Errors, lws: &LeaderWorkerSet) {
    queue_name_rules(errs, &lws.metadata);
    let replicas = lws.replicas();
    let bound = if replicas < 0 {
        Some(format!("must be >= 0, got {replicas}"))
    } else if replicas > MAX_REPLICAS {
        Some(format!("must be <= {MAX_REPLICAS}, got {replicas}"))
    } else {
        None
    };
    if let Some(b) = bound {
        errs.invalid(
            &Path::new("spec").child("replicas"),
            replicas.to_string(),
            format!("invalid LeaderWorkerSet replicas: {b}"),
        );
    }
    let lwt = &lws.spec.leader_worker_template;
    let empty = BTreeMap::new();
    let annotations = |t: &'_ PodTemplateSpec| -> BTreeMap<String, String> {
        t.metadata
            .as_ref()
            .and_then(|m| m.annotations.clone())
            .unwrap_or_else(|| empty.clone())
    };
    let base = Path::new("spec").child("leaderWorkerTemplate");
    let mut templates = Vec::new();
    let workers = match &lwt.leader_template {
        Some(leader) => {
            templates.push((annotations(leader), base.child("leaderTemplate"), 1));
            lws.size() - 1
        }
        None => lws.size(),
    };
    templates.push((
        annotations(&lwt.worker_template),
        base.child("workerTemplate"),
        workers,
    ));
    for (ann, path, count) in &templates {
        template_topology_rules(
            errs,
            ann,
            &path.child("metadata").child("annotations"),
            *count,
        );
    }
    let members: Vec<GroupMember<'_>> = templates
        .iter()
        .map(|(ann, path, count)| GroupMember {
            count: *count,
            annotations: ann,
            path: path.child("metadata").child("annotations"),
        })
        .collect();
    pod_set_group_rules(errs, &members);
}

/// Kueue's `ValidateImmutablePodGroupPodSpec` on one template: a template added or removed is an error on the
/// template, else each differing part of the pod shape is an error on its own path (values shown as JSON).
fn immutable_template(
    errs: &mut Errors,
    new: Option<&PodTemplateSpec>,
    old: Option<&PodTemplateSpec>,
    path: &Path,
) {
    let (new, old) = match (new, old) {
        (None, None) => return,
        (Some(n), Some(o)) => (n, o),
        (n, _) => {
            let shown = n.map_or("null".to_string(), |t| {
                serde_json::to_string(t).unwrap_or_default()
            });
            errs.immutable(path, shown, IMMUTABLE);
            return;
        }
    };
    let shape = |t: &PodTemplateSpec| pod_spec_shape(&t.spec.clone().unwrap_or_default());
    compare_shapes(errs, &shape(new), &shape(old), &path.child("spec"));
}

fn compare_shapes(errs: &mut Errors, new: &Value, old: &Value, path: &Path) {
    match (new, old) {
        (Value::Object(n), Value::Object(o)) if path_is_shape_map(n) => {
            let mut keys: Vec<&String> = n.keys().chain(o.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let null = Value::Null;
                compare_shapes(
                    errs,
                    n.get(k).unwrap_or(&null),
                    o.get(k).unwrap_or(&null),
                    &path.child(k),
                );
            }
        }
        (Value::Array(n), Value::Array(o))
            if n.len() == o.len() && n.iter().all(|v| v.get("ports").is_some()) =>
        {
            for (i, (a, b)) in n.iter().zip(o).enumerate() {
                compare_shapes(errs, a, b, &path.index(i));
            }
        }
        _ if new != old => errs.immutable(
            path,
            serde_json::to_string(new).unwrap_or_default(),
            IMMUTABLE,
        ),
        _ => {}
    }
}

/// Kueue recurses into the shape's own maps (the spec shape, each container's, its `resources`), not into the
/// pod's fields themselves (a changed node selector is one error on `nodeSelector`).
fn path_is_shape_map(m: &serde_json::Map<String, Value>) -> bool {
    m.contains_key("containers") || m.contains_key("ports") || m.contains_key("requests")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lws(labels: Value, replicas: i32, gpus: u32, ready: i32) -> LeaderWorkerSet {
        serde_json::from_value(json!({
            "metadata": {"name": "infer", "namespace": "ml", "labels": labels},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 4,
                "leaderTemplate": {"spec": {"containers": [{"name": "l", "image": "x"}]}},
                "workerTemplate": {"metadata": {"annotations": {}},
                    "spec": {"containers": [{"name": "w", "image": "x",
                        "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()}}}]}}}},
            "status": {"readyReplicas": ready}
        }))
        .expect("lws")
    }

    #[test]
    fn replicas_and_queue_name_are_checked_on_creation() {
        let e = validate_lws(&lws(json!({l::QUEUE_NAME_LABEL: "Bad_Q"}), -1, 1, 0))
            .expect_err("invalid");
        let s = e.to_string();
        assert!(
            s.starts_with("LeaderWorkerSet.leaderworkerset.x-k8s.io \"infer\" is invalid: "),
            "{s}"
        );
        assert!(
            e.has(
                "spec.replicas",
                "invalid LeaderWorkerSet replicas: must be >= 0, got -1"
            ),
            "{s}"
        );
        assert!(
            s.contains("metadata.labels[kueue.x-k8s.io/queue-name]"),
            "{s}"
        );
        assert!(validate_lws(&lws(json!({l::QUEUE_NAME_LABEL: "team"}), 3, 1, 0)).is_ok());
        let e = validate_lws(&lws(json!({}), MAX_REPLICAS + 1, 1, 0)).expect_err("too many");
        assert!(
            e.has(
                "spec.replicas",
                "invalid LeaderWorkerSet replicas: must be <= 1000000, got 1000001"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_queue_name_may_change_only_while_no_group_is_ready() {
        let q = |name: &str| json!({l::QUEUE_NAME_LABEL: name});
        assert!(validate_lws_update(&lws(q("a"), 1, 1, 0), &lws(q("b"), 1, 1, 0), true).is_ok());
        let e = validate_lws_update(&lws(q("a"), 1, 1, 1), &lws(q("b"), 1, 1, 1), true)
            .expect_err("ready");
        assert!(
            e.has(
                "metadata.labels[kueue.x-k8s.io/queue-name]",
                "field is immutable"
            ),
            "{e}"
        );
        let e = validate_lws_update(&lws(q("a"), 1, 1, 0), &lws(json!({}), 1, 1, 0), false)
            .expect_err("removed");
        assert!(e.to_string().contains("queue-name"), "{e}");
    }

    #[test]
    fn a_managed_lws_keeps_its_pod_shapes_and_group_size() {
        let q = json!({l::QUEUE_NAME_LABEL: "a"});
        let old = lws(q.clone(), 1, 1, 0);
        // Replicas may change (that is how an inference service scales); the image is not part of the shape.
        let mut scaled = lws(q.clone(), 5, 1, 0);
        scaled
            .spec
            .leader_worker_template
            .worker_template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("y".into());
        assert!(validate_lws_update(&old, &scaled, true).is_ok());
        let e = validate_lws_update(&old, &lws(q.clone(), 1, 2, 0), true).expect_err("shape");
        assert!(
            e.has(
                "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests",
                "field is immutable"
            ),
            "{e}"
        );
        let mut resized = lws(q.clone(), 1, 1, 0);
        resized.spec.leader_worker_template.size = Some(8);
        let e = validate_lws_update(&old, &resized, true).expect_err("size");
        assert!(
            e.has("spec.leaderWorkerTemplate.size", "field is immutable"),
            "{e}"
        );
        let mut leaderless = lws(q, 1, 1, 0);
        leaderless.spec.leader_worker_template.leader_template = None;
        let e = validate_lws_update(&old, &leaderless, true).expect_err("leader removed");
        assert!(
            e.has(
                "spec.leaderWorkerTemplate.leaderTemplate",
                "field is immutable"
            ),
            "{e}"
        );
        // Not managed: nothing is frozen.
        assert!(validate_lws_update(&old, &resized, false).is_ok());
    }

    #[test]
    fn topology_annotations_are_checked_against_the_workers_count() {
        let mut set = lws(json!({}), 1, 1, 0);
        set.spec
            .leader_worker_template
            .worker_template
            .metadata
            .as_mut()
            .unwrap()
            .annotations = Some(BTreeMap::from([
            (
                l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION.to_string(),
                "rack".to_string(),
            ),
            (l::PODSET_SLICE_SIZE_ANNOTATION.to_string(), "4".to_string()),
        ]));
        let e = validate_lws(&set).expect_err("slice of 4 among 3 workers");
        assert!(
            e.has(
                &format!(
                    "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations[{}]",
                    l::PODSET_SLICE_SIZE_ANNOTATION
                ),
                "must not be greater than pod set count 3"
            ),
            "{e}"
        );
    }
}
