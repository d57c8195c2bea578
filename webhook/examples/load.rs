//! Open-loop load generator for the webhook over TLS on loopback.
//!
//! `cargo run --release -p sluice-webhook --example load -- --rate 1000 --duration 10s`
//!
//! Starts the webhook in-process on 127.0.0.1 (its own 2-thread runtime, a certificate made with rcgen) unless
//! `--target ADDR --ca FILE` points at a running one, then sends a realistic Job AdmissionReview at a fixed rate
//! over keep-alive TLS connections. Requests are scheduled on a fixed timetable whatever the answers' pace, so a
//! slow server shows up as latency rather than as a lower request rate. Prints achieved throughput and latency
//! percentiles, measured from the send (service latency) and from the scheduled time (which adds the generator's
//! own lateness, bounded below by Tokio's 1 ms timer).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use sluice_webhook::server::ServerOptions;
use sluice_webhook::tls::ReloadingCert;
use sluice_webhook::{Hooks, InMemoryLocalQueues};

struct Args {
    rate: u64,
    duration: Duration,
    connections: usize,
    path: String,
    target: Option<(SocketAddr, PathBuf)>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("bad duration unit in {s:?} (use ms, s or m)")),
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        rate: 1000,
        duration: Duration::from_secs(10),
        connections: 4,
        path: "/mutate-batch-v1-job".to_owned(),
        target: None,
    };
    let mut target = None;
    let mut ca = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rate" => args.rate = value()?.parse().map_err(|e| format!("--rate: {e}"))?,
            "--duration" => args.duration = parse_duration(&value()?)?,
            "--connections" => {
                args.connections = value()?
                    .parse()
                    .map_err(|e| format!("--connections: {e}"))?;
            }
            "--path" => args.path = value()?,
            "--target" => {
                target = Some(
                    value()?
                        .parse::<SocketAddr>()
                        .map_err(|e| format!("--target: {e}"))?,
                )
            }
            "--ca" => ca = Some(PathBuf::from(value()?)),
            "--help" | "-h" => {
                return Err("usage: load [--rate N] [--duration 10s] [--connections 4] [--path /mutate-batch-v1-job] \
                     [--target ADDR:PORT --ca CERT.pem]"
                    .to_owned());
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.rate == 0 || args.connections == 0 {
        return Err("--rate and --connections must be positive".to_owned());
    }
    args.target = match (target, ca) {
        (Some(t), Some(c)) => Some((t, c)),
        (None, None) => None,
        _ => return Err("--target and --ca go together".to_owned()),
    };
    Ok(args)
}

/// A Job as a training pipeline would submit it (about 2 KiB of JSON in its review).
fn job_review() -> Vec<u8> {
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "llm-finetune-7b-2026-0042", "namespace": "team-a", "uid": "6c2f0f7a-2b33-4b9b-8f3e-2d0d1a7c9e11",
            "labels": {"kueue.x-k8s.io/queue-name": "gpu-queue", "app.kubernetes.io/name": "finetune",
                "kueue.x-k8s.io/priority-class": "high"},
            "annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed", "backoffLimit": 3,
            "template": {"metadata": {"labels": {"app.kubernetes.io/name": "finetune"},
                "annotations": {"kueue.x-k8s.io/podset-preferred-topology": "cloud.provider.com/topology-rack"}},
                "spec": {"restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "trainer", "image": "registry.example.com/ml/trainer:2026.11.3",
                        "command": ["torchrun", "--nproc-per-node=8", "train.py"],
                        "args": ["--model", "llama-7b", "--epochs", "3", "--batch-size", "64"],
                        "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "OMP_NUM_THREADS", "value": "8"},
                            {"name": "DATASET", "value": "s3://datasets/instruct-v4"}],
                        "resources": {"requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
                            "limits": {"nvidia.com/gpu": "8"}},
                        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}],
                    "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}]}}}
    });
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "3f0e8a54-1d2b-4c6e-9a7f-0b1c2d3e4f50",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
        "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "name": "llm-finetune-7b-2026-0042", "namespace": "team-a", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:ml:pipeline", "groups": ["system:serviceaccounts"]},
        "object": job, "oldObject": null, "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}});
    serde_json::to_vec(&review).unwrap_or_default()
}

