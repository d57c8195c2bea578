//! JobSets through the API server, with JobSet's own CRD (from its Go module, `tests/control-plane/crds`): applied
//! with kubectl, suspended by the webhook, admitted with a rack-required topology inside one rack, unsuspended with
//! the flavor's node selector, and preempted by a higher-priority JobSet.

use std::collections::BTreeSet;
use std::process::Command;

use kube::Api;
use sluice_sdk::jobset::JobSet;
use sluice_sdk::kueue::v1beta2::Workload;

use super::kubelet::FakeNode;
use super::plane::{ControlPlane, repo_root};
use super::support::*;

/// Topology `dc` (rack, hostname), TAS flavor `h100`, ClusterQueue `gpus` (16 GPUs, preempting lower priorities),
/// namespace `ml` with LocalQueue `queue`, and WorkloadPriorityClass `high`.
pub const SETUP: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: dc}
spec:
  levels:
  - nodeLabel: example.com/rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {pool: h100}
  topologyName: dc
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpus}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: cpu, nominalQuota: 64}, {name: nvidia.com/gpu, nominalQuota: 16}]
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: queue, namespace: ml}
spec: {clusterQueue: gpus}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"#;

/// A JobSet in `ml/queue`: `workers` Jobs of 2 pods with 4 GPUs each, required inside one rack; with a CPU-only
/// driver when `driver`.
fn jobset(name: &str, workers: u32, driver: bool, labels: &str) -> String {
    let driver = if driver {
        r#"
  - name: driver
    replicas: 1
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: d, image: trainer, resources: {requests: {cpu: "1"}}}]"#
    } else {
        ""
    };
    format!(
        r#"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: queue{labels}}}
spec:
  replicatedJobs:{driver}
  - name: workers
    replicas: {workers}
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          metadata:
            annotations: {{kueue.x-k8s.io/podset-required-topology: example.com/rack}}
          spec:
            restartPolicy: Never
            containers: [{{name: w, image: trainer, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "4"}}}}}}]
"#
    )
}

/// Two racks of two 8-GPU nodes.
pub fn racks() -> Vec<FakeNode> {
    (0..4)
        .map(|i| {
            FakeNode::new(&format!("gpu-{i}"), 16, 8)
                .label("pool", "h100")
                .label("example.com/rack", if i < 2 { "r1" } else { "r2" })
        })
        .collect()
}

/// The CRDs of the other projects' kinds Sluice integrates (JobSet, PyTorchJob, RayJob and RayCluster), from their Go modules, as
/// `tests/control-plane/crds` prints them.
pub fn third_party_crds() -> String {
    let out = Command::new(repo_root().join("tests/control-plane/crds"))
        .output()
        .expect("running tests/control-plane/crds");
    assert!(
        out.status.success(),
        "tests/control-plane/crds: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            format!("---\n{text}\n")
        })
        .collect()
}

