//! Engine decisions written into Kueue's Workload status: the admission in Kueue's form, and the conditions,
//! reasons and messages Kueue writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::quantity::format_resource_value;

use crate::engine;

/// Engine admission -> Kueue's `status.admission`.
pub fn api_admission(a: &engine::Admission) -> api::Admission {
    api::Admission {
        cluster_queue: a.cluster_queue.clone(),
        pod_set_assignments: a
            .pod_set_assignments
            .iter()
            .map(|p| api::PodSetAssignment {
                name: p.name.clone(),
                flavors: p.flavors.clone(),
                resource_usage: p
                    .resource_usage
                    .iter()
                    .map(|(r, v)| (r.clone(), format_resource_value(r, *v)))
                    .collect(),
                count: Some(p.count),
                ..Default::default()
            })
            .collect(),
    }
}

/// Engine admission plus its topology placement -> Kueue's `status.admission`, with each TAS pod
/// set's `topologyAssignment` in v1beta2's compressed form.
pub fn api_admission_with_placement(
    a: &engine::Admission,
    placement: Option<&[engine::PodSetPlacement]>,
) -> api::Admission {
    let mut out = api_admission(a);
    for psa in &mut out.pod_set_assignments {
        if let Some(p) = placement
            .into_iter()
            .flatten()
            .find(|p| p.pod_set == psa.name)
        {
            psa.topology_assignment = Some(api_topology_assignment(&p.assignment));
        }
    }
    out
}

/// An engine placement's assignment in Kueue's v1beta2 (compressed) form.
pub fn api_topology_assignment(a: &engine::TopologyAssignment) -> api::TopologyAssignment {
    use sluice_sdk::kueue::v1beta1;
    let ta = v1beta1::TopologyAssignment {
        levels: a.levels.clone(),
        domains: a
            .domains
            .iter()
            .map(|d| v1beta1::TopologyDomainAssignment {
                values: d.values.clone(),
                count: d.count,
            })
            .collect(),
    };
    sluice_sdk::kueue::conversion::compress_topology_assignment(&ta)
}

/// Kubernetes time of engine milliseconds (the epoch when out of range).
pub fn k8s_time(ms: engine::Time) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Sets a condition as apimachinery's SetStatusCondition does: the transition time moves only when the status
/// changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: engine::Time,
) -> bool {
    let status = if status { "True" } else { "False" }.to_string();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let changed = c.status != status || c.reason != reason || c.message != message;
            if c.status != status {
                c.last_transition_time = k8s_time(now);
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message.to_string();
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status,
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: k8s_time(now),
                observed_generation: None,
            });
            true
        }
    }
}

/// The condition of a type, if present.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn status_mut(wl: &mut api::Workload) -> &mut api::WorkloadStatus {
    wl.status.get_or_insert_with(Default::default)
}

/// An active condition of `type_` becomes False with `"Previously: <message>"`, as Kueue does on re-admission.
fn reset_active(conditions: &mut Vec<Condition>, type_: &str, reason: &str, now: engine::Time) {
    if let Some(prev) = condition(conditions, type_).filter(|c| c.status == "True") {
        let message = format!("Previously: {}", prev.message);
        set_condition(conditions, type_, false, reason, &message, now);
    }
}

/// Quota reserved: `status.admission`, QuotaReserved=True, and Admitted=True when no admission checks apply.
pub fn admit(
    wl: &mut api::Workload,
    admission: api::Admission,
    has_admission_checks: bool,
    now: engine::Time,
) {
    let msg = format!("Quota reserved in ClusterQueue {}", admission.cluster_queue);
    let st = status_mut(wl);
    st.admission = Some(admission);
    st.resource_requests.clear();
    set_condition(
        &mut st.conditions,
        labels::condition::QUOTA_RESERVED,
        true,
        "QuotaReserved",
        &msg,
        now,
    );
    reset_active(
        &mut st.conditions,
        labels::condition::EVICTED,
        "QuotaReserved",
        now,
    );
    reset_active(
        &mut st.conditions,
        labels::condition::PREEMPTED,
        "QuotaReserved",
        now,
    );
    // With admission checks, Kueue writes Admitted only once every check is Ready.
    if !has_admission_checks {
        set_admitted(&mut st.conditions, now);
    }
}

/// Admitted=True as Kueue writes it; returns whether it changed.
pub fn set_admitted(conditions: &mut Vec<Condition>, now: engine::Time) -> bool {
    set_condition(
        conditions,
        labels::condition::ADMITTED,
        true,
        "Admitted",
        "The workload is admitted",
        now,
    )
}

/// Still pending: QuotaReserved=False with the scheduler's reason and message.
/// `requests` are the pod sets' total requests, which Kueue shows in `status.resourceRequests` while a workload
/// waits.
pub fn pending(
    wl: &mut api::Workload,
    reason: &str,
    message: &str,
    requests: &[api::PodSetRequest],
    now: engine::Time,
) {
    let st = status_mut(wl);
    if st.resource_requests.as_slice() != requests {
        st.resource_requests = requests.to_vec();
    }
    set_condition(
        &mut st.conditions,
        labels::condition::QUOTA_RESERVED,
        false,
        reason,
        message,
        now,
    );
}

/// Whether the engine's pending reason `engine_reason` must not be written over the Workload's QuotaReserved:
/// a deactivated workload that was evicted keeps the eviction's message there ("The workload is deactivated due
/// to ..."), as in Kueue, whose scheduler never sees an inactive workload.
pub fn keeps_deactivation_message(wl: &api::Workload, engine_reason: &str) -> bool {
    engine_reason == labels::reason::DEACTIVATED
        && wl.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, labels::condition::QUOTA_RESERVED)
                .is_some_and(|c| c.status == "False")
                && condition(&s.conditions, labels::condition::EVICTED)
                    .is_some_and(|c| c.reason.starts_with(labels::reason::DEACTIVATED))
        })
}

