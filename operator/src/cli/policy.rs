//! `sluice policy push|test|bench|ls|inspect` and the simulator's `--policy` flag.

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
use sluice_sdk::policy::{CandidateBatch, PlacementPolicy, PolicyError, PreemptionCostPolicy};
use sluice_sdk::sluice::policy_module::{PolicyKind, PolicyModule, PolicyModuleSpec};
use thiserror::Error;

use crate::cli::{CliError, Output};
use crate::engine::EngineFairness;
use crate::policy::{LoadedModule, PolicyRegistry, RegistryError, embedded};

/// Failures of the policy subcommands.
#[derive(Debug, Error)]
pub enum PolicyCliError {
    /// A file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// Path.
        path: String,
        /// Error (in the message, so not a `source`).
        error: std::io::Error,
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
    Output(std::io::Error),
    /// Talking to the cluster failed (`ls`, `inspect`).
    #[error(transparent)]
    Cluster(#[from] CliError),
}

impl From<std::io::Error> for PolicyCliError {
    fn from(e: std::io::Error) -> Self {
        Self::Output(e)
    }
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
    /// List the cluster's PolicyModules with their load status (kubeconfig's cluster).
    Ls(LsArgs),
    /// Show one PolicyModule: spec without the bytes, status, and the ClusterQueues and Cohorts that select it.
    Inspect(InspectArgs),
}

/// `sluice policy ls`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// Output format.
    #[command(flatten)]
    pub output: Output,
}

/// `sluice policy inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// PolicyModule name.
    pub name: String,
    /// Output format.
    #[command(flatten)]
    pub output: Output,
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
    /// The compiled component, or a shipped module's name (topology-pack, spread, fair-credits, drs,
    /// anti-thrash).
    pub file: PathBuf,
    /// The case file (YAML).
    pub cases: PathBuf,
}

