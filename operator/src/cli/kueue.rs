//! `kubectl kueue`-style subcommands against the cluster of the current kubeconfig: list, create, stop and
//! resume Kueue's queues and workloads. Each command is an async function over a `kube::Client`, so tests
//! drive it with recorded API responses.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};
use sluice_sdk::kueue::v1beta2 as api;

use crate::sim::{GPU_RESOURCE, OutputFormat};

/// Why a cluster subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The API server refused or could not be reached.
    #[error("{0}")]
    Kube(kube::Error),
    /// No usable kubeconfig.
    #[error("kubeconfig: {0}")]
    Config(String),
    /// A flag's value cannot be used.
    #[error("flag --{flag} {value:?}: {reason}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// Why.
        reason: String,
    },
    /// Output could not be encoded.
    #[error("encoding output: {0}")]
    Json(serde_json::Error),
    /// Output could not be encoded.
    #[error("encoding output: {0}")]
    Yaml(serde_yaml::Error),
    /// The async runtime could not start.
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
}

// Each variant's message already carries its cause's text, so the causes are not also chained as `source`s
// (a chain printer such as anyhow's `{:#}` would print them twice).
impl From<kube::Error> for CliError {
    fn from(e: kube::Error) -> Self {
        Self::Kube(e)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        Self::Json(e)
    }
}

