//! Criterion benchmarks of the engine: queueing workloads, and scheduling a loaded cluster to completion.
//!
//! `sluice bench` (the same cluster, `sluice_engine::bench`) runs the full-scale figures (1,000 ClusterQueues, 50,000 workloads); these use a tenth of that so
//! criterion can repeat them.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sluice_engine::bench::{BenchShape, measure_with, synthetic_cluster};
use sluice_engine::{Engine, EngineConfig};

fn args() -> BenchShape {
    BenchShape {
        cluster_queues: 100,
        cohorts: 10,
        workloads: 5_000,
        run_cycles: 20,
        fair_sharing: false,
        seed: 7,
    }
}

fn queueing(c: &mut Criterion) {
    let (setup, workloads) = synthetic_cluster(&args());
    c.bench_function("queue 5,000 workloads into 100 ClusterQueues", |b| {
        b.iter_batched(
            || {
                let mut engine = Engine::new(EngineConfig::default());
                for ev in setup.clone() {
                    engine.apply(ev).expect("valid setup");
                }
                (engine, workloads.clone())
            },
            |(mut engine, workloads)| {
                for ev in workloads {
                    engine.apply(ev).expect("valid workload");
                }
                engine
            },
            BatchSize::LargeInput,
        )
    });
}

fn scheduling(c: &mut Criterion) {
    let mut group =
        c.benchmark_group("schedule 5,000 workloads in 100 ClusterQueues to completion");
    group.sample_size(10);
    group.bench_function("classical", |b| {
        b.iter(|| measure_with(&args(), |_, _| {}, |_| {}).expect("runs"))
    });
    let fair = BenchShape {
        fair_sharing: true,
        ..args()
    };
    group.bench_function("fair sharing", |b| {
        b.iter(|| measure_with(&fair, |_, _| {}, |_| {}).expect("runs"))
    });
    group.finish();
}

criterion_group!(benches, queueing, scheduling);
criterion_main!(benches);
