//! LeaderWorkerSets, as Kueue's LeaderWorkerSet reconciler keeps them: one Workload per group, created, updated
//! (queue, priority) and deleted as the LeaderWorkerSet scales; and the pods the LWS controller makes, turned into
//! managed members of their group's pod group (the rules are in [`crate::jobs::lws`]). Admission, eviction and
//! the pods' gates are then the pod-group integration's, with each group's Workload as its prebuilt Workload.
//!
//! As Kueue does, the StatefulSets LWS makes are watched for their revisions: a pod whose StatefulSet is gone, or
//! whose StatefulSet is rolling from the pod's revision to a new one, is let go (ungated, Kueue's finalizer
//! removed), and a pod that ended or is being deleted loses the finalizer (Kueue's `ShouldFinalizePod`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use sluice_sdk::kueue::integrations;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::lws::{self as lws_api, LeaderWorkerSet};

use super::{EngineTask, reference};
use crate::controller::writer::Endpoint;
use crate::engine::WorkloadKey;
use crate::jobs::lws;
use crate::jobs::pod_group;

/// LeaderWorkerSets as last seen, the pods their controller made, and those to reconcile.
#[derive(Default)]
pub(super) struct LwsCache {
    objects: BTreeMap<(String, String), LeaderWorkerSet>,
    /// Per LeaderWorkerSet, its pods by name (those whose templates it annotated for Kueue).
    pods: BTreeMap<(String, String), BTreeMap<String, Pod>>,
    /// LeaderWorkerSets to reconcile.
    pub dirty: BTreeSet<(String, String)>,
    /// The revisions of each StatefulSet a LeaderWorkerSet made, by (namespace, name).
    statefulsets: BTreeMap<(String, String), Revisions>,
    /// StatefulSets seen deleted (and not made again since): their pods are let go. One never seen is not taken
    /// for gone: its watch event may come after its pods'.
    deleted_statefulsets: BTreeSet<(String, String)>,
}

/// A StatefulSet's revisions (`status.currentRevision`, `status.updateRevision`): they differ while it rolls its
/// pods to a new template.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Revisions {
    current: String,
    update: String,
}

impl Revisions {
    fn of(sts: &StatefulSet) -> Self {
        let st = sts.status.as_ref();
        Self {
            current: st
                .and_then(|s| s.current_revision.clone())
                .unwrap_or_default(),
            update: st
                .and_then(|s| s.update_revision.clone())
                .unwrap_or_default(),
        }
    }
}

/// The pod label naming the StatefulSet revision a pod was made from.
const REVISION_LABEL: &str = "controller-revision-hash";

/// Kueue's `shouldUngatePod`: the pod's StatefulSet is gone, or it is rolling from the pod's revision to another.
fn should_ungate(sts: Option<&Revisions>, pod: &Pod) -> bool {
    match sts {
        None => true,
        Some(r) => {
            r.current != r.update
                && pod.labels().get(REVISION_LABEL).map(String::as_str) == Some(r.current.as_str())
        }
    }
}

/// Kueue's `ShouldFinalizePod`: the pod is let go, or it ended, or it is being deleted.
fn should_finalize(sts: Option<&Revisions>, pod: &Pod) -> bool {
    should_ungate(sts, pod)
        || pod_group::is_terminated(pod)
        || pod.metadata.deletion_timestamp.is_some()
}

impl EngineTask {
    /// Takes a LeaderWorkerSet watch event into the cache.
    pub(super) fn absorb_lws(&mut self, obj: LeaderWorkerSet, deleted: bool) {
        let key = (obj.namespace().unwrap_or_default(), obj.name_any());
        if deleted {
            self.cache.lws.objects.remove(&key);
        } else {
            self.cache.lws.objects.insert(key.clone(), obj);
        }
        self.cache.lws.dirty.insert(key);
    }

    /// Takes a Pod watch event: a pod of a LeaderWorkerSet is kept and its LeaderWorkerSet reconciled.
    pub(super) fn absorb_lws_pod(&mut self, pod: &Pod, deleted: bool) {
        let Some(set) = lws::parent_of(pod) else {
            return;
        };
        let key = (pod.namespace().unwrap_or_default(), set.to_string());
        let pods = self.cache.lws.pods.entry(key.clone()).or_default();
        if deleted {
            pods.remove(&pod.name_any());
            if pods.is_empty() {
                self.cache.lws.pods.remove(&key);
            }
            return;
        }
        pods.insert(pod.name_any(), pod.clone());
        self.cache.lws.dirty.insert(key);
    }

