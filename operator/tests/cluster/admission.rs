//! Admission through the API server: a queued Job is suspended by the webhook, admitted with its flavor's node
//! selector and tolerations, preempted by a higher-priority Job as Kueue writes it; invalid objects are refused
//! with Kueue's messages; v1beta1 objects are converted by the webhook.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Taint};
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use sluice_sdk::kueue::v1beta2::Workload;

use super::kubelet::FakeNode;
use super::plane::ControlPlane;
use super::support::*;

const SETUP: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {pool: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
  tolerations: [{key: spot, operator: Equal, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: queue, namespace: team-a}
spec: {clusterQueue: team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"#;

fn job(name: &str, priority: &str) -> String {
    JobYaml {
        name,
        ns: "team-a",
        lq: "queue",
        pods: 2,
        resources: r#"{requests: {cpu: "1"}}"#,
        labels: &format!("kueue.x-k8s.io/priority-class: {priority}"),
        annotations: "",
    }
    .render()
}

fn spot_nodes() -> Vec<FakeNode> {
    (0..2)
        .map(|i| {
            let mut n = FakeNode::new(&format!("spot-{i}"), 1, 0).label("pool", "spot");
            n.taints.push(Taint {
                key: "spot".into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            });
            n
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_admitted_and_preempted_through_the_api_server() {
    let Some(plane) = ControlPlane::up("admission") else {
        return;
    };
    let installed = install(&plane, None, spot_nodes()).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(SETUP));

    // The low-priority Job: suspended at creation by the webhook, admitted, unsuspended with the flavor's
    // node selector and toleration, and its pods bound to the tainted spot nodes.
    plane.kubectl(&["apply", "-f", "-"], Some(&job("low", "low")));
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    let created = jobs.get("low").await.expect("job low");
    let low_wl = workload_of(&client, "team-a", "low").await;
    let low_name = low_wl.metadata.name.clone().expect("name");
    assert!(
        created.spec.as_ref().and_then(|s| s.suspend) == Some(true)
            || has_condition(&low_wl, "Admitted"),
        "the webhook did not suspend the Job at creation"
    );
    let wls: Api<Workload> = Api::namespaced(client.clone(), "team-a");
    eventually(60, "low admitted and unsuspended on spot", || async {
        let job = jobs.get("low").await.ok()?;
        let spec = job.spec?;
        let tpl = spec.template.spec?;
        let selector_ok = tpl.node_selector?.get("pool").map(String::as_str) == Some("spot");
        let toleration_ok = tpl
            .tolerations?
            .iter()
            .any(|t| t.key.as_deref() == Some("spot"));
        (spec.suspend == Some(false) && selector_ok && toleration_ok).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "team-a");
    eventually(60, "low's two pods Running on the spot nodes", || async {
        let list = pods
            .list(&ListParams::default().labels("job-name=low"))
            .await
            .ok()?;
        let on_spot = list.items.iter().filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| n.starts_with("spot-"))
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        (on_spot.count() == 2).then_some(())
    })
    .await;
    let w = wls.get(&low_name).await.expect("workload");
    let admission = w
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .expect("admission");
    assert_eq!(admission.cluster_queue, "team");
    assert!(has_condition(&w, "QuotaReserved") && has_condition(&w, "Admitted"));

    // The high-priority Job preempts it: Kueue's conditions and reasons on the victim.
    plane.kubectl(&["apply", "-f", "-"], Some(&job("high", "high")));
    let victim = eventually(60, "low preempted", || async {
        let w = wls.get(&low_name).await.ok()?;
        has_condition(&w, "Preempted").then_some(w)
    })
    .await;
    let preempted = condition(&victim, "Preempted").expect("Preempted");
    assert_eq!(preempted.reason, "InClusterQueue");
    assert!(
        preempted
            .message
            .starts_with("Preempted to accommodate a workload (UID: "),
        "{}",
        preempted.message
    );
    eventually(
        60,
        "low evicted, requeued and suspended; high admitted",
        || async {
            let low = wls.get(&low_name).await.ok()?;
            let high = workload_of(&client, "team-a", "high").await;
            let low_job = jobs.get("low").await.ok()?;
            let evicted = condition(&low, "Evicted")
                .is_some_and(|c| c.status == "True" && c.reason == "Preempted");
            let requeued = condition(&low, "Requeued").is_some_and(|c| c.status == "True");
            let done = !has_condition(&low, "QuotaReserved")
                && has_condition(&high, "Admitted")
                && low_job.spec?.suspend == Some(true);
            (done && (evicted || requeued)).then_some(())
        },
    )
    .await;

    // A ClusterQueue that breaks a rule is refused by the API server with Kueue's message.
    let bad = plane.kubectl_output(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: bad}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: 2, borrowingLimit: 1}]
"#,
        ),
    );
    assert!(
        !bad.status.success(),
        "a borrowingLimit without a cohort was accepted"
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("borrowingLimit"), "{err}");
    assert!(err.contains("must be nil when cohort is empty"), "{err}");

    // A v1beta1 ClusterQueue is stored (as v1beta2) and read back in both versions through /convert.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: old-style}
spec:
  cohort: pool
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: 1}]
"#,
        ),
    );
    let v2 = plane.kubectl(
        &[
            "get",
            "clusterqueues.v1beta2.kueue.x-k8s.io",
            "old-style",
            "-o",
            "json",
        ],
        None,
    );
    let v2: serde_json::Value = serde_json::from_str(&v2).expect("json");
    assert_eq!(v2["apiVersion"], json!("kueue.x-k8s.io/v1beta2"));
    assert_eq!(v2["spec"]["cohortName"], json!("pool"));
    let v1 = plane.kubectl(
        &[
            "get",
            "clusterqueues.v1beta1.kueue.x-k8s.io",
            "old-style",
            "-o",
            "json",
        ],
        None,
    );
    let v1: serde_json::Value = serde_json::from_str(&v1).expect("json");
    assert_eq!(v1["apiVersion"], json!("kueue.x-k8s.io/v1beta1"));
    assert_eq!(v1["spec"]["cohort"], json!("pool"));
}

