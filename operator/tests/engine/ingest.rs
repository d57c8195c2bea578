//! Reading Kueue Workloads into the engine's model: what the engine's preemption order takes from status.

/// The reservation time comes from the QuotaReserved condition of the Workload's status.
#[test]
fn reservation_time_is_read_from_the_quota_reserved_condition() {
    let wl: sluice_sdk::kueue::v1beta2::Workload = serde_yaml::from_str(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ns, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: main
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: m, lastTransitionTime: "2026-01-01T00:05:00Z"}
  admission:
    clusterQueue: cq
    podSetAssignments:
    - {name: main, count: 1, flavors: {cpu: default}, resourceUsage: {cpu: "1"}}
"#,
    )
    .expect("parses");
    let (w, a) = sluice_operator::ingest::workload(&wl).expect("ingests");
    assert!(a.is_some());
    assert_eq!(w.quota_reserved_at, Some(w.creation_time + 5 * 60 * 1000));
}
