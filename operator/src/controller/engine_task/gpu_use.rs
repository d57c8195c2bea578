//! GPU use per Workload and ClusterQueue, exported as metrics: the agents' NodeGpuTopology status joined
//! with the pods holding the GPUs and the admitted Workloads (see `crate::gpu_use`).

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{EngineTask, now_ms};

/// The shortest time between two computations: agents' reports arrive node by node, so a burst is
/// joined once.
const GPU_USE_EVERY_MS: i64 = 1_000;

impl EngineTask {
    /// Something the GPU-use join reads changed: recompute soon.
    pub(super) fn gpu_use_changed(&mut self) {
        if self.gpu_use_due.is_none() {
            self.gpu_use_due = Some(now_ms().max(self.gpu_use_at + GPU_USE_EVERY_MS));
        }
    }

    /// Follows the pods that request GPUs (only they can hold one).
    pub(super) fn absorb_gpu_pod(&mut self, pod: &Pod, deleted: bool) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        let had = if deleted || !crate::gpu_use::requests_gpus(pod) {
            self.cache.gpu_pods.remove(&key).is_some()
        } else {
            self.cache
                .gpu_pods
                .insert(key, crate::gpu_use::pod_uids(pod))
                .is_none()
        };
        if had {
            self.gpu_use_changed();
        }
    }

    /// Exports GPU use per Workload and ClusterQueue when it is due.
    pub(super) fn export_gpu_use(&mut self) {
        let now = now_ms();
        if self.gpu_use_due.is_none_or(|t| t > now) {
            return;
        }
        self.gpu_use_due = None;
        self.gpu_use_at = now;
        let admitted = crate::gpu_use::admitted_by_owner(self.cache.workloads.values());
        let joined = crate::gpu_use::join(
            self.cache.node_gpus.values(),
            &self.cache.gpu_pods,
            &admitted,
        );
        self.metrics.gpu_use(&joined);
    }
}
