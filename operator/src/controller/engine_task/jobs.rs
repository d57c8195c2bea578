//! The batch Job integration: Workload creation, start on admission, stop on eviction, PodsReady, Finished,
//! and the Workload of a deleted Job.

use k8s_openapi::api::batch::v1::Job;
use kube::{Resource, ResourceExt};
use sluice_sdk::kueue::labels::{self};
use sluice_sdk::kueue::v1beta2 as api;

use super::{EngineTask, now_ms, reference};
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::engine::{Event, WorkloadKey};
use crate::jobs::{BatchJob, JobIntegration, PodSetInfo, pod_set_infos};
use crate::status;
use crate::telemetry::EventSeverity;

impl EngineTask {
    /// The Job integration: Workload creation, start on admission, stop on eviction, PodsReady, Finished.
    /// Returns whether it wrote anything.
    pub(super) async fn reconcile_job(&mut self, key: &(String, String)) -> bool {
        if !self.config.batch_jobs {
            return false;
        }
        let Some(job) = self.cache.jobs.get(key).cloned() else {
            return false;
        };
        if job.meta().deletion_timestamp.is_some() {
            return false;
        }
        // With manageJobsWithoutQueueName a Job without the label is managed with no queue, as in Kueue: its
        // Workload waits ("LocalQueue  doesn't exist") until the label is set. The webhook has already given it
        // the namespace's `default` LocalQueue when there is one (LocalQueueDefaulting).
        if BatchJob::queue_name(&job).is_none() && !self.config.manage_jobs_without_queue_name {
            return false;
        }
        let Some(uid) = job.metadata.uid.clone() else {
            return false;
        };
        let wl_name =
            crate::jobs::workload_name(BatchJob::KIND, BatchJob::GROUP, &job.name_any(), &uid);
        let wkey = WorkloadKey::new(key.0.clone(), wl_name);
        let Some(wl) = self.cache.workloads.get(&wkey).cloned() else {
            return self.create_workload_for(key, &job).await;
        };
        if is_finished(&wl) {
            return false;
        }
        if let Some((success, message)) = BatchJob::finished(&job) {
            return self
                .finish_workload_with(&wkey, &wl, success, &message)
                .await;
        }
        // Kueue's job reconciler writes PodsReady before it handles an eviction or starts the job, for every
        // Workload of a job (WaitForStart while it is not admitted).
        self.update_pods_ready(&wkey, &wl, &job).await;
        let suspended = BatchJob::is_suspended(&job);
        if is_evicting(&wl) {
            // Kueue's stop, in three writes: the API server refuses a template change of a Job that has
            // started, so first suspend (marked stopping), then clear status.startTime, then restore the
            // template and drop the mark.
            if !suspended {
                self.write_job(key, |j| {
                    BatchJob::suspend(j);
                    j.metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert(labels::STOPPING_ANNOTATION.into(), "true".into());
                    Ok(true)
                })
                .await;
                return true;
            }
            if job.annotations().contains_key(labels::STOPPING_ANNOTATION) {
                if job.status.as_ref().is_some_and(|s| s.start_time.is_some()) {
                    self.write_job_at(key, Endpoint::Status, |j| {
                        if let Some(s) = j.status.as_mut() {
                            s.start_time = None;
                        }
                        Ok(true)
                    })
                    .await;
                    return true;
                }
                let originals = originals(&wl);
                self.write_job(key, |j| {
                    BatchJob::restore(j, &originals);
                    if let Some(a) = j.metadata.annotations.as_mut() {
                        a.remove(labels::STOPPING_ANNOTATION);
                    }
                    Ok(true)
                })
                .await;
                // Stopped pods show up as status.active dropping to 0 in a later Job event.
                if self
                    .cache
                    .jobs
                    .get(key)
                    .is_some_and(|j| active_pods(j) == 0)
                {
                    self.complete_eviction(&wkey).await;
                }
                return true;
            }
            if active_pods(&job) == 0 {
                self.complete_eviction(&wkey).await;
                return true;
            }
            return false;
        }
        if is_admitted(&wl) {
            if suspended {
                return self.start_job(key, &wl).await;
            }
            return false;
        }
        if !suspended {
            // Running without admission (created before Sluice saw it): stop it until admitted.
            self.write_job(key, |j| {
                BatchJob::suspend(j);
                Ok(true)
            })
            .await;
            return true;
        }
        false
    }

    /// Reconciles again the Jobs and pod groups whose Workload could not be built.
    pub(super) fn retry_unbuilt(&mut self) {
        self.dirty_jobs.append(&mut self.unbuilt_jobs);
        self.dirty_pod_groups.append(&mut self.unbuilt_pod_groups);
    }

