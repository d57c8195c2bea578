//! The JobSet a TrainJob becomes on its runtime, as Kueue computes it to build the TrainJob's pod sets: the
//! runtime's template with every runtime patch merged, each replicated job's pod count from the ML policy and the
//! trainer's node count, and the trainer's and initializers' overrides.
//!
//! Not reproduced: environment, ports and volumes that Trainer's ML-policy plugins add to the containers (Kueue's
//! pod sets only see those that replace an entry the runtime already has), and the Flux policy's init container.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, ResourceRequirements, SecretEnvSource,
};

use super::merge::strategic_merge;
use super::{
    ANCESTOR_LABEL, ANCESTOR_TRAINER, COSCHEDULING_POD_GROUP_LABEL, DATASET_INITIALIZER,
    InitializerSource, MODEL_INITIALIZER, NODE, STORAGE_URI_ENV, TrainJob, TrainingRuntimeSpec,
};
use crate::jobset::{JobSet, JobSetSpec, ReplicatedJob};

/// The child JobSet of `tj` on `runtime`; an error is a runtime patch that does not make a Job template, or a
/// JAX runtime without a trainer step.
pub fn child_jobset(tj: &TrainJob, runtime: &TrainingRuntimeSpec) -> Result<JobSet, String> {
    let spec = tj.spec.clone().unwrap_or_default();
    let mut js_spec: JobSetSpec = runtime.template.spec.clone();
    for rj in &mut js_spec.replicated_jobs {
        apply_patches(rj, tj)?;
    }
    let ancestor = |rj: &ReplicatedJob| -> Option<String> {
        rj.template
            .metadata
            .as_ref()?
            .labels
            .as_ref()?
            .get(ANCESTOR_LABEL)
            .cloned()
    };
    let policy = runtime.ml_policy.as_ref();
    // Trainer's runtime info: a pod count per replicated job.
    let mut counts: Vec<i32> = js_spec
        .replicated_jobs
        .iter()
        .map(|rj| {
            let parallelism = rj.template.spec.as_ref().and_then(|s| s.parallelism);
            let mut count = parallelism.unwrap_or(1);
            if ancestor(rj).as_deref() == Some(ANCESTOR_TRAINER)
                && let Some(p) = policy
            {
                count = p.num_nodes.unwrap_or(1);
            }
            count.max(1)
        })
        .collect();
    let num_nodes = spec.trainer.as_ref().and_then(|t| t.num_nodes);
    let mpi = policy.and_then(|p| p.mpi.as_ref());
    let launcher_as_node = mpi.and_then(|m| m.run_launcher_as_node).unwrap_or(false);
    let trainer_index = js_spec
        .replicated_jobs
        .iter()
        .position(|rj| ancestor(rj).as_deref() == Some(ANCESTOR_TRAINER));
    if policy.is_some_and(|p| p.jax.is_some()) && trainer_index.is_none() {
        return Err(format!(
            "a JAX runtime needs a replicated job labelled {ANCESTOR_LABEL}={ANCESTOR_TRAINER}"
        ));
    }
    // The ML-policy plugins: under MPI the `node` job runs the trainer's nodes (less the launcher when it trains
    // too); under any other policy (or none) the trainer step does.
    if let Some(n) = num_nodes {
        if mpi.is_some() {
            if let Some(i) = js_spec
                .replicated_jobs
                .iter()
                .position(|rj| rj.name == NODE)
            {
                counts[i] = if launcher_as_node { (n - 1).max(1) } else { n };
            }
        } else if let Some(i) = trainer_index {
            counts[i] = n;
        }
    }
    let pod_labels: BTreeMap<String, String> = runtime
        .pod_group_policy
        .as_ref()
        .filter(|p| p.coscheduling.is_some())
        .map(|_| {
            BTreeMap::from([(
                COSCHEDULING_POD_GROUP_LABEL.to_string(),
                tj.metadata.name.clone().unwrap_or_default(),
            )])
        })
        .unwrap_or_default();
    for (rj, count) in js_spec.replicated_jobs.iter_mut().zip(counts) {
        let step = ancestor(rj);
        let job = rj.template.spec.get_or_insert_with(Default::default);
        job.parallelism = Some(count);
        job.completions = Some(count);
        let is_node = rj.name == NODE;
        let containers = &mut rj
            .template
            .spec
            .get_or_insert_with(Default::default)
            .template
            .spec
            .get_or_insert_with(Default::default)
            .containers;
        match step.as_deref() {
            Some(DATASET_INITIALIZER) => {
                rj.replicas = 1;
                let source = spec.initializer.as_ref().and_then(|i| i.dataset.as_ref());
                initialize(containers, DATASET_INITIALIZER, source);
            }
            Some(MODEL_INITIALIZER) => {
                rj.replicas = 1;
                let source = spec.initializer.as_ref().and_then(|i| i.model.as_ref());
                initialize(containers, MODEL_INITIALIZER, source);
            }
            _ => {}
        }
        let trains = step.as_deref() == Some(ANCESTOR_TRAINER);
        if trains {
            rj.replicas = 1;
        }
        if let Some(trainer) = spec.trainer.as_ref() {
            for c in containers.iter_mut().filter(|c| c.name == NODE) {
                if trains {
                    if let Some(image) = &trainer.image {
                        c.image = Some(image.clone());
                    }
                    if let Some(command) = &trainer.command {
                        c.command = Some(command.clone());
                    }
                    if let Some(args) = &trainer.args {
                        c.args = Some(args.clone());
                    }
                }
                if trains || (launcher_as_node && is_node) {
                    if let Some(r) = &trainer.resources_per_node
                        && (r.limits.is_some() || r.requests.is_some())
                    {
                        // Trainer replaces the container's resources whole (claims included).
                        c.resources = Some(ResourceRequirements {
                            limits: r.limits.clone(),
                            requests: r.requests.clone(),
                            claims: None,
                        });
                    }
                    upsert_env(c, &trainer.env);
                }
            }
        }
        if !pod_labels.is_empty() {
            let template = &mut rj
                .template
                .spec
                .get_or_insert_with(Default::default)
                .template;
            template
                .metadata
                .get_or_insert_with(Default::default)
                .labels
                .get_or_insert_with(Default::default)
                .extend(pod_labels.clone());
        }
    }
    let mut js = JobSet::default();
    js.metadata.name = tj.metadata.name.clone();
    js.metadata.namespace = tj.metadata.namespace.clone();
    js.spec = Some(js_spec);
    Ok(js)
}

