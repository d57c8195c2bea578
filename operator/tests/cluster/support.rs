//! What every end-to-end test does: install Sluice on a control plane as a user would, and wait for things.

use std::future::Future;
use std::time::Duration;

use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use sluice_sdk::kueue::v1beta2 as kueue;

use super::kubelet::{FakeKubelet, FakeNode};
use super::plane::ControlPlane;
use super::sluice::{Operator, Webhook, sluice};

/// Polls `check` every 250 ms until it returns Some, for at most `seconds`; panics naming `what` otherwise.
pub async fn eventually<T, F, Fut>(seconds: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {seconds} s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `sluice ARGS`' standard output; panics with its error output unless it succeeds.
pub fn sluice_stdout(args: &[&str]) -> String {
    let out = sluice().args(args).output().expect("sluice");
    assert!(
        out.status.success(),
        "sluice {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `sluice ARGS` on the control plane's kubeconfig (the CLI as a user runs it): its output, stdout then stderr;
/// panics with it unless it succeeds.
pub fn sluice_on(plane: &ControlPlane, args: &[&str]) -> String {
    let out = sluice()
        .args(args)
        .env("KUBECONFIG", plane.kubeconfig())
        .output()
        .expect("sluice");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "sluice {}: {text}", args.join(" "));
    text
}

/// Parses one YAML object.
pub fn yaml<T: DeserializeOwned>(s: &str) -> T {
    serde_yaml::from_str(s).expect("fixture YAML")
}

/// Creates an object, panicking with the API server's answer if it is refused.
pub async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + DeserializeOwned,
{
    api.create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("create {:?}: {e}", obj.meta().name))
}

/// Sluice as the README installs it on a local control plane: CRDs with the conversion webhook, the webhook
/// process and its configurations, the operator process, and a fake kubelet with `nodes`.
pub struct Installed {
    /// `sluice webhook`.
    pub webhook: Webhook,
    /// `sluice operator`.
    pub operator: Operator,
    /// The fake kubelet (runs while this lives).
    pub _kubelet: FakeKubelet,
    /// A cluster-admin client.
    pub client: Client,
}

/// Installs the CRDs (Established), the webhook and its configurations; returns the webhook.
pub async fn install_webhook(plane: &ControlPlane) -> Webhook {
    let webhook = Webhook::start(plane);
    register_webhook(plane, &webhook);
    webhook
}

/// Installs the CRDs with their conversion webhook at `webhook` (waiting until they are Established), then the
/// webhook configurations pointing at it, as the README does.
pub fn register_webhook(plane: &ControlPlane, webhook: &Webhook) {
    let ca = plane.file("ca.crt").display().to_string();
    let crds = sluice_stdout(&["crds", "--conversion-url", &webhook.url, "--ca-file", &ca]);
    // A plane kept from an earlier test has them already when the webhook got its port back.
    let count = crds.matches("kind: CustomResourceDefinition").count();
    apply_crds_once(plane, "sluice-crds", &[&crds], count);
    let configs = sluice_stdout(&[
        "webhook",
        "configurations",
        "--url",
        &webhook.url,
        "--ca-file",
        &ca,
    ]);
    plane.kubectl(&["apply", "-f", "-"], Some(&configs));
}

/// Applies `manifests` (holding `count` CRDs in all) server-side unless this plane has had exactly these as `what`
/// before (a kept plane), waits until they are Established and notes them as applied.
pub fn apply_crds_once(plane: &ControlPlane, what: &str, manifests: &[&str], count: usize) {
    let all = manifests.concat();
    if manifests.is_empty() || plane.applied_before(what, &all) {
        return;
    }
    for m in manifests {
        plane.kubectl(&["apply", "--server-side", "-f", "-"], Some(m));
    }
    wait_established(plane, count);
    plane.applied(what, &all);
}

/// Waits until `count` CRDs exist and all are Established. `kubectl wait` watches instead of listing the CRDs
/// (Kueue's are over a megabyte) again and again; it fails on a CRD whose status is not written yet, so a failure
/// is retried until the deadline.
pub fn wait_established(plane: &ControlPlane, count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let timeout = format!("--timeout={}s", left.as_secs().max(1));
        let out = plane.kubectl_output(
            &[
                "wait",
                "--for",
                "condition=Established",
                "crd",
                "--all",
                "-o",
                "name",
                &timeout,
            ],
            None,
        );
        let met = String::from_utf8_lossy(&out.stdout).lines().count();
        if out.status.success() && met >= count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "CRDs not Established after 60 s: {met} of {count} ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Installs everything with the operator's and the webhook's `--config` written from `config` (a Kueue
/// Configuration, or none), as the chart gives both the same file.
pub async fn install(
    plane: &ControlPlane,
    config: Option<&str>,
    nodes: Vec<FakeNode>,
) -> Installed {
    let mut config_flags = Vec::new();
    if let Some(c) = config {
        let path = plane.file("operator-config.yaml");
        std::fs::write(&path, c).expect("config");
        config_flags.push("--config".to_string());
        config_flags.push(path.display().to_string());
    }
    let webhook = Webhook::start_with_flags(plane, &plane.kubeconfig(), &config_flags);
    register_webhook(plane, &webhook);
    let mut flags = vec!["--leader-elect=false".to_string()];
    flags.extend(config_flags);
    let operator = Operator::start(plane, "operator", &flags);
    let client = plane.client().await;
    let kubelet = FakeKubelet::start(client.clone(), nodes).await;
    Installed {
        webhook,
        operator,
        _kubelet: kubelet,
        client,
    }
}

/// The Workloads in a namespace.
pub async fn workloads(client: &Client, ns: &str) -> Vec<kueue::Workload> {
    Api::<kueue::Workload>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Whether a Workload has condition `kind` with status True.
pub fn has_condition(w: &kueue::Workload, kind: &str) -> bool {
    condition(w, kind).is_some_and(|c| c.status == "True")
}

/// Asserts the Workload `name` is preempted within its ClusterQueue (`Preempted` True, reason `InClusterQueue`).
pub async fn assert_preempted_in_cluster_queue(wls: &Api<kueue::Workload>, name: &str) {
    let preempted = wls.get(name).await.expect("workload");
    let c = condition(&preempted, "Preempted").expect("Preempted condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "InClusterQueue")
    );
}

/// A Workload's condition of this type.
pub fn condition<'a>(
    w: &'a kueue::Workload,
    kind: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    w.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == kind))
}

