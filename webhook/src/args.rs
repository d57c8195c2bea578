//! `sluice webhook`: its flags and the entry point that serves until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::hooks::{HookConfig, Hooks};
use crate::namespaces::{InMemoryNamespaces, NamespaceIndex, ReflectorNamespaces};
use crate::policy::PolicyModuleValidator;
use crate::queues::{InMemoryLocalQueues, LocalQueueIndex, ReflectorLocalQueues};
use crate::runtimes::{InMemoryTrainingRuntimes, ReflectorTrainingRuntimes, TrainingRuntimeIndex};
use crate::server::{self, DEFAULT_MAX_BODY_BYTES, ServeError, ServerOptions};
use crate::tls::ReloadingCert;

/// Flags of `sluice webhook`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// PEM file with the serving certificate chain (reloaded when it changes).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: PathBuf,
    /// PEM file with the serving private key (reloaded when it changes).
    #[arg(long, value_name = "FILE")]
    pub tls_key: PathBuf,
    /// Address of the HTTPS listener.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:9443")]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP listener for /metrics, /healthz and /readyz.
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8081")]
    pub metrics_listen: SocketAddr,
    /// Largest accepted request body in bytes; larger bodies get HTTP 413.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// How often to check the certificate files for changes, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 2)]
    pub cert_reload_seconds: u64,
    /// Namespaces left out besides those the Configuration's managedJobsNamespaceSelector leaves out (whose
    /// default, without --config, leaves out kube-system and kueue-system); comma-separated.
    #[arg(long, value_name = "NS,...", value_delimiter = ',')]
    pub unmanaged_namespaces: Vec<String>,
    /// Suspend jobs without a queue name too (Kueue's manageJobsWithoutQueueName; also on when the Configuration
    /// sets it).
    #[arg(long)]
    pub manage_jobs_without_queue_name: bool,
    /// Do not watch LocalQueues on the API server (for running without a cluster): the `default` LocalQueue rule
    /// then never applies.
    #[arg(long)]
    pub no_local_queue_watch: bool,
}

/// Serves the webhook on a new multi-threaded Tokio runtime until SIGTERM or Ctrl-C (the entry point of
/// `sluice webhook`): `config` is what the Kueue Configuration says, the flags apply over it; `policy` checks
/// PolicyModules when given.
pub fn serve(
    args: ServeArgs,
    config: HookConfig,
    policy: Option<Arc<dyn PolicyModuleValidator>>,
) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(run(args, config, policy))
}

/// Serves the webhook with these flags over `config` until SIGTERM or Ctrl-C; `policy` checks PolicyModules when
/// given.
pub async fn run(
    args: ServeArgs,
    config: HookConfig,
    policy: Option<Arc<dyn PolicyModuleValidator>>,
) -> Result<(), ServeError> {
    let cert = ReloadingCert::load(&args.tls_cert, &args.tls_key).map_err(ServeError::Cert)?;
    type Indexes = (
        Arc<dyn LocalQueueIndex>,
        Arc<dyn TrainingRuntimeIndex>,
        Arc<dyn NamespaceIndex>,
    );
    let (queues, runtimes, namespaces): Indexes = if args.no_local_queue_watch {
        (
            Arc::new(InMemoryLocalQueues::default()),
            Arc::new(InMemoryTrainingRuntimes::default()),
            Arc::new(InMemoryNamespaces::default()),
        )
    } else {
        let client = kube::Client::try_default()
            .await
            .map_err(ServeError::Kube)?;
        (
            Arc::new(ReflectorLocalQueues::start(client.clone())),
            Arc::new(ReflectorTrainingRuntimes::start(client.clone())),
            Arc::new(ReflectorNamespaces::start(client)),
        )
    };
    let hooks = Hooks {
        queues,
        runtimes,
        namespaces,
        policy,
        config: HookConfig {
            unmanaged_namespaces: args.unmanaged_namespaces.clone(),
            manage_jobs_without_queue_name: args.manage_jobs_without_queue_name
                || config.manage_jobs_without_queue_name,
            ..config
        },
    };
    let options = ServerOptions {
        max_body_bytes: args.max_body_bytes,
        cert_reload_interval: Duration::from_secs(args.cert_reload_seconds.max(1)),
        ..ServerOptions::default()
    };
    let running =
        server::start(args.listen, Some(args.metrics_listen), hooks, cert, options).await?;
    server::shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await;
    Ok(())
}
