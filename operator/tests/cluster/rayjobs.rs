//! KubeRay RayJobs, RayClusters and RayServices through the API server, with KubeRay's own CRDs (from its Go module,
//! `tests/control-plane/crds`) and the integrations enabled in the Configuration, as Kueue v0.19 requires. No
//! KubeRay controller runs: the objects alone are enough. A RayJob is applied with kubectl, suspended by the
//! webhook, admitted as a Workload of pod sets head, its worker group and the submitter (K8sJobMode, the CRD's
//! default), unsuspended with the flavor's node selector on every template, then preempted by a higher-priority
//! RayJob; a RayCluster is suspended, admitted and unsuspended; a RayService is suspended in its cluster config,
//! admitted, unsuspended and preempted by a higher-priority RayService. The objects are read untyped, as kubectl
//! shows them.

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use sluice_operator::jobs::workload_name;
use sluice_sdk::kueue::v1beta2::Workload;

use super::jobsets::{a100_queue, third_party_plane};
use super::plane::ControlPlane;
use super::support::*;

/// A RayJob in `ml/queue`: a CPU head and the worker group `workers` of 2 pods of 4 GPUs (the queue's 8).
/// `spec` holds more fields of its spec (`submissionMode`, `shutdownAfterJobFinishes`).
fn rayjob(name: &str, labels: &str, spec: &[&str]) -> String {
    let spec = spec.join("\n  ");
    format!(
        r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  entrypoint: python /home/ray/train.py
  {spec}
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {{dashboard-host: "0.0.0.0"}}
      template:
        spec:
          containers: [{{name: ray-head, image: ray, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
    workerGroupSpecs:
    - groupName: workers
      replicas: 2
      minReplicas: 2
      maxReplicas: 2
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-worker, image: ray, resources: {{requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}}}}}}]
"#
    )
}

fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", kind))
}

/// `spec.suspend` (a RayService's cluster's, `spec.rayClusterConfig.suspend`), false when absent.
fn suspended(o: &DynamicObject) -> bool {
    let spec = &o.data["spec"];
    let at = if spec.get("rayClusterConfig").is_some() {
        &spec["rayClusterConfig"]
    } else {
        spec
    };
    at["suspend"].as_bool().unwrap_or(false)
}

/// The Ray cluster spec of a RayJob (`spec.rayClusterSpec`), a RayService (`spec.rayClusterConfig`) or a RayCluster
/// (`spec`).
fn cluster_spec(o: &DynamicObject) -> &Value {
    let spec = &o.data["spec"];
    ["rayClusterSpec", "rayClusterConfig"]
        .iter()
        .find_map(|f| spec.get(f))
        .unwrap_or(spec)
}

/// The pod templates of the head and of each worker group, in that order.
fn templates(o: &DynamicObject) -> Vec<&Value> {
    let c = cluster_spec(o);
    let mut out = vec![&c["headGroupSpec"]["template"]];
    if let Some(groups) = c["workerGroupSpecs"].as_array() {
        out.extend(groups.iter().map(|g| &g["template"]));
    }
    out
}

fn pool(template: &Value) -> Option<&str> {
    template["spec"]["nodeSelector"]["pool"].as_str()
}

/// Whether the head's and every worker group's template runs on the a100 flavor.
fn on_a100(o: &DynamicObject) -> bool {
    templates(o).iter().all(|t| pool(t) == Some("a100"))
}

/// Whether no template of the cluster has a node selector.
fn restored(o: &DynamicObject) -> bool {
    templates(o)
        .iter()
        .all(|t| t["spec"].get("nodeSelector").is_none_or(Value::is_null))
}

fn pod_sets(w: &Workload) -> Vec<(&str, i32)> {
    w.spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect()
}

/// The Workload is named as Kueue names it and owned by the object.
fn assert_named_and_owned(w: &Workload, o: &DynamicObject, kind: &str) {
    let uid = o.metadata.uid.as_deref().expect("uid");
    let name = o.metadata.name.as_deref().expect("name");
    assert_eq!(
        w.metadata.name.as_deref(),
        Some(workload_name(kind, "ray.io", name, uid).as_str())
    );
    let owner = &w.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.uid.as_str()
        ),
        ("ray.io/v1", kind, uid)
    );
}