/// The pod sets' total requests (per-pod requests times count) in Kueue's `status.resourceRequests` form.
pub fn resource_requests(wl: &engine::Workload) -> Vec<api::PodSetRequest> {
    use sluice_sdk::quantity::format_resource_value;
    wl.pod_sets
        .iter()
        .map(|ps| api::PodSetRequest {
            name: ps.name.clone(),
            resources: ps
                .requests
                .iter()
                .map(|(r, v)| {
                    (
                        r.clone(),
                        format_resource_value(r, v.saturating_mul(i64::from(ps.count))),
                    )
                })
                .collect(),
        })
        .collect()
}

/// Sets `DeactivationTarget=True` with `reason` and `message` (Kueue's workload controller then deactivates the
/// workload); running out of maximumExecutionTimeSeconds also clears the time accumulated so far. Returns whether
/// anything changed.
pub fn set_deactivation_target(
    wl: &mut api::Workload,
    reason: &str,
    message: &str,
    now: engine::Time,
) -> bool {
    let st = status_mut(wl);
    let mut changed = set_condition(
        &mut st.conditions,
        labels::condition::DEACTIVATION_TARGET,
        true,
        reason,
        message,
        now,
    );
    if reason == labels::reason::MAXIMUM_EXECUTION_TIME_EXCEEDED {
        changed |= st.accumulated_past_execution_time_seconds.take().is_some();
    }
    changed
}

/// The reason of the workload's DeactivationTarget: the underlying cause of its eviction as Deactivated.
pub fn deactivation_cause(wl: &api::Workload) -> Option<&str> {
    wl.status
        .as_ref()
        .and_then(|s| condition(&s.conditions, labels::condition::DEACTIVATION_TARGET))
        .map(|c| c.reason.as_str())
}

/// Whether the workload is already evicted for `reason` (a deactivation's Evicted reason names its cause after
/// it, `DeactivatedDueTo<cause>`, as [`evict`] writes it).
pub fn evicted_for(wl: &api::Workload, reason: &str) -> bool {
    wl.status
        .as_ref()
        .and_then(|s| condition(&s.conditions, labels::condition::EVICTED))
        .is_some_and(|c| {
            c.status == "True"
                && c.reason
                    .strip_prefix(reason)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with("DueTo"))
        })
}

/// Milliseconds of a workload's `maximumExecutionTimeSeconds` left after its earlier admissions
/// (`status.accumulatedPastExecutionTimeSeconds`); None without a limit.
pub fn execution_time_left(wl: &api::Workload) -> Option<engine::Time> {
    let limit = wl.spec.maximum_execution_time_seconds?;
    let past = wl
        .status
        .as_ref()
        .and_then(|s| s.accumulated_past_execution_time_seconds)
        .unwrap_or(0);
    Some((i64::from(limit) - i64::from(past)).max(0) * 1000)
}

/// Evicted (and, when preempted, Preempted with the preemption reason); counted in schedulingStats.
pub fn evict(
    wl: &mut api::Workload,
    reason: &str,
    preemption_reason: Option<&str>,
    message: &str,
    now: engine::Time,
) {
    evict_with_cause(wl, reason, "", preemption_reason, message, now);
}

/// As `evict`, with the eviction's underlying cause (a PodsReady timeout's WaitForStart or WaitForRecovery),
/// which schedulingStats count apart; a deactivation takes its cause from DeactivationTarget instead.
pub fn evict_with_cause(
    wl: &mut api::Workload,
    reason: &str,
    cause: &str,
    preemption_reason: Option<&str>,
    message: &str,
    now: engine::Time,
) {
    // A deactivation says why, as Kueue's workload controller does: the DeactivationTarget condition's message
    // joins the eviction message, and its reason is the eviction's underlying cause, which the Evicted condition
    // names as `DeactivatedDueTo<cause>` (schedulingStats keep reason and cause apart).
    let mut message = message.to_string();
    let mut underlying_cause = cause.to_string();
    if reason == labels::reason::DEACTIVATED
        && let Some(target) = wl
            .status
            .as_ref()
            .and_then(|s| condition(&s.conditions, labels::condition::DEACTIVATION_TARGET))
    {
        message = format!("{message} due to {}", target.message);
        underlying_cause = target.reason.clone();
    }
    // Kueue's workload controller removes DeactivationTarget in the eviction's own write. A workload deactivated
    // for its maximum execution time gets it back at once: it is still Admitted until its job has stopped, so
    // Kueue's execution-time check, which does not look at `spec.active`, sets it again (seen in the differential
    // suite: max-exec-time keeps it; pods-ready-timeout and admission-check, whose causes are not re-checked, do
    // not).
    let admitted = wl.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, labels::condition::ADMITTED).is_some_and(|c| c.status == "True")
    });
    let set_again = admitted && underlying_cause == labels::reason::MAXIMUM_EXECUTION_TIME_EXCEEDED;
    let st = status_mut(wl);
    if reason == labels::reason::DEACTIVATED {
        // A deactivated workload is not requeued: no backoff is left pending.
        st.requeue_state = None;
        if !set_again {
            st.conditions
                .retain(|c| c.type_ != labels::condition::DEACTIVATION_TARGET);
        }
    }
    let message = message.as_str();
    // Only a deactivation names its cause in the condition's reason.
    let condition_reason = if underlying_cause.is_empty() || reason != labels::reason::DEACTIVATED {
        reason.to_string()
    } else {
        format!("{reason}DueTo{underlying_cause}")
    };
    set_condition(
        &mut st.conditions,
        labels::condition::EVICTED,
        true,
        &condition_reason,
        message,
        now,
    );
    if let Some(p) = preemption_reason {
        set_condition(
            &mut st.conditions,
            labels::condition::PREEMPTED,
            true,
            p,
            message,
            now,
        );
    }
    // Every eviction sends the admission checks back to Pending (Kueue's prepareForEviction).
    crate::admission_checks::reset_on_eviction(wl, now);
    let st = status_mut(wl);
    // Kueue counts evictions by reason and underlying cause; the cause is only set for deactivations, never for
    // preemptions.
    let stats = st.scheduling_stats.get_or_insert_with(Default::default);
    match stats
        .evictions
        .iter_mut()
        .find(|e| e.reason == reason && e.underlying_cause == underlying_cause)
    {
        Some(e) => e.count += 1,
        None => stats.evictions.push(api::WorkloadSchedulingStatsEviction {
            reason: reason.to_string(),
            underlying_cause,
            count: 1,
        }),
    }
}

