//! Plain Pods and Pod groups against the fake API server: the Workload once a group is complete, the pod
//! patches on admission, what an eviction does to the pods, Finished and the pods' finalizers.

use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use sluice_operator::testing::{FakeApi, RecordedRequest};
use sluice_sdk::kueue::v1beta2 as api;

const MANAGED: &str = "kueue.x-k8s.io/managed";

/// A pod as the webhook leaves it: managed label and finalizer, admission gate; in group `g` of `total` pods
/// when given.
fn pod(name: &str, group: Option<(&str, u32)>, cpu: u32, gpus: u32, wpc: Option<&str>) -> Pod {
    let mut labels = format!("kueue.x-k8s.io/queue-name: lq, {MANAGED}: \"true\"");
    let mut annotations = String::new();
    if let Some((g, total)) = group {
        labels.push_str(&format!(", kueue.x-k8s.io/pod-group-name: {g}"));
        annotations = format!("kueue.x-k8s.io/pod-group-total-count: \"{total}\"");
    }
    if let Some(p) = wpc {
        labels.push_str(&format!(", kueue.x-k8s.io/priority-class: {p}"));
    }
    yaml(&format!(
        r#"
metadata:
  name: {name}
  namespace: team-a
  labels: {{{labels}}}
  annotations: {{{annotations}}}
  finalizers: [{MANAGED}]
spec:
  schedulingGates: [{{name: kueue.x-k8s.io/admission}}]
  containers:
  - name: main
    image: worker
    resources:
      requests: {{cpu: "{cpu}", nvidia.com/gpu: "{gpus}"}}
"#
    ))
}

fn get_pod(fake: &FakeApi, name: &str) -> Option<Pod> {
    fake.get::<Pod>(Some("team-a"), name)
}

fn gated(fake: &FakeApi, name: &str) -> bool {
    get_pod(fake, name)
        .and_then(|p| p.spec)
        .and_then(|s| s.scheduling_gates)
        .is_some_and(|g| !g.is_empty())
}

fn has_managed_finalizer(fake: &FakeApi, name: &str) -> bool {
    get_pod(fake, name)
        .and_then(|p| p.metadata.finalizers)
        .is_some_and(|f| f.iter().any(|f| f == MANAGED))
}

/// Sets a stored pod's phase, as the kubelet would.
fn set_phase(fake: &FakeApi, name: &str, phase: &str) {
    let mut p = get_pod(fake, name).expect("pod");
    p.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
    fake.put(&p);
}

fn pod_patches(fake: &FakeApi, name: &str) -> Vec<RecordedRequest> {
    writes(
        fake,
        "PATCH",
        &format!("/api/v1/namespaces/team-a/pods/{name}"),
    )
}

