//! Prometheus metrics of the webhook (Kueue has none of its own for its webhooks, hence the `sluice_webhook_`
//! prefix).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a request: the hook's path and the result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    path: &'static str,
    result: &'static str,
}

/// Labels of a latency sample.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    path: &'static str,
}

/// Labels of a certificate reload.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

fn latency_histogram() -> Histogram {
    // 50 µs to ~3 s: webhook answers are sub-millisecond, the API server gives up at 10 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// The webhook's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    denials: Family<PathLabels, Counter>,
    latency: Family<PathLabels, Histogram, fn() -> Histogram>,
    reloads: Family<ReloadLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Fresh metrics, registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let denials = Family::<PathLabels, Counter>::default();
        let latency = Family::<PathLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "sluice_webhook_requests",
            "Webhook requests by path and result (allowed, patched, denied, invalid, converted, failed, rejected)",
            requests.clone(),
        );
        registry.register(
            "sluice_webhook_denials",
            "Admission requests refused (allowed=false) by path",
            denials.clone(),
        );
        registry.register(
            "sluice_webhook_request_duration_seconds",
            "Time to answer a webhook request, from the body read to the answer encoded",
            latency.clone(),
        );
        registry.register(
            "sluice_webhook_certificate_reloads",
            "Serving certificate reloads by result (loaded, failed)",
            reloads.clone(),
        );
        Self {
            registry,
            requests,
            denials,
            latency,
            reloads,
        }
    }

    /// Records one answered request.
    pub fn observe(&self, path: &'static str, result: &'static str, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { path, result })
            .inc();
        if matches!(result, "denied" | "invalid") {
            self.denials.get_or_create(&PathLabels { path }).inc();
        }
        self.latency
            .get_or_create(&PathLabels { path })
            .observe(elapsed.as_secs_f64());
    }

    /// Records a certificate reload attempt.
    pub fn reload(&self, ok: bool) {
        let result = if ok { "loaded" } else { "failed" };
        self.reloads.get_or_create(&ReloadLabels { result }).inc();
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_and_denials() {
        let m = Metrics::new();
        m.observe(
            "/validate-batch-v1-job",
            "denied",
            Duration::from_micros(300),
        );
        m.observe(
            "/validate-batch-v1-job",
            "allowed",
            Duration::from_micros(100),
        );
        let text = m.encode();
        assert!(
            text.contains(
                "sluice_webhook_requests_total{path=\"/validate-batch-v1-job\",result=\"denied\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("sluice_webhook_denials_total{path=\"/validate-batch-v1-job\"} 1"));
        assert!(text.contains(
            "sluice_webhook_request_duration_seconds_count{path=\"/validate-batch-v1-job\"} 2"
        ));
    }
}
