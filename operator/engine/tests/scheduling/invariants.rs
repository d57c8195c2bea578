//! Property test: random configurations and event sequences keep the engine's invariants.

use crate::common::*;
use proptest::prelude::*;
use sluice_engine::*;

#[derive(Clone, Debug)]
enum Op {
    Submit {
        cq: usize,
        prio: i32,
        count: i32,
        min: Option<i32>,
        cpu: i64,
        gpu: i64,
    },
    Schedule,
    Finish(usize),
    Delete(usize),
    CompleteEvictions,
    Deactivate(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..6, -2i32..3, 1i32..6, proptest::option::of(1i32..3), 1i64..6, 0i64..3)
            .prop_map(|(cq, prio, count, min, cpu, gpu)| Op::Submit { cq, prio, count, min: min.filter(|m| *m <= count), cpu, gpu }),
        4 => Just(Op::Schedule),
        1 => (0usize..64).prop_map(Op::Finish),
        1 => (0usize..64).prop_map(Op::Delete),
        2 => Just(Op::CompleteEvictions),
        1 => (0usize..64).prop_map(Op::Deactivate),
    ]
}

#[derive(Clone, Debug)]
struct CqCfg {
    cohort: Option<usize>,
    nominal: i64,
    gpu: i64,
    bl: Option<i64>,
    ll: Option<i64>,
    reclaim: u8,
    within: u8,
    strict: bool,
    two_flavors: bool,
}

fn cq_cfg() -> impl Strategy<Value = CqCfg> {
    (
        proptest::option::of(0usize..2),
        0i64..12,
        0i64..4,
        proptest::option::of(0i64..6),
        proptest::option::of(0i64..4),
        0u8..3,
        0u8..3,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(cohort, nominal, gpu, bl, ll, reclaim, within, strict, two_flavors)| CqCfg {
                cohort,
                nominal,
                gpu,
                bl,
                ll: ll.map(|l| l.min(nominal)),
                reclaim,
                within,
                strict,
                two_flavors,
            },
        )
}

fn build(env: &mut Env, cfgs: &[CqCfg], fair: bool) {
    env.flavor("a").flavor("b").flavor("g").ns("ns", &[]);
    env.cohort("c0", Some("top"), vec![])
        .cohort("c1", Some("top"), vec![])
        .cohort("top", None, vec![]);
    for (i, c) in cfgs.iter().enumerate() {
        let name = format!("cq{i}");
        let (bl, ll) = if c.cohort.is_some() {
            (c.bl.map(cpu), c.ll.map(cpu))
        } else {
            (None, None)
        };
        let mut flavors = vec![fq("a", vec![rql("cpu", cpu(c.nominal), bl, ll)])];
        if c.two_flavors {
            flavors.push(fq("b", vec![rql("cpu", cpu(c.nominal / 2), bl, None)]));
        }
        let mut b = cq(&name)
            .group(&["cpu"], flavors)
            .group(&["gpu"], vec![fq("g", vec![rq("gpu", c.gpu)])])
            .preemption(
                [
                    ReclaimPolicy::Never,
                    ReclaimPolicy::LowerPriority,
                    ReclaimPolicy::Any,
                ][c.reclaim as usize],
                [
                    WithinCqPolicy::Never,
                    WithinCqPolicy::LowerPriority,
                    WithinCqPolicy::LowerOrNewerEqualPriority,
                ][c.within as usize],
            );
        if let Some(co) = c.cohort {
            b = b.cohort(&format!("c{co}"));
            if !fair && c.reclaim != 0 && c.within == 1 {
                b = b.borrow_within_cohort(Some(0));
            }
        }
        if c.strict {
            b = b.strict();
        }
        env.cq(b);
        env.lq("ns", &name, &name);
    }
}

