//! LeaderWorkerSets against the fake API server, as Kueue's LeaderWorkerSet integration runs them: one Workload
//! per group before any pod exists, the LWS controller's gated pods made members of their group's pod group, each
//! group admitted (and its pods ungated) on its own, Workloads deleted when the set scales down, and pods let go
//! when the set is deleted.

use crate::support::*;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use sluice_operator::controller::config::DEFAULT_FRAMEWORKS;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::integrations::{self, Integrations};
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::lws::LeaderWorkerSet;

/// An inference service: `replicas` groups of a leader and one worker, each pod 1 GPU, queued to `lq`.
fn lws(replicas: i32) -> LeaderWorkerSet {
    yaml(&format!(
        r#"
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: infer, namespace: team-a, labels: {{kueue.x-k8s.io/queue-name: lq}}}}
spec:
  replicas: {replicas}
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
        - {{name: leader, image: vllm, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}}}
    workerTemplate:
      spec:
        containers:
        - {{name: worker, image: vllm, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}}}
"#
    ))
}

/// A StatefulSet LWS makes for the set (`infer`, the leaders) or for a group's workers (`infer-N`), at revision
/// `current`, rolling to `update` when they differ.
fn statefulset(name: &str, current: &str, update: &str) -> StatefulSet {
    yaml(&format!(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {name}
  namespace: team-a
  labels: {{leaderworkerset.sigs.k8s.io/name: infer}}
spec:
  selector: {{matchLabels: {{leaderworkerset.sigs.k8s.io/name: infer}}}}
  template: {{spec: {{containers: [{{name: c, image: vllm}}]}}}}
status: {{replicas: 1, currentRevision: {current}, updateRevision: {update}}}
"#
    ))
}

/// The set's StatefulSets, none rolling: the leaders' and each group's workers'.
fn seed_statefulsets(fake: &FakeApi, groups: u32) {
    fake.put(&statefulset("infer", "r1", "r1"));
    for g in 0..groups {
        fake.put(&statefulset(&format!("infer-{g}"), "r1", "r1"));
    }
}

/// A pod of group `group` as the LWS controller makes it and the pod webhook gates it (the leader when
/// `leader`), at revision `r1` of its StatefulSet (`infer` for leaders, `infer-N` for workers).
fn lws_pod(group: u32, leader: bool) -> Pod {
    let (name, sts, extra) = if leader {
        (format!("infer-{group}"), "infer".to_string(), String::new())
    } else {
        (
            format!("infer-{group}-1"),
            format!("infer-{group}"),
            format!("\n    leaderworkerset.sigs.k8s.io/leader-name: infer-{group}"),
        )
    };
    let container = if leader { "leader" } else { "worker" };
    yaml(&format!(
        r#"
metadata:
  name: {name}
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: lq
    leaderworkerset.sigs.k8s.io/name: infer
    leaderworkerset.sigs.k8s.io/group-index: "{group}"
    controller-revision-hash: r1
  ownerReferences:
  - {{apiVersion: apps/v1, kind: StatefulSet, name: {sts}, uid: sts-{sts}, controller: true}}
  annotations:
    kueue.x-k8s.io/pod-suspending-parent: leaderworkerset.x-k8s.io/leaderworkerset
    kueue.x-k8s.io/pod-group-serving: "true"{extra}
spec:
  schedulingGates: [{{name: kueue.x-k8s.io/admission}}]
  containers:
  - {{name: {container}, image: vllm, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}}}
"#
    ))
}

fn gated(fake: &FakeApi, name: &str) -> bool {
    fake.get::<Pod>(Some("team-a"), name)
        .and_then(|p| p.spec)
        .and_then(|s| s.scheduling_gates)
        .is_some_and(|g| !g.is_empty())
}

