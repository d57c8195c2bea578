//! The `sluice` binary: the edge where errors become messages and exit codes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice_operator::engine::FairSharingConfig;
use sluice_operator::manifest::{self, Document};
use sluice_operator::output::OutputFormat;
use sluice_operator::sim::{self, Simulation};

/// mimalloc rather than glibc's malloc: the engine's cycle allocates many small short-lived vectors, and
/// glibc's malloc and free were about a quarter of `sluice bench`'s instructions (a fifth fewer in all with it).
/// (Feature `system-allocator` leaves glibc's in place, for heap profiling.)
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: sluice_engine::allocator::Allocator = sluice_engine::allocator::Allocator;

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
    /// Print the CustomResourceDefinitions as YAML: Kueue's (v1beta2 storage, v1beta1 served), then Sluice's own (sluice.dev).
    Crds(CrdsArgs),
    /// Measure the engine's admission throughput and cycle latency on a synthetic cluster (--topology: the time to
    /// fill a large topology-aware GPU cluster and to place one gang on it).
    Bench(sluice_operator::bench::BenchArgs),
    /// Print a seeded, production-shaped GPU trace (one ClusterQueue, single-pod tasks, topology-aware nodes) as
    /// manifests for `sluice simulate -f`.
    Trace(sluice_operator::sim::generate::TraceArgs),
    /// Discover this node's GPUs (NVML) and publish their topology as a NodeGpuTopology.
    NodeAgent(sluice_operator::agent::AgentArgs),
    /// Run the queue operator against the cluster of the current kubeconfig (or in-cluster config).
    Operator(sluice_operator::controller::OperatorArgs),
    /// Serve the admission, defaulting and conversion webhook over HTTPS (Kueue's webhook paths).
    Webhook(WebhookArgs),
    #[command(flatten)]
    Cluster(sluice_operator::cli::ClusterCommand),
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
    /// Kueue Configuration file to simulate under (fairSharing, waitForPodsReady, featureGates, ...), the file the
    /// operator takes; a `Configuration` document among the manifests is read the same way.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
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
    /// Evict the workloads on a GPU that starts degrading (`sluice.dev/gpu-degrades-at` on a NodeGpuTopology),
    /// as the operator's --evict-on-degraded-gpus does, so they move before it fails.
    #[arg(long)]
    evict_on_degraded_gpus: bool,
    /// Place gangs in topology-aware flavors ignoring topology levels and NVLink islands (for comparison).
    #[arg(long)]
    ignore_topology: bool,
    /// Also write the report as one self-contained HTML page with charts to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Placement policy scoring nodes for topology-aware flavors.
    #[arg(long, value_enum, default_value_t = PlacementPolicyArg::TopologyPack)]
    placement_policy: PlacementPolicyArg,
    /// Policy module to simulate with: `fairness=FILE.wasm|NAME` (implies --fair-sharing),
    /// `placement=FILE.wasm|NAME` (scores nodes for topology-aware flavors; overrides --placement-policy) or
    /// `preemptioncost=FILE.wasm|NAME` (boosts or protects the candidates of every ClusterQueue's preemptions).
    /// NAME is an embedded module: topology-pack, spread, fair-credits, drs, anti-thrash. Repeatable.
    #[arg(long = "policy", value_parser = sluice_operator::cli::policy::parse_policy_flag)]
    policies: Vec<sluice_operator::cli::policy::PolicyFlag>,
    /// Configuration of the `--policy` module of one world, as a PolicyModule's `spec.config` gives it:
    /// `KIND=JSON`, e.g. `preemptioncost='{"minRunSeconds": 600}'`. Repeatable, once per world.
    #[arg(long = "policy-config", value_name = "KIND=JSON", value_parser = sluice_operator::cli::policy::parse_policy_config_flag)]
    policy_configs: Vec<sluice_operator::cli::policy::PolicyConfigFlag>,
}

