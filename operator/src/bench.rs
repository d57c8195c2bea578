//! `sluice bench`: the engine's admission throughput and cycle latency on a synthetic GPU cluster at scale (the
//! cluster and its loop are the engine's `bench` module), or with `--topology` the topology-aware fill of a large
//! GPU cluster and the time one gang's placement takes on it (the engine's `bench_topology` module).

pub use crate::engine::bench::{BenchResult, BenchShape, Rng, measure_with, synthetic_cluster};
use crate::engine::bench_topology::{TopologyResult, TopologyShape, measure_topology};

/// Scale of the synthetic cluster.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Topology-aware fill instead: nodes of 8 GPUs in racks of 32 and blocks of 1,024, gangs of 1 to 128 GPUs
    /// scheduled to a fixed point, then probe gangs placed one at a time on the full cluster.
    #[arg(long)]
    pub topology: bool,
    /// ClusterQueues [default: 1000; 100 with --topology].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub cluster_queues: Option<u64>,
    /// Cohorts the ClusterQueues are spread over [default: 100; none (0) with --topology].
    #[arg(long)]
    pub cohorts: Option<usize>,
    /// Pending workloads, spread evenly over the ClusterQueues.
    #[arg(long, default_value_t = 50_000, conflicts_with = "topology")]
    pub workloads: usize,
    /// Cycles an admitted workload runs before it finishes (at least 1).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "topology")]
    pub run_cycles: u64,
    /// Enable fair sharing.
    #[arg(long, conflicts_with = "topology")]
    pub fair_sharing: bool,
    /// Nodes of the topology cluster (with --topology).
    #[arg(long, default_value_t = 10_000, requires = "topology", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub nodes: u64,
    /// Gangs queued for the fill (with --topology).
    #[arg(long, default_value_t = 20_000, requires = "topology", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub gangs: u64,
    /// The ClusterQueues' nominal GPU quotas together, in percent of the cluster's GPUs (with --topology): above 100
    /// quota and topology both bind and the cluster ends full; below, only quota binds and probes find room.
    #[arg(long, default_value_t = 105, requires = "topology", value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub quota_percent: u32,
    /// Gangs placed one at a time on the full cluster to time placement (with --topology).
    #[arg(long, default_value_t = 200, requires = "topology", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub probes: u64,
    /// Seed of the workload mix.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

impl BenchArgs {
    /// The engine's description of this cluster.
    pub fn shape(&self) -> BenchShape {
        BenchShape {
            cluster_queues: self.cluster_queues.map_or(1_000, |n| n as usize),
            cohorts: self.cohorts.unwrap_or(100),
            workloads: self.workloads,
            run_cycles: self.run_cycles,
            fair_sharing: self.fair_sharing,
            seed: self.seed,
        }
    }

    /// The engine's description of the topology cluster (`--topology`).
    pub fn topology_shape(&self) -> TopologyShape {
        let default = TopologyShape::default();
        TopologyShape {
            nodes: self.nodes as usize,
            cluster_queues: self
                .cluster_queues
                .map_or(default.cluster_queues, |n| n as usize),
            cohorts: self.cohorts.unwrap_or(default.cohorts),
            quota_percent: self.quota_percent,
            gangs: self.gangs as usize,
            probes: self.probes as usize,
            seed: self.seed,
            ..default
        }
    }
}

/// Runs the benchmark.
pub fn measure(args: &BenchArgs) -> Result<BenchResult, crate::engine::EngineError> {
    measure_with(&args.shape(), |_, _| {}, |_| {})
}

/// Runs the benchmark (`--topology`: the topology one) and prints its figures.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.topology {
        return run_topology(&args.topology_shape());
    }
    let shape = args.shape();
    println!(
        "sluice bench: {} ClusterQueues in {} cohorts, {} workloads, GPU flavors h100 + h100-spot, fair sharing {}",
        shape.cluster_queues,
        shape.cohorts,
        shape.workloads,
        if shape.fair_sharing { "on" } else { "off" }
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

/// Runs the topology benchmark and prints its figures, with the process's peak memory.
fn run_topology(shape: &TopologyShape) -> anyhow::Result<()> {
    println!(
        "sluice bench --topology: {} nodes x {} GPUs (racks of {}, blocks of {}), {} ClusterQueues ({}) with quota \
         for {}% of the GPUs, {} gangs of 1-128 GPUs, {} probes, seed {}",
        shape.nodes,
        shape.gpus_per_node,
        shape.rack_nodes,
        shape.block_nodes,
        shape.cluster_queues,
        match shape.cohorts {
            0 => "no cohorts".to_string(),
            n => format!("in {n} cohorts"),
        },
        shape.quota_percent,
        shape.gangs,
        shape.probes,
        shape.seed
    );
    let r: TopologyResult = measure_topology(shape)?;
    println!("setup (queue every gang):      {:.3} s", r.setup_seconds);
    if r.cycle_bound_hit {
        println!(
            "time to fixed point:           not reached: stopped at the bound of {} cycles after {:.3} s",
            r.cycles, r.fixed_point_seconds
        );
    } else {
        println!(
            "time to fixed point:           {:.3} s ({} cycles)",
            r.fixed_point_seconds, r.cycles
        );
    }
    println!(
        "admissions:                    {} ({} preemptions)",
        r.admissions, r.preemptions
    );
    println!(
        "gangs admitted at the end:     {} ({} pending, {} of them within quota but without a placement)",
        r.admitted_at_end, r.pending_at_end, r.pending_for_placement
    );
    println!(
        "GPUs allocated:                {} of {} ({:.1}%)",
        r.gpus_allocated,
        r.cluster_gpus,
        100.0 * r.gpus_allocated as f64 / r.cluster_gpus.max(1) as f64
    );
    if r.probes == 0 {
        println!("placement per gang:            no probes");
    } else {
        println!(
            "placement per gang p50 / p99 / max: {:.3} / {:.3} / {:.3} ms ({} of {} probes placed)",
            r.placement_p50_us / 1e3,
            r.placement_p99_us / 1e3,
            r.placement_max_us / 1e3,
            r.probes_placed,
            r.probes
        );
    }
    match peak_memory_kib() {
        Some(kib) => println!(
            "peak memory (VmHWM):           {:.0} MB",
            kib as f64 * 1024.0 / 1e6
        ),
        None => println!("peak memory (VmHWM):           unknown"),
    }
    Ok(())
}

/// The process's peak resident set (`VmHWM` of /proc/self/status, in KiB), None where that cannot be read (not
/// Linux, no /proc). Read here rather than in the engine, which does no I/O.
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// `VmHWM:   123456 kB` out of a /proc status text.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let kib = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib)
}

#[cfg(test)]
mod tests {
    use super::parse_vm_hwm;

    #[test]
    fn peak_memory_is_read_from_vm_hwm() {
        let status =
            "Name:\tsluice\nVmPeak:\t  900000 kB\nVmHWM:\t  612352 kB\nVmRSS:\t  1000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(612_352));
        assert_eq!(parse_vm_hwm("Name:\tsluice\n"), None);
        assert_eq!(parse_vm_hwm("VmHWM:\t  lots kB\n"), None);
    }
}
