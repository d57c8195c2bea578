//! What the operator serves and records: Kueue's visibility API, Prometheus metrics, health and Events.

use crate::support::*;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use sluice_operator::controller::Operator;
use sluice_operator::leader::Leadership;
use sluice_operator::telemetry::health_router;
use sluice_operator::testing::FakeApi;
use sluice_operator::visibility;
use tower::ServiceExt;

async fn get(router: axum::Router, uri: &str) -> (StatusCode, serde_json::Value, String) {
    let resp = router
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).to_string();
    (
        status,
        serde_json::from_str(&text).unwrap_or_default(),
        text,
    )
}

#[tokio::test]
async fn visibility_metrics_health_and_events() {
    let fake = FakeApi::new();
    seed_queues(&fake, 2);
    for (name, prio) in [("w0", 0), ("w1", 0), ("w2", 5), ("w3", 1)] {
        fake.put(&workload(name, 1, prio));
    }
    let op = Operator::new(fake.client("op"), config(), Leadership::always());
    let (metrics, health, snapshot) = (op.metrics.clone(), op.health.clone(), op.snapshot.clone());
    let (status, _, _) = get(health_router(metrics.clone(), health.clone()), "/readyz").await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready before the caches sync"
    );
    let task = tokio::spawn(op.run());
    // Highest priority first: w2 (5) and w3 (1) take the 2 GPUs; w0 and w1 wait in creation order.
    wait_for(10, "two admitted", || {
        admitted(&fake, "w2") && admitted(&fake, "w3")
    })
    .await;
    wait_for(5, "pending visible", || {
        snapshot
            .get()
            .cluster_queue("cq")
            .is_some_and(|p| p.len() == 2)
    })
    .await;

    let router = visibility::router(snapshot.clone());
    let (status, body, text) = get(
        router.clone(),
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(body["kind"], "PendingWorkloadsSummary");
    assert_eq!(body["apiVersion"], "visibility.kueue.x-k8s.io/v1beta2");
    let items = body["items"].as_array().unwrap();
    let names: Vec<_> = items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w0", "w1"]);
    assert_eq!(items[1]["positionInClusterQueue"], 1);
    assert_eq!(items[1]["positionInLocalQueue"], 1);
    assert_eq!(items[1]["localQueueName"], "lq");
    assert_eq!(items[1]["metadata"]["namespace"], "team-a");
    let (_, body, _) = get(
        router.clone(),
        "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/lq/pendingworkloads?offset=1&limit=5",
    )
    .await;
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "w1");
    let (status, _, _) = get(
        router,
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/nope/pendingworkloads",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let health_routes = health_router(metrics.clone(), health.clone());
    assert_eq!(
        get(health_routes.clone(), "/readyz").await.0,
        StatusCode::OK
    );
    assert_eq!(
        get(health_routes.clone(), "/healthz").await.0,
        StatusCode::OK
    );
    let (status, _, text) = get(health_routes, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        r#"kueue_admitted_workloads_total{cluster_queue="cq",priority_class="",replica_role="leader"} 2"#,
        r#"kueue_quota_reserved_workloads_total{cluster_queue="cq",priority_class="",replica_role="leader"} 2"#,
        r#"kueue_pending_workloads{cluster_queue="cq",status="active",replica_role="leader"} 2"#,
        r#"kueue_reserving_active_workloads{cluster_queue="cq",replica_role="leader"} 2"#,
        r#"kueue_cluster_queue_nominal_quota{cohort="",cluster_queue="cq",flavor="a100",resource="nvidia.com/gpu",replica_role="leader"} 2"#,
        r#"kueue_cluster_queue_resource_usage{cohort="",cluster_queue="cq",flavor="a100",resource="nvidia.com/gpu",replica_role="leader"} 2"#,
        r#"kueue_cluster_queue_status{cluster_queue="cq",status="active",replica_role="leader"} 1"#,
        "sluice_leader 1",
        // Two events and a queue of 1,000: nothing dropped.
        "sluice_events_dropped_total 0",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert!(text.contains("kueue_admission_wait_time_seconds_bucket{"));
    assert!(text.contains(r#"sluice_watch_events_total{kind="Workload"}"#));

    // Events: one QuotaReserved per admission, on the Workload.
    wait_for(5, "events", || {
        writes(&fake, "POST", "/namespaces/team-a/events")
            .iter()
            .filter(|r| r.body.as_ref().unwrap()["reason"] == "QuotaReserved")
            .count()
            == 2
    })
    .await;
    let ev = writes(&fake, "POST", "/namespaces/team-a/events")
        .into_iter()
        .find(|r| r.body.as_ref().unwrap()["reason"] == "QuotaReserved")
        .unwrap();
    let b = ev.body.unwrap();
    assert_eq!(ev.path, "/apis/events.k8s.io/v1/namespaces/team-a/events");
    assert_eq!(b["regarding"]["kind"], "Workload");
    assert_eq!(b["type"], "Normal");
    assert_eq!(b["reportingController"], "sluice-operator");
    task.abort();
}

#[test]
fn every_request_the_controllers_make_is_in_the_rbac_table() {
    // The request log of a full run (admission, preemption, status, finalizers, events, lease) against the table.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fake = FakeApi::new();
        fake.serve_api("jobset.x-k8s.io/v1alpha2", &["jobsets"]);
        seed_queues(&fake, 1);
        fake.put(&job("a", 1, 1, None));
        // A JobSet that waits for the Job's quota: watched, suspended and given a Workload.
        fake.put(&yaml::<sluice_sdk::jobset::JobSet>(
            r#"
metadata: {name: js, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  replicatedJobs:
  - name: w
    template: {spec: {template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: "1"}}}]}}}}
"#,
        ));
        let client = fake.client("op");
        let (elector, leadership) = sluice_operator::leader::LeaderElector::new(
            client.clone(),
            sluice_operator::leader::LeaseConfig::new("l", "default", "op"),
        );
        let op = Operator::new(client, config(), leadership);
        let t = tokio::spawn(async move {
            tokio::select! { _ = op.run() => {}, _ = elector.run() => {} }
        });
        wait_for(10, "job started", || {
            fake.get::<k8s_openapi::api::batch::v1::Job>(Some("team-a"), "a")
                .is_some_and(|j| j.spec.unwrap().suspend == Some(false))
        })
        .await;
        wait_for(5, "event", || !writes(&fake, "POST", "/events").is_empty()).await;
        wait_for(5, "jobset suspended", || {
            !writes(&fake, "PATCH", "/jobsets/js").is_empty()
        })
        .await;
        for r in fake.requests() {
            // API discovery is a non-resource URL every authenticated user may read (system:discovery).
            let segs = r.path.trim_matches('/').split('/').count();
            if r.method.as_str() == "GET" && r.path.starts_with("/apis/") && segs == 3 {
                continue;
            }
            let (g, res, verb) =
                sluice_operator::controller::rbac::required(r.method.as_str(), &r.path, &r.query)
                    .unwrap_or_else(|| panic!("unmapped request {} {}", r.method, r.path));
            assert!(
                sluice_operator::controller::rbac::allows(&g, &res, &verb),
                "{verb} {g}/{res} not in the RBAC table ({} {})",
                r.method,
                r.path
            );
        }
        t.abort();
    });
}
