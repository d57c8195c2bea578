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
    /// Print the NodeGpuTopology and node labels it would publish, once, instead of publishing.
    #[arg(long)]
    pub print: bool,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let ms = crate::sim::parse_duration(s).map_err(|e| e.to_string())?;
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
    /// Publishing is not available in this build.
    #[error(
        "publishing to the API server is not built into this version of the agent; use --print (and publish the output with kubectl apply --server-side)"
    )]
    NoPublisher,
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
pub fn discover(node: &str, source: &mut dyn GpuSource) -> Result<NodeGpus, AgentError> {
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
/// `interval` and on change.
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
    Err(AgentError::NoPublisher)
}
