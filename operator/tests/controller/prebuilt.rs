//! Prebuilt Workloads against the fake API server, as Kueue's job framework handles them: a Job naming one
//! (`kueue.x-k8s.io/prebuilt-workload-name`) gets none built for it and waits suspended until it exists, then
//! adopts it (controller owner reference and job-uid label) and starts on its admission; one out of sync with its
//! Job is finished `OutOfSync`; one another object controls is left alone.

use crate::support::*;
use k8s_openapi::api::batch::v1::Job;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;

/// A Job of one pod with `gpus` GPUs naming the prebuilt Workload `prebuilt`.
fn job_on(name: &str, prebuilt: &str) -> Job {
    let mut j = job(name, 1, 2, None);
    j.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(
            "kueue.x-k8s.io/prebuilt-workload-name".into(),
            prebuilt.into(),
        );
    j
}

/// A Workload whose pod set is the Job's of [`job_on`] (`count` pods).
fn prebuilt(name: &str, count: i32) -> api::Workload {
    yaml(&format!(
        r#"
metadata: {{name: {name}, namespace: team-a}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: {count}
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: main
          image: trainer
          resources: {{requests: {{cpu: "1", nvidia.com/gpu: "2"}}}}
"#
    ))
}

fn suspended(fake: &FakeApi, name: &str) -> bool {
    fake.get::<Job>(Some("team-a"), name)
        .and_then(|j| j.spec)
        .and_then(|s| s.suspend)
        .unwrap_or(false)
}

#[tokio::test]
async fn a_job_waits_for_its_prebuilt_workload_then_adopts_it_and_starts() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&job_on("trainer", "pre"));
    let op = start(&fake, "op", config());
    wait_for(10, "queue status", || {
        fake.get::<api::LocalQueue>(Some("team-a"), "lq")
            .is_some_and(|l| l.status.is_some())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        writes(&fake, "POST", "/namespaces/team-a/workloads").is_empty(),
        "no Workload is built for a job naming a prebuilt one"
    );
    assert!(suspended(&fake, "trainer"));

    fake.put(&prebuilt("pre", 1));
    wait_for(10, "trainer started", || !suspended(&fake, "trainer")).await;
    let job_uid = fake
        .get::<Job>(Some("team-a"), "trainer")
        .and_then(|j| j.metadata.uid)
        .unwrap();
    let w = get_workload(&fake, "pre").unwrap();
    let owner = &w.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("Job", "trainer", job_uid.as_str(), Some(true))
    );
    assert_eq!(
        w.metadata.labels.as_ref().unwrap()["kueue.x-k8s.io/job-uid"],
        job_uid
    );
    assert!(admitted(&fake, "pre"));
    assert!(writes(&fake, "POST", "/namespaces/team-a/workloads").is_empty());
    op.abort();
}

#[tokio::test]
async fn a_prebuilt_workload_out_of_sync_is_finished_and_one_controlled_elsewhere_left_alone() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    // Two pods in the Workload, one in the Job: out of sync.
    fake.put(&prebuilt("two", 2));
    fake.put(&job_on("one", "two"));
    // Controlled by another object: not the job's.
    let mut taken = prebuilt("taken", 1);
    taken.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: "someone-else".into(),
            uid: "0000-other".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    fake.put(&taken);
    fake.put(&job_on("late", "taken"));
    let op = start(&fake, "op", config());
    wait_for(10, "out-of-sync Workload finished", || {
        get_workload(&fake, "two").and_then(|w| condition(&w, "Finished"))
            == Some(("True".into(), "OutOfSync".into()))
    })
    .await;
    let w = get_workload(&fake, "two").unwrap();
    let finished = w
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Finished")
        .unwrap();
    assert_eq!(
        finished.message,
        "The prebuilt workload is out of sync with its user job"
    );
    assert!(suspended(&fake, "one"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let t = get_workload(&fake, "taken").unwrap();
    assert_eq!(
        t.metadata.owner_references.as_ref().unwrap()[0].name,
        "someone-else"
    );
    assert!(suspended(&fake, "late"));
    op.abort();
}
