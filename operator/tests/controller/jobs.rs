//! The Job and Workload controllers against the fake API server: the exact requests they make.

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use serde_json::json;
use sluice_operator::testing::{FakeApi, Fault};
use sluice_sdk::kueue::v1beta2 as api;

fn workload_of(fake: &FakeApi, job: &str) -> Option<api::Workload> {
    fake.list::<api::Workload>().into_iter().find(|w| {
        w.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.name == job)
    })
}

fn job_of(fake: &FakeApi, name: &str) -> Job {
    fake.get::<Job>(Some("team-a"), name).expect("job")
}

fn suspended(fake: &FakeApi, name: &str) -> bool {
    job_of(fake, name)
        .spec
        .and_then(|s| s.suspend)
        .unwrap_or(false)
}

#[tokio::test]
async fn queued_job_gets_a_workload_is_admitted_and_started_with_its_flavor() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&job("train", 2, 2, None));
    let op = start(&fake, "op", config());
    wait_for(10, "job started", || !suspended(&fake, "train")).await;
    let wl = workload_of(&fake, "train").expect("workload created");
    let name = wl.metadata.name.clone().unwrap();
    assert!(name.starts_with("job-train-"), "{name}");

    // The Workload was created once, owned by the Job, with its pod set.
    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(creates.len(), 1);
    let body = creates[0].body.as_ref().unwrap();
    assert_eq!(body["metadata"]["ownerReferences"][0]["kind"], "Job");
    assert_eq!(body["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(body["spec"]["queueName"], "lq");
    assert_eq!(body["spec"]["podSets"][0]["count"], 2);

    // One admission, written as a merge patch of the status with the created object's resourceVersion.
    let status_path =
        format!("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/{name}/status");
    let admits: Vec<_> = writes(&fake, "PATCH", &format!("/workloads/{name}/status"))
        .into_iter()
        .filter(|r| r.body.as_ref().unwrap()["status"]["admission"].is_object())
        .collect();
    assert_eq!(admits.len(), 1, "admission written exactly once");
    let admit = &admits[0];
    assert_eq!(admit.path, status_path);
    assert_eq!(
        admit.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    let created_rv = fake
        .requests()
        .iter()
        .position(|r| r.method == "POST" && r.path.ends_with("/workloads"))
        .unwrap();
    let _ = created_rv;
    let patch = admit.body.as_ref().unwrap();
    assert!(
        patch["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "status write carries a resourceVersion precondition: {patch}"
    );
    assert_eq!(
        patch["status"]["admission"],
        json!({"clusterQueue": "cq", "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"},
            "resourceUsage": {"cpu": "2", "nvidia.com/gpu": "4"}, "count": 2}]})
    );
    let conds = patch["status"]["conditions"].as_array().unwrap();
    let qr = conds.iter().find(|c| c["type"] == "QuotaReserved").unwrap();
    assert_eq!(
        (qr["status"].as_str(), qr["reason"].as_str()),
        (Some("True"), Some("QuotaReserved"))
    );
    assert_eq!(qr["message"], "Quota reserved in ClusterQueue cq");
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Admitted" && c["status"] == "True")
    );

    // The Job was unsuspended by one merge patch with its precondition, carrying the flavor's node labels,
    // tolerations and Kueue's pod labels.
    let job_patches = writes(
        &fake,
        "PATCH",
        "/apis/batch/v1/namespaces/team-a/jobs/train",
    );
    assert_eq!(job_patches.len(), 1);
    let jp = job_patches[0].body.as_ref().unwrap();
    assert_eq!(jp["spec"]["suspend"], false);
    assert!(jp["metadata"]["resourceVersion"].is_string());
    assert_eq!(
        jp["spec"]["template"]["spec"]["nodeSelector"],
        json!({"gpu.example.com/model": "a100"})
    );
    assert_eq!(
        jp["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(
        jp["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/cluster-queue-name"],
        "cq"
    );

    // Queue status follows.
    wait_for(5, "cluster queue status", || {
        fake.get::<api::ClusterQueue>(None, "cq")
            .and_then(|c| c.status)
            .is_some_and(|s| s.admitted_workloads == 1)
    })
    .await;
    let cq = fake.get::<api::ClusterQueue>(None, "cq").unwrap();
    assert!(
        cq.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"kueue.x-k8s.io/resource-in-use".to_string()),
        "ClusterQueue finalizer added"
    );

    // The Job completes: the Workload is Finished and its quota released.
    let mut done = job_of(&fake, "train");
    done.status = Some(yaml(
        "conditions: [{type: Complete, status: \"True\"}]\nsucceeded: 2",
    ));
    fake.put(&done);
    wait_for(5, "workload finished", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|(s, r)| s == "True" && r == "Succeeded")
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
async fn a_new_workload_takes_the_labels_label_keys_to_copy_lists_from_its_job() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut j = job("train", 1, 1, None);
    let labels = j.metadata.labels.get_or_insert_with(Default::default);
    labels.insert("example.com/team".into(), "vision".into());
    labels.insert("example.com/unlisted".into(), "x".into());
    // A listed key that would shadow Kueue's own label leaves it as Kueue sets it.
    labels.insert("kueue.x-k8s.io/job-uid".into(), "forged".into());
    fake.put(&j);
    let mut cfg = config();
    cfg.label_keys_to_copy = vec![
        "example.com/team".into(),
        "example.com/absent".into(),
        "kueue.x-k8s.io/job-uid".into(),
    ];
    let op = start(&fake, "op", cfg);
    wait_for(10, "job started", || !suspended(&fake, "train")).await;
    let creates = writes(&fake, "POST", "/namespaces/team-a/workloads");
    assert_eq!(creates.len(), 1);
    let labels = &creates[0].body.as_ref().unwrap()["metadata"]["labels"];
    let uid = fake
        .get::<k8s_openapi::api::batch::v1::Job>(Some("team-a"), "train")
        .and_then(|j| j.metadata.uid)
        .expect("uid");
    assert_eq!(
        labels,
        &json!({"example.com/team": "vision", "kueue.x-k8s.io/job-uid": uid}),
        "{labels}"
    );
    op.abort();
}

