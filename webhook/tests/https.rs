//! Real AdmissionReview and ConversionReview JSON sent over HTTPS to a server on 127.0.0.1, for every hook: each
//! mutation, each validation rule with its denial message, conversion, and the server's robustness.

mod common;

use std::sync::Arc;

use common::{admission_review, apply_patch, job, start};
use serde_json::{Value, json};
use sluice_webhook::PolicyModuleValidator;

const UID: &str = "3f0e8a54-1d2b-4c6e-9a7f-0b1c2d3e4f50";

fn message(resp: &Value) -> String {
    resp["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Asserts a denial whose message contains every piece.
fn assert_denied(resp: &Value, pieces: &[&str]) {
    assert_eq!(resp["uid"], UID);
    assert_eq!(resp["allowed"], false, "{resp}");
    let m = message(resp);
    for p in pieces {
        assert!(m.contains(p), "message {m:?} lacks {p:?}");
    }
}

fn assert_allowed(resp: &Value) {
    assert_eq!(resp["uid"], UID);
    assert_eq!(resp["allowed"], true, "{resp}");
}

// ---------------------------------------------------------------- Job mutation

#[tokio::test]
async fn job_with_queue_name_is_suspended() {
    let s = start(None).await;
    let mut c = s.client().await;
    let j = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({"parallelism": 2}),
    );
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&j, &resp);
    assert_eq!(out["spec"]["suspend"], true);
    assert_eq!(out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "q");
    // Only the suspend flag changes.
    let mut expected = j.clone();
    expected["spec"]["suspend"] = json!(true);
    assert_eq!(out, expected);
}

#[tokio::test]
async fn job_without_queue_name_gets_the_default_local_queue() {
    let s = start(None).await;
    let mut c = s.client().await;
    let j = job("team", json!({}), json!({}), json!({"suspend": false}));
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&j, &resp);
    assert_eq!(
        out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "default"
    );
    assert_eq!(out["spec"]["suspend"], true);
}

#[tokio::test]
async fn jobs_kueue_does_not_manage_are_untouched() {
    let s = start(None).await;
    let mut c = s.client().await;
    // No queue name and no default LocalQueue in the namespace.
    let j = job("other", json!({}), json!({}), json!({}));
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_allowed(&resp);
    assert!(resp.get("patch").is_none(), "{resp}");
    // kube-system is outside Kueue's default managedJobsNamespaceSelector.
    s.queues.insert("kube-system", "default");
    let j = job("kube-system", json!({}), json!({}), json!({}));
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert!(resp.get("patch").is_none(), "{resp}");
    // Updates are not mutated (Kueue registers the hook for CREATE only).
    let j = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({}),
    );
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("UPDATE", &j, Some(&j)),
        )
        .await;
    assert!(resp.get("patch").is_none(), "{resp}");
}

// ---------------------------------------------------------------- LeaderWorkerSet

fn lws(labels: Value, gpus: &str, ready: i32) -> Value {
    json!({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "infer", "namespace": "team", "labels": labels},
        "spec": {"replicas": 2, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": {"size": 4,
            "leaderTemplate": {"spec": {"containers": [{"name": "l", "image": "vllm"}]}},
            "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "vllm",
                "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}}}},
        "status": {"readyReplicas": ready}
    })
}

#[tokio::test]
async fn a_leaderworkerset_gets_its_templates_annotated_and_its_shapes_frozen() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset";
    let set = lws(json!({}), "8", 0);
    let resp = c
        .review(path, &admission_review("CREATE", &set, None))
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&set, &resp);
    // The namespace's default LocalQueue, on the set and on both templates, with the pod webhook's cue.
    assert_eq!(
        out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "default"
    );
    for t in ["leaderTemplate", "workerTemplate"] {
        let meta = &out["spec"]["leaderWorkerTemplate"][t]["metadata"];
        assert_eq!(
            meta["labels"]["kueue.x-k8s.io/queue-name"], "default",
            "{out}"
        );
        assert_eq!(
            meta["annotations"]["kueue.x-k8s.io/pod-suspending-parent"],
            "leaderworkerset.x-k8s.io/leaderworkerset"
        );
        assert_eq!(
            meta["annotations"]["kueue.x-k8s.io/pod-group-serving"],
            "true"
        );
    }
    assert_eq!(
        out["spec"]["startupPolicy"], "LeaderCreated",
        "the rest is kept"
    );
    // Updates are defaulted too (Kueue registers CREATE and UPDATE).
    let resp = c
        .review(path, &admission_review("UPDATE", &set, Some(&set)))
        .await;
    assert!(resp.get("patch").is_some(), "{resp}");

    let path = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset";
    let q = json!({"kueue.x-k8s.io/queue-name": "q"});
    let mut bad = lws(q.clone(), "8", 0);
    bad["spec"]["replicas"] = json!(-1);
    assert_denied(
        &c.review(path, &admission_review("CREATE", &bad, None))
            .await,
        &[
            "LeaderWorkerSet.leaderworkerset.x-k8s.io \"infer\" is invalid",
            "spec.replicas",
            "invalid LeaderWorkerSet replicas: must be >= 0, got -1",
        ],
    );
    let old = lws(q.clone(), "8", 0);
    assert_denied(
        &c.review(
            path,
            &admission_review("UPDATE", &lws(q.clone(), "4", 0), Some(&old)),
        )
        .await,
        &[
            "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests: Invalid value",
        ],
    );
    let mut scaled = lws(q, "8", 0);
    scaled["spec"]["replicas"] = json!(5);
    assert_allowed(
        &c.review(path, &admission_review("UPDATE", &scaled, Some(&old)))
            .await,
    );
}

