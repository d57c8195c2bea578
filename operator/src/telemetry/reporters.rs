//! Named reporters over [`Metrics`], one per event the controllers report (as Kueue's `pkg/metrics` has), so
//! label names and their order live here and nowhere else.

use super::metrics::{Labels, Metrics};

/// Which per-resource ClusterQueue gauge a [`Metrics::cluster_queue_resource`] value goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueResource {
    /// kueue_cluster_queue_resource_usage: what admitted workloads use.
    Usage,
    /// kueue_cluster_queue_resource_reservation: what workloads holding quota reserve.
    Reservation,
    /// kueue_cluster_queue_nominal_quota: the quota's nominal value.
    NominalQuota,
}

/// The series of one ClusterQueue's resource in one flavor.
pub struct ResourceSeries<'a> {
    /// The ClusterQueue's cohort ("" when none).
    pub cohort: &'a str,
    /// The ClusterQueue.
    pub cluster_queue: &'a str,
    /// The ResourceFlavor.
    pub flavor: &'a str,
    /// The resource name.
    pub resource: &'a str,
    /// "leader" or "standby".
    pub replica_role: &'a str,
}

fn l(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

impl Metrics {
    /// One event from a watch of `kind`.
    pub fn watch_event(&self, kind: &str) {
        self.watch_events.get_or_create(&l(&[("kind", kind)])).inc();
    }

    /// One admission attempt with its result ("success" or "inadmissible") and how long its cycle took.
    pub fn admission_attempt(&self, result: &str, replica_role: &str, seconds: f64) {
        let labels = l(&[("result", result), ("replica_role", replica_role)]);
        self.admission_attempts.get_or_create(&labels).inc();
        self.admission_attempt_duration
            .get_or_create(&labels)
            .observe(seconds);
    }

    /// A workload reserved quota after waiting `wait_seconds`; `admitted` when no admission check stands
    /// between the reservation and admission (then it counts as admitted too).
    pub fn quota_reserved(
        &self,
        cluster_queue: &str,
        priority_class: &str,
        replica_role: &str,
        wait_seconds: f64,
        admitted: bool,
    ) {
        let labels = l(&[
            ("cluster_queue", cluster_queue),
            ("priority_class", priority_class),
            ("replica_role", replica_role),
        ]);
        self.quota_reserved_workloads.get_or_create(&labels).inc();
        self.quota_reserved_wait_time
            .get_or_create(&labels)
            .observe(wait_seconds);
        if admitted {
            self.admitted_workloads.get_or_create(&labels).inc();
            self.admission_wait_time
                .get_or_create(&labels)
                .observe(wait_seconds);
        }
    }

    /// A workload was evicted from `cluster_queue` for `reason` (with the `underlying_cause` of a deactivation,
    /// else "").
    pub fn evicted(
        &self,
        cluster_queue: &str,
        reason: &str,
        underlying_cause: &str,
        priority_class: &str,
        replica_role: &str,
    ) {
        self.evicted_workloads
            .get_or_create(&l(&[
                ("cluster_queue", cluster_queue),
                ("reason", reason),
                ("underlying_cause", underlying_cause),
                ("priority_class", priority_class),
                ("replica_role", replica_role),
            ]))
            .inc();
    }

    /// A workload was preempted by one of `preempting_cluster_queue`'s for `reason`.
    pub fn preempted(&self, preempting_cluster_queue: &str, reason: &str, replica_role: &str) {
        self.preempted_workloads
            .get_or_create(&l(&[
                ("preempting_cluster_queue", preempting_cluster_queue),
                ("reason", reason),
                ("replica_role", replica_role),
            ]))
            .inc();
    }

    /// A workload admitted in `cluster_queue` finished.
    pub fn finished(&self, cluster_queue: &str, priority_class: &str, replica_role: &str) {
        self.finished_workloads
            .get_or_create(&l(&[
                ("cluster_queue", cluster_queue),
                ("priority_class", priority_class),
                ("replica_role", replica_role),
            ]))
            .inc();
    }

    /// A preemption victim's checkpoint wait ended with `outcome` ("done" or "timeout") after `seconds`.
    pub fn checkpoint_waited(&self, cluster_queue: &str, outcome: &str, seconds: f64) {
        self.checkpoint_wait
            .get_or_create(&l(&[
                ("cluster_queue", cluster_queue),
                ("outcome", outcome),
            ]))
            .observe(seconds);
    }

    /// A ClusterQueue's workload counts: pending, reserving quota, admitted.
    pub fn cluster_queue_workloads(
        &self,
        cluster_queue: &str,
        replica_role: &str,
        pending: i64,
        reserving: i64,
        admitted: i64,
    ) {
        self.pending_workloads
            .get_or_create(&l(&[
                ("cluster_queue", cluster_queue),
                ("status", "active"),
                ("replica_role", replica_role),
            ]))
            .set(pending);
        let labels = l(&[
            ("cluster_queue", cluster_queue),
            ("replica_role", replica_role),
        ]);
        self.reserving_active_workloads
            .get_or_create(&labels)
            .set(reserving);
        self.admitted_active_workloads
            .get_or_create(&labels)
            .set(admitted);
    }

    /// One per-resource ClusterQueue gauge.
    pub fn cluster_queue_resource(
        &self,
        which: QueueResource,
        series: &ResourceSeries,
        value: i64,
    ) {
        let family = match which {
            QueueResource::Usage => &self.cluster_queue_resource_usage,
            QueueResource::Reservation => &self.cluster_queue_resource_reservation,
            QueueResource::NominalQuota => &self.cluster_queue_nominal_quota,
        };
        family
            .get_or_create(&l(&[
                ("cohort", series.cohort),
                ("cluster_queue", series.cluster_queue),
                ("flavor", series.flavor),
                ("resource", series.resource),
                ("replica_role", series.replica_role),
            ]))
            .set(value);
    }

    /// A ClusterQueue's status: 1 on `status` ("pending", "active" or "terminating"), 0 on the others.
    pub fn cluster_queue_status(&self, cluster_queue: &str, replica_role: &str, status: &str) {
        for s in ["pending", "active", "terminating"] {
            self.cluster_queue_status
                .get_or_create(&l(&[
                    ("cluster_queue", cluster_queue),
                    ("status", s),
                    ("replica_role", replica_role),
                ]))
                .set(i64::from(s == status));
        }
    }

    /// A ClusterQueue's weighted share under fair sharing.
    pub fn cluster_queue_weighted_share(
        &self,
        cluster_queue: &str,
        cohort: &str,
        replica_role: &str,
        share: i64,
    ) {
        self.cluster_queue_weighted_share
            .get_or_create(&l(&[
                ("cluster_queue", cluster_queue),
                ("cohort", cohort),
                ("replica_role", replica_role),
            ]))
            .set(share);
    }

    /// A write retried after a conflict or an API error.
    pub fn api_write_retried(&self, verb: &str, reason: &str) {
        self.api_write_retries
            .get_or_create(&l(&[("verb", verb), ("reason", reason)]))
            .inc();
    }

    /// `calls` more calls of a loaded PolicyModule ended with `outcome` ("ok" or a failure class).
    pub fn policy_module_called(&self, module: &str, outcome: &str, calls: u64) {
        self.policy_module_calls
            .get_or_create(&l(&[("module", module), ("outcome", outcome)]))
            .inc_by(calls);
    }

    /// Whether a loaded PolicyModule is degraded (its calls replaced by the built-in behaviour).
    pub fn policy_module_degraded(&self, module: &str, degraded: bool) {
        self.policy_degraded
            .get_or_create(&l(&[("module", module)]))
            .set(i64::from(degraded));
    }
}