#[tokio::test]
async fn conflicts_and_server_errors_are_retried_without_duplicating_the_admission() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    // The first two admission writes meet a conflict, then two 500s; the Job patch meets a 503.
    fake.inject(Fault {
        method: Some(http::Method::PATCH),
        path_contains: "/workloads/job-train-".into(),
        status: 409,
        times: 2,
    });
    fake.inject(Fault {
        method: Some(http::Method::PATCH),
        path_contains: "/workloads/job-train-".into(),
        status: 500,
        times: 2,
    });
    fake.inject(Fault {
        method: Some(http::Method::PATCH),
        path_contains: "/jobs/train".into(),
        status: 503,
        times: 1,
    });
    fake.put(&job("train", 1, 1, None));
    let op = start(&fake, "op", config());
    wait_for(10, "job started", || !suspended(&fake, "train")).await;
    let name = workload_of(&fake, "train").unwrap().metadata.name.unwrap();
    let log = fake.requests();
    let status_path = format!("/workloads/{name}/status");
    let attempts: Vec<_> = log
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with(&status_path))
        .map(|r| r.status)
        .collect();
    assert_eq!(&attempts[..5], &[409, 409, 500, 500, 200], "{attempts:?}");
    // Each conflict re-read the Workload before trying again.
    let rereads = log
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&format!("/workloads/{name}")))
        .count();
    assert_eq!(rereads, 2);
    assert_eq!(
        admission_writes(&fake, &name),
        1,
        "exactly one admission written"
    );
    let job_attempts: Vec<_> = log
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/jobs/train"))
        .map(|r| r.status)
        .collect();
    assert_eq!(job_attempts, vec![503, 200]);
    op.abort();
}

#[tokio::test]
async fn stale_resource_version_is_a_real_conflict_and_the_write_lands_on_the_fresh_copy() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let wl = workload("w1", 1, 0);
    fake.put(&wl);
    // Someone else labels the workload while the operator writes: the API server's own 409 path.
    let client = fake.client("someone");
    let api: kube::Api<api::Workload> = kube::Api::namespaced(client, "team-a");
    let op = start(&fake, "op", config());
    wait_for(10, "admitted", || admitted(&fake, "w1")).await;
    let patch = json!({"metadata": {"labels": {"x": "y"}, "resourceVersion": "1"}});
    let err = api
        .patch(
            "w1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    assert_eq!(admission_writes(&fake, "w1"), 1);
    op.abort();
}

