//! A ClusterQueue with admission checks (Kueue's two-phase admission): the engine reserves quota, and the
//! workload counts as admitted in its queues' status only once its Workload says its checks passed.

use crate::common::*;
use sluice_engine::*;

fn checked_env() -> Env {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let mut c = cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(4))])]);
    c.0.admission_checks = vec!["prov".into()];
    env.apply(Event::UpsertAdmissionCheck {
        name: "prov".into(),
        active: true,
    });
    env.cq_lq(c, "ns");
    env
}

fn counts(env: &Env) -> (i32, i32, bool, bool) {
    let u = env.engine.cluster_queue_usage("cq").unwrap();
    let l = env.engine.local_queue_usage("ns", "main").unwrap();
    assert_eq!(
        (l.reserving_workloads, l.admitted_workloads),
        (u.reserving_workloads, u.admitted_workloads),
        "the LocalQueue counts as its ClusterQueue"
    );
    let used = |f: &[FlavorUsage]| {
        f.iter()
            .any(|f| f.resources.iter().any(|r| r.total != Quantity::default()))
    };
    (
        u.reserving_workloads,
        u.admitted_workloads,
        used(&u.flavors_usage),
        used(&l.flavors_usage),
    )
}

#[test]
fn a_reservation_counts_as_admitted_only_once_its_checks_pass() {
    let mut env = checked_env();
    let w = wl("ns", "w").ps("main", 1, &[("cpu", cpu(2))]);
    env.submit(w);
    env.schedule();
    let admission = env.assert_admitted("ns/w");
    // Quota reserved, checks pending: reserving, not admitted, no admitted usage.
    assert_eq!(counts(&env), (1, 0, false, false));
    // The Workload's checks passed (the shell re-reads it with Admitted=True).
    let mut passed = wl("ns", "w").ps("main", 1, &[("cpu", cpu(2))]).build();
    passed.admitted = true;
    env.apply(Event::UpsertWorkload {
        workload: passed,
        admission: Some(admission),
    });
    assert_eq!(counts(&env), (1, 1, true, true));
}

#[test]
fn without_checks_reserving_is_admitting() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    env.cq_lq(
        cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(4))])]),
        "ns",
    );
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(2))]));
    env.schedule();
    env.assert_admitted("ns/w");
    assert_eq!(counts(&env), (1, 1, true, true));
}

#[test]
fn a_missing_or_inactive_check_keeps_its_cluster_queue_inactive() {
    let mut env = Env::new();
    env.flavor("default").ns("ns", &[]);
    let mut c = cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(4))])]);
    c.0.admission_checks = vec!["prov".into(), "quota".into()];
    env.cq_lq(c, "ns");
    env.submit(wl("ns", "w").ps("main", 1, &[("cpu", cpu(1))]));
    env.schedule();
    assert_eq!(
        env.assert_pending("ns/w", "Inadmissible"),
        "ClusterQueue cq is inactive"
    );
    let status = |env: &Env| {
        let u = env.engine.cluster_queue_usage("cq").unwrap();
        (u.active, u.inactive_reason, u.inactive_message)
    };
    assert_eq!(
        status(&env),
        (
            false,
            "AdmissionCheckNotFound".into(),
            "Can't admit new workloads: references missing AdmissionCheck(s): prov,quota.".into()
        )
    );
    env.apply(Event::UpsertAdmissionCheck {
        name: "prov".into(),
        active: false,
    });
    env.apply(Event::UpsertAdmissionCheck {
        name: "quota".into(),
        active: true,
    });
    assert_eq!(
        status(&env),
        (
            false,
            "AdmissionCheckInactive".into(),
            "Can't admit new workloads: references inactive AdmissionCheck(s): prov.".into()
        )
    );
    // Its controller says it is active: the queue admits (quota reserved, checks still to pass).
    env.apply(Event::UpsertAdmissionCheck {
        name: "prov".into(),
        active: true,
    });
    assert_eq!(status(&env), (true, String::new(), String::new()));
    env.schedule();
    env.assert_admitted("ns/w");
    env.apply(Event::DeleteAdmissionCheck("quota".into()));
    assert_eq!(status(&env).1, "AdmissionCheckNotFound");
}
