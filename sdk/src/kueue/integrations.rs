//! Which job integrations a Kueue Configuration turns on (`integrations.frameworks` and `externalFrameworks`), and
//! so which owners make an object "already managed by Kueue" (Kueue's integration manager, v0.19.2).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde_json::Value;

/// Framework name of batch/v1 Jobs.
pub const BATCH_JOB: &str = "batch/job";
/// Framework name of plain Pods and pod groups.
pub const POD: &str = "pod";
/// Framework name of JobSets.
pub const JOBSET: &str = "jobset.x-k8s.io/jobset";
/// Framework name of Kubeflow PyTorchJobs (v1).
pub const PYTORCHJOB: &str = "kubeflow.org/pytorchjob";
/// Framework name of KubeRay RayJobs.
pub const RAYJOB: &str = "ray.io/rayjob";
/// Framework name of KubeRay RayClusters.
pub const RAYCLUSTER: &str = "ray.io/raycluster";
/// Framework name of KubeRay RayServices.
pub const RAYSERVICE: &str = "ray.io/rayservice";
/// Framework name of Kubeflow Trainer TrainJobs.
pub const TRAINJOB: &str = "trainer.kubeflow.org/trainjob";
/// Framework name of LeaderWorkerSets.
pub const LEADERWORKERSET: &str = crate::lws::FRAMEWORK_NAME;

/// Kueue v0.19's framework names with the kind each one integrates (`apiVersion`, `kind`).
pub const FRAMEWORKS: &[(&str, &str, &str)] = &[
    (BATCH_JOB, "batch/v1", "Job"),
    ("deployment", "apps/v1", "Deployment"),
    (JOBSET, "jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("kubeflow.org/jaxjob", "kubeflow.org/v1", "JAXJob"),
    ("kubeflow.org/mpijob", "kubeflow.org/v2beta1", "MPIJob"),
    ("kubeflow.org/paddlejob", "kubeflow.org/v1", "PaddleJob"),
    (PYTORCHJOB, "kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/tfjob", "kubeflow.org/v1", "TFJob"),
    ("kubeflow.org/xgboostjob", "kubeflow.org/v1", "XGBoostJob"),
    (
        LEADERWORKERSET,
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
    ),
    (POD, "v1", "Pod"),
    (RAYCLUSTER, "ray.io/v1", "RayCluster"),
    (RAYJOB, "ray.io/v1", "RayJob"),
    (RAYSERVICE, "ray.io/v1", "RayService"),
    (
        "sparkoperator.k8s.io/sparkapplication",
        "sparkoperator.k8s.io/v1beta2",
        "SparkApplication",
    ),
    ("statefulset", "apps/v1", "StatefulSet"),
    (TRAINJOB, "trainer.kubeflow.org/v1alpha1", "TrainJob"),
    (
        "workload.codeflare.dev/appwrapper",
        "workload.codeflare.dev/v1beta2",
        "AppWrapper",
    ),
];

/// Frameworks that turn another on with them (Kueue's `ImplicitlyEnabledFrameworkNames`): these work on their
/// pods, so the pod integration's webhook must run.
const IMPLIED: &[(&str, &str)] = &[
    (LEADERWORKERSET, POD),
    ("deployment", POD),
    ("statefulset", POD),
];

/// The integrations a Configuration enables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Integrations {
    /// Framework names of [`FRAMEWORKS`], the implied ones included.
    enabled: BTreeSet<&'static str>,
    /// External frameworks as (`apiVersion`, `kind`).
    external: Vec<(String, String)>,
}

static EVERY: LazyLock<Integrations> = LazyLock::new(|| Integrations {
    enabled: FRAMEWORKS.iter().map(|f| f.0).collect(),
    external: Vec::new(),
});

