//! Job integrations: how a kind of job becomes a Workload, starts on admission and stops on eviction.
//!
//! Each kind implements [`JobIntegration`] (what the reconciler reads), and [`SuspendableJob`] when it has a
//! suspend field: the batch/v1 Job ([`BatchJob`]), the JobSet ([`JobSetJob`]), the Kubeflow PyTorchJob
//! ([`PyTorchJobJob`]), KubeRay's RayJob, RayCluster and RayService ([`RayJobJob`], [`RayClusterJob`], [`RayServiceJob`]), Kubeflow Trainer's TrainJob
//! ([`TrainJobJob`]), and plain Pods and pod groups ([`PodGroups`]). The operator's
//! one job reconciler (`controller/engine_task/reconciler.rs`) is generic over these traits; the simulator drives
//! suspendable kinds through them.

/// The `JobIntegration` items every kind that is one API object with its own `workload` builder shares: the queue
/// name from its label, the Workload's name from its kind, group, name and uid, and `compose` as `workload`.
macro_rules! object_job_identity {
    ($job:ty) => {
        fn queue_name(job: &$job) -> Option<String> {
            kube::ResourceExt::labels(job)
                .get(sluice_sdk::kueue::labels::QUEUE_NAME_LABEL)
                .cloned()
        }

        fn prebuilt_workload(job: &$job) -> Option<String> {
            $crate::jobs::prebuilt_workload_name(&job.metadata)
        }

        fn workload_name(job: &$job) -> Option<String> {
            if let Some(prebuilt) = Self::prebuilt_workload(job) {
                return Some(prebuilt);
            }
            let uid = job.metadata.uid.as_deref()?;
            Some($crate::jobs::workload_name(
                Self::KIND,
                Self::GROUP,
                &kube::ResourceExt::name_any(job),
                uid,
            ))
        }

        fn compose(job: &$job, priorities: &PriorityClasses) -> Result<Option<Workload>, JobError> {
            Self::workload(job, priorities).map(Some)
        }

        fn copied_labels(
            job: &$job,
            keys: &[String],
        ) -> Result<std::collections::BTreeMap<String, String>, JobError> {
            Ok($crate::jobs::copy_labels(kube::Resource::meta(job), keys))
        }
    };
}

mod batch_job;
mod jobset;
pub mod lws;
pub mod pod_group;
mod podset_info;
mod priority;
mod pytorchjob;
mod ray;
pub mod topology;
mod topology_request;
mod trainjob;

pub use batch_job::BatchJob;
pub use jobset::JobSetJob;
pub use lws::{LwsGroup, LwsGroupJob};
pub use pod_group::{PodGroup, PodGroupKey, PodGroups};
pub use podset_info::{PodSetInfo, merge_check_updates, pod_set_infos};
pub use priority::{PriorityClasses, ResolvedPriority};
pub use pytorchjob::PyTorchJobJob;
pub use ray::{RayClusterJob, RayJobJob, RayServiceJob};
pub use trainjob::TrainJobJob;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sluice_sdk::kueue::v1beta2::Workload;

/// An error turning a job into a Workload or applying an admission to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {namespace}/{name}: {field}: {message}")]
pub struct JobError {
    /// Kind of the job.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The field at fault (JSON path).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// One kind of job that Sluice queues: what the reconciler reads of it. Every kind implements it; how a kind is
/// started and stopped differs (a Job is suspended, pods are ended) and is the controller's part.
pub trait JobIntegration {
    /// The job as the reconciler loads it (a batch Job, or a pod group with its pods).
    type Job;

    /// Kubernetes kind, e.g. "Job".
    const KIND: &'static str;
    /// Kubernetes API group, e.g. "batch".
    const GROUP: &'static str;
    /// apiVersion, e.g. "batch/v1".
    const API_VERSION: &'static str;

    /// The LocalQueue the job names (label `kueue.x-k8s.io/queue-name`), if any.
    fn queue_name(job: &Self::Job) -> Option<String>;

    /// The name of the job's Workload (its prebuilt Workload's, if it names one); None while the job's uid is
    /// unknown.
    fn workload_name(job: &Self::Job) -> Option<String>;