    async fn create_workload_for(&mut self, key: &(String, String), job: &Job) -> bool {
        if BatchJob::finished(job).is_some() {
            return false;
        }
        let mut wrote = false;
        if !BatchJob::is_suspended(job) {
            self.write_job(key, |j| {
                BatchJob::suspend(j);
                Ok(true)
            })
            .await;
            wrote = true;
        }
        match BatchJob::workload(job, &self.cache.priorities) {
            Ok(wl) => self.create_owned_workload(Some(reference(job)), &wl).await,
            Err(e) => {
                self.unbuilt_jobs.insert(key.clone());
                self.workload_not_built(Some(reference(job)), "CreatedWorkload", &e);
                return wrote;
            }
        }
        true
    }

    /// The admitting ClusterQueue and what each pod set of an admitted Workload must run with
    /// (node selector, tolerations, labels, count), for the job kinds' starters; `None` (logged with
    /// `what`) when the Workload is not admitted or its admission cannot be applied.
    pub(super) fn admitted_infos<'w>(
        &self,
        wl: &'w api::Workload,
        what: &str,
    ) -> Option<(&'w str, Vec<PodSetInfo>)> {
        let admission = wl.status.as_ref()?.admission.as_ref()?;
        let flavors = &self.cache.flavors;
        pod_set_infos(
            admission,
            &wl.spec.pod_sets,
            &wl.spec.queue_name,
            &wl.name_any(),
            |n| flavors.get(n),
        )
        .map_err(
            |e| tracing::warn!(workload = %workload_key(wl), error = %e, "cannot start {what}"),
        )
        .ok()
        .map(|infos| (admission.cluster_queue.as_str(), infos))
    }

    async fn start_job(&mut self, key: &(String, String), wl: &api::Workload) -> bool {
        let Some((cluster_queue, infos)) = self.admitted_infos(wl, "job") else {
            return false;
        };
        let started = self
            .write_job(key, |j| {
                BatchJob::run_with(j, &infos).map_err(|e| e.to_string())?;
                Ok(true)
            })
            .await;
        if let Some(j) = started {
            self.event(
                reference(&j),
                EventSeverity::Normal,
                "Started",
                "Start",
                format!("Admitted by clusterQueue {cluster_queue}"),
            );
        }
        true
    }

    /// Marks the Workload Finished with `message` and releases its quota.
    pub(super) async fn finish_workload_with(
        &mut self,
        wkey: &WorkloadKey,
        wl: &api::Workload,
        success: bool,
        message: &str,
    ) -> bool {
        let now = now_ms();
        let written = self
            .write_workload_status(wkey, |w| {
                status::finish(w, success, message, now);
                Ok(true)
            })
            .await;
        if written.is_some() {
            let cq = admitted_cluster_queue(wl);
            self.metrics
                .finished(&cq, &Self::priority_class(wl), self.role);
            self.engine_apply(Event::FinishWorkload(wkey.clone()));
            self.ready_deadlines.remove(wkey);
            self.queues_dirty = true;
        }
        true
    }

    /// A Job is gone. As Kueue v0.19 (FinishOrphanedWorkloads, on by default): its Workload is finished with
    /// reason OwnerNotFound, which releases its quota at once, and loses its finalizer; garbage collection then
    /// deletes it through its owner reference.
    pub(super) async fn job_deleted(&mut self, job: &Job) {
        let Some(uid) = job.metadata.uid.clone() else {
            return;
        };
        let ns = job.namespace().unwrap_or_default();
        let name =
            crate::jobs::workload_name(BatchJob::KIND, BatchJob::GROUP, &job.name_any(), &uid);
        let wkey = WorkloadKey::new(ns.clone(), name.clone());
        let Some(wl) = self.cache.workloads.get(&wkey).cloned() else {
            return;
        };
        if wl.metadata.deletion_timestamp.is_none() && !is_finished(&wl) {
            let now = now_ms();
            let written = self
                .write_workload_status(&wkey, |w| {
                    status::finish_with_reason(
                        w,
                        labels::reason::OWNER_NOT_FOUND,
                        "The workload's owner no longer exists",
                        now,
                    );
                    Ok(true)
                })
                .await;
            if written.is_some() {
                self.engine_apply(Event::FinishWorkload(wkey.clone()));
                self.ready_deadlines.remove(&wkey);
                self.queues_dirty = true;
            }
        }
        self.write_workload_main(&wkey, |w| {
            Ok(set_finalizer(w, labels::RESOURCE_IN_USE_FINALIZER, false))
        })
        .await;
    }
}

/// What `run_with` changed in each pod set, recorded from the Workload's pod templates (the Job as queued).
fn originals(wl: &api::Workload) -> Vec<PodSetInfo> {
    wl.spec
        .pod_sets
        .iter()
        .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
        .collect()
}