impl From<serde_yaml::Error> for CliError {
    fn from(e: serde_yaml::Error) -> Self {
        Self::Yaml(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        Self::Runtime(e)
    }
}

/// Why no client could be made: the kubeconfig's error alone when not running in a pod (the in-cluster
/// attempt cannot apply there), and kube's words for both attempts otherwise.
fn config_error(e: kube::Error) -> CliError {
    use std::error::Error as _;
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    match &e {
        kube::Error::InferConfig(infer) => match infer.source() {
            Some(kubeconfig) if !in_cluster => CliError::Config(kubeconfig.to_string()),
            _ => CliError::Config(infer.to_string()),
        },
        _ => CliError::Config(e.to_string()),
    }
}

/// Renders a header and rows as aligned columns.
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for r in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The objects as a `v1` List in JSON or YAML (as `kubectl get -o json|yaml` prints them).
pub fn list<T: Serialize>(items: &[T], format: OutputFormat) -> Result<String, CliError> {
    let items = items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<Value>, _>>()?;
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    encode(&list, format)
}

/// One value in JSON or YAML.
pub fn encode(value: &Value, format: OutputFormat) -> Result<String, CliError> {
    Ok(match format {
        OutputFormat::Yaml => serde_yaml::to_string(value)?,
        _ => serde_json::to_string_pretty(value)? + "\n",
    })
}

/// A timestamp's age at `now` (Unix seconds), as kubectl shows it (e.g. 5m, 3h, 2d).
pub fn age(
    created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: i64,
) -> String {
    let Some(t) = created else {
        return "<unknown>".to_string();
    };
    let secs = (now - t.0.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// How `-o` prints: human table or the objects.
#[derive(clap::Args, Clone, Debug)]
pub struct Output {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// Which namespace(s).
#[derive(clap::Args, Clone, Debug)]
pub struct Namespaces {
    /// Namespace (default: the kubeconfig context's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// All namespaces.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
}

/// Subcommands that talk to the cluster of the current kubeconfig (flattened into `sluice`'s).
#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// List ClusterQueues, LocalQueues, Workloads or ResourceFlavors.
    #[command(subcommand)]
    List(ListCommand),
    /// Create a ClusterQueue, LocalQueue or ResourceFlavor from flags.
    #[command(subcommand)]
    Create(CreateCommand),
    /// Stop a ClusterQueue or LocalQueue (no new admissions; drains unless --keep-already-running) or
    /// deactivate a Workload.
    #[command(subcommand)]
    Stop(StopCommand),
    /// Resume a stopped ClusterQueue or LocalQueue, or reactivate a Workload.
    #[command(subcommand)]
    Resume(ResumeCommand),
    /// GPU use per node and per ClusterQueue.
    #[command(subcommand)]
    Top(super::top::TopCommand),
}

/// `sluice list ...`.
#[derive(clap::Subcommand, Debug)]
pub enum ListCommand {
    /// ClusterQueues with their cohort, workload counts, state and GPU use.
    #[command(alias = "clusterqueue", alias = "cq")]
    Clusterqueues {
        /// Only active (true) or only inactive (false) ClusterQueues.
        #[arg(long)]
        active: Option<bool>,
        #[command(flatten)]
        out: Output,
    },
    /// LocalQueues with their ClusterQueue and workload counts.
    #[command(alias = "localqueue", alias = "lq")]
    Localqueues {
        #[command(flatten)]
        ns: Namespaces,
        /// Only LocalQueues of this ClusterQueue.
        #[arg(short = 'c', long)]
        clusterqueue: Option<String>,
        #[command(flatten)]
        out: Output,
    },
    /// Workloads: pending (with position in queue and why they wait), admitted, finished.
    #[command(alias = "workload", alias = "wl")]
    Workloads {
        #[command(flatten)]
        ns: Namespaces,
        /// Only workloads of this ClusterQueue.
        #[arg(short = 'c', long)]
        clusterqueue: Option<String>,
        /// Only workloads of this LocalQueue.
        #[arg(short = 'q', long)]
        localqueue: Option<String>,
        /// Only workloads in these states (repeatable; default all).
        #[arg(long, value_enum)]
        status: Vec<WorkloadStatus>,
        #[command(flatten)]
        out: Output,
    },
    /// ResourceFlavors with their node labels, taints and topology.
    #[command(alias = "resourceflavor", alias = "rf")]
    Resourceflavors {
        #[command(flatten)]
        out: Output,
    },
}

/// A workload's state, as listed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkloadStatus {
    /// Waiting for quota or admission checks, or deactivated.
    Pending,
    /// Admitted (quota reserved and checks passed).
    Admitted,
    /// Finished.
    Finished,
}

/// `sluice create ...`.
#[derive(clap::Subcommand, Debug)]
pub enum CreateCommand {
    /// A ClusterQueue.
    #[command(alias = "cq")]
    Clusterqueue {
        /// Its name.
        name: String,
        /// The cohort it joins.
        #[arg(long)]
        cohort: Option<String>,
        /// StrictFIFO or BestEffortFIFO.
        #[arg(long, value_parser = ["StrictFIFO", "BestEffortFIFO"])]
        queuing_strategy: Option<String>,
        /// Namespaces whose LocalQueues may use it, as key=value[,key=value] labels (default: all).
        #[arg(long)]
        namespace_selector: Option<String>,
        /// Preemption to reclaim quota lent to the cohort: Never, LowerPriority or Any.
        #[arg(long, value_parser = ["Never", "LowerPriority", "Any"])]
        reclaim_within_cohort: Option<String>,
        /// Preemption within the ClusterQueue: Never, LowerPriority or LowerOrNewerEqualPriority.
        #[arg(long, value_parser = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"])]
        preemption_within_cluster_queue: Option<String>,
        /// FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...] (repeatable, one per flavor).
        #[arg(long)]
        nominal_quota: Vec<String>,
        /// FLAVOR:RESOURCE=QUANTITY[;...] borrowing limits (repeatable).
        #[arg(long)]
        borrowing_limit: Vec<String>,
        /// FLAVOR:RESOURCE=QUANTITY[;...] lending limits (repeatable).
        #[arg(long)]
        lending_limit: Vec<String>,
        #[command(flatten)]
        out: Output,
    },
    /// A LocalQueue.
    #[command(alias = "lq")]
    Localqueue {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// The ClusterQueue it feeds.
        #[arg(short = 'c', long)]
        clusterqueue: String,
        /// Create it even when the ClusterQueue does not exist (yet).
        #[arg(short = 'i', long)]
        ignore_unknown_cq: bool,
        #[command(flatten)]
        out: Output,
    },
    /// A ResourceFlavor.
    #[command(alias = "rf")]
    Resourceflavor {
        /// Its name.
        name: String,
        /// Node labels, key=value[,key=value].
        #[arg(long)]
        node_labels: Option<String>,
        /// Node taints, key[=value]:Effect[,...].
        #[arg(long)]
        node_taints: Option<String>,
        /// Tolerations, key[=value]:Effect[,...].
        #[arg(long)]
        tolerations: Option<String>,
        /// The Topology for topology-aware scheduling.
        #[arg(long)]
        topology_name: Option<String>,
        #[command(flatten)]
        out: Output,
    },
}

/// `sluice stop ...`.
#[derive(clap::Subcommand, Debug)]
pub enum StopCommand {
    /// Stop a ClusterQueue: stopPolicy HoldAndDrain, or Hold with --keep-already-running.
    #[command(alias = "cq")]
    Clusterqueue {
        /// Its name.
        name: String,
        /// Let admitted workloads run on (Hold) instead of evicting them (HoldAndDrain).
        #[arg(long)]
        keep_already_running: bool,
    },
    /// Stop a LocalQueue: stopPolicy HoldAndDrain, or Hold with --keep-already-running.
    #[command(alias = "lq")]
    Localqueue {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// Let admitted workloads run on (Hold) instead of evicting them (HoldAndDrain).
        #[arg(long)]
        keep_already_running: bool,
    },
    /// Deactivate a Workload (spec.active=false): it is evicted if admitted and not admitted again.
    #[command(alias = "wl")]
    Workload {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
}

/// `sluice resume ...`.
#[derive(clap::Subcommand, Debug)]
pub enum ResumeCommand {
    /// Resume a ClusterQueue (stopPolicy None).
    #[command(alias = "cq")]
    Clusterqueue {
        /// Its name.
        name: String,
    },
    /// Resume a LocalQueue (stopPolicy None).
    #[command(alias = "lq")]
    Localqueue {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Reactivate a Workload (spec.active=true).
    #[command(alias = "wl")]
    Workload {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
}

/// Runs a cluster subcommand against the current kubeconfig's cluster and returns what to print.
pub fn run(command: ClusterCommand) -> Result<String, CliError> {
    with_cluster(|client, now| async move { execute(&client, command, now).await })
}

/// Runs `f` on a one-thread runtime with a client for the current kubeconfig's cluster and the time now
/// (Unix seconds, for ages): the shell of every cluster command.
pub fn with_cluster<F, Fut>(f: F) -> Result<String, CliError>
where
    F: FnOnce(kube::Client, i64) -> Fut,
    Fut: std::future::Future<Output = Result<String, CliError>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = kube::Client::try_default().await.map_err(config_error)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        f(client, now).await
    })
}

/// Runs a cluster subcommand with `client`; `now` (Unix seconds) is for ages.
pub async fn execute(
    client: &kube::Client,
    command: ClusterCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        ClusterCommand::List(l) => list_command(client, l, now).await,
        ClusterCommand::Create(c) => create_command(client, c).await,
        ClusterCommand::Stop(s) => stop_command(client, s).await,
        ClusterCommand::Resume(r) => resume_command(client, r).await,
        ClusterCommand::Top(t) => super::top::execute(client, t).await,
    }
}

fn namespace_of(client: &kube::Client, ns: Option<String>) -> String {
    ns.unwrap_or_else(|| client.default_namespace().to_string())
}

fn namespaced<K>(client: &kube::Client, ns: &Namespaces) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    if ns.all_namespaces {
        Api::all(client.clone())
    } else {
        Api::namespaced(client.clone(), &namespace_of(client, ns.namespace.clone()))
    }
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn condition_true(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> Option<bool> {
    crate::status::condition(conditions, t).map(|c| c.status == "True")
}

fn stop_policy(p: Option<&api::StopPolicy>) -> &'static str {
    match p {
        Some(api::StopPolicy::Hold) => "Hold",
        Some(api::StopPolicy::HoldAndDrain) => "HoldAndDrain",
        _ => "None",
    }
}

/// GPUs a quantity list holds of nvidia.com/gpu, summed over flavors.
fn gpus<'a>(resources: impl Iterator<Item = (&'a str, &'a Quantity)>) -> i64 {
    resources
        .filter(|(r, _)| *r == GPU_RESOURCE)
        .filter_map(|(_, q)| sluice_sdk::quantity::resource_value(GPU_RESOURCE, q).ok())
        .sum()
}

async fn list_command(
    client: &kube::Client,
    command: ListCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        ListCommand::Clusterqueues { active, out } => {
            let mut items = Api::<api::ClusterQueue>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items;
            if let Some(want) = active {
                items.retain(|cq| {
                    let conds = cq
                        .status
                        .as_ref()
                        .map(|s| s.conditions.as_slice())
                        .unwrap_or_default();
                    condition_true(conds, "Active").unwrap_or(false) == want
                });
            }
            match out.output {
                OutputFormat::Table => Ok(cluster_queue_table(&items, now)),
                f => list(&items, f),
            }
        }
        ListCommand::Localqueues {
            ns,
            clusterqueue,
            out,
        } => {
            let mut items = namespaced::<api::LocalQueue>(client, &ns)
                .list(&ListParams::default())
                .await?
                .items;
            if let Some(cq) = &clusterqueue {
                items.retain(|lq| &lq.spec.cluster_queue == cq);
            }
            match out.output {
                OutputFormat::Table => Ok(local_queue_table(&items, ns.all_namespaces, now)),
                f => list(&items, f),
            }
        }
        ListCommand::Workloads {
            ns,
            clusterqueue,
            localqueue,
            status,
            out,
        } => {
            list_workloads(
                client,
                &ns,
                clusterqueue,
                localqueue,
                &status,
                out.output,
                now,
            )
            .await
        }
        ListCommand::Resourceflavors { out } => {
            let items = Api::<api::ResourceFlavor>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items;
            match out.output {
                OutputFormat::Table => Ok(resource_flavor_table(&items, now)),
                f => list(&items, f),
            }
        }
    }
}

