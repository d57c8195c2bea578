//! A differential scenario: a Kueue Configuration and the steps that change the cluster, read from a directory
//! of tests/kueue/scenarios or made by the generator.
//!
//! A scenario directory holds manifests (`*.yaml`, applied in name order, one step each), an optional
//! `config.yaml` (a Kueue Configuration, given to both systems), an optional `not-simulated.txt` saying why the
//! simulator's fixed point is not compared with Kueue for this scenario, and an optional `steps.yaml` that
//! replaces the default order with explicit steps, and an optional `nodes.yaml` of Node objects (name, labels,
//! taints, `status.capacity`) for the fake kubelet to run instead of one roomy node per ResourceFlavor, as a
//! topology-aware scenario needs:
//!
//! ```yaml
//! - apply: 10-jobs.yaml                           # a manifest file of the directory
//! - finish: {namespace: team-a, job: train-1}     # the Job's running Pods succeed
//! - delete: {kind: Job, namespace: team-a, name: train-2}
//! - patch: {kind: ClusterQueue, name: cq-a, patch: {spec: {stopPolicy: Hold}}}   # a merge patch
//! ```
//!
//! A scenario with JobSets (`jobset.x-k8s.io/v1alpha2`) or KubeRay RayJobs (`ray.io/v1`) gets that project's CRDs
//! (from its Go module, `tests/control-plane/crds`; RayCluster's beside RayJob's) on both control planes before
//! either manager starts, and its JobSets or RayJobs are compared; its `config.yaml` must list
//! `integrations.frameworks`, since without that section Kueue manages only `batch/job` and Sluice JobSets and Ray
//! kinds too. No JobSet or KubeRay controller runs: JobSets get no Jobs, RayJobs no RayCluster, and neither Pods or
//! status. LeaderWorkerSets are the exception: Kueue works on their pods, so LWS's own controller (`tests/lws/build`)
//! runs beside each manager, and their pods are compared too (`system::THIRD_PARTY`).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// A scenario run under Kueue and under Sluice.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name (the directory's, or `seed-N`).
    pub name: String,
    /// The Kueue Configuration both systems run under (YAML), if any.
    pub config: Option<String>,
    /// What happens, in order; both systems are compared once quiet after each step.
    pub steps: Vec<Step>,
    /// Why the simulator's fixed point is not compared (`not-simulated.txt`: the scenario needs time to pass,
    /// which only a timed simulation has), if so.
    pub not_simulated: Option<String>,
    /// The Nodes the fake kubelet runs (`nodes.yaml`: Node objects, their labels, taints and `status.capacity`);
    /// none for one roomy node per ResourceFlavor. Topology-aware scenarios declare theirs.
    pub nodes: Vec<Value>,
}

/// One change to the cluster.
#[derive(Clone, Debug)]
pub enum Step {
    /// Create these objects (multi-document YAML), in document order.
    Apply {
        /// Where they came from (a file name, `wave 2`), for reports.
        what: String,
        /// The manifests.
        yaml: String,
    },
    /// Delete an object.
    Delete(ObjectRef),
    /// The running Pods of a Job succeed, as its containers exiting 0 would.
    Finish {
        /// The Job's namespace.
        namespace: String,
        /// The Job.
        job: String,
    },
    /// A JSON merge patch on an object (a quota change, a stop policy).
    Patch {
        /// The object.
        object: ObjectRef,
        /// The patch.
        patch: Value,
        /// On its status subresource (what another controller would write, such as an AdmissionCheck's Active).
        status: bool,
    },
    /// An admission check's controller answers for a Job's Workload: the check's state on the Workload.
    Answer {
        /// The Job's namespace.
        namespace: String,
        /// The Job.
        job: String,
        /// The AdmissionCheck.
        check: String,
        /// Pending, Ready, Retry or Rejected.
        state: String,
        /// The check's `requeueAfterSeconds`, with a Retry.
        requeue_after_seconds: Option<i32>,
    },
}

/// An object by kind, namespace and name.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectRef {
    /// Its kind (Job, Workload, ClusterQueue, LocalQueue, ResourceFlavor, Cohort, ...).
    pub kind: String,
    /// Its namespace, for namespaced kinds.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl Step {
    /// A short description for reports: `apply 10-jobs.yaml`, `delete Job team-a/x`.
    pub fn describe(&self) -> String {
        match self {
            Step::Apply { what, .. } => format!("apply {what}"),
            Step::Delete(o) => format!("delete {}", o.describe()),
            Step::Finish { namespace, job } => format!("finish Job {namespace}/{job}"),
            Step::Patch { object, .. } => format!("patch {}", object.describe()),
            Step::Answer {
                namespace,
                job,
                check,
                state,
                ..
            } => format!("{check} answers {state} for Job {namespace}/{job}"),
        }
    }
}

