//! PolicyModules in the running operator against the fake API server: status written after a load, a bad
//! version leaving the previous one serving, a swap changing where a ClusterQueue's pods go without a
//! restart, deletion falling back to the built-in, bytes from a ConfigMap, a trapping module ending
//! Degraded while admissions go on, and a root Cohort's fairness annotation re-chosen on Cohort events.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use serde_json::Value;
use sluice_operator::controller::{Operator, OperatorConfig};
use sluice_operator::leader::Leadership;
use sluice_operator::policy::embedded;
use sluice_operator::testing::FakeApi;
use sluice_sdk::host::{HostConfig, sha256_hex};
use sluice_sdk::kueue::conversion::expand_topology_assignment;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::policy_module::{
    ConfigMapModuleRef, PolicyKind, PolicyModule, PolicyModuleSpec, PolicyModuleStatus,
};

use crate::support::*;

const HOST: &str = "kubernetes.io/hostname";

/// Generous call deadline (debug builds on a shared machine), degraded after 2 failures in a row, counters
/// written at most every 50ms.
fn policy_config() -> OperatorConfig {
    let mut c = config();
    c.policy_host = HostConfig {
        pool_instances: 8,
        default_deadline: Duration::from_secs(2),
        ..HostConfig::default()
    };
    c.policy_degrade_after = 2;
    c.policy_status_interval = Duration::from_millis(50);
    c
}

