//! The JobSet integration (`jobset.x-k8s.io/v1alpha2`), as Kueue's: one pod set per replicated job, named after it
//! (lowercased), counting replicas x min(parallelism, completions) pods; no partial admission.

use std::collections::BTreeMap;

use sluice_sdk::jobset::{self, JobSet};
use sluice_sdk::kueue::v1beta2::{PodSet, PodSetTopologyRequest, Workload};

use super::batch_job::JOB_COMPLETION_INDEX;
use super::topology_request::template_topology_request;
use super::{
    JobError, JobIntegration, Owner, PodSetInfo, PriorityClasses, SuspendableJob, admitted_pods,
    owned_workload,
};

/// The JobSet kind.
pub struct JobSetJob;

fn error(js: &JobSet, field: &str, message: impl Into<String>) -> JobError {
    JobError {
        kind: JobSetJob::KIND.to_string(),
        namespace: js.metadata.namespace.clone().unwrap_or_default(),
        name: js.metadata.name.clone().unwrap_or_default(),
        field: field.to_string(),
        message: message.into(),
    }
}

fn template_path(i: usize) -> String {
    format!("spec.replicatedJobs[{i}].template.spec.template")
}

impl JobSetJob {
    /// Kueue's pod sets: per replicated job its name (lowercased), its Jobs' pod template and its pod count, with a
    /// topology request whose ranks are the completion index within a Job and the Job's index within the
    /// replicated job.
    pub(crate) fn pod_sets(js: &JobSet) -> Result<Vec<PodSet>, JobError> {
        let empty = BTreeMap::new();
        js.replicated_jobs()
            .iter()
            .enumerate()
            .map(|(i, rj)| {
                let template = rj.pod_template().cloned().ok_or_else(|| {
                    error(
                        js,
                        &format!("spec.replicatedJobs[{i}].template.spec"),
                        "required",
                    )
                })?;
                let ann = template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.as_ref())
                    .unwrap_or(&empty);
                let mut req: PodSetTopologyRequest =
                    template_topology_request(ann).map_err(|(key, message)| {
                        error(
                            js,
                            &format!("{}.metadata.annotations[{key}]", template_path(i)),
                            message,
                        )
                    })?;
                req.pod_index_label = Some(JOB_COMPLETION_INDEX.to_string());
                req.sub_group_index_label = Some(jobset::JOB_INDEX_LABEL.to_string());
                req.sub_group_count = Some(rj.replicas);
                Ok(PodSet {
                    name: rj.name.to_lowercase(),
                    template,
                    count: rj.pods_count(),
                    min_count: None,
                    topology_request: Some(req),
                })
            })
            .collect()
    }

    /// The Workload Kueue builds for the JobSet (name, owner, a pod set per replicated job, priority, queue).
    pub fn workload(js: &JobSet, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        if js.spec.is_none() {
            return Err(error(js, "spec", "required"));
        }
        let pod_sets = Self::pod_sets(js)?;
        if pod_sets.is_empty() {
            return Err(error(js, "spec.replicatedJobs", "must have at least one"));
        }
        let pod_class = first_pod_class(&pod_sets);
        owned_workload(
            Owner::of::<Self>(&js.metadata, pod_class),
            pod_sets,
            priorities,
        )
    }
}

/// The first pod set's priorityClassName that is set, with its field (Kueue takes that one).
pub(crate) fn first_pod_class(pod_sets: &[PodSet]) -> Option<(String, String)> {
    pod_sets.iter().enumerate().find_map(|(i, ps)| {
        let name = ps.template.spec.as_ref()?.priority_class_name.as_deref()?;
        (!name.is_empty()).then(|| {
            (
                name.to_string(),
                format!("{}.spec.priorityClassName", template_path(i)),
            )
        })
    })
}

impl JobIntegration for JobSetJob {
    type Job = JobSet;
    const KIND: &'static str = jobset::KIND;
    const GROUP: &'static str = jobset::GROUP;
    const API_VERSION: &'static str = jobset::API_VERSION;

    object_job_identity!(JobSet);

