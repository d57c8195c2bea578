//! Kueue's manager (built by tests/kueue/build) run as a process against a local control plane: its CRDs with
//! conversion through its own webhook, its webhook configurations registered by URL on 127.0.0.1 with the
//! control plane's generated certificate, internal certificate management and leader election off.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::plane::{ControlPlane, repo_root};
use super::sluice::{free_port, start_with_retries};
use super::support::b64;

/// Where tests/kueue/build linked Kueue (SLUICE_KUEUE_DIR overrides).
pub fn kueue_dir() -> PathBuf {
    std::env::var_os("SLUICE_KUEUE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/kueue"))
}

/// The Kueue release built, e.g. `v0.19.2`; None when tests/kueue/build has not run.
pub fn kueue_version() -> Option<String> {
    let v = std::fs::read_to_string(kueue_dir().join("version")).ok()?;
    kueue_dir()
        .join("bin/kueue")
        .exists()
        .then(|| v.trim().to_string())
}

/// Where the manager reads its metrics certificate when internal certificate management is off: a fixed path
/// in its main.go (cmd/kueue/main.go, `metricsCertPath`), which exits when the files are missing.
const METRICS_CERTS: &str = "/etc/kueue/metrics/certs";

/// A running Kueue manager, killed when dropped.
pub struct Kueue {
    child: Child,
    /// Its log.
    pub log: PathBuf,
}

impl Drop for Kueue {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Multi-document YAML as JSON values (empty documents dropped).
fn documents(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .filter_map(|d| Value::deserialize(d).ok())
        .filter(|v| !v.is_null())
        .collect()
}

/// A kubectl-applicable List of these objects.
fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// The metrics certificate the manager insists on, from the control plane's webhook certificate when none is there.
fn ensure_metrics_certs(plane: &ControlPlane) {
    // Scenarios start side by side: one of them writes the pair, whole, while the others wait to see it.
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new(METRICS_CERTS);
    if dir.join("tls.crt").exists() && dir.join("tls.key").exists() {
        return;
    }
    // Each file is written aside and renamed into place, so a manager never reads half of one.
    let put = |from: &str, to: &str| {
        let part = dir.join(format!("{to}.part"));
        std::fs::copy(plane.file(from), &part)?;
        std::fs::rename(&part, dir.join(to))
    };
    let made = std::fs::create_dir_all(dir).and_then(|_| {
        put("webhook.key", "tls.key")?;
        put("webhook.crt", "tls.crt")
    });
    if let Err(e) = made {
        panic!(
            "Kueue {} needs a metrics certificate in {METRICS_CERTS} (tls.crt, tls.key) when its internal \
             certificate management is off, and this user cannot write there ({e}): create them once as root",
            kueue_version().unwrap_or_default()
        );
    }
}

/// Kueue's Configuration for a scenario: the scenario's settings with the harness's own (ports, certificates,
/// leader election and certificate management off) laid over them.
fn configuration(
    scenario: Option<&str>,
    webhook_port: u16,
    health: SocketAddr,
    cert_dir: &Path,
) -> String {
    let mut config: serde_yaml::Mapping = match scenario {
        Some(text) => serde_yaml::from_str(text).expect("the scenario's config.yaml"),
        None => serde_yaml::Mapping::new(),
    };
    let set = |config: &mut serde_yaml::Mapping, key: &str, value: &str| {
        config.insert(
            key.into(),
            serde_yaml::from_str(value).expect("harness setting"),
        );
    };
    set(&mut config, "apiVersion", "config.kueue.x-k8s.io/v1beta2");
    set(&mut config, "kind", "Configuration");
    set(&mut config, "namespace", "kueue-system");
    set(&mut config, "leaderElection", "{leaderElect: false}");
    set(&mut config, "internalCertManagement", "{enable: false}");
    set(
        &mut config,
        "webhook",
        &format!(
            "{{port: {webhook_port}, host: 127.0.0.1, certDir: {}}}",
            cert_dir.display()
        ),
    );
    set(&mut config, "metrics", "{bindAddress: \"0\"}");
    set(
        &mut config,
        "health",
        &format!("{{healthProbeBindAddress: \"{health}\"}}"),
    );
    serde_yaml::to_string(&config).expect("Configuration")
}

impl Kueue {
    /// Installs Kueue's CRDs and webhooks on `plane` and starts its manager under the scenario's
    /// Configuration (`config`, YAML) with `feature_gates` (`Name=bool,...`); returns once its webhooks answer.
    pub fn start(plane: &ControlPlane, config: Option<&str>, feature_gates: &str) -> Kueue {
        ensure_metrics_certs(plane);
        plane.kubectl(&["create", "namespace", "kueue-system"], None);
        // A lost port makes the manager exit; a new attempt points the CRDs and webhooks at new ports.
        start_with_retries("Kueue's manager", || {
            Self::try_start(plane, config, feature_gates)
        })
    }

