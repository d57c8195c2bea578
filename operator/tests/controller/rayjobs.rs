//! The KubeRay integrations against the fake API server: a RayJob's Workload (head, worker group, submitter) is
//! admitted, started with its admission on every template, and stopped in one write when preempted; the
//! RayCluster a RayJob creates and a RayJob on an existing cluster get no Workload of their own; a RayService is
//! started in its cluster config, and the RayCluster it makes gets no Workload of its own.

use crate::support::*;
use sluice_operator::testing::FakeApi;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::ray::{RayCluster, RayJob, RayService};

/// A queued, suspended RayJob: a head (1 CPU), a worker group of `workers` pods with `gpus` GPUs each, and a
/// submitter Job of its own template (1 CPU).
fn rayjob(name: &str, workers: i32, gpus: i32, priority_class: Option<&str>) -> RayJob {
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
  entrypoint: python train.py
  shutdownAfterJobFinishes: true
  submissionMode: K8sJobMode
  submitterPodTemplate:
    spec:
      restartPolicy: Never
      containers: [{{name: submit, image: ray, resources: {{requests: {{cpu: "1"}}}}}}]
  rayClusterSpec:
    rayVersion: "2.41.0"
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-head, image: ray, resources: {{requests: {{cpu: "1"}}}}}}]
    workerGroupSpecs:
    - groupName: GPU
      replicas: {workers}
      rayStartParams: {{}}
      template:
        spec:
          containers: [{{name: ray-worker, image: ray, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}}}]
"#
    ))
}

/// A fake API server serving the KubeRay kinds, with the queues of [`seed_queues`] (8 GPUs).
fn ray_api() -> FakeApi {
    let fake = FakeApi::new();
    fake.serve_api("ray.io/v1", &["rayjobs", "rayclusters", "rayservices"]);
    seed_queues(&fake, 8);
    fake
}

fn rayjob_of(fake: &FakeApi, name: &str) -> RayJob {
    fake.get::<RayJob>(Some("team-a"), name).expect("rayjob")
}

fn workload_of(fake: &FakeApi, kind: &str, owner: &str) -> Option<api::Workload> {
    fake.list::<api::Workload>().into_iter().find(|w| {
        w.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == kind && o.name == owner)
    })
}

/// The admitted flavor's node selector on a template, if any.
fn flavor_of(t: &k8s_openapi::api::core::v1::PodTemplateSpec) -> Option<String> {
    t.spec
        .as_ref()?
        .node_selector
        .as_ref()?
        .get("gpu.example.com/model")
        .cloned()
}