/// The admission patch of a pod: node selector, tolerations and labels added, the admission gate removed.
fn assert_started_by_one_patch(fake: &FakeApi, name: &str, pod_set: &str) {
    let patches = pod_patches(fake, name);
    assert_eq!(patches.len(), 1, "{name}: one patch starts the pod");
    let body = patches[0].body.as_ref().unwrap();
    assert!(body["metadata"]["resourceVersion"].is_string());
    assert_eq!(
        body["spec"]["nodeSelector"],
        json!({"gpu.example.com/model": "a100"}),
        "{name}: {body}"
    );
    assert_eq!(
        body["spec"]["tolerations"],
        json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    // The only gate goes: the merge patch removes the list.
    assert_eq!(
        body["spec"].get("schedulingGates"),
        Some(&Value::Null),
        "{body}"
    );
    let labels = &body["metadata"]["labels"];
    assert_eq!(labels["kueue.x-k8s.io/podset"], pod_set);
    assert_eq!(labels["kueue.x-k8s.io/cluster-queue-name"], "cq");
    assert_eq!(labels["kueue.x-k8s.io/local-queue-name"], "lq");
}

#[tokio::test]
async fn group_gets_its_workload_when_complete_then_pods_start_and_finish() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&pod("g-w0", Some(("g", 3)), 1, 2, None));
    fake.put(&pod("g-w1", Some(("g", 3)), 1, 2, None));
    let op = start(&fake, "op", config());
    // Two of three pods: the operator has seen them once the queue status is written, and waits.
    wait_for(10, "queue status", || {
        fake.get::<api::LocalQueue>(Some("team-a"), "lq")
            .is_some_and(|l| l.status.is_some())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        writes(&fake, "POST", "/namespaces/team-a/workloads").is_empty(),
        "no Workload before the group is complete"
    );
    fake.put(&pod("g-driver", Some(("g", 3)), 2, 0, None));
    wait_for(10, "pods started", || {
        ["g-w0", "g-w1", "g-driver"]
            .iter()
            .all(|p| !gated(&fake, p))
    })
    .await;

    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(creates.len(), 1);
    let body = creates[0].body.as_ref().unwrap();
    assert_eq!(body["metadata"]["name"], "g");
    assert_eq!(
        body["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"],
        "true"
    );
    assert_eq!(
        body["metadata"]["finalizers"],
        json!(["kueue.x-k8s.io/resource-in-use"])
    );
    let owners: Vec<(&str, &str)> = body["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["kind"].as_str().unwrap(), o["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        owners,
        vec![("Pod", "g-driver"), ("Pod", "g-w0"), ("Pod", "g-w1")]
    );
    assert_eq!(body["spec"]["queueName"], "lq");
    let sets = body["spec"]["podSets"].as_array().unwrap();
    assert_eq!(sets.len(), 2, "two pod shapes: {body}");
    let name_of = |count: i64| {
        sets.iter()
            .find(|s| s["count"] == count)
            .and_then(|s| s["name"].as_str())
            .map(str::to_string)
            .unwrap()
    };
    let (workers, driver) = (name_of(2), name_of(1));
    assert_ne!(workers, driver);
    assert!(
        sets[0]["name"].as_str() < sets[1]["name"].as_str(),
        "pod sets sorted by name"
    );
    let worker_set = sets.iter().find(|s| s["count"] == 2).unwrap();
    assert_eq!(
        worker_set["template"]["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "1", "nvidia.com/gpu": "2"})
    );

    assert_started_by_one_patch(&fake, "g-w0", &workers);
    assert_started_by_one_patch(&fake, "g-w1", &workers);
    assert_started_by_one_patch(&fake, "g-driver", &driver);
    // The role is recorded on each pod, as Kueue's webhook records it.
    let role = |name: &str| {
        pod_patches(&fake, name)[0].body.as_ref().unwrap()["metadata"]["annotations"]
            ["kueue.x-k8s.io/role-hash"]
            .clone()
    };
    assert_eq!(role("g-w0"), json!(workers));
    assert_eq!(role("g-driver"), json!(driver));

    // Two of three succeeded: not finished, finalizers kept.
    set_phase(&fake, "g-w0", "Succeeded");
    set_phase(&fake, "g-w1", "Succeeded");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        get_workload(&fake, "g")
            .and_then(|w| condition(&w, "Finished"))
            .is_none()
    );
    assert!(has_managed_finalizer(&fake, "g-w0"));
    set_phase(&fake, "g-driver", "Succeeded");
    wait_for(10, "workload finished", || {
        get_workload(&fake, "g")
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|(s, r)| s == "True" && r == "Succeeded")
    })
    .await;
    let wl = get_workload(&fake, "g").unwrap();
    let finished = wl
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Finished")
        .unwrap();
    assert_eq!(finished.message, "Pods succeeded: 3/3.");
    wait_for(10, "finalizers removed", || {
        ["g-w0", "g-w1", "g-driver"]
            .iter()
            .all(|p| !has_managed_finalizer(&fake, p))
    })
    .await;
    wait_for(5, "quota released", || {
        fake.get::<api::LocalQueue>(Some("team-a"), "lq")
            .and_then(|c| c.status)
            .is_some_and(|s| s.admitted_workloads == 0 && s.reserving_workloads == 0)
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn evicted_group_pods_are_marked_deleted_and_the_workload_waits_for_replacements() {
    let fake = FakeApi::new();
    seed_queues(&fake, 4);
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: high}\nvalue: 1000",
    ));
    fake.put(&pod("low-0", Some(("low", 2)), 1, 2, None));
    fake.put(&pod("low-1", Some(("low", 2)), 1, 2, None));
    let op = start(&fake, "op", config());
    wait_for(10, "low started", || {
        !gated(&fake, "low-0") && !gated(&fake, "low-1")
    })
    .await;
    fake.put(&pod("high", None, 1, 4, Some("high")));
    wait_for(10, "high started", || !gated(&fake, "high")).await;
    let high = workload_of_pod(&fake, "high");

    let w = get_workload(&fake, "low").unwrap();
    assert_eq!(
        condition(&w, "Evicted"),
        Some(("True".into(), "Preempted".into()))
    );
    assert!(
        w.status.unwrap().admission.is_none(),
        "victim requeued without admission"
    );
    // Each running pod: TerminationTarget on its status, then deleted; the finalizer then released.
    let log = fake.requests();
    let pos = |pred: &dyn Fn(&RecordedRequest) -> bool| {
        log.iter().position(|r| r.status < 300 && pred(r)).unwrap()
    };
    for name in ["low-0", "low-1"] {
        let marks = writes(
            &fake,
            "PATCH",
            &format!("/api/v1/namespaces/team-a/pods/{name}/status"),
        );
        assert_eq!(marks.len(), 1, "{name}");
        let conds = &marks[0].body.as_ref().unwrap()["status"]["conditions"];
        let c = &conds[0];
        assert_eq!(
            (
                c["type"].as_str(),
                c["status"].as_str(),
                c["reason"].as_str()
            ),
            (
                Some("TerminationTarget"),
                Some("True"),
                Some("WorkloadEvictedDueToPreempted")
            ),
            "{conds}"
        );
        let mark = pos(&|r| r.path.ends_with(&format!("/pods/{name}/status")));
        let delete = pos(&|r| r.method == "DELETE" && r.path.ends_with(&format!("/pods/{name}")));
        assert!(mark < delete, "{name}: marked before deleted");
    }
    let evict = pos(&|r| {
        r.path.ends_with("/workloads/low/status")
            && r.body.as_ref().unwrap()["status"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Evicted" && c["status"] == "True")
                })
    });
    let first_delete = pos(&|r| r.method == "DELETE" && r.path.contains("/pods/low-"));
    let requeue = pos(&|r| {
        r.path.ends_with("/workloads/low/status")
            && r.body.as_ref().unwrap()["status"].get("admission") == Some(&Value::Null)
    });
    let admit_high = pos(&|r| {
        r.path.ends_with(&format!("/workloads/{high}/status"))
            && r.body.as_ref().unwrap()["status"]["admission"].is_object()
    });
    assert!(
        evict < first_delete && first_delete < requeue && requeue < admit_high,
        "{evict} {first_delete} {requeue} {admit_high}"
    );
    // As Kueue: the deleted pods keep their finalizer, and the Workload waits for replacement pods (with the
    // eviction's reason) out of the queue.
    wait_for(10, "waiting for replacements", || {
        waiting_for_replacement(&fake, "low").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (_, reason, message) = waiting_for_replacement(&fake, "low").unwrap();
    assert_eq!(reason, "Preempted");
    assert!(message.starts_with("Preempted to accommodate"), "{message}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(has_managed_finalizer(&fake, "low-0") && has_managed_finalizer(&fake, "low-1"));
    assert_eq!(admission_writes(&fake, "low"), 1);
    op.abort();
}

fn workload_of_pod(fake: &FakeApi, pod: &str) -> String {
    fake.list::<api::Workload>()
        .into_iter()
        .find(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Pod" && o.name == pod)
        })
        .and_then(|w| w.metadata.name)
        .expect("workload of the pod")
}

#[tokio::test]
async fn single_plain_pod_end_to_end() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&pod("solo", None, 1, 1, None));
    let op = start(&fake, "op", config());
    wait_for(10, "pod started", || !gated(&fake, "solo")).await;
    let name = workload_of_pod(&fake, "solo");
    assert!(name.starts_with("pod-solo-"), "{name}");
    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(creates.len(), 1);
    let body = creates[0].body.as_ref().unwrap();
    let owner = &body["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"], &owner["controller"]),
        (&json!("Pod"), &json!("solo"), &json!(true))
    );
    assert_eq!(body["spec"]["podSets"][0]["name"], "main");
    assert_eq!(body["spec"]["podSets"][0]["count"], 1);
    assert!(
        body["metadata"]["labels"]["kueue.x-k8s.io/job-uid"].is_string(),
        "{body}"
    );
    assert_started_by_one_patch(&fake, "solo", "main");
    // Only its Workload's name, as Kueue adds it to every started pod set; no role.
    assert_eq!(
        pod_patches(&fake, "solo")[0].body.as_ref().unwrap()["metadata"]["annotations"],
        json!({"kueue.x-k8s.io/workload": name}),
        "a single pod gets no role"
    );
    assert!(has_managed_finalizer(&fake, "solo"), "kept while it runs");

    set_phase(&fake, "solo", "Succeeded");
    wait_for(10, "workload finished", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|(s, r)| s == "True" && r == "Succeeded")
    })
    .await;
    wait_for(10, "finalizer removed", || {
        !has_managed_finalizer(&fake, "solo")
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn pods_ready_follows_the_ready_condition_of_every_pod_in_the_group() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut cfg = config();
    cfg.wait_for_pods_ready = Some(sluice_operator::controller::WaitForPodsReady {
        timeout: Duration::from_secs(60),
        backoff_base: Duration::from_millis(200),
        backoff_max: Duration::from_secs(5),
        backoff_limit_count: None,
        order_by_eviction: true,
        ..Default::default()
    });
    fake.put(&pod("r-0", Some(("r", 2)), 1, 1, None));
    fake.put(&pod("r-1", Some(("r", 2)), 1, 1, None));
    let op = start(&fake, "op", cfg);
    let pods_ready =
        |fake: &FakeApi| get_workload(fake, "r").and_then(|w| condition(&w, "PodsReady"));
    wait_for(10, "PodsReady=False WaitForStart", || {
        pods_ready(&fake) == Some(("False".into(), "WaitForStart".into()))
    })
    .await;
    let set_ready = |name: &str| {
        let mut p = get_pod(&fake, name).unwrap();
        p.status = Some(yaml(
            "phase: Running\nconditions: [{type: Ready, status: \"True\"}]",
        ));
        fake.put(&p);
    };
    set_ready("r-0");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        pods_ready(&fake),
        Some(("False".into(), "WaitForStart".into())),
        "one of two pods ready"
    );
    set_ready("r-1");
    wait_for(10, "PodsReady=True", || {
        pods_ready(&fake) == Some(("True".into(), "Started".into()))
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn a_pod_of_a_role_the_workload_lacks_is_left_out_of_the_group() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut cfg = config();
    cfg.wait_for_pods_ready = Some(sluice_operator::controller::WaitForPodsReady {
        timeout: Duration::from_secs(60),
        ..Default::default()
    });
    fake.put(&pod("o-0", Some(("o", 2)), 1, 1, None));
    fake.put(&pod("o-1", Some(("o", 2)), 1, 1, None));
    let op = start(&fake, "op", cfg);
    wait_for(10, "group started", || {
        !gated(&fake, "o-0") && !gated(&fake, "o-1")
    })
    .await;
    // A pod of another shape (two GPUs, so another role) joins the admitted group, as Kueue's FindMatchingWorkloads
    // keeps only pods of the Workload's roles: it stays gated, owns nothing and does not hold PodsReady back.
    fake.put(&pod("o-odd", Some(("o", 2)), 1, 2, None));
    for name in ["o-0", "o-1"] {
        let mut p = get_pod(&fake, name).unwrap();
        p.status = Some(yaml(
            "phase: Running\nconditions: [{type: Ready, status: \"True\"}]",
        ));
        fake.put(&p);
    }
    wait_for(10, "PodsReady=True", || {
        get_workload(&fake, "o").and_then(|w| condition(&w, "PodsReady"))
            == Some(("True".into(), "Started".into()))
    })
    .await;
    assert!(
        gated(&fake, "o-odd"),
        "the pod of another role is not started"
    );
    let owners = pod_owners(&fake, "o");
    assert_eq!(owners, ["o-0", "o-1"]);
    assert!(writes(&fake, "DELETE", "/pods/o-odd").is_empty());
    op.abort();
}

#[tokio::test]
async fn a_replica_taking_over_neither_recreates_nor_restarts_a_running_group() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&pod("t-0", Some(("t", 2)), 1, 1, None));
    fake.put(&pod("t-1", Some(("t", 2)), 1, 1, None));
    let first = start(&fake, "first", config());
    wait_for(10, "pods started", || {
        !gated(&fake, "t-0") && !gated(&fake, "t-1")
    })
    .await;
    first.abort();
    // A third pod of another group arrives while no replica runs; the new leader handles it and leaves `t` be.
    fake.put(&pod("solo", None, 1, 1, None));
    let second = start(&fake, "second", config());
    wait_for(10, "solo started", || !gated(&fake, "solo")).await;
    let by_second: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.client == "second" && r.method != "GET" && r.status < 300)
        .collect();
    assert!(
        !by_second.iter().any(|r| r.path.contains("/pods/t-")
            || r.path.ends_with("/workloads/t")
            || r.path.ends_with("/workloads/t/status")),
        "{:?}",
        by_second
            .iter()
            .map(|r| (&r.method, &r.path))
            .collect::<Vec<_>>()
    );
    // Counted whatever the answer: a second POST for `t` would meet a 409.
    let creates = fake
        .requests()
        .into_iter()
        .filter(|r| r.client == "second" && r.method == "POST" && r.path.ends_with("/workloads"))
        .count();
    assert_eq!(creates, 1, "only the new pod's Workload");
    second.abort();
}