    /// One start: ports, CRDs and webhooks pointed at them, the manager; Err when the manager exited.
    fn try_start(
        plane: &ControlPlane,
        config: Option<&str>,
        feature_gates: &str,
    ) -> Result<Kueue, String> {
        let dir = kueue_dir();
        // The port of the manager before on this plane, if any: its CRDs already point there.
        let port = plane.sticky_port("kueue-webhook.port");
        let url = format!("https://127.0.0.1:{port}");
        let ca = b64(&plane.file("ca.crt"));

        // CRDs, those Kueue converts pointed at its /convert.
        let converted: Vec<String> = std::fs::read_to_string(dir.join("config/conversion"))
            .expect("Kueue's conversion list")
            .lines()
            // Kueue's kustomization leaves the resourceflavors patch out.
            .filter(|l| *l != "resourceflavors")
            .map(|l| format!("{l}.kueue.x-k8s.io"))
            .collect();
        let mut crds = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(dir.join("config/crds"))
            .expect("Kueue's CRDs")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        for f in files {
            for mut crd in documents(&std::fs::read_to_string(&f).expect("CRD")) {
                let name = crd["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if converted.contains(&name) {
                    crd["spec"]["conversion"] = json!({
                        "strategy": "Webhook",
                        "webhook": {
                            "clientConfig": {"url": format!("{url}/convert"), "caBundle": ca},
                            "conversionReviewVersions": ["v1"],
                        },
                    });
                }
                crds.push(crd);
            }
        }
        let count = crds.len();
        let crds = list(crds);
        super::support::apply_crds_once(plane, "kueue-crds", &[&crds], count);

        // The manager.
        let cert_dir = plane.file("kueue-certs");
        std::fs::create_dir_all(&cert_dir).expect("cert dir");
        std::fs::copy(plane.file("webhook.crt"), cert_dir.join("tls.crt")).expect("tls.crt");
        std::fs::copy(plane.file("webhook.key"), cert_dir.join("tls.key")).expect("tls.key");
        let health: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let config_file = plane.file("kueue-config.yaml");
        std::fs::write(&config_file, configuration(config, port, health, &cert_dir))
            .expect("Kueue config");
        let log = plane.file("kueue.log");
        let out = std::fs::File::create(&log).expect("kueue.log");
        let mut args = vec![
            "--config".to_string(),
            config_file.display().to_string(),
            "--zap-log-level=info".into(),
        ];
        if !feature_gates.is_empty() {
            args.push(format!("--feature-gates={feature_gates}"));
        }
        let child = Command::new(dir.join("bin/kueue"))
            .args(&args)
            .env("KUBECONFIG", plane.kubeconfig())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("starting Kueue's manager");
        let mut kueue = Kueue { child, log };
        kueue.wait_listening(([127, 0, 0, 1], port).into())?;

        // Its webhooks, by URL; those of the job integrations (every kind outside Kueue's own API group) skip the
        // system namespaces, as its kustomization (config/components/webhook) makes them.
        let mut configs = Vec::new();
        for mut doc in documents(
            &std::fs::read_to_string(dir.join("config/webhook.yaml")).expect("Kueue's webhooks"),
        ) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            if !kind.ends_with("WebhookConfiguration") {
                continue;
            }
            doc["metadata"]["name"] = json!(format!(
                "kueue-{}",
                doc["metadata"]["name"].as_str().unwrap_or("")
            ));
            for hook in doc["webhooks"].as_array_mut().into_iter().flatten() {
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap_or("/")
                    .to_string();
                hook["clientConfig"] = json!({"url": format!("{url}{path}"), "caBundle": ca});
                let kueue_kind = hook["rules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|r| r["apiGroups"].as_array().into_iter().flatten())
                    .any(|g| g == "kueue.x-k8s.io");
                if !kueue_kind {
                    hook["namespaceSelector"] = json!({"matchExpressions": [{
                        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["kube-system", "kueue-system"]}]});
                }
            }
            configs.push(doc);
        }
        plane.kubectl(&["apply", "-f", "-"], Some(&list(configs)));
        kueue.wait_ready(health)?;
        Ok(kueue)
    }

    fn wait_listening(&mut self, addr: SocketAddr) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "Kueue's manager exited ({status}): {}",
                    self.tail()
                ));
            }
            assert!(
                Instant::now() < deadline,
                "Kueue's webhook does not listen on {addr} after 90 s: {}",
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Waits until /readyz answers 200 (its webhook server and certificates are up).
    fn wait_ready(&mut self, health: SocketAddr) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let ok = Command::new("curl")
                .args(["-sf", "--max-time", "2", &format!("http://{health}/readyz")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "Kueue's manager exited ({status}): {}",
                    self.tail()
                ));
            }
            assert!(
                Instant::now() < deadline,
                "Kueue's manager is not ready after 90 s: {}",
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last lines of its log.
    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}
