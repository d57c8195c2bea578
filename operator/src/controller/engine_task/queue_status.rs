//! ClusterQueue, LocalQueue and Cohort status, the resource-in-use finalizers of ClusterQueues and
//! ResourceFlavors, queue gauges and the visibility snapshot.

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt};
use sluice_sdk::kueue::labels::{self};
use sluice_sdk::kueue::v1beta2 as api;

use super::writes::{in_flight, logged_update};
use super::{EngineTask, now_ms};
use crate::controller::objects::*;
use crate::controller::writer::Endpoint;
use crate::engine::{self, Engine};
use crate::telemetry::{QueueResource, ResourceSeries};
use crate::visibility::{PendingEntry, Snapshot};
use crate::{ingest, status};

impl EngineTask {
    /// ClusterQueue, LocalQueue and Cohort status, finalizers of ClusterQueues and ResourceFlavors, queue gauges.
    pub(super) async fn write_queue_statuses(&mut self) {
        let Some(engine) = self.engine.as_ref() else {
            return;
        };
        let now = now_ms();
        let fair = engine.fair_sharing();
        let mut cq_writes = Vec::new();
        let mut cq_active = BTreeMap::new();
        let mut released = Vec::new();
        for (name, cq) in &self.cache.cluster_queues {
            let Some(usage) = engine.cluster_queue_usage(name) else {
                // Being deleted, and gone from the engine once nothing holds quota in it: as Kueue, its finalizer
                // goes, so the deletion completes.
                if cq.meta().deletion_timestamp.is_some()
                    && has_finalizer(cq, labels::RESOURCE_IN_USE_FINALIZER)
                {
                    released.push(cq.clone());
                }
                continue;
            };
            let stopped = cq.spec.stop_policy() != api::StopPolicy::None;
            cq_active.insert(
                name.clone(),
                status::cluster_queue_is_active(&usage, stopped),
            );
            let mut st = status::cluster_queue_status(&usage, stopped, fair, now);
            keep_transition_times(
                &mut st.conditions,
                cq.status
                    .as_ref()
                    .map(|s| s.conditions.as_slice())
                    .unwrap_or(&[]),
            );
            self.queue_gauges(name, cq, &usage, engine);
            let terminating = cq.meta().deletion_timestamp.is_some();
            let finalizer = if terminating {
                (usage.reserving_workloads == 0).then_some(false)
            } else {
                (!has_finalizer(cq, labels::RESOURCE_IN_USE_FINALIZER)).then_some(true)
            };
            if cq.status.as_ref() != Some(&st) || finalizer.is_some() {
                cq_writes.push((cq.clone(), st, finalizer));
            }
        }
        let mut lq_writes = Vec::new();
        for (key, lq) in &self.cache.local_queues {
            let Some(usage) = engine.local_queue_usage(&key.0, &key.1) else {
                continue;
            };
            let stopped = lq.spec.stop_policy() != api::StopPolicy::None;
            let active = if self
                .cache
                .cluster_queues
                .contains_key(&lq.spec.cluster_queue)
            {
                Some(
                    cq_active
                        .get(&lq.spec.cluster_queue)
                        .copied()
                        .unwrap_or(false),
                )
            } else {
                None
            };
            let consumed = engine.local_queue_consumed_usage(&key.0, &key.1);
            let mut st =
                status::local_queue_status(&usage, stopped, active, consumed.as_ref(), now);
            let old = lq.status.clone().unwrap_or_default();
            keep_transition_times(&mut st.conditions, &old.conditions);
            // Fields Sluice does not compute keep what is there.
            let mut merged = old.clone();
            merged.conditions = st.conditions;
            merged.pending_workloads = st.pending_workloads;
            merged.reserving_workloads = st.reserving_workloads;
            merged.admitted_workloads = st.admitted_workloads;
            merged.flavors_reservation = st.flavors_reservation;
            merged.flavors_usage = st.flavors_usage;
            if st.fair_sharing.is_some() {
                merged.fair_sharing = st.fair_sharing;
            }
            if lq.status.as_ref() != Some(&merged) {
                lq_writes.push((lq.clone(), merged));
            }
        }
        let mut cohort_writes = Vec::new();
        if fair {
            for (name, c) in &self.cache.cohorts {
                let Some(share) = engine.cohort_weighted_share(name) else {
                    continue;
                };
                let st = api::CohortStatus {
                    fair_sharing: Some(api::FairSharingStatus {
                        weighted_share: share,
                    }),
                };
                if c.status.as_ref() != Some(&st) {
                    cohort_writes.push((c.clone(), st));
                }
            }
        }
        let mut flavor_writes = Vec::new();
        for (name, rf) in &self.cache.flavors {
            let in_use = self.cache.cluster_queues.values().any(|cq| {
                cq.spec
                    .resource_groups
                    .iter()
                    .any(|g| g.flavors.iter().any(|f| &f.name == name))
            });
            let want = if rf.meta().deletion_timestamp.is_some() {
                !in_use && has_finalizer(rf, labels::RESOURCE_IN_USE_FINALIZER)
            } else {
                !has_finalizer(rf, labels::RESOURCE_IN_USE_FINALIZER)
            };
            if want {
                flavor_writes.push((rf.clone(), rf.meta().deletion_timestamp.is_none()));
            }
        }
        for cq in released {
            let api = self.apis.cluster_queues.clone();
            self.write(&api, cq, Endpoint::Main, "cluster queue finalizer", |c| {
                Ok(set_finalizer(c, labels::RESOURCE_IN_USE_FINALIZER, false))
            })
            .await;
        }
        // Each queue's writes in turn, up to `writes_in_flight` queues at once: with a thousand ClusterQueues and
        // their LocalQueues, writing them one after another kept the engine from its events for tens of seconds.
        let (writer, apis) = (&self.writer, &self.apis);
        let cq_written = in_flight(
            cq_writes
                .into_iter()
                .map(|(cq, st, finalizer)| {
                    let api = apis.cluster_queues.clone();
                    async move {
                        let name = cq.name_any();
                        let mut cur = Some(cq);
                        if let Some(add) = finalizer
                            && let Some(c) = cur.take()
                        {
                            cur = logged_update(
                                writer,
                                &api,
                                c,
                                Endpoint::Main,
                                "cluster queue finalizer",
                                |c| Ok(set_finalizer(c, labels::RESOURCE_IN_USE_FINALIZER, add)),
                            )
                            .await;
                        }
                        let written = match cur {
                            Some(c) => {
                                logged_update(
                                    writer,
                                    &api,
                                    c,
                                    Endpoint::Status,
                                    "cluster queue status",
                                    |c| replace_status(&mut c.status, &st),
                                )
                                .await
                            }
                            None => None,
                        };
                        (name, written)
                    }
                })
                .collect(),
            self.config.writes_in_flight,
        )
        .await;
        let lq_written = in_flight(
            lq_writes
                .into_iter()
                .map(|(lq, st)| {
                    let key = (lq.namespace().unwrap_or_default(), lq.name_any());
                    let api = apis.local_queues(&key.0);
                    async move {
                        let written = logged_update(
                            writer,
                            &api,
                            lq,
                            Endpoint::Status,
                            "local queue status",
                            |l| replace_status(&mut l.status, &st),
                        )
                        .await;
                        (key, written)
                    }
                })
                .collect(),
            self.config.writes_in_flight,
        )
        .await;
        for (name, c) in cq_written {
            if let Some(c) = c {
                self.cache.cluster_queues.insert(name, c);
            }
        }
        for (key, l) in lq_written {
            if let Some(l) = l {
                self.cache.local_queues.insert(key, l);
            }
        }
        for (c, st) in cohort_writes {
            let name = c.name_any();
            let api = self.apis.cohorts.clone();
            if let Some(c) = self
                .write(&api, c, Endpoint::Status, "cohort status", |c| {
                    replace_status(&mut c.status, &st)
                })
                .await
            {
                self.cache.cohorts.insert(name, c);
            }
        }
        for (rf, add) in flavor_writes {
            let name = rf.name_any();
            let api = self.apis.flavors.clone();
            if let Some(f) = self
                .write(&api, rf, Endpoint::Main, "resource flavor finalizer", |f| {
                    Ok(set_finalizer(f, labels::RESOURCE_IN_USE_FINALIZER, add))
                })
                .await
            {
                self.cache.flavors.insert(name, f);
            }
        }
    }