#[tokio::test]
async fn pods_ready_timeout_ends_the_pods_before_requeueing() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut cfg = config();
    cfg.wait_for_pods_ready = Some(sluice_operator::controller::WaitForPodsReady {
        timeout: Duration::from_millis(300),
        backoff_base: Duration::from_secs(30),
        backoff_max: Duration::from_secs(60),
        backoff_limit_count: None,
        order_by_eviction: true,
        ..Default::default()
    });
    fake.put(&pod("slow", None, 1, 1, None));
    let op = start(&fake, "op", cfg);
    wait_for(10, "pod started", || !gated(&fake, "slow")).await;
    let name = workload_of_pod(&fake, "slow");
    wait_for(10, "pod gone", || get_pod(&fake, "slow").is_none()).await;
    let marks = writes(&fake, "PATCH", "/api/v1/namespaces/team-a/pods/slow/status");
    assert_eq!(marks.len(), 1);
    assert_eq!(
        marks[0].body.as_ref().unwrap()["status"]["conditions"][0]["reason"],
        "WorkloadEvictedDueToPodsReadyTimeout"
    );
    let log = fake.requests();
    let pos = |pred: &dyn Fn(&RecordedRequest) -> bool| {
        log.iter().position(|r| r.status < 300 && pred(r)).unwrap()
    };
    let delete = pos(&|r| r.method == "DELETE" && r.path.ends_with("/pods/slow"));
    let requeue = pos(&|r| {
        r.path.ends_with(&format!("/workloads/{name}/status"))
            && r.body.as_ref().unwrap()["status"].get("admission") == Some(&Value::Null)
    });
    assert!(
        delete < requeue,
        "the pod ended before the quota was released"
    );
    op.abort();
}

