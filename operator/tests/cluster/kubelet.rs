//! A fake kubelet: no containers run, but Pods go through the states a kubelet would give them, so Job
//! completion and PodsReady are real on the API server.
//!
//! It makes fake Nodes, binds ungated Pods to a Node that matches their nodeSelector, required node affinity,
//! tolerations and resource requests (through the Binding subresource, as a scheduler does), and then moves them
//! to Running and Ready. Annotations on a Pod steer it, as kwok's stages do:
//! - `fake-kubelet.sluice.dev/ready: "false"`: Running but never Ready (until the annotation changes);
//! - `fake-kubelet.sluice.dev/run-seconds: "N"`: Succeeded N seconds after it started.
//!
//! Pods being deleted on its Nodes are stopped at once: given a terminal phase, then their deletion confirmed.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Binding, Node, NodeSelectorRequirement, ObjectReference, Pod, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use sluice_sdk::quantity::resource_value;

/// Annotation: "false" keeps the Pod Running but not Ready.
pub const READY: &str = "fake-kubelet.sluice.dev/ready";
/// Annotation: seconds from start until the Pod Succeeds.
pub const RUN_SECONDS: &str = "fake-kubelet.sluice.dev/run-seconds";

/// A Node to fake.
#[derive(Clone, Debug)]
pub struct FakeNode {
    /// Its name.
    pub name: String,
    /// Its labels (besides kubernetes.io/hostname, which is always set).
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// Its capacity, also its allocatable.
    pub capacity: BTreeMap<String, String>,
}

impl FakeNode {
    /// `count` GPU-less nodes `PREFIX0`, `PREFIX1`, ... with `cpu` cores each.
    pub fn cpu_nodes(prefix: &str, count: usize, cpu: u32) -> Vec<FakeNode> {
        (0..count)
            .map(|i| FakeNode::new(&format!("{prefix}{i}"), cpu, 0))
            .collect()
    }

