//! waitForPodsReady: a workload whose pods are not ready in time is evicted with PodsReadyTimeout, requeued after
//! Kueue's backoff, and deactivated once the requeue limit is exceeded.

use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use sluice_operator::controller::WaitForPodsReady;
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

fn pods_ready_config(
    limit: Option<i32>,
    timeout_ms: u64,
) -> sluice_operator::controller::OperatorConfig {
    let mut c = config();
    c.wait_for_pods_ready = Some(WaitForPodsReady {
        timeout: Duration::from_millis(timeout_ms),
        backoff_base: Duration::from_millis(200),
        backoff_max: Duration::from_secs(5),
        backoff_limit_count: limit,
        order_by_eviction: true,
        recovery_timeout: None,
        block_admission: false,
    });
    c
}

fn set_ready(fake: &FakeApi, job: &str, active: i32, ready: i32) {
    let mut j = fake.get::<Job>(Some("team-a"), job).unwrap();
    j.status = Some(yaml(&format!("active: {active}\nready: {ready}")));
    fake.put(&j);
}

#[tokio::test]
async fn block_admission_holds_the_next_job_until_the_admitted_one_is_ready() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut cfg = pods_ready_config(None, 60_000);
    cfg.wait_for_pods_ready.as_mut().unwrap().block_admission = true;
    cfg.engine.block_admission = true;
    fake.put(&job("first", 2, 1, None));
    let op = start(&fake, "op", cfg);
    wait_for(5, "first admitted", || {
        workload_of(&fake, "first").is_some_and(|w| w.status.is_some_and(|s| s.admission.is_some()))
    })
    .await;
    fake.put(&job("second", 2, 1, None));
    wait_for(5, "second waits with Kueue's reason", || {
        workload_of(&fake, "second")
            .and_then(|w| condition(&w, "QuotaReserved"))
            .is_some_and(|c| c == ("False".into(), "Waiting".into()))
    })
    .await;
    let second = workload_of(&fake, "second").unwrap();
    let name = second.metadata.name.clone().unwrap();
    let message = second
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "QuotaReserved"))
        .map(|c| c.message.clone());
    assert_eq!(
        message.as_deref(),
        Some("waiting for all admitted workloads to be in PodsReady condition")
    );
    // Quota is there, but nothing is admitted while first's pods are not ready.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(admission_writes(&fake, &name), 0);
    set_ready(&fake, "first", 2, 2);
    wait_for(5, "second admitted once first is PodsReady", || {
        get_workload(&fake, &name).is_some_and(|w| w.status.is_some_and(|s| s.admission.is_some()))
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn a_pod_lost_after_ready_is_evicted_after_the_recovery_timeout() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    let mut cfg = pods_ready_config(None, 60_000);
    cfg.wait_for_pods_ready.as_mut().unwrap().recovery_timeout = Some(Duration::from_millis(300));
    fake.put(&job("train", 2, 1, None));
    let op = start(&fake, "op", cfg);
    wait_for(5, "admitted", || {
        workload_of(&fake, "train").is_some_and(|w| w.status.is_some_and(|s| s.admission.is_some()))
    })
    .await;
    let name = workload_of(&fake, "train").unwrap().metadata.name.unwrap();
    set_ready(&fake, "train", 2, 2);
    wait_for(5, "PodsReady=True", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "PodsReady"))
            .is_some_and(|c| c.0 == "True")
    })
    .await;
    // A pod fails: PodsReady=False WaitForRecovery; far inside the 60 s timeout, the 300 ms recovery timeout
    // evicts it, and Kueue counts the eviction with its cause.
    set_ready(&fake, "train", 1, 1);
    wait_for(5, "evicted after the recovery timeout", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Evicted"))
            .is_some_and(|c| c == ("True".into(), "PodsReadyTimeout".into()))
    })
    .await;
    let statuses = writes(&fake, "PATCH", &format!("/workloads/{name}/status"));
    assert!(
        statuses.iter().filter_map(|r| r.body.as_ref()).any(|b| {
            b["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "PodsReady" && c["reason"] == "WaitForRecovery")
            })
        }),
        "PodsReady went WaitForRecovery first"
    );
    let w = get_workload(&fake, &name).unwrap();
    let stats = w.status.unwrap().scheduling_stats.unwrap();
    assert_eq!(stats.evictions.len(), 1, "{stats:?}");
    assert_eq!(
        (
            stats.evictions[0].reason.as_str(),
            stats.evictions[0].underlying_cause.as_str()
        ),
        ("PodsReadyTimeout", "WaitForRecovery")
    );
    op.abort();
}

#[tokio::test]
async fn ready_pods_set_pods_ready_and_stop_the_timer() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&job("train", 2, 1, None));
    let op = start(&fake, "op", pods_ready_config(None, 2_000));
    wait_for(5, "admitted", || {
        workload_of(&fake, "train").is_some_and(|w| w.status.is_some_and(|s| s.admission.is_some()))
    })
    .await;
    let name = workload_of(&fake, "train").unwrap().metadata.name.unwrap();
    wait_for(5, "PodsReady=False WaitForStart", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "PodsReady"))
            .is_some_and(|c| c == ("False".into(), "WaitForStart".into()))
    })
    .await;
    let mut j = fake.get::<Job>(Some("team-a"), "train").unwrap();
    j.status = Some(yaml("active: 2\nready: 2"));
    fake.put(&j);
    wait_for(5, "PodsReady=True", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "PodsReady"))
            .is_some_and(|c| c == ("True".into(), "Started".into()))
    })
    .await;
    // Past the timeout, a ready workload stays admitted.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let w = get_workload(&fake, &name).unwrap();
    assert!(condition(&w, "Evicted").is_none(), "{:#?}", w.status);
    assert!(w.status.unwrap().admission.is_some());
    op.abort();
}

