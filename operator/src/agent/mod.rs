//! `sluice node-agent`: discovers the node's GPUs (NVML, or a fake file), derives the shared
//! topology model and publishes it as a `NodeGpuTopology` plus GPU Feature Discovery's node labels.
//!
//! Reading is behind [`GpuSource`] so the derivation (islands, cliques, health) is tested with
//! fake NVML data; [`nvml`] is the real source, which loads `libnvidia-ml` at run time.

pub mod derive;
pub mod health;
pub mod metrics;
pub mod nvml;
pub mod podresources;
pub mod publish;
pub mod raw;
pub mod usage;

use std::path::PathBuf;
use std::time::Duration;

use sluice_sdk::sluice::node_gpu_topology::{
    GpuHolder, GpuUse, NodeGpuTopology, NodeGpuTopologySpec, NodeGpuTopologyStatus,
};
use sluice_sdk::topology::NodeGpus;

pub use derive::{derive, derive_with, gfd_labels};
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
    /// Serve the GPUs' metrics (dcgm-exporter's names and labels) at `http://ADDR/metrics`, e.g. ":9400".
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Publish nothing to the cluster (no API server needed): only read the GPUs and serve `--metrics-listen`.
    #[arg(long)]
    pub no_publish: bool,
    /// The kubelet's pod-resources socket, read to label each GPU's metrics and use with the pod holding it;
    /// when it is absent the agent attributes nothing.
    #[arg(long, default_value = podresources::DEFAULT_SOCKET)]
    pub pod_resources_socket: PathBuf,
    /// Health rules (YAML: fatalXids, degradingXids, thermalReads, correctedEccPerHour, pendingRepair);
    /// the defaults are in docs/node-agent.md.
    #[arg(long, value_name = "FILE")]
    pub health_rules: Option<PathBuf>,
}

/// Parses a listen address; ":9400" means every interface.
fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .map_err(|e| format!("listen address {s:?}: {e} (expected HOST:PORT or :PORT)"))
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
    /// The command line asks for nothing to do, or for something impossible.
    #[error("{0}")]
    Usage(String),
    /// The health rules file cannot be read.
    #[error("--health-rules {0}")]
    Rules(String),
    /// The metrics endpoint cannot listen.
    #[error("--metrics-listen {addr}: {message}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        message: String,
    },
}

/// A way to read the node's GPUs.
pub trait GpuSource {
    /// Reads every GPU once.
    fn read(&mut self) -> Result<RawNode, AgentError>;
    /// Notified when something happened that should be read at once (an XID event) rather than at
    /// the next interval; None when the source has no events.
    fn wake(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }
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

/// Runs the agent: with `--print`, one discovery printed to stdout; otherwise reading every `interval` (at
/// once after an XID event), publishing what changed (unless `--no-publish`) and serving the metrics
/// (with `--metrics-listen`), until SIGTERM or Ctrl-C.
pub fn run(args: &AgentArgs) -> Result<String, AgentError> {
    if args.no_publish && args.metrics_listen.is_none() && !args.print {
        return Err(AgentError::Usage(
            "--no-publish without --metrics-listen leaves the agent nothing to do: add --metrics-listen :9400"
                .into(),
        ));
    }
    let rules = match &args.health_rules {
        Some(p) => health::HealthRules::load(p).map_err(AgentError::Rules)?,
        None => health::HealthRules::default(),
    };
    let source: Box<dyn GpuSource + Send> = match &args.fake {
        Some(p) => Box::new(FakeSource { path: p.clone() }),
        None => Box::new(nvml::NvmlSource::open()?),
    };
    let mut agent = Agent::new(&args.node_name, source, rules);
    if args.print {
        let model = agent.read_model()?.0;
        return render(&args.node_name, &model).map_err(|e| AgentError::Fake {
            path: "<output>".into(),
            message: e.to_string(),
        });
    }
    if args.pod_resources_socket.exists() {
        agent.pod_resources = Some(podresources::PodResourcesClient::new(
            &args.pod_resources_socket,
            Duration::from_secs(10),
        ));
    } else {
        tracing::info!(
            socket = %args.pod_resources_socket.display(),
            "no pod-resources socket: GPUs are not attributed to pods"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AgentError::Runtime(e.to_string()))?;
    runtime.block_on(async {
        if let Some(addr) = args.metrics_listen {
            let listener =
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| AgentError::Listen {
                        addr,
                        message: e.to_string(),
                    })?;
            tracing::info!(%addr, "serving GPU metrics at /metrics");
            let text = agent.metrics.clone();
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, metrics::router(text)).await {
                    tracing::error!(error = %e, "the metrics endpoint stopped");
                }
            });
        }
        if !args.no_publish {
            let client = kube::Client::try_default()
                .await
                .map_err(|e| AgentError::Client(e.to_string()))?;
            agent.publisher = Some(publish::Publisher::new(
                client,
                &args.node_name,
                args.resync,
            ));
        }
        agent.run(args.interval, shutdown_signal()).await;
        Ok::<_, AgentError>(())
    })?;
    Ok(String::new())
}

