//! The two writes the agent makes, as plain HTTP requests: a server-side apply of its
//! NodeGpuTopology and a merge patch of the node's GFD labels. Built here, sent by any client.

use http::{Method, Request};
use sluice_sdk::topology::NodeGpus;

use sluice_sdk::sluice::node_gpu_topology::NodeGpuTopologyStatus;

use super::{gfd_labels, node_gpu_topology};

/// Field manager name of the agent's server-side applies.
pub const FIELD_MANAGER: &str = "sluice-node-agent";

/// Server-side apply of the node's NodeGpuTopology (cluster-scoped, named after the node).
pub fn apply_topology(node: &str, model: &NodeGpus) -> Result<Request<Vec<u8>>, String> {
    let obj = node_gpu_topology(node, model.clone());
    let body = serde_json::to_vec(&obj).map_err(|e| e.to_string())?;
    Request::builder()
        .method(Method::PATCH)
        .uri(format!(
            "/apis/sluice.dev/v1alpha1/nodegputopologies/{node}?fieldManager={FIELD_MANAGER}&force=true"
        ))
        .header("content-type", "application/apply-patch+yaml")
        .body(body)
        .map_err(|e| e.to_string())
}

/// Server-side apply of the NodeGpuTopology's status (the GPUs' use and holders).
pub fn apply_status(
    node: &str,
    status: &NodeGpuTopologyStatus,
) -> Result<Request<Vec<u8>>, String> {
    let body = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "NodeGpuTopology",
        "metadata": {"name": node},
        "status": status,
    }))
    .map_err(|e| e.to_string())?;
    Request::builder()
        .method(Method::PATCH)
        .uri(format!(
            "/apis/sluice.dev/v1alpha1/nodegputopologies/{node}/status?fieldManager={FIELD_MANAGER}&force=true"
        ))
        .header("content-type", "application/apply-patch+yaml")
        .body(body)
        .map_err(|e| e.to_string())
}

/// GPU utilisation points a GPU must move before its status is sent again (the use is sampled, so
/// every small wobble would be a write per node per interval).
pub const USAGE_STEP_PERCENT: u32 = 10;

/// Whether `new` differs from `old` enough to send: holders changed, a GPU appeared or went, or a
/// GPU's utilisation or memory moved by at least [`USAGE_STEP_PERCENT`] (memory: of the old value,
/// at least 1 GiB).
pub fn status_changed(old: &NodeGpuTopologyStatus, new: &NodeGpuTopologyStatus) -> bool {
    if old.gpus.len() != new.gpus.len() {
        return true;
    }
    old.gpus.iter().zip(&new.gpus).any(|(a, b)| {
        let util = match (a.utilization, b.utilization) {
            (Some(x), Some(y)) => x.abs_diff(y) >= USAGE_STEP_PERCENT,
            (x, y) => x.is_some() != y.is_some(),
        };
        let mem = match (a.memory_used_mib, b.memory_used_mib) {
            (Some(x), Some(y)) => {
                x.abs_diff(y) >= (x * u64::from(USAGE_STEP_PERCENT) / 100).max(1024)
            }
            (x, y) => x.is_some() != y.is_some(),
        };
        a.uuid != b.uuid || a.holders != b.holders || util || mem
    })
}

/// Merge patch setting GFD's labels on the node (a missing clique removes a stale label).
pub fn patch_node_labels(node: &str, model: &NodeGpus) -> Result<Request<Vec<u8>>, String> {
    let mut labels = serde_json::Map::new();
    for (k, v) in gfd_labels(model) {
        labels.insert(k, serde_json::Value::String(v));
    }
    let clique = sluice_sdk::topology::gfd::GPU_CLIQUE;
    labels.entry(clique).or_insert(serde_json::Value::Null);
    let body = serde_json::json!({"metadata": {"labels": labels}});
    Request::builder()
        .method(Method::PATCH)
        .uri(format!("/api/v1/nodes/{node}"))
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(&body).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())
}

/// What one [`Publisher::publish`] sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sent {
    /// The NodeGpuTopology was applied.
    pub topology: bool,
    /// The node's labels were patched.
    pub labels: bool,
    /// The status (GPU use and holders) was applied.
    pub status: bool,
}

