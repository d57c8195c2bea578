//! What is compared: each object of the compared kinds flattened to `field path -> value` (the fields that are
//! behaviour, not bookkeeping: no timestamps, UIDs or resource versions), and the differences between two
//! systems' flattened states.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;
use sluice_operator::jobs::workload_name;
use sluice_sdk::quantity::resource_value;

/// One system's state: object (`Kind ns/name`) -> field -> value.
pub type State = BTreeMap<String, BTreeMap<String, String>>;

/// A field that differs between the systems.
#[derive(Clone, Debug)]
pub struct Difference {
    /// The object (`Workload ns/job-x-#####`).
    pub object: String,
    /// The field path.
    pub field: String,
    /// Kueue's value (`<absent>` when it has none).
    pub kueue: String,
    /// Sluice's value (or the simulator's, for an object shown as `simulate: ...`).
    pub sluice: String,
}

const ABSENT: &str = "<absent>";

/// Whether `s` is a UID as the API server writes them (8-4-4-4-12 lower-case hex digits).
fn is_uid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A value with every UID in it replaced by the object it names (`<Workload ns/job-x-#####>`), or `<uid>` when it
/// names none of the compared objects: UIDs differ between control planes, the objects they name should not.
fn without_uids(value: &str, names: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find(|c: char| c.is_ascii_hexdigit()) {
        let candidate = rest.get(i..i + 36).filter(|c| is_uid(c));
        let boundary = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
        match candidate {
            Some(uid) if boundary => {
                out.push_str(&rest[..i]);
                match names.get(uid) {
                    Some(n) => out.push_str(&format!("<{n}>")),
                    None => out.push_str("<uid>"),
                }
                rest = &rest[i + 36..];
            }
            _ => {
                let next = i + rest[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&rest[..next]);
                rest = &rest[next..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Flattens a system's objects (kind, JSON) into its comparable state.
pub fn state(objects: &[(String, Value)]) -> State {
    let raw = flatten(objects);
    let names: BTreeMap<String, String> = raw
        .iter()
        .filter_map(|(key, (uid, _))| Some((uid.clone()?, key.clone())))
        .collect();
    raw.into_iter()
        .map(|(key, (_, fields))| {
            let fields = fields
                .into_iter()
                .map(|(f, v)| (f, without_uids(&v, &names)))
                .collect();
            (key, fields)
        })
        .collect()
}

/// Each object's key, UID and fields, UIDs still in the values.
#[allow(clippy::type_complexity)]
fn flatten(
    objects: &[(String, Value)],
) -> BTreeMap<String, (Option<String>, BTreeMap<String, String>)> {
    let mut out = BTreeMap::new();
    for (kind, o) in objects {
        let ns = o["metadata"]["namespace"].as_str();
        if ns == Some("kueue-system") || ns == Some("kube-system") {
            continue;
        }
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let mut fields = BTreeMap::new();
        let shown = match kind.as_str() {
            "Workload" => workload(o, &mut fields),
            "Job" => {
                job(o, &mut fields);
                name.to_string()
            }
            "JobSet" => {
                jobset(o, &mut fields);
                name.to_string()
            }
            "ClusterQueue" | "LocalQueue" | "Cohort" => {
                queue(kind, o, &mut fields);
                name.to_string()
            }
            _ => name.to_string(),
        };
        let key = match ns {
            Some(ns) => format!("{kind} {ns}/{shown}"),
            None => format!("{kind} {shown}"),
        };
        let uid = o["metadata"]["uid"].as_str().map(str::to_string);
        out.insert(key, (uid, fields));
    }
    out
}

fn put(fields: &mut BTreeMap<String, String>, path: &str, v: &Value) {
    match v {
        Value::Null => {}
        Value::String(s) => {
            fields.insert(path.to_string(), s.clone());
        }
        other => {
            fields.insert(path.to_string(), other.to_string());
        }
    }
}

/// A quantity in canonical form (milli-units for cpu, base units otherwise), so `1000m` equals `1`.
fn quantity(resource: &str, v: &Value) -> String {
    match v {
        Value::String(s) => resource_value(resource, &Quantity(s.clone()))
            .map(|n| n.to_string())
            .unwrap_or_else(|_| s.clone()),
        Value::Number(n) => resource_value(resource, &Quantity(n.to_string()))
            .map(|n| n.to_string())
            .unwrap_or_else(|_| n.to_string()),
        other => other.to_string(),
    }
}

fn conditions(fields: &mut BTreeMap<String, String>, prefix: &str, conds: &Value) {
    for c in conds.as_array().into_iter().flatten() {
        let t = c["type"].as_str().unwrap_or("?");
        for f in ["status", "reason", "message"] {
            put(fields, &format!("{prefix}[{t}].{f}"), &c[f]);
        }
    }
    // Kueue v0.19 lower-cased this message's first letter (kubernetes-sigs/kueue#12659); compared case-folded
    // (docs/compatibility.md, "Differential tests against Kueue v0.17.0").
    let key = format!("{prefix}[QuotaReserved].message");
    if let Some(m) = fields.get_mut(&key)
        && m.starts_with("Workload namespace doesn't match")
    {
        m.replace_range(..1, "w");
    }
}

/// The field marking an object being deleted: whether it is still there, and some of its status, are not
/// compared (docs/compatibility.md: a ClusterQueue being deleted, kubernetes-sigs/kueue#13757 and #10833).
const TERMINATING: &str = "metadata.deletionTimestamp";

/// A Workload: its name checked against Kueue's naming (then shown with the hash, which covers the owner's UID,
/// replaced by `#####`), its queue, priority, admission, conditions and admission check states.
fn workload(o: &Value, fields: &mut BTreeMap<String, String>) -> String {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    let mut shown = name.to_string();
    let owner = o["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["controller"] == Value::Bool(true)));
    if let Some(owner) = owner {
        let kind = owner["kind"].as_str().unwrap_or_default();
        let api_version = owner["apiVersion"].as_str().unwrap_or_default();
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let expected = workload_name(
            kind,
            group,
            owner["name"].as_str().unwrap_or_default(),
            owner["uid"].as_str().unwrap_or_default(),
        );
        if expected != name {
            fields.insert(
                "metadata.name".into(),
                format!("{name}, not Kueue's name for its owner ({expected})"),
            );
        }
        if let Some(cut) = name.len().checked_sub(5) {
            shown = format!("{}#####", &name[..cut]);
        }
        put(
            fields,
            "metadata.ownerReferences[controller].kind",
            &owner["kind"],
        );
    }
    let spec = &o["spec"];
    for f in ["queueName", "priority", "priorityClassName", "active"] {
        put(fields, &format!("spec.{f}"), &spec[f]);
    }
    for ps in spec["podSets"].as_array().into_iter().flatten() {
        let n = ps["name"].as_str().unwrap_or("?");
        put(fields, &format!("spec.podSets[{n}].count"), &ps["count"]);
        put(
            fields,
            &format!("spec.podSets[{n}].minCount"),
            &ps["minCount"],
        );
    }
    let status = &o["status"];
    put(
        fields,
        "status.admission.clusterQueue",
        &status["admission"]["clusterQueue"],
    );
    for a in status["admission"]["podSetAssignments"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let n = a["name"].as_str().unwrap_or("?");
        put(
            fields,
            &format!("status.admission.podSetAssignments[{n}].count"),
            &a["count"],
        );
        for (r, f) in a["flavors"].as_object().into_iter().flatten() {
            put(
                fields,
                &format!("status.admission.podSetAssignments[{n}].flavors.{r}"),
                f,
            );
        }
        for (r, q) in a["resourceUsage"].as_object().into_iter().flatten() {
            fields.insert(
                format!("status.admission.podSetAssignments[{n}].resourceUsage.{r}"),
                quantity(r, q),
            );
        }
    }
    conditions(fields, "status.conditions", &status["conditions"]);
    for c in status["admissionChecks"].as_array().into_iter().flatten() {
        let n = c["name"].as_str().unwrap_or("?");
        for f in ["state", "message", "retryCount", "requeueAfterSeconds"] {
            put(fields, &format!("status.admissionChecks[{n}].{f}"), &c[f]);
        }
    }
    shown
}

/// A Workload's name as compared: its last five characters (the hash over its owner's UID) as `#####`, and what
/// it should have been when it is not `expected`.
fn hash_hidden(name: &str, expected: &str) -> String {
    let shown = match name.len().checked_sub(5) {
        Some(cut) if name.is_char_boundary(cut) => format!("{}#####", &name[..cut]),
        _ => name.to_string(),
    };
    if name == expected {
        shown
    } else {
        format!("{shown} ({name}, not Kueue's name for its Workload, {expected})")
    }
}

/// A Job: suspended or not, its parallelism (partial admission changes it) and what was injected into its pod
/// template (node selector, tolerations).
fn job(o: &Value, fields: &mut BTreeMap<String, String>) {
    put(fields, "spec.suspend", &o["spec"]["suspend"]);
    put(fields, "spec.parallelism", &o["spec"]["parallelism"]);
    let pod = &o["spec"]["template"]["spec"];
    for (k, v) in pod["nodeSelector"].as_object().into_iter().flatten() {
        put(fields, &format!("spec.template.spec.nodeSelector.{k}"), v);
    }
    if let Some(t) = pod["tolerations"].as_array().filter(|t| !t.is_empty()) {
        fields.insert(
            "spec.template.spec.tolerations".into(),
            Value::from(t.clone()).to_string(),
        );
    }
}

/// The pod template annotation naming the Workload of the pods' job.
const WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";

/// A JobSet: suspended or not, and what was injected into each replicated job's pod template (node selector,
/// tolerations, labels, annotations), by replicated job. A Workload's name in the template is checked against
/// Kueue's name for this JobSet's Workload, then shown with its hash as `#####`, as the Workload is.
fn jobset(o: &Value, fields: &mut BTreeMap<String, String>) {
    put(fields, "spec.suspend", &o["spec"]["suspend"]);
    let workload = workload_name(
        "JobSet",
        "jobset.x-k8s.io",
        o["metadata"]["name"].as_str().unwrap_or_default(),
        o["metadata"]["uid"].as_str().unwrap_or_default(),
    );
    for rj in o["spec"]["replicatedJobs"].as_array().into_iter().flatten() {
        let n = rj["name"].as_str().unwrap_or("?");
        let template = &rj["template"]["spec"]["template"];
        let prefix = format!("spec.replicatedJobs[{n}].template.spec.template");
        for part in ["labels", "annotations"] {
            for (k, v) in template["metadata"][part].as_object().into_iter().flatten() {
                let path = format!("{prefix}.metadata.{part}.{k}");
                match v.as_str() {
                    Some(name) if part == "annotations" && k == WORKLOAD_ANNOTATION => {
                        fields.insert(path, hash_hidden(name, &workload));
                    }
                    _ => put(fields, &path, v),
                }
            }
        }
        let pod = &template["spec"];
        for (k, v) in pod["nodeSelector"].as_object().into_iter().flatten() {
            put(fields, &format!("{prefix}.spec.nodeSelector.{k}"), v);
        }
        if let Some(t) = pod["tolerations"].as_array().filter(|t| !t.is_empty()) {
            fields.insert(
                format!("{prefix}.spec.tolerations"),
                Value::from(t.clone()).to_string(),
            );
        }
    }
}

/// A ClusterQueue, LocalQueue or Cohort: its status counts, usage per flavor and resource, conditions and fair
/// share.
fn queue(kind: &str, o: &Value, fields: &mut BTreeMap<String, String>) {
    let status = &o["status"];
    if kind == "ClusterQueue" && !o["metadata"]["deletionTimestamp"].is_null() {
        // Only v0.19 keeps counting for a ClusterQueue being deleted (kubernetes-sigs/kueue#13757).
        fields.insert(TERMINATING.into(), "set".into());
        return;
    }
    let orphaned = status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Active" && c["reason"] == "ClusterQueueDoesNotExist")
    });
    if kind == "LocalQueue" && orphaned {
        // Only v0.19 zeroes the usage of a LocalQueue whose ClusterQueue is gone (kubernetes-sigs/kueue#13835).
        let n = status["pendingWorkloads"].as_i64().unwrap_or(0);
        fields.insert("status.pendingWorkloads".into(), n.to_string());
        conditions(fields, "status.conditions", &status["conditions"]);
        return;
    }
    // An absent count is zero (omitempty in some of Kueue's status types).
    for f in [
        "pendingWorkloads",
        "reservingWorkloads",
        "admittedWorkloads",
    ] {
        let n = status[f].as_i64().unwrap_or(0);
        fields.insert(format!("status.{f}"), n.to_string());
    }
    for list in ["flavorsReservation", "flavorsUsage", "flavorUsage"] {
        for fl in status[list].as_array().into_iter().flatten() {
            let flavor = fl["name"].as_str().unwrap_or("?");
            for r in fl["resources"].as_array().into_iter().flatten() {
                let res = r["name"].as_str().unwrap_or("?");
                for f in ["total", "borrowed"] {
                    if !r[f].is_null() {
                        fields.insert(
                            format!("status.{list}[{flavor}][{res}].{f}"),
                            quantity(res, &r[f]),
                        );
                    }
                }
            }
        }
    }
    conditions(fields, "status.conditions", &status["conditions"]);
    put(
        fields,
        "status.fairSharing.weightedShare",
        &status["fairSharing"]["weightedShare"],
    );
}

/// A pending message's pod sets, each as its prefix (`couldn't assign flavors to pod set main: `) and the
/// reasons after it, one per resource that does not fit.
pub fn pending_reasons(message: &str) -> Vec<(&str, Vec<String>)> {
    message
        .split("; ")
        .map(|part| match part.find(": ") {
            Some(at) => {
                let (prefix, rest) = part.split_at(at + 2);
                let reasons = rest
                    .split(", insufficient ")
                    .enumerate()
                    .map(|(i, r)| {
                        if i == 0 {
                            r.to_string()
                        } else {
                            format!("insufficient {r}")
                        }
                    })
                    .collect();
                (prefix, reasons)
            }
            None => (part, Vec::new()),
        })
        .collect()
}

/// Whether two values of `field` say the same. Kueue v0.17.0 names, in a pending workload's QuotaReserved
/// message, only the first resource that does not fit, in Go's random map order; v0.19 (the loop became a
/// callback, kubernetes-sigs/kueue#13487) and Sluice name every one. So Kueue's reasons being among Sluice's
/// counts as the same (docs/compatibility.md).
fn same_value(field: &str, kueue: &str, sluice: &str) -> bool {
    if kueue == sluice || admission_check_wording(kueue, sluice) {
        return true;
    }
    if !field.ends_with("[QuotaReserved].message") {
        return false;
    }
    let (k, s) = (pending_reasons(kueue), pending_reasons(sluice));
    k.len() == s.len()
        && k.iter().zip(&s).all(|((kp, kr), (sp, sr))| {
            kp == sp && !kr.is_empty() && kr.iter().all(|r| sr.contains(r))
        })
}

/// Kueue v0.17.0's admission check messages against v0.19's, which Sluice writes (v0.19 names each check and its
/// message: pkg/controller/core/workload_controller.go, buildAdmissionChecksMessage, not in v0.17.0;
/// docs/compatibility.md): v0.17.0's Retry eviction "At least one admission check is false" is v0.19's "Evicted
/// due to AdmissionCheck(s) in Retry state: ..." (names v0.17.0 does not give), and its rejection "Admission
/// check(s): a,b, were rejected" is v0.19's `AdmissionChecks in Rejected state: "a"; "b"`.
fn admission_check_wording(kueue: &str, sluice: &str) -> bool {
    const RETRY_V17: &str = "At least one admission check is false";
    if let Some(at) = kueue.find(RETRY_V17) {
        let (before, after) = (&kueue[..at], &kueue[at + RETRY_V17.len()..]);
        return sluice.starts_with(&format!("{before}Evicted due to AdmissionCheck"))
            && sluice.contains(" in Retry state: ")
            && sluice.ends_with(after);
    }
    const REJECTED_V17: (&str, &str) = ("Admission check(s): ", ", were rejected");
    let Some(start) = kueue.find(REJECTED_V17.0) else {
        return false;
    };
    let names_at = start + REJECTED_V17.0.len();
    let Some(len) = kueue[names_at..].find(REJECTED_V17.1) else {
        return false;
    };
    let names: Vec<String> = kueue[names_at..names_at + len]
        .split(',')
        .map(|n| format!("{:?}", n.trim()))
        .collect();
    let noun = if names.len() > 1 {
        "AdmissionChecks"
    } else {
        "AdmissionCheck"
    };
    let v19 = format!(
        "{}{noun} in Rejected state: {}{}",
        &kueue[..start],
        names.join("; "),
        &kueue[names_at + len + REJECTED_V17.1.len()..]
    );
    v19 == sluice
}

/// Every field whose value differs (an object or field one side lacks counts, shown as `<absent>`).
pub fn differences(kueue: &State, sluice: &State) -> Vec<Difference> {
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    let objects: std::collections::BTreeSet<&String> = kueue.keys().chain(sluice.keys()).collect();
    for obj in objects {
        let (k, s) = (kueue.get(obj), sluice.get(obj));
        let terminating = |side: Option<&BTreeMap<String, String>>| {
            side.is_some_and(|f| f.contains_key(TERMINATING))
        };
        if (k.is_none() && terminating(s)) || (s.is_none() && terminating(k)) {
            continue;
        }
        if k.is_none() || s.is_none() {
            out.push(Difference {
                object: obj.clone(),
                field: "(object)".into(),
                kueue: if k.is_some() { "exists" } else { ABSENT }.into(),
                sluice: if s.is_some() { "exists" } else { ABSENT }.into(),
            });
            continue;
        }
        let (k, s) = (k.unwrap_or(&empty), s.unwrap_or(&empty));
        let fields: std::collections::BTreeSet<&String> = k.keys().chain(s.keys()).collect();
        for f in fields {
            let (kv, sv) = (k.get(f), s.get(f));
            let same = match (kv, sv) {
                (Some(a), Some(b)) => same_value(f, a, b),
                (a, b) => a == b,
            };
            if !same {
                out.push(Difference {
                    object: obj.clone(),
                    field: f.clone(),
                    kueue: kv.cloned().unwrap_or_else(|| ABSENT.into()),
                    sluice: sv.cloned().unwrap_or_else(|| ABSENT.into()),
                });
            }
        }
    }
    out
}

/// How many Workloads a LocalQueue or ClusterQueue (`LocalQueue ns/name`, `ClusterQueue name`) holds pending as
/// the system's own Workloads say: active, neither holding quota nor finished. None for other objects.
fn pending_by_workloads(objects: &[(String, Value)], object: &str) -> Option<i64> {
    let cq_of = |ns: &str, lq: &str| {
        objects.iter().find_map(|(kind, o)| {
            (kind == "LocalQueue"
                && o["metadata"]["namespace"] == ns
                && o["metadata"]["name"] == lq)
                .then(|| o["spec"]["clusterQueue"].as_str().unwrap_or_default())
        })
    };
    let queued_to: Box<dyn Fn(&Value) -> bool> =
        if let Some(lq) = object.strip_prefix("LocalQueue ") {
            let (ns, name) = lq.split_once('/')?;
            let (ns, name) = (ns.to_string(), name.to_string());
            Box::new(move |w| {
                w["metadata"]["namespace"] == ns.as_str() && w["spec"]["queueName"] == name.as_str()
            })
        } else if let Some(cq) = object.strip_prefix("ClusterQueue ") {
            let cq = cq.to_string();
            Box::new(move |w| {
                cq_of(
                    w["metadata"]["namespace"].as_str().unwrap_or_default(),
                    w["spec"]["queueName"].as_str().unwrap_or_default(),
                ) == Some(cq.as_str())
            })
        } else {
            return None;
        };
    let is_true = |w: &Value, ty: &str| {
        w["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty && c["status"] == "True"))
    };
    let n = objects
        .iter()
        .filter(|(kind, w)| {
            kind == "Workload"
                && w["spec"]["active"] != Value::Bool(false)
                && queued_to(w)
                && !is_true(w, "QuotaReserved")
                && !is_true(w, "Finished")
        })
        .count();
    Some(n as i64)
}

/// Whether `d` is Kueue's queue status lagging Kueue's own Workloads: its pending count disagrees with them while
/// Sluice's (or the simulator's) agrees. Kueue v0.17.0 now and then leaves a LocalQueue's count one behind after a
/// Workload is queued, until the next change in that queue (seen in strict-fifo-blocks, about one run in thirty;
/// docs/compatibility.md), so the count it shows is not the one it acts on.
pub fn lagging_count(kueue_objects: &[(String, Value)], d: &Difference) -> bool {
    if d.field != "status.pendingWorkloads" {
        return false;
    }
    let object = d.object.trim_start_matches("simulate: ");
    pending_by_workloads(kueue_objects, object).is_some_and(|n| {
        let n = n.to_string();
        d.kueue != n && d.sluice == n
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn objects(reserved: bool) -> Vec<(String, Value)> {
        let conditions = if reserved {
            json!([{"type": "QuotaReserved", "status": "True"}])
        } else {
            json!([{"type": "QuotaReserved", "status": "False"}])
        };
        vec![
            (
                "LocalQueue".into(),
                json!({"metadata": {"namespace": "ns", "name": "q"}, "spec": {"clusterQueue": "cq"}}),
            ),
            (
                "Workload".into(),
                json!({"metadata": {"namespace": "ns", "name": "w"}, "spec": {"queueName": "q"},
                       "status": {"conditions": conditions}}),
            ),
        ]
    }

    fn count(object: &str, kueue: &str, sluice: &str) -> Difference {
        Difference {
            object: object.into(),
            field: "status.pendingWorkloads".into(),
            kueue: kueue.into(),
            sluice: sluice.into(),
        }
    }

    fn jobset_object(workload: &str) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "train", "uid": "0f3c5a2e-1b7d-4c9e-8a6f-2d4b6c8e0a1b"},
            "spec": {"suspend": false, "replicatedJobs": [{"name": "workers", "template": {"spec": {"template": {
                "metadata": {"labels": {"kueue.x-k8s.io/podset": "workers"},
                             "annotations": {"kueue.x-k8s.io/workload": workload}},
                "spec": {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}]},
            }}}}]},
        })
    }

    #[test]
    fn a_jobset_is_compared_by_what_each_replicated_job_was_given() {
        let expected = workload_name(
            "JobSet",
            "jobset.x-k8s.io",
            "train",
            "0f3c5a2e-1b7d-4c9e-8a6f-2d4b6c8e0a1b",
        );
        let s = state(&[("JobSet".into(), jobset_object(&expected))]);
        let fields = &s["JobSet ns/train"];
        let at = |f: &str| {
            fields[&format!("spec.replicatedJobs[workers].template.spec.template.{f}")].clone()
        };
        assert_eq!(fields["spec.suspend"], "false");
        assert_eq!(at("spec.nodeSelector.pool"), "a");
        assert_eq!(
            at("spec.tolerations"),
            r#"[{"key":"k","operator":"Exists"}]"#
        );
        assert_eq!(at("metadata.labels.kueue.x-k8s.io/podset"), "workers");
        // The Workload's name with its hash hidden, as the Workload itself is shown.
        assert_eq!(
            at("metadata.annotations.kueue.x-k8s.io/workload"),
            "jobset-train-#####"
        );
        // Another name is one Kueue would not have given.
        let s = state(&[("JobSet".into(), jobset_object("jobset-train-00000"))]);
        let shown = &s["JobSet ns/train"]["spec.replicatedJobs[workers].template.spec.template.metadata.annotations.kueue.x-k8s.io/workload"];
        assert!(shown.contains("not Kueue's name"), "{shown}");
    }

    #[test]
    fn kueue_v017_admission_check_wording_reads_as_v019s() {
        let retry = "Evicted due to AdmissionCheck in Retry state: \"prov\"";
        assert!(same_value(
            "m",
            "At least one admission check is false",
            retry
        ));
        assert!(same_value(
            "m",
            "Previously: At least one admission check is false",
            &format!("Previously: {retry}")
        ));
        assert!(!same_value(
            "m",
            "At least one admission check is false",
            "Preempted"
        ));
        assert!(same_value(
            "m",
            "The workload is deactivated due to Admission check(s): prov, were rejected",
            "The workload is deactivated due to AdmissionCheck in Rejected state: \"prov\""
        ));
        assert!(same_value(
            "m",
            "Admission check(s): a,b, were rejected",
            "AdmissionChecks in Rejected state: \"a\"; \"b\""
        ));
        assert!(!same_value(
            "m",
            "Admission check(s): a, were rejected",
            "AdmissionCheck in Rejected state: \"b\""
        ));
    }

    #[test]
    fn a_count_behind_kueues_own_workloads_is_a_lag() {
        let pending = objects(false);
        assert!(lagging_count(&pending, &count("LocalQueue ns/q", "0", "1")));
        assert!(lagging_count(
            &pending,
            &count("simulate: LocalQueue ns/q", "0", "1")
        ));
        assert!(lagging_count(&pending, &count("ClusterQueue cq", "0", "1")));
    }

    #[test]
    fn a_count_that_matches_kueues_workloads_is_a_difference() {
        // Sluice's count is the wrong one here: Kueue's agrees with its Workloads.
        assert!(!lagging_count(
            &objects(true),
            &count("LocalQueue ns/q", "0", "1")
        ));
        assert!(!lagging_count(
            &objects(false),
            &count("LocalQueue ns/q", "1", "2")
        ));
        // Another field, or another queue, is never excused.
        let mut other = count("LocalQueue ns/q", "0", "1");
        other.field = "status.reservingWorkloads".into();
        assert!(!lagging_count(&objects(false), &other));
        assert!(!lagging_count(
            &objects(false),
            &count("LocalQueue ns/other", "0", "1")
        ));
        assert!(!lagging_count(
            &objects(false),
            &count("ClusterQueue other", "0", "1")
        ));
    }
}
