//! Restarting etcd and the API server in the middle of a run: the operator and the webhook reconnect, resume
//! their watches, and no admission or status is lost.

use k8s_openapi::api::batch::v1::Job;
use kube::Api;

use super::kubelet::{FakeNode, RUN_SECONDS};
use super::plane::ControlPlane;
use super::support::*;

fn job(name: &str) -> String {
    JobYaml::one_cpu(name, "batch", &format!(r#""{RUN_SECONDS}": "4""#)).render()
}

fn jobs(range: std::ops::Range<usize>) -> String {
    range
        .map(|i| job(&format!("j{i}")))
        .collect::<Vec<_>>()
        .join("---")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_and_webhook_survive_an_api_server_restart() {
    let Some(plane) = ControlPlane::up("restart") else {
        return;
    };
    let nodes = FakeNode::cpu_nodes("n", 2, 4);
    let mut installed = install(&plane, None, nodes).await;
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&queue_setup(
            "default",
            "cq",
            "[cpu]",
            "[{name: cpu, nominalQuota: 3}]",
            "batch",
            "lq",
        )),
    );
    // Six Jobs on three cpus: three run, three wait.
    plane.kubectl(&["apply", "-f", "-"], Some(&jobs(0..6)));
    let client = installed.client.clone();
    eventually(60, "three workloads admitted", || async {
        let n = workloads(&client, "batch")
            .await
            .iter()
            .filter(|w| has_condition(w, "Admitted"))
            .count();
        (n == 3).then_some(())
    })
    .await;

    plane.restart();
    let client = plane.client().await;
    // After the restart: more Jobs through the webhook, and every Job runs to the end, each admitted once.
    plane.kubectl(&["apply", "-f", "-"], Some(&jobs(6..9)));
    let jobs_api: Api<Job> = Api::namespaced(client.clone(), "batch");
    for i in 6..9 {
        let j = jobs_api.get(&format!("j{i}")).await.expect("job");
        let wl_admitted = workloads(&client, "batch").await.iter().any(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == format!("j{i}"))
                && has_condition(w, "Admitted")
        });
        assert!(
            j.spec.and_then(|s| s.suspend) == Some(true) || wl_admitted,
            "j{i} was not suspended by the webhook after the restart"
        );
    }
    eventually(
        180,
        "all nine Jobs complete and their Workloads Finished",
        || async {
            let wls = workloads(&client, "batch").await;
            let finished = wls.iter().filter(|w| has_condition(w, "Finished")).count();
            (wls.len() == 9 && finished == 9).then_some(())
        },
    )
    .await;
    for i in 0..9 {
        let j = jobs_api.get(&format!("j{i}")).await.expect("job");
        let succeeded = j.status.and_then(|s| s.succeeded).unwrap_or(0);
        assert_eq!(succeeded, 1, "j{i}");
    }
    // The ClusterQueue's status comes back to empty: nothing admitted, nothing pending. (Queue statuses are written
    // at most once a second, so the last Workload's finish may not show yet.)
    eventually(
        10,
        "the ClusterQueue's status to show 0 admitted and 0 pending",
        || async {
            let cq = plane.kubectl(&["get", "clusterqueues", "cq", "-o", "json"], None);
            let cq: serde_json::Value = serde_json::from_str(&cq).expect("json");
            let st = &cq["status"];
            (st["admittedWorkloads"] == 0 && st["pendingWorkloads"] == 0).then_some(())
        },
    )
    .await;
    assert!(
        installed.operator.process.running(),
        "the operator exited: {}",
        installed.operator.process.tail()
    );
    assert!(installed.webhook.process.running(), "the webhook exited");
}
