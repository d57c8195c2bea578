//! The simulator against Kueue itself: before each step, the cluster as Kueue left it (its queues, flavors,
//! priority classes and Workloads with their status) plus the step's change goes to `sluice simulate`, and its
//! fixed point is compared with what Kueue did after that step. The simulator must predict a real Kueue, not
//! only Sluice's operator.

use std::collections::BTreeMap;
use std::process::Command;

use serde::Deserialize;
use serde_json::{Value, json};

use super::compare::{Difference, State, differences, state};
use super::scenario::Step;

/// The simulator's further input for a scenario with its own nodes: the Nodes (as the fake kubelet made them) and
/// the Topologies placement reads.
pub const TOPOLOGY_INPUTS: &[(&str, &str, &str, &str)] = &[
    ("", "v1", "Node", "nodes"),
    ("kueue.x-k8s.io", "v1beta2", "Topology", "topologies"),
];

/// The kinds exported from Kueue's cluster as the simulator's input (group/version, kind, plural).
pub const INPUT_KINDS: &[(&str, &str, &str, &str)] = &[
    ("", "v1", "Namespace", "namespaces"),
    ("", "v1", "LimitRange", "limitranges"),
    ("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses"),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
    ),
    (
        "kueue.x-k8s.io",
        "v1beta2",
        "WorkloadPriorityClass",
        "workloadpriorityclasses",
    ),
    (
        "kueue.x-k8s.io",
        "v1beta2",
        "ResourceFlavor",
        "resourceflavors",
    ),
    ("kueue.x-k8s.io", "v1beta2", "Cohort", "cohorts"),
    ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues"),
    ("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues"),
    ("kueue.x-k8s.io", "v1beta2", "Workload", "workloads"),
];

/// An exported object cut to what a user would write (and, for a Workload, the status Kueue gave it).
fn clean(kind: &str, mut o: Value) -> Option<Value> {
    let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    if ns.starts_with("kube-") || ns == "kueue-system" {
        return None;
    }
    if (kind == "Namespace" && (name.starts_with("kube-") || name == "kueue-system"))
        || (kind == "PriorityClass" && name.starts_with("system-"))
    {
        return None;
    }
    let meta = o["metadata"].as_object_mut()?;
    // The UID stays: status messages written before name objects by it.
    for f in [
        "resourceVersion",
        "managedFields",
        "generation",
        "finalizers",
        "annotations",
    ] {
        meta.remove(f);
    }
    // A Node's status is its capacity and readiness, which placement reads.
    if kind != "Workload"
        && kind != "Node"
        && let Some(m) = o.as_object_mut()
    {
        m.remove("status");
    }
    Some(o)
}

/// RFC 7386 merge patch.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn same(o: &Value, kind: &str, ns: Option<&str>, name: &str) -> bool {
    o["kind"] == kind && o["metadata"]["name"] == name && o["metadata"]["namespace"].as_str() == ns
}

fn owned_by_job(o: &Value, job: &str) -> bool {
    owned_by(o, "Job", job)
}

/// Whether `o` is owned by the `kind` (Job, JobSet, RayJob) named `name`.
fn owned_by(o: &Value, kind: &str, name: &str) -> bool {
    o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|r| r.iter().any(|r| r["kind"] == kind && r["name"] == name))
}

/// The kinds of jobs a scenario queues (those that become Workloads): a step's new ones go to the simulator with
/// the creation time Kueue's API server gave them, a deleted one takes its Workloads along, and Kueue's from earlier
/// steps stand beside the simulator's prediction so that messages naming them by UID read the same.
pub const JOB_KINDS: &[&str] = &[
    "Job",
    "JobSet",
    "RayJob",
    "PyTorchJob",
    "TrainJob",
    "LeaderWorkerSet",
];

