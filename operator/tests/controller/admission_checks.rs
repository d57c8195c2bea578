//! Admission checks answered by an external controller (here the test, writing the Workload's check states): the
//! job waits with its quota reserved until every check is Ready; a Retry evicts it and it comes back once its
//! requeue time passed; a Rejected deactivates it.

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::kueue::v1beta2::CheckState;

/// The seeded queues and the ClusterQueue gated by AdmissionCheck `prov` (its controller says it is active).
fn checked_queues(fake: &FakeApi) {
    seed_queues(fake, 8);
    // Its controller says it is active (a ClusterQueue with an inactive check admits nothing).
    fake.put(&yaml::<api::AdmissionCheck>(
        r#"
metadata: {name: prov}
spec: {controllerName: example.com/prov}
status:
  conditions:
  - {type: Active, status: "True", reason: Active, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z"}
"#,
    ));
    let mut cq = fake.get::<api::ClusterQueue>(None, "cq").unwrap();
    cq.spec.admission_checks_strategy = Some(yaml("admissionChecks: [{name: prov}]"));
    fake.put(&cq);
}

/// The checked queues and a one-GPU Job: returns its Workload's name once quota is reserved.
async fn reserved_behind_a_check(fake: &FakeApi) -> String {
    checked_queues(fake);
    fake.put(&job("train", 1, 1, None));
    wait_for(20, "quota reserved with the check pending", || {
        fake.list::<api::Workload>().iter().any(|w| {
            w.status.as_ref().is_some_and(|s| {
                s.admission.is_some()
                    && s.admission_checks.len() == 1
                    && s.admission_checks[0].state == Some(CheckState::Pending)
            })
        })
    })
    .await;
    fake.list::<api::Workload>()[0]
        .metadata
        .name
        .clone()
        .unwrap()
}

/// What the check's controller writes: the state of `prov` on the Workload.
fn answer(fake: &FakeApi, name: &str, state: CheckState, requeue_after: Option<i32>) {
    let mut w = get_workload(fake, name).unwrap();
    let st = w.status.as_mut().unwrap();
    st.admission_checks[0].state = Some(state);
    st.admission_checks[0].requeue_after_seconds = requeue_after;
    st.admission_checks[0].last_transition_time = Some(sluice_operator::status::k8s_time(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    ));
    fake.put(&w);
}

fn suspended(fake: &FakeApi) -> bool {
    fake.get::<Job>(Some("team-a"), "train")
        .and_then(|j| j.spec)
        .and_then(|s| s.suspend)
        .unwrap_or(false)
}

#[tokio::test]
async fn a_job_runs_only_once_its_checks_are_ready() {
    let fake = FakeApi::new();
    let op = start(&fake, "op", config());
    let name = reserved_behind_a_check(&fake).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(suspended(&fake), "quota reserved is not admitted");
    let w = get_workload(&fake, &name).unwrap();
    assert_eq!(condition(&w, "QuotaReserved").unwrap().0, "True");
    assert!(condition(&w, "Admitted").is_none(), "{:#?}", w.status);
    answer(&fake, &name, CheckState::Ready, None);
    wait_for(20, "Admitted and the job started", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Admitted"))
            .is_some_and(|c| c == ("True".into(), "Admitted".into()))
            && !suspended(&fake)
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn a_retry_evicts_and_requeues_after_the_checks_time() {
    let fake = FakeApi::new();
    let op = start(&fake, "op", config());
    let name = reserved_behind_a_check(&fake).await;
    answer(&fake, &name, CheckState::Retry, Some(1));
    // Evicted, quota released, checks back to Pending counting the retry, out of the queue until requeueAt.
    wait_for(20, "evicted by the check and released", || {
        get_workload(&fake, &name).is_some_and(|w| {
            condition(&w, "Evicted") == Some(("True".into(), "AdmissionCheck".into()))
                && w.status.as_ref().is_some_and(|s| {
                    s.admission.is_none() && s.admission_checks[0].retry_count == Some(1)
                })
        })
    })
    .await;
    let w = get_workload(&fake, &name).unwrap();
    let st = w.status.as_ref().unwrap();
    let evicted = st.conditions.iter().find(|c| c.type_ == "Evicted").unwrap();
    assert_eq!(
        evicted.message,
        "Evicted due to AdmissionCheck in Retry state: \"prov\""
    );
    assert!(
        st.requeue_state
            .as_ref()
            .and_then(|r| r.requeue_at.as_ref())
            .is_some()
    );
    assert_eq!(st.admission_checks[0].state, Some(CheckState::Pending));
    assert!(suspended(&fake));
    // A second later it is queued again (Requeued=True, BackoffFinished) and reserves quota again.
    wait_for(20, "reserved again after the backoff", || {
        get_workload(&fake, &name).is_some_and(|w| {
            condition(&w, "Requeued") == Some(("True".into(), "BackoffFinished".into()))
                && w.status.as_ref().is_some_and(|s| s.admission.is_some())
        })
    })
    .await;
    answer(&fake, &name, CheckState::Ready, None);
    wait_for(20, "the job started", || !suspended(&fake)).await;
    op.abort();
}

#[tokio::test]
async fn a_rejection_deactivates_the_workload() {
    let fake = FakeApi::new();
    let op = start(&fake, "op", config());
    let name = reserved_behind_a_check(&fake).await;
    answer(&fake, &name, CheckState::Rejected, None);
    wait_for(20, "deactivated and released", || {
        get_workload(&fake, &name).is_some_and(|w| {
            w.spec.active == Some(false) && w.status.as_ref().is_some_and(|s| s.admission.is_none())
        })
    })
    .await;
    let w = get_workload(&fake, &name).unwrap();
    assert_eq!(
        condition(&w, "Evicted"),
        Some(("True".into(), "DeactivatedDueToAdmissionCheck".into()))
    );
    let evicted = w
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Evicted")
        .unwrap();
    assert_eq!(
        evicted.message,
        "The workload is deactivated due to AdmissionCheck in Rejected state: \"prov\""
    );
    assert!(suspended(&fake));
    op.abort();
}

#[tokio::test]
async fn an_inactive_check_keeps_the_cluster_queue_inactive() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&yaml::<api::AdmissionCheck>(
        "metadata: {name: prov}\nspec: {controllerName: example.com/prov}",
    ));
    let mut cq = fake.get::<api::ClusterQueue>(None, "cq").unwrap();
    cq.spec.admission_checks_strategy = Some(yaml("admissionChecks: [{name: prov}]"));
    fake.put(&cq);
    let op = start(&fake, "op", config());
    wait_for(20, "the ClusterQueue inactive, naming the check", || {
        fake.get::<api::ClusterQueue>(None, "cq")
            .and_then(|c| c.status)
            .is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Active"
                        && c.status == "False"
                        && c.reason == "AdmissionCheckInactive"
                        && c.message
                            == "Can't admit new workloads: references inactive AdmissionCheck(s): prov."
                })
            })
    })
    .await;
    op.abort();
}