/// Kueue's maximumExecutionTimeSeconds on a real API server: a Job labelled
/// `kueue.x-k8s.io/max-exec-time-seconds: "3"` runs, is deactivated three seconds after its admission (evicted as
/// Deactivated with the limit as underlying cause) and suspended, and is not admitted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_maximum_execution_time_is_deactivated() {
    let Some(plane) = ControlPlane::up("max-exec-time") else {
        return;
    };
    let installed = install(&plane, None, spot_nodes()).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(SETUP));
    let capped = JobYaml {
        name: "capped",
        ns: "team-a",
        lq: "queue",
        pods: 1,
        resources: r#"{requests: {cpu: "1"}}"#,
        labels: "kueue.x-k8s.io/max-exec-time-seconds: \"3\"",
        annotations: "",
    }
    .render();
    plane.kubectl(&["apply", "-f", "-"], Some(&capped));
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    eventually(60, "capped started", || async {
        let spec = jobs.get("capped").await.ok()?.spec?;
        (spec.suspend == Some(false)).then_some(())
    })
    .await;
    let wl = workload_of(&client, "team-a", "capped").await;
    assert_eq!(wl.spec.maximum_execution_time_seconds, Some(3));
    let wls: Api<Workload> = Api::namespaced(client.clone(), "team-a");
    let name = wl.metadata.name.clone().expect("name");
    let done = eventually(60, "capped deactivated, evicted and suspended", || async {
        let w = wls.get(&name).await.ok()?;
        let suspended = jobs.get("capped").await.ok()?.spec?.suspend == Some(true);
        let evicted = condition(&w, "Evicted")
            .is_some_and(|c| c.reason == "DeactivatedDueToMaximumExecutionTimeExceeded");
        (w.spec.active == Some(false) && evicted && suspended).then_some(w)
    })
    .await;
    let evicted = condition(&done, "Evicted").expect("Evicted");
    assert_eq!(
        evicted.message,
        "The workload is deactivated due to exceeding the maximum execution time"
    );
    let stats = done
        .status
        .as_ref()
        .and_then(|s| s.scheduling_stats.clone())
        .expect("schedulingStats");
    assert_eq!(
        stats.evictions[0].underlying_cause,
        "MaximumExecutionTimeExceeded"
    );
    // Deactivated: never admitted again.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let w = wls.get(&name).await.expect("workload");
    assert!(!has_condition(&w, "QuotaReserved"));
    assert_eq!(
        jobs.get("capped")
            .await
            .expect("job")
            .spec
            .and_then(|s| s.suspend),
        Some(true)
    );
}

