//! Shared fixtures of the controller tests: Kueue objects, an operator over the fake API server, and waiting.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use serde::de::DeserializeOwned;
use sluice_operator::controller::{Operator, OperatorConfig};
use sluice_operator::leader::Leadership;
use sluice_operator::testing::{FakeApi, RecordedRequest};
use sluice_sdk::kueue::v1beta2 as api;

/// Parses a YAML fixture.
pub fn yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("fixture: {e}\n{text}"))
}

/// Config with fast retries and waitForPodsReady off (tests that need it turn it on).
pub fn config() -> OperatorConfig {
    OperatorConfig {
        retry_base: Duration::from_millis(1),
        retry_max: Duration::from_millis(20),
        wait_for_pods_ready: None,
        ..OperatorConfig::default()
    }
}

/// A namespace, a GPU flavor, ClusterQueue `cq` (8 GPUs, `cpu` 16, preemption of lower priority within it) and
/// LocalQueue `team-a/lq`.
pub fn seed_queues(fake: &FakeApi, gpus: u32) {
    fake.put(&yaml::<Namespace>(
        "metadata: {name: team-a, labels: {team: a}}",
    ));
    fake.put(&yaml::<api::ResourceFlavor>(
        r#"
metadata: {name: a100}
spec:
  nodeLabels: {gpu.example.com/model: a100}
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
"#,
    ));
    fake.put(&yaml::<api::ClusterQueue>(&format!(
        r#"
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {{name: cpu, nominalQuota: "16"}}
      - {{name: nvidia.com/gpu, nominalQuota: "{gpus}"}}
"#
    )));
    fake.put(&yaml::<api::LocalQueue>(
        "metadata: {name: lq, namespace: team-a}\nspec: {clusterQueue: cq}",
    ));
}

/// A queued, suspended Job of `pods` pods with `gpus` GPUs each.
pub fn job(name: &str, pods: i32, gpus: i32, priority_class: Option<&str>) -> Job {
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
  parallelism: {pods}
  completions: {pods}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: trainer
        resources:
          requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}
"#
    ))
}

/// A bare Workload in `team-a/lq` asking for `gpus` GPUs.
pub fn workload(name: &str, gpus: i32, priority: i32) -> api::Workload {
    yaml(&format!(
        r#"
metadata: {{name: {name}, namespace: team-a}}
spec:
  queueName: lq
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}
"#
    ))
}

/// Starts an operator over `fake` as client `name` (leader always, no Events).
pub fn start(fake: &FakeApi, name: &str, config: OperatorConfig) -> tokio::task::JoinHandle<()> {
    let op = Operator::new(fake.client(name), config, Leadership::always()).without_events();
    tokio::spawn(async move {
        if let Err(e) = op.run().await {
            panic!("operator stopped: {e}");
        }
    })
}

/// Starts an operator over `fake` as client `name` (leader always) that posts its Events.
pub fn start_with_events(
    fake: &FakeApi,
    name: &str,
    config: OperatorConfig,
) -> tokio::task::JoinHandle<()> {
    let op = Operator::new(fake.client(name), config, Leadership::always());
    tokio::spawn(async move {
        if let Err(e) = op.run().await {
            panic!("operator stopped: {e}");
        }
    })
}

/// Polls `check` every 10ms until it holds; panics with `what` after `secs` seconds.
pub async fn wait_for(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !check() {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Successful requests of `method` whose path ends with `suffix`.
pub fn writes(fake: &FakeApi, method: &str, suffix: &str) -> Vec<RecordedRequest> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method.as_str() == method && r.path.ends_with(suffix) && r.status < 300)
        .collect()
}

/// Successful Workload status patches that set `status.admission` (an admission written), for `name`.
pub fn admission_writes(fake: &FakeApi, name: &str) -> usize {
    writes(fake, "PATCH", &format!("/workloads/{name}/status"))
        .iter()
        .filter(|r| {
            r.body
                .as_ref()
                .is_some_and(|b| b["status"]["admission"].is_object())
        })
        .count()
}

/// The stored Workload.
pub fn get_workload(fake: &FakeApi, name: &str) -> Option<api::Workload> {
    fake.get::<api::Workload>(Some("team-a"), name)
}

/// Status of a Workload's condition.
pub fn condition(wl: &api::Workload, type_: &str) -> Option<(String, String)> {
    wl.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Whether the Workload holds an admission.
pub fn admitted(fake: &FakeApi, name: &str) -> bool {
    get_workload(fake, name)
        .and_then(|w| w.status)
        .is_some_and(|s| s.admission.is_some())
}