/// Which PodsReady timeout runs for an admitted workload, as Kueue's workload controller reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodsReadyWait {
    /// Its pods have not all been ready since admission (`timeout`, from the Admitted condition).
    Start,
    /// A pod failed after all were ready (`recoveryTimeout`, from PodsReady=False's transition at `since`).
    Recovery {
        /// When PodsReady turned False.
        since: engine::Time,
    },
}

impl PodsReadyWait {
    /// The eviction's underlying cause Kueue records (WaitForStart, WaitForRecovery).
    pub fn cause(self) -> &'static str {
        match self {
            Self::Start => labels::reason::WAIT_FOR_START,
            Self::Recovery { .. } => labels::reason::WAIT_FOR_RECOVERY,
        }
    }
}

/// The PodsReady timeout running for `wl` (Kueue's admittedNotReadyWorkload): none unless it is active, not
/// evicted, admitted (every admission check passed) and not PodsReady; Start while PodsReady is absent or says
/// WaitForStart, Recovery while it says WaitForRecovery.
pub fn pods_ready_wait(wl: &api::Workload) -> Option<PodsReadyWait> {
    let conds = wl.status.as_ref().map(|s| &s.conditions[..]).unwrap_or(&[]);
    let is_true = |t: &str| condition(conds, t).is_some_and(|c| c.status == "True");
    if !wl.spec.is_active() || is_true(labels::condition::EVICTED) {
        return None;
    }
    if !is_true(labels::condition::ADMITTED) || is_true(labels::condition::PODS_READY) {
        return None;
    }
    match condition(conds, labels::condition::PODS_READY) {
        None => Some(PodsReadyWait::Start),
        Some(c) if c.reason == labels::reason::WAIT_FOR_START || c.reason == "PodsReady" => {
            Some(PodsReadyWait::Start)
        }
        Some(c) if c.reason == labels::reason::WAIT_FOR_RECOVERY => Some(PodsReadyWait::Recovery {
            since: c.last_transition_time.0.as_millisecond(),
        }),
        Some(_) => None,
    }
}

/// The PodsReady condition (status, reason, message) Kueue's job reconciler writes under waitForPodsReady, given
/// whether the job's pods are ready now: WaitForStart until the Workload is admitted and its pods first get
/// ready, then Started; once ready pods fail, WaitForRecovery until they are ready again, then Recovered.
pub fn pods_ready_condition(
    wl: &api::Workload,
    pods_ready: bool,
) -> (bool, &'static str, &'static str) {
    use labels::reason;
    const NOT_READY: &str = "Not all pods are ready or succeeded";
    const RECOVERING: &str = "At least one pod has failed, waiting for recovery";
    const READY: &str = "All pods reached readiness and the workload is running";
    let conds = wl.status.as_ref().map(|s| &s.conditions[..]).unwrap_or(&[]);
    let admitted =
        condition(conds, labels::condition::ADMITTED).is_some_and(|c| c.status == "True");
    if !admitted {
        return (false, reason::WAIT_FOR_START, NOT_READY);
    }
    let current = condition(conds, labels::condition::PODS_READY);
    let recovering =
        |c: &Condition| c.reason == reason::WAIT_FOR_RECOVERY || c.reason == reason::RECOVERED;
    if pods_ready {
        let why = if current.is_some_and(recovering) {
            reason::RECOVERED
        } else {
            reason::STARTED
        };
        return (true, why, READY);
    }
    match current {
        Some(c) if c.status == "True" || c.reason == reason::WAIT_FOR_RECOVERY => {
            (false, reason::WAIT_FOR_RECOVERY, RECOVERING)
        }
        _ => (false, reason::WAIT_FOR_START, NOT_READY),
    }
}

/// The QuotaReserved=False reason written for an engine pending reason. Kueue writes the scheduler's detailed
/// reasons only with its UnadmittedWorkloadsObservability gate (off by default), else "Pending"; the workload
/// controller's queue blockers ("LocalQueue NAME doesn't exist", "... is inactive") say "Inadmissible" either way.
pub fn written_pending_reason(reason: &str, detailed: bool) -> &str {
    // blockAdmission's "Waiting" is written by Kueue's scheduler itself, whatever the gate, and "AdmissionGated" by
    // its workload controller.
    if detailed
        || reason == "Inadmissible"
        || reason == engine::WAITING_FOR_PODS_READY
        || reason == engine::ADMISSION_GATED
    {
        reason
    } else {
        "Pending"
    }
}

