//! Which LocalQueues exist, as the Job and Pod hooks need to know (the `default` LocalQueue rule and warnings about
//! missing queues): an in-memory index for tests and tools, and a watch on the API server for `sluice webhook`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store};

/// Answers whether a LocalQueue exists.
pub trait LocalQueueIndex: Send + Sync + 'static {
    /// Whether LocalQueue `name` exists in `namespace`.
    fn exists(&self, namespace: &str, name: &str) -> bool;
    /// Whether the index has caught up with the cluster (the webhook is ready only then).
    fn synced(&self) -> bool;
}

/// A LocalQueue index held in memory, always synced.
#[derive(Debug, Default)]
pub struct InMemoryLocalQueues {
    queues: RwLock<HashSet<(String, String)>>,
}

impl InMemoryLocalQueues {
    /// An index holding the given `(namespace, name)` pairs.
    pub fn new<'a>(queues: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let set = queues
            .into_iter()
            .map(|(ns, n)| (ns.to_owned(), n.to_owned()))
            .collect();
        Self {
            queues: RwLock::new(set),
        }
    }

    /// Records a LocalQueue.
    pub fn insert(&self, namespace: &str, name: &str) {
        let mut q = self.queues.write().unwrap_or_else(|e| e.into_inner());
        q.insert((namespace.to_owned(), name.to_owned()));
    }

    /// Forgets a LocalQueue.
    pub fn remove(&self, namespace: &str, name: &str) {
        let mut q = self.queues.write().unwrap_or_else(|e| e.into_inner());
        q.remove(&(namespace.to_owned(), name.to_owned()));
    }
}

impl LocalQueueIndex for InMemoryLocalQueues {
    fn exists(&self, namespace: &str, name: &str) -> bool {
        let q = self.queues.read().unwrap_or_else(|e| e.into_inner());
        q.contains(&(namespace.to_owned(), name.to_owned()))
    }

    fn synced(&self) -> bool {
        true
    }
}

/// A LocalQueue index fed by a watch on the API server (a kube-runtime reflector over v1beta2 LocalQueues).
pub struct ReflectorLocalQueues {
    store: Store<DynamicObject>,
    resource: ApiResource,
    synced: Arc<AtomicBool>,
}

impl ReflectorLocalQueues {
    /// Starts watching LocalQueues in every namespace; the watch runs on the current Tokio runtime until the
    /// process ends, retrying with backoff when the API server is unreachable.
    pub fn start(client: kube::Client) -> Self {
        let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "LocalQueue");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "localqueues");
        let (store, synced) = crate::watch::watch_synced(
            Api::<DynamicObject>::all_with(client, &resource),
            reflector::store::Writer::new(resource.clone()),
            "LocalQueue",
        );
        Self {
            store,
            resource,
            synced,
        }
    }
}

impl LocalQueueIndex for ReflectorLocalQueues {
    fn exists(&self, namespace: &str, name: &str) -> bool {
        let key = ObjectRef::new_with(name, self.resource.clone()).within(namespace);
        self.store.get(&key).is_some()
    }

    fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_index() {
        let idx = InMemoryLocalQueues::new([("team", "default")]);
        assert!(idx.exists("team", "default"));
        assert!(!idx.exists("other", "default"));
        idx.insert("other", "default");
        assert!(idx.exists("other", "default"));
        idx.remove("team", "default");
        assert!(!idx.exists("team", "default"));
        assert!(idx.synced());
    }
}
