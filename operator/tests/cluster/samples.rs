//! Every CRD is accepted and Established, and manifests shaped as Kueue's documentation samples run unchanged.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;

use super::kubelet::FakeNode;
use super::plane::ControlPlane;
use super::support::*;

const INTEGRATIONS: &str = "integrations:\n  frameworks: [batch/job, pod]\n";

fn sample(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/cluster/samples/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("sample")
}

fn nodes() -> Vec<FakeNode> {
    FakeNode::cpu_nodes("node-", 3, 4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_are_established_and_kueues_samples_run() {
    let Some(plane) = ControlPlane::up("samples") else {
        return;
    };
    // `sluice crds | kubectl apply --server-side -f -`, exactly as the README says.
    let crds = sluice_stdout(&["crds"]);
    plane.kubectl(&["apply", "--server-side", "-f", "-"], Some(&crds));
    let names: Vec<String> = crds
        .split("\n---")
        .filter_map(|d| serde_yaml::from_str::<CustomResourceDefinition>(d).ok())
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names.len(), 10, "{names:?}");
    let client = plane.client().await;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in &names {
        eventually(60, &format!("CRD {name} Established"), || async {
            let crd = api.get(name).await.ok()?;
            let conds = crd.status?.conditions?;
            let ok = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
            (ok("Established") && ok("NamesAccepted")).then_some(())
        })
        .await;
    }
    let versions = plane.kubectl(&["api-versions"], None);
    for v in [
        "kueue.x-k8s.io/v1beta2",
        "kueue.x-k8s.io/v1beta1",
        "sluice.dev/v1alpha1",
    ] {
        assert!(
            versions.lines().any(|l| l == v),
            "{v} not served: {versions}"
        );
    }

    // Then the rest of Sluice, and Kueue's samples.
    let installed = install(&plane, Some(INTEGRATIONS), nodes()).await;
    let client = installed.client.clone();
    plane.kubectl(&["apply", "-f", "-"], Some(&sample("cluster-queue.yaml")));

    // A Job with generateName, created with `kubectl create`: suspended by the webhook's rules, admitted, run.
    let created = plane.kubectl(
        &["create", "-f", "-", "-o", "name"],
        Some(&sample("job.yaml")),
    );
    let job_name = created.trim().trim_start_matches("job.batch/").to_string();
    assert!(job_name.starts_with("sample-job-"), "{created}");
    let wl = workload_of(&client, "default", &job_name).await;
    let wl_name = wl.metadata.name.clone().expect("name");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    eventually(60, "the sample Job to complete", || async {
        let job = jobs.get(&job_name).await.ok()?;
        let done = job
            .status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True");
        done.then_some(())
    })
    .await;
    eventually(60, "the sample Job's Workload Finished", || async {
        let w = Api::<sluice_sdk::kueue::v1beta2::Workload>::namespaced(client.clone(), "default")
            .get(&wl_name)
            .await
            .ok()?;
        (has_condition(&w, "Admitted") && has_condition(&w, "Finished")).then_some(())
    })
    .await;

    // A named Job without `suspend: true`: the webhook suspends it, the operator admits it.
    plane.kubectl(&["apply", "-f", "-"], Some(&sample("named-job.yaml")));
    let wl = workload_of(&client, "default", "single-job").await;
    let wl_name = wl.metadata.name.clone().expect("name");
    eventually(60, "single-job admitted and unsuspended", || async {
        let job = jobs.get("single-job").await.ok()?;
        let w = Api::<sluice_sdk::kueue::v1beta2::Workload>::namespaced(client.clone(), "default")
            .get(&wl_name)
            .await
            .ok()?;
        (has_condition(&w, "Admitted") && job.spec?.suspend == Some(false)).then_some(())
    })
    .await;
    plane.kubectl(
        &[
            "delete",
            "job",
            "single-job",
            "--wait=true",
            "--timeout=60s",
        ],
        None,
    );

    // A plain Pod group: gated, admitted together, ungated and bound.
    plane.kubectl(&["apply", "-f", "-"], Some(&sample("pod-group.yaml")));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually(60, "the pod group ungated and Running", || async {
        let list = pods
            .list(&ListParams::default().labels("kueue.x-k8s.io/pod-group-name=sample-group"))
            .await
            .ok()?;
        let running = list.items.iter().filter(|p| {
            p.spec
                .as_ref()
                .is_some_and(|s| s.scheduling_gates.as_ref().is_none_or(|g| g.is_empty()))
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        (running.count() == 2).then_some(())
    })
    .await;

    // Partial admission: 20 pods asked for, 7 cpu left (9 minus the pod group's 2), at least 5 needed.
    plane.kubectl(
        &["apply", "-f", "-"],
        Some(&sample("partial-admission-job.yaml")),
    );
    eventually(60, "partial-job admitted with 7 pods", || async {
        let job = jobs.get("partial-job").await.ok()?;
        let spec = job.spec?;
        (spec.suspend == Some(false) && spec.parallelism == Some(7)).then_some(())
    })
    .await;
    let wl = workload_of(&client, "default", "partial-job").await;
    let count = wl
        .status
        .and_then(|s| s.admission)
        .map(|a| a.pod_set_assignments[0].count);
    assert_eq!(count, Some(Some(7)));
}
