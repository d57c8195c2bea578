//! A local control plane from `tests/control-plane` (etcd, kube-apiserver, kube-controller-manager), started for
//! one test and stopped when it is dropped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("operator/ has a parent")
        .to_path_buf()
}

fn scripts() -> PathBuf {
    repo_root().join("tests/control-plane")
}

/// Where `tests/control-plane/build` put the binaries.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("SLUICE_CONTROL_PLANE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/control-plane/bin"))
}

/// Whether the suite must run (CI sets SLUICE_E2E=require): then a missing control plane fails instead of
/// skipping.
pub fn required() -> bool {
    std::env::var("SLUICE_E2E").is_ok_and(|v| v == "require")
}

/// A running control plane in its own directory.
pub struct ControlPlane {
    /// The directory `up` wrote (certificates, kubeconfig, logs, etcd data).
    pub dir: PathBuf,
    /// The test's name, for kept logs.
    name: String,
}

impl ControlPlane {
    /// Starts one for the test `name`; None (the test is skipped, saying so) when the binaries were not built and
    /// SLUICE_E2E is not `require`.
    pub fn up(name: &str) -> Option<ControlPlane> {
        Self::up_with(name, "")
    }

    /// As `up`, with these kube-apiserver flags added (space-separated; `SLUICE_CP_APISERVER_ARGS`).
    pub fn up_with(name: &str, apiserver_args: &str) -> Option<ControlPlane> {
        if !bin_dir().join("kube-apiserver").exists() {
            let msg = format!(
                "no control plane in {}: run tests/control-plane/build first",
                bin_dir().display()
            );
            assert!(!required(), "{msg}");
            eprintln!("skipped {name}: {msg}");
            return None;
        }
        let base = repo_root().join("target/e2e");
        std::fs::create_dir_all(&base).expect("target/e2e");
        let dir = base.join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(scripts().join("up"))
            .arg(&dir)
            .env("SLUICE_CP_APISERVER_ARGS", apiserver_args)
            .output()
            .expect("running tests/control-plane/up");
        assert!(
            out.status.success(),
            "tests/control-plane/up failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(ControlPlane {
            dir,
            name: name.to_string(),
        })
    }

    /// The cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// A file in the control plane's directory (certificates: `ca.crt`, `webhook.crt`, ...).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The port kept in this plane's file `what` while it is free (a manager started again on a plane kept for
    /// another test gets the port its CRDs and webhooks already name), else a new free one, kept there.
    pub fn sticky_port(&self, what: &str) -> u16 {
        // Every sticky port this process gave out, by plane: an idle plane's port is free, and must not become
        // another plane's too.
        static CLAIMED: std::sync::Mutex<BTreeMap<u16, PathBuf>> =
            std::sync::Mutex::new(BTreeMap::new());
        let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
        let file = self.file(what);
        let kept = std::fs::read_to_string(&file)
            .ok()
            .and_then(|p| p.trim().parse::<u16>().ok())
            .filter(|p| claimed.get(p).is_none_or(|d| *d == self.dir))
            .filter(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok());
        let port = kept.unwrap_or_else(|| {
            loop {
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("a free port")
                    .port();
                if !claimed.contains_key(&port) {
                    let _ = std::fs::write(&file, port.to_string());
                    break port;
                }
            }
        });
        claimed.insert(port, self.dir.clone());
        port
    }

    /// Whether exactly `text` was applied as `what` on this plane before ([`ControlPlane::applied`] says so).
    pub fn applied_before(&self, what: &str, text: &str) -> bool {
        std::fs::read_to_string(self.file(&format!("{what}.applied")))
            .is_ok_and(|h| h == fingerprint(text))
    }

    /// Notes that `text` was applied as `what`.
    pub fn applied(&self, what: &str, text: &str) {
        let _ = std::fs::write(self.file(&format!("{what}.applied")), fingerprint(text));
    }

    /// The API server's URL.
    pub fn server(&self) -> String {
        let state = std::fs::read_to_string(self.dir.join("state")).expect("state");
        state
            .lines()
            .find_map(|l| l.strip_prefix("server="))
            .expect("server= in state")
            .to_string()
    }

    /// A cluster-admin client.
    pub async fn client(&self) -> Client {
        client_for(&self.kubeconfig()).await
    }

    /// Runs kubectl against this control plane with `stdin` piped in; returns its output whatever its status.
    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(bin_dir().join("kubectl"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).expect("kubectl stdin");
        }
        drop(input);
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs kubectl and panics, with its output, unless it succeeds; returns stdout.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl_output(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stops etcd and the API server and starts them again on the same data and ports.
    pub fn restart(&self) {
        let out = Command::new(scripts().join("restart"))
            .arg(&self.dir)
            .output()
            .expect("running tests/control-plane/restart");
        assert!(
            out.status.success(),
            "tests/control-plane/restart failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // A failed test keeps its logs (control plane, operator, webhook) in target/e2e-logs/NAME; every test does
        // with SLUICE_E2E_LOGS=1 (a differential scenario that differs does not panic).
        if std::thread::panicking() || std::env::var("SLUICE_E2E_LOGS").is_ok_and(|v| v == "1") {
            let keep = repo_root().join("target/e2e-logs").join(&self.name);
            let _ = std::fs::create_dir_all(&keep);
            if let Ok(entries) = std::fs::read_dir(&self.dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    if p.extension().is_some_and(|x| x == "log") {
                        let _ = std::fs::copy(&p, keep.join(e.file_name()));
                    }
                }
            }
            eprintln!("logs of {} kept in {}", self.name, keep.display());
            // SLUICE_E2E_KEEP=1 leaves a failed test's control plane running, to look at it with kubectl.
            if std::env::var("SLUICE_E2E_KEEP").is_ok_and(|v| v == "1") {
                eprintln!(
                    "control plane kept: KUBECONFIG={}",
                    self.kubeconfig().display()
                );
                return;
            }
        }
        let _ = Command::new(scripts().join("down")).arg(&self.dir).status();
    }
}

/// A fingerprint of a text (its length and hash), to tell whether the same text was applied before.
fn fingerprint(text: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("{} {:x}", text.len(), h.finish())
}

/// A client for a kubeconfig file.
pub async fn client_for(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}
