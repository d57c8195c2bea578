//! The batch/v1 Job integration, as Kueue's: one pod set `main` whose count is min(parallelism, completions).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2::{DEFAULT_POD_SET_NAME, PodSet, PodSetTopologyRequest, Workload};

use super::topology_request::template_topology_request;
use super::{
    JobError, JobIntegration, Owner, PodSetInfo, PriorityClasses, SuspendableJob, admitted_pods,
    owned_workload, workload_name,
};

/// Label Kubernetes sets on each pod of an Indexed Job with its completion index.
pub(super) const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// batch/v1 Job.
pub struct BatchJob;

fn error(job: &Job, field: &str, message: impl Into<String>) -> JobError {
    JobError {
        kind: BatchJob::KIND.to_string(),
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: job.metadata.name.clone().unwrap_or_default(),
        field: field.to_string(),
        message: message.into(),
    }
}

fn annotation<'a>(job: &'a Job, key: &str) -> Option<&'a str> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn label<'a>(job: &'a Job, key: &str) -> Option<&'a str> {
    job.metadata
        .labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

impl BatchJob {
    /// Pods the job runs at once: min(parallelism, completions); parallelism defaults to 1.
    pub fn pods_count(job: &Job) -> i32 {
        let spec = job.spec.as_ref();
        let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
        match spec.and_then(|s| s.completions) {
            Some(c) if c < parallelism => c,
            _ => parallelism,
        }
    }

    /// The partial-admission minimum from `kueue.x-k8s.io/job-min-parallelism`.
    pub fn min_count(job: &Job) -> Result<Option<i32>, JobError> {
        let Some(v) = annotation(job, labels::JOB_MIN_PARALLELISM_ANNOTATION) else {
            return Ok(None);
        };
        let field = format!(
            "metadata.annotations[{}]",
            labels::JOB_MIN_PARALLELISM_ANNOTATION
        );
        let n: i32 = v
            .parse()
            .map_err(|_| error(job, &field, format!("{v:?} is not an integer")))?;
        let count = Self::pods_count(job);
        if n <= 0 || n >= count {
            return Err(error(
                job,
                &field,
                format!("must be greater than 0 and less than the pod count {count}"),
            ));
        }
        Ok(Some(n))
    }

    /// The pod set's topology request from the pod template's annotations, with the completion-index label so that
    /// ranks map onto domains.
    fn topology_request(job: &Job) -> Result<PodSetTopologyRequest, JobError> {
        let empty = BTreeMap::new();
        let ann = job
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .unwrap_or(&empty);
        let mut req = template_topology_request(ann).map_err(|(key, message)| {
            error(
                job,
                &format!("spec.template.metadata.annotations[{key}]"),
                message,
            )
        })?;
        req.pod_index_label = Some(JOB_COMPLETION_INDEX.to_string());
        Ok(req)
    }

    /// The pod template as Kueue records it: without the labels the Job controller manages for itself
    /// ([`MANAGED_LABELS`]).
    fn clean_template(job: &Job) -> k8s_openapi::api::core::v1::PodTemplateSpec {
        let mut template = job
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        if let Some(l) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            for managed in MANAGED_LABELS {
                l.remove(*managed);
            }
        }
        template
    }
}

/// The pod template labels the Job controller manages (the API server requires them on every Job update), kept
/// out of the Workload's template and kept on the Job when its template is restored, as Kueue does.
const MANAGED_LABELS: &[&str] = &[
    "job-name",
    "controller-uid",
    "batch.kubernetes.io/job-name",
    "batch.kubernetes.io/controller-uid",
];

impl BatchJob {
    /// The Workload Kueue builds for the Job (name, owner, pod sets, priority, queue).
    pub fn workload(job: &Job, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        let spec = job
            .spec
            .as_ref()
            .ok_or_else(|| error(job, "spec", "required"))?;
        let pod_set = PodSet {
            name: DEFAULT_POD_SET_NAME.to_string(),
            template: Self::clean_template(job),
            count: Self::pods_count(job),
            min_count: Self::min_count(job)?,
            topology_request: Some(Self::topology_request(job)?),
        };
        let pod_class = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.clone())
            .map(|n| (n, "spec.template.spec.priorityClassName".to_string()));
        // No label (a Job managed under manageJobsWithoutQueueName): no queue, as Kueue builds it; the Workload
        // waits until one is set.
        owned_workload(
            Owner::of::<Self>(&job.metadata, pod_class),
            vec![pod_set],
            priorities,
        )
    }
}

