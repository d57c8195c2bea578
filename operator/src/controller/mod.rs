//! The queue operator on Kubernetes: watchers feed the single engine task, which schedules while this replica
//! leads and writes the decisions back (Workload status, Jobs, queue status, finalizers).
//!
//! Data flow: [`watch::spawn_watcher`] per kind -> `Input` channel -> the engine task (cache + [`Engine`]) ->
//! [`writer::Writer`] -> API server. See `docs/operator.md`.
//!
//! [`Engine`]: crate::engine::Engine

pub mod checkpoint;
mod cli;
pub mod config;
mod engine_task;
pub mod objects;
pub mod policies;
pub mod rbac;
pub mod tas;
pub mod watch;
pub mod writer;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{LimitRange, Namespace, Node, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::runtime::watcher;
use kube::{Api, Client};
use sluice_sdk::kueue::integrations;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopology;
use sluice_sdk::sluice::policy_module::PolicyModule;
use tokio::sync::mpsc;

pub use cli::{OperatorArgs, run_operator_command};
pub use config::{ConfigError, OperatorConfig, WaitForPodsReady};
pub use engine_task::{Input, WATCHED_KINDS};

use crate::leader::{LeaderError, Leadership};
use crate::telemetry::{EventRecorder, Health, Metrics};
use crate::visibility::SharedSnapshot;
use watch::{Change, Remember, spawn_watcher};

/// Why the operator stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// This replica led and lost its lease: it must restart to rebuild its state.
    #[error("leadership lost; restarting to rebuild state from the API server")]
    LeadershipLost,
    /// Leader election failed.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// The configuration file is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No Kubernetes client could be built.
    #[error("Kubernetes client: {0}")]
    Client(kube::Error),
    /// A listener could not be bound.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        error: std::io::Error,
    },
    /// A bad command-line value.
    #[error("{0}")]
    Usage(String),
}

// kube's errors print their causes in their own message, so the cause is not also chained as a `source`.
impl From<kube::Error> for ControllerError {
    fn from(e: kube::Error) -> Self {
        Self::Client(e)
    }
}

/// One operator instance: watchers and the engine task over one client.
pub struct Operator {
    client: Client,
    config: OperatorConfig,
    /// Metrics this instance reports into.
    pub metrics: Arc<Metrics>,
    /// Readiness flag.
    pub health: Health,
    /// Visibility snapshot this instance publishes.
    pub snapshot: SharedSnapshot,
    leadership: Leadership,
    events: bool,
}

impl Operator {
    /// An operator over `client` that schedules while `leadership` says so.
    pub fn new(client: Client, config: OperatorConfig, leadership: Leadership) -> Self {
        Self {
            client,
            config,
            metrics: Arc::new(Metrics::new()),
            health: Health::default(),
            snapshot: SharedSnapshot::default(),
            leadership,
            events: true,
        }
    }

    /// Turns Kubernetes Events off (tests asserting exact request sequences).
    pub fn without_events(mut self) -> Self {
        self.events = false;
        self
    }

