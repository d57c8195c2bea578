//! Kubernetes Events on admission, eviction and policy failure, published without blocking the engine.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventSeverity {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// Publishes events (events.k8s.io/v1) in the background; a failed publish is logged, never retried.
#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
}

impl EventRecorder {
    /// A recorder reporting as `controller` (instance `instance`).
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        Self {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: controller.to_string(),
                    instance,
                },
            ),
        }
    }

    /// Publishes an event about `object` from a spawned task.
    pub fn publish(
        &self,
        object: ObjectReference,
        severity: EventSeverity,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let recorder = self.recorder.clone();
        let event = Event {
            type_: match severity {
                EventSeverity::Normal => EventType::Normal,
                EventSeverity::Warning => EventType::Warning,
            },
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &object).await {
                tracing::debug!(error = %e, reason = %event.reason, "could not publish event");
            }
        });
    }
}
