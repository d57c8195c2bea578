//! Subcommands of the `sluice` binary that talk to a cluster or to policy modules; `main.rs` only dispatches.
//! This file holds what they share: the error, the output and namespace flags, the cluster client shell and the
//! dispatch of the cluster subcommands ([`kueue`]'s queue commands and [`top`]).

use kube::Api;

use crate::output::{OutputError, OutputFormat};

pub mod kueue;
pub mod policy;
#[cfg(test)]
pub(crate) mod test_support;
pub mod top;

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
    Output(OutputError),
    /// The async runtime could not start.
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
    /// The cluster lacks what the command reads.
    #[error("{0}")]
    Missing(String),
}

// Each variant's message already carries its cause's text, so the causes are not also chained as `source`s
// (a chain printer such as anyhow's `{:#}` would print them twice).
impl From<kube::Error> for CliError {
    fn from(e: kube::Error) -> Self {
        Self::Kube(e)
    }
}

impl From<OutputError> for CliError {
    fn from(e: OutputError) -> Self {
        Self::Output(e)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        Self::Output(e.into())
    }
}

impl From<serde_yaml::Error> for CliError {
    fn from(e: serde_yaml::Error) -> Self {
        Self::Output(e.into())
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
    List(kueue::ListCommand),
    /// Create a ClusterQueue, LocalQueue or ResourceFlavor from flags.
    #[command(subcommand)]
    Create(kueue::CreateCommand),
    /// Stop a ClusterQueue or LocalQueue (no new admissions; drains unless --keep-already-running) or
    /// deactivate a Workload.
    #[command(subcommand)]
    Stop(kueue::StopCommand),
    /// Resume a stopped ClusterQueue or LocalQueue, or reactivate a Workload.
    #[command(subcommand)]
    Resume(kueue::ResumeCommand),
    /// GPU use per node and per ClusterQueue.
    #[command(subcommand)]
    Top(top::TopCommand),
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
        ClusterCommand::List(l) => kueue::list_command(client, l, now).await,
        ClusterCommand::Create(c) => kueue::create_command(client, c).await,
        ClusterCommand::Stop(s) => kueue::stop_command(client, s).await,
        ClusterCommand::Resume(r) => kueue::resume_command(client, r).await,
        ClusterCommand::Top(t) => top::execute(client, t).await,
    }
}

pub(crate) fn namespace_of(client: &kube::Client, ns: Option<String>) -> String {
    ns.unwrap_or_else(|| client.default_namespace().to_string())
}

pub(crate) fn namespaced<K>(client: &kube::Client, ns: &Namespaces) -> Api<K>
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