/// Whether an engine pending reason is not written: without UnadmittedWorkloadsObservability Kueue words a gated
/// workload's `AdmissionGated` condition once, when it has no QuotaReserved condition yet, and leaves it as it is
/// when its gates change (its scheduler never sees the workload).
pub fn pending_unwritten(wl: &api::Workload, reason: &str, detailed: bool) -> bool {
    reason == engine::ADMISSION_GATED
        && !detailed
        && wl
            .status
            .as_ref()
            .is_some_and(|s| condition(&s.conditions, labels::condition::QUOTA_RESERVED).is_some())
}

/// The evicted workload's pods are gone: its reservation is cleared and it is back in its queue. Requeued is True
/// for preemption and node failures (it will be retried at once), False otherwise (it waits for a change).
pub fn requeue_after_eviction(wl: &mut api::Workload, now: engine::Time) {
    let st = status_mut(wl);
    let (reason, message) = condition(&st.conditions, labels::condition::EVICTED)
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_else(|| ("Pending".into(), String::new()));
    // As Kueue: the time admitted so far counts against maximumExecutionTimeSeconds in later admissions.
    if let Some(admitted) = condition(&st.conditions, labels::condition::ADMITTED)
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.0.as_millisecond())
    {
        let ran = i32::try_from((now - admitted).max(0) / 1000).unwrap_or(i32::MAX);
        let past = st.accumulated_past_execution_time_seconds.unwrap_or(0);
        st.accumulated_past_execution_time_seconds = Some(past.saturating_add(ran));
    }
    st.admission = None;
    set_condition(
        &mut st.conditions,
        labels::condition::QUOTA_RESERVED,
        false,
        "Pending",
        &message,
        now,
    );
    // Kueue's SyncAdmittedCondition: written only when it was True (a workload whose admission checks never
    // passed keeps what it had).
    if condition(&st.conditions, labels::condition::ADMITTED).is_some_and(|c| c.status == "True") {
        set_condition(
            &mut st.conditions,
            labels::condition::ADMITTED,
            false,
            "NoReservation",
            "The workload has no reservation",
            now,
        );
    }
    // Kueue's job reconciler rewrites PodsReady (waitForPodsReady) as WaitForStart as soon as the Workload is no
    // longer admitted, before its scheduler can admit it again: written with the release, so that a quick
    // readmission starts afresh (Started, not Recovered).
    if condition(&st.conditions, labels::condition::PODS_READY)
        .is_some_and(|c| c.status != "False" || c.reason != labels::reason::WAIT_FOR_START)
    {
        set_condition(
            &mut st.conditions,
            labels::condition::PODS_READY,
            false,
            labels::reason::WAIT_FOR_START,
            "Not all pods are ready or succeeded",
            now,
        );
    }
    let retry = matches!(reason.as_str(), "Preempted" | "NodeFailures");
    let backing_off = st
        .requeue_state
        .as_ref()
        .and_then(|r| r.requeue_at.as_ref())
        .is_some_and(|t| t.0.as_millisecond() > now);
    if reason == crate::admission_checks::EVICTED_BY_ADMISSION_CHECK && !backing_off {
        // Sent back by a check without a retry time: Kueue's workload controller ends the backoff at once.
        finish_backoff(wl, now);
        return;
    }
    set_condition(
        &mut st.conditions,
        labels::condition::REQUEUED,
        retry,
        &reason,
        &message,
        now,
    );
}

/// A Requeued=True condition Kueue's workload controller sets on a workload that may run again: its reason and message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requeue {
    /// The condition's reason.
    pub reason: &'static str,
    /// The condition's message.
    pub message: &'static str,
}

impl Requeue {
    /// Sets Requeued=True with this reason and message; returns whether it changed.
    pub fn apply(self, wl: &mut api::Workload, now: engine::Time) -> bool {
        set_condition(
            &mut status_mut(wl).conditions,
            labels::condition::REQUEUED,
            true,
            self.reason,
            self.message,
            now,
        )
    }
}

/// The reason of a workload's Requeued=False condition, if it has one.
fn requeued_false_reason(wl: &api::Workload) -> Option<&str> {
    wl.status
        .as_ref()
        .and_then(|s| condition(&s.conditions, labels::condition::REQUEUED))
        .filter(|c| c.status == "False")
        .map(|c| c.reason.as_str())
}

/// Kueue's workload controller once a stopped queue runs again: a workload its LocalQueue's (or ClusterQueue's)
/// `HoldAndDrain` evicted, Requeued=False with that reason, gets Requeued=True `LocalQueueRestarted` "The LocalQueue
/// was restarted after being stopped" (`ClusterQueueRestarted`, "The ClusterQueue ..."). `lq_active` / `cq_active`:
/// its LocalQueue / that LocalQueue's ClusterQueue exists with no stop policy.
pub fn restart_requeue(wl: &api::Workload, lq_active: bool, cq_active: bool) -> Option<Requeue> {
    match requeued_false_reason(wl)? {
        labels::reason::LOCAL_QUEUE_STOPPED if lq_active => Some(Requeue {
            reason: labels::reason::LOCAL_QUEUE_RESTARTED,
            message: "The LocalQueue was restarted after being stopped",
        }),
        labels::reason::CLUSTER_QUEUE_STOPPED if cq_active => Some(Requeue {
            reason: labels::reason::CLUSTER_QUEUE_RESTARTED,
            message: "The ClusterQueue was restarted after being stopped",
        }),
        _ => None,
    }
}

