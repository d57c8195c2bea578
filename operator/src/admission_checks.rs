//! Admission checks on a Workload, as Kueue's workload controller keeps them: which checks of a ClusterQueue apply
//! to a workload, their states in `status.admissionChecks`, the Admitted condition they gate, and what a Retry or
//! Rejected answer does. Pure functions on the Workload, shared by the operator and the simulator.

use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::kueue::v1beta2::CheckState;

use crate::engine;
use crate::status::{condition, k8s_time, set_condition};

/// The Evicted reason (and DeactivationTarget reason) of a workload a check sent back or rejected.
pub const EVICTED_BY_ADMISSION_CHECK: &str = "AdmissionCheck";

/// Whether the AdmissionCheck's controller says it is Active (its `Active` condition is True); a ClusterQueue
/// naming an inactive check admits nothing.
pub fn is_active(check: &api::AdmissionCheck) -> bool {
    check.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == labels::condition::ACTIVE && c.status == "True")
    })
}

/// Quota reserved in ClusterQueue `cq` (None: not known): `status.admission`, QuotaReserved, and the checks that
/// apply to this admission listed as Pending (Admitted waits for them; without checks reserving is admitting).
/// Returns whether any check applies.
pub fn reserve(
    wl: &mut api::Workload,
    cq: Option<&api::ClusterQueueSpec>,
    admission: api::Admission,
    now: engine::Time,
) -> bool {
    let checks = cq
        .map(|spec| checks_for(spec, Some(&admission)))
        .unwrap_or_default();
    let has_checks = !checks.is_empty();
    crate::status::admit(wl, admission, has_checks, now);
    sync(wl, &checks, now);
    has_checks
}

