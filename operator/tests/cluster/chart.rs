//! The Helm chart on a real API server: the rendered release (`.ci/chart-check` renders it with Helm's engine
//! into target/chart-check/render) is accepted object by object with `--dry-run=server`; then the operator, the
//! webhook and the node agent run with their ServiceAccounts' tokens under the chart's own RBAC (not
//! cluster-admin) and do their work, proving the chart grants enough. Its roles use no wildcards.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::Value;
use sluice_sdk::kueue::v1beta2::Workload;

use super::kubelet::{FakeKubelet, FakeNode};
use super::plane::{ControlPlane, repo_root};
use super::sluice::{Operator, Process, Webhook};
use super::support::*;

const NS: &str = "sluice-system";

fn render_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("SLUICE_CHART_RENDER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/chart-check/render"));
    dir.join("default.json").exists().then_some(dir)
}

/// A kubeconfig that authenticates with `token` (a ServiceAccount's), written next to the admin one.
fn token_kubeconfig(plane: &ControlPlane, name: &str, token: &str) -> PathBuf {
    let admin = std::fs::read_to_string(plane.kubeconfig()).expect("kubeconfig");
    let ca = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .expect("CA in the kubeconfig");
    let path = plane.file(&format!("{name}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: local\n  context: {{cluster: local, user: {name}, namespace: {NS}}}\ncurrent-context: local\n",
            plane.server()
        ),
    )
    .expect("kubeconfig");
    path
}

fn service_account(objects: &[Value], kind: &str, component: &str) -> String {
    objects
        .iter()
        .filter(|o| o["kind"] == kind)
        .find(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] == component)
        .and_then(|o| o["spec"]["template"]["spec"]["serviceAccountName"].as_str())
        .unwrap_or_else(|| panic!("no {kind} of component {component} in the render"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_is_accepted_and_its_rbac_is_enough() {
    let Some(render) = render_dir() else {
        let msg = "no chart render in target/chart-check/render: run `bash .ci/chart-check` first";
        assert!(
            std::env::var("SLUICE_E2E").as_deref() != Ok("require"),
            "{msg}"
        );
        eprintln!("skipped chart_is_accepted_and_its_rbac_is_enough: {msg}");
        return;
    };
    let Some(plane) = ControlPlane::up("chart") else {
        return;
    };
    let text = std::fs::read_to_string(render.join("default.json")).expect("render");
    let list: Value = serde_json::from_str(&text).expect("rendered JSON");
    let objects: Vec<Value> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| list.as_array().cloned().expect("a list of objects"));
    assert!(objects.len() > 20, "{} objects rendered", objects.len());

    // Every rendered object is accepted by the API server (schema, defaults, admission), one by one.
    plane.kubectl(&["create", "namespace", NS], None);
    let all = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string();
    let out = plane.kubectl(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        Some(&all),
    );
    assert_eq!(out.lines().count(), objects.len(), "{out}");

    // No wildcard verbs or resources in any role.
    let rbac: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some(
                    "ClusterRole"
                        | "Role"
                        | "ClusterRoleBinding"
                        | "RoleBinding"
                        | "ServiceAccount"
                )
            )
        })
        .collect();
    for role in rbac
        .iter()
        .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Role")))
    {
        for rule in role["rules"].as_array().into_iter().flatten() {
            for field in ["verbs", "resources", "apiGroups"] {
                let wild = rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v == "*");
                assert!(
                    !wild,
                    "{} {}: wildcard {field}",
                    role["kind"], role["metadata"]["name"]
                );
            }
        }
    }
    // The RBAC objects for real, then each component with its own ServiceAccount's token.
    let rbac = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rbac}).to_string();
    plane.kubectl(&["apply", "-f", "-"], Some(&rbac));
    let token = |sa: &str| {
        plane
            .kubectl(&["create", "token", sa, "-n", NS, "--duration", "1h"], None)
            .trim()
            .to_string()
    };
    let operator_sa = service_account(&objects, "Deployment", "operator");
    let webhook_sa = service_account(&objects, "Deployment", "webhook");
    let agent_sa = service_account(&objects, "DaemonSet", "node-agent");

    // CRDs and webhook configuration are the installer's (cluster-admin) job, as with `helm install`.
    let webhook_kc = token_kubeconfig(&plane, "webhook", &token(&webhook_sa));
    let webhook = Webhook::start_with(&plane, &webhook_kc);
    register_webhook(&plane, &webhook);
    let operator_kc = token_kubeconfig(&plane, "operator", &token(&operator_sa));
    let flags = ["--leader-elect=true", "--lease-namespace", NS].map(String::from);
    let operator = Operator::start_with(&plane, "operator", &flags, &operator_kc);
    let client = plane.client().await;
    let _kubelet = FakeKubelet::start(client.clone(), vec![FakeNode::new("gpu-0", 8, 8)]).await;
    let agent_kc = token_kubeconfig(&plane, "node-agent", &token(&agent_sa));
    let fixture = format!(
        "{}/tests/fixtures/agent-hgx.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let args = [
        "node-agent",
        "--node-name",
        "gpu-0",
        "--fake",
        &fixture,
        "--interval",
        "1s",
    ]
    .map(String::from);
    let _agent = Process::start_with(&plane, "node-agent", &args, &[], &agent_kc);

    let job = JobYaml {
        name: "rbac-job",
        ns: "default",
        lq: "lq",
        pods: 1,
        resources: r#"{requests: {cpu: "1"}}"#,
        labels: "",
        annotations: r#""fake-kubelet.sluice.dev/run-seconds": "1""#,
    };
    let setup = queue_setup(
        "default",
        "cq",
        "[cpu]",
        "[{name: cpu, nominalQuota: 2}]",
        "default",
        "lq",
    );
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&(setup + "---" + &job.render())),
    );
    // The operator (its own token) admits and finishes the Job, and writes the ClusterQueue's status.
    let wl = workload_of(&client, "default", "rbac-job").await;
    let name = wl.metadata.name.clone().expect("name");
    let wls: Api<Workload> = Api::namespaced(client.clone(), "default");
    eventually(
        90,
        "rbac-job admitted and finished by the chart-RBAC operator",
        || async {
            let w = wls.get(&name).await.ok()?;
            (has_condition(&w, "Admitted") && has_condition(&w, "Finished")).then_some(())
        },
    )
    .await;
    // The node agent (its own token) published its Node's labels and NodeGpuTopology.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(60, "the agent's GFD labels", || async {
        let labels = nodes.get("gpu-0").await.ok()?.metadata.labels?;
        labels.contains_key("nvidia.com/gpu.count").then_some(())
    })
    .await;
    plane.kubectl(&["get", "nodegputopologies", "gpu-0"], None);
    // Nobody was refused anything.
    for log in [&operator.process, &webhook.process] {
        let text = std::fs::read_to_string(&log.log).unwrap_or_default();
        assert!(
            !text.contains("forbidden") && !text.contains("Forbidden"),
            "{} was refused by RBAC: {}",
            log.what,
            log.tail()
        );
    }
}