    fn queue_gauges(
        &self,
        name: &str,
        cq: &api::ClusterQueue,
        usage: &engine::ClusterQueueUsage,
        engine: &Engine,
    ) {
        let role = self.role;
        self.metrics.cluster_queue_workloads(
            name,
            role,
            i64::from(usage.pending_workloads),
            usage.reserving_workloads as i64,
            usage.admitted_workloads as i64,
        );
        let cohort = cq.spec.cohort().unwrap_or_default();
        let queue = ResourceSeries {
            cohort,
            cluster_queue: name,
            flavor: "",
            resource: "",
            replica_role: role,
        };
        for (which, flavors) in [
            (QueueResource::Usage, &usage.flavors_usage),
            (QueueResource::Reservation, &usage.flavors_reservation),
        ] {
            for f in flavors {
                for r in &f.resources {
                    let series = ResourceSeries {
                        flavor: &f.name,
                        resource: &r.name,
                        ..queue
                    };
                    self.metrics.cluster_queue_resource(which, &series, r.total);
                }
            }
        }
        for g in &cq.spec.resource_groups {
            for f in &g.flavors {
                for r in &f.resources {
                    if let Ok(v) = sluice_sdk::quantity::resource_value(&r.name, &r.nominal_quota) {
                        let series = ResourceSeries {
                            flavor: &f.name,
                            resource: &r.name,
                            ..queue
                        };
                        self.metrics.cluster_queue_resource(
                            QueueResource::NominalQuota,
                            &series,
                            v,
                        );
                    }
                }
            }
        }
        let status = if cq.meta().deletion_timestamp.is_some() {
            "terminating"
        } else if usage.active {
            "active"
        } else {
            "pending"
        };
        self.metrics.cluster_queue_status(name, role, status);
        if engine.fair_sharing() {
            self.metrics
                .cluster_queue_weighted_share(name, cohort, role, usage.weighted_share);
        }
    }