/// The checks of `cq` that apply to a workload: with an admission, those whose `onFlavors` is empty or names one
/// of its assigned flavors; without one, those that apply to every flavor of the ClusterQueue (Kueue's
/// AdmissionChecksForWorkload). Sorted by name, as Kueue keeps them.
pub fn checks_for(cq: &api::ClusterQueueSpec, admission: Option<&api::Admission>) -> Vec<String> {
    let Some(strategy) = cq.admission_checks_strategy.as_ref() else {
        return Vec::new();
    };
    let cq_flavors: Vec<&str> = cq
        .resource_groups
        .iter()
        .flat_map(|rg| rg.flavors.iter().map(|f| f.name.as_str()))
        .collect();
    let assigned: Vec<&str> = admission
        .into_iter()
        .flat_map(|a| a.pod_set_assignments.iter())
        .flat_map(|ps| ps.flavors.values().map(String::as_str))
        .collect();
    let mut out: Vec<String> = strategy
        .admission_checks
        .iter()
        .filter(|rule| {
            let on: &[String] = &rule.on_flavors;
            if on.is_empty() {
                return true;
            }
            match admission {
                Some(_) => assigned.iter().any(|f| on.iter().any(|o| o == f)),
                None => cq_flavors.iter().all(|f| on.iter().any(|o| o == f)),
            }
        })
        .map(|rule| rule.name.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Makes `status.admissionChecks` list exactly `checks`: a new one Pending, a known one kept, one no longer
/// applying dropped, sorted by name (Kueue's syncAdmissionCheckConditions). Returns whether it changed.
pub fn sync(wl: &mut api::Workload, checks: &[String], now: engine::Time) -> bool {
    let st = wl.status.get_or_insert_with(Default::default);
    let before = st.admission_checks.clone();
    st.admission_checks.retain(|c| checks.contains(&c.name));
    for name in checks {
        if !st.admission_checks.iter().any(|c| &c.name == name) {
            st.admission_checks.push(api::AdmissionCheckState {
                name: name.clone(),
                state: Some(CheckState::Pending),
                last_transition_time: Some(k8s_time(now)),
                ..Default::default()
            });
        }
    }
    st.admission_checks.sort_by(|a, b| a.name.cmp(&b.name));
    st.admission_checks != before
}

/// Sets one check's state, as the check's own controller does; the transition time moves only when the state
/// changes. Returns whether anything changed (false also for a check the workload does not have).
pub fn set_state(
    wl: &mut api::Workload,
    name: &str,
    state: CheckState,
    message: &str,
    requeue_after_seconds: Option<i32>,
    now: engine::Time,
) -> bool {
    let Some(c) = wl
        .status
        .as_mut()
        .and_then(|s| s.admission_checks.iter_mut().find(|c| c.name == name))
    else {
        return false;
    };
    let before = c.clone();
    if c.state != Some(state) {
        c.state = Some(state);
        c.last_transition_time = Some(k8s_time(now));
    }
    c.message = message.to_string();
    if requeue_after_seconds.is_some() {
        c.requeue_after_seconds = requeue_after_seconds;
    }
    *c != before
}

fn states(wl: &api::Workload) -> &[api::AdmissionCheckState] {
    wl.status
        .as_ref()
        .map(|s| s.admission_checks.as_slice())
        .unwrap_or_default()
}

/// Whether every check of the workload is Ready (true when it has none).
pub fn all_ready(wl: &api::Workload) -> bool {
    states(wl)
        .iter()
        .all(|c| c.state == Some(CheckState::Ready))
}

/// Kueue's SyncAdmittedCondition for a workload holding quota: Admitted=True once every check is Ready, and
/// False (`UnsatisfiedChecks`) when a check stops being Ready while it is admitted. Nothing is written while it
/// was never admitted and is not yet, as in Kueue. Returns whether it changed.
pub fn sync_admitted(wl: &mut api::Workload, now: engine::Time) -> bool {
    if !admitted_out_of_sync(wl) {
        return false;
    }
    let ready = all_ready(wl);
    let st = wl.status.get_or_insert_with(Default::default);
    if ready {
        crate::status::set_admitted(&mut st.conditions, now)
    } else {
        set_condition(
            &mut st.conditions,
            labels::condition::ADMITTED,
            false,
            "UnsatisfiedChecks",
            "The workload has not all checks ready",
            now,
        )
    }
}

/// Whether [`sync_admitted`] would change the workload: it holds quota and its Admitted condition disagrees
/// with its checks.
pub fn admitted_out_of_sync(wl: &api::Workload) -> bool {
    let Some(st) = wl.status.as_ref() else {
        return false;
    };
    let reserved = st.admission.is_some()
        && condition(&st.conditions, labels::condition::QUOTA_RESERVED)
            .is_some_and(|c| c.status == "True");
    let admitted =
        condition(&st.conditions, labels::condition::ADMITTED).is_some_and(|c| c.status == "True");
    reserved && admitted != all_ready(wl)
}

/// What a workload's check states ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to do (checks pending or ready).
    Wait,
    /// A check asks to retry: evict with this message; out of the queue until `requeue_at` when a check set one
    /// (its transition time plus its `requeueAfterSeconds`, the latest of them).
    Retry {
        /// The Evicted message.
        message: String,
        /// When it may be queued again.
        requeue_at: Option<engine::Time>,
    },
    /// A check rejected it: deactivate with this DeactivationTarget message.
    Rejected {
        /// The DeactivationTarget message.
        message: String,
    },
}

/// Kueue's reconcileCheckBasedEviction: Rejected wins over Retry; an already evicted workload is left alone.
pub fn verdict(wl: &api::Workload) -> Verdict {
    let evicted = wl.status.as_ref().is_some_and(|s| {
        condition(&s.conditions, labels::condition::EVICTED).is_some_and(|c| c.status == "True")
    });
    if evicted {
        return Verdict::Wait;
    }
    let of = |state: CheckState| -> Vec<&api::AdmissionCheckState> {
        states(wl)
            .iter()
            .filter(|c| c.state == Some(state))
            .collect()
    };
    let rejected = of(CheckState::Rejected);
    if !rejected.is_empty() {
        return Verdict::Rejected {
            message: describe(&rejected, "Rejected"),
        };
    }
    let retry = of(CheckState::Retry);
    if retry.is_empty() {
        return Verdict::Wait;
    }
    let requeue_at = retry
        .iter()
        .filter_map(|c| {
            let at = c.last_transition_time.as_ref()?.0.as_millisecond();
            Some(at + i64::from(c.requeue_after_seconds?) * 1000)
        })
        .max();
    Verdict::Retry {
        message: format!("Evicted due to {}", describe(&retry, "Retry")),
        requeue_at,
    }
}

/// Kueue's buildAdmissionChecksMessage: `AdmissionCheck(s) in <state> state: "a" (message); "b"`.
fn describe(checks: &[&api::AdmissionCheckState], state: &str) -> String {
    let mut sorted = checks.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let parts: Vec<String> = sorted
        .iter()
        .map(|c| {
            if c.message.is_empty() {
                format!("{:?}", c.name)
            } else {
                format!("{:?} ({})", c.name, c.message)
            }
        })
        .collect();
    let noun = if checks.len() > 1 {
        "AdmissionChecks"
    } else {
        "AdmissionCheck"
    };
    format!("{noun} in {state} state: {}", parts.join("; "))
}

/// Kueue's resetChecksOnEviction: every check not Pending goes back to Pending, saying what it was; a Retry
/// counts one more retry.
pub fn reset_on_eviction(wl: &mut api::Workload, now: engine::Time) {
    let Some(st) = wl.status.as_mut() else {
        return;
    };
    for c in &mut st.admission_checks {
        let Some(state) = c.state.filter(|s| *s != CheckState::Pending) else {
            continue;
        };
        let retry_count = (state == CheckState::Retry).then(|| c.retry_count.unwrap_or(0) + 1);
        *c = api::AdmissionCheckState {
            name: std::mem::take(&mut c.name),
            state: Some(CheckState::Pending),
            last_transition_time: Some(k8s_time(now)),
            message: format!("Reset to Pending after eviction. Previously: {state:?}"),
            requeue_after_seconds: c.requeue_after_seconds,
            retry_count,
            pod_set_updates: Vec::new(),
        };
    }
}

/// Sets `status.requeueState.requeueAt` to `at` when it is later than what is there (Kueue's
/// NeedsRequeueAtUpdate, without counting a requeue). Returns whether it changed.
pub fn hold_until(wl: &mut api::Workload, at: engine::Time) -> bool {
    let st = wl.status.get_or_insert_with(Default::default);
    let rs = st.requeue_state.get_or_insert_with(Default::default);
    if rs
        .requeue_at
        .as_ref()
        .is_some_and(|t| t.0.as_millisecond() >= at)
    {
        return false;
    }
    rs.requeue_at = Some(k8s_time(at));
    true
}

#[cfg(test)]
mod tests;
