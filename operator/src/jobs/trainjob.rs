//! The Kubeflow Trainer TrainJob integration (`trainer.kubeflow.org/v1alpha1`), as Kueue's: the pod sets are those
//! of the JobSet the TrainJob becomes on its runtime (one per replicated job), the admission goes into Kueue's own
//! runtime patch, and a stop suspends first and clears that patch only once no Job of it is active.
//!
//! The job carries its runtime as the operator's cache resolved it ([`TrainJob::runtime`]); without one its
//! Workload cannot be built, with Kueue's `runtime '<name>' not found`.

use serde_json::{Map, Value, json};
use sluice_sdk::kueue::v1beta2::Workload;
use sluice_sdk::trainer::{self, TrainJob};

use super::jobset::first_pod_class;
use super::{
    JobError, JobIntegration, JobSetJob, Owner, PodSetInfo, PriorityClasses, SuspendableJob,
    owned_workload,
};

/// The TrainJob kind.
pub struct TrainJobJob;

fn error(tj: &TrainJob, field: &str, message: impl Into<String>) -> JobError {
    JobError {
        kind: TrainJobJob::KIND.to_string(),
        namespace: tj.metadata.namespace.clone().unwrap_or_default(),
        name: tj.metadata.name.clone().unwrap_or_default(),
        field: field.to_string(),
        message: message.into(),
    }
}

impl TrainJobJob {
    /// The child JobSet, or Kueue's error naming the runtime.
    fn child(tj: &TrainJob) -> Result<sluice_sdk::jobset::JobSet, JobError> {
        tj.child_jobset()
            .map_err(|m| error(tj, "spec.runtimeRef", m))
    }

    /// The Workload Kueue builds for the TrainJob: its child JobSet's pod sets, under the TrainJob's name, owner,
    /// queue and priority.
    pub fn workload(tj: &TrainJob, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        let js = Self::child(tj)?;
        let pod_sets = JobSetJob::pod_sets(&js).map_err(|e| JobError {
            kind: Self::KIND.to_string(),
            field: format!("runtime {:?}: {}", tj.runtime_name(), e.field),
            ..e
        })?;
        if pod_sets.is_empty() {
            return Err(error(
                tj,
                "spec.runtimeRef",
                format!("runtime {:?} has no replicated jobs", tj.runtime_name()),
            ));
        }
        let pod_class = first_pod_class(&pod_sets);
        owned_workload(
            Owner::of::<Self>(&tj.metadata, pod_class),
            pod_sets,
            priorities,
        )
    }
}

impl JobIntegration for TrainJobJob {
    type Job = TrainJob;
    const KIND: &'static str = trainer::TRAIN_JOB_KIND;
    const GROUP: &'static str = trainer::GROUP;
    const API_VERSION: &'static str = trainer::API_VERSION;

    object_job_identity!(TrainJob);

    fn is_suspended(tj: &TrainJob) -> bool {
        tj.is_suspended()
    }

    /// Any replicated job with an active Job.
    fn is_active(tj: &TrainJob) -> bool {
        tj.is_active()
    }

    /// `Complete` True succeeds, `Failed` True fails, with the condition's message.
    fn finished(tj: &TrainJob) -> Result<Option<(bool, String)>, JobError> {
        Ok(tj.status.as_ref().and_then(|s| {
            super::finished_by_conditions(&s.conditions, trainer::COMPLETE, trainer::FAILED)
        }))
    }

    /// Kueue counts Jobs: the ready and succeeded Jobs equal the child JobSet's replicas.
    fn pods_ready(tj: &TrainJob, _wl: &Workload) -> bool {
        let Ok(js) = tj.child_jobset() else {
            return false;
        };
        let replicas: i32 = js.replicated_jobs().iter().map(|r| r.replicas).sum();
        let ready: i32 = tj
            .status
            .iter()
            .flat_map(|s| &s.jobs_status)
            .map(|j| j.ready.unwrap_or(0) + j.succeeded.unwrap_or(0))
            .sum();
        replicas == ready
    }