    pub(super) fn publish_visibility(&self) {
        let Some(engine) = self.engine.as_ref() else {
            return;
        };
        let mut snap = Snapshot::default();
        for name in self.cache.cluster_queues.keys() {
            let entries = engine
                .pending_workloads(name)
                .into_iter()
                .filter_map(|k| {
                    let w = self.cache.workloads.get(&k)?;
                    Some(PendingEntry {
                        namespace: k.namespace.clone(),
                        name: k.name.clone(),
                        local_queue: w.spec.queue_name.clone(),
                        priority: w.spec.priority(),
                        created: w
                            .metadata
                            .creation_timestamp
                            .as_ref()
                            .map(ingest::time_of)
                            .unwrap_or(0),
                    })
                })
                .collect();
            snap.cluster_queues.insert(name.clone(), entries);
        }
        for (key, lq) in &self.cache.local_queues {
            snap.local_queues
                .insert(key.clone(), lq.spec.cluster_queue.clone());
        }
        self.snapshot.publish(snap);
    }
}

/// Conditions whose status did not change keep their transition time, so a rewrite of the same status is a no-op.
fn keep_transition_times(
    new: &mut [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    old: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) {
    for c in new.iter_mut() {
        if let Some(o) = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}

/// Sets `slot` to `status` for the writer: whether it changed (unchanged objects are not written).
fn replace_status<S: PartialEq + Clone>(slot: &mut Option<S>, status: &S) -> Result<bool, String> {
    let changed = slot.as_ref() != Some(status);
    *slot = Some(status.clone());
    Ok(changed)
}
