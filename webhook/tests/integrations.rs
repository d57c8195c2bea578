//! The hooks follow `integrations`: a framework that is off gets Kueue's no-op webhook (everything through
//! unchanged), and only the owners of frameworks that are on make an object someone else's to manage.

mod common;

use std::sync::Arc;

use common::{admission_review, apply_patch, job};
use serde_json::{Value, json};
use sluice_sdk::kueue::integrations::Integrations;
use sluice_webhook::{Hook, HookConfig, Hooks, InMemoryLocalQueues};

fn hooks(frameworks: &[&str]) -> Hooks {
    let mut hooks = Hooks::new(Arc::new(InMemoryLocalQueues::new([("team", "q")])));
    hooks.config = HookConfig {
        integrations: Integrations::new(frameworks.iter().copied(), []),
        ..HookConfig::default()
    };
    hooks
}

/// The AdmissionReview response of `hook` for `object` created.
fn create(hooks: &Hooks, hook: Hook, object: &Value) -> Value {
    let body = serde_json::to_vec(&admission_review("CREATE", object, None)).expect("json");
    let answer = hooks.answer(hook, &body).expect("a request to answer");
    answer.review["response"].clone()
}

fn jobset() -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "w", "image": "busybox"}]}}}}}]}
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    })
}

#[test]
fn the_hooks_of_a_framework_that_is_off_let_everything_through_unchanged() {
    let jobs_only = hooks(&["batch/job"]);
    for (hook, object) in [(Hook::MutateJobSet, jobset()), (Hook::MutatePod, pod())] {
        let resp = create(&jobs_only, hook, &object);
        assert_eq!(resp["allowed"], true, "{hook:?}");
        assert!(resp.get("patch").is_none(), "{hook:?} patched: {resp}");
    }
    // A JobSet Kueue's validation would refuse (a bad topology annotation) is not looked at either.
    let mut bad = jobset();
    bad["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = json!({"annotations": {
        "kueue.x-k8s.io/podset-required-topology": "rack",
        "kueue.x-k8s.io/podset-preferred-topology": "block"}});
    assert_eq!(
        create(&jobs_only, Hook::ValidateJobSet, &bad)["allowed"],
        true
    );
    // With the framework on, the same objects are defaulted and checked.
    let both = hooks(&["batch/job", "jobset.x-k8s.io/jobset", "pod"]);
    let resp = create(&both, Hook::MutateJobSet, &jobset());
    assert_eq!(apply_patch(&jobset(), &resp)["spec"]["suspend"], true);
    let resp = create(&both, Hook::MutatePod, &pod());
    assert!(apply_patch(&pod(), &resp)["spec"]["schedulingGates"].is_array());
    assert_eq!(create(&both, Hook::ValidateJobSet, &bad)["allowed"], false);
}

#[test]
fn a_job_is_its_owners_only_while_the_owners_framework_is_on() {
    let mut child = job(
        "team",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({}),
    );
    child["metadata"]["ownerReferences"] = json!([{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "name": "train", "uid": "0f6f2a1e-7d55-4a51-9a43-3c2b8e0d5a10", "controller": true}]);
    let with_jobsets = hooks(&["batch/job", "jobset.x-k8s.io/jobset"]);
    let resp = create(&with_jobsets, Hook::MutateJob, &child);
    assert!(
        resp.get("patch").is_none(),
        "a JobSet's Job was defaulted: {resp}"
    );
    // JobSets off: Kueue's Job webhook suspends the Job like any other with a queue name.
    let jobs_only = hooks(&["batch/job"]);
    let resp = create(&jobs_only, Hook::MutateJob, &child);
    assert_eq!(apply_patch(&child, &resp)["spec"]["suspend"], true);
}