// ---------------------------------------------------------------- JobSet

fn jobset(namespace: &str, labels: Value, worker_annotations: Value) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "train", "namespace": namespace, "labels": labels},
        "spec": {
            "successPolicy": {"operator": "All"},
            "replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
                "parallelism": 2, "completions": 2,
                "template": {"metadata": {"annotations": worker_annotations}, "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "w", "image": "busybox",
                        "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}}}]
        }
    })
}

#[tokio::test]
async fn a_jobset_is_suspended_and_only_that_changes() {
    let s = start(None).await;
    let mut c = s.client().await;
    let js = jobset("team", json!({"kueue.x-k8s.io/queue-name": "q"}), json!({}));
    let path = "/mutate-jobset-x-k8s-io-v1alpha2-jobset";
    let resp = c.review(path, &admission_review("CREATE", &js, None)).await;
    assert_allowed(&resp);
    let out = apply_patch(&js, &resp);
    let mut expected = js.clone();
    expected["spec"]["suspend"] = json!(true);
    assert_eq!(out, expected);
    // Without a queue name it gets the namespace's default LocalQueue ("team" has one).
    let bare = jobset("team", json!({}), json!({}));
    let out = apply_patch(
        &bare,
        &c.review(path, &admission_review("CREATE", &bare, None))
            .await,
    );
    assert_eq!(
        out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "default"
    );
    assert_eq!(out["spec"]["suspend"], true);
}

#[tokio::test]
async fn jobset_rules_name_the_replicated_job_and_field() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/validate-jobset-x-k8s-io-v1alpha2-jobset";
    let bad = jobset(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({"kueue.x-k8s.io/podset-slice-required-topology": "rack",
               "kueue.x-k8s.io/podset-slice-size": "5"}),
    );
    let resp = c
        .review(path, &admission_review("CREATE", &bad, None))
        .await;
    assert_denied(
        &resp,
        &[
            "JobSet.jobset.x-k8s.io \"train\" is invalid",
            "spec.replicatedJobs[0].template.spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]",
            "must not be greater than pod set count 4",
        ],
    );
    // The queue name may not change while the JobSet runs.
    let mut old = jobset("team", json!({"kueue.x-k8s.io/queue-name": "q"}), json!({}));
    old["spec"]["suspend"] = json!(false);
    let mut new = old.clone();
    new["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = json!("other");
    let resp = c
        .review(path, &admission_review("UPDATE", &new, Some(&old)))
        .await;
    assert_denied(&resp, &["metadata.labels[kueue.x-k8s.io/queue-name]"]);
    let good = jobset("team", json!({"kueue.x-k8s.io/queue-name": "q"}), json!({}));
    assert_allowed(
        &c.review(path, &admission_review("CREATE", &good, None))
            .await,
    );
}

#[tokio::test]
async fn a_pytorchjob_is_suspended_in_its_run_policy_and_checked_per_replica_type() {
    let s = start(None).await;
    let mut c = s.client().await;
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {
            "Worker": {"replicas": 2, "template": {"metadata": {"annotations": {
                "kueue.x-k8s.io/podset-required-topology": "rack",
                "kueue.x-k8s.io/podset-preferred-topology": "block"}},
                "spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}}}
    });
    let resp = c
        .review(
            "/mutate-kubeflow-org-v1-pytorchjob",
            &admission_review("CREATE", &job, None),
        )
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&job, &resp);
    let mut expected = job.clone();
    expected["spec"]["runPolicy"]["suspend"] = json!(true);
    assert_eq!(out, expected);
    let resp = c
        .review(
            "/validate-kubeflow-org-v1-pytorchjob",
            &admission_review("CREATE", &job, None),
        )
        .await;
    assert_denied(
        &resp,
        &[
            "PyTorchJob.kubeflow.org \"mnist\" is invalid",
            "spec.pytorchReplicaSpecs[Worker].template.metadata.annotations",
            "must not contain more than one topology annotation",
        ],
    );
}

