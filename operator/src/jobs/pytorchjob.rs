//! The Kubeflow PyTorchJob integration (`kubeflow.org/v1`), as Kueue's Kubeflow job integration: one pod set per
//! replica type present, in the order `Master`, `Worker`, named after it in lower case, counting its replicas
//! (1 when unset); suspended through `spec.runPolicy.suspend`; no partial admission.

use std::collections::BTreeMap;

use sluice_sdk::kubeflow::{self, PyTorchJob};
use sluice_sdk::kueue::v1beta2::{PodSet, Workload};

use super::topology_request::template_topology_request;
use super::{
    JobError, JobIntegration, Owner, PodSetInfo, PriorityClasses, SuspendableJob, owned_workload,
};

/// The PyTorchJob kind.
pub struct PyTorchJobJob;

fn error(job: &PyTorchJob, field: &str, message: impl Into<String>) -> JobError {
    JobError {
        kind: PyTorchJobJob::KIND.to_string(),
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: job.metadata.name.clone().unwrap_or_default(),
        field: field.to_string(),
        message: message.into(),
    }
}

fn template_path(replica_type: &str) -> String {
    format!("spec.pytorchReplicaSpecs[{replica_type}].template")
}

impl PyTorchJobJob {
    /// Kueue's pod sets: per replica type present, its template and replicas, with a topology request ranking pods
    /// by the training operator's replica index.
    fn pod_sets(job: &PyTorchJob) -> Result<Vec<PodSet>, JobError> {
        let empty = BTreeMap::new();
        job.ordered_replicas()
            .into_iter()
            .map(|(replica_type, spec)| {
                let ann = spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.as_ref())
                    .unwrap_or(&empty);
                let mut req = template_topology_request(ann).map_err(|(key, message)| {
                    error(
                        job,
                        &format!(
                            "{}.metadata.annotations[{key}]",
                            template_path(replica_type)
                        ),
                        message,
                    )
                })?;
                req.pod_index_label = Some(kubeflow::REPLICA_INDEX_LABEL.to_string());
                Ok(PodSet {
                    name: replica_type.to_lowercase(),
                    template: spec.template.clone(),
                    count: spec.replicas.unwrap_or(1),
                    min_count: None,
                    topology_request: Some(req),
                })
            })
            .collect()
    }

    /// The Workload Kueue builds for the PyTorchJob.
    pub fn workload(job: &PyTorchJob, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        if job.spec.is_none() {
            return Err(error(job, "spec", "required"));
        }
        let pod_sets = Self::pod_sets(job)?;
        if pod_sets.is_empty() {
            return Err(error(
                job,
                "spec.pytorchReplicaSpecs",
                "must have a Master or a Worker replica spec",
            ));
        }
        // The run policy's priority class first, then the first replica type's template that names one.
        let policy_class = job
            .spec
            .as_ref()
            .and_then(|s| s.run_policy.scheduling_policy.as_ref())
            .map(|p| p.priority_class.as_str())
            .filter(|n| !n.is_empty())
            .map(|n| {
                (
                    n.to_string(),
                    "spec.runPolicy.schedulingPolicy.priorityClass".to_string(),
                )
            });
        let pod_class = policy_class.or_else(|| {
            job.ordered_replicas().into_iter().find_map(|(t, r)| {
                let name = r.template.spec.as_ref()?.priority_class_name.as_deref()?;
                (!name.is_empty()).then(|| {
                    (
                        name.to_string(),
                        format!("{}.spec.priorityClassName", template_path(t)),
                    )
                })
            })
        });
        owned_workload(
            Owner::of::<Self>(&job.metadata, pod_class),
            pod_sets,
            priorities,
        )
    }

    /// The replica types present, in order, mutably.
    fn replicas_mut(job: &mut PyTorchJob) -> Vec<&mut sluice_sdk::kubeflow::ReplicaSpec> {
        let Some(spec) = job.spec.as_mut() else {
            return Vec::new();
        };
        let mut by_type: BTreeMap<&str, &mut sluice_sdk::kubeflow::ReplicaSpec> = spec
            .replica_specs
            .iter_mut()
            .map(|(t, r)| (t.as_str(), r))
            .collect();
        kubeflow::PYTORCH_REPLICA_TYPES
            .iter()
            .filter_map(|t| by_type.remove(t))
            .collect()
    }
}