/// The ClusterQueues table.
pub fn cluster_queue_table(items: &[api::ClusterQueue], now: i64) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|cq| {
            let st = cq.status.clone().unwrap_or_default();
            let nominal = gpus(
                cq.spec
                    .resource_groups
                    .iter()
                    .flat_map(|g| g.flavors.iter())
                    .flat_map(|f| f.resources.iter())
                    .map(|r| (r.name.as_str(), &r.nominal_quota)),
            );
            let used = gpus(
                st.flavors_usage
                    .iter()
                    .flat_map(|f| f.resources.iter())
                    .map(|r| (r.name.as_str(), &r.total)),
            );
            vec![
                name(&cq.metadata),
                if cq.spec.cohort_name.is_empty() {
                    "-".into()
                } else {
                    cq.spec.cohort_name.clone()
                },
                match cq.spec.queueing_strategy {
                    Some(api::QueueingStrategy::StrictFIFO) => "StrictFIFO".into(),
                    _ => "BestEffortFIFO".into(),
                },
                st.pending_workloads.to_string(),
                st.admitted_workloads.to_string(),
                match condition_true(&st.conditions, "Active") {
                    Some(true) => "true".into(),
                    Some(false) => "false".into(),
                    None => "unknown".into(),
                },
                stop_policy(cq.spec.stop_policy.as_ref()).into(),
                format!("{used}/{nominal}"),
                age(cq.metadata.creation_timestamp.as_ref(), now),
            ]
        })
        .collect();
    columns(
        &[
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING",
            "ADMITTED",
            "ACTIVE",
            "STOP POLICY",
            "GPUS USED/NOMINAL",
            "AGE",
        ],
        &rows,
    )
}

/// The LocalQueues table.
pub fn local_queue_table(items: &[api::LocalQueue], with_namespace: bool, now: i64) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|lq| {
            let st = lq.status.clone().unwrap_or_default();
            let mut row = vec![
                name(&lq.metadata),
                lq.spec.cluster_queue.clone(),
                st.pending_workloads.to_string(),
                st.admitted_workloads.to_string(),
                stop_policy(lq.spec.stop_policy.as_ref()).into(),
                age(lq.metadata.creation_timestamp.as_ref(), now),
            ];
            if with_namespace {
                row.insert(0, lq.metadata.namespace.clone().unwrap_or_default());
            }
            row
        })
        .collect();
    let mut header = vec![
        "NAME",
        "CLUSTERQUEUE",
        "PENDING",
        "ADMITTED",
        "STOP POLICY",
        "AGE",
    ];
    if with_namespace {
        header.insert(0, "NAMESPACE");
    }
    columns(&header, &rows)
}

/// The ResourceFlavors table.
pub fn resource_flavor_table(items: &[api::ResourceFlavor], now: i64) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|rf| {
            let labels: Vec<String> = rf
                .spec
                .node_labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let taints: Vec<String> = rf
                .spec
                .node_taints
                .iter()
                .map(|t| match &t.value {
                    Some(v) => format!("{}={v}:{}", t.key, t.effect),
                    None => format!("{}:{}", t.key, t.effect),
                })
                .collect();
            let dash = |v: Vec<String>| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    v.join(",")
                }
            };
            vec![
                name(&rf.metadata),
                dash(labels),
                dash(taints),
                rf.spec.topology_name.clone().unwrap_or_else(|| "-".into()),
                age(rf.metadata.creation_timestamp.as_ref(), now),
            ]
        })
        .collect();
    columns(
        &["NAME", "NODE LABELS", "NODE TAINTS", "TOPOLOGY", "AGE"],
        &rows,
    )
}

/// A workload's listed state and why it waits (empty when it does not).
pub fn workload_state(wl: &api::Workload) -> (WorkloadStatus, String) {
    let conds = wl
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let cond = |t| crate::status::condition(conds, t);
    if let Some(c) = cond("Finished").filter(|c| c.status == "True") {
        return (WorkloadStatus::Finished, c.reason.clone());
    }
    if cond("Admitted").is_some_and(|c| c.status == "True") {
        return (WorkloadStatus::Admitted, String::new());
    }
    if wl.spec.active == Some(false) {
        return (
            WorkloadStatus::Pending,
            "Deactivated (spec.active=false)".into(),
        );
    }
    if cond("QuotaReserved").is_some_and(|c| c.status == "True") {
        return (
            WorkloadStatus::Pending,
            "QuotaReserved: waiting for admission checks".into(),
        );
    }
    match cond("QuotaReserved") {
        Some(c) if !c.message.is_empty() => (
            WorkloadStatus::Pending,
            format!("{}: {}", c.reason, c.message),
        ),
        Some(c) => (WorkloadStatus::Pending, c.reason.clone()),
        None => (WorkloadStatus::Pending, "not yet attempted".into()),
    }
}

/// GPUs a workload asks for: pod count times each pod's nvidia.com/gpu (limits, else requests).
pub fn workload_gpus(wl: &api::Workload) -> i64 {
    wl.spec
        .pod_sets
        .iter()
        .map(|ps| {
            let per_pod: i64 = ps
                .template
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .filter_map(|c| {
                    let r = c.resources.as_ref()?;
                    let q = r
                        .limits
                        .as_ref()
                        .and_then(|l| l.get(GPU_RESOURCE))
                        .or_else(|| r.requests.as_ref().and_then(|l| l.get(GPU_RESOURCE)))?;
                    sluice_sdk::quantity::resource_value(GPU_RESOURCE, q).ok()
                })
                .sum();
            per_pod * i64::from(ps.count)
        })
        .sum()
}

/// Positions of a ClusterQueue's pending workloads from Kueue's visibility API, by namespace/name; empty when
/// the API is not served.
async fn positions(client: &kube::Client, cluster_queue: &str) -> BTreeMap<(String, String), i64> {
    let path = format!(
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{cluster_queue}/pendingworkloads"
    );
    let Ok(request) = http::Request::get(path).body(Vec::new()) else {
        return BTreeMap::new();
    };
    let summary: Value = match client.request(request).await {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!(cluster_queue, error = %e, "no positions from the visibility API");
            return BTreeMap::new();
        }
    };
    summary["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            Some((
                (
                    i["metadata"]["namespace"].as_str()?.to_string(),
                    i["metadata"]["name"].as_str()?.to_string(),
                ),
                i["positionInClusterQueue"].as_i64()?,
            ))
        })
        .collect()
}