#[tokio::test]
async fn rayjobs_rayclusters_and_rayservices_are_suspended_and_checked_as_kueue_checks_them() {
    let s = start(None).await;
    let mut c = s.client().await;
    let cluster = json!({
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "ray"}]}}}]
    });
    let job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"entrypoint": "python train.py", "rayClusterSpec": cluster}
    });
    let resp = c
        .review(
            "/mutate-ray-io-v1-rayjob",
            &admission_review("CREATE", &job, None),
        )
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&job, &resp);
    let mut expected = job.clone();
    expected["spec"]["suspend"] = json!(true);
    assert_eq!(out, expected);
    // Kueue refuses a managed RayJob that would keep its cluster after the job.
    let resp = c
        .review(
            "/validate-ray-io-v1-rayjob",
            &admission_review("CREATE", &job, None),
        )
        .await;
    assert_denied(
        &resp,
        &[
            "RayJob.ray.io \"train\" is invalid",
            "spec.shutdownAfterJobFinishes",
            "a kueue managed job should delete the cluster after finishing",
        ],
    );
    let mut ok = job.clone();
    ok["spec"]["shutdownAfterJobFinishes"] = json!(true);
    let resp = c
        .review(
            "/validate-ray-io-v1-rayjob",
            &admission_review("CREATE", &ok, None),
        )
        .await;
    assert_allowed(&resp);

    let mut rc = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "serve", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": cluster
    });
    let resp = c
        .review(
            "/mutate-ray-io-v1-raycluster",
            &admission_review("CREATE", &rc, None),
        )
        .await;
    assert_allowed(&resp);
    assert_eq!(apply_patch(&rc, &resp)["spec"]["suspend"], json!(true));
    rc["spec"]["enableInTreeAutoscaling"] = json!(true);
    let resp = c
        .review(
            "/validate-ray-io-v1-raycluster",
            &admission_review("CREATE", &rc, None),
        )
        .await;
    assert_denied(
        &resp,
        &[
            "RayCluster.ray.io \"serve\" is invalid",
            "spec.enableInTreeAutoscaling",
        ],
    );

    // A RayService waits with its cluster's suspend, and is checked as its cluster (Kueue's field path).
    let mut svc = json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "llm", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": cluster}
    });
    let resp = c
        .review(
            "/mutate-ray-io-v1-rayservice",
            &admission_review("CREATE", &svc, None),
        )
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&svc, &resp);
    assert_eq!(out["spec"]["rayClusterConfig"]["suspend"], json!(true));
    assert!(out["spec"].get("suspend").is_none());
    let resp = c
        .review(
            "/validate-ray-io-v1-rayservice",
            &admission_review("CREATE", &out, None),
        )
        .await;
    assert_allowed(&resp);
    svc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["groupName"] = json!("head");
    let resp = c
        .review(
            "/validate-ray-io-v1-rayservice",
            &admission_review("CREATE", &svc, None),
        )
        .await;
    assert_denied(
        &resp,
        &[
            "RayService.ray.io \"llm\" is invalid",
            "spec.rayClusterSpec.workerGroupSpecs[0].groupName",
            "\"head\" is reserved for the head group",
        ],
    );
}

#[tokio::test]
async fn trainjobs_get_kueues_runtime_patch_and_are_checked_on_their_runtimes_pod_sets() {
    let s = start(None).await;
    let mut c = s.client().await;
    let tj = json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"runtimeRef": {"name": "torch", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
                 "trainer": {"numNodes": 2}}
    });
    let resp = c
        .review(
            "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
            &admission_review("CREATE", &tj, None),
        )
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&tj, &resp);
    assert_eq!(out["spec"]["suspend"], json!(true));
    assert_eq!(
        out["spec"]["runtimePatches"],
        json!([{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}])
    );
    // Without its runtime, Kueue denies it with the runtime's name alone.
    let path = "/validate-trainer-kubeflow-org-v1alpha1-trainjob";
    let resp = c
        .review(path, &admission_review("CREATE", &out, None))
        .await;
    assert_denied(&resp, &["runtime 'torch' not found"]);
    let runtime = |annotations: Value| -> sluice_sdk::trainer::TrainingRuntimeSpec {
        serde_json::from_value(json!({"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"metadata": {"annotations": annotations},
                    "spec": {"containers": [{"name": "node", "image": "torch"}]}}}}}]}}}))
        .expect("runtime")
    };
    let key = sluice_sdk::trainer::RuntimeKey::Cluster("torch".into());
    s.runtimes.insert(key.clone(), runtime(json!({})));
    let resp = c
        .review(path, &admission_review("CREATE", &out, None))
        .await;
    assert_allowed(&resp);
    // A slice larger than the trainer's two nodes is refused at Kueue's path, with its hint.
    s.runtimes.insert(
        key,
        runtime(json!({"kueue.x-k8s.io/podset-required-topology": "rack",
            "kueue.x-k8s.io/podset-slice-required-topology": "rack",
            "kueue.x-k8s.io/podset-slice-size": "3"})),
    );
    let resp = c
        .review(path, &admission_review("CREATE", &out, None))
        .await;
    assert_denied(
        &resp,
        &[
            "TrainJob.trainer.kubeflow.org \"llm\" is invalid",
            "job[node].annotations[kueue.x-k8s.io/podset-slice-size]",
            "must not be greater than pod set count 2",
            "Adjust either the \"TrainJob.spec.runtimePatches\" or the \"TrainingRuntime.Template\" annotations",
        ],
    );
}

#[tokio::test]
async fn elastic_job_pods_get_the_elastic_gate() {
    let s = start(None).await;
    let mut c = s.client().await;
    let j = job(
        "other",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({"kueue.x-k8s.io/elastic-job": "true"}),
        json!({"parallelism": 2}),
    );
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    let out = apply_patch(&j, &resp);
    assert_eq!(
        out["spec"]["template"]["spec"]["schedulingGates"],
        json!([{"name": "kueue.x-k8s.io/elastic-job"}])
    );
    assert_eq!(out["spec"]["suspend"], true);
}

#[tokio::test]
async fn default_local_queue_follows_the_index() {
    let s = start(None).await;
    let mut c = s.client().await;
    let j = job("fresh", json!({}), json!({}), json!({}));
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert!(resp.get("patch").is_none());
    s.queues.insert("fresh", "default");
    let resp = c
        .review(
            "/mutate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_eq!(
        apply_patch(&j, &resp)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "default"
    );
}

// ---------------------------------------------------------------- Job validation

