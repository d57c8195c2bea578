//! The node agent publishing against the scripted API server: the exact writes, nothing re-sent while the
//! model is unchanged, a periodic resync, failures reported with their cause and retried, and the loop
//! following edits of its (fake) GPUs until it is told to stop.

use std::time::{Duration, Instant};

use http::Method;
use k8s_openapi::api::core::v1::Node;
use sluice_operator::agent::publish::{FIELD_MANAGER, Publisher, Sent};
use sluice_operator::agent::{self, FakeSource, GpuSource};
use sluice_operator::testing::{FakeApi, Fault};
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;
use sluice_sdk::topology::NodeGpus;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn model(name: &str) -> NodeGpus {
    let raw = FakeSource {
        path: fixture(name),
    }
    .read()
    .expect("fixture parses");
    agent::derive(&raw)
}

fn api_with_node(name: &str) -> FakeApi {
    let fake = FakeApi::new();
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}
    }))
    .expect("node");
    fake.put(&node);
    fake
}

fn writes(fake: &FakeApi) -> Vec<(Method, String, String, Option<String>)> {
    fake.requests()
        .into_iter()
        .filter(|r| r.is_write())
        .map(|r| (r.method, r.path, r.query, r.content_type))
        .collect()
}

const RESYNC: Duration = Duration::from_secs(600);

#[tokio::test]
async fn first_publish_applies_the_topology_and_labels_the_node() {
    let fake = api_with_node("gpu-1");
    let mut p = Publisher::new(fake.client("agent"), "gpu-1", RESYNC);
    let m = model("agent-hgx.yaml");
    let sent = p.publish(&m, Instant::now()).await.expect("publishes");
    assert_eq!(
        sent,
        Sent {
            topology: true,
            labels: true,
            status: false
        }
    );
    assert_eq!(
        writes(&fake),
        vec![
            (
                Method::PATCH,
                "/apis/sluice.dev/v1alpha1/nodegputopologies/gpu-1".to_string(),
                format!("fieldManager={FIELD_MANAGER}&force=true"),
                Some("application/apply-patch+yaml".to_string()),
            ),
            (
                Method::PATCH,
                "/api/v1/nodes/gpu-1".to_string(),
                String::new(),
                Some("application/merge-patch+json".to_string()),
            ),
        ]
    );
    let stored: NodeGpuTopology = fake.get(None, "gpu-1").expect("created");
    assert_eq!(stored.spec.node_name, "gpu-1");
    assert_eq!(stored.spec.gpus, m);
    let node: Node = fake.get(None, "gpu-1").expect("node");
    let labels = node.metadata.labels.expect("labels");
    assert_eq!(labels["nvidia.com/gpu.count"], "8");
    assert_eq!(
        labels["nvidia.com/gpu.clique"],
        "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.3"
    );
    // The labels the node had are kept (merge patch).
    assert_eq!(labels["kubernetes.io/hostname"], "gpu-1");
}

#[tokio::test]
async fn unchanged_models_are_not_resent_until_the_resync() {
    let fake = api_with_node("gpu-1");
    let mut p = Publisher::new(fake.client("agent"), "gpu-1", RESYNC);
    let m = model("agent-hgx.yaml");
    let t0 = Instant::now();
    p.publish(&m, t0).await.expect("publishes");
    let before = writes(&fake).len();

    let sent = p
        .publish(&m, t0 + Duration::from_secs(30))
        .await
        .expect("ok");
    assert_eq!(sent, Sent::default());
    assert_eq!(writes(&fake).len(), before, "nothing re-sent");

    // A GPU turns unhealthy: the topology changes, the GFD labels do not.
    let mut sick = m.clone();
    sick.gpus[3].health.healthy = false;
    sick.gpus[3].health.xid_errors = vec![79];
    let sent = p
        .publish(&sick, t0 + Duration::from_secs(60))
        .await
        .expect("ok");
    assert_eq!(
        sent,
        Sent {
            topology: true,
            labels: false,
            status: false
        }
    );
    let stored: NodeGpuTopology = fake.get(None, "gpu-1").expect("stored");
    assert!(!stored.spec.gpus.gpus[3].health.healthy);

    // After the resync period both are sent again, unchanged.
    let sent = p
        .publish(&sick, t0 + RESYNC + Duration::from_secs(60))
        .await
        .expect("ok");
    assert_eq!(
        sent,
        Sent {
            topology: true,
            labels: true,
            status: false
        }
    );
}

#[tokio::test]
async fn failures_name_the_node_and_the_cause_and_are_retried() {
    let fake = api_with_node("gpu-1");
    let mut p = Publisher::new(fake.client("agent"), "gpu-1", RESYNC);
    let m = model("agent-pcie.yaml");
    fake.inject(Fault {
        method: Some(Method::PATCH),
        path_contains: "nodegputopologies".into(),
        status: 500,
        times: 1,
    });
    let t0 = Instant::now();
    let err = p
        .publish(&m, t0)
        .await
        .expect_err("the API server failed")
        .to_string();
    assert!(
        err.contains("node gpu-1") && err.contains("NodeGpuTopology"),
        "{err}"
    );
    // The next tick sends it again, although the model did not change.
    let sent = p
        .publish(&m, t0 + Duration::from_secs(1))
        .await
        .expect("retried");
    assert!(sent.topology && sent.labels);
    assert!(fake.get::<NodeGpuTopology>(None, "gpu-1").is_some());

    // An agent started with a wrong node name: the label patch finds no Node, and says what to check.
    let mut wrong = Publisher::new(fake.client("agent"), "no-such-node", RESYNC);
    let err = wrong
        .publish(&m, t0)
        .await
        .expect_err("no node")
        .to_string();
    assert!(
        err.contains("node no-such-node") && err.contains("NODE_NAME"),
        "{err}"
    );
}

#[tokio::test]
async fn the_loop_follows_changes_of_the_gpus_and_stops_when_told() {
    let dir = std::env::temp_dir().join(format!("sluice-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gpus.yaml");
    std::fs::copy(fixture("agent-pcie.yaml"), &file).expect("copy");

    let fake = api_with_node("gpu-1");
    let client = fake.client("agent");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let path = file.clone();
    let task = tokio::spawn(async move {
        let mut a = agent::Agent::new(
            "gpu-1",
            Box::new(FakeSource { path }),
            agent::health::HealthRules::default(),
        );
        a.publisher = Some(Publisher::new(client, "gpu-1", RESYNC));
        a.run(Duration::from_millis(20), async {
            let _ = stopped.await;
        })
        .await;
    });

    let gpus = |fake: &FakeApi| {
        fake.get::<NodeGpuTopology>(None, "gpu-1")
            .map(|t| t.spec.gpus.gpus.len())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while gpus(&fake) != Some(4) {
        assert!(
            Instant::now() < deadline,
            "the first model was never published"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The node's GPUs change (here: the file now describes an 8-GPU HGX board).
    std::fs::copy(fixture("agent-hgx.yaml"), &file).expect("copy");
    while gpus(&fake) != Some(8) {
        assert!(Instant::now() < deadline, "the change was never published");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A file that no longer parses is logged and skipped: the last model stays published.
    std::fs::write(&file, "gpus: [").expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gpus(&fake), Some(8));

    stop.send(()).expect("loop running");
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the loop stops when told")
        .expect("no panic");
    let _ = std::fs::remove_dir_all(&dir);
}
