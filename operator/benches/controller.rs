//! Controller throughput against the in-memory API server: how many watch events per second the operator
//! absorbs, and how long from a Workload's creation to its admission being written.
//!
//! Run: `CARGO_INCREMENTAL=0 cargo bench -p sluice-operator --bench controller`.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Namespace;
use sluice_operator::controller::{Operator, OperatorConfig};
use sluice_operator::leader::{LeaderElector, Leadership, LeaseConfig};
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;

const EVENTS: usize = 2_000;

fn yaml<T: serde::de::DeserializeOwned>(s: &str) -> T {
    serde_yaml::from_str(s).expect("fixture")
}

fn seed(fake: &FakeApi) {
    fake.put(&yaml::<Namespace>("metadata: {name: team-a}"));
    fake.put(&yaml::<api::ResourceFlavor>(
        "metadata: {name: a100}\nspec: {}",
    ));
    fake.put(&yaml::<api::ClusterQueue>(
        r#"
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: "1000000"}
      - {name: nvidia.com/gpu, nominalQuota: "1000000"}
"#,
    ));
    fake.put(&yaml::<api::LocalQueue>(
        "metadata: {name: lq, namespace: team-a}\nspec: {clusterQueue: cq}",
    ));
}

fn workload(name: &str) -> api::Workload {
    yaml(&format!(
        r#"
metadata: {{name: {name}, namespace: team-a}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}
"#
    ))
}

fn config() -> OperatorConfig {
    OperatorConfig {
        wait_for_pods_ready: None,
        ..OperatorConfig::default()
    }
}

async fn wait(mut done: impl FnMut() -> bool) {
    while !done() {
        tokio::task::yield_now().await;
    }
}

/// A standby replica (never leader) only absorbs: decode, channel, cache. A leader also schedules and writes.
fn watch_events(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("controller");
    group.sample_size(10);
    group.throughput(Throughput::Elements(EVENTS as u64));
    for leader in [false, true] {
        let id = if leader {
            "watch_events_absorbed_and_admitted"
        } else {
            "watch_events_absorbed_standby"
        };
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let fake = FakeApi::new();
                        seed(&fake);
                        let client = fake.client("bench");
                        let leadership = if leader {
                            Leadership::always()
                        } else {
                            LeaderElector::new(
                                client.clone(),
                                LeaseConfig::new("l", "default", "b"),
                            )
                            .1
                        };
                        let op = Operator::new(client, config(), leadership).without_events();
                        let (metrics, health) = (op.metrics.clone(), op.health.clone());
                        let task = tokio::spawn(op.run());
                        wait(|| health.is_ready()).await;
                        let events = || {
                            metrics
                                .watch_events
                                .get_or_create(&vec![("kind", "Workload".to_string())])
                                .get() as usize
                        };
                        let before = events();
                        let start = Instant::now();
                        for i in 0..EVENTS {
                            fake.put(&workload(&format!("w{i}")));
                        }
                        // A leader's own status writes come back as events too: wait for the creations only.
                        wait(|| events() >= before + EVENTS).await;
                        total += start.elapsed();
                        task.abort();
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

/// Creation to admission written: one Workload at a time into a running leader.
fn admission_latency(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let fake = FakeApi::new();
    seed(&fake);
    let op = Operator::new(fake.client("bench"), config(), Leadership::always()).without_events();
    let health = op.health.clone();
    let task = rt.spawn(op.run());
    rt.block_on(wait(|| health.is_ready()));
    let mut n = 0usize;
    let mut group = c.benchmark_group("controller");
    group.sample_size(20);
    group.bench_function("creation_to_admission_written", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let name = format!("lat{n}");
                    n += 1;
                    let start = Instant::now();
                    fake.put(&workload(&name));
                    wait(|| {
                        fake.get_json::<api::Workload>(Some("team-a"), &name)
                            .is_some_and(|w| w["status"]["admission"].is_object())
                    })
                    .await;
                    total += start.elapsed();
                }
                total
            })
        })
    });
    group.finish();
    task.abort();
}

criterion_group!(benches, watch_events, admission_latency);
criterion_main!(benches);