#[tokio::test]
async fn job_label_rules_are_enforced_with_kueues_messages() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/validate-batch-v1-job";
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            job(
                "team",
                json!({"kueue.x-k8s.io/queue-name": "Not_A_Name"}),
                json!({}),
                json!({}),
            ),
            vec![
                "Job.batch \"train\" is invalid",
                "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Not_A_Name\"",
                "a lowercase RFC 1123 subdomain",
            ],
        ),
        (
            job(
                "team",
                json!({"kueue.x-k8s.io/max-exec-time-seconds": "-5"}),
                json!({}),
                json!({}),
            ),
            vec![
                "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: -5: should be greater than 0",
            ],
        ),
        (
            job(
                "team",
                json!({"kueue.x-k8s.io/prebuilt-workload-name": "bad name"}),
                json!({}),
                json!({}),
            ),
            vec![
                "metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: \"bad name\"",
            ],
        ),
        (
            job(
                "team",
                json!({}),
                json!({"kueue.x-k8s.io/prebuilt-workload-name": "Bad"}),
                json!({}),
            ),
            vec![
                "metadata.annotations[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: \"Bad\"",
            ],
        ),
        (
            job(
                "team",
                json!({}),
                json!({"kueue.x-k8s.io/job-min-parallelism": "5"}),
                json!({"parallelism": 5}),
            ),
            vec![
                "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: 5: should be between 0 and 4",
            ],
        ),
        (
            job(
                "team",
                json!({}),
                json!({"kueue.x-k8s.io/job-min-parallelism": "2", "kueue.x-k8s.io/elastic-job": "true"}),
                json!({"parallelism": 5}),
            ),
            vec!["partial admission and elastic job cannot be used together"],
        ),
        (
            job(
                "team",
                json!({}),
                json!({"kueue.x-k8s.io/job-completions-equal-parallelism": "true"}),
                json!({"parallelism": 2, "completions": 4}),
            ),
            vec![
                "should not be enabled for NonIndexed jobs",
                "spec.completions: Invalid value: 4: should be equal to parallelism when kueue.x-k8s.io/job-completions-equal-parallelism annotation is true",
            ],
        ),
    ];
    for (object, pieces) in cases {
        let resp = c
            .review(path, &admission_review("CREATE", &object, None))
            .await;
        assert_denied(&resp, &pieces);
        assert_eq!(resp["status"]["code"], 403);
        assert_eq!(resp["status"]["reason"], "Forbidden");
    }
    let ok = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({"suspend": true}),
    );
    let resp = c.review(path, &admission_review("CREATE", &ok, None)).await;
    assert_allowed(&resp);
    assert!(resp.get("warnings").is_none(), "{resp}");
}

#[tokio::test]
async fn job_topology_annotations_are_checked() {
    let s = start(None).await;
    let mut c = s.client().await;
    let mut j = job("team", json!({}), json!({}), json!({"parallelism": 4}));
    j["spec"]["template"]["metadata"] = json!({"annotations": {
        "kueue.x-k8s.io/podset-required-topology": "rack",
        "kueue.x-k8s.io/podset-unconstrained-topology": "true"}});
    let resp = c
        .review(
            "/validate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_denied(
        &resp,
        &[
            "spec.template.metadata.annotations",
            "must not contain more than one topology annotation",
        ],
    );
    j["spec"]["template"]["metadata"] =
        json!({"annotations": {"kueue.x-k8s.io/podset-slice-size": "2"}});
    let resp = c
        .review(
            "/validate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_denied(
        &resp,
        &["may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified"],
    );
}

