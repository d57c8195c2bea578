//! Kubeflow Trainer TrainJobs through the API server, with Trainer's own CRDs (from its Go module,
//! `tests/control-plane/crds`) and the integration enabled in the Configuration. No Trainer controller runs: the
//! objects alone are enough, and the test writes the TrainJob's status where the controller would. A TrainJob on a
//! ClusterTrainingRuntime is applied with kubectl, suspended by the webhook with Kueue's runtime patch, admitted as a
//! Workload of its runtime's pod sets, started with the flavor's node selector in Kueue's runtime patch, then
//! preempted by a higher-priority TrainJob: suspended at once, its admission cleared only once none of its Jobs is
//! active, and only then is the preemptor admitted.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use sluice_operator::jobs::workload_name;
use sluice_sdk::kueue::v1beta2::Workload;

use super::jobsets::{a100_queue, third_party_plane};
use super::plane::ControlPlane;
use super::support::*;

/// Trainer's `torch-distributed` runtime (one node by default).
const RUNTIME: &str = r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                containers: [{name: node, image: pytorch/pytorch}]
"#;

/// A TrainJob in `ml/queue` on `torch-distributed`: 2 nodes of 4 GPUs (the queue's 8).
fn trainjob(name: &str, labels: &str) -> String {
    format!(
        r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  runtimeRef: {{name: torch-distributed}}
  trainer:
    image: my/trainer
    numNodes: 2
    resourcesPerNode: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}
"#
    )
}

fn resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "trainer.kubeflow.org",
        "v1alpha1",
        "TrainJob",
    ))
}

fn suspended(o: &DynamicObject) -> bool {
    o.data["spec"]["suspend"].as_bool().unwrap_or(false)
}

/// Kueue's runtime patch of the TrainJob.
fn kueue_patch(o: &DynamicObject) -> Option<&Value> {
    o.data["spec"]["runtimePatches"]
        .as_array()?
        .iter()
        .find(|p| p["manager"] == "kueue.x-k8s.io/manager")
}

/// The node pool Kueue's runtime patch gives the `node` replicated job, if it carries an admission.
fn patched_pool(o: &DynamicObject) -> Option<String> {
    let jobs =
        kueue_patch(o)?["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"].as_array()?;
    let node = jobs.iter().find(|j| j["name"] == "node")?;
    node["template"]["spec"]["template"]["spec"]["nodeSelector"]["pool"]
        .as_str()
        .map(str::to_string)
}

/// Whether Kueue's runtime patch no longer carries an admission.
fn cleared(o: &DynamicObject) -> bool {
    kueue_patch(o).is_some_and(|p| {
        p["trainingRuntimeSpec"]["template"]["spec"]
            .get("replicatedJobs")
            .is_none_or(Value::is_null)
    })
}

/// Writes the TrainJob's `status.jobsStatus` as Trainer's controller would: `active` Jobs of `node`.
async fn set_active(jobs: &Api<DynamicObject>, name: &str, active: i32) {
    let status = json!({"status": {"jobsStatus": [{"name": "node", "active": active,
        "ready": active, "succeeded": 0, "failed": 0, "suspended": 0}]}});
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status written");
}

/// Applies a TrainJob once the webhook's runtime index has seen its runtime (until then Kueue's webhook denies it).
async fn apply_trainjob(plane: &ControlPlane, manifest: &str) {
    eventually(30, "the TrainJob accepted", || async {
        let out = plane.kubectl_output(&["apply", "-f", "-"], Some(manifest));
        if out.status.success() {
            return Some(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("runtime 'torch-distributed' not found"),
            "the TrainJob was refused: {err}"
        );
        None
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainjobs_are_admitted_and_preempted_through_the_api_server() {
    let setup = a100_queue(
        "ml",
        "[cpu, nvidia.com/gpu]",
        "[{name: cpu, nominalQuota: 32}, {name: nvidia.com/gpu, nominalQuota: 8}]",
    ) + "---"
        + RUNTIME;
    let Some((plane, installed)) = third_party_plane(
        "trainjobs",
        &["batch/job", "trainer.kubeflow.org/trainjob"],
        &setup,
    )
    .await
    else {
        return;
    };
    let client = installed.client.clone();

    // A TrainJob on a runtime that does not exist is denied with Kueue's message.
    let missing = plane.kubectl_output(
        &["apply", "-f", "-"],
        Some(&trainjob("lost", "").replace("torch-distributed", "nowhere")),
    );
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && err.contains("runtime 'nowhere' not found"),
        "a TrainJob on a missing runtime was not refused: {err}"
    );

    apply_trainjob(&plane, &trainjob("low", "")).await;
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &resource());
    let created = jobs.get("low").await.expect("trainjob low");
    let low_wl = workload_of(&client, "ml", "low").await;
    assert!(
        suspended(&created) || has_condition(&low_wl, "Admitted"),
        "the webhook did not suspend the TrainJob at creation"
    );
    assert!(
        kueue_patch(&created).is_some(),
        "the webhook did not add Kueue's runtime patch: {}",
        created.data["spec"]
    );
    let uid = created.metadata.uid.as_deref().expect("uid");
    assert_eq!(
        low_wl.metadata.name.as_deref(),
        Some(workload_name("TrainJob", "trainer.kubeflow.org", "low", uid).as_str())
    );
    let owner = &low_wl.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("TrainJob", uid));
    // The runtime's one replicated job, with the trainer's node count and resources.
    let sets: Vec<(&str, i32)> = low_wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("node", 2)]);

    eventually(60, "low admitted and started on a100", || async {
        let j = jobs.get("low").await.ok()?;
        (!suspended(&j) && patched_pool(&j).as_deref() == Some("a100")).then_some(())
    })
    .await;
    // Reconciled again, the Workload stays the same one (its pod sets match the TrainJob's).
    set_active(&jobs, "low", 2).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let same = workload_of(&client, "ml", "low").await;
    assert_eq!(same.metadata.uid, low_wl.metadata.uid);

    apply_trainjob(
        &plane,
        &trainjob("high", ", kueue.x-k8s.io/priority-class: high"),
    )
    .await;
    eventually(60, "low suspended", || async {
        let j = jobs.get("low").await.ok()?;
        suspended(&j).then_some(())
    })
    .await;
    // Its Jobs are still active: the admission stays written and the preemptor waits.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let low = jobs.get("low").await.expect("low");
    assert_eq!(
        patched_pool(&low).as_deref(),
        Some("a100"),
        "the admission was cleared while Jobs were active"
    );
    let high = jobs.get("high").await.expect("high");
    assert!(suspended(&high), "high started before low's Jobs ended");

    set_active(&jobs, "low", 0).await;
    eventually(60, "low's admission cleared", || async {
        let j = jobs.get("low").await.ok()?;
        (suspended(&j) && cleared(&j)).then_some(())
    })
    .await;
    assert_preempted_in_cluster_queue(
        &Api::<Workload>::namespaced(client.clone(), "ml"),
        low_wl.metadata.name.as_deref().unwrap(),
    )
    .await;
    eventually(60, "high started on a100", || async {
        let j = jobs.get("high").await.ok()?;
        (!suspended(&j) && patched_pool(&j).as_deref() == Some("a100")).then_some(())
    })
    .await;
}
