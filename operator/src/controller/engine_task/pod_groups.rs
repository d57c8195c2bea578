//! The engine task's controller for plain Pods and Pod groups (Kueue's pod integration): Workload creation once
//! a group is complete, ungating on admission, ending the pods on eviction, Finished, and the pods'
//! `kueue.x-k8s.io/managed` finalizer. The per-pod rules live in [`crate::jobs::pod_group`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::{Api, Resource, ResourceExt};
use sluice_sdk::kueue::labels::{self, condition};
use sluice_sdk::kueue::v1beta2 as api;

use super::{EngineTask, now_ms, reference};
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::engine::WorkloadKey;
use crate::jobs::pod_group::{self, PodGroupKey};
use crate::status;
use crate::telemetry::EventSeverity;

/// The managed pods as last seen, indexed by group so a group's reconcile does not scan every pod.
#[derive(Default)]
pub(super) struct ManagedPods {
    by_name: BTreeMap<(String, String), Pod>,
    members: BTreeMap<PodGroupKey, BTreeSet<(String, String)>>,
}

impl ManagedPods {
    fn get(&self, key: &(String, String)) -> Option<&Pod> {
        self.by_name.get(key)
    }

    fn get_mut(&mut self, key: &(String, String)) -> Option<&mut Pod> {
        self.by_name.get_mut(key)
    }

    /// Stores a managed pod (one without a group key is ignored).
    fn insert(&mut self, key: (String, String), pod: Pod) {
        let Some(group) = PodGroupKey::of(&pod) else {
            return;
        };
        if let Some(old) = self.by_name.insert(key.clone(), pod)
            && let Some(old_group) = PodGroupKey::of(&old)
            && old_group != group
        {
            self.unlink(&old_group, &key);
        }
        self.members.entry(group).or_default().insert(key);
    }

    fn remove(&mut self, key: &(String, String)) -> Option<Pod> {
        let pod = self.by_name.remove(key)?;
        if let Some(group) = PodGroupKey::of(&pod) {
            self.unlink(&group, key);
        }
        Some(pod)
    }

    fn unlink(&mut self, group: &PodGroupKey, key: &(String, String)) {
        if let Some(m) = self.members.get_mut(group) {
            m.remove(key);
            if m.is_empty() {
                self.members.remove(group);
            }
        }
    }

    /// The groups that have pods.
    pub(super) fn groups(&self) -> impl Iterator<Item = &PodGroupKey> {
        self.members.keys()
    }

    /// The group's pods, by name.
    fn group(&self, key: &PodGroupKey) -> Vec<Pod> {
        self.members
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|k| self.by_name.get(k).cloned())
            .collect()
    }
}

impl EngineTask {
    /// Takes a Pod watch event into the cache of managed pods and marks its group for reconciling.
    pub(super) fn absorb_managed_pod(&mut self, pod: &Pod, deleted: bool) {
        let pkey = (pod.namespace().unwrap_or_default(), pod.name_any());
        let Some(gkey) = PodGroupKey::of(pod) else {
            // A pod no longer managed leaves its group.
            if let Some(old) = self.cache.managed_pods.remove(&pkey)
                && let Some(k) = PodGroupKey::of(&old)
            {
                self.dirty_pod_groups.insert(k);
            }
            return;
        };
        if deleted {
            self.cache.managed_pods.remove(&pkey);
        } else {
            if let Some(cached) = self.cache.managed_pods.get(&pkey)
                && is_stale(cached, pod)
            {
                return;
            }
            self.cache.managed_pods.insert(pkey, pod.clone());
        }
        self.dirty_pod_groups.insert(gkey);
    }

    /// The cached pods of a group, by name.
    fn group_pods(&self, key: &PodGroupKey) -> Vec<Pod> {
        self.cache.managed_pods.group(key)
    }

    /// Whether the Workload belongs to a pod group whose pods still hold resources (an eviction must end them
    /// before it completes).
    pub(super) fn pod_group_running(&self, wl: &api::Workload) -> bool {
        PodGroupKey::of_workload(wl)
            .is_some_and(|k| self.group_pods(&k).iter().any(pod_group::is_active))
    }

