//! Pods of topology-aware pod sets: the scheduling gate lifted with each pod's domain node selector.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use super::EngineTask;
use crate::controller::objects::*;
use crate::controller::tas;
use crate::controller::writer::Endpoint;
use crate::engine::WorkloadKey;

impl EngineTask {
    /// Lifts the topology gate from the workload's gated pods, each with its domain's node selector; returns
    /// whether any pod was written.
    pub(super) async fn ungate_pods(&mut self, key: &WorkloadKey) -> bool {
        let Some(wl) = self.cache.workloads.get(key) else {
            return false;
        };
        if !is_admitted(wl) {
            return false;
        }
        let pods: Vec<&Pod> = self
            .cache
            .pods
            .values()
            .filter(|p| {
                tas::pod_workload(p).is_some_and(|(ns, w)| ns == key.namespace && w == key.name)
            })
            .collect();
        let plan = match tas::plan_ungates(wl, &pods) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(workload = %key, error = %e, "pods not ungated");
                return false;
            }
        };
        let mut wrote = false;
        for (name, selector) in plan {
            let pkey = (key.namespace.clone(), name);
            let Some(cached) = self.cache.pods.get(&pkey).cloned() else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(self.apis.client.clone(), &pkey.0);
            let result = self
                .writer
                .update(&api, cached, Endpoint::Main, |p| {
                    if !tas::is_gated(p) {
                        return Ok(false);
                    }
                    let spec = p.spec.get_or_insert_with(Default::default);
                    crate::jobs::topology::ungate(spec, &selector)?;
                    Ok(true)
                })
                .await;
            match result {
                Ok(Some(p)) => {
                    wrote = true;
                    self.cache.pods.insert(pkey, p);
                }
                Ok(None) => {
                    self.cache.pods.remove(&pkey);
                }
                Err(e) => tracing::error!(pod = %pkey.1, error = %e, "pod ungate failed"),
            }
        }
        wrote
    }
}
