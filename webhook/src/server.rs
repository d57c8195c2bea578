//! The HTTPS server: axum routes for every hook, served over rustls with a certificate that can change under it,
//! plus a plain-HTTP listener for `/metrics`, `/healthz` and `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;

use crate::convert;
use crate::hooks::{CONVERT_PATH, Hook, Hooks, ROUTES};
use crate::metrics::Metrics;
use crate::tls::ReloadingCert;

/// The default cap on request bodies (3 MiB, the API server's own limit on object size is about 3 MiB too).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Limits and timings of the server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Largest accepted request body; larger ones get HTTP 413.
    pub max_body_bytes: usize,
    /// Time allowed for a whole request (body read and answer); the API server itself gives up after 10 s.
    pub request_timeout: Duration,
    /// Time allowed for a client to send request headers (slow clients are cut off).
    pub header_read_timeout: Duration,
    /// Time allowed for a TLS handshake.
    pub handshake_timeout: Duration,
    /// How often the certificate files are checked for changes.
    pub cert_reload_interval: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            cert_reload_interval: Duration::from_secs(2),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listener could not be bound.
    // Causes are part of each message rather than `source`s, so that chained printing does not repeat them.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The TLS configuration was refused by rustls.
    #[error("TLS configuration: {0}")]
    Tls(rustls::Error),
    /// The certificate could not be loaded.
    #[error("serving certificate: {0}")]
    Cert(crate::tls::TlsError),
    /// No Kubernetes client could be built to watch LocalQueues.
    #[error("cannot reach the Kubernetes API to watch LocalQueues: {0}")]
    Kube(kube::Error),
    /// The Tokio runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// What the handlers share.
struct App {
    hooks: Hooks,
    metrics: Arc<Metrics>,
}

/// A running server.
pub struct Running {
    /// The HTTPS address actually bound (useful with port 0).
    pub addr: SocketAddr,
    /// The plain-HTTP metrics address, when one was requested.
    pub metrics_addr: Option<SocketAddr>,
    /// The metrics (for tests and embedding).
    pub metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting connections and waits for the accept loops to end (open connections are dropped with the
    /// runtime).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Starts the HTTPS server on `listen` (and the metrics server on `metrics_listen`), reloading `cert` as its files
/// change.
pub async fn start(
    listen: SocketAddr,
    metrics_listen: Option<SocketAddr>,
    hooks: Hooks,
    cert: Arc<ReloadingCert>,
    options: ServerOptions,
) -> Result<Running, ServeError> {
    let metrics = Arc::new(Metrics::new());
    let tls = cert.server_config().map_err(ServeError::Tls)?;
    cert.watch(options.cert_reload_interval, metrics.clone());
    let app = Arc::new(App {
        hooks,
        metrics: metrics.clone(),
    });
    let (stop, stopped) = watch::channel(false);

    let listener = TcpListener::bind(listen)
        .await
        .map_err(|error| ServeError::Bind {
            addr: listen,
            error,
        })?;
    let addr = listener.local_addr().map_err(|error| ServeError::Bind {
        addr: listen,
        error,
    })?;
    let mut tasks = vec![tokio::spawn(accept_loop(
        listener,
        TlsAcceptor::from(tls),
        webhook_router(app.clone(), &options),
        options.clone(),
        stopped.clone(),
    ))];

    let mut metrics_addr = None;
    if let Some(m) = metrics_listen {
        let listener = TcpListener::bind(m)
            .await
            .map_err(|error| ServeError::Bind { addr: m, error })?;
        metrics_addr = Some(
            listener
                .local_addr()
                .map_err(|error| ServeError::Bind { addr: m, error })?,
        );
        let router = metrics_router(app);
        let mut stopped = stopped;
        tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, router)
                .with_graceful_shutdown(async move { wait_stop(&mut stopped).await });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "metrics server failed");
            }
        }));
    }
    tracing::info!(%addr, ?metrics_addr, "webhook serving");
    Ok(Running {
        addr,
        metrics_addr,
        metrics,
        stop,
        tasks,
    })
}

async fn wait_stop(stopped: &mut watch::Receiver<bool>) {
    while !*stopped.borrow() {
        if stopped.changed().await.is_err() {
            return;
        }
    }
}

/// The router of the HTTPS listener: one POST route per hook, and `/convert`.
fn webhook_router(app: Arc<App>, options: &ServerOptions) -> Router {
    let mut router = Router::new();
    for &(path, hook) in ROUTES {
        router = router.route(
            path,
            post(move |State(app): State<Arc<App>>, body: Bytes| async move {
                // A review may be slow (a PolicyModule's compiles its module): on a blocking thread, so the
                // async workers keep serving other reviews and probes meanwhile.
                tokio::task::spawn_blocking(move || admission(&app, path, hook, &body))
                    .await
                    .unwrap_or_else(|e| {
                        tracing::error!(path, error = %e, "review failed");
                        (StatusCode::INTERNAL_SERVER_ERROR, "the review failed").into_response()
                    })
            }),
        );
    }
    router
        .route(
            CONVERT_PATH,
            post(|State(app): State<Arc<App>>, body: Bytes| async move { conversion(&app, &body) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .with_state(app)
        .layer(DefaultBodyLimit::max(options.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            options.request_timeout,
        ))
        .layer(CatchPanicLayer::new())
}

/// The router of the plain-HTTP listener.
fn metrics_router(app: Arc<App>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(app): State<Arc<App>>| async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    app.metrics.encode(),
                )
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(app): State<Arc<App>>| async move {
                // The certificate is loaded before the server starts; what remains are the LocalQueue and Namespace
                // indexes.
                if !app.hooks.queues.synced() {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "LocalQueue index not synced yet",
                    )
                } else if !app.hooks.namespaces.synced() {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "Namespace index not synced yet",
                    )
                } else {
                    (StatusCode::OK, "ok")
                }
            }),
        )
        .with_state(app)
        .layer(CatchPanicLayer::new())
}

fn json_response(review: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        review.to_string(),
    )
        .into_response()
}

fn admission(app: &App, path: &'static str, hook: Hook, body: &[u8]) -> Response {
    let started = Instant::now();
    match app.hooks.answer(hook, body) {
        Ok(answer) => {
            let result = answer.verdict.result_label();
            if !answer.verdict.allowed {
                tracing::debug!(path, message = %answer.verdict.message, "request refused");
            }
            let response = json_response(&answer.review);
            app.metrics.observe(path, result, started.elapsed());
            response
        }
        Err(e) => {
            app.metrics.observe(path, "rejected", started.elapsed());
            (StatusCode::BAD_REQUEST, e.to_string()).into_response()
        }
    }
}

fn conversion(app: &App, body: &[u8]) -> Response {
    let started = Instant::now();
    match convert::convert(body) {
        Ok(c) => {
            let result = if c.success { "converted" } else { "failed" };
            let response = json_response(&c.review);
            app.metrics.observe(CONVERT_PATH, result, started.elapsed());
            response
        }
        Err(e) => {
            app.metrics
                .observe(CONVERT_PATH, "rejected", started.elapsed());
            (StatusCode::BAD_REQUEST, e.to_string()).into_response()
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    options: ServerOptions,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = wait_stop(&mut stopped) => return,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        let options = options.clone();
        tokio::spawn(serve_connection(tcp, peer, acceptor, router, options));
    }
}

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    router: Router,
    options: ServerOptions,
) {
    let tls = match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let service = TowerToHyperService::new(router);
    if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Waits for SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
