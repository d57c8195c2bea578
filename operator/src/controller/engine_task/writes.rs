//! Writes through the [`Writer`](crate::controller::writer::Writer) that keep the cache current with what the API
//! server returned.

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Resource};
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;

use super::{Cache, EngineTask, reference};
use crate::controller::objects::set_finalizer;
use crate::controller::writer::{Endpoint, WriteError, Writer};
use crate::engine::{Event, WorkloadKey};
use crate::telemetry::EventSeverity;

/// Runs `writes` with up to `in_flight` (at least one) in flight at once; their results in the order given.
/// The futures come as a Vec: a stream mapped by a closure makes the engine task's future fail the Send check
/// (the closure's borrows are not known to be general enough).
pub(super) async fn in_flight<F: std::future::Future>(
    writes: Vec<F>,
    in_flight: usize,
) -> Vec<F::Output> {
    futures::stream::iter(writes)
        .buffered(in_flight.max(1))
        .collect()
        .await
}

/// A Workload status change, computed from the copy last read (Ok(false): nothing to change).
pub(super) type StatusChange = Box<dyn FnMut(&mut api::Workload) -> Result<bool, String> + Send>;

impl EngineTask {
    /// Writes a Workload status change computed by `mutate` and keeps the cache current.
    pub(super) async fn write_workload_status(
        &mut self,
        key: &WorkloadKey,
        mutate: impl FnMut(&mut api::Workload) -> Result<bool, String>,
    ) -> Option<api::Workload> {
        self.write_workload(key, Endpoint::Status, mutate).await
    }

    /// Writes a change of the Workload object itself (metadata, spec) and keeps the cache current.
    pub(super) async fn write_workload_main(
        &mut self,
        key: &WorkloadKey,
        mutate: impl FnMut(&mut api::Workload) -> Result<bool, String>,
    ) -> Option<api::Workload> {
        self.write_workload(key, Endpoint::Main, mutate).await
    }

    /// Kueue's WorkloadPriorityClass controller: the Workload's `spec.priority` set to `value`, the value of the
    /// WorkloadPriorityClass it names (as read from the cache when this was decided).
    pub(super) async fn follow_class_priority(&mut self, key: &WorkloadKey, value: i32) {
        let Some(class) = self
            .cache
            .workloads
            .get(key)
            .and_then(|w| crate::jobs::PriorityClasses::workload_class_of(w))
            .map(str::to_string)
        else {
            return;
        };
        let written = self
            .write_workload_main(key, |w| {
                let names_it = crate::jobs::PriorityClasses::workload_class_of(w) == Some(&class);
                if !names_it || w.spec.priority == Some(value) {
                    return Ok(false);
                }
                w.spec.priority = Some(value);
                Ok(true)
            })
            .await;
        if written.is_some() {
            tracing::info!(workload = %key, %class, priority = value, "priority follows its WorkloadPriorityClass");
            self.sync_workload(key);
            self.queues_changed();
        }
    }

    /// Removes Kueue's `resource-in-use` finalizer from the Workload, so a deletion can complete.
    pub(super) async fn release_workload_finalizer(&mut self, key: &WorkloadKey) {
        self.write_workload_main(key, |w| {
            Ok(set_finalizer(w, labels::RESOURCE_IN_USE_FINALIZER, false))
        })
        .await;
    }

    /// One Workload write; a Workload found gone leaves the cache and the engine at once (its watch event may
    /// come later).
    async fn write_workload(
        &mut self,
        key: &WorkloadKey,
        endpoint: Endpoint,
        mutate: impl FnMut(&mut api::Workload) -> Result<bool, String>,
    ) -> Option<api::Workload> {
        let cached = self.cache.workloads.get(key)?.clone();
        let api = self.apis.workloads(&key.namespace);
        let result = self.writer.update(&api, cached, endpoint, mutate).await;
        self.settle_workload_write(key, endpoint, result)
    }

    /// Status changes of many Workloads (each named once), written with up to `writes_in_flight` (configuration) in
    /// flight instead of one after another: the API server's round trip, not the engine, limits a burst of
    /// admissions. The cache is updated as for one write; results come in the order given (None: not written).
    pub(super) async fn write_workload_statuses(
        &mut self,
        changes: Vec<(WorkloadKey, StatusChange)>,
    ) -> Vec<Option<api::Workload>> {
        let (writer, apis, cache) = (&self.writer, &self.apis, &self.cache);
        let mut writes = Vec::with_capacity(changes.len());
        for (key, mutate) in changes {
            let cached = cache.workloads.get(&key).cloned();
            let api = apis.workloads(&key.namespace);
            writes.push(async move {
                let result = match cached {
                    Some(c) => Some(writer.update(&api, c, Endpoint::Status, mutate).await),
                    None => None,
                };
                (key, result)
            });
        }
        in_flight(writes, self.config.writes_in_flight)
            .await
            .into_iter()
            .map(|(key, result)| {
                result.and_then(|r| self.settle_workload_write(&key, Endpoint::Status, r))
            })
            .collect()
    }

    /// Keeps the cache (and, for a Workload found gone, the engine) current with what a write returned.
    fn settle_workload_write(
        &mut self,
        key: &WorkloadKey,
        endpoint: Endpoint,
        result: Result<Option<api::Workload>, WriteError>,
    ) -> Option<api::Workload> {
        match result {
            Ok(Some(w)) => {
                self.cache.workloads.insert(key.clone(), w.clone());
                Some(w)
            }
            Ok(None) => {
                self.cache.workloads.remove(key);
                self.engine_apply(Event::DeleteWorkload(key.clone()));
                None
            }
            Err(e) => {
                tracing::error!(workload = %key, ?endpoint, error = %e, "workload write failed");
                None
            }
        }
    }