    /// The prebuilt Workload the job names (`kueue.x-k8s.io/prebuilt-workload-name`): Kueue then never builds
    /// one, it adopts that one. None for kinds without (pod groups).
    fn prebuilt_workload(_job: &Self::Job) -> Option<String> {
        None
    }

    /// The Workload Kueue builds for the job (name, owner, pod sets, priority, queue); None while the job is
    /// not ready to be queued (a pod group below its total count).
    fn compose(job: &Self::Job, priorities: &PriorityClasses)
    -> Result<Option<Workload>, JobError>;

    /// The job's labels whose keys Kueue's `integrations.labelKeysToCopy` lists, which its new Workload carries
    /// (copied once, at creation; the pods of a group must agree on each).
    fn copied_labels(
        job: &Self::Job,
        keys: &[String],
    ) -> Result<std::collections::BTreeMap<String, String>, JobError>;

    /// Whether the job is not running: suspended, or (pods) gated or terminated.
    fn is_suspended(job: &Self::Job) -> bool;

    /// Whether pods of the job still hold resources on nodes (Kueue's IsActive).
    fn is_active(job: &Self::Job) -> bool;

    /// `Some((success, message))` once the job has finished; the message is the one Kueue writes into the
    /// Workload's Finished condition.
    fn finished(job: &Self::Job) -> Result<Option<(bool, String)>, JobError>;

    /// Whether the admitted pods of the job are all ready (Kueue's PodsReady), against its Workload.
    fn pods_ready(job: &Self::Job, wl: &Workload) -> bool;

    /// Whether the job is on hold (Kueue's `JobWithOnHold`): its Workload gives back any quota and leaves the
    /// queue, and nothing else is done with the job. Only RayJobs KubeRay found invalid are.
    fn is_on_hold(_job: &Self::Job) -> bool {
        false
    }

    /// Per pod set, the pods that finished and will not run again (Kueue's ReclaimablePods); None for a kind that
    /// does not report them.
    fn reclaimable_pods(_job: &Self::Job) -> Option<Vec<(String, i32)>> {
        None
    }
}

/// A kind with a suspend field (the batch Job; JobSet and RayJob later): it waits suspended, starts by being
/// unsuspended with its admission, and is suspended and restored after an eviction.
pub trait SuspendableJob: JobIntegration {
    /// Suspends the job (it waits for admission, or was evicted).
    fn suspend(job: &mut Self::Job);

    /// Starts an admitted job: unsuspends it with the admission's node selectors, tolerations, labels and counts.
    fn run_with(job: &mut Self::Job, infos: &[PodSetInfo]) -> Result<(), JobError>;

    /// Undoes `run_with` after an eviction: restores what it injected, keeping the job suspended.
    fn restore(job: &mut Self::Job, infos: &[PodSetInfo]);
}

/// A kind that reports its end in status conditions: `success` True finishes it successfully, else `failure`
/// True finishes it failed, with the condition's message.
pub(crate) fn finished_by_conditions(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    success: &str,
    failure: &str,
) -> Option<(bool, String)> {
    let find = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t && c.status == "True")
            .map(|c| c.message.clone())
    };
    find(success)
        .map(|m| (true, m))
        .or_else(|| find(failure).map(|m| (false, m)))
}

/// The prebuilt Workload an object names, as Kueue v0.19 reads it (WorkloadIdentifierAnnotations on): the
/// `kueue.x-k8s.io/prebuilt-workload-name` annotation when set, else the label of that name.
pub fn prebuilt_workload_name(meta: &ObjectMeta) -> Option<String> {
    use sluice_sdk::kueue::labels;
    let annotation = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::PREBUILT_WORKLOAD_ANNOTATION));
    let label = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::PREBUILT_WORKLOAD_LABEL));
    annotation
        .filter(|n| !n.is_empty())
        .or(label)
        .filter(|n| !n.is_empty())
        .cloned()
}

/// What a kind's Workload takes from the job's metadata, beside its pod sets.
pub(crate) struct Owner<'a> {
    /// The job's metadata.
    pub meta: &'a ObjectMeta,
    /// Its kind, group and apiVersion.
    pub kind: &'static str,
    /// Its API group.
    pub group: &'static str,
    /// Its apiVersion.
    pub api_version: &'static str,
    /// The pod PriorityClass the kind names, if any, and the field that names it (for errors).
    pub pod_class: Option<(String, String)>,
}

