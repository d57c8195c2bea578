//! `kubectl kueue`-style subcommands against the cluster of the current kubeconfig: list, create, stop and
//! resume Kueue's queues and workloads. Each command is an async function over a `kube::Client`, so tests
//! drive it with recorded API responses.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};
use sluice_sdk::kueue::v1beta2 as api;

use super::{CliError, Namespaces, Output, age, namespace_of, namespaced};
use crate::output::{OutputFormat, encode, list, table};
use sluice_sdk::topology::GPU_RESOURCE;

/// `sluice list ...`.
#[derive(clap::Subcommand, Debug)]
pub enum ListCommand {
    /// ClusterQueues with their cohort, workload counts, state and GPU use.
    #[command(alias = "clusterqueue", alias = "cq")]
    Clusterqueues {
        /// Only active (true) or only inactive (false) ClusterQueues.
        #[arg(long)]
        active: Option<bool>,
        #[command(flatten)]
        out: Output,
    },
    /// LocalQueues with their ClusterQueue and workload counts.
    #[command(alias = "localqueue", alias = "lq")]
    Localqueues {
        #[command(flatten)]
        ns: Namespaces,
        /// Only LocalQueues of this ClusterQueue.
        #[arg(short = 'c', long)]
        clusterqueue: Option<String>,
        #[command(flatten)]
        out: Output,
    },
    /// Workloads: pending (with position in queue and why they wait), admitted, finished.
    #[command(alias = "workload", alias = "wl")]
    Workloads {
        #[command(flatten)]
        ns: Namespaces,
        /// Only workloads of this ClusterQueue.
        #[arg(short = 'c', long)]
        clusterqueue: Option<String>,
        /// Only workloads of this LocalQueue.
        #[arg(short = 'q', long)]
        localqueue: Option<String>,
        /// Only workloads in these states (repeatable; default all).
        #[arg(long, value_enum)]
        status: Vec<WorkloadStatus>,
        #[command(flatten)]
        out: Output,
    },
    /// ResourceFlavors with their node labels, taints and topology.
    #[command(alias = "resourceflavor", alias = "rf")]
    Resourceflavors {
        #[command(flatten)]
        out: Output,
    },
}

/// A workload's state, as listed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkloadStatus {
    /// Waiting for quota or admission checks, or deactivated.
    Pending,
    /// Admitted (quota reserved and checks passed).
    Admitted,
    /// Finished.
    Finished,
}

/// `sluice create ...`.
#[derive(clap::Subcommand, Debug)]
pub enum CreateCommand {
    /// A ClusterQueue.
    #[command(alias = "cq")]
    Clusterqueue {
        /// Its name.
        name: String,
        /// The cohort it joins.
        #[arg(long)]
        cohort: Option<String>,
        /// StrictFIFO or BestEffortFIFO.
        #[arg(long, value_parser = ["StrictFIFO", "BestEffortFIFO"])]
        queuing_strategy: Option<String>,
        /// Namespaces whose LocalQueues may use it, as key=value[,key=value] labels (default: all).
        #[arg(long)]
        namespace_selector: Option<String>,
        /// Preemption to reclaim quota lent to the cohort: Never, LowerPriority or Any.
        #[arg(long, value_parser = ["Never", "LowerPriority", "Any"])]
        reclaim_within_cohort: Option<String>,
        /// Preemption within the ClusterQueue: Never, LowerPriority or LowerOrNewerEqualPriority.
        #[arg(long, value_parser = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"])]
        preemption_within_cluster_queue: Option<String>,
        /// FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...] (repeatable, one per flavor).
        #[arg(long)]
        nominal_quota: Vec<String>,
        /// FLAVOR:RESOURCE=QUANTITY[;...] borrowing limits (repeatable).
        #[arg(long)]
        borrowing_limit: Vec<String>,
        /// FLAVOR:RESOURCE=QUANTITY[;...] lending limits (repeatable).
        #[arg(long)]
        lending_limit: Vec<String>,
        #[command(flatten)]
        out: Output,
    },
    /// A LocalQueue.
    #[command(alias = "lq")]
    Localqueue {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// The ClusterQueue it feeds.
        #[arg(short = 'c', long)]
        clusterqueue: String,
        /// Create it even when the ClusterQueue does not exist (yet).
        #[arg(short = 'i', long)]
        ignore_unknown_cq: bool,
        #[command(flatten)]
        out: Output,
    },
    /// A ResourceFlavor.
    #[command(alias = "rf")]
    Resourceflavor {
        /// Its name.
        name: String,
        /// Node labels, key=value[,key=value].
        #[arg(long)]
        node_labels: Option<String>,
        /// Node taints, key[=value]:Effect[,...].
        #[arg(long)]
        node_taints: Option<String>,
        /// Tolerations, key[=value]:Effect[,...].
        #[arg(long)]
        tolerations: Option<String>,
        /// The Topology for topology-aware scheduling.
        #[arg(long)]
        topology_name: Option<String>,
        #[command(flatten)]
        out: Output,
    },
}

