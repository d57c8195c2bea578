//! Turning manifest documents into the typed objects of a simulated cluster, with every reference checked.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, Node};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::de::DeserializeOwned;
use sluice_sdk::jobset::{self, JobSet};
use sluice_sdk::kubeflow::{self, PyTorchJob};
use sluice_sdk::kueue::decode::{
    DecodeError, KueueObject, StrictError, decode_strict, deserialize_strict,
};
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::kueue::validation::jobset::validate_jobset;
use sluice_sdk::kueue::validation::kubeflow::validate_pytorchjob;
use sluice_sdk::kueue::validation::lws::validate_lws;
use sluice_sdk::kueue::validation::ray::{
    validate_raycluster, validate_rayjob, validate_rayservice,
};
use sluice_sdk::kueue::validation::trainer::validate_trainjob;
use sluice_sdk::kueue::validation::validate;
use sluice_sdk::lws::{self, LeaderWorkerSet};
use sluice_sdk::ray::{self, RayCluster, RayJob, RayService};
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;
use sluice_sdk::trainer::{self, ClusterTrainingRuntime, RuntimeKey, TrainJob, TrainingRuntime};

use super::job::{JobKey, SimJob};
use crate::jobs::LwsGroup;
use crate::manifest::{Document, Origin};

/// A document the simulator cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {object}: {message}")]
pub struct LoadError {
    /// Where the document came from.
    pub origin: String,
    /// "Kind name" of the object.
    pub object: String,
    /// What is wrong, naming the field.
    pub message: String,
}

impl LoadError {
    fn new(origin: &Origin, object: impl Into<String>, message: impl Into<String>) -> Self {
        LoadError {
            origin: origin.to_string(),
            object: object.into(),
            message: message.into(),
        }
    }
}

/// An object and the document it came from.
#[derive(Clone, Debug)]
pub struct Loaded<T> {
    /// Where it came from.
    pub origin: Origin,
    /// The object.
    pub object: T,
}

/// Namespace/name of a namespaced object.
pub type NsName = (String, String);

/// Every object of a simulated cluster, by kind.
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    /// ResourceFlavors by name.
    pub flavors: BTreeMap<String, Loaded<api::ResourceFlavor>>,
    /// ClusterQueues by name.
    pub cluster_queues: BTreeMap<String, Loaded<api::ClusterQueue>>,
    /// Cohorts by name.
    pub cohorts: BTreeMap<String, Loaded<api::Cohort>>,
    /// LocalQueues by namespace/name.
    pub local_queues: BTreeMap<NsName, Loaded<api::LocalQueue>>,
    /// Workloads by namespace/name, in document order of arrival.
    pub workloads: BTreeMap<NsName, Loaded<api::Workload>>,
    /// WorkloadPriorityClasses by name.
    pub workload_priority_classes: BTreeMap<String, Loaded<api::WorkloadPriorityClass>>,
    /// Topologies by name.
    pub topologies: BTreeMap<String, Loaded<api::Topology>>,
    /// AdmissionChecks by name.
    pub admission_checks: BTreeMap<String, Loaded<api::AdmissionCheck>>,
    /// Namespaces by name.
    pub namespaces: BTreeMap<String, Loaded<Namespace>>,
    /// Nodes by name.
    pub nodes: BTreeMap<String, Loaded<Node>>,
    /// LimitRanges by namespace/name.
    pub limit_ranges: BTreeMap<NsName, Loaded<LimitRange>>,
    /// RuntimeClasses by name.
    pub runtime_classes: BTreeMap<String, Loaded<RuntimeClass>>,
    /// Node agents' reports (sluice.dev NodeGpuTopology) by name.
    pub node_gpu_topologies: BTreeMap<String, Loaded<NodeGpuTopology>>,
    /// PriorityClasses by name.
    pub priority_classes: BTreeMap<String, Loaded<PriorityClass>>,
    /// Kubeflow Trainer TrainingRuntimes by namespace and name.
    pub training_runtimes: BTreeMap<NsName, Loaded<TrainingRuntime>>,
    /// Kubeflow Trainer ClusterTrainingRuntimes by name.
    pub cluster_training_runtimes: BTreeMap<String, Loaded<ClusterTrainingRuntime>>,
    /// Jobs of every kind (batch/v1 Jobs, JobSets, PyTorchJobs, RayJobs, RayClusters, RayServices, TrainJobs) by kind,
    /// namespace and name.
    pub jobs: BTreeMap<JobKey, Loaded<SimJob>>,
    /// Document order of Workloads and jobs ("Workload" or the job's kind, namespace, name), for FIFO tie-breaks.
    pub submission_order: Vec<(&'static str, String, String)>,
}

