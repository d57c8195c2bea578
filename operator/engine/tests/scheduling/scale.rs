//! Scale: Kueue's large-scale performance shape (cohorts × ClusterQueues × workloads) driven to
//! completion with a tiny simulated clock. The default run is reduced; the full 1,000 CQ /
//! 50,000 workload run is `#[ignore]`d (run with `--release -- --ignored`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use crate::common::*;
use sluice_engine::*;

struct Report {
    cycles: u64,
    decisions: u64,
    admitted: u64,
    elapsed_ms: u128,
}

fn run(cohorts: usize, cqs_per_cohort: usize, wl_per_cq: usize, duration_scale: i64) -> Report {
    let mut engine = Engine::new(EngineConfig::default());
    let apply = |e: &mut Engine, ev: Event| e.apply(ev).expect("valid event");
    apply(
        &mut engine,
        Event::UpsertFlavor(Flavor {
            name: "default".into(),
            ..Flavor::default()
        }),
    );
    apply(
        &mut engine,
        Event::UpsertNamespace(Namespace {
            name: "ns".into(),
            ..Namespace::default()
        }),
    );
    // (cpu cores, duration ms, priority) for small / medium / large, 7:2:1 as in Kueue's config.
    let classes = [(1, 200, 50), (5, 500, 100), (20, 1000, 200)];
    let mut durations = std::collections::HashMap::new();
    let mut total = 0u64;
    for c in 0..cohorts {
        for q in 0..cqs_per_cohort {
            let name = format!("cq-{c}-{q}");
            let spec = cq(&name)
                .cohort(&format!("cohort-{c}"))
                .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
                .group(
                    &["cpu"],
                    vec![fq(
                        "default",
                        vec![rql("cpu", cpu(20), Some(cpu(100)), None)],
                    )],
                )
                .build();
            apply(&mut engine, Event::UpsertClusterQueue(spec));
            apply(
                &mut engine,
                Event::UpsertLocalQueue(LocalQueue {
                    namespace: "ns".into(),
                    name: name.clone(),
                    cluster_queue: name.clone(),
                    stop_policy: StopPolicy::None,
                    fair_sharing_weight: None,
                }),
            );
            for i in 0..wl_per_cq {
                let class = match i % 10 {
                    0 => classes[2],
                    1 | 2 => classes[1],
                    _ => classes[0],
                };
                let wname = format!("w-{c}-{q}-{i}");
                let w = wl("ns", &wname)
                    .queue(&name)
                    .prio(class.2)
                    .created(i as i64)
                    .ps("main", 1, &[("cpu", cpu(class.0))]);
                durations.insert(wname, class.1 * duration_scale);
                apply(
                    &mut engine,
                    Event::UpsertWorkload {
                        workload: w.build(),
                        admission: None,
                    },
                );
                total += 1;
            }
        }
    }
    let start = Instant::now();
    let mut now: Time = 0;
    let mut running: BinaryHeap<Reverse<(Time, String, u32)>> = BinaryHeap::new();
    // Admission epoch per workload: a run interrupted by eviction must not finish the next one.
    let mut epoch: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let (mut cycles, mut decisions, mut admitted, mut finished) = (0u64, 0u64, 0u64, 0u64);
    while finished < total && cycles < 200_000 {
        now += 100;
        while let Some(Reverse((t, _, _))) = running.peek() {
            if *t > now {
                break;
            }
            let Some(Reverse((_, name, e))) = running.pop() else {
                break;
            };
            if epoch.get(&name) == Some(&e) {
                epoch.remove(&name);
                apply(
                    &mut engine,
                    Event::FinishWorkload(WorkloadKey::new("ns", name)),
                );
                finished += 1;
            }
        }
        if !engine.has_work() {
            continue;
        }
        let out = engine.schedule(now);
        cycles += 1;
        decisions += out.len() as u64;
        for d in out {
            match d {
                Decision::Admit { workload, .. } => {
                    admitted += 1;
                    let e = epoch.entry(workload.name.clone()).or_insert(0);
                    *e += 1;
                    running.push(Reverse((
                        now + durations[&workload.name],
                        workload.name,
                        *e,
                    )));
                }
                Decision::Evict { workload, .. } => {
                    if let Some(e) = epoch.get_mut(&workload.name) {
                        *e += 1;
                    }
                    apply(
                        &mut engine,
                        Event::EvictionComplete {
                            workload,
                            time: now,
                        },
                    );
                }
                Decision::Pending { .. } => {}
            }
        }
    }
    engine.check_invariants().expect("invariants at the end");
    assert_eq!(finished, total, "all workloads ran to completion");
    Report {
        cycles,
        decisions,
        admitted,
        elapsed_ms: start.elapsed().as_millis(),
    }
}

#[test]
fn reduced_scale_runs_to_completion() {
    let r = run(5, 6, 40, 1);
    assert!(r.admitted >= 1200);
    assert!(r.cycles > 0 && r.decisions >= r.admitted);
}

#[test]
#[ignore = "full Kueue large-scale shape; run with --release -- --ignored --nocapture"]
fn large_scale_1000_cqs_50000_workloads() {
    let r = run(100, 10, 50, 1);
    eprintln!(
        "cycles={} decisions={} admitted={} elapsed={}ms ({:.1} us/decision)",
        r.cycles,
        r.decisions,
        r.admitted,
        r.elapsed_ms,
        r.elapsed_ms as f64 * 1000.0 / r.decisions.max(1) as f64
    );
}

#[test]
#[ignore = "saturated large-scale shape: deep queues, preemption; run with --release -- --ignored --nocapture"]
fn large_scale_saturated_queues() {
    let r = run(100, 10, 50, 20);
    eprintln!(
        "saturated: cycles={} decisions={} admitted={} elapsed={}ms ({:.1} us/cycle)",
        r.cycles,
        r.decisions,
        r.admitted,
        r.elapsed_ms,
        r.elapsed_ms as f64 * 1000.0 / r.cycles.max(1) as f64
    );
}