/// The simulator's input for `step`: Kueue's objects before it (`before`, of `kinds`: [`INPUT_KINDS`] and the
/// scenario's third-party inputs) with the step
/// applied; new jobs ([`JOB_KINDS`]) get the creation time Kueue's API server gave them (`after`), which orders its
/// queues.
pub fn input(
    kinds: &[(&str, &str, &str, &str)],
    before: &[(String, Value)],
    step: &Step,
    after: &[(String, Value)],
) -> Vec<Value> {
    let mut objects: Vec<Value> = before
        .iter()
        .filter_map(|(kind, o)| {
            let mut o = clean(kind, o.clone())?;
            // Listed items carry no type; the simulator needs it.
            let (group, version) = kinds.iter().find(|k| k.2 == kind).map(|k| (k.0, k.1))?;
            o["apiVersion"] = json!(if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            });
            o["kind"] = json!(kind);
            Some(o)
        })
        .collect();
    match step {
        Step::Apply { yaml, .. } => {
            for doc in serde_yaml::Deserializer::from_str(yaml) {
                let Ok(mut v) = Value::deserialize(doc) else {
                    continue;
                };
                if v.is_null() {
                    continue;
                }
                if let Some(kind) = v["kind"].as_str().filter(|k| JOB_KINDS.contains(k)) {
                    let kind = kind.to_string();
                    let ns = v["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("default")
                        .to_string();
                    let name = v["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if let Some((_, created)) = after.iter().find(|(k, o)| {
                        *k == kind
                            && o["metadata"]["namespace"] == ns.as_str()
                            && o["metadata"]["name"] == name.as_str()
                    }) {
                        v["metadata"]["creationTimestamp"] =
                            created["metadata"]["creationTimestamp"].clone();
                    }
                }
                objects.push(v);
            }
        }
        Step::Delete(o) => {
            // The object goes, and with a job its Workloads.
            let owned = |v: &Value| {
                JOB_KINDS.contains(&o.kind.as_str())
                    && v["kind"] == "Workload"
                    && v["metadata"]["namespace"].as_str() == o.namespace.as_deref()
                    && owned_by(v, &o.kind, &o.name)
            };
            objects.retain(|v| !same(v, &o.kind, o.namespace.as_deref(), &o.name) && !owned(v));
        }
        Step::Patch { object, patch, .. } => {
            for v in objects.iter_mut() {
                if same(v, &object.kind, object.namespace.as_deref(), &object.name) {
                    merge(v, patch);
                }
            }
        }
        // A scenario with admission checks is not simulated (its answers come between steps).
        Step::Answer { .. } => {}
        Step::Finish { namespace, job } => {
            for v in objects.iter_mut() {
                if v["kind"] == "Workload"
                    && v["metadata"]["namespace"] == namespace.as_str()
                    && owned_by_job(v, job)
                {
                    let conds = v["status"]["conditions"]
                        .as_array_mut()
                        .map(std::mem::take)
                        .unwrap_or_default();
                    let mut conds: Vec<Value> = conds
                        .into_iter()
                        .filter(|c| c["type"] != "Finished")
                        .collect();
                    // The message Kubernetes' Job controller gives a completed Job, which Kueue copies.
                    conds.push(
                        json!({"type": "Finished", "status": "True", "reason": "Succeeded",
                        "message": "Reached expected number of succeeded pods",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}),
                    );
                    v["status"]["conditions"] = json!(conds);
                }
            }
        }
    }
    objects
}

/// Whether a field is one the simulator models: admission and the scheduler's conditions of Workloads, and the
/// queues' counts and usage. Pods (PodsReady) and Jobs are the operator's, not the simulator's.
fn modelled(object: &str, field: &str) -> bool {
    if field == "metadata.name" || field.contains("[PodsReady]") {
        return false;
    }
    if object.starts_with("Workload ") {
        return field.starts_with("status.") || field == "(object)";
    }
    object.starts_with("ClusterQueue ") || object.starts_with("LocalQueue ")
}

fn only_modelled(s: State) -> State {
    s.into_iter()
        .filter(|(obj, _)| {
            obj.starts_with("Workload ")
                || obj.starts_with("ClusterQueue ")
                || obj.starts_with("LocalQueue ")
        })
        .map(|(obj, fields)| {
            let kept: BTreeMap<String, String> = fields
                .into_iter()
                .filter(|(f, _)| modelled(&obj, f))
                .collect();
            (obj, kept)
        })
        .collect()
}

/// Runs `sluice simulate` on `objects` under `config`; compares its fixed point with Kueue's state `kueue`
/// (objects after the step). An error is the simulator refusing the input or failing.
pub fn predict(
    dir: &std::path::Path,
    config: Option<&str>,
    objects: Vec<Value>,
    kueue: &[(String, Value)],
) -> Result<Vec<Difference>, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let input = dir.join("input.json");
    std::fs::write(
        &input,
        json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["simulate", "--no-progress", "-o", "json", "-f"])
        .arg(&input);
    if let Some(c) = config {
        let file = dir.join("config.yaml");
        std::fs::write(&file, c).map_err(|e| e.to_string())?;
        cmd.arg("--config").arg(file);
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "sluice simulate failed on {}: {}",
            input.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let result: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let mut predicted: Vec<(String, Value)> = result["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default().to_string(),
                o.clone(),
            )
        })
        .collect();
    // Kueue's jobs from earlier steps (not in the input), so that messages naming them by UID read the same.
    let known = |kind: &str, o: &Value| {
        predicted.iter().any(|(k, p)| {
            k == kind
                && p["metadata"]["namespace"] == o["metadata"]["namespace"]
                && p["metadata"]["name"] == o["metadata"]["name"]
        })
    };
    let earlier: Vec<(String, Value)> = kueue
        .iter()
        .filter(|(k, o)| JOB_KINDS.contains(&k.as_str()) && !known(k, o))
        .cloned()
        .collect();
    predicted.extend(earlier);
    Ok(differences(
        &only_modelled(state(kueue)),
        &only_modelled(state(&predicted)),
    ))
}