impl JobIntegration for BatchJob {
    type Job = Job;
    const KIND: &'static str = "Job";
    const GROUP: &'static str = "batch";
    const API_VERSION: &'static str = "batch/v1";

    fn queue_name(job: &Job) -> Option<String> {
        label(job, labels::QUEUE_NAME_LABEL).map(str::to_string)
    }

    fn prebuilt_workload(job: &Job) -> Option<String> {
        super::prebuilt_workload_name(&job.metadata)
    }

    fn workload_name(job: &Job) -> Option<String> {
        if let Some(prebuilt) = Self::prebuilt_workload(job) {
            return Some(prebuilt);
        }
        let uid = job.metadata.uid.as_deref()?;
        Some(workload_name(Self::KIND, Self::GROUP, &job.name_any(), uid))
    }

    fn compose(job: &Job, priorities: &PriorityClasses) -> Result<Option<Workload>, JobError> {
        Self::workload(job, priorities).map(Some)
    }

    fn copied_labels(
        job: &Job,
        keys: &[String],
    ) -> Result<std::collections::BTreeMap<String, String>, JobError> {
        Ok(super::copy_labels(&job.metadata, keys))
    }

    fn is_suspended(job: &Job) -> bool {
        job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }

    fn is_active(job: &Job) -> bool {
        active_pods(job) > 0
    }

    /// Kueue's: once a pod finished for good, the parallel slots the remaining completions no longer fill (an
    /// Indexed Job counts its completed and finally failed indexes).
    fn reclaimable_pods(job: &Job) -> Option<Vec<(String, i32)>> {
        let spec = job.spec.as_ref()?;
        let parallelism = spec.parallelism.unwrap_or(1);
        let completions = spec.completions.unwrap_or(parallelism);
        let status = job.status.as_ref();
        let terminal = if spec.completion_mode.as_deref() == Some("Indexed") {
            terminal_indexes(
                status
                    .and_then(|s| s.completed_indexes.as_deref())
                    .unwrap_or_default(),
                status
                    .and_then(|s| s.failed_indexes.as_deref())
                    .unwrap_or_default(),
                completions,
            )
        } else {
            status.and_then(|s| s.succeeded).unwrap_or(0)
        };
        let mut reclaimable = 0;
        if parallelism > 1 && terminal > 0 {
            let remaining = (completions - terminal).max(0);
            if remaining < parallelism {
                reclaimable = parallelism - remaining;
            }
        }
        Some(if reclaimable == 0 {
            Vec::new()
        } else {
            vec![(DEFAULT_POD_SET_NAME.to_string(), reclaimable)]
        })
    }

    fn finished(job: &Job) -> Result<Option<(bool, String)>, JobError> {
        let Some(conditions) = job.status.as_ref().and_then(|s| s.conditions.as_ref()) else {
            return Ok(None);
        };
        Ok(conditions
            .iter()
            .find_map(|c| match (c.type_.as_str(), c.status.as_str()) {
                ("Complete", "True") => Some((true, c.message.clone().unwrap_or_default())),
                ("Failed", "True") => Some((false, c.message.clone().unwrap_or_default())),
                _ => None,
            }))
    }

    fn pods_ready(job: &Job, wl: &Workload) -> bool {
        ready_pods(job) >= admitted_pods(wl)
    }
}

impl SuspendableJob for BatchJob {
    fn suspend(job: &mut Job) {
        job.spec.get_or_insert_with(Default::default).suspend = Some(true);
    }

    fn run_with(job: &mut Job, infos: &[PodSetInfo]) -> Result<(), JobError> {
        let [info] = infos else {
            return Err(error(
                job,
                "status.admission.podSetAssignments",
                format!("expected 1 pod set, got {}", infos.len()),
            ));
        };
        // Whether partial admission applies depends on the annotation alone: after a partial admission the
        // parallelism already equals the admitted count, which would no longer pass the submission-time check.
        let partial = annotation(job, labels::JOB_MIN_PARALLELISM_ANNOTATION).is_some();
        let sync_completions =
            annotation(job, labels::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) == Some("true");
        let mut template = job
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        info.merge_into(&mut template)
            .map_err(|m| error(job, "spec.template", m))?;
        let spec = job.spec.get_or_insert_with(Default::default);
        spec.template = template;
        spec.suspend = Some(false);
        if partial {
            spec.parallelism = Some(info.count);
            if sync_completions {
                spec.completions = Some(info.count);
            }
        }
        Ok(())
    }