/// The Workloads the operator created for the set, by group index.
fn group_workloads(fake: &FakeApi) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = fake
        .list::<api::Workload>()
        .into_iter()
        .filter(|w| w.metadata.deletion_timestamp.is_none())
        .filter_map(|w| {
            let index = w
                .metadata
                .annotations
                .as_ref()?
                .get("kueue.x-k8s.io/component-workload-index")?
                .clone();
            Some((index, w.metadata.name.clone()?))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn each_group_is_one_workload_admitted_on_its_own_and_its_pods_ungated() {
    let fake = FakeApi::new();
    fake.serve_api("leaderworkerset.x-k8s.io/v1", &["leaderworkersets"]);
    // Two GPUs: one group of two pods fits, the second waits.
    seed_queues(&fake, 2);
    seed_statefulsets(&fake, 2);
    fake.put(&lws(2));
    let op = start(&fake, "op", config());
    wait_for(10, "two group workloads", || {
        group_workloads(&fake).len() == 2
    })
    .await;
    let wls = group_workloads(&fake);
    assert!(wls[0].1.starts_with("leaderworkerset-infer-0-"), "{wls:?}");
    let w0 = get_workload(&fake, &wls[0].1).unwrap();
    let sets: Vec<(&str, i32)> = w0
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, vec![("leader", 1), ("worker", 1)]);
    let owner = &w0.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("LeaderWorkerSet", None)
    );

    for (group, leader) in [(0, true), (0, false), (1, true), (1, false)] {
        fake.put(&lws_pod(group, leader));
    }
    wait_for(10, "group 0 ungated", || {
        !gated(&fake, "infer-0") && !gated(&fake, "infer-0-1")
    })
    .await;
    let leader = fake.get::<Pod>(Some("team-a"), "infer-0").unwrap();
    let ann = leader.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann["kueue.x-k8s.io/pod-group-name"], wls[0].1);
    assert_eq!(ann["kueue.x-k8s.io/prebuilt-workload-name"], wls[0].1);
    assert_eq!(ann["kueue.x-k8s.io/role-hash"], "leader");
    assert_eq!(ann["kueue.x-k8s.io/pod-group-total-count"], "2");
    assert_eq!(
        leader.metadata.labels.as_ref().unwrap()["kueue.x-k8s.io/managed"],
        "true"
    );
    let selector = leader.spec.as_ref().unwrap().node_selector.clone().unwrap();
    assert_eq!(selector["gpu.example.com/model"], "a100");
    let worker = fake.get::<Pod>(Some("team-a"), "infer-0-1").unwrap();
    assert_eq!(
        worker.metadata.annotations.as_ref().unwrap()["kueue.x-k8s.io/role-hash"],
        "worker"
    );
    // The group's Workload is owned by its pods too, as Kueue's pod groups take a prebuilt Workload.
    let w0 = get_workload(&fake, &wls[0].1).unwrap();
    let pod_owners = w0
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == "Pod")
        .count();
    assert_eq!(pod_owners, 2);
    assert!(admitted(&fake, &wls[0].1));
    assert!(!admitted(&fake, &wls[1].1), "no room for the second group");
    assert!(gated(&fake, "infer-1") && gated(&fake, "infer-1-1"));

    // Scaling down to one group deletes the second group's Workload.
    fake.put(&lws(1));
    wait_for(10, "group 1 workload deleted", || {
        writes(&fake, "DELETE", &format!("/workloads/{}", wls[1].1)).len() == 1
    })
    .await;
    assert!(writes(&fake, "DELETE", &format!("/workloads/{}", wls[0].1)).is_empty());

    // The set is deleted: its pods still gated are let go.
    fake.remove::<LeaderWorkerSet>(Some("team-a"), "infer");
    wait_for(10, "group 1 pods released", || {
        !gated(&fake, "infer-1") && !gated(&fake, "infer-1-1")
    })
    .await;
    op.abort();
}