async fn list_workloads(
    client: &kube::Client,
    ns: &Namespaces,
    clusterqueue: Option<String>,
    localqueue: Option<String>,
    status: &[WorkloadStatus],
    output: OutputFormat,
    now: i64,
) -> Result<String, CliError> {
    let mut items = namespaced::<api::Workload>(client, ns)
        .list(&ListParams::default())
        .await?
        .items;
    // A pending workload's ClusterQueue comes from its LocalQueue.
    let lqs: BTreeMap<(String, String), String> = namespaced::<api::LocalQueue>(client, ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|lq| {
            (
                (
                    lq.metadata.namespace.clone().unwrap_or_default(),
                    name(&lq.metadata),
                ),
                lq.spec.cluster_queue,
            )
        })
        .collect();
    let cq_of = |wl: &api::Workload| -> String {
        if let Some(a) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) {
            return a.cluster_queue.clone();
        }
        let key = (
            wl.metadata.namespace.clone().unwrap_or_default(),
            wl.spec.queue_name.clone(),
        );
        lqs.get(&key).cloned().unwrap_or_default()
    };
    items.retain(|wl| {
        clusterqueue.as_ref().is_none_or(|c| &cq_of(wl) == c)
            && localqueue.as_ref().is_none_or(|q| &wl.spec.queue_name == q)
            && (status.is_empty() || status.contains(&workload_state(wl).0))
    });
    if output != OutputFormat::Table {
        return list(&items, output);
    }
    let mut pending_cqs: Vec<String> = items
        .iter()
        .filter(|wl| workload_state(wl).0 == WorkloadStatus::Pending)
        .map(&cq_of)
        .filter(|c| !c.is_empty())
        .collect();
    pending_cqs.sort();
    pending_cqs.dedup();
    let mut position = BTreeMap::new();
    for cq in pending_cqs {
        position.extend(positions(client, &cq).await);
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|wl| {
            let (state, why) = workload_state(wl);
            let key = (
                wl.metadata.namespace.clone().unwrap_or_default(),
                name(&wl.metadata),
            );
            let mut row = vec![
                name(&wl.metadata),
                wl.spec.queue_name.clone(),
                match cq_of(wl) {
                    c if c.is_empty() => "-".into(),
                    c => c,
                },
                format!("{state:?}"),
                match (state, position.get(&key)) {
                    (WorkloadStatus::Pending, Some(p)) => p.to_string(),
                    _ => "-".into(),
                },
                workload_gpus(wl).to_string(),
                age(wl.metadata.creation_timestamp.as_ref(), now),
                if why.is_empty() { "-".into() } else { why },
            ];
            if ns.all_namespaces {
                row.insert(0, key.0);
            }
            row
        })
        .collect();
    let mut header = vec![
        "NAME",
        "LOCALQUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION",
        "GPUS",
        "AGE",
        "REASON",
    ];
    if ns.all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    Ok(columns(&header, &rows))
}

/// Parses key=value[,key=value].
fn key_values(flag: &'static str, text: &str) -> Result<BTreeMap<String, String>, CliError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(CliError::Flag {
                flag,
                value: text.to_string(),
                reason: format!("`{kv}` is not key=value"),
            }),
        })
        .collect()
}

/// Parses key[=value]:Effect[,...] into taint-like JSON objects.
fn taints(flag: &'static str, text: &str, toleration: bool) -> Result<Vec<Value>, CliError> {
    let bad = |reason: String| CliError::Flag {
        flag,
        value: text.to_string(),
        reason,
    };
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|t| {
            let (kv, effect) = t
                .rsplit_once(':')
                .ok_or_else(|| bad(format!("`{t}` has no :Effect")))?;
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
                return Err(bad(format!(
                    "effect `{effect}` is not NoSchedule, PreferNoSchedule or NoExecute"
                )));
            }
            let (key, value) = match kv.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (kv, None),
            };
            if key.is_empty() {
                return Err(bad(format!("`{t}` has no key")));
            }
            let mut o = json!({"key": key, "effect": effect});
            if let Some(v) = value {
                o["value"] = v.into();
            }
            if toleration {
                o["operator"] = if value.is_some() { "Equal" } else { "Exists" }.into();
            }
            Ok(o)
        })
        .collect()
}

/// Parses FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...] flags into flavor -> resource -> quantity.
fn quotas(
    flag: &'static str,
    values: &[String],
) -> Result<BTreeMap<String, Vec<(String, Quantity)>>, CliError> {
    let mut out: BTreeMap<String, Vec<(String, Quantity)>> = BTreeMap::new();
    for text in values {
        let bad = |reason: String| CliError::Flag {
            flag,
            value: text.clone(),
            reason,
        };
        let (flavor, rest) = text
            .split_once(':')
            .ok_or_else(|| bad("expected FLAVOR:RESOURCE=QUANTITY[;...]".into()))?;
        if flavor.is_empty() {
            return Err(bad("no flavor name".into()));
        }
        let entry = out.entry(flavor.to_string()).or_default();
        for pair in rest.split(';').filter(|p| !p.is_empty()) {
            let (res, q) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("`{pair}` is not RESOURCE=QUANTITY")))?;
            let quantity = Quantity(q.to_string());
            sluice_sdk::quantity::resource_value(res, &quantity)
                .map_err(|e| bad(format!("{res}: {e}")))?;
            if entry.iter().any(|(r, _)| r == res) {
                return Err(bad(format!("{flavor}:{res} given twice")));
            }
            entry.push((res.to_string(), quantity));
        }
    }
    Ok(out)
}