    /// A node with `cpu` cores, 64Gi of memory, 110 pods and `gpus` nvidia.com/gpu.
    pub fn new(name: &str, cpu: u32, gpus: u32) -> FakeNode {
        let mut capacity = BTreeMap::from([
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), "64Gi".to_string()),
            ("pods".to_string(), "110".to_string()),
        ]);
        if gpus > 0 {
            capacity.insert("nvidia.com/gpu".into(), gpus.to_string());
        }
        FakeNode {
            name: name.into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            capacity,
        }
    }

    /// With a label.
    pub fn label(mut self, key: &str, value: &str) -> FakeNode {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// The running fake kubelet; it stops when dropped.
pub struct FakeKubelet {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeKubelet {
    /// Creates the Nodes (Ready, with their capacity) and starts handling Pods.
    pub async fn start(client: Client, nodes: Vec<FakeNode>) -> FakeKubelet {
        let api: Api<Node> = Api::all(client.clone());
        for n in &nodes {
            create_node(&api, n).await;
        }
        // A list from the API server's watch cache (resourceVersion 0) every 200 ms: cheap for it, and nothing to
        // resume after an API server restart.
        let task = tokio::spawn(async move {
            let api = Api::<Pod>::all(client.clone());
            let mut recent: BTreeMap<String, std::time::Instant> = BTreeMap::new();
            loop {
                match api.list(&ListParams::default().match_any()).await {
                    Ok(list) => tick(&client, &nodes, &list.items, &mut recent).await,
                    Err(e) => eprintln!("fake kubelet: listing pods: {e}"),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        FakeKubelet { task }
    }
}

async fn create_node(api: &Api<Node>, n: &FakeNode) {
    let mut labels = n.labels.clone();
    labels.insert("kubernetes.io/hostname".into(), n.name.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(n.name.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: (!n.taints.is_empty()).then(|| n.taints.clone()),
            ..Default::default()
        }),
        ..Node::default()
    };
    // A loaded API server sometimes closes a connection: each call is tried again a few times. A create that went
    // through before its answer was lost finds the Node there.
    let mut tried = false;
    let (api, node) = (&api, &node);
    retried(&n.name, "creating", || {
        let again = std::mem::replace(&mut tried, true);
        async move {
            match api.create(&PostParams::default(), node).await {
                Err(kube::Error::Api(e)) if again && e.code == 409 => Ok(()),
                other => other.map(|_| ()),
            }
        }
    })
    .await;
    let status = json!({"status": {
        "capacity": n.capacity,
        "allocatable": n.capacity,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "fake kubelet", "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    }});
    retried(&n.name, "writing the status of", || async {
        api.patch_status(&n.name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map(|_| ())
    })
    .await;
    // The API server taints every new Node not-ready; the node lifecycle controller (off on this control plane:
    // nothing renews node leases) would lift the taint once the Node is Ready. Topology-aware admission, as
    // Kueue's, leaves nodes with untolerated NoSchedule taints out.
    let taints = json!({"spec": {"taints": n.taints}});
    retried(&n.name, "setting the taints of", || async {
        api.patch(&n.name, &PatchParams::default(), &Patch::Merge(&taints))
            .await
            .map(|_| ())
    })
    .await;
}

/// Runs `call` until it succeeds, at most 5 times, 500 ms apart; panics with the last error, naming the Node.
async fn retried<F, Fut>(node: &str, what: &str, mut call: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    for attempt in 1.. {
        match call().await {
            Ok(()) => return,
            Err(e) if attempt < 5 => {
                eprintln!("fake kubelet: {what} Node {node} failed (attempt {attempt}): {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("fake kubelet: {what} Node {node}: {e}"),
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// One pass over every Pod; a failed call (a conflict with a newer version, an API server restarting) is tried
/// again on a later pass. `recent` holds the Pods acted on in the last two seconds, whose change the cache may
/// not have seen yet.
async fn tick(
    client: &Client,
    nodes: &[FakeNode],
    pods: &[Pod],
    recent: &mut BTreeMap<String, std::time::Instant>,
) {
    recent.retain(|_, t| t.elapsed() < Duration::from_secs(2));
    let mut used: BTreeMap<&str, BTreeMap<String, i64>> = BTreeMap::new();
    for p in pods {
        if let Some(node) = node_of(p)
            && !terminal(p)
        {
            let sum = used.entry(node).or_default();
            for (r, v) in requests(p) {
                *sum.entry(r).or_default() += v;
            }
        }
    }
    for p in pods {
        let key = format!(
            "{}/{}",
            p.metadata.uid.as_deref().unwrap_or_default(),
            p.metadata.resource_version.as_deref().unwrap_or_default()
        );
        if recent.contains_key(&key) {
            continue;
        }
        match act(client, nodes, p, &mut used).await {
            Ok(true) => {
                recent.insert(key, std::time::Instant::now());
            }
            Ok(false) => {}
            Err(e) => eprintln!(
                "fake kubelet: {}/{}: {e}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            ),
        }
    }
}

/// What a kubelet (and a scheduler) would do next to this Pod; true if it did something.
async fn act<'a>(
    client: &Client,
    nodes: &'a [FakeNode],
    p: &Pod,
    used: &mut BTreeMap<&'a str, BTreeMap<String, i64>>,
) -> Result<bool, kube::Error> {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ours = node_of(p).is_some_and(|n| nodes.iter().any(|f| f.name == n));
    if p.metadata.deletion_timestamp.is_some() {
        if !ours {
            return Ok(false);
        }
        // As a kubelet: the containers are stopped and the pod given a terminal phase (Failed unless it had
        // succeeded), then the deletion is confirmed.
        if !terminal(p) {
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&killed(p)))
                .await?;
        } else {
            api.delete(name, &DeleteParams::default().grace_period(0))
                .await?;
        }
        return Ok(true);
    }
    if node_of(p).is_none() {
        if gated(p) || terminal(p) {
            return Ok(false);
        }
        let Some(node) = nodes.iter().find(|n| fits(p, n, used.get(n.name.as_str()))) else {
            return Ok(false);
        };
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.name.clone()),
                api_version: Some("v1".into()),
                ..ObjectReference::default()
            },
        };
        api.create_subresource::<_, serde_json::Value>(
            "binding",
            name,
            &PostParams::default(),
            &binding,
        )
        .await?;
        let sum = used.entry(node.name.as_str()).or_default();
        for (r, v) in requests(p) {
            *sum.entry(r).or_default() += v;
        }
        return Ok(true);
    }
    if !ours || terminal(p) {
        return Ok(false);
    }
    let annotations = p.metadata.annotations.clone().unwrap_or_default();
    let want_ready = annotations.get(READY).map(String::as_str) != Some("false");
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Running") || condition(p, "Ready") != want_ready {
        let started = p
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_else(now);
        let status = running(p, &started, want_ready);
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        return Ok(true);
    }
    let run_for = annotations
        .get(RUN_SECONDS)
        .and_then(|s| s.parse::<i64>().ok());
    let started = p
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.as_second());
    if let (Some(secs), Some(t)) = (run_for, started)
        && chrono::Utc::now().timestamp() - t >= secs
    {
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&succeeded(p)))
            .await?;
        return Ok(true);
    }
    Ok(false)
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

fn terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

fn condition(p: &Pod, kind: &str) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
}

/// The Pod's requests summed over its containers, in the engine's units.
fn requests(p: &Pod) -> BTreeMap<String, i64> {
    let mut sum = BTreeMap::new();
    for c in p.spec.iter().flat_map(|s| &s.containers) {
        let reqs = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        for (r, q) in reqs.into_iter().flatten() {
            *sum.entry(r.clone()).or_default() += resource_value(r, q).unwrap_or(0);
        }
    }
    sum
}

fn fits(p: &Pod, n: &FakeNode, used: Option<&BTreeMap<String, i64>>) -> bool {
    let spec = match &p.spec {
        Some(s) => s,
        None => return false,
    };
    let mut labels = n.labels.clone();
    labels.insert("kubernetes.io/hostname".into(), n.name.clone());
    if let Some(sel) = &spec.node_selector
        && sel.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone());
    if let Some(terms) = terms
        && !terms.iter().any(|t| {
            t.match_expressions
                .iter()
                .flatten()
                .all(|e| matches_expression(e, &labels))
        })
    {
        return false;
    }
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    if n.taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    {
        return false;
    }
    let empty = BTreeMap::new();
    let used = used.unwrap_or(&empty);
    requests(p).iter().all(|(r, v)| {
        let cap = n
            .capacity
            .get(r)
            .and_then(|q| resource_value(r, &Quantity(q.clone())).ok())
            .unwrap_or(0);
        used.get(r).copied().unwrap_or(0) + v <= cap
    })
}

fn matches_expression(e: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = e.values.clone().unwrap_or_default();
    let got = labels.get(&e.key);
    match e.operator.as_str() {
        "In" => got.is_some_and(|v| values.contains(v)),
        "NotIn" => !got.is_some_and(|v| values.contains(v)),
        "Exists" => got.is_some(),
        "DoesNotExist" => got.is_none(),
        _ => false,
    }
}

fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    let effect_ok = tol
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key_ok =
        tol.key.as_deref().is_none_or(|k| k.is_empty()) || tol.key.as_deref() == Some(&taint.key);
    let value_ok = match tol.operator.as_deref() {
        Some("Exists") => true,
        _ => tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    };
    effect_ok && key_ok && value_ok
}

fn statuses(p: &Pod, ready: bool, state: serde_json::Value) -> serde_json::Value {
    let containers: Vec<_> = p
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| {
            json!({"name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                   "ready": ready, "restartCount": 0, "started": true, "state": state})
        })
        .collect();
    json!(containers)
}

fn running(p: &Pod, started: &str, ready: bool) -> serde_json::Value {
    let t = now();
    let flag = if ready { "True" } else { "False" };
    json!({"status": {
        "phase": "Running",
        "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "startTime": started,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
            {"type": "Initialized", "status": "True", "lastTransitionTime": t},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": t},
            {"type": "Ready", "status": flag, "lastTransitionTime": t},
        ],
        "containerStatuses": statuses(p, ready, json!({"running": {"startedAt": started}})),
    }})
}

fn killed(p: &Pod) -> serde_json::Value {
    let t = now();
    json!({"status": {
        "phase": "Failed",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "PodFailed", "lastTransitionTime": t},
            {"type": "ContainersReady", "status": "False", "reason": "PodFailed", "lastTransitionTime": t},
        ],
        "containerStatuses": statuses(p, false, json!({"terminated": {
            "exitCode": 143, "reason": "Error", "startedAt": t, "finishedAt": t}})),
    }})
}

/// The status patch of a Pod whose containers exited 0.
pub fn succeeded(p: &Pod) -> serde_json::Value {
    let t = now();
    json!({"status": {
        "phase": "Succeeded",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
            {"type": "Initialized", "status": "True", "lastTransitionTime": t},
            {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": t},
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": t},
        ],
        "containerStatuses": statuses(p, false, json!({"terminated": {
            "exitCode": 0, "reason": "Completed", "startedAt": t, "finishedAt": t}})),
    }})
}