    /// Takes a StatefulSet watch event: its revisions are kept and its LeaderWorkerSet reconciled.
    pub(super) fn absorb_lws_statefulset(&mut self, sts: &StatefulSet, deleted: bool) {
        let ns = sts.namespace().unwrap_or_default();
        let key = (ns.clone(), sts.name_any());
        if deleted {
            self.cache.lws.statefulsets.remove(&key);
            self.cache.lws.deleted_statefulsets.insert(key);
        } else {
            self.cache.lws.deleted_statefulsets.remove(&key);
            self.cache.lws.statefulsets.insert(key, Revisions::of(sts));
        }
        if let Some(set) = sts.labels().get(lws_api::SET_NAME_LABEL) {
            self.cache.lws.dirty.insert((ns, set.clone()));
        }
    }

    /// The revisions of the StatefulSet that controls `pod`; None when it has none or it was deleted (Kueue's nil
    /// StatefulSet). One not seen yet counts as not rolling until its event comes and reconciles the set again.
    fn statefulset_of(&self, pod: &Pod) -> Option<Revisions> {
        let owner = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "StatefulSet")?;
        let key = (pod.namespace().unwrap_or_default(), owner.name.clone());
        match self.cache.lws.statefulsets.get(&key) {
            Some(r) => Some(r.clone()),
            None if self.cache.lws.deleted_statefulsets.contains(&key) => None,
            None => Some(Revisions::default()),
        }
    }

    /// A Workload event reconciles the LeaderWorkerSet that owns it.
    pub(super) fn absorb_lws_workload(&mut self, wl: &api::Workload) {
        let ns = wl.namespace().unwrap_or_default();
        for o in wl.metadata.owner_references.iter().flatten() {
            if o.kind == lws_api::KIND && o.api_version == lws_api::API_VERSION {
                self.cache.lws.dirty.insert((ns.clone(), o.name.clone()));
            }
        }
    }

    /// Marks every cached LeaderWorkerSet for reconciling (after the engine is rebuilt).
    pub(super) fn mark_all_lws(&mut self) {
        let keys: Vec<(String, String)> = self.cache.lws.objects.keys().cloned().collect();
        self.cache.lws.dirty.extend(keys);
    }

    /// Reconciles every LeaderWorkerSet marked; returns whether anything was written.
    pub(super) async fn reconcile_dirty_lws(&mut self) -> bool {
        if !self.config.manages(integrations::LEADERWORKERSET) {
            self.cache.lws.dirty.clear();
            return false;
        }
        let mut did = false;
        for key in std::mem::take(&mut self.cache.lws.dirty) {
            did |= self.reconcile_lws(&key).await;
        }
        if !self.creates.is_empty() {
            self.create_owned_workloads().await;
            did = true;
        }
        did
    }

    async fn reconcile_lws(&mut self, key: &(String, String)) -> bool {
        let set = self.cache.lws.objects.get(key).cloned();
        let mut wrote = false;
        if let Some(set) = &set
            && self.lws_managed(set)
        {
            wrote |= self.reconcile_lws_workloads(set).await;
        }
        let pods: Vec<Pod> = self
            .cache
            .lws
            .pods
            .get(key)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        for pod in pods {
            wrote |= self.reconcile_lws_pod(set.as_ref(), pod).await;
        }
        wrote
    }

    /// Whether Kueue manages the LeaderWorkerSet: it names a queue, or jobs without one are managed.
    fn lws_managed(&self, set: &LeaderWorkerSet) -> bool {
        set.labels()
            .get(labels::QUEUE_NAME_LABEL)
            .is_some_and(|q| !q.is_empty())
            || self.config.manage_jobs_without_queue_name
    }

    /// Creates the Workloads of groups without one, updates the queue and priority of the others, and deletes
    /// those of groups that no longer exist.
    async fn reconcile_lws_workloads(&mut self, set: &LeaderWorkerSet) -> bool {
        let ns = set.namespace().unwrap_or_default();
        let existing: Vec<String> = self
            .cache
            .workloads
            .iter()
            .filter(|(k, wl)| k.namespace == ns && lws::owns(set, wl))
            .map(|(k, _)| k.name.clone())
            .collect();
        let plan = lws::plan(set, &existing);
        let mut wrote = false;
        for (index, _) in &plan.create {
            match lws::group_workload(set, *index, &self.cache.priorities) {
                Ok(mut wl) => {
                    // Kueue's labelKeysToCopy, from the set, as Kueue's LeaderWorkerSet reconciler builds it.
                    let copied =
                        crate::jobs::copy_labels(&set.metadata, &self.config.label_keys_to_copy);
                    crate::jobs::add_copied_labels(&mut wl, copied);
                    self.creates.push((Some(reference(set)), wl));
                    wrote = true;
                }
                Err(e) => {
                    self.workload_not_built(Some(reference(set)), "ErrWorkloadCompose", &e);
                    break;
                }
            }
        }
        if !plan.keep.is_empty() {
            // Queue and priority are the set's, the same for every group: built once.
            match lws::group_workload(set, 0, &self.cache.priorities) {
                Ok(fresh) => {
                    for name in &plan.keep {
                        wrote |= self.update_lws_workload(&fresh.spec, &ns, name).await;
                    }
                }
                Err(e) => {
                    tracing::warn!(leaderworkerset = %set.name_any(), error = %e, "LeaderWorkerSet workloads not rebuilt")
                }
            }
        }
        for name in &plan.delete {
            let api: Api<api::Workload> = self.apis.workloads(&ns);
            match self.writer.delete(&api, name).await {
                Ok(()) => wrote = true,
                Err(e) => tracing::error!(workload = %name, error = %e, "workload deletion failed"),
            }
        }
        wrote
    }

    /// A group's Workload follows the LeaderWorkerSet's queue and priority, as `fresh` (a group Workload built
    /// now) has them (Kueue's `updateWorkload`).
    async fn update_lws_workload(
        &mut self,
        fresh: &api::WorkloadSpec,
        ns: &str,
        name: &str,
    ) -> bool {
        let wkey = WorkloadKey::new(ns.to_string(), name.to_string());
        let Some(wl) = self.cache.workloads.get(&wkey) else {
            return false;
        };
        let same = wl.spec.queue_name == fresh.queue_name
            && wl.spec.priority_class_ref == fresh.priority_class_ref
            && wl.spec.priority == fresh.priority;
        if same {
            return false;
        }
        self.write_workload_main(&wkey, |w| {
            w.spec.queue_name = fresh.queue_name.clone();
            w.spec.priority_class_ref = fresh.priority_class_ref.clone();
            w.spec.priority = fresh.priority;
            Ok(true)
        })
        .await
        .is_some()
    }

    /// Kueue's `reconcilePod`: a pod whose LeaderWorkerSet or StatefulSet is gone, or whose StatefulSet rolls it to
    /// a new revision, is let go (ungated, finalizer removed); one that ended or is being deleted loses the finalizer;
    /// a pod of a managed LeaderWorkerSet that still runs gets its group's defaults.
    async fn reconcile_lws_pod(&mut self, set: Option<&LeaderWorkerSet>, pod: Pod) -> bool {
        let ns = pod.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &ns);
        let sts = self.statefulset_of(&pod);
        let written = match set {
            None => {
                self.write(&api, pod, Endpoint::Main, "LeaderWorkerSet pod", |p| {
                    let mut changed = ungate(p);
                    changed |= remove_managed_finalizer(p);
                    Ok(changed)
                })
                .await
            }
            Some(_) if should_finalize(sts.as_ref(), &pod) => {
                let mut probe = pod.clone();
                if !let_go(sts.as_ref(), &mut probe) {
                    return false;
                }
                self.write(&api, pod, Endpoint::Main, "LeaderWorkerSet pod", |p| {
                    Ok(let_go(sts.as_ref(), p))
                })
                .await
            }
            Some(set) => {
                if !self.lws_managed(set) {
                    return false;
                }
                let mut probe = pod.clone();
                if !lws::pod_defaults(set, &mut probe) {
                    return false;
                }
                self.write(&api, pod, Endpoint::Main, "LeaderWorkerSet pod", |p| {
                    Ok(lws::pod_defaults(set, p))
                })
                .await
            }
        };
        let Some(p) = written else {
            return false;
        };
        self.absorb_lws_pod(&p, false);
        self.absorb_managed_pod(&p, false);
        true
    }
}

