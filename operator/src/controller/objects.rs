//! Small readers of Kueue Workloads and Jobs the controllers share.

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use sluice_sdk::kueue::labels::condition;
use sluice_sdk::kueue::v1beta2 as api;

use crate::engine::{Time, WorkloadKey};
use crate::ingest::time_of;
use crate::status;

/// Whether the Workload's condition `type_` is True.
pub fn cond_true(wl: &api::Workload, type_: &str) -> bool {
    wl.status
        .as_ref()
        .and_then(|s| status::condition(&s.conditions, type_))
        .is_some_and(|c| c.status == "True")
}

/// When the condition last changed, if present.
pub fn cond_time(wl: &api::Workload, type_: &str) -> Option<Time> {
    wl.status
        .as_ref()
        .and_then(|s| status::condition(&s.conditions, type_))
        .map(|c| time_of(&c.last_transition_time))
}

/// The reason of a condition, if present.
pub fn cond_reason<'a>(wl: &'a api::Workload, type_: &str) -> Option<&'a str> {
    wl.status
        .as_ref()
        .and_then(|s| status::condition(&s.conditions, type_))
        .map(|c| c.reason.as_str())
}

/// Finished=True.
pub fn is_finished(wl: &api::Workload) -> bool {
    cond_true(wl, condition::FINISHED)
}

/// Holds quota, is not being evicted, and every admission check passed (Kueue's IsAdmitted: the job may run).
pub fn is_admitted(wl: &api::Workload) -> bool {
    has_admission(wl)
        && cond_true(wl, condition::QUOTA_RESERVED)
        && !cond_true(wl, condition::EVICTED)
        && crate::admission_checks::all_ready(wl)
}

/// Holds quota while its eviction is under way (its pods must stop before the quota is released).
pub fn is_evicting(wl: &api::Workload) -> bool {
    has_admission(wl) && cond_true(wl, condition::EVICTED)
}

/// `status.admission` is set.
pub fn has_admission(wl: &api::Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| s.admission.is_some())
}

/// The ClusterQueue the Workload's admission names ("" when it holds none).
pub fn admitted_cluster_queue(wl: &api::Workload) -> String {
    wl.status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|a| a.cluster_queue.clone())
        .unwrap_or_default()
}

/// When the workload may be queued again after a backoff, if it waits for one.
pub fn requeue_at(wl: &api::Workload) -> Option<Time> {
    wl.status
        .as_ref()
        .and_then(|s| s.requeue_state.as_ref())
        .and_then(|r| r.requeue_at.as_ref())
        .map(time_of)
}

/// The workload's key.
pub fn workload_key(wl: &api::Workload) -> WorkloadKey {
    WorkloadKey::new(wl.namespace().unwrap_or_default(), wl.name_any())
}

/// The (namespace, name) of the batch/v1 Job that controls the workload, if any.
pub fn owner_job(wl: &api::Workload) -> Option<(String, String)> {
    controller_owner(wl, "batch/v1", "Job")
}

/// The (namespace, name) of the controller owner of `kind` in `api_version` of the workload, if any.
pub fn controller_owner(
    wl: &api::Workload,
    api_version: &str,
    kind: &str,
) -> Option<(String, String)> {
    wl.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == kind && o.api_version == api_version && o.controller == Some(true))
        .map(|o| (wl.namespace().unwrap_or_default(), o.name.clone()))
}

/// A Job's (namespace, name).
pub fn job_key(job: &Job) -> (String, String) {
    object_key(job)
}

/// A namespaced object's (namespace, name).
pub fn object_key<K: kube::Resource>(obj: &K) -> (String, String) {
    (obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Whether the object carries a finalizer.
pub fn has_finalizer<K: kube::Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
}

/// Adds (true) or removes (false) a finalizer; returns whether anything changed.
pub fn set_finalizer<K: kube::Resource>(obj: &mut K, finalizer: &str, present: bool) -> bool {
    let list = obj.meta_mut().finalizers.get_or_insert_with(Vec::new);
    let had = list.iter().any(|f| f == finalizer);
    if present && !had {
        list.push(finalizer.to_string());
        true
    } else if !present && had {
        list.retain(|f| f != finalizer);
        true
    } else {
        false
    }
}

/// Whether `incoming` is older than `cached` by resourceVersion (both numeric), e.g. a watch event delivered
/// after this controller's own write already returned a newer copy.
pub fn is_stale<K: kube::Resource>(cached: &K, incoming: &K) -> bool {
    let rv = |o: &K| {
        o.meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    matches!((rv(cached), rv(incoming)), (Some(c), Some(i)) if i < c)
}