#[tokio::test]
async fn job_update_rules_are_enforced() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/validate-batch-v1-job";
    let running = json!({"suspend": false, "parallelism": 3});
    let suspended = json!({"suspend": true, "parallelism": 3});
    let q = |name: &str| json!({"kueue.x-k8s.io/queue-name": name});
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (
            job("other", q("q"), json!({}), running.clone()),
            job("other", q("q2"), json!({}), running.clone()),
            vec![
                "metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"q2\": field is immutable",
            ],
        ),
        (
            job("team", q("q"), json!({}), suspended.clone()),
            job("team", json!({}), json!({}), suspended.clone()),
            vec!["queue-name must not be empty in namespace with default queue"],
        ),
        (
            job("other", q("q"), json!({}), running.clone()),
            job(
                "other",
                json!({"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "high"}),
                json!({}),
                running.clone(),
            ),
            vec![
                "metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: \"high\": WorkloadPriorityClass cannot be added to a non-suspended workload",
            ],
        ),
        (
            job(
                "other",
                json!({"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "high"}),
                json!({}),
                suspended.clone(),
            ),
            job("other", q("q"), json!({}), suspended.clone()),
            vec!["WorkloadPriorityClass cannot be removed from a workload"],
        ),
        (
            job(
                "other",
                json!({"kueue.x-k8s.io/max-exec-time-seconds": "60"}),
                json!({}),
                running.clone(),
            ),
            job(
                "other",
                json!({"kueue.x-k8s.io/max-exec-time-seconds": "120"}),
                json!({}),
                running.clone(),
            ),
            vec![
                "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: \"120\": field is immutable",
            ],
        ),
        (
            job(
                "other",
                json!({"kueue.x-k8s.io/prebuilt-workload-name": "wl-a"}),
                json!({}),
                running.clone(),
            ),
            job(
                "other",
                json!({"kueue.x-k8s.io/prebuilt-workload-name": "wl-b"}),
                json!({}),
                running.clone(),
            ),
            vec![
                "metadata.labels[kueue.x-k8s.io/prebuilt-workload-name]: Invalid value: \"wl-b\": field is immutable",
            ],
        ),
        (
            job(
                "other",
                json!({}),
                json!({"kueue.x-k8s.io/job-min-parallelism": "1"}),
                running.clone(),
            ),
            job(
                "other",
                json!({}),
                json!({"kueue.x-k8s.io/job-min-parallelism": "1"}),
                json!({"suspend": false, "parallelism": 2}),
            ),
            vec![
                "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the job is not suspended",
            ],
        ),
        (
            job("other", json!({}), json!({}), running.clone()),
            job(
                "other",
                json!({}),
                json!({"kueue.x-k8s.io/elastic-job": "true"}),
                running.clone(),
            ),
            vec![
                "metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: true: field is immutable",
            ],
        ),
    ];
    for (old, new, pieces) in cases {
        let resp = c
            .review(path, &admission_review("UPDATE", &new, Some(&old)))
            .await;
        assert_denied(&resp, &pieces);
    }
    // While suspended the queue may change.
    let old = job("other", q("q"), json!({}), suspended.clone());
    let new = job("other", q("q2"), json!({}), suspended);
    assert_allowed(
        &c.review(path, &admission_review("UPDATE", &new, Some(&old)))
            .await,
    );
    // Deletes are not reviewed.
    assert_allowed(
        &c.review(path, &admission_review("DELETE", &old, Some(&old)))
            .await,
    );
}

#[tokio::test]
async fn job_naming_a_missing_local_queue_gets_a_warning() {
    let s = start(None).await;
    let mut c = s.client().await;
    let j = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "nope"}),
        json!({}),
        json!({}),
    );
    let resp = c
        .review(
            "/validate-batch-v1-job",
            &admission_review("CREATE", &j, None),
        )
        .await;
    assert_allowed(&resp);
    assert_eq!(
        resp["warnings"],
        json!([
            "LocalQueue \"nope\" does not exist in namespace \"team\"; the Job stays suspended until it does"
        ])
    );
}

// ---------------------------------------------------------------- Pods

fn pod(namespace: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p-0", "namespace": namespace, "labels": labels,
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
}

#[tokio::test]
async fn pod_group_member_is_gated_and_marked_managed() {
    let s = start(None).await;
    let mut c = s.client().await;
    let p = pod(
        "other",
        json!({"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "g"}),
    );
    let resp = c
        .review("/mutate--v1-pod", &admission_review("CREATE", &p, None))
        .await;
    assert_allowed(&resp);
    let out = apply_patch(&p, &resp);
    assert_eq!(out["metadata"]["labels"]["kueue.x-k8s.io/managed"], "true");
    assert_eq!(
        out["metadata"]["finalizers"],
        json!(["kueue.x-k8s.io/managed"])
    );
    assert_eq!(
        out["spec"]["schedulingGates"],
        json!([{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}])
    );
    // A pod without a queue in a namespace without a default LocalQueue stays as it is.
    let p = pod("other", json!({}));
    let resp = c
        .review("/mutate--v1-pod", &admission_review("CREATE", &p, None))
        .await;
    assert!(resp.get("patch").is_none(), "{resp}");
}

#[tokio::test]
async fn pod_labels_are_validated() {
    let s = start(None).await;
    let mut c = s.client().await;
    let p = pod("other", json!({"kueue.x-k8s.io/queue-name": "-bad-"}));
    let resp = c
        .review("/validate--v1-pod", &admission_review("CREATE", &p, None))
        .await;
    assert_denied(
        &resp,
        &[
            "Pod \"p-0\" is invalid",
            "metadata.labels[kueue.x-k8s.io/queue-name]",
        ],
    );
    // Once admitted (the gate gone), the queue name may not change.
    let old = pod("other", json!({"kueue.x-k8s.io/queue-name": "q"}));
    let new = pod("other", json!({"kueue.x-k8s.io/queue-name": "q2"}));
    let resp = c
        .review(
            "/validate--v1-pod",
            &admission_review("UPDATE", &new, Some(&old)),
        )
        .await;
    assert_denied(&resp, &["field is immutable"]);
}

// ---------------------------------------------------------------- Kueue kinds

fn cq(spec: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpus"}, "spec": spec})
}

fn rg(covered: Value, resources: Value) -> Value {
    json!([{"coveredResources": covered, "flavors": [{"name": "h100", "resources": resources}]}])
}

#[tokio::test]
async fn kueue_objects_get_kueues_defaults() {
    let s = start(None).await;
    let mut c = s.client().await;
    let q = cq(
        json!({"resourceGroups": rg(json!(["cpu"]), json!([{"name": "cpu", "nominalQuota": "8"}]))}),
    );
    let resp = c
        .review(
            "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
            &admission_review("CREATE", &q, None),
        )
        .await;
    assert_allowed(&resp);
    assert_eq!(
        apply_patch(&q, &resp)["metadata"]["finalizers"],
        json!(["kueue.x-k8s.io/resource-in-use"])
    );
    let rf = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}});
    let resp = c
        .review(
            "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
            &admission_review("CREATE", &rf, None),
        )
        .await;
    assert_eq!(
        apply_patch(&rf, &resp)["metadata"]["finalizers"],
        json!(["kueue.x-k8s.io/resource-in-use"])
    );
    // PartialAdmission is on by default: a Workload's minCount stays.
    let wl = workload(json!({}));
    let resp = c
        .review(
            "/mutate-kueue-x-k8s-io-v1beta2-workload",
            &admission_review("CREATE", &wl, None),
        )
        .await;
    assert_allowed(&resp);
    assert!(resp.get("patch").is_none(), "{resp}");
}