    /// Kueue's: per replicated job, the pods of its succeeded Jobs (while no more succeeded than it has replicas).
    fn reclaimable_pods(tj: &TrainJob) -> Option<Vec<(String, i32)>> {
        let statuses = tj
            .status
            .as_ref()
            .map(|s| &s.jobs_status[..])
            .unwrap_or_default();
        if statuses.is_empty() {
            return Some(Vec::new());
        }
        let js = tj.child_jobset().ok()?;
        Some(
            js.replicated_jobs()
                .iter()
                .filter_map(|rj| {
                    let succeeded = statuses.iter().find(|s| s.name == rj.name)?.succeeded?;
                    (succeeded > 0 && succeeded <= rj.replicas).then(|| {
                        (
                            rj.name.to_lowercase(),
                            succeeded.saturating_mul(rj.pods_per_job()),
                        )
                    })
                })
                .collect(),
        )
    }
}

impl SuspendableJob for TrainJobJob {
    fn suspend(tj: &mut TrainJob) {
        tj.spec.get_or_insert_with(Default::default).suspend = Some(true);
    }

    /// Writes each pod set's node selector, tolerations, labels, annotations and scheduling gates into Kueue's
    /// runtime patch (replacing what an earlier admission wrote there) and unsuspends. The pod-set count is checked
    /// against the child JobSet when the runtime is resolved.
    fn run_with(tj: &mut TrainJob, infos: &[PodSetInfo]) -> Result<(), JobError> {
        if tj.runtime.is_some() {
            let n = Self::child(tj)?.replicated_jobs().len();
            if infos.len() != n {
                return Err(error(
                    tj,
                    "status.admission.podSetAssignments",
                    format!("expected {n} pod sets, got {}", infos.len()),
                ));
            }
        }
        let entries: Vec<Value> = infos.iter().map(replicated_job_patch).collect();
        let mut started = tj.clone();
        let Some(patch) = started.kueue_patch_mut() else {
            return Err(error(
                tj,
                "spec.runtimePatches",
                "kueue runtime patch not found",
            ));
        };
        let spec = patch.training_runtime_spec.get_or_insert_with(|| json!({}));
        if !spec.is_object() {
            *spec = json!({});
        }
        if let Some(js) = spec
            .as_object_mut()
            .and_then(|s| child_object(s, "template"))
            .and_then(|t| child_object(t, "spec"))
        {
            js.insert("replicatedJobs".to_string(), Value::Array(entries));
        }
        started.spec.get_or_insert_with(Default::default).suspend = Some(false);
        *tj = started;
        Ok(())
    }

    /// Clears the replicated jobs of Kueue's runtime patch (the patch itself stays).
    fn restore(tj: &mut TrainJob, _infos: &[PodSetInfo]) {
        if let Some(js) = tj
            .kueue_patch_mut()
            .and_then(|p| p.training_runtime_spec.as_mut())
            .and_then(|s| s.pointer_mut("/template/spec"))
            .and_then(Value::as_object_mut)
        {
            js.remove("replicatedJobs");
        }
    }
}

impl TrainJobJob {
    /// Whether Kueue's runtime patch still carries an admission (a stop has not cleared it yet).
    pub fn holds_admission(tj: &TrainJob) -> bool {
        tj.kueue_patch()
            .and_then(|p| p.training_runtime_spec.as_ref())
            .and_then(|s| s.pointer("/template/spec/replicatedJobs"))
            .is_some_and(|v| !v.is_null())
    }
}

