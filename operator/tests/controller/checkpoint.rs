//! Checkpoint-aware preemption: an opted-in victim is asked to checkpoint and evicted once it reports done, or
//! when its grace runs out.

use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use sluice_operator::controller::Operator;
use sluice_operator::leader::Leadership;
use sluice_operator::testing::FakeApi;
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

fn started(fake: &FakeApi, name: &str) -> bool {
    fake.get::<Job>(Some("team-a"), name)
        .and_then(|j| j.spec?.suspend)
        .is_some_and(|s| !s)
}

/// A running low-priority Job opted in with `grace`, one of its pods, and a high-priority Job that preempts it.
async fn preempt_opted_in_victim(fake: &FakeApi, grace: &str) -> (String, String) {
    seed_queues(fake, 4);
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: high}\nvalue: 1000",
    ));
    let mut low = job("low", 1, 4, None);
    low.metadata.annotations =
        Some([("sluice.dev/checkpoint-grace".to_string(), grace.to_string())].into());
    fake.put(&low);
    fake.put(&yaml::<Pod>(
        "metadata: {name: low-0, namespace: team-a, labels: {batch.kubernetes.io/job-name: low}}\nspec: {containers: [{name: c}]}",
    ));
    wait_for(10, "low started", || started(fake, "low")).await;
    fake.put(&job("high", 1, 4, Some("high")));
    wait_for(10, "high's workload", || {
        workload_of(fake, "high").is_some()
    })
    .await;
    let low_wl = workload_of(fake, "low").unwrap().metadata.name.unwrap();
    let high_wl = workload_of(fake, "high").unwrap().metadata.name.unwrap();
    (low_wl, high_wl)
}

#[tokio::test]
async fn victim_checkpoints_then_is_evicted_and_the_preemptor_runs() {
    let fake = FakeApi::new();
    let op = Operator::new(fake.client("op"), config(), Leadership::always()).without_events();
    let metrics = op.metrics.clone();
    let task = tokio::spawn(op.run());
    let (low, high) = preempt_opted_in_victim(&fake, "1m").await;
    wait_for(5, "checkpoint requested", || {
        get_workload(&fake, &low).is_some_and(|w| {
            condition(&w, "CheckpointRequested") == Some(("True".into(), "Preemption".into()))
        })
    })
    .await;
    let victim = get_workload(&fake, &low).unwrap();
    assert!(
        victim
            .metadata
            .annotations
            .unwrap()
            .contains_key("sluice.dev/checkpoint-requested")
    );
    let pod = fake.get::<Pod>(Some("team-a"), "low-0").unwrap();
    assert!(
        pod.metadata
            .annotations
            .unwrap()
            .contains_key("sluice.dev/checkpoint-requested")
    );
    wait_for(5, "preemptor waits", || {
        get_workload(&fake, &high)
            .is_some_and(|w| condition(&w, "WaitingForCheckpoint").is_some_and(|c| c.0 == "True"))
    })
    .await;
    // Nothing is evicted while the checkpoint is awaited.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let victim = get_workload(&fake, &low).unwrap();
    assert!(condition(&victim, "Evicted").is_none());
    assert!(started(&fake, "low") && !started(&fake, "high"));

    // The workload reports its checkpoint: eviction goes ahead and the preemptor starts.
    let mut done = victim.clone();
    done.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("sluice.dev/checkpoint-done".into(), "true".into());
    fake.put(&done);
    wait_for(10, "high started", || started(&fake, "high")).await;
    let victim = get_workload(&fake, &low).unwrap();
    assert_eq!(
        condition(&victim, "Evicted"),
        Some(("True".into(), "Preempted".into()))
    );
    assert_eq!(
        condition(&victim, "CheckpointRequested"),
        Some(("False".into(), "CheckpointDone".into()))
    );
    // The reported checkpoint is recorded as the workload's latest, in RFC 3339.
    let last = victim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("sluice.dev/last-checkpoint"))
        .expect("sluice.dev/last-checkpoint written");
    assert!(
        serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(
            serde_json::Value::String(last.clone())
        )
        .is_ok(),
        "{last}"
    );
    let pre = get_workload(&fake, &high).unwrap();
    assert_eq!(
        condition(&pre, "WaitingForCheckpoint"),
        Some(("False".into(), "CheckpointDone".into()))
    );
    let text = metrics.render();
    assert!(
        text.contains(
            r#"sluice_checkpoint_wait_seconds_count{cluster_queue="cq",outcome="done"} 1"#
        ),
        "{text}"
    );
    task.abort();
}

#[tokio::test]
async fn grace_expiry_evicts_without_a_checkpoint() {
    let fake = FakeApi::new();
    let op = Operator::new(fake.client("op"), config(), Leadership::always()).without_events();
    let metrics = op.metrics.clone();
    let task = tokio::spawn(op.run());
    let (low, _) = preempt_opted_in_victim(&fake, "300ms").await;
    wait_for(10, "high started", || started(&fake, "high")).await;
    let victim = get_workload(&fake, &low).unwrap();
    assert_eq!(
        condition(&victim, "CheckpointRequested"),
        Some(("False".into(), "GracePeriodExpired".into()))
    );
    // No checkpoint was reported: none is recorded.
    assert!(
        victim
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("sluice.dev/last-checkpoint"))
    );
    assert!(metrics.render().contains(
        r#"sluice_checkpoint_wait_seconds_count{cluster_queue="cq",outcome="timeout"} 1"#
    ));
    task.abort();
}
