//! Deadlines of admitted and evicted workloads: waitForPodsReady (the PodsReady condition and its timeout),
//! maximumExecutionTimeSeconds, requeue backoffs and checkpoint graces.

use std::collections::BTreeMap;

use kube::Resource;
use sluice_sdk::kueue::labels::{self, condition};
use sluice_sdk::kueue::v1beta2 as api;

use super::{EngineTask, now_ms, reference};
use crate::controller::checkpoint::{self};
use crate::controller::objects::*;
use crate::engine::{Time, WorkloadKey};
use crate::status;
use crate::telemetry::EventSeverity;

impl EngineTask {
    /// Finalizers and waitForPodsReady deadlines of one workload.
    pub(super) async fn reconcile_workload(&mut self, key: &WorkloadKey) {
        let Some(wl) = self.cache.workloads.get(key).cloned() else {
            self.ready_deadlines.remove(key);
            self.backoffs.remove(key);
            self.exec_deadlines.remove(key);
            self.retention_deadlines.remove(key);
            return;
        };
        if wl.meta().deletion_timestamp.is_some() {
            self.ready_deadlines.remove(key);
            self.backoffs.remove(key);
            self.exec_deadlines.remove(key);
            self.retention_deadlines.remove(key);
            if has_finalizer(&wl, labels::RESOURCE_IN_USE_FINALIZER) {
                self.release_workload_finalizer(key).await;
            }
            return;
        }
        if self.apply_retention(key, &wl).await {
            return;
        }
        if let Some(value) = self.cache.priorities.class_priority_change(&wl) {
            self.follow_class_priority(key, value).await;
        }
        if self.checkpoints.contains_key(key) {
            let done = wl
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(checkpoint::DONE_ANNOTATION))
                || cond_true(&wl, checkpoint::DONE_CONDITION);
            if done {
                self.finish_checkpoint(key, "done").await;
                return;
            }
        }
        if let Some(requeue) = self
            .restart_requeue(key, &wl)
            .or_else(|| status::reactivation_requeue(&wl))
        {
            let now = now_ms();
            self.write_workload_status(key, |w| Ok(requeue.apply(w, now)))
                .await;
            return;
        }
        if self.reconcile_checks(key, &wl).await {
            return;
        }
        if !is_admitted(&wl) {
            self.admitted_at.remove(key);
        }
        match execution_deadline(&wl) {
            Some(t) => self.exec_deadlines.insert(key.clone(), t),
            None => self.exec_deadlines.remove(key),
        };
        // An eviction under way with no Job left to stop (e.g. found so after a takeover) completes now.
        if is_evicting(&wl) && !self.owner_needs_stopping(&wl) {
            self.complete_eviction(key).await;
            return;
        }
        match self.pods_ready_deadline(key, &wl) {
            Some((_, t)) => self.ready_deadlines.insert(key.clone(), t),
            None => self.ready_deadlines.remove(key),
        };
    }

    /// The PodsReady timeout running for the workload and when it ends (Kueue's admittedNotReadyWorkload):
    /// `timeout` after admission while its pods start, `recoveryTimeout` after PodsReady turned False while a
    /// failed pod is replaced.
    fn pods_ready_deadline(
        &self,
        key: &WorkloadKey,
        wl: &api::Workload,
    ) -> Option<(status::PodsReadyWait, Time)> {
        let cfg = self.config.wait_for_pods_ready.as_ref()?;
        if !is_admitted(wl) {
            return None;
        }
        let wait = status::pods_ready_wait(wl)?;
        let end = match wait {
            status::PodsReadyWait::Start => {
                let since = self
                    .admitted_at
                    .get(key)
                    .copied()
                    .or_else(|| cond_time(wl, condition::ADMITTED))
                    .or_else(|| cond_time(wl, condition::QUOTA_RESERVED))
                    .unwrap_or_else(now_ms);
                since + cfg.timeout.as_millis() as Time
            }
            status::PodsReadyWait::Recovery { since } => {
                since + cfg.recovery()?.as_millis() as Time
            }
        };
        Some((wait, end))
    }

    /// Deadlines that passed: checkpoint graces, PodsReady timeouts, execution limits and finished backoffs.
    /// Returns whether anything happened.
    pub(super) async fn fire_timers(&mut self) -> bool {
        let now = now_ms();
        let mut did = false;
        // Admission fair sharing: LocalQueue usage is sampled every usageSamplingInterval (their status follows).
        if let Some(engine) = self.engine.as_mut()
            && engine
                .next_admission_usage_sample()
                .is_some_and(|t| t <= now)
        {
            engine.sample_admission_usage(now);
            self.queues_changed();
            did = true;
        }
        let due: Vec<_> = self
            .checkpoints
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            did = true;
            self.finish_checkpoint(&key, "timeout").await;
        }
        for key in take_due(&mut self.ready_deadlines, now) {
            did = true;
            self.pods_ready_timeout(&key).await;
        }
        for key in take_due(&mut self.exec_deadlines, now) {
            did = true;
            self.execution_time_exceeded(&key).await;
        }
        for key in take_due(&mut self.retention_deadlines, now) {
            if let Some(wl) = self.cache.workloads.get(&key).cloned() {
                did |= self.apply_retention(&key, &wl).await;
            }
        }
        for key in take_due(&mut self.backoffs, now) {
            did = true;
            let written = self
                .write_workload_status(&key, |wl| {
                    let waiting = wl
                        .status
                        .as_ref()
                        .and_then(|s| s.requeue_state.as_ref())
                        .is_some_and(|r| r.requeue_at.is_some());
                    Ok(waiting && status::finish_backoff(wl, now))
                })
                .await;
            if written.is_some() {
                self.sync_workload(&key);
            }
        }
        did
    }

    async fn pods_ready_timeout(&mut self, key: &WorkloadKey) {
        let Some(cfg) = self.config.wait_for_pods_ready.clone() else {
            return;
        };
        let Some(wl) = self.cache.workloads.get(key).cloned() else {
            return;
        };
        let now = now_ms();
        let cause = match self.pods_ready_deadline(key, &wl) {
            Some((wait, end)) if end <= now => wait.cause(),
            Some((_, end)) => {
                // Its clock moved (it recovered and failed again): not due yet.
                self.ready_deadlines.insert(key.clone(), end);
                return;
            }
            None => return,
        };
        let Some((count, requeue_at)) = cfg.requeue_after_timeout(status::requeue_count(&wl), now)
        else {
            // Over the limit: deactivate, as Kueue does (the engine then evicts it as Deactivated).
            self.deactivate(
                key,
                labels::reason::REQUEUING_LIMIT_EXCEEDED,
                "exceeding the maximum number of re-queuing retries",
            )
            .await;
            return;
        };
        let message = format!("Exceeded the PodsReady timeout {key}");
        let written = self
            .write_workload_status(key, |wl| {
                status::evict_with_cause(wl, "PodsReadyTimeout", cause, None, &message, now);
                status::set_requeue_state(wl, count, requeue_at);
                Ok(true)
            })
            .await;
        let Some(wl) = written else { return };
        self.backoffs.insert(key.clone(), requeue_at);
        self.evicted_by_controller(key, &wl, "PodsReadyTimeout", cause, message)
            .await;
    }

    /// After the workload controller's own eviction (`reason`) was written on `wl`: counted, told in an
    /// `EvictedDueTo<reason>` event, and its job stopped.
    pub(super) async fn evicted_by_controller(
        &mut self,
        key: &WorkloadKey,
        wl: &api::Workload,
        reason: &str,
        cause: &str,
        message: String,
    ) {
        self.metrics.evicted(
            &admitted_cluster_queue(wl),
            reason,
            cause,
            &Self::priority_class(wl),
            self.role,
        );
        self.event(
            reference(wl),
            EventSeverity::Normal,
            &format!("EvictedDueTo{reason}"),
            "Eviction",
            message,
        );
        self.stop_owner(key, wl).await;
    }

    /// An admitted workload ran past its `maximumExecutionTimeSeconds` (this admission plus earlier ones): as
    /// Kueue's workload controller, it is deactivated with reason MaximumExecutionTimeExceeded, its accumulated
    /// time is cleared, and a Warning event says so.
    async fn execution_time_exceeded(&mut self, key: &WorkloadKey) {
        let Some(wl) = self.cache.workloads.get(key).cloned() else {
            return;
        };
        let Some(limit) = wl.spec.maximum_execution_time_seconds else {
            return;
        };
        if execution_deadline(&wl).is_none_or(|t| t > now_ms()) {
            return;
        }
        self.deactivate(
            key,
            labels::reason::MAXIMUM_EXECUTION_TIME_EXCEEDED,
            "exceeding the maximum execution time",
        )
        .await;
        self.event(
            reference(&wl),
            EventSeverity::Warning,
            labels::reason::MAXIMUM_EXECUTION_TIME_EXCEEDED,
            "MaximumExecutionTimeExceeded",
            format!("The maximum execution time ({limit}s) exceeded"),
        );
    }

    /// A workload a stopped LocalQueue or ClusterQueue evicted, once that queue runs again: the Requeued=True
    /// condition it gets ([`status::restart_requeue`]).
    fn restart_requeue(&self, key: &WorkloadKey, wl: &api::Workload) -> Option<status::Requeue> {
        let lq = self
            .cache
            .local_queues
            .get(&(key.namespace.clone(), wl.spec.queue_name.clone()));
        let none = |p: api::StopPolicy| p == api::StopPolicy::None;
        let lq_active = lq.is_some_and(|l| none(l.spec.stop_policy()));
        let cq_active = lq
            .and_then(|l| self.cache.cluster_queues.get(&l.spec.cluster_queue))
            .is_some_and(|c| none(c.spec.stop_policy()));
        status::restart_requeue(wl, lq_active, cq_active)
    }

    /// Sets DeactivationTarget (`reason`, `message`) and `spec.active=false`; the engine then evicts the workload
    /// as Deactivated, and the eviction carries the target's reason as its underlying cause.
    pub(super) async fn deactivate(&mut self, key: &WorkloadKey, reason: &str, message: &str) {
        let now = now_ms();
        self.write_workload_status(key, |wl| {
            Ok(status::set_deactivation_target(wl, reason, message, now))
        })
        .await;
        if self
            .write_workload_main(key, |wl| {
                if wl.spec.active == Some(false) {
                    return Ok(false);
                }
                wl.spec.active = Some(false);
                Ok(true)
            })
            .await
            .is_some()
        {
            self.sync_workload(key);
        }
    }

    /// Writes the Workload's PodsReady condition for `ready` (waitForPodsReady); returns false (nothing for
    /// the job to do).
    pub(super) async fn set_pods_ready(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        ready: bool,
    ) -> bool {
        let (ready, reason, message) = status::pods_ready_condition(wl, ready);
        if cond_true(wl, condition::PODS_READY) == ready
            && cond_reason(wl, condition::PODS_READY) == Some(reason)
        {
            // Kueue rewrites the condition only when its status or reason changes.
            return false;
        }
        let now = now_ms();
        let written = self
            .write_workload_status(wkey, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    condition::PODS_READY,
                    ready,
                    reason,
                    message,
                    now,
                ))
            })
            .await;
        if written.is_some() {
            self.dirty_workloads.insert(wkey.clone());
        }
        false
    }
}

/// When an admitted, active workload with `maximumExecutionTimeSeconds` runs out of it: its Admitted time plus
/// what is left after earlier admissions (`status.accumulatedPastExecutionTimeSeconds`). None when it has no
/// limit, is not admitted, has finished or is already being deactivated.
fn execution_deadline(wl: &api::Workload) -> Option<Time> {
    if !is_admitted(wl)
        || is_finished(wl)
        || !wl.spec.is_active()
        || cond_true(wl, condition::DEACTIVATION_TARGET)
    {
        return None;
    }
    Some(cond_time(wl, condition::ADMITTED)? + status::execution_time_left(wl)?)
}

/// Removes and returns the keys whose deadline is at or before `now`.
fn take_due(deadlines: &mut BTreeMap<WorkloadKey, Time>, now: Time) -> Vec<WorkloadKey> {
    let due: Vec<WorkloadKey> = deadlines
        .iter()
        .filter(|(_, t)| **t <= now)
        .map(|(k, _)| k.clone())
        .collect();
    for k in &due {
        deadlines.remove(k);
    }
    due
}