/// Kueue's workload controller on an active workload whose deactivation requeued it as `Deactivated`
/// (Requeued=False): Requeued=True `Reactivated` "The workload was reactivated".
pub fn reactivation_requeue(wl: &api::Workload) -> Option<Requeue> {
    (wl.spec.is_active() && requeued_false_reason(wl) == Some(labels::reason::DEACTIVATED))
        .then_some(Requeue {
            reason: labels::reason::REACTIVATED,
            message: "The workload was reactivated",
        })
}

/// Kueue's reason (QuotaReserved=False) of a Workload whose job is on hold.
pub const ON_HOLD_REASON: &str = "OnHold";

/// Puts the Workload of a job on hold, as Kueue's `UnsetQuotaReservationWithCondition` with `OnHold`: no admission,
/// QuotaReserved=False `OnHold` "Job is on hold", Admitted=False if it was True; returns whether it changed.
pub fn put_on_hold(wl: &mut api::Workload, now: engine::Time) -> bool {
    let st = status_mut(wl);
    let mut changed = st.admission.take().is_some();
    changed |= set_condition(
        &mut st.conditions,
        labels::condition::QUOTA_RESERVED,
        false,
        ON_HOLD_REASON,
        "Job is on hold",
        now,
    );
    if condition(&st.conditions, labels::condition::ADMITTED).is_some_and(|c| c.status == "True") {
        changed |= set_condition(
            &mut st.conditions,
            labels::condition::ADMITTED,
            false,
            "NoReservation",
            "The workload has no reservation",
            now,
        );
    }
    changed
}

/// Whether the Workload is on hold (QuotaReserved=False with reason `OnHold`): out of the queue.
pub fn is_on_hold(wl: &api::Workload) -> bool {
    wl.status
        .as_ref()
        .and_then(|s| condition(&s.conditions, labels::condition::QUOTA_RESERVED))
        .is_some_and(|c| c.status == "False" && c.reason == ON_HOLD_REASON)
}

/// How many times the workload was requeued (`status.requeueState.count`).
pub fn requeue_count(wl: &api::Workload) -> i32 {
    wl.status
        .as_ref()
        .and_then(|s| s.requeue_state.as_ref())
        .and_then(|r| r.count)
        .unwrap_or(0)
}

/// Writes `status.requeueState`: requeued `count` times, backing off until `until`.
pub fn set_requeue_state(wl: &mut api::Workload, count: i32, until: engine::Time) {
    let rs = status_mut(wl)
        .requeue_state
        .get_or_insert_with(Default::default);
    rs.count = Some(count);
    rs.requeue_at = Some(k8s_time(until));
}

/// The requeue backoff is over: `requeueAt` cleared and Requeued=True (`BackoffFinished`), as Kueue's workload
/// controller writes it. Returns whether anything changed.
pub fn finish_backoff(wl: &mut api::Workload, now: engine::Time) -> bool {
    let st = status_mut(wl);
    let cleared = st
        .requeue_state
        .as_mut()
        .is_some_and(|rs| rs.requeue_at.take().is_some());
    let set = set_condition(
        &mut st.conditions,
        labels::condition::REQUEUED,
        true,
        "BackoffFinished",
        "The workload backoff was finished",
        now,
    );
    cleared || set
}

/// Finished: the job ended (Succeeded or Failed).
pub fn finish(wl: &mut api::Workload, success: bool, message: &str, now: engine::Time) {
    let reason = if success { "Succeeded" } else { "Failed" };
    finish_with_reason(wl, reason, message, now);
}

/// Marks the Workload Finished=True with this reason (`OwnerNotFound` for an orphan, as Kueue writes).
pub fn finish_with_reason(wl: &mut api::Workload, reason: &str, message: &str, now: engine::Time) {
    let st = status_mut(wl);
    set_condition(
        &mut st.conditions,
        labels::condition::FINISHED,
        true,
        reason,
        message,
        now,
    );
}

fn flavor_usages(usages: &[engine::FlavorUsage]) -> Vec<api::FlavorUsage> {
    use sluice_sdk::quantity::format_resource_value;
    usages
        .iter()
        .map(|f| api::FlavorUsage {
            name: f.name.clone(),
            resources: f
                .resources
                .iter()
                .map(|r| api::ResourceUsage {
                    name: r.name.clone(),
                    total: format_resource_value(&r.name, r.total),
                    borrowed: format_resource_value(&r.name, r.borrowed),
                })
                .collect(),
        })
        .collect()
}

/// The Active condition of a ClusterQueue, as Kueue words it.
fn cluster_queue_active(
    usage: &engine::ClusterQueueUsage,
    stopped: bool,
) -> (bool, String, String) {
    if stopped {
        (
            false,
            "Stopped".into(),
            "Can't admit new workloads: is stopped.".into(),
        )
    } else if !usage.active {
        let reason = if usage.inactive_reason.is_empty() {
            "Unknown"
        } else {
            &usage.inactive_reason
        };
        let message = if usage.inactive_message.is_empty() {
            "Can't admit new workloads.".to_string()
        } else {
            usage.inactive_message.clone()
        };
        (false, reason.to_string(), message)
    } else {
        (true, "Ready".into(), "Can admit new workloads".into())
    }
}

