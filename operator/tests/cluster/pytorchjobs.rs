//! Kubeflow PyTorchJobs through the API server, with the training operator's own CRD (from its Go module,
//! `tests/control-plane/crds`) and the integration enabled in the Configuration, as Kueue v0.19 requires: applied
//! with kubectl, suspended by the webhook, admitted and unsuspended with the flavor's node selector per replica
//! type, then preempted by a higher-priority PyTorchJob.

use kube::Api;
use sluice_sdk::kubeflow::PyTorchJob;
use sluice_sdk::kueue::v1beta2::Workload;

use super::jobsets::{a100_queue, third_party_plane};
use super::support::*;

/// A PyTorchJob in `ml/queue`: a CPU master and 2 workers of 4 GPUs.
fn pytorchjob(name: &str, labels: &str) -> String {
    format!(
        r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  runPolicy: {{cleanPodPolicy: None}}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers: [{{name: pytorch, image: trainer, resources: {{requests: {{cpu: "1"}}}}}}]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers: [{{name: pytorch, image: trainer, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}}}]
"#
    )
}

/// Whether every replica type's template runs on the a100 flavor.
fn on_a100(job: &PyTorchJob) -> bool {
    job.ordered_replicas().iter().all(|(_, r)| {
        r.template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .and_then(|n| n.get("pool"))
            .is_some_and(|p| p == "a100")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pytorchjobs_are_admitted_and_preempted_through_the_api_server() {
    let setup = a100_queue(
        "ml",
        "[cpu, nvidia.com/gpu]",
        "[{name: cpu, nominalQuota: 32}, {name: nvidia.com/gpu, nominalQuota: 8}]",
    );
    let Some((plane, installed)) = third_party_plane(
        "pytorchjobs",
        &["batch/job", "kubeflow.org/pytorchjob"],
        &setup,
    )
    .await
    else {
        return;
    };
    let client = installed.client.clone();

    plane.kubectl(&["apply", "-f", "-"], Some(&pytorchjob("low", "")));
    let jobs: Api<PyTorchJob> = Api::namespaced(client.clone(), "ml");
    let created = jobs.get("low").await.expect("pytorchjob low");
    let low_wl = workload_of(&client, "ml", "low").await;
    assert!(
        created.is_suspended() || has_condition(&low_wl, "Admitted"),
        "the webhook did not suspend the PyTorchJob at creation"
    );
    let sets: Vec<(&str, i32)> = low_wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("master", 1), ("worker", 2)]);
    eventually(60, "low admitted and unsuspended on a100", || async {
        let job = jobs.get("low").await.ok()?;
        (!job.is_suspended() && on_a100(&job)).then_some(())
    })
    .await;
    // What Sluice does not read came through its writes.
    let low = jobs.get("low").await.expect("low");
    assert_eq!(
        low.spec.as_ref().unwrap().run_policy.other["cleanPodPolicy"],
        "None"
    );

    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&pytorchjob("high", ", kueue.x-k8s.io/priority-class: high")),
    );
    eventually(60, "low suspended with its templates restored", || async {
        let job = jobs.get("low").await.ok()?;
        let restored = job.ordered_replicas().iter().all(|(_, r)| {
            r.template
                .spec
                .as_ref()
                .is_some_and(|s| s.node_selector.is_none())
        });
        (job.is_suspended() && restored).then_some(())
    })
    .await;
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    assert_preempted_in_cluster_queue(&wls, low_wl.metadata.name.as_deref().unwrap()).await;
    eventually(60, "high unsuspended on a100", || async {
        let job = jobs.get("high").await.ok()?;
        (!job.is_suspended() && on_a100(&job)).then_some(())
    })
    .await;
}