#[derive(clap::Args)]
struct CrdsArgs {
    /// Set the conversion webhook of the Kueue kinds served in two versions to this base URL (`/convert` is
    /// appended), for a webhook run outside the cluster; needs --ca-file.
    #[arg(long, value_name = "URL", requires = "ca_file")]
    conversion_url: Option<String>,
    /// PEM file of the CA that signed the webhook's serving certificate (the conversion webhook's caBundle).
    #[arg(long, value_name = "FILE", requires = "conversion_url")]
    ca_file: Option<PathBuf>,
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct WebhookArgs {
    #[command(subcommand)]
    command: Option<WebhookCommand>,
    #[command(flatten)]
    serve: Option<sluice_webhook::ServeArgs>,
    /// Kueue Configuration file, the operator's: `integrations` (the hooks of frameworks not on let everything
    /// through, as Kueue's do), `manageJobsWithoutQueueName`, `managedJobsNamespaceSelector` and
    /// `featureGates.PartialAdmission`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum WebhookCommand {
    /// Print the Mutating- and ValidatingWebhookConfiguration for a webhook served at a URL (outside the cluster).
    Configurations(ConfigurationsArgs),
}

#[derive(clap::Args)]
struct ConfigurationsArgs {
    /// Base URL the API server calls, e.g. https://127.0.0.1:9443 (each hook's path is appended).
    #[arg(long, value_name = "URL")]
    url: String,
    /// PEM file of the CA that signed the webhook's serving certificate (the caBundle).
    #[arg(long, value_name = "FILE")]
    ca_file: PathBuf,
    /// Prefix of the configurations' names (`PREFIX-mutating`, `PREFIX-validating`).
    #[arg(long, default_value = "sluice")]
    name: String,
    /// Namespaces whose objects are never sent to the webhook; comma-separated.
    #[arg(
        long,
        value_name = "NS,...",
        value_delimiter = ',',
        default_value = "kube-system"
    )]
    exclude_namespaces: Vec<String>,
}

/// Built-in placement policies.
#[derive(Clone, Copy, clap::ValueEnum)]
enum PlacementPolicyArg {
    /// Pack gangs: partly used nodes and tight NVLink islands first.
    TopologyPack,
    /// Spread pods over nodes and racks.
    Spread,
}

fn parse_until(s: &str) -> Result<i64, String> {
    sluice_operator::duration::parse_duration(s).map_err(|e| e.to_string())
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
        Command::Crds(args) => crds(args),
        Command::Bench(args) => sluice_operator::bench::run(&args).map_err(Failure::from),
        Command::Trace(args) => {
            print!("{}", sluice_operator::sim::generate::generate(&args));
            Ok(())
        }
        Command::NodeAgent(args) => sluice_operator::agent::run(&args)
            .map(|out| print!("{out}"))
            .map_err(Failure::from),
        Command::Operator(args) => operator(args),
        Command::Webhook(args) => webhook(args),
        Command::Cluster(c) => cluster(c),
        Command::Policy(args) => policy(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", message(&f.error));
            ExitCode::from(f.code)
        }
    }
}

