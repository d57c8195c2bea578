//! Watchers: one kube-runtime watcher per kind, each turning watch events into typed [`Change`]s on the engine
//! task's channel. A re-list (after a broken watch) is reconciled here: objects that did not come back are
//! reported deleted, so the engine task never sees stale objects.

use std::collections::BTreeMap;
use std::fmt::Debug;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// An object created, changed or gone. Boxed: the engine task's channel holds thousands of changes at a burst,
/// and a slot sized for the largest kind inline (a Pod) would make every slot that large.
#[derive(Clone, Debug)]
pub enum Change<K> {
    /// Created or changed (or listed).
    Apply(Box<K>),
    /// Deleted (the last state seen; after a re-list, what [`Remember`] kept of it).
    Delete(Box<K>),
}

/// Drops what the operator never reads before an object is kept: `metadata.managedFields`, often the largest part
/// of an object the API server has written several times (Kueue's manager strips it from its cache too).
pub(crate) fn strip<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

/// What a watcher remembers of each object to report it deleted when a re-list no longer has it.
#[derive(Clone, Copy, Debug)]
pub enum Remember {
    /// The whole object (kinds with few objects, or whose deletion is handled from their spec).
    Whole,
    /// Its metadata only, without kubectl's last-applied copy: for Jobs, Workloads and Pods, which come by the
    /// ten thousand and whose deletion is handled from their metadata. The engine task keeps the objects
    /// themselves; a second whole copy here was a quarter of the operator's heap.
    Metadata,
}

/// kubectl's copy of the applied manifest: as large as the object, and never read.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What a watcher kept of one object: boxed, so the map's nodes stay small whatever the kind's size.
#[derive(Debug)]
enum Kept<K> {
    Whole(Box<K>),
    Metadata(Box<ObjectMeta>),
}

impl<K: Resource + Clone + Default> Kept<K> {
    /// The object as last seen, or one carrying only its metadata.
    fn into_object(self) -> K {
        match self {
            Kept::Whole(o) => *o,
            Kept::Metadata(m) => {
                let mut o = K::default();
                *o.meta_mut() = *m;
                o
            }
        }
    }
}

impl Remember {
    fn keep<K: Resource + Clone + Default>(self, o: &K) -> Kept<K> {
        match self {
            Remember::Whole => Kept::Whole(Box::new(o.clone())),
            Remember::Metadata => {
                let mut m = o.meta().clone();
                if let Some(a) = m.annotations.as_mut() {
                    a.remove(LAST_APPLIED);
                }
                Kept::Metadata(Box::new(m))
            }
        }
    }
}

/// Sends `wrap(change)` for every change of `K` on `tx`, then `synced(kind)` once the first list is complete,
/// remembering `remember` of each object to report the ones a re-list no longer has. Adding a kind (Nodes,
/// NodeGpuTopology, PolicyModule) is one call of this function with its own `wrap`.
pub fn spawn_watcher<K, I>(
    api: Api<K>,
    config: watcher::Config,
    tx: mpsc::UnboundedSender<I>,
    wrap: fn(Change<K>) -> I,
    synced: fn(&'static str) -> I,
    kind: &'static str,
    remember: Remember,
) -> JoinHandle<()>
where
    K: Resource + Clone + Default + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
    I: Send + 'static,
{
    tokio::spawn(async move {
        let mut known: BTreeMap<(String, String), Kept<K>> = BTreeMap::new();
        let mut relist: Option<BTreeMap<(String, String), Kept<K>>> = None;
        let mut first_sync = true;
        let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
        let mut stream = watcher::watcher(api, config)
            .default_backoff()
            .modify(strip)
            .boxed();
        while let Some(item) = stream.next().await {
            let out: Vec<I> = match item {
                Ok(Event::Apply(o)) => {
                    known.insert(key(&o), remember.keep(&o));
                    vec![wrap(Change::Apply(Box::new(o)))]
                }
                Ok(Event::Delete(o)) => {
                    known.remove(&key(&o));
                    vec![wrap(Change::Delete(Box::new(o)))]
                }
                Ok(Event::Init) => {
                    relist = Some(BTreeMap::new());
                    Vec::new()
                }
                Ok(Event::InitApply(o)) => {
                    if let Some(r) = relist.as_mut() {
                        r.insert(key(&o), remember.keep(&o));
                    }
                    vec![wrap(Change::Apply(Box::new(o)))]
                }
                Ok(Event::InitDone) => {
                    // What the re-list has replaces what was kept; what it no longer has is gone.
                    let old = std::mem::replace(&mut known, relist.take().unwrap_or_default());
                    let gone: Vec<K> = old
                        .into_iter()
                        .filter(|(k, _)| !known.contains_key(k))
                        .map(|(_, o)| o.into_object())
                        .collect();
                    let mut out: Vec<I> = gone
                        .into_iter()
                        .map(|o| wrap(Change::Delete(Box::new(o))))
                        .collect();
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
                if tx.send(i).is_err() {
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{Job, JobSpec};

    fn job() -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("train".into()),
                namespace: Some("team-a".into()),
                uid: Some("u-1".into()),
                annotations: Some(
                    [
                        (LAST_APPLIED.to_string(), "{...}".to_string()),
                        ("kueue.x-k8s.io/queue-name".to_string(), "q".to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(JobSpec {
                parallelism: Some(8),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn metadata_is_all_a_job_leaves_behind_for_a_relist() {
        let kept = Remember::Metadata.keep(&job());
        assert!(matches!(kept, Kept::Metadata(_)));
        let tombstone = kept.into_object();
        assert_eq!(tombstone.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(tombstone.name_any(), "train");
        let notes = tombstone.metadata.annotations.expect("annotations");
        assert!(!notes.contains_key(LAST_APPLIED));
        assert_eq!(
            notes.get("kueue.x-k8s.io/queue-name").map(String::as_str),
            Some("q")
        );
        assert_eq!(tombstone.spec, None);
    }

    #[test]
    fn a_whole_object_comes_back_whole() {
        assert_eq!(Remember::Whole.keep(&job()).into_object(), job());
    }
}
