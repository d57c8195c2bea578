//! The engine task's side of PolicyModules: watching the ConfigMaps modules name, loading and routing modules,
//! and writing their status and events (the decisions are made in [`crate::controller::policies`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::runtime::watcher;
use sluice_sdk::sluice::policy_module::PolicyModule;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{EngineTask, Input};
use crate::controller::policies::{Notice, merge_status};
use crate::controller::watch::{Remember, spawn_watcher};
use crate::controller::writer::Endpoint;
use crate::engine::Time as EngineTime;

/// One watcher per ConfigMap a PolicyModule names; aborted when no module names it any more (or the task ends).
#[derive(Default)]
pub(super) struct ConfigMapWatchers {
    /// Where watchers send; None: ConfigMaps are only read once, when first named.
    pub input: Option<mpsc::WeakUnboundedSender<Input>>,
    running: BTreeMap<(String, String), JoinHandle<()>>,
}

impl Drop for ConfigMapWatchers {
    fn drop(&mut self) {
        for h in self.running.values() {
            h.abort();
        }
    }
}

impl EngineTask {
    /// When the PolicyModule counters should next be looked at (engine clock).
    pub(super) fn policy_deadline(&self) -> Option<EngineTime> {
        let at = self.policies.next_status_check()?;
        let wait = at.saturating_duration_since(Instant::now());
        Some(super::now_ms() + wait.as_millis() as EngineTime)
    }

    fn publish_notices(&self, notices: Vec<Notice>) {
        for n in notices {
            self.event(n.object, n.severity, n.reason, n.action, n.note);
        }
    }

    /// Starts and stops ConfigMap watchers to match the modules, loads the modules that changed and routes
    /// every ClusterQueue to its policies.
    pub(super) async fn sync_policies(&mut self) {
        let wanted = self.policies.wanted_config_maps();
        let stale: Vec<(String, String)> = self
            .config_map_watchers
            .running
            .keys()
            .filter(|k| !wanted.contains(*k))
            .cloned()
            .collect();
        for k in stale {
            if let Some(h) = self.config_map_watchers.running.remove(&k) {
                h.abort();
            }
        }
        self.policies.prune_config_maps();
        for (ns, name) in wanted {
            if self
                .config_map_watchers
                .running
                .contains_key(&(ns.clone(), name.clone()))
            {
                continue;
            }
            // Read it now, so the module loads in this round rather than failing until the watch delivers.
            let api: Api<ConfigMap> = Api::namespaced(self.apis.client.clone(), &ns);
            match api.get_opt(&name).await {
                Ok(Some(cm)) => self.policies.config_map_changed(cm, false),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(namespace = %ns, name = %name, error = %e, "could not read a PolicyModule's ConfigMap")
                }
            }
            let Some(tx) = self
                .config_map_watchers
                .input
                .as_ref()
                .and_then(mpsc::WeakUnboundedSender::upgrade)
            else {
                continue;
            };
            let handle = spawn_watcher(
                api,
                watcher::Config::default().fields(&format!("metadata.name={name}")),
                tx,
                Input::ConfigMap,
                Input::Synced,
                "ConfigMap",
                Remember::Whole,
            );
            self.config_map_watchers.running.insert((ns, name), handle);
        }
        // Compiling can take a while: on a multi-threaded runtime, let other tasks move meanwhile.
        let policies = &mut self.policies;
        let notices = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| policies.load_pending())
            }
            _ => policies.load_pending(),
        };
        self.publish_notices(notices);
        if let Some(engine) = self.engine.as_mut() {
            let notices =
                self.policies
                    .route(&self.cache.cluster_queues, &self.cache.cohorts, engine);
            self.publish_notices(notices);
        }
    }

    /// Reports the modules' counters as metrics and writes the PolicyModule statuses that are due.
    pub(super) async fn write_policy_statuses(&mut self) {
        if !self.policies.any() {
            return;
        }
        let now = Instant::now();
        self.policies.report_metrics(&self.metrics);
        let (due, notices) = self.policies.due_statuses(now);
        self.publish_notices(notices);
        let api: Api<PolicyModule> = Api::all(self.apis.client.clone());
        for d in due {
            let wanted = d.status;
            let at = Time(k8s_openapi::jiff::Timestamp::now());
            let written = self
                .writer
                .update(&api, d.object, Endpoint::Status, |pm| {
                    let merged = merge_status(pm.status.as_ref(), &wanted, at.clone());
                    if pm.status.as_ref() == Some(&merged) {
                        return Ok(false);
                    }
                    pm.status = Some(merged);
                    Ok(true)
                })
                .await;
            match written {
                Ok(Some(obj)) => self.policies.status_written(obj, now),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "PolicyModule status not written"),
            }
        }
    }
}
