//! One system under comparison (Kueue's manager, or Sluice's operator and webhook) on its own control plane,
//! with a fake kubelet: the steps of a scenario applied to it, and its state read once it is quiet.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use super::kubelet::{FakeKubelet, FakeNode, succeeded};
use super::kueue::Kueue;
use super::lws::LwsController;
use super::plane::ControlPlane;
use super::scenario::Step;
use super::support::{Installed, apply_crds_once, install};

/// Which system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Kueue's manager.
    Kueue,
    /// Sluice's operator and webhook.
    Sluice,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::Kueue => "Kueue",
            Which::Sluice => "Sluice",
        })
    }
}

/// What runs for one system; dropped in field order (the managers before their control plane).
enum Manager {
    Kueue(Kueue, FakeKubelet),
    Sluice(Box<Installed>),
}

/// A system running one scenario.
pub struct System {
    /// Which one.
    pub which: Which,
    manager: Manager,
    /// A cluster-admin client.
    pub client: Client,
    /// The third-party kinds compared besides [`KINDS`] (those whose CRDs were installed for the scenario).
    extra: Vec<(&'static str, &'static str, &'static str, &'static str)>,
    /// LWS's controller, where the scenario applies LeaderWorkerSets.
    lws: Option<LwsController>,
    /// Its control plane (dropped last).
    pub plane: ControlPlane,
}