/// Decodes a document as `T`, refusing fields that `T` (Kubernetes 1.36's schema of the kind) does not have,
/// as `kubectl apply` does.
fn typed<T: DeserializeOwned>(doc: &Document) -> Result<T, LoadError> {
    deserialize_strict(doc.value.clone()).map_err(|e| strict_error(doc, e))
}

fn strict_error(doc: &Document, e: StrictError) -> LoadError {
    LoadError::new(&doc.origin, doc.describe(), e.to_string())
}

/// A NodeGpuTopology: its spec flattens the GPU report into itself, which hides that part's unknown fields
/// from the strict decode of the whole object, so that part is checked on its own.
fn node_gpu_topology(doc: &Document) -> Result<NodeGpuTopology, LoadError> {
    let object: NodeGpuTopology = typed(doc)?;
    if let Some(serde_json::Value::Object(spec)) = doc.value.get("spec") {
        let mut gpus = spec.clone();
        gpus.remove("nodeName");
        // Paths in the flattened part are relative to `spec`.
        let in_spec = |path: String| format!("spec.{path}");
        deserialize_strict::<sluice_sdk::topology::NodeGpus>(serde_json::Value::Object(gpus))
            .map_err(|e| {
                strict_error(
                    doc,
                    match e {
                        StrictError::Invalid { path, message } => StrictError::Invalid {
                            path: in_spec(path),
                            message,
                        },
                        StrictError::UnknownFields { fields } => StrictError::UnknownFields {
                            fields: fields.into_iter().map(in_spec).collect(),
                        },
                    },
                )
            })?;
    }
    Ok(object)
}

fn insert<K: Ord + std::fmt::Debug, T>(
    map: &mut BTreeMap<K, Loaded<T>>,
    key: K,
    origin: &Origin,
    what: String,
    object: T,
) -> Result<(), LoadError> {
    if let Some(prev) = map.get(&key) {
        return Err(LoadError::new(
            origin,
            what,
            format!("defined twice (first in {})", prev.origin),
        ));
    }
    map.insert(
        key,
        Loaded {
            origin: origin.clone(),
            object,
        },
    );
    Ok(())
}

fn required_name(doc: &Document) -> Result<String, LoadError> {
    doc.name()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            LoadError::new(
                &doc.origin,
                doc.describe(),
                "field `metadata.name` is required",
            )
        })
}

impl ClusterObjects {
    /// Sorts documents into kinds. Unknown kinds, bad fields and duplicates are errors naming the document.
    pub fn from_documents(docs: &[Document]) -> Result<Self, LoadError> {
        let mut out = ClusterObjects::default();
        for doc in docs {
            out.add(doc)?;
        }
        out.default_job_queues();
        out.resolve_trainjob_runtimes()?;
        out.refuse_prebuilt_workloads()?;
        out.check_references()?;
        Ok(out)
    }

