//! Plain Pods and Pod groups as a [`Reconciled`] kind (Kueue's pod integration): Workload creation once a group
//! is complete, ungating on admission, ending the pods on eviction, and the pods' `kueue.x-k8s.io/managed`
//! finalizer; the cache of managed pods. The per-pod rules live in [`crate::jobs::pod_group`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Api, ResourceExt};
use sluice_sdk::kueue::integrations;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;

use super::kinds::{KindQueues, Kinds};
use super::reconciler::{Reconciled, Release, StopKind, StopReason, StopStep};
use super::{EngineTask, now_ms, reference};
use crate::controller::config::OperatorConfig;
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::jobs::pod_group::{self, PodGroup, PodGroupKey, PodGroups};
use crate::status;
use crate::telemetry::EventSeverity;

/// The managed pods as last seen, indexed by group so a group's reconcile does not scan every pod.
#[derive(Default)]
pub(super) struct ManagedPods {
    by_name: BTreeMap<(String, String), Pod>,
    members: BTreeMap<PodGroupKey, BTreeSet<(String, String)>>,
}

impl ManagedPods {
    pub(super) fn get(&self, key: &(String, String)) -> Option<&Pod> {
        self.by_name.get(key)
    }

    pub(super) fn get_mut(&mut self, key: &(String, String)) -> Option<&mut Pod> {
        self.by_name.get_mut(key)
    }

