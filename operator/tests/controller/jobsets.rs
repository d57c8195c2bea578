//! The JobSet integration against the fake API server: watched once its API is served, its Workload built with a
//! pod set per replicated job, started with the admission, and stopped in one write when preempted.

use crate::support::*;
use sluice_operator::controller::config::DEFAULT_FRAMEWORKS;
use sluice_operator::testing::FakeApi;
use sluice_sdk::jobset::JobSet;
use sluice_sdk::kueue::integrations::{self, Integrations};
use sluice_sdk::kueue::v1beta2 as api;

/// A queued, suspended JobSet: a driver (1 pod, no GPU) and `workers` Jobs of 2 pods with `gpus` GPUs each.
fn jobset(name: &str, workers: i32, gpus: i32, priority_class: Option<&str>) -> JobSet {
    let pc = priority_class
        .map(|p| format!("    kueue.x-k8s.io/priority-class: {p}\n"))
        .unwrap_or_default();
    yaml(&format!(
        r#"
metadata:
  name: {name}
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: lq
{pc}spec:
  suspend: true
  successPolicy: {{operator: All, targetReplicatedJobs: [workers]}}
  replicatedJobs:
  - name: driver
    replicas: 1
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{{name: d, image: trainer, resources: {{requests: {{cpu: "1"}}}}}}]
  - name: workers
    replicas: {workers}
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          spec:
            restartPolicy: Never
            containers: [{{name: w, image: trainer, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}}}]
"#
    ))
}

fn jobset_of(fake: &FakeApi, name: &str) -> JobSet {
    fake.get::<JobSet>(Some("team-a"), name).expect("jobset")
}

fn workload_of(fake: &FakeApi, owner: &str) -> Option<api::Workload> {
    fake.list::<api::Workload>().into_iter().find(|w| {
        w.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "JobSet" && o.name == owner)
    })
}

