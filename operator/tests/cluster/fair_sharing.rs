//! Admission fair sharing on the real API server: a ClusterQueue with `admissionScope.admissionMode:
//! UsageBasedAdmissionFairSharing` admits from the LocalQueue that used less, before an older workload of the one
//! that used more, and every LocalQueue's decayed usage is in its `status.fairSharing`.

use kube::Api;
use sluice_sdk::kueue::v1beta2::{LocalQueue, Workload};

use super::kubelet::{FakeNode, RUN_SECONDS};
use super::plane::ControlPlane;
use super::support::*;

const CONFIG: &str = r#"
admissionFairSharing:
  usageHalfLifeTime: 10m
  usageSamplingInterval: 1s
"#;

const QUEUES: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq-a, namespace: ml}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq-b, namespace: ml}
spec: {clusterQueue: cq}
"#;

fn job(name: &str, lq: &str, seconds: u32) -> String {
    JobYaml {
        name,
        ns: "ml",
        lq,
        pods: 4,
        resources: r#"{requests: {cpu: "1"}}"#,
        labels: "",
        annotations: &format!(r#""{RUN_SECONDS}": "{seconds}""#),
    }
    .render()
}

/// The consumed cpu in a LocalQueue's admission-fair-sharing status, when it has one.
async fn consumed_cpu(lqs: &Api<LocalQueue>, name: &str) -> Option<String> {
    let lq = lqs.get(name).await.ok()?;
    let afs = lq.status?.fair_sharing?.admission_fair_sharing_status?;
    Some(
        afs.consumed_resources
            .get("cpu")
            .map(|q| q.0.clone())
            .unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_queue_that_used_less_is_admitted_first() {
    let Some(plane) = ControlPlane::up("afs") else {
        return;
    };
    let installed = install(&plane, Some(CONFIG), FakeNode::cpu_nodes("n", 2, 4)).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(QUEUES));
    let lqs: Api<LocalQueue> = Api::namespaced(client.clone(), "ml");
    // Both LocalQueues get their status from the first sample, with nothing consumed.
    for lq in ["lq-a", "lq-b"] {
        eventually(
            30,
            &format!("{lq}'s admission fair sharing status"),
            || async { consumed_cpu(&lqs, lq).await },
        )
        .await;
    }
    // lq-a fills the ClusterQueue for a while, and its usage grows.
    plane.kubectl(&["apply", "-f", "-"], Some(&job("first", "lq-a", 10)));
    let wls: Api<Workload> = Api::namespaced(client.clone(), "ml");
    let first = workload_of(&client, "ml", "first").await;
    let first_name = first.metadata.name.clone().expect("name");
    eventually(60, "first admitted", || async {
        let w = wls.get(&first_name).await.ok()?;
        has_condition(&w, "Admitted").then_some(())
    })
    .await;
    eventually(30, "lq-a's consumed cpu grows", || async {
        consumed_cpu(&lqs, "lq-a")
            .await
            .filter(|q| !q.is_empty() && q != "0")
    })
    .await;
    // lq-a's second Job is older than lq-b's, but lq-b used nothing: it goes first once quota frees up.
    plane.kubectl(&["apply", "-f", "-"], Some(&job("again", "lq-a", 5)));
    let again = workload_of(&client, "ml", "again").await;
    plane.kubectl(&["apply", "-f", "-"], Some(&job("other", "lq-b", 5)));
    let other = workload_of(&client, "ml", "other").await;
    let (again_name, other_name) = (
        again.metadata.name.clone().expect("name"),
        other.metadata.name.clone().expect("name"),
    );
    eventually(90, "lq-b's Job admitted", || async {
        let w = wls.get(&other_name).await.ok()?;
        has_condition(&w, "Admitted").then_some(())
    })
    .await;
    let a = wls.get(&again_name).await.expect("again");
    assert!(
        !has_condition(&a, "QuotaReserved"),
        "lq-a's older Job went first: {:?}",
        a.status
    );
    // Then lq-a's.
    eventually(90, "lq-a's second Job admitted", || async {
        let w = wls.get(&again_name).await.ok()?;
        has_condition(&w, "Admitted").then_some(())
    })
    .await;
}