#[tokio::test]
async fn a_group_kueue_deactivated_is_released_once_its_retention_has_passed() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    for name in ["duo-0", "duo-1"] {
        let mut p = pod(name, Some(("duo", 2)), 1, 1, None);
        p.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("kueue.x-k8s.io/max-exec-time-seconds".into(), "1".into());
        fake.put(&p);
    }
    let mut cfg = config();
    cfg.workload_retention.after_deactivated_by_kueue = Some(Duration::ZERO);
    let op = start(&fake, "op", cfg);
    wait_for(10, "pods started", || {
        !gated(&fake, "duo-0") && !gated(&fake, "duo-1")
    })
    .await;
    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(
        creates[0].body.as_ref().unwrap()["spec"]["maximumExecutionTimeSeconds"],
        1
    );
    // Past its maximum execution time the group is deactivated and its pods stopped; with no retention left,
    // the first pod is deleted and both lose the finalizer (which a stopped group's pods otherwise keep).
    wait_for(15, "pods released", || {
        !has_managed_finalizer(&fake, "duo-0") && !has_managed_finalizer(&fake, "duo-1")
    })
    .await;
    let wl = get_workload(&fake, "duo").expect("workload");
    assert_eq!(wl.spec.active, Some(false));
    let evicted = wl
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == "Evicted")
        .expect("Evicted");
    assert_eq!(
        evicted.reason,
        "DeactivatedDueToMaximumExecutionTimeExceeded"
    );
    assert!(!writes(&fake, "DELETE", "/pods/duo-0").is_empty());
    op.abort();
}

