use super::*;
use crate::status;

const T0: engine::Time = 1_700_000_000_000;

fn cq(rules: &[(&str, &[&str])]) -> api::ClusterQueueSpec {
    let mut spec: api::ClusterQueueSpec = serde_json::from_value(serde_json::json!({
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": 4}]},
            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": 4}]}
        ]}]
    }))
    .unwrap();
    spec.admission_checks_strategy = Some(api::AdmissionChecksStrategy {
        admission_checks: rules
            .iter()
            .map(|(name, on)| api::AdmissionCheckStrategyRule {
                name: name.to_string(),
                on_flavors: on.iter().map(|f| f.to_string()).collect(),
            })
            .collect(),
    });
    spec
}

fn admission(flavor: &str) -> api::Admission {
    serde_json::from_value(serde_json::json!({
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": flavor}, "count": 1}]
    }))
    .unwrap()
}

fn reserved(checks: &[&str]) -> api::Workload {
    let mut wl = api::Workload::default();
    status::admit(&mut wl, admission("on-demand"), true, T0);
    let names: Vec<String> = checks.iter().map(|c| c.to_string()).collect();
    sync(&mut wl, &names, T0);
    wl
}

fn admitted(wl: &api::Workload) -> Option<bool> {
    let st = wl.status.as_ref()?;
    condition(&st.conditions, labels::condition::ADMITTED).map(|c| c.status == "True")
}

#[test]
fn checks_apply_by_their_flavors() {
    let spec = cq(&[
        ("prov", &["spot"]),
        ("all", &[]),
        ("both", &["spot", "on-demand"]),
    ]);
    assert_eq!(
        checks_for(&spec, Some(&admission("spot"))),
        ["all", "both", "prov"]
    );
    assert_eq!(
        checks_for(&spec, Some(&admission("on-demand"))),
        ["all", "both"]
    );
    // Before an admission only the checks covering every flavor of the ClusterQueue are known.
    assert_eq!(checks_for(&spec, None), ["all", "both"]);
    assert!(checks_for(&api::ClusterQueueSpec::default(), None).is_empty());
}

#[test]
fn checks_are_added_pending_and_dropped_sorted() {
    let mut wl = reserved(&["b", "a"]);
    let st = wl.status.as_ref().unwrap();
    let names: Vec<&str> = st
        .admission_checks
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(
        st.admission_checks
            .iter()
            .all(|c| c.state == Some(CheckState::Pending))
    );
    assert!(
        !sync(&mut wl, &["a".into(), "b".into()], T0 + 5),
        "nothing new"
    );
    assert!(set_state(&mut wl, "a", CheckState::Ready, "", None, T0 + 5));
    assert!(sync(&mut wl, &["a".into()], T0 + 6));
    let st = wl.status.as_ref().unwrap();
    assert_eq!(st.admission_checks.len(), 1);
    assert_eq!(
        st.admission_checks[0].state,
        Some(CheckState::Ready),
        "a known check is kept"
    );
}

#[test]
fn admitted_only_once_every_check_is_ready() {
    let mut wl = reserved(&["a", "b"]);
    assert_eq!(admitted(&wl), None, "no Admitted condition at reservation");
    assert!(!sync_admitted(&mut wl, T0));
    set_state(&mut wl, "a", CheckState::Ready, "", None, T0 + 1);
    assert!(!sync_admitted(&mut wl, T0 + 1));
    assert_eq!(verdict(&wl), Verdict::Wait);
    set_state(&mut wl, "b", CheckState::Ready, "", None, T0 + 2);
    assert!(sync_admitted(&mut wl, T0 + 2));
    assert_eq!(admitted(&wl), Some(true));
    // A check that stops being Ready takes the admission back.
    set_state(&mut wl, "b", CheckState::Pending, "", None, T0 + 3);
    assert!(sync_admitted(&mut wl, T0 + 3));
    assert_eq!(admitted(&wl), Some(false));
    let st = wl.status.as_ref().unwrap();
    let c = condition(&st.conditions, labels::condition::ADMITTED).unwrap();
    assert_eq!(c.reason, "UnsatisfiedChecks");
}

#[test]
fn retry_evicts_with_kueues_message_and_requeue_time() {
    let mut wl = reserved(&["b", "a"]);
    set_state(
        &mut wl,
        "b",
        CheckState::Retry,
        "no capacity",
        Some(60),
        T0 + 1000,
    );
    set_state(&mut wl, "a", CheckState::Retry, "", Some(30), T0 + 2000);
    assert_eq!(
        verdict(&wl),
        Verdict::Retry {
            message: "Evicted due to AdmissionChecks in Retry state: \"a\"; \"b\" (no capacity)"
                .into(),
            requeue_at: Some(T0 + 61_000),
        }
    );
    // Rejected wins.
    set_state(
        &mut wl,
        "a",
        CheckState::Rejected,
        "quota gone",
        None,
        T0 + 3000,
    );
    assert_eq!(
        verdict(&wl),
        Verdict::Rejected {
            message: "AdmissionCheck in Rejected state: \"a\" (quota gone)".into()
        }
    );
    // An evicted workload is left alone.
    status::evict(&mut wl, EVICTED_BY_ADMISSION_CHECK, None, "x", T0 + 4000);
    assert_eq!(verdict(&wl), Verdict::Wait);
}

#[test]
fn eviction_resets_checks_to_pending_counting_retries() {
    let mut wl = reserved(&["a", "b", "c"]);
    set_state(&mut wl, "a", CheckState::Retry, "", Some(10), T0 + 1);
    set_state(&mut wl, "b", CheckState::Ready, "", None, T0 + 1);
    reset_on_eviction(&mut wl, T0 + 2);
    let st = wl.status.as_ref().unwrap();
    let a = &st.admission_checks[0];
    assert_eq!(a.state, Some(CheckState::Pending));
    assert_eq!(
        a.message,
        "Reset to Pending after eviction. Previously: Retry"
    );
    assert_eq!(
        (a.retry_count, a.requeue_after_seconds),
        (Some(1), Some(10))
    );
    let b = &st.admission_checks[1];
    assert_eq!((b.state, b.retry_count), (Some(CheckState::Pending), None));
    assert_eq!(
        b.message,
        "Reset to Pending after eviction. Previously: Ready"
    );
    let c = &st.admission_checks[2];
    assert_eq!(
        c.last_transition_time,
        Some(k8s_time(T0)),
        "a Pending check is untouched"
    );
}

#[test]
fn a_requeue_time_only_moves_later() {
    let mut wl = api::Workload::default();
    assert!(hold_until(&mut wl, T0 + 10));
    assert!(!hold_until(&mut wl, T0 + 5));
    assert!(hold_until(&mut wl, T0 + 20));
    let rs = wl.status.unwrap().requeue_state.unwrap();
    assert_eq!(rs.requeue_at, Some(k8s_time(T0 + 20)));
    assert_eq!(
        rs.count, None,
        "a check's retry time does not count a requeue"
    );
}