#[tokio::test]
async fn preemption_evicts_suspends_restores_and_requeues_the_victim() {
    let fake = FakeApi::new();
    seed_queues(&fake, 4);
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: high}\nvalue: 1000",
    ));
    fake.put(&job("low", 1, 4, None));
    let op = start(&fake, "op", config());
    wait_for(10, "low started", || !suspended(&fake, "low")).await;
    let low = workload_of(&fake, "low").unwrap().metadata.name.unwrap();
    // The Job controller has started it: its template may no longer change until it is suspended and its
    // start time cleared (the API server's rule, which the fake enforces), and it carries the controller's labels.
    let mut started = job_of(&fake, "low");
    started
        .status
        .get_or_insert_with(Default::default)
        .start_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    let tpl_meta = started
        .spec
        .as_mut()
        .unwrap()
        .template
        .metadata
        .get_or_insert_with(Default::default);
    tpl_meta
        .labels
        .get_or_insert_with(Default::default)
        .insert("batch.kubernetes.io/job-name".into(), "low".into());
    fake.put(&started);
    fake.put(&job("high", 1, 4, Some("high")));
    wait_for(10, "high started", || !suspended(&fake, "high")).await;
    let high = workload_of(&fake, "high").unwrap().metadata.name.unwrap();
    assert!(
        suspended(&fake, "low"),
        "the victim's Job is suspended again"
    );
    let low_job = job_of(&fake, "low");
    let tpl = low_job.spec.unwrap().template.spec.unwrap();
    assert!(
        tpl.node_selector.is_none(),
        "injected node selector removed on eviction"
    );
    assert!(
        tpl.tolerations.is_none(),
        "injected tolerations removed on eviction"
    );
    let low_job = job_of(&fake, "low");
    let labels = low_job
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .labels
        .unwrap();
    assert_eq!(
        labels
            .get("batch.kubernetes.io/job-name")
            .map(String::as_str),
        Some("low")
    );
    assert!(
        !low_job
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("kueue.x-k8s.io/stopping")
    );
    assert!(
        low_job.status.unwrap().start_time.is_none(),
        "start time cleared before the template changed"
    );
    let w = get_workload(&fake, &low).unwrap();
    assert_eq!(
        condition(&w, "Evicted"),
        Some(("True".into(), "Preempted".into()))
    );
    assert_eq!(
        condition(&w, "Preempted"),
        Some(("True".into(), "InClusterQueue".into()))
    );
    assert_eq!(
        condition(&w, "QuotaReserved").map(|c| c.0),
        Some("False".into())
    );
    assert!(
        w.status.unwrap().admission.is_none(),
        "victim requeued without admission"
    );
    // Order of writes: evict the victim, stop its Job, clear its admission, then admit the preemptor.
    let log = fake.requests();
    let pos = |pred: &dyn Fn(&sluice_operator::testing::RecordedRequest) -> bool| {
        log.iter().position(|r| r.status < 300 && pred(r)).unwrap()
    };
    let evict = pos(&|r| {
        r.path.ends_with(&format!("/workloads/{low}/status"))
            && r.body.as_ref().unwrap()["status"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Evicted" && c["status"] == "True")
                })
    });
    let suspend = pos(&|r| {
        r.path.ends_with("/jobs/low") && r.body.as_ref().unwrap()["spec"]["suspend"] == true
    });
    let requeue = pos(&|r| {
        r.path.ends_with(&format!("/workloads/{low}/status"))
            && r.body.as_ref().unwrap()["status"]["admission"].is_null()
            && r.body.as_ref().unwrap()["status"]
                .get("admission")
                .is_some()
    });
    let admit_high = pos(&|r| {
        r.path.ends_with(&format!("/workloads/{high}/status"))
            && r.body.as_ref().unwrap()["status"]["admission"].is_object()
    });
    assert!(
        evict < suspend && suspend < requeue && requeue < admit_high,
        "{evict} {suspend} {requeue} {admit_high}"
    );
    assert_eq!(admission_writes(&fake, &high), 1);
    assert_eq!(
        admission_writes(&fake, &low),
        1,
        "the victim was admitted once and not again"
    );
    op.abort();
}