/// Why a publish failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The request could not be built (the model does not serialise).
    #[error("node {node}: building the {what} request: {message}")]
    Build {
        /// Node.
        node: String,
        /// Which write.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The API server refused or could not be reached.
    #[error("node {node}: {what}: {error}{hint}")]
    Api {
        /// Node.
        node: String,
        /// Which write.
        what: &'static str,
        /// The client's error.
        error: kube::Error,
        /// What usually causes it.
        hint: &'static str,
    },
}

/// Sends the agent's two writes and remembers what the API server last accepted, so an unchanged model
/// is not sent again until `resync` has passed (a periodic apply repairs an object someone deleted or edited).
pub struct Publisher {
    client: kube::Client,
    node: String,
    resync: std::time::Duration,
    topology: Option<(NodeGpus, std::time::Instant)>,
    labels: Option<(
        std::collections::BTreeMap<String, String>,
        std::time::Instant,
    )>,
    status: Option<(NodeGpuTopologyStatus, std::time::Instant)>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("node", &self.node)
            .field("resync", &self.resync)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher for `node` that re-sends unchanged data every `resync`.
    pub fn new(client: kube::Client, node: &str, resync: std::time::Duration) -> Self {
        Self {
            client,
            node: node.to_string(),
            resync,
            topology: None,
            labels: None,
            status: None,
        }
    }

    /// Publishes `model` as of `now`: each write is sent when its content changed since the last accepted
    /// one, or when `resync` has passed. A failed write is retried on the next call.
    pub async fn publish(
        &mut self,
        model: &NodeGpus,
        now: std::time::Instant,
    ) -> Result<Sent, PublishError> {
        let mut sent = Sent::default();
        let resync = self.resync;
        let due = move |at: std::time::Instant| now.saturating_duration_since(at) >= resync;
        if self
            .topology
            .as_ref()
            .is_none_or(|(m, at)| m != model || due(*at))
        {
            let req = apply_topology(&self.node, model).map_err(|message| PublishError::Build {
                node: self.node.clone(),
                what: "NodeGpuTopology apply",
                message,
            })?;
            self.send(req, "applying its NodeGpuTopology").await?;
            self.topology = Some((model.clone(), now));
            sent.topology = true;
        }
        let labels = gfd_labels(model);
        if self
            .labels
            .as_ref()
            .is_none_or(|(l, at)| *l != labels || due(*at))
        {
            let req =
                patch_node_labels(&self.node, model).map_err(|message| PublishError::Build {
                    node: self.node.clone(),
                    what: "node label patch",
                    message,
                })?;
            self.send(req, "patching its nvidia.com/gpu.* labels")
                .await?;
            self.labels = Some((labels, now));
            sent.labels = true;
        }
        Ok(sent)
    }

    /// Publishes the GPUs' use as of `now` when it moved enough ([`status_changed`]) or `resync` has
    /// passed. Called after [`Publisher::publish`], which creates the object the status belongs to.
    pub async fn publish_status(
        &mut self,
        status: &NodeGpuTopologyStatus,
        now: std::time::Instant,
    ) -> Result<bool, PublishError> {
        let resync = self.resync;
        let due = self.status.as_ref().is_none_or(|(old, at)| {
            status_changed(old, status) || now.saturating_duration_since(*at) >= resync
        });
        if !due {
            return Ok(false);
        }
        let req = apply_status(&self.node, status).map_err(|message| PublishError::Build {
            node: self.node.clone(),
            what: "NodeGpuTopology status apply",
            message,
        })?;
        self.send(req, "applying its NodeGpuTopology status")
            .await?;
        self.status = Some((status.clone(), now));
        Ok(true)
    }

    async fn send(&self, req: Request<Vec<u8>>, what: &'static str) -> Result<(), PublishError> {
        match self.client.request::<serde_json::Value>(req).await {
            Ok(_) => Ok(()),
            Err(source) => {
                let hint = match &source {
                    kube::Error::Api(s) if s.code == 404 && what.starts_with("applying") => {
                        " (is the NodeGpuTopology CRD installed? `sluice crds | kubectl apply -f -` or the chart installs it)"
                    }
                    kube::Error::Api(s) if s.code == 404 => {
                        " (no Node object of that name: check --node-name / NODE_NAME)"
                    }
                    kube::Error::Api(s) if s.code == 403 => {
                        " (the agent's ServiceAccount lacks the permission: see the chart's node-agent ClusterRole)"
                    }
                    _ => "",
                };
                Err(PublishError::Api {
                    node: self.node.clone(),
                    what,
                    error: source,
                    hint,
                })
            }
        }
    }
}