    /// Stores a managed pod (one without a group key is ignored).
    pub(super) fn insert(&mut self, key: (String, String), pod: Pod) {
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

    pub(super) fn remove(&mut self, key: &(String, String)) -> Option<Pod> {
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

/// Plain pods and pod groups: a Workload once the group is complete, ungated on admission, ended on eviction
/// (pods cannot be suspended), and their `kueue.x-k8s.io/managed` finalizer released when done.
impl Reconciled for PodGroups {
    type Key = PodGroupKey;
    const NOT_BUILT_REASON: &'static str = "ErrWorkloadCompose";
    const STOPS_ON_WORKLOAD_DELETION: bool = true;

    fn enabled(config: &OperatorConfig) -> bool {
        config.manages(integrations::POD)
    }

    /// Kueue's `CustomQueueNameChange`: a serving group's queue name (a LeaderWorkerSet's groups among them) is its
    /// owner's to change; a group with no pod left has no label to follow (Kueue does not reconcile it).
    fn follows_queue_name(job: &PodGroup) -> bool {
        job.pods.first().is_some_and(|p| !pod_group::is_serving(p))
    }

    fn queues(kinds: &mut Kinds) -> &mut KindQueues<Self::Key> {
        &mut kinds.pod_groups
    }

    /// The group with its cached pods; a group with none is still reconciled (an evicting one completes).
    fn load(task: &EngineTask, key: &Self::Key) -> Option<PodGroup> {
        Some(PodGroup {
            key: key.clone(),
            pods: task.group_pods(key),
        })
    }

    fn skip(_: &EngineTask, _: &PodGroup) -> bool {
        false
    }

    fn namespace(key: &Self::Key) -> String {
        key.namespace().to_string()
    }

    fn owner_key(wl: &api::Workload) -> Option<Self::Key> {
        PodGroupKey::of_workload(wl)
    }

    fn all_keys(task: &EngineTask) -> Vec<Self::Key> {
        task.cache.managed_pods.groups().cloned().collect()
    }

    /// Pods ungated and not yet ended must be stopped, Running or not.
    fn needs_stopping(task: &EngineTask, key: &Self::Key) -> bool {
        let pods = task.group_pods(key);
        pods.iter().any(pod_group::is_live)
            || (key.is_group() && pods.iter().any(pod_group::is_active))
    }

    /// A group's Running pods (Kueue's `IsActive`, which looks only at a group's pods: a single pod's eviction
    /// completes once it is stopped).
    fn holds_pods(task: &EngineTask, key: &Self::Key) -> bool {
        key.is_group() && task.group_pods(key).iter().any(pod_group::is_active)
    }

    /// A group takes its prebuilt Workload with every pod as a plain owner; a single pod as its controller.
    fn prebuilt_owners(_: &EngineTask, job: &PodGroup) -> Option<Vec<OwnerReference>> {
        job.key.is_group().then(|| member_owners(job.pods.iter()))
    }

    /// A group fits its prebuilt Workload as Kueue's pod groups compare them (roles and counts); a single pod as
    /// any job.
    fn fits_prebuilt(
        task: &EngineTask,
        job: &PodGroup,
        wl: &api::Workload,
        tolerations: bool,
    ) -> Result<bool, crate::jobs::JobError> {
        if job.key.is_group() {
            return pod_group::group_fits(&job.pods, wl);
        }
        super::reconciler::fits_as_built::<Self>(task, job, wl, tolerations)
    }

    fn event_owner(job: &PodGroup) -> Option<ObjectReference> {
        job.pods.first().map(reference)
    }

    /// Pods being deleted are released and take no part in a new Workload; as Kueue, a group with running pods
    /// and no Workload waits until they stop (a single pod's Workload is created while it runs).
    async fn prepare_create(
        task: &mut EngineTask,
        key: &Self::Key,
        job: PodGroup,
    ) -> (bool, Option<PodGroup>) {
        let released = Self::finalize(task, key, Release::Deleting).await;
        let live: Vec<Pod> = task
            .group_pods(key)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if live.is_empty() || (key.is_group() && live.iter().any(pod_group::is_live)) {
            return (released, None);
        }
        // A group with a prebuilt Workload (a LeaderWorkerSet's) waits for it and never loses pods as excess.
        let (removed, live) =
            if <PodGroups as crate::jobs::JobIntegration>::prebuilt_workload(&job).is_some() {
                (false, live)
            } else {
                task.without_excess_pods(live).await
            };
        (
            released || removed,
            Some(PodGroup {
                key: key.clone(),
                pods: live,
            }),
        )
    }

    /// A group against its Workload, as Kueue's `FindMatchingWorkloads` and `CustomWorkloadConditions`: see
    /// [`EngineTask::align_group`].
    async fn trim(task: &mut EngineTask, wl: &api::Workload, job: PodGroup) -> (bool, PodGroup) {
        // Kueue's prebuilt path (a LeaderWorkerSet's groups) skips `FindMatchingWorkloads`.
        if !job.key.is_group()
            || <PodGroups as crate::jobs::JobIntegration>::prebuilt_workload(&job).is_some()
        {
            return (false, job);
        }
        task.align_group(wl, job).await
    }

    async fn start(task: &mut EngineTask, key: &Self::Key, wl: &api::Workload) -> bool {
        task.start_pods(key, wl).await
    }

    /// Ends the pods (all of them when the Workload is deleted); the eviction completes once none holds a node.
    async fn stop(
        task: &mut EngineTask,
        _: &Self::Key,
        job: &PodGroup,
        _: &api::Workload,
        why: &StopReason,
    ) -> StopStep {
        let all = why.kind == StopKind::WorkloadDeleted;
        let wrote = task
            .stop_pods(&job.pods, all, &why.reason, &why.message)
            .await;
        StopStep::Stopped { wrote }
    }

    async fn finalize(task: &mut EngineTask, key: &Self::Key, which: Release) -> bool {
        let group = PodGroup {
            key: key.clone(),
            pods: task.group_pods(key),
        };
        match which {
            Release::All => task.release_pods(&group.pods, |_| true).await,
            // As Kueue: a group's deleted pods keep the finalizer while its own Workload is unfinished; they are
            // released once replaced (`align_group`), or when it finishes or is deleted.
            Release::Deleting if task.has_open_group_workload(&group) => false,
            Release::Deleting => {
                task.release_pods(&group.pods, |p| p.metadata.deletion_timestamp.is_some())
                    .await
            }
        }
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
                self.kinds.pod_groups.dirty.insert(k);
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
        self.kinds.pod_groups.dirty.insert(gkey);
    }

    /// The cached pods of a group, by name.
    fn group_pods(&self, key: &PodGroupKey) -> Vec<Pod> {
        self.cache.managed_pods.group(key)
    }

    /// Ungates every still-gated pod of an admitted group with its pod set's node selector, tolerations and
    /// labels, one patch per pod.
    async fn start_pods(&mut self, key: &PodGroupKey, wl: &api::Workload) -> bool {
        let Some((cluster_queue, infos)) = self.admitted_infos(wl, "pods").await else {
            return false;
        };
        let pods = self.group_pods(key);
        let mut wrote = false;
        let is_group = key.is_group();
        // A pod being deleted (an excess one among them) is never started.
        for pod in pods
            .iter()
            .filter(|p| pod_group::is_gated(p) && p.metadata.deletion_timestamp.is_none())
        {
            let info = match pod_group::info_for(key, pod, &infos) {
                Ok(i) => i.clone(),
                Err(e) => {
                    tracing::warn!(error = %e, "pod not started");
                    continue;
                }
            };
            let pkey = (pod.namespace().unwrap_or_default(), pod.name_any());
            let written = self
                .write_pod(&pkey, Endpoint::Main, |p| {
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
                self.started_event(reference(&p), &cluster_queue);
            }
        }
        wrote
    }

    /// Whether a group (not a single pod, nor one with a prebuilt Workload) has a Workload not finished nor being
    /// deleted.
    fn has_open_group_workload(&self, job: &PodGroup) -> bool {
        if !job.key.is_group()
            || <PodGroups as crate::jobs::JobIntegration>::prebuilt_workload(job).is_some()
        {
            return false;
        }
        let Some(name) = <PodGroups as crate::jobs::JobIntegration>::workload_name(job) else {
            return false;
        };
        let wkey = crate::engine::WorkloadKey::new(job.key.namespace().to_string(), name);
        self.cache
            .workloads
            .get(&wkey)
            .is_some_and(|wl| !is_finished(wl) && wl.metadata.deletion_timestamp.is_none())
    }

    /// Before a group's Workload exists: its excess pods ([`pod_group::excess_pods`]) deleted; returns whether it
    /// wrote, and the pods without them.
    async fn without_excess_pods(&mut self, pods: Vec<Pod>) -> (bool, Vec<Pod>) {
        let excess: BTreeSet<String> = match pod_group::excess_pods(&pods) {
            Ok(e) => e.into_iter().map(|p| p.name_any()).collect(),
            Err(e) => {
                // The Workload's construction reports what is wrong with the pods.
                tracing::debug!(error = %e, "excess pods not computed");
                return (false, pods);
            }
        };
        if excess.is_empty() {
            return (false, pods);
        }
        let (excess, kept): (Vec<Pod>, Vec<Pod>) = pods
            .into_iter()
            .partition(|p| excess.contains(&p.name_any()));
        (self.delete_excess_pods(&excess).await, kept)
    }

    /// A group against its Workload ([`pod_group::align`]), as Kueue's `FindMatchingWorkloads` and
    /// `CustomWorkloadConditions` for a group without a prebuilt Workload: the kept pods own the Workload, excess
    /// pods are deleted, replaced pods released, and `WaitingForReplacementPods` says whether pods are
    /// missing. Returns whether it wrote, and the group of the kept pods only.
    async fn align_group(&mut self, wl: &api::Workload, job: PodGroup) -> (bool, PodGroup) {
        let a = match pod_group::align(&job.pods, wl, now_ms()) {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "pod group not aligned with its workload");
                return (false, job);
            }
        };
        let foreign = wl
            .annotations()
            .get(pod_group::IS_GROUP_WORKLOAD_ANNOTATION)
            .map(String::as_str)
            != Some("true")
            && wl
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true));
        if a.kept.is_empty() || foreign {
            // Kueue leaves such a Workload alone (no pod of it kept; or another controller's, as its
            // PodIntegrationValidateGroupOwner has it).
            return (false, job);
        }
        let wkey = workload_key(wl);
        let owners = member_owners(a.kept.iter().copied());
        let mut wrote = self
            .add_owner_references(&wkey, wl, owners)
            .await
            .unwrap_or(false);
        let excess: Vec<Pod> = a.excess.iter().map(|p| (*p).clone()).collect();
        let replaced: Vec<Pod> = a.replaced.iter().map(|p| (*p).clone()).collect();
        // The group is its kept pods from here on, as Kueue's is (`p.list.Items = keptPods`): pods of a role the
        // Workload lacks are left out too, so they are not ungated and count for neither PodsReady nor finishing.
        let kept: BTreeSet<String> = a.kept.iter().map(|p| p.name_any()).collect();
        let absent = a.absent;
        wrote |= self.delete_excess_pods(&excess).await;
        wrote |= self.release_pods(&replaced, |_| true).await;
        wrote |= self
            .set_waiting_for_replacement(&wkey, wl, absent > 0)
            .await;
        let pods = job
            .pods
            .into_iter()
            .filter(|p| kept.contains(&p.name_any()))
            .collect();
        (wrote, PodGroup { key: job.key, pods })
    }