/// The agent's state between reads: its GPU source, the health rules' history, where it publishes, and
/// the metrics text the endpoint serves.
pub struct Agent {
    node: String,
    source: Box<dyn GpuSource + Send>,
    tracker: health::HealthTracker,
    started: std::time::Instant,
    /// Where the GPUs' holders are read; None attributes nothing.
    pub pod_resources: Option<podresources::PodResourcesClient>,
    /// Where the model and status go; None publishes nothing (`--no-publish`).
    pub publisher: Option<publish::Publisher>,
    /// The exposition text of the last read, served at `/metrics`.
    pub metrics: metrics::MetricsText,
    /// Each GPU's health reasons at the last read, to log changes once.
    reasons: std::collections::BTreeMap<String, Vec<String>>,
    /// Each GPU's utilisation history, published in the status.
    usage: usage::UsageHistory,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// What one [`Agent::tick`] did.
#[derive(Debug, Clone, Default)]
pub struct Tick {
    /// The model derived from the read.
    pub model: NodeGpus,
    /// The status (use and holders) from the read.
    pub status: NodeGpuTopologyStatus,
    /// What was sent to the API server.
    pub sent: publish::Sent,
}

impl Agent {
    /// An agent for `node` reading `source`, judging health by `rules`; it neither publishes nor
    /// attributes until [`Agent::publisher`] and [`Agent::pod_resources`] are set.
    pub fn new(node: &str, source: Box<dyn GpuSource + Send>, rules: health::HealthRules) -> Self {
        Self {
            node: node.to_string(),
            source,
            tracker: health::HealthTracker::new(rules),
            started: std::time::Instant::now(),
            pod_resources: None,
            publisher: None,
            metrics: metrics::MetricsText::default(),
            reasons: Default::default(),
            usage: Default::default(),
        }
    }

    /// Reads the GPUs once, judges their health with the rules' history, and derives the model.
    pub fn read_model(&mut self) -> Result<(NodeGpus, RawNode), AgentError> {
        let raw = self.source.read()?;
        let now = self.started.elapsed().as_secs_f64();
        let health = self.tracker.evaluate(&raw, now);
        for g in &raw.gpus {
            let new = health.get(&g.uuid).cloned().unwrap_or_default();
            let old = self.reasons.insert(g.uuid.clone(), new.clone());
            if old.as_ref().unwrap_or(&Vec::new()) != &new {
                if new.is_empty() {
                    tracing::info!(node = %self.node, gpu = g.index, uuid = %g.uuid, "GPU healthy again");
                } else {
                    tracing::warn!(node = %self.node, gpu = g.index, uuid = %g.uuid, reasons = ?new, "GPU marked unhealthy");
                }
            }
        }
        let model = derive_with(&raw, &health);
        model.validate(&self.node)?;
        Ok((model, raw))
    }

