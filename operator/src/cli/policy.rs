//! `sluice policy push|test|bench` and the simulator's `--policy` flag.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_sdk::harness::{self, Harness, Percentiles, PodSetBuilder, synthetic_cluster};
use sluice_sdk::host::validate::validate_policy_module;
use sluice_sdk::host::{HostConfig, ModuleKind, ModuleLimits, PolicyHost, sha256_hex};
use sluice_sdk::policy::fairness::{FairnessPolicy as _, OrderBatch, ShareBatch};
use sluice_sdk::policy::{PlacementPolicy, PolicyError};
use sluice_sdk::sluice::policy_module::{PolicyKind, PolicyModule, PolicyModuleSpec};
use thiserror::Error;

use crate::engine::FairnessPolicy;
use crate::policy::{LoadedModule, PolicyRegistry, RegistryError, embedded};

/// Failures of the policy subcommands.
#[derive(Debug, Error)]
pub enum PolicyCliError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// Path.
        path: String,
        /// Error.
        source: std::io::Error,
    },
    /// Bad input (flag, module, case file).
    #[error("{0}")]
    Invalid(String),
    /// Some test cases failed.
    #[error("{failed} of {total} cases failed")]
    CasesFailed {
        /// Failed cases.
        failed: usize,
        /// All cases.
        total: usize,
    },
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<RegistryError> for PolicyCliError {
    fn from(e: RegistryError) -> Self {
        Self::Invalid(e.to_string())
    }
}

impl From<PolicyError> for PolicyCliError {
    fn from(e: PolicyError) -> Self {
        Self::Invalid(e.to_string())
    }
}

/// `sluice policy`.
#[derive(Args, Debug)]
pub struct PolicyArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// Subcommands of `sluice policy`.
#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Validate a module locally (compile, imports, world, init) and print its PolicyModule manifest.
    Push(PushArgs),
    /// Run table-driven cases (YAML) against a module.
    Test(TestArgs),
    /// Measure per-call latency percentiles of a module on a synthetic batch.
    Bench(BenchArgs),
}

/// `sluice policy push`.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// The compiled component (`.wasm`, built for wasm32-wasip2).
    pub file: PathBuf,
    /// PolicyModule name.
    #[arg(long)]
    pub name: String,
    /// World the module implements.
    #[arg(long, value_parser = parse_kind)]
    pub kind: ModuleKind,
    /// JSON configuration passed to `init`.
    #[arg(long)]
    pub config: Option<String>,
    /// Call deadline in milliseconds.
    #[arg(long)]
    pub deadline_ms: Option<u32>,
    /// Memory cap in bytes.
    #[arg(long)]
    pub memory_limit_bytes: Option<u64>,
}

/// `sluice policy test`.
#[derive(Args, Debug)]
pub struct TestArgs {
    /// The compiled component.
    pub file: PathBuf,
    /// The case file (YAML).
    pub cases: PathBuf,
}

/// `sluice policy bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The compiled component, or the name of an embedded module (topology-pack, spread, fair-credits, drs).
    pub file: String,
    /// World the module implements.
    #[arg(long, value_parser = parse_kind, default_value = "placement")]
    pub kind: ModuleKind,
    /// Candidate nodes (placement) or queues (fairness) per call.
    #[arg(long, default_value_t = 10_000)]
    pub nodes: usize,
    /// Measured calls.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// JSON configuration passed to `init`.
    #[arg(long)]
    pub config: Option<String>,
    /// Call deadline in milliseconds (generous by default: this measures, it does not police).
    #[arg(long, default_value_t = 1000)]
    pub deadline_ms: u32,
}

fn parse_kind(s: &str) -> Result<ModuleKind, String> {
    s.parse()
}

