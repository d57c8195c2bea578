//! Carrying out the engine's decisions: admissions, pending reasons and evictions written to the Workloads,
//! with their metrics and events.

use kube::ResourceExt;
use sluice_sdk::kueue::labels::condition;
use sluice_sdk::sluice::policy_module::{
    PREEMPTION_PROTECTED_ANNOTATION, PRIORITY_BOOST_ANNOTATION,
};
use tokio::time::Instant;

use super::{EngineTask, now_ms, reference};
use crate::controller::checkpoint::PendingCheckpoint;
use crate::controller::objects::*;
use crate::engine::{self, Decision, Event, Time, WorkloadKey};
use crate::telemetry::EventSeverity;
use crate::{admission_checks, ingest, status};

impl EngineTask {
    pub(super) fn record_attempts(&self, decisions: &[Decision], started: Instant) {
        let secs = started.elapsed().as_secs_f64();
        for d in decisions {
            let result = match d {
                Decision::Admit { .. } => "success",
                Decision::Pending { .. } => "inadmissible",
                Decision::Evict { .. } => continue,
            };
            self.metrics.admission_attempt(result, self.role, secs);
        }
    }

    /// Carries out the engine's decisions, and the ones those cause, in order.
    pub(super) async fn carry_out(&mut self, decisions: Vec<Decision>) {
        let mut queue: std::collections::VecDeque<Decision> = decisions.into();
        while let Some(d) = queue.pop_front() {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    time,
                } => self.admit(&workload, &admission, time).await,
                Decision::Pending {
                    workload,
                    reason,
                    message,
                } => self.pending(&workload, &reason, &message).await,
                Decision::Evict {
                    workload,
                    reason,
                    preemption_reason,
                    preemptor,
                    message,
                    time,
                } => {
                    let grace = if preemption_reason.is_some() {
                        self.checkpoint_grace(&workload)
                    } else {
                        None
                    };
                    match grace {
                        Some(grace) if !self.checkpoints.contains_key(&workload) => {
                            let pending = PendingCheckpoint {
                                reason,
                                preemption_reason,
                                preemptor,
                                message,
                                requested: time,
                                deadline: now_ms() + grace,
                                cluster_queue: String::new(),
                            };
                            self.request_checkpoint(&workload, pending, grace).await
                        }
                        _ => {
                            self.evict(
                                &workload,
                                &reason,
                                preemption_reason.as_deref(),
                                preemptor.as_ref(),
                                &message,
                                time,
                            )
                            .await
                        }
                    }
                }
            }
            queue.extend(std::mem::take(&mut self.queued));
        }
    }

    async fn admit(&mut self, key: &WorkloadKey, admission: &engine::Admission, time: Time) {
        let placement = self.engine.as_ref().and_then(|e| e.placement(key));
        let api_adm = status::api_admission_with_placement(admission, placement);
        let cq_spec = self
            .cache
            .cluster_queues
            .get(&admission.cluster_queue)
            .map(|cq| cq.spec.clone());
        let mut has_checks = false;
        let written = self
            .write_workload_status(key, |wl| {
                let before = wl.status.clone();
                has_checks = admission_checks::reserve(wl, cq_spec.as_ref(), api_adm.clone(), time);
                Ok(wl.status != before)
            })
            .await;
        let Some(wl) = written else { return };
        self.admitted_at.insert(key.clone(), time);
        let cq = admission.cluster_queue.clone();
        let pc = Self::priority_class(&wl);
        let waited_since = cond_time(&wl, condition::REQUEUED)
            .filter(|_| cond_true(&wl, condition::REQUEUED))
            .or_else(|| wl.metadata.creation_timestamp.as_ref().map(ingest::time_of))
            .unwrap_or(time);
        let wait = ((time - waited_since).max(0) as f64) / 1000.0;
        self.metrics
            .quota_reserved(&cq, &pc, self.role, wait, !has_checks);
        self.event(
            reference(&wl),
            EventSeverity::Normal,
            "QuotaReserved",
            "Admission",
            format!("Quota reserved in ClusterQueue {cq}, wait time since queued was {wait:.0}s"),
        );
        self.mark_owner_dirty(&wl);
        self.dirty_workloads.insert(key.clone());
    }

    pub(super) async fn pending(&mut self, key: &WorkloadKey, reason: &str, message: &str) {
        let Some(wl) = self.cache.workloads.get(key) else {
            return;
        };
        let requests = match ingest::workload(wl) {
            Ok((w, _)) => status::resource_requests(&w),
            Err(_) => Vec::new(),
        };
        if status::keeps_deactivation_message(wl, reason) {
            return;
        }
        let reason = status::written_pending_reason(reason, self.config.detailed_pending_reasons)
            .to_string();
        let now = now_ms();
        self.write_workload_status(key, |wl| {
            let before = wl.status.clone();
            status::pending(wl, &reason, message, &requests, now);
            Ok(wl.status != before)
        })
        .await;
    }

    pub(super) async fn evict(
        &mut self,
        key: &WorkloadKey,
        reason: &str,
        preemption_reason: Option<&str>,
        preemptor: Option<&WorkloadKey>,
        message: &str,
        time: Time,
    ) {
        let written = self
            .write_workload_status(key, |wl| {
                if status::evicted_for(wl, reason) {
                    return Ok(false);
                }
                status::evict(wl, reason, preemption_reason, message, time);
                Ok(true)
            })
            .await;
        let Some(wl) = written else { return };
        let cq = admitted_cluster_queue(&wl);
        let underlying_cause = if reason == sluice_sdk::kueue::labels::reason::DEACTIVATED {
            status::deactivation_cause(&wl).unwrap_or_default()
        } else {
            ""
        };
        self.metrics.evicted(
            &cq,
            reason,
            underlying_cause,
            &Self::priority_class(&wl),
            self.role,
        );
        if let Some(p) = preemption_reason {
            let preempting_cq = preemptor
                .and_then(|k| self.cache.workloads.get(k))
                .and_then(|w| {
                    let lq = (w.namespace().unwrap_or_default(), w.spec.queue_name.clone());
                    self.cache.local_queues.get(&lq)
                })
                .map(|lq| lq.spec.cluster_queue.clone())
                .unwrap_or_default();
            self.metrics.preempted(&preempting_cq, p, self.role);
        }
        self.event(
            reference(&wl),
            EventSeverity::Normal,
            if preemption_reason.is_some() {
                "Preempted"
            } else {
                "Evicted"
            },
            "Eviction",
            message.to_string(),
        );
        self.stop_owner(key, &wl).await;
    }

    /// The evicted workload's pods are gone: clear its admission, requeue it, release its quota.
    pub(super) async fn complete_eviction(&mut self, key: &WorkloadKey) {
        let now = now_ms();
        let written = self
            .write_workload_status(key, |wl| {
                if !has_admission(wl) {
                    return Ok(false);
                }
                status::requeue_after_eviction(wl, now);
                Ok(true)
            })
            .await;
        if written.is_none() {
            return;
        }
        self.engine_apply(Event::EvictionComplete {
            workload: key.clone(),
            time: now,
        });
        // A requeue backoff (PodsReadyTimeout) keeps it out of the queue until requeueAt.
        self.sync_workload(key);
        self.queues_dirty = true;
    }

    /// Shows on each Workload what a preemption-cost policy last said about it as a candidate:
    /// `sluice.dev/priority-boost` (absent when 0) and `sluice.dev/preemption-protected` (absent unless
    /// protected). Written only when it changed.
    pub(super) async fn show_preemption_costs(&mut self) {
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        for (key, cost) in engine.take_preemption_costs() {
            self.write_workload_main(&key, |w| {
                let a = w.metadata.annotations.get_or_insert_with(Default::default);
                let boost = (cost.boost != 0).then(|| cost.boost.to_string());
                let protected = cost.protected.then(|| "true".to_string());
                let mut changed = set_annotation(a, PRIORITY_BOOST_ANNOTATION, boost);
                changed |= set_annotation(a, PREEMPTION_PROTECTED_ANNOTATION, protected);
                Ok(changed)
            })
            .await;
        }
    }
}

/// Sets (Some) or removes (None) one annotation; returns whether it changed.
fn set_annotation(
    annotations: &mut std::collections::BTreeMap<String, String>,
    name: &str,
    value: Option<String>,
) -> bool {
    match value {
        Some(v) if annotations.get(name) != Some(&v) => {
            annotations.insert(name.to_string(), v);
            true
        }
        Some(_) => false,
        None => annotations.remove(name).is_some(),
    }
}
