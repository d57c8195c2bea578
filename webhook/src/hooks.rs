//! Every admission hook the webhook serves, by path, and what each one decides for a request.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sluice_sdk::jobset::JobSet;
use sluice_sdk::kubeflow::PyTorchJob;
use sluice_sdk::kueue::decode::decode;
use sluice_sdk::kueue::defaults::{self, Gates, JobContext};
use sluice_sdk::kueue::integrations::Integrations;
use sluice_sdk::kueue::labels as l;
use sluice_sdk::kueue::validation::job::{
    validate_job, validate_job_metadata_update, validate_job_update, validate_pod_metadata,
};
use sluice_sdk::kueue::validation::jobset::{validate_jobset, validate_jobset_update};
use sluice_sdk::kueue::validation::kubeflow::{validate_pytorchjob, validate_pytorchjob_update};
use sluice_sdk::kueue::validation::lws::{validate_lws, validate_lws_update};
use sluice_sdk::kueue::validation::ray::{
    validate_raycluster, validate_raycluster_update, validate_rayjob, validate_rayjob_update,
    validate_rayservice, validate_rayservice_update,
};
use sluice_sdk::kueue::validation::trainer::{validate_trainjob, validate_trainjob_update};
use sluice_sdk::kueue::validation::{validate, validate_update};
use sluice_sdk::lws::LeaderWorkerSet;
use sluice_sdk::ray::{RayCluster, RayJob, RayService};
use sluice_sdk::trainer::TrainJob;

use crate::namespaces::{InMemoryNamespaces, NamespaceIndex};
use crate::policy::PolicyModuleValidator;
use crate::queues::LocalQueueIndex;
use crate::review::{self, AdmissionRequest, Operation, UnreviewableError, Verdict};
use crate::runtimes::{InMemoryTrainingRuntimes, TrainingRuntimeIndex};

/// One admission hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Kueue's Job defaulting (default LocalQueue, suspend).
    MutateJob,
    /// Kueue's Job label and annotation rules.
    ValidateJob,
    /// Kueue's JobSet defaulting (default LocalQueue, suspend).
    MutateJobSet,
    /// Kueue's JobSet label, annotation and topology rules.
    ValidateJobSet,
    /// Kueue's PyTorchJob defaulting (default LocalQueue, `spec.runPolicy.suspend`).
    MutatePyTorchJob,
    /// Kueue's PyTorchJob label, annotation and topology rules.
    ValidatePyTorchJob,
    /// Kueue's RayJob defaulting (default LocalQueue, `spec.suspend`).
    MutateRayJob,
    /// Kueue's RayJob rules (its own cluster, deleted after the job; labels, topology).
    ValidateRayJob,
    /// Kueue's RayCluster defaulting (default LocalQueue, `spec.suspend`).
    MutateRayCluster,
    /// Kueue's RayCluster rules (no autoscaling, worker groups; labels, topology).
    ValidateRayCluster,
    /// Kueue's RayService defaulting (default LocalQueue, `spec.rayClusterConfig.suspend`).
    MutateRayService,
    /// Kueue's RayService rules (its cluster's, as a RayCluster's; labels, topology).
    ValidateRayService,
    /// Kueue's TrainJob defaulting (default LocalQueue, suspend, its runtime patch).
    MutateTrainJob,
    /// Kueue's TrainJob validation (labels, and topology annotations of the pod sets its runtime gives).
    ValidateTrainJob,
    /// Kueue's LeaderWorkerSet defaulting (default LocalQueue; the templates annotated for the pod webhook).
    MutateLeaderWorkerSet,
    /// Kueue's LeaderWorkerSet rules (replicas, labels, topology; frozen pod shapes and size while managed).
    ValidateLeaderWorkerSet,
    /// Kueue's plain-pod defaulting (default LocalQueue, managed label, scheduling gates).
    MutatePod,
    /// Kueue's job-framework label rules on plain pods.
    ValidatePod,
    /// Kueue's defaulting of one of its kinds.
    MutateKueue(&'static str),
    /// Kueue's validation of one of its kinds.
    ValidateKueue(&'static str),
    /// Sluice's PolicyModule check.
    ValidatePolicyModule,
}

impl Hook {
    /// Whether this is a defaulting (mutating) hook.
    pub fn mutates(self) -> bool {
        matches!(
            self,
            Hook::MutateJob
                | Hook::MutateJobSet
                | Hook::MutatePyTorchJob
                | Hook::MutateRayJob
                | Hook::MutateRayCluster
                | Hook::MutateRayService
                | Hook::MutateTrainJob
                | Hook::MutateLeaderWorkerSet
                | Hook::MutatePod
                | Hook::MutateKueue(_)
        )
    }

    /// The Kueue framework (`integrations.frameworks`) whose webhook this is; None for Kueue's and Sluice's kinds.
    pub fn framework(self) -> Option<&'static str> {
        use sluice_sdk::kueue::integrations as f;
        Some(match self {
            Hook::MutateJob | Hook::ValidateJob => f::BATCH_JOB,
            Hook::MutateJobSet | Hook::ValidateJobSet => f::JOBSET,
            Hook::MutatePyTorchJob | Hook::ValidatePyTorchJob => f::PYTORCHJOB,
            Hook::MutateRayJob | Hook::ValidateRayJob => f::RAYJOB,
            Hook::MutateRayCluster | Hook::ValidateRayCluster => f::RAYCLUSTER,
            Hook::MutateRayService | Hook::ValidateRayService => f::RAYSERVICE,
            Hook::MutateTrainJob | Hook::ValidateTrainJob => f::TRAINJOB,
            Hook::MutateLeaderWorkerSet | Hook::ValidateLeaderWorkerSet => f::LEADERWORKERSET,
            Hook::MutatePod | Hook::ValidatePod => f::POD,
            Hook::MutateKueue(_) | Hook::ValidateKueue(_) | Hook::ValidatePolicyModule => {
                return None;
            }
        })
    }
}

