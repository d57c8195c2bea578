//! Control planes kept between scenarios. Starting an API server and taking in Kueue's CRDs (most of a megabyte)
//! costs about 6.5 s of CPU, most of what a scenario costs on a 2-core machine. So a scenario's plane is not
//! stopped at its end: its managers are, then everything the scenario and they wrote is removed from etcd, and
//! the plane waits for the next scenario of the same system with the same CRDs.
//!
//! The wipe works on etcd's keys, below the API server, so no finalizer, webhook or missing kubelet can hold an
//! object back: every key made since the plane came up goes, except the CRDs with their APIServices, leases (the
//! API server's identity), and what the controller manager and the API server make in the four start namespaces
//! (the `default` ServiceAccounts, root CA ConfigMaps, kube-system's ConfigMaps, the `kubernetes` Service); every
//! Namespace there at the start is written back as it was. The API server's caches follow etcd's
//! watch as they follow any write, and consistent lists of Namespaces, Nodes, Workloads and ClusterQueues show the
//! wipe before the plane is used again. A plane whose wipe fails, whose processes stopped, or whose scenario failed
//! is stopped instead.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::plane::ControlPlane;
use super::system::Which;

/// The namespaces every control plane starts with; objects the control plane makes in them are kept.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// What the control plane makes in the start namespaces after `up`: (resource, namespace, name), `*` for any.
const KEPT_IN_SYSTEM_NAMESPACES: &[(&str, &str, &str)] = &[
    ("serviceaccounts", "*", "default"),
    ("configmaps", "*", "kube-root-ca.crt"),
    // The API server's own (its authentication settings, service-account token tracking).
    ("configmaps", "kube-system", "*"),
    ("services/specs", "default", "kubernetes"),
    ("services/endpoints", "default", "kubernetes"),
    ("endpointslices", "default", "kubernetes"),
];

/// Key prefixes kept whoever wrote them: the CRDs (what a plane is kept for), the APIServices their groups
/// registered, and leases (the API server's identity; nothing else here elects a leader).
const KEPT_PREFIXES: &[&str] = &[
    "/registry/apiextensions.k8s.io/",
    "/registry/apiregistration.k8s.io/",
    "/registry/leases/kube-system/",
    "/registry/masterleases/",
];

/// An idle plane and what its etcd held when it came up.
struct Idle {
    which: Which,
    /// The third-party CRDs installed on it.
    profile: String,
    plane: ControlPlane,
    baseline: Baseline,
}

/// etcd's keys right after `up`: each key's value (base64) and its mod revision.
#[derive(Clone, Default)]
pub struct Baseline(BTreeMap<String, (i64, String)>);

/// Planes waiting for a scenario.
static IDLE: Mutex<Vec<Idle>> = Mutex::new(Vec::new());
/// Baselines of the planes in use, by directory.
static BASELINES: Mutex<BTreeMap<std::path::PathBuf, Baseline>> = Mutex::new(BTreeMap::new());

/// The most planes kept idle; the oldest go first.
const MAX_IDLE: usize = 8;

/// Whether planes are kept between scenarios (SLUICE_DIFF_FRESH=1 starts a fresh one for every scenario).
fn reuse() -> bool {
    !std::env::var("SLUICE_DIFF_FRESH").is_ok_and(|v| v == "1")
}

/// A plane for `which` with the third-party CRDs `profile`: an idle one wiped after an earlier scenario, else a
/// fresh one from `start`.
pub fn take(
    which: Which,
    profile: &str,
    start: impl FnOnce() -> Option<ControlPlane>,
) -> Option<ControlPlane> {
    let reused = {
        let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
        idle.iter()
            .position(|i| i.which == which && i.profile == profile)
            .map(|at| idle.remove(at))
    };
    if let Some(i) = reused {
        BASELINES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(i.plane.dir.clone(), i.baseline);
        return Some(i.plane);
    }
    let plane = start()?;
    if reuse() {
        match keys(&plane, true) {
            Ok(baseline) => {
                BASELINES
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(plane.dir.clone(), Baseline(baseline));
            }
            Err(e) => eprintln!("{}: no baseline, not kept: {e}", plane.dir.display()),
        }
    }
    Some(plane)
}

