//! The LeaderWorkerSet controller (`sigs.k8s.io/lws`, built by `tests/lws/build` into `target/lws`) as a process on
//! the test control plane: its webhooks served on 127.0.0.1 with the plane's webhook certificate and registered by
//! URL (LWS's pod webhook labels each pod with its group and worker index), its own certificate management off.
//! kube-controller-manager runs the StatefulSets it makes.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::plane::{ControlPlane, repo_root, required};
use super::sluice::{free_port, start_with_retries};
use super::support::b64;

/// The running LWS controller manager, killed when dropped.
pub struct LwsController {
    child: Child,
    log: PathBuf,
}

impl Drop for LwsController {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LwsController {
    /// Whether `tests/lws/build` built it.
    pub fn built() -> bool {
        repo_root().join("target/lws/bin/lws-manager").exists()
    }

    /// Starts the controller on `plane` (whose LWS CRD is installed) and registers its webhooks; panics with its
    /// log when it does not come up. None (the test is skipped, saying so) when it was not built and SLUICE_E2E is
    /// not `require`.
    pub fn start(plane: &ControlPlane) -> Option<LwsController> {
        let dir = repo_root().join("target/lws");
        let bin = dir.join("bin/lws-manager");
        if !Self::built() {
            let msg = format!("{} is missing: run tests/lws/build first", bin.display());
            assert!(!required(), "{msg}");
            eprintln!("skipped: {msg}");
            return None;
        }
        Some(start_with_retries("the LWS controller", || {
            Self::try_start(plane, &dir, &bin)
        }))
    }

    /// One start: ports, the controller, its webhooks pointed at it; Err (with its log) when it exited or never
    /// came up.
    fn try_start(
        plane: &ControlPlane,
        dir: &std::path::Path,
        bin: &std::path::Path,
    ) -> Result<LwsController, String> {
        let cert_dir = plane.file("lws-certs");
        std::fs::create_dir_all(&cert_dir).expect("cert dir");
        std::fs::copy(plane.file("webhook.crt"), cert_dir.join("tls.crt")).expect("tls.crt");
        std::fs::copy(plane.file("webhook.key"), cert_dir.join("tls.key")).expect("tls.key");
        let port = free_port();
        let health: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let metrics: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let config = plane.file("lws-config.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\nleaderElection:\n  leaderElect: false\n\
                 internalCertManagement:\n  enable: false\nwebhook:\n  port: {port}\n  host: 127.0.0.1\n  certDir: {}\n\
                 metrics:\n  bindAddress: \"{metrics}\"\nhealth:\n  healthProbeBindAddress: \"{health}\"\n",
                cert_dir.display()
            ),
        )
        .expect("LWS config");
        let log = plane.file("lws.log");
        let out = std::fs::File::create(&log).expect("lws.log");
        let child = Command::new(bin)
            .args(["--config", &config.display().to_string()])
            .env("KUBECONFIG", plane.kubeconfig())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("starting the LWS controller");
        let mut lws = LwsController { child, log };
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        lws.wait_until(
            &format!("the LWS webhook does not listen on {addr}"),
            || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok(),
        )?;

        // Its webhooks, by URL, outside the system namespaces.
        let url = format!("https://127.0.0.1:{port}");
        let ca = b64(&plane.file("ca.crt"));
        let text =
            std::fs::read_to_string(dir.join("config/webhook.yaml")).expect("LWS's webhooks");
        let mut configs = Vec::new();
        for doc in text.split("\n---") {
            let Ok(mut doc) = serde_yaml::from_str::<Value>(doc) else {
                continue;
            };
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            if !kind.ends_with("WebhookConfiguration") {
                continue;
            }
            doc["metadata"]["name"] = json!(format!(
                "lws-{}",
                doc["metadata"]["name"].as_str().unwrap_or("")
            ));
            for hook in doc["webhooks"].as_array_mut().into_iter().flatten() {
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap_or("/")
                    .to_string();
                hook["clientConfig"] = json!({"url": format!("{url}{path}"), "caBundle": ca});
                hook["namespaceSelector"] = json!({"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": ["kube-system"]}]});
            }
            configs.push(doc);
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": configs}).to_string();
        plane.kubectl(&["apply", "-f", "-"], Some(&list));
        lws.wait_until("the LWS controller is not ready", || {
            Command::new("curl")
                .args(["-sf", "--max-time", "2", &format!("http://{health}/readyz")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })?;
        Ok(lws)
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The log's tail when the process has exited.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "the LWS controller exited ({status}): {}",
                self.tail()
            )),
            _ => None,
        }
    }

    /// Polls `ready` until it holds; Err with the log's tail when the controller exits first, or when it still does
    /// not hold after 90 s (`not_yet` says what is missing then).
    fn wait_until(&mut self, not_yet: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !ready() {
            // It may have bound one port and lost another: it exits then.
            if let Some(e) = self.exited() {
                return Err(e);
            }
            if Instant::now() >= deadline {
                return Err(format!("{not_yet} after 90 s: {}", self.tail()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }
}
