//! `sluice webhook` and `sluice operator` run as processes against a control plane, as a user runs them.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::plane::ControlPlane;

/// The `sluice` binary under test.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A free port on 127.0.0.1 (nothing listens on it now).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Runs `try_start` until it succeeds, again (at most 3 times in all) when the process it starts lost a port that
/// [`free_port`] found to another process binding it first (control planes of other tests or scenarios start
/// meanwhile), or started before the API server's discovery listed CRDs it had just seen Established (a manager
/// then exits with "no matches for kind"; discovery catches up asynchronously, later on a loaded machine): each
/// attempt picks new ports. Any other error, or the last, panics with it; `what` names the process in the retry
/// message.
pub fn start_with_retries<T>(what: &str, mut try_start: impl FnMut() -> Result<T, String>) -> T {
    const ATTEMPTS: u32 = 3;
    let mut attempt = 1;
    loop {
        match try_start() {
            Ok(started) => return started,
            Err(e) if attempt < ATTEMPTS && e.contains("address already in use") => {
                eprintln!("{what} lost a port (attempt {attempt}), starting it again");
                attempt += 1;
            }
            Err(e) if attempt < ATTEMPTS && e.contains("no matches for kind") => {
                eprintln!(
                    "{what} started before discovery listed its CRDs (attempt {attempt}), starting it again"
                );
                std::thread::sleep(std::time::Duration::from_secs(2));
                attempt += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// A running `sluice` process, killed when dropped.
pub struct Process {
    child: Child,
    /// Its log file.
    pub log: PathBuf,
    /// What it is, for messages.
    pub what: String,
}

impl Process {
    /// Starts `sluice ARGS` with KUBECONFIG set to the control plane's, logging into its directory as `NAME.log`.
    pub fn start(plane: &ControlPlane, name: &str, args: &[String], env: &[(&str, &str)]) -> Self {
        Self::start_with(plane, name, args, env, &plane.kubeconfig())
    }

    /// Starts `sluice ARGS` with this KUBECONFIG.
    pub fn start_with(
        plane: &ControlPlane,
        name: &str,
        args: &[String],
        env: &[(&str, &str)],
        kubeconfig: &Path,
    ) -> Self {
        let log = plane.file(&format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        // SLUICE_E2E_HEAPTRACK=PREFIX profiles the operator's heap (build with feature `system-allocator`).
        let mut cmd = match std::env::var("SLUICE_E2E_HEAPTRACK") {
            Ok(out) if args.first().is_some_and(|a| a == "operator") => {
                let mut c = Command::new("heaptrack");
                c.args(["-o", &out, env!("CARGO_BIN_EXE_sluice")]);
                c
            }
            _ => sluice(),
        };
        let child = cmd
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("SLUICE_E2E_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("starting sluice");
        Process {
            child,
            log,
            what: format!("sluice {name}"),
        }
    }

    /// Waits until something accepts connections on `addr`; the error carries the log when it exits first.
    pub fn try_wait_listening(&mut self, addr: SocketAddr) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("{} exited ({status}): {}", self.what, self.tail()));
            }
            assert!(
                Instant::now() < deadline,
                "{} does not listen on {addr} after 60 s: {}",
                self.what,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Something listens: this process, unless it lost the port to another and exits.
        std::thread::sleep(Duration::from_millis(50));
        if let Ok(Some(status)) = self.child.try_wait() {
            return Err(format!("{} exited ({status}): {}", self.what, self.tail()));
        }
        Ok(())
    }

    /// The last lines of its log.
    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Kills it with SIGKILL, as a crashed node would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The webhook served over HTTPS on 127.0.0.1 with the control plane's generated certificate.
pub struct Webhook {
    /// The process.
    pub process: Process,
    /// Where it serves (`https://127.0.0.1:PORT`).
    pub url: String,
}

impl Webhook {
    /// Starts `sluice webhook` and waits until it listens.
    pub fn start(plane: &ControlPlane) -> Webhook {
        Self::start_with(plane, &plane.kubeconfig())
    }

    /// Starts `sluice webhook` with this KUBECONFIG.
    pub fn start_with(plane: &ControlPlane, kubeconfig: &Path) -> Webhook {
        Self::start_with_flags(plane, kubeconfig, &[])
    }

    /// Starts `sluice webhook` with this KUBECONFIG and these extra flags (`--config FILE`).
    pub fn start_with_flags(plane: &ControlPlane, kubeconfig: &Path, flags: &[String]) -> Webhook {
        // As for the operator: a free port taken before the webhook bound it is tried again with new ones.
        for attempt in 1.. {
            // The port of a webhook before on this plane, if free: its CRDs' conversion already points there.
            let port = plane.sticky_port("sluice-webhook.port");
            let metrics = free_port();
            let mut args: Vec<String> = vec![
                "webhook".into(),
                "--tls-cert".into(),
                plane.file("webhook.crt").display().to_string(),
                "--tls-key".into(),
                plane.file("webhook.key").display().to_string(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
                "--metrics-listen".into(),
                format!("127.0.0.1:{metrics}"),
            ];
            args.extend_from_slice(flags);
            let mut process = Process::start_with(plane, "webhook", &args, &[], kubeconfig);
            match process.try_wait_listening(([127, 0, 0, 1], port).into()) {
                Ok(()) => {
                    return Webhook {
                        process,
                        url: format!("https://127.0.0.1:{port}"),
                    };
                }
                Err(e) if attempt < 5 && e.contains("Address already in use") => continue,
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!("the loop returns or panics")
    }
}

/// The operator's listeners.
pub struct Operator {
    /// The process.
    pub process: Process,
    /// `/metrics`, `/healthz`, `/readyz` (waited on at start).
    pub metrics: SocketAddr,
    /// Kueue's visibility API.
    pub visibility: SocketAddr,
}

impl Operator {
    /// Starts `sluice operator` (named `name` in logs and leader election) with `extra` flags.
    pub fn start(plane: &ControlPlane, name: &str, extra: &[String]) -> Operator {
        Self::start_with(plane, name, extra, &plane.kubeconfig())
    }

    /// Starts `sluice operator` with this KUBECONFIG.
    pub fn start_with(
        plane: &ControlPlane,
        name: &str,
        extra: &[String],
        kubeconfig: &Path,
    ) -> Operator {
        // Free ports can be taken by another process before the operator binds them: tried again with new ones.
        for attempt in 1.. {
            let metrics: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let visibility: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let mut args: Vec<String> = vec![
                "operator".into(),
                "--metrics-listen".into(),
                metrics.to_string(),
                "--visibility-listen".into(),
                visibility.to_string(),
            ];
            args.extend(extra.iter().cloned());
            let mut process =
                Process::start_with(plane, name, &args, &[("POD_NAME", name)], kubeconfig);
            match process.try_wait_listening(metrics) {
                Ok(()) => {
                    return Operator {
                        process,
                        metrics,
                        visibility,
                    };
                }
                Err(e) if attempt < 5 && e.contains("Address already in use") => continue,
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!("the loop returns or panics")
    }
}