#[tokio::test]
async fn timeout_evicts_requeues_with_backoff_then_deactivates_at_the_limit() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&job("stuck", 1, 1, None));
    let op = start(&fake, "op", pods_ready_config(Some(1), 300));
    wait_for(5, "workload", || workload_of(&fake, "stuck").is_some()).await;
    let name = workload_of(&fake, "stuck").unwrap().metadata.name.unwrap();

    // Wait for the end state, then read the story from the writes: transient states last only milliseconds.
    wait_for(10, "deactivated and quota released", || {
        get_workload(&fake, &name).is_some_and(|w| {
            w.spec.active == Some(false) && w.status.is_some_and(|s| s.admission.is_none())
        })
    })
    .await;
    let statuses: Vec<serde_json::Value> =
        writes(&fake, "PATCH", &format!("/workloads/{name}/status"))
            .into_iter()
            .filter_map(|r| r.body.map(|b| b["status"].clone()))
            .collect();
    let cond = |s: &serde_json::Value, t: &str| {
        s["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t).cloned())
            .unwrap_or_default()
    };
    let step = |from: usize, what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| {
        statuses[from..]
            .iter()
            .position(pred)
            .map(|p| p + from)
            .unwrap_or_else(|| panic!("no {what} after write {from}: {statuses:#?}"))
    };
    // First timeout: evicted with PodsReadyTimeout, requeueState count 1 with a requeueAt.
    let evicted = step(0, "timeout eviction", &|s| {
        cond(s, "Evicted")["reason"] == "PodsReadyTimeout"
            && cond(s, "Evicted")["status"] == "True"
            && s["requeueState"]["count"] == 1
            && s["requeueState"]["requeueAt"].is_string()
    });
    assert_eq!(
        cond(&statuses[evicted], "Evicted")["message"],
        format!("Exceeded the PodsReady timeout team-a/{name}")
    );
    // Its quota released and requeued (Requeued=False while backing off), then the backoff ends.
    let requeued = step(evicted, "requeue", &|s| {
        s["admission"].is_null() && s.get("admission").is_some()
    });
    assert_eq!(cond(&statuses[requeued], "Requeued")["status"], "False");
    let backoff = step(requeued, "backoff end", &|s| {
        cond(s, "Requeued")["reason"] == "BackoffFinished"
            && s["requeueState"]["requeueAt"].is_null()
    });
    // Admitted again, then the second timeout exceeds backoffLimitCount 1: deactivated.
    let readmitted = step(backoff, "re-admission", &|s| s["admission"].is_object());
    let target = step(readmitted, "deactivation target", &|s| {
        cond(s, "DeactivationTarget")["reason"] == "RequeuingLimitExceeded"
    });
    // Kueue names the cause in the Evicted reason and message.
    let deactivated = step(target, "eviction as deactivated", &|s| {
        cond(s, "Evicted")["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    });
    assert!(deactivated > target);
    assert_eq!(
        cond(&statuses[deactivated], "Evicted")["message"],
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    );
    let spec_patches = writes(&fake, "PATCH", &format!("/workloads/{name}"));
    assert_eq!(spec_patches.len(), 1);
    assert_eq!(
        spec_patches[0].body.as_ref().unwrap()["spec"],
        serde_json::json!({"active": false})
    );
    assert_eq!(
        admission_writes(&fake, &name),
        2,
        "not admitted again while inactive"
    );
    op.abort();
}

#[tokio::test]
async fn a_restarted_operator_keeps_the_backoff_and_the_requeue_count_from_status() {
    // Kueue keeps the eviction state across restarts: a workload backing off after a PodsReady timeout stays out
    // of the queue until its requeueAt, and its next timeout counts on from the recorded requeue count.
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&job("stuck", 1, 1, None));
    let mut cfg = pods_ready_config(None, 300);
    if let Some(w) = cfg.wait_for_pods_ready.as_mut() {
        w.backoff_base = Duration::from_secs(3);
        w.backoff_max = Duration::from_secs(6);
    }
    let first = start(&fake, "first", cfg.clone());
    wait_for(5, "workload", || workload_of(&fake, "stuck").is_some()).await;
    let name = workload_of(&fake, "stuck").unwrap().metadata.name.unwrap();
    let backing_off = |w: &api::Workload| {
        w.status.as_ref().is_some_and(|s| {
            s.admission.is_none()
                && s.requeue_state
                    .as_ref()
                    .is_some_and(|r| r.count == Some(1) && r.requeue_at.is_some())
        })
    };
    wait_for(5, "evicted and backing off", || {
        get_workload(&fake, &name).is_some_and(|w| backing_off(&w))
    })
    .await;
    first.abort();
    let requeue_at = get_workload(&fake, &name)
        .and_then(|w| w.status?.requeue_state?.requeue_at)
        .unwrap()
        .0;
    let admissions_before = admission_writes(&fake, &name);

    let second = start(&fake, "second", cfg);
    // Until requeueAt the restarted operator leaves it out of the queue (half a second of slack for the
    // whole-second precision of status times).
    while k8s_openapi::jiff::Timestamp::now() < requeue_at - std::time::Duration::from_millis(500) {
        assert_eq!(
            admission_writes(&fake, &name),
            admissions_before,
            "admitted before its requeueAt {requeue_at}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Then it is admitted again, times out again, and the count goes on from 1.
    wait_for(10, "second timeout with requeue count 2", || {
        get_workload(&fake, &name).is_some_and(|w| {
            w.status
                .as_ref()
                .and_then(|s| s.requeue_state.as_ref())
                .is_some_and(|r| r.count == Some(2))
        })
    })
    .await;
    assert_eq!(admission_writes(&fake, &name), admissions_before + 1);
    second.abort();
}