    /// Runs watchers and the engine task until the engine task ends.
    pub async fn run(self) -> Result<(), ControllerError> {
        // Unbounded, as client-go's informer queues are: a watcher that waits for the engine task stops reading its
        // stream, the API server drops the watch once its buffer fills, and the watch starts over with a list of
        // every object (seen with 50,000 Workloads in Kueue's large-scale scenario). What waits here is at most
        // what the API server sends while the engine task is busy writing.
        let (tx, rx) = mpsc::unbounded_channel::<Input>();
        let c = &self.client;
        let cfg = watcher::Config::default;
        let handles = vec![
            spawn_watcher(
                Api::<api::ResourceFlavor>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Flavor,
                Input::Synced,
                "ResourceFlavor",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<api::ClusterQueue>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::ClusterQueue,
                Input::Synced,
                "ClusterQueue",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<api::Cohort>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Cohort,
                Input::Synced,
                "Cohort",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<api::LocalQueue>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::LocalQueue,
                Input::Synced,
                "LocalQueue",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<Namespace>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Namespace,
                Input::Synced,
                "Namespace",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<LimitRange>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::LimitRange,
                Input::Synced,
                "LimitRange",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<RuntimeClass>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::RuntimeClass,
                Input::Synced,
                "RuntimeClass",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<api::Workload>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Workload,
                Input::Synced,
                "Workload",
                Remember::Metadata,
            ),
            spawn_watcher(
                Api::<Job>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Job,
                Input::Synced,
                "Job",
                Remember::Metadata,
            ),
            spawn_watcher(
                Api::<api::WorkloadPriorityClass>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::WorkloadPriorityClass,
                Input::Synced,
                "WorkloadPriorityClass",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<PriorityClass>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::PriorityClass,
                Input::Synced,
                "PriorityClass",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<Node>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Node,
                Input::Synced,
                "Node",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<api::Topology>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Topology,
                Input::Synced,
                "Topology",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<api::AdmissionCheck>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::AdmissionCheck,
                Input::Synced,
                "AdmissionCheck",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<NodeGpuTopology>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::NodeGpuTopology,
                Input::Synced,
                "NodeGpuTopology",
                Remember::Whole,
            ),
            spawn_watcher(
                Api::<Pod>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::Pod,
                Input::Synced,
                "Pod",
                Remember::Metadata,
            ),
            spawn_watcher(
                Api::<PolicyModule>::all(c.clone()),
                cfg(),
                tx.clone(),
                Input::PolicyModule,
                Input::Synced,
                "PolicyModule",
                Remember::Whole,
            ),
        ];
        let mut handles = handles;
        let mut optional_kinds = Vec::new();
        // Kueue's integrations wait for their kind's CRD: these kinds are watched once the API server serves them.
        if self.config.manages(integrations::JOBSET) {
            let served = api_served(c, sluice_sdk::jobset::API_VERSION, "jobsets").await;
            if served {
                optional_kinds.push(sluice_sdk::jobset::KIND);
            }
            handles.push(spawn_watcher_when_served(
                c.clone(),
                served,
                tx.clone(),
                Input::JobSet,
                sluice_sdk::jobset::KIND,
            ));
        }
        if self.config.manages(integrations::PYTORCHJOB) {
            let served = api_served(c, sluice_sdk::kubeflow::API_VERSION, "pytorchjobs").await;
            if served {
                optional_kinds.push(sluice_sdk::kubeflow::PYTORCH_JOB_KIND);
            }
            handles.push(spawn_watcher_when_served(
                c.clone(),
                served,
                tx.clone(),
                Input::PyTorchJob,
                sluice_sdk::kubeflow::PYTORCH_JOB_KIND,
            ));
        }
        for (enabled, plural, kind) in [
            (
                self.config.manages(integrations::RAYJOB),
                "rayjobs",
                sluice_sdk::ray::RAY_JOB_KIND,
            ),
            (
                self.config.manages(integrations::RAYCLUSTER),
                "rayclusters",
                sluice_sdk::ray::RAY_CLUSTER_KIND,
            ),
            (
                self.config.manages(integrations::RAYSERVICE),
                "rayservices",
                sluice_sdk::ray::RAY_SERVICE_KIND,
            ),
        ] {
            if !enabled {
                continue;
            }
            let served = api_served(c, sluice_sdk::ray::API_VERSION, plural).await;
            if served {
                optional_kinds.push(kind);
            }
            let handle = match kind {
                sluice_sdk::ray::RAY_JOB_KIND => {
                    spawn_watcher_when_served(c.clone(), served, tx.clone(), Input::RayJob, kind)
                }
                sluice_sdk::ray::RAY_CLUSTER_KIND => spawn_watcher_when_served(
                    c.clone(),
                    served,
                    tx.clone(),
                    Input::RayCluster,
                    kind,
                ),
                _ => spawn_watcher_when_served(
                    c.clone(),
                    served,
                    tx.clone(),
                    Input::RayService,
                    kind,
                ),
            };
            handles.push(handle);
        }
        if self.config.manages(integrations::TRAINJOB) {
            use sluice_sdk::trainer as t;
            let kinds = [
                ("trainjobs", t::TRAIN_JOB_KIND),
                ("trainingruntimes", t::TRAINING_RUNTIME_KIND),
                ("clustertrainingruntimes", t::CLUSTER_TRAINING_RUNTIME_KIND),
            ];
            for (plural, kind) in kinds {
                let served = api_served(c, t::API_VERSION, plural).await;
                if served {
                    optional_kinds.push(kind);
                }
                let handle = match kind {
                    t::TRAIN_JOB_KIND => spawn_watcher_when_served(
                        c.clone(),
                        served,
                        tx.clone(),
                        Input::TrainJob,
                        kind,
                    ),
                    t::TRAINING_RUNTIME_KIND => spawn_watcher_when_served(
                        c.clone(),
                        served,
                        tx.clone(),
                        Input::TrainingRuntime,
                        kind,
                    ),
                    _ => spawn_watcher_when_served(
                        c.clone(),
                        served,
                        tx.clone(),
                        Input::ClusterTrainingRuntime,
                        kind,
                    ),
                };
                handles.push(handle);
            }
        }
        if self.config.manages(integrations::LEADERWORKERSET) {
            use sluice_sdk::lws;
            let served = api_served(c, lws::API_VERSION, "leaderworkersets").await;
            if served {
                optional_kinds.push(lws::KIND);
            }
            handles.push(spawn_watcher_when_served(
                c.clone(),
                served,
                tx.clone(),
                Input::LeaderWorkerSet,
                lws::KIND,
            ));
            // The StatefulSets LWS makes (labelled with their set's name): Kueue lets a group's pods go when their
            // StatefulSet is gone or rolling them to a new revision. Always served, so waited for like the
            // core kinds: a pod is never judged before its StatefulSet could be known.
            optional_kinds.push(STATEFUL_SET);
            handles.push(spawn_watcher(
                Api::<StatefulSet>::all(c.clone()),
                watcher::Config::default().labels(lws::SET_NAME_LABEL),
                tx.clone(),
                Input::StatefulSet,
                Input::Synced,
                STATEFUL_SET,
                Remember::Metadata,
            ));
        }
        let input = tx.downgrade();
        drop(tx);
        let events = self.events.then(|| {
            EventRecorder::new(
                self.client.clone(),
                "sluice-operator",
                Some(self.config.identity.clone()),
                self.metrics.events_dropped.clone(),
            )
        });
        let task = engine_task::EngineTask::new(
            self.client.clone(),
            self.config,
            self.metrics,
            events,
            self.leadership,
            self.health,
            self.snapshot,
        )
        .with_input(input)
        .with_synced_kinds(optional_kinds);
        let result = task.run(rx).await;
        for h in handles {
            h.abort();
        }
        result
    }
}

