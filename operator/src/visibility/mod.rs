//! Kueue's visibility API (`visibility.kueue.x-k8s.io/v1beta2`): the pending workloads of a ClusterQueue or a
//! LocalQueue with their positions, served from the snapshot the engine task publishes after each cycle.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// API group/version of the visibility API.
pub const API_VERSION: &str = "visibility.kueue.x-k8s.io/v1beta2";
/// Kueue's default page size.
pub const DEFAULT_LIMIT: i64 = 1000;

/// A pending workload (Kueue's `PendingWorkload`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkload {
    /// Name, namespace and creation time.
    pub metadata: ObjectMeta,
    /// Priority.
    pub priority: i32,
    /// LocalQueue name.
    pub local_queue_name: String,
    /// 0-based position in its ClusterQueue.
    pub position_in_cluster_queue: i32,
    /// 0-based position in its LocalQueue.
    pub position_in_local_queue: i32,
}

/// Kueue's `PendingWorkloadsSummary`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingWorkloadsSummary {
    /// `visibility.kueue.x-k8s.io/v1beta2`.
    pub api_version: String,
    /// `PendingWorkloadsSummary`.
    pub kind: String,
    /// Empty metadata.
    pub metadata: ObjectMeta,
    /// The page of pending workloads.
    pub items: Vec<PendingWorkload>,
}

/// One pending workload in the engine's queue order.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingEntry {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// LocalQueue.
    pub local_queue: String,
    /// Priority.
    pub priority: i32,
    /// Creation time (ms since the epoch).
    pub created: i64,
}

/// Pending workloads per ClusterQueue, in queue order, as of the last cycle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// ClusterQueue name -> pending workloads in order.
    pub cluster_queues: BTreeMap<String, Vec<PendingEntry>>,
    /// (namespace, LocalQueue) -> its ClusterQueue.
    pub local_queues: BTreeMap<(String, String), String>,
}

impl Snapshot {
    fn item(e: &PendingEntry, in_cq: usize, in_lq: usize) -> PendingWorkload {
        PendingWorkload {
            metadata: ObjectMeta {
                name: Some(e.name.clone()),
                namespace: Some(e.namespace.clone()),
                creation_timestamp: Some(Time(crate::status::k8s_time(e.created).0)),
                ..Default::default()
            },
            priority: e.priority,
            local_queue_name: e.local_queue.clone(),
            position_in_cluster_queue: in_cq as i32,
            position_in_local_queue: in_lq as i32,
        }
    }

    /// All pending workloads of a ClusterQueue with positions (None for an unknown ClusterQueue).
    pub fn cluster_queue(&self, name: &str) -> Option<Vec<PendingWorkload>> {
        let entries = self.cluster_queues.get(name)?;
        let mut lq_pos: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        Some(
            entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let p = lq_pos.entry((&e.namespace, &e.local_queue)).or_default();
                    let item = Self::item(e, i, *p);
                    *p += 1;
                    item
                })
                .collect(),
        )
    }

    /// Pending workloads of a LocalQueue with positions (None for an unknown LocalQueue).
    pub fn local_queue(&self, namespace: &str, name: &str) -> Option<Vec<PendingWorkload>> {
        let cq = self
            .local_queues
            .get(&(namespace.to_string(), name.to_string()))?;
        Some(
            self.cluster_queue(cq)
                .unwrap_or_default()
                .into_iter()
                .filter(|w| {
                    w.metadata.namespace.as_deref() == Some(namespace) && w.local_queue_name == name
                })
                .collect(),
        )
    }
}

/// The snapshot shared between the engine task (writer) and the server (reader).
#[derive(Clone, Default)]
pub struct SharedSnapshot(Arc<RwLock<Arc<Snapshot>>>);

impl SharedSnapshot {
    /// Replaces the snapshot.
    pub fn publish(&self, s: Snapshot) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(s);
    }

    /// The current snapshot.
    pub fn get(&self) -> Arc<Snapshot> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Kueue's `PendingWorkloadOptions`.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub struct Page {
    /// Items to skip.
    #[serde(default)]
    pub offset: i64,
    /// Items to return (Kueue's default 1000).
    #[serde(default)]
    pub limit: Option<i64>,
}

fn summary(items: Vec<PendingWorkload>, page: Page) -> PendingWorkloadsSummary {
    let offset = page.offset.max(0) as usize;
    let limit = page.limit.filter(|l| *l > 0).unwrap_or(DEFAULT_LIMIT) as usize;
    PendingWorkloadsSummary {
        api_version: API_VERSION.to_string(),
        kind: "PendingWorkloadsSummary".to_string(),
        metadata: ObjectMeta::default(),
        items: items.into_iter().skip(offset).take(limit).collect(),
    }
}

fn not_found(what: String) -> (StatusCode, Json<serde_json::Value>) {
    (
        StatusCode::NOT_FOUND,
        Json(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": format!("{what} not found"),
        })),
    )
}

async fn cq_pending(
    State(s): State<SharedSnapshot>,
    Path(name): Path<String>,
    Query(page): Query<Page>,
) -> axum::response::Response {
    match s.get().cluster_queue(&name) {
        Some(items) => Json(summary(items, page)).into_response(),
        None => not_found(format!("clusterqueues.kueue.x-k8s.io \"{name}\"")).into_response(),
    }
}

async fn lq_pending(
    State(s): State<SharedSnapshot>,
    Path((namespace, name)): Path<(String, String)>,
    Query(page): Query<Page>,
) -> axum::response::Response {
    match s.get().local_queue(&namespace, &name) {
        Some(items) => Json(summary(items, page)).into_response(),
        None => not_found(format!("localqueues.kueue.x-k8s.io \"{name}\"")).into_response(),
    }
}

/// The router serving Kueue's visibility paths.
pub fn router(snapshot: SharedSnapshot) -> Router {
    Router::new()
        .route(
            "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{name}/pendingworkloads",
            get(cq_pending),
        )
        .route(
            "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{name}/pendingworkloads",
            get(lq_pending),
        )
        .with_state(snapshot)
}

/// Serves the visibility API on `addr`.
pub async fn serve(addr: SocketAddr, snapshot: SharedSnapshot) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(snapshot)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ns: &str, name: &str, lq: &str) -> PendingEntry {
        PendingEntry {
            namespace: ns.into(),
            name: name.into(),
            local_queue: lq.into(),
            priority: 0,
            created: 1_000,
        }
    }

    #[test]
    fn positions_count_per_cluster_queue_and_per_local_queue() {
        let s = Snapshot {
            cluster_queues: BTreeMap::from([(
                "cq".to_string(),
                vec![
                    entry("a", "w1", "lq"),
                    entry("b", "w2", "lq"),
                    entry("a", "w3", "lq"),
                ],
            )]),
            local_queues: BTreeMap::from([(("a".to_string(), "lq".to_string()), "cq".to_string())]),
        };
        let lq = s.local_queue("a", "lq").unwrap();
        let pos: Vec<_> = lq
            .iter()
            .map(|w| (w.position_in_cluster_queue, w.position_in_local_queue))
            .collect();
        assert_eq!(pos, vec![(0, 0), (2, 1)]);
        let page = summary(
            s.cluster_queue("cq").unwrap(),
            Page {
                offset: 1,
                limit: Some(1),
            },
        );
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0].metadata.name.as_deref(), Some("w2"));
        assert!(s.cluster_queue("nope").is_none());
    }
}
