//! The rules Kueue's TrainJob webhook enforces: the job-framework labels on the TrainJob's metadata, and the
//! topology annotations of each pod set of the JobSet the TrainJob becomes on its runtime. A TrainJob whose
//! runtime cannot be found (or is of a kind that is no runtime) is denied with Kueue's message.

use std::collections::BTreeMap;

use thiserror::Error;

use super::errors::{Errors, Path, ValidationErrors};
use super::job::{meta_create_rules, meta_update_rules, name, template_topology_rules};
use crate::trainer::TrainJob;

/// How Kueue names a TrainJob in its errors.
const KIND: &str = "TrainJob.trainer.kubeflow.org";
/// What Kueue adds to each topology error of a TrainJob.
const TOPOLOGY_HINT: &str = ". Adjust either the \"TrainJob.spec.runtimePatches\" or the \"TrainingRuntime.Template\" annotations for the corresponding Job";

/// Why a TrainJob is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TrainJobRejection {
    /// Field errors, as for any object.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// Its pod sets cannot be built: Kueue denies it with this message alone.
    #[error("{0}")]
    NoPodSets(String),
}

/// Validates a TrainJob on creation; its `runtime` must be resolved.
pub fn validate_trainjob(tj: &TrainJob) -> Result<(), TrainJobRejection> {
    let mut errs = Errors::default();
    create_rules(&mut errs, tj)?;
    Ok(errs.finish(KIND, name(&tj.metadata))?)
}

/// Validates an update of a TrainJob; `default_queue_exists` says whether its namespace has a LocalQueue named
/// `default` (the queue-name label may then not be removed).
pub fn validate_trainjob_update(
    old: &TrainJob,
    new: &TrainJob,
    default_queue_exists: bool,
) -> Result<(), TrainJobRejection> {
    let mut errs = Errors::default();
    meta_update_rules(
        &mut errs,
        &old.metadata,
        &new.metadata,
        old.is_suspended(),
        new.is_suspended(),
        default_queue_exists,
    );
    create_rules(&mut errs, new)?;
    Ok(errs.finish(KIND, name(&new.metadata))?)
}

fn create_rules(errs: &mut Errors, tj: &TrainJob) -> Result<(), TrainJobRejection> {
    meta_create_rules(errs, &tj.metadata);
    let js = tj.child_jobset().map_err(TrainJobRejection::NoPodSets)?;
    let empty = BTreeMap::new();
    let mut topology = Errors::default();
    for rj in js.replicated_jobs() {
        let ann = rj
            .pod_template()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .unwrap_or(&empty);
        let path = Path::new("job")
            .key(&rj.name.to_lowercase())
            .child("annotations");
        template_topology_rules(&mut topology, ann, &path, rj.pods_count());
    }
    for mut e in topology.0 {
        e.message.push_str(TOPOLOGY_HINT);
        errs.0.push(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::kueue::labels as l;
    use crate::trainer::TrainingRuntimeSpec;
    use serde_json::json;

    fn runtime(annotations: serde_json::Value) -> TrainingRuntimeSpec {
        serde_json::from_value(json!({"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {
                "metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "node"}]}}}}}
        ]}}}))
        .unwrap()
    }

    fn trainjob(labels: serde_json::Value, runtime: Option<TrainingRuntimeSpec>) -> TrainJob {
        let mut tj: TrainJob = serde_json::from_value(json!({
            "metadata": {"name": "t", "namespace": "ml", "labels": labels},
            "spec": {"runtimeRef": {"name": "torch"}}
        }))
        .unwrap();
        tj.runtime = Some(Arc::new(runtime.ok_or_else(|| tj.runtime_not_found())));
        tj
    }

    #[test]
    fn a_missing_runtime_is_denied_with_kueues_message() {
        let e = validate_trainjob(&trainjob(json!({}), None)).unwrap_err();
        assert_eq!(e.to_string(), "runtime 'torch' not found");
        // Even with other field errors (Kueue returns the error, not the list).
        let e =
            validate_trainjob(&trainjob(json!({l::QUEUE_NAME_LABEL: "Bad_Q"}), None)).unwrap_err();
        assert_eq!(e.to_string(), "runtime 'torch' not found");
    }

    #[test]
    fn topology_annotations_are_checked_per_pod_set_with_kueues_hint() {
        let tj = trainjob(
            json!({}),
            Some(runtime(json!({
                l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                l::PODSET_SLICE_SIZE_ANNOTATION: "2"}))),
        );
        let e = validate_trainjob(&tj).unwrap_err();
        let TrainJobRejection::Invalid(errs) = e else {
            panic!("{e}")
        };
        let field = format!("job[node].annotations[{}]", l::PODSET_SLICE_SIZE_ANNOTATION);
        assert!(
            errs.has(
                &field,
                &format!("must not be greater than pod set count 1{TOPOLOGY_HINT}")
            ),
            "{errs}"
        );
        assert!(validate_trainjob(&trainjob(json!({}), Some(runtime(json!({}))))).is_ok());
    }

    #[test]
    fn the_queue_name_label_is_checked_as_on_a_job() {
        let e = validate_trainjob(&trainjob(
            json!({l::QUEUE_NAME_LABEL: "Bad_Q"}),
            Some(runtime(json!({}))),
        ))
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "TrainJob.trainer.kubeflow.org \"t\" is invalid: metadata.labels[kueue.x-k8s.io/queue-name]"
            ),
            "{e}"
        );
    }
}
