//! Simulated admission check controllers: an AdmissionCheck's `sluice.dev/simulated-answers` annotation says how
//! its controller answers, after each quota reservation of a workload, and when.
//!
//! The annotation is a comma-separated list of `STATE@DELAY[/REQUEUE_AFTER]`, for example `Retry@1m,Ready@2m`:
//! after a workload's first reservation the check answers Retry one minute later, after its second Ready two
//! minutes later; the last answer holds for every later reservation. STATE is Ready, Retry or Rejected; DELAY is
//! counted from the reservation; REQUEUE_AFTER (Retry only) is the check's `requeueAfterSeconds`, the time the
//! workload stays out of its queue. A Retry without it backs off as Kueue's ProvisioningRequest check does by
//! default: 60 s doubled per earlier retry, at most 1800 s. A check with answers counts as Active (its controller
//! is the simulator); one without is Active only when its status says so, and never answers (its workloads keep
//! their quota with the check Pending). Answers arrive in virtual time only, so a simulation with an answering
//! check runs in virtual time.

use sluice_sdk::kueue::v1beta2::CheckState;

use crate::duration::parse_duration;
use crate::engine::Time;

/// The AdmissionCheck annotation holding its simulated answers.
pub const SIMULATED_ANSWERS_ANNOTATION: &str = "sluice.dev/simulated-answers";

/// Kueue's ProvisioningRequest retry defaults (backoffBaseSeconds, backoffMaxSeconds).
const BACKOFF_BASE_SECONDS: i32 = 60;
const BACKOFF_MAX_SECONDS: i32 = 1800;

/// One answer of a simulated check controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The state it sets.
    pub state: CheckState,
    /// How long after the reservation it comes.
    pub after: Time,
    /// The `requeueAfterSeconds` it sets with a Retry (None: the default backoff).
    pub requeue_after_seconds: Option<i32>,
}

impl Answer {
    /// The `requeueAfterSeconds` of this answer for a workload that was sent back `retries` times before.
    pub fn requeue_after(&self, retries: i32) -> Option<i32> {
        if self.state != CheckState::Retry {
            return None;
        }
        Some(self.requeue_after_seconds.unwrap_or_else(|| {
            let doubled = BACKOFF_BASE_SECONDS.saturating_mul(1 << retries.clamp(0, 20));
            doubled.min(BACKOFF_MAX_SECONDS)
        }))
    }
}

/// Parses the annotation; the error names the entry and what is wrong with it.
pub fn parse_answers(text: &str) -> Result<Vec<Answer>, String> {
    let mut out = Vec::new();
    for (i, entry) in text.split(',').map(str::trim).enumerate() {
        let what = |why: String| format!("answer {} ({entry:?}): {why}", i + 1);
        let (state, rest) = entry
            .split_once('@')
            .ok_or_else(|| what("expected STATE@DELAY, e.g. Ready@2m".into()))?;
        let state = match state.trim() {
            "Ready" => CheckState::Ready,
            "Retry" => CheckState::Retry,
            "Rejected" => CheckState::Rejected,
            other => {
                return Err(what(format!(
                    "state {other:?} is not Ready, Retry or Rejected"
                )));
            }
        };
        let (delay, requeue) = match rest.split_once('/') {
            Some((d, r)) => (d, Some(r)),
            None => (rest, None),
        };
        let after = parse_duration(delay).map_err(|e| what(e.to_string()))?;
        let requeue_after_seconds = match requeue {
            None => None,
            Some(_) if state != CheckState::Retry => {
                return Err(what("only a Retry answer takes /REQUEUE_AFTER".into()));
            }
            Some(r) => {
                let ms = parse_duration(r).map_err(|e| what(e.to_string()))?;
                Some(i32::try_from(ms / 1000).map_err(|_| what("requeue time too long".into()))?)
            }
        };
        out.push(Answer {
            state,
            after,
            requeue_after_seconds,
        });
    }
    Ok(out)
}