#[tokio::test]
async fn a_rayjob_is_admitted_started_and_preempted_in_one_write() {
    let fake = ray_api();
    fake.put(&yaml::<api::WorkloadPriorityClass>(
        "metadata: {name: high}\nvalue: 1000",
    ));
    fake.put(&rayjob("low", 2, 4, None));
    let op = start(&fake, "op", config());
    wait_for(10, "low started", || {
        !rayjob_of(&fake, "low").is_suspended()
    })
    .await;
    let wl = workload_of(&fake, "RayJob", "low").expect("workload");
    assert!(
        wl.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("rayjob-low-")
    );
    let sets: Vec<(&str, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("head", 1), ("gpu", 2), ("submitter", 1)]);
    let started = rayjob_of(&fake, "low");
    let spec = started.spec.as_ref().unwrap();
    let cluster = spec.ray_cluster_spec.as_ref().unwrap();
    for (what, t) in [
        ("head", &cluster.head_group_spec.template),
        ("workers", &cluster.worker_group_specs[0].template),
        ("submitter", spec.submitter_pod_template.as_ref().unwrap()),
    ] {
        assert_eq!(
            flavor_of(t).as_deref(),
            Some("a100"),
            "{what} runs on the admitted flavor"
        );
    }
    // What Sluice does not read came back untouched.
    assert_eq!(spec.other["entrypoint"], "python train.py");
    assert_eq!(cluster.other["rayVersion"], "2.41.0");

    // KubeRay runs it; the higher-priority job needs all 8 GPUs.
    let mut running = started.clone();
    running.status = Some(yaml("jobDeploymentStatus: Running\nrayClusterName: low-x"));
    fake.put(&running);
    fake.put(&rayjob("high", 2, 4, Some("high")));
    wait_for(10, "low suspended", || {
        rayjob_of(&fake, "low").is_suspended()
    })
    .await;
    let low = rayjob_of(&fake, "low");
    let spec = low.spec.as_ref().unwrap();
    let cluster = spec.ray_cluster_spec.as_ref().unwrap();
    assert_eq!(flavor_of(&cluster.head_group_spec.template), None);
    assert_eq!(flavor_of(&cluster.worker_group_specs[0].template), None);
    assert_eq!(
        flavor_of(spec.submitter_pod_template.as_ref().unwrap()),
        None
    );
    let suspends: Vec<_> = writes(&fake, "PATCH", "/rayjobs/low")
        .into_iter()
        .filter(|r| r.body.as_ref().unwrap()["spec"]["suspend"] == true)
        .collect();
    assert_eq!(suspends.len(), 1, "suspended and restored in one write");
    let w = get_workload(&fake, wl.metadata.name.as_deref().unwrap()).unwrap();
    assert_eq!(
        condition(&w, "Preempted"),
        Some(("True".into(), "InClusterQueue".into()))
    );
    // KubeRay deletes the cluster: the eviction completes and the preemptor starts.
    let mut stopped = low.clone();
    stopped.status = Some(yaml("jobDeploymentStatus: Suspended"));
    fake.put(&stopped);
    wait_for(10, "high started", || {
        !rayjob_of(&fake, "high").is_suspended()
    })
    .await;

    // The high job ends: KubeRay's Complete finishes its Workload.
    let mut done = rayjob_of(&fake, "high");
    done.status = Some(yaml(
        "jobDeploymentStatus: Complete\njobStatus: SUCCEEDED\nmessage: done",
    ));
    fake.put(&done);
    let high = workload_of(&fake, "RayJob", "high").expect("workload");
    let name = high.metadata.name.unwrap();
    wait_for(10, "high finished", || {
        get_workload(&fake, &name)
            .and_then(|w| condition(&w, "Finished"))
            .is_some_and(|c| c.0 == "True")
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn a_rayjobs_cluster_and_a_job_on_an_existing_cluster_get_no_workload() {
    let fake = ray_api();
    let parent = fake.put(&rayjob("parent", 1, 1, None));
    let uid = parent["metadata"]["uid"].as_str().unwrap().to_string();
    // The cluster KubeRay creates for the job, carrying its labels.
    let mut cluster: RayCluster = yaml(
        "metadata: {name: parent-raycluster-x, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}",
    );
    cluster.spec = rayjob("parent", 1, 1, None).spec.unwrap().ray_cluster_spec;
    cluster.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayJob".into(),
            name: "parent".into(),
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    fake.put(&cluster);
    // A job submitted to a cluster that already runs: not Kueue's.
    let mut shared = rayjob("on-shared", 1, 1, None);
    let spec = shared.spec.as_mut().unwrap();
    spec.ray_cluster_spec = None;
    spec.suspend = false;
    spec.cluster_selector = [("ray.io/cluster".to_string(), "shared".to_string())].into();
    fake.put(&shared);
    let op = start(&fake, "op", config());
    wait_for(10, "the RayJob started", || {
        !rayjob_of(&fake, "parent").is_suspended()
    })
    .await;
    let owners: Vec<(String, String)> = fake
        .list::<api::Workload>()
        .iter()
        .flat_map(|w| w.metadata.owner_references.clone().unwrap_or_default())
        .map(|o| (o.kind, o.name))
        .collect();
    assert_eq!(owners, [("RayJob".to_string(), "parent".to_string())]);
    assert!(writes(&fake, "PATCH", "/rayclusters/parent-raycluster-x").is_empty());
    assert!(writes(&fake, "PATCH", "/rayjobs/on-shared").is_empty());
    op.abort();
}

#[tokio::test]
async fn a_raycluster_is_admitted_and_started() {
    let fake = ray_api();
    let mut cluster: RayCluster =
        yaml("metadata: {name: serve, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}");
    let mut spec = rayjob("x", 2, 2, None)
        .spec
        .unwrap()
        .ray_cluster_spec
        .unwrap();
    spec.suspend = Some(true);
    cluster.spec = Some(spec);
    fake.put(&cluster);
    let op = start(&fake, "op", config());
    let get = || {
        fake.get::<RayCluster>(Some("team-a"), "serve")
            .expect("cluster")
    };
    wait_for(10, "started", || !get().is_suspended()).await;
    let wl = workload_of(&fake, "RayCluster", "serve").expect("workload");
    let sets: Vec<(&str, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("head", 1), ("gpu", 2)]);
    let spec = get().spec.unwrap();
    assert_eq!(
        flavor_of(&spec.worker_group_specs[0].template).as_deref(),
        Some("a100")
    );
    op.abort();
}

#[tokio::test]
async fn a_rayservice_is_started_in_its_cluster_config_and_its_cluster_is_left_alone() {
    let fake = ray_api();
    let mut cluster_spec = rayjob("x", 2, 2, None)
        .spec
        .unwrap()
        .ray_cluster_spec
        .unwrap();
    cluster_spec.suspend = Some(true);
    let mut svc: RayService = yaml(
        "metadata: {name: llm, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}\n\
         spec: {serveConfigV2: 'applications: []'}",
    );
    svc.spec.as_mut().unwrap().ray_cluster_config = Some(cluster_spec.clone());
    let put = fake.put(&svc);
    let uid = put["metadata"]["uid"].as_str().unwrap().to_string();
    // The cluster KubeRay makes for the service, owned by it.
    let mut cluster: RayCluster = yaml(
        "metadata: {name: llm-raycluster-x, namespace: team-a, labels: {kueue.x-k8s.io/queue-name: lq}}",
    );
    cluster.spec = Some(cluster_spec);
    cluster.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayService".into(),
            name: "llm".into(),
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    fake.put(&cluster);
    let op = start(&fake, "op", config());
    let get = || {
        fake.get::<RayService>(Some("team-a"), "llm")
            .expect("service")
    };
    wait_for(10, "started", || !get().is_suspended()).await;
    let wl = workload_of(&fake, "RayService", "llm").expect("workload");
    let sets: Vec<(&str, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("head", 1), ("gpu", 2)]);
    let spec = get().spec.unwrap();
    let cluster = spec.ray_cluster_config.unwrap();
    assert_eq!(
        flavor_of(&cluster.worker_group_specs[0].template).as_deref(),
        Some("a100")
    );
    assert_eq!(spec.other["serveConfigV2"], "applications: []");
    // One write started it; the service's cluster got no Workload and no write.
    assert_eq!(writes(&fake, "PATCH", "/rayservices/llm").len(), 1);
    assert!(workload_of(&fake, "RayCluster", "llm-raycluster-x").is_none());
    assert!(writes(&fake, "PATCH", "/rayclusters/llm-raycluster-x").is_empty());
    op.abort();
}