    fn is_suspended(js: &JobSet) -> bool {
        js.is_suspended()
    }

    /// Any replicated job with an active Job.
    fn is_active(js: &JobSet) -> bool {
        js.status
            .as_ref()
            .is_some_and(|s| s.replicated_jobs_status.iter().any(|r| r.active > 0))
    }

    /// `Completed` True succeeds, `Failed` True fails, with the condition's message.
    fn finished(js: &JobSet) -> Result<Option<(bool, String)>, JobError> {
        Ok(js.status.as_ref().and_then(|s| {
            super::finished_by_conditions(&s.conditions, jobset::COMPLETED, jobset::FAILED)
        }))
    }

    /// Kueue counts Jobs, not pods: the ready and succeeded Jobs over every replicated job equal all replicas.
    fn pods_ready(js: &JobSet, wl: &Workload) -> bool {
        let replicas: i32 = js.replicated_jobs().iter().map(|r| r.replicas).sum();
        let ready: i32 = js
            .status
            .as_ref()
            .map(|s| {
                s.replicated_jobs_status
                    .iter()
                    .map(|r| r.ready + r.succeeded)
                    .sum()
            })
            .unwrap_or(0);
        // An admission with nothing to run is never ready.
        replicas == ready && admitted_pods(wl) > 0
    }

    /// Kueue's: per replicated job, the pods of its succeeded Jobs (while no more succeeded than it has replicas).
    fn reclaimable_pods(js: &JobSet) -> Option<Vec<(String, i32)>> {
        let statuses = js
            .status
            .as_ref()
            .map(|s| &s.replicated_jobs_status[..])
            .unwrap_or_default();
        Some(
            js.replicated_jobs()
                .iter()
                .filter_map(|rj| {
                    let st = statuses.iter().find(|s| s.name == rj.name)?;
                    (st.succeeded > 0 && st.succeeded <= rj.replicas).then(|| {
                        (
                            rj.name.to_lowercase(),
                            st.succeeded.saturating_mul(rj.pods_per_job()),
                        )
                    })
                })
                .collect(),
        )
    }
}

impl SuspendableJob for JobSetJob {
    fn suspend(js: &mut JobSet) {
        js.spec.get_or_insert_with(Default::default).suspend = Some(true);
    }

    /// Unsuspends with each pod set's info merged into its replicated job's pod template, by index.
    fn run_with(js: &mut JobSet, infos: &[PodSetInfo]) -> Result<(), JobError> {
        let n = js.replicated_jobs().len();
        if infos.len() != n {
            return Err(error(
                js,
                "status.admission.podSetAssignments",
                format!("expected {n} pod sets, got {}", infos.len()),
            ));
        }
        let mut merged = js.clone();
        let spec = merged.spec.get_or_insert_with(Default::default);
        for (i, (rj, info)) in spec.replicated_jobs.iter_mut().zip(infos).enumerate() {
            info.merge_into(rj.pod_template_mut())
                .map_err(|m| error(js, &template_path(i), m))?;
        }
        spec.suspend = Some(false);
        *js = merged;
        Ok(())
    }