fn run(cfgs: Vec<CqCfg>, ops: Vec<Op>, fair: bool) -> Result<(), TestCaseError> {
    let mut env = if fair { Env::fair() } else { Env::new() };
    env.check = false;
    build(&mut env, &cfgs, fair);
    let mut names: Vec<String> = Vec::new();
    let mut specs: std::collections::HashMap<String, Workload> = std::collections::HashMap::new();
    let mut pending_evictions: Vec<WorkloadKey> = Vec::new();
    let ncq = cfgs.len();
    for (step, op) in ops.into_iter().enumerate() {
        let ds = match op {
            Op::Submit {
                cq,
                prio,
                count,
                min,
                cpu: c,
                gpu,
            } => {
                let name = format!("w{step}");
                names.push(name.clone());
                let mut reqs = vec![("cpu", cpu(c))];
                if gpu > 0 {
                    reqs.push(("gpu", gpu));
                }
                let mut b = wl("ns", &name)
                    .queue(&format!("cq{}", cq % ncq))
                    .prio(prio)
                    .created(step as i64)
                    .ps("main", count, &reqs);
                if let Some(m) = min {
                    b = b.min(m);
                }
                let w = b.build();
                specs.insert(name.clone(), w.clone());
                env.engine
                    .apply(Event::UpsertWorkload {
                        workload: w,
                        admission: None,
                    })
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
            }
            Op::Schedule => {
                env.now += 1000;
                env.engine.schedule(env.now)
            }
            Op::Finish(i) if !names.is_empty() => env
                .engine
                .apply(Event::FinishWorkload(key_of(&format!(
                    "ns/{}",
                    names[i % names.len()]
                ))))
                .unwrap(),
            Op::Delete(i) if !names.is_empty() => env
                .engine
                .apply(Event::DeleteWorkload(key_of(&format!(
                    "ns/{}",
                    names[i % names.len()]
                ))))
                .unwrap(),
            Op::Deactivate(i) if !names.is_empty() => {
                let name = &names[i % names.len()];
                match specs.get(name) {
                    Some(spec) => {
                        let mut w = spec.clone();
                        w.active = false;
                        env.engine
                            .apply(Event::UpsertWorkload {
                                workload: w,
                                admission: None,
                            })
                            .unwrap()
                    }
                    None => Vec::new(),
                }
            }
            Op::CompleteEvictions => {
                let mut out = Vec::new();
                for k in pending_evictions.drain(..) {
                    out.extend(
                        env.engine
                            .apply(Event::EvictionComplete {
                                workload: k,
                                time: env.now,
                            })
                            .unwrap(),
                    );
                }
                out
            }
            _ => Vec::new(),
        };
        if std::env::var("DEBUG_PROP").is_ok() {
            eprintln!("step {step}: {ds:?}");
            for i in 0..ncq {
                eprintln!(
                    "  cq{i}: {:?}",
                    env.engine
                        .cluster_queue_usage(&format!("cq{i}"))
                        .map(|u| u.flavors_reservation)
                );
            }
        }
        for d in &ds {
            if let Decision::Evict { workload, .. } = d {
                prop_assert!(
                    !pending_evictions.contains(workload),
                    "duplicate eviction of {workload}"
                );
                pending_evictions.push(workload.clone());
            }
        }
        env.engine.check_invariants().map_err(TestCaseError::fail)?;
    }
    // Drain: with evictions completed, repeated cycles converge (has_work turns false).
    for _ in 0..200 {
        for k in pending_evictions.drain(..) {
            env.engine
                .apply(Event::EvictionComplete {
                    workload: k,
                    time: env.now,
                })
                .unwrap();
        }
        if !env.engine.has_work() {
            break;
        }
        env.now += 1000;
        let ds = env.engine.schedule(env.now);
        if std::env::var("DEBUG_PROP").is_ok() {
            eprintln!("drain: {ds:?}");
        }
        for d in ds {
            if let Decision::Evict { workload, .. } = d {
                pending_evictions.push(workload);
            }
        }
        env.engine.check_invariants().map_err(TestCaseError::fail)?;
    }
    // Convergence is not asserted: like Kueue, two ClusterQueues can take turns reclaiming from
    // each other (partial admission + borrowing), so only the invariants above must hold.
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn classical_invariants_hold(cfgs in proptest::collection::vec(cq_cfg(), 2..6), ops in proptest::collection::vec(op(), 1..80)) {
        run(cfgs, ops, false)?;
    }

    #[test]
    fn fair_sharing_invariants_hold(cfgs in proptest::collection::vec(cq_cfg(), 2..6), ops in proptest::collection::vec(op(), 1..80)) {
        run(cfgs, ops, true)?;
    }
}

#[test]
fn regression_fair_lending_limit_zero() {
    let c = |nominal, gpu, ll: Option<i64>, reclaim, two| CqCfg {
        cohort: Some(0),
        nominal,
        gpu,
        bl: None,
        ll,
        reclaim,
        within: 0,
        strict: false,
        two_flavors: two,
    };
    let cfgs = vec![
        c(8, 2, Some(0), 0, true),
        c(5, 3, None, 0, false),
        c(5, 3, None, 0, false),
        c(7, 3, None, 0, false),
        c(3, 3, None, 1, false),
    ];
    let s = |cq, prio, count, cpu, gpu| Op::Submit {
        cq,
        prio,
        count,
        min: None,
        cpu,
        gpu,
    };
    let ops = vec![
        s(1, 0, 3, 3, 0),
        s(1, 1, 1, 4, 0),
        s(0, 0, 1, 1, 0),
        s(1, 2, 3, 1, 2),
        s(0, 0, 3, 3, 2),
        s(5, 1, 1, 1, 2),
        s(0, 0, 1, 1, 0),
        s(1, 1, 1, 4, 0),
        s(1, 0, 1, 1, 0),
        Op::Schedule,
        s(0, 0, 1, 1, 0),
        Op::Schedule,
        Op::Delete(3),
        s(0, 0, 1, 1, 0),
        Op::Schedule,
        s(0, 0, 1, 1, 0),
        s(0, 1, 1, 5, 0),
        s(0, 0, 1, 1, 0),
        s(4, 1, 4, 1, 2),
        s(1, 1, 1, 5, 0),
        s(4, 0, 1, 1, 0),
        s(0, 0, 1, 1, 0),
        s(0, 0, 1, 1, 0),
        s(0, 0, 1, 1, 0),
    ];
    run(cfgs, ops, true).unwrap();
}