#[tokio::test]
async fn cluster_queue_rules() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/validate-kueue-x-k8s-io-v1beta2-clusterqueue";
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            cq(
                json!({"resourceGroups": rg(json!(["cpu", "memory"]), json!([{"name": "cpu", "nominalQuota": "8"}]))}),
            ),
            vec![
                "ClusterQueue \"gpus\" is invalid",
                "flavors must have the same number of resources as the coveredResources",
            ],
        ),
        (
            cq(json!({"resourceGroups": rg(json!(["cpu", "memory"]),
                json!([{"name": "memory", "nominalQuota": "8Gi"}, {"name": "cpu", "nominalQuota": "8"}]))})),
            vec!["must match the name in coveredResources"],
        ),
        (
            cq(
                json!({"resourceGroups": rg(json!(["cpu"]), json!([{"name": "cpu", "nominalQuota": "8", "borrowingLimit": "2"}]))}),
            ),
            vec![
                "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: \"2\": must be nil when cohort is empty",
            ],
        ),
        (
            cq(
                json!({"cohortName": "pool", "resourceGroups": rg(json!(["cpu"]), json!([{"name": "cpu", "nominalQuota": "8", "lendingLimit": "9"}]))}),
            ),
            vec![
                "lendingLimit: Invalid value: \"9\": must be less than or equal to the nominalQuota",
            ],
        ),
        (
            cq(
                json!({"cohortName": "pool", "preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}}),
            ),
            vec!["reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"],
        ),
        (
            cq(
                json!({"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "preference": "PreemptionOverBorrowing"}}),
            ),
            vec![
                "spec.flavorFungibility.preference",
                "requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor",
            ],
        ),
    ];
    for (object, pieces) in cases {
        assert_denied(
            &c.review(path, &admission_review("CREATE", &object, None))
                .await,
            &pieces,
        );
    }
    let ok = cq(
        json!({"cohortName": "pool", "resourceGroups": rg(json!(["cpu", "nvidia.com/gpu"]),
        json!([{"name": "cpu", "nominalQuota": "64"}, {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8"}]))}),
    );
    assert_allowed(&c.review(path, &admission_review("CREATE", &ok, None)).await);
}

#[tokio::test]
async fn queue_and_flavor_rules() {
    let s = start(None).await;
    let mut c = s.client().await;
    let lq = |cq: &str| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "team"}, "spec": {"clusterQueue": cq}})
    };
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-localqueue",
            &admission_review("UPDATE", &lq("b"), Some(&lq("a"))),
        )
        .await;
    assert_denied(&resp, &["LocalQueue \"q\" is invalid", "spec.clusterQueue"]);

    let rf = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas"},
        "spec": {"topologyName": "dc"}});
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
            &admission_review("CREATE", &rf, None),
        )
        .await;
    assert_denied(
        &resp,
        &["at least one nodeLabel is required when topology is set"],
    );

    let cohort = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "root"},
        "spec": {"resourceGroups": rg(json!(["cpu"]), json!([{"name": "cpu", "nominalQuota": "8", "lendingLimit": "2"}]))}});
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-cohort",
            &admission_review("CREATE", &cohort, None),
        )
        .await;
    assert_denied(&resp, &["Cohort \"root\" is invalid", "lendingLimit"]);

    let topo = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]}});
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-topology",
            &admission_review("CREATE", &topo, None),
        )
        .await;
    assert_denied(
        &resp,
        &["the kubernetes.io/hostname label can only be used at the lowest level of topology"],
    );

    let wpc = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
        "value": 1000, "description": "x".repeat(3000)});
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-workloadpriorityclass",
            &admission_review("CREATE", &wpc, None),
        )
        .await;
    assert_denied(
        &resp,
        &["WorkloadPriorityClass \"high\" is invalid", "description"],
    );

    let ac = |controller: &str| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "prov"},
            "spec": {"controllerName": controller}})
    };
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-admissioncheck",
            &admission_review(
                "UPDATE",
                &ac("b.example.com/ctl"),
                Some(&ac("a.example.com/ctl")),
            ),
        )
        .await;
    assert_denied(&resp, &["spec.controllerName", "field is immutable"]);
}

fn workload(extra_spec: Value) -> Value {
    let mut spec = json!({"queueName": "q", "podSets": [
        {"name": "main", "count": 4, "minCount": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(e.clone());
    }
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "job-train-1a2b3", "namespace": "team"},
        "spec": spec})
}