#[tokio::test]
async fn a_deleted_workload_ends_its_pod_and_is_not_recreated_for_it() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&pod("doomed", None, 1, 1, None));
    let op = start(&fake, "op", config());
    wait_for(10, "pod started", || !gated(&fake, "doomed")).await;
    let name = workload_of_pod(&fake, "doomed");
    let user: kube::Api<api::Workload> = kube::Api::namespaced(fake.client("user"), "team-a");
    user.delete(&name, &Default::default())
        .await
        .expect("delete");
    wait_for(10, "pod gone", || get_pod(&fake, "doomed").is_none()).await;
    wait_for(10, "workload gone", || get_workload(&fake, &name).is_none()).await;
    let marks = writes(
        &fake,
        "PATCH",
        "/api/v1/namespaces/team-a/pods/doomed/status",
    );
    assert_eq!(marks.len(), 1);
    assert_eq!(
        marks[0].body.as_ref().unwrap()["status"]["conditions"][0]["reason"],
        "WorkloadDeleted"
    );
    assert_eq!(writes(&fake, "DELETE", "/pods/doomed").len(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let posts = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/workloads"))
        .count();
    assert_eq!(posts, 1, "no Workload recreated for a pod being deleted");
    op.abort();
}

#[tokio::test]
async fn a_pod_running_without_admission_is_stopped() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    // Ungated (e.g. created while the webhook was down) and larger than the queue: never admitted.
    let mut rogue = pod("rogue", None, 1, 16, None);
    rogue.spec.as_mut().unwrap().scheduling_gates = None;
    fake.put(&rogue);
    let op = start(&fake, "op", config());
    wait_for(10, "pod gone", || get_pod(&fake, "rogue").is_none()).await;
    let name = workload_of_pod(&fake, "rogue");
    assert!(!admitted(&fake, &name));
    let marks = writes(
        &fake,
        "PATCH",
        "/api/v1/namespaces/team-a/pods/rogue/status",
    );
    assert_eq!(marks.len(), 1);
    let c = &marks[0].body.as_ref().unwrap()["status"]["conditions"][0];
    assert_eq!(
        (c["reason"].as_str(), c["message"].as_str()),
        (Some("NotAdmitted"), Some("Not admitted by cluster queue"))
    );
    op.abort();
}

