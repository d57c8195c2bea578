//! Fuzzing the request decoder and every hook: arbitrary bytes, arbitrary JSON, and valid reviews with one part
//! replaced by arbitrary JSON must all get an answer, never a panic.
//!
//! CI runs a modest number of cases; `SLUICE_FUZZ_CASES=350000 cargo test --release -p sluice-webhook --test fuzz`
//! runs that many per property (three properties, each input sent to every hook and to the conversion webhook).

use std::sync::{Arc, LazyLock};

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};
use sluice_webhook::convert::convert;
use sluice_webhook::{Hooks, InMemoryLocalQueues, PolicyModuleValidator, ROUTES};

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

static HOOKS: LazyLock<Hooks> = LazyLock::new(|| {
    let mut hooks = Hooks::new(Arc::new(InMemoryLocalQueues::new([
        ("team", "default"),
        ("team", "q"),
    ])));
    let policy = |obj: &Value, _: Option<&Value>| -> Result<Vec<String>, String> {
        obj.pointer("/spec/module")
            .and_then(Value::as_str)
            .map(|_| Vec::new())
            .ok_or_else(|| "no module".to_owned())
    };
    hooks.policy = Some(Arc::new(policy) as Arc<dyn PolicyModuleValidator>);
    hooks
});

/// Sends `body` to every hook and to the conversion webhook; every answer must echo a uid when there is one.
fn feed(body: &[u8]) {
    for &(_, hook) in ROUTES {
        if let Ok(answer) = HOOKS.answer(hook, body) {
            assert!(answer.review["response"]["uid"].is_string());
            assert_eq!(answer.review["response"]["allowed"], answer.verdict.allowed);
        }
    }
    let _ = convert(body);
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "suspend",
    "parallelism",
    "completions",
    "completionMode",
    "template",
    "containers",
    "resources",
    "requests",
    "podSets",
    "count",
    "minCount",
    "resourceGroups",
    "coveredResources",
    "flavors",
    "nominalQuota",
    "borrowingLimit",
    "lendingLimit",
    "cohortName",
    "cohort",
    "clusterQueue",
    "queueName",
    "conditions",
    "admission",
    "levels",
    "nodeLabel",
    "topologyName",
    "nodeLabels",
    "value",
    "priorityClassRef",
    "schedulingGates",
    "finalizers",
    "ownerReferences",
    "controller",
    "uid",
    "operation",
    "object",
    "oldObject",
    "request",
    "objects",
    "desiredAPIVersion",
    "kueue.x-k8s.io/queue-name",
    "kueue.x-k8s.io/job-min-parallelism",
    "kueue.x-k8s.io/podset-slice-size",
    "preemption",
    "flavorFungibility",
    "module",
];