    fn restore(job: &mut Job, infos: &[PodSetInfo]) {
        let Some(info) = infos.first() else { return };
        let partial = annotation(job, labels::JOB_MIN_PARALLELISM_ANNOTATION).is_some();
        let sync_completions =
            annotation(job, labels::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) == Some("true");
        let spec = job.spec.get_or_insert_with(Default::default);
        if partial {
            spec.parallelism = Some(info.count);
            if sync_completions {
                spec.completions = Some(info.count);
            }
        }
        let mut info = info.clone();
        let current = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref());
        for managed in MANAGED_LABELS {
            if let Some(v) = current.and_then(|l| l.get(*managed)) {
                info.labels.insert((*managed).to_string(), v.clone());
            }
        }
        info.restore_into(&mut spec.template);
    }
}

/// Pods of the Job that are running (not yet stopped after a suspension).
fn active_pods(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.active).unwrap_or(0)
}

/// Pods of the Job that are ready or have succeeded (Kueue's PodsReady count).
fn ready_pods(job: &Job) -> i32 {
    let s = job.status.as_ref();
    // Succeeded pods the Job controller has not counted yet count too, as in Kueue: else a pod finishing would
    // read as a readiness loss for a moment.
    let uncounted = s
        .and_then(|s| s.uncounted_terminated_pods.as_ref())
        .and_then(|u| u.succeeded.as_ref())
        .map_or(0, |v| v.len() as i32);
    s.and_then(|s| s.ready).unwrap_or(0) + s.and_then(|s| s.succeeded).unwrap_or(0) + uncounted
}