/// ClusterQueue status as Kueue writes it. `fair_sharing` says whether fair sharing is on (Kueue writes
/// `fairSharing` only then).
pub fn cluster_queue_status(
    usage: &engine::ClusterQueueUsage,
    stopped: bool,
    fair_sharing: bool,
    now: engine::Time,
) -> api::ClusterQueueStatus {
    let mut conditions = Vec::new();
    let (active, reason, message) = cluster_queue_active(usage, stopped);
    set_condition(
        &mut conditions,
        labels::condition::ACTIVE,
        active,
        &reason,
        &message,
        now,
    );
    api::ClusterQueueStatus {
        conditions,
        flavors_reservation: flavor_usages(&usage.flavors_reservation),
        flavors_usage: flavor_usages(&usage.flavors_usage),
        pending_workloads: usage.pending_workloads,
        reserving_workloads: usage.reserving_workloads,
        admitted_workloads: usage.admitted_workloads,
        fair_sharing: fair_sharing.then_some(api::FairSharingStatus {
            weighted_share: usage.weighted_share,
        }),
    }
}

/// LocalQueue status as Kueue writes it: inactive when the LocalQueue is stopped or its ClusterQueue cannot
/// admit (`cluster_queue_active`; None when it does not exist).
/// With admission fair sharing on, `consumed` is the LocalQueue's decayed usage (`status.fairSharing`).
pub fn local_queue_status(
    usage: &engine::LocalQueueUsage,
    stopped: bool,
    cluster_queue_active: Option<bool>,
    consumed: Option<&engine::ConsumedUsage>,
    now: engine::Time,
) -> api::LocalQueueStatus {
    use sluice_sdk::quantity::format_resource_value;
    let lq_usage = |us: &[engine::FlavorUsage]| {
        us.iter()
            .map(|f| api::LocalQueueFlavorUsage {
                name: f.name.clone(),
                resources: f
                    .resources
                    .iter()
                    .map(|r| api::LocalQueueResourceUsage {
                        name: r.name.clone(),
                        total: format_resource_value(&r.name, r.total),
                    })
                    .collect(),
            })
            .collect()
    };
    const CQ_INACTIVE: &str = "Can't submit new workloads to clusterQueue";
    let (active, reason, message) = match cluster_queue_active {
        _ if stopped => (false, "Stopped", "LocalQueue is stopped"),
        None => (false, "ClusterQueueDoesNotExist", CQ_INACTIVE),
        Some(false) => (false, "ClusterQueueIsInactive", CQ_INACTIVE),
        Some(true) => (true, "Ready", "Can submit new workloads to localQueue"),
    };
    // Kueue writes empty usage for a LocalQueue whose ClusterQueue does not exist, but still counts the
    // workloads waiting in it.
    let waiting;
    let usage = if cluster_queue_active.is_none() && !stopped {
        waiting = engine::LocalQueueUsage {
            pending_workloads: usage.pending_workloads,
            ..Default::default()
        };
        &waiting
    } else {
        usage
    };
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        labels::condition::ACTIVE,
        active,
        reason,
        message,
        now,
    );
    api::LocalQueueStatus {
        conditions,
        pending_workloads: usage.pending_workloads,
        reserving_workloads: usage.reserving_workloads,
        admitted_workloads: usage.admitted_workloads,
        flavors_reservation: lq_usage(&usage.flavors_reservation),
        flavors_usage: lq_usage(&usage.flavors_usage),
        fair_sharing: consumed.map(local_queue_fair_sharing),
    }
}

/// A LocalQueue's `status.fairSharing` under admission fair sharing: its consumed resources (rounded down to
/// nano-units, as Kueue v0.19 writes them) and when they were brought up to date; `weightedShare` stays 0 as in
/// Kueue.
pub fn local_queue_fair_sharing(
    consumed: &engine::ConsumedUsage,
) -> api::LocalQueueFairSharingStatus {
    api::LocalQueueFairSharingStatus {
        weighted_share: 0,
        admission_fair_sharing_status: Some(api::LocalQueueAdmissionFairSharingStatus {
            consumed_resources: consumed
                .resources
                .iter()
                .map(|(r, v)| (r.clone(), sluice_sdk::quantity::format_decimal_floor(*v)))
                .collect(),
            last_update: k8s_time(consumed.last_update),
        }),
    }
}

