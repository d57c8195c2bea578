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

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::runtime::watcher;
use kube::{Api, Client};
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
use watch::{Remember, spawn_watcher};

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
        let (tx, rx) = mpsc::channel::<Input>(8192);
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
        .with_input(input);
        let result = task.run(rx).await;
        for h in handles {
            h.abort();
        }
        result
    }
}