#[tokio::test]
async fn a_group_named_by_annotation_is_one_workload() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    // Kueue v0.19 reads the group name from the annotation first (WorkloadIdentifierAnnotations).
    for name in ["a-0", "a-1"] {
        let mut p = pod(name, None, 1, 1, None);
        let ann = p.metadata.annotations.get_or_insert_with(Default::default);
        ann.insert(
            "kueue.x-k8s.io/pod-group-name".into(),
            "by-annotation".into(),
        );
        ann.insert("kueue.x-k8s.io/pod-group-total-count".into(), "2".into());
        fake.put(&p);
    }
    let op = start(&fake, "op", config());
    wait_for(10, "pods started", || {
        ["a-0", "a-1"].iter().all(|p| !gated(&fake, p))
    })
    .await;
    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(creates.len(), 1, "one Workload for the group");
    let body = creates[0].body.as_ref().unwrap();
    assert_eq!(body["metadata"]["name"], "by-annotation");
    assert_eq!(body["spec"]["podSets"][0]["count"], 2);
    op.abort();
}

#[tokio::test]
async fn a_serving_group_never_finishes_and_its_replacement_pods_start_on_its_admission() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let serving = |name: &str| {
        let mut p = pod(name, Some(("svc", 2)), 1, 1, None);
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("kueue.x-k8s.io/pod-group-serving".into(), "true".into());
        p
    };
    fake.put(&serving("svc-0"));
    fake.put(&serving("svc-1"));
    let op = start(&fake, "op", config());
    wait_for(10, "serving pods started", || {
        !gated(&fake, "svc-0") && !gated(&fake, "svc-1")
    })
    .await;
    // Both pods end (a rollout, say): a serving group's Workload is not finished.
    for name in ["svc-0", "svc-1"] {
        let mut p = get_pod(&fake, name).unwrap();
        p.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
        fake.put(&p);
    }
    // A replacement pod, gated by the webhook, starts on the group's standing admission.
    fake.put(&serving("svc-0-new"));
    wait_for(10, "replacement started", || !gated(&fake, "svc-0-new")).await;
    let w = get_workload(&fake, "svc").unwrap();
    assert_eq!(condition(&w, "Finished"), None);
    assert!(w.status.as_ref().unwrap().admission.is_some());
    assert_eq!(admission_writes(&fake, "svc"), 1);
    op.abort();
}