    /// Kueue's `WaitingForReplacementPods` on a group's Workload: True while pods are missing (with the Evicted
    /// condition's reason and message while evicted, else `PodsFailed` "Some Failed pods need replacement"), False
    /// `PodsReady` "No pods need replacement" once none is, absent until pods first go missing.
    async fn set_waiting_for_replacement(
        &mut self,
        wkey: &crate::engine::WorkloadKey,
        wl: &api::Workload,
        waiting: bool,
    ) -> bool {
        let existing = wl.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == WAITING_FOR_REPLACEMENT_PODS)
        });
        let evicted = wl
            .status
            .as_ref()
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == labels::condition::EVICTED && c.status == "True")
            })
            .map(|c| (c.reason.clone(), c.message.clone()));
        let (reason, message) = match (waiting, existing, evicted) {
            (false, None, _) => return false,
            (false, Some(c), _) if c.status == "False" => return false,
            (false, _, _) => (
                "PodsReady".to_string(),
                "No pods need replacement".to_string(),
            ),
            (true, _, Some(e)) => e,
            (true, Some(c), None) if c.status == "True" => return false,
            (true, _, None) => (
                "PodsFailed".to_string(),
                "Some Failed pods need replacement".to_string(),
            ),
        };
        if existing.is_some_and(|c| {
            (c.status == "True") == waiting && c.reason == reason && c.message == message
        }) {
            return false;
        }
        let now = now_ms();
        let generation = wl.metadata.generation;
        let written = self
            .write_workload_status(wkey, |w| {
                let conds = &mut w.status.get_or_insert_with(Default::default).conditions;
                let changed = status::set_condition(
                    conds,
                    WAITING_FOR_REPLACEMENT_PODS,
                    waiting,
                    &reason,
                    &message,
                    now,
                );
                if let Some(c) = conds
                    .iter_mut()
                    .find(|c| c.type_ == WAITING_FOR_REPLACEMENT_PODS)
                {
                    if changed {
                        c.last_transition_time = status::k8s_time(now);
                    }
                    c.observed_generation = generation;
                }
                Ok(changed)
            })
            .await;
        if written.is_some() {
            self.sync_workload(wkey);
            self.queues_changed();
        }
        written.is_some()
    }

    /// Deletes excess pods as Kueue does: the `kueue.x-k8s.io/managed` finalizer removed, then the pod deleted (event
    /// `ExcessPodDeleted`); returns whether it wrote.
    async fn delete_excess_pods(&mut self, excess: &[Pod]) -> bool {
        let mut wrote = false;
        for pod in excess {
            if has_finalizer(pod, labels::MANAGED_FINALIZER) {
                wrote |= self.unfinalize_pod(pod).await;
            }
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            wrote |= self
                .delete_pod(
                    pod,
                    pod_group::EXCESS_POD_DELETED,
                    pod_group::EXCESS_POD_DELETED,
                    "Excess pod deleted".to_string(),
                )
                .await;
        }
        wrote
    }

    /// Deletes a managed pod, counts it as being deleted until the watch reports it, and announces it with an
    /// event; returns whether the delete went through.
    async fn delete_pod(&mut self, pod: &Pod, reason: &str, action: &str, note: String) -> bool {
        let pkey = (pod.namespace().unwrap_or_default(), pod.name_any());
        let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &pkey.0);
        if let Err(e) = self.writer.delete(&api, &pkey.1).await {
            tracing::error!(pod = %pkey.1, error = %e, "pod deletion failed");
            return false;
        }
        if let Some(p) = self.cache.managed_pods.get_mut(&pkey)
            && p.metadata.deletion_timestamp.is_none()
        {
            p.metadata.deletion_timestamp = Some(status::k8s_time(now_ms()));
        }
        self.event(reference(pod), EventSeverity::Normal, reason, action, note);
        true
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
            let now = status::k8s_time(now_ms());
            let marked = self
                .write_pod(&pkey, Endpoint::Status, |p| {
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
            if marked.is_none() {
                continue;
            }
            wrote = true;
            self.delete_pod(pod, "Stopped", "Stop", message.to_string())
                .await;
        }
        wrote
    }

    /// Kueue's `afterDeactivatedByKueue` for a single pod or a pod group (which has no single owner to delete):
    /// the first pod is deleted (event `Deleted` on it) and every pod of the group loses the
    /// `kueue.x-k8s.io/managed` finalizer, running or not (Kueue's `Finalize`), so the pods go and the Workload
    /// follows them by garbage collection. Returns whether it wrote.
    pub(super) async fn delete_deactivated_group(&mut self, key: &PodGroupKey) -> bool {
        let pods = self.group_pods(key);
        let Some(first) = pods.first() else {
            return false;
        };
        let mut wrote = self
            .delete_pod(
                first,
                "Deleted",
                "Deleted",
                "Deleted job: deactivation retention period expired".to_string(),
            )
            .await;
        for pod in pods
            .iter()
            .filter(|p| has_finalizer(*p, labels::MANAGED_FINALIZER))
        {
            wrote |= self.unfinalize_pod(pod).await;
        }
        wrote
    }

    /// Removes the pod's `kueue.x-k8s.io/managed` finalizer; returns whether it wrote.
    async fn unfinalize_pod(&mut self, pod: &Pod) -> bool {
        let pkey = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.write_pod(&pkey, Endpoint::Main, |p| {
            Ok(set_finalizer(p, labels::MANAGED_FINALIZER, false))
        })
        .await
        .is_some()
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
            wrote |= self.unfinalize_pod(pod).await;
        }
        wrote
    }
}

/// Kueue's Workload condition on a pod group whose pods are missing.
pub(super) const WAITING_FOR_REPLACEMENT_PODS: &str = "WaitingForReplacementPods";

/// The plain owner references of a group's members on its Workload.
fn member_owners<'a>(pods: impl Iterator<Item = &'a Pod>) -> Vec<OwnerReference> {
    pods.filter_map(|p| {
        Some(OwnerReference {
            api_version: "v1".to_string(),
            kind: "Pod".to_string(),
            name: p.name_any(),
            uid: p.uid()?,
            controller: None,
            block_owner_deletion: None,
        })
    })
    .collect()
}