/// How many of an Indexed Job's indexes below `completions` are completed or failed (their union), from the
/// status's interval lists ("1,3-5"); malformed entries are skipped, as Kueue skips them.
fn terminal_indexes(completed: &str, failed: &str, completions: i32) -> i32 {
    if completions <= 0 {
        return 0;
    }
    let limit = i64::from(completions);
    let mut intervals: Vec<(i64, i64)> = [completed, failed]
        .iter()
        .flat_map(|list| list.split(',').filter(|s| !s.is_empty()))
        .filter_map(|range| {
            let (first, last) = match range.split_once('-') {
                Some((a, b)) => (a.trim().parse::<i64>().ok()?, b.trim().parse::<i64>().ok()?),
                None => {
                    let v = range.trim().parse::<i64>().ok()?;
                    (v, v)
                }
            };
            let last = last.min(limit - 1);
            (first >= 0 && first <= last).then_some((first, last))
        })
        .collect();
    intervals.sort_unstable();
    let (mut count, mut counted_to) = (0i64, -1i64);
    for (first, last) in intervals {
        let from = first.max(counted_to + 1);
        if from <= last {
            count += last - from + 1;
            counted_to = last;
        }
    }
    i32::try_from(count).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::kueue::v1beta2::{Admission, PodSetAssignment, ResourceFlavor};

    fn job(extra_annotations: &str) -> Job {
        let yaml = format!(
            r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: team-a
  uid: 11111111-2222-3333-4444-555555555555
  labels:
    kueue.x-k8s.io/queue-name: lq
    kueue.x-k8s.io/priority-class: high
  annotations: {{{extra_annotations}}}
spec:
  parallelism: 4
  completions: 6
  template:
    metadata:
      labels: {{app: train}}
    spec:
      nodeSelector: {{zone: a}}
      containers:
      - name: c
        image: x
        resources: {{requests: {{cpu: "2", nvidia.com/gpu: "1"}}}}
"#
        );
        serde_yaml::from_str(&yaml).unwrap()
    }

    fn priorities() -> PriorityClasses {
        let mut p = PriorityClasses::default();
        let mut wpc = sluice_sdk::kueue::v1beta2::WorkloadPriorityClass::default();
        wpc.metadata.name = Some("high".into());
        wpc.spec.value = 500;
        p.upsert_workload_class(&wpc);
        p
    }

    #[test]
    fn builds_the_workload_kueue_builds() {
        let wl = BatchJob::workload(&job(""), &priorities()).unwrap();
        assert!(
            wl.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("job-train-")
        );
        assert_eq!(wl.metadata.namespace.as_deref(), Some("team-a"));
        let owner = &wl.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("Job", "train", Some(true))
        );
        assert_eq!(wl.spec.queue_name, "lq");
        assert_eq!(wl.spec.priority, Some(500));
        assert_eq!(wl.spec.priority_class_ref.as_ref().unwrap().name, "high");
        let ps = &wl.spec.pod_sets[0];
        assert_eq!(
            (ps.name.as_str(), ps.count, ps.min_count),
            ("main", 4, None)
        );
        assert!(wl.metadata.annotations.is_none());
        // Of the job's annotations, its ProvisioningRequest ones and admission gates reach the Workload.
        let wl = BatchJob::workload(
            &job("provreq.kueue.x-k8s.io/max-run-duration-seconds: \"60\", \
                  kueue.x-k8s.io/admission-gated-by: example.com/gate, other: x"),
            &priorities(),
        )
        .unwrap();
        let ann = wl.metadata.annotations.unwrap();
        assert_eq!(
            ann.into_iter().collect::<Vec<_>>(),
            [
                (
                    "kueue.x-k8s.io/admission-gated-by".to_string(),
                    "example.com/gate".to_string()
                ),
                (
                    "provreq.kueue.x-k8s.io/max-run-duration-seconds".to_string(),
                    "60".to_string()
                )
            ]
        );
    }

    #[test]
    fn min_parallelism_annotation_sets_min_count_and_is_validated() {
        let wl = BatchJob::workload(
            &job("kueue.x-k8s.io/job-min-parallelism: \"2\""),
            &priorities(),
        )
        .unwrap();
        assert_eq!(wl.spec.pod_sets[0].min_count, Some(2));
        let err = BatchJob::workload(
            &job("kueue.x-k8s.io/job-min-parallelism: \"4\""),
            &priorities(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("job-min-parallelism"), "{err}");
        let err = BatchJob::workload(&job("kueue.x-k8s.io/job-min-parallelism: x"), &priorities())
            .unwrap_err();
        assert!(err.to_string().contains("Job team-a/train"), "{err}");
    }

    #[test]
    fn unknown_priority_class_is_an_error_naming_it() {
        let err = BatchJob::workload(&job(""), &PriorityClasses::default()).unwrap_err();
        assert!(err.to_string().contains("\"high\""), "{err}");
    }

    #[test]
    fn run_with_injects_flavor_and_restore_undoes_it() {
        let mut j = job("kueue.x-k8s.io/job-min-parallelism: \"2\"");
        BatchJob::suspend(&mut j);
        assert!(BatchJob::is_suspended(&j));
        let mut flavor: ResourceFlavor = serde_yaml::from_str(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: spot}\nspec:\n  nodeLabels: {capacity: spot}\n  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]\n",
        )
        .unwrap();
        flavor.metadata.name = Some("spot".into());
        let flavors = BTreeMap::from([("spot".to_string(), flavor)]);
        let admission = Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "main".into(),
                flavors: BTreeMap::from([
                    ("cpu".into(), "spot".into()),
                    ("nvidia.com/gpu".into(), "spot".into()),
                ]),
                count: Some(3),
                ..Default::default()
            }],
        };
        let infos =
            super::super::pod_set_infos(&admission, &[], "lq", "wl", |n| flavors.get(n)).unwrap();
        let original = BatchJob::workload(&j, &priorities()).unwrap();
        BatchJob::run_with(&mut j, &infos).unwrap();
        let spec = j.spec.as_ref().unwrap();
        assert_eq!(spec.suspend, Some(false));
        assert_eq!(spec.parallelism, Some(3));
        let pod = spec.template.spec.as_ref().unwrap();
        let sel = pod.node_selector.as_ref().unwrap();
        assert_eq!(
            (sel["zone"].as_str(), sel["capacity"].as_str()),
            ("a", "spot")
        );
        assert_eq!(pod.tolerations.as_ref().unwrap().len(), 1);
        let lbl = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(lbl["kueue.x-k8s.io/podset"], "main");

        // The Job controller's own labels, which the API server requires on every update of the Job.
        let tpl_labels = j.spec.as_mut().unwrap().template.metadata.as_mut().unwrap();
        let tpl_labels = tpl_labels.labels.get_or_insert_with(Default::default);
        tpl_labels.insert("batch.kubernetes.io/job-name".into(), "j".into());
        tpl_labels.insert("controller-uid".into(), "u1".into());
        BatchJob::suspend(&mut j);
        let ps = &original.spec.pod_sets[0];
        BatchJob::restore(
            &mut j,
            &[PodSetInfo::from_template(&ps.name, ps.count, &ps.template)],
        );
        let spec = j.spec.as_ref().unwrap();
        assert_eq!((spec.suspend, spec.parallelism), (Some(true), Some(4)));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_selector.as_ref().unwrap().len(), 1);
        assert!(pod.tolerations.is_none());
        let lbl = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(
            lbl.get("batch.kubernetes.io/job-name").map(String::as_str),
            Some("j")
        );
        assert_eq!(lbl.get("controller-uid").map(String::as_str), Some("u1"));
        assert!(!lbl.contains_key("kueue.x-k8s.io/podset"), "{lbl:?}");

        // Admitted again after the eviction: partial admission still applies.
        BatchJob::run_with(&mut j, &infos).unwrap();
        assert_eq!(j.spec.as_ref().unwrap().parallelism, Some(3));
    }

    #[test]
    fn conflicting_node_selector_is_refused() {
        let mut j = job("");
        let info = PodSetInfo {
            name: "main".into(),
            count: 4,
            node_selector: BTreeMap::from([("zone".to_string(), "b".to_string())]),
            ..Default::default()
        };
        let err = BatchJob::run_with(&mut j, &[info]).unwrap_err();
        assert!(err.to_string().contains("spec.nodeSelector[zone]"), "{err}");
    }

    #[test]
    fn finished_reads_conditions() {
        let mut j = job("");
        assert_eq!(BatchJob::finished(&j), Ok(None));
        j.status = serde_json::from_value(serde_json::json!({"conditions": [{"type": "Complete",
            "status": "True", "message": "Reached expected number of succeeded pods"}]}))
        .unwrap();
        // Kueue's Finished message is the Job condition's.
        assert_eq!(
            BatchJob::finished(&j),
            Ok(Some((
                true,
                "Reached expected number of succeeded pods".into()
            )))
        );
    }

    fn template_annotated(annotations: &str) -> Job {
        let mut j = job("");
        let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
            serde_yaml::from_str(&format!("annotations: {{{annotations}}}")).unwrap();
        if let Some(spec) = j.spec.as_mut() {
            spec.template.metadata = Some(meta);
        }
        j
    }

    #[test]
    fn topology_request_follows_kueues_builder_for_groups_and_slice_layers() {
        // jobframework NewPodSetTopologyRequest: the group name only with required/preferred;
        // the slice constraints list is read (multi-layer topology is on in v0.19).
        let tr = |a: &str| {
            BatchJob::workload(&template_annotated(a), &priorities())
                .map(|w| w.spec.pod_sets[0].topology_request.clone().unwrap())
        };
        let t = tr("kueue.x-k8s.io/podset-unconstrained-topology: \"true\", kueue.x-k8s.io/podset-group-name: g").unwrap();
        assert_eq!(t.pod_set_group_name, None);
        let t = tr(
            "kueue.x-k8s.io/podset-required-topology: rack, kueue.x-k8s.io/podset-group-name: g",
        )
        .unwrap();
        assert_eq!(t.pod_set_group_name.as_deref(), Some("g"));
        let t = tr(r#"kueue.x-k8s.io/podset-preferred-topology: block, kueue.x-k8s.io/podset-slice-required-topology-constraints: '[{"topology": "rack", "size": 2}]'"#).unwrap();
        assert_eq!(t.podset_slice_required_topology_constraints.len(), 1);
        assert_eq!(
            t.podset_slice_required_topology_constraints[0].topology,
            "rack"
        );
        assert_eq!(t.podset_slice_required_topology_constraints[0].size, 2);
        let err =
            tr("kueue.x-k8s.io/podset-slice-required-topology-constraints: '[]'").unwrap_err();
        assert!(err.to_string().contains("1 to 3 layers"), "{err}");
    }

    #[test]
    fn reclaimable_pods_are_the_slots_the_remaining_completions_leave() {
        let mut j = job("");
        let spec = j.spec.as_mut().unwrap();
        spec.parallelism = Some(4);
        spec.completions = Some(6);
        j.status = Some(Default::default());
        assert_eq!(BatchJob::reclaimable_pods(&j), Some(vec![]));
        // 3 of 6 done: 3 remain, one slot of 4 is free.
        j.status.as_mut().unwrap().succeeded = Some(3);
        assert_eq!(
            BatchJob::reclaimable_pods(&j),
            Some(vec![("main".to_string(), 1)])
        );
        // Indexed: completed and failed indexes count once each, those past completions not at all.
        let spec = j.spec.as_mut().unwrap();
        spec.completion_mode = Some("Indexed".into());
        let st = j.status.as_mut().unwrap();
        st.completed_indexes = Some("0-2,4".into());
        st.failed_indexes = Some("2,9".into());
        assert_eq!(
            BatchJob::reclaimable_pods(&j),
            Some(vec![("main".to_string(), 2)])
        );
        assert_eq!(terminal_indexes("1-3,x,5", "3-4", 5), 4);
    }
}
