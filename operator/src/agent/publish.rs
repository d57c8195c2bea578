//! The two writes the agent makes, as plain HTTP requests: a server-side apply of its
//! NodeGpuTopology and a merge patch of the node's GFD labels. Built here, sent by any client.

use http::{Method, Request};
use sluice_sdk::topology::NodeGpus;

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
