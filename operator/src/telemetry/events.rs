//! Kubernetes Events on admission, eviction and policy failure, published without blocking the engine.
//!
//! Events go through one bounded queue to a publisher task that keeps a few requests in flight, as client-go's
//! broadcaster does (Kueue's manager uses it): a burst of ten thousand admissions is neither ten thousand tasks
//! and connections at once nor unbounded memory, and an event that would overflow the queue is dropped (events
//! are best effort). Repeats of an event (same object, type, reason and action) within six minutes become a
//! series on the first one, as kube-runtime's recorder does, but the publisher remembers only the event's name
//! and count, for at most [`SERIES_KEPT`] keys; kube-runtime's recorder kept every event it sent, whole, for six
//! minutes (a seventh of the operator's heap in a 10,000-Job burst) and scanned them all on every publish.

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;

/// Event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventSeverity {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

impl EventSeverity {
    fn as_str(self) -> &'static str {
        match self {
            EventSeverity::Normal => "Normal",
            EventSeverity::Warning => "Warning",
        }
    }
}

/// Events waiting for the publisher; more are dropped (client-go's broadcaster queues 1,000).
pub const QUEUE: usize = 1000;
/// Requests the publisher keeps in flight.
pub const IN_FLIGHT: usize = 8;
/// Series keys remembered (client-go's correlator keeps 4,096).
pub const SERIES_KEPT: usize = 4096;
/// How long a repeat joins the first event's series (kube-runtime's recorder: six minutes).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// One event to publish.
#[derive(Debug)]
struct Pending {
    object: ObjectReference,
    severity: EventSeverity,
    reason: String,
    action: String,
    note: String,
}

/// What makes two events one series.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding: (String, String, String, String, String),
    severity: EventSeverity,
    reason: String,
    action: String,
}

impl SeriesKey {
    fn of(p: &Pending) -> Self {
        let o = &p.object;
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        SeriesKey {
            regarding: (
                s(&o.api_version),
                s(&o.kind),
                s(&o.namespace),
                s(&o.name),
                s(&o.uid),
            ),
            severity: p.severity,
            reason: p.reason.clone(),
            action: p.action.clone(),
        }
    }
}

/// The first event of a series: its name, how many it counts, and when it was last seen.
#[derive(Clone, Debug)]
struct Series {
    name: String,
    count: i32,
    last: Timestamp,
}

/// Series keys and their first events, bounded in number and age.
#[derive(Debug, Default)]
struct SeriesCache {
    map: HashMap<SeriesKey, Series>,
}

impl SeriesCache {
    /// The series an event joins at `now` (its count raised), if a live one exists.
    fn join(&mut self, key: &SeriesKey, now: Timestamp) -> Option<Series> {
        let s = self.map.get_mut(key)?;
        if s.last + SERIES_WINDOW <= now {
            self.map.remove(key);
            return None;
        }
        s.count = s.count.saturating_add(1);
        s.last = now;
        Some(s.clone())
    }

    /// Remembers a new first event, making room by dropping expired series, then the oldest half.
    fn start(&mut self, key: SeriesKey, name: String, now: Timestamp) {
        if self.map.len() >= SERIES_KEPT {
            self.map.retain(|_, s| s.last + SERIES_WINDOW > now);
        }
        if self.map.len() >= SERIES_KEPT {
            let mut times: Vec<Timestamp> = self.map.values().map(|s| s.last).collect();
            times.sort_unstable();
            let cut = times[times.len() / 2];
            self.map.retain(|_, s| s.last > cut);
        }
        self.map.insert(
            key,
            Series {
                name,
                count: 1,
                last: now,
            },
        );
    }
}

/// Publishes events (events.k8s.io/v1) in the background; a failed publish is logged, never retried.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Pending>,
    /// `sluice_events_dropped_total`.
    dropped: Counter,
}

impl EventRecorder {
    /// A recorder reporting as `controller` (instance `instance`), counting drops in `dropped`; its publisher runs
    /// on the current Tokio runtime.
    pub fn new(
        client: kube::Client,
        controller: &str,
        instance: Option<String>,
        dropped: Counter,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let controller = controller.to_string();
        let instance = instance.unwrap_or_else(|| controller.clone());
        tokio::spawn(publisher(client, controller, instance, rx));
        Self { tx, dropped }
    }

    /// Queues an event about `object`; drops it when the queue is full.
    pub fn publish(
        &self,
        object: ObjectReference,
        severity: EventSeverity,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let p = Pending {
            object,
            severity,
            reason: reason.to_string(),
            action: action.to_string(),
            note,
        };
        if let Err(e) = self.tx.try_send(p) {
            let n = self.dropped.inc();
            // One line per thousand drops: a burst must not flood the log either.
            if n.is_multiple_of(1000) {
                tracing::warn!(dropped = n + 1, error = %e, "event queue full; events dropped");
            }
        }
    }
}