/// `sluice stop ...`.
#[derive(clap::Subcommand, Debug)]
pub enum StopCommand {
    /// Stop a ClusterQueue: stopPolicy HoldAndDrain, or Hold with --keep-already-running.
    #[command(alias = "cq")]
    Clusterqueue {
        /// Its name.
        name: String,
        /// Let admitted workloads run on (Hold) instead of evicting them (HoldAndDrain).
        #[arg(long)]
        keep_already_running: bool,
    },
    /// Stop a LocalQueue: stopPolicy HoldAndDrain, or Hold with --keep-already-running.
    #[command(alias = "lq")]
    Localqueue {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// Let admitted workloads run on (Hold) instead of evicting them (HoldAndDrain).
        #[arg(long)]
        keep_already_running: bool,
    },
    /// Deactivate a Workload (spec.active=false): it is evicted if admitted and not admitted again.
    #[command(alias = "wl")]
    Workload {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
}

/// `sluice resume ...`.
#[derive(clap::Subcommand, Debug)]
pub enum ResumeCommand {
    /// Resume a ClusterQueue (stopPolicy None).
    #[command(alias = "cq")]
    Clusterqueue {
        /// Its name.
        name: String,
    },
    /// Resume a LocalQueue (stopPolicy None).
    #[command(alias = "lq")]
    Localqueue {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Reactivate a Workload (spec.active=true).
    #[command(alias = "wl")]
    Workload {
        /// Its name.
        name: String,
        /// Namespace (default: the kubeconfig context's).
        #[arg(short, long)]
        namespace: Option<String>,
    },
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn condition_true(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> Option<bool> {
    crate::status::condition(conditions, t).map(|c| c.status == "True")
}

fn stop_policy(p: Option<&api::StopPolicy>) -> &'static str {
    match p {
        Some(api::StopPolicy::Hold) => "Hold",
        Some(api::StopPolicy::HoldAndDrain) => "HoldAndDrain",
        _ => "None",
    }
}

/// GPUs a quantity list holds of nvidia.com/gpu, summed over flavors.
fn gpus<'a>(resources: impl Iterator<Item = (&'a str, &'a Quantity)>) -> i64 {
    resources
        .filter(|(r, _)| *r == GPU_RESOURCE)
        .filter_map(|(_, q)| sluice_sdk::quantity::resource_value(GPU_RESOURCE, q).ok())
        .sum()
}

pub(super) async fn list_command(
    client: &kube::Client,
    command: ListCommand,
    now: i64,
) -> Result<String, CliError> {
    match command {
        ListCommand::Clusterqueues { active, out } => {
            let mut items = Api::<api::ClusterQueue>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items;
            if let Some(want) = active {
                items.retain(|cq| {
                    let conds = cq
                        .status
                        .as_ref()
                        .map(|s| s.conditions.as_slice())
                        .unwrap_or_default();
                    condition_true(conds, "Active").unwrap_or(false) == want
                });
            }
            match out.output {
                OutputFormat::Table => Ok(cluster_queue_table(&items, now)),
                f => list(&items, f),
            }
        }
        ListCommand::Localqueues {
            ns,
            clusterqueue,
            out,
        } => {
            let mut items = namespaced::<api::LocalQueue>(client, &ns)
                .list(&ListParams::default())
                .await?
                .items;
            if let Some(cq) = &clusterqueue {
                items.retain(|lq| &lq.spec.cluster_queue == cq);
            }
            match out.output {
                OutputFormat::Table => Ok(local_queue_table(&items, ns.all_namespaces, now)),
                f => list(&items, f),
            }
        }
        ListCommand::Workloads {
            ns,
            clusterqueue,
            localqueue,
            status,
            out,
        } => {
            list_workloads(
                client,
                &ns,
                clusterqueue,
                localqueue,
                &status,
                out.output,
                now,
            )
            .await
        }
        ListCommand::Resourceflavors { out } => {
            let items = Api::<api::ResourceFlavor>::all(client.clone())
                .list(&ListParams::default())
                .await?
                .items;
            match out.output {
                OutputFormat::Table => Ok(resource_flavor_table(&items, now)),
                f => list(&items, f),
            }
        }
    }
}

/// The ClusterQueues table.
pub fn cluster_queue_table(items: &[api::ClusterQueue], now: i64) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|cq| {
            let st = cq.status.clone().unwrap_or_default();
            let nominal = gpus(
                cq.spec
                    .resource_groups
                    .iter()
                    .flat_map(|g| g.flavors.iter())
                    .flat_map(|f| f.resources.iter())
                    .map(|r| (r.name.as_str(), &r.nominal_quota)),
            );
            let used = gpus(
                st.flavors_usage
                    .iter()
                    .flat_map(|f| f.resources.iter())
                    .map(|r| (r.name.as_str(), &r.total)),
            );
            vec![
                name(&cq.metadata),
                if cq.spec.cohort_name.is_empty() {
                    "-".into()
                } else {
                    cq.spec.cohort_name.clone()
                },
                match cq.spec.queueing_strategy {
                    Some(api::QueueingStrategy::StrictFIFO) => "StrictFIFO".into(),
                    _ => "BestEffortFIFO".into(),
                },
                st.pending_workloads.to_string(),
                st.admitted_workloads.to_string(),
                match condition_true(&st.conditions, "Active") {
                    Some(true) => "true".into(),
                    Some(false) => "false".into(),
                    None => "unknown".into(),
                },
                stop_policy(cq.spec.stop_policy.as_ref()).into(),
                format!("{used}/{nominal}"),
                age(cq.metadata.creation_timestamp.as_ref(), now),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING",
            "ADMITTED",
            "ACTIVE",
            "STOP POLICY",
            "GPUS USED/NOMINAL",
            "AGE",
        ],
        &rows,
    )
}

/// The LocalQueues table.
pub fn local_queue_table(items: &[api::LocalQueue], with_namespace: bool, now: i64) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|lq| {
            let st = lq.status.clone().unwrap_or_default();
            let mut row = vec![
                name(&lq.metadata),
                lq.spec.cluster_queue.clone(),
                st.pending_workloads.to_string(),
                st.admitted_workloads.to_string(),
                stop_policy(lq.spec.stop_policy.as_ref()).into(),
                age(lq.metadata.creation_timestamp.as_ref(), now),
            ];
            if with_namespace {
                row.insert(0, lq.metadata.namespace.clone().unwrap_or_default());
            }
            row
        })
        .collect();
    let mut header = vec![
        "NAME",
        "CLUSTERQUEUE",
        "PENDING",
        "ADMITTED",
        "STOP POLICY",
        "AGE",
    ];
    if with_namespace {
        header.insert(0, "NAMESPACE");
    }
    table(&header, &rows)
}