impl JobIntegration for PyTorchJobJob {
    type Job = PyTorchJob;
    const KIND: &'static str = kubeflow::PYTORCH_JOB_KIND;
    const GROUP: &'static str = kubeflow::GROUP;
    const API_VERSION: &'static str = kubeflow::API_VERSION;

    object_job_identity!(PyTorchJob);

    fn is_suspended(job: &PyTorchJob) -> bool {
        job.is_suspended()
    }

    /// Any replica type with an active pod.
    fn is_active(job: &PyTorchJob) -> bool {
        job.status
            .as_ref()
            .is_some_and(|s| s.replica_statuses.values().any(|r| r.active != 0))
    }

    /// The first `Succeeded` or `Failed` condition that is True, with its message.
    fn finished(job: &PyTorchJob) -> Result<Option<(bool, String)>, JobError> {
        Ok(job.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| {
                    (c.type_ == kubeflow::SUCCEEDED || c.type_ == kubeflow::FAILED)
                        && c.status == "True"
                })
                .map(|c| (c.type_ != kubeflow::FAILED, c.message.clone()))
        }))
    }

    /// Kueue reads the training operator's `Running` condition.
    fn pods_ready(job: &PyTorchJob, _: &Workload) -> bool {
        job.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == kubeflow::RUNNING && c.status == "True")
        })
    }
}

impl SuspendableJob for PyTorchJobJob {
    fn suspend(job: &mut PyTorchJob) {
        job.spec
            .get_or_insert_with(Default::default)
            .run_policy
            .suspend = Some(true);
    }

    /// Unsuspends with each pod set's info merged into its replica type's template, in Kueue's order.
    fn run_with(job: &mut PyTorchJob, infos: &[PodSetInfo]) -> Result<(), JobError> {
        let n = job.ordered_replicas().len();
        if infos.len() != n {
            return Err(error(
                job,
                "status.admission.podSetAssignments",
                format!("expected {n} pod sets, got {}", infos.len()),
            ));
        }
        let types: Vec<&str> = job.ordered_replicas().iter().map(|(t, _)| *t).collect();
        let mut merged = job.clone();
        for ((replica, info), t) in Self::replicas_mut(&mut merged)
            .into_iter()
            .zip(infos)
            .zip(types)
        {
            info.merge_into(&mut replica.template)
                .map_err(|m| error(job, &template_path(t), m))?;
        }
        merged
            .spec
            .get_or_insert_with(Default::default)
            .run_policy
            .suspend = Some(false);
        *job = merged;
        Ok(())
    }

    /// Puts back each replica type's template as the Workload recorded it.
    fn restore(job: &mut PyTorchJob, infos: &[PodSetInfo]) {
        for (replica, info) in Self::replicas_mut(job).into_iter().zip(infos) {
            info.restore_into(&mut replica.template);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::workload_name;
    use super::*;
    use sluice_sdk::kueue::labels;
    use sluice_sdk::kueue::v1beta2::{Admission, PodSetAssignment, ResourceFlavor};

    fn job() -> PyTorchJob {
        serde_yaml::from_str(
            r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mnist
  namespace: ml
  uid: 77777777-2222-3333-4444-555555555555
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  runPolicy: {suspend: true, cleanPodPolicy: None, schedulingPolicy: {priorityClass: high}}
  pytorchReplicaSpecs:
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        metadata:
          annotations: {kueue.x-k8s.io/podset-preferred-topology: example.com/rack}
        spec:
          containers: [{name: pytorch, image: x, resources: {requests: {nvidia.com/gpu: "1"}}}]
    Master:
      template:
        spec:
          containers: [{name: pytorch, image: x, resources: {requests: {cpu: "1"}}}]
"#,
        )
        .unwrap()
    }

    fn priorities() -> PriorityClasses {
        let mut p = PriorityClasses::default();
        let mut pc = k8s_openapi::api::scheduling::v1::PriorityClass::default();
        pc.metadata.name = Some("high".into());
        pc.value = Some(500);
        p.upsert_pod_class(&pc);
        p
    }

    #[test]
    fn master_then_worker_pod_sets_with_kueues_name_priority_and_ranks() {
        let wl = PyTorchJobJob::workload(&job(), &priorities()).unwrap();
        assert_eq!(
            wl.metadata.name.as_deref().unwrap(),
            workload_name(
                "PyTorchJob",
                "kubeflow.org",
                "mnist",
                "77777777-2222-3333-4444-555555555555"
            )
        );
        assert!(
            wl.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("pytorchjob-mnist-")
        );
        let sets: Vec<(&str, i32)> = wl
            .spec
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count))
            .collect();
        assert_eq!(sets, [("master", 1), ("worker", 3)]);
        assert_eq!(wl.spec.priority, Some(500));
        let req = wl.spec.pod_sets[1].topology_request.as_ref().unwrap();
        assert_eq!(req.preferred.as_deref(), Some("example.com/rack"));
        assert_eq!(
            req.pod_index_label.as_deref(),
            Some("training.kubeflow.org/replica-index")
        );
        let e = PyTorchJobJob::workload(&job(), &PriorityClasses::default()).unwrap_err();
        assert_eq!(e.field, "spec.runPolicy.schedulingPolicy.priorityClass");
    }