impl<'a> Owner<'a> {
    /// The owner of kind `I` with this metadata and pod PriorityClass.
    pub(crate) fn of<I: JobIntegration + ?Sized>(
        meta: &'a ObjectMeta,
        pod_class: Option<(String, String)>,
    ) -> Self {
        Self {
            meta,
            kind: I::KIND,
            group: I::GROUP,
            api_version: I::API_VERSION,
            pod_class,
        }
    }
}

/// The Workload Kueue's job framework builds for a job of any kind: its name (kind, group, name and uid hashed),
/// controller owner reference, `kueue.x-k8s.io/job-uid` label, finalizer, queue, priority (the
/// `kueue.x-k8s.io/priority-class` label, else the kind's pod PriorityClass, else the default) and maximum execution
/// time, with `pod_sets`.
pub(crate) fn owned_workload(
    owner: Owner<'_>,
    pod_sets: Vec<sluice_sdk::kueue::v1beta2::PodSet>,
    priorities: &PriorityClasses,
) -> Result<Workload, JobError> {
    use sluice_sdk::kueue::labels;
    let meta = owner.meta;
    let error = |field: &str, message: String| JobError {
        kind: owner.kind.to_string(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        field: field.to_string(),
        message,
    };
    let label = |key: &str| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
    };
    let name = meta
        .name
        .clone()
        .ok_or_else(|| error("metadata.name", "required".into()))?;
    let uid = meta
        .uid
        .clone()
        .ok_or_else(|| error("metadata.uid", "required".into()))?;
    let wpc = label(labels::PRIORITY_CLASS_LABEL);
    let (pod_class, pod_class_field) = owner.pod_class.unzip();
    let priority = priorities.resolve(wpc, pod_class.as_deref()).map_err(|m| {
        let field = match (wpc, pod_class_field) {
            (Some(_), _) | (None, None) => {
                format!("metadata.labels[{}]", labels::PRIORITY_CLASS_LABEL)
            }
            (None, Some(f)) => f,
        };
        error(&field, m)
    })?;
    let max_exec = max_exec_seconds(meta).map_err(|(f, m)| error(&f, m))?;
    let reference = OwnerReference {
        api_version: owner.api_version.to_string(),
        kind: owner.kind.to_string(),
        name: name.clone(),
        uid: uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let metadata = ObjectMeta {
        name: Some(workload_name(owner.kind, owner.group, &name, &uid)),
        namespace: Some(meta.namespace.clone().unwrap_or_else(|| "default".into())),
        labels: Some(std::collections::BTreeMap::from([(
            labels::JOB_UID_LABEL.to_string(),
            uid,
        )])),
        owner_references: Some(vec![reference]),
        finalizers: Some(vec![labels::RESOURCE_IN_USE_FINALIZER.to_string()]),
        creation_timestamp: meta.creation_timestamp.clone(),
        annotations: Some(copied_annotations(meta)).filter(|a| !a.is_empty()),
        ..Default::default()
    };
    Ok(Workload {
        metadata,
        spec: sluice_sdk::kueue::v1beta2::WorkloadSpec {
            pod_sets,
            queue_name: label(labels::QUEUE_NAME_LABEL)
                .unwrap_or_default()
                .to_string(),
            priority_class_ref: priority.class_ref,
            priority: Some(priority.value),
            maximum_execution_time_seconds: max_exec,
            ..Default::default()
        },
        status: None,
    })
}

/// The job's `kueue.x-k8s.io/max-exec-time-seconds` (Workload `maximumExecutionTimeSeconds`); a value that is not
/// a positive integer is the (field, message) of the error.
pub fn max_exec_seconds(meta: &ObjectMeta) -> Result<Option<i32>, (String, String)> {
    use sluice_sdk::kueue::labels::MAX_EXEC_TIME_SECONDS_LABEL;
    let Some(v) = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(MAX_EXEC_TIME_SECONDS_LABEL))
    else {
        return Ok(None);
    };
    match v.parse::<i32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err((
            format!("metadata.labels[{MAX_EXEC_TIME_SECONDS_LABEL}]"),
            format!("{v:?} is not a positive integer"),
        )),
    }
}