    /// Writes a Job (its object or its status) and caches what the API server returned; a failed write is
    /// announced on the Job.
    pub(super) async fn write_job(
        &mut self,
        key: &(String, String),
        endpoint: Endpoint,
        mutate: impl FnMut(&mut Job) -> Result<bool, String>,
    ) -> Option<Job> {
        self.write_cached(key, endpoint, mutate).await
    }

    /// Writes a managed pod (its object or its status) and caches what the API server returned.
    pub(super) async fn write_pod(
        &mut self,
        key: &(String, String),
        endpoint: Endpoint,
        mutate: impl FnMut(&mut Pod) -> Result<bool, String>,
    ) -> Option<Pod> {
        self.write_cached(key, endpoint, mutate).await
    }

    /// One write of a job kind's object, based on the cached copy; the cache keeps what the API server
    /// returned (an object found gone, or being deleted with no finalizer left, leaves it).
    pub(super) async fn write_cached<K: Cached>(
        &mut self,
        key: &(String, String),
        endpoint: Endpoint,
        mutate: impl FnMut(&mut K) -> Result<bool, String>,
    ) -> Option<K> {
        let cached = K::cached(&self.cache, key)?.clone();
        let api: Api<K> = Api::namespaced(self.apis.client.clone(), &key.0);
        let result = self.writer.update(&api, cached, endpoint, mutate).await;
        self.settle_cached(key, endpoint, result)
    }

    /// Keeps the cache current with what a write of a job kind's object returned; a failed write is logged
    /// and, for a kind that says so, announced on the object.
    pub(super) fn settle_cached<K: Cached>(
        &mut self,
        key: &(String, String),
        endpoint: Endpoint,
        result: Result<Option<K>, WriteError>,
    ) -> Option<K> {
        match result {
            Ok(Some(obj)) => {
                let meta = obj.meta();
                if meta.deletion_timestamp.is_some()
                    && meta.finalizers.as_ref().is_none_or(Vec::is_empty)
                {
                    K::forget(&mut self.cache, key);
                } else {
                    K::put(&mut self.cache, key.clone(), obj.clone());
                }
                Some(obj)
            }
            Ok(None) => {
                K::forget(&mut self.cache, key);
                None
            }
            Err(e) => {
                let kind = K::kind(&());
                tracing::error!(%kind, namespace = %key.0, name = %key.1, ?endpoint, error = %e, "write failed");
                if let Some(reason) = K::WRITE_FAILED_EVENT
                    && let Some(obj) = K::cached(&self.cache, key)
                {
                    self.event(
                        reference(obj),
                        EventSeverity::Warning,
                        reason,
                        "Start",
                        e.to_string(),
                    );
                }
                None
            }
        }
    }

    /// One write through the writer; a failure is logged (the next status pass retries) and gives `None`.
    pub(super) async fn write<K, F>(
        &self,
        api: &Api<K>,
        cached: K,
        endpoint: Endpoint,
        what: &str,
        mutate: F,
    ) -> Option<K>
    where
        K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
        K::DynamicType: Default,
        F: FnMut(&mut K) -> Result<bool, String>,
    {
        logged_update(&self.writer, api, cached, endpoint, what, mutate).await
    }
}

/// [`Writer::update`], a failure logged as a `what` write that failed (None); for writes made together.
pub(super) async fn logged_update<K, F>(
    writer: &Writer,
    api: &Api<K>,
    cached: K,
    endpoint: Endpoint,
    what: &str,
    mutate: F,
) -> Option<K>
where
    K: Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    K::DynamicType: Default,
    F: FnMut(&mut K) -> Result<bool, String>,
{
    writer
        .update(api, cached, endpoint, mutate)
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "{what} write failed");
            None
        })
}

/// An object kind the engine task caches and writes for a job kind.
pub(super) trait Cached:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
{
    /// Event reason sent on the object when a write to it fails (None: the failure is only logged).
    const WRITE_FAILED_EVENT: Option<&'static str>;
    /// The cached copy.
    fn cached<'c>(cache: &'c Cache, key: &(String, String)) -> Option<&'c Self>;
    /// Caches what the API server returned.
    fn put(cache: &mut Cache, key: (String, String), obj: Self);
    /// Drops the cached copy (the object is gone).
    fn forget(cache: &mut Cache, key: &(String, String));
}

/// A failed Job write (a start, a suspend, a restore) is announced as Kueue announces a failed start.
impl Cached for Job {
    const WRITE_FAILED_EVENT: Option<&'static str> = Some("FailedToStart");
    fn cached<'c>(cache: &'c Cache, key: &(String, String)) -> Option<&'c Self> {
        cache.jobs.get(key)
    }
    fn put(cache: &mut Cache, key: (String, String), obj: Self) {
        cache.jobs.insert(key, obj);
    }
    fn forget(cache: &mut Cache, key: &(String, String)) {
        cache.jobs.remove(key);
    }
}

impl Cached for Pod {
    const WRITE_FAILED_EVENT: Option<&'static str> = None;
    fn cached<'c>(cache: &'c Cache, key: &(String, String)) -> Option<&'c Self> {
        cache.managed_pods.get(key)
    }
    fn put(cache: &mut Cache, key: (String, String), obj: Self) {
        cache.managed_pods.insert(key, obj);
    }
    fn forget(cache: &mut Cache, key: &(String, String)) {
        cache.managed_pods.remove(key);
    }
}