#[tokio::test]
async fn a_jobset_is_admitted_started_and_preempted_in_one_write() {
    let fake = FakeApi::new();
    fake.serve_api("jobset.x-k8s.io/v1alpha2", &["jobsets"]);
    seed_queues(&fake, 8);
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: high}\nvalue: 1000",
    ));
    fake.put(&jobset("low", 2, 2, None));
    let op = start(&fake, "op", config());
    wait_for(10, "low started", || {
        !jobset_of(&fake, "low").is_suspended()
    })
    .await;
    let wl = workload_of(&fake, "low").expect("workload");
    let sets: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect();
    assert_eq!(
        sets,
        [("driver".to_string(), 1), ("workers".to_string(), 4)]
    );
    let started = jobset_of(&fake, "low");
    for rj in started.replicated_jobs() {
        let spec = rj.pod_template().unwrap().spec.as_ref().unwrap();
        assert_eq!(
            spec.node_selector.as_ref().unwrap()["gpu.example.com/model"],
            "a100",
            "{} runs on the admitted flavor",
            rj.name
        );
    }
    // What Sluice does not read came back untouched.
    assert_eq!(
        started.spec.as_ref().unwrap().other["successPolicy"]["operator"],
        "All"
    );

    // Its Jobs run.
    let mut running = started.clone();
    running.status = Some(yaml(
        "replicatedJobsStatus: [{name: driver, active: 1}, {name: workers, active: 2}]",
    ));
    fake.put(&running);
    // 8 GPUs: the 8 of the higher-priority JobSet need all of them.
    fake.put(&jobset("high", 2, 2, Some("high")));
    wait_for(10, "low suspended", || {
        jobset_of(&fake, "low").is_suspended()
    })
    .await;
    let low = jobset_of(&fake, "low");
    for rj in low.replicated_jobs() {
        let spec = rj.pod_template().unwrap().spec.as_ref().unwrap();
        assert!(
            spec.node_selector.is_none() && spec.tolerations.is_none(),
            "{}: the admission's node selector and tolerations are removed",
            rj.name
        );
    }
    let suspends: Vec<_> = writes(&fake, "PATCH", "/jobsets/low")
        .into_iter()
        .filter(|r| r.body.as_ref().unwrap()["spec"]["suspend"] == true)
        .collect();
    assert_eq!(suspends.len(), 1, "suspended and restored in one write");
    let w = get_workload(&fake, wl.metadata.name.as_deref().unwrap()).unwrap();
    assert_eq!(
        condition(&w, "Preempted"),
        Some(("True".into(), "InClusterQueue".into()))
    );
    // Its Jobs' pods are gone: the eviction completes and the preemptor starts.
    let mut stopped = low.clone();
    stopped.status = Some(yaml(
        "replicatedJobsStatus: [{name: driver, active: 0}, {name: workers, active: 0}]",
    ));
    fake.put(&stopped);
    wait_for(10, "high started", || {
        !jobset_of(&fake, "high").is_suspended()
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn a_finished_or_deleted_jobset_finishes_its_workload() {
    let fake = FakeApi::new();
    fake.serve_api("jobset.x-k8s.io/v1alpha2", &["jobsets"]);
    seed_queues(&fake, 8);
    fake.put(&jobset("done", 1, 1, None));
    fake.put(&jobset("gone", 1, 1, None));
    let op = start(&fake, "op", config());
    wait_for(10, "both started", || {
        !jobset_of(&fake, "done").is_suspended() && !jobset_of(&fake, "gone").is_suspended()
    })
    .await;
    let mut done = jobset_of(&fake, "done");
    done.status = Some(yaml(
        r#"conditions: [{type: Completed, status: "True", reason: AllJobsCompleted,
            message: jobset completed successfully, lastTransitionTime: "2026-12-04T00:00:00Z"}]"#,
    ));
    fake.put(&done);
    let name = workload_of(&fake, "done").unwrap().metadata.name.unwrap();
    wait_for(10, "finished", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Finished"))
            .is_some()
    })
    .await;
    let w = get_workload(&fake, &name).unwrap();
    assert_eq!(
        condition(&w, "Finished"),
        Some(("True".into(), "Succeeded".into()))
    );
    let gone = workload_of(&fake, "gone").unwrap().metadata.name.unwrap();
    fake.remove::<JobSet>(Some("team-a"), "gone");
    wait_for(10, "orphan finished", || {
        get_workload(&fake, &gone)
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|c| c.1 == "OwnerNotFound")
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn jobsets_are_left_alone_while_their_api_is_not_served() {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    fake.put(&jobset("early", 1, 1, None));
    fake.put(&job("j", 1, 1, None));
    let op = start(&fake, "op", config());
    wait_for(10, "the Job admitted", || {
        fake.list::<api::Workload>()
            .iter()
            .any(|w| w.status.as_ref().is_some_and(|s| s.admission.is_some()))
    })
    .await;
    assert!(workload_of(&fake, "early").is_none());
    assert!(
        !fake.requests().iter().any(|r| r.path.contains("/jobsets")),
        "no JobSet request while the API is not served"
    );
    op.abort();
}

#[tokio::test]
async fn a_jobsets_child_job_gets_no_workload_of_its_own() {
    let fake = FakeApi::new();
    fake.serve_api("jobset.x-k8s.io/v1alpha2", &["jobsets"]);
    seed_queues(&fake, 8);
    let parent = fake.put(&jobset("parent", 1, 1, None));
    let uid = parent["metadata"]["uid"].as_str().unwrap().to_string();
    // The JobSet controller's child Job, carrying the queue label from the replicated job's template.
    let mut child = job("parent-workers-0", 2, 1, None);
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "jobset.x-k8s.io/v1alpha2".into(),
            kind: "JobSet".into(),
            name: "parent".into(),
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    child.spec.as_mut().unwrap().suspend = Some(false);
    fake.put(&child);
    let op = start(&fake, "op", config());
    wait_for(10, "the JobSet started", || {
        !jobset_of(&fake, "parent").is_suspended()
    })
    .await;
    let owners: Vec<String> = fake
        .list::<api::Workload>()
        .iter()
        .flat_map(|w| w.metadata.owner_references.clone().unwrap_or_default())
        .map(|o| o.kind)
        .collect();
    assert_eq!(owners, ["JobSet"], "only the JobSet has a Workload");
    assert!(
        writes(&fake, "PATCH", "/jobs/parent-workers-0").is_empty(),
        "the child Job is left to its JobSet"
    );
    op.abort();
}

#[tokio::test]
async fn an_admission_the_jobset_contradicts_finishes_its_workload() {
    let fake = FakeApi::new();
    fake.serve_api("jobset.x-k8s.io/v1alpha2", &["jobsets"]);
    seed_queues(&fake, 8);
    let mut js = jobset("pinned", 1, 1, None);
    // Its workers' template already names another pod set than the one admission gives them.
    js.spec.as_mut().unwrap().replicated_jobs[1]
        .pod_template_mut()
        .metadata
        .get_or_insert_with(Default::default)
        .labels = Some([("kueue.x-k8s.io/podset".to_string(), "other".to_string())].into());
    fake.put(&js);
    let op = start(&fake, "op", config());
    let name = {
        let mut found = None;
        wait_for(10, "workload", || {
            found = workload_of(&fake, "pinned").and_then(|w| w.metadata.name);
            found.is_some()
        })
        .await;
        found.unwrap()
    };
    wait_for(10, "finished as it cannot start", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|c| c == ("True".to_string(), "FailedToStart".to_string()))
    })
    .await;
    assert!(jobset_of(&fake, "pinned").is_suspended());
    op.abort();
}

#[tokio::test]
async fn a_group_served_without_the_kind_is_not_watched() {
    let fake = FakeApi::new();
    // Kubeflow's Notebooks serve kubeflow.org/v1 without the training operator's PyTorchJobs.
    fake.serve_api("kubeflow.org/v1", &["notebooks"]);
    seed_queues(&fake, 8);
    fake.put(&job("j", 1, 1, None));
    let mut cfg = config();
    cfg.integrations = Integrations::new(
        DEFAULT_FRAMEWORKS
            .iter()
            .copied()
            .chain([integrations::PYTORCHJOB]),
        [],
    );
    let op = start(&fake, "op", cfg);
    wait_for(
        10,
        "the Job admitted while PyTorchJobs wait for their CRD",
        || {
            fake.list::<api::Workload>()
                .iter()
                .any(|w| w.status.as_ref().is_some_and(|s| s.admission.is_some()))
        },
    )
    .await;
    assert!(
        !fake
            .requests()
            .iter()
            .any(|r| r.path.contains("/pytorchjobs"))
    );
    op.abort();
}