impl Integrations {
    /// The integrations of `frameworks` (with those they imply) and `external` (`Kind.version.group`). Names that
    /// are not Kueue's, and external entries not of that form, are left out: the Configuration check refuses them.
    pub fn new<'a>(
        frameworks: impl IntoIterator<Item = &'a str>,
        external: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut enabled = BTreeSet::new();
        for name in frameworks {
            if let Some(f) = FRAMEWORKS.iter().find(|f| f.0 == name) {
                enabled.insert(f.0);
                for (_, implied) in IMPLIED.iter().filter(|(by, _)| *by == name) {
                    enabled.insert(*implied);
                }
            }
        }
        let external = external
            .into_iter()
            .filter_map(|e| {
                let (kind, rest) = e.split_once('.')?;
                let (version, group) = rest.split_once('.')?;
                (!kind.is_empty() && !version.is_empty() && !group.is_empty())
                    .then(|| (format!("{group}/{version}"), kind.to_owned()))
            })
            .collect();
        Self { enabled, external }
    }

    /// Every framework Kueue has on, no external ones: what a caller without a Configuration assumes.
    pub fn every() -> &'static Integrations {
        &EVERY
    }

    /// Whether framework `name` (e.g. `jobset.x-k8s.io/jobset`, `pod`) is on.
    pub fn enabled(&self, name: &str) -> bool {
        self.enabled.contains(name)
    }

    /// Whether an owner of this `apiVersion` and `kind` is a kind an enabled or external integration manages
    /// (Kueue's `getJobTypeForOwner`).
    pub fn manages_owner(&self, api_version: &str, kind: &str) -> bool {
        FRAMEWORKS
            .iter()
            .any(|f| f.1 == api_version && f.2 == kind && self.enabled.contains(f.0))
            || self
                .external
                .iter()
                .any(|(a, k)| a == api_version && k == kind)
    }

    /// Whether the document's controller owner is managed by an integration (Kueue's
    /// `IsOwnerManagedByKueueForObject`).
    pub fn manages_owner_of(&self, obj: &Value) -> bool {
        let owners = obj
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        owners.into_iter().flatten().any(|o| {
            o.get("controller").and_then(Value::as_bool) == Some(true)
                && self.manages_owner(
                    o.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                    o.get("kind").and_then(Value::as_str).unwrap_or(""),
                )
        })
    }
}

impl Default for Integrations {
    fn default() -> Self {
        EVERY.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_framework_on_makes_its_kind_a_managed_owner_and_brings_what_it_implies() {
        let i = Integrations::new(
            ["batch/job", "leaderworkerset.x-k8s.io/leaderworkerset"],
            [],
        );
        assert!(i.enabled("batch/job"));
        assert!(
            i.enabled("pod"),
            "LeaderWorkerSet implies the pod integration"
        );
        assert!(!i.enabled("jobset.x-k8s.io/jobset"));
        assert!(i.manages_owner("batch/v1", "Job"));
        assert!(i.manages_owner("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"));
        assert!(!i.manages_owner("jobset.x-k8s.io/v1alpha2", "JobSet"));
        // Another version of the same kind is another type to Kueue.
        assert!(!i.manages_owner("batch/v2", "Job"));
        let only_jobs = Integrations::new(["batch/job"], []);
        assert!(!only_jobs.enabled("pod"));
    }

    #[test]
    fn external_frameworks_are_managed_owners_and_malformed_or_unknown_names_count_for_nothing() {
        let i = Integrations::new(
            ["batch/job", "no-such/framework"],
            [
                "AppWrapper.v1beta2.workload.codeflare.dev",
                "Broken",
                "A..b",
            ],
        );
        assert!(i.manages_owner("workload.codeflare.dev/v1beta2", "AppWrapper"));
        assert!(!i.enabled("no-such/framework"));
        assert!(!i.manages_owner("", "Broken"));
        assert_eq!(i.external.len(), 1);
    }

    #[test]
    fn only_a_controller_owner_counts() {
        let i = Integrations::new(["jobset.x-k8s.io/jobset"], []);
        let owned = |controller: bool| {
            json!({"metadata": {"ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "name": "js", "uid": "u", "controller": controller}]}})
        };
        assert!(i.manages_owner_of(&owned(true)));
        assert!(!i.manages_owner_of(&owned(false)));
        assert!(!Integrations::new(["batch/job"], []).manages_owner_of(&owned(true)));
        assert!(Integrations::every().manages_owner_of(&owned(true)));
        assert!(!i.manages_owner_of(&json!({"metadata": {}})));
    }
}
