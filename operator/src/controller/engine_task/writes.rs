//! Writes through the [`Writer`](crate::controller::writer::Writer) that keep the cache current with what the API
//! server returned.

use k8s_openapi::api::batch::v1::Job;
use kube::{Api, Resource};
use sluice_sdk::kueue::v1beta2 as api;

use super::{EngineTask, reference};
use crate::controller::writer::Endpoint;
use crate::engine::{Event, WorkloadKey};
use crate::telemetry::EventSeverity;

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
        match self.writer.update(&api, cached, endpoint, mutate).await {
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

    pub(super) async fn write_job(
        &mut self,
        key: &(String, String),
        mutate: impl FnMut(&mut Job) -> Result<bool, String>,
    ) -> Option<Job> {
        self.write_job_at(key, Endpoint::Main, mutate).await
    }

    /// Writes a Job (its object or its status) through the writer and caches what the API server returned.
    pub(super) async fn write_job_at(
        &mut self,
        key: &(String, String),
        endpoint: Endpoint,
        mutate: impl FnMut(&mut Job) -> Result<bool, String>,
    ) -> Option<Job> {
        let cached = self.cache.jobs.get(key)?.clone();
        let api = self.apis.jobs(&key.0);
        match self.writer.update(&api, cached, endpoint, mutate).await {
            Ok(Some(j)) => {
                self.cache.jobs.insert(key.clone(), j.clone());
                Some(j)
            }
            Ok(None) => {
                self.cache.jobs.remove(key);
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "job write failed");
                if let Some(j) = self.cache.jobs.get(key) {
                    self.event(
                        reference(j),
                        EventSeverity::Warning,
                        "FailedToStart",
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
        self.writer
            .update(api, cached, endpoint, mutate)
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "{what} write failed");
                None
            })
    }
}