/// Runs a `sluice policy` subcommand, writing its report to `out`.
pub fn run(args: &PolicyArgs, out: &mut impl Write) -> Result<(), PolicyCliError> {
    match &args.command {
        PolicyCommand::Push(a) => push(a, out),
        PolicyCommand::Test(a) => test(a, out),
        PolicyCommand::Bench(a) => bench(a, out),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, PolicyCliError> {
    std::fs::read(path).map_err(|source| PolicyCliError::Read {
        path: path.display().to_string(),
        source,
    })
}

fn host() -> Result<PolicyHost, PolicyCliError> {
    PolicyHost::new(HostConfig {
        pool_instances: 8,
        ..HostConfig::default()
    })
    .map_err(|e| PolicyCliError::Invalid(e.to_string()))
}

fn push(a: &PushArgs, out: &mut impl Write) -> Result<(), PolicyCliError> {
    let bytes = read(&a.file)?;
    let pm = PolicyModule {
        metadata: ObjectMeta {
            name: Some(a.name.clone()),
            ..ObjectMeta::default()
        },
        spec: PolicyModuleSpec {
            kind: match a.kind {
                ModuleKind::Placement => PolicyKind::Placement,
                ModuleKind::Fairness => PolicyKind::Fairness,
            },
            sha256: sha256_hex(&bytes),
            module: Some(ByteString(bytes)),
            config_map_ref: None,
            config: a.config.clone(),
            deadline_ms: a.deadline_ms,
            memory_limit_bytes: a.memory_limit_bytes,
        },
        status: None,
    };
    validate_policy_module(&host()?, &pm, None).map_err(PolicyCliError::Invalid)?;
    let yaml = serde_yaml::to_string(&pm)
        .map_err(|e| PolicyCliError::Invalid(format!("rendering the manifest: {e}")))?;
    writeln!(out, "---\n{}", yaml.trim_end())?;
    Ok(())
}

fn test(a: &TestArgs, out: &mut impl Write) -> Result<(), PolicyCliError> {
    let bytes = read(&a.file)?;
    let text = String::from_utf8(read(&a.cases)?)
        .map_err(|_| PolicyCliError::Invalid(format!("{}: not UTF-8", a.cases.display())))?;
    let file = harness::cases::parse(&text)
        .map_err(|e| PolicyCliError::Invalid(format!("{}: {e}", a.cases.display())))?;
    let h = Harness::with_config(HostConfig {
        pool_instances: 8,
        ..HostConfig::default()
    })
    .map_err(|e| PolicyCliError::Invalid(e.to_string()))?;
    let results = harness::cases::run(&h, &bytes, &file)
        .map_err(|e| PolicyCliError::Invalid(e.to_string()))?;
    let mut failed = 0;
    for r in &results {
        match &r.failure {
            None => writeln!(out, "ok    {}", r.name)?,
            Some(m) => {
                failed += 1;
                writeln!(out, "FAIL  {}: {m}", r.name)?;
            }
        }
    }
    writeln!(out, "{} passed, {failed} failed", results.len() - failed)?;
    if failed > 0 {
        return Err(PolicyCliError::CasesFailed {
            failed,
            total: results.len(),
        });
    }
    Ok(())
}

fn module_bytes(file: &str) -> Result<Vec<u8>, PolicyCliError> {
    match embedded::by_name(file) {
        Some((_, b)) if !Path::new(file).exists() => Ok(b.to_vec()),
        _ => read(Path::new(file)),
    }
}

fn bench(a: &BenchArgs, out: &mut impl Write) -> Result<(), PolicyCliError> {
    let bytes = module_bytes(&a.file)?;
    let host = host()?;
    let limits = ModuleLimits {
        deadline: Some(Duration::from_millis(u64::from(a.deadline_ms.max(1)))),
        memory_limit: Some(256 << 20),
    };
    let config = a.config.clone().unwrap_or_default();
    let name = a.file.clone();
    let invalid = |e: sluice_sdk::host::LoadError| PolicyCliError::Invalid(format!("{name}: {e}"));
    let warmup = (a.calls / 10).max(3);
    match a.kind {
        ModuleKind::Placement => {
            let p = host
                .load_placement(&name, &bytes, &config, limits)
                .map_err(invalid)?;
            let nodes = synthetic_cluster(a.nodes);
            let req = PodSetBuilder::new("bench/gang", 16).gpus_per_pod(8).build();
            let warm = harness::measure(warmup, a.calls, || p.score(&req, &nodes))?;
            report(
                out,
                &format!("score, {} nodes, resident instance", a.nodes),
                &warm,
            )?;
            // The same policy compiled natively, when the module is one of the shipped built-ins: the
            // WebAssembly overhead is the difference between the two lines.
            let native: Option<Box<dyn sluice_sdk::policy::PlacementPolicy>> = match name.as_str() {
                "topology-pack" => Some(Box::new(sluice_sdk::policy::builtin::TopologyPack)),
                "spread" => Some(Box::new(sluice_sdk::policy::builtin::Spread)),
                _ => None,
            };
            if let Some(native) = native {
                let n = harness::measure(warmup, a.calls, || native.score(&req, &nodes))?;
                report(
                    out,
                    &format!(
                        "score, {} nodes, native (same policy, no WebAssembly)",
                        a.nodes
                    ),
                    &n,
                )?;
            }
            let fresh = harness::measure(warmup.min(5), (a.calls / 4).max(5), || {
                p.score_fresh(&req, &nodes)
            })?;
            report(
                out,
                &format!(
                    "score, {} nodes, fresh instance per call (instantiate + init + inventory + call)",
                    a.nodes
                ),
                &fresh,
            )?;
        }
        ModuleKind::Fairness => {
            let f = host
                .load_fairness(&name, &bytes, &config, limits)
                .map_err(invalid)?;
            let mut shares = ShareBatch {
                names: vec![String::new()],
                ..ShareBatch::default()
            };
            let mut order = OrderBatch::default();
            for i in 0..a.nodes {
                shares.names.push(format!("cq-{i}"));
                let borrowed = (i as i64 * 37) % 100;
                shares.push(
                    (i + 1) as u32,
                    1.0,
                    true,
                    &[(0, borrowed, 1000), (1, borrowed / 2, 500)],
                    (i % 10) as f64 * 50.0,
                );
                order.borrowing_on_requested.push(i % 7 == 0);
                order.ratio.push(borrowed as f64);
                order.weight.push(1.0);
                order.borrowing.push(borrowed > 0);
                order.priority.push((i % 3) as i32);
                order.timestamp.push(i as i64);
            }
            let s = harness::measure(warmup, a.calls, || f.shares(&shares))?;
            report(out, &format!("shares, {} queues", a.nodes), &s)?;
            let o = harness::measure(warmup, a.calls, || f.order(&order))?;
            report(out, &format!("order, {} heads", a.nodes), &o)?;
        }
    }
    Ok(())
}

fn report(out: &mut impl Write, what: &str, p: &Percentiles) -> Result<(), PolicyCliError> {
    writeln!(
        out,
        "{what}: {} calls  p50 {:?}  p90 {:?}  p99 {:?}  mean {:?}  max {:?}",
        p.calls, p.p50, p.p90, p.p99, p.mean, p.max
    )?;
    Ok(())
}

/// One `--policy KIND=SOURCE` of `sluice simulate`.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyFlag {
    /// World.
    pub kind: ModuleKind,
    /// A `.wasm` file, or the name of an embedded module.
    pub source: String,
}

/// Parses `placement=FILE.wasm|NAME` or `fairness=FILE.wasm|NAME`.
pub fn parse_policy_flag(s: &str) -> Result<PolicyFlag, String> {
    let (kind, source) = s
        .split_once('=')
        .ok_or_else(|| format!("expected placement=FILE.wasm or fairness=FILE.wasm, got {s:?}"))?;
    let kind: ModuleKind = kind.parse()?;
    if source.is_empty() {
        return Err(format!(
            "--policy {kind}=: a file or module name is required",
            kind = kind.as_str()
        ));
    }
    Ok(PolicyFlag {
        kind,
        source: source.to_string(),
    })
}

/// The policies a simulation runs with.
#[derive(Debug, Default)]
pub struct SimulationPolicies {
    /// Fairness policy (None: the built-in DRS).
    pub fairness: Option<Arc<dyn FairnessPolicy>>,
    /// Placement policy, loaded and checked.
    pub placement: Option<Arc<dyn PlacementPolicy>>,
    /// The registry holding the modules (for their failure counters).
    pub registry: Option<PolicyRegistry>,
}

/// Loads the modules named by `--policy` flags (files or embedded module names).
pub fn load_simulation_policies(
    flags: &[PolicyFlag],
) -> Result<SimulationPolicies, PolicyCliError> {
    let mut out = SimulationPolicies::default();
    if flags.is_empty() {
        return Ok(out);
    }
    // Offline: a generous deadline, so a slow (e.g. debug) build measures the policy, not the clock.
    let sim_host = PolicyHost::new(HostConfig {
        pool_instances: 8,
        default_deadline: Duration::from_millis(200),
        ..HostConfig::default()
    })
    .map_err(|e| PolicyCliError::Invalid(e.to_string()))?;
    let mut registry = PolicyRegistry::new(
        sim_host,
        5,
        Arc::new(sluice_policy_topology_pack::Policy::default()),
    );
    for f in flags {
        let (kind, bytes) = match embedded::by_name(&f.source) {
            Some(e) if !Path::new(&f.source).exists() => (e.0, e.1.to_vec()),
            _ => (f.kind, read(Path::new(&f.source))?),
        };
        if kind != f.kind {
            return Err(PolicyCliError::Invalid(format!(
                "--policy {}={}: that is a {} module",
                f.kind.as_str(),
                f.source,
                kind.as_str()
            )));
        }
        match registry.load(&f.source, kind, &bytes, "", ModuleLimits::default())? {
            LoadedModule::Fairness(m) => out.fairness = Some(m),
            LoadedModule::Placement(m) => out.placement = Some(m),
        }
    }
    out.registry = Some(registry);
    Ok(out)
}