/// Starts the webhook on its own runtime; returns its address and certificate.
fn start_server() -> Result<(SocketAddr, CertificateDer<'static>), String> {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("sluice-webhook-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, ck.cert.pem()).map_err(|e| e.to_string())?;
    std::fs::write(&key, ck.signing_key.serialize_pem()).map_err(|e| e.to_string())?;
    let der = ck.cert.der().clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build();
        let Ok(rt) = rt else {
            let _ = tx.send(Err("cannot build the server runtime".to_owned()));
            return;
        };
        rt.block_on(async move {
            let queues = Arc::new(InMemoryLocalQueues::new([("team-a", "gpu-queue")]));
            let started = async {
                let reloading = ReloadingCert::load(&cert, &key).map_err(|e| e.to_string())?;
                let addr: SocketAddr = "127.0.0.1:0"
                    .parse()
                    .map_err(|e: std::net::AddrParseError| e.to_string())?;
                sluice_webhook::server::start(
                    addr,
                    None,
                    Hooks::new(queues),
                    reloading,
                    ServerOptions::default(),
                )
                .await
                .map_err(|e| e.to_string())
            };
            match started.await {
                Ok(running) => {
                    let _ = tx.send(Ok(running.addr));
                    std::future::pending::<()>().await;
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
    });
    let addr = rx.recv().map_err(|e| e.to_string())??;
    Ok((addr, der))
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Result<Sender, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(sender)
}

/// Per-request outcome: microseconds from send and from schedule, or an error.
struct Sample {
    service_us: u64,
    scheduled_us: u64,
    ok: bool,
}

/// The timetable shared by the connections: request `i` is due at `start + i / rate` and goes out on connection
/// `i % stride`.
#[derive(Clone)]
struct Plan {
    path: Arc<str>,
    body: Bytes,
    start: tokio::time::Instant,
    stride: u64,
    rate: u64,
    total: u64,
}

async fn connection_loop(mut sender: Sender, plan: Plan, offset: u64) -> Vec<Sample> {
    let Plan {
        path,
        body,
        start,
        stride,
        rate,
        total,
    } = plan;
    let mut samples = Vec::with_capacity((total / stride + 1) as usize);
    let mut i = offset;
    while i < total {
        let due = start + Duration::from_nanos(i * 1_000_000_000 / rate);
        tokio::time::sleep_until(due).await;
        let sent = Instant::now();
        let due_std = due.into_std();
        let req = hyper::Request::post(&*path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body.clone()));
        let ok = match req {
            Ok(req) => match sender.ready().await {
                Ok(()) => match sender.send_request(req).await {
                    Ok(resp) => {
                        let good = resp.status().is_success();
                        good && resp.into_body().collect().await.is_ok()
                    }
                    Err(_) => false,
                },
                Err(_) => false,
            },
            Err(_) => false,
        };
        let done = Instant::now();
        samples.push(Sample {
            service_us: done.duration_since(sent).as_micros() as u64,
            scheduled_us: done.saturating_duration_since(due_std).as_micros() as u64,
            ok,
        });
        i += stride;
    }
    samples
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)] as f64 / 1000.0
}

fn summary(label: &str, mut v: Vec<u64>) -> String {
    v.sort_unstable();
    format!(
        "{label}: p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
        percentile(&v, 50.0),
        percentile(&v, 90.0),
        percentile(&v, 99.0),
        percentile(&v, 99.9),
        percentile(&v, 100.0)
    )
}

fn main() -> Result<(), String> {
    let args = parse_args()?;
    let (addr, root) = match &args.target {
        Some((addr, ca)) => {
            let pem = std::fs::read(ca).map_err(|e| format!("{}: {e}", ca.display()))?;
            let der = CertificateDer::from_pem_slice(&pem)
                .map_err(|e| format!("{}: {e}", ca.display()))?;
            (*addr, der)
        }
        None => start_server()?,
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).map_err(|e| e.to_string())?;
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let body = Bytes::from(job_review());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let mut senders = Vec::new();
        for _ in 0..args.connections {
            senders.push(connect(addr, config.clone()).await?);
        }
        // Warm up each connection with one request so handshakes and first allocations are not measured.
        for s in &mut senders {
            let req = hyper::Request::post(&args.path)
                .header("host", "localhost")
                .body(Full::new(body.clone()))
                .map_err(|e| e.to_string())?;
            s.ready().await.map_err(|e| e.to_string())?;
            let resp = s.send_request(req).await.map_err(|e| e.to_string())?;
            if !resp.status().is_success() {
                return Err(format!("warm-up request got HTTP {}", resp.status()));
            }
            let _ = resp.into_body().collect().await;
        }
        let total = args.rate * args.duration.as_millis() as u64 / 1000;
        let path: Arc<str> = Arc::from(args.path.as_str());
        let start = tokio::time::Instant::now() + Duration::from_millis(20);
        let wall = Instant::now();
        let plan = Plan {
            path,
            body: body.clone(),
            start,
            stride: args.connections as u64,
            rate: args.rate,
            total,
        };
        let tasks: Vec<_> = senders
            .into_iter()
            .enumerate()
            .map(|(k, s)| tokio::spawn(connection_loop(s, plan.clone(), k as u64)))
            .collect();
        let mut samples = Vec::new();
        for t in tasks {
            samples.extend(t.await.map_err(|e| e.to_string())?);
        }
        let elapsed = wall.elapsed().as_secs_f64() - 0.02;
        let ok = samples.iter().filter(|s| s.ok).count();
        println!(
            "target {} req/s for {:?} over {} TLS 1.3 keep-alive connections, POST {} ({} bytes)",
            args.rate,
            args.duration,
            args.connections,
            args.path,
            body.len()
        );
        println!(
            "sent {}, ok {}, errors {}, achieved {:.1} req/s",
            samples.len(),
            ok,
            samples.len() - ok,
            ok as f64 / elapsed.max(1e-9)
        );
        println!(
            "{}",
            summary(
                "latency from send     ",
                samples.iter().map(|s| s.service_us).collect()
            )
        );
        println!(
            "{}",
            summary(
                "latency from schedule ",
                samples.iter().map(|s| s.scheduled_us).collect()
            )
        );
        Ok(())
    })
}