/// The hostnames of the Workload's topology assignment for pod set `name`.
fn assigned_hosts(w: &Workload, pod_set: &str) -> BTreeSet<String> {
    let psa = w
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .and_then(|a| a.pod_set_assignments.iter().find(|p| p.name == pod_set))
        .expect("pod set assignment");
    let ta = psa
        .topology_assignment
        .as_ref()
        .expect("a topology assignment");
    let expanded = sluice_sdk::kueue::conversion::expand_topology_assignment(ta).expect("expands");
    let host = expanded
        .levels
        .iter()
        .position(|l| l == "kubernetes.io/hostname")
        .expect("hostname level");
    expanded
        .domains
        .iter()
        .map(|d| d.values[host].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobsets_are_admitted_in_one_rack_and_preempted_through_the_api_server() {
    let Some(plane) = ControlPlane::up("jobsets") else {
        return;
    };
    // JobSet's CRD first, so that the operator finds the API served when it starts.
    plane.kubectl(
        &["apply", "--server-side", "-f", "-"],
        Some(&third_party_crds()),
    );
    let installed = install(&plane, None, racks()).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(SETUP));

    // 2 Jobs x 2 pods x 4 GPUs: a whole rack.
    plane.kubectl(&["apply", "-f", "-"], Some(&jobset("low", 2, false, "")));
    let jobsets: Api<JobSet> = Api::namespaced(client.clone(), "ml");
    let created = jobsets.get("low").await.expect("jobset low");
    let low_wl = workload_of(&client, "ml", "low").await;
    assert!(
        created.is_suspended() || has_condition(&low_wl, "Admitted"),
        "the webhook did not suspend the JobSet at creation"
    );
    let owner = &low_wl.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str()),
        ("jobset.x-k8s.io/v1alpha2", "JobSet")
    );
    eventually(60, "low admitted and unsuspended on h100", || async {
        let js = jobsets.get("low").await.ok()?;
        let tpl = js.replicated_jobs().first()?.pod_template()?.spec.clone()?;
        let on_h100 = tpl.node_selector?.get("pool").map(String::as_str) == Some("h100");
        (!js.is_suspended() && on_h100).then_some(())
    })
    .await;
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    let low_name = low_wl.metadata.name.clone().expect("name");
    let admitted = wls.get(&low_name).await.expect("workload");
    let hosts = assigned_hosts(&admitted, "workers");
    let r1: BTreeSet<String> = ["gpu-0".to_string(), "gpu-1".to_string()].into();
    let r2: BTreeSet<String> = ["gpu-2".to_string(), "gpu-3".to_string()].into();
    assert!(
        hosts.is_subset(&r1) || hosts.is_subset(&r2),
        "the gang is spread over racks: {hosts:?}"
    );
    let req = admitted.spec.pod_sets[0]
        .topology_request
        .as_ref()
        .expect("request");
    assert_eq!(
        req.sub_group_index_label.as_deref(),
        Some("jobset.sigs.k8s.io/job-index")
    );

    // A higher-priority JobSet needing 8 of the queue's 16 GPUs (and a driver): low is preempted.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&jobset(
            "high",
            1,
            true,
            ", kueue.x-k8s.io/priority-class: high",
        )),
    );
    eventually(60, "low suspended with its templates restored", || async {
        let js = jobsets.get("low").await.ok()?;
        let tpl = js.replicated_jobs().first()?.pod_template()?.spec.clone()?;
        (js.is_suspended() && tpl.node_selector.is_none()).then_some(())
    })
    .await;
    assert_preempted_in_cluster_queue(&wls, &low_name).await;
    eventually(
        60,
        "high unsuspended with every replicated job on h100",
        || async {
            let js = jobsets.get("high").await.ok()?;
            let all = js.replicated_jobs().iter().all(|rj| {
                rj.pod_template()
                    .and_then(|t| t.spec.as_ref())
                    .and_then(|s| s.node_selector.as_ref())
                    .and_then(|n| n.get("pool"))
                    .is_some_and(|p| p == "h100")
            });
            (!js.is_suspended() && all).then_some(())
        },
    )
    .await;
    let high = workload_of(&client, "ml", "high").await;
    let names: Vec<&str> = high.spec.pod_sets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["driver", "workers"]);
}

/// Flavor `a100` (nodes labelled `pool: a100`), ClusterQueue `gpus` preempting lower priorities with the
/// `quotas` of the `covered` resources, namespace `ns` with LocalQueue `queue`, and WorkloadPriorityClass `high`
/// (1000): the queue the third-party kinds' tests submit to.
pub fn a100_queue(ns: &str, covered: &str, quotas: &str) -> String {
    format!(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: a100}}
spec:
  nodeLabels: {{pool: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: gpus}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: LowerPriority}}
  resourceGroups:
  - coveredResources: {covered}
    flavors:
    - name: a100
      resources: {quotas}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: queue, namespace: {ns}}}
spec: {{clusterQueue: gpus}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {{name: high}}
value: 1000
"#
    )
}

/// A control plane named `name` with the third-party CRDs (`tests/control-plane/crds`), Sluice installed with
/// `frameworks` as the Configuration's integrations on two a100 nodes (16 CPUs, 4 GPUs each), and `setup`
/// applied; None when no control plane is built.
pub async fn third_party_plane(
    name: &str,
    frameworks: &[&str],
    setup: &str,
) -> Option<(ControlPlane, Installed)> {
    let plane = ControlPlane::up(name)?;
    plane.kubectl(
        &["apply", "--server-side", "-f", "-"],
        Some(&third_party_crds()),
    );
    let nodes = (0..2)
        .map(|i| FakeNode::new(&format!("a100-{i}"), 16, 4).label("pool", "a100"))
        .collect();
    let list: Vec<String> = frameworks.iter().map(|f| format!("{f:?}")).collect();
    let config = format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations:\n  frameworks: [{}]\n",
        list.join(", ")
    );
    let installed = install(&plane, Some(&config), nodes).await;
    plane.kubectl(&["apply", "-f", "-"], Some(setup));
    Some((plane, installed))
}