/// Whether a ClusterQueue can admit (for its LocalQueues' status).
pub fn cluster_queue_is_active(usage: &engine::ClusterQueueUsage, stopped: bool) -> bool {
    cluster_queue_active(usage, stopped).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond<'a>(wl: &'a api::Workload, t: &str) -> &'a Condition {
        condition(&wl.status.as_ref().unwrap().conditions, t).unwrap()
    }

    #[test]
    fn admission_then_preemption_then_readmission() {
        let mut wl = api::Workload::default();
        pending(
            &mut wl,
            "WaitingForQuota",
            "insufficient unused quota",
            &[],
            1_000,
        );
        assert_eq!(cond(&wl, "QuotaReserved").reason, "WaitingForQuota");
        admit(
            &mut wl,
            api::Admission {
                cluster_queue: "cq".into(),
                ..Default::default()
            },
            false,
            2_000,
        );
        let qr = cond(&wl, "QuotaReserved");
        assert_eq!(
            (qr.status.as_str(), qr.message.as_str()),
            ("True", "Quota reserved in ClusterQueue cq")
        );
        assert_eq!(cond(&wl, "Admitted").message, "The workload is admitted");
        evict(
            &mut wl,
            "Preempted",
            Some("InClusterQueue"),
            "Preempted to accommodate a workload",
            3_000,
        );
        assert_eq!(cond(&wl, "Preempted").reason, "InClusterQueue");
        requeue_after_eviction(&mut wl, 4_000);
        assert!(wl.status.as_ref().unwrap().admission.is_none());
        assert_eq!(cond(&wl, "Requeued").status, "True");
        assert_eq!(cond(&wl, "Admitted").reason, "NoReservation");
        admit(
            &mut wl,
            api::Admission {
                cluster_queue: "cq".into(),
                ..Default::default()
            },
            false,
            5_000,
        );
        let ev = cond(&wl, "Evicted");
        assert_eq!(
            (ev.status.as_str(), ev.reason.as_str()),
            ("False", "QuotaReserved")
        );
        assert!(ev.message.starts_with("Previously: "));
        assert_eq!(
            wl.status
                .as_ref()
                .unwrap()
                .scheduling_stats
                .as_ref()
                .unwrap()
                .evictions[0]
                .count,
            1
        );
    }

    fn admitted_at(wl: &mut api::Workload, now: engine::Time) {
        admit(
            wl,
            api::Admission {
                cluster_queue: "cq".into(),
                ..Default::default()
            },
            false,
            now,
        );
    }

    #[test]
    fn a_released_workload_waits_for_start_again_so_a_readmission_is_started_not_recovered() {
        // What the job reconciler writes for pods (not) ready at `now`; returns the reason.
        let observe = |wl: &mut api::Workload, pods_ready: bool, now: engine::Time| {
            let (ready, reason, message) = pods_ready_condition(wl, pods_ready);
            let conditions = &mut status_mut(wl).conditions;
            set_condition(
                conditions,
                labels::condition::PODS_READY,
                ready,
                reason,
                message,
                now,
            );
            reason
        };
        let mut wl = api::Workload::default();
        admitted_at(&mut wl, 1_000);
        assert_eq!(observe(&mut wl, true, 2_000), labels::reason::STARTED);
        evict(&mut wl, "Preempted", Some("InClusterQueue"), "m", 3_000);
        // Its pods stop before the admission is released: Kueue's reconciler sees them not ready meanwhile.
        assert_eq!(
            observe(&mut wl, false, 3_500),
            labels::reason::WAIT_FOR_RECOVERY
        );
        requeue_after_eviction(&mut wl, 4_000);
        let pr = cond(&wl, "PodsReady");
        assert_eq!(
            (pr.status.as_str(), pr.reason.as_str()),
            ("False", labels::reason::WAIT_FOR_START)
        );
        admitted_at(&mut wl, 5_000);
        assert_eq!(pods_ready_condition(&wl, true).1, labels::reason::STARTED);
        // A Workload without the condition (waitForPodsReady off) does not get one.
        let mut plain = api::Workload::default();
        admitted_at(&mut plain, 1_000);
        evict(&mut plain, "Preempted", Some("InClusterQueue"), "m", 2_000);
        requeue_after_eviction(&mut plain, 3_000);
        assert!(condition(&plain.status.as_ref().unwrap().conditions, "PodsReady").is_none());
    }

    #[test]
    fn time_admitted_accumulates_over_evictions() {
        let mut wl = api::Workload::default();
        admitted_at(&mut wl, 10_000);
        evict(&mut wl, "Preempted", Some("InClusterQueue"), "m", 70_000);
        // Counted until the admission is cleared, as Kueue does on Admitted turning False.
        requeue_after_eviction(&mut wl, 72_500);
        let past = |wl: &api::Workload| {
            wl.status
                .as_ref()
                .unwrap()
                .accumulated_past_execution_time_seconds
        };
        assert_eq!(past(&wl), Some(62));
        admitted_at(&mut wl, 100_000);
        evict(&mut wl, "Preempted", Some("InClusterQueue"), "m", 110_000);
        requeue_after_eviction(&mut wl, 110_000);
        assert_eq!(past(&wl), Some(72));
        // Not admitted: nothing to add.
        requeue_after_eviction(&mut wl, 200_000);
        assert_eq!(past(&wl), Some(72));
    }

    /// A Workload admitted at 1 s with DeactivationTarget (`reason`, `message`) set at 2 s.
    fn admitted_with_target(reason: &str, message: &str) -> api::Workload {
        let mut wl = api::Workload::default();
        admitted_at(&mut wl, 1_000);
        set_condition(
            &mut status_mut(&mut wl).conditions,
            labels::condition::DEACTIVATION_TARGET,
            true,
            reason,
            message,
            2_000,
        );
        wl
    }

    #[test]
    fn a_deactivation_names_its_cause_and_keeps_its_target() {
        let mut wl = admitted_with_target(
            "MaximumExecutionTimeExceeded",
            "exceeding the maximum execution time",
        );
        status_mut(&mut wl).requeue_state = Some(Default::default());
        evict(
            &mut wl,
            "Deactivated",
            None,
            "The workload is deactivated",
            3_000,
        );
        assert_eq!(
            cond(&wl, "Evicted").message,
            "The workload is deactivated due to exceeding the maximum execution time"
        );
        let st = wl.status.as_ref().unwrap();
        assert_eq!(
            cond(&wl, "Evicted").reason,
            "DeactivatedDueToMaximumExecutionTimeExceeded"
        );
        // Still admitted, past its limit: Kueue sets the target again at once (the differential suite sees it);
        // the backoff is dropped.
        assert_eq!(cond(&wl, "DeactivationTarget").status, "True");
        assert!(st.requeue_state.is_none());
        let e = &st.scheduling_stats.as_ref().unwrap().evictions[0];
        assert_eq!(
            (e.reason.as_str(), e.underlying_cause.as_str(), e.count),
            ("Deactivated", "MaximumExecutionTimeExceeded", 1)
        );
    }

    #[test]
    fn a_workload_a_stopped_queue_evicted_is_requeued_once_it_runs_again() {
        let stopped = |reason: &str| {
            let mut wl = api::Workload::default();
            set_condition(
                &mut status_mut(&mut wl).conditions,
                "Requeued",
                false,
                reason,
                "stopped",
                1_000,
            );
            wl
        };
        // The pure rule, then its write, as the operator and the simulator use them.
        let restart = |wl: &mut api::Workload, lq: bool, cq: bool, now| {
            restart_requeue(wl, lq, cq).is_some_and(|r| r.apply(wl, now))
        };
        let mut wl = stopped("LocalQueueStopped");
        // Still stopped: nothing changes; the ClusterQueue running does not restart a LocalQueue's eviction.
        assert!(!restart(&mut wl, false, true, 2_000));
        assert!(restart(&mut wl, true, false, 2_000));
        let c = cond(&wl, "Requeued");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "True",
                "LocalQueueRestarted",
                "The LocalQueue was restarted after being stopped"
            )
        );
        assert!(!restart(&mut wl, true, true, 3_000), "once");
        let mut wl = stopped("ClusterQueueStopped");
        assert!(!restart(&mut wl, true, false, 2_000));
        assert!(restart(&mut wl, false, true, 2_000));
        assert_eq!(cond(&wl, "Requeued").reason, "ClusterQueueRestarted");
        // Other reasons are not this rule's.
        let mut wl = stopped("PodsReadyTimeout");
        assert!(!restart(&mut wl, true, true, 2_000));
    }

    #[test]
    fn a_reactivated_workload_is_requeued_as_reactivated() {
        let reactivate = |wl: &mut api::Workload, now| {
            reactivation_requeue(wl).is_some_and(|r| r.apply(wl, now))
        };
        let mut wl = api::Workload::default();
        set_condition(
            &mut status_mut(&mut wl).conditions,
            "Requeued",
            false,
            "Deactivated",
            "The workload is deactivated",
            1_000,
        );
        wl.spec.active = Some(false);
        assert!(!reactivate(&mut wl, 2_000), "still inactive");
        wl.spec.active = Some(true);
        assert!(reactivate(&mut wl, 2_000));
        let c = cond(&wl, "Requeued");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("True", "Reactivated", "The workload was reactivated")
        );
        assert!(!reactivate(&mut wl, 3_000), "once");
    }

    #[test]
    fn a_deactivation_for_spent_requeues_drops_its_target() {
        let mut wl = admitted_with_target(
            "RequeuingLimitExceeded",
            "exceeding the maximum number of re-queuing retries",
        );
        evict(
            &mut wl,
            "Deactivated",
            None,
            "The workload is deactivated",
            3_000,
        );
        assert_eq!(
            cond(&wl, "Evicted").reason,
            "DeactivatedDueToRequeuingLimitExceeded"
        );
        assert!(
            wl.status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .all(|c| c.type_ != "DeactivationTarget"),
            "removed in the eviction's write, as Kueue's workload controller does"
        );
    }

    #[test]
    fn the_pods_ready_wait_follows_kueues_reasons() {
        let mut wl = api::Workload::default();
        admit(
            &mut wl,
            api::Admission {
                cluster_queue: "cq".into(),
                ..Default::default()
            },
            false,
            1_000,
        );
        assert_eq!(
            pods_ready_wait(&wl),
            Some(PodsReadyWait::Start),
            "no PodsReady yet"
        );
        let set = |wl: &mut api::Workload, ready: bool, now| {
            let (status, reason, message) = pods_ready_condition(wl, ready);
            let st = status_mut(wl);
            set_condition(
                &mut st.conditions,
                labels::condition::PODS_READY,
                status,
                reason,
                message,
                now,
            );
        };
        set(&mut wl, false, 2_000);
        assert_eq!(pods_ready_wait(&wl), Some(PodsReadyWait::Start));
        set(&mut wl, true, 3_000);
        assert_eq!(pods_ready_wait(&wl), None, "ready: no timeout");
        set(&mut wl, false, 4_000);
        assert_eq!(
            pods_ready_wait(&wl),
            Some(PodsReadyWait::Recovery { since: 4_000 })
        );
        assert_eq!(
            PodsReadyWait::Recovery { since: 0 }.cause(),
            "WaitForRecovery"
        );
        evict(&mut wl, "PodsReadyTimeout", None, "m", 5_000);
        assert_eq!(pods_ready_wait(&wl), None, "evicted: no timeout");
    }

    #[test]
    fn a_timeout_eviction_records_its_cause_apart_from_the_reason() {
        let mut wl = api::Workload::default();
        evict_with_cause(
            &mut wl,
            "PodsReadyTimeout",
            "WaitForStart",
            None,
            "m",
            1_000,
        );
        assert_eq!(cond(&wl, "Evicted").reason, "PodsReadyTimeout");
        let e = &wl
            .status
            .as_ref()
            .unwrap()
            .scheduling_stats
            .as_ref()
            .unwrap()
            .evictions[0];
        assert_eq!(
            (e.reason.as_str(), e.underlying_cause.as_str()),
            ("PodsReadyTimeout", "WaitForStart")
        );
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let mut c = Vec::new();
        set_condition(&mut c, "X", false, "A", "m", 1_000);
        set_condition(&mut c, "X", false, "B", "m2", 2_000);
        assert_eq!(c[0].last_transition_time, k8s_time(1_000));
        set_condition(&mut c, "X", true, "B", "m2", 3_000);
        assert_eq!(c[0].last_transition_time, k8s_time(3_000));
    }
}