/// The ResourceFlavors table.
pub fn resource_flavor_table(items: &[api::ResourceFlavor], now: i64) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|rf| {
            let labels: Vec<String> = rf
                .spec
                .node_labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let taints: Vec<String> = rf
                .spec
                .node_taints
                .iter()
                .map(|t| match &t.value {
                    Some(v) => format!("{}={v}:{}", t.key, t.effect),
                    None => format!("{}:{}", t.key, t.effect),
                })
                .collect();
            let dash = |v: Vec<String>| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    v.join(",")
                }
            };
            vec![
                name(&rf.metadata),
                dash(labels),
                dash(taints),
                rf.spec.topology_name.clone().unwrap_or_else(|| "-".into()),
                age(rf.metadata.creation_timestamp.as_ref(), now),
            ]
        })
        .collect();
    table(
        &["NAME", "NODE LABELS", "NODE TAINTS", "TOPOLOGY", "AGE"],
        &rows,
    )
}

/// A workload's listed state and why it waits (empty when it does not).
pub fn workload_state(wl: &api::Workload) -> (WorkloadStatus, String) {
    let conds = wl
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let cond = |t| crate::status::condition(conds, t);
    if let Some(c) = cond("Finished").filter(|c| c.status == "True") {
        return (WorkloadStatus::Finished, c.reason.clone());
    }
    if cond("Admitted").is_some_and(|c| c.status == "True") {
        return (WorkloadStatus::Admitted, String::new());
    }
    if wl.spec.active == Some(false) {
        return (
            WorkloadStatus::Pending,
            "Deactivated (spec.active=false)".into(),
        );
    }
    if cond("QuotaReserved").is_some_and(|c| c.status == "True") {
        return (
            WorkloadStatus::Pending,
            "QuotaReserved: waiting for admission checks".into(),
        );
    }
    match cond("QuotaReserved") {
        Some(c) if !c.message.is_empty() => (
            WorkloadStatus::Pending,
            format!("{}: {}", c.reason, c.message),
        ),
        Some(c) => (WorkloadStatus::Pending, c.reason.clone()),
        None => (WorkloadStatus::Pending, "not yet attempted".into()),
    }
}

/// GPUs a workload asks for: pod count times each pod's nvidia.com/gpu (limits, else requests).
pub fn workload_gpus(wl: &api::Workload) -> i64 {
    wl.spec
        .pod_sets
        .iter()
        .map(|ps| {
            let per_pod: i64 = ps
                .template
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .filter_map(|c| {
                    let r = c.resources.as_ref()?;
                    let q = r
                        .limits
                        .as_ref()
                        .and_then(|l| l.get(GPU_RESOURCE))
                        .or_else(|| r.requests.as_ref().and_then(|l| l.get(GPU_RESOURCE)))?;
                    sluice_sdk::quantity::resource_value(GPU_RESOURCE, q).ok()
                })
                .sum();
            per_pod * i64::from(ps.count)
        })
        .sum()
}

/// Positions of a ClusterQueue's pending workloads from Kueue's visibility API, by namespace/name; empty when
/// the API is not served.
async fn positions(client: &kube::Client, cluster_queue: &str) -> BTreeMap<(String, String), i64> {
    let path = format!(
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{cluster_queue}/pendingworkloads"
    );
    let Ok(request) = http::Request::get(path).body(Vec::new()) else {
        return BTreeMap::new();
    };
    let summary: Value = match client.request(request).await {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!(cluster_queue, error = %e, "no positions from the visibility API");
            return BTreeMap::new();
        }
    };
    summary["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            Some((
                (
                    i["metadata"]["namespace"].as_str()?.to_string(),
                    i["metadata"]["name"].as_str()?.to_string(),
                ),
                i["positionInClusterQueue"].as_i64()?,
            ))
        })
        .collect()
}

