//! Which Kubeflow Trainer runtimes exist, as the TrainJob hook needs them (Kueue validates a TrainJob's topology
//! annotations on the pod sets its runtime gives, and denies a TrainJob whose runtime is missing): an in-memory
//! index for tests and tools, and watches on the API server for `sluice webhook`.

use std::collections::HashMap;
use std::sync::RwLock;

use futures_util::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use sluice_sdk::trainer::{
    ClusterTrainingRuntime, RuntimeKey, TrainingRuntime, TrainingRuntimeSpec,
};

/// Answers what a runtime holds.
pub trait TrainingRuntimeIndex: Send + Sync + 'static {
    /// The spec of the runtime `key` names, if it exists.
    fn get(&self, key: &RuntimeKey) -> Option<TrainingRuntimeSpec>;
}

/// A runtime index held in memory.
#[derive(Debug, Default)]
pub struct InMemoryTrainingRuntimes {
    runtimes: RwLock<HashMap<RuntimeKey, TrainingRuntimeSpec>>,
}

impl InMemoryTrainingRuntimes {
    /// Records a runtime.
    pub fn insert(&self, key: RuntimeKey, spec: TrainingRuntimeSpec) {
        let mut r = self.runtimes.write().unwrap_or_else(|e| e.into_inner());
        r.insert(key, spec);
    }
}

impl TrainingRuntimeIndex for InMemoryTrainingRuntimes {
    fn get(&self, key: &RuntimeKey) -> Option<TrainingRuntimeSpec> {
        let r = self.runtimes.read().unwrap_or_else(|e| e.into_inner());
        r.get(key).cloned()
    }
}

/// A runtime index fed by watches on TrainingRuntimes and ClusterTrainingRuntimes (retrying with backoff while
/// Trainer's CRDs are not installed).
pub struct ReflectorTrainingRuntimes {
    namespaced: Store<TrainingRuntime>,
    cluster: Store<ClusterTrainingRuntime>,
}

impl ReflectorTrainingRuntimes {
    /// Starts both watches on the current Tokio runtime; they run until the process ends.
    pub fn start(client: kube::Client) -> Self {
        Self {
            namespaced: watch::<TrainingRuntime>(Api::all(client.clone())),
            cluster: watch::<ClusterTrainingRuntime>(Api::all(client)),
        }
    }
}

fn watch<K>(api: Api<K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    let kind = K::kind(&()).into_owned();
    tokio::spawn(async move {
        stream
            .for_each(|event| {
                let kind = kind.clone();
                async move {
                    match event {
                        // Trainer not installed: nothing to warn about, TrainJobs cannot exist either.
                        Err(watcher::Error::InitialListFailed(kube::Error::Api(e)))
                            if e.code == 404 =>
                        {
                            tracing::debug!(%kind, "not served; retrying");
                        }
                        Err(e) => tracing::warn!(%kind, error = %e, "watch failed; retrying"),
                        Ok(_) => {}
                    }
                }
            })
            .await;
    });
    store
}

impl TrainingRuntimeIndex for ReflectorTrainingRuntimes {
    fn get(&self, key: &RuntimeKey) -> Option<TrainingRuntimeSpec> {
        match key {
            RuntimeKey::Namespaced(ns, name) => self
                .namespaced
                .get(&ObjectRef::new(name).within(ns))
                .map(|r| r.spec.clone()),
            RuntimeKey::Cluster(name) => self
                .cluster
                .get(&ObjectRef::new(name))
                .map(|r| r.spec.clone()),
        }
    }
}
