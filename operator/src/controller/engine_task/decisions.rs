//! Carrying out the engine's decisions: admissions, pending reasons and evictions written to the Workloads,
//! with their metrics and events.

use std::collections::{BTreeSet, VecDeque};

use kube::ResourceExt;
use sluice_sdk::kueue::labels::condition;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::policy_module::{
    PREEMPTION_PROTECTED_ANNOTATION, PRIORITY_BOOST_ANNOTATION,
};
use tokio::time::Instant;

use super::writes::StatusChange;
use super::{EngineTask, now_ms, reference};
use crate::controller::checkpoint::PendingCheckpoint;
use crate::controller::objects::*;
use crate::engine::{self, Decision, Event, Time, WorkloadKey};
use crate::telemetry::EventSeverity;
use crate::{admission_checks, ingest, status};

/// A decision written to its Workload's status alone: a batch holds these.
enum StatusWrite {
    /// Quota reserved: the workload, its admission, the decision's time.
    Admit(WorkloadKey, engine::Admission, Time),
    /// Still waiting: the workload, the reason, the message.
    Pending(WorkloadKey, String, String),
}

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

    /// Carries out the engine's decisions, and the ones those cause, in order. A run of admissions and pending
    /// reasons for distinct workloads is written as one batch, its writes in flight together; an eviction
    /// (which may wait for a checkpoint, stops the owner and can cause more decisions) is carried out alone.
    pub(super) async fn carry_out(&mut self, decisions: Vec<Decision>) {
        let mut queue: VecDeque<Decision> = decisions.into();
        while !queue.is_empty() {
            let mut batch = Vec::new();
            let mut keys = BTreeSet::new();
            while let Some(d) = queue.front() {
                match d {
                    Decision::Evict { .. } => break,
                    Decision::Admit { workload, .. } | Decision::Pending { workload, .. } => {
                        if !keys.insert(workload.clone()) {
                            break;
                        }
                    }
                }
                match queue.pop_front() {
                    Some(Decision::Admit {
                        workload,
                        admission,
                        time,
                    }) => batch.push(StatusWrite::Admit(
                        workload,
                        std::sync::Arc::unwrap_or_clone(admission),
                        time,
                    )),
                    Some(Decision::Pending {
                        workload,
                        reason,
                        message,
                    }) => batch.push(StatusWrite::Pending(workload, reason, message)),
                    _ => {}
                }
            }
            if batch.is_empty() {
                if let Some(eviction) = queue.pop_front() {
                    self.carry_out_eviction(eviction).await;
                }
            } else {
                self.write_batch(batch).await;
            }
            queue.extend(std::mem::take(&mut self.queued));
        }
    }

    /// Admissions and pending reasons of distinct workloads: every status write at once, then each admission's
    /// metrics, event and follow-up in the order decided.
    async fn write_batch(&mut self, batch: Vec<StatusWrite>) {
        let mut changes = Vec::with_capacity(batch.len());
        let mut admitted = Vec::new();
        for d in batch {
            match d {
                StatusWrite::Admit(workload, admission, time) => {
                    let (change, has_checks) = self.admission_change(&workload, &admission, time);
                    changes.push((workload.clone(), change));
                    admitted.push(Some((workload, admission.cluster_queue, time, has_checks)));
                }
                StatusWrite::Pending(workload, reason, message) => {
                    if let Some(change) = self.pending_change(&workload, &reason, message) {
                        changes.push((workload, change));
                        admitted.push(None);
                    }
                }
            }
        }
        let written = self.write_workload_statuses(changes).await;
        for (wl, admission) in written.into_iter().zip(admitted) {
            if let (Some(wl), Some((key, cq, time, has_checks))) = (wl, admission) {
                self.admitted(&key, &wl, &cq, time, has_checks);
            }
        }
    }

    /// An eviction: after the victim's checkpoint grace when it has one, else at once.
    async fn carry_out_eviction(&mut self, eviction: Decision) {
        let Decision::Evict {
            workload,
            reason,
            preemption_reason,
            preemptor,
            message,
            time,
            graceful,
        } = eviction
        else {
            return;
        };
        let grace = if preemption_reason.is_some() || graceful {
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

    /// The status change that reserves quota for an admission (with its placement and the ClusterQueue's
    /// admission checks), and whether any check applies.
    fn admission_change(
        &self,
        key: &WorkloadKey,
        admission: &engine::Admission,
        time: Time,
    ) -> (StatusChange, bool) {
        let placement = self.engine.as_ref().and_then(|e| e.placement(key));
        let api_adm = status::api_admission_with_placement(admission, placement);
        let cq_spec = self
            .cache
            .cluster_queues
            .get(&admission.cluster_queue)
            .map(|cq| cq.spec.clone());
        let has_checks = cq_spec
            .as_ref()
            .is_some_and(|spec| !admission_checks::checks_for(spec, Some(&api_adm)).is_empty());
        let change: StatusChange = Box::new(move |wl| {
            let before = wl.status.clone();
            admission_checks::reserve(wl, cq_spec.as_ref(), api_adm.clone(), time);
            Ok(wl.status != before)
        });
        (change, has_checks)
    }

    /// What follows an admission written: metrics, the QuotaReserved event, the owner and the Workload
    /// reconciled.
    fn admitted(
        &mut self,
        key: &WorkloadKey,
        wl: &api::Workload,
        cq: &str,
        time: Time,
        has_checks: bool,
    ) {
        self.admitted_at.insert(key.clone(), time);
        let pc = Self::priority_class(wl);
        let waited_since = cond_time(wl, condition::REQUEUED)
            .filter(|_| cond_true(wl, condition::REQUEUED))
            .or_else(|| wl.metadata.creation_timestamp.as_ref().map(ingest::time_of))
            .unwrap_or(time);
        let wait = ((time - waited_since).max(0) as f64) / 1000.0;
        self.metrics
            .quota_reserved(cq, &pc, self.role, wait, !has_checks);
        self.event(
            reference(wl),
            EventSeverity::Normal,
            "QuotaReserved",
            "Admission",
            format!("Quota reserved in ClusterQueue {cq}, wait time since queued was {wait:.0}s"),
        );
        self.mark_owner_dirty(wl);
        self.dirty_workloads.insert(key.clone());
    }

    /// The status change that records why a workload waits; None when nothing is to be written (it is gone,
    /// or its deactivation message stays).
    fn pending_change(
        &self,
        key: &WorkloadKey,
        reason: &str,
        message: String,
    ) -> Option<StatusChange> {
        let wl = self.cache.workloads.get(key)?;
        let requests = match ingest::workload_with(wl, &self.cache.resource_rules) {
            Ok((w, _)) => status::resource_requests(&w),
            Err(_) => Vec::new(),
        };
        if status::keeps_deactivation_message(wl, reason)
            || status::pending_unwritten(wl, reason, self.config.detailed_pending_reasons)
        {
            return None;
        }
        let reason = status::written_pending_reason(reason, self.config.detailed_pending_reasons)
            .to_string();
        let now = now_ms();
        Some(Box::new(move |wl| {
            let before = wl.status.clone();
            status::pending(wl, &reason, &message, &requests, now);
            Ok(wl.status != before)
        }))
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
        self.queues_changed();
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