/// The request an event becomes: a new Event, or a merge patch raising the series of an earlier one.
#[derive(Debug, PartialEq)]
enum Request {
    Create(Box<K8sEvent>),
    Series {
        namespace: String,
        name: String,
        series: EventSeries,
    },
}

/// Decides the request for `p` at `now`, recording it in `cache`.
fn request_for(
    p: Pending,
    cache: &mut SeriesCache,
    controller: &str,
    instance: &str,
    now: Timestamp,
) -> Request {
    let namespace = p
        .object
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let key = SeriesKey::of(&p);
    if let Some(s) = cache.join(&key, now) {
        return Request::Series {
            namespace,
            name: s.name,
            series: EventSeries {
                count: s.count,
                last_observed_time: MicroTime(now),
            },
        };
    }
    let name = format!(
        "{}.{:x}",
        p.object.name.as_deref().unwrap_or(controller),
        now.as_nanosecond()
    );
    cache.start(key, name.clone(), now);
    Request::Create(Box::new(K8sEvent {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            ..Default::default()
        },
        action: Some(p.action),
        reason: Some(p.reason),
        note: Some(p.note),
        event_time: Some(MicroTime(now)),
        regarding: Some(p.object),
        reporting_controller: Some(controller.to_string()),
        reporting_instance: Some(instance.to_string()),
        type_: Some(p.severity.as_str().to_string()),
        ..Default::default()
    }))
}

async fn send(client: kube::Client, r: Request) -> Result<(), kube::Error> {
    match r {
        Request::Create(ev) => {
            let ns = ev.metadata.namespace.clone().unwrap_or_default();
            let api: Api<K8sEvent> = Api::namespaced(client, &ns);
            api.create(&PostParams::default(), &ev).await.map(drop)
        }
        Request::Series {
            namespace,
            name,
            series,
        } => {
            let api: Api<K8sEvent> = Api::namespaced(client, &namespace);
            let patch = serde_json::json!({ "series": series });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
        }
    }
}

async fn publisher(
    client: kube::Client,
    controller: String,
    instance: String,
    rx: mpsc::Receiver<Pending>,
) {
    let mut cache = SeriesCache::default();
    tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|p| {
            let reason = p.reason.clone();
            let r = request_for(p, &mut cache, &controller, &instance, Timestamp::now());
            let client = client.clone();
            async move {
                if let Err(e) = send(client, r).await {
                    tracing::debug!(error = %e, %reason, "could not publish event");
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .for_each(|()| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(name: &str, reason: &str) -> Pending {
        Pending {
            object: ObjectReference {
                api_version: Some("kueue.x-k8s.io/v1beta2".into()),
                kind: Some("Workload".into()),
                namespace: Some("team-a".into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            severity: EventSeverity::Normal,
            reason: reason.into(),
            action: "Admission".into(),
            note: "note".into(),
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("time")
    }

    #[test]
    fn a_repeat_within_the_window_raises_the_first_events_series() {
        let mut c = SeriesCache::default();
        let first = request_for(pending("a", "QuotaReserved"), &mut c, "ctl", "i", at(0));
        let Request::Create(ev) = first else {
            panic!("first is a create: {first:?}")
        };
        assert_eq!(ev.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(ev.reason.as_deref(), Some("QuotaReserved"));
        assert_eq!(ev.reporting_instance.as_deref(), Some("i"));
        let second = request_for(pending("a", "QuotaReserved"), &mut c, "ctl", "i", at(60));
        assert_eq!(
            second,
            Request::Series {
                namespace: "team-a".into(),
                name: ev.metadata.name.clone().expect("name"),
                series: EventSeries {
                    count: 2,
                    last_observed_time: MicroTime(at(60)),
                },
            }
        );
        // Another reason, or another object, is another event.
        assert!(matches!(
            request_for(pending("a", "Admitted"), &mut c, "ctl", "i", at(61)),
            Request::Create(_)
        ));
        assert!(matches!(
            request_for(pending("b", "QuotaReserved"), &mut c, "ctl", "i", at(61)),
            Request::Create(_)
        ));
        // Six minutes after the last repeat the series is over.
        assert!(matches!(
            request_for(
                pending("a", "QuotaReserved"),
                &mut c,
                "ctl",
                "i",
                at(60 + 360)
            ),
            Request::Create(_)
        ));
    }

    #[test]
    fn the_series_cache_stays_bounded() {
        let mut c = SeriesCache::default();
        for i in 0..3 * SERIES_KEPT {
            let _ = request_for(
                pending(&format!("w{i}"), "QuotaReserved"),
                &mut c,
                "ctl",
                "i",
                // All within one window: only the halving can bound the cache.
                Timestamp::from_millisecond(1_800_000_000_000 + i as i64).expect("time"),
            );
            assert!(c.map.len() <= SERIES_KEPT, "{} keys kept", c.map.len());
        }
        // The newest keys are the ones kept.
        let newest = pending(&format!("w{}", 3 * SERIES_KEPT - 1), "QuotaReserved");
        assert!(c.map.contains_key(&SeriesKey::of(&newest)));
    }
}