/// The error and its causes as "error: cause: cause", each cause once. Sluice's errors either carry their
/// cause in their message or chain it, never both, but some libraries' errors do both: a cause whose text is
/// already in the message is not repeated.
fn message(error: &anyhow::Error) -> String {
    let mut out = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

fn operator(args: sluice_operator::controller::OperatorArgs) -> Result<(), Failure> {
    use sluice_operator::controller::ControllerError;
    // 8 MiB per worker, as a main thread has: the engine task's job reconcilers are large futures, and a debug
    // build keeps their poll frames whole on the stack (they came within a few hundred KiB of tokio's 2 MiB).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(8 << 20)
        .build()?;
    runtime
        .block_on(sluice_operator::controller::run_operator_command(args))
        .map_err(|e| match e {
            ControllerError::Config(_) | ControllerError::Usage(_) => bad_input(e),
            other => Failure::from(other),
        })
}

/// Prints the CRDs, with the conversion webhook set when asked.
fn crds(args: CrdsArgs) -> Result<(), Failure> {
    use sluice_sdk::kueue::crds;
    let kueue = match (args.conversion_url, args.ca_file) {
        (Some(url), Some(ca_file)) => {
            let client = k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::WebhookClientConfig {
                url: Some(format!("{}/convert", url.trim_end_matches('/'))),
                ca_bundle: Some(k8s_openapi::ByteString(read_ca(&ca_file)?)),
                service: None,
            };
            crds::with_conversion_webhook(crds::crds(), &client)
        }
        _ => crds::crds(),
    };
    print!("{}", crds::to_yaml(&kueue));
    print!("{}", sluice_sdk::sluice::crds_yaml());
    Ok(())
}

/// Reads a CA bundle and checks that it is PEM.
fn read_ca(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    let pem = std::fs::read(path)
        .map_err(|e| bad_input(anyhow::anyhow!("--ca-file {}: {e}", path.display())))?;
    if !pem.starts_with(b"-----BEGIN ") {
        return Err(bad_input(anyhow::anyhow!(
            "--ca-file {}: not a PEM certificate",
            path.display()
        )));
    }
    Ok(pem)
}

/// Serves the webhook, or prints its configurations.
fn webhook(args: WebhookArgs) -> Result<(), Failure> {
    match (args.command, args.serve) {
        (Some(WebhookCommand::Configurations(c)), _) => {
            if !(c.url.starts_with("https://")) {
                return Err(bad_input(anyhow::anyhow!(
                    "--url {}: the API server calls webhooks over https:// only",
                    c.url
                )));
            }
            let endpoint = sluice_webhook::registration::Endpoint {
                url: c.url,
                ca_bundle: read_ca(&c.ca_file)?,
            };
            let (m, v) = sluice_webhook::registration::configurations(
                &c.name,
                &endpoint,
                &c.exclude_namespaces,
            );
            // k8s-openapi writes apiVersion and kind itself.
            print!(
                "---\n{}---\n{}",
                serde_yaml::to_string(&m)?,
                serde_yaml::to_string(&v)?
            );
            Ok(())
        }
        (None, Some(serve)) => {
            let config = hook_config(args.config.as_deref())?;
            policy_module_validator()
                .and_then(|v| sluice_webhook::serve(serve, config, Some(v)).map_err(Failure::from))
        }
        (None, None) => Err(bad_input(anyhow::anyhow!(
            "sluice webhook needs --tls-cert and --tls-key (or the subcommand `configurations`)"
        ))),
    }
}

/// What the webhook takes from the operator's Kueue Configuration (Sluice's defaults without one, so that the
/// webhook and the operator agree on which kinds are managed).
fn hook_config(path: Option<&std::path::Path>) -> Result<sluice_webhook::HookConfig, Failure> {
    let config = match path {
        Some(p) => sluice_operator::controller::OperatorConfig::from_file(p).map_err(bad_input)?,
        None => sluice_operator::controller::OperatorConfig::default(),
    };
    Ok(sluice_webhook::HookConfig {
        manage_jobs_without_queue_name: config.manage_jobs_without_queue_name,
        gates: sluice_sdk::kueue::defaults::Gates {
            partial_admission: config.engine.partial_admission,
            ..Default::default()
        },
        integrations: config.integrations,
        namespace_selector: config.managed_jobs_namespace_selector,
        ..Default::default()
    })
}

/// The webhook's PolicyModule check: decode the object, then compile the module and check its world and config
/// with the same host the operator runs modules in.
fn policy_module_validator()
-> Result<std::sync::Arc<dyn sluice_webhook::PolicyModuleValidator>, Failure> {
    use sluice_sdk::host::{HostConfig, PolicyHost, validate::validate_policy_module};
    use sluice_sdk::sluice::policy_module::PolicyModule;
    let host =
        PolicyHost::new(HostConfig::default()).map_err(|e| anyhow::anyhow!("policy host: {e}"))?;
    let check = move |object: &serde_json::Value, _old: Option<&serde_json::Value>| {
        let pm: PolicyModule = serde_path_to_error::deserialize(object)
            .map_err(|e| format!("PolicyModule: {}: {}", e.path(), e.inner()))?;
        if pm.spec.config_map_ref.is_some() && pm.spec.module.is_none() {
            // The webhook reads no ConfigMaps; the operator checks those bytes when it loads them.
            return Ok(vec![
                "spec.configMapRef: the module in the ConfigMap is compiled and checked by the operator when it loads it".into(),
            ]);
        }
        validate_policy_module(&host, &pm, None).map(|_| Vec::new())
    };
    Ok(std::sync::Arc::new(check))
}

/// Runs a cluster subcommand; bad flags exit with 2.
fn cluster(command: sluice_operator::cli::ClusterCommand) -> Result<(), Failure> {
    use sluice_operator::cli::{CliError, run};
    let text = run(command).map_err(|e| match e {
        CliError::Flag { .. } => bad_input(e),
        e => Failure::from(e),
    })?;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(())
}

/// Runs a `sluice policy` subcommand; bad modules and inputs exit with 2.
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
    let (in_manifests, docs) = sim::config::split_configuration(docs).map_err(bad_input)?;
    let sim_config = match (&args.config, in_manifests) {
        (Some(path), None) => sim::config::SimConfig::from_file(path).map_err(bad_input)?,
        (None, Some(c)) => c,
        (None, None) => sim::config::SimConfig::default(),
        (Some(path), Some(_)) => {
            return Err(bad_input(anyhow::anyhow!(
                "--config {} and a Configuration document among the manifests: give one",
                path.display()
            )));
        }
    };
    let docs = sim_config.managed_documents(docs);
    let mut policy_flags = args.policies.clone();
    sluice_operator::cli::policy::apply_policy_configs(&mut policy_flags, &args.policy_configs)
        .map_err(|e| bad_input(anyhow::anyhow!(e)))?;
    let policies =
        sluice_operator::cli::policy::load_simulation_policies(&policy_flags).map_err(bad_input)?;
    let mut config = sim_config.engine;
    if (args.fair_sharing || policies.fairness.is_some()) && config.fair_sharing.is_none() {
        config.fair_sharing = Some(FairSharingConfig::default());
    }
    config.evict_on_degraded_gpus |= args.evict_on_degraded_gpus;
    let mut simulation = Simulation::from_documents_counting(
        &docs,
        config,
        policies.fairness.clone(),
        sim_config.resource_counting.clone(),
    )
    .map_err(bad_input)?;
    simulation.set_detailed_pending_reasons(
        args.detailed_pending_reasons || sim_config.detailed_pending_reasons,
    );
    simulation.set_wait_for_pods_ready(sim_config.wait_for_pods_ready.clone());
    simulation.set_ignore_topology(args.ignore_topology);
    if let PlacementPolicyArg::Spread = args.placement_policy {
        simulation.set_placement_policy(Box::new(sluice_sdk::policy::builtin::Spread));
    }
    if let Some(module) = &policies.placement {
        simulation.set_placement_policy(Box::new(module.clone()));
    }
    if let Some(module) = &policies.preemption_cost {
        simulation
            .engine
            .set_preemption_cost_policy(Some(module.clone()));
    }
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
    if let Some(path) = &args.report {
        let html = sim::report::render_html(
            &report,
            &sim::report::node_uses(&simulation, &report),
            "Sluice simulation report",
        )?;
        std::fs::write(path, html)
            .map_err(|e| anyhow::anyhow!("writing the report to {}: {e}", path.display()))?;
    }
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
    // The process ends here: freeing every workload, placement and document one by one took a tenth of a
    // large trace's run.
    std::mem::forget(simulation);
    std::mem::forget(docs);
    Ok(())
}
