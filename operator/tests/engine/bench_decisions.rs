//! The engine's decisions on the `sluice bench` workload, pinned by fingerprint: performance work on the engine must
//! not change them. Here rather than in `sluice-engine` because the workload comes from the operator's `bench` module.

use sluice_operator::engine::*;

/// Runs the `sluice bench` loop at a reduced scale and returns every decision, one per line, in order.
fn bench_decision_log(fair_sharing: bool) -> Vec<String> {
    use sluice_operator::bench::{BenchArgs, synthetic_cluster};
    use std::collections::{BTreeMap, HashMap};
    let args = BenchArgs {
        cluster_queues: 100,
        cohorts: 10,
        workloads: 5_000,
        run_cycles: 20,
        fair_sharing,
        seed: 7,
    };
    let (setup, workloads) = synthetic_cluster(&args);
    let config = EngineConfig {
        fair_sharing: fair_sharing.then(FairSharingConfig::default),
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(config);
    let mut log = Vec::new();
    for ev in setup.into_iter().chain(workloads) {
        engine.apply(ev).expect("valid event");
    }
    let mut running: BTreeMap<u64, Vec<(WorkloadKey, u64)>> = BTreeMap::new();
    let mut runs: HashMap<WorkloadKey, u64> = HashMap::new();
    let mut idle = 0;
    for cycle in 1..=(40 * args.workloads as u64 + 1000) {
        if let Some(done) = running.remove(&cycle) {
            for (key, run) in done {
                if runs.get(&key) == Some(&run) {
                    engine
                        .apply(Event::FinishWorkload(key))
                        .expect("valid event");
                }
            }
        }
        let now = cycle as i64 * 1000;
        let decisions = engine.schedule(now);
        log.push(format!("cycle {cycle}: {} decisions", decisions.len()));
        let mut acted = false;
        for d in decisions {
            log.push(format!("{d:?}"));
            match d {
                Decision::Admit { workload, .. } => {
                    acted = true;
                    let run = runs.entry(workload.clone()).or_default();
                    *run += 1;
                    running
                        .entry(cycle + args.run_cycles)
                        .or_default()
                        .push((workload, *run));
                }
                Decision::Evict { workload, .. } => {
                    acted = true;
                    *runs.entry(workload.clone()).or_default() += 1;
                    engine
                        .apply(Event::EvictionComplete {
                            workload,
                            time: now,
                        })
                        .expect("valid event");
                }
                Decision::Pending { .. } => {}
            }
        }
        if acted || !running.is_empty() {
            idle = 0;
        } else {
            idle += 1;
            if !engine.has_work() || idle > 3 {
                break;
            }
        }
    }
    engine.check_invariants().expect("invariants at the end");
    log
}

/// FNV-1a over the decision log: a compact fingerprint of every decision in order.
fn fingerprint(log: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for line in log {
        for b in line.bytes().chain(std::iter::once(b'\n')) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Fingerprints of the engine as of the crate split (issue 17), which changed no decision. The ones recorded at
/// b87e973 went stale as Kueue-fidelity and preemption fixes deliberately changed decisions; a change that means
/// to alter decisions records new ones here and says why in its commit.
const FP_CLASSICAL: u64 = 0x67e8_dbab_a127_2d06;
const FP_FAIR: u64 = 0xf47f_8b3d_c1bb_8a75;

/// The decision sequences of the engine as recorded above: optimisations must not change them.
/// (About 13 s in a debug build; `--nocapture` prints the fingerprints, `SLUICE_DECISION_LOG_DIR` keeps the logs.)
#[test]
fn bench_decisions_unchanged() {
    let mut got = Vec::new();
    for fair in [false, true] {
        let log = bench_decision_log(fair);
        if let Ok(dir) = std::env::var("SLUICE_DECISION_LOG_DIR") {
            let path = format!("{dir}/decisions-fair-{fair}.log");
            std::fs::write(&path, log.join("\n")).expect("write decision log");
        }
        let h = fingerprint(&log);
        eprintln!(
            "fair_sharing={fair}: {} lines, fingerprint {h:#018x}",
            log.len()
        );
        got.push(h);
    }
    assert_eq!(got, [FP_CLASSICAL, FP_FAIR], "decisions changed");
}