async fn list_workloads(
    client: &kube::Client,
    ns: &Namespaces,
    clusterqueue: Option<String>,
    localqueue: Option<String>,
    status: &[WorkloadStatus],
    output: OutputFormat,
    now: i64,
) -> Result<String, CliError> {
    let mut items = namespaced::<api::Workload>(client, ns)
        .list(&ListParams::default())
        .await?
        .items;
    // A pending workload's ClusterQueue comes from its LocalQueue.
    let lqs: BTreeMap<(String, String), String> = namespaced::<api::LocalQueue>(client, ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|lq| {
            (
                (
                    lq.metadata.namespace.clone().unwrap_or_default(),
                    name(&lq.metadata),
                ),
                lq.spec.cluster_queue,
            )
        })
        .collect();
    let cq_of = |wl: &api::Workload| -> String {
        if let Some(a) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) {
            return a.cluster_queue.clone();
        }
        let key = (
            wl.metadata.namespace.clone().unwrap_or_default(),
            wl.spec.queue_name.clone(),
        );
        lqs.get(&key).cloned().unwrap_or_default()
    };
    items.retain(|wl| {
        clusterqueue.as_ref().is_none_or(|c| &cq_of(wl) == c)
            && localqueue.as_ref().is_none_or(|q| &wl.spec.queue_name == q)
            && (status.is_empty() || status.contains(&workload_state(wl).0))
    });
    if output != OutputFormat::Table {
        return list(&items, output);
    }
    let mut pending_cqs: Vec<String> = items
        .iter()
        .filter(|wl| workload_state(wl).0 == WorkloadStatus::Pending)
        .map(&cq_of)
        .filter(|c| !c.is_empty())
        .collect();
    pending_cqs.sort();
    pending_cqs.dedup();
    let mut position = BTreeMap::new();
    for cq in pending_cqs {
        position.extend(positions(client, &cq).await);
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|wl| {
            let (state, why) = workload_state(wl);
            let key = (
                wl.metadata.namespace.clone().unwrap_or_default(),
                name(&wl.metadata),
            );
            let mut row = vec![
                name(&wl.metadata),
                wl.spec.queue_name.clone(),
                match cq_of(wl) {
                    c if c.is_empty() => "-".into(),
                    c => c,
                },
                format!("{state:?}"),
                match (state, position.get(&key)) {
                    (WorkloadStatus::Pending, Some(p)) => p.to_string(),
                    _ => "-".into(),
                },
                workload_gpus(wl).to_string(),
                age(wl.metadata.creation_timestamp.as_ref(), now),
                if why.is_empty() { "-".into() } else { why },
            ];
            if ns.all_namespaces {
                row.insert(0, key.0);
            }
            row
        })
        .collect();
    let mut header = vec![
        "NAME",
        "LOCALQUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION",
        "GPUS",
        "AGE",
        "REASON",
    ];
    if ns.all_namespaces {
        header.insert(0, "NAMESPACE");
    }
    Ok(table(&header, &rows))
}

/// Parses key=value[,key=value].
fn key_values(flag: &'static str, text: &str) -> Result<BTreeMap<String, String>, CliError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(CliError::Flag {
                flag,
                value: text.to_string(),
                reason: format!("`{kv}` is not key=value"),
            }),
        })
        .collect()
}

/// Parses key[=value]:Effect[,...] into taint-like JSON objects.
fn taints(flag: &'static str, text: &str, toleration: bool) -> Result<Vec<Value>, CliError> {
    let bad = |reason: String| CliError::Flag {
        flag,
        value: text.to_string(),
        reason,
    };
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|t| {
            let (kv, effect) = t
                .rsplit_once(':')
                .ok_or_else(|| bad(format!("`{t}` has no :Effect")))?;
            if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
                return Err(bad(format!(
                    "effect `{effect}` is not NoSchedule, PreferNoSchedule or NoExecute"
                )));
            }
            let (key, value) = match kv.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (kv, None),
            };
            if key.is_empty() {
                return Err(bad(format!("`{t}` has no key")));
            }
            let mut o = json!({"key": key, "effect": effect});
            if let Some(v) = value {
                o["value"] = v.into();
            }
            if toleration {
                o["operator"] = if value.is_some() { "Equal" } else { "Exists" }.into();
            }
            Ok(o)
        })
        .collect()
}

/// Parses FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...] flags into flavor -> resource -> quantity.
fn quotas(
    flag: &'static str,
    values: &[String],
) -> Result<BTreeMap<String, Vec<(String, Quantity)>>, CliError> {
    let mut out: BTreeMap<String, Vec<(String, Quantity)>> = BTreeMap::new();
    for text in values {
        let bad = |reason: String| CliError::Flag {
            flag,
            value: text.clone(),
            reason,
        };
        let (flavor, rest) = text
            .split_once(':')
            .ok_or_else(|| bad("expected FLAVOR:RESOURCE=QUANTITY[;...]".into()))?;
        if flavor.is_empty() {
            return Err(bad("no flavor name".into()));
        }
        let entry = out.entry(flavor.to_string()).or_default();
        for pair in rest.split(';').filter(|p| !p.is_empty()) {
            let (res, q) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("`{pair}` is not RESOURCE=QUANTITY")))?;
            let quantity = Quantity(q.to_string());
            sluice_sdk::quantity::resource_value(res, &quantity)
                .map_err(|e| bad(format!("{res}: {e}")))?;
            if entry.iter().any(|(r, _)| r == res) {
                return Err(bad(format!("{flavor}:{res} given twice")));
            }
            entry.push((res.to_string(), quantity));
        }
    }
    Ok(out)
}