/// The kinds whose objects are compared (and watched for quiet).
pub const KINDS: &[(&str, &str, &str, &str)] = &[
    ("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
    ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
    ("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
    ("kueue.x-k8s.io", "v1beta2", "Cohort", "cohorts"),
    ("batch", "v1", "Job", "jobs"),
];

/// A kind of another project that scenarios may apply (its CRDs are installed only there: each is most of a megabyte
/// for each API server to take in), and how its objects are compared.
pub struct ThirdParty {
    /// The kind whose manifests in a scenario call for it.
    pub kind: &'static str,
    /// Kueue's framework name of its integration (`integrations.frameworks`).
    pub framework: &'static str,
    /// Its kinds whose objects are compared (group, version, kind, plural).
    pub compared: &'static [(&'static str, &'static str, &'static str, &'static str)],
    /// How the paths of its CRDs end, among those `tests/control-plane/crds` prints.
    pub crds: &'static [&'static str],
    /// Its kinds that jobs read (group, version, kind, plural), exported from Kueue's cluster with the simulator's
    /// input.
    pub sim_inputs: &'static [(&'static str, &'static str, &'static str, &'static str)],
}

/// JobSets (`jobset.x-k8s.io/v1alpha2`), KubeRay's RayJobs and RayClusters (`ray.io/v1`; both CRDs for either kind:
/// Kueue's RayJob controller watches RayClusters, and Kueue's shipped Configuration manages both kinds; without
/// KubeRay's controller no RayJob or RayService makes a RayCluster, so only RayClusters applied by a scenario are
/// compared), RayServices (with the RayCluster CRD too), PyTorchJobs (`kubeflow.org/v1`), and Kubeflow Trainer's
/// TrainJobs (`trainer.kubeflow.org/v1alpha1`, with its runtimes' CRDs and JobSet's).
pub const THIRD_PARTY: &[ThirdParty] = &[
    ThirdParty {
        kind: "JobSet",
        framework: "jobset.x-k8s.io/jobset",
        compared: &[("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")],
        crds: &["/jobset.x-k8s.io_jobsets.yaml"],
        sim_inputs: &[],
    },
    ThirdParty {
        kind: "RayJob",
        framework: "ray.io/rayjob",
        compared: &[("ray.io", "v1", "RayJob", "rayjobs")],
        crds: &["/ray.io_rayjobs.yaml", "/ray.io_rayclusters.yaml"],
        sim_inputs: &[],
    },
    ThirdParty {
        kind: "RayCluster",
        framework: "ray.io/raycluster",
        compared: &[("ray.io", "v1", "RayCluster", "rayclusters")],
        crds: &["/ray.io_rayjobs.yaml", "/ray.io_rayclusters.yaml"],
        sim_inputs: &[],
    },
    ThirdParty {
        kind: "RayService",
        framework: "ray.io/rayservice",
        compared: &[("ray.io", "v1", "RayService", "rayservices")],
        crds: &["/ray.io_rayclusters.yaml", "/ray.io_rayservices.yaml"],
        sim_inputs: &[],
    },
    ThirdParty {
        kind: "TrainJob",
        framework: "trainer.kubeflow.org/trainjob",
        compared: &[("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")],
        // Kueue's TrainJob controller also watches the JobSets Trainer makes.
        crds: &[
            "/trainer.kubeflow.org_trainjobs.yaml",
            "/trainer.kubeflow.org_trainingruntimes.yaml",
            "/trainer.kubeflow.org_clustertrainingruntimes.yaml",
            "/jobset.x-k8s.io_jobsets.yaml",
        ],
        sim_inputs: &[
            (
                "trainer.kubeflow.org",
                "v1alpha1",
                "ClusterTrainingRuntime",
                "clustertrainingruntimes",
            ),
            (
                "trainer.kubeflow.org",
                "v1alpha1",
                "TrainingRuntime",
                "trainingruntimes",
            ),
        ],
    },
    ThirdParty {
        kind: "PyTorchJob",
        framework: "kubeflow.org/pytorchjob",
        compared: &[("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")],
        crds: &["/kubeflow.org_pytorchjobs.yaml"],
        sim_inputs: &[],
    },
    // Plain Pods and pod groups (Kueue's pod integration): no CRD, the pods themselves compared.
    ThirdParty {
        kind: "Pod",
        framework: "pod",
        compared: &[("", "v1", "Pod", "pods")],
        crds: &[],
        sim_inputs: &[],
    },
    // Kueue works on a LeaderWorkerSet's pods (one Workload per group, the pods gated and ungated), so LWS's own
    // controller runs beside each manager ([`LwsController`]) and the pods are compared too.
    ThirdParty {
        kind: "LeaderWorkerSet",
        framework: "leaderworkerset.x-k8s.io/leaderworkerset",
        compared: &[
            (
                "leaderworkerset.x-k8s.io",
                "v1",
                "LeaderWorkerSet",
                "leaderworkersets",
            ),
            ("", "v1", "Pod", "pods"),
        ],
        crds: &["/leaderworkerset.x-k8s.io_leaderworkersets.yaml"],
        sim_inputs: &[],
    },
];

/// Whether a third-party kind needs its own controller running beside the manager (LWS's: Kueue's integration works
/// on the pods its StatefulSets make).
fn runs_lws(third: &[(&'static ThirdParty, Vec<String>)]) -> bool {
    third.iter().any(|(t, _)| t.kind == "LeaderWorkerSet")
}

/// The paths of the third-party CRDs, as `tests/control-plane/crds` prints them (each downloaded into Go's module
/// cache on first use), one per line; run once.
fn crd_paths() -> Result<&'static [String], String> {
    static PATHS: OnceLock<Result<Vec<String>, String>> = OnceLock::new();
    PATHS
        .get_or_init(|| {
            let script = super::plane::repo_root().join("tests/control-plane/crds");
            let out = std::process::Command::new(&script)
                .output()
                .map_err(|e| format!("running {}: {e}", script.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed: {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string)
                .collect())
        })
        .as_deref()
        .map_err(Clone::clone)
}

/// The CRDs (YAML) of `third`, from their Go modules.
pub fn crds(third: &ThirdParty) -> Result<Vec<String>, String> {
    let paths = crd_paths()?;
    third
        .crds
        .iter()
        .map(|suffix| {
            let path = paths.iter().find(|p| p.ends_with(suffix)).ok_or_else(|| {
                format!(
                    "tests/control-plane/crds printed {paths:?}, without {}'s CRD {}",
                    third.kind,
                    suffix.trim_start_matches('/')
                )
            })?;
            std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))
        })
        .collect()
}

/// The API groups a scenario's control plane serves: what Kueue's manager, Sluice, kube-controller-manager and
/// the API server's own controllers use. The API server starts on less CPU without the rest (2.5 s against 3.1 s),
/// and the suite is CPU-bound on control-plane start-up.
const SCENARIO_APIS: &str = "--runtime-config=api/all=false,api/v1=true,apps/v1=true,batch/v1=true,\
rbac.authorization.k8s.io/v1=true,admissionregistration.k8s.io/v1=true,apiextensions.k8s.io/v1=true,\
apiregistration.k8s.io/v1=true,coordination.k8s.io/v1=true,events.k8s.io/v1=true,scheduling.k8s.io/v1=true,\
authentication.k8s.io/v1=true,authorization.k8s.io/v1=true,flowcontrol.apiserver.k8s.io/v1=true,policy/v1=true,\
node.k8s.io/v1=true,networking.k8s.io/v1=true,discovery.k8s.io/v1=true,storage.k8s.io/v1=true";

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

impl System {
    /// A control plane for `which` with the third-party CRDs `profile`: one kept from an earlier scenario, or a
    /// fresh one named for `scenario`.
    pub async fn plane(which: Which, scenario: &str, profile: &str) -> Option<ControlPlane> {
        // Numbered: a scenario run again must not start in the directory of a start still under way.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("diff-{n}-{scenario}-{}", which.to_string().to_lowercase());
        let profile = profile.to_string();
        tokio::task::spawn_blocking(move || {
            super::pool::take(which, &profile, || {
                ControlPlane::up_with(&name, SCENARIO_APIS)
            })
        })
        .await
        .expect("control plane start")
    }

    /// Stops the manager (and LWS's controller); returns the control plane, for [`super::pool::give`].
    pub fn stop(self) -> ControlPlane {
        let System {
            manager,
            lws,
            plane,
            ..
        } = self;
        drop(manager);
        drop(lws);
        plane
    }

    /// Starts the system on `plane` under the scenario's Configuration, with fake `nodes`; the CRDs of the `third`
    /// party kinds (with `crds`, their YAML) are installed (and Established) first, as both managers set up an
    /// integration only for a kind served when they start (Sluice looks again every 30 s, Kueue with a backoff), and
    /// those kinds are compared too.
    pub async fn start(
        which: Which,
        plane: ControlPlane,
        config: Option<&str>,
        nodes: Vec<FakeNode>,
        kueue_gates: &str,
        third: &[(&'static ThirdParty, Vec<String>)],
    ) -> System {
        let crds: Vec<&str> = third
            .iter()
            .flat_map(|(_, crds)| crds)
            .map(String::as_str)
            .collect();
        // A plane kept from a scenario with the same kinds has them.
        tokio::task::block_in_place(|| {
            apply_crds_once(&plane, "third-party-crds", &crds, crds.len())
        });
        let (manager, client) = match which {
            Which::Kueue => {
                let kueue =
                    tokio::task::block_in_place(|| Kueue::start(&plane, config, kueue_gates));
                let client = plane.client().await;
                let kubelet = FakeKubelet::start(client.clone(), nodes).await;
                (Manager::Kueue(kueue, kubelet), client)
            }
            Which::Sluice => {
                let installed = install(&plane, config, nodes).await;
                let client = installed.client.clone();
                (Manager::Sluice(Box::new(installed)), client)
            }
        };
        // After the manager, whose webhooks gate the pods LWS's StatefulSets make.
        let lws = if runs_lws(third) {
            let started = tokio::task::block_in_place(|| LwsController::start(&plane));
            Some(started.expect("LWS's controller is built (tests/lws/build)"))
        } else {
            None
        };
        System {
            which,
            manager,
            client,
            lws,
            extra: third
                .iter()
                .flat_map(|(t, _)| t.compared.iter().copied())
                .collect(),
            plane,
        }
    }

    /// The manager's log tail, for a failure message.
    pub fn log_tail(&self) -> String {
        match &self.manager {
            Manager::Kueue(k, _) => k.tail(),
            Manager::Sluice(s) => s.operator.process.tail(),
        }
    }

    /// Applies one step; returns what the API server answered when it refused something (one line per error,
    /// the admission webhook's name left out), empty when all went through.
    pub async fn step(&self, step: &Step) -> Vec<String> {
        let out = match step {
            Step::Apply { yaml, .. } => tokio::task::block_in_place(|| {
                self.plane
                    .kubectl_output(&["create", "-f", "-"], Some(yaml))
            }),
            Step::Delete(o) => {
                let mut args = vec!["delete", o.kind.as_str(), o.name.as_str(), "--wait=false"];
                if let Some(ns) = &o.namespace {
                    args.extend(["-n", ns.as_str()]);
                }
                let out = tokio::task::block_in_place(|| self.plane.kubectl_output(&args, None));
                if out.status.success() && super::sim::JOB_KINDS.contains(&o.kind.as_str()) {
                    // Both managers finish the orphaned Workload at once (reason OwnerNotFound), and garbage
                    // collection deletes it when it has caught up with the Workload resource (up to ~30 s after
                    // the CRD appeared), at a different moment on each control plane: compared once it is gone on
                    // both.
                    return self
                        .wait_workloads_gone(
                            &o.kind,
                            o.namespace.as_deref().unwrap_or("default"),
                            &o.name,
                        )
                        .await;
                }
                out
            }
            Step::Patch {
                object,
                patch,
                status,
            } => {
                let patch = patch.to_string();
                let mut args = vec![
                    "patch",
                    object.kind.as_str(),
                    object.name.as_str(),
                    "--type",
                    "merge",
                    "-p",
                    patch.as_str(),
                ];
                if *status {
                    args.extend(["--subresource", "status"]);
                }
                if let Some(ns) = &object.namespace {
                    args.extend(["-n", ns.as_str()]);
                }
                tokio::task::block_in_place(|| self.plane.kubectl_output(&args, None))
            }
            Step::Finish { namespace, job } => {
                return self.finish(namespace, job).await;
            }
            Step::Answer {
                namespace,
                job,
                check,
                state,
                requeue_after_seconds,
            } => {
                return self
                    .answer(namespace, job, check, state, *requeue_after_seconds)
                    .await;
            }
        };
        if out.status.success() {
            return Vec::new();
        }
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(normalise_error)
            .collect()
    }

    /// Waits until no Workload owned by the `kind` (Job, JobSet, RayJob, RayCluster, RayService) `ns/job` is left (at most 90 s); an error
    /// line when one stays.
    async fn wait_workloads_gone(&self, kind: &str, ns: &str, job: &str) -> Vec<String> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            ns,
            &resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
        );
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = match api.list(&ListParams::default()).await {
                Ok(l) => l.items.iter().any(|w| {
                    w.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.kind == kind && r.name == job)
                }),
                Err(e) => return vec![format!("listing Workloads: {e}")],
            };
            if !left {
                return Vec::new();
            }
            if Instant::now() > deadline {
                return vec![format!(
                    "the Workload of deleted {kind} {ns}/{job} is still there after 90 s"
                )];
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// What an admission check's controller writes: `check`'s state on the Workload of Job `ns/job`, its other
    /// checks as they are.
    async fn answer(
        &self,
        ns: &str,
        job: &str,
        check: &str,
        state: &str,
        requeue_after_seconds: Option<i32>,
    ) -> Vec<String> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            ns,
            &resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
        );
        let workloads = match api.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => return vec![format!("listing Workloads: {e}")],
        };
        let Some(w) = workloads.iter().find(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.kind == "Job" && r.name == job)
        }) else {
            return vec![format!("Job {ns}/{job} has no Workload")];
        };
        let mut checks = w.data["status"]["admissionChecks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(entry) = checks.iter_mut().find(|c| c["name"] == check) else {
            return vec![format!(
                "the Workload of Job {ns}/{job} does not list admission check {check}"
            )];
        };
        if entry["state"] != state {
            entry["lastTransitionTime"] = serde_json::json!(
                k8s_openapi::jiff::Timestamp::now()
                    .round(k8s_openapi::jiff::Unit::Second)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            );
        }
        entry["state"] = serde_json::json!(state);
        if let Some(r) = requeue_after_seconds {
            entry["requeueAfterSeconds"] = serde_json::json!(r);
        }
        let name = w.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({"status": {"admissionChecks": checks}});
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Vec::new(),
            Err(e) => vec![format!("answering for the Workload of Job {ns}/{job}: {e}")],
        }
    }

    /// The Job's running Pods succeed.
    async fn finish(&self, ns: &str, job: &str) -> Vec<String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let selector = format!("batch.kubernetes.io/job-name={job}");
        let pods = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(l) => l.items,
            Err(e) => return vec![format!("listing the Pods of Job {ns}/{job}: {e}")],
        };
        let running: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        if running.is_empty() {
            return vec![format!("Job {ns}/{job} has no running Pod to finish")];
        }
        let mut errors = Vec::new();
        for p in running {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            if let Err(e) = api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&succeeded(p)))
                .await
            {
                errors.push(format!("finishing Pod {ns}/{name}: {e}"));
            }
        }
        errors
    }

    /// Every object of the compared kinds (third-party kinds too where their CRDs are installed), as JSON.
    pub async fn objects(&self) -> Vec<(String, Value)> {
        if self.extra.is_empty() {
            self.list(KINDS).await
        } else {
            let mut kinds = KINDS.to_vec();
            kinds.extend(self.extra.iter().copied());
            self.list(&kinds).await
        }
    }

    /// Every object of these kinds (group, version, kind, plural), as (kind, JSON).
    pub async fn list(&self, kinds: &[(&str, &str, &str, &str)]) -> Vec<(String, Value)> {
        let mut all = Vec::new();
        for (group, version, kind, plural) in kinds {
            let api: Api<DynamicObject> =
                Api::all_with(self.client.clone(), &resource(group, version, kind, plural));
            let list = match api.list(&ListParams::default()).await {
                Ok(l) => l.items,
                Err(e) => panic!("{}: listing {plural}: {e}", self.which),
            };
            for o in list {
                all.push((
                    kind.to_string(),
                    serde_json::to_value(&o).expect("object as JSON"),
                ));
            }
        }
        all
    }

    /// Waits until no compared field of any object changed for `still`, at most `limit`; returns how long it
    /// took, or an error saying it never settled.
    pub async fn quiet(&self, still: Duration, limit: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let mut last: std::collections::BTreeMap<String, String> = Default::default();
        let mut changing: Vec<String> = Vec::new();
        let mut since = Instant::now();
        loop {
            let objects = self.objects().await;
            // What is compared, not resource versions: a manager that rewrites a status without changing what
            // it says is quiet.
            let mut now: std::collections::BTreeMap<String, String> =
                super::compare::state(&objects)
                    .into_iter()
                    .map(|(k, fields)| (k, format!("{fields:?}")))
                    .collect();
            // Garbage collection behind: a Workload still names an owner that is gone. kube-controller-manager
            // drops such a reference (or the Workload) only once it watches Workloads, up to ~30 s after their CRD
            // appeared, at a different moment on each control plane; not quiet until it has caught up.
            let listed: Vec<&str> = KINDS
                .iter()
                .chain(&self.extra)
                .map(|(_, _, kind, _)| *kind)
                .collect();
            let behind = dangling_owners(&objects, &listed);
            for (workload, owner) in &behind {
                now.insert(format!("{workload} {owner} {GC_BEHIND}"), String::new());
            }
            if now != last {
                changing = now
                    .iter()
                    .filter(|(k, v)| last.get(*k) != Some(*v))
                    .map(|(k, _)| k.clone())
                    .chain(last.keys().filter(|k| !now.contains_key(*k)).cloned())
                    .take(5)
                    .collect();
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= still && behind.is_empty() {
                return Ok(start.elapsed());
            }
            if start.elapsed() > limit {
                // What the first changing object says now, to tell a loop from slowness.
                let sample = changing
                    .first()
                    .and_then(|c| last.get(c))
                    .cloned()
                    .unwrap_or_default();
                return Err(format!(
                    "{} never went quiet for {} s within {} s (still changing: {}; the first now: {}; owners gone \
                     but still named: {:?})",
                    self.which,
                    still.as_secs(),
                    limit.as_secs(),
                    changing.join(", "),
                    sample,
                    behind
                ));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// What marks a state entry of an owner the garbage collector has yet to drop.
const GC_BEHIND: &str = "(garbage collection behind)";

/// Each Workload's owner reference (as "Workload ns/name", "Kind name") to an object of a listed kind (`kinds`,
/// whether or not any object of it is left) that is not listed: one the garbage collector has yet to drop.
fn dangling_owners(objects: &[(String, Value)], kinds: &[&str]) -> Vec<(String, String)> {
    let listed: std::collections::HashSet<&str> = objects
        .iter()
        .filter_map(|(_, o)| o["metadata"]["uid"].as_str())
        .collect();
    let mut dangling = Vec::new();
    for (kind, o) in objects.iter().filter(|(k, _)| k == "Workload") {
        for r in o["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (Some(owner), Some(uid)) = (r["kind"].as_str(), r["uid"].as_str()) else {
                continue;
            };
            if kinds.contains(&owner) && !listed.contains(uid) {
                dangling.push((
                    format!(
                        "{kind} {}/{}",
                        o["metadata"]["namespace"].as_str().unwrap_or_default(),
                        o["metadata"]["name"].as_str().unwrap_or_default()
                    ),
                    format!("{owner} {}", r["name"].as_str().unwrap_or_default()),
                ));
            }
        }
    }
    dangling
}

/// The error types of Kubernetes field errors (apimachinery's field.ErrorType strings).
const FIELD_ERRORS: &[&str] = &[
    "Invalid value",
    "Required value",
    "Unsupported value",
    "Forbidden",
    "Duplicate value",
    "Not found",
    "Too long",
    "Too many",
    "Internal error",
];

/// An API server error line as compared: a webhook's refusal by the field paths and error types it names (its
/// wording changed between Kueue releases without notice, docs/compatibility.md), without the webhook's own name
/// (Kueue's `vclusterqueue.kb.io`, Sluice's names), which is not behaviour; other errors whole.
fn normalise_error(line: &str) -> String {
    let line = line.trim();
    let (Some(a), Some(b)) = (
        line.find("admission webhook \""),
        line.find("\" denied the request"),
    ) else {
        return line.to_string();
    };
    if a > b {
        return line.to_string();
    }
    let prefix = &line[..a];
    let detail = &line[b + "\" denied the request".len()..];
    let mut fields = Vec::new();
    for kind in FIELD_ERRORS {
        let marker = format!(": {kind}");
        let mut from = 0;
        while let Some(at) = detail[from..].find(&marker) {
            let end = from + at;
            let start = detail[..end]
                .rfind([' ', '[', ','])
                .map(|p| p + 1)
                .unwrap_or(0);
            fields.push(format!("{}: {kind}", &detail[start..end]));
            from = end + marker.len();
        }
    }
    fields.sort();
    if fields.is_empty() {
        format!("{prefix}admission webhook denied the request{detail}")
    } else {
        format!(
            "{prefix}admission webhook denied the request: {}",
            fields.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::dangling_owners;

    #[test]
    fn an_owner_of_a_listed_kind_that_is_gone_is_dangling() {
        let workload = json!({"metadata": {"namespace": "team-a", "name": "trio", "uid": "w", "ownerReferences": [
            {"kind": "Pod", "name": "trio-0", "uid": "p0"},
            {"kind": "Pod", "name": "trio-1", "uid": "p1"},
            {"kind": "LeaderWorkerSet", "name": "lws", "uid": "l"},
        ]}});
        let pod = json!({"metadata": {"namespace": "team-a", "name": "trio-0", "uid": "p0"}});
        let objects = vec![("Workload".to_string(), workload), ("Pod".to_string(), pod)];
        // trio-1 is gone; LeaderWorkerSets are not listed, so theirs is not judged.
        let kinds = ["Workload", "Pod"];
        assert_eq!(
            dangling_owners(&objects, &kinds),
            vec![("Workload team-a/trio".to_string(), "Pod trio-1".to_string())]
        );
        // With every pod gone, both are.
        assert_eq!(dangling_owners(&objects[..1], &kinds).len(), 2);
        assert!(dangling_owners(&objects[..1], &["Workload"]).is_empty());
    }
}
