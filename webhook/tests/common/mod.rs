//! Test helpers: certificates made with rcgen, a webhook server on 127.0.0.1:0 and a rustls + hyper client.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use sluice_webhook::server::{self, Running, ServerOptions};
use sluice_webhook::tls::ReloadingCert;
use sluice_webhook::{Hooks, InMemoryLocalQueues, PolicyModuleValidator};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A self-signed certificate for `localhost` and 127.0.0.1 in PEM, with its DER for clients to trust.
pub struct TestCert {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

/// Makes a fresh certificate.
pub fn make_cert() -> TestCert {
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("rcgen");
    TestCert {
        cert_pem: ck.cert.pem(),
        key_pem: ck.signing_key.serialize_pem(),
        der: ck.cert.der().clone(),
    }
}

/// A directory for one test's certificate files, removed on drop.
pub struct CertDir {
    pub dir: PathBuf,
}

impl CertDir {
    pub fn new(cert: &TestCert) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-webhook-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let d = Self { dir };
        d.write(cert);
        d
    }

    pub fn cert_path(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    pub fn key_path(&self) -> PathBuf {
        self.dir.join("tls.key")
    }

    /// Replaces the files the way a Secret volume update does: new files renamed over the old ones.
    pub fn write(&self, cert: &TestCert) {
        let tmp_c = self.dir.join("tls.crt.tmp");
        let tmp_k = self.dir.join("tls.key.tmp");
        std::fs::write(&tmp_c, &cert.cert_pem).expect("write cert");
        std::fs::write(&tmp_k, &cert.key_pem).expect("write key");
        std::fs::rename(&tmp_c, self.cert_path()).expect("rename cert");
        std::fs::rename(&tmp_k, self.key_path()).expect("rename key");
    }
}

impl Drop for CertDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server under test.
pub struct TestServer {
    pub running: Running,
    pub certs: CertDir,
    pub cert: TestCert,
    pub queues: Arc<InMemoryLocalQueues>,
    /// The Trainer runtimes the TrainJob hooks see (none until a test adds some).
    pub runtimes: Arc<sluice_webhook::InMemoryTrainingRuntimes>,
}

impl TestServer {
    pub fn addr(&self) -> SocketAddr {
        self.running.addr
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr(), std::slice::from_ref(&self.cert.der)).await
    }
}

/// Starts a server with LocalQueues `default` in namespace `team` and `q` in `team`, and `policy` if given.
pub async fn start(policy: Option<Arc<dyn PolicyModuleValidator>>) -> TestServer {
    start_with(policy, ServerOptions::default()).await
}

pub async fn start_with(
    policy: Option<Arc<dyn PolicyModuleValidator>>,
    options: ServerOptions,
) -> TestServer {
    let cert = make_cert();
    let certs = CertDir::new(&cert);
    let queues = Arc::new(InMemoryLocalQueues::new([
        ("team", "default"),
        ("team", "q"),
        ("other", "q"),
    ]));
    let runtimes = Arc::new(sluice_webhook::InMemoryTrainingRuntimes::default());
    let mut hooks = Hooks::new(queues.clone());
    hooks.runtimes = runtimes.clone();
    hooks.policy = policy;
    let reloading = ReloadingCert::load(&certs.cert_path(), &certs.key_path()).expect("load cert");
    let running = server::start(
        "127.0.0.1:0".parse().expect("addr"),
        Some("127.0.0.1:0".parse().expect("addr")),
        hooks,
        reloading,
        options,
    )
    .await
    .expect("server starts");
    TestServer {
        running,
        certs,
        cert,
        queues,
        runtimes,
    }
}

/// An HTTPS client on one keep-alive connection.
pub struct Client {
    sender: SendRequest<Full<Bytes>>,
    /// The certificate the server presented.
    pub peer_cert: Vec<u8>,
}

/// A client TLS configuration trusting `roots`.
pub fn client_config(roots: &[CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(store)
        .with_no_client_auth();
    // Like the API server's Go client: no session resumption, so every connection shows the served certificate.
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

impl Client {
    pub async fn connect(addr: SocketAddr, roots: &[CertificateDer<'static>]) -> Self {
        Self::try_connect(addr, client_config(roots))
            .await
            .expect("connect")
    }

    pub async fn try_connect(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Self, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let tls = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let peer_cert = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(Self { sender, peer_cert })
    }

    /// POSTs `body` to `path`: the status and the body.
    pub async fn post(&mut self, path: &str, body: Vec<u8>) -> Result<(u16, Bytes), String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let req = hyper::Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = tokio::time::timeout(Duration::from_secs(10), self.sender.send_request(req))
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, bytes))
    }

    /// POSTs an AdmissionReview and returns its `response`.
    pub async fn review(&mut self, path: &str, review: &Value) -> Value {
        let (status, body) = self
            .post(path, serde_json::to_vec(review).expect("json"))
            .await
            .expect("request");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let doc: Value = serde_json::from_slice(&body).expect("json answer");
        assert_eq!(doc["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(doc["kind"], "AdmissionReview");
        doc["response"].clone()
    }
}

/// An AdmissionReview for `object` (and `old` on update).
pub fn admission_review(operation: &str, object: &Value, old: Option<&Value>) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f0e8a54-1d2b-4c6e-9a7f-0b1c2d3e4f50",
            "kind": {"group": group, "version": version, "kind": object["kind"]},
            "resource": {"group": group, "version": version, "resource": "things"},
            "namespace": object["metadata"]["namespace"],
            "name": object["metadata"]["name"],
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin"},
            "object": if operation == "DELETE" { Value::Null } else { object.clone() },
            "oldObject": old.cloned().unwrap_or(Value::Null),
            "dryRun": false,
        }
    })
}

/// Applies a response's JSONPatch to `object`.
pub fn apply_patch(object: &Value, response: &Value) -> Value {
    use base64::Engine;
    let mut out = object.clone();
    if let Some(p) = response["patch"].as_str() {
        assert_eq!(response["patchType"], "JSONPatch");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(p)
            .expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&raw).expect("patch");
        json_patch::patch(&mut out, &patch).expect("patch applies");
    }
    out
}

/// A batch/v1 Job.
pub fn job(namespace: &str, labels: Value, annotations: Value, spec: Value) -> Value {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}});
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace, "uid": "6c2f0f7a-2b33-4b9b-8f3e-2d0d1a7c9e11",
            "labels": labels, "annotations": annotations},
        "spec": spec,
    })
}