/// Resource groups from per-flavor quotas: flavors covering the same resources share a group, in flag order.
fn resource_groups(
    nominal: &BTreeMap<String, Vec<(String, Quantity)>>,
    borrowing: &BTreeMap<String, Vec<(String, Quantity)>>,
    lending: &BTreeMap<String, Vec<(String, Quantity)>>,
) -> Result<Vec<Value>, CliError> {
    for (flag, limits) in [("borrowing-limit", borrowing), ("lending-limit", lending)] {
        for (flavor, rs) in limits {
            for (r, _) in rs {
                let known = nominal
                    .get(flavor)
                    .is_some_and(|n| n.iter().any(|(nr, _)| nr == r));
                if !known {
                    return Err(CliError::Flag {
                        flag,
                        value: format!("{flavor}:{r}"),
                        reason: "no --nominal-quota for this flavor and resource".into(),
                    });
                }
            }
        }
    }
    let mut groups: Vec<(Vec<String>, Vec<Value>)> = Vec::new();
    for (flavor, rs) in nominal {
        let mut covered: Vec<String> = rs.iter().map(|(r, _)| r.clone()).collect();
        covered.sort();
        let limit = |m: &BTreeMap<String, Vec<(String, Quantity)>>, r: &str| {
            m.get(flavor)
                .and_then(|v| v.iter().find(|(lr, _)| lr == r))
                .map(|(_, q)| q.0.clone())
        };
        let resources: Vec<Value> = covered
            .iter()
            .map(|r| {
                let q = rs
                    .iter()
                    .find(|(nr, _)| nr == r)
                    .map(|(_, q)| q.0.clone())
                    .unwrap_or_default();
                let mut o = json!({"name": r, "nominalQuota": q});
                if let Some(b) = limit(borrowing, r) {
                    o["borrowingLimit"] = b.into();
                }
                if let Some(l) = limit(lending, r) {
                    o["lendingLimit"] = l.into();
                }
                o
            })
            .collect();
        let flavor_quotas = json!({"name": flavor, "resources": resources});
        match groups.iter_mut().find(|(c, _)| *c == covered) {
            Some((_, flavors)) => flavors.push(flavor_quotas),
            None => {
                if let Some(r) = covered
                    .iter()
                    .find(|r| groups.iter().any(|(c, _)| c.contains(r)))
                {
                    return Err(CliError::Flag {
                        flag: "nominal-quota",
                        value: flavor.clone(),
                        reason: format!(
                            "resource {r} is covered by flavors with a different set of resources; \
                             flavors sharing a resource must list the same resources"
                        ),
                    });
                }
                groups.push((covered, vec![flavor_quotas]));
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|(covered, flavors)| json!({"coveredResources": covered, "flavors": flavors}))
        .collect())
}

/// The ClusterQueue the create flags describe.
#[allow(clippy::too_many_arguments)]
pub fn build_cluster_queue(
    name: &str,
    cohort: Option<&str>,
    queuing_strategy: Option<&str>,
    namespace_selector: Option<&str>,
    reclaim_within_cohort: Option<&str>,
    preemption_within_cluster_queue: Option<&str>,
    nominal_quota: &[String],
    borrowing_limit: &[String],
    lending_limit: &[String],
) -> Result<api::ClusterQueue, CliError> {
    let nominal = quotas("nominal-quota", nominal_quota)?;
    let groups = resource_groups(
        &nominal,
        &quotas("borrowing-limit", borrowing_limit)?,
        &quotas("lending-limit", lending_limit)?,
    )?;
    let selector = match namespace_selector {
        Some(s) => serde_json::to_value(LabelSelector {
            match_labels: Some(key_values("namespace-selector", s)?),
            ..LabelSelector::default()
        })?,
        // Kueue: an empty selector matches every namespace.
        None => json!({}),
    };
    let mut spec = json!({"namespaceSelector": selector, "resourceGroups": groups});
    if let Some(c) = cohort {
        spec["cohortName"] = c.into();
    }
    if let Some(q) = queuing_strategy {
        spec["queueingStrategy"] = q.into();
    }
    let mut preemption = json!({});
    if let Some(p) = reclaim_within_cohort {
        preemption["reclaimWithinCohort"] = p.into();
    }
    if let Some(p) = preemption_within_cluster_queue {
        preemption["withinClusterQueue"] = p.into();
    }
    if preemption != json!({}) {
        spec["preemption"] = preemption;
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name}, "spec": spec,
    }))?)
}

fn created<T: Serialize>(
    kind: &str,
    name: &str,
    obj: &T,
    output: OutputFormat,
) -> Result<String, CliError> {
    match output {
        OutputFormat::Table => Ok(format!("{kind}.kueue.x-k8s.io/{name} created\n")),
        f => encode(&serde_json::to_value(obj)?, f),
    }
}

async fn create_command(client: &kube::Client, command: CreateCommand) -> Result<String, CliError> {
    let pp = PostParams::default();
    match command {
        CreateCommand::Clusterqueue {
            name,
            cohort,
            queuing_strategy,
            namespace_selector,
            reclaim_within_cohort,
            preemption_within_cluster_queue,
            nominal_quota,
            borrowing_limit,
            lending_limit,
            out,
        } => {
            let cq = build_cluster_queue(
                &name,
                cohort.as_deref(),
                queuing_strategy.as_deref(),
                namespace_selector.as_deref(),
                reclaim_within_cohort.as_deref(),
                preemption_within_cluster_queue.as_deref(),
                &nominal_quota,
                &borrowing_limit,
                &lending_limit,
            )?;
            let made = Api::<api::ClusterQueue>::all(client.clone())
                .create(&pp, &cq)
                .await?;
            created("clusterqueue", &name, &made, out.output)
        }
        CreateCommand::Localqueue {
            name,
            namespace,
            clusterqueue,
            ignore_unknown_cq,
            out,
        } => {
            if !ignore_unknown_cq {
                let cqs = Api::<api::ClusterQueue>::all(client.clone());
                if cqs.get_opt(&clusterqueue).await?.is_none() {
                    return Err(CliError::Flag {
                        flag: "clusterqueue",
                        value: clusterqueue,
                        reason: "no such ClusterQueue (pass --ignore-unknown-cq to create the LocalQueue anyway)".into(),
                    });
                }
            }
            let ns = namespace_of(client, namespace);
            let lq: api::LocalQueue = serde_json::from_value(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": clusterqueue},
            }))?;
            let made = Api::<api::LocalQueue>::namespaced(client.clone(), &ns)
                .create(&pp, &lq)
                .await?;
            created("localqueue", &name, &made, out.output)
        }
        CreateCommand::Resourceflavor {
            name,
            node_labels,
            node_taints,
            tolerations,
            topology_name,
            out,
        } => {
            let mut spec = json!({});
            if let Some(l) = node_labels {
                spec["nodeLabels"] = serde_json::to_value(key_values("node-labels", &l)?)?;
            }
            if let Some(t) = node_taints {
                spec["nodeTaints"] = taints("node-taints", &t, false)?.into();
            }
            if let Some(t) = tolerations {
                spec["tolerations"] = taints("tolerations", &t, true)?.into();
            }
            if let Some(t) = topology_name {
                spec["topologyName"] = t.into();
            }
            let rf: api::ResourceFlavor = serde_json::from_value(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": name}, "spec": spec,
            }))?;
            let made = Api::<api::ResourceFlavor>::all(client.clone())
                .create(&pp, &rf)
                .await?;
            created("resourceflavor", &name, &made, out.output)
        }
    }
}