    /// Puts back each replicated job's pod template as the Workload recorded it.
    fn restore(js: &mut JobSet, infos: &[PodSetInfo]) {
        let Some(spec) = js.spec.as_mut() else {
            return;
        };
        for (rj, info) in spec.replicated_jobs.iter_mut().zip(infos) {
            info.restore_into(rj.pod_template_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::workload_name;
    use super::*;
    use sluice_sdk::kueue::labels;
    use sluice_sdk::kueue::v1beta2::{Admission, PodSetAssignment, ResourceFlavor};

    fn jobset() -> JobSet {
        serde_yaml::from_str(
            r#"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: team-a
  uid: 0f0f0f0f-2222-3333-4444-555555555555
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  suspend: true
  replicatedJobs:
  - name: Driver
    replicas: 1
    template:
      spec:
        template:
          spec:
            containers: [{name: d, image: x, resources: {requests: {cpu: "1"}}}]
  - name: workers
    replicas: 3
    template:
      spec:
        parallelism: 4
        completions: 4
        template:
          metadata:
            annotations: {kueue.x-k8s.io/podset-required-topology: rack}
          spec:
            priorityClassName: high
            nodeSelector: {zone: a}
            containers: [{name: w, image: x, resources: {requests: {nvidia.com/gpu: "8"}}}]
"#,
        )
        .unwrap()
    }

    fn priorities() -> PriorityClasses {
        let mut p = PriorityClasses::default();
        let mut pc = k8s_openapi::api::scheduling::v1::PriorityClass::default();
        pc.metadata.name = Some("high".into());
        pc.value = Some(1000);
        p.upsert_pod_class(&pc);
        p
    }

    #[test]
    fn one_pod_set_per_replicated_job_with_kueues_names_and_counts() {
        let wl = JobSetJob::workload(&jobset(), &priorities()).unwrap();
        let name = wl.metadata.name.as_deref().unwrap();
        assert!(name.starts_with("jobset-train-"), "{name}");
        assert_eq!(
            name,
            workload_name(
                "JobSet",
                "jobset.x-k8s.io",
                "train",
                "0f0f0f0f-2222-3333-4444-555555555555"
            )
        );
        let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.api_version.as_str(), owner.kind.as_str()),
            ("jobset.x-k8s.io/v1alpha2", "JobSet")
        );
        let sets: Vec<(&str, i32, Option<i32>)> = wl
            .spec
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count, p.min_count))
            .collect();
        assert_eq!(sets, [("driver", 1, None), ("workers", 12, None)]);
        assert_eq!(wl.spec.queue_name, "lq");
        // The first pod set with a priorityClassName gives the priority.
        assert_eq!(wl.spec.priority, Some(1000));
        let req = wl.spec.pod_sets[1].topology_request.as_ref().unwrap();
        assert_eq!(req.required.as_deref(), Some("rack"));
        assert_eq!(
            req.pod_index_label.as_deref(),
            Some("batch.kubernetes.io/job-completion-index")
        );
        assert_eq!(
            req.sub_group_index_label.as_deref(),
            Some("jobset.sigs.k8s.io/job-index")
        );
        assert_eq!(req.sub_group_count, Some(3));
    }

    #[test]
    fn a_missing_priority_class_names_the_field() {
        let e = JobSetJob::workload(&jobset(), &PriorityClasses::default()).unwrap_err();
        assert_eq!(e.kind, "JobSet");
        assert!(e.field.contains("priorityClassName"), "{e}");
        assert!(
            e.to_string().contains("PriorityClass \"high\" not found"),
            "{e}"
        );
    }

    fn admitted(wl: &Workload) -> Vec<PodSetInfo> {
        let mut flavor = ResourceFlavor::default();
        flavor.metadata.name = Some("gpu".into());
        flavor.spec.node_labels = BTreeMap::from([("pool".to_string(), "h100".to_string())]);
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
        super::super::pod_set_infos(
            &admission,
            &wl.spec.pod_sets,
            "lq",
            wl.metadata.name.as_deref().unwrap(),
            |n| (n == "gpu").then_some(&flavor),
        )
        .unwrap()
    }

    #[test]
    fn runs_with_each_replicated_jobs_admission_and_restores_after_eviction() {
        let original = jobset();
        let wl = JobSetJob::workload(&original, &priorities()).unwrap();
        let infos = admitted(&wl);
        let mut js = original.clone();
        JobSetJob::run_with(&mut js, &infos).unwrap();
        assert!(!js.is_suspended());
        for rj in js.replicated_jobs() {
            let spec = rj.pod_template().unwrap().spec.as_ref().unwrap();
            assert_eq!(spec.node_selector.as_ref().unwrap()["pool"], "h100");
            let labels = rj.pod_template().unwrap().metadata.as_ref().unwrap();
            assert_eq!(
                labels.labels.as_ref().unwrap()[labels::PODSET_LABEL],
                rj.name.to_lowercase()
            );
        }
        // The workers' own node selector stays.
        let workers = &js.replicated_jobs()[1];
        let ns = workers.pod_template().unwrap().spec.as_ref().unwrap();
        assert_eq!(ns.node_selector.as_ref().unwrap()["zone"], "a");

        JobSetJob::suspend(&mut js);
        let originals: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
            .collect();
        JobSetJob::restore(&mut js, &originals);
        assert!(js.is_suspended());
        // The same templates, up to an empty `metadata: {}` the merge left behind.
        assert_eq!(pruned(&js), pruned(&original));
    }

    /// The JobSet's spec as JSON without empty objects.
    fn pruned(js: &JobSet) -> serde_json::Value {
        fn prune(v: &mut serde_json::Value) {
            if let serde_json::Value::Object(m) = v {
                m.values_mut().for_each(prune);
                m.retain(|_, v| !v.as_object().is_some_and(|o| o.is_empty()));
            } else if let serde_json::Value::Array(a) = v {
                a.iter_mut().for_each(prune);
            }
        }
        let mut v = serde_json::to_value(&js.spec).unwrap();
        prune(&mut v);
        v
    }

    #[test]
    fn a_wrong_number_of_pod_sets_is_refused_and_changes_nothing() {
        let wl = JobSetJob::workload(&jobset(), &priorities()).unwrap();
        let mut infos = admitted(&wl);
        infos.pop();
        let mut js = jobset();
        let e = JobSetJob::run_with(&mut js, &infos).unwrap_err();
        assert!(e.message.contains("expected 2 pod sets, got 1"), "{e}");
        assert_eq!(js, jobset());
    }

    #[test]
    fn a_conflicting_node_selector_is_refused_and_changes_nothing() {
        let mut original = jobset();
        let wl = JobSetJob::workload(&original, &priorities()).unwrap();
        let infos = admitted(&wl);
        original.spec.as_mut().unwrap().replicated_jobs[0]
            .pod_template_mut()
            .spec
            .get_or_insert_with(Default::default)
            .node_selector = Some(BTreeMap::from([("pool".to_string(), "a100".to_string())]));
        let mut js = original.clone();
        let e = JobSetJob::run_with(&mut js, &infos).unwrap_err();
        assert!(e.field.starts_with("spec.replicatedJobs[0]"), "{e}");
        assert_eq!(js, original);
    }

    #[test]
    fn finished_active_and_ready_read_the_jobset_status() {
        let wl = JobSetJob::workload(&jobset(), &priorities()).unwrap();
        let mut js = jobset();
        assert_eq!(JobSetJob::finished(&js).unwrap(), None);
        assert!(!JobSetJob::is_active(&js));
        let mut admitted_wl = wl.clone();
        admitted_wl.status = Some(sluice_sdk::kueue::v1beta2::WorkloadStatus {
            admission: Some(Admission {
                cluster_queue: "cq".into(),
                pod_set_assignments: wl
                    .spec
                    .pod_sets
                    .iter()
                    .map(|ps| PodSetAssignment {
                        name: ps.name.clone(),
                        count: Some(ps.count),
                        ..Default::default()
                    })
                    .collect(),
            }),
            ..Default::default()
        });
        js.status = serde_json::from_value(serde_json::json!({
            "replicatedJobsStatus": [
                {"name": "Driver", "ready": 1, "active": 1},
                {"name": "workers", "ready": 2, "succeeded": 0, "active": 3}
            ]
        }))
        .unwrap();
        assert!(JobSetJob::is_active(&js));
        assert!(!JobSetJob::pods_ready(&js, &admitted_wl));
        js.status.as_mut().unwrap().replicated_jobs_status[1].succeeded = 1;
        assert!(JobSetJob::pods_ready(&js, &admitted_wl));
        js.status = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs",
                "message": "jobset failed due to reaching max restarts",
                "lastTransitionTime": "2026-12-04T00:00:00Z"}]
        }))
        .unwrap();
        assert_eq!(
            JobSetJob::finished(&js).unwrap(),
            Some((false, "jobset failed due to reaching max restarts".into()))
        );
    }
}