#[tokio::test]
async fn workload_rules() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/validate-kueue-x-k8s-io-v1beta2-workload";
    let mut two_min = workload(json!({}));
    two_min["spec"]["podSets"] = json!([
        {"name": "a", "count": 2, "minCount": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
        {"name": "b", "count": 2, "minCount": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]);
    assert_denied(
        &c.review(path, &admission_review("CREATE", &two_min, None))
            .await,
        &[
            "Workload \"job-train-1a2b3\" is invalid",
            "at most one podSet can use minCount",
        ],
    );
    let mut too_many = workload(json!({}));
    too_many["spec"]["podSets"][0]["minCount"] = json!(9);
    assert_denied(
        &c.review(path, &admission_review("CREATE", &too_many, None))
            .await,
        &["minCount should be positive and less or equal to count"],
    );
    // Immutable while quota is reserved.
    let mut admitted = workload(json!({}));
    admitted["status"] = json!({
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "admission": {"clusterQueue": "gpus", "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"},
            "resourceUsage": {"nvidia.com/gpu": "4"}, "count": 4}]}});
    let mut moved = admitted.clone();
    moved["spec"]["queueName"] = json!("other");
    assert_denied(
        &c.review(path, &admission_review("UPDATE", &moved, Some(&admitted)))
            .await,
        &["queueName is immutable while workload quota reserved"],
    );
    assert_allowed(
        &c.review(
            path,
            &admission_review("CREATE", &workload(json!({})), None),
        )
        .await,
    );
}

#[tokio::test]
async fn v1beta1_objects_are_validated_too() {
    let s = start(None).await;
    let mut c = s.client().await;
    let q = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpus"},
        "spec": {"cohort": "pool", "resourceGroups": rg(json!(["cpu"]), json!([{"name": "cpu", "nominalQuota": "1", "lendingLimit": "3"}]))}});
    let resp = c
        .review(
            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
            &admission_review("CREATE", &q, None),
        )
        .await;
    assert_denied(&resp, &["must be less than or equal to the nominalQuota"]);
}

// ---------------------------------------------------------------- PolicyModule

fn policy_module(wasm: &str) -> Value {
    json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModule", "metadata": {"name": "pack"},
        "spec": {"module": wasm}})
}

#[tokio::test]
async fn policy_modules_go_through_the_validator() {
    let fake = |obj: &Value, _old: Option<&Value>| -> Result<Vec<String>, String> {
        match obj["spec"]["module"].as_str() {
            Some("good") => Ok(vec![
                "module uses 1.2 MiB of its 4 MiB memory limit".to_owned(),
            ]),
            _ => Err(
                "PolicyModule \"pack\": the module does not compile: bad magic number".to_owned(),
            ),
        }
    };
    let s = start(Some(Arc::new(fake) as Arc<dyn PolicyModuleValidator>)).await;
    let mut c = s.client().await;
    let path = "/validate-sluice-dev-v1alpha1-policymodule";
    let resp = c
        .review(
            path,
            &admission_review("CREATE", &policy_module("bad"), None),
        )
        .await;
    assert_denied(&resp, &["the module does not compile: bad magic number"]);
    let resp = c
        .review(
            path,
            &admission_review("CREATE", &policy_module("good"), None),
        )
        .await;
    assert_allowed(&resp);
    assert_eq!(
        resp["warnings"][0],
        "module uses 1.2 MiB of its 4 MiB memory limit"
    );

    let bare = common::start(None).await;
    let mut c = bare.client().await;
    let resp = c
        .review(
            path,
            &admission_review("CREATE", &policy_module("good"), None),
        )
        .await;
    assert_denied(&resp, &["no PolicyModule validator"]);
}

// ---------------------------------------------------------------- Conversion

#[tokio::test]
async fn conversion_reviews_convert_both_ways() {
    let s = start(None).await;
    let mut c = s.client().await;
    let v1 = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "team", "resourceVersion": "42", "uid": "u-1"},
        "spec": {"queueName": "q", "priorityClassName": "high", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
            "priority": 100, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]}});
    let review = |desired: &str, objects: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "conv-1", "desiredAPIVersion": desired, "objects": objects}})
    };
    let (status, body) = c
        .post(
            "/convert",
            serde_json::to_vec(&review("kueue.x-k8s.io/v1beta2", json!([v1.clone()])))
                .unwrap_or_default(),
        )
        .await
        .expect("convert");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(doc["kind"], "ConversionReview");
    assert_eq!(doc["response"]["uid"], "conv-1");
    assert_eq!(doc["response"]["result"]["status"], "Success");
    let v2 = doc["response"]["convertedObjects"][0].clone();
    assert_eq!(v2["apiVersion"], "kueue.x-k8s.io/v1beta2");
    assert_eq!(v2["spec"]["priorityClassRef"]["name"], "high");
    assert_eq!(
        v2["spec"]["priorityClassRef"]["kind"],
        "WorkloadPriorityClass"
    );
    assert_eq!(v2["metadata"]["resourceVersion"], "42");

    let (_, body) = c
        .post(
            "/convert",
            serde_json::to_vec(&review("kueue.x-k8s.io/v1beta1", json!([v2]))).unwrap_or_default(),
        )
        .await
        .expect("convert back");
    let doc: Value = serde_json::from_slice(&body).expect("json");
    let back = &doc["response"]["convertedObjects"][0];
    assert_eq!(back["spec"]["priorityClassName"], "high");
    assert_eq!(back["apiVersion"], "kueue.x-k8s.io/v1beta1");

    let (_, body) = c
        .post(
            "/convert",
            serde_json::to_vec(&review("kueue.x-k8s.io/v1beta1", json!([{"kind": "Nope"}])))
                .unwrap_or_default(),
        )
        .await
        .expect("convert bad");
    let doc: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(doc["response"]["result"]["status"], "Failure");
    assert!(
        doc["response"]["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("objects[0]")
    );
}