async fn patch_merge<K>(api: &Api<K>, name: &str, patch: Value) -> Result<(), CliError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn stop_command(client: &kube::Client, command: StopCommand) -> Result<String, CliError> {
    let policy = |keep: bool| if keep { "Hold" } else { "HoldAndDrain" };
    match command {
        StopCommand::Clusterqueue {
            name,
            keep_already_running,
        } => {
            let p = policy(keep_already_running);
            let api = Api::<api::ClusterQueue>::all(client.clone());
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": p}})).await?;
            Ok(format!(
                "clusterqueue.kueue.x-k8s.io/{name} stopped ({p})\n"
            ))
        }
        StopCommand::Localqueue {
            name,
            namespace,
            keep_already_running,
        } => {
            let p = policy(keep_already_running);
            let api = Api::<api::LocalQueue>::namespaced(
                client.clone(),
                &namespace_of(client, namespace),
            );
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": p}})).await?;
            Ok(format!("localqueue.kueue.x-k8s.io/{name} stopped ({p})\n"))
        }
        StopCommand::Workload { name, namespace } => {
            let api =
                Api::<api::Workload>::namespaced(client.clone(), &namespace_of(client, namespace));
            patch_merge(&api, &name, json!({"spec": {"active": false}})).await?;
            Ok(format!(
                "workload.kueue.x-k8s.io/{name} stopped (deactivated)\n"
            ))
        }
    }
}

