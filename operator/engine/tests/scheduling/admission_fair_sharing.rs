//! Admission fair sharing, from Kueue's scheduler AFS tests, queue ordering tests and LocalQueue reconciler cases:
//! within a ClusterQueue with `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`, the LocalQueue that
//! used less (decayed consumed usage plus entry penalties, over its weight) goes first, before priority.

use std::collections::BTreeMap;

use crate::common::*;
use sluice_engine::*;

/// Kueue's scheduler test settings: half-life 10 s, sampling every second.
fn afs_config(weights: &[(&str, f64)]) -> EngineConfig {
    EngineConfig {
        admission_fair_sharing: Some(AdmissionFairSharingConfig {
            usage_half_life: 10_000,
            usage_sampling_interval: 1_000,
            resource_weights: weights.iter().map(|(r, w)| (r.to_string(), *w)).collect(),
        }),
        ..EngineConfig::default()
    }
}

/// ClusterQueue `cq1` (8 cpu, and 16 GPUs) with LocalQueues lq-a, lq-b, lq-c, ordered by usage when `afs`.
fn env_with(config: EngineConfig, afs: bool, within: WithinCqPolicy) -> Env {
    let mut env = Env::with_config(config);
    env.flavor("default").ns("default", &[]);
    let mut c = cq("cq1")
        .group(
            &["cpu", "nvidia.com/gpu"],
            vec![fq(
                "default",
                vec![rq("cpu", cpu(8)), rq("nvidia.com/gpu", 16)],
            )],
        )
        .preemption(ReclaimPolicy::Never, within);
    c.0.admission_fair_sharing = afs;
    env.cq(c);
    for lq in ["lq-a", "lq-b", "lq-c"] {
        env.lq("default", lq, "cq1");
    }
    env
}

fn consumed(env: &mut Env, lq: &str, resources: &[(&str, f64)]) {
    env.apply(Event::RestoreLocalQueueUsage {
        namespace: "default".into(),
        name: lq.into(),
        usage: ConsumedUsage {
            resources: resources.iter().map(|(r, v)| (r.to_string(), *v)).collect(),
            last_update: 0,
        },
    });
}

fn job(name: &str, lq: &str, cores: i64, created: Time) -> WlB {
    wl("default", name)
        .queue(lq)
        .created(created)
        .ps("one", 1, &[("cpu", cpu(cores))])
}

#[test]
fn the_less_used_local_queue_is_admitted_first() {
    // Kueue's "admits workload from less active localqueue": lq-a used 8 cpu, lq-b 2.
    let mut env = env_with(afs_config(&[]), true, WithinCqPolicy::Never);
    consumed(&mut env, "lq-a", &[("cpu", 8.0)]);
    consumed(&mut env, "lq-b", &[("cpu", 2.0)]);
    env.submit(job("wl-a1", "lq-a", 8, 0));
    env.submit(job("wl-b1", "lq-b", 8, 1));
    assert_eq!(admits(&env.schedule()), vec!["default/wl-b1"]);
    env.schedule();
    let message = env.assert_pending("default/wl-a1", "WaitingForQuota");
    assert!(
        message.contains("insufficient unused quota for cpu in flavor default, 8 more needed"),
        "{message}"
    );
}

#[test]
fn without_usage_based_admission_scope_the_queue_keeps_priority_and_time_order() {
    for config in [afs_config(&[]), EngineConfig::default()] {
        let afs = config.admission_fair_sharing.is_some();
        // With the settings but a ClusterQueue that does not ask for it, and with a ClusterQueue that asks but no
        // settings (Kueue's gate off or no admissionFairSharing): the older workload first.
        for cq_asks in [false, true] {
            if afs && cq_asks {
                continue;
            }
            let mut env = env_with(config.clone(), cq_asks, WithinCqPolicy::Never);
            consumed(&mut env, "lq-a", &[("cpu", 8.0)]);
            consumed(&mut env, "lq-b", &[("cpu", 2.0)]);
            env.submit(job("wl-a1", "lq-a", 8, 0));
            env.submit(job("wl-b1", "lq-b", 8, 1));
            assert_eq!(
                admits(&env.schedule()),
                vec!["default/wl-a1"],
                "afs {afs}, cq asks {cq_asks}"
            );
        }
    }
}

