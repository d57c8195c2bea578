//! `sluice node-agent`: discovers the node's GPUs (NVML, or a fake file), derives the shared
//! topology model and publishes it as a `NodeGpuTopology` plus GPU Feature Discovery's node labels.
//!
//! Reading is behind [`GpuSource`] so the derivation (islands, cliques, health) is tested with
//! fake NVML data; [`nvml`] is the real source, which loads `libnvidia-ml` at run time.

pub mod derive;
pub mod nvml;
pub mod publish;
pub mod raw;

use std::path::PathBuf;
use std::time::Duration;

use sluice_sdk::sluice::node_gpu_topology::{NodeGpuTopology, NodeGpuTopologySpec};
use sluice_sdk::topology::NodeGpus;

pub use derive::{FATAL_XIDS, derive, gfd_labels};
pub use raw::RawNode;

/// Arguments of `sluice node-agent`.
#[derive(clap::Args, Debug, Clone)]
pub struct AgentArgs {
    /// Name of the node the agent runs on.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// How often to read the GPUs again (e.g. "30s", "5m").
    #[arg(long, default_value = "30s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Read the GPUs from this YAML file (NVML-shaped data) instead of the driver.
    #[arg(long)]
    pub fake: Option<PathBuf>,
    /// Send the NodeGpuTopology and the labels again after this long even when nothing changed (repairs an
    /// object deleted or edited by someone else).
    #[arg(long, default_value = "10m", value_parser = parse_interval)]
    pub resync: Duration,
    /// Print the NodeGpuTopology and node labels it would publish, once, instead of publishing.
    #[arg(long)]
    pub print: bool,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let ms = crate::duration::parse_duration(s).map_err(|e| e.to_string())?;
    if ms <= 0 {
        return Err(format!("interval {s:?} must be positive"));
    }
    Ok(Duration::from_millis(ms.unsigned_abs()))
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No NVIDIA driver library or no GPU.
    #[error(
        "NVML is not available ({0}): this node has no NVIDIA driver or GPU; run the agent only on GPU nodes, or use --fake FILE"
    )]
    NoNvml(String),
    /// An NVML query failed.
    #[error("NVML: {what}: {message}")]
    Nvml {
        /// The query.
        what: String,
        /// The library's message.
        message: String,
    },
    /// The fake file cannot be read or parsed.
    #[error("{path}: {message}")]
    Fake {
        /// File.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The derived model is inconsistent.
    #[error(transparent)]
    Topology(#[from] sluice_sdk::topology::TopologyError),
    /// No Kubernetes client could be configured (no in-cluster service account, no kubeconfig).
    #[error(
        "cannot reach the API server: {0} (run the agent in the cluster with its ServiceAccount, or set KUBECONFIG; --print needs neither)"
    )]
    Client(String),
    /// The async runtime could not start.
    #[error("starting the runtime: {0}")]
    Runtime(String),
}

/// A way to read the node's GPUs.
pub trait GpuSource {
    /// Reads every GPU once.
    fn read(&mut self) -> Result<RawNode, AgentError>;
}

/// Reads NVML-shaped data from a YAML file (re-read on every call, so edits show up as changes).
#[derive(Debug, Clone)]
pub struct FakeSource {
    /// The file.
    pub path: PathBuf,
}

impl GpuSource for FakeSource {
    fn read(&mut self) -> Result<RawNode, AgentError> {
        let fail = |message: String| AgentError::Fake {
            path: self.path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(&self.path).map_err(|e| fail(e.to_string()))?;
        let de = serde_yaml::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de)
            .map_err(|e| fail(format!("field `{}`: {}", e.path(), e.inner())))
    }
}

/// The object the agent publishes for `node`.
pub fn node_gpu_topology(node: &str, model: NodeGpus) -> NodeGpuTopology {
    NodeGpuTopology::new(
        node,
        NodeGpuTopologySpec {
            node_name: node.to_string(),
            gpus: model,
        },
    )
}

/// One discovery: read, derive, validate.
pub fn discover<S: GpuSource + ?Sized>(node: &str, source: &mut S) -> Result<NodeGpus, AgentError> {
    let model = derive(&source.read()?);
    model.validate(node)?;
    Ok(model)
}

/// The `--print` output: the NodeGpuTopology YAML, then the node labels as a YAML comment block.
pub fn render(node: &str, model: &NodeGpus) -> Result<String, serde_yaml::Error> {
    let labels = gfd_labels(model);
    let mut out = serde_yaml::to_string(&node_gpu_topology(node, model.clone()))?;
    out.push_str("# node labels:\n");
    for (k, v) in labels {
        out.push_str(&format!("#   {k}: {v}\n"));
    }
    Ok(out)
}

/// Runs the agent: with `--print`, one discovery printed to stdout; otherwise publishing every
/// `interval` (and again after `resync`) until SIGTERM or Ctrl-C.
pub fn run(args: &AgentArgs) -> Result<String, AgentError> {
    let mut source: Box<dyn GpuSource> = match &args.fake {
        Some(p) => Box::new(FakeSource { path: p.clone() }),
        None => Box::new(nvml::NvmlSource::open()?),
    };
    let model = discover(&args.node_name, source.as_mut())?;
    if args.print {
        return render(&args.node_name, &model).map_err(|e| AgentError::Fake {
            path: "<output>".into(),
            message: e.to_string(),
        });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AgentError::Runtime(e.to_string()))?;
    runtime.block_on(async {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| AgentError::Client(e.to_string()))?;
        let mut publisher = publish::Publisher::new(client, &args.node_name, args.resync);
        publish_loop(
            &args.node_name,
            source.as_mut(),
            &mut publisher,
            args.interval,
            Some(model),
            shutdown_signal(),
        )
        .await;
        Ok::<_, AgentError>(())
    })?;
    Ok(String::new())
}

/// The agent's loop: every `interval`, reads and derives the node's model and publishes what changed. A failed
/// read or write is logged and retried on the next tick (the agent never exits on a transient error); the
/// loop ends when `shutdown` completes. `first` is a model already discovered, published at once.
pub async fn publish_loop<S: GpuSource + ?Sized>(
    node: &str,
    source: &mut S,
    publisher: &mut publish::Publisher,
    interval: Duration,
    mut first: Option<NodeGpus>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => {
                tracing::info!(node, "node agent stopping");
                return;
            }
            _ = ticks.tick() => {}
        }
        let model = match first.take() {
            Some(m) => m,
            None => match discover(node, source) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(node, error = %e, "reading the GPUs failed; keeping the last published model");
                    continue;
                }
            },
        };
        match publisher.publish(&model, std::time::Instant::now()).await {
            Ok(sent) if sent.topology || sent.labels => tracing::info!(
                node,
                gpus = model.gpus.len(),
                topology = sent.topology,
                labels = sent.labels,
                "published"
            ),
            Ok(_) => tracing::debug!(node, "unchanged"),
            Err(e) => tracing::warn!(error = %e, "publishing failed; retrying on the next tick"),
        }
    }
}

/// Completes on SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = term => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
