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
            "RayJob" => {
                rayjob(o, &mut fields);
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

/// What was injected into a pod template (`template`, at `prefix`): its labels and annotations (a Workload's name
/// checked against `workload`, Kueue's name for the job's Workload, then shown with its hash as `#####`, as the
/// Workload is), node selector and tolerations.
fn template_given(
    fields: &mut BTreeMap<String, String>,
    prefix: &str,
    template: &Value,
    workload: &str,
) {
    for part in ["labels", "annotations"] {
        for (k, v) in template["metadata"][part].as_object().into_iter().flatten() {
            let path = format!("{prefix}.metadata.{part}.{k}");
            match v.as_str() {
                Some(name) if part == "annotations" && k == WORKLOAD_ANNOTATION => {
                    fields.insert(path, hash_hidden(name, workload));
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

/// A JobSet: suspended or not, and what was injected into each replicated job's pod template (node selector,
/// tolerations, labels, annotations), by replicated job.
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
        let prefix = format!("spec.replicatedJobs[{n}].template.spec.template");
        template_given(
            fields,
            &prefix,
            &rj["template"]["spec"]["template"],
            &workload,
        );
    }
}

/// The submitter pod template's field, which KubeRay's RayJob reads when it submits through a Kubernetes Job.
const SUBMITTER_TEMPLATE: &str = "spec.submitterPodTemplate";

/// A RayJob: suspended or not, and what was injected into its cluster's pod templates (the head's, each worker
/// group's by group name) and into its submitter Job's (node selector, tolerations, labels, annotations). Kueue
/// writes KubeRay's default submitter template into `spec.submitterPodTemplate` when it starts a RayJob without one,
/// so that template's containers (image, requests, limits) and restart policy are compared too.
fn rayjob(o: &Value, fields: &mut BTreeMap<String, String>) {
    let spec = &o["spec"];
    // A plain bool with omitempty in KubeRay's Go type: Kueue's update of a started RayJob drops it, Sluice's
    // patch writes false; both read as not suspended.
    fields.insert(
        "spec.suspend".into(),
        spec["suspend"].as_bool().unwrap_or(false).to_string(),
    );
    let workload = workload_name(
        "RayJob",
        "ray.io",
        o["metadata"]["name"].as_str().unwrap_or_default(),
        o["metadata"]["uid"].as_str().unwrap_or_default(),
    );
    let cluster = &spec["rayClusterSpec"];
    template_given(
        fields,
        "spec.rayClusterSpec.headGroupSpec.template",
        &cluster["headGroupSpec"]["template"],
        &workload,
    );
    for g in cluster["workerGroupSpecs"].as_array().into_iter().flatten() {
        let n = g["groupName"].as_str().unwrap_or("?");
        let prefix = format!("spec.rayClusterSpec.workerGroupSpecs[{n}].template");
        template_given(fields, &prefix, &g["template"], &workload);
    }
    let submitter = &spec["submitterPodTemplate"];
    if submitter.is_null() {
        return;
    }
    template_given(fields, SUBMITTER_TEMPLATE, submitter, &workload);
    let pod = &submitter["spec"];
    put(
        fields,
        &format!("{SUBMITTER_TEMPLATE}.spec.restartPolicy"),
        &pod["restartPolicy"],
    );
    for c in pod["containers"].as_array().into_iter().flatten() {
        let prefix = format!(
            "{SUBMITTER_TEMPLATE}.spec.containers[{}]",
            c["name"].as_str().unwrap_or("?")
        );
        put(fields, &format!("{prefix}.image"), &c["image"]);
        for part in ["requests", "limits"] {
            for (r, q) in c["resources"][part].as_object().into_iter().flatten() {
                fields.insert(format!("{prefix}.resources.{part}.{r}"), quantity(r, q));
            }
        }
    }
}

/// The container KubeRay's default submitter pod template runs.
const DEFAULT_SUBMITTER_CONTAINER: &str = "ray-job-submitter";

/// Whether `d` is Kueue v0.17.0 leaving a started RayJob's submitter template unwritten. For a RayJob that submits
/// through a Kubernetes Job without a `spec.submitterPodTemplate`, v0.17.0 merges the submitter pod set's admission
/// (node selector, tolerations, labels, annotations) into a copy of KubeRay's default template that it then drops
/// (pkg/controller/jobs/rayjob/rayjob_controller.go, RunWithPodSetsInfo), so the submitter pod runs without them;
/// v0.19 writes that template into the RayJob (kubernetes-sigs/kueue#12644, in v0.17.7 as #12695), as Sluice does.
/// So a field of the submitter template that Kueue's RayJob lacks, having none, is not compared when Sluice's
/// template is KubeRay's default: its one `ray-job-submitter` container with the head's image and KubeRay's
/// default resources.
pub fn unwritten_submitter(
    kueue_objects: &[(String, Value)],
    sluice_objects: &[(String, Value)],
    d: &Difference,
) -> bool {
    let Some(key) = d.object.strip_prefix("RayJob ") else {
        return false;
    };
    if !d.field.starts_with(&format!("{SUBMITTER_TEMPLATE}.")) || d.kueue != ABSENT {
        return false;
    }
    let find = |objects: &'_ [(String, Value)]| -> Option<Value> {
        let (ns, name) = key.split_once('/')?;
        objects
            .iter()
            .find(|(kind, o)| {
                kind == "RayJob"
                    && o["metadata"]["namespace"] == ns
                    && o["metadata"]["name"] == name
            })
            .map(|(_, o)| o.clone())
    };
    let (Some(k), Some(s)) = (find(kueue_objects), find(sluice_objects)) else {
        return false;
    };
    let k8s_job_mode = |o: &Value| {
        o["spec"]["submissionMode"]
            .as_str()
            .is_none_or(|m| m == "K8sJobMode")
    };
    if !k8s_job_mode(&k) || !k["spec"]["submitterPodTemplate"].is_null() {
        return false;
    }
    let head_image =
        &s["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"];
    let containers = s["spec"]["submitterPodTemplate"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let resources = |c: &Value, part: &str| -> BTreeMap<String, String> {
        c["resources"][part]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(r, q)| (r.clone(), quantity(r, q)))
            .collect()
    };
    let expect = |pairs: [(&str, &str); 2]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(r, q)| (r.to_string(), quantity(r, &Value::from(*q))))
            .collect()
    };
    k8s_job_mode(&s)
        && matches!(containers.as_slice(), [c] if c["name"] == DEFAULT_SUBMITTER_CONTAINER
            && &c["image"] == head_image
            && resources(c, "requests") == expect([("cpu", "500m"), ("memory", "200Mi")])
            && resources(c, "limits") == expect([("cpu", "1"), ("memory", "1Gi")]))
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

    const RAY_UID: &str = "7c1e9a4b-3d2f-4e8a-9b6c-5a0d1f2e3c4b";

    /// A started RayJob as Sluice leaves it: each template given the admission, and KubeRay's default submitter
    /// template written out (as Kueue v0.19 does), unless `submitter` is false.
    fn rayjob_object(workload: &str, submitter: bool) -> Value {
        let given = json!({
            "metadata": {"labels": {"kueue.x-k8s.io/podset": "?"},
                         "annotations": {"kueue.x-k8s.io/workload": workload}},
            "spec": {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}],
                     "containers": [{"name": "ray", "image": "rayproject/ray:2.41.0"}]},
        });
        let with_podset = |ps: &str| {
            let mut t = given.clone();
            t["metadata"]["labels"]["kueue.x-k8s.io/podset"] = json!(ps);
            t
        };
        let mut o = json!({
            "metadata": {"namespace": "ns", "name": "train", "uid": RAY_UID},
            "spec": {"rayClusterSpec": {
                "headGroupSpec": {"template": with_podset("head")},
                "workerGroupSpecs": [{"groupName": "Workers", "replicas": 1, "numOfHosts": 2,
                                      "template": with_podset("workers")}],
            }},
        });
        if submitter {
            let mut t = with_podset("submitter");
            t["spec"]["restartPolicy"] = json!("Never");
            t["spec"]["containers"] = json!([{"name": "ray-job-submitter", "image": "rayproject/ray:2.41.0",
                "resources": {"requests": {"cpu": "500m", "memory": "200Mi"},
                              "limits": {"cpu": "1", "memory": "1Gi"}}}]);
            o["spec"]["submitterPodTemplate"] = t;
        }
        o
    }

    #[test]
    fn a_rayjob_is_compared_by_what_each_template_was_given() {
        let expected = workload_name("RayJob", "ray.io", "train", RAY_UID);
        let s = state(&[("RayJob".into(), rayjob_object(&expected, true))]);
        let fields = &s["RayJob ns/train"];
        // Absent (KubeRay's Go bool with omitempty, as Kueue's update leaves it) reads as false.
        assert_eq!(fields["spec.suspend"], "false");
        let head =
            |f: &str| fields[&format!("spec.rayClusterSpec.headGroupSpec.template.{f}")].clone();
        let workers = |f: &str| {
            fields[&format!("spec.rayClusterSpec.workerGroupSpecs[Workers].template.{f}")].clone()
        };
        let submitter = |f: &str| fields[&format!("spec.submitterPodTemplate.{f}")].clone();
        assert_eq!(head("metadata.labels.kueue.x-k8s.io/podset"), "head");
        assert_eq!(head("spec.nodeSelector.pool"), "a");
        assert_eq!(workers("metadata.labels.kueue.x-k8s.io/podset"), "workers");
        assert_eq!(
            workers("spec.tolerations"),
            r#"[{"key":"k","operator":"Exists"}]"#
        );
        // The Workload's name with its hash hidden, as the Workload itself is shown.
        assert_eq!(
            workers("metadata.annotations.kueue.x-k8s.io/workload"),
            "rayjob-train-#####"
        );
        assert_eq!(
            submitter("metadata.labels.kueue.x-k8s.io/podset"),
            "submitter"
        );
        assert_eq!(submitter("spec.nodeSelector.pool"), "a");
        // The submitter template Kueue writes is compared whole: its container, quantities as numbers.
        assert_eq!(submitter("spec.restartPolicy"), "Never");
        let c = "spec.containers[ray-job-submitter]";
        assert_eq!(submitter(&format!("{c}.image")), "rayproject/ray:2.41.0");
        assert_eq!(submitter(&format!("{c}.resources.requests.cpu")), "500");
        assert_eq!(
            submitter(&format!("{c}.resources.limits.memory")),
            "1073741824"
        );
        // The cluster's containers are the user's: not compared.
        assert!(
            !fields
                .keys()
                .any(|f| f.starts_with("spec.rayClusterSpec.") && f.contains("containers"))
        );
        // Another Workload name is one Kueue would not have given.
        let s = state(&[("RayJob".into(), rayjob_object("rayjob-train-00000", true))]);
        let head = "spec.rayClusterSpec.headGroupSpec.template";
        let shown =
            &s["RayJob ns/train"][&format!("{head}.metadata.annotations.kueue.x-k8s.io/workload")];
        assert!(shown.contains("not Kueue's name"), "{shown}");
        let mut suspended = rayjob_object(&expected, false);
        suspended["spec"]["suspend"] = json!(true);
        let s = state(&[("RayJob".into(), suspended)]);
        assert_eq!(s["RayJob ns/train"]["spec.suspend"], "true");
        assert!(
            !s["RayJob ns/train"]
                .keys()
                .any(|f| f.starts_with("spec.submitterPodTemplate"))
        );
    }

    #[test]
    fn kueue_v017_leaving_the_default_submitter_template_unwritten_is_not_compared() {
        let expected = workload_name("RayJob", "ray.io", "train", RAY_UID);
        let kueue = vec![("RayJob".to_string(), rayjob_object(&expected, false))];
        let sluice = vec![("RayJob".to_string(), rayjob_object(&expected, true))];
        let diffs = differences(&state(&kueue), &state(&sluice));
        assert!(!diffs.is_empty());
        assert!(
            diffs
                .iter()
                .all(|d| d.field.starts_with("spec.submitterPodTemplate.")),
            "{diffs:?}"
        );
        assert!(
            diffs
                .iter()
                .all(|d| unwritten_submitter(&kueue, &sluice, d))
        );
        // Not when Sluice's template is not KubeRay's default,
        let mut other = rayjob_object(&expected, true);
        other["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
            json!("1");
        let other = vec![("RayJob".to_string(), other)];
        let diffs = differences(&state(&kueue), &state(&other));
        assert!(
            diffs
                .iter()
                .all(|d| !unwritten_submitter(&kueue, &other, d))
        );
        // nor when Kueue's RayJob has a template of its own (or submits otherwise),
        let mut own = rayjob_object(&expected, true);
        own["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] = json!({});
        let own = vec![("RayJob".to_string(), own)];
        let diffs = differences(&state(&own), &state(&sluice));
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert!(!unwritten_submitter(&own, &sluice, &diffs[0]));
        let mut http = rayjob_object(&expected, false);
        http["spec"]["submissionMode"] = json!("HTTPMode");
        let http = vec![("RayJob".to_string(), http)];
        let diffs = differences(&state(&http), &state(&sluice));
        assert!(
            diffs
                .iter()
                .all(|d| !unwritten_submitter(&http, &sluice, d))
        );
        // nor for fields Kueue has.
        let d = Difference {
            object: "RayJob ns/train".into(),
            field: "spec.submitterPodTemplate.spec.nodeSelector.pool".into(),
            kueue: "b".into(),
            sluice: "a".into(),
        };
        assert!(!unwritten_submitter(&kueue, &sluice, &d));
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
