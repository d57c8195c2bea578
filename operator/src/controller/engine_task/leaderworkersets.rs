//! LeaderWorkerSets, as Kueue's LeaderWorkerSet reconciler keeps them: one Workload per group, created, updated
//! (queue, priority) and deleted as the LeaderWorkerSet scales; and the pods the LWS controller makes, turned into
//! managed members of their group's pod group (the rules are in [`crate::jobs::lws`]). Admission, eviction and
//! the pods' gates are then the pod-group integration's, with each group's Workload as its prebuilt Workload.
//!
//! Not done as Kueue does: during a rolling update, Kueue ungates the pods of the old revision (it watches the
//! StatefulSets' revisions); here they wait for their group's admission like any pod.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
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
        if !self.config.leaderworkersets {
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
                Ok(wl) => {
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

    /// Kueue's `reconcilePod`: a pod whose LeaderWorkerSet is gone is let go (ungated, finalizer removed); a pod
    /// of a managed LeaderWorkerSet that still runs gets its group's defaults.
    async fn reconcile_lws_pod(&mut self, set: Option<&LeaderWorkerSet>, pod: Pod) -> bool {
        let ns = pod.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &ns);
        let written = match set {
            None => {
                self.write(
                    &api,
                    pod,
                    Endpoint::Main,
                    "LeaderWorkerSet pod",
                    release_pod,
                )
                .await
            }
            Some(set) => {
                if pod_group::is_terminated(&pod)
                    || pod.metadata.deletion_timestamp.is_some()
                    || !self.lws_managed(set)
                {
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

/// Lets a pod of a deleted LeaderWorkerSet go: its admission and topology gates and Kueue's finalizer removed.
fn release_pod(pod: &mut Pod) -> Result<bool, String> {
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
    if let Some(f) = pod.metadata.finalizers.as_mut() {
        let before = f.len();
        f.retain(|f| f != labels::MANAGED_FINALIZER);
        changed |= f.len() != before;
    }
    Ok(changed)
}