// ---------------------------------------------------------------- Robustness and operations

#[tokio::test]
async fn malformed_requests_are_answered_not_crashed() {
    let s = start(None).await;
    let mut c = s.client().await;
    let path = "/validate-batch-v1-job";
    // Not JSON, or no request to answer: HTTP 400.
    for body in [
        &b"{not json"[..],
        b"[]",
        b"{}",
        b"{\"request\": {}}",
        &[0xff, 0xfe, 0x00][..],
    ] {
        let (status, _) = c.post(path, body.to_vec()).await.expect("post");
        assert_eq!(status, 400, "{}", String::from_utf8_lossy(body));
    }
    // A reviewable request with the wrong kind, a missing object or a malformed field: allowed=false, 400 inside.
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}});
    let resp = c
        .review(path, &admission_review("CREATE", &pod, None))
        .await;
    assert_denied(&resp, &["this webhook reviews Job objects, not \"Pod\""]);
    assert_eq!(resp["status"]["code"], 400);
    let mut review = admission_review(
        "CREATE",
        &job("team", json!({}), json!({}), json!({})),
        None,
    );
    review["request"]["object"] = Value::Null;
    assert_denied(
        &c.review(path, &review).await,
        &["the request has no object"],
    );
    let j = job("team", json!({}), json!({}), json!({"parallelism": "many"}));
    assert_denied(
        &c.review(path, &admission_review("CREATE", &j, None)).await,
        &["cannot decode Job \"train\"", "spec.parallelism"],
    );
    let mut wrong_envelope = admission_review("CREATE", &j, None);
    wrong_envelope["apiVersion"] = json!("admission.k8s.io/v1beta1");
    assert_denied(
        &c.review(path, &wrong_envelope).await,
        &["expected an admission.k8s.io/v1 AdmissionReview"],
    );
    let mut bad_op = admission_review("CREATE", &j, None);
    bad_op["request"]["operation"] = json!("PATCH");
    assert_denied(
        &c.review(path, &bad_op).await,
        &["cannot be decoded", "PATCH"],
    );
    // Unknown paths are 404.
    let (status, _) = c
        .post("/validate-nothing", b"{}".to_vec())
        .await
        .expect("post");
    assert_eq!(status, 404);
    // The connection survived all of it.
    let ok = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({}),
    );
    assert_allowed(&c.review(path, &admission_review("CREATE", &ok, None)).await);
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let options = sluice_webhook::server::ServerOptions {
        max_body_bytes: 64 * 1024,
        ..Default::default()
    };
    let s = common::start_with(None, options).await;
    let mut c = s.client().await;
    let mut j = job(
        "team",
        json!({}),
        json!({"blob": "x".repeat(100 * 1024)}),
        json!({}),
    );
    j["metadata"]["name"] = json!("big");
    let body = serde_json::to_vec(&admission_review("CREATE", &j, None)).unwrap_or_default();
    let (status, _) = c.post("/validate-batch-v1-job", body).await.expect("post");
    assert_eq!(status, 413);
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use http_body_util::{BodyExt, Empty};
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<bytes::Bytes>>(
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("handshake");
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Empty::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let s = start(None).await;
    let maddr = s.running.metrics_addr.expect("metrics listener");
    assert_eq!(http_get(maddr, "/healthz").await, (200, "ok".to_owned()));
    assert_eq!(http_get(maddr, "/readyz").await, (200, "ok".to_owned()));
    let mut c = s.client().await;
    let bad = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "BAD"}),
        json!({}),
        json!({}),
    );
    c.review(
        "/validate-batch-v1-job",
        &admission_review("CREATE", &bad, None),
    )
    .await;
    let ok = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({}),
    );
    c.review(
        "/mutate-batch-v1-job",
        &admission_review("CREATE", &ok, None),
    )
    .await;
    let (status, text) = http_get(maddr, "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        "sluice_webhook_requests_total{path=\"/validate-batch-v1-job\",result=\"denied\"} 1",
        "sluice_webhook_requests_total{path=\"/mutate-batch-v1-job\",result=\"patched\"} 1",
        "sluice_webhook_denials_total{path=\"/validate-batch-v1-job\"} 1",
        "sluice_webhook_request_duration_seconds_count{path=\"/mutate-batch-v1-job\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test]
async fn readiness_waits_for_the_local_queue_index() {
    struct Unsynced;
    impl sluice_webhook::LocalQueueIndex for Unsynced {
        fn exists(&self, _: &str, _: &str) -> bool {
            false
        }
        fn synced(&self) -> bool {
            false
        }
    }
    let cert = common::make_cert();
    let dir = common::CertDir::new(&cert);
    let reloading =
        sluice_webhook::tls::ReloadingCert::load(&dir.cert_path(), &dir.key_path()).expect("cert");
    let running = sluice_webhook::server::start(
        "127.0.0.1:0".parse().expect("addr"),
        Some("127.0.0.1:0".parse().expect("addr")),
        sluice_webhook::Hooks::new(Arc::new(Unsynced)),
        reloading,
        Default::default(),
    )
    .await
    .expect("start");
    let maddr = running.metrics_addr.expect("metrics");
    assert_eq!(http_get(maddr, "/readyz").await.0, 503);
    assert_eq!(http_get(maddr, "/healthz").await.0, 200);
    running.shutdown().await;
}