#[tokio::test]
async fn a_rayjob_kuberay_found_invalid_is_put_on_hold_and_gives_its_quota_back() {
    let fake = ray_api();
    // KubeRay refused it before it ran: Kueue holds it (`IsOnHold`), out of the queue, and frees its quota.
    let mut bad = rayjob("bad", 2, 4, None);
    bad.status = Some(yaml(
        "jobDeploymentStatus: ValidationFailed\nmessage: bad spec",
    ));
    fake.put(&bad);
    let op = start(&fake, "op", config());
    wait_for(10, "bad on hold", || {
        workload_of(&fake, "RayJob", "bad").is_some_and(|w| {
            condition(&w, "QuotaReserved") == Some(("False".into(), "OnHold".into()))
        })
    })
    .await;
    let wl = workload_of(&fake, "RayJob", "bad").unwrap();
    assert!(wl.status.as_ref().unwrap().admission.is_none());
    let reserved = wl
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "QuotaReserved")
        .unwrap();
    assert_eq!(reserved.message, "Job is on hold");
    assert!(rayjob_of(&fake, "bad").is_suspended(), "never started");

    // All 8 GPUs are free for the next RayJob, and the held one stays out of the queue.
    fake.put(&rayjob("good", 2, 4, None));
    wait_for(10, "good started", || {
        !rayjob_of(&fake, "good").is_suspended()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let wl = workload_of(&fake, "RayJob", "bad").unwrap();
    assert_eq!(
        condition(&wl, "QuotaReserved"),
        Some(("False".into(), "OnHold".into()))
    );
    assert!(rayjob_of(&fake, "bad").is_suspended());
    op.abort();
}
