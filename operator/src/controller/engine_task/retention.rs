//! Kueue's object retention (`objectRetentionPolicies.workloads`, ObjectRetentionPolicies on by default): a
//! finished Workload is deleted `afterFinished` after it finished (Kueue's workload controller), and a job whose
//! Workload Kueue deactivated is deleted `afterDeactivatedByKueue` after that eviction (Kueue's job reconciler).

use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use sluice_sdk::kueue::labels::{self, condition};
use sluice_sdk::kueue::v1beta2 as api;

use super::{EngineTask, now_ms};
use crate::controller::objects::*;
use crate::engine::{Time, WorkloadKey};
use crate::jobs::pod_group::PodGroupKey;
use crate::telemetry::EventSeverity;

/// What retention asks of a Workload now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Retention {
    /// Nothing, now or later.
    Keep,
    /// Look again then.
    Until(Time),
    /// Delete the finished Workload.
    DeleteWorkload,
    /// Delete the job that owns the deactivated Workload.
    DeleteOwner,
}

/// Kueue's reason prefix of an eviction that Kueue's own deactivation caused (`DeactivatedDueTo...`).
const DEACTIVATED_BY_KUEUE: &str = "DeactivatedDueTo";

/// The retention rule for `wl` at `now` under `policy`.
pub(super) fn retention(
    wl: &api::Workload,
    policy: &crate::controller::config::WorkloadRetention,
    now: Time,
) -> Retention {
    let due = |since: Time, after: std::time::Duration, then: Retention| {
        let at = since.saturating_add(after.as_millis() as Time);
        if at <= now {
            then
        } else {
            Retention::Until(at)
        }
    };
    if is_finished(wl) {
        return match (policy.after_finished, cond_time(wl, condition::FINISHED)) {
            (Some(after), Some(since)) => due(since, after, Retention::DeleteWorkload),
            _ => Retention::Keep,
        };
    }
    let deactivated_by_kueue = !wl.spec.is_active()
        && cond_true(wl, condition::EVICTED)
        && cond_reason(wl, condition::EVICTED).is_some_and(|r| r.starts_with(DEACTIVATED_BY_KUEUE));
    match (policy.after_deactivated_by_kueue, deactivated_by_kueue) {
        (Some(after), true) => match cond_time(wl, condition::EVICTED) {
            Some(since) => due(since, after, Retention::DeleteOwner),
            None => Retention::Keep,
        },
        _ => Retention::Keep,
    }
}

impl EngineTask {
    /// Applies retention to one Workload; returns whether it deleted something (the Workload or its job).
    pub(super) async fn apply_retention(&mut self, key: &WorkloadKey, wl: &api::Workload) -> bool {
        match retention(wl, &self.config.workload_retention, now_ms()) {
            Retention::Keep => {
                self.retention_deadlines.remove(key);
                false
            }
            Retention::Until(at) => {
                self.retention_deadlines.insert(key.clone(), at);
                false
            }
            Retention::DeleteWorkload => {
                self.retention_deadlines.remove(key);
                // A finished Workload needs Kueue's finalizer no more; without this the deletion would wait on it.
                if has_finalizer(wl, labels::RESOURCE_IN_USE_FINALIZER) {
                    self.release_workload_finalizer(key).await;
                }
                let api = self.apis.workloads(&key.namespace);
                if let Err(e) = self.writer.delete(&api, &key.name).await {
                    tracing::error!(workload = %key, error = %e, "finished workload not deleted");
                    return false;
                }
                self.event(
                    super::reference(wl),
                    EventSeverity::Normal,
                    "Deleted",
                    "Deleted",
                    "Deleted finished workload due to elapsed retention".into(),
                );
                true
            }
            Retention::DeleteOwner => {
                self.retention_deadlines.remove(key);
                self.delete_deactivated_owner(key, wl).await
            }
        }
    }

    /// Deletes the job controlling a Workload Kueue deactivated, in the background as Kueue does (its pods and
    /// the Workload follow by garbage collection).
    async fn delete_deactivated_owner(&mut self, key: &WorkloadKey, wl: &api::Workload) -> bool {
        // Pods are Kueue's one kind with its own finalizer to release (and a group has no single owner).
        if let Some(group) = PodGroupKey::of_workload(wl) {
            return self.delete_deactivated_group(&group).await;
        }
        let Some(owner) = wl
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .cloned()
        else {
            return false;
        };
        let (group, version) = match owner.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", owner.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
        let resource = ApiResource::from_gvk(&gvk);
        let api: kube::Api<DynamicObject> =
            kube::Api::namespaced_with(self.apis.client.clone(), &key.namespace, &resource);
        match api.delete(&owner.name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return false,
            Err(e) => {
                tracing::error!(workload = %key, owner = %owner.name, error = %e, "deactivated job not deleted");
                return false;
            }
        }
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(owner.api_version.clone()),
            kind: Some(owner.kind.clone()),
            name: Some(owner.name.clone()),
            namespace: Some(key.namespace.clone()),
            uid: Some(owner.uid.clone()),
            ..Default::default()
        };
        self.event(
            reference,
            EventSeverity::Normal,
            "Deleted",
            "Deleted",
            "Deleted job: deactivation retention period expired".into(),
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::config::WorkloadRetention;
    use std::time::Duration;

    fn with_condition(type_: &str, reason: &str, at: Time, active: bool) -> api::Workload {
        let mut wl = api::Workload::default();
        wl.spec.active = Some(active);
        let mut conditions = Vec::new();
        crate::status::set_condition(&mut conditions, type_, true, reason, "m", at);
        wl.status = Some(api::WorkloadStatus {
            conditions,
            ..Default::default()
        });
        wl
    }

    #[test]
    fn a_finished_workload_is_deleted_once_its_retention_has_passed() {
        let policy = WorkloadRetention {
            after_finished: Some(Duration::from_secs(60)),
            after_deactivated_by_kueue: None,
        };
        let wl = with_condition("Finished", "Succeeded", 1_000, true);
        assert_eq!(retention(&wl, &policy, 2_000), Retention::Until(61_000));
        assert_eq!(retention(&wl, &policy, 61_000), Retention::DeleteWorkload);
        // No policy: kept.
        assert_eq!(
            retention(&wl, &WorkloadRetention::default(), 1_000_000),
            Retention::Keep
        );
    }

    #[test]
    fn only_a_deactivation_by_kueue_deletes_the_job() {
        let policy = WorkloadRetention {
            after_finished: None,
            after_deactivated_by_kueue: Some(Duration::ZERO),
        };
        let by_kueue = with_condition(
            "Evicted",
            "DeactivatedDueToMaximumExecutionTimeExceeded",
            1_000,
            false,
        );
        assert_eq!(retention(&by_kueue, &policy, 1_000), Retention::DeleteOwner);
        // Deactivated by its owner (plain `Deactivated`), or evicted but active again: kept.
        let by_user = with_condition("Evicted", "Deactivated", 1_000, false);
        assert_eq!(retention(&by_user, &policy, 5_000), Retention::Keep);
        let reactivated = with_condition(
            "Evicted",
            "DeactivatedDueToRequeuingLimitExceeded",
            1_000,
            true,
        );
        assert_eq!(retention(&reactivated, &policy, 5_000), Retention::Keep);
    }
}
