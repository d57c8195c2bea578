//! How the engine task's writes reach the API server: a round's Workload creations, a cycle's admissions and
//! the Job starts they lead to are each kept in flight together (up to `writes_in_flight`).

use std::time::Duration;

use http::Method;
use k8s_openapi::api::core::v1::Namespace;
use sluice_operator::testing::{FakeApi, Latency};
use sluice_sdk::kueue::v1beta2 as api;

use crate::support::*;

/// The namespace `team-a` and flavor `a100`, then `n` ClusterQueues with one pending 1-GPU Workload each
/// (`seed_queue`, `wl-i`): one scheduling cycle admits all of them (it takes one head per ClusterQueue).
fn seed(fake: &FakeApi, n: usize) {
    fake.put(&yaml::<Namespace>("metadata: {name: team-a}"));
    fake.put(&yaml::<api::ResourceFlavor>(
        "metadata: {name: a100}\nspec: {}",
    ));
    for i in 0..n {
        seed_queue(fake, i);
        let mut wl = workload(&format!("wl-{i}"), 1, 0);
        wl.spec.queue_name = format!("lq-{i}");
        fake.put(&wl);
    }
}

/// ClusterQueue `cq-i` (4 GPUs, flavor `a100`) and its LocalQueue `team-a/lq-i`.
fn seed_queue(fake: &FakeApi, i: usize) {
    fake.put(&yaml::<api::ClusterQueue>(&format!(
        r#"
metadata: {{name: cq-{i}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {{name: cpu, nominalQuota: "8"}}
      - {{name: nvidia.com/gpu, nominalQuota: "4"}}
"#
    )));
    fake.put(&yaml::<api::LocalQueue>(&format!(
        "metadata: {{name: lq-{i}, namespace: team-a}}\nspec: {{clusterQueue: cq-{i}}}"
    )));
}

/// Starts an operator over `fake` allowing `in_flight` writes at once, with every `method` request whose path
/// contains `path` held 100 ms by the server.
fn start_slow(
    fake: &FakeApi,
    method: Method,
    path: &str,
    in_flight: usize,
) -> tokio::task::JoinHandle<()> {
    fake.delay(Latency {
        method: Some(method),
        path_contains: path.into(),
        delay: Duration::from_millis(100),
    });
    let config = sluice_operator::controller::OperatorConfig {
        writes_in_flight: in_flight,
        ..config()
    };
    start(fake, "operator", config)
}

/// Admits one cycle's four Workloads against a 100 ms API server with `in_flight` writes allowed; returns the
/// most admission writes the server held at once.
async fn most_at_once(in_flight: usize) -> usize {
    let fake = FakeApi::new();
    seed(&fake, 4);
    let op = start_slow(&fake, Method::PATCH, "/workloads/wl-", in_flight);
    wait_for(20, "all four admitted", || {
        (0..4).all(|i| admitted(&fake, &format!("wl-{i}")))
    })
    .await;
    op.abort();
    for i in 0..4 {
        assert_eq!(admission_writes(&fake, &format!("wl-{i}")), 1, "wl-{i}");
    }
    fake.most_delayed_at_once()
}

#[tokio::test]
async fn one_cycles_admissions_are_written_in_flight_together() {
    assert_eq!(most_at_once(16).await, 4);
}

#[tokio::test]
async fn one_write_in_flight_writes_the_admissions_one_after_another() {
    assert_eq!(most_at_once(1).await, 1);
}

/// Four queued Jobs seen at once against a 100 ms API server: the most Workload creations it held at once.
async fn creations_at_once(in_flight: usize) -> usize {
    let fake = FakeApi::new();
    seed_queues(&fake, 8);
    for i in 0..4 {
        fake.put(&job(&format!("job-{i}"), 1, 1, None));
    }
    let op = start_slow(&fake, Method::POST, "/workloads", in_flight);
    wait_for(20, "four Workloads", || {
        fake.list::<api::Workload>().len() == 4
    })
    .await;
    op.abort();
    assert_eq!(writes(&fake, "POST", "/workloads").len(), 4);
    fake.most_delayed_at_once()
}

#[tokio::test]
async fn new_jobs_workloads_are_created_in_flight_together() {
    assert_eq!(creations_at_once(16).await, 4);
    assert_eq!(creations_at_once(1).await, 1);
}

/// Four Jobs, one in each of `seed`'s LocalQueues, admitted in one cycle against a 100 ms API server: the most
/// Job starts (unsuspending patches) it held at once.
async fn starts_at_once(in_flight: usize) -> usize {
    let fake = FakeApi::new();
    seed(&fake, 0);
    for i in 0..4 {
        seed_queue(&fake, i);
        let mut j = job(&format!("job-{i}"), 1, 1, None);
        j.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("kueue.x-k8s.io/queue-name".into(), format!("lq-{i}"));
        fake.put(&j);
    }
    let op = start_slow(&fake, Method::PATCH, "/jobs/job-", in_flight);
    wait_for(20, "four Jobs started", || {
        (0..4).all(|i| {
            fake.get::<k8s_openapi::api::batch::v1::Job>(Some("team-a"), &format!("job-{i}"))
                .and_then(|j| j.spec)
                .is_some_and(|s| s.suspend == Some(false))
        })
    })
    .await;
    op.abort();
    fake.most_delayed_at_once()
}

#[tokio::test]
async fn one_cycles_jobs_are_started_in_flight_together() {
    assert_eq!(starts_at_once(16).await, 4);
    assert_eq!(starts_at_once(1).await, 1);
}
