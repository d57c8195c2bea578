//! Pods on the real API server: a plain Pod group stays gated until it is complete, then is admitted and
//! ungated, and a pod beyond its total count is deleted as excess; with waitForPodsReady, pods made Ready by the fake kubelet clear the timeout, and pods that never
//! become Ready are evicted with PodsReadyTimeout and requeued; with blockAdmission, the next Job waits for them; a
//! group whose pods require one rack runs inside one, each pod on its rank's node.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use sluice_sdk::kueue::v1beta2::Workload;

use super::kubelet::{FakeNode, READY};
use super::plane::ControlPlane;
use super::support::*;

const CONFIG: &str = r#"
waitForPodsReady:
  enable: true
  timeout: 6s
  requeuingStrategy:
    backoffBaseSeconds: 1
    backoffMaxSeconds: 2
integrations:
  frameworks: [batch/job, pod]
"#;

fn job(name: &str, ready: bool) -> String {
    JobYaml {
        name,
        ns: "ml",
        lq: "lq",
        pods: 2,
        resources: r#"{requests: {cpu: "1"}}"#,
        labels: "",
        annotations: &format!(r#""{READY}": "{ready}""#),
    }
    .render()
}

fn group_pod(name: &str) -> String {
    pod_manifest(
        name,
        "kueue.x-k8s.io/queue-name: lq, kueue.x-k8s.io/pod-group-name: trio",
        r#"{kueue.x-k8s.io/pod-group-total-count: "3"}"#,
        r#"{requests: {cpu: "1"}}"#,
    )
}

/// A pausing pod `name` in namespace `ml` with these labels (a flow mapping's entries), annotations and container
/// resources (flow mappings).
fn pod_manifest(name: &str, labels: &str, annotations: &str, resources: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ml
  labels: {{{labels}}}
  annotations: {annotations}
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

fn gates(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .map(|g| g.iter().map(|g| g.name.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_groups_are_gated_and_pods_ready_timeouts_evict() {
    let Some(plane) = ControlPlane::up("pods") else {
        return;
    };
    let nodes = FakeNode::cpu_nodes("n", 2, 4);
    let installed = install(&plane, Some(CONFIG), nodes).await;
    let client = installed.client.clone();
    let history = History::start(&client);
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&queue_setup(
            "default",
            "cq",
            "[cpu]",
            "[{name: cpu, nominalQuota: 8}]",
            "ml",
            "lq",
        )),
    );

    // Two of a group of three: gated by the webhook, and they stay gated while the group is incomplete.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&(group_pod("p0") + "---" + &group_pod("p1"))),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    // Kueue's webhook gates every pod of a group with its admission gate (and, TAS being on, the topology gate).
    for name in ["p0", "p1"] {
        let g = gates(&pods.get(name).await.expect("pod"));
        assert!(
            g.contains(&"kueue.x-k8s.io/admission".to_string()),
            "{name}: {g:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["p0", "p1"] {
        assert!(
            !gates(&pods.get(name).await.expect("pod")).is_empty(),
            "{name} ungated early"
        );
    }
    // The third completes the group: admitted together, ungated, bound and Running.
    plane.kubectl(&["apply", "-f", "-"], Some(&group_pod("p2")));
    eventually(60, "the group of three ungated and Running", || async {
        let list = pods
            .list(&ListParams::default().labels("kueue.x-k8s.io/pod-group-name=trio"))
            .await
            .ok()?;
        let running = list.items.iter().filter(|p| {
            gates(p).is_empty()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        (running.count() == 3).then_some(())
    })
    .await;
    // A fourth pod of the full group is excess: deleted (Kueue's ExcessPodDeleted), the three run on.
    plane.kubectl(&["apply", "-f", "-"], Some(&group_pod("p3")));
    eventually(60, "the excess pod deleted", || async {
        pods.get_opt("p3")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
    for name in ["p0", "p1", "p2"] {
        let p = pods.get(name).await.expect("pod");
        assert!(
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
            "{name} runs on"
        );
    }
    // As in Kueue, a group's pods keep their finalizer while its Workload is unfinished: the group is ended by
    // deleting its Workload, which ends and releases every pod.
    plane.kubectl(
        &[
            "delete",
            "workload",
            "-n",
            "ml",
            "trio",
            "--wait=true",
            "--timeout=60s",
        ],
        None,
    );
    eventually(60, "the group's pods gone", || async {
        let list = pods
            .list(&ListParams::default().labels("kueue.x-k8s.io/pod-group-name=trio"))
            .await
            .ok()?;
        list.items.is_empty().then_some(())
    })
    .await;

    // waitForPodsReady: a Job whose pods become Ready gets PodsReady=True and keeps its quota past the timeout.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&(job("ready", true) + "---" + &job("stuck", false))),
    );
    let ready = workload_of(&client, "ml", "ready").await;
    let ready_name = ready.metadata.name.clone().expect("name");
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    eventually(60, "ready's PodsReady=True", || async {
        let w = wls.get(&ready_name).await.ok()?;
        (condition(&w, "PodsReady").is_some_and(|c| c.status == "True" && c.reason == "Started"))
            .then_some(())
    })
    .await;

    // A Job whose pods never become Ready: evicted with PodsReadyTimeout, suspended, requeued and admitted again.
    let stuck = workload_of(&client, "ml", "stuck").await;
    let stuck_name = stuck.metadata.name.clone().expect("name");
    eventually(
        90,
        "stuck evicted for PodsReadyTimeout, requeued and admitted again",
        || async {
            let versions: Vec<Workload> = history
                .versions()
                .into_iter()
                .filter(|w| w.metadata.name.as_deref() == Some(&stuck_name))
                .collect();
            let evicted = versions.iter().position(|w| {
                condition(w, "Evicted").is_some_and(|c| {
                    c.status == "True"
                        && c.reason == "PodsReadyTimeout"
                        && c.message == format!("Exceeded the PodsReady timeout ml/{stuck_name}")
                })
            })?;
            let requeued = versions[evicted..].iter().position(|w| {
                w.status
                    .as_ref()
                    .and_then(|s| s.requeue_state.as_ref())
                    .is_some_and(|r| r.count == Some(1))
            })?;
            versions[evicted + requeued..]
                .iter()
                .any(|w| has_condition(w, "QuotaReserved"))
                .then_some(())
        },
    )
    .await;
    // The ready Job was never evicted.
    assert!(
        !history
            .versions()
            .iter()
            .filter(|w| w.metadata.name.as_deref() == Some(&ready_name))
            .any(|w| has_condition(w, "Evicted")),
        "the ready Job was evicted"
    );
}

/// waitForPodsReady.blockAdmission on the real API server: while a Job whose pods never become Ready holds its
/// quota, the next Job waits (QuotaReserved=False "Waiting", Kueue's message) although quota is free, and is
/// admitted only once the first is evicted by its PodsReady timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_admission_waits_for_the_admitted_jobs_pods() {
    let Some(plane) = ControlPlane::up("block") else {
        return;
    };
    let nodes = FakeNode::cpu_nodes("n", 2, 4);
    let config = r#"
waitForPodsReady:
  enable: true
  timeout: 8s
  blockAdmission: true
  requeuingStrategy: {backoffBaseSeconds: 30, backoffMaxSeconds: 60}
"#;
    let installed = install(&plane, Some(config), nodes).await;
    let client = installed.client.clone();
    let history = History::start(&client);
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&queue_setup(
            "default",
            "cq",
            "[cpu]",
            "[{name: cpu, nominalQuota: 8}]",
            "ml",
            "lq",
        )),
    );
    plane.kubectl(&["apply", "-f", "-"], Some(&job("stuck", false)));
    let stuck = workload_of(&client, "ml", "stuck").await;
    let stuck_name = stuck.metadata.name.clone().expect("name");
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    eventually(60, "stuck admitted", || async {
        let w = wls.get(&stuck_name).await.ok()?;
        has_condition(&w, "Admitted").then_some(())
    })
    .await;
    plane.kubectl(&["apply", "-f", "-"], Some(&job("next", true)));
    let next = workload_of(&client, "ml", "next").await;
    let next_name = next.metadata.name.clone().expect("name");
    eventually(30, "next waits for stuck's pods", || async {
        let w = wls.get(&next_name).await.ok()?;
        condition(&w, "QuotaReserved")
            .is_some_and(|c| {
                c.status == "False"
                    && c.reason == "Waiting"
                    && c.message
                        == "waiting for all admitted workloads to be in PodsReady condition"
            })
            .then_some(())
    })
    .await;
    // stuck's timeout frees the scheduler: next is admitted, and never before stuck was evicted.
    let admitted = eventually(60, "next admitted", || async {
        let w = wls.get(&next_name).await.ok()?;
        condition(&w, "QuotaReserved")
            .filter(|c| c.status == "True")
            .map(|c| c.last_transition_time.0)
    })
    .await;
    let evicted = history
        .versions()
        .into_iter()
        .filter(|w| w.metadata.name.as_deref() == Some(&stuck_name))
        .find_map(|w| {
            condition(&w, "Evicted")
                .filter(|c| c.status == "True" && c.reason == "PodsReadyTimeout")
                .map(|c| c.last_transition_time.0)
        })
        .expect("stuck was evicted for PodsReadyTimeout");
    assert!(
        admitted >= evicted,
        "next admitted at {admitted}, before stuck's eviction at {evicted}"
    );
    assert!(
        !history
            .versions()
            .iter()
            .filter(|w| w.metadata.name.as_deref() == Some(&next_name))
            .any(|w| {
                condition(w, "QuotaReserved")
                    .is_some_and(|c| c.status == "True" && c.last_transition_time.0 < evicted)
            }),
        "next held quota before stuck's eviction"
    );
}

/// Pod `rank` of group `pair` (2 pods of 8 GPUs, a whole rack), required inside one rack; its rank in the label
/// `app-index`, which `pod-group-pod-index-label` names.
fn rack_pod(rank: u32) -> String {
    pod_manifest(
        &format!("pair-{rank}"),
        &format!(
            r#"kueue.x-k8s.io/queue-name: queue, kueue.x-k8s.io/pod-group-name: pair, app-index: "{rank}""#
        ),
        r#"{kueue.x-k8s.io/pod-group-total-count: "2", kueue.x-k8s.io/pod-group-pod-index-label: app-index,
    kueue.x-k8s.io/podset-required-topology: example.com/rack}"#,
        r#"{requests: {cpu: "1", nvidia.com/gpu: "8"}, limits: {nvidia.com/gpu: "8"}}"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_requiring_a_rack_runs_inside_one_rack() {
    let Some(plane) = ControlPlane::up("pods-tas") else {
        return;
    };
    // The JobSet test's two racks of two 8-GPU nodes, TAS flavor h100 and queue ml/queue.
    let installed = install(&plane, None, super::jobsets::racks()).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(super::jobsets::SETUP));
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&(rack_pod(1) + "---" + &rack_pod(0))),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    // The webhook copied each pod's rank to Kueue's pod-group index label.
    for rank in [0, 1] {
        let p = pods.get(&format!("pair-{rank}")).await.expect("pod");
        let index = p.metadata.labels.as_ref().and_then(|l| {
            l.get("kueue.x-k8s.io/pod-group-pod-index")
                .map(String::as_str)
        });
        assert_eq!(index, Some(rank.to_string().as_str()), "pair-{rank}");
    }
    // Admitted inside one rack, each pod pinned to its own node there, ungated and Running.
    let placed = eventually(60, "both pods pinned, ungated and Running", || async {
        let mut hosts = Vec::new();
        for rank in [0, 1] {
            let p = pods.get(&format!("pair-{rank}")).await.ok()?;
            let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            if !gates(&p).is_empty() || !running {
                return None;
            }
            let host = p
                .spec
                .as_ref()?
                .node_selector
                .as_ref()?
                .get("kubernetes.io/hostname")?
                .clone();
            hosts.push(host);
        }
        Some(hosts)
    })
    .await;
    assert!(
        placed == ["gpu-0", "gpu-1"] || placed == ["gpu-2", "gpu-3"],
        "the pair is not inside one rack, by rank: {placed:?}"
    );
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    let wl = wls.get("pair").await.expect("the group's Workload");
    // The rack comes from the pods' annotation (a TAS flavor alone would place them at the lowest level).
    let req = wl.spec.pod_sets[0]
        .topology_request
        .as_ref()
        .expect("a topology request");
    assert_eq!(req.required.as_deref(), Some("example.com/rack"));
    assert_eq!(
        req.pod_index_label.as_deref(),
        Some("kueue.x-k8s.io/pod-group-pod-index")
    );
    let ta = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .and_then(|a| a.pod_set_assignments[0].topology_assignment.as_ref())
        .expect("a topology assignment");
    let expanded = sluice_sdk::kueue::conversion::expand_topology_assignment(ta).expect("expands");
    let mut assigned: Vec<String> = expanded
        .domains
        .iter()
        .map(|d| d.values.last().cloned().unwrap_or_default())
        .collect();
    assigned.sort();
    let mut expected = placed.clone();
    expected.sort();
    assert_eq!(assigned, expected);
}