/// Merges every runtime patch's entry for this replicated job, in list order, into its Job template.
fn apply_patches(rj: &mut ReplicatedJob, tj: &TrainJob) -> Result<(), String> {
    let patches = tj
        .spec
        .as_ref()
        .map(|s| &s.runtime_patches[..])
        .unwrap_or_default();
    let mut merged = None;
    for (i, patch) in patches.iter().enumerate() {
        let entries = patch
            .training_runtime_spec
            .as_ref()
            .and_then(|s| s.pointer("/template/spec/replicatedJobs"))
            .and_then(|v| v.as_array());
        for entry in entries.into_iter().flatten() {
            if entry.get("name").and_then(|n| n.as_str()) != Some(rj.name.as_str()) {
                continue;
            }
            let Some(template_patch) = entry.get("template").filter(|t| !t.is_null()) else {
                continue;
            };
            let doc = merged.get_or_insert_with(|| {
                serde_json::to_value(&rj.template).unwrap_or(serde_json::Value::Null)
            });
            strategic_merge(doc, template_patch);
            // Each step must still be a Job template, as Trainer's typed round trip requires.
            serde_json::from_value::<JobTemplateSpec>(doc.clone()).map_err(|e| {
                format!(
                    "spec.runtimePatches[{i}] ({}): replicated job {:?}: {e}",
                    patch.manager, rj.name
                )
            })?;
        }
    }
    if let Some(doc) = merged {
        rj.template = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// An initializer's container gets its source's URI, environment and Secret.
fn initialize(containers: &mut [Container], name: &str, source: Option<&InitializerSource>) {
    let Some(source) = source else {
        return;
    };
    for c in containers.iter_mut().filter(|c| c.name == name) {
        if let Some(uri) = &source.storage_uri {
            upsert_env(
                c,
                &[EnvVar {
                    name: STORAGE_URI_ENV.to_string(),
                    value: Some(uri.clone()),
                    value_from: None,
                }],
            );
        }
        upsert_env(c, &source.env);
        if let Some(secret) = &source.secret_ref {
            c.env_from.get_or_insert_with(Vec::new).push(EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: secret.name.clone(),
                    optional: None,
                }),
                ..Default::default()
            });
        }
    }
}