    /// One round: read, attribute, refresh the metrics, publish what changed. A failed read is an
    /// error (the caller keeps the last published state); a failed pod-resources call or write is
    /// logged and the round goes on.
    pub async fn tick(&mut self) -> Result<Tick, AgentError> {
        let (model, raw) = self.read_model()?;
        let holders = match &self.pod_resources {
            Some(client) => match client.list().await {
                Ok(resp) => podresources::holders(&resp),
                Err(e) => {
                    tracing::warn!(node = %self.node, error = %e, "cannot read which pods hold the GPUs");
                    metrics::Holders::new()
                }
            },
            None => metrics::Holders::new(),
        };
        self.metrics
            .set(metrics::render(&self.node, &raw, &model, &holders));
        let at = chrono::Utc::now();
        self.usage.record(&raw, at);
        let status = gpu_use(&raw, &holders, &self.usage, at);
        let mut sent = publish::Sent::default();
        if let Some(p) = &mut self.publisher {
            let now = std::time::Instant::now();
            match p.publish(&model, now).await {
                Ok(s) => {
                    sent = s;
                    match p.publish_status(&status, now).await {
                        Ok(s) => sent.status = s,
                        Err(e) => {
                            tracing::warn!(error = %e, "publishing the GPUs' use failed; retrying on the next tick")
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "publishing failed; retrying on the next tick")
                }
            }
        }
        Ok(Tick {
            model,
            status,
            sent,
        })
    }

    /// Ticks every `interval`, and at once when the source signals an event, until `shutdown` completes.
    /// The agent never exits on a transient error: it logs and tries again on the next tick.
    pub async fn run(
        &mut self,
        interval: Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let wake = self.source.wake();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => {
                    tracing::info!(node = %self.node, "node agent stopping");
                    return;
                }
                _ = ticks.tick() => {}
                _ = async { match &wake { Some(n) => n.notified().await, None => std::future::pending().await } } => {
                    tracing::info!(node = %self.node, "GPU event: reading at once");
                }
            }
            match self.tick().await {
                Ok(t) if t.sent.topology || t.sent.labels || t.sent.status => tracing::info!(
                    node = %self.node,
                    gpus = t.model.gpus.len(),
                    unhealthy = t.model.gpus.iter().filter(|g| !g.health.healthy).count(),
                    topology = t.sent.topology,
                    labels = t.sent.labels,
                    status = t.sent.status,
                    "published"
                ),
                Ok(_) => tracing::debug!(node = %self.node, "unchanged"),
                Err(e) => {
                    tracing::warn!(node = %self.node, error = %e, "reading the GPUs failed; keeping the last published model")
                }
            }
        }
    }
}

/// The status the agent publishes as of `at`: each GPU's use, its utilisation history and the containers
/// holding it or its MIG instances.
pub fn gpu_use(
    raw: &RawNode,
    holders: &metrics::Holders,
    history: &usage::UsageHistory,
    at: chrono::DateTime<chrono::Utc>,
) -> NodeGpuTopologyStatus {
    let gpus = raw
        .gpus
        .iter()
        .map(|g| {
            // The GPU's own holders, then its MIG instances'.
            let held_by = |device: &str, mig_uuid: Option<String>| {
                holders
                    .get(device)
                    .into_iter()
                    .flatten()
                    .map(move |h| GpuHolder {
                        namespace: h.namespace.clone(),
                        pod: h.pod.clone(),
                        container: h.container.clone(),
                        mig_uuid: mig_uuid.clone(),
                    })
            };
            let mut held: Vec<GpuHolder> = held_by(&g.uuid, None).collect();
            for m in &g.mig {
                held.extend(held_by(&m.uuid, Some(m.uuid.clone())));
            }
            held.sort();
            let (sampled_since, peaks) = history.published(&g.uuid);
            GpuUse {
                index: g.index,
                uuid: g.uuid.clone(),
                utilization: g.telemetry.gpu_util,
                memory_used_mib: g.telemetry.fb_used_mib,
                holders: held,
                sampled_since,
                peaks,
            }
        })
        .collect();
    NodeGpuTopologyStatus {
        observed_at: Some(usage::rfc3339(at)),
        gpus,
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