/// The kind name of StatefulSets, as the watch reports its first list.
const STATEFUL_SET: &str = "StatefulSet";

/// How long the operator waits between two looks for an API its integrations need.
const API_POLL: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether the API server serves `plural` in `api_version` (a group/version can be served for other kinds: Kubeflow's
/// Notebooks share `kubeflow.org/v1` with PyTorchJobs). A discovery error other than not-found is retried for up
/// to half a minute, then logged and taken as not served (the caller looks again later).
async fn api_served(client: &Client, api_version: &str, plural: &str) -> bool {
    let mut delay = std::time::Duration::from_millis(250);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match client.list_api_group_resources(api_version).await {
            Ok(list) => return list.resources.iter().any(|r| r.name == plural),
            Err(kube::Error::Api(e)) if e.code == 404 => return false,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                tracing::warn!(%api_version, error = %e, "API discovery failed; taken as not served");
                return false;
            }
            Err(e) => {
                tracing::debug!(%api_version, error = %e, "API discovery failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(5));
            }
        }
    }
}

/// Watches `K` now when `served`, else once the API server starts serving it (its CRD installed later).
fn spawn_watcher_when_served<K>(
    client: Client,
    served: bool,
    tx: mpsc::UnboundedSender<Input>,
    wrap: fn(Change<K>) -> Input,
    kind: &'static str,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + Default
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    tokio::spawn(async move {
        let api_version = K::api_version(&()).into_owned();
        let plural = K::plural(&()).into_owned();
        if !served {
            tracing::info!(%kind, %api_version, "not served; the integration waits for its CRD");
            loop {
                tokio::time::sleep(API_POLL).await;
                if api_served(&client, &api_version, &plural).await {
                    tracing::info!(%kind, %api_version, "now served; watching it");
                    break;
                }
            }
        }
        let watcher = spawn_watcher(
            Api::<K>::all(client),
            watcher::Config::default(),
            tx,
            wrap,
            Input::Synced,
            kind,
            Remember::Metadata,
        );
        // Ending this task ends the watcher with it.
        let _abort_on_drop = AbortOnDrop(watcher.abort_handle());
        let _ = watcher.await;
    })
}

/// Aborts a task when dropped (the waiting task above is aborted with the operator's other watchers).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
