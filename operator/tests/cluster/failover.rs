//! Two operator replicas on a real Lease: the leader is killed with SIGKILL in the middle of 500 Job
//! submissions, with the quota full and workloads waiting. The standby takes over within the lease duration plus
//! its retry period, and the watch history shows that no Workload was admitted twice and that the ClusterQueue's
//! usage never exceeded its quota.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use sluice_sdk::kueue::v1beta2::Workload;
use sluice_sdk::quantity::resource_value;

use super::kubelet::{FakeNode, RUN_SECONDS};
use super::plane::ControlPlane;
use super::sluice::Operator;
use super::support::*;

const JOBS: usize = 500;
const QUOTA_CPU: i64 = 20;
/// The operator's lease timings (LeaseConfig::new): 15 s lease, 2 s retry. From the kill, the standby needs up
/// to one retry period to observe the last renewal, the lease duration, and one retry period to acquire it.
const TAKEOVER_LIMIT: Duration = Duration::from_secs(2 + 15 + 2);

fn job(i: usize) -> Job {
    yaml(
        &JobYaml::one_cpu(
            &format!("job-{i}"),
            "load",
            &format!(r#""{RUN_SECONDS}": "1""#),
        )
        .render(),
    )
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get("sluice-operator")
        .await
        .ok()?
        .spec?
        .holder_identity
}

/// CPU the workload holds (admitted and not finished), in millicores.
fn held_cpu(w: &Workload) -> i64 {
    if has_condition(w, "Finished") {
        return 0;
    }
    let Some(admission) = w.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return 0;
    };
    admission
        .pod_set_assignments
        .iter()
        .filter_map(|a| a.resource_usage.get("cpu"))
        .map(|q| resource_value("cpu", q).unwrap_or(0))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_without_double_admission() {
    let Some(plane) = ControlPlane::up("failover") else {
        return;
    };
    let webhook = install_webhook(&plane).await;
    let client = plane.client().await;
    let nodes = FakeNode::cpu_nodes("n", 6, 4);
    let _kubelet = super::kubelet::FakeKubelet::start(client.clone(), nodes).await;
    let history = History::start(&client);
    let flags = ["--leader-elect=true", "--lease-namespace", "default"].map(String::from);
    let mut a = Operator::start(&plane, "replica-a", &flags);
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    eventually(60, "replica-a to lead", || async {
        (holder(&leases).await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let mut b = Operator::start(&plane, "replica-b", &flags);
    let quota = format!("[{{name: cpu, nominalQuota: {QUOTA_CPU}}}]");
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&queue_setup("default", "cq", "[cpu]", &quota, "load", "lq")),
    );

    let jobs: Api<Job> = Api::namespaced(client.clone(), "load");
    let mut takeover = None;
    for i in 0..JOBS {
        create(&jobs, &job(i)).await;
        if i == JOBS / 2 {
            // Quota full and workloads waiting: kill the leader.
            eventually(60, "the quota full with workloads waiting", || async {
                let mut last: BTreeMap<String, Workload> = BTreeMap::new();
                for w in history.versions() {
                    last.insert(w.metadata.name.clone().unwrap_or_default(), w);
                }
                let held: i64 = last.values().map(held_cpu).sum();
                let waiting = last
                    .values()
                    .filter(|w| w.status.as_ref().is_none_or(|s| s.admission.is_none()))
                    .count();
                (held == QUOTA_CPU * 1000 && waiting > 100).then_some(())
            })
            .await;
            let killed = Instant::now();
            a.process.kill();
            let client = client.clone();
            takeover = Some(tokio::spawn(async move {
                let leases: Api<Lease> = Api::namespaced(client, "default");
                loop {
                    if holder(&leases).await.as_deref() == Some("replica-b") {
                        return killed.elapsed();
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }));
        }
    }
    let took = takeover.expect("killed").await.expect("takeover");
    eprintln!("standby took over {took:?} after the leader was killed");
    assert!(
        took <= TAKEOVER_LIMIT + Duration::from_secs(1),
        "took over after {took:?}"
    );

    eventually(600, "all 500 Workloads Finished", || async {
        let wls = workloads(&client, "load").await;
        let finished = wls.iter().filter(|w| has_condition(w, "Finished")).count();
        (wls.len() == JOBS && finished == JOBS).then_some(())
    })
    .await;
    assert!(
        b.process.running(),
        "the standby exited: {}",
        b.process.tail()
    );

    // The watch history, in order: each Workload admitted exactly once, usage never above the quota.
    let mut held: BTreeMap<String, i64> = BTreeMap::new();
    let mut admissions: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    let mut peak = 0;
    for w in history.versions() {
        let name = w.metadata.name.clone().unwrap_or_default();
        held.insert(name.clone(), held_cpu(&w));
        let sum: i64 = held.values().sum();
        peak = peak.max(sum);
        assert!(
            sum <= QUOTA_CPU * 1000,
            "usage {sum}m over the quota after a change of {name}"
        );
        let admitted = w.status.as_ref().is_some_and(|s| s.admission.is_some());
        let entry = admissions.entry(name).or_insert((0, false));
        if admitted && !entry.1 {
            entry.0 += 1;
        }
        entry.1 = admitted;
    }
    let twice: Vec<_> = admissions.iter().filter(|(_, (n, _))| *n != 1).collect();
    assert!(twice.is_empty(), "admitted other than once: {twice:?}");
    assert_eq!(admissions.len(), JOBS);
    assert_eq!(peak, QUOTA_CPU * 1000);
    drop(webhook);
}