/// Resource groups from per-flavor quotas: flavors covering the same resources share a group, in flag order.
fn resource_groups(
    nominal: &BTreeMap<String, Vec<(String, Quantity)>>,
    borrowing: &BTreeMap<String, Vec<(String, Quantity)>>,
    lending: &BTreeMap<String, Vec<(String, Quantity)>>,
) -> Result<Vec<Value>, CliError> {
    for (flag, limits) in [("borrowing-limit", borrowing), ("lending-limit", lending)] {
        for (flavor, rs) in limits {
            for (r, _) in rs {
                let known = nominal
                    .get(flavor)
                    .is_some_and(|n| n.iter().any(|(nr, _)| nr == r));
                if !known {
                    return Err(CliError::Flag {
                        flag,
                        value: format!("{flavor}:{r}"),
                        reason: "no --nominal-quota for this flavor and resource".into(),
                    });
                }
            }
        }
    }
    let mut groups: Vec<(Vec<String>, Vec<Value>)> = Vec::new();
    for (flavor, rs) in nominal {
        let mut covered: Vec<String> = rs.iter().map(|(r, _)| r.clone()).collect();
        covered.sort();
        let limit = |m: &BTreeMap<String, Vec<(String, Quantity)>>, r: &str| {
            m.get(flavor)
                .and_then(|v| v.iter().find(|(lr, _)| lr == r))
                .map(|(_, q)| q.0.clone())
        };
        let resources: Vec<Value> = covered
            .iter()
            .map(|r| {
                let q = rs
                    .iter()
                    .find(|(nr, _)| nr == r)
                    .map(|(_, q)| q.0.clone())
                    .unwrap_or_default();
                let mut o = json!({"name": r, "nominalQuota": q});
                if let Some(b) = limit(borrowing, r) {
                    o["borrowingLimit"] = b.into();
                }
                if let Some(l) = limit(lending, r) {
                    o["lendingLimit"] = l.into();
                }
                o
            })
            .collect();
        let flavor_quotas = json!({"name": flavor, "resources": resources});
        match groups.iter_mut().find(|(c, _)| *c == covered) {
            Some((_, flavors)) => flavors.push(flavor_quotas),
            None => {
                if let Some(r) = covered
                    .iter()
                    .find(|r| groups.iter().any(|(c, _)| c.contains(r)))
                {
                    return Err(CliError::Flag {
                        flag: "nominal-quota",
                        value: flavor.clone(),
                        reason: format!(
                            "resource {r} is covered by flavors with a different set of resources; \
                             flavors sharing a resource must list the same resources"
                        ),
                    });
                }
                groups.push((covered, vec![flavor_quotas]));
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|(covered, flavors)| json!({"coveredResources": covered, "flavors": flavors}))
        .collect())
}

/// The ClusterQueue the create flags describe.
#[allow(clippy::too_many_arguments)]
pub fn build_cluster_queue(
    name: &str,
    cohort: Option<&str>,
    queuing_strategy: Option<&str>,
    namespace_selector: Option<&str>,
    reclaim_within_cohort: Option<&str>,
    preemption_within_cluster_queue: Option<&str>,
    nominal_quota: &[String],
    borrowing_limit: &[String],
    lending_limit: &[String],
) -> Result<api::ClusterQueue, CliError> {
    let nominal = quotas("nominal-quota", nominal_quota)?;
    let groups = resource_groups(
        &nominal,
        &quotas("borrowing-limit", borrowing_limit)?,
        &quotas("lending-limit", lending_limit)?,
    )?;
    let selector = match namespace_selector {
        Some(s) => serde_json::to_value(LabelSelector {
            match_labels: Some(key_values("namespace-selector", s)?),
            ..LabelSelector::default()
        })?,
        // Kueue: an empty selector matches every namespace.
        None => json!({}),
    };
    let mut spec = json!({"namespaceSelector": selector, "resourceGroups": groups});
    if let Some(c) = cohort {
        spec["cohortName"] = c.into();
    }
    if let Some(q) = queuing_strategy {
        spec["queueingStrategy"] = q.into();
    }
    let mut preemption = json!({});
    if let Some(p) = reclaim_within_cohort {
        preemption["reclaimWithinCohort"] = p.into();
    }
    if let Some(p) = preemption_within_cluster_queue {
        preemption["withinClusterQueue"] = p.into();
    }
    if preemption != json!({}) {
        spec["preemption"] = preemption;
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": name}, "spec": spec,
    }))?)
}

fn created<T: Serialize>(
    kind: &str,
    name: &str,
    obj: &T,
    output: OutputFormat,
) -> Result<String, CliError> {
    match output {
        OutputFormat::Table => Ok(format!("{kind}.kueue.x-k8s.io/{name} created\n")),
        f => encode(&serde_json::to_value(obj)?, f),
    }
}

pub(super) async fn create_command(
    client: &kube::Client,
    command: CreateCommand,
) -> Result<String, CliError> {
    let pp = PostParams::default();
    match command {
        CreateCommand::Clusterqueue {
            name,
            cohort,
            queuing_strategy,
            namespace_selector,
            reclaim_within_cohort,
            preemption_within_cluster_queue,
            nominal_quota,
            borrowing_limit,
            lending_limit,
            out,
        } => {
            let cq = build_cluster_queue(
                &name,
                cohort.as_deref(),
                queuing_strategy.as_deref(),
                namespace_selector.as_deref(),
                reclaim_within_cohort.as_deref(),
                preemption_within_cluster_queue.as_deref(),
                &nominal_quota,
                &borrowing_limit,
                &lending_limit,
            )?;
            let made = Api::<api::ClusterQueue>::all(client.clone())
                .create(&pp, &cq)
                .await?;
            created("clusterqueue", &name, &made, out.output)
        }
        CreateCommand::Localqueue {
            name,
            namespace,
            clusterqueue,
            ignore_unknown_cq,
            out,
        } => {
            if !ignore_unknown_cq {
                let cqs = Api::<api::ClusterQueue>::all(client.clone());
                if cqs.get_opt(&clusterqueue).await?.is_none() {
                    return Err(CliError::Flag {
                        flag: "clusterqueue",
                        value: clusterqueue,
                        reason: "no such ClusterQueue (pass --ignore-unknown-cq to create the LocalQueue anyway)".into(),
                    });
                }
            }
            let ns = namespace_of(client, namespace);
            let lq: api::LocalQueue = serde_json::from_value(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": clusterqueue},
            }))?;
            let made = Api::<api::LocalQueue>::namespaced(client.clone(), &ns)
                .create(&pp, &lq)
                .await?;
            created("localqueue", &name, &made, out.output)
        }
        CreateCommand::Resourceflavor {
            name,
            node_labels,
            node_taints,
            tolerations,
            topology_name,
            out,
        } => {
            let mut spec = json!({});
            if let Some(l) = node_labels {
                spec["nodeLabels"] = serde_json::to_value(key_values("node-labels", &l)?)?;
            }
            if let Some(t) = node_taints {
                spec["nodeTaints"] = taints("node-taints", &t, false)?.into();
            }
            if let Some(t) = tolerations {
                spec["tolerations"] = taints("tolerations", &t, true)?.into();
            }
            if let Some(t) = topology_name {
                spec["topologyName"] = t.into();
            }
            let rf: api::ResourceFlavor = serde_json::from_value(json!({
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                "metadata": {"name": name}, "spec": spec,
            }))?;
            let made = Api::<api::ResourceFlavor>::all(client.clone())
                .create(&pp, &rf)
                .await?;
            created("resourceflavor", &name, &made, out.output)
        }
    }
}

