//! What the operator tells the outside world: Prometheus metrics, health endpoints and Kubernetes Events.

mod events;
mod metrics;
mod reporters;
mod server;

pub use events::{EventRecorder, EventSeverity};
pub use metrics::{GpuReporter, Labels, Metrics, PolicyReporter, SharedMetrics};
pub use reporters::{QueueResource, ResourceSeries};
pub use server::{Health, health_router, serve_health_and_metrics};
