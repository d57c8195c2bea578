//! The `sluice` binary: the edge where errors become messages and exit codes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice_operator::engine::{EngineConfig, FairSharingConfig};
use sluice_operator::manifest::{self, Document};
use sluice_operator::sim::{self, OutputFormat, Simulation};

/// Sluice: Kueue-compatible queueing for GPU clusters.
#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "Sluice: Kueue-compatible queueing for GPU clusters"
)]
struct Cli {
    /// Log as JSON lines instead of text (logs go to stderr; level from RUST_LOG, default warn).
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate admission on a cluster described by manifests (the bundled example when no -f is given).
    Simulate(SimulateArgs),
    /// Print Kueue's CustomResourceDefinitions (v1beta2 storage, v1beta1 served) as YAML.
    Crds,
    /// Measure the engine's admission throughput and cycle latency on a synthetic cluster.
    Bench(sluice_operator::bench::BenchArgs),
    /// Validate, test and benchmark placement and fairness policy modules (WebAssembly).
    Policy(sluice_operator::cli::policy::PolicyArgs),
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Manifest file or directory (YAML or JSON, multi-document); repeatable.
    #[arg(short = 'f', long = "filename")]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
    output: OutputFormat,
    /// Enable fair sharing (dominant resource share across the cohort), as Kueue's `fairSharing` config does.
    #[arg(long)]
    fair_sharing: bool,
    /// Write Kueue's detailed pending reasons (WaitingForQuota, NoMatchingFlavor, ...) in Workload status, as
    /// Kueue's UnadmittedWorkloadsObservability feature gate does; without it every waiting workload's
    /// QuotaReserved=False reason is "Pending", Kueue's default.
    #[arg(long)]
    detailed_pending_reasons: bool,
    /// Stop a timed simulation after this much virtual time (e.g. "12h").
    #[arg(long, value_parser = parse_until)]
    until: Option<i64>,
    /// Never show a progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Policy module to simulate with: `fairness=FILE.wasm|NAME` (implies --fair-sharing) or
    /// `placement=FILE.wasm|NAME` (loaded and checked; the simulator does not model node placement).
    /// NAME is an embedded module: topology-pack, spread, fair-credits, drs. Repeatable.
    #[arg(long = "policy", value_parser = sluice_operator::cli::policy::parse_policy_flag)]
    policies: Vec<sluice_operator::cli::policy::PolicyFlag>,
}

fn parse_until(s: &str) -> Result<i64, String> {
    sim::parse_duration(s).map_err(|e| e.to_string())
}

/// An error with its exit code: 2 for bad input, 1 otherwise.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure {
            code: 1,
            error: e.into(),
        }
    }
}

fn bad_input(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: 2,
        error: e.into(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    let result = match cli.command {
        Command::Simulate(args) => simulate(args),
        Command::Crds => {
            print!("{}", sluice_sdk::kueue::crds::crds_yaml());
            Ok(())
        }
        Command::Bench(args) => sluice_operator::bench::run(&args).map_err(Failure::from),
        Command::Policy(args) => policy(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

fn policy(args: &sluice_operator::cli::policy::PolicyArgs) -> Result<(), Failure> {
    use sluice_operator::cli::policy::{PolicyCliError, run};
    let mut stdout = std::io::stdout().lock();
    run(args, &mut stdout).map_err(|e| match e {
        PolicyCliError::Invalid(_) | PolicyCliError::Read { .. } => bad_input(e),
        other => Failure::from(other),
    })
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn simulate(args: SimulateArgs) -> Result<(), Failure> {
    let docs: Vec<Document> = if args.files.is_empty() {
        sim::bundled_example().map_err(bad_input)?
    } else {
        let mut docs = Vec::new();
        for f in &args.files {
            docs.extend(manifest::read_path(f).map_err(bad_input)?);
        }
        docs
    };
    let policies = sluice_operator::cli::policy::load_simulation_policies(&args.policies)
        .map_err(bad_input)?;
    if policies.placement.is_some() {
        eprintln!(
            "note: the placement module loaded and passed its checks; the simulator admits by quota and does not place pods on nodes, so it does not change this run"
        );
    }
    let fair_sharing = args.fair_sharing || policies.fairness.is_some();
    let config = EngineConfig {
        fair_sharing: fair_sharing.then(FairSharingConfig::default),
        ..EngineConfig::default()
    };
    let mut simulation =
        Simulation::from_documents_with_fairness(&docs, config, policies.fairness.clone())
            .map_err(bad_input)?;
    simulation.set_detailed_pending_reasons(args.detailed_pending_reasons);
    let show_progress =
        simulation.is_timed() && !args.no_progress && std::io::stderr().is_terminal();
    let bar = show_progress.then(|| {
        let bar = indicatif::ProgressBar::new(simulation.workloads.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} simulating [{bar:40}] {pos}/{len} workloads finished",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar
    });
    let report = simulation
        .run(args.until, |done, total| {
            if let Some(b) = &bar {
                b.set_length(total);
                b.set_position(done);
            }
        })
        .map_err(bad_input)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let text = if simulation.is_timed() {
        sim::render_report(&simulation, &report, args.output)
    } else {
        sim::render_final_state(&simulation, args.output)
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = stdout.write_all(text.as_bytes());
    if let Some(registry) = &policies.registry {
        for name in registry.names() {
            if let Some(h) = registry.health(&name) {
                eprintln!(
                    "policy {name}: {} calls, failures {:?}{}",
                    h.calls,
                    h.failures,
                    if h.degraded { ", degraded" } else { "" }
                );
            }
        }
    }
    Ok(())
}