/// The answer for a workload's `reservation`-th reservation (1 for the first): the last one holds after the list.
pub fn answer_for(answers: &[Answer], reservation: u32) -> Option<&Answer> {
    let i = (reservation.max(1) as usize - 1).min(answers.len().checked_sub(1)?);
    answers.get(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;
    use crate::sim::Simulation;
    use sluice_sdk::kueue::labels::condition;

    #[test]
    fn a_retry_then_ready_leaves_kueues_status_on_the_workload() {
        let text = include_str!("../../tests/fixtures/admission-check-retry.yaml");
        let docs = crate::manifest::parse_documents("admission-check-retry.yaml", text).unwrap();
        let mut sim = Simulation::from_documents(&docs, EngineConfig::default()).unwrap();
        assert!(sim.is_timed(), "answering checks run in virtual time");
        sim.run(None, |_, _| {}).unwrap();
        let sw = sim.workloads.values().next().unwrap();
        let st = sw.workload.status.as_ref().unwrap();
        let check = &st.admission_checks[0];
        assert_eq!(check.name, "capacity");
        assert_eq!(check.state, Some(CheckState::Ready));
        assert_eq!(check.retry_count, Some(1));
        assert_eq!(
            check.requeue_after_seconds,
            Some(60),
            "the first retry's backoff"
        );
        let cond = |t: &str| crate::status::condition(&st.conditions, t).unwrap();
        assert_eq!(cond(condition::FINISHED).status, "True");
        // Reserved again: the eviction is history, as Kueue rewrites it.
        assert_eq!(cond(condition::EVICTED).status, "False");
        assert_eq!(
            cond(condition::EVICTED).message,
            "Previously: Evicted due to AdmissionCheck in Retry state: \"capacity\""
        );
        assert_eq!(cond(condition::REQUEUED).reason, "BackoffFinished");
        assert_eq!(cond(condition::ADMITTED).status, "True");
        let stats = st.scheduling_stats.as_ref().unwrap();
        assert_eq!(stats.evictions[0].reason, "AdmissionCheck");
        assert_eq!(stats.evictions[0].count, 1);
    }

    #[test]
    fn a_workload_that_cannot_reserve_still_lists_its_checks() {
        // Eight GPUs against the fixture's four: never reserved, yet its check is listed as Pending.
        let text = include_str!("../../tests/fixtures/admission-check-retry.yaml")
            .replace("parallelism: 4", "parallelism: 8")
            .replace("sluice.dev/run-time: 30m", "sluice.dev/run-time: 1m");
        let docs = crate::manifest::parse_documents("big.yaml", &text).unwrap();
        let mut sim = Simulation::from_documents(&docs, EngineConfig::default()).unwrap();
        sim.run(None, |_, _| {}).unwrap();
        let st = sim
            .workloads
            .values()
            .next()
            .unwrap()
            .workload
            .status
            .clone()
            .unwrap();
        assert!(st.admission.is_none());
        let listed: Vec<_> = st
            .admission_checks
            .iter()
            .map(|c| (c.name.as_str(), c.state))
            .collect();
        assert_eq!(listed, [("capacity", Some(CheckState::Pending))]);
    }

    #[test]
    fn answers_parse_with_delays_and_requeue_times() {
        let a = parse_answers("Retry@1m, Ready@2m,Retry@30s/5m,Rejected@1h").unwrap();
        assert_eq!(a.len(), 4);
        assert_eq!((a[0].state, a[0].after), (CheckState::Retry, 60_000));
        assert_eq!((a[1].state, a[1].after), (CheckState::Ready, 120_000));
        assert_eq!(a[2].requeue_after_seconds, Some(300));
        assert_eq!(a[3].state, CheckState::Rejected);
        assert_eq!(answer_for(&a, 1), Some(&a[0]));
        assert_eq!(answer_for(&a, 2), Some(&a[1]));
        assert_eq!(answer_for(&a, 9), Some(&a[3]), "the last answer holds");
        assert_eq!(answer_for(&[], 1), None);
    }

    #[test]
    fn a_retry_backs_off_as_kueues_provisioning_check_by_default() {
        let a = parse_answers("Retry@1s,Retry@1s/45s,Ready@1s").unwrap();
        assert_eq!(a[0].requeue_after(0), Some(60));
        assert_eq!(a[0].requeue_after(1), Some(120));
        assert_eq!(a[0].requeue_after(10), Some(1800));
        assert_eq!(a[1].requeue_after(3), Some(45));
        assert_eq!(a[2].requeue_after(0), None);
    }

    #[test]
    fn bad_answers_say_which_and_why() {
        let e = parse_answers("Ready@2m,Maybe@1m").unwrap_err();
        assert!(
            e.contains("answer 2 (\"Maybe@1m\")") && e.contains("not Ready, Retry or Rejected"),
            "{e}"
        );
        let e = parse_answers("Ready").unwrap_err();
        assert!(e.contains("expected STATE@DELAY"), "{e}");
        let e = parse_answers("Ready@soon").unwrap_err();
        assert!(e.contains("invalid duration"), "{e}");
        let e = parse_answers("Ready@1m/2m").unwrap_err();
        assert!(e.contains("only a Retry"), "{e}");
    }
}