async fn patch_merge<K>(api: &Api<K>, name: &str, patch: Value) -> Result<(), CliError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

pub(super) async fn stop_command(
    client: &kube::Client,
    command: StopCommand,
) -> Result<String, CliError> {
    let policy = |keep: bool| if keep { "Hold" } else { "HoldAndDrain" };
    match command {
        StopCommand::Clusterqueue {
            name,
            keep_already_running,
        } => {
            let p = policy(keep_already_running);
            let api = Api::<api::ClusterQueue>::all(client.clone());
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": p}})).await?;
            Ok(format!(
                "clusterqueue.kueue.x-k8s.io/{name} stopped ({p})\n"
            ))
        }
        StopCommand::Localqueue {
            name,
            namespace,
            keep_already_running,
        } => {
            let p = policy(keep_already_running);
            let api = Api::<api::LocalQueue>::namespaced(
                client.clone(),
                &namespace_of(client, namespace),
            );
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": p}})).await?;
            Ok(format!("localqueue.kueue.x-k8s.io/{name} stopped ({p})\n"))
        }
        StopCommand::Workload { name, namespace } => {
            let api =
                Api::<api::Workload>::namespaced(client.clone(), &namespace_of(client, namespace));
            patch_merge(&api, &name, json!({"spec": {"active": false}})).await?;
            Ok(format!(
                "workload.kueue.x-k8s.io/{name} stopped (deactivated)\n"
            ))
        }
    }
}

