//! What every job kind shares outside the reconciler's steps: creating the Workload that queues its owner, and
//! stopping the owner after an eviction or a PodsReady timeout (its kind's reconcile stops it: a Job is
//! suspended, a pod group's pods are ended; with nothing to stop the eviction completes at once).

use k8s_openapi::api::core::v1::ObjectReference;
use sluice_sdk::kueue::v1beta2 as api;

use super::EngineTask;
use super::writes::in_flight;
use crate::controller::objects::*;
use crate::engine::WorkloadKey;
use crate::telemetry::EventSeverity;

impl EngineTask {
    /// Creates the Workloads the job reconciles of this round built (each announced on its owner and queued),
    /// with up to `writes_in_flight` (configuration) creations in flight at once: a burst of new jobs waits on the
    /// API server's round trip, not on one creation after another. Queued in the order they were built.
    pub(super) async fn create_owned_workloads(&mut self) {
        let creates = std::mem::take(&mut self.creates);
        if creates.is_empty() {
            return;
        }
        let (writer, apis) = (&self.writer, &self.apis);
        let mut writes = Vec::with_capacity(creates.len());
        for (owner, wl) in creates {
            let api = apis.workloads(wl.metadata.namespace.as_deref().unwrap_or_default());
            writes.push(async move { (owner, writer.create(&api, &wl).await) });
        }
        for (owner, result) in in_flight(writes, self.config.writes_in_flight).await {
            match result {
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
                    self.queues_changed();
                }
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "workload creation failed"),
            }
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
