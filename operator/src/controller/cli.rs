//! `sluice operator`: flags, and wiring of the client, leader election, HTTP servers and controllers.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{ControllerError, Operator, OperatorConfig};
use crate::leader::{LeaderElector, Leadership, LeaseConfig};

/// Flags of `sluice operator`.
#[derive(clap::Args, Debug, Clone)]
pub struct OperatorArgs {
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// Address of Kueue's visibility API.
    #[arg(long, default_value = "0.0.0.0:8082")]
    pub visibility_listen: SocketAddr,
    /// Elect a leader among replicas through a Lease (only the leader admits).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, default_value = "sluice-operator")]
    pub lease_name: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE, else "default").
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// A Kueue Configuration file (fairSharing, waitForPodsReady, manageJobsWithoutQueueName, integrations).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Write Kueue's detailed pending reasons (UnadmittedWorkloadsObservability) instead of "Pending".
    #[arg(long)]
    pub detailed_pending_reasons: bool,
    /// Default deadline of one PolicyModule call in milliseconds (a module's spec.deadlineMs overrides it).
    #[arg(long, default_value_t = 5)]
    pub policy_deadline_ms: u64,
    /// Failed PolicyModule calls in a row after which the module is Degraded (the built-in decides).
    #[arg(long, default_value_t = 5)]
    pub policy_degrade_after: u32,
    /// API writes of one round kept in flight at once (new Workloads, a cycle's admissions and pending reasons,
    /// the Jobs they start); 1 writes them one after another.
    #[arg(long, default_value_t = 16)]
    pub writes_in_flight: usize,
    /// Evict the workloads on a GPU its node agent reports degrading (thermal slowdown, a rising corrected-ECC
    /// rate, a repair waiting for a reset), with their checkpoint grace, so they move before it fails. Without
    /// it they keep running there and only new placements avoid the GPU.
    #[arg(long)]
    pub evict_on_degraded_gpus: bool,
}

fn identity() -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("sluice-{}", std::process::id()))
}

/// Runs the operator until it fails or leadership is lost (the process should then restart).
pub async fn run_operator_command(args: OperatorArgs) -> Result<(), ControllerError> {
    let mut config = match &args.config {
        Some(p) => OperatorConfig::from_file(p)?,
        None => OperatorConfig::default(),
    };
    config.detailed_pending_reasons |= args.detailed_pending_reasons;
    if args.policy_deadline_ms == 0 || args.policy_degrade_after == 0 || args.writes_in_flight == 0
    {
        return Err(ControllerError::Usage(
            "--policy-deadline-ms, --policy-degrade-after and --writes-in-flight must be at least 1"
                .to_string(),
        ));
    }
    config.writes_in_flight = args.writes_in_flight;
    config.engine.evict_on_degraded_gpus = args.evict_on_degraded_gpus;
    config.policy_host.default_deadline = std::time::Duration::from_millis(args.policy_deadline_ms);
    config.policy_degrade_after = args.policy_degrade_after;
    config.identity = identity();
    let client = kube::Client::try_default().await?;
    let (leadership, elector) = if args.leader_elect {
        let ns = args
            .lease_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "default".to_string());
        let (e, l) = LeaderElector::new(
            client.clone(),
            LeaseConfig::new(&args.lease_name, &ns, &config.identity),
        );
        (l, Some(e))
    } else {
        (Leadership::always(), None)
    };
    let operator = Operator::new(client, config, leadership);
    let metrics_server = crate::telemetry::serve_health_and_metrics(
        args.metrics_listen,
        operator.metrics.clone(),
        operator.health.clone(),
    );
    let visibility_server =
        crate::visibility::serve(args.visibility_listen, operator.snapshot.clone());
    let elect = async {
        match elector {
            Some(e) => e.run().await.map_err(ControllerError::from),
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = operator.run() => r,
        r = elect => r,
        r = metrics_server => r.map_err(|error| ControllerError::Io { what: format!("serving metrics on {}", args.metrics_listen), error }),
        r = visibility_server => r.map_err(|error| ControllerError::Io { what: format!("serving visibility on {}", args.visibility_listen), error }),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}