#[tokio::test]
async fn deleted_job_finishes_its_workload_and_drops_the_finalizer() {
    // Kueue v0.19 (FinishOrphanedWorkloads): the orphan is finished with OwnerNotFound, which frees its quota
    // at once, and loses its finalizer; garbage collection deletes it, not Kueue.
    let fake = FakeApi::new();
    seed_queues(&fake, 1);
    fake.put(&job("train", 1, 1, None));
    let op = start(&fake, "op", config());
    wait_for(10, "started", || !suspended(&fake, "train")).await;
    let name = workload_of(&fake, "train").unwrap().metadata.name.unwrap();
    fake.put(&job("next", 1, 1, None));
    fake.remove::<Job>(Some("team-a"), "train");
    wait_for(5, "orphan finished, finalizer gone", || {
        get_workload(&fake, &name).is_some_and(|w| {
            condition(&w, "Finished") == Some(("True".into(), "OwnerNotFound".into()))
                && w.metadata.finalizers.unwrap_or_default().is_empty()
        })
    })
    .await;
    // Its quota went to the next Job.
    wait_for(10, "next started", || !suspended(&fake, "next")).await;
    assert!(writes(&fake, "DELETE", &format!("/workloads/{name}")).is_empty());
    op.abort();
}

#[tokio::test]
async fn job_seen_before_its_priority_class_gets_its_workload_when_the_class_arrives() {
    // On a real API server the Job's watch event can come before the WorkloadPriorityClass's, even when the
    // class was created first: the Job is reconciled again when the class appears, as Kueue's requeue does.
    let fake = FakeApi::new();
    seed_queues(&fake, 4);
    fake.put(&job("late", 1, 1, Some("late")));
    let op = start(&fake, "op", config());
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        workload_of(&fake, "late").is_none(),
        "built without its class"
    );
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: late}\nvalue: 500",
    ));
    wait_for(10, "the Workload created once the class exists", || {
        workload_of(&fake, "late").is_some_and(|w| w.spec.priority == Some(500))
    })
    .await;
    op.abort();
}

/// Kueue's maximumExecutionTimeSeconds: the Job's `kueue.x-k8s.io/max-exec-time-seconds` label becomes the
/// Workload's limit; once it has run that long the Workload is deactivated (DeactivationTarget, then
/// `spec.active=false`), evicted as Deactivated with the limit as underlying cause, and the Job is suspended.
#[tokio::test]
async fn a_job_past_its_maximum_execution_time_is_deactivated_and_suspended() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut j = job("short", 1, 1, None);
    j.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kueue.x-k8s.io/max-exec-time-seconds".into(), "1".into());
    fake.put(&j);
    let op = start(&fake, "op", config());
    // The deadline counts from the admission, whose time the API keeps in whole seconds: the job may run for much
    // less than a second, too briefly to be seen by polling, so its start is read from the writes.
    let started = || {
        writes(&fake, "PATCH", "/jobs/short").iter().any(|r| {
            r.body
                .as_ref()
                .is_some_and(|b| b["spec"]["suspend"] == false)
        })
    };
    wait_for(10, "job started", started).await;
    let wl = workload_of(&fake, "short").unwrap();
    assert_eq!(wl.spec.maximum_execution_time_seconds, Some(1));
    wait_for(10, "deactivated and stopped", || {
        workload_of(&fake, "short").is_some_and(|w| {
            w.spec.active == Some(false)
                && condition(&w, "Evicted")
                    .is_some_and(|c| c.1 == "DeactivatedDueToMaximumExecutionTimeExceeded")
        }) && suspended(&fake, "short")
    })
    .await;
    let wl = workload_of(&fake, "short").unwrap();
    let st = wl.status.clone().unwrap();
    let evicted = st.conditions.iter().find(|c| c.type_ == "Evicted").unwrap();
    assert_eq!(
        evicted.message,
        "The workload is deactivated due to exceeding the maximum execution time"
    );
    // The target stays, as in Kueue v0.17.
    assert_eq!(
        condition(&wl, "DeactivationTarget"),
        Some(("True".into(), "MaximumExecutionTimeExceeded".into()))
    );
    let stats = st.scheduling_stats.expect("schedulingStats");
    assert_eq!(stats.evictions.len(), 1);
    assert_eq!(stats.evictions[0].reason, "Deactivated");
    assert_eq!(
        stats.evictions[0].underlying_cause,
        "MaximumExecutionTimeExceeded"
    );
    // The time it ran this admission is accumulated when the admission is cleared, after the deactivation
    // reset it (Kueue's order too).
    assert!(
        st.accumulated_past_execution_time_seconds
            .is_some_and(|s| (0..=3).contains(&s)),
        "{:?}",
        st.accumulated_past_execution_time_seconds
    );
    // Deactivated, it is not admitted again.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(suspended(&fake, "short"));
    op.abort();
}

