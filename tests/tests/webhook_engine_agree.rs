//! The webhook must never accept what the engine would reject: for valid and invalid Kueue objects, the
//! webhook's review and the engine's ingestion reach the same verdict.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde_json::{Value, json};
use sluice_operator::ingest;
use sluice_sdk::kueue::decode::{KueueObject, decode};

fn create_request(object: &Value) -> AdmissionRequest<DynamicObject> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": object["kind"]},
            "resource": {"group": "kueue.x-k8s.io", "version": "v1beta2", "resource": "objects"},
            "operation": "CREATE",
            "userInfo": {},
            "object": object,
        }
    });
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).expect("review");
    review.try_into().expect("request")
}

/// Whether the engine's ingestion takes the object (kinds the engine does not ingest count as taken).
fn engine_accepts(object: &Value) -> bool {
    match decode(object.clone()) {
        Err(_) => false,
        Ok(KueueObject::ClusterQueue(cq)) => ingest::cluster_queue(&cq).is_ok(),
        Ok(KueueObject::Cohort(c)) => ingest::cohort(&c).is_ok(),
        Ok(KueueObject::LocalQueue(lq)) => ingest::local_queue(&lq).is_ok(),
        Ok(KueueObject::ResourceFlavor(rf)) => ingest::flavor(&rf).is_ok(),
        Ok(KueueObject::Workload(wl)) => ingest::workload(&wl).is_ok(),
        Ok(_) => true,
    }
}

fn cluster_queue(spec: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec})
}

fn workload(pod_sets: Value) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "team"},
        "spec": {"queueName": "lq", "podSets": pod_sets}
    })
}

fn pod_set(name: &str, count: i32, min: Option<i32>, cpu: &str) -> Value {
    let mut ps = json!({
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}
    });
    if let Some(m) = min {
        ps["minCount"] = json!(m);
    }
    ps
}

fn cases() -> Vec<(&'static str, Value)> {
    let group = |resources: Value| json!([{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": resources}]}]);
    vec![
        (
            "valid ClusterQueue",
            cluster_queue(
                json!({"cohortName": "pool", "resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]))}),
            ),
        ),
        (
            "borrowingLimit without cohort",
            cluster_queue(
                json!({"resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]))}),
            ),
        ),
        (
            "lendingLimit above nominal",
            cluster_queue(
                json!({"cohortName": "pool", "resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "4", "lendingLimit": "5"}]))}),
            ),
        ),
        (
            "negative quota",
            cluster_queue(
                json!({"resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "-1"}]))}),
            ),
        ),
        (
            "malformed quota",
            cluster_queue(
                json!({"resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "lots"}]))}),
            ),
        ),
        (
            "flavor missing a covered resource",
            cluster_queue(
                json!({"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}),
            ),
        ),
        (
            "valid Workload",
            workload(json!([pod_set("main", 2, Some(1), "1")])),
        ),
        (
            "two pod sets with minCount",
            workload(json!([
                pod_set("a", 2, Some(1), "1"),
                pod_set("b", 2, Some(1), "1")
            ])),
        ),
        (
            "minCount above count",
            workload(json!([pod_set("main", 2, Some(3), "1")])),
        ),
        (
            "duplicate pod set names",
            workload(json!([
                pod_set("main", 1, None, "1"),
                pod_set("main", 1, None, "1")
            ])),
        ),
        (
            "negative request",
            workload(json!([pod_set("main", 1, None, "-1")])),
        ),
        (
            "valid LocalQueue",
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "team"}, "spec": {"clusterQueue": "cq"}}),
        ),
        (
            "Cohort lending more than its nominal quota (allowed for Cohorts)",
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "team"}, "spec": {"parentName": "org", "resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "0", "lendingLimit": "5"}]))}}),
        ),
        (
            "Cohort limits without a parent",
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "root"}, "spec": {"resourceGroups": group(json!([{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "1"}]))}}),
        ),
    ]
}

#[test]
fn webhook_and_engine_reach_the_same_verdict() {
    for (what, object) in cases() {
        let webhook = sluice_webhook::review_kueue_object(&create_request(&object)).allowed;
        let engine = engine_accepts(&object);
        assert_eq!(
            webhook, engine,
            "{what}: webhook allowed={webhook}, engine accepted={engine}"
        );
    }
}

#[test]
fn the_cases_include_both_verdicts() {
    let verdicts: Vec<bool> = cases().iter().map(|(_, o)| engine_accepts(o)).collect();
    assert!(verdicts.iter().filter(|v| **v).count() >= 4, "{verdicts:?}");
    assert!(
        verdicts.iter().filter(|v| !**v).count() >= 8,
        "{verdicts:?}"
    );
}