/// The labels of `meta` whose keys `keys` lists (Kueue's `integrations.labelKeysToCopy`).
pub fn copy_labels(
    meta: &ObjectMeta,
    keys: &[String],
) -> std::collections::BTreeMap<String, String> {
    let Some(labels) = meta.labels.as_ref() else {
        return Default::default();
    };
    keys.iter()
        .filter_map(|k| Some((k.clone(), labels.get(k)?.clone())))
        .collect()
}

/// Puts labels `copied` by `labelKeysToCopy` on a new Workload; a label the Workload has already (Kueue's job-uid)
/// stays, as Kueue sets its own after copying.
pub fn add_copied_labels(wl: &mut Workload, copied: std::collections::BTreeMap<String, String>) {
    if copied.is_empty() {
        return;
    }
    let labels = wl.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in copied {
        labels.entry(k).or_insert(v);
    }
}

/// The annotations Kueue's `NewWorkload` gives a job's Workload from the job: its ProvisioningRequest annotations
/// (`provreq.kueue.x-k8s.io/...`) and, under AdmissionGatedBy (beta, on), its `kueue.x-k8s.io/admission-gated-by`
/// gates, which hold the Workload out of the queue.
pub fn copied_annotations(meta: &ObjectMeta) -> std::collections::BTreeMap<String, String> {
    let mut out: std::collections::BTreeMap<String, String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(sluice_sdk::kueue::labels::PROVREQ_ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(gates) = admission_gates(meta) {
        out.insert(
            sluice_sdk::kueue::labels::ADMISSION_GATED_BY_ANNOTATION.to_string(),
            gates.to_string(),
        );
    }
    out
}

/// An object's `kueue.x-k8s.io/admission-gated-by` gates, if it has any (an empty value is none, as in Kueue).
pub fn admission_gates(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(sluice_sdk::kueue::labels::ADMISSION_GATED_BY_ANNOTATION))
        .map(String::as_str)
        .filter(|g| !g.is_empty())
}

/// Pods the Workload's admission admitted (each pod set's assigned count, or its spec count).
pub fn admitted_pods(wl: &Workload) -> i32 {
    let Some(a) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return 0;
    };
    a.pod_set_assignments
        .iter()
        .map(|p| {
            p.count.unwrap_or_else(|| {
                wl.spec
                    .pod_sets
                    .iter()
                    .find(|ps| ps.name == p.name)
                    .map_or(0, |ps| ps.count)
            })
        })
        .sum()
}

/// The name Kueue gives a job's Workload: `<lower(kind)>-<name>` truncated, then 5 hex digits of
/// sha1(kind, group, name, uid) so that names never collide across kinds.
pub fn workload_name(kind: &str, group: &str, name: &str, uid: &str) -> String {
    use sha1::{Digest, Sha1};
    const HASH_LEN: usize = 5;
    const MAX_LEN: usize = 253;
    let mut h = Sha1::new();
    for (i, part) in [kind, group, name, uid].iter().enumerate() {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(part.as_bytes());
    }
    let hash: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let mut prefix = format!("{}-{name}", kind.to_lowercase());
    let max_prefix = MAX_LEN - 1 - HASH_LEN;
    if prefix.len() > max_prefix {
        let mut cut = max_prefix;
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        prefix.truncate(cut);
    }
    format!("{prefix}-{}", &hash[..HASH_LEN])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_name_is_kind_name_and_hash() {
        let n = workload_name("Job", "batch", "train", "uid-1");
        assert!(n.starts_with("job-train-"), "{n}");
        assert_eq!(n.len(), "job-train-".len() + 5);
        assert_ne!(n, workload_name("Job", "batch", "train", "uid-2"));
        assert_eq!(n, workload_name("Job", "batch", "train", "uid-1"));
    }

    #[test]
    fn long_names_are_truncated_to_253() {
        let n = workload_name("Job", "batch", &"x".repeat(400), "u");
        assert_eq!(n.len(), 253);
    }
}