async fn resume_command(client: &kube::Client, command: ResumeCommand) -> Result<String, CliError> {
    match command {
        ResumeCommand::Clusterqueue { name } => {
            let api = Api::<api::ClusterQueue>::all(client.clone());
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": "None"}})).await?;
            Ok(format!("clusterqueue.kueue.x-k8s.io/{name} resumed\n"))
        }
        ResumeCommand::Localqueue { name, namespace } => {
            let api = Api::<api::LocalQueue>::namespaced(
                client.clone(),
                &namespace_of(client, namespace),
            );
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": "None"}})).await?;
            Ok(format!("localqueue.kueue.x-k8s.io/{name} resumed\n"))
        }
        ResumeCommand::Workload { name, namespace } => {
            let api =
                Api::<api::Workload>::namespaced(client.clone(), &namespace_of(client, namespace));
            patch_merge(&api, &name, json!({"spec": {"active": true}})).await?;
            Ok(format!("workload.kueue.x-k8s.io/{name} resumed\n"))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! The commands against recorded API server responses, served by a tower service in place of the cluster.

    use std::sync::{Arc, Mutex};

    use clap::Parser;

    use super::*;

    /// One API call the mock answered: method, path, content type, body.
    #[derive(Clone, Debug)]
    pub struct Call {
        pub method: String,
        pub path: String,
        pub content_type: String,
        pub body: Value,
    }

    type Calls = Arc<Mutex<Vec<Call>>>;

    /// A client on its own runtime, with the calls its mock API server answered.
    pub struct Mock {
        /// Runs the commands (the client's buffer task lives on it).
        pub runtime: tokio::runtime::Runtime,
        /// The client.
        pub client: kube::Client,
        /// Every call, in order.
        pub calls: Calls,
    }

    impl Mock {
        /// The calls so far.
        pub fn calls(&self) -> Vec<Call> {
            self.calls.lock().map(|c| c.clone()).unwrap_or_default()
        }
    }

    /// A client whose API server answers (method, path) from `routes`, 404 otherwise, echoing POST bodies.
    pub fn mock(routes: Vec<(&'static str, String, Value)>) -> Mock {
        let calls: Calls = Arc::default();
        let seen = calls.clone();
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let seen = seen.clone();
            let routes = routes.clone();
            async move {
                let method = req.method().to_string();
                let path = req.uri().path().to_string();
                let content_type = req
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let bytes = req.into_body().collect_bytes().await?;
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                seen.lock().map_err(|e| e.to_string())?.push(Call {
                    method: method.clone(),
                    path: path.clone(),
                    content_type,
                    body: body.clone(),
                });
                let found = routes.iter().find(|(m, p, _)| *m == method && *p == path);
                let (status, reply) = match (found, method.as_str()) {
                    (Some((_, _, v)), _) => (200, v.clone()),
                    (None, "POST") => (201, body),
                    (None, _) => (
                        404,
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "reason": "NotFound", "code": 404, "message": format!("{path} not found")}),
                    ),
                };
                let response = http::Response::builder()
                    .status(status)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(kube::client::Body::from(serde_json::to_vec(&reply)?))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("test runtime: {e}"));
        let client = {
            let _inside = runtime.enter();
            kube::Client::new(service, "team-a")
        };
        Mock {
            runtime,
            client,
            calls,
        }
    }

    #[derive(Parser)]
    struct Args {
        #[command(subcommand)]
        command: ClusterCommand,
    }

    /// 2026-01-01T03:00:00Z: three hours after the fixtures' creation times.
    pub const NOW: i64 = 1_767_236_400;

    /// Parses `args` as the `sluice` command line would and runs them against `client`.
    pub fn run_with(m: &Mock, args: &[&str]) -> Result<String, CliError> {
        let command = Args::try_parse_from(std::iter::once("sluice").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .command;
        m.runtime.block_on(execute(&m.client, command, NOW))
    }

    fn list(kind: &str, items: Vec<Value>) -> Value {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": format!("{kind}List"),
               "metadata": {"resourceVersion": "42"}, "items": items})
    }

    fn meta(name: &str, ns: Option<&str>) -> Value {
        let mut m = json!({"name": name, "uid": format!("uid-{name}"), "resourceVersion": "7",
                           "creationTimestamp": "2026-01-01T00:00:00Z"});
        if let Some(ns) = ns {
            m["namespace"] = ns.into();
        }
        m
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str) -> Value {
        json!({"type": t, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": "2026-01-01T01:00:00Z"})
    }

    pub fn cluster_queues() -> Value {
        list(
            "ClusterQueue",
            vec![
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta("team-a", None),
                    "spec": {"cohortName": "ai", "namespaceSelector": {}, "resourceGroups": [
                        {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                            {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                           {"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}]},
                    "status": {"pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
                        "conditions": [cond("Active", "True", "Ready", "Can admit new workloads")],
                        "flavorsUsage": [{"name": "h100", "resources": [
                            {"name": "cpu", "total": "8", "borrowed": "0"},
                            {"name": "nvidia.com/gpu", "total": "20", "borrowed": "4"}]}]}}),
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta("team-b", None),
                    "spec": {"namespaceSelector": {}, "queueingStrategy": "StrictFIFO", "stopPolicy": "Hold",
                             "resourceGroups": []},
                    "status": {"conditions": [cond("Active", "False", "Stopped", "Stopped by user")]}}),
            ],
        )
    }

    fn local_queues() -> Value {
        list(
            "LocalQueue",
            vec![
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": meta("main", Some("team-a")), "spec": {"clusterQueue": "team-a"},
                "status": {"pendingWorkloads": 2, "admittedWorkloads": 1, "reservingWorkloads": 1}}),
            ],
        )
    }

    fn workload(
        name: &str,
        gpus: i64,
        count: i64,
        conditions: Vec<Value>,
        admitted_in: Option<&str>,
    ) -> Value {
        let mut status = json!({"conditions": conditions});
        if let Some(cq) = admitted_in {
            status["admission"] = json!({"clusterQueue": cq, "podSetAssignments": [
                {"name": "main", "flavors": {"nvidia.com/gpu": "h100"}, "resourceUsage": {"nvidia.com/gpu": "8"},
                 "count": count}]});
        }
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta(name, Some("team-a")),
            "spec": {"queueName": "main", "podSets": [{"name": "main", "count": count, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}}]},
            "status": status})
    }

    fn workloads() -> Value {
        list(
            "Workload",
            vec![
                workload(
                    "job-train",
                    8,
                    1,
                    vec![
                        cond(
                            "QuotaReserved",
                            "True",
                            "QuotaReserved",
                            "Quota reserved in ClusterQueue team-a",
                        ),
                        cond("Admitted", "True", "Admitted", "The workload is admitted"),
                    ],
                    Some("team-a"),
                ),
                workload(
                    "job-big",
                    8,
                    2,
                    vec![cond(
                        "QuotaReserved",
                        "False",
                        "Pending",
                        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 12 more needed",
                    )],
                    None,
                ),
                workload("job-next", 4, 1, vec![], None),
                workload(
                    "job-done",
                    2,
                    1,
                    vec![cond(
                        "Finished",
                        "True",
                        "Succeeded",
                        "Job finished successfully",
                    )],
                    Some("team-a"),
                ),
            ],
        )
    }

    fn visibility() -> Value {
        json!({"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {},
            "items": [
                {"metadata": {"name": "job-big", "namespace": "team-a"}, "priority": 0, "localQueueName": "main",
                 "positionInClusterQueue": 0, "positionInLocalQueue": 0},
                {"metadata": {"name": "job-next", "namespace": "team-a"}, "priority": 0, "localQueueName": "main",
                 "positionInClusterQueue": 1, "positionInLocalQueue": 1}]})
    }

    const CQS: &str = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues";

    fn cluster_routes() -> Vec<(&'static str, String, Value)> {
        vec![
            ("GET", CQS.to_string(), cluster_queues()),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues".into(),
                local_queues(),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads".into(),
                workloads(),
            ),
            (
                "GET",
                "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/team-a/pendingworkloads"
                    .into(),
                visibility(),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/resourceflavors".into(),
                list(
                    "ResourceFlavor",
                    vec![
                        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": meta("h100", None), "spec": {"nodeLabels": {"nvidia.com/gpu.product": "H100"},
                    "nodeTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], "topologyName": "default"}}),
                    ],
                ),
            ),
        ]
    }

    /// The whitespace-separated cells of the table row starting with `first`.
    fn row(table: &str, first: &str) -> Vec<String> {
        table
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .find(|cells| cells.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first} in\n{table}"))
    }

    #[test]
    fn list_cluster_queues() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let t = run_with(&m, &["list", "clusterqueues"])?;
        assert!(t.starts_with("NAME"), "{t}");
        assert_eq!(
            row(&t, "team-a"),
            [
                "team-a",
                "ai",
                "BestEffortFIFO",
                "2",
                "1",
                "true",
                "None",
                "20/16",
                "3h"
            ]
        );
        assert_eq!(
            row(&t, "team-b"),
            [
                "team-b",
                "-",
                "StrictFIFO",
                "0",
                "0",
                "false",
                "Hold",
                "0/0",
                "3h"
            ]
        );
        let inactive = run_with(&m, &["list", "cq", "--active", "false"])?;
        assert!(!inactive.contains("team-a") && inactive.contains("team-b"));
        Ok(())
    }

    #[test]
    fn list_local_queues_and_flavors() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let t = run_with(&m, &["list", "localqueues"])?;
        assert_eq!(row(&t, "main"), ["main", "team-a", "2", "1", "None", "3h"]);
        assert!(m.calls()[0].path.contains("/namespaces/team-a/"));
        let t = run_with(&m, &["list", "resourceflavors"])?;
        assert_eq!(
            row(&t, "h100"),
            [
                "h100",
                "nvidia.com/gpu.product=H100",
                "nvidia.com/gpu:NoSchedule",
                "default",
                "3h"
            ]
        );
        Ok(())
    }

    #[test]
    fn list_workloads_with_position_and_reason() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let t = run_with(&m, &["list", "workloads"])?;
        assert_eq!(
            row(&t, "job-train")[..7],
            ["job-train", "main", "team-a", "Admitted", "-", "8", "3h"]
        );
        let big = row(&t, "job-big");
        assert_eq!(
            big[..7],
            ["job-big", "main", "team-a", "Pending", "0", "16", "3h"]
        );
        assert!(
            t.contains(
                "Pending: couldn't assign flavors to pod set main: insufficient unused quota"
            ),
            "{t}"
        );
        assert_eq!(
            row(&t, "job-next")[..5],
            ["job-next", "main", "team-a", "Pending", "1"]
        );
        assert!(row(&t, "job-next").join(" ").ends_with("not yet attempted"));
        assert_eq!(
            row(&t, "job-done")[..4],
            ["job-done", "main", "team-a", "Finished"]
        );
        // One visibility call, for the one ClusterQueue with pending workloads.
        let seen = m.calls();
        assert_eq!(
            seen.iter()
                .filter(|c| c.path.contains("pendingworkloads"))
                .count(),
            1
        );
        Ok(())
    }

    #[test]
    fn list_workloads_filtered_as_json() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let out = run_with(&m, &["list", "wl", "--status", "pending", "-o", "json"])?;
        let v: Value = serde_json::from_str(&out)?;
        assert_eq!(v["kind"], "List");
        let names: Vec<&str> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["job-big", "job-next"]);
        let yaml = run_with(&m, &["list", "wl", "--status", "finished", "-o", "yaml"])?;
        assert!(yaml.contains("name: job-done") && !yaml.contains("job-big"));
        Ok(())
    }

    #[test]
    fn positions_are_optional() -> Result<(), CliError> {
        // No visibility API: positions show as "-" and listing still works.
        let routes = cluster_routes()
            .into_iter()
            .filter(|(_, p, _)| !p.contains("visibility"))
            .collect();
        let m = mock(routes);
        let t = run_with(&m, &["list", "workloads"])?;
        assert_eq!(row(&t, "job-big")[4], "-");
        Ok(())
    }

    #[test]
    fn create_cluster_queue_from_flags() -> Result<(), CliError> {
        let m = mock(vec![]);
        let out = run_with(
            &m,
            &[
                "create",
                "clusterqueue",
                "team-c",
                "--cohort",
                "ai",
                "--queuing-strategy",
                "StrictFIFO",
                "--namespace-selector",
                "team=c",
                "--reclaim-within-cohort",
                "Any",
                "--nominal-quota",
                "h100:nvidia.com/gpu=16;cpu=64",
                "--nominal-quota",
                "a100:cpu=32;nvidia.com/gpu=8",
                "--borrowing-limit",
                "h100:nvidia.com/gpu=8",
                "--lending-limit",
                "a100:nvidia.com/gpu=4",
            ],
        )?;
        assert_eq!(out, "clusterqueue.kueue.x-k8s.io/team-c created\n");
        let seen = m.calls();
        assert_eq!(
            (seen[0].method.as_str(), seen[0].path.as_str()),
            ("POST", CQS)
        );
        assert_eq!(
            seen[0].body["spec"],
            json!({"cohortName": "ai", "queueingStrategy": "StrictFIFO",
                "namespaceSelector": {"matchLabels": {"team": "c"}},
                "preemption": {"reclaimWithinCohort": "Any"},
                "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                    {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": "32"},
                                                   {"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "4"}]},
                    {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                   {"name": "nvidia.com/gpu", "nominalQuota": "16", "borrowingLimit": "8"}]}]}]})
        );
        Ok(())
    }

    #[test]
    fn bad_create_flags_name_the_flag() {
        let m = mock(vec![]);
        let err = run_with(
            &m,
            &[
                "create",
                "cq",
                "x",
                "--nominal-quota",
                "h100:nvidia.com/gpu=16",
                "--borrowing-limit",
                "h100:cpu=4",
            ],
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("flag --borrowing-limit"),
            "{err}"
        );
        let err = run_with(
            &m,
            &[
                "create",
                "cq",
                "x",
                "--nominal-quota",
                "h100:nvidia.com/gpu=lots",
            ],
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("flag --nominal-quota"), "{err}");
        let err = run_with(
            &m,
            &[
                "create",
                "cq",
                "x",
                "--nominal-quota",
                "h100:cpu=1",
                "--nominal-quota",
                "a100:cpu=1;memory=1Gi",
            ],
        )
        .unwrap_err();
        assert!(err.to_string().contains("same resources"), "{err}");
        let err =
            run_with(&m, &["create", "rf", "x", "--node-taints", "gpu:Sometimes"]).unwrap_err();
        assert!(err.to_string().starts_with("flag --node-taints"), "{err}");
        assert!(m.calls().is_empty(), "nothing is sent for bad flags");
    }

    #[test]
    fn create_local_queue_checks_its_cluster_queue() -> Result<(), CliError> {
        let m = mock(vec![]);
        let err = run_with(&m, &["create", "localqueue", "main", "-c", "missing"]).unwrap_err();
        assert!(err.to_string().contains("no such ClusterQueue"), "{err}");
        let out = run_with(
            &m,
            &[
                "create",
                "lq",
                "main",
                "-n",
                "team-b",
                "-c",
                "missing",
                "--ignore-unknown-cq",
            ],
        )?;
        assert_eq!(out, "localqueue.kueue.x-k8s.io/main created\n");
        let seen = m.calls();
        let post = seen
            .iter()
            .find(|c| c.method == "POST")
            .ok_or_else(|| CliError::Config("no POST".into()))?;
        assert_eq!(
            post.path,
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-b/localqueues"
        );
        assert_eq!(post.body["spec"], json!({"clusterQueue": "missing"}));
        Ok(())
    }

    #[test]
    fn create_resource_flavor_from_flags() -> Result<(), CliError> {
        let m = mock(vec![]);
        run_with(
            &m,
            &[
                "create",
                "resourceflavor",
                "h100",
                "--node-labels",
                "nvidia.com/gpu.product=H100",
                "--node-taints",
                "nvidia.com/gpu=present:NoSchedule",
                "--tolerations",
                "nvidia.com/gpu:NoSchedule",
                "--topology-name",
                "default",
            ],
        )?;
        let seen = m.calls();
        assert_eq!(
            seen[0].body["spec"],
            json!({"nodeLabels": {"nvidia.com/gpu.product": "H100"},
                   "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                   "topologyName": "default"})
        );
        Ok(())
    }

    #[test]
    fn stop_and_resume_patch_the_stop_policy_and_active() -> Result<(), CliError> {
        let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta("team-a", None), "spec": {}});
        let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": meta("main", Some("team-a")), "spec": {"clusterQueue": "team-a"}});
        let wl = workload("job-big", 8, 1, vec![], None);
        let m = mock(vec![
            ("PATCH", format!("{CQS}/team-a"), cq),
            (
                "PATCH",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/main".into(),
                lq,
            ),
            (
                "PATCH",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/job-big".into(),
                wl,
            ),
        ]);
        let cases: [(&[&str], Value); 6] = [
            (
                &["stop", "clusterqueue", "team-a"],
                json!({"spec": {"stopPolicy": "HoldAndDrain"}}),
            ),
            (
                &["stop", "cq", "team-a", "--keep-already-running"],
                json!({"spec": {"stopPolicy": "Hold"}}),
            ),
            (
                &["resume", "clusterqueue", "team-a"],
                json!({"spec": {"stopPolicy": "None"}}),
            ),
            (
                &["stop", "localqueue", "main", "--keep-already-running"],
                json!({"spec": {"stopPolicy": "Hold"}}),
            ),
            (
                &["stop", "workload", "job-big"],
                json!({"spec": {"active": false}}),
            ),
            (
                &["resume", "wl", "job-big", "-n", "team-a"],
                json!({"spec": {"active": true}}),
            ),
        ];
        for (args, body) in &cases {
            run_with(&m, args)?;
            let seen = m.calls();
            let last = seen
                .last()
                .ok_or_else(|| CliError::Config("no call".into()))?;
            assert_eq!(last.method, "PATCH", "{args:?}");
            assert_eq!(
                last.content_type, "application/merge-patch+json",
                "{args:?}"
            );
            assert_eq!(&last.body, body, "{args:?}");
        }
        // A missing object is the API server's NotFound, reported as an error.
        let err = run_with(&m, &["stop", "cq", "nope"]).unwrap_err();
        assert!(matches!(err, CliError::Kube(_)), "{err}");
        Ok(())
    }
}