    fn add(&mut self, doc: &Document) -> Result<(), LoadError> {
        let name = required_name(doc)?;
        let what = doc.describe();
        let ns = || doc.namespace().unwrap_or("default").to_string();
        let api_version = doc.api_version().unwrap_or_default();
        if api_version.starts_with("kueue.x-k8s.io/") {
            let obj = decode_strict(doc.value.clone()).map_err(|e| match e {
                // The document and object are named already.
                DecodeError::Unknown { error, .. } => {
                    LoadError::new(&doc.origin, &what, error.to_string())
                }
                e => LoadError::new(&doc.origin, &what, e.to_string()),
            })?;
            // Kinds the engine does not take are validated here; the others when they are ingested.
            if matches!(
                obj,
                KueueObject::WorkloadPriorityClass(_)
                    | KueueObject::Topology(_)
                    | KueueObject::AdmissionCheck(_)
            ) {
                validate(&obj).map_err(|e| LoadError::new(&doc.origin, &what, e.to_string()))?;
            }
            let o = &doc.origin;
            return match obj {
                KueueObject::ResourceFlavor(x) => insert(&mut self.flavors, name, o, what, x),
                KueueObject::ClusterQueue(x) => insert(&mut self.cluster_queues, name, o, what, x),
                KueueObject::Cohort(x) => insert(&mut self.cohorts, name, o, what, x),
                KueueObject::LocalQueue(mut x) => {
                    x.metadata.namespace = Some(ns());
                    insert(&mut self.local_queues, (ns(), name), o, what, x)
                }
                KueueObject::Workload(mut x) => {
                    x.metadata.namespace = Some(ns());
                    self.submission_order.push(("Workload", ns(), name.clone()));
                    insert(&mut self.workloads, (ns(), name), o, what, x)
                }
                KueueObject::WorkloadPriorityClass(x) => {
                    insert(&mut self.workload_priority_classes, name, o, what, x)
                }
                KueueObject::Topology(x) => insert(&mut self.topologies, name, o, what, x),
                KueueObject::AdmissionCheck(x) => {
                    insert(&mut self.admission_checks, name, o, what, x)
                }
            };
        }
        let o = &doc.origin;
        match (api_version, doc.kind().unwrap_or_default()) {
            ("v1", "Namespace") => insert(&mut self.namespaces, name, o, what, typed(doc)?),
            ("v1", "Node") => insert(&mut self.nodes, name, o, what, typed(doc)?),
            ("v1", "LimitRange") => {
                let mut lr: LimitRange = typed(doc)?;
                lr.metadata.namespace = Some(ns());
                insert(&mut self.limit_ranges, (ns(), name), o, what, lr)
            }
            ("node.k8s.io/v1", "RuntimeClass") => {
                insert(&mut self.runtime_classes, name, o, what, typed(doc)?)
            }
            // What a job's manifest often carries beside it (its code, credentials, endpoints) decides nothing
            // about admission: skipped, as Kueue never reads it.
            ("v1", "ConfigMap" | "Secret" | "Service" | "ServiceAccount") => {
                tracing::info!(object = %what, "skipped: the simulator does not read this kind");
                Ok(())
            }
            ("sluice.dev/v1alpha1", "NodeGpuTopology") => insert(
                &mut self.node_gpu_topologies,
                name,
                o,
                what,
                node_gpu_topology(doc)?,
            ),
            ("scheduling.k8s.io/v1", "PriorityClass") => {
                insert(&mut self.priority_classes, name, o, what, typed(doc)?)
            }
            ("batch/v1", "Job") => {
                let mut job: Job = typed(doc)?;
                job.metadata.namespace = Some(ns());
                self.submission_order.push(("Job", ns(), name.clone()));
                let key = ("Job", ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::Batch(job))
            }
            (jobset::API_VERSION, jobset::KIND) => {
                let mut js: JobSet = typed(doc)?;
                js.metadata.namespace = Some(ns());
                // The same rules as the webhook's.
                validate_jobset(&js).map_err(|e| LoadError::new(o, &what, e.to_string()))?;
                self.submission_order
                    .push((jobset::KIND, ns(), name.clone()));
                let key = (jobset::KIND, ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::JobSet(js))
            }
            (kubeflow::API_VERSION, kubeflow::PYTORCH_JOB_KIND) => {
                let mut job: PyTorchJob = typed(doc)?;
                job.metadata.namespace = Some(ns());
                validate_pytorchjob(&job).map_err(|e| LoadError::new(o, &what, e.to_string()))?;
                self.submission_order
                    .push((kubeflow::PYTORCH_JOB_KIND, ns(), name.clone()));
                let key = (kubeflow::PYTORCH_JOB_KIND, ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::PyTorchJob(job))
            }
            (ray::API_VERSION, ray::RAY_JOB_KIND) => {
                let mut job: RayJob = typed(doc)?;
                job.metadata.namespace = Some(ns());
                validate_rayjob(&job, false)
                    .map_err(|e| LoadError::new(o, &what, e.to_string()))?;
                if job.uses_cluster_selector() {
                    return Err(LoadError::new(
                        o,
                        what,
                        "spec.clusterSelector: a RayJob on an existing cluster holds no quota of its own; the \
                         simulator runs only RayJobs with a rayClusterSpec",
                    ));
                }
                self.submission_order
                    .push((ray::RAY_JOB_KIND, ns(), name.clone()));
                let key = (ray::RAY_JOB_KIND, ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::RayJob(job))
            }
            (ray::API_VERSION, ray::RAY_CLUSTER_KIND) => {
                let mut cluster: RayCluster = typed(doc)?;
                cluster.metadata.namespace = Some(ns());
                validate_raycluster(&cluster, false)
                    .map_err(|e| LoadError::new(o, &what, e.to_string()))?;
                self.submission_order
                    .push((ray::RAY_CLUSTER_KIND, ns(), name.clone()));
                let key = (ray::RAY_CLUSTER_KIND, ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::RayCluster(cluster))
            }
            (ray::API_VERSION, ray::RAY_SERVICE_KIND) => {
                let mut service: RayService = typed(doc)?;
                service.metadata.namespace = Some(ns());
                validate_rayservice(&service, false)
                    .map_err(|e| LoadError::new(o, &what, e.to_string()))?;
                self.submission_order
                    .push((ray::RAY_SERVICE_KIND, ns(), name.clone()));
                let key = (ray::RAY_SERVICE_KIND, ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::RayService(service))
            }
            (lws::API_VERSION, lws::KIND) => {
                // As Kueue's webhook: the templates annotated for the pod webhook (the pod sets carry them).
                let mut value = doc.value.clone();
                sluice_sdk::kueue::defaults::default_lws(
                    &mut value,
                    sluice_sdk::kueue::defaults::JobContext {
                        default_local_queue_exists: false,
                        namespace_managed: true,
                        ..Default::default()
                    },
                    sluice_sdk::kueue::defaults::Gates::default(),
                );
                let mut set: LeaderWorkerSet =
                    deserialize_strict(value).map_err(|e| strict_error(doc, e))?;
                set.metadata.namespace = Some(ns());
                validate_lws(&set).map_err(|e| LoadError::new(o, &what, e.to_string()))?;
                if set.metadata.uid.is_none() {
                    // Each group's Workload name hashes the set's uid; a loaded set gets a stable, UUID-shaped one
                    // (preemption messages name the set by it, as the API server's would).
                    set.metadata.uid = Some(super::synthetic_uid(lws::KIND, &ns(), &name));
                }
                for group in LwsGroup::of(&set) {
                    let gname = group.metadata.name.clone().unwrap_or_default();
                    self.submission_order.push((lws::KIND, ns(), gname.clone()));
                    let key = (lws::KIND, ns(), gname);
                    insert(
                        &mut self.jobs,
                        key,
                        o,
                        what.clone(),
                        SimJob::LwsGroup(group),
                    )?;
                }
                Ok(())
            }
            (trainer::API_VERSION, trainer::TRAINING_RUNTIME_KIND) => {
                let mut rt: TrainingRuntime = typed(doc)?;
                rt.metadata.namespace = Some(ns());
                insert(&mut self.training_runtimes, (ns(), name), o, what, rt)
            }
            (trainer::API_VERSION, trainer::CLUSTER_TRAINING_RUNTIME_KIND) => insert(
                &mut self.cluster_training_runtimes,
                name,
                o,
                what,
                typed(doc)?,
            ),
            (trainer::API_VERSION, trainer::TRAIN_JOB_KIND) => {
                // As Kueue's webhook: its runtime patch is added on creation (its runtime is read once all
                // documents are in).
                let mut value = doc.value.clone();
                sluice_sdk::kueue::defaults::default_trainjob(
                    &mut value,
                    sluice_sdk::kueue::defaults::JobContext {
                        default_local_queue_exists: false,
                        namespace_managed: true,
                        ..Default::default()
                    },
                );
                let mut job: TrainJob =
                    deserialize_strict(value).map_err(|e| strict_error(doc, e))?;
                job.metadata.namespace = Some(ns());
                self.submission_order
                    .push((trainer::TRAIN_JOB_KIND, ns(), name.clone()));
                let key = (trainer::TRAIN_JOB_KIND, ns(), name);
                insert(&mut self.jobs, key, o, what, SimJob::TrainJob(job))
            }
            (v, k) => Err(LoadError::new(
                o,
                what,
                format!(
                    "unsupported kind {k:?} in {v:?}: the simulator reads Kueue's kinds (kueue.x-k8s.io/v1beta2 or \
                     v1beta1), v1 Namespace, Node and LimitRange, node.k8s.io/v1 RuntimeClass, scheduling.k8s.io/v1 PriorityClass, batch/v1 Job, jobset.x-k8s.io/v1alpha2 \
                     JobSet, kubeflow.org/v1 PyTorchJob, ray.io/v1 RayJob, RayCluster and RayService, trainer.kubeflow.org/v1alpha1 \
                     TrainJob, TrainingRuntime and ClusterTrainingRuntime, leaderworkerset.x-k8s.io/v1 LeaderWorkerSet, and sluice.dev/v1alpha1 NodeGpuTopology"
                ),
            )),
        }
    }