#[test]
fn an_entry_penalty_alternates_local_queues_of_equal_usage() {
    // Kueue's "admits one workload from each localqueue when quota is limited": both used 4 cpu.
    let mut env = env_with(afs_config(&[]), true, WithinCqPolicy::Never);
    consumed(&mut env, "lq-a", &[("cpu", 4.0)]);
    consumed(&mut env, "lq-b", &[("cpu", 4.0)]);
    env.submit(job("wl-a1", "lq-a", 4, 0));
    env.submit(job("wl-a2", "lq-a", 4, 1));
    env.submit(job("wl-b1", "lq-b", 4, 2));
    env.submit(job("wl-b2", "lq-b", 4, 3));
    // A tie goes to the older workload; its LocalQueue then carries 4 cpu x alpha(1 s) = 267m more.
    assert_eq!(admits(&env.schedule()), vec!["default/wl-a1"]);
    let a = env
        .engine
        .local_queue_admission_usage("default", "lq-a")
        .unwrap();
    assert!(
        (a - (4.0 + 4.0 * (1.0 - 0.5f64.powf(0.1)))).abs() < 1e-9,
        "{a}"
    );
    assert_eq!(admits(&env.schedule()), vec!["default/wl-b1"]);
    for _ in 0..3 {
        assert!(admits(&env.schedule()).is_empty());
    }
    // wl-b2 is tried first and does not fit; wl-a2, of the same shape, is set aside untried (Kueue's
    // SchedulingEquivalenceHashing).
    let message = env.assert_pending("default/wl-b2", "WaitingForQuota");
    assert!(message.contains("4 more needed"), "{message}");
    env.assert_pending("default/wl-a2", "PendingEvaluation");
}

#[test]
fn usage_goes_before_priority_and_is_divided_by_the_local_queue_weight() {
    // Kueue's Pop cases: lq-a used 10, lq-b 6 but weighs 2 (usage 3): lq-b's lower-priority workload first.
    let mut env = env_with(afs_config(&[]), true, WithinCqPolicy::Never);
    env.apply(Event::UpsertLocalQueue(LocalQueue {
        namespace: "default".into(),
        name: "lq-b".into(),
        cluster_queue: "cq1".into(),
        stop_policy: StopPolicy::None,
        fair_sharing_weight: Some(2.0),
    }));
    consumed(&mut env, "lq-a", &[("cpu", 10.0)]);
    consumed(&mut env, "lq-b", &[("cpu", 6.0)]);
    env.submit(job("wl-a", "lq-a", 8, 0).prio(2));
    env.submit(job("wl-b", "lq-b", 8, 1).prio(1));
    assert_eq!(
        env.engine.local_queue_admission_usage("default", "lq-b"),
        Some(3.0)
    );
    assert_eq!(admits(&env.schedule()), vec!["default/wl-b"]);
}

#[test]
fn resource_weights_choose_what_counts() {
    // Kueue's Pop case with weights {cpu: 0, gpu: 1}: lq-a used 1 cpu and 10 GPUs, lq-b 1000 cpu and 1 GPU.
    let mut env = env_with(
        afs_config(&[("cpu", 0.0), ("nvidia.com/gpu", 1.0)]),
        true,
        WithinCqPolicy::Never,
    );
    consumed(&mut env, "lq-a", &[("cpu", 1.0), ("nvidia.com/gpu", 10.0)]);
    consumed(
        &mut env,
        "lq-b",
        &[("cpu", 1000.0), ("nvidia.com/gpu", 1.0)],
    );
    env.submit(job("wl-a", "lq-a", 8, 0));
    env.submit(job("wl-b", "lq-b", 8, 1));
    assert_eq!(admits(&env.schedule()), vec!["default/wl-b"]);
}

#[test]
fn a_local_queue_without_weight_goes_last() {
    let mut env = env_with(afs_config(&[]), true, WithinCqPolicy::Never);
    env.apply(Event::UpsertLocalQueue(LocalQueue {
        namespace: "default".into(),
        name: "lq-a".into(),
        cluster_queue: "cq1".into(),
        stop_policy: StopPolicy::None,
        fair_sharing_weight: Some(0.0),
    }));
    consumed(&mut env, "lq-b", &[("cpu", 100.0)]);
    env.submit(job("wl-a", "lq-a", 8, 0));
    env.submit(job("wl-b", "lq-b", 8, 1));
    assert_eq!(admits(&env.schedule()), vec!["default/wl-b"]);
}

#[test]
fn consumed_usage_decays_towards_what_is_admitted_and_is_reported() {
    let mut env = env_with(afs_config(&[]), true, WithinCqPolicy::Never);
    env.submit(job("wl-a", "lq-a", 4, 0));
    assert_eq!(admits(&env.schedule()), vec!["default/wl-a"]);
    // The first cycle starts every LocalQueue's clock; lq-a's admission adds its penalty at once.
    let penalty = 4.0 * (1.0 - 0.5f64.powf(0.1));
    for lq in ["lq-a", "lq-b", "lq-c"] {
        let u = env
            .engine
            .local_queue_consumed_usage("default", lq)
            .unwrap();
        assert_eq!(u.last_update, env.now, "{lq}");
        let want = if lq == "lq-a" { penalty } else { 0.0 };
        assert!(
            (u.resources.get("cpu").copied().unwrap_or(0.0) - want).abs() < 1e-9,
            "{lq}: {u:?}"
        );
    }
    // One half-life later (ten samples), the average has moved half way to the 4 cpu admitted.
    let start = env.now;
    assert_eq!(
        env.engine.next_admission_usage_sample(),
        Some(start + 1_000)
    );
    for _ in 0..10 {
        env.schedule();
    }
    let usage = env
        .engine
        .local_queue_consumed_usage("default", "lq-a")
        .unwrap();
    assert_eq!(usage.last_update, start + 10_000);
    assert!(
        (usage.resources["cpu"] - (2.0 + penalty / 2.0)).abs() < 1e-9,
        "{usage:?}"
    );
    let quiet = env
        .engine
        .local_queue_consumed_usage("default", "lq-b")
        .unwrap();
    assert!(quiet.resources.is_empty(), "{quiet:?}");
}