const WORDS: &[&str] = &[
    "",
    "Job",
    "Pod",
    "ClusterQueue",
    "LocalQueue",
    "Workload",
    "ResourceFlavor",
    "Cohort",
    "Topology",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "PolicyModule",
    "batch/v1",
    "v1",
    "kueue.x-k8s.io/v1beta1",
    "kueue.x-k8s.io/v1beta2",
    "sluice.dev/v1alpha1",
    "CREATE",
    "UPDATE",
    "DELETE",
    "true",
    "false",
    "-1",
    "0",
    "1e3",
    "1Ki",
    "8",
    "cpu",
    "nvidia.com/gpu",
    "Indexed",
    "default",
    "team",
    "q",
    "Never",
    "LowerPriority",
    "TryNextFlavor",
    "kubernetes.io/hostname",
    "\u{0}",
    "é",
    "9223372036854775808",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop::sample::select(vec![
            0i64,
            1,
            -1,
            2,
            3,
            63,
            64,
            253,
            254,
            i64::from(i32::MAX) + 1
        ])
        .prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        prop::sample::select(WORDS).prop_map(|s| json!(s)),
        ".{0,20}".prop_map(Value::String),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Valid reviews of each kind, to be damaged in one place.
fn templates() -> Vec<Value> {
    let review = |op: &str, object: Value, old: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": object["kind"]}, "operation": op,
            "namespace": "team", "object": object, "oldObject": old}})
    };
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "team",
        "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/max-exec-time-seconds": "10"},
        "annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}},
        "spec": {"parallelism": 3, "completions": 3, "completionMode": "Indexed", "suspend": false,
            "template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-slice-required-topology": "rack",
                "kueue.x-k8s.io/podset-slice-size": "1"}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team",
        "labels": {"kueue.x-k8s.io/pod-group-name": "g"}, "annotations": {"kueue.x-k8s.io/pod-group-pod-index-label": "idx", "kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"containers": [{"name": "c", "image": "x"}], "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}});
    let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"cohortName": "pool", "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
            {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "8", "lendingLimit": "2"},
                {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "1"}]}]}],
            "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}},
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}}});
    let wl = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
        "spec": {"queueName": "q", "priorityClassName": "p", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "priority": 1,
            "podSets": [{"name": "main", "count": 2, "minCount": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "r", "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2, "flavors": {"cpu": "a"},
                "resourceUsage": {"cpu": "2"}}]}}});
    let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team"},
        "spec": {"clusterQueue": "cq"}});
    let topo = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}});
    let pm = json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModule", "metadata": {"name": "m"}, "spec": {"module": "x"}});
    vec![
        review("CREATE", job.clone(), Value::Null),
        review("UPDATE", job.clone(), job),
        review("CREATE", pod.clone(), Value::Null),
        review("UPDATE", pod.clone(), pod),
        review("CREATE", cq.clone(), Value::Null),
        review("UPDATE", cq.clone(), cq),
        review("UPDATE", wl.clone(), wl.clone()),
        review("UPDATE", lq.clone(), lq),
        review("CREATE", topo, Value::Null),
        review("CREATE", pm, Value::Null),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "c", "desiredAPIVersion": "kueue.x-k8s.io/v1beta2", "objects": [wl]}}),
    ]
}

/// Every JSON pointer inside `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(c, p, out);
            }
        }
        _ => {}
    }
}

static TEMPLATES: LazyLock<Vec<(Value, Vec<String>)>> = LazyLock::new(|| {
    templates()
        .into_iter()
        .map(|t| {
            let mut ps = Vec::new();
            pointers(&t, String::new(), &mut ps);
            (t, ps)
        })
        .collect()
});

proptest! {
    #![proptest_config(Config { cases: cases(), failure_persistence: None, ..Config::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        feed(&bytes);
    }

    #[test]
    fn arbitrary_json_requests_never_panic(doc in any_json(), object in any_json(), op in prop::sample::select(WORDS)) {
        feed(&serde_json::to_vec(&doc).unwrap_or_default());
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": op, "object": object.clone(), "oldObject": object}});
        feed(&serde_json::to_vec(&review).unwrap_or_default());
    }

    #[test]
    fn damaged_valid_reviews_never_panic(which in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), with in any_json()) {
        let (template, ps) = &TEMPLATES[which.index(TEMPLATES.len())];
        let mut doc = template.clone();
        if let Some(slot) = doc.pointer_mut(&ps[at.index(ps.len())]) {
            *slot = with;
        }
        feed(&serde_json::to_vec(&doc).unwrap_or_default());
    }
}

#[test]
fn templates_are_valid_before_damage() {
    // The damaged-review property starts from reviews that pass, so the damage is what gets exercised.
    for (t, _) in TEMPLATES.iter() {
        let body = serde_json::to_vec(t).unwrap_or_default();
        if t["kind"] == "ConversionReview" {
            let out = convert(&body).expect("answer");
            assert!(out.success, "{}", out.review);
            continue;
        }
        let kind = t["request"]["object"]["kind"].as_str().unwrap_or_default();
        let hook = ROUTES
            .iter()
            .find(|(p, _)| p.starts_with("/validate") && p.ends_with(&kind.to_lowercase()))
            .map(|(_, h)| *h)
            .expect("hook");
        let answer = HOOKS.answer(hook, &body).expect("answer");
        assert!(answer.verdict.allowed, "{kind}: {}", answer.verdict.message);
    }
}