/// The path of the CRD conversion webhook.
pub const CONVERT_PATH: &str = "/convert";

/// Every admission path with its hook: Kueue v0.19.2's paths, then Sluice's own (validation of the Kueue kinds that
/// Kueue checks only with CEL rules in its CRDs, and PolicyModule).
pub const ROUTES: &[(&str, Hook)] = &[
    ("/mutate-batch-v1-job", Hook::MutateJob),
    ("/validate-batch-v1-job", Hook::ValidateJob),
    (
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        Hook::MutateJobSet,
    ),
    (
        "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        Hook::ValidateJobSet,
    ),
    ("/mutate-kubeflow-org-v1-pytorchjob", Hook::MutatePyTorchJob),
    (
        "/validate-kubeflow-org-v1-pytorchjob",
        Hook::ValidatePyTorchJob,
    ),
    ("/mutate-ray-io-v1-rayjob", Hook::MutateRayJob),
    ("/validate-ray-io-v1-rayjob", Hook::ValidateRayJob),
    ("/mutate-ray-io-v1-raycluster", Hook::MutateRayCluster),
    ("/validate-ray-io-v1-raycluster", Hook::ValidateRayCluster),
    ("/mutate-ray-io-v1-rayservice", Hook::MutateRayService),
    ("/validate-ray-io-v1-rayservice", Hook::ValidateRayService),
    (
        "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        Hook::MutateTrainJob,
    ),
    (
        "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        Hook::ValidateTrainJob,
    ),
    (
        "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        Hook::MutateLeaderWorkerSet,
    ),
    (
        "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        Hook::ValidateLeaderWorkerSet,
    ),
    ("/mutate--v1-pod", Hook::MutatePod),
    ("/validate--v1-pod", Hook::ValidatePod),
    (
        "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        Hook::MutateKueue("ClusterQueue"),
    ),
    (
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        Hook::MutateKueue("ResourceFlavor"),
    ),
    (
        "/mutate-kueue-x-k8s-io-v1beta2-workload",
        Hook::MutateKueue("Workload"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        Hook::ValidateKueue("ClusterQueue"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-cohort",
        Hook::ValidateKueue("Cohort"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        Hook::ValidateKueue("ResourceFlavor"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        Hook::ValidateKueue("Workload"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-localqueue",
        Hook::ValidateKueue("LocalQueue"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-topology",
        Hook::ValidateKueue("Topology"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-workloadpriorityclass",
        Hook::ValidateKueue("WorkloadPriorityClass"),
    ),
    (
        "/validate-kueue-x-k8s-io-v1beta2-admissioncheck",
        Hook::ValidateKueue("AdmissionCheck"),
    ),
    (
        "/validate-sluice-dev-v1alpha1-policymodule",
        Hook::ValidatePolicyModule,
    ),
];

/// How the hooks behave (Kueue's Configuration, the parts the webhooks read).
#[derive(Clone, Debug)]
pub struct HookConfig {
    /// Namespaces left out besides those `namespace_selector` leaves out (by name).
    pub unmanaged_namespaces: Vec<String>,
    /// Kueue's `manageJobsWithoutQueueName`.
    pub manage_jobs_without_queue_name: bool,
    /// Kueue's feature gates that change defaulting.
    pub gates: Gates,
    /// Kueue's `managedJobsNamespaceSelector`, on the Namespace's labels.
    pub namespace_selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    /// The job integrations on (`integrations`): the hooks of the others let everything through unchanged, as
    /// Kueue's no-op webhooks for disabled frameworks do.
    pub integrations: Integrations,
}

impl Default for HookConfig {
    fn default() -> Self {
        Self {
            unmanaged_namespaces: Vec::new(),
            manage_jobs_without_queue_name: false,
            gates: Gates::default(),
            integrations: Integrations::default(),
            namespace_selector: sluice_sdk::kueue::namespaces::kueue_default("kueue-system"),
        }
    }
}

/// The hooks with what they consult.
#[derive(Clone)]
pub struct Hooks {
    /// Which LocalQueues exist.
    pub queues: Arc<dyn LocalQueueIndex>,
    /// Which Trainer runtimes exist (for TrainJobs).
    pub runtimes: Arc<dyn TrainingRuntimeIndex>,
    /// Namespaces' labels (for `managedJobsNamespaceSelector`).
    pub namespaces: Arc<dyn NamespaceIndex>,
    /// The PolicyModule check, when this build has one.
    pub policy: Option<Arc<dyn PolicyModuleValidator>>,
    /// Behaviour switches.
    pub config: HookConfig,
}

/// What to send back for one HTTP body.
#[derive(Debug)]
pub struct Answer {
    /// The AdmissionReview to return with HTTP 200.
    pub review: Value,
    /// The verdict inside it (for metrics and logs).
    pub verdict: Verdict,
}

impl Hooks {
    /// Hooks consulting `queues`, with Kueue's default configuration and no PolicyModule check.
    pub fn new(queues: Arc<dyn LocalQueueIndex>) -> Self {
        Self {
            queues,
            runtimes: Arc::new(InMemoryTrainingRuntimes::default()),
            namespaces: Arc::new(InMemoryNamespaces::default()),
            policy: None,
            config: HookConfig::default(),
        }
    }

    /// Decodes an AdmissionReview body and reviews it with `hook`; `Err` when there is no request to answer.
    pub fn answer(&self, hook: Hook, body: &[u8]) -> Result<Answer, UnreviewableError> {
        let (uid, verdict) = match review::decode(body)? {
            Ok(req) => {
                let verdict = self.review(hook, &req);
                (req.uid, verdict)
            }
            Err(bad) => (bad.uid, Verdict::bad_request(bad.message)),
        };
        Ok(Answer {
            review: verdict.to_review(&uid),
            verdict,
        })
    }

    /// Reviews one request.
    pub fn review(&self, hook: Hook, req: &AdmissionRequest) -> Verdict {
        if hook
            .framework()
            .is_some_and(|f| !self.config.integrations.enabled(f))
        {
            return Verdict::allow();
        }
        if hook.framework().is_some()
            && hook.mutates()
            && self.namespace_unknown(req.namespace())
            && self.reads_namespace(hook, req)
        {
            // Kueue's webhooks fail the request when they cannot read the Namespace; guessing would gate or not
            // gate, suspend or not, against the Configuration.
            return Verdict::deny(format!(
                "namespace {:?} is not known to the webhook yet (managedJobsNamespaceSelector reads its labels); \
                 try again",
                req.namespace()
            ));
        }
        match hook {
            Hook::MutateJob => self.mutate_job(req),
            Hook::ValidateJob => self.validate_job(req),
            Hook::MutateJobSet => {
                self.mutate_kind::<JobSet>(req, "JobSet", defaults::default_jobset)
            }
            Hook::ValidateJobSet => self.validate_jobset(req),
            Hook::MutatePyTorchJob => {
                self.mutate_kind::<PyTorchJob>(req, "PyTorchJob", defaults::default_kubeflow_job)
            }
            Hook::ValidatePyTorchJob => self.validate_pytorchjob(req),
            Hook::MutateRayJob => {
                self.mutate_kind::<RayJob>(req, "RayJob", defaults::default_ray_object)
            }
            Hook::ValidateRayJob => {
                let manage = self.config.manage_jobs_without_queue_name;
                self.validate_kind::<RayJob, _>(
                    req,
                    "RayJob",
                    |j| validate_rayjob(j, manage),
                    |old, new, dq| validate_rayjob_update(old, new, dq, manage),
                )
            }
            Hook::MutateRayCluster => {
                self.mutate_kind::<RayCluster>(req, "RayCluster", defaults::default_ray_object)
            }
            Hook::ValidateRayCluster => {
                let manage = self.config.manage_jobs_without_queue_name;
                self.validate_kind::<RayCluster, _>(
                    req,
                    "RayCluster",
                    |c| validate_raycluster(c, manage),
                    |old, new, dq| validate_raycluster_update(old, new, dq, manage),
                )
            }
            Hook::MutateRayService => {
                self.mutate_kind::<RayService>(req, "RayService", defaults::default_rayservice)
            }
            Hook::ValidateRayService => {
                let manage = self.config.manage_jobs_without_queue_name;
                self.validate_kind::<RayService, _>(
                    req,
                    "RayService",
                    |s| validate_rayservice(s, manage),
                    |old, new, dq| validate_rayservice_update(old, new, dq, manage),
                )
            }
            Hook::MutateTrainJob => {
                self.mutate_kind::<TrainJob>(req, "TrainJob", defaults::default_trainjob)
            }
            Hook::ValidateTrainJob => self.validate_kind::<TrainJob, _>(
                req,
                "TrainJob",
                |tj| validate_trainjob(&self.with_runtime(tj)),
                |old, new, default_queue| {
                    validate_trainjob_update(old, &self.with_runtime(new), default_queue)
                },
            ),
            Hook::MutateLeaderWorkerSet => self.mutate_lws(req),
            Hook::ValidateLeaderWorkerSet => {
                let ctx = self.job_context(req.namespace());
                self.validate_kind::<LeaderWorkerSet, _>(
                    req,
                    "LeaderWorkerSet",
                    validate_lws,
                    |old, new, _| {
                        let queued = new
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(l::QUEUE_NAME_LABEL))
                            .is_some_and(|q| !q.is_empty());
                        let managed =
                            queued || (ctx.manage_jobs_without_queue_name && ctx.namespace_managed);
                        validate_lws_update(old, new, managed)
                    },
                )
            }
            Hook::MutatePod => self.mutate_pod(req),
            Hook::ValidatePod => self.validate_pod(req),
            Hook::MutateKueue(kind) => self.mutate_kueue(kind, req),
            Hook::ValidateKueue(kind) => validate_kueue(kind, req),
            Hook::ValidatePolicyModule => self.validate_policy_module(req),
        }
    }

    /// Whether the selector needs the Namespace's labels and the watch, which sees every Namespace, has not seen
    /// this one yet.
    fn namespace_unknown(&self, namespace: &str) -> bool {
        self.namespaces.watched()
            && sluice_sdk::kueue::namespaces::reads_other_labels(&self.config.namespace_selector)
            && self.namespaces.labels(namespace).is_none()
    }

    /// Whether Kueue's hook reads the Namespace for this request: always for a pod its parent does not gate; for
    /// another kind only when it names no queue and could get one from the namespace (a `default` LocalQueue) or
    /// be managed without one.
    fn reads_namespace(&self, hook: Hook, req: &AdmissionRequest) -> bool {
        let Some(obj) = req.object.as_ref() else {
            return false;
        };
        if hook == Hook::MutatePod {
            return obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(defaults::POD_SUSPENDING_PARENT_ANNOTATION))
                .is_none();
        }
        defaults::queue_name(obj).is_empty()
            && (self
                .queues
                .exists(req.namespace(), l::DEFAULT_LOCAL_QUEUE_NAME)
                || self.config.manage_jobs_without_queue_name)
    }

    fn job_context(&self, namespace: &str) -> JobContext<'_> {
        JobContext {
            default_local_queue_exists: self.queues.exists(namespace, l::DEFAULT_LOCAL_QUEUE_NAME),
            namespace_managed: !self
                .config
                .unmanaged_namespaces
                .iter()
                .any(|n| n == namespace)
                && sluice_sdk::kueue::namespaces::selects_namespace(
                    &self.config.namespace_selector,
                    namespace,
                    self.namespaces.labels(namespace).as_ref(),
                ),
            manage_jobs_without_queue_name: self.config.manage_jobs_without_queue_name,
            integrations: &self.config.integrations,
        }
    }

    fn mutate_job(&self, req: &AdmissionRequest) -> Verdict {
        if req.operation != Operation::Create {
            return Verdict::allow();
        }
        let object = match typed::<Job>(req.object.as_ref(), "Job", "object") {
            Ok((raw, _)) => raw,
            Err(v) => return v,
        };
        let mut mutated = object.clone();
        defaults::default_job(
            &mut mutated,
            self.job_context(req.namespace()),
            self.config.gates,
        );
        Verdict::patched(object, &mutated)
    }

    fn validate_job(&self, req: &AdmissionRequest) -> Verdict {
        let (raw, new) = match req.operation {
            Operation::Create | Operation::Update => {
                match typed::<Job>(req.object.as_ref(), "Job", "object") {
                    Ok(pair) => pair,
                    Err(v) => return v,
                }
            }
            Operation::Delete | Operation::Connect => return Verdict::allow(),
        };
        let ns = req.namespace();
        let result = if req.operation == Operation::Update {
            let old = match typed::<Job>(req.old_object.as_ref(), "Job", "oldObject") {
                Ok((_, old)) => old,
                Err(v) => return v,
            };
            let default_queue = self.queues.exists(ns, l::DEFAULT_LOCAL_QUEUE_NAME);
            validate_job_update(&old, &new, default_queue)
        } else {
            validate_job(&new)
        };
        match result {
            Err(e) => Verdict::deny(e.to_string()),
            Ok(()) => {
                let mut v = Verdict::allow();
                if req.operation == Operation::Create {
                    v.warnings
                        .extend(self.missing_queue_warning(raw, ns, "Job"));
                }
                v
            }
        }
    }

    fn validate_jobset(&self, req: &AdmissionRequest) -> Verdict {
        self.validate_kind::<JobSet, _>(req, "JobSet", validate_jobset, validate_jobset_update)
    }

    fn validate_pytorchjob(&self, req: &AdmissionRequest) -> Verdict {
        self.validate_kind::<PyTorchJob, _>(
            req,
            "PyTorchJob",
            validate_pytorchjob,
            validate_pytorchjob_update,
        )
    }

    /// A job kind's defaulting on create (`default` is Kueue's defaulting for that kind), as a JSON patch.
    fn mutate_kind<T: DeserializeOwned>(
        &self,
        req: &AdmissionRequest,
        kind: &str,
        default: impl Fn(&mut Value, JobContext<'_>),
    ) -> Verdict {
        if req.operation != Operation::Create {
            return Verdict::allow();
        }
        let object = match typed::<T>(req.object.as_ref(), kind, "object") {
            Ok((raw, _)) => raw,
            Err(v) => return v,
        };
        let mut mutated = object.clone();
        default(&mut mutated, self.job_context(req.namespace()));
        Verdict::patched(object, &mutated)
    }

    /// The TrainJob with the runtime its reference names, as the runtime index holds it (or Kueue's error).
    fn with_runtime(&self, tj: &TrainJob) -> TrainJob {
        let resolved = tj.runtime_key().and_then(|key| {
            self.runtimes
                .get(&key)
                .ok_or_else(|| tj.runtime_not_found())
        });
        let mut out = tj.clone();
        out.runtime = Some(Arc::new(resolved));
        out
    }

    /// A job kind's validation on create and update (with a missing-queue warning on create).
    fn validate_kind<T: DeserializeOwned, E: std::fmt::Display>(
        &self,
        req: &AdmissionRequest,
        kind: &str,
        on_create: impl Fn(&T) -> Result<(), E>,
        on_update: impl Fn(&T, &T, bool) -> Result<(), E>,
    ) -> Verdict {
        let (raw, new) = match req.operation {
            Operation::Create | Operation::Update => {
                match typed::<T>(req.object.as_ref(), kind, "object") {
                    Ok(pair) => pair,
                    Err(v) => return v,
                }
            }
            Operation::Delete | Operation::Connect => return Verdict::allow(),
        };
        let ns = req.namespace();
        let result = if req.operation == Operation::Update {
            let old = match typed::<T>(req.old_object.as_ref(), kind, "oldObject") {
                Ok((_, old)) => old,
                Err(v) => return v,
            };
            let default_queue = self.queues.exists(ns, l::DEFAULT_LOCAL_QUEUE_NAME);
            on_update(&old, &new, default_queue)
        } else {
            on_create(&new)
        };
        match result {
            Err(e) => Verdict::deny(e.to_string()),
            Ok(()) => {
                let mut v = Verdict::allow();
                if req.operation == Operation::Create {
                    v.warnings.extend(self.missing_queue_warning(raw, ns, kind));
                }
                v
            }
        }
    }

    /// A warning when the object names a LocalQueue that does not exist (only once the index is synced): Kueue
    /// accepts such objects silently and they wait forever.
    fn missing_queue_warning(&self, obj: &Value, namespace: &str, kind: &str) -> Option<String> {
        let queue = defaults::queue_name(obj);
        (!queue.is_empty() && self.queues.synced() && !self.queues.exists(namespace, queue)).then(
            || {
                format!(
                    "LocalQueue {queue:?} does not exist in namespace {namespace:?}; the {kind} stays suspended until it does"
                )
            },
        )
    }

    /// Kueue defaults a LeaderWorkerSet on update too: templates changed while unmanaged get the annotations once
    /// it is managed.
    fn mutate_lws(&self, req: &AdmissionRequest) -> Verdict {
        if !matches!(req.operation, Operation::Create | Operation::Update) {
            return Verdict::allow();
        }
        let object =
            match typed::<LeaderWorkerSet>(req.object.as_ref(), "LeaderWorkerSet", "object") {
                Ok((raw, _)) => raw,
                Err(v) => return v,
            };
        let mut mutated = object.clone();
        defaults::default_lws(
            &mut mutated,
            self.job_context(req.namespace()),
            self.config.gates,
        );
        Verdict::patched(object, &mutated)
    }

    fn mutate_pod(&self, req: &AdmissionRequest) -> Verdict {
        if req.operation != Operation::Create {
            return Verdict::allow();
        }
        let object = match typed::<Pod>(req.object.as_ref(), "Pod", "object") {
            Ok((raw, _)) => raw,
            Err(v) => return v,
        };
        let mut mutated = object.clone();
        defaults::default_pod(
            &mut mutated,
            self.job_context(req.namespace()),
            self.config.gates,
        );
        Verdict::patched(object, &mutated)
    }

    fn validate_pod(&self, req: &AdmissionRequest) -> Verdict {
        let ns = req.namespace();
        let result = match req.operation {
            Operation::Create => match typed::<Pod>(req.object.as_ref(), "Pod", "object") {
                Ok((raw, pod)) => validate_pod_metadata(&pod.metadata).map(|()| {
                    self.missing_queue_warning(raw, ns, "Pod")
                        .into_iter()
                        .collect()
                }),
                Err(v) => return v,
            },
            Operation::Update => {
                let new = match typed::<Pod>(req.object.as_ref(), "Pod", "object") {
                    Ok((_, p)) => p,
                    Err(v) => return v,
                };
                let old = match typed::<Pod>(req.old_object.as_ref(), "Pod", "oldObject") {
                    Ok((_, p)) => p,
                    Err(v) => return v,
                };
                let default_queue = self.queues.exists(ns, l::DEFAULT_LOCAL_QUEUE_NAME);
                validate_job_metadata_update(
                    &old.metadata,
                    &new.metadata,
                    (pod_gated(&old), pod_gated(&new)),
                    default_queue,
                    "Pod",
                )
                .map(|()| Vec::new())
            }
            Operation::Delete | Operation::Connect => return Verdict::allow(),
        };
        match result {
            Ok(warnings) => Verdict {
                warnings,
                ..Verdict::allow()
            },
            Err(e) => Verdict::deny(e.to_string()),
        }
    }

    fn mutate_kueue(&self, kind: &str, req: &AdmissionRequest) -> Verdict {
        if req.operation != Operation::Create {
            return Verdict::allow();
        }
        let object = match kueue_object(kind, req.object.as_ref(), "object") {
            Ok(o) => o,
            Err(v) => return v,
        };
        let mut mutated = object.clone();
        defaults::default_kueue_object(&mut mutated, self.config.gates);
        Verdict::patched(object, &mutated)
    }

    fn validate_policy_module(&self, req: &AdmissionRequest) -> Verdict {
        if !matches!(req.operation, Operation::Create | Operation::Update) {
            return Verdict::allow();
        }
        let Some(object) = req.object.as_ref() else {
            return Verdict::bad_request("the request has no object");
        };
        if let Err(v) = check_kind(object, "PolicyModule") {
            return v;
        }
        let Some(policy) = &self.policy else {
            return Verdict::deny(
                "this webhook has no PolicyModule validator; PolicyModules cannot be admitted by it",
            );
        };
        match policy.validate(object, req.old_object.as_ref()) {
            Ok(warnings) => Verdict {
                warnings,
                ..Verdict::allow()
            },
            Err(message) => Verdict::deny(message),
        }
    }
}

/// Whether a pod still waits for Kueue's admission (Kueue's notion of a suspended pod).
fn pod_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == l::ADMISSION_SCHEDULING_GATE))
}

fn validate_kueue(kind: &str, req: &AdmissionRequest) -> Verdict {
    let verdict = match req.operation {
        Operation::Create => kueue_typed(kind, req.object.as_ref(), "object")
            .and_then(|o| validate(&o).map_err(|e| Verdict::deny(e.to_string()))),
        Operation::Update => {
            kueue_typed(kind, req.old_object.as_ref(), "oldObject").and_then(|old| {
                let new = kueue_typed(kind, req.object.as_ref(), "object")?;
                validate_update(&old, &new).map_err(|e| Verdict::deny(e.to_string()))
            })
        }
        Operation::Delete | Operation::Connect => Ok(()),
    };
    verdict.err().unwrap_or_else(Verdict::allow)
}

/// Checks that `object` is of `kind`.
fn check_kind(object: &Value, kind: &str) -> Result<(), Verdict> {
    let got = object.get("kind").and_then(Value::as_str);
    if got == Some(kind) {
        Ok(())
    } else {
        Err(Verdict::bad_request(format!(
            "this webhook reviews {kind} objects, not {}",
            got.map_or_else(|| "objects without a kind".to_owned(), |k| format!("{k:?}"))
        )))
    }
}

fn kueue_object<'a>(
    kind: &str,
    object: Option<&'a Value>,
    which: &str,
) -> Result<&'a Value, Verdict> {
    let object =
        object.ok_or_else(|| Verdict::bad_request(format!("the request has no {which}")))?;
    check_kind(object, kind)?;
    Ok(object)
}

fn kueue_typed(
    kind: &str,
    object: Option<&Value>,
    which: &str,
) -> Result<sluice_sdk::kueue::decode::KueueObject, Verdict> {
    let object = kueue_object(kind, object, which)?;
    decode(object.clone()).map_err(|e| Verdict::bad_request(format!("{which}: {e}")))
}

/// The raw and the typed object of the expected kind, or the verdict refusing the request.
fn typed<'a, T: DeserializeOwned>(
    object: Option<&'a Value>,
    kind: &str,
    which: &str,
) -> Result<(&'a Value, T), Verdict> {
    let object =
        object.ok_or_else(|| Verdict::bad_request(format!("the request has no {which}")))?;
    check_kind(object, kind)?;
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let typed = serde_path_to_error::deserialize(object).map_err(|e| {
        Verdict::bad_request(format!(
            "cannot decode {kind} {name:?} ({which}): {}: {}",
            e.path(),
            e.inner()
        ))
    })?;
    Ok((object, typed))
}