#[test]
fn without_a_half_life_usage_is_reset() {
    let mut env = env_with(
        EngineConfig {
            admission_fair_sharing: Some(AdmissionFairSharingConfig {
                usage_half_life: 0,
                usage_sampling_interval: 1_000,
                resource_weights: BTreeMap::new(),
            }),
            ..EngineConfig::default()
        },
        true,
        WithinCqPolicy::Never,
    );
    consumed(&mut env, "lq-a", &[("cpu", 8.0)]);
    env.submit(job("wl-a", "lq-a", 8, 0));
    env.submit(job("wl-b", "lq-b", 8, 1));
    env.schedule();
    env.schedule();
    // The first sample keeps the persisted usage; the next resets it. Order is then priority and time.
    let usage = env
        .engine
        .local_queue_consumed_usage("default", "lq-a")
        .unwrap();
    assert!(usage.resources.is_empty(), "{usage:?}");
}

#[test]
fn a_penalty_waits_for_the_admission_checks() {
    let mut env = Env::with_config(afs_config(&[]));
    env.flavor("default").ns("default", &[]);
    env.apply(Event::UpsertAdmissionCheck {
        name: "prov".into(),
        active: true,
    });
    let mut c = cq("cq1").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(8))])]);
    c.0.admission_fair_sharing = true;
    c.0.admission_checks = vec!["prov".into()];
    env.cq(c);
    env.lq("default", "lq-a", "cq1")
        .lq("default", "lq-b", "cq1");
    env.submit(job("wl-a", "lq-a", 4, 0));
    assert_eq!(admits(&env.schedule()), vec!["default/wl-a"]);
    let penalty = 4.0 * (1.0 - 0.5f64.powf(0.1));
    let before = env
        .engine
        .local_queue_admission_usage("default", "lq-a")
        .unwrap();
    assert!((before - penalty).abs() < 1e-9, "{before}");
    // The penalty stays pending (nothing consumed yet) until the checks pass.
    let consumed_now = env
        .engine
        .local_queue_consumed_usage("default", "lq-a")
        .unwrap();
    assert!(consumed_now.resources.is_empty(), "{consumed_now:?}");
    let admission = env.assert_admitted("default/wl-a");
    let mut w = job("wl-a", "lq-a", 4, 0).build();
    w.admitted = true;
    env.apply(Event::UpsertWorkload {
        workload: w,
        admission: Some(admission),
    });
    let settled = env
        .engine
        .local_queue_consumed_usage("default", "lq-a")
        .unwrap();
    assert!(settled.resources["cpu"] >= penalty, "{settled:?}");
    let after = env
        .engine
        .local_queue_admission_usage("default", "lq-a")
        .unwrap();
    assert!(
        (after - settled.resources["cpu"]).abs() < 1e-9,
        "the penalty counts once: {after}"
    );
    // Deleted before admission, a workload's penalty goes with it.
    env.submit(job("wl-b", "lq-b", 4, 1));
    env.schedule();
    assert!(
        env.engine
            .local_queue_admission_usage("default", "lq-b")
            .unwrap()
            > 0.0
    );
    env.apply(Event::DeleteWorkload(key_of("default/wl-b")));
    assert_eq!(
        env.engine.local_queue_admission_usage("default", "lq-b"),
        Some(0.0)
    );
}

/// Two running workloads of cq1 (run-a in lq-a at priority 1, run-b in lq-b at priority 0) and a priority-5
/// preemptor in lq-c that needs one of their places: the victims.
fn victims_of(config: EngineConfig, usage: &[(&str, f64)]) -> Vec<String> {
    let mut env = env_with(config, true, WithinCqPolicy::LowerPriority);
    for (lq, cpu) in usage {
        consumed(&mut env, lq, &[("cpu", *cpu)]);
    }
    env.admitted(
        job("run-a", "lq-a", 4, 0).prio(1),
        "cq1",
        &[("cpu", "default")],
    );
    env.admitted(
        job("run-b", "lq-b", 4, 1).prio(0),
        "cq1",
        &[("cpu", "default")],
    );
    env.submit(job("urgent", "lq-c", 4, 2).prio(5));
    let out = env.schedule();
    evictions(&out).into_iter().map(|(k, _)| k).collect()
}

#[test]
fn the_more_used_local_queue_is_preempted_first() {
    // Kueue's candidate ordering: same ClusterQueue, different LocalQueues: higher usage goes first, before priority.
    let usage = [("lq-a", 10.0), ("lq-b", 1.0)];
    assert_eq!(victims_of(afs_config(&[]), &usage), vec!["default/run-a"]);
}

#[test]
fn without_admission_fair_sharing_the_lower_priority_is_preempted() {
    assert_eq!(
        victims_of(EngineConfig::default(), &[]),
        vec!["default/run-b"]
    );
}