/// As Kueue's job reconciler, for a pod group as for any job: PodsReady is written on every reconcile, so a group
/// still waiting for quota says WaitForStart, not nothing (as it would if written only once admitted).
#[tokio::test]
async fn a_waiting_group_says_its_pods_wait_for_start() {
    let fake = FakeApi::new();
    fake.serve_api("leaderworkerset.x-k8s.io/v1", &["leaderworkersets"]);
    seed_queues(&fake, 2);
    seed_statefulsets(&fake, 2);
    fake.put(&lws(2));
    let mut cfg = config();
    cfg.wait_for_pods_ready = Some(sluice_operator::controller::WaitForPodsReady {
        timeout: std::time::Duration::from_secs(300),
        ..Default::default()
    });
    let op = start(&fake, "op", cfg);
    wait_for(10, "two group workloads", || {
        group_workloads(&fake).len() == 2
    })
    .await;
    for (group, leader) in [(0, true), (0, false), (1, true), (1, false)] {
        fake.put(&lws_pod(group, leader));
    }
    let wls = group_workloads(&fake);
    let pods_ready =
        |name: &str| get_workload(&fake, name).and_then(|w| condition(&w, "PodsReady"));
    let waiting = Some(("False".to_string(), "WaitForStart".to_string()));
    wait_for(10, "group 1 waits for start", || {
        pods_ready(&wls[1].1) == waiting
    })
    .await;
    assert!(!admitted(&fake, &wls[1].1), "no room for the second group");
    wait_for(10, "group 0 ungated", || {
        !gated(&fake, "infer-0") && !gated(&fake, "infer-0-1")
    })
    .await;
    // Admitted, its pods not ready yet.
    assert_eq!(pods_ready(&wls[0].1), waiting);
    op.abort();
}

#[tokio::test]
async fn the_set_can_be_turned_off_by_the_configuration() {
    let fake = FakeApi::new();
    fake.serve_api("leaderworkerset.x-k8s.io/v1", &["leaderworkersets"]);
    seed_queues(&fake, 2);
    fake.put(&lws(1));
    let mut cfg = config();
    cfg.integrations = Integrations::new(
        DEFAULT_FRAMEWORKS
            .iter()
            .copied()
            .filter(|&f| f != integrations::LEADERWORKERSET),
        [],
    );
    let op = start(&fake, "op", cfg);
    wait_for(10, "queue status", || {
        fake.get::<api::LocalQueue>(Some("team-a"), "lq")
            .is_some_and(|l| l.status.is_some())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(group_workloads(&fake).is_empty());
    op.abort();
}

/// Kueue's `ShouldFinalizePod`: while a StatefulSet rolls to a new revision, its pods of the old revision are let go
/// (they are about to be replaced); a pod whose StatefulSet is gone is let go too. Pods of a StatefulSet that is
/// not rolling keep waiting for their group's admission.
#[tokio::test]
async fn pods_a_statefulset_rolls_away_or_left_behind_are_let_go() {
    let fake = FakeApi::new();
    fake.serve_api("leaderworkerset.x-k8s.io/v1", &["leaderworkersets"]);
    // Two GPUs: group 0 is admitted, group 1 waits gated. Group 1's workers' StatefulSet is not seen yet (its
    // event may come after its pods'): its pod is not taken for one whose StatefulSet is gone.
    seed_queues(&fake, 2);
    seed_statefulsets(&fake, 1);
    fake.put(&lws(2));
    let op = start(&fake, "op", config());
    wait_for(10, "two group workloads", || {
        group_workloads(&fake).len() == 2
    })
    .await;
    for (group, leader) in [(0, true), (0, false), (1, true), (1, false)] {
        fake.put(&lws_pod(group, leader));
    }
    wait_for(10, "group 0 ungated", || {
        !gated(&fake, "infer-0") && !gated(&fake, "infer-0-1")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(gated(&fake, "infer-1") && gated(&fake, "infer-1-1"));
    fake.put(&statefulset("infer-1", "r1", "r1"));

    // The leaders' StatefulSet rolls from r1 to r2: group 1's leader (r1) is let go, its worker is not.
    fake.put(&statefulset("infer", "r1", "r2"));
    wait_for(10, "the old leader let go", || !gated(&fake, "infer-1")).await;
    let leader = fake.get::<Pod>(Some("team-a"), "infer-1").unwrap();
    assert!(
        !leader
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "kueue.x-k8s.io/managed"),
        "{:?}",
        leader.metadata.finalizers
    );
    assert!(gated(&fake, "infer-1-1"));

    // Group 1's workers' StatefulSet is deleted: its pod is let go.
    fake.remove::<StatefulSet>(Some("team-a"), "infer-1");
    wait_for(10, "the orphaned worker let go", || {
        !gated(&fake, "infer-1-1")
    })
    .await;
    op.abort();
}