    /// A job naming a prebuilt Workload is refused: the simulator builds every job's Workload itself.
    fn refuse_prebuilt_workloads(&self) -> Result<(), LoadError> {
        for ((kind, ns, name), loaded) in &self.jobs {
            if let Some(prebuilt) = crate::jobs::prebuilt_workload_name(loaded.object.metadata()) {
                return Err(LoadError::new(
                    &loaded.origin,
                    format!("{kind} {ns}/{name}"),
                    format!(
                        "kueue.x-k8s.io/prebuilt-workload-name: {prebuilt:?}: a prebuilt Workload is not simulated \
                         yet (the simulator builds each job's Workload itself)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Gives each TrainJob the runtime it names and checks it as the webhook does; a missing runtime is Kueue's
    /// error, on the TrainJob.
    fn resolve_trainjob_runtimes(&mut self) -> Result<(), LoadError> {
        for loaded in self.jobs.values_mut() {
            let SimJob::TrainJob(tj) = &mut loaded.object else {
                continue;
            };
            let what = format!(
                "{} {}/{}",
                trainer::TRAIN_JOB_KIND,
                tj.metadata.namespace.as_deref().unwrap_or_default(),
                tj.metadata.name.as_deref().unwrap_or_default()
            );
            let resolved = tj.runtime_key().and_then(|key| {
                let spec = match &key {
                    RuntimeKey::Namespaced(ns, n) => self
                        .training_runtimes
                        .get(&(ns.clone(), n.clone()))
                        .map(|r| r.object.spec.clone()),
                    RuntimeKey::Cluster(n) => self
                        .cluster_training_runtimes
                        .get(n)
                        .map(|r| r.object.spec.clone()),
                };
                spec.ok_or_else(|| tj.runtime_not_found())
            });
            tj.runtime = Some(std::sync::Arc::new(resolved));
            validate_trainjob(tj)
                .map_err(|e| LoadError::new(&loaded.origin, &what, e.to_string()))?;
        }
        Ok(())
    }

    /// As Kueue's Job webhook does: a Job without `kueue.x-k8s.io/queue-name` goes to the LocalQueue named
    /// `default` of its namespace, when there is one.
    fn default_job_queues(&mut self) {
        use sluice_sdk::kueue::labels::{DEFAULT_LOCAL_QUEUE_NAME, QUEUE_NAME_LABEL};
        for ((_, ns, _), job) in self.jobs.iter_mut() {
            let labels = job
                .object
                .metadata_mut()
                .labels
                .get_or_insert_with(Default::default);
            let default_lq = (ns.clone(), DEFAULT_LOCAL_QUEUE_NAME.to_string());
            if !labels.contains_key(QUEUE_NAME_LABEL) && self.local_queues.contains_key(&default_lq)
            {
                labels.insert(
                    QUEUE_NAME_LABEL.to_string(),
                    DEFAULT_LOCAL_QUEUE_NAME.to_string(),
                );
            }
        }
    }

    /// Every reference must resolve: ClusterQueue -> AdmissionChecks, priority class labels -> classes. A missing
    /// ResourceFlavor of a ClusterQueue, ClusterQueue of a LocalQueue, or LocalQueue of a workload, only warns
    /// (Kueue accepts them and waits); Cohorts may be implicit, as in Kueue.
    fn check_references(&self) -> Result<(), LoadError> {
        use sluice_sdk::kueue::labels::{PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL};
        // Kueue accepts a LocalQueue whose ClusterQueue does not exist (Active=False, ClusterQueueDoesNotExist;
        // its workloads wait); the simulator does the same and says so.
        for ((ns, name), lq) in &self.local_queues {
            let cq = &lq.object.spec.cluster_queue;
            if !self.cluster_queues.contains_key(cq) {
                tracing::warn!(
                    "{}: LocalQueue {ns}/{name}: field `spec.clusterQueue`: ClusterQueue {cq:?} is not defined; \
                     its workloads stay pending, as in Kueue",
                    lq.origin
                );
            }
        }
        for (name, cq) in &self.cluster_queues {
            let rules = cq
                .object
                .spec
                .admission_checks_strategy
                .iter()
                .flat_map(|s| s.admission_checks.iter());
            for (i, rule) in rules.enumerate() {
                if !self.admission_checks.contains_key(&rule.name) {
                    return Err(LoadError::new(
                        &cq.origin,
                        format!("ClusterQueue {name}"),
                        format!(
                            "field `spec.admissionChecksStrategy.admissionChecks[{i}].name`: AdmissionCheck {:?} \
                             is not defined (Kueue keeps such a ClusterQueue inactive)",
                            rule.name
                        ),
                    ));
                }
            }
            for (g, rg) in cq.object.spec.resource_groups.iter().enumerate() {
                for (f, fq) in rg.flavors.iter().enumerate() {
                    // Kueue keeps such a ClusterQueue inactive (FlavorNotFound) until the flavor appears; the
                    // simulator does the same and says so.
                    if !self.flavors.contains_key(&fq.name) {
                        tracing::warn!(
                            "{}: ClusterQueue {name}: field `spec.resourceGroups[{g}].flavors[{f}].name`: \
                             ResourceFlavor {:?} is not defined; the ClusterQueue stays inactive, as in Kueue",
                            cq.origin,
                            fq.name
                        );
                    }
                }
            }
        }
        // Kueue accepts a workload whose LocalQueue does not exist: it stays pending (QuotaReserved=False,
        // Inadmissible, "LocalQueue NAME doesn't exist") until the queue appears. The simulator does the same and
        // says so, since in a manifest set it is most likely a typo.
        let warn_missing_queue = |origin: &Origin,
                                  what: String,
                                  ns: &str,
                                  queue: &str,
                                  field: &str| {
            if !self
                .local_queues
                .contains_key(&(ns.to_string(), queue.to_string()))
            {
                tracing::warn!(
                    "{origin}: {what}: field `{field}`: LocalQueue {queue:?} is not defined in namespace {ns:?}; \
                     it stays pending, as in Kueue"
                );
            }
        };
        for ((ns, name), wl) in &self.workloads {
            let what = || format!("Workload {ns}/{name}");
            if let Some(a) = wl.object.status.as_ref().and_then(|s| s.admission.as_ref())
                && !self.cluster_queues.contains_key(&a.cluster_queue)
            {
                return Err(LoadError::new(
                    &wl.origin,
                    what(),
                    format!(
                        "field `status.admission.clusterQueue`: ClusterQueue {:?} is not defined",
                        a.cluster_queue
                    ),
                ));
            }
            if let Some(r) = &wl.object.spec.priority_class_ref {
                use sluice_sdk::kueue::v1beta2::PriorityClassKind;
                let known = match r.kind {
                    Some(PriorityClassKind::PriorityClass) => {
                        self.priority_classes.contains_key(&r.name)
                    }
                    _ => self.workload_priority_classes.contains_key(&r.name),
                };
                if !known {
                    return Err(LoadError::new(
                        &wl.origin,
                        what(),
                        format!(
                            "field `spec.priorityClassRef`: {} {:?} is not defined",
                            match r.kind {
                                Some(PriorityClassKind::PriorityClass) => "PriorityClass",
                                _ => "WorkloadPriorityClass",
                            },
                            r.name
                        ),
                    ));
                }
            }
            warn_missing_queue(
                &wl.origin,
                format!("Workload {ns}/{name}"),
                ns,
                &wl.object.spec.queue_name,
                "spec.queueName",
            );
        }
        for ((kind, ns, name), job) in &self.jobs {
            let what = format!("{kind} {ns}/{name}");
            let labels = job.object.metadata().labels.clone().unwrap_or_default();
            let Some(queue) = labels.get(QUEUE_NAME_LABEL) else {
                return Err(LoadError::new(
                    &job.origin,
                    what,
                    format!(
                        "label `{QUEUE_NAME_LABEL}` is required (Sluice queues only labelled Jobs)"
                    ),
                ));
            };
            warn_missing_queue(
                &job.origin,
                what.clone(),
                ns,
                queue,
                &format!("metadata.labels[{QUEUE_NAME_LABEL}]"),
            );
            if let Some(class) = labels.get(PRIORITY_CLASS_LABEL)
                && !self.workload_priority_classes.contains_key(class)
            {
                return Err(LoadError::new(
                    &job.origin,
                    what,
                    format!(
                        "label `{PRIORITY_CLASS_LABEL}`: WorkloadPriorityClass {class:?} is not defined"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{parse_documents, read_path};

    fn load_one(file: &str, text: &str) -> Result<(), LoadError> {
        for doc in parse_documents(file, text).map_err(|e| LoadError {
            origin: file.into(),
            object: String::new(),
            message: e.to_string(),
        })? {
            ClusterObjects::default().add(&doc)?;
        }
        Ok(())
    }

    #[test]
    fn unknown_fields_are_refused_naming_document_object_and_field() {
        let cq = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n\
                  apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n\
                  spec:\n  resourceGroupz: []\n";
        let e = load_one("cq.yaml", cq).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                r#"cq.yaml (document 2): ClusterQueue cq: strict decoding error: unknown field "spec.resourceGroupz""#
            )
        );

        let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec:\n  template:\n    \
                   spec:\n      nodeSelectorr: {a: b}\n      containers: [{name: c, image: i, resourcez: {}}]\n";
        let e = load_one("job.yaml", job).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                r#"job.yaml (document 1): Job ns/j: strict decoding error: unknown field "spec.template.spec.containers[0].resourcez", unknown field "spec.template.spec.nodeSelectorr""#
            )
        );

        let node =
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n  capacityy: {cpu: '8'}\n";
        let e = load_one("nodes.yaml", node).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                r#"nodes.yaml (document 1): Node n1: strict decoding error: unknown field "status.capacityy""#
            )
        );

        // The flattened GPU report of a NodeGpuTopology is checked too, with its path under `spec`.
        let ngt = "apiVersion: sluice.dev/v1alpha1\nkind: NodeGpuTopology\nmetadata: {name: n1}\n\
                   spec:\n  nodeName: n1\n  gpus: [{index: 0, uuid: u, model: m, memoryMib: 1, healthy: true}]\n";
        let e = load_one("ngt.yaml", ngt).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                r#"ngt.yaml (document 1): NodeGpuTopology n1: strict decoding error: unknown field "spec.gpus[0].healthy""#
            )
        );
        let ngt_top = "apiVersion: sluice.dev/v1alpha1\nkind: NodeGpuTopology\nmetadata: {name: n1}\n\
                       spec: {nodeName: n1}\nstatuss: {}\n";
        let e = load_one("ngt.yaml", ngt_top).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.ends_with(r#"unknown field "statuss""#)),
            "{e:?}"
        );
    }

    /// Every manifest the repository ships or tests with is what `kubectl apply` would take: no unknown
    /// fields (Kueue's samples, the examples, the fixtures, the bundled example).
    #[test]
    fn repository_manifests_have_no_unknown_fields() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut docs = Vec::new();
        for dir in [
            "examples/gpu-cluster",
            "tests/fixtures",
            "tests/cluster/samples",
        ] {
            let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            files.sort();
            for file in files {
                let name = file.display().to_string();
                // Fixtures whose point is a bad document, and the agent's fake NVML data (not manifests).
                if !name.ends_with(".yaml")
                    || [
                        "bad-field",
                        "bad-quantity",
                        "unknown-field",
                        "unknown-kind",
                        "agent-",
                    ]
                    .iter()
                    .any(|bad| name.contains(bad))
                {
                    continue;
                }
                docs.extend(read_path(&file).unwrap_or_else(|e| panic!("{e}")));
            }
        }
        docs.extend(crate::sim::bundled_example().unwrap_or_else(|e| panic!("{e}")));
        let mut checked = 0;
        for mut doc in docs {
            if doc.kind() == Some("Pod") {
                let pod = deserialize_strict::<k8s_openapi::api::core::v1::Pod>(doc.value.clone());
                assert!(pod.is_ok(), "{}: {pod:?}", doc.origin);
                checked += 1;
                continue;
            }
            if crate::sim::config::is_configuration(&doc) {
                let config =
                    crate::sim::config::SimConfig::from_value(&doc.origin.to_string(), &doc.value);
                assert!(config.is_ok(), "{}: {:?}", doc.origin, config.err());
                checked += 1;
                continue;
            }
            // Kueue's sample Jobs are created with generateName.
            if doc.name().is_none() {
                doc.value["metadata"]["name"] = "generated".into();
            }
            if let Err(e) = ClusterObjects::default().add(&doc) {
                panic!("{e}");
            }
            checked += 1;
        }
        assert!(checked > 200, "{checked} documents checked");
    }
}