/// Whether a plane for each system with these third-party CRDs waits.
pub fn ready(profile: &str) -> bool {
    let idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
    [Which::Kueue, Which::Sluice]
        .iter()
        .all(|w| idle.iter().any(|i| i.which == *w && i.profile == profile))
}

/// Gives back a plane whose managers have stopped: wiped and kept for a later scenario when one is `wanted`, else
/// stopped (dropped), as when it has no baseline or the wipe failed.
pub async fn give(which: Which, profile: &str, plane: ControlPlane, wanted: bool) {
    let baseline = BASELINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&plane.dir);
    let Some(baseline) = baseline.filter(|_| reuse() && wanted) else {
        return;
    };
    if let Some(dead) = stopped_process(&plane) {
        eprintln!(
            "{}: not kept for another scenario: its {dead} has stopped",
            plane.dir.display()
        );
        return;
    }
    let wiped = match tokio::task::block_in_place(|| wipe(&plane, &baseline)) {
        Ok(()) => settled(&plane, &baseline).await,
        Err(e) => Err(e),
    };
    if let Err(e) = wiped {
        eprintln!(
            "{}: not kept for another scenario: {e}",
            plane.dir.display()
        );
        return;
    }
    let dropped = {
        let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
        idle.push(Idle {
            which,
            profile: profile.to_string(),
            plane,
            baseline,
        });
        (idle.len() > MAX_IDLE).then(|| idle.remove(0))
    };
    // Stopped outside the lock.
    drop(dropped);
}

/// The first of the plane's processes (etcd, kube-apiserver, kube-controller-manager) that no longer runs.
fn stopped_process(plane: &ControlPlane) -> Option<&'static str> {
    ["etcd", "kube-apiserver", "kube-controller-manager"]
        .into_iter()
        .find(|p| {
            let pid = std::fs::read_to_string(plane.file(&format!("{p}.pid"))).unwrap_or_default();
            let pid = pid.trim();
            pid.is_empty() || !std::path::Path::new("/proc").join(pid).exists()
        })
}

/// Stops every idle plane (at the end of the run).
pub fn clear() {
    let idle = std::mem::take(&mut *IDLE.lock().unwrap_or_else(|e| e.into_inner()));
    drop(idle);
}

/// The port of this plane's etcd (from `up`'s state file).
fn etcd_port(plane: &ControlPlane) -> Result<String, String> {
    let state = std::fs::read_to_string(plane.file("state")).map_err(|e| format!("state: {e}"))?;
    state
        .lines()
        .find_map(|l| l.strip_prefix("etcd_port="))
        .map(str::to_string)
        .ok_or_else(|| "no etcd_port in state".to_string())
}

/// One call of etcd's JSON gateway (`/v3/...`).
fn etcd(plane: &ControlPlane, path: &str, body: &Value) -> Result<Value, String> {
    let url = format!("http://127.0.0.1:{}/v3/{path}", etcd_port(plane)?);
    let mut child = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "--max-time",
            "20",
            "-X",
            "POST",
            "-d",
            "@-",
            &url,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("curl: {e}"))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(body.to_string().as_bytes())
            .map_err(|e| format!("curl's stdin: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "etcd {path}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("etcd {path}: {e}"))
}

fn encode(s: &str) -> String {
    match serde_json::to_value(k8s_openapi::ByteString(s.as_bytes().to_vec())) {
        Ok(Value::String(s)) => s,
        _ => unreachable!("ByteString serialises as a string"),
    }
}

fn decode(s: &str) -> Result<String, String> {
    let bytes: k8s_openapi::ByteString =
        serde_json::from_value(json!(s)).map_err(|e| format!("base64: {e}"))?;
    String::from_utf8(bytes.0).map_err(|e| format!("key: {e}"))
}

/// Every key under /registry/ with its mod revision and its value (base64): every value with `values`, else only
/// the Namespaces' (what a wipe compares).
fn keys(plane: &ControlPlane, values: bool) -> Result<BTreeMap<String, (i64, String)>, String> {
    let mut all = range(plane, "/registry/", "/registry0", values)?;
    if !values {
        all.extend(range(
            plane,
            "/registry/namespaces/",
            "/registry/namespaces0",
            true,
        )?);
    }
    Ok(all)
}