#[test]
fn only_namespaces_the_selector_takes_get_their_pods_gated_and_unnamed_jobs_suspended() {
    let namespaces = Arc::new(sluice_webhook::InMemoryNamespaces::default());
    namespaces.insert(
        "team",
        [("example.com/kueue".to_owned(), "enabled".to_owned())].into(),
    );
    namespaces.insert("other", Default::default());
    let mut h = hooks(&["batch/job", "pod"]);
    h.namespaces = namespaces;
    h.config.manage_jobs_without_queue_name = true;
    h.config.namespace_selector =
        serde_json::from_value(json!({"matchLabels": {"example.com/kueue": "enabled"}})).unwrap();
    let in_ns = |ns: &str, mut o: Value| {
        o["metadata"]["namespace"] = json!(ns);
        o
    };
    // A pod naming a queue: gated in the selected namespace only (Kueue's pod webhook looks at nothing else first).
    let gated = |ns: &str| {
        let p = in_ns(ns, pod());
        apply_patch(&p, &create(&h, Hook::MutatePod, &p))["spec"]["schedulingGates"].is_array()
    };
    assert!(gated("team"));
    assert!(!gated("other"));
    assert!(
        !gated("unknown"),
        "a namespace the index lacks is judged by its name alone"
    );
    // A Job without a queue name under manageJobsWithoutQueueName: suspended in the selected namespace only.
    let suspended = |ns: &str| {
        let j = job(ns, json!({}), json!({}), json!({}));
        apply_patch(&j, &create(&h, Hook::MutateJob, &j))["spec"]["suspend"] == true
    };
    assert!(suspended("team"));
    assert!(!suspended("other"));
    // A Job naming a queue is suspended wherever it is, as Kueue's Job webhook does (its reconciler then leaves
    // the one outside alone).
    let named = job(
        "other",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({}),
    );
    assert_eq!(
        apply_patch(&named, &create(&h, Hook::MutateJob, &named))["spec"]["suspend"],
        true
    );
}

/// A Namespace index like the webhook's watch: one it lacks is one not seen yet.
struct Watched(sluice_webhook::InMemoryNamespaces);

impl sluice_webhook::NamespaceIndex for Watched {
    fn labels(&self, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.0.labels(name)
    }
    fn synced(&self) -> bool {
        true
    }
    fn watched(&self) -> bool {
        true
    }
}

#[test]
fn a_namespace_not_seen_yet_is_refused_only_when_the_selector_needs_its_labels() {
    let seen = sluice_webhook::InMemoryNamespaces::default();
    seen.insert("team", Default::default());
    let mut h = hooks(&["batch/job", "pod"]);
    h.namespaces = Arc::new(Watched(seen));
    let mut p = pod();
    p["metadata"]["namespace"] = json!("new");
    // Kueue's default selector reads names only: judged by the name, gated.
    let resp = create(&h, Hook::MutatePod, &p);
    assert_eq!(resp["allowed"], true, "{resp}");
    h.config.namespace_selector =
        serde_json::from_value(json!({"matchLabels": {"example.com/kueue": "enabled"}})).unwrap();
    let resp = create(&h, Hook::MutatePod, &p);
    assert_eq!(resp["allowed"], false, "{resp}");
    assert!(
        resp["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"new\"") && m.contains("try again")),
        "{resp}"
    );
    // A namespace the watch has seen is judged on its labels (none here: not managed, let through unchanged).
    let mut known = pod();
    known["metadata"]["namespace"] = json!("team");
    let resp = create(&h, Hook::MutatePod, &known);
    assert_eq!(resp["allowed"], true);
    assert!(resp.get("patch").is_none(), "{resp}");
    // Validation hooks never refuse for it, nor do hooks where Kueue would not read the Namespace: a pod its
    // parent gates, a Job that names a queue.
    assert_eq!(create(&h, Hook::ValidatePod, &p)["allowed"], true);
    let mut by_parent = p.clone();
    by_parent["metadata"]["annotations"] =
        json!({"kueue.x-k8s.io/pod-suspending-parent": "leaderworkerset.x-k8s.io/leaderworkerset"});
    assert_eq!(create(&h, Hook::MutatePod, &by_parent)["allowed"], true);
    let named = job(
        "new",
        json!({"kueue.x-k8s.io/queue-name": "q"}),
        json!({}),
        json!({}),
    );
    let resp = create(&h, Hook::MutateJob, &named);
    assert_eq!(
        apply_patch(&named, &resp)["spec"]["suspend"],
        true,
        "{resp}"
    );
    // A Job without one, under manageJobsWithoutQueueName, needs the namespace's labels: refused.
    let unnamed = job("new", json!({}), json!({}), json!({}));
    assert_eq!(create(&h, Hook::MutateJob, &unnamed)["allowed"], true);
    h.config.manage_jobs_without_queue_name = true;
    assert_eq!(create(&h, Hook::MutateJob, &unnamed)["allowed"], false);
}