/// Kueue's `UngateAndFinalizePod` for a pod of an existing LeaderWorkerSet: ungated when its StatefulSet lets it go,
/// and Kueue's finalizer removed when it is finalized. Returns whether the pod changed.
fn let_go(sts: Option<&Revisions>, pod: &mut Pod) -> bool {
    let mut changed = false;
    if should_ungate(sts, pod) {
        changed |= ungate(pod);
    }
    if should_finalize(sts, pod) {
        changed |= remove_managed_finalizer(pod);
    }
    changed
}

/// Removes Kueue's admission and topology scheduling gates; returns whether there were any.
fn ungate(pod: &mut Pod) -> bool {
    let mut changed = false;
    if let Some(spec) = pod.spec.as_mut()
        && let Some(gates) = spec.scheduling_gates.as_mut()
    {
        let before = gates.len();
        gates.retain(|g| {
            g.name != labels::ADMISSION_SCHEDULING_GATE
                && g.name != labels::TOPOLOGY_SCHEDULING_GATE
        });
        changed |= gates.len() != before;
        if gates.is_empty() {
            spec.scheduling_gates = None;
        }
    }
    changed
}

/// Removes Kueue's `kueue.x-k8s.io/managed` finalizer; returns whether it was there.
fn remove_managed_finalizer(pod: &mut Pod) -> bool {
    let Some(f) = pod.metadata.finalizers.as_mut() else {
        return false;
    };
    let before = f.len();
    f.retain(|f| f != labels::MANAGED_FINALIZER);
    f.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(revision: &str, gated: bool, finalized: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.labels = Some([(REVISION_LABEL.to_string(), revision.to_string())].into());
        if finalized {
            p.metadata.finalizers = Some(vec![labels::MANAGED_FINALIZER.to_string()]);
        }
        if gated {
            p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                scheduling_gates: Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: labels::ADMISSION_SCHEDULING_GATE.to_string(),
                }]),
                ..Default::default()
            });
        }
        p
    }

    fn revisions(current: &str, update: &str) -> Revisions {
        Revisions {
            current: current.into(),
            update: update.into(),
        }
    }

    #[test]
    fn the_old_revision_of_a_rolling_statefulset_is_let_go() {
        let rolling = revisions("r1", "r2");
        let mut old = pod("r1", true, true);
        assert!(let_go(Some(&rolling), &mut old));
        assert!(old.spec.as_ref().unwrap().scheduling_gates.is_none());
        assert_eq!(old.metadata.finalizers, Some(vec![]));
        // The new revision waits for its group's admission.
        let mut new = pod("r2", true, true);
        assert!(!should_finalize(Some(&rolling), &new));
        assert!(!let_go(Some(&rolling), &mut new));
        // A StatefulSet not rolling lets nothing go.
        let settled = revisions("r1", "r1");
        assert!(!should_finalize(Some(&settled), &pod("r1", true, true)));
        // Nor does one the StatefulSet controller has not written revisions for yet.
        assert!(!should_finalize(
            Some(&Revisions::default()),
            &pod("r1", true, true)
        ));
    }

    #[test]
    fn a_pod_without_its_statefulset_is_let_go() {
        let mut p = pod("r1", true, true);
        assert!(let_go(None, &mut p));
        assert!(p.spec.as_ref().unwrap().scheduling_gates.is_none());
        assert_eq!(p.metadata.finalizers, Some(vec![]));
    }

    #[test]
    fn an_ended_or_deleted_pod_loses_the_finalizer_but_keeps_its_gates() {
        let settled = revisions("r1", "r1");
        let mut ended = pod("r1", true, true);
        ended.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        });
        assert!(let_go(Some(&settled), &mut ended));
        assert_eq!(ended.metadata.finalizers, Some(vec![]));
        assert!(ended.spec.as_ref().unwrap().scheduling_gates.is_some());
        let mut deleted = pod("r1", false, true);
        deleted.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        assert!(let_go(Some(&settled), &mut deleted));
        assert_eq!(deleted.metadata.finalizers, Some(vec![]));
        // Nothing to remove: no write.
        assert!(!let_go(Some(&settled), &mut deleted));
    }
}
