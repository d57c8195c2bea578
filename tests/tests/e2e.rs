//! End-to-end test against a real cluster (kind or k3d) with the Sluice chart installed: a Job is admitted and
//! unsuspended, preempted by a higher-priority Job, suspended and requeued.
//!
//! Skipped unless `SLUICE_E2E_KUBECONFIG` names a kubeconfig; see `docs/operator.md` ("End-to-end tests").

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::de::DeserializeOwned;
use sluice_sdk::kueue::v1beta2 as api;

fn yaml<T: DeserializeOwned>(s: &str) -> T {
    serde_yaml::from_str(s).expect("fixture")
}

async fn client() -> Option<Client> {
    let path = std::env::var("SLUICE_E2E_KUBECONFIG").ok()?;
    let kubeconfig = Kubeconfig::read_from(&path).expect("reading SLUICE_E2E_KUBECONFIG");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Some(Client::try_from(config).expect("client"))
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn create<K>(api: &Api<K>, obj: K)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + DeserializeOwned,
{
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create: {e}"),
    }
}

fn job(name: &str, priority: &str) -> Job {
    yaml(&format!(
        r#"
metadata:
  name: {name}
  namespace: sluice-e2e
  labels: {{kueue.x-k8s.io/queue-name: e2e, kueue.x-k8s.io/priority-class: {priority}}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox:1.36
        command: ["sleep", "600"]
        resources: {{requests: {{cpu: "1"}}}}
"#
    ))
}

async fn workload_of(api: &Api<api::Workload>, job: &str) -> Option<api::Workload> {
    api.list(&Default::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == job)
        })
}

fn cond(w: &api::Workload, t: &str) -> Option<(String, String)> {
    w.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn suspended(api: &Api<Job>, name: &str) -> Option<bool> {
    api.get_opt(name).await.ok()??.spec?.suspend
}

#[tokio::test]
async fn job_is_admitted_preempted_and_requeued() {
    let Some(client) = client().await else {
        eprintln!("skipped: SLUICE_E2E_KUBECONFIG is not set");
        return;
    };
    create(
        &Api::<Namespace>::all(client.clone()),
        yaml("metadata: {name: sluice-e2e}"),
    )
    .await;
    create(
        &Api::<api::ResourceFlavor>::all(client.clone()),
        yaml("metadata: {name: sluice-e2e}\nspec: {}"),
    )
    .await;
    create(
        &Api::<api::ClusterQueue>::all(client.clone()),
        yaml(
            r#"
metadata: {name: sluice-e2e}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: sluice-e2e}}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: sluice-e2e, resources: [{name: cpu, nominalQuota: "1"}]}]
"#,
        ),
    )
    .await;
    create(
        &Api::<api::LocalQueue>::namespaced(client.clone(), "sluice-e2e"),
        yaml("metadata: {name: e2e, namespace: sluice-e2e}\nspec: {clusterQueue: sluice-e2e}"),
    )
    .await;
    let wpcs = Api::<api::WorkloadPriorityClass>::all(client.clone());
    create(&wpcs, yaml("metadata: {name: sluice-e2e-low}\nvalue: 10")).await;
    create(
        &wpcs,
        yaml("metadata: {name: sluice-e2e-high}\nvalue: 1000"),
    )
    .await;

    let jobs = Api::<Job>::namespaced(client.clone(), "sluice-e2e");
    let workloads = Api::<api::Workload>::namespaced(client.clone(), "sluice-e2e");
    create(&jobs, job("low", "sluice-e2e-low")).await;
    eventually("low admitted and unsuspended", || async {
        let admitted = workload_of(&workloads, "low")
            .await
            .is_some_and(|w| cond(&w, "Admitted").is_some_and(|c| c.0 == "True"));
        admitted && suspended(&jobs, "low").await == Some(false)
    })
    .await;

    create(&jobs, job("high", "sluice-e2e-high")).await;
    eventually("low preempted and suspended", || async {
        let preempted = workload_of(&workloads, "low").await.is_some_and(|w| {
            cond(&w, "Preempted").is_some_and(|c| c == ("True".into(), "InClusterQueue".into()))
        });
        preempted && suspended(&jobs, "low").await == Some(true)
    })
    .await;
    eventually("high admitted and unsuspended", || async {
        let admitted = workload_of(&workloads, "high")
            .await
            .is_some_and(|w| cond(&w, "Admitted").is_some_and(|c| c.0 == "True"));
        admitted && suspended(&jobs, "high").await == Some(false)
    })
    .await;
    eventually("low requeued", || async {
        workload_of(&workloads, "low").await.is_some_and(|w| {
            w.status.as_ref().is_some_and(|s| s.admission.is_none())
                && cond(&w, "Requeued").is_some_and(|c| c.0 == "True")
        })
    })
    .await;

    let bg = DeleteParams::background();
    let _ = Api::<Namespace>::all(client.clone())
        .delete("sluice-e2e", &bg)
        .await;
    let _ = Api::<api::ClusterQueue>::all(client.clone())
        .delete("sluice-e2e", &bg)
        .await;
    let _ = Api::<api::ResourceFlavor>::all(client.clone())
        .delete("sluice-e2e", &bg)
        .await;
    for w in ["sluice-e2e-low", "sluice-e2e-high"] {
        let _ = wpcs.delete(w, &bg).await;
    }
}