    /// Reconciles one group; returns whether it wrote anything.
    pub(super) async fn reconcile_pod_group(&mut self, key: &PodGroupKey) -> bool {
        if !self.config.pod_groups {
            return false;
        }
        let pods = self.group_pods(key);
        // A single pod that is gone leaves its Workload to garbage collection (the pod owns it).
        let Some(wl_name) = key.workload_name(&pods) else {
            return false;
        };
        let wkey = WorkloadKey::new(key.namespace().to_string(), wl_name);
        let Some(wl) = self.cache.workloads.get(&wkey).cloned() else {
            if pods.is_empty() {
                return false;
            }
            if matches!(pod_group::finished(key, &pods), Ok(Some(_))) {
                return self.release_pods(&pods, |_| true).await;
            }
            // Pods being deleted take no part in a new Workload and need not be kept.
            let released = self
                .release_pods(&pods, |p| p.metadata.deletion_timestamp.is_some())
                .await;
            let live: Vec<Pod> = self
                .group_pods(key)
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            // As Kueue: a group with running pods and no Workload waits until they stop.
            if live.is_empty() || (key.is_group() && live.iter().any(pod_group::is_active)) {
                return released;
            }
            return self.create_pod_group_workload(key, &live).await || released;
        };
        if is_finished(&wl) {
            return self.release_pods(&pods, |_| true).await;
        }
        if wl.meta().deletion_timestamp.is_some() {
            // As Kueue: a deleted Workload ends every pod of its group, finished or not.
            let wrote = self
                .stop_pods(&pods, true, "WorkloadDeleted", "Workload is deleted")
                .await;
            let pods = self.group_pods(key);
            return self.release_pods(&pods, |_| true).await || wrote;
        }
        match pod_group::finished(key, &pods) {
            Ok(Some((success, message))) => {
                let message = if message.is_empty() {
                    if success {
                        "Pod succeeded".to_string()
                    } else {
                        "Pod failed".to_string()
                    }
                } else {
                    message
                };
                self.finish_workload_with(&wkey, &wl, success, &message)
                    .await;
                self.release_pods(&pods, |_| true).await;
                return true;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "pod group not reconciled");
                return false;
            }
        }
        if is_evicting(&wl) {
            let reason = cond_reason(&wl, condition::EVICTED).unwrap_or_default();
            let message = wl
                .status
                .as_ref()
                .and_then(|s| status::condition(&s.conditions, condition::EVICTED))
                .map(|c| c.message.clone())
                .unwrap_or_default();
            let stop_reason = format!("WorkloadEvictedDueTo{reason}");
            let wrote = self.stop_pods(&pods, false, &stop_reason, &message).await;
            if !self.group_pods(key).iter().any(pod_group::is_active) {
                self.complete_eviction(&wkey).await;
                return true;
            }
            return wrote;
        }
        if is_admitted(&wl) {
            let wrote = self.start_pods(key, &wl, &pods).await;
            if self.config.wait_for_pods_ready.is_some() {
                let ready = pod_group::pods_ready(key, &self.group_pods(key));
                if let Some(current) = self.cache.workloads.get(&wkey).cloned() {
                    self.set_pods_ready(&wkey, &current, ready).await;
                }
            }
            return wrote;
        }
        // Running without an admission (e.g. its Workload was recreated): Kueue stops the pods, as it suspends a
        // Job; for a group only when none of its pods is gated or terminated.
        let running = if key.is_group() {
            !pods.is_empty() && !pods.iter().any(pod_group::is_suspended)
        } else {
            pods.iter().any(pod_group::is_active)
        };
        let stopped = running
            && self
                .stop_pods(&pods, false, "NotAdmitted", "Not admitted by cluster queue")
                .await;
        // Without an admission nothing needs a deleted pod to be kept for counting.
        let pods = self.group_pods(key);
        self.release_pods(&pods, |p| p.metadata.deletion_timestamp.is_some())
            .await
            || stopped
    }

    async fn create_pod_group_workload(&mut self, key: &PodGroupKey, pods: &[Pod]) -> bool {
        match pod_group::workload(key, pods, &self.cache.priorities) {
            Ok(Some(wl)) => {
                self.create_owned_workload(pods.first().map(reference), &wl)
                    .await
            }
            Ok(None) => return false,
            Err(e) => {
                self.unbuilt_pod_groups.insert(key.clone());
                self.workload_not_built(pods.first().map(reference), "ErrWorkloadCompose", &e);
                return false;
            }
        }
        true
    }

    /// Ungates every still-gated pod of an admitted group with its pod set's node selector, tolerations and
    /// labels, one patch per pod.
    async fn start_pods(&mut self, key: &PodGroupKey, wl: &api::Workload, pods: &[Pod]) -> bool {
        let Some((cluster_queue, infos)) = self.admitted_infos(wl, "pods") else {
            return false;
        };
        let mut wrote = false;
        let is_group = key.is_group();
        for pod in pods.iter().filter(|p| pod_group::is_gated(p)) {
            let info = match pod_group::info_for(key, pod, &infos) {
                Ok(i) => i.clone(),
                Err(e) => {
                    tracing::warn!(error = %e, "pod not started");
                    continue;
                }
            };
            let written = self
                .write_pod(pod, |p| {
                    if !pod_group::is_gated(p) {
                        return Ok(false);
                    }
                    pod_group::run_pod(p, &info).map_err(|e| e.to_string())?;
                    if is_group {
                        // Kueue's webhook records the role at creation; the started pod's spec no longer hashes
                        // to it (node selector and tolerations were added), so record it here if missing.
                        p.annotations_mut()
                            .entry(labels::ROLE_HASH_ANNOTATION.to_string())
                            .or_insert_with(|| info.name.clone());
                    }
                    Ok(true)
                })
                .await;
            if let Some(p) = written {
                wrote = true;
                self.event(
                    reference(&p),
                    EventSeverity::Normal,
                    "Started",
                    "Start",
                    format!("Admitted by clusterQueue {cluster_queue}"),
                );
            }
        }
        wrote
    }

    /// Ends the group's pods as Kueue does after an eviction: condition `TerminationTarget` on the pod's status,
    /// then delete. Pods already being deleted, and (unless `all`) pods terminated or never ungated, are left.
    async fn stop_pods(&mut self, pods: &[Pod], all: bool, reason: &str, message: &str) -> bool {
        let mut wrote = false;
        for pod in pods {
            if pod.metadata.deletion_timestamp.is_some() || (!all && pod_group::is_suspended(pod)) {
                continue;
            }
            let pkey = (pod.namespace().unwrap_or_default(), pod.name_any());
            let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &pkey.0);
            let now = status::k8s_time(now_ms());
            let marked = self
                .writer
                .update(&api, pod.clone(), Endpoint::Status, |p| {
                    let st = p.status.get_or_insert_with(Default::default);
                    let conds = st.conditions.get_or_insert_with(Vec::new);
                    if conds
                        .iter()
                        .any(|c| c.type_ == pod_group::TERMINATION_TARGET_CONDITION)
                    {
                        return Ok(false);
                    }
                    conds.push(PodCondition {
                        type_: pod_group::TERMINATION_TARGET_CONDITION.to_string(),
                        status: "True".to_string(),
                        reason: Some(reason.to_string()),
                        message: Some(message.to_string()),
                        last_transition_time: Some(now.clone()),
                        ..Default::default()
                    });
                    Ok(true)
                })
                .await;
            match marked {
                Ok(Some(p)) => {
                    self.cache.managed_pods.insert(pkey.clone(), p);
                }
                Ok(None) => {
                    self.cache.managed_pods.remove(&pkey);
                    continue;
                }
                Err(e) => {
                    tracing::error!(pod = %pkey.1, error = %e, "pod not marked for termination");
                    continue;
                }
            }
            wrote = true;
            match self.writer.delete(&api, &pkey.1).await {
                Ok(()) => {
                    // Until the watch reports it, count the pod as being deleted.
                    if let Some(p) = self.cache.managed_pods.get_mut(&pkey)
                        && p.metadata.deletion_timestamp.is_none()
                    {
                        p.metadata.deletion_timestamp = Some(now.clone());
                    }
                    self.event(
                        reference(pod),
                        EventSeverity::Normal,
                        "Stopped",
                        "Stop",
                        message.to_string(),
                    );
                }
                Err(e) => tracing::error!(pod = %pkey.1, error = %e, "pod deletion failed"),
            }
        }
        wrote
    }

    /// Removes the `kueue.x-k8s.io/managed` finalizer from the pods `which` selects that are done with: terminated
    /// or being deleted (or all of them when the Workload is finished, as `which` then says).
    async fn release_pods(&mut self, pods: &[Pod], which: impl Fn(&Pod) -> bool) -> bool {
        let mut wrote = false;
        for pod in pods {
            if !which(pod) || !has_finalizer(pod, labels::MANAGED_FINALIZER) {
                continue;
            }
            let done = pod_group::is_terminated(pod)
                || pod.metadata.deletion_timestamp.is_some()
                || pod_group::is_gated(pod);
            if !done {
                continue;
            }
            let written = self
                .write_pod(pod, |p| {
                    Ok(set_finalizer(p, labels::MANAGED_FINALIZER, false))
                })
                .await;
            wrote |= written.is_some();
        }
        wrote
    }

    /// Writes a pod's spec/metadata change and keeps the cache current.
    async fn write_pod(
        &mut self,
        pod: &Pod,
        mutate: impl FnMut(&mut Pod) -> Result<bool, String>,
    ) -> Option<Pod> {
        let pkey = (pod.namespace().unwrap_or_default(), pod.name_any());
        let cached = self.cache.managed_pods.get(&pkey).cloned()?;
        let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &pkey.0);
        match self
            .writer
            .update(&api, cached, Endpoint::Main, mutate)
            .await
        {
            Ok(Some(p)) => {
                // A deleted pod whose last finalizer went is gone.
                if p.meta().deletion_timestamp.is_some() && p.finalizers().is_empty() {
                    self.cache.managed_pods.remove(&pkey);
                } else {
                    self.cache.managed_pods.insert(pkey, p.clone());
                }
                Some(p)
            }
            Ok(None) => {
                self.cache.managed_pods.remove(&pkey);
                None
            }
            Err(e) => {
                tracing::error!(pod = %pkey.1, error = %e, "pod write failed");
                None
            }
        }
    }
}
