//! Namespaces' labels, as the job and pod hooks need them to judge Kueue's `managedJobsNamespaceSelector`: an
//! in-memory index for tests and tools, and a watch on the API server for `sluice webhook`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};

/// Answers what labels a Namespace has.
pub trait NamespaceIndex: Send + Sync + 'static {
    /// The labels of Namespace `name`, None when it is not known.
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>>;
    /// Whether the index has caught up with the cluster (the webhook is ready only then).
    fn synced(&self) -> bool;
    /// Whether the index watches every Namespace, so one it lacks is one not seen yet (rather than one never
    /// looked for).
    fn watched(&self) -> bool;
}

/// A Namespace index held in memory, always synced.
#[derive(Debug, Default)]
pub struct InMemoryNamespaces {
    labels: RwLock<HashMap<String, BTreeMap<String, String>>>,
}

impl InMemoryNamespaces {
    /// Records a Namespace's labels.
    pub fn insert(&self, name: &str, labels: BTreeMap<String, String>) {
        let mut m = self.labels.write().unwrap_or_else(|e| e.into_inner());
        m.insert(name.to_owned(), labels);
    }
}

impl NamespaceIndex for InMemoryNamespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let m = self.labels.read().unwrap_or_else(|e| e.into_inner());
        m.get(name).cloned()
    }

    fn synced(&self) -> bool {
        true
    }

    fn watched(&self) -> bool {
        false
    }
}

/// A Namespace index fed by a watch on the API server (a kube-runtime reflector).
pub struct ReflectorNamespaces {
    store: Store<Namespace>,
    synced: Arc<AtomicBool>,
}

impl ReflectorNamespaces {
    /// Starts watching Namespaces; the watch runs on the current Tokio runtime until the process ends, retrying
    /// with backoff when the API server is unreachable.
    pub fn start(client: kube::Client) -> Self {
        let (store, synced) = crate::watch::watch_synced(
            Api::<Namespace>::all(client),
            reflector::store::Writer::default(),
            "Namespace",
        );
        Self { store, synced }
    }
}

impl NamespaceIndex for ReflectorNamespaces {
    fn labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let ns = self.store.get(&ObjectRef::new(name))?;
        Some(ns.metadata.labels.clone().unwrap_or_default())
    }

    fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    fn watched(&self) -> bool {
        true
    }
}
