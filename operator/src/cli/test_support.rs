//! The cluster commands against recorded API server responses, served by a tower service in place of the
//! cluster, and the fixtures the commands' tests share.

use std::sync::{Arc, Mutex};

use clap::Parser;
use serde_json::{Value, json};

use super::{CliError, ClusterCommand, execute};

/// One API call the mock answered: method, path, content type, body.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: Value,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// A client on its own runtime, with the calls its mock API server answered.
pub struct Mock {
    /// Runs the commands (the client's buffer task lives on it).
    pub runtime: tokio::runtime::Runtime,
    /// The client.
    pub client: kube::Client,
    /// Every call, in order.
    pub calls: Calls,
}

impl Mock {
    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// A client whose API server answers (method, path) from `routes`, 404 otherwise, echoing POST bodies.
pub fn mock(routes: Vec<(&'static str, String, Value)>) -> Mock {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        let routes = routes.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let content_type = req
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let bytes = req.into_body().collect_bytes().await?;
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.lock().map_err(|e| e.to_string())?.push(Call {
                method: method.clone(),
                path: path.clone(),
                content_type,
                body: body.clone(),
            });
            let found = routes.iter().find(|(m, p, _)| *m == method && *p == path);
            let (status, reply) = match (found, method.as_str()) {
                (Some((_, _, v)), _) => (200, v.clone()),
                (None, "POST") => (201, body),
                (None, _) => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "reason": "NotFound", "code": 404, "message": format!("{path} not found")}),
                ),
            };
            let response = http::Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(kube::client::Body::from(serde_json::to_vec(&reply)?))?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("test runtime: {e}"));
    let client = {
        let _inside = runtime.enter();
        kube::Client::new(service, "team-a")
    };
    Mock {
        runtime,
        client,
        calls,
    }
}

/// The cluster subcommands as the binary parses them.
#[derive(Parser)]
pub struct Args {
    #[command(subcommand)]
    command: ClusterCommand,
}

/// 2026-01-01T03:00:00Z: three hours after the fixtures' creation times.
pub const NOW: i64 = 1_767_236_400;

/// Parses `args` as the `sluice` command line would and runs them against `client`.
pub fn run_with(m: &Mock, args: &[&str]) -> Result<String, CliError> {
    let command = Args::try_parse_from(std::iter::once("sluice").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command;
    m.runtime.block_on(execute(&m.client, command, NOW))
}

pub(crate) fn kueue_list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": format!("{kind}List"),
           "metadata": {"resourceVersion": "42"}, "items": items})
}

pub(crate) fn meta(name: &str, ns: Option<&str>) -> Value {
    let mut m = json!({"name": name, "uid": format!("uid-{name}"), "resourceVersion": "7",
                       "creationTimestamp": "2026-01-01T00:00:00Z"});
    if let Some(ns) = ns {
        m["namespace"] = ns.into();
    }
    m
}

pub(crate) fn cond(t: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": t, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2026-01-01T01:00:00Z"})
}

pub fn cluster_queues() -> Value {
    kueue_list(
        "ClusterQueue",
        vec![
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta("team-a", None),
                "spec": {"cohortName": "ai", "namespaceSelector": {}, "resourceGroups": [
                    {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                        {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                       {"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}]},
                "status": {"pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
                    "conditions": [cond("Active", "True", "Ready", "Can admit new workloads")],
                    "flavorsUsage": [{"name": "h100", "resources": [
                        {"name": "cpu", "total": "8", "borrowed": "0"},
                        {"name": "nvidia.com/gpu", "total": "20", "borrowed": "4"}]}]}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta("team-b", None),
                "spec": {"namespaceSelector": {}, "queueingStrategy": "StrictFIFO", "stopPolicy": "Hold",
                         "resourceGroups": []},
                "status": {"conditions": [cond("Active", "False", "Stopped", "Stopped by user")]}}),
        ],
    )
}