/// The keys from `from` up to `to` with their mod revisions and, with `values`, their values.
fn range(
    plane: &ControlPlane,
    from: &str,
    to: &str,
    values: bool,
) -> Result<BTreeMap<String, (i64, String)>, String> {
    let answer = etcd(
        plane,
        "kv/range",
        &json!({"key": encode(from), "range_end": encode(to), "keys_only": !values}),
    )?;
    let mut all = BTreeMap::new();
    for kv in answer["kvs"].as_array().into_iter().flatten() {
        let key = decode(kv["key"].as_str().unwrap_or_default())?;
        // The gateway writes 64-bit numbers as strings.
        let rev = match &kv["mod_revision"] {
            Value::String(s) => s.parse().unwrap_or(0),
            v => v.as_i64().unwrap_or(0),
        };
        let value = kv["value"].as_str().unwrap_or_default().to_string();
        all.insert(key, (rev, value));
    }
    Ok(all)
}

/// Whether a key made after `up` is the control plane's own and stays.
fn kept(key: &str) -> bool {
    if KEPT_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return true;
    }
    let Some(rest) = key.strip_prefix("/registry/") else {
        return false;
    };
    KEPT_IN_SYSTEM_NAMESPACES
        .iter()
        .any(|(resource, namespace, name)| {
            rest.strip_prefix(resource)
                .and_then(|r| r.strip_prefix('/'))
                .and_then(|r| r.split_once('/'))
                .is_some_and(|(ns, n)| {
                    SYSTEM_NAMESPACES.contains(&ns)
                        && (*namespace == "*" || *namespace == ns)
                        && (*name == "*" || *name == n)
                })
        })
}

/// What a wipe does: the keys to delete and the Namespaces to write back.
fn plan(
    now: &BTreeMap<String, (i64, String)>,
    baseline: &Baseline,
) -> (Vec<String>, Vec<(String, String)>) {
    let delete = now
        .keys()
        .filter(|k| !baseline.0.contains_key(*k) && !kept(k))
        .cloned()
        .collect();
    let restore = baseline
        .0
        .iter()
        // By value: a Namespace written back has a new revision.
        .filter(|(k, (_, value))| {
            k.starts_with("/registry/namespaces/") && now.get(*k).map(|n| &n.1) != Some(value)
        })
        .map(|(k, (_, v))| (k.clone(), v.clone()))
        .collect();
    (delete, restore)
}

/// Removes what was made since `up` and writes the Namespaces back, in transactions of at most 100 operations
/// (etcd's default limit is 128), until nothing is left: the controller manager may make a namespace's
/// ServiceAccount or root CA ConfigMap again until it has seen the namespace go, so the namespaces go first and the
/// wipe is repeated (at most 5 rounds).
fn wipe(plane: &ControlPlane, baseline: &Baseline) -> Result<(), String> {
    let mut left = Vec::new();
    for round in 0..5 {
        let (delete, restore) = plan(&keys(plane, false)?, baseline);
        if delete.is_empty() && restore.is_empty() {
            return Ok(());
        }
        let (namespaces, rest): (Vec<&String>, Vec<&String>) = delete
            .iter()
            .partition(|k| k.starts_with("/registry/namespaces/"));
        let delete_ops = |keys: Vec<&String>| -> Vec<Value> {
            keys.into_iter()
                .map(|k| json!({"request_delete_range": {"key": encode(k)}}))
                .collect()
        };
        let mut ops = delete_ops(namespaces);
        ops.extend(
            restore
                .iter()
                .map(|(k, v)| json!({"request_put": {"key": encode(k), "value": v}})),
        );
        for batch in [ops, delete_ops(rest)] {
            for chunk in batch.chunks(100) {
                etcd(plane, "kv/txn", &json!({"success": chunk}))?;
            }
        }
        left = delete;
        // Time for the controller manager to see the namespaces go (and make nothing more in them).
        std::thread::sleep(Duration::from_millis(200 * (round + 1)));
    }
    let (delete, restore) = plan(&keys(plane, false)?, baseline);
    if delete.is_empty() && restore.is_empty() {
        return Ok(());
    }
    Err(format!(
        "left after 5 rounds of wiping: {:?} (deleted in the last: {})",
        delete
            .iter()
            .chain(restore.iter().map(|(k, _)| k))
            .take(5)
            .collect::<Vec<_>>(),
        left.len()
    ))
}

