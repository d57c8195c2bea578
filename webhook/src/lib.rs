//! Sluice's admission webhook: Kueue's mutating and validating hooks for Jobs, plain Pods and Kueue's own kinds,
//! the CRD conversion webhook for v1beta1 <-> v1beta2, and Sluice's PolicyModule check, served over HTTPS by
//! `sluice webhook`.
//!
//! The Kueue kinds are checked with the same validation the engine's ingestion applies
//! (`sluice_sdk::kueue::validation`), so the webhook can never accept what the engine would reject.

mod args;
pub mod convert;
pub mod hooks;
pub mod metrics;
pub mod namespaces;
pub mod policy;
pub mod queues;
pub mod registration;
pub mod review;
pub mod runtimes;
pub mod server;
pub mod tls;
mod watch;

pub use args::{ServeArgs, run, serve};
pub use hooks::{Hook, HookConfig, Hooks, ROUTES};
pub use namespaces::{InMemoryNamespaces, NamespaceIndex, ReflectorNamespaces};
pub use policy::PolicyModuleValidator;
pub use queues::{InMemoryLocalQueues, LocalQueueIndex, ReflectorLocalQueues};
pub use runtimes::{InMemoryTrainingRuntimes, ReflectorTrainingRuntimes, TrainingRuntimeIndex};

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use sluice_sdk::kueue::decode::{KueueObject, decode};
use sluice_sdk::kueue::validation::{validate, validate_update};

/// Reviews a create or update of a Kueue object: allowed, or denied with the API server's style of message
/// naming the kind, the object and every invalid field. Deletes and other operations are allowed.
pub fn review_kueue_object(req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(req);
    let decode_side = |obj: &Option<DynamicObject>, which: &str| -> Result<KueueObject, String> {
        let obj = obj
            .as_ref()
            .ok_or_else(|| format!("the request has no {which}"))?;
        let value = serde_json::to_value(obj).map_err(|e| format!("{which}: {e}"))?;
        decode(value).map_err(|e| e.to_string())
    };
    let verdict = match req.operation {
        Operation::Create => {
            decode_side(&req.object, "object").and_then(|o| validate(&o).map_err(|e| e.to_string()))
        }
        Operation::Update => decode_side(&req.old_object, "oldObject").and_then(|old| {
            let new = decode_side(&req.object, "object")?;
            validate_update(&old, &new).map_err(|e| e.to_string())
        }),
        Operation::Delete | Operation::Connect => Ok(()),
    };
    match verdict {
        Ok(()) => response,
        Err(message) => response.deny(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::admission::AdmissionReview;
    use serde_json::{Value, json};

    fn request(
        operation: &str,
        object: Value,
        old: Option<Value>,
    ) -> AdmissionRequest<DynamicObject> {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": object["kind"]},
                "resource": {"group": "kueue.x-k8s.io", "version": "v1beta2", "resource": "clusterqueues"},
                "name": object["metadata"]["name"],
                "operation": operation,
                "userInfo": {"username": "admin"},
                "object": object,
                "oldObject": old,
            }
        });
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_value(review).expect("review");
        review.try_into().expect("request")
    }

    fn cluster_queue(cohort: &str, borrowing_limit: Option<&str>) -> Value {
        let mut quota = json!({"name": "cpu", "nominalQuota": "4"});
        if let Some(b) = borrowing_limit {
            quota["borrowingLimit"] = json!(b);
        }
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "cohortName": cohort,
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [quota]}]}]
            }
        })
    }

    #[test]
    fn valid_cluster_queue_is_allowed_and_uid_echoed() {
        let resp = review_kueue_object(&request("CREATE", cluster_queue("pool", Some("2")), None));
        assert!(resp.allowed);
        assert_eq!(resp.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    }

    #[test]
    fn borrowing_limit_without_cohort_is_denied_with_kueues_message() {
        let resp = review_kueue_object(&request("CREATE", cluster_queue("", Some("2")), None));
        assert!(!resp.allowed);
        let msg = resp.result.message;
        assert!(msg.contains("ClusterQueue \"cq\" is invalid"), "{msg}");
        assert!(msg.contains("borrowingLimit"), "{msg}");
    }

    #[test]
    fn local_queue_cluster_queue_is_immutable() {
        let lq = |cq: &str| {
            json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "team"},
                "spec": {"clusterQueue": cq}
            })
        };
        let resp = review_kueue_object(&request("UPDATE", lq("b"), Some(lq("a"))));
        assert!(!resp.allowed);
        assert!(
            resp.result.message.contains("spec.clusterQueue"),
            "{}",
            resp.result.message
        );
        assert!(review_kueue_object(&request("UPDATE", lq("a"), Some(lq("a")))).allowed);
    }

    #[test]
    fn v1beta1_objects_are_reviewed_too() {
        let mut cq = cluster_queue("", None);
        cq["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
        cq["spec"]["cohort"] = json!("pool");
        cq["spec"].as_object_mut().unwrap().remove("cohortName");
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = json!("9");
        let resp = review_kueue_object(&request("CREATE", cq, None));
        assert!(!resp.allowed, "lendingLimit above nominalQuota");
        assert!(
            resp.result.message.contains("lendingLimit"),
            "{}",
            resp.result.message
        );
    }

    #[test]
    fn unknown_kind_is_denied_not_panicking() {
        let obj = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Nope", "metadata": {"name": "x"}});
        let resp = review_kueue_object(&request("CREATE", obj, None));
        assert!(!resp.allowed);
    }
}
