//! Policy modules on the real API server: `sluice policy push` of a shipped module, the operator loading it and
//! switching the ClusterQueue that names it (PolicySelected), a new version hot-swapped, a broken module
//! refused by the API server through the validating webhook, and the same for a preemption-cost module (the
//! CRD's `preemptioncost` kind, the webhook's world check, the ClusterQueue's `sluice.dev/preemption-policy`).

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use sluice_operator::policy::embedded;

use super::plane::ControlPlane;
use super::support::*;

/// (reason, involved object's kind/name, message) of every Event in the cluster.
async fn events(client: &kube::Client) -> Vec<(String, String, String)> {
    Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let o = e.involved_object;
            (
                e.reason.unwrap_or_default(),
                format!(
                    "{}/{}",
                    o.kind.unwrap_or_default(),
                    o.name.unwrap_or_default()
                ),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

async fn wait_event(client: &kube::Client, reason: &str, object: &str, message_part: &str) {
    eventually(
        60,
        &format!("a {reason} event on {object} with \"{message_part}\""),
        || async {
            events(client)
                .await
                .iter()
                .any(|(r, o, m)| r == reason && o == object && m.contains(message_part))
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_modules_are_pushed_hot_swapped_and_checked() {
    let Some(plane) = ControlPlane::up("policy") else {
        return;
    };
    let installed = install(&plane, None, Vec::new()).await;
    let client = installed.client.clone();
    // A ClusterQueue that names a module not pushed yet: the built-in serves it, with a PolicyFallback warning.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: gpus
  annotations: {sluice.dev/placement-policy: spread}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
"#,
        ),
    );
    wait_event(&client, "PolicyFallback", "ClusterQueue/gpus", "spread").await;

    // `sluice policy push` of the shipped spread module, applied with kubectl: loaded, and the queue switches.
    let wasm = plane.file("spread.wasm");
    std::fs::write(&wasm, embedded::SPREAD).expect("module file");
    let wasm = wasm.display().to_string();
    let manifest = sluice_stdout(&[
        "policy",
        "push",
        &wasm,
        "--name",
        "spread",
        "--kind",
        "placement",
    ]);
    plane.kubectl(&["apply", "--server-side", "-f", "-"], Some(&manifest));
    wait_event(
        &client,
        "PolicyModuleLoaded",
        "PolicyModule/spread",
        "placement module compiled and loaded",
    )
    .await;
    wait_event(&client, "PolicySelected", "ClusterQueue/gpus", "").await;
    let sha = sluice_sdk::host::sha256_hex(embedded::SPREAD);
    let ls = sluice_on(&plane, &["policy", "ls"]);
    assert!(ls.contains("spread") && ls.contains(&sha[..12]), "{ls}");

    // A new version under the same name (the topology-pack module's bytes) replaces it in the running operator.
    let wasm2 = plane.file("pack.wasm");
    std::fs::write(&wasm2, embedded::TOPOLOGY_PACK).expect("module file");
    let manifest = sluice_stdout(&[
        "policy",
        "push",
        &wasm2.display().to_string(),
        "--name",
        "spread",
        "--kind",
        "placement",
    ]);
    plane.kubectl(&["apply", "--server-side", "-f", "-"], Some(&manifest));
    let sha2 = sluice_sdk::host::sha256_hex(embedded::TOPOLOGY_PACK);
    // (A repeated PolicyModuleLoaded event on the same object is counted in its series and keeps its first
    // note, so the new sha256 is read from the status.)
    eventually(
        60,
        "the new version's sha256 in the PolicyModule's status",
        || async {
            let out = plane.kubectl(&["get", "policymodules", "spread", "-o", "json"], None);
            let v: serde_json::Value = serde_json::from_str(&out).ok()?;
            (v["status"]["sha256"] == sha2.as_str()).then_some(())
        },
    )
    .await;

    // A broken module is refused by the API server, through the validating webhook, naming the field.
    let broken = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: PolicyModule\nmetadata: {{name: broken}}\nspec:\n  kind: placement\n  sha256: {}\n  module: {}\n",
        sluice_sdk::host::sha256_hex(b"not a wasm component"),
        base64_of(b"not a wasm component"),
    );
    let out = plane.kubectl_output(&["apply", "-f", "-"], Some(&broken));
    assert!(!out.status.success(), "a broken module was accepted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vpolicymodule.sluice.dev"), "{err}");
    assert!(err.contains("spec.module"), "{err}");

    // Preemption cost: a ClusterQueue naming a module not pushed yet falls back to Kueue's rules.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: careful
  annotations: {sluice.dev/preemption-policy: calm}
spec:
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
"#,
        ),
    );
    wait_event(
        &client,
        "PolicyFallback",
        "ClusterQueue/careful",
        "no PolicyModule named \"calm\"",
    )
    .await;
    let costs = plane.file("anti-thrash.wasm");
    std::fs::write(&costs, embedded::ANTI_THRASH).expect("module file");
    let costs = costs.display().to_string();
    let manifest = sluice_stdout(&[
        "policy",
        "push",
        &costs,
        "--name",
        "calm",
        "--kind",
        "preemptioncost",
        "--config",
        r#"{"minRunSeconds": 600}"#,
    ]);
    assert!(manifest.contains("kind: preemptioncost"), "{manifest}");
    plane.kubectl(&["apply", "--server-side", "-f", "-"], Some(&manifest));
    wait_event(
        &client,
        "PolicyModuleLoaded",
        "PolicyModule/calm",
        "preemptioncost module compiled and loaded",
    )
    .await;
    wait_event(&client, "PolicySelected", "ClusterQueue/careful", "").await;
    let inspect = sluice_on(&plane, &["policy", "inspect", "calm"]);
    assert!(
        inspect.contains("Kind:          preemptioncost")
            && inspect.contains("preemption       careful"),
        "{inspect}"
    );

    // A placement module declared as a preemption-cost one is refused by the webhook's world check.
    let wrong = format!(
        "apiVersion: sluice.dev/v1alpha1\nkind: PolicyModule\nmetadata: {{name: wrong-world}}\nspec:\n  kind: preemptioncost\n  sha256: {}\n  module: {}\n",
        sluice_sdk::host::sha256_hex(embedded::SPREAD),
        base64_of(embedded::SPREAD),
    );
    let out = plane.kubectl_output(&["apply", "-f", "-"], Some(&wrong));
    assert!(
        !out.status.success(),
        "a module of the wrong world was accepted"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "spec.kind: the module does not implement the sluice:policy/preemption-cost world"
        ),
        "{err}"
    );
}

fn base64_of(bytes: &[u8]) -> String {
    serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .expect("base64")
}