/// Waits until the API server's consistent lists show the wipe: the Namespaces of the start only, no Node, and
/// no Workload or ClusterQueue.
async fn settled(plane: &ControlPlane, baseline: &Baseline) -> Result<(), String> {
    use k8s_openapi::api::core::v1::{Namespace, Node};
    use kube::api::{Api, DynamicObject, ListParams};
    let expected: Vec<String> = baseline
        .0
        .keys()
        .filter_map(|k| k.strip_prefix("/registry/namespaces/"))
        .map(str::to_string)
        .collect();
    let client = plane.client().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let namespaces: Vec<String> = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing namespaces: {e}"))?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing nodes: {e}"))?
            .items
            .len();
        let mut kueue_objects = 0;
        for (kind, plural) in [("Workload", "workloads"), ("ClusterQueue", "clusterqueues")] {
            let resource = kube::discovery::ApiResource {
                group: "kueue.x-k8s.io".into(),
                version: "v1beta2".into(),
                api_version: "kueue.x-k8s.io/v1beta2".into(),
                kind: kind.into(),
                plural: plural.into(),
            };
            let listed = Api::<DynamicObject>::all_with(client.clone(), &resource)
                .list(&ListParams::default())
                .await
                .map(|l| l.items.len());
            kueue_objects += match listed {
                Ok(n) => n,
                // Kueue's CRDs are not installed on a plane whose manager never started.
                Err(kube::Error::Api(e)) if e.code == 404 => 0,
                Err(e) => return Err(format!("listing {plural}: {e}")),
            };
        }
        let mut sorted = namespaces.clone();
        sorted.sort();
        if sorted == expected && nodes == 0 && kueue_objects == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "after 30 s the API server still lists namespaces {namespaces:?}, {nodes} nodes, \
                 {kueue_objects} Workloads and ClusterQueues"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: &[(&str, i64)]) -> BTreeMap<String, (i64, String)> {
        list.iter()
            .map(|(k, r)| (k.to_string(), (*r, format!("v{r}"))))
            .collect()
    }

    #[test]
    fn a_wipe_removes_what_came_after_and_writes_changed_namespaces_back() {
        let baseline = Baseline(keys(&[
            ("/registry/namespaces/default", 5),
            ("/registry/namespaces/kube-system", 6),
            ("/registry/priorityclasses/system-node-critical", 7),
        ]));
        let now = keys(&[
            // Labelled by a scenario.
            ("/registry/namespaces/default", 40),
            ("/registry/namespaces/kube-system", 6),
            ("/registry/namespaces/team-a", 41),
            ("/registry/priorityclasses/system-node-critical", 7),
            ("/registry/priorityclasses/high", 42),
            ("/registry/jobs/default/job-a", 43),
            ("/registry/serviceaccounts/team-a/default", 44),
            ("/registry/configmaps/default/settings", 52),
            ("/registry/kueue.x-k8s.io/workloads/team-a/job-a-1", 45),
            ("/registry/minions/node-1", 46),
            // The control plane's own, made after up.
            ("/registry/serviceaccounts/kube-system/default", 47),
            ("/registry/configmaps/kube-public/kube-root-ca.crt", 48),
            ("/registry/leases/kube-system/kube-controller-manager", 49),
            (
                "/registry/apiextensions.k8s.io/customresourcedefinitions/workloads.kueue.x-k8s.io",
                50,
            ),
            (
                "/registry/apiregistration.k8s.io/apiservices/v1beta2.kueue.x-k8s.io",
                51,
            ),
        ]);
        let (delete, restore) = plan(&now, &baseline);
        assert_eq!(
            delete,
            [
                "/registry/configmaps/default/settings",
                "/registry/jobs/default/job-a",
                "/registry/kueue.x-k8s.io/workloads/team-a/job-a-1",
                "/registry/minions/node-1",
                "/registry/namespaces/team-a",
                "/registry/priorityclasses/high",
                "/registry/serviceaccounts/team-a/default",
            ]
        );
        assert_eq!(
            restore,
            [("/registry/namespaces/default".to_string(), "v5".to_string())]
        );
        // Once wiped: the Namespace written back has a new revision and the value of the start.
        let mut after: BTreeMap<String, (i64, String)> = now
            .into_iter()
            .filter(|(k, _)| !delete.contains(k))
            .collect();
        after.insert("/registry/namespaces/default".into(), (60, "v5".into()));
        assert_eq!(plan(&after, &baseline), (vec![], vec![]));
    }
}
