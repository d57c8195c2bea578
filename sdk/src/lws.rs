//! LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`, the API of `sigs.k8s.io/lws` v0.9): the fields Kueue's
//! LeaderWorkerSet integration reads. Fields Sluice does not read are kept as they came, so that a
//! LeaderWorkerSet written back loses nothing.
//!
//! Kueue does not suspend a LeaderWorkerSet: it admits each of its groups (a leader and its workers) as one
//! Workload, built ahead of the group's pods, and gates the pods until that Workload is admitted.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API group of LeaderWorkerSet.
pub const GROUP: &str = "leaderworkerset.x-k8s.io";
/// The version Kueue's integration watches.
pub const VERSION: &str = "v1";
/// `apiVersion` of a LeaderWorkerSet.
pub const API_VERSION: &str = "leaderworkerset.x-k8s.io/v1";
/// Kind.
pub const KIND: &str = "LeaderWorkerSet";
/// Kueue's framework name, also the value of `kueue.x-k8s.io/pod-suspending-parent` on the pods it gates.
pub const FRAMEWORK_NAME: &str = "leaderworkerset.x-k8s.io/leaderworkerset";
/// Label the LWS controller puts on its StatefulSets and pods with the LeaderWorkerSet's name.
pub const SET_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";
/// Label of a pod with the index of its group.
pub const GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// Label of a pod with its index within its group (the leader is 0).
pub const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// Annotation of a worker pod naming its leader pod (absent on the leader).
pub const LEADER_NAME_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/leader-name";
/// Prefix of the LWS controller's own labels and annotations, which Kueue drops from its pod sets.
pub const DOMAIN_PREFIX: &str = "leaderworkerset.sigs.k8s.io";
/// Pod-set name of the leader.
pub const LEADER_POD_SET: &str = "leader";
/// Pod-set name of the workers when there is a leader template.
pub const WORKER_POD_SET: &str = "worker";
/// Kueue's limit on `spec.replicas`.
pub const MAX_REPLICAS: i32 = 1_000_000;

/// A LeaderWorkerSet: `replicas` groups, each a leader and `size - 1` workers, run as StatefulSets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSet {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run.
    #[serde(default)]
    pub spec: LeaderWorkerSetSpec,
    /// What the LWS controller reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<LeaderWorkerSetStatus>,
}

/// The part of a LeaderWorkerSet's spec Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetSpec {
    /// How many groups (1 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The templates of a group.
    #[serde(default)]
    pub leader_worker_template: LeaderWorkerTemplate,
    /// How groups are replaced when the templates change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The templates of one group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerTemplate {
    /// The leader's template; without it the leader is made from the worker template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_template: Option<PodTemplateSpec>,
    /// The workers' template.
    #[serde(default)]
    pub worker_template: PodTemplateSpec,
    /// Pods per group, the leader included (1 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// How groups are replaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// `RollingUpdate`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The rolling update's limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update_configuration: Option<RollingUpdateConfiguration>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A rolling update's limits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateConfiguration {
    /// Groups that may exist beyond `replicas` during the update (an integer or a percentage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<Value>,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The part of a LeaderWorkerSet's status Kueue reads; the rest is kept in `other`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderWorkerSetStatus {
    /// Conditions (`Available`, `Progressing`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Groups whose pods are all ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Groups at the current templates.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Groups that exist.
    #[serde(default)]
    pub replicas: i32,
    /// Every other field, as it came.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

api_resource!(
    LeaderWorkerSet,
    k8s_openapi::NamespaceResourceScope,
    KIND,
    "leaderworkersets"
);

impl LeaderWorkerSet {
    /// `spec.replicas`, 1 when unset.
    pub fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }

    /// `spec.leaderWorkerTemplate.size`, 1 when unset.
    pub fn size(&self) -> i32 {
        self.spec.leader_worker_template.size.unwrap_or(1)
    }

    /// `status.readyReplicas` (0 without a status).
    pub fn ready_replicas(&self) -> i32 {
        self.status.as_ref().map_or(0, |s| s.ready_replicas)
    }

    /// How many groups get a Workload, as Kueue counts them: `replicas`, or the groups that exist when more do
    /// during a rolling update with an integer `maxSurge` above zero that has not finished.
    pub fn groups(&self) -> i32 {
        let replicas = self.replicas();
        let status = self.status.clone().unwrap_or_default();
        let surge = self
            .spec
            .rollout_strategy
            .as_ref()
            .and_then(|r| r.rolling_update_configuration.as_ref())
            .and_then(|c| c.max_surge.as_ref())
            .and_then(int_value)
            .unwrap_or(0);
        if status.replicas > replicas && surge > 0 && status.updated_replicas < replicas {
            status.replicas
        } else {
            replicas
        }
    }
}

/// An IntOrString's integer as Go's `IntValue` reads it: the number, or a string's integer (a percentage is 0).
fn int_value(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => Some(s.parse().unwrap_or(0)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_unknown_fields_survive_a_round_trip() {
        let doc = json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "infer", "namespace": "ml"},
            "spec": {"startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {"restartPolicy": "RecreateGroupOnPodRestart",
                         "workerTemplate": {"spec": {"containers": []}}}}
        });
        let lws: LeaderWorkerSet = serde_json::from_value(doc).expect("lws");
        assert_eq!((lws.replicas(), lws.size(), lws.groups()), (1, 1, 1));
        let back = serde_json::to_value(&lws).expect("json");
        assert_eq!(back["spec"]["startupPolicy"], "LeaderCreated");
        assert_eq!(
            back["spec"]["leaderWorkerTemplate"]["restartPolicy"],
            "RecreateGroupOnPodRestart"
        );
    }

    #[test]
    fn a_surging_rolling_update_counts_the_groups_that_exist() {
        let lws = |surge: Value, updated: i32| -> LeaderWorkerSet {
            serde_json::from_value(json!({
                "metadata": {"name": "infer"},
                "spec": {"replicas": 2, "rolloutStrategy": {"type": "RollingUpdate",
                    "rollingUpdateConfiguration": {"maxSurge": surge}},
                    "leaderWorkerTemplate": {"workerTemplate": {}}},
                "status": {"replicas": 3, "updatedReplicas": updated}
            }))
            .expect("lws")
        };
        assert_eq!(lws(json!(1), 1).groups(), 3);
        assert_eq!(lws(json!(1), 2).groups(), 2, "the update is done");
        assert_eq!(lws(json!(0), 1).groups(), 2, "no surge");
        assert_eq!(lws(json!("50%"), 1).groups(), 2, "a percentage reads as 0");
    }
}