#[tokio::test]
async fn a_queued_job_that_is_changed_gets_its_workload_updated_and_then_fits() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    // 4 pods of 4 GPUs: 16 GPUs, more than the queue's 8.
    fake.put(&job("big", 4, 4, None));
    let op = start(&fake, "op", config());
    let name = {
        let mut found = None;
        wait_for(10, "workload", || {
            found = workload_of(&fake, "big").and_then(|w| w.metadata.name);
            found.is_some()
        })
        .await;
        found.unwrap()
    };
    wait_for(10, "pending without quota", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "QuotaReserved"))
            .is_some_and(|c| c.0 == "False")
    })
    .await;
    // Its owner halves it while it waits: the same Workload takes the new count, and it fits.
    let mut smaller = job_of(&fake, "big");
    let spec = smaller.spec.as_mut().unwrap();
    spec.parallelism = Some(2);
    spec.completions = Some(2);
    fake.put(&smaller);
    wait_for(10, "started", || !suspended(&fake, "big")).await;
    let wl = get_workload(&fake, &name).expect("the same Workload");
    assert_eq!(wl.spec.pod_sets[0].count, 2);
    let spec_writes = fake
        .requests()
        .into_iter()
        .filter(|r| {
            r.path.ends_with(&format!("/workloads/{name}"))
                && matches!(r.method.as_str(), "PUT" | "PATCH")
                && r.status < 300
        })
        .count();
    assert_eq!(
        spec_writes, 1,
        "updated once, then admitted through its status"
    );
    op.abort();
}

/// Kueue's `QueueNameChange` and `UpdateWorkloadPriority`: a queued Job's Workload follows the Job's queue-name
/// label and its workload priority class.
#[tokio::test]
async fn a_queued_jobs_workload_follows_its_queue_name_and_priority_class() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    for (name, value) in [("low", 10), ("high", 1000)] {
        fake.put(&yaml::<api::WorkloadPriorityClass>(&format!(
            "metadata: {{name: {name}}}\nvalue: {value}"
        )));
    }
    fake.put(&job("moving", 1, 1, Some("low")));
    relabel(&fake, "moving", "kueue.x-k8s.io/queue-name", "nowhere");
    let op = start(&fake, "op", config());
    wait_for(10, "workload in the missing queue", || {
        workload_of(&fake, "moving").is_some_and(|w| w.spec.queue_name == "nowhere")
    })
    .await;
    // The class changes while it waits: the Workload takes the new class and value.
    relabel(&fake, "moving", "kueue.x-k8s.io/priority-class", "high");
    wait_for(10, "priority followed", || {
        workload_of(&fake, "moving").is_some_and(|w| {
            w.spec.priority == Some(1000)
                && w.spec
                    .priority_class_ref
                    .as_ref()
                    .is_some_and(|r| r.name == "high")
        })
    })
    .await;
    // Then its queue: the Workload moves to the LocalQueue that exists, and is admitted there.
    relabel(&fake, "moving", "kueue.x-k8s.io/queue-name", "lq");
    wait_for(10, "started in its new queue", || {
        !suspended(&fake, "moving")
    })
    .await;
    assert_eq!(workload_of(&fake, "moving").unwrap().spec.queue_name, "lq");
    op.abort();
}

/// Kueue's WorkloadPriorityClass controller: a class given another value gives it to the Workloads naming it,
/// admitted ones too, by writing their `spec.priority`.
#[tokio::test]
async fn a_workload_priority_class_given_another_value_gives_it_to_its_workloads() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let class = |value: i32| {
        yaml::<api::WorkloadPriorityClass>(&format!("metadata: {{name: batch}}\nvalue: {value}"))
    };
    fake.put(&class(10));
    fake.put(&job("steady", 1, 1, Some("batch")));
    let op = start(&fake, "op", config());
    wait_for(10, "started", || !suspended(&fake, "steady")).await;
    let name = workload_of(&fake, "steady").unwrap().metadata.name.unwrap();
    assert_eq!(
        workload_of(&fake, "steady").unwrap().spec.priority,
        Some(10)
    );
    fake.put(&class(500));
    wait_for(10, "priority followed the class", || {
        workload_of(&fake, "steady").is_some_and(|w| w.spec.priority == Some(500))
    })
    .await;
    let wrote = fake.requests().into_iter().any(|r| {
        r.status < 300
            && r.method != "GET"
            && r.path.ends_with(&format!("/workloads/{name}"))
            && r.body
                .as_ref()
                .is_some_and(|b| b["spec"]["priority"] == 500)
    });
    assert!(wrote, "spec.priority written to the Workload");
    // Still admitted, and the job still running: only the priority changed.
    assert!(admitted(&fake, &name) && !suspended(&fake, "steady"));
    op.abort();
}