/// Topology `dc` (rack, hostname), TAS flavor `tas`, ClusterQueue `cq` (annotated with `annotations`),
/// LocalQueue `team-a/lq` and five 4-GPU nodes.
fn seed(fake: &FakeApi, annotations: &str) {
    fake.put(&yaml::<Namespace>("metadata: {name: team-a}"));
    fake.put(&yaml::<api::Topology>(&format!(
        "metadata: {{name: dc}}\nspec: {{levels: [{{nodeLabel: rack}}, {{nodeLabel: {HOST}}}]}}"
    )));
    fake.put(&yaml::<api::ResourceFlavor>(
        "metadata: {name: tas}\nspec: {topologyName: dc, nodeLabels: {pool: gpu}}",
    ));
    fake.put(&yaml::<api::ClusterQueue>(&format!(
        r#"
metadata: {{name: cq, annotations: {{{annotations}}}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: tas
      resources:
      - {{name: cpu, nominalQuota: "64"}}
      - {{name: nvidia.com/gpu, nominalQuota: "32"}}
"#
    )));
    fake.put(&yaml::<api::LocalQueue>(
        "metadata: {name: lq, namespace: team-a}\nspec: {clusterQueue: cq}",
    ));
    for (n, rack) in [
        ("n1", "r1"),
        ("n2", "r1"),
        ("n3", "r2"),
        ("n4", "r2"),
        ("n5", "r2"),
    ] {
        fake.put(&yaml::<Node>(&format!(
            r#"
metadata: {{name: {n}, labels: {{pool: gpu, rack: {rack}, {HOST}: {n}}}}}
status:
  allocatable: {{cpu: "32", nvidia.com/gpu: "4", pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"#
        )));
    }
}

/// An inline module.
fn module(name: &str, kind: PolicyKind, bytes: &[u8], sha256: &str) -> PolicyModule {
    PolicyModule::new(
        name,
        PolicyModuleSpec {
            kind,
            module: Some(ByteString(bytes.to_vec())),
            sha256: sha256.to_string(),
            ..PolicyModuleSpec::default()
        },
    )
}

fn placement(name: &str, bytes: &[u8]) -> PolicyModule {
    module(name, PolicyKind::Placement, bytes, &sha256_hex(bytes))
}

fn wat(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sdk/tests/wat")
        .join(format!("{name}.wat"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A Workload of `pods` one-GPU pods, placed anywhere in the topology.
fn spread_workload(name: &str, pods: i32) -> api::Workload {
    yaml(&format!(
        r#"
metadata: {{name: {name}, namespace: team-a}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: {pods}
    topologyRequest: {{unconstrained: true}}
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "1", nvidia.com/gpu: "1"}}}}
"#
    ))
}

fn status_of(fake: &FakeApi, name: &str) -> Option<PolicyModuleStatus> {
    fake.get::<PolicyModule>(None, name).and_then(|m| m.status)
}

/// (status, reason, message) of a condition of the stored PolicyModule.
fn condition_of(fake: &FakeApi, name: &str, type_: &str) -> Option<(String, String, String)> {
    status_of(fake, name)?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.reason, c.message))
}

fn compiled(fake: &FakeApi, name: &str) -> Option<String> {
    condition_of(fake, name, "Compiled").map(|c| c.0)
}

/// Hosts the admitted Workload's first pod set was placed on.
fn hosts_of(fake: &FakeApi, name: &str) -> BTreeSet<String> {
    let wl = get_workload(fake, name).expect("workload");
    let adm = wl.status.and_then(|s| s.admission).expect("admitted");
    let ta = adm.pod_set_assignments[0]
        .topology_assignment
        .clone()
        .expect("topologyAssignment");
    let ex = expand_topology_assignment(&ta).expect("valid slices");
    ex.domains
        .into_iter()
        .map(|d| d.values[0].clone())
        .collect()
}

/// Submits a two-pod Workload, waits for its admission and returns its hosts; then deletes it so the next
/// one sees an empty cluster.
async fn place_two_pods(fake: &FakeApi, name: &str) -> BTreeSet<String> {
    fake.put(&spread_workload(name, 2));
    wait_for(30, &format!("{name} admitted"), || admitted(fake, name)).await;
    let hosts = hosts_of(fake, name);
    fake.remove::<api::Workload>(Some("team-a"), name);
    hosts
}

fn status_patches(fake: &FakeApi, name: &str) -> Vec<Value> {
    writes(fake, "PATCH", &format!("/policymodules/{name}/status"))
        .into_iter()
        .filter_map(|r| r.body)
        .collect()
}

#[tokio::test]
async fn a_good_module_gets_compiled_true_and_its_sha256() {
    let fake = FakeApi::new();
    seed(&fake, "sluice.dev/placement-policy: pack");
    let sha = sha256_hex(embedded::TOPOLOGY_PACK);
    fake.put(&placement("pack", embedded::TOPOLOGY_PACK));
    let op = start(&fake, "op", policy_config());
    wait_for(30, "status written", || compiled(&fake, "pack").is_some()).await;
    let patches = status_patches(&fake, "pack");
    assert_eq!(patches.len(), 1, "{patches:?}");
    let mut body = patches[0].clone();
    let rv = body["metadata"]["resourceVersion"].take();
    assert!(
        rv.as_str().is_some_and(|s| !s.is_empty()),
        "resourceVersion precondition: {body}"
    );
    for c in body["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
    {
        assert!(c["lastTransitionTime"].is_string(), "{c}");
        c["lastTransitionTime"] = Value::Null;
        if let Some(m) = c.as_object_mut() {
            m.remove("observedGeneration");
        }
    }
    assert_eq!(
        body,
        serde_json::json!({
            "metadata": {"resourceVersion": null},
            "status": {
                "conditions": [
                    {"type": "Compiled", "status": "True", "reason": "Loaded",
                     "message": format!("compiled and initialised (sha256 {sha})"),
                     "lastTransitionTime": null},
                    {"type": "Degraded", "status": "False", "reason": "Healthy", "message": "",
                     "lastTransitionTime": null},
                ],
                "sha256": sha,
            }
        })
    );
    // The module serves the ClusterQueue: pods admitted and placed.
    assert_eq!(place_two_pods(&fake, "w1").await.len(), 1);
    op.abort();
}

// Multi-threaded: modules compile off the runtime's async path there (block_in_place).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_changes_placement_a_bad_version_keeps_the_previous_and_delete_falls_back() {
    let fake = FakeApi::new();
    seed(&fake, "sluice.dev/placement-policy: placer");
    fake.put(&placement("placer", embedded::TOPOLOGY_PACK));
    let op = start(&fake, "op", policy_config());
    wait_for(30, "v1 compiled", || {
        compiled(&fake, "placer").as_deref() == Some("True")
    })
    .await;
    // v1 (topology-pack) packs both pods on one node.
    assert_eq!(place_two_pods(&fake, "w1").await.len(), 1);

    // v2 (spread): one pod per node, without restarting the operator.
    let spread_sha = sha256_hex(embedded::SPREAD);
    fake.put(&placement("placer", embedded::SPREAD));
    wait_for(30, "v2 loaded", || {
        status_of(&fake, "placer").and_then(|s| s.sha256).as_deref() == Some(spread_sha.as_str())
    })
    .await;
    assert_eq!(place_two_pods(&fake, "w2").await.len(), 2);

    // v3 is not WebAssembly: Compiled=False with the compiler's message, and v2 keeps serving.
    fake.put(&placement("placer", b"not wasm"));
    wait_for(30, "v3 refused", || {
        compiled(&fake, "placer").as_deref() == Some("False")
    })
    .await;
    let (_, reason, message) = condition_of(&fake, "placer", "Compiled").expect("condition");
    assert_eq!(reason, "CompileFailed");
    assert!(
        message.contains(&format!(
            "previous version (sha256 {spread_sha}) keeps serving"
        )),
        "{message}"
    );
    assert_eq!(
        status_of(&fake, "placer").and_then(|s| s.sha256),
        Some(spread_sha.clone())
    );
    assert_eq!(place_two_pods(&fake, "w3").await.len(), 2);

    // A sha256 that does not match the bytes is refused before compiling.
    fake.put(&module(
        "placer",
        PolicyKind::Placement,
        embedded::TOPOLOGY_PACK,
        &"0".repeat(64),
    ));
    wait_for(30, "sha mismatch reported", || {
        condition_of(&fake, "placer", "Compiled").is_some_and(|c| c.1 == "InvalidSpec")
    })
    .await;
    let (_, _, message) = condition_of(&fake, "placer", "Compiled").expect("condition");
    assert!(message.contains("spec.sha256"), "{message}");
    assert_eq!(
        place_two_pods(&fake, "w4").await.len(),
        2,
        "spread still serves"
    );

    // Deleted: the ClusterQueue falls back to the built-in topology-pack.
    fake.remove::<PolicyModule>(None, "placer");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(place_two_pods(&fake, "w5").await.len(), 1);
    op.abort();
}

#[tokio::test]
async fn module_bytes_come_from_the_config_map_it_names() {
    let fake = FakeApi::new();
    seed(&fake, "sluice.dev/placement-policy: from-cm");
    fake.put(&yaml::<Namespace>("metadata: {name: sluice-system}"));
    let mut cm: ConfigMap = yaml("metadata: {name: modules, namespace: sluice-system}");
    cm.binary_data = Some(
        [(
            "spread.wasm".to_string(),
            ByteString(embedded::SPREAD.to_vec()),
        )]
        .into(),
    );
    fake.put(&cm);
    let sha = sha256_hex(embedded::SPREAD);
    fake.put(&PolicyModule::new(
        "from-cm",
        PolicyModuleSpec {
            kind: PolicyKind::Placement,
            config_map_ref: Some(ConfigMapModuleRef {
                namespace: "sluice-system".into(),
                name: "modules".into(),
                key: "spread.wasm".into(),
            }),
            sha256: sha.clone(),
            ..PolicyModuleSpec::default()
        },
    ));
    let op = start(&fake, "op", policy_config());
    wait_for(30, "compiled from the ConfigMap", || {
        compiled(&fake, "from-cm").as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        status_of(&fake, "from-cm").and_then(|s| s.sha256),
        Some(sha.clone())
    );
    assert_eq!(place_two_pods(&fake, "w1").await.len(), 2);

    // New bytes in the ConfigMap are picked up by its watch (here they no longer match the sha256).
    cm.binary_data = Some([("spread.wasm".to_string(), ByteString(b"junk".to_vec()))].into());
    fake.put(&cm);
    wait_for(30, "ConfigMap change seen", || {
        condition_of(&fake, "from-cm", "Compiled").is_some_and(|c| c.1 == "InvalidSpec")
    })
    .await;
    // Only that ConfigMap is read.
    let reads: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/configmaps"))
        .map(|r| r.path)
        .collect();
    assert!(
        reads
            .iter()
            .all(|p| p.starts_with("/api/v1/namespaces/sluice-system/configmaps")),
        "{reads:?}"
    );
    op.abort();
}

#[tokio::test]
async fn cluster_queue_annotation_changes_re_route() {
    let fake = FakeApi::new();
    seed(&fake, "sluice.dev/placement-policy: spread");
    fake.put(&placement("spread", embedded::SPREAD));
    fake.put(&placement("pack", embedded::TOPOLOGY_PACK));
    let op = start(&fake, "op", policy_config());
    wait_for(30, "both compiled", || {
        compiled(&fake, "spread").as_deref() == Some("True")
            && compiled(&fake, "pack").as_deref() == Some("True")
    })
    .await;
    assert_eq!(place_two_pods(&fake, "w1").await.len(), 2);
    let mut cq = fake
        .get::<api::ClusterQueue>(None, "cq")
        .expect("ClusterQueue");
    cq.metadata.annotations = Some(
        [(
            "sluice.dev/placement-policy".to_string(),
            "pack".to_string(),
        )]
        .into(),
    );
    fake.put(&cq);
    assert_eq!(place_two_pods(&fake, "w2").await.len(), 1);
    cq.metadata.annotations = Some(
        [(
            "sluice.dev/placement-policy".to_string(),
            "spread".to_string(),
        )]
        .into(),
    );
    fake.put(&cq);
    assert_eq!(place_two_pods(&fake, "w3").await.len(), 2);
    op.abort();
}

#[tokio::test]
async fn a_module_that_traps_ends_degraded_and_admissions_go_on() {
    let fake = FakeApi::new();
    seed(&fake, "sluice.dev/placement-policy: trap");
    fake.put(&placement("trap", &wat("trap")));
    let operator =
        Operator::new(fake.client("op"), policy_config(), Leadership::always()).without_events();
    let metrics = operator.metrics.clone();
    let op = tokio::spawn(async move {
        let _ = operator.run().await;
    });
    wait_for(30, "compiled", || {
        compiled(&fake, "trap").as_deref() == Some("True")
    })
    .await;
    for name in ["w1", "w2", "w3"] {
        // The built-in topology-pack decides each time.
        assert_eq!(place_two_pods(&fake, name).await.len(), 1);
    }
    wait_for(30, "Degraded in status", || {
        condition_of(&fake, "trap", "Degraded").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (_, reason, message) = condition_of(&fake, "trap", "Degraded").expect("condition");
    assert_eq!(reason, "RepeatedFailures");
    assert!(message.contains("unreachable"), "{message}");
    wait_for(30, "failure counts", || {
        status_of(&fake, "trap").is_some_and(|s| {
            s.failures.get("trap").is_some_and(|&n| n >= 2)
                && s.failures.get("degraded").is_some_and(|&n| n >= 1)
        })
    })
    .await;
    // The same counts as metrics.
    let sample = |text: &str, series: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    wait_for(10, "metrics", || {
        let text = metrics.render();
        sample(
            &text,
            "sluice_policy_module_calls_total{module=\"trap\",outcome=\"trap\"}",
        ) >= 2
            && sample(&text, "sluice_policy_degraded{module=\"trap\"}") == 1
    })
    .await;
    op.abort();
}

#[tokio::test]
async fn selection_errors_fall_back_and_are_reported_with_events() {
    let fake = FakeApi::new();
    seed(
        &fake,
        "sluice.dev/placement-policy: missing, sluice.dev/fairness-policy: pack",
    );
    fake.put(&placement("pack", embedded::TOPOLOGY_PACK));
    fake.put(&placement("broken", b"\0asm junk"));
    let op = Operator::new(fake.client("op"), policy_config(), Leadership::always());
    let task = tokio::spawn(async move {
        let _ = op.run().await;
    });
    wait_for(30, "broken reported", || {
        compiled(&fake, "broken").as_deref() == Some("False")
    })
    .await;
    // The built-in places the ClusterQueue's workloads.
    assert_eq!(place_two_pods(&fake, "w1").await.len(), 1);
    let reasons = |fake: &FakeApi| -> Vec<(String, String)> {
        writes(fake, "POST", "/events")
            .into_iter()
            .filter_map(|r| r.body)
            .map(|b| {
                (
                    b["reason"].as_str().unwrap_or_default().to_string(),
                    b["regarding"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect()
    };
    wait_for(10, "events", || {
        let r = reasons(&fake);
        r.contains(&("PolicyFallback".into(), "cq".into()))
            && r.contains(&("PolicyModuleLoadFailed".into(), "broken".into()))
            && r.contains(&("PolicyModuleLoaded".into(), "pack".into()))
    })
    .await;
    let fallback: Vec<Value> = writes(&fake, "POST", "/events")
        .into_iter()
        .filter_map(|r| r.body)
        .filter(|b| b["reason"] == "PolicyFallback")
        .collect();
    assert_eq!(fallback.len(), 1, "reported once: {fallback:?}");
    let note = fallback[0]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("no PolicyModule named \"missing\"")
            && note.contains("pack is a placement module"),
        "{note}"
    );
    task.abort();
}

/// (reason, kind, name) of every event the operator posted.
fn events(fake: &FakeApi) -> Vec<(String, String, String)> {
    writes(fake, "POST", "/events")
        .into_iter()
        .filter_map(|r| r.body)
        .map(|b| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&b["reason"]),
                s(&b["regarding"]["kind"]),
                s(&b["regarding"]["name"]),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_root_cohort_names_its_trees_fairness_module_through_cohort_events() {
    let fake = FakeApi::new();
    seed(&fake, "");
    fake.put(&yaml::<api::ClusterQueue>(
        "metadata: {name: in-org}\nspec: {namespaceSelector: {}, cohortName: org, resourceGroups: []}",
    ));
    fake.put(&yaml::<api::Cohort>(
        "metadata: {name: org, annotations: {sluice.dev/fairness-policy: typo}}\nspec: {}",
    ));
    let op = Operator::new(fake.client("op"), policy_config(), Leadership::always());
    let task = tokio::spawn(async move {
        let _ = op.run().await;
    });
    let fallback = (
        "PolicyFallback".to_string(),
        "Cohort".to_string(),
        "org".to_string(),
    );
    wait_for(30, "the Cohort told its module is missing", || {
        events(&fake).contains(&fallback)
    })
    .await;
    let note = writes(&fake, "POST", "/events")
        .into_iter()
        .filter_map(|r| r.body)
        .find(|b| b["regarding"]["kind"] == "Cohort")
        .map(|b| b["note"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert!(
        note.contains("no PolicyModule named \"typo\"") && note.contains("cohort tree org"),
        "{note}"
    );
    // The annotation goes: a Cohort event alone makes the operator choose again, and the Cohort hears it.
    fake.put(&yaml::<api::Cohort>("metadata: {name: org}\nspec: {}"));
    let resolved = (
        "PolicySelected".to_string(),
        "Cohort".to_string(),
        "org".to_string(),
    );
    wait_for(30, "the Cohort told the problem is gone", || {
        events(&fake).contains(&resolved)
    })
    .await;
    assert_eq!(
        events(&fake).iter().filter(|e| **e == fallback).count(),
        1,
        "reported once"
    );
    task.abort();
}

/// A preemption-cost module's answer shows on the candidate's Workload: `anti-thrash` protects a workload
/// admitted less than its minimum run time ago, so the higher-priority gang that needs its nodes waits, and the
/// victim carries `sluice.dev/preemption-protected` (Kueue's own priority-boost annotation is never written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_cost_answer_is_shown_on_the_candidates_workload() {
    let fake = FakeApi::new();
    seed(&fake, "");
    fake.put(&yaml::<api::ClusterQueue>(
        r#"
metadata: {name: cq, annotations: {sluice.dev/preemption-policy: guard}}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: tas
      resources:
      - {name: cpu, nominalQuota: "64"}
      - {name: nvidia.com/gpu, nominalQuota: "32"}
"#,
    ));
    fake.put(&module(
        "guard",
        PolicyKind::PreemptionCost,
        embedded::ANTI_THRASH,
        &sha256_hex(embedded::ANTI_THRASH),
    ));
    let op = start(&fake, "op", policy_config());
    wait_for(30, "module compiled", || {
        compiled(&fake, "guard").as_deref() == Some("True")
    })
    .await;
    // Every GPU of the five nodes taken at priority 0.
    fake.put(&spread_workload("low", 20));
    wait_for(30, "low admitted", || admitted(&fake, "low")).await;
    let mut high = spread_workload("high", 4);
    high.spec.priority = Some(100);
    fake.put(&high);
    let annotation = |name: &str, key: &str| {
        get_workload(&fake, name).and_then(|w| w.metadata.annotations?.get(key).cloned())
    };
    wait_for(30, "low shown protected", || {
        annotation("low", "sluice.dev/preemption-protected").as_deref() == Some("true")
    })
    .await;
    assert!(admitted(&fake, "low") && !admitted(&fake, "high"));
    // Never preempted, so no boost; and Kueue's annotation is left to Kueue's users.
    assert_eq!(annotation("low", "sluice.dev/priority-boost"), None);
    assert_eq!(annotation("low", "kueue.x-k8s.io/priority-boost"), None);
    op.abort();
}