/// Each variable replaces the container's one of the same name, or is added last.
fn upsert_env(c: &mut Container, vars: &[EnvVar]) {
    if vars.is_empty() {
        return;
    }
    let env = c.env.get_or_insert_with(Vec::new);
    for v in vars {
        match env.iter_mut().find(|e| e.name == v.name) {
            Some(e) => *e = v.clone(),
            None => env.push(v.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trainer::{ClusterTrainingRuntime, KUEUE_RUNTIME_PATCH_MANAGER};

    fn runtime(yaml: &str) -> TrainingRuntimeSpec {
        serde_yaml::from_str::<ClusterTrainingRuntime>(yaml)
            .unwrap()
            .spec
    }

    /// Trainer's shipped `torch-distributed` runtime.
    const TORCH: &str = r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                containers:
                - {name: node, image: pytorch/pytorch, env: [{name: A, value: runtime}]}
"#;

    fn trainjob(yaml: &str) -> TrainJob {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn counts(js: &JobSet) -> Vec<(String, i32, i32)> {
        js.replicated_jobs()
            .iter()
            .map(|rj| (rj.name.clone(), rj.replicas, rj.pods_count()))
            .collect()
    }

    #[test]
    fn the_trainers_node_count_and_resources_shape_the_torch_runtime() {
        let tj = trainjob(
            r#"
metadata: {name: llm, namespace: ml}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: my/trainer
    command: [torchrun, train.py]
    numNodes: 4
    env: [{name: A, value: job}, {name: B, value: job}]
    resourcesPerNode: {requests: {nvidia.com/gpu: "8"}}
"#,
        );
        let js = child_jobset(&tj, &runtime(TORCH)).unwrap();
        assert_eq!(counts(&js), [("node".to_string(), 1, 4)]);
        let job = js.replicated_jobs()[0].template.spec.as_ref().unwrap();
        assert_eq!((job.parallelism, job.completions), (Some(4), Some(4)));
        let c = &job.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("my/trainer"));
        assert_eq!(c.command.as_ref().unwrap()[0], "torchrun");
        let requests = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["nvidia.com/gpu"].0, "8");
        let env: Vec<(&str, &str)> = c
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(env, [("A", "job"), ("B", "job")]);
    }

    #[test]
    fn without_a_node_count_the_runtimes_ml_policy_gives_it() {
        let tj = trainjob("metadata: {name: t}\nspec: {runtimeRef: {name: r}}");
        let mut rt = runtime(TORCH);
        rt.ml_policy.as_mut().unwrap().num_nodes = Some(3);
        let js = child_jobset(&tj, &rt).unwrap();
        assert_eq!(counts(&js), [("node".to_string(), 1, 3)]);
        // Without an ML policy the Job's own parallelism counts.
        rt.ml_policy = None;
        let js = child_jobset(&tj, &rt).unwrap();
        assert_eq!(counts(&js), [("node".to_string(), 1, 1)]);
    }

    /// Trainer's shipped `deepspeed-distributed` runtime (MPI, the launcher trains too).
    const DEEPSPEED: &str = r#"
spec:
  mlPolicy: {numNodes: 1, mpi: {numProcPerNode: 1, mpiImplementation: OpenMPI, runLauncherAsNode: true}}
  template:
    spec:
      replicatedJobs:
      - name: launcher
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec: {template: {spec: {containers: [{name: node, image: ds}]}}}
      - name: node
        template:
          spec: {template: {spec: {containers: [{name: node, image: ds, command: [/usr/sbin/sshd]}]}}}
"#;

    #[test]
    fn under_mpi_the_node_job_runs_the_nodes_the_launcher_does_not() {
        let tj = trainjob(
            r#"
metadata: {name: ds}
spec:
  runtimeRef: {name: deepspeed-distributed}
  trainer: {numNodes: 4, resourcesPerNode: {limits: {nvidia.com/gpu: "1"}}}
"#,
        );
        let js = child_jobset(&tj, &runtime(DEEPSPEED)).unwrap();
        assert_eq!(
            counts(&js),
            [("launcher".to_string(), 1, 1), ("node".to_string(), 1, 3)]
        );
        // The launcher trains too: both jobs' `node` containers get the node resources.
        for rj in js.replicated_jobs() {
            let c = &rj.pod_template().unwrap().spec.as_ref().unwrap().containers[0];
            assert!(
                c.resources.as_ref().unwrap().limits.is_some(),
                "{}",
                rj.name
            );
        }
        let mut rt = runtime(DEEPSPEED);
        rt.ml_policy
            .as_mut()
            .unwrap()
            .mpi
            .as_mut()
            .unwrap()
            .run_launcher_as_node = Some(false);
        let js = child_jobset(&tj, &rt).unwrap();
        assert_eq!(
            counts(&js),
            [("launcher".to_string(), 1, 1), ("node".to_string(), 1, 4)]
        );
    }

    #[test]
    fn patches_merge_in_order_and_coscheduling_labels_every_pod() {
        let tj = trainjob(&format!(
            r#"
metadata: {{name: t}}
spec:
  runtimeRef: {{name: torch-distributed}}
  runtimePatches:
  - manager: user
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  metadata: {{annotations: {{kueue.x-k8s.io/podset-required-topology: rack}}}}
                  spec:
                    nodeSelector: {{zone: a}}
                    tolerations: [{{key: user, operator: Exists}}]
  - manager: {KUEUE_RUNTIME_PATCH_MANAGER}
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  metadata: {{labels: {{kueue.x-k8s.io/podset: node}}}}
                  spec:
                    nodeSelector: {{pool: h100}}
                    tolerations: [{{key: kueue, operator: Exists}}]
"#
        ));
        let mut rt = runtime(TORCH);
        rt.pod_group_policy = Some(serde_json::from_str(r#"{"coscheduling": {}}"#).unwrap());
        let js = child_jobset(&tj, &rt).unwrap();
        let template = js.replicated_jobs()[0].pod_template().unwrap();
        let meta = template.metadata.as_ref().unwrap();
        assert_eq!(
            meta.annotations.as_ref().unwrap()["kueue.x-k8s.io/podset-required-topology"],
            "rack"
        );
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["kueue.x-k8s.io/podset"], "node");
        assert_eq!(labels[COSCHEDULING_POD_GROUP_LABEL], "t");
        let spec = template.spec.as_ref().unwrap();
        assert_eq!(spec.node_selector.as_ref().unwrap().len(), 2);
        // Tolerations have no merge key: the last patch's replace the list.
        let keys: Vec<_> = spec
            .tolerations
            .iter()
            .flatten()
            .map(|t| t.key.clone().unwrap())
            .collect();
        assert_eq!(keys, ["kueue"]);
    }

    #[test]
    fn initializers_run_once_with_their_source() {
        let tj = trainjob(
            r#"
metadata: {name: t}
spec:
  runtimeRef: {name: r}
  initializer:
    dataset: {storageUri: "hf://data", env: [{name: X, value: "1"}], secretRef: {name: hf-token}}
"#,
        );
        let rt: TrainingRuntimeSpec = serde_yaml::from_str(
            r#"
template:
  spec:
    replicatedJobs:
    - name: dataset-initializer
      replicas: 3
      template:
        metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
        spec: {parallelism: 2, completions: 5, template: {spec: {containers: [{name: dataset-initializer, image: i}]}}}
"#,
        )
        .unwrap();
        let js = child_jobset(&tj, &rt).unwrap();
        // One replica; completions follow parallelism.
        assert_eq!(counts(&js), [("dataset-initializer".to_string(), 1, 2)]);
        let c = &js.replicated_jobs()[0]
            .pod_template()
            .unwrap()
            .spec
            .as_ref()
            .unwrap()
            .containers[0];
        let env: Vec<_> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert_eq!(env, [STORAGE_URI_ENV, "X"]);
        assert_eq!(
            c.env_from.as_ref().unwrap()[0]
                .secret_ref
                .as_ref()
                .unwrap()
                .name,
            "hf-token"
        );
    }

    #[test]
    fn a_jax_runtime_without_a_trainer_step_is_an_error() {
        let tj = trainjob("metadata: {name: t}\nspec: {runtimeRef: {name: r}}");
        let rt: TrainingRuntimeSpec = serde_yaml::from_str(
            "mlPolicy: {jax: {}}\ntemplate: {spec: {replicatedJobs: [{name: w, template: {spec: {template: {spec: {containers: []}}}}}]}}",
        )
        .unwrap();
        assert!(child_jobset(&tj, &rt).unwrap_err().contains("JAX"));
    }
}