/// A control plane named `name` with the KubeRay integrations and a queue of 8 GPUs that also covers memory (the
/// submitter pod Kueue accounts for requests memory); None when no control plane is built.
async fn ray_plane(name: &str) -> Option<(ControlPlane, Installed)> {
    let setup = a100_queue(
        "ml",
        "[cpu, memory, nvidia.com/gpu]",
        "[{name: cpu, nominalQuota: 32}, {name: memory, nominalQuota: 64Gi}, {name: nvidia.com/gpu, nominalQuota: 8}]",
    );
    third_party_plane(
        name,
        &[
            "batch/job",
            "ray.io/rayjob",
            "ray.io/raycluster",
            "ray.io/rayservice",
        ],
        &setup,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rayjobs_are_admitted_and_preempted_through_the_api_server() {
    let Some((plane, installed)) = ray_plane("rayjobs").await else {
        return;
    };
    let client = installed.client.clone();

    // Kueue manages a RayJob only when it deletes its cluster once finished.
    let kept = plane.kubectl_output(
        &["apply", "-f", "-"],
        Some(&rayjob("kept", "", &["shutdownAfterJobFinishes: false"])),
    );
    let err = String::from_utf8_lossy(&kept.stderr);
    assert!(
        !kept.status.success() && err.contains("shutdownAfterJobFinishes"),
        "a RayJob keeping its cluster was not refused: {err}"
    );

    // No submissionMode: the CRD defaults it to K8sJobMode, whose submitter pod Kueue counts.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&rayjob("low", "", &["shutdownAfterJobFinishes: true"])),
    );
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &resource("RayJob"));
    let created = jobs.get("low").await.expect("rayjob low");
    let low_wl = workload_of(&client, "ml", "low").await;
    assert!(
        suspended(&created) || has_condition(&low_wl, "Admitted"),
        "the webhook did not suspend the RayJob at creation"
    );
    assert_named_and_owned(&low_wl, &created, "RayJob");
    assert_eq!(
        pod_sets(&low_wl),
        [("head", 1), ("workers", 2), ("submitter", 1)]
    );
    eventually(60, "low admitted and unsuspended on a100", || async {
        let job = jobs.get("low").await.ok()?;
        (!suspended(&job) && on_a100(&job)).then_some(())
    })
    .await;
    let low = jobs.get("low").await.expect("low");
    // Kueue writes the submitter's template, with the submitter pod set's node selector, when it starts the job.
    assert_eq!(
        pool(&low.data["spec"]["submitterPodTemplate"]),
        Some("a100"),
        "{}",
        low.data["spec"]
    );
    // What Sluice does not read came through its writes.
    assert_eq!(low.data["spec"]["entrypoint"], "python /home/ray/train.py");
    assert_eq!(low.data["spec"]["shutdownAfterJobFinishes"], true);
    assert_eq!(
        cluster_spec(&low)["headGroupSpec"]["rayStartParams"]["dashboard-host"],
        "0.0.0.0"
    );

    // In HTTPMode the job is submitted from outside the cluster: no submitter pod set.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&rayjob(
            "high",
            ", kueue.x-k8s.io/priority-class: high",
            &["shutdownAfterJobFinishes: true", "submissionMode: HTTPMode"],
        )),
    );
    let high_wl = workload_of(&client, "ml", "high").await;
    assert_eq!(pod_sets(&high_wl), [("head", 1), ("workers", 2)]);
    eventually(60, "low suspended with its templates restored", || async {
        let job = jobs.get("low").await.ok()?;
        (suspended(&job) && restored(&job)).then_some(())
    })
    .await;
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    assert_preempted_in_cluster_queue(&wls, low_wl.metadata.name.as_deref().unwrap()).await;
    eventually(60, "high unsuspended on a100", || async {
        let job = jobs.get("high").await.ok()?;
        (!suspended(&job) && on_a100(&job)).then_some(())
    })
    .await;
    // Neither Workload was taken for a changed job: what the API server stored matches what the job builds (the
    // operator's events are written: its Started events are there).
    let events = |reason: &str| {
        let selector = format!("reason={reason}");
        let out = plane.kubectl_output(
            &[
                "get",
                "events",
                "-n",
                "ml",
                "--field-selector",
                &selector,
                "-o",
                "name",
            ],
            None,
        );
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    eventually(30, "Started events", || async {
        (events("Started") >= 2).then_some(())
    })
    .await;
    assert_eq!(events("UpdatedWorkload"), 0);
}