/// Kueue's `ensureOneWorkload`: a running Job changed so that it no longer matches the Workload holding its quota
/// (here scaled up) is stopped with its templates restored, its Workload deleted, and a new Workload, built from
/// the Job as it is now, queues and is admitted: the change cannot run on the old admission's quota.
#[tokio::test]
async fn a_running_job_that_is_changed_is_stopped_and_gets_a_new_workload() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&job("grow", 1, 2, None));
    let op = start(&fake, "op", config());
    wait_for(10, "started", || !suspended(&fake, "grow")).await;
    let name = workload_of(&fake, "grow").unwrap().metadata.name.unwrap();
    let mut bigger = job_of(&fake, "grow");
    let spec = bigger.spec.as_mut().unwrap();
    spec.parallelism = Some(2);
    spec.completions = Some(2);
    fake.put(&bigger);
    let deleted =
        |fake: &FakeApi| !writes(fake, "DELETE", &format!("/workloads/{name}")).is_empty();
    wait_for(10, "old workload deleted", || deleted(&fake)).await;
    wait_for(10, "new workload admitted and the job running", || {
        get_workload(&fake, &name).is_some_and(|w| w.spec.pod_sets[0].count == 2)
            && admitted(&fake, &name)
            && !suspended(&fake, "grow")
    })
    .await;
    // Stopped (suspended, restored) before its Workload was deleted, and started again only on the new admission.
    let log = fake.requests();
    let pos = |pred: &dyn Fn(&sluice_operator::testing::RecordedRequest) -> bool| {
        log.iter().position(|r| r.status < 300 && pred(r)).unwrap()
    };
    let suspend = pos(&|r| {
        r.path.ends_with("/jobs/grow")
            && r.body
                .as_ref()
                .is_some_and(|b| b["spec"]["suspend"] == true)
    });
    let delete = pos(&|r| r.method == "DELETE" && r.path.ends_with(&format!("/workloads/{name}")));
    assert!(suspend < delete, "{suspend} {delete}");
    // The flavor's node selector, injected at the start, was taken out again before the Workload went.
    let restored = log[suspend..delete].iter().any(|r| {
        r.path.ends_with("/jobs/grow")
            && r.body.as_ref().is_some_and(|b| {
                b["spec"]["template"]["spec"]
                    .get("nodeSelector")
                    .is_some_and(|n| n.is_null() || n.get("gpu.example.com/model").is_none())
            })
    });
    assert!(
        restored,
        "the Job's template was not restored before its Workload was deleted"
    );
    assert_eq!(
        admission_writes(&fake, &name),
        2,
        "admitted once per Workload"
    );
    op.abort();
}

#[tokio::test]
async fn pods_that_finished_give_their_quota_to_a_waiting_job() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    // 4 pods of 2 GPUs fill the queue; the next Job waits for 4.
    fake.put(&job("first", 4, 2, None));
    let op = start(&fake, "op", config());
    wait_for(10, "first started", || !suspended(&fake, "first")).await;
    fake.put(&job("next", 2, 2, None));
    let next_wl = {
        let mut found = None;
        wait_for(10, "next's workload", || {
            found = workload_of(&fake, "next").and_then(|w| w.metadata.name);
            found.is_some()
        })
        .await;
        found.unwrap()
    };
    wait_for(10, "next waits", || {
        get_workload(&fake, &next_wl)
            .and_then(|w| condition(&w, "QuotaReserved"))
            .is_some_and(|c| c.0 == "False")
    })
    .await;
    assert!(suspended(&fake, "next"));
    // Two of the first Job's pods succeed: two of its four slots will never run again.
    let mut running = job_of(&fake, "first");
    running.status = Some(serde_json::from_value(json!({"active": 2, "succeeded": 2})).unwrap());
    fake.put(&running);
    wait_for(10, "next started on the reclaimed GPUs", || {
        !suspended(&fake, "next")
    })
    .await;
    let first = workload_of(&fake, "first").expect("workload");
    let reclaimable = &first.status.as_ref().unwrap().reclaimable_pods;
    assert_eq!(reclaimable.len(), 1);
    assert_eq!(
        (reclaimable[0].name.as_str(), reclaimable[0].count),
        ("main", 2)
    );
    op.abort();
}

