//! The `sluice bench` workload without the operator, for profiling the engine quickly:
//! `cargo build --release -p sluice-engine --example bench_profile` and then
//! `valgrind --tool=callgrind target/release/examples/bench_profile 100 10 5000 [fair]`
//! (ClusterQueues, cohorts, workloads). It prints the admission and preemption counts.

use sluice_engine::bench::{BenchShape, measure_with};

/// The allocator the `sluice` binary uses, so the profile matches it.
#[global_allocator]
static ALLOC: sluice_engine::allocator::Allocator = sluice_engine::allocator::Allocator;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut num = |default: usize| {
        args.next()
            .map(|a| {
                a.parse()
                    .expect("a number of ClusterQueues, cohorts or workloads")
            })
            .unwrap_or(default)
    };
    let shape = BenchShape {
        cluster_queues: num(100),
        cohorts: num(10),
        workloads: num(5_000),
        run_cycles: 20,
        fair_sharing: std::env::args().any(|a| a == "fair"),
        seed: 7,
    };
    let r = measure_with(&shape, |_, _| {}, |_| {}).expect("valid events");
    println!(
        "{} admissions, {} preemptions, {} cycles, {} pending at end",
        r.admissions, r.evictions, r.cycles, r.pending_at_end
    );
}