/// What the check's controller asks for the pods with Ready: `podSetUpdates` for pod set `main`.
fn answer_with_updates(fake: &FakeApi, name: &str, updates: &str) {
    let mut w = get_workload(fake, name).unwrap();
    let st = w.status.as_mut().unwrap();
    st.admission_checks[0].pod_set_updates = yaml(updates);
    fake.put(&w);
    answer(fake, name, CheckState::Ready, None);
}

#[tokio::test]
async fn a_checks_pod_set_updates_reach_the_jobs_pods() {
    let fake = FakeApi::new();
    let op = start(&fake, "op", config());
    let name = reserved_behind_a_check(&fake).await;
    answer_with_updates(
        &fake,
        &name,
        r#"
- name: main
  labels: {capacity: reserved}
  annotations: {example.com/request: r1}
  nodeSelector: {example.com/pool: p1}
  tolerations: [{key: example.com/pool, operator: Exists, effect: NoSchedule}]
"#,
    );
    wait_for(20, "the job started", || !suspended(&fake)).await;
    let template = fake
        .get::<Job>(Some("team-a"), "train")
        .and_then(|j| j.spec)
        .map(|s| s.template)
        .unwrap();
    let meta = template.metadata.unwrap_or_default();
    assert_eq!(
        meta.labels
            .unwrap_or_default()
            .get("capacity")
            .map(String::as_str),
        Some("reserved")
    );
    assert_eq!(
        meta.annotations
            .unwrap_or_default()
            .get("example.com/request")
            .map(String::as_str),
        Some("r1")
    );
    let spec = template.spec.unwrap();
    assert_eq!(
        spec.node_selector
            .unwrap_or_default()
            .get("example.com/pool")
            .map(String::as_str),
        Some("p1")
    );
    assert!(
        spec.tolerations
            .unwrap_or_default()
            .iter()
            .any(|t| t.key.as_deref() == Some("example.com/pool")),
        "the check's toleration"
    );
    op.abort();
}

#[tokio::test]
async fn a_contradicting_pod_set_update_fails_the_workload() {
    let fake = FakeApi::new();
    let op = start(&fake, "op", config());
    let name = reserved_behind_a_check(&fake).await;
    // The pod set's `kueue.x-k8s.io/podset` label is `main`: a check cannot say otherwise.
    answer_with_updates(
        &fake,
        &name,
        "[{name: main, labels: {kueue.x-k8s.io/podset: other}}]",
    );
    wait_for(20, "Finished with FailedToStart", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|c| c == ("True".into(), "FailedToStart".into()))
    })
    .await;
    let w = get_workload(&fake, &name).unwrap();
    let finished = w
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Finished"))
        .unwrap();
    assert_eq!(
        finished.message,
        "in admission check \"prov\": invalid admission check PodSetUpdate: conflict for labels: \
         conflict for key=kueue.x-k8s.io/podset, value1=main, value2=other"
    );
    assert!(suspended(&fake), "the job never started");
    op.abort();
}

#[tokio::test]
async fn a_pending_workload_lists_its_checks_before_it_reserves_quota() {
    // As Kueue's workload controller: the check list follows the LocalQueue's ClusterQueue from the start.
    let fake = FakeApi::new();
    let op = start(&fake, "op", config());
    checked_queues(&fake);
    fake.put(&job("huge", 9, 1, None));
    wait_for(
        5,
        "the check listed as Pending without a reservation",
        || {
            fake.list::<api::Workload>().iter().any(|w| {
                w.status.as_ref().is_some_and(|s| {
                    s.admission.is_none()
                        && s.admission_checks.len() == 1
                        && s.admission_checks[0].name == "prov"
                        && s.admission_checks[0].state == Some(CheckState::Pending)
                })
            })
        },
    )
    .await;
    // The ClusterQueue drops the check: so does the Workload.
    let mut cq = fake.get::<api::ClusterQueue>(None, "cq").unwrap();
    cq.spec.admission_checks_strategy = None;
    fake.put(&cq);
    wait_for(20, "the check list emptied", || {
        fake.list::<api::Workload>().iter().all(|w| {
            w.status
                .as_ref()
                .is_some_and(|s| s.admission_checks.is_empty())
        })
    })
    .await;
    op.abort();
}