impl ObjectRef {
    /// `Kind ns/name` or `Kind name`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// A step as `steps.yaml` spells it.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum StepFile {
    Apply(String),
    Delete(ObjectRef),
    Finish { namespace: String, job: String },
    Patch(PatchFile),
    Answer(AnswerFile),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AnswerFile {
    namespace: String,
    job: String,
    check: String,
    state: String,
    #[serde(default)]
    requeue_after_seconds: Option<i32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchFile {
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    name: String,
    patch: Value,
    /// `status` to patch the status subresource.
    #[serde(default)]
    subresource: Option<String>,
}

impl Scenario {
    /// Reads a scenario directory; the error names the file and what is wrong with it.
    pub fn load(dir: &Path) -> Result<Scenario, String> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| format!("{}: not a directory name", dir.display()))?;
        let read = |file: &str| {
            std::fs::read_to_string(dir.join(file))
                .map_err(|e| format!("{}: {e}", dir.join(file).display()))
        };
        let mut manifests: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|f| {
                f.ends_with(".yaml")
                    && !["config.yaml", "steps.yaml", "nodes.yaml"].contains(&f.as_str())
            })
            .collect();
        manifests.sort();
        let config = dir
            .join("config.yaml")
            .exists()
            .then(|| read("config.yaml"))
            .transpose()?;
        let steps = if dir.join("steps.yaml").exists() {
            let text = read("steps.yaml")?;
            // Through JSON: serde_yaml reads enums only as YAML tags (`!apply`), not as `apply:` keys.
            let parsed: Vec<StepFile> = serde_yaml::from_str::<Value>(&text)
                .map_err(|e| e.to_string())
                .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
                .map_err(|e| format!("{}: {e}", dir.join("steps.yaml").display()))?;
            let mut steps = Vec::new();
            for s in parsed {
                steps.push(match s {
                    StepFile::Apply(file) => {
                        if !manifests.contains(&file) {
                            return Err(format!(
                                "{}: apply names {file}, which is not a manifest of the directory",
                                dir.join("steps.yaml").display()
                            ));
                        }
                        Step::Apply {
                            yaml: read(&file)?,
                            what: file,
                        }
                    }
                    StepFile::Delete(o) => Step::Delete(o),
                    StepFile::Finish { namespace, job } => Step::Finish { namespace, job },
                    StepFile::Patch(p) => Step::Patch {
                        object: ObjectRef {
                            kind: p.kind,
                            namespace: p.namespace,
                            name: p.name,
                        },
                        patch: p.patch,
                        status: match p.subresource.as_deref() {
                            None => false,
                            Some("status") => true,
                            Some(other) => {
                                return Err(format!(
                                    "{}: patch subresource {other:?} is not `status`",
                                    dir.join("steps.yaml").display()
                                ));
                            }
                        },
                    },
                    StepFile::Answer(a) => Step::Answer {
                        namespace: a.namespace,
                        job: a.job,
                        check: a.check,
                        state: a.state,
                        requeue_after_seconds: a.requeue_after_seconds,
                    },
                });
            }
            steps
        } else {
            manifests
                .iter()
                .map(|f| {
                    Ok(Step::Apply {
                        yaml: read(f)?,
                        what: f.clone(),
                    })
                })
                .collect::<Result<_, String>>()?
        };
        if steps.is_empty() {
            return Err(format!("{}: no manifests and no steps", dir.display()));
        }
        let not_simulated = dir
            .join("not-simulated.txt")
            .exists()
            .then(|| read("not-simulated.txt").map(|t| t.trim().to_string()))
            .transpose()?;
        let nodes = if dir.join("nodes.yaml").exists() {
            let path = dir.join("nodes.yaml");
            let mut nodes = Vec::new();
            for doc in serde_yaml::Deserializer::from_str(&read("nodes.yaml")?) {
                let v = Value::deserialize(doc).map_err(|e| format!("{}: {e}", path.display()))?;
                if v["kind"] != "Node" || !v["metadata"]["name"].is_string() {
                    return Err(format!(
                        "{}: every document must be a Node with metadata.name, not {}",
                        path.display(),
                        v["kind"]
                    ));
                }
                nodes.push(v);
            }
            nodes
        } else {
            Vec::new()
        };
        let scenario = Scenario {
            name,
            config,
            steps,
            not_simulated,
            nodes,
        };
        for t in super::system::THIRD_PARTY {
            if scenario.applies_kind(t.kind) && !scenario.lists_integrations() {
                return Err(format!(
                    "{}: a scenario with {kind}s needs a config.yaml with integrations.frameworks (without it Kueue \
                     manages only batch/job, Sluice {kind}s too): {}, or frameworks without it to see {kind}s \
                     ignored",
                    dir.display(),
                    t.framework,
                    kind = t.kind
                ));
            }
        }
        Ok(scenario)
    }

    /// Whether a manifest of its steps is of `kind` (`JobSet`, `RayJob`).
    pub fn applies_kind(&self, kind: &str) -> bool {
        self.steps.iter().any(|step| match step {
            Step::Apply { yaml, .. } => serde_yaml::Deserializer::from_str(yaml)
                .filter_map(|doc| Value::deserialize(doc).ok())
                .any(|v| v["kind"] == kind),
            _ => false,
        })
    }

    /// Whether its Configuration has an `integrations` section.
    fn lists_integrations(&self) -> bool {
        self.config
            .as_deref()
            .and_then(|c| serde_yaml::from_str::<Value>(c).ok())
            .is_some_and(|c| !c["integrations"].is_null())
    }

    /// Every scenario directory under `root`, by name.
    pub fn load_all(root: &Path) -> Result<Vec<Scenario>, String> {
        let mut dirs: Vec<_> = std::fs::read_dir(root)
            .map_err(|e| format!("{}: {e}", root.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        dirs.iter().map(|d| Scenario::load(d)).collect()
    }
}