    #[test]
    fn runs_with_its_admission_by_replica_type_and_restores() {
        let original = job();
        let wl = PyTorchJobJob::workload(&original, &priorities()).unwrap();
        let mut flavor = ResourceFlavor::default();
        flavor.metadata.name = Some("gpu".into());
        flavor.spec.node_labels = BTreeMap::from([("pool".to_string(), "a100".to_string())]);
        let admission = Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: wl
                .spec
                .pod_sets
                .iter()
                .map(|ps| PodSetAssignment {
                    name: ps.name.clone(),
                    flavors: BTreeMap::from([("cpu".to_string(), "gpu".to_string())]),
                    count: Some(ps.count),
                    ..Default::default()
                })
                .collect(),
        };
        let infos = super::super::pod_set_infos(&admission, &wl.spec.pod_sets, "lq", "w", |n| {
            (n == "gpu").then_some(&flavor)
        })
        .unwrap();
        let mut j = original.clone();
        PyTorchJobJob::run_with(&mut j, &infos).unwrap();
        assert!(!j.is_suspended());
        for (t, r) in j.ordered_replicas() {
            let labels = r
                .template
                .metadata
                .as_ref()
                .unwrap()
                .labels
                .as_ref()
                .unwrap();
            assert_eq!(labels[labels::PODSET_LABEL], t.to_lowercase());
            let sel = r
                .template
                .spec
                .as_ref()
                .unwrap()
                .node_selector
                .as_ref()
                .unwrap();
            assert_eq!(sel["pool"], "a100");
        }
        // What Sluice does not read stays.
        assert_eq!(
            j.spec.as_ref().unwrap().replica_specs["Worker"].other["restartPolicy"],
            "OnFailure"
        );
        PyTorchJobJob::suspend(&mut j);
        let originals: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
            .collect();
        PyTorchJobJob::restore(&mut j, &originals);
        for (t, r) in j.ordered_replicas() {
            let spec = r.template.spec.as_ref().unwrap();
            assert!(spec.node_selector.is_none(), "{t}");
        }
        assert!(j.is_suspended());
        let mut short = infos.clone();
        short.pop();
        let mut k = original.clone();
        assert!(PyTorchJobJob::run_with(&mut k, &short).is_err());
        assert_eq!(k, original);
    }

    #[test]
    fn finished_active_and_ready_read_the_training_operators_status() {
        let mut j = job();
        let wl = PyTorchJobJob::workload(&j, &priorities()).unwrap();
        assert_eq!(PyTorchJobJob::finished(&j).unwrap(), None);
        j.status = serde_json::from_value(serde_json::json!({
            "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 0}},
            "conditions": [{"type": "Running", "status": "True"}]
        }))
        .unwrap();
        assert!(PyTorchJobJob::is_active(&j));
        assert!(PyTorchJobJob::pods_ready(&j, &wl));
        j.status = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Succeeded", "status": "True", "message": "PyTorchJob mnist is successfully completed."}]
        }))
        .unwrap();
        assert_eq!(
            PyTorchJobJob::finished(&j).unwrap(),
            Some((true, "PyTorchJob mnist is successfully completed.".into()))
        );
    }
}