pub(super) async fn resume_command(
    client: &kube::Client,
    command: ResumeCommand,
) -> Result<String, CliError> {
    match command {
        ResumeCommand::Clusterqueue { name } => {
            let api = Api::<api::ClusterQueue>::all(client.clone());
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": "None"}})).await?;
            Ok(format!("clusterqueue.kueue.x-k8s.io/{name} resumed\n"))
        }
        ResumeCommand::Localqueue { name, namespace } => {
            let api = Api::<api::LocalQueue>::namespaced(
                client.clone(),
                &namespace_of(client, namespace),
            );
            patch_merge(&api, &name, json!({"spec": {"stopPolicy": "None"}})).await?;
            Ok(format!("localqueue.kueue.x-k8s.io/{name} resumed\n"))
        }
        ResumeCommand::Workload { name, namespace } => {
            let api =
                Api::<api::Workload>::namespaced(client.clone(), &namespace_of(client, namespace));
            patch_merge(&api, &name, json!({"spec": {"active": true}})).await?;
            Ok(format!("workload.kueue.x-k8s.io/{name} resumed\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    //! The commands against recorded API server responses, served by a tower service in place of the cluster.

    use super::*;
    use crate::cli::test_support::*;

    fn local_queues() -> Value {
        kueue_list(
            "LocalQueue",
            vec![
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": meta("main", Some("team-a")), "spec": {"clusterQueue": "team-a"},
                "status": {"pendingWorkloads": 2, "admittedWorkloads": 1, "reservingWorkloads": 1}}),
            ],
        )
    }

    fn workload(
        name: &str,
        gpus: i64,
        count: i64,
        conditions: Vec<Value>,
        admitted_in: Option<&str>,
    ) -> Value {
        let mut status = json!({"conditions": conditions});
        if let Some(cq) = admitted_in {
            status["admission"] = json!({"clusterQueue": cq, "podSetAssignments": [
                {"name": "main", "flavors": {"nvidia.com/gpu": "h100"}, "resourceUsage": {"nvidia.com/gpu": "8"},
                 "count": count}]});
        }
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta(name, Some("team-a")),
            "spec": {"queueName": "main", "podSets": [{"name": "main", "count": count, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}}]},
            "status": status})
    }

    fn workloads() -> Value {
        kueue_list(
            "Workload",
            vec![
                workload(
                    "job-train",
                    8,
                    1,
                    vec![
                        cond(
                            "QuotaReserved",
                            "True",
                            "QuotaReserved",
                            "Quota reserved in ClusterQueue team-a",
                        ),
                        cond("Admitted", "True", "Admitted", "The workload is admitted"),
                    ],
                    Some("team-a"),
                ),
                workload(
                    "job-big",
                    8,
                    2,
                    vec![cond(
                        "QuotaReserved",
                        "False",
                        "Pending",
                        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 12 more needed",
                    )],
                    None,
                ),
                workload("job-next", 4, 1, vec![], None),
                workload(
                    "job-done",
                    2,
                    1,
                    vec![cond(
                        "Finished",
                        "True",
                        "Succeeded",
                        "Job finished successfully",
                    )],
                    Some("team-a"),
                ),
            ],
        )
    }

    fn visibility() -> Value {
        json!({"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {},
            "items": [
                {"metadata": {"name": "job-big", "namespace": "team-a"}, "priority": 0, "localQueueName": "main",
                 "positionInClusterQueue": 0, "positionInLocalQueue": 0},
                {"metadata": {"name": "job-next", "namespace": "team-a"}, "priority": 0, "localQueueName": "main",
                 "positionInClusterQueue": 1, "positionInLocalQueue": 1}]})
    }

    const CQS: &str = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues";

    fn cluster_routes() -> Vec<(&'static str, String, Value)> {
        vec![
            ("GET", CQS.to_string(), cluster_queues()),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues".into(),
                local_queues(),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads".into(),
                workloads(),
            ),
            (
                "GET",
                "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/team-a/pendingworkloads"
                    .into(),
                visibility(),
            ),
            (
                "GET",
                "/apis/kueue.x-k8s.io/v1beta2/resourceflavors".into(),
                kueue_list(
                    "ResourceFlavor",
                    vec![
                        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": meta("h100", None), "spec": {"nodeLabels": {"nvidia.com/gpu.product": "H100"},
                    "nodeTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], "topologyName": "default"}}),
                    ],
                ),
            ),
        ]
    }

    /// The whitespace-separated cells of the table row starting with `first`.
    fn row(table: &str, first: &str) -> Vec<String> {
        table
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .find(|cells| cells.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first} in\n{table}"))
    }

    #[test]
    fn list_cluster_queues() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let t = run_with(&m, &["list", "clusterqueues"])?;
        assert!(t.starts_with("NAME"), "{t}");
        assert_eq!(
            row(&t, "team-a"),
            [
                "team-a",
                "ai",
                "BestEffortFIFO",
                "2",
                "1",
                "true",
                "None",
                "20/16",
                "3h"
            ]
        );
        assert_eq!(
            row(&t, "team-b"),
            [
                "team-b",
                "-",
                "StrictFIFO",
                "0",
                "0",
                "false",
                "Hold",
                "0/0",
                "3h"
            ]
        );
        let inactive = run_with(&m, &["list", "cq", "--active", "false"])?;
        assert!(!inactive.contains("team-a") && inactive.contains("team-b"));
        Ok(())
    }

    #[test]
    fn list_local_queues_and_flavors() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let t = run_with(&m, &["list", "localqueues"])?;
        assert_eq!(row(&t, "main"), ["main", "team-a", "2", "1", "None", "3h"]);
        assert!(m.calls()[0].path.contains("/namespaces/team-a/"));
        let t = run_with(&m, &["list", "resourceflavors"])?;
        assert_eq!(
            row(&t, "h100"),
            [
                "h100",
                "nvidia.com/gpu.product=H100",
                "nvidia.com/gpu:NoSchedule",
                "default",
                "3h"
            ]
        );
        Ok(())
    }

    #[test]
    fn list_workloads_with_position_and_reason() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let t = run_with(&m, &["list", "workloads"])?;
        assert_eq!(
            row(&t, "job-train")[..7],
            ["job-train", "main", "team-a", "Admitted", "-", "8", "3h"]
        );
        let big = row(&t, "job-big");
        assert_eq!(
            big[..7],
            ["job-big", "main", "team-a", "Pending", "0", "16", "3h"]
        );
        assert!(
            t.contains(
                "Pending: couldn't assign flavors to pod set main: insufficient unused quota"
            ),
            "{t}"
        );
        assert_eq!(
            row(&t, "job-next")[..5],
            ["job-next", "main", "team-a", "Pending", "1"]
        );
        assert!(row(&t, "job-next").join(" ").ends_with("not yet attempted"));
        assert_eq!(
            row(&t, "job-done")[..4],
            ["job-done", "main", "team-a", "Finished"]
        );
        // One visibility call, for the one ClusterQueue with pending workloads.
        let seen = m.calls();
        assert_eq!(
            seen.iter()
                .filter(|c| c.path.contains("pendingworkloads"))
                .count(),
            1
        );
        Ok(())
    }

    #[test]
    fn list_workloads_filtered_as_json() -> Result<(), CliError> {
        let m = mock(cluster_routes());
        let out = run_with(&m, &["list", "wl", "--status", "pending", "-o", "json"])?;
        let v: Value = serde_json::from_str(&out)?;
        assert_eq!(v["kind"], "List");
        let names: Vec<&str> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["job-big", "job-next"]);
        let yaml = run_with(&m, &["list", "wl", "--status", "finished", "-o", "yaml"])?;
        assert!(yaml.contains("name: job-done") && !yaml.contains("job-big"));
        Ok(())
    }

    #[test]
    fn positions_are_optional() -> Result<(), CliError> {
        // No visibility API: positions show as "-" and listing still works.
        let routes = cluster_routes()
            .into_iter()
            .filter(|(_, p, _)| !p.contains("visibility"))
            .collect();
        let m = mock(routes);
        let t = run_with(&m, &["list", "workloads"])?;
        assert_eq!(row(&t, "job-big")[4], "-");
        Ok(())
    }

    #[test]
    fn create_cluster_queue_from_flags() -> Result<(), CliError> {
        let m = mock(vec![]);
        let out = run_with(
            &m,
            &[
                "create",
                "clusterqueue",
                "team-c",
                "--cohort",
                "ai",
                "--queuing-strategy",
                "StrictFIFO",
                "--namespace-selector",
                "team=c",
                "--reclaim-within-cohort",
                "Any",
                "--nominal-quota",
                "h100:nvidia.com/gpu=16;cpu=64",
                "--nominal-quota",
                "a100:cpu=32;nvidia.com/gpu=8",
                "--borrowing-limit",
                "h100:nvidia.com/gpu=8",
                "--lending-limit",
                "a100:nvidia.com/gpu=4",
            ],
        )?;
        assert_eq!(out, "clusterqueue.kueue.x-k8s.io/team-c created\n");
        let seen = m.calls();
        assert_eq!(
            (seen[0].method.as_str(), seen[0].path.as_str()),
            ("POST", CQS)
        );
        assert_eq!(
            seen[0].body["spec"],
            json!({"cohortName": "ai", "queueingStrategy": "StrictFIFO",
                "namespaceSelector": {"matchLabels": {"team": "c"}},
                "preemption": {"reclaimWithinCohort": "Any"},
                "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                    {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": "32"},
                                                   {"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "4"}]},
                    {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                   {"name": "nvidia.com/gpu", "nominalQuota": "16", "borrowingLimit": "8"}]}]}]})
        );
        Ok(())
    }

    #[test]
    fn bad_create_flags_name_the_flag() {
        let m = mock(vec![]);
        let err = run_with(
            &m,
            &[
                "create",
                "cq",
                "x",
                "--nominal-quota",
                "h100:nvidia.com/gpu=16",
                "--borrowing-limit",
                "h100:cpu=4",
            ],
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("flag --borrowing-limit"),
            "{err}"
        );
        let err = run_with(
            &m,
            &[
                "create",
                "cq",
                "x",
                "--nominal-quota",
                "h100:nvidia.com/gpu=lots",
            ],
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("flag --nominal-quota"), "{err}");
        let err = run_with(
            &m,
            &[
                "create",
                "cq",
                "x",
                "--nominal-quota",
                "h100:cpu=1",
                "--nominal-quota",
                "a100:cpu=1;memory=1Gi",
            ],
        )
        .unwrap_err();
        assert!(err.to_string().contains("same resources"), "{err}");
        let err =
            run_with(&m, &["create", "rf", "x", "--node-taints", "gpu:Sometimes"]).unwrap_err();
        assert!(err.to_string().starts_with("flag --node-taints"), "{err}");
        assert!(m.calls().is_empty(), "nothing is sent for bad flags");
    }

    #[test]
    fn create_local_queue_checks_its_cluster_queue() -> Result<(), CliError> {
        let m = mock(vec![]);
        let err = run_with(&m, &["create", "localqueue", "main", "-c", "missing"]).unwrap_err();
        assert!(err.to_string().contains("no such ClusterQueue"), "{err}");
        let out = run_with(
            &m,
            &[
                "create",
                "lq",
                "main",
                "-n",
                "team-b",
                "-c",
                "missing",
                "--ignore-unknown-cq",
            ],
        )?;
        assert_eq!(out, "localqueue.kueue.x-k8s.io/main created\n");
        let seen = m.calls();
        let post = seen
            .iter()
            .find(|c| c.method == "POST")
            .ok_or_else(|| CliError::Config("no POST".into()))?;
        assert_eq!(
            post.path,
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-b/localqueues"
        );
        assert_eq!(post.body["spec"], json!({"clusterQueue": "missing"}));
        Ok(())
    }

    #[test]
    fn create_resource_flavor_from_flags() -> Result<(), CliError> {
        let m = mock(vec![]);
        run_with(
            &m,
            &[
                "create",
                "resourceflavor",
                "h100",
                "--node-labels",
                "nvidia.com/gpu.product=H100",
                "--node-taints",
                "nvidia.com/gpu=present:NoSchedule",
                "--tolerations",
                "nvidia.com/gpu:NoSchedule",
                "--topology-name",
                "default",
            ],
        )?;
        let seen = m.calls();
        assert_eq!(
            seen[0].body["spec"],
            json!({"nodeLabels": {"nvidia.com/gpu.product": "H100"},
                   "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                   "topologyName": "default"})
        );
        Ok(())
    }

    #[test]
    fn stop_and_resume_patch_the_stop_policy_and_active() -> Result<(), CliError> {
        let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta("team-a", None), "spec": {}});
        let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": meta("main", Some("team-a")), "spec": {"clusterQueue": "team-a"}});
        let wl = workload("job-big", 8, 1, vec![], None);
        let m = mock(vec![
            ("PATCH", format!("{CQS}/team-a"), cq),
            (
                "PATCH",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues/main".into(),
                lq,
            ),
            (
                "PATCH",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/job-big".into(),
                wl,
            ),
        ]);
        let cases: [(&[&str], Value); 6] = [
            (
                &["stop", "clusterqueue", "team-a"],
                json!({"spec": {"stopPolicy": "HoldAndDrain"}}),
            ),
            (
                &["stop", "cq", "team-a", "--keep-already-running"],
                json!({"spec": {"stopPolicy": "Hold"}}),
            ),
            (
                &["resume", "clusterqueue", "team-a"],
                json!({"spec": {"stopPolicy": "None"}}),
            ),
            (
                &["stop", "localqueue", "main", "--keep-already-running"],
                json!({"spec": {"stopPolicy": "Hold"}}),
            ),
            (
                &["stop", "workload", "job-big"],
                json!({"spec": {"active": false}}),
            ),
            (
                &["resume", "wl", "job-big", "-n", "team-a"],
                json!({"spec": {"active": true}}),
            ),
        ];
        for (args, body) in &cases {
            run_with(&m, args)?;
            let seen = m.calls();
            let last = seen
                .last()
                .ok_or_else(|| CliError::Config("no call".into()))?;
            assert_eq!(last.method, "PATCH", "{args:?}");
            assert_eq!(
                last.content_type, "application/merge-patch+json",
                "{args:?}"
            );
            assert_eq!(&last.body, body, "{args:?}");
        }
        // A missing object is the API server's NotFound, reported as an error.
        let err = run_with(&m, &["stop", "cq", "nope"]).unwrap_err();
        assert!(matches!(err, CliError::Kube(_)), "{err}");
        Ok(())
    }
}