/// The object at `key` of `parent`, made an empty object when absent or not an object.
fn child_object<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = parent.entry(key.to_string()).or_insert(Value::Null);
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// One replicated job's entry of Kueue's runtime patch: the pod template's labels and annotations, node selector,
/// tolerations and scheduling gates from the admission (fields left out when empty, as Trainer's types omit them).
fn replicated_job_patch(info: &PodSetInfo) -> Value {
    let mut metadata = Map::new();
    if !info.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(info.annotations));
    }
    if !info.labels.is_empty() {
        metadata.insert("labels".into(), json!(info.labels));
    }
    let mut spec = Map::new();
    if !info.node_selector.is_empty() {
        spec.insert("nodeSelector".into(), json!(info.node_selector));
    }
    if !info.tolerations.is_empty() {
        spec.insert("tolerations".into(), json!(info.tolerations));
    }
    if !info.scheduling_gates.is_empty() {
        let gates: Vec<Value> = info
            .scheduling_gates
            .iter()
            .map(|g| json!({"name": g}))
            .collect();
        spec.insert("schedulingGates".into(), Value::Array(gates));
    }
    json!({
        "name": info.name,
        "template": {"spec": {"template": {"metadata": metadata, "spec": spec}}}
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Toleration;
    use sluice_sdk::trainer::{ClusterTrainingRuntime, KUEUE_RUNTIME_PATCH_MANAGER};

    use super::super::workload_name;
    use super::*;

    /// Kueue's test runtime: a trainer job `node` and a plain job `foo`, one pod each.
    const RUNTIME: &str = r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: test}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        replicas: 1
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {parallelism: 1, completions: 1, template: {spec: {containers: [{name: node, image: i}]}}}
      - name: foo
        replicas: 1
        template:
          spec: {parallelism: 1, completions: 1, template: {spec: {containers: [{name: foo, image: i}]}}}
"#;

    fn trainjob(num_nodes: Option<i32>) -> TrainJob {
        let mut tj: TrainJob = serde_yaml::from_str(&format!(
            r#"
metadata:
  name: trainjob
  namespace: ns
  uid: 0f0f0f0f-2222-3333-4444-555555555555
  labels: {{kueue.x-k8s.io/queue-name: lq}}
spec:
  suspend: true
  runtimeRef: {{name: test, apiGroup: trainer.kubeflow.org, kind: ClusterTrainingRuntime}}
  runtimePatches:
  - manager: user
    trainingRuntimeSpec: {{template: {{spec: {{replicatedJobs: [{{name: foo, template: {{spec: {{template: {{metadata: {{labels: {{team: a}}}}}}}}}}}}]}}}}}}
  - manager: {KUEUE_RUNTIME_PATCH_MANAGER}
    trainingRuntimeSpec: {{template: {{spec: {{}}}}}}
"#
        ))
        .unwrap();
        if let Some(n) = num_nodes {
            tj.spec.as_mut().unwrap().trainer = Some(trainer::Trainer {
                num_nodes: Some(n),
                ..Default::default()
            });
        }
        let runtime: ClusterTrainingRuntime = serde_yaml::from_str(RUNTIME).unwrap();
        tj.runtime = Some(Arc::new(Ok(runtime.spec)));
        tj
    }

    #[test]
    fn workload_is_created_with_the_corresponding_podsets() {
        let wl = TrainJobJob::workload(&trainjob(None), &PriorityClasses::default()).unwrap();
        assert_eq!(
            wl.metadata.name.as_deref(),
            Some(
                workload_name(
                    "TrainJob",
                    "trainer.kubeflow.org",
                    "trainjob",
                    "0f0f0f0f-2222-3333-4444-555555555555"
                )
                .as_str()
            )
        );
        let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.controller
            ),
            ("trainer.kubeflow.org/v1alpha1", "TrainJob", Some(true))
        );
        let sets: Vec<(&str, i32)> = wl
            .spec
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count))
            .collect();
        assert_eq!(sets, [("node", 1), ("foo", 1)]);
        for ps in &wl.spec.pod_sets {
            let req = ps.topology_request.as_ref().unwrap();
            assert_eq!(
                req.pod_index_label.as_deref(),
                Some("batch.kubernetes.io/job-completion-index")
            );
            assert_eq!(
                req.sub_group_index_label.as_deref(),
                Some("jobset.sigs.k8s.io/job-index")
            );
            assert_eq!(req.sub_group_count, Some(1));
        }
        // The user's runtime patch reaches the pod set's template.
        let foo = wl.spec.pod_sets[1].template.metadata.as_ref().unwrap();
        assert_eq!(foo.labels.as_ref().unwrap()["team"], "a");
        assert_eq!(wl.spec.queue_name, "lq");
    }

    #[test]
    fn podset_count_for_the_trainer_job_is_set_to_the_trainers_num_nodes() {
        let wl = TrainJobJob::workload(&trainjob(Some(2)), &PriorityClasses::default()).unwrap();
        let counts: Vec<i32> = wl.spec.pod_sets.iter().map(|p| p.count).collect();
        assert_eq!(counts, [2, 1]);
    }

    #[test]
    fn a_missing_runtime_is_kueues_error() {
        let mut tj = trainjob(None);
        tj.runtime = Some(Arc::new(Err(tj.runtime_not_found())));
        let e = TrainJobJob::workload(&tj, &PriorityClasses::default()).unwrap_err();
        assert_eq!(e.message, "runtime 'test' not found");
        let mut started = tj.clone();
        assert!(TrainJobJob::run_with(&mut started, &[info("node")]).is_err());
        assert_eq!(started, tj);
    }

    fn info(name: &str) -> PodSetInfo {
        PodSetInfo {
            name: name.into(),
            count: 1,
            labels: BTreeMap::from([
                ("kueue.x-k8s.io/podset".to_string(), name.to_string()),
                ("test-label".to_string(), "label".to_string()),
            ]),
            node_selector: BTreeMap::from([("disktype".to_string(), "ssd".to_string())]),
            tolerations: vec![Toleration {
                key: Some("example.com/gpu".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }],
            annotations: BTreeMap::from([("test-annotation".to_string(), "test".to_string())]),
            scheduling_gates: vec!["test-scheduling-gate-1".into()],
        }
    }

    #[test]
    fn the_admission_goes_into_kueues_runtime_patch_and_the_users_stays() {
        let original = trainjob(None);
        let mut tj = original.clone();
        TrainJobJob::run_with(&mut tj, &[info("node"), info("foo")]).unwrap();
        assert!(!tj.is_suspended());
        let patches = &tj.spec.as_ref().unwrap().runtime_patches;
        assert_eq!(
            patches[0],
            original.spec.as_ref().unwrap().runtime_patches[0]
        );
        let kueue = patches[1].training_runtime_spec.as_ref().unwrap();
        assert_eq!(
            kueue["template"]["spec"]["replicatedJobs"][0],
            json!({"name": "node", "template": {"spec": {"template": {
                "metadata": {"annotations": {"test-annotation": "test"},
                             "labels": {"kueue.x-k8s.io/podset": "node", "test-label": "label"}},
                "spec": {"nodeSelector": {"disktype": "ssd"},
                         "tolerations": [{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "schedulingGates": [{"name": "test-scheduling-gate-1"}]}}}}})
        );
        // The child JobSet now carries the admission.
        let js = tj.child_jobset().unwrap();
        let node = js.replicated_jobs()[0].pod_template().unwrap();
        assert_eq!(
            node.spec.as_ref().unwrap().node_selector.as_ref().unwrap()["disktype"],
            "ssd"
        );
        // Idempotent: a second admission replaces the first.
        let mut again = tj.clone();
        TrainJobJob::run_with(&mut again, &[info("node"), info("foo")]).unwrap();
        assert_eq!(again, tj);
        // Restored: Kueue's patch loses its replicated jobs; the user's stays.
        assert!(TrainJobJob::holds_admission(&tj));
        TrainJobJob::suspend(&mut tj);
        TrainJobJob::restore(&mut tj, &[]);
        assert!(!TrainJobJob::holds_admission(&tj));
        assert_eq!(tj.spec, original.spec);
    }

    #[test]
    fn the_wrong_number_of_pod_sets_or_no_kueue_patch_changes_nothing() {
        let original = trainjob(None);
        let mut tj = original.clone();
        let e = TrainJobJob::run_with(&mut tj, &[info("node")]).unwrap_err();
        assert!(e.message.contains("expected 2 pod sets, got 1"), "{e}");
        assert_eq!(tj, original);
        tj.spec.as_mut().unwrap().runtime_patches.pop();
        let before = tj.clone();
        let e = TrainJobJob::run_with(&mut tj, &[info("node"), info("foo")]).unwrap_err();
        assert_eq!(e.message, "kueue runtime patch not found");
        assert_eq!(tj, before);
    }

    #[test]
    fn finished_active_ready_and_reclaimable_read_the_trainjob_status() {
        let wl = TrainJobJob::workload(&trainjob(None), &PriorityClasses::default()).unwrap();
        let mut tj = trainjob(None);
        assert_eq!(TrainJobJob::finished(&tj).unwrap(), None);
        tj.status = serde_json::from_value(json!({"jobsStatus": [
            {"name": "node", "ready": 1, "active": 1}, {"name": "foo", "active": 1}]}))
        .unwrap();
        assert!(TrainJobJob::is_active(&tj));
        assert!(!TrainJobJob::pods_ready(&tj, &wl));
        tj.status = serde_json::from_value(json!({"jobsStatus": [
            {"name": "node", "ready": 1, "active": 1}, {"name": "foo", "succeeded": 1}]}))
        .unwrap();
        assert!(TrainJobJob::pods_ready(&tj, &wl));
        assert_eq!(
            TrainJobJob::reclaimable_pods(&tj),
            Some(vec![("foo".to_string(), 1)])
        );
        tj.status = serde_json::from_value(json!({"conditions": [{"type": "Complete", "status": "True",
            "reason": "JobsCompleted", "message": "jobset completed", "lastTransitionTime": "2026-12-05T00:00:00Z"}]}))
        .unwrap();
        assert_eq!(
            TrainJobJob::finished(&tj).unwrap(),
            Some((true, "jobset completed".into()))
        );
    }
}