/// `sluice policy bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The compiled component, or the name of an embedded module (topology-pack, spread, fair-credits, drs,
    /// anti-thrash).
    pub file: String,
    /// World the module implements (placement, fairness or preemptioncost; an embedded module's own kind
    /// when FILE names one).
    #[arg(long, value_parser = parse_kind)]
    pub kind: Option<ModuleKind>,
    /// Candidate nodes (placement), queues (fairness) or preemption candidates (preemptioncost) per call.
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
        PolicyCommand::Ls(_) | PolicyCommand::Inspect(_) => {
            let text = cluster::run(&args.command)?;
            out.write_all(text.as_bytes())?;
            Ok(())
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, PolicyCliError> {
    std::fs::read(path).map_err(|error| PolicyCliError::Read {
        path: path.display().to_string(),
        error,
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
                ModuleKind::PreemptionCost => PolicyKind::PreemptionCost,
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
    let bytes = module_bytes(&a.file)?;
    let text = String::from_utf8(read(&a.cases)?)
        .map_err(|_| PolicyCliError::Invalid(format!("{}: not UTF-8", a.cases.display())))?;
    let file = harness::cases::parse(&text)
        .map_err(|e| PolicyCliError::Invalid(format!("{}: {e}", a.cases.display())))?;
    // Cases check what a module decides, not how fast: a generous deadline, so a loaded machine or a debug build
    // does not fail a sound case ("ran past its deadline of 5ms" was seen under CI load). A module that loops
    // still fails, a second later.
    let h = Harness::with_config(HostConfig {
        pool_instances: 8,
        default_deadline: Duration::from_millis(1000),
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

/// The bytes of `file`, or of the shipped module of that name when no such file exists.
fn module_bytes(file: impl AsRef<Path>) -> Result<Vec<u8>, PolicyCliError> {
    Ok(module_source(file)?.1)
}

/// The bytes of `file` (kind unknown), or the kind and bytes of the shipped module of that name when no such
/// file exists.
fn module_source(file: impl AsRef<Path>) -> Result<(Option<ModuleKind>, Vec<u8>), PolicyCliError> {
    let file = file.as_ref();
    match file.to_str().and_then(embedded::by_name) {
        Some((kind, b)) if !file.exists() => Ok((Some(kind), b.to_vec())),
        _ => Ok((None, read(file)?)),
    }
}

/// A synthetic preemption search of `n` candidates: mixed ages, checkpoints, GPUs and earlier preemptions.
pub fn synthetic_candidates(n: usize) -> CandidateBatch {
    let mut b = CandidateBatch {
        preemptor_priority: 1000,
        ..CandidateBatch::default()
    };
    for i in 0..n {
        let admitted = ((i * 577) % 14_400) as f64;
        b.push(
            format!("team-{}/job-{i}", i % 16),
            format!("cq-{}", i % 8),
            [0, 100, 500][i % 3],
            admitted,
            admitted * [1.0, 0.5, 0.1][i % 3],
            (i % 7) as u32,
            [1, 2, 4, 8][i % 4],
        );
    }
    b
}

fn bench(a: &BenchArgs, out: &mut impl Write) -> Result<(), PolicyCliError> {
    let (embedded_kind, bytes) = module_source(&a.file)?;
    let kind = match (a.kind, embedded_kind) {
        (Some(k), Some(e)) if k != e => {
            return Err(PolicyCliError::Invalid(format!(
                "--kind {}: {} is a {} module",
                k.as_str(),
                a.file,
                e.as_str()
            )));
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => ModuleKind::Placement,
    };
    let host = host()?;
    let limits = ModuleLimits {
        deadline: Some(Duration::from_millis(u64::from(a.deadline_ms.max(1)))),
        memory_limit: Some(256 << 20),
    };
    let config = a.config.clone().unwrap_or_default();
    let name = a.file.clone();
    let invalid = |e: sluice_sdk::host::LoadError| PolicyCliError::Invalid(format!("{name}: {e}"));
    let warmup = (a.calls / 10).max(3);
    match kind {
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
        ModuleKind::PreemptionCost => {
            let p = host
                .load_preemption_cost(&name, &bytes, &config, limits)
                .map_err(invalid)?;
            let batch = synthetic_candidates(a.nodes);
            let warm = harness::measure(warmup, a.calls, || p.costs(&batch))?;
            report(
                out,
                &format!("costs, {} candidates, resident instance", a.nodes),
                &warm,
            )?;
            if name == "anti-thrash" {
                let native = sluice_policy_anti_thrash::Config::parse(&config)
                    .map(sluice_policy_anti_thrash::AntiThrash::new)
                    .map_err(PolicyCliError::Invalid)?;
                let n = harness::measure(warmup, a.calls, || native.costs(&batch))?;
                report(
                    out,
                    &format!(
                        "costs, {} candidates, native (same policy, no WebAssembly)",
                        a.nodes
                    ),
                    &n,
                )?;
            }
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
    /// The module's configuration, as a PolicyModule's `spec.config` gives it (`""`: the module's defaults).
    pub config: String,
}

/// A `--policy-config KIND=JSON` flag: the configuration of the `--policy` module of that world.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyConfigFlag {
    /// World.
    pub kind: ModuleKind,
    /// The configuration text handed to the module's init.
    pub config: String,
}

/// Parses `placement=JSON`, `fairness=JSON` or `preemptioncost=JSON`.
pub fn parse_policy_config_flag(s: &str) -> Result<PolicyConfigFlag, String> {
    let (kind, config) = s.split_once('=').ok_or_else(|| {
        format!("expected KIND=JSON such as preemptioncost={{\"minRunSeconds\": 600}}, got {s:?}")
    })?;
    Ok(PolicyConfigFlag {
        kind: kind.parse()?,
        config: config.to_string(),
    })
}

/// Gives each `--policy` module the configuration its world's `--policy-config` names; a configuration for a
/// world no `--policy` flag loads, or two for one world, is an error naming the flag.
pub fn apply_policy_configs(
    flags: &mut [PolicyFlag],
    configs: &[PolicyConfigFlag],
) -> Result<(), String> {
    for (i, c) in configs.iter().enumerate() {
        if configs[..i].iter().any(|earlier| earlier.kind == c.kind) {
            return Err(format!("--policy-config {}: given twice", c.kind.as_str()));
        }
        let mut matched = false;
        for f in flags.iter_mut().filter(|f| f.kind == c.kind) {
            f.config = c.config.clone();
            matched = true;
        }
        if !matched {
            return Err(format!(
                "--policy-config {kind}=...: no --policy {kind}=FILE.wasm|NAME to configure",
                kind = c.kind.as_str()
            ));
        }
    }
    Ok(())
}

/// Parses `placement=FILE.wasm|NAME`, `fairness=FILE.wasm|NAME` or `preemptioncost=FILE.wasm|NAME`.
pub fn parse_policy_flag(s: &str) -> Result<PolicyFlag, String> {
    let (kind, source) = s.split_once('=').ok_or_else(|| {
        format!(
            "expected placement=FILE.wasm, fairness=FILE.wasm or preemptioncost=FILE.wasm, got {s:?}"
        )
    })?;
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
        config: String::new(),
    })
}

/// The policies a simulation runs with.
#[derive(Debug, Default)]
pub struct SimulationPolicies {
    /// Fairness policy (None: the built-in DRS).
    pub fairness: Option<Arc<dyn EngineFairness>>,
    /// Placement policy, loaded and checked.
    pub placement: Option<Arc<dyn PlacementPolicy>>,
    /// Preemption-cost policy of every ClusterQueue (None: Kueue's preemption).
    pub preemption_cost: Option<Arc<dyn PreemptionCostPolicy>>,
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
        match registry.load(&f.source, kind, &bytes, &f.config, ModuleLimits::default())? {
            LoadedModule::Fairness(m) => out.fairness = Some(m),
            LoadedModule::Placement(m) => out.placement = Some(m),
            LoadedModule::PreemptionCost(m) => out.preemption_cost = Some(m),
        }
    }
    out.registry = Some(registry);
    Ok(out)
}

/// `ls` and `inspect`: PolicyModules as the cluster in the kubeconfig has them.
pub mod cluster {
    use std::collections::BTreeMap;

    use kube::api::{Api, ListParams};
    use serde_json::{Value, json};
    use sluice_sdk::kueue::v1beta2 as api;
    use sluice_sdk::sluice::policy_module::{
        CONDITION_COMPILED, CONDITION_DEGRADED, FAIRNESS_POLICY_ANNOTATION,
        PLACEMENT_POLICY_ANNOTATION, PREEMPTION_POLICY_ANNOTATION, PolicyModule,
    };

    use super::PolicyCommand;
    use crate::cli::{CliError, age, with_cluster};
    use crate::output::{OutputFormat, encode, table};

    /// Runs `ls` or `inspect` against the current kubeconfig's cluster and returns what to print.
    pub fn run(command: &PolicyCommand) -> Result<String, CliError> {
        with_cluster(|client, now| async move { execute(&client, command, now).await })
    }

    /// Runs `ls` or `inspect` with `client`; `now` (Unix seconds) is for ages. Other subcommands print nothing.
    pub async fn execute(
        client: &kube::Client,
        command: &PolicyCommand,
        now: i64,
    ) -> Result<String, CliError> {
        match command {
            PolicyCommand::Ls(a) => ls(client, a.output.output, now).await,
            PolicyCommand::Inspect(a) => inspect(client, &a.name, a.output.output, now).await,
            _ => Ok(String::new()),
        }
    }

    /// The status of condition `type_` ("" when absent).
    fn condition(pm: &PolicyModule, type_: &str) -> String {
        pm.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
            .map(|c| c.status.clone())
            .unwrap_or_default()
    }

    /// Failed calls (every class but `degraded`, which counts skipped decisions).
    fn failures(pm: &PolicyModule) -> u64 {
        pm.status
            .as_ref()
            .map(|s| {
                s.failures
                    .iter()
                    .filter(|(k, _)| k.as_str() != "degraded")
                    .map(|(_, v)| *v)
                    .sum()
            })
            .unwrap_or(0)
    }

    fn short(sha: &str) -> String {
        sha.chars().take(12).collect()
    }

    /// The object without its module bytes (they can be megabytes of base64).
    fn without_bytes(pm: &PolicyModule) -> Value {
        let mut v = serde_json::to_value(pm).unwrap_or(Value::Null);
        if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
            && let Some(m) = spec.remove("module")
        {
            // Base64: 3 bytes per 4 characters, less the padding.
            let n = m.as_str().map_or(0, |s| {
                (s.len() / 4 * 3).saturating_sub(s.chars().rev().take_while(|&c| c == '=').count())
            });
            spec.insert("moduleBytes".into(), json!(n));
        }
        v
    }

    async fn ls(client: &kube::Client, output: OutputFormat, now: i64) -> Result<String, CliError> {
        let api: Api<PolicyModule> = Api::all(client.clone());
        let items = api.list(&ListParams::default()).await?.items;
        if output != OutputFormat::Table {
            let items: Vec<Value> = items.iter().map(without_bytes).collect();
            return encode(
                &json!({"apiVersion": "v1", "kind": "List", "items": items}),
                output,
            );
        }
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|pm| {
                let or_dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
                vec![
                    pm.metadata.name.clone().unwrap_or_default(),
                    pm.spec.kind.as_str().to_string(),
                    short(&pm.spec.sha256),
                    or_dash(condition(pm, CONDITION_COMPILED)),
                    or_dash(condition(pm, CONDITION_DEGRADED)),
                    pm.status
                        .as_ref()
                        .map_or_else(|| "-".to_string(), |s| s.calls.to_string()),
                    failures(pm).to_string(),
                    age(pm.metadata.creation_timestamp.as_ref(), now),
                ]
            })
            .collect();
        if rows.is_empty() {
            return Ok("No PolicyModules found.\n".to_string());
        }
        Ok(table(
            &[
                "NAME", "KIND", "SHA256", "COMPILED", "DEGRADED", "CALLS", "FAILURES", "AGE",
            ],
            &rows,
        ))
    }

    /// ClusterQueues naming `name`, by annotation (placement, fairness, preemption).
    fn selected_by(cqs: &[api::ClusterQueue], name: &str) -> BTreeMap<&'static str, Vec<String>> {
        let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        for cq in cqs {
            let a = cq.metadata.annotations.clone().unwrap_or_default();
            for (key, what) in [
                (PLACEMENT_POLICY_ANNOTATION, "placement"),
                (FAIRNESS_POLICY_ANNOTATION, "fairness"),
                (PREEMPTION_POLICY_ANNOTATION, "preemption"),
            ] {
                if a.get(key).is_some_and(|v| v == name) {
                    out.entry(what)
                        .or_default()
                        .push(cq.metadata.name.clone().unwrap_or_default());
                }
            }
        }
        out
    }

    async fn inspect(
        client: &kube::Client,
        name: &str,
        output: OutputFormat,
        now: i64,
    ) -> Result<String, CliError> {
        let api: Api<PolicyModule> = Api::all(client.clone());
        let pm = api.get(name).await?;
        let cqs: Api<api::ClusterQueue> = Api::all(client.clone());
        let cqs = cqs.list(&ListParams::default()).await?.items;
        let cohorts: Api<api::Cohort> = Api::all(client.clone());
        // Kueue's Cohort CRD may not be installed: then no Cohort names anything.
        let cohorts = match cohorts.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut selected = selected_by(&cqs, name);
        let by_cohorts: Vec<String> = cohorts
            .iter()
            .filter(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(FAIRNESS_POLICY_ANNOTATION))
                    .is_some_and(|v| v == name)
            })
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        if !by_cohorts.is_empty() {
            selected.insert("fairness-cohorts", by_cohorts);
        }
        let source = match (&pm.spec.module, &pm.spec.config_map_ref) {
            (Some(b), _) => json!({"inline": {"bytes": b.0.len()}}),
            (None, Some(r)) => json!({"configMap": r}),
            (None, None) => Value::Null,
        };
        let status = pm.status.clone().unwrap_or_default();
        if output != OutputFormat::Table {
            let v = json!({
                "name": name,
                "kind": pm.spec.kind.as_str(),
                "source": source,
                "sha256": pm.spec.sha256,
                "config": pm.spec.config,
                "deadlineMs": pm.spec.deadline_ms,
                "memoryLimitBytes": pm.spec.memory_limit_bytes,
                "status": status,
                "selectedBy": selected,
            });
            return encode(&v, output);
        }
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:<15}{v}\n"));
        line("Name:", name.to_string());
        line("Kind:", pm.spec.kind.as_str().to_string());
        line(
            "Module:",
            match (&pm.spec.module, &pm.spec.config_map_ref) {
                (Some(b), _) => format!("inline, {} bytes", b.0.len()),
                (None, Some(r)) => format!(
                    "ConfigMap {}/{} binaryData[{:?}]",
                    r.namespace, r.name, r.key
                ),
                (None, None) => "<none>".to_string(),
            },
        );
        line("SHA256:", pm.spec.sha256.clone());
        line(
            "Config:",
            pm.spec.config.clone().unwrap_or_else(|| "<none>".into()),
        );
        line(
            "Deadline:",
            pm.spec
                .deadline_ms
                .map_or("<operator default>".into(), |d| format!("{d}ms")),
        );
        line(
            "Memory limit:",
            pm.spec
                .memory_limit_bytes
                .map_or("<operator default>".into(), |m| format!("{m} bytes")),
        );
        line("Age:", age(pm.metadata.creation_timestamp.as_ref(), now));
        line(
            "Loaded SHA256:",
            status.sha256.clone().unwrap_or_else(|| "<none>".into()),
        );
        out.push_str("Conditions:\n");
        if status.conditions.is_empty() {
            out.push_str("  <none: the operator has not reported on this module>\n");
        }
        for c in &status.conditions {
            out.push_str(&format!(
                "  {:<10} {:<6} {:<18} {}  ({})\n",
                c.type_,
                c.status,
                c.reason,
                c.message,
                age(Some(&c.last_transition_time), now)
            ));
        }
        let failures: Vec<String> = status
            .failures
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push_str(&format!(
            "{:<15}{}\n",
            "Failures:",
            if failures.is_empty() {
                "none".to_string()
            } else {
                failures.join(", ")
            }
        ));
        out.push_str("Selected by:\n");
        if selected.is_empty() {
            out.push_str("  no ClusterQueue or Cohort\n");
        }
        for (what, names) in &selected {
            out.push_str(&format!("  {what:<16} {}\n", names.join(", ")));
        }
        Ok(out)
    }

    #[cfg(test)]
    mod tests {
        use clap::Parser;
        use serde_json::{Value, json};

        use super::super::PolicyArgs;
        use super::*;
        use crate::cli::test_support::{Mock, NOW, mock};

        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: PolicyArgs,
        }

        fn run_with(m: &Mock, args: &[&str]) -> Result<String, CliError> {
            let cli = Cli::try_parse_from(std::iter::once("sluice").chain(args.iter().copied()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            m.runtime
                .block_on(execute(&m.client, &cli.args.command, NOW))
        }

        fn cond(t: &str, status: &str, reason: &str, message: &str) -> Value {
            json!({"type": t, "status": status, "reason": reason, "message": message,
                   "lastTransitionTime": "2026-01-01T01:00:00Z"})
        }

        fn modules() -> Value {
            json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModuleList", "metadata": {"resourceVersion": "9"},
            "items": [
                {"apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModule",
                 "metadata": {"name": "pack", "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z"},
                 "spec": {"kind": "placement", "module": "AGFzbQ0AAQA=", "sha256": "0123456789abcdef0123"},
                 "status": {"sha256": "0123456789abcdef0123",
                    "conditions": [cond("Compiled", "True", "Loaded", "compiled and initialised"),
                                   cond("Degraded", "True", "RepeatedFailures", "5 failures in a row")],
                    "failures": {"trap": 5, "degraded": 40}, "calls": 1250}},
                {"apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModule",
                 "metadata": {"name": "credits", "resourceVersion": "6", "creationTimestamp": "2026-01-01T02:00:00Z"},
                 "spec": {"kind": "fairness", "sha256": "fedcba9876543210fedc",
                    "configMapRef": {"namespace": "sluice-system", "name": "mods", "key": "credits.wasm"},
                    "config": "{\"halfLifeSeconds\": 60}"}},
                {"apiVersion": "sluice.dev/v1alpha1", "kind": "PolicyModule",
                 "metadata": {"name": "calm", "resourceVersion": "7", "creationTimestamp": "2026-01-01T02:30:00Z"},
                 "spec": {"kind": "preemptioncost", "module": "AGFzbQ0AAQA=", "sha256": "aabbccddeeff00112233",
                    "config": "{\"minRunSeconds\": 600}"},
                 "status": {"sha256": "aabbccddeeff00112233", "calls": 12,
                    "conditions": [cond("Compiled", "True", "Loaded", "compiled and initialised"),
                                   cond("Degraded", "False", "Healthy", "")]}}
            ]})
        }

        fn cluster_queues() -> Value {
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueueList", "metadata": {"resourceVersion": "3"},
            "items": [
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                 "metadata": {"name": "team-a", "annotations": {"sluice.dev/placement-policy": "pack"}},
                 "spec": {"namespaceSelector": {}, "resourceGroups": []}},
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                 "metadata": {"name": "team-b", "annotations": {"sluice.dev/placement-policy": "pack",
                                                                "sluice.dev/fairness-policy": "credits"}},
                 "spec": {"namespaceSelector": {}, "resourceGroups": []}},
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                 "metadata": {"name": "plain"}, "spec": {"namespaceSelector": {}, "resourceGroups": []}},
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                 "metadata": {"name": "careful", "annotations": {"sluice.dev/preemption-policy": "calm"}},
                 "spec": {"namespaceSelector": {}, "resourceGroups": []}}
            ]})
        }

        /// The scripted API server's answers: modules, ClusterQueues and Cohorts.
        fn routes() -> Vec<(&'static str, String, Value)> {
            let items = modules()["items"].clone();
            vec![
                (
                    "GET",
                    "/apis/sluice.dev/v1alpha1/policymodules".into(),
                    modules(),
                ),
                (
                    "GET",
                    "/apis/sluice.dev/v1alpha1/policymodules/pack".into(),
                    items[0].clone(),
                ),
                (
                    "GET",
                    "/apis/sluice.dev/v1alpha1/policymodules/credits".into(),
                    items[1].clone(),
                ),
                (
                    "GET",
                    "/apis/sluice.dev/v1alpha1/policymodules/calm".into(),
                    items[2].clone(),
                ),
                (
                    "GET",
                    "/apis/kueue.x-k8s.io/v1beta2/clusterqueues".into(),
                    cluster_queues(),
                ),
                (
                    "GET",
                    "/apis/kueue.x-k8s.io/v1beta2/cohorts".into(),
                    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "CohortList", "metadata": {"resourceVersion": "4"},
                    "items": [
                        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                         "metadata": {"name": "org", "annotations": {"sluice.dev/fairness-policy": "credits"}},
                         "spec": {}},
                        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                         "metadata": {"name": "plain"}, "spec": {}}
                    ]}),
                ),
            ]
        }

        fn cluster() -> Mock {
            mock(routes())
        }

        #[test]
        fn ls_prints_a_table_of_modules_and_their_status() {
            let m = cluster();
            let out = run_with(&m, &["ls"]).expect("ls");
            assert_eq!(
                out,
                "NAME      KIND             SHA256         COMPILED   DEGRADED   CALLS   FAILURES   AGE\n\
                 pack      placement        0123456789ab   True       True       1250    5          3h\n\
                 credits   fairness         fedcba987654   -          -          -       0          60m\n\
                 calm      preemptioncost   aabbccddeeff   True       False      12      0          30m\n"
            );
        }

        #[test]
        fn ls_json_leaves_the_bytes_out() {
            let m = cluster();
            let out = run_with(&m, &["ls", "-o", "json"]).expect("ls");
            let v: Value = serde_json::from_str(&out).expect("json");
            assert_eq!(v["kind"], "List");
            assert_eq!(v["items"][0]["metadata"]["name"], "pack");
            assert!(v["items"][0]["spec"].get("module").is_none(), "{out}");
            assert_eq!(v["items"][0]["spec"]["moduleBytes"], 8);
            assert_eq!(v["items"][0]["status"]["failures"]["trap"], 5);
        }

        #[test]
        fn inspect_shows_spec_status_and_the_cluster_queues_selecting_it() {
            let m = cluster();
            let out = run_with(&m, &["inspect", "pack"]).expect("inspect");
            for needle in [
                "Name:          pack\n",
                "Kind:          placement\n",
                "Module:        inline, 8 bytes\n",
                "Loaded SHA256: 0123456789abcdef0123\n",
                "  Degraded   True   RepeatedFailures   5 failures in a row  (2h)\n",
                "Failures:      degraded=40, trap=5\n",
                "  placement        team-a, team-b\n",
            ] {
                assert!(out.contains(needle), "{needle:?} not in\n{out}");
            }
            assert!(!out.contains("AGFzbQ"), "no bytes: {out}");
        }

        #[test]
        fn inspect_yaml_has_the_config_map_source_and_selection() {
            let m = cluster();
            let out = run_with(&m, &["inspect", "credits", "-o", "yaml"]).expect("inspect");
            let v: Value = serde_yaml::from_str(&out).expect("yaml");
            assert_eq!(v["source"]["configMap"]["key"], "credits.wasm");
            assert_eq!(v["config"], "{\"halfLifeSeconds\": 60}");
            assert_eq!(
                v["selectedBy"],
                json!({"fairness": ["team-b"], "fairness-cohorts": ["org"]})
            );
            assert_eq!(v["status"], json!({}));
        }

        #[test]
        fn inspect_without_the_cohort_crd_lists_cluster_queues_only() {
            let m = mock(
                routes()
                    .into_iter()
                    .filter(|(_, path, _)| !path.ends_with("/cohorts"))
                    .collect(),
            );
            let out =
                run_with(&m, &["inspect", "credits"]).expect("a 404 for Cohorts is no Cohort");
            assert!(out.contains("  fairness         team-b\n"), "{out}");
            assert!(!out.contains("fairness-cohorts"), "{out}");
        }

        #[test]
        fn inspect_shows_a_preemption_cost_module_and_its_cluster_queues() {
            let m = cluster();
            let out = run_with(&m, &["inspect", "calm"]).expect("inspect");
            for needle in [
                "Kind:          preemptioncost\n",
                "Config:        {\"minRunSeconds\": 600}\n",
                "  preemption       careful\n",
            ] {
                assert!(out.contains(needle), "{needle:?} not in\n{out}");
            }
            let out = run_with(&m, &["inspect", "calm", "-o", "json"]).expect("inspect");
            let v: Value = serde_json::from_str(&out).expect("json");
            assert_eq!(v["kind"], "preemptioncost");
            assert_eq!(v["selectedBy"], json!({"preemption": ["careful"]}));
        }

        #[test]
        fn inspect_of_a_missing_module_is_an_api_error() {
            let m = cluster();
            let err = run_with(&m, &["inspect", "nope"]).expect_err("404");
            assert!(err.to_string().contains("not found"), "{err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn run_to_string(command: PolicyCommand) -> (Result<(), PolicyCliError>, String) {
        let mut out = Vec::new();
        let r = run(&PolicyArgs { command }, &mut out);
        (r, String::from_utf8(out).unwrap_or_default())
    }

    #[test]
    fn policy_test_runs_the_anti_thrash_cases_by_name() {
        let (r, out) = run_to_string(PolicyCommand::Test(TestArgs {
            file: "anti-thrash".into(),
            cases: root().join("policies-wasm/anti-thrash/cases.yaml"),
        }));
        assert!(r.is_ok(), "{r:?}\n{out}");
        assert!(out.ends_with("3 passed, 0 failed\n"), "{out}");
    }

    #[test]
    fn policy_test_reports_a_preemption_cost_case_that_fails() {
        let dir = std::env::temp_dir().join(format!("sluice-cost-cases-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let cases = dir.join("cases.yaml");
        std::fs::write(
            &cases,
            "kind: preemption-cost\nconfig: {minRunSeconds: 60}\ncases:\n\
             - name: wrong on purpose\n  candidates:\n  - {workload: t/a, admittedSeconds: 10, timesPreempted: 1}\n\
             \x20 expect: {boosts: [5], protected: []}\n",
        )
        .expect("case file");
        let (r, out) = run_to_string(PolicyCommand::Test(TestArgs {
            file: "anti-thrash".into(),
            cases,
        }));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            matches!(
                r,
                Err(PolicyCliError::CasesFailed {
                    failed: 1,
                    total: 1
                })
            ),
            "{r:?}"
        );
        assert!(
            out.contains("FAIL  wrong on purpose: boosts are [100], expected [5]"),
            "{out}"
        );
    }

    #[test]
    fn policy_bench_measures_anti_thrash_against_its_native_build() {
        let (r, out) = run_to_string(PolicyCommand::Bench(BenchArgs {
            file: "anti-thrash".into(),
            kind: None,
            nodes: 64,
            calls: 10,
            config: None,
            deadline_ms: 1000,
        }));
        assert!(r.is_ok(), "{r:?}\n{out}");
        assert!(
            out.contains("costs, 64 candidates, resident instance: 10 calls"),
            "{out}"
        );
        assert!(
            out.contains("costs, 64 candidates, native (same policy, no WebAssembly): 10 calls"),
            "{out}"
        );
        let (r, _) = run_to_string(PolicyCommand::Bench(BenchArgs {
            file: "anti-thrash".into(),
            kind: Some(ModuleKind::Placement),
            nodes: 64,
            calls: 10,
            config: None,
            deadline_ms: 1000,
        }));
        assert!(r.is_err_and(
            |e| e.to_string() == "--kind placement: anti-thrash is a preemptioncost module"
        ),);
    }

    #[test]
    fn policy_push_prints_a_preemption_cost_manifest() {
        let dir = std::env::temp_dir().join(format!("sluice-cost-push-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let wasm = dir.join("anti-thrash.wasm");
        std::fs::write(&wasm, embedded::ANTI_THRASH).expect("module file");
        let push = |config: &str| {
            run_to_string(PolicyCommand::Push(PushArgs {
                file: wasm.clone(),
                name: "calm".into(),
                kind: "preemption-cost"
                    .parse()
                    .expect("the world's name is a kind"),
                config: Some(config.into()),
                deadline_ms: None,
                memory_limit_bytes: None,
            }))
        };
        let (r, out) = push(r#"{"minRunSeconds": 600}"#);
        let (refused, _) = push(r#"{"maxBoost": -1}"#);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(r.is_ok(), "{r:?}");
        let pm: PolicyModule = serde_yaml::from_str(&out).expect("a PolicyModule");
        assert_eq!(pm.spec.kind, PolicyKind::PreemptionCost);
        assert!(out.contains("  kind: preemptioncost\n"), "{out}");
        assert_eq!(pm.spec.sha256, sha256_hex(embedded::ANTI_THRASH));
        let e = refused.expect_err("init refuses the config").to_string();
        assert!(
            e.contains("spec.config: the module's init refused it: anti-thrash config: maxBoost"),
            "{e}"
        );
    }

    #[test]
    fn policy_config_flags_configure_their_worlds_module() {
        let mut flags = vec![
            parse_policy_flag("preemptioncost=anti-thrash").expect("parses"),
            parse_policy_flag("placement=spread").expect("parses"),
        ];
        let config =
            parse_policy_config_flag(r#"preemptioncost={"minRunSeconds": 60}"#).expect("parses");
        apply_policy_configs(&mut flags, std::slice::from_ref(&config)).expect("applies");
        assert_eq!(flags[0].config, r#"{"minRunSeconds": 60}"#);
        assert_eq!(flags[1].config, "");
        let p = load_simulation_policies(&flags[..1]).expect("loads with the configuration");
        // Admitted 100 s ago: protected under the default 1800 s, not under 60 s.
        let a = p
            .preemption_cost
            .expect("loaded")
            .costs(&CandidateBatch {
                workload: vec!["ns/a".into()],
                cluster_queue: vec!["cq".into()],
                priority: vec![0],
                admitted_seconds: vec![100.0],
                since_checkpoint_seconds: vec![100.0],
                times_preempted: vec![0],
                gpus: vec![1],
                gpu_hours_at_stake: vec![0.03],
                preemptor_priority: 10,
            })
            .expect("answers");
        assert_eq!(a.protected, [false]);

        let bad = parse_policy_config_flag(r#"preemptioncost={"minRunSeconds": -1}"#).unwrap();
        let mut one = flags[..1].to_vec();
        apply_policy_configs(&mut one, &[bad]).expect("applies");
        let e = load_simulation_policies(&one).expect_err("refused by the module's init");
        assert!(e.to_string().contains("minRunSeconds"), "{e}");

        let e = apply_policy_configs(&mut flags[1..].to_vec(), std::slice::from_ref(&config))
            .expect_err("no preemption-cost module to configure");
        assert_eq!(
            e,
            "--policy-config preemptioncost=...: no --policy preemptioncost=FILE.wasm|NAME to configure"
        );
        let e = apply_policy_configs(&mut flags, &[config.clone(), config]).expect_err("twice");
        assert_eq!(e, "--policy-config preemptioncost: given twice");
        assert!(parse_policy_config_flag("{}").is_err());
        assert!(parse_policy_config_flag("nonsense={}").is_err());
    }

    #[test]
    fn the_simulator_flag_loads_a_preemption_cost_module() {
        let flag = parse_policy_flag("preemptioncost=anti-thrash").expect("parses");
        assert_eq!(flag.kind, ModuleKind::PreemptionCost);
        let p = load_simulation_policies(&[flag]).expect("loads");
        let policy = p.preemption_cost.expect("a preemption-cost policy");
        assert_eq!(policy.name(), "anti-thrash");
        let a = policy.costs(&synthetic_candidates(8)).expect("answers");
        assert_eq!(a.boost.len(), 8);
        let wrong =
            load_simulation_policies(&[parse_policy_flag("fairness=anti-thrash").expect("parses")])
                .expect_err("anti-thrash is not a fairness module");
        assert!(
            wrong
                .to_string()
                .contains("--policy fairness=anti-thrash: that is a preemptioncost module"),
            "{wrong}"
        );
    }
}