/// The ClusterQueue `team` gated by AdmissionCheck `prov`.
const CHECKED: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: prov}
spec: {controllerName: example.com/prov}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks: [{name: prov}]
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: 2}]
"#;

/// Admission checks on a real API server, answered by the test as an external check controller would: the Job
/// waits suspended with its quota reserved; the check's Retry evicts it (checks back to Pending, a retry
/// counted) and it reserves again after the check's requeue time; the check's Ready admits it and the Job runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_behind_an_admission_check_runs_once_the_check_is_ready() {
    let Some(plane) = ControlPlane::up("admission-check") else {
        return;
    };
    let installed = install(&plane, None, spot_nodes()).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(SETUP));
    plane.kubectl(&["apply", "-f", "-"], Some(CHECKED));
    // As the check's controller: it is active (Kueue and Sluice keep the ClusterQueue inactive until then).
    plane.kubectl(
        &[
            "patch",
            "admissioncheck",
            "prov",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Active","status":"True","reason":"Active","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#,
        ],
        None,
    );
    plane.kubectl(&["apply", "-f", "-"], Some(&job("checked", "low")));
    let jobs: Api<Job> = Api::namespaced(client.clone(), "team-a");
    let wls: Api<Workload> = Api::namespaced(client.clone(), "team-a");
    let name = workload_of(&client, "team-a", "checked")
        .await
        .metadata
        .name
        .expect("name");
    let reserved = |retries: Option<i32>| {
        let wls = wls.clone();
        let name = name.clone();
        async move {
            let w = wls.get(&name).await.ok()?;
            let st = w.status.clone()?;
            let check = st.admission_checks.first()?;
            (st.admission.is_some()
                && check.state == Some(sluice_sdk::kueue::v1beta2::CheckState::Pending)
                && check.retry_count == retries)
                .then_some(w)
        }
    };
    let w = eventually(60, "quota reserved, check pending", || reserved(None)).await;
    assert!(!has_condition(&w, "Admitted"), "{:#?}", w.status);
    let suspended = || async { jobs.get("checked").await.ok()?.spec?.suspend };
    assert_eq!(suspended().await, Some(true), "reserved is not admitted");
    let answer = |state: &'static str, requeue: Option<i32>| {
        let wls = wls.clone();
        let name = name.clone();
        async move {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let mut check =
                json!({"name": "prov", "state": state, "lastTransitionTime": now, "message": ""});
            if let Some(r) = requeue {
                check["requeueAfterSeconds"] = json!(r);
            }
            wls.patch_status(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"status": {"admissionChecks": [check]}})),
            )
            .await
            .expect("check state written");
        }
    };
    answer("Retry", Some(2)).await;
    let evicted = eventually(60, "evicted by the check", || async {
        let w = wls.get(&name).await.ok()?;
        condition(&w, "Evicted")
            .filter(|c| c.status == "True" && c.reason == "AdmissionCheck")
            .map(|c| c.message.clone())
    })
    .await;
    assert_eq!(
        evicted,
        "Evicted due to AdmissionCheck in Retry state: \"prov\""
    );
    // Reserved again once the check's two seconds passed, the retry counted.
    eventually(60, "reserved again after the check's requeue time", || {
        reserved(Some(1))
    })
    .await;
    answer("Ready", None).await;
    eventually(60, "admitted and running", || async {
        let w = wls.get(&name).await.ok()?;
        (has_condition(&w, "Admitted") && suspended().await == Some(false)).then_some(())
    })
    .await;
}
