//! LeaderWorkerSets through the API server, with LWS's own CRD and controller (from its Go module:
//! `tests/control-plane/crds`, `tests/lws/build`) and the integration enabled in the Configuration. A
//! LeaderWorkerSet applied with kubectl gets its templates annotated by the webhook and a Workload for its group; the
//! LWS controller's StatefulSets make the group's pods, which the pod webhook gates; they are made members of the
//! group's pod group, admitted, ungated with the flavor's node selector and run by the fake kubelet. A
//! higher-priority set then preempts it: the first group's pods are ended (the LWS controller makes them again, and
//! they wait gated), its Workload is marked Preempted, and the second set's pods start.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use sluice_operator::jobs::lws::group_workload_name;
use sluice_sdk::kueue::v1beta2::Workload;
use sluice_sdk::lws::LeaderWorkerSet;

use super::jobsets::{a100_queue, third_party_plane};
use super::lws::LwsController;
use super::support::*;

/// One group of a leader and a worker, 2 GPUs each.
fn lws(name: &str, labels: &str) -> String {
    format!(
        r#"
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: {name}
  namespace: serve
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - {{name: leader, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [pause],
            resources: {{requests: {{cpu: "1", nvidia.com/gpu: "2"}}, limits: {{nvidia.com/gpu: "2"}}}}}}
    workerTemplate:
      spec:
        containers:
        - {{name: worker, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [pause],
            resources: {{requests: {{cpu: "1", nvidia.com/gpu: "2"}}, limits: {{nvidia.com/gpu: "2"}}}}}}
"#
    )
}

fn resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
    ))
}

fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

fn running_on_a100(p: &Pod) -> bool {
    !gated(p)
        && p.spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .and_then(|n| n.get("pool"))
            .map(String::as_str)
            == Some("a100")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaderworkerset_groups_are_admitted_and_preempted_through_the_api_server() {
    // A queue of 4 GPUs: one group of two 2-GPU pods.
    let setup = a100_queue(
        "serve",
        "[cpu, nvidia.com/gpu]",
        "[{name: cpu, nominalQuota: 32}, {name: nvidia.com/gpu, nominalQuota: 4}]",
    );
    let Some((plane, installed)) = third_party_plane(
        "leaderworkersets",
        &["batch/job", "leaderworkerset.x-k8s.io/leaderworkerset"],
        &setup,
    )
    .await
    else {
        return;
    };
    let client = installed.client.clone();
    let Some(_lws) = LwsController::start(&plane) else {
        return;
    };
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "serve", &resource());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "serve");
    let workloads: Api<Workload> = Api::namespaced(client.clone(), "serve");

    plane.kubectl(&["apply", "-f", "-"], Some(&lws("low", "")));
    let low = sets.get("low").await.expect("low");
    for t in ["leaderTemplate", "workerTemplate"] {
        let ann = &low.data["spec"]["leaderWorkerTemplate"][t]["metadata"]["annotations"];
        assert_eq!(
            ann["kueue.x-k8s.io/pod-suspending-parent"], "leaderworkerset.x-k8s.io/leaderworkerset",
            "the webhook did not annotate {t}: {ann}"
        );
    }
    let typed: LeaderWorkerSet =
        serde_json::from_value(serde_json::to_value(&low).unwrap()).expect("typed");
    let low_wl_name = group_workload_name(&typed, "0").expect("uid");
    let low_wl = eventually(60, "low's group Workload", || async {
        workloads.get(&low_wl_name).await.ok()
    })
    .await;
    let shape: Vec<(&str, i32)> = low_wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(shape, [("leader", 1), ("worker", 1)]);

    eventually(60, "low's pods ungated on a100", || async {
        let a = pods.get("low-0").await.ok()?;
        let b = pods.get("low-0-1").await.ok()?;
        (running_on_a100(&a) && running_on_a100(&b)).then_some(())
    })
    .await;
    let leader = pods.get("low-0").await.expect("pod");
    let ann = leader.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann["kueue.x-k8s.io/prebuilt-workload-name"], low_wl_name);
    assert_eq!(ann["kueue.x-k8s.io/role-hash"], "leader");
    let adopted = workloads.get(&low_wl_name).await.expect("workload");
    let pod_owners = adopted
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == "Pod")
        .count();
    assert_eq!(pod_owners, 2, "the group's pods own its Workload too");

    // A higher-priority set needs the queue's 4 GPUs: low's group is preempted and its pods ended.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&lws("high", ", kueue.x-k8s.io/priority-class: high")),
    );
    let high = sets.get("high").await.expect("high");
    let typed: LeaderWorkerSet =
        serde_json::from_value(serde_json::to_value(&high).unwrap()).expect("typed");
    let high_wl_name = group_workload_name(&typed, "0").expect("uid");
    eventually(60, "high's group Workload", || async {
        workloads.get(&high_wl_name).await.ok()
    })
    .await;
    // Ended: gone, being deleted, or made again by the LWS controller and waiting gated.
    eventually(60, "low's pods ended", || async {
        let ended = |p: Result<Pod, kube::Error>| match p {
            Err(_) => true,
            Ok(p) => p.metadata.deletion_timestamp.is_some() || gated(&p),
        };
        (ended(pods.get("low-0").await) && ended(pods.get("low-0-1").await)).then_some(())
    })
    .await;
    assert_preempted_in_cluster_queue(&workloads, &low_wl_name).await;
    eventually(60, "high's pods ungated on a100", || async {
        let a = pods.get("high-0").await.ok()?;
        let b = pods.get("high-0-1").await.ok()?;
        (running_on_a100(&a) && running_on_a100(&b)).then_some(())
    })
    .await;
}