/// The Workload owned by the object named `owner` (a Job or a pod group's Pods) in `ns`, once there is one.
pub async fn workload_of(client: &Client, ns: &str, owner: &str) -> kueue::Workload {
    eventually(60, &format!("the Workload of {ns}/{owner}"), || async {
        workloads(client, ns).await.into_iter().find(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == owner)
        })
    })
    .await
}

/// Every version of every Workload the API server sent on a watch, in order (the watch history).
pub struct History {
    seen: std::sync::Arc<std::sync::Mutex<Vec<kueue::Workload>>>,
    task: tokio::task::JoinHandle<()>,
}

impl History {
    /// Starts watching all Workloads.
    pub fn start(client: &Client) -> History {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let api: Api<kueue::Workload> = Api::all(client.clone());
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let objects = match event {
                    Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => vec![w],
                    _ => continue,
                };
                sink.lock().expect("history").extend(objects);
            }
        });
        History { seen, task }
    }

    /// A copy of what was seen so far.
    pub fn versions(&self) -> Vec<kueue::Workload> {
        self.seen.lock().expect("history").clone()
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A one-container Job (`agnhost pause`) queued in LocalQueue `ns/lq`: `pods` pods, each with `resources`
/// (flow YAML, e.g. `{requests: {cpu: "1"}}`), `labels` added to the queue-name label and `annotations` on its
/// pod template (flow YAML entries, e.g. `"fake-kubelet.sluice.dev/run-seconds": "2"`).
pub struct JobYaml<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its namespace.
    pub ns: &'a str,
    /// Its LocalQueue.
    pub lq: &'a str,
    /// Parallelism and completions.
    pub pods: u32,
    /// The container's resources.
    pub resources: &'a str,
    /// Extra labels on the Job.
    pub labels: &'a str,
    /// Annotations on the pod template.
    pub annotations: &'a str,
}

impl<'a> JobYaml<'a> {
    /// One pod asking for one CPU, with the fake kubelet's run-seconds annotation (`annotations` holds it).
    pub fn one_cpu(name: &'a str, ns: &'a str, annotations: &'a str) -> Self {
        JobYaml {
            name,
            ns,
            lq: "lq",
            pods: 1,
            resources: r#"{requests: {cpu: "1"}}"#,
            labels: "",
            annotations,
        }
    }

    /// The manifest.
    pub fn render(&self) -> String {
        let JobYaml {
            name,
            ns,
            lq,
            pods,
            resources,
            labels,
            annotations,
        } = self;
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!(", {labels}")
        };
        format!(
            r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {ns}
  labels: {{kueue.x-k8s.io/queue-name: {lq}{labels}}}
spec:
  parallelism: {pods}
  completions: {pods}
  template:
    metadata:
      annotations: {{{annotations}}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: [pause]
        resources: {resources}
"#
        )
    }
}

/// A ResourceFlavor `flavor`, a ClusterQueue `cq` over all namespaces with `quotas` of it (flow YAML list, e.g.
/// `[{name: cpu, nominalQuota: 8}]`, covering `covered`), and a LocalQueue `ns/lq` on it in a new Namespace.
pub fn queue_setup(
    flavor: &str,
    cq: &str,
    covered: &str,
    quotas: &str,
    ns: &str,
    lq: &str,
) -> String {
    format!(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {cq}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: {covered}
    flavors:
    - name: {flavor}
      resources: {quotas}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {lq}, namespace: {ns}}}
spec: {{clusterQueue: {cq}}}
"#
    )
}

/// Flavor `h100`, ClusterQueue `research` (16 CPUs, 8 GPUs) and LocalQueue `lab/main`.
pub fn lab_gpu_queues() -> String {
    queue_setup(
        "h100",
        "research",
        "[cpu, nvidia.com/gpu]",
        "[{name: cpu, nominalQuota: 16}, {name: nvidia.com/gpu, nominalQuota: 8}]",
        "lab",
        "main",
    )
}

/// A one-pod Job in `lab/main` asking for one CPU and `gpus` GPUs.
pub fn lab_gpu_job(name: &str, gpus: u32) -> String {
    let resources = format!(r#"{{requests: {{cpu: "1"}}, limits: {{nvidia.com/gpu: "{gpus}"}}}}"#);
    JobYaml {
        name,
        ns: "lab",
        lq: "main",
        pods: 1,
        resources: &resources,
        labels: "",
        annotations: "",
    }
    .render()
}

/// A file's bytes base64-encoded, as a webhook's caBundle is (k8s-openapi's ByteString serialises so).
pub fn b64(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).expect("certificate");
    match serde_json::to_value(k8s_openapi::ByteString(bytes)).expect("base64") {
        serde_json::Value::String(s) => s,
        other => panic!("ByteString serialised as {other}"),
    }
}
