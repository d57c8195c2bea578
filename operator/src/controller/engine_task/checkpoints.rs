//! The checkpoint grace before a preemption victim is evicted: the request on the victim's Workload and pods,
//! the conditions on both sides, and the eviction when the checkpoint is done or the grace runs out.

use kube::Api;

use super::{EngineTask, now_ms};
use crate::controller::checkpoint::{self, PendingCheckpoint};
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::engine::{Time, WorkloadKey};
use crate::ingest::LAST_CHECKPOINT_ANNOTATION;
use crate::status;

impl EngineTask {
    /// The victim's checkpoint grace from its Workload's or Job's annotation (None: not opted in).
    pub(super) fn checkpoint_grace(&self, key: &WorkloadKey) -> Option<Time> {
        let wl = self.cache.workloads.get(key)?;
        let from_wl = wl
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(checkpoint::GRACE_ANNOTATION))
            .cloned();
        let value = from_wl.or_else(|| {
            let job = self.cache.jobs.get(&owner_job(wl)?)?;
            job.metadata
                .annotations
                .as_ref()?
                .get(checkpoint::GRACE_ANNOTATION)
                .cloned()
        });
        match checkpoint::parse_grace(value.as_deref()) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "checkpoint grace ignored");
                None
            }
        }
    }

    /// Asks the victim to checkpoint: annotations on its Workload and pods, conditions on both sides.
    pub(super) async fn request_checkpoint(
        &mut self,
        key: &WorkloadKey,
        mut pending: PendingCheckpoint,
        grace: Time,
    ) {
        let stamp = status::k8s_time(pending.requested).0.to_string();
        let now = now_ms();
        let preemptor = pending
            .preemptor
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        self.write_workload_main(key, |w| {
            let a = w.metadata.annotations.get_or_insert_with(Default::default);
            if a.get(checkpoint::REQUESTED_ANNOTATION) == Some(&stamp) {
                return Ok(false);
            }
            a.insert(checkpoint::REQUESTED_ANNOTATION.to_string(), stamp.clone());
            Ok(true)
        })
        .await;
        let secs = grace / 1000;
        // A preemption names its preemptor; an eviction off a degrading GPU gives its own reason and message.
        let (requested_reason, victim_msg) = if pending.preemptor.is_some() {
            (
                "Preemption".to_string(),
                format!(
                    "Preempted by {preemptor}; waiting up to {secs}s for a checkpoint before eviction"
                ),
            )
        } else {
            (
                pending.reason.clone(),
                format!(
                    "{}; waiting up to {secs}s for a checkpoint before eviction",
                    pending.message
                ),
            )
        };
        let written = self
            .write_workload_status(key, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    checkpoint::REQUESTED_CONDITION,
                    true,
                    &requested_reason,
                    &victim_msg,
                    now,
                ))
            })
            .await;
        pending.cluster_queue = written
            .as_ref()
            .and_then(|w| w.status.as_ref()?.admission.as_ref())
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default();
        if let Some(p) = pending.preemptor.clone() {
            let msg = format!("Waiting up to {secs}s for the checkpoint of {key}");
            self.write_workload_status(&p, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    checkpoint::WAITING_CONDITION,
                    true,
                    "CheckpointRequested",
                    &msg,
                    now,
                ))
            })
            .await;
        }
        if let Some(job) = written.as_ref().and_then(owner_job) {
            self.annotate_pods(&job, &stamp).await;
        }
        self.checkpoints.insert(key.clone(), pending);
    }

    async fn annotate_pods(&mut self, job: &(String, String), stamp: &str) {
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.apis.client.clone(), &job.0);
        let lp = kube::api::ListParams::default()
            .labels(&format!("batch.kubernetes.io/job-name={}", job.1));
        let pods = match api.list(&lp).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!(error = %e, job = %job.1, "cannot list the job's pods for a checkpoint request");
                return;
            }
        };
        for pod in pods {
            let r = self
                .writer
                .update(&api, pod, Endpoint::Main, |p| {
                    let a = p.metadata.annotations.get_or_insert_with(Default::default);
                    if a.get(checkpoint::REQUESTED_ANNOTATION).map(String::as_str) == Some(stamp) {
                        return Ok(false);
                    }
                    a.insert(
                        checkpoint::REQUESTED_ANNOTATION.to_string(),
                        stamp.to_string(),
                    );
                    Ok(true)
                })
                .await;
            if let Err(e) = r {
                tracing::warn!(error = %e, "pod checkpoint annotation failed");
            }
        }
    }

    /// The checkpoint is done (or the grace ran out): record the wait, update both conditions, evict.
    pub(super) async fn finish_checkpoint(&mut self, key: &WorkloadKey, outcome: &str) {
        let Some(p) = self.checkpoints.remove(key) else {
            return;
        };
        let now = now_ms();
        self.metrics.checkpoint_waited(
            &p.cluster_queue,
            outcome,
            ((now - p.requested).max(0) as f64) / 1000.0,
        );
        if outcome == "done" {
            // The reported checkpoint is the workload's latest: work before it survives this eviction.
            let stamp = serde_json::to_value(status::k8s_time(now))
                .ok()
                .and_then(|v| v.as_str().map(str::to_string));
            if let Some(stamp) = stamp {
                self.write_workload_main(key, |w| {
                    let a = w.metadata.annotations.get_or_insert_with(Default::default);
                    if a.get(LAST_CHECKPOINT_ANNOTATION) == Some(&stamp) {
                        return Ok(false);
                    }
                    a.insert(LAST_CHECKPOINT_ANNOTATION.to_string(), stamp.clone());
                    Ok(true)
                })
                .await;
            }
        }
        let (reason, msg) = if outcome == "done" {
            ("CheckpointDone", "Checkpoint reported done; evicting")
        } else {
            (
                "GracePeriodExpired",
                "No checkpoint within the grace period; evicting",
            )
        };
        self.write_workload_status(key, |w| {
            let st = w.status.get_or_insert_with(Default::default);
            Ok(status::set_condition(
                &mut st.conditions,
                checkpoint::REQUESTED_CONDITION,
                false,
                reason,
                msg,
                now,
            ))
        })
        .await;
        if let Some(pre) = &p.preemptor {
            self.write_workload_status(pre, |w| {
                let st = w.status.get_or_insert_with(Default::default);
                Ok(status::set_condition(
                    &mut st.conditions,
                    checkpoint::WAITING_CONDITION,
                    false,
                    reason,
                    msg,
                    now,
                ))
            })
            .await;
        }
        self.evict(
            key,
            &p.reason,
            p.preemption_reason.as_deref(),
            p.preemptor.as_ref(),
            &p.message,
            now,
        )
        .await;
    }
}