/// A RayCluster in `ml/queue` with `labels` (flow YAML entries after the queue name): a CPU head and the worker
/// group `Serve` of 2 replicas of 2 hosts of 2 GPUs (the queue's 8).
fn raycluster(name: &str, autoscaling: bool, labels: &str) -> String {
    format!(
        r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  enableInTreeAutoscaling: {autoscaling}
  headGroupSpec:
    rayStartParams: {{}}
    template:
      spec:
        containers: [{{name: ray-head, image: ray, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
  workerGroupSpecs:
  - groupName: Serve
    replicas: 2
    numOfHosts: 2
    minReplicas: 2
    maxReplicas: 2
    rayStartParams: {{}}
    template:
      spec:
        containers: [{{name: ray-worker, image: ray, resources: {{requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "2"}}}}}}]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rayclusters_are_admitted_and_preempted_through_the_api_server() {
    let Some((plane, installed)) = ray_plane("rayclusters").await else {
        return;
    };
    let client = installed.client.clone();

    // Kueue refuses a managed cluster that scales itself (workload slicing is not enabled).
    let scaling = plane.kubectl_output(
        &["apply", "-f", "-"],
        Some(&raycluster("scaling", true, "")),
    );
    let err = String::from_utf8_lossy(&scaling.stderr);
    assert!(
        !scaling.status.success() && err.contains("enableInTreeAutoscaling"),
        "an autoscaling RayCluster was not refused: {err}"
    );

    plane.kubectl(&["apply", "-f", "-"], Some(&raycluster("serve", false, "")));
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &resource("RayCluster"));
    let created = clusters.get("serve").await.expect("raycluster serve");
    let wl = workload_of(&client, "ml", "serve").await;
    assert!(
        suspended(&created) || has_condition(&wl, "Admitted"),
        "the webhook did not suspend the RayCluster at creation"
    );
    assert_named_and_owned(&wl, &created, "RayCluster");
    // The worker group's pod set is its name lowercased, of replicas x numOfHosts pods.
    assert_eq!(pod_sets(&wl), [("head", 1), ("serve", 4)]);
    eventually(60, "serve admitted and unsuspended on a100", || async {
        let c = clusters.get("serve").await.ok()?;
        (!suspended(&c) && on_a100(&c)).then_some(())
    })
    .await;
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    let admitted = wls
        .get(wl.metadata.name.as_deref().unwrap())
        .await
        .expect("workload");
    assert!(has_condition(&admitted, "Admitted"));

    // A higher-priority cluster needs the queue's 8 GPUs: serve is preempted, suspended with its templates
    // restored, and the new one runs on a100.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&raycluster(
            "urgent",
            false,
            ", kueue.x-k8s.io/priority-class: high",
        )),
    );
    eventually(
        60,
        "serve suspended with its templates restored",
        || async {
            let c = clusters.get("serve").await.ok()?;
            (suspended(&c) && restored(&c)).then_some(())
        },
    )
    .await;
    assert_preempted_in_cluster_queue(&wls, wl.metadata.name.as_deref().unwrap()).await;
    eventually(60, "urgent unsuspended on a100", || async {
        let c = clusters.get("urgent").await.ok()?;
        (!suspended(&c) && on_a100(&c)).then_some(())
    })
    .await;
}

/// A RayService in `ml/queue` serving on a CPU head and the worker group `replicas` of 2 pods of 4 GPUs (the queue's 8).
fn rayservice(name: &str, labels: &str) -> String {
    format!(
        r#"
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  serveConfigV2: |
    applications:
    - name: llm
      import_path: serve.app
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-head, image: ray, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
    workerGroupSpecs:
    - groupName: replicas
      replicas: 2
      minReplicas: 2
      maxReplicas: 2
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-worker, image: ray, resources: {{requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}}}}}}]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rayservices_are_admitted_and_preempted_through_the_api_server() {
    let Some((plane, installed)) = ray_plane("rayservices").await else {
        return;
    };
    let client = installed.client.clone();

    plane.kubectl(&["apply", "-f", "-"], Some(&rayservice("low", "")));
    let services: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &resource("RayService"));
    let created = services.get("low").await.expect("rayservice low");
    let low_wl = workload_of(&client, "ml", "low").await;
    assert!(
        suspended(&created) || has_condition(&low_wl, "Admitted"),
        "the webhook did not suspend the RayService's cluster at creation: {}",
        created.data["spec"]
    );
    assert_named_and_owned(&low_wl, &created, "RayService");
    assert_eq!(pod_sets(&low_wl), [("head", 1), ("replicas", 2)]);
    eventually(60, "low admitted and unsuspended on a100", || async {
        let s = services.get("low").await.ok()?;
        (!suspended(&s) && on_a100(&s)).then_some(())
    })
    .await;
    let low = services.get("low").await.expect("low");
    // What Sluice does not read came through its writes.
    assert!(
        low.data["spec"]["serveConfigV2"]
            .as_str()
            .is_some_and(|c| c.contains("serve.app"))
    );

    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&rayservice("high", ", kueue.x-k8s.io/priority-class: high")),
    );
    eventually(60, "low suspended with its templates restored", || async {
        let s = services.get("low").await.ok()?;
        (suspended(&s) && restored(&s)).then_some(())
    })
    .await;
    assert_preempted_in_cluster_queue(
        &Api::<Workload>::namespaced(client.clone(), "ml"),
        low_wl.metadata.name.as_deref().unwrap(),
    )
    .await;
    eventually(60, "high unsuspended on a100", || async {
        let s = services.get("high").await.ok()?;
        (!suspended(&s) && on_a100(&s)).then_some(())
    })
    .await;
}
