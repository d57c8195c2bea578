//! Watchers: one kube-runtime watcher per kind, each turning watch events into typed [`Change`]s on the engine
//! task's channel. A re-list (after a broken watch) is reconciled here: objects that did not come back are
//! reported deleted, so the engine task never sees stale objects.

use std::collections::BTreeMap;
use std::fmt::Debug;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// An object created, changed or gone.
#[derive(Clone, Debug)]
pub enum Change<K> {
    /// Created or changed (or listed).
    Apply(K),
    /// Deleted (the last state seen).
    Delete(K),
}

/// Drops what the operator never reads before an object is kept: `metadata.managedFields`, often the largest part
/// of an object the API server has written several times (Kueue's manager strips it from its cache too).
fn strip<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

/// Sends `wrap(change)` for every change of `K` on `tx`, then `synced(kind)` once the first list is complete.
/// Adding a kind (Nodes, NodeGpuTopology, PolicyModule) is one call of this function with its own `wrap`.
pub fn spawn_watcher<K, I>(
    api: Api<K>,
    config: watcher::Config,
    tx: mpsc::Sender<I>,
    wrap: fn(Change<K>) -> I,
    synced: fn(&'static str) -> I,
    kind: &'static str,
) -> JoinHandle<()>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
    I: Send + 'static,
{
    tokio::spawn(async move {
        let mut known: BTreeMap<(String, String), K> = BTreeMap::new();
        let mut relist: Option<BTreeMap<(String, String), K>> = None;
        let mut first_sync = true;
        let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
        let mut stream = watcher::watcher(api, config)
            .default_backoff()
            .modify(strip)
            .boxed();
        while let Some(item) = stream.next().await {
            let out: Vec<I> = match item {
                Ok(Event::Apply(o)) => {
                    known.insert(key(&o), o.clone());
                    vec![wrap(Change::Apply(o))]
                }
                Ok(Event::Delete(o)) => {
                    known.remove(&key(&o));
                    vec![wrap(Change::Delete(o))]
                }
                Ok(Event::Init) => {
                    relist = Some(BTreeMap::new());
                    Vec::new()
                }
                Ok(Event::InitApply(o)) => {
                    if let Some(r) = relist.as_mut() {
                        r.insert(key(&o), o.clone());
                    }
                    vec![wrap(Change::Apply(o))]
                }
                Ok(Event::InitDone) => {
                    let fresh = relist.take().unwrap_or_default();
                    let gone: Vec<K> = known
                        .iter()
                        .filter(|(k, _)| !fresh.contains_key(*k))
                        .map(|(_, o)| o.clone())
                        .collect();
                    known = fresh;
                    let mut out: Vec<I> =
                        gone.into_iter().map(|o| wrap(Change::Delete(o))).collect();
                    if first_sync {
                        first_sync = false;
                        out.push(synced(kind));
                    }
                    out
                }
                Err(e) => {
                    tracing::warn!(kind, error = %e, "watch failed; retrying");
                    Vec::new()
                }
            };
            for i in out {
                if tx.send(i).await.is_err() {
                    return;
                }
            }
        }
    })
}
