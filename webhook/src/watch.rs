//! The watches behind the webhook's indexes: a reflector run on the current Tokio runtime until the process ends
//! (retrying with backoff when the API server is unreachable), and a flag set once its first list is in.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

/// Starts the watch of `api` into `writer`; returns its store and the synced flag. `what` names the objects in
/// logs ("LocalQueue", "Namespace").
pub(crate) fn watch_synced<K>(
    api: Api<K>,
    writer: Writer<K>,
    what: &'static str,
) -> (Store<K>, Arc<AtomicBool>)
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let store = writer.as_reader();
    let synced = Arc::new(AtomicBool::new(false));
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    tokio::spawn(async move {
        stream
            .for_each(|event| async move {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "{what} watch failed; retrying");
                }
            })
            .await;
    });
    let ready = store.clone();
    let flag = synced.clone();
    tokio::spawn(async move {
        if ready.wait_until_ready().await.is_ok() {
            flag.store(true, Ordering::Release);
            tracing::info!("{what} index synced");
        }
    });
    (store, synced)
}
