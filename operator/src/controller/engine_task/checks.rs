//! Admission checks on a Workload holding quota, as Kueue's workload controller acts on them: Admitted once every
//! check is Ready (the job then starts), evicted when one asks to retry (out of the queue until its requeueAt),
//! deactivated when one rejects it. The rules are `crate::admission_checks`, shared with the simulator.

use sluice_sdk::kueue::labels::condition;
use sluice_sdk::kueue::v1beta2 as api;

use super::{EngineTask, now_ms, reference};
use crate::admission_checks::{self, EVICTED_BY_ADMISSION_CHECK, Verdict};
use crate::controller::objects::*;
use crate::engine::{Time, WorkloadKey};
use crate::status;
use crate::telemetry::EventSeverity;

impl EngineTask {
    /// Kueue's workload controller keeps a Workload's check list in step with its LocalQueue's ClusterQueue, also
    /// before quota is reserved (every check then applies whose `onFlavors` covers all the ClusterQueue's flavors,
    /// each Pending); returns true when it wrote.
    async fn sync_check_list(&mut self, key: &WorkloadKey, wl: &api::Workload) -> bool {
        if !wl.spec.is_active() || is_finished(wl) {
            return false;
        }
        let lq = (key.namespace.clone(), wl.spec.queue_name.clone());
        let Some(cq) = self
            .cache
            .local_queues
            .get(&lq)
            .and_then(|lq| self.cache.cluster_queues.get(&lq.spec.cluster_queue))
        else {
            return false;
        };
        let admission = wl.status.as_ref().and_then(|s| s.admission.as_ref());
        let checks = admission_checks::checks_for(&cq.spec, admission);
        let listed = wl
            .status
            .as_ref()
            .map(|s| {
                s.admission_checks
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if listed == checks {
            return false;
        }
        let now = now_ms();
        let written = self
            .write_workload_status(key, |w| Ok(admission_checks::sync(w, &checks, now)))
            .await;
        written.is_some()
    }

    /// Acts on the workload's admission check states; returns true when it wrote something (the written
    /// Workload comes back through the cache and is reconciled again).
    pub(super) async fn reconcile_checks(&mut self, key: &WorkloadKey, wl: &api::Workload) -> bool {
        if self.sync_check_list(key, wl).await {
            return true;
        }
        let has_checks = wl
            .status
            .as_ref()
            .is_some_and(|s| !s.admission_checks.is_empty());
        if !has_checks || !wl.spec.is_active() || is_finished(wl) {
            return false;
        }
        if !has_admission(wl) {
            return false;
        }
        let now = now_ms();
        if admission_checks::admitted_out_of_sync(wl) {
            let written = self
                .write_workload_status(key, |w| Ok(admission_checks::sync_admitted(w, now)))
                .await;
            if let Some(w) = written
                && cond_true(&w, condition::ADMITTED)
            {
                let reserved = cond_time(&w, condition::QUOTA_RESERVED).unwrap_or(now);
                self.event(
                    reference(&w),
                    EventSeverity::Normal,
                    "Admitted",
                    "Admitted",
                    format!(
                        "Admitted by ClusterQueue {}, wait time since reservation was {:.0}s",
                        admitted_cluster_queue(&w),
                        ((now - reserved).max(0) as f64) / 1000.0
                    ),
                );
                self.mark_owner_dirty(&w);
            }
            self.sync_workload(key);
            return true;
        }
        match admission_checks::verdict(wl) {
            Verdict::Wait => false,
            Verdict::Retry {
                message,
                requeue_at,
            } => {
                self.evict_for_retry(key, &message, requeue_at).await;
                true
            }
            Verdict::Rejected { message } => {
                self.deactivate(key, EVICTED_BY_ADMISSION_CHECK, &message)
                    .await;
                self.event(
                    reference(wl),
                    EventSeverity::Warning,
                    "AdmissionCheckRejected",
                    "AdmissionCheckRejected",
                    format!("Deactivated due to {message}"),
                );
                true
            }
        }
    }

    /// A check asked to retry: evicted (its job stops), with `requeueAt` when a check set a retry time; the
    /// checks go back to Pending.
    async fn evict_for_retry(
        &mut self,
        key: &WorkloadKey,
        message: &str,
        requeue_at: Option<Time>,
    ) {
        let now = now_ms();
        let written = self
            .write_workload_status(key, |wl| {
                if let Some(at) = requeue_at {
                    admission_checks::hold_until(wl, at);
                }
                status::evict(wl, EVICTED_BY_ADMISSION_CHECK, None, message, now);
                Ok(true)
            })
            .await;
        let Some(wl) = written else { return };
        if let Some(at) = requeue_at.filter(|t| *t > now) {
            self.backoffs.insert(key.clone(), at);
        }
        self.evicted_by_controller(
            key,
            &wl,
            EVICTED_BY_ADMISSION_CHECK,
            "",
            message.to_string(),
        )
        .await;
    }
}
