//! Which pod holds which GPU: the kubelet's pod-resources API (`v1.PodResourcesLister/List` over its
//! local unix socket), as dcgm-exporter reads it. The messages are declared here with prost's derive
//! (only the fields the agent reads; protobuf skips the others), so no protoc is needed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Uri};

use super::metrics::{Holder, Holders};

/// The kubelet's socket, where the kubelet serves pod-resources.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// The gRPC method the agent calls.
pub const LIST_PATH: &str = "/v1.PodResourcesLister/List";

/// `ListPodResourcesRequest` (no fields).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

/// `ListPodResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    /// One entry per pod on the node.
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// `PodResources`: a pod's containers and what they were allocated.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    /// Pod name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Pod namespace.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// Containers.
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// `ContainerResources`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    /// Container name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Devices the device plugins allocated to it.
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
}

/// `ContainerDevices`: the devices of one extended resource.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    /// Resource name, e.g. `nvidia.com/gpu` or `nvidia.com/mig-1g.10gb`.
    #[prost(string, tag = "1")]
    pub resource_name: String,
    /// Device ids: GPU UUIDs (`GPU-...`, with `::N` for a time-sliced replica) or MIG UUIDs.
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}

/// Why the pod-resources list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    /// The socket could not be reached.
    #[error("pod-resources socket {path}: {message}")]
    Connect {
        /// Socket path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The kubelet answered with an error.
    #[error("pod-resources List at {path}: {status}")]
    Call {
        /// Socket path.
        path: String,
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
}

/// Whether a resource name is one dcgm-exporter attributes: whole GPUs or MIG instances.
pub fn is_gpu_resource(name: &str) -> bool {
    name == "nvidia.com/gpu" || name.starts_with("nvidia.com/mig-")
}

/// The holders of each GPU or MIG device in a List answer; a time-sliced replica id
/// (`GPU-...::2`) counts for its GPU.
pub fn holders(resp: &ListPodResourcesResponse) -> Holders {
    let mut out = Holders::new();
    for pod in &resp.pod_resources {
        for c in &pod.containers {
            for d in c
                .devices
                .iter()
                .filter(|d| is_gpu_resource(&d.resource_name))
            {
                for id in &d.device_ids {
                    let device = id.split("::").next().unwrap_or(id).to_string();
                    let h = Holder {
                        pod: pod.name.clone(),
                        namespace: pod.namespace.clone(),
                        container: c.name.clone(),
                    };
                    let list = out.entry(device).or_default();
                    if !list.contains(&h) {
                        list.push(h);
                    }
                }
            }
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

/// Reads the kubelet's pod-resources list over its unix socket.
#[derive(Debug, Clone)]
pub struct PodResourcesClient {
    path: PathBuf,
    timeout: Duration,
}

impl PodResourcesClient {
    /// A client of the socket at `path`; each call gives up after `timeout`.
    pub fn new(path: impl Into<PathBuf>, timeout: Duration) -> Self {
        Self {
            path: path.into(),
            timeout,
        }
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Calls `List` once (a fresh connection: the kubelet restarts, and a call every interval is cheap).
    pub async fn list(&self) -> Result<ListPodResourcesResponse, PodResourcesError> {
        let shown = self.path.display().to_string();
        let connect = |message: String| PodResourcesError::Connect {
            path: shown.clone(),
            message,
        };
        let path = self.path.clone();
        // The URI is required by the API but unused: the connector dials the socket.
        let channel = Endpoint::from_static("http://localhost")
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(&path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
            .await
            .map_err(|e| connect(error_chain(&e)))?;
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.map_err(|e| connect(error_chain(&e)))?;
        let codec =
            tonic_prost::ProstCodec::<ListPodResourcesRequest, ListPodResourcesResponse>::default();
        let path = http::uri::PathAndQuery::from_static(LIST_PATH);
        grpc.unary(tonic::Request::new(ListPodResourcesRequest {}), path, codec)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| PodResourcesError::Call {
                path: shown.clone(),
                status: Box::new(status),
            })
    }
}

/// An error with its sources, joined (tonic's transport errors hide the cause one level down).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}

/// A pod-resources server answering `List` with a fixed response, on a unix socket: the kubelet's
/// side, for tests and for trying the agent without a kubelet.
#[cfg(feature = "testing")]
pub mod fake {
    use std::convert::Infallible;
    use std::future::Future;
    use std::path::Path;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use tonic::body::Body;
    use tonic::server::NamedService;

    use super::{LIST_PATH, ListPodResourcesRequest, ListPodResourcesResponse};

    /// The answer the fake kubelet gives; change it between calls.
    pub type Answer = Arc<Mutex<ListPodResourcesResponse>>;

    #[derive(Clone)]
    struct Lister(Answer);

    impl NamedService for Lister {
        const NAME: &'static str = "v1.PodResourcesLister";
    }

    struct List(Answer);

    impl tonic::server::UnaryService<ListPodResourcesRequest> for List {
        type Response = ListPodResourcesResponse;
        type Future = std::future::Ready<Result<tonic::Response<Self::Response>, tonic::Status>>;

        fn call(&mut self, _: tonic::Request<ListPodResourcesRequest>) -> Self::Future {
            let answer = self.0.lock().map(|a| a.clone()).unwrap_or_default();
            std::future::ready(Ok(tonic::Response::new(answer)))
        }
    }

    impl tower::Service<http::Request<Body>> for Lister {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<Body>) -> Self::Future {
            let answer = self.0.clone();
            Box::pin(async move {
                if req.uri().path() != LIST_PATH {
                    return Ok(
                        tonic::Status::unimplemented(req.uri().path().to_string()).into_http()
                    );
                }
                let codec = tonic_prost::ProstCodec::default();
                let mut grpc = tonic::server::Grpc::new(codec);
                Ok(grpc.unary(List(answer), req).await)
            })
        }
    }

    /// Serves `answer` on a new unix socket at `path` until the returned task is aborted.
    pub fn serve(path: &Path, answer: Answer) -> std::io::Result<tokio::task::JoinHandle<()>> {
        let listener = tokio::net::UnixListener::bind(path)?;
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        Ok(tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(Lister(answer))
                .serve_with_incoming(incoming)
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "fake pod-resources server stopped");
            }
        }))
    }
}