/// Kueue's ClusterQueue finalizer: a ClusterQueue being deleted with nothing holding quota in it loses
/// `kueue.x-k8s.io/resource-in-use`, so its deletion completes.
#[tokio::test]
async fn a_deleted_cluster_queue_with_nothing_admitted_loses_its_finalizer() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let op = start(&fake, "op", config());
    wait_for(10, "finalizer added", || {
        fake.get::<api::ClusterQueue>(None, "cq").is_some_and(|c| {
            c.metadata
                .finalizers
                .is_some_and(|f| f.iter().any(|f| f == "kueue.x-k8s.io/resource-in-use"))
        })
    })
    .await;
    let mut cq = fake.get::<api::ClusterQueue>(None, "cq").unwrap();
    cq.metadata.deletion_timestamp = Some(sluice_operator::status::k8s_time(1_000));
    fake.put(&cq);
    // Gone, or still there without the finalizer.
    wait_for(10, "finalizer removed", || {
        fake.get::<api::ClusterQueue>(None, "cq").is_none_or(|c| {
            !c.metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == "kueue.x-k8s.io/resource-in-use")
        })
    })
    .await;
    op.abort();
}

/// Sets label `key` of Job `name` to `value`, as its owner would.
fn relabel(fake: &FakeApi, name: &str, key: &str, value: &str) {
    let mut j = job_of(fake, name);
    j.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
    fake.put(&j);
}

#[tokio::test]
async fn jobs_in_namespaces_the_managed_jobs_selector_leaves_out_get_no_workload() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&yaml::<k8s_openapi::api::core::v1::Namespace>(
        "metadata: {name: team-b}",
    ));
    fake.put(&yaml::<api::LocalQueue>(
        "metadata: {name: lq, namespace: team-b}\nspec: {clusterQueue: cq}",
    ));
    let mut outside = job("other", 1, 1, None);
    outside.metadata.namespace = Some("team-b".into());
    fake.put(&outside);
    fake.put(&job("train", 1, 1, None));
    let mut cfg = config();
    // team-a carries `team: a`; team-b no label.
    cfg.managed_jobs_namespace_selector =
        serde_json::from_value(json!({"matchLabels": {"team": "a"}})).unwrap();
    let op = start(&fake, "op", cfg);
    wait_for(10, "team-a's job started", || !suspended(&fake, "train")).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(writes(&fake, "POST", "/namespaces/team-b/workloads").is_empty());
    assert_eq!(
        writes(&fake, "POST", "/namespaces/team-a/workloads").len(),
        1
    );
    let other = fake
        .get::<k8s_openapi::api::batch::v1::Job>(Some("team-b"), "other")
        .unwrap();
    assert_eq!(
        other.spec.and_then(|s| s.suspend),
        Some(true),
        "left as it was"
    );
    op.abort();
}

#[tokio::test]
async fn a_job_seen_before_its_namespace_is_judged_again_when_the_namespace_arrives() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&yaml::<api::LocalQueue>(
        "metadata: {name: lq, namespace: team-b}\nspec: {clusterQueue: cq}",
    ));
    let mut early = job("early", 1, 1, None);
    early.metadata.namespace = Some("team-b".into());
    fake.put(&early);
    let mut cfg = config();
    cfg.managed_jobs_namespace_selector =
        serde_json::from_value(json!({"matchLabels": {"team": "b"}})).unwrap();
    let op = start(&fake, "op", cfg);
    // Unknown, team-b is judged by its name alone, which the selector does not take; team-a's labels are not it.
    fake.put(&job("train", 1, 1, None));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(writes(&fake, "POST", "/namespaces/team-b/workloads").is_empty());
    fake.put(&yaml::<k8s_openapi::api::core::v1::Namespace>(
        "metadata: {name: team-b, labels: {team: b}}",
    ));
    wait_for(10, "the early job's Workload", || {
        !writes(&fake, "POST", "/namespaces/team-b/workloads").is_empty()
    })
    .await;
    assert!(writes(&fake, "POST", "/namespaces/team-a/workloads").is_empty());
    op.abort();
}