/// `pod` created at second `at` of the epoch, so the keeping order among a group's pods is fixed.
fn pod_created(name: &str, group: (&str, u32), gpus: u32, at: i64) -> Pod {
    let mut p = pod(name, Some(group), 1, gpus, None);
    p.metadata.creation_timestamp = Some(sluice_operator::status::k8s_time(at * 1000));
    p
}

/// Asserts the excess pod was finalized and then deleted, with Kueue's event on it.
async fn assert_deleted_as_excess(fake: &FakeApi, name: &str) {
    let reqs = fake.requests();
    let pos = |f: &dyn Fn(&RecordedRequest) -> bool| reqs.iter().position(f);
    let path = format!("/api/v1/namespaces/team-a/pods/{name}");
    let unfinalized = pos(&|r| {
        r.method == "PATCH"
            && r.path == path
            && r.body.as_ref().is_some_and(|b| {
                b["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| !f.iter().any(|f| f == MANAGED))
            })
    })
    .unwrap_or_else(|| panic!("{name}: finalizer removed"));
    let deleted = pos(&|r| r.method == "DELETE" && r.path == path)
        .unwrap_or_else(|| panic!("{name}: deleted"));
    assert!(
        unfinalized < deleted,
        "{name}: finalizer removed before the delete"
    );
    assert_eq!(writes(fake, "DELETE", &format!("/pods/{name}")).len(), 1);
    let events = || -> Vec<Value> {
        writes(fake, "POST", "/namespaces/team-a/events")
            .into_iter()
            .filter_map(|r| r.body)
            .filter(|b| b["regarding"]["name"] == name)
            .collect()
    };
    wait_for(5, "event", || !events().is_empty()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let events = events();
    assert_eq!(events.len(), 1, "{name}: {events:?}");
    assert_eq!(events[0]["reason"], "ExcessPodDeleted");
    assert_eq!(events[0]["action"], "ExcessPodDeleted");
    assert_eq!(events[0]["note"], "Excess pod deleted");
    assert_eq!(events[0]["type"], "Normal");
}

/// An operator (with Events) over group `g` of two pods, `g-a` and `g-b`, plus `also` put before it starts; returns
/// once `g-a` and `g-b` are started.
async fn group_of_two_started(also: &[Pod]) -> (FakeApi, tokio::task::JoinHandle<()>) {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    for p in also {
        fake.put(p);
    }
    fake.put(&pod_created("g-a", ("g", 2), 1, 100));
    fake.put(&pod_created("g-b", ("g", 2), 1, 200));
    let op = start_with_events(&fake, "op", config());
    wait_for(10, "group started", || {
        !gated(&fake, "g-a") && !gated(&fake, "g-b")
    })
    .await;
    (fake, op)
}

#[tokio::test]
async fn a_group_with_more_pods_than_its_total_count_deletes_the_newest_as_excess() {
    let (fake, op) = group_of_two_started(&[pod_created("g-c", ("g", 2), 1, 300)]).await;
    wait_for(10, "excess pod gone", || get_pod(&fake, "g-c").is_none()).await;
    assert_deleted_as_excess(&fake, "g-c").await;
    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(creates.len(), 1);
    let body = creates[0].body.as_ref().unwrap();
    let owners: Vec<&str> = body["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["g-a", "g-b"], "the excess pod owns nothing");
    assert_eq!(body["spec"]["podSets"][0]["count"], 2);
    op.abort();
}

#[tokio::test]
async fn a_pod_joining_an_admitted_group_beyond_its_count_is_deleted_as_excess() {
    let (fake, op) = group_of_two_started(&[]).await;
    // A third pod of the same role, older than both: still gated, so it is the one deleted (ungated pods are kept
    // first).
    fake.put(&pod_created("g-x", ("g", 2), 1, 50));
    wait_for(10, "excess pod gone", || get_pod(&fake, "g-x").is_none()).await;
    assert_deleted_as_excess(&fake, "g-x").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(get_pod(&fake, "g-a").is_some() && get_pod(&fake, "g-b").is_some());
    for p in ["g-a", "g-b"] {
        assert!(
            writes(&fake, "DELETE", &format!("/pods/{p}")).is_empty(),
            "{p} kept"
        );
    }
    let wl = get_workload(&fake, "g").expect("workload kept");
    assert!(condition(&wl, "Finished").is_none(), "not finished: {wl:?}");
    assert_eq!(
        writes(&fake, "POST", "/namespaces/team-a/workloads").len(),
        1
    );
    op.abort();
}

/// The `WaitingForReplacementPods` condition of Workload `name`: (status, reason, message).
fn waiting_for_replacement(fake: &FakeApi, name: &str) -> Option<(String, String, String)> {
    get_workload(fake, name)?
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "WaitingForReplacementPods")
        .map(|c| (c.status, c.reason, c.message))
}

#[tokio::test]
async fn a_failed_pod_is_waited_for_then_replaced_and_released() {
    let (fake, op) = group_of_two_started(&[]).await;
    assert_eq!(
        waiting_for_replacement(&fake, "g"),
        None,
        "nothing missing yet"
    );
    // One pod fails: the group waits for its replacement, and keeps its admission.
    set_phase(&fake, "g-b", "Failed");
    wait_for(10, "waiting for a replacement", || {
        waiting_for_replacement(&fake, "g").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        waiting_for_replacement(&fake, "g").unwrap(),
        (
            "True".to_string(),
            "PodsFailed".to_string(),
            "Some Failed pods need replacement".to_string()
        )
    );
    assert!(has_managed_finalizer(&fake, "g-b"), "kept until replaced");
    // Its replacement joins the running group: ungated on the standing admission, an owner of the Workload, and
    // the failed pod released.
    fake.put(&pod_created("g-c", ("g", 2), 1, 300));
    wait_for(10, "replacement started", || !gated(&fake, "g-c")).await;
    wait_for(10, "failed pod released", || {
        !has_managed_finalizer(&fake, "g-b")
    })
    .await;
    wait_for(10, "replacement arrived", || {
        waiting_for_replacement(&fake, "g").is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        waiting_for_replacement(&fake, "g").unwrap(),
        (
            "False".to_string(),
            "PodsReady".to_string(),
            "No pods need replacement".to_string()
        )
    );
    let owners = pod_owners(&fake, "g");
    assert_eq!(owners, ["g-a", "g-b", "g-c"]);
    assert!(has_managed_finalizer(&fake, "g-a") && has_managed_finalizer(&fake, "g-c"));
    assert_eq!(
        writes(&fake, "POST", "/namespaces/team-a/workloads").len(),
        1
    );
    op.abort();
}

/// The names of the owners of Workload `name`.
fn pod_owners(fake: &FakeApi, name: &str) -> Vec<String> {
    get_workload(fake, name)
        .unwrap()
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.name)
        .collect()
}
