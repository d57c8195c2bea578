//! What every job kind shares outside the reconciler's steps: creating the Workload that queues its owner, and
//! stopping the owner after an eviction or a PodsReady timeout (its kind's reconcile stops it: a Job is
//! suspended, a pod group's pods are ended; with nothing to stop the eviction completes at once).

use k8s_openapi::api::core::v1::ObjectReference;
use sluice_sdk::kueue::v1beta2 as api;

use super::EngineTask;
use crate::controller::objects::*;
use crate::engine::WorkloadKey;
use crate::telemetry::EventSeverity;

impl EngineTask {
    /// Creates the Workload built for `owner`, announces it on the owner and queues it.
    pub(super) async fn create_owned_workload(
        &mut self,
        owner: Option<ObjectReference>,
        wl: &api::Workload,
    ) {
        let namespace = wl.metadata.namespace.clone().unwrap_or_default();
        let api = self.apis.workloads(&namespace);
        match self.writer.create(&api, wl).await {
            Ok(Some(created)) => {
                let wkey = workload_key(&created);
                if let Some(owner) = owner {
                    self.event(
                        owner,
                        EventSeverity::Normal,
                        "CreatedWorkload",
                        "Create",
                        format!("Created Workload: {wkey}"),
                    );
                }
                self.cache.workloads.insert(wkey.clone(), created);
                self.sync_workload(&wkey);
                self.queues_dirty = true;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "workload creation failed"),
        }
    }

    /// A Workload could not be built for `owner` (with the event `reason` its kind uses in Kueue).
    pub(super) fn workload_not_built(
        &self,
        owner: Option<ObjectReference>,
        reason: &str,
        error: &dyn std::fmt::Display,
    ) {
        tracing::warn!(%error, owner = ?owner.as_ref().and_then(|o| o.name.as_deref()), "cannot build a workload");
        if let Some(owner) = owner {
            self.event(
                owner,
                EventSeverity::Warning,
                reason,
                "Create",
                format!("Workload not created: {error}"),
            );
        }
    }

    /// An evicted Workload's owner must stop before the eviction completes: it is reconciled (its kind's stop),
    /// or, with nothing to stop, the eviction completes at once.
    pub(super) async fn stop_owner(&mut self, key: &WorkloadKey, wl: &api::Workload) {
        if self.owner_needs_stopping(wl) {
            self.mark_owner_dirty(wl);
        } else {
            self.complete_eviction(key).await;
        }
    }
}
