//! Prometheus metrics under Kueue's names and labels, plus Sluice's own `sluice_` families.
//!
//! Counters are registered without `_total`: the exposition format appends it, so `kueue_admitted_workloads`
//! is served as `kueue_admitted_workloads_total`, Kueue's name.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set: (name, value) pairs in Kueue's label order.
pub type Labels = Vec<(&'static str, String)>;

type Hist = Family<Labels, Histogram, fn() -> Histogram>;

/// Kueue's wait-time buckets for `count` buckets: 1, then 2.5 doubling.
fn kueue_buckets(count: u16) -> Vec<f64> {
    std::iter::once(1.0)
        .chain(exponential_buckets(2.5, 2.0, count - 1))
        .collect()
}

fn buckets14() -> Histogram {
    Histogram::new(kueue_buckets(14))
}

fn buckets16() -> Histogram {
    Histogram::new(kueue_buckets(16))
}

fn latency_buckets() -> Histogram {
    // 100µs to ~3s: scheduling cycles and policy calls.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// Where policy modules report their calls (implemented by [`Metrics`]; the policy registry holds a
/// `dyn PolicyReporter`).
pub trait PolicyReporter: Send + Sync {
    /// One call of a policy module's hook: outcome is "ok", "error" or "timeout".
    fn policy_call(&self, module: &str, hook: &str, outcome: &str, seconds: f64);
    /// The built-in behaviour was used because the module failed.
    fn policy_fallback(&self, module: &str, reason: &str);
}

/// Where GPU topology and health reports go (implemented by [`Metrics`]).
pub trait GpuReporter: Send + Sync {
    /// A node's GPUs: total, free (not held by admitted pods) and unhealthy.
    fn node_gpus(&self, node: &str, total: i64, free: i64, unhealthy: i64);
    /// A node left the cluster: its series go away.
    fn node_removed(&self, node: &str);
}

/// The operator's metrics.
pub struct Metrics {
    registry: Registry,
    /// kueue_admission_attempts_total{result,replica_role}.
    pub admission_attempts: Family<Labels, Counter>,
    /// kueue_admission_attempt_duration_seconds{result,replica_role}.
    pub admission_attempt_duration: Hist,
    /// kueue_pending_workloads{cluster_queue,status,replica_role}.
    pub pending_workloads: Family<Labels, Gauge>,
    /// kueue_reserving_active_workloads{cluster_queue,replica_role}.
    pub reserving_active_workloads: Family<Labels, Gauge>,
    /// kueue_admitted_active_workloads{cluster_queue,replica_role}.
    pub admitted_active_workloads: Family<Labels, Gauge>,
    /// kueue_quota_reserved_workloads_total{cluster_queue,priority_class,replica_role}.
    pub quota_reserved_workloads: Family<Labels, Counter>,
    /// kueue_quota_reserved_wait_time_seconds{cluster_queue,priority_class,replica_role}.
    pub quota_reserved_wait_time: Hist,
    /// kueue_admitted_workloads_total{cluster_queue,priority_class,replica_role}.
    pub admitted_workloads: Family<Labels, Counter>,
    /// kueue_admission_wait_time_seconds{cluster_queue,priority_class,replica_role}.
    pub admission_wait_time: Hist,
    /// kueue_evicted_workloads_total{cluster_queue,reason,underlying_cause,priority_class,replica_role}.
    pub evicted_workloads: Family<Labels, Counter>,
    /// kueue_preempted_workloads_total{preempting_cluster_queue,reason,replica_role}.
    pub preempted_workloads: Family<Labels, Counter>,
    /// kueue_finished_workloads_total{cluster_queue,priority_class,replica_role}.
    pub finished_workloads: Family<Labels, Counter>,
    /// kueue_cluster_queue_resource_usage{cohort,cluster_queue,flavor,resource,replica_role}.
    pub cluster_queue_resource_usage: Family<Labels, Gauge>,
    /// kueue_cluster_queue_resource_reservation{cohort,cluster_queue,flavor,resource,replica_role}.
    pub cluster_queue_resource_reservation: Family<Labels, Gauge>,
    /// kueue_cluster_queue_nominal_quota{cohort,cluster_queue,flavor,resource,replica_role}.
    pub cluster_queue_nominal_quota: Family<Labels, Gauge>,
    /// kueue_cluster_queue_status{cluster_queue,status,replica_role}: 1 for the current status.
    pub cluster_queue_status: Family<Labels, Gauge>,
    /// kueue_cluster_queue_weighted_share{cluster_queue,cohort,replica_role} (fair sharing).
    pub cluster_queue_weighted_share: Family<Labels, Gauge>,
    /// sluice_scheduling_cycle_seconds: one engine cycle including its API writes.
    pub cycle_seconds: Histogram,
    /// sluice_api_write_retries_total{verb,reason}: writes retried after a conflict or an API error.
    pub api_write_retries: Family<Labels, Counter>,
    /// sluice_watch_events_total{kind}: watch events absorbed.
    pub watch_events: Family<Labels, Counter>,
    /// sluice_events_dropped_total: Kubernetes Events dropped because the publisher's queue was full.
    pub events_dropped: Counter,
    /// sluice_checkpoint_wait_seconds{cluster_queue,outcome}: how long a preemption waited for a checkpoint.
    pub checkpoint_wait: Hist,
    /// sluice_policy_calls_total{module,hook,outcome}.
    pub policy_calls: Family<Labels, Counter>,
    /// sluice_policy_call_seconds{module,hook}.
    pub policy_call_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    /// sluice_policy_fallbacks_total{module,reason}.
    pub policy_fallbacks: Family<Labels, Counter>,
    /// sluice_policy_module_calls_total{module,outcome}: calls of a loaded PolicyModule, outcome "ok" or the
    /// failure class (trap, deadline, memory, malformed, rejected; degraded: skipped while degraded).
    pub policy_module_calls: Family<Labels, Counter>,
    /// sluice_policy_degraded{module}: 1 while a loaded PolicyModule is Degraded.
    pub policy_degraded: Family<Labels, Gauge>,
    /// sluice_node_gpus{node,state}: state is total, free or unhealthy.
    pub node_gpus: Family<Labels, Gauge>,
    /// sluice_leader: 1 while this replica holds the lease.
    pub leader: Gauge,
    /// sluice_workload_gpu_utilization{namespace,workload,cluster_queue}: mean utilisation (percent) of the
    /// GPUs an admitted Workload's pods hold, as the node agents report it.
    pub workload_gpu_utilization: Family<Labels, FloatGauge>,
    /// sluice_clusterqueue_gpus_held{cluster_queue}: GPUs its admitted Workloads' pods hold.
    pub clusterqueue_gpus_held: Family<Labels, FloatGauge>,
    /// sluice_clusterqueue_gpus_busy{cluster_queue}: busy GPU-equivalents among them (each held GPU times its
    /// utilisation).
    pub clusterqueue_gpus_busy: Family<Labels, FloatGauge>,
}

/// A gauge holding a float.
pub type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let mut counter = |name: &str, help: &str| {
            let f = Family::<Labels, Counter>::default();
            registry.register(name, help, f.clone());
            f
        };
        let admission_attempts = counter(
            "kueue_admission_attempts",
            "Total number of attempts to admit workloads, by result",
        );
        let quota_reserved_workloads = counter(
            "kueue_quota_reserved_workloads",
            "Total number of quota reserved workloads per cluster_queue",
        );
        let admitted_workloads = counter(
            "kueue_admitted_workloads",
            "Total number of admitted workloads per cluster_queue",
        );
        let evicted_workloads = counter(
            "kueue_evicted_workloads",
            "Number of evicted workloads per cluster_queue, by reason",
        );
        let preempted_workloads = counter(
            "kueue_preempted_workloads",
            "Number of preempted workloads per preempting_cluster_queue, by reason",
        );
        let finished_workloads = counter(
            "kueue_finished_workloads",
            "Total number of finished workloads per cluster_queue",
        );
        let api_write_retries = counter(
            "sluice_api_write_retries",
            "API writes retried after a conflict or an API error",
        );
        let watch_events = counter("sluice_watch_events", "Watch events absorbed, by kind");
        let policy_calls = counter("sluice_policy_calls", "Policy module calls, by outcome");
        let policy_fallbacks = counter(
            "sluice_policy_fallbacks",
            "Built-in behaviour used because a policy module failed",
        );
        let policy_module_calls = counter(
            "sluice_policy_module_calls",
            "Calls of loaded PolicyModules in the operator, by outcome (ok or failure class)",
        );
        let mut gauge = |name: &str, help: &str| {
            let f = Family::<Labels, Gauge>::default();
            registry.register(name, help, f.clone());
            f
        };
        let pending_workloads = gauge(
            "kueue_pending_workloads",
            "Number of pending workloads, per cluster_queue and status (active, inadmissible)",
        );
        let reserving_active_workloads = gauge(
            "kueue_reserving_active_workloads",
            "Number of workloads reserving quota, per cluster_queue",
        );
        let admitted_active_workloads = gauge(
            "kueue_admitted_active_workloads",
            "Number of admitted workloads that are active, per cluster_queue",
        );
        let cluster_queue_resource_usage = gauge(
            "kueue_cluster_queue_resource_usage",
            "Resource usage of admitted workloads, per cluster_queue, flavor and resource",
        );
        let cluster_queue_resource_reservation = gauge(
            "kueue_cluster_queue_resource_reservation",
            "Resource reserved by workloads, per cluster_queue, flavor and resource",
        );
        let cluster_queue_nominal_quota = gauge(
            "kueue_cluster_queue_nominal_quota",
            "Nominal quota, per cluster_queue, flavor and resource",
        );
        let cluster_queue_status = gauge(
            "kueue_cluster_queue_status",
            "Status of each cluster_queue (pending, active, terminating): 1 for the current one",
        );
        let cluster_queue_weighted_share = gauge(
            "kueue_cluster_queue_weighted_share",
            "Weighted share of each cluster_queue under fair sharing",
        );
        let node_gpus = gauge("sluice_node_gpus", "GPUs per node, by state");
        let policy_degraded = gauge(
            "sluice_policy_degraded",
            "1 while a loaded PolicyModule is Degraded (the built-in policy decides)",
        );
        let mut float = |name: &str, help: &str| {
            let f = Family::<Labels, FloatGauge>::default();
            registry.register(name, help, f.clone());
            f
        };
        let workload_gpu_utilization = float(
            "sluice_workload_gpu_utilization",
            "Mean utilisation (percent) of the GPUs an admitted workload's pods hold, from the node agents",
        );
        let clusterqueue_gpus_held = float(
            "sluice_clusterqueue_gpus_held",
            "GPUs held by the pods of a cluster_queue's admitted workloads, from the node agents",
        );
        let clusterqueue_gpus_busy = float(
            "sluice_clusterqueue_gpus_busy",
            "Busy GPU-equivalents (held GPUs times their utilisation) of a cluster_queue's admitted workloads",
        );
        let mut hist = |name: &str, help: &str, make: fn() -> Histogram| {
            let f: Hist = Family::new_with_constructor(make);
            registry.register(name, help, f.clone());
            f
        };
        let admission_attempt_duration = hist(
            "kueue_admission_attempt_duration_seconds",
            "Latency of an admission attempt, by result",
            latency_buckets,
        );
        let quota_reserved_wait_time = hist(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation or requeue until quota reservation, per cluster_queue",
            buckets14,
        );
        let admission_wait_time = hist(
            "kueue_admission_wait_time_seconds",
            "Time from creation or requeue until admission, per cluster_queue",
            buckets16,
        );
        let checkpoint_wait = hist(
            "sluice_checkpoint_wait_seconds",
            "Time a preemption waited for its victim's checkpoint, by outcome (done, timeout)",
            buckets14,
        );
        let policy_call_seconds = hist(
            "sluice_policy_call_seconds",
            "Latency of policy module calls",
            latency_buckets,
        );
        let cycle_seconds = latency_buckets();
        registry.register(
            "sluice_scheduling_cycle_seconds",
            "Duration of one scheduling cycle including its API writes",
            cycle_seconds.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "sluice_leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        let events_dropped = Counter::default();
        registry.register(
            "sluice_events_dropped",
            "Kubernetes Events dropped because the publisher's queue was full",
            events_dropped.clone(),
        );
        Self {
            registry,
            admission_attempts,
            admission_attempt_duration,
            pending_workloads,
            reserving_active_workloads,
            admitted_active_workloads,
            quota_reserved_workloads,
            quota_reserved_wait_time,
            admitted_workloads,
            admission_wait_time,
            evicted_workloads,
            preempted_workloads,
            finished_workloads,
            cluster_queue_resource_usage,
            cluster_queue_resource_reservation,
            cluster_queue_nominal_quota,
            cluster_queue_status,
            cluster_queue_weighted_share,
            cycle_seconds,
            api_write_retries,
            watch_events,
            events_dropped,
            checkpoint_wait,
            policy_calls,
            policy_call_seconds,
            policy_fallbacks,
            policy_module_calls,
            policy_degraded,
            node_gpus,
            leader,
            workload_gpu_utilization,
            clusterqueue_gpus_held,
            clusterqueue_gpus_busy,
        }
    }

    /// Replaces the GPU-use families with `use_` (Workloads and ClusterQueues gone since drop out).
    pub fn gpu_use(&self, use_: &[crate::gpu_use::WorkloadGpus]) {
        self.workload_gpu_utilization.clear();
        self.clusterqueue_gpus_held.clear();
        self.clusterqueue_gpus_busy.clear();
        for w in use_ {
            if let Some(u) = w.utilization() {
                self.workload_gpu_utilization
                    .get_or_create(&vec![
                        ("namespace", w.key.namespace.clone()),
                        ("workload", w.key.name.clone()),
                        ("cluster_queue", w.cluster_queue.clone()),
                    ])
                    .set(u);
            }
        }
        for (cq, (held, busy)) in crate::gpu_use::by_cluster_queue(use_) {
            let l = vec![("cluster_queue", cq)];
            self.clusterqueue_gpus_held.get_or_create(&l).set(held);
            self.clusterqueue_gpus_busy.get_or_create(&l).set(busy);
        }
    }

    /// The text exposition of every metric (OpenMetrics).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl PolicyReporter for Metrics {
    fn policy_call(&self, module: &str, hook: &str, outcome: &str, seconds: f64) {
        self.policy_calls
            .get_or_create(&vec![
                ("module", module.to_string()),
                ("hook", hook.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
        self.policy_call_seconds
            .get_or_create(&vec![
                ("module", module.to_string()),
                ("hook", hook.to_string()),
            ])
            .observe(seconds);
    }

    fn policy_fallback(&self, module: &str, reason: &str) {
        self.policy_fallbacks
            .get_or_create(&vec![
                ("module", module.to_string()),
                ("reason", reason.to_string()),
            ])
            .inc();
    }
}

impl GpuReporter for Metrics {
    fn node_gpus(&self, node: &str, total: i64, free: i64, unhealthy: i64) {
        for (state, v) in [("total", total), ("free", free), ("unhealthy", unhealthy)] {
            self.node_gpus
                .get_or_create(&vec![
                    ("node", node.to_string()),
                    ("state", state.to_string()),
                ])
                .set(v);
        }
    }

    fn node_removed(&self, node: &str) {
        for state in ["total", "free", "unhealthy"] {
            self.node_gpus.remove(&vec![
                ("node", node.to_string()),
                ("state", state.to_string()),
            ]);
        }
    }
}

/// Shared handle to the metrics.
pub type SharedMetrics = Arc<Metrics>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_served_with_kueue_total_names_and_labels() {
        let m = Metrics::new();
        m.admitted_workloads
            .get_or_create(&vec![
                ("cluster_queue", "cq".to_string()),
                ("priority_class", String::new()),
                ("replica_role", "leader".to_string()),
            ])
            .inc();
        m.policy_call("spread", "score", "ok", 0.001);
        m.node_gpus("n1", 8, 6, 1);
        m.admission_wait_time
            .get_or_create(&vec![
                ("cluster_queue", "cq".to_string()),
                ("priority_class", String::new()),
                ("replica_role", "leader".to_string()),
            ])
            .observe(3.0);
        let text = m.render();
        assert!(
            text.contains(
                "kueue_admitted_workloads_total{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains(
            "sluice_policy_calls_total{module=\"spread\",hook=\"score\",outcome=\"ok\"} 1"
        ));
        assert!(text.contains("sluice_node_gpus{node=\"n1\",state=\"free\"} 6"));
        assert!(text.contains("# TYPE kueue_admission_wait_time_seconds histogram"));
    }

    #[test]
    fn kueue_buckets_start_at_one_then_double_from_two_and_a_half() {
        assert_eq!(&kueue_buckets(4), &[1.0, 2.5, 5.0, 10.0]);
    }
}
