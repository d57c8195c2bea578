//! `sluice bench`: the engine's admission throughput and cycle latency on a synthetic GPU cluster at scale (the
//! cluster and its loop are the engine's `bench` module).

pub use crate::engine::bench::{BenchResult, BenchShape, Rng, measure_with, synthetic_cluster};

/// Scale of the synthetic cluster.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// ClusterQueues.
    #[arg(long, default_value_t = 1000)]
    pub cluster_queues: usize,
    /// Cohorts the ClusterQueues are spread over.
    #[arg(long, default_value_t = 100)]
    pub cohorts: usize,
    /// Pending workloads, spread evenly over the ClusterQueues.
    #[arg(long, default_value_t = 50_000)]
    pub workloads: usize,
    /// Cycles an admitted workload runs before it finishes (at least 1).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub run_cycles: u64,
    /// Enable fair sharing.
    #[arg(long)]
    pub fair_sharing: bool,
    /// Seed of the workload mix.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

impl BenchArgs {
    /// The engine's description of this cluster.
    pub fn shape(&self) -> BenchShape {
        BenchShape {
            cluster_queues: self.cluster_queues,
            cohorts: self.cohorts,
            workloads: self.workloads,
            run_cycles: self.run_cycles,
            fair_sharing: self.fair_sharing,
            seed: self.seed,
        }
    }
}

/// Runs the benchmark.
pub fn measure(args: &BenchArgs) -> Result<BenchResult, crate::engine::EngineError> {
    measure_with(&args.shape(), |_, _| {}, |_| {})
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    println!(
        "sluice bench: {} ClusterQueues in {} cohorts, {} workloads, GPU flavors h100 + h100-spot, fair sharing {}",
        args.cluster_queues,
        args.cohorts,
        args.workloads,
        if args.fair_sharing { "on" } else { "off" }
    );
    let r = measure(args)?;
    println!("setup (queue every workload):  {:.3} s", r.setup_seconds);
    println!("scheduling cycles:             {}", r.cycles);
    println!(
        "admissions:                    {} ({} preemptions)",
        r.admissions, r.evictions
    );
    println!("engine time:                   {:.3} s", r.engine_seconds);
    println!(
        "admitted per second:           {:.0}",
        r.admissions_per_second
    );
    println!(
        "cycle latency p50 / p99 / max: {:.1} / {:.1} / {:.1} µs",
        r.cycle_p50_us, r.cycle_p99_us, r.cycle_max_us
    );
    println!("pending at end:                {}", r.pending_at_end);
    Ok(())
}
