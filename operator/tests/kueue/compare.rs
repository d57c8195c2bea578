//! What is compared: each object of the compared kinds flattened to `field path -> value` (the fields that are
//! behaviour, not bookkeeping: no timestamps, UIDs or resource versions), and the differences between two
//! systems' flattened states.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;
use sluice_operator::jobs::workload_name;
use sluice_sdk::kueue::labels;
use sluice_sdk::lws;
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
    let prebuilt = prebuilt_names(objects);
    let lws_uids = lws_uids(objects);
    let roles = group_roles(objects);
    for (kind, o) in objects {
        let ns = o["metadata"]["namespace"].as_str();
        if ns == Some("kueue-system") || ns == Some("kube-system") {
            continue;
        }
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let mut fields = BTreeMap::new();
        let shown = match kind.as_str() {
            "Workload" if is_pod_group_workload(o) => {
                let o = roles_hidden(o);
                pod_group_owners(&o, &mut fields);
                workload(&o, &mut fields, &prebuilt, &lws_uids)
            }
            "Workload" => workload(o, &mut fields, &prebuilt, &lws_uids),
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
            "RayCluster" => {
                raycluster(o, &mut fields);
                name.to_string()
            }
            "RayService" => {
                rayservice(o, &mut fields);
                name.to_string()
            }
            "PyTorchJob" => {
                pytorchjob(o, &mut fields);
                name.to_string()
            }
            "TrainJob" => {
                trainjob(o, &mut fields);
                name.to_string()
            }
            "LeaderWorkerSet" => {
                leaderworkerset(o, &mut fields);
                name.to_string()
            }
            // Only a LeaderWorkerSet's pods (their names are the StatefulSets', the same on both sides).
            "Pod" if o["metadata"]["labels"][LWS_NAME_LABEL].is_string() => {
                lws_pod(o, &mut fields, &lws_uids);
                name.to_string()
            }
            // A plain pod group's pods, named by the scenario.
            "Pod" if o["metadata"]["labels"][POD_GROUP_LABEL].is_string() => {
                group_pod(o, &mut fields, &roles);
                name.to_string()
            }
            "Pod" => continue,
            "ClusterQueue" | "LocalQueue" | "Cohort" => {
                queue(o, &mut fields);
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

/// The label Kueue puts on a job's Workload with the job's uid.
const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";

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
}

/// The (namespace, name) of every Workload a job names as prebuilt (`kueue.x-k8s.io/prebuilt-workload-name`, the
/// annotation or the label): a user named those, not Kueue.
fn prebuilt_names(objects: &[(String, Value)]) -> BTreeSet<(String, String)> {
    const KEY: &str = "kueue.x-k8s.io/prebuilt-workload-name";
    objects
        .iter()
        .filter(|(kind, _)| kind != "Workload")
        .filter_map(|(_, o)| {
            let meta = &o["metadata"];
            let name = meta["annotations"][KEY]
                .as_str()
                .filter(|n| !n.is_empty())
                .or_else(|| meta["labels"][KEY].as_str())?;
            Some((
                meta["namespace"].as_str().unwrap_or_default().to_string(),
                name.to_string(),
            ))
        })
        .collect()
}

/// A Workload: its name checked against Kueue's naming unless a job names it as prebuilt (then shown with the
/// hash, which covers the owner's UID, replaced by `#####`), its queue, priority, admission, conditions and
/// admission check states.
fn workload(
    o: &Value,
    fields: &mut BTreeMap<String, String>,
    prebuilt: &BTreeSet<(String, String)>,
    lws_uids: &LwsUids,
) -> String {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    let mut shown = name.to_string();
    let owner = o["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["controller"] == Value::Bool(true)));
    let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
    let named_by_user = prebuilt.contains(&(ns.to_string(), name.to_string()));
    let lws_owner = o["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["kind"] == lws::KIND));
    if let (None, Some(set)) = (owner, lws_owner) {
        // A LeaderWorkerSet group's Workload: owned, not controlled, by the set (and by the group's pods).
        shown = lws_group_workload(o, set, fields, lws_uids);
    } else if let Some(owner) = owner.filter(|_| named_by_user) {
        put(
            fields,
            "metadata.ownerReferences[controller].kind",
            &owner["kind"],
        );
        put(
            fields,
            "metadata.ownerReferences[controller].name",
            &owner["name"],
        );
    } else if let Some(owner) = owner {
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
    // Its labels (those `integrations.labelKeysToCopy` copies among them); the job-uid label holds the owner's
    // uid, which differs between control planes: compared as whether it names the controller owner.
    for (k, v) in o["metadata"]["labels"].as_object().into_iter().flatten() {
        if k == JOB_UID_LABEL {
            let names_owner = owner.is_some_and(|r| r["uid"] == *v);
            let shown = if names_owner {
                "the owner's uid"
            } else {
                "another uid"
            };
            fields.insert(format!("metadata.labels.{k}"), shown.to_string());
        } else {
            put(fields, &format!("metadata.labels.{k}"), v);
        }
    }
    // Its annotations (those copied from its job: ProvisioningRequest settings, admission gates).
    for (k, v) in o["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        put(fields, &format!("metadata.annotations.{k}"), v);
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
        put(
            fields,
            &format!("spec.podSets[{n}].topologyRequest"),
            &ps["topologyRequest"],
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
        if !a["topologyAssignment"].is_null() {
            fields.insert(
                format!("status.admission.podSetAssignments[{n}].topologyAssignment"),
                topology_assignment(&a["topologyAssignment"]),
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

/// A topology assignment as its levels and each domain's values with its pod count, whatever slice encoding
/// wrote it (Kueue's and Sluice's may compress the same domains differently).
fn topology_assignment(ta: &Value) -> String {
    let parsed: Result<sluice_sdk::kueue::v1beta2::TopologyAssignment, _> =
        serde_json::from_value(ta.clone());
    match parsed.map_err(|e| e.to_string()).and_then(|t| {
        sluice_sdk::kueue::conversion::expand_topology_assignment(&t).map_err(|e| e.to_string())
    }) {
        Ok(ex) => {
            let domains: Vec<String> = ex
                .domains
                .iter()
                .map(|d| format!("{}={}", d.values.join("/"), d.count))
                .collect();
            format!("{} {}", ex.levels.join("/"), domains.join(","))
        }
        Err(e) => format!("unreadable ({e}): {ta}"),
    }
}

/// The label naming a LeaderWorkerSet on its pods.
const LWS_NAME_LABEL: &str = lws::SET_NAME_LABEL;

/// The UIDs a LeaderWorkerSet's objects are judged by.
struct LwsUids {
    /// Each LeaderWorkerSet's, by (namespace, name).
    sets: BTreeMap<(String, String), String>,
    /// Every listed object's.
    live: BTreeSet<String>,
}

fn lws_uids(objects: &[(String, Value)]) -> LwsUids {
    let uid = |o: &Value| {
        o["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let sets = objects
        .iter()
        .filter(|(kind, _)| kind == lws::KIND)
        .map(|(_, o)| {
            let meta = &o["metadata"];
            let key = (
                meta["namespace"].as_str().unwrap_or_default().to_string(),
                meta["name"].as_str().unwrap_or_default().to_string(),
            );
            (key, uid(o))
        })
        .collect();
    let live = objects.iter().map(|(_, o)| uid(o)).collect();
    LwsUids { sets, live }
}

/// Kueue's name for the Workload of group `index` of the LeaderWorkerSet `ns/set`, when that set is listed.
fn lws_expected(lws_uids: &LwsUids, ns: &str, set: &str, index: &str) -> Option<String> {
    let uid = lws_uids.sets.get(&(ns.to_string(), set.to_string()))?;
    Some(workload_name(
        lws::KIND,
        lws::GROUP,
        &format!("{set}-{index}"),
        uid,
    ))
}

/// A LeaderWorkerSet group's Workload: its name checked against Kueue's for its set and group index (its
/// `component-workload-index` annotation; a mismatch is a `metadata.name` field) and shown with the hash as `#####`; its owners by kind and count, and the
/// annotations Kueue gives such a Workload.
fn lws_group_workload(
    o: &Value,
    set: &Value,
    fields: &mut BTreeMap<String, String>,
    lws_uids: &LwsUids,
) -> String {
    let meta = &o["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let ns = meta["namespace"].as_str().unwrap_or_default();
    let index = meta["annotations"][labels::COMPONENT_WORKLOAD_INDEX_ANNOTATION]
        .as_str()
        .unwrap_or("?");
    let set_name = set["name"].as_str().unwrap_or_default();
    let expected = lws_expected(lws_uids, ns, set_name, index).unwrap_or_default();
    if expected != name {
        fields.insert(
            "metadata.name".into(),
            format!("{name}, not Kueue's name for group {index} of its set ({expected})"),
        );
    }
    let shown = hash_hidden(name, name);
    put(
        fields,
        "metadata.ownerReferences[LeaderWorkerSet].name",
        &set["name"],
    );
    // Owners that exist: references to the group's deleted pods are the garbage collector's to drop, whenever it
    // gets to them on each control plane.
    let mut owners: BTreeMap<&str, usize> = BTreeMap::new();
    for r in meta["ownerReferences"].as_array().into_iter().flatten() {
        if r["uid"].as_str().is_some_and(|u| lws_uids.live.contains(u)) {
            *owners.entry(r["kind"].as_str().unwrap_or("?")).or_default() += 1;
        }
    }
    for (kind, n) in owners {
        fields.insert(
            format!("metadata.ownerReferences[{kind}].existing"),
            n.to_string(),
        );
    }
    for (k, v) in kueue_keys(meta, "annotations") {
        put(fields, &format!("metadata.annotations.{k}"), v);
    }
    shown
}

/// Kueue's entries (`kueue.x-k8s.io/...`) of an object's `labels` or `annotations`.
fn kueue_keys<'a>(meta: &'a Value, part: &str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    meta[part]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("kueue.x-k8s.io/"))
}

/// A LeaderWorkerSet: its replicas, and what Kueue's webhook gave its leader and worker templates (labels,
/// annotations, node selector, tolerations).
fn leaderworkerset(o: &Value, fields: &mut BTreeMap<String, String>) {
    put(fields, "spec.replicas", &o["spec"]["replicas"]);
    let template = &o["spec"]["leaderWorkerTemplate"];
    put(fields, "spec.leaderWorkerTemplate.size", &template["size"]);
    for t in ["leaderTemplate", "workerTemplate"] {
        if !template[t].is_null() {
            template_given(
                fields,
                &format!("spec.leaderWorkerTemplate.{t}"),
                &template[t],
                "",
            );
        }
    }
}

/// A LeaderWorkerSet's pod: its scheduling gates, phase, node selector, tolerations, and Kueue's labels and
/// annotations on it (a Workload's name checked against Kueue's for the pod's set and group, and shown with the
/// hash as `#####`).
/// The label naming a plain pod group on its pods.
const POD_GROUP_LABEL: &str = "kueue.x-k8s.io/pod-group-name";

/// A plain pod group's Workload (annotated `kueue.x-k8s.io/is-group-workload`), not a LeaderWorkerSet group's.
fn is_pod_group_workload(o: &Value) -> bool {
    let meta = &o["metadata"];
    meta["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
        && !meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["kind"] == lws::KIND)
}

/// Role hashes of pod group Workloads' pod sets, by namespace and hash, as [`roles_hidden`] renames them.
fn group_roles(objects: &[(String, Value)]) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for (kind, o) in objects {
        if kind != "Workload" || !is_pod_group_workload(o) {
            continue;
        }
        let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
        for (i, ps) in o["spec"]["podSets"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(name) = ps["name"].as_str().filter(|n| is_role_hash(n)) {
                out.insert((ns.to_string(), name.to_string()), format!("role-{i}"));
            }
        }
    }
    out
}

/// A pod set name of 8 hex digits: a role hash.
fn is_role_hash(name: &str) -> bool {
    name.len() == 8 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod group's Workload with its pod sets' role hashes (names of 8 hex digits, which Kueue and Sluice compute
/// from different JSON encodings) renamed `role-<index>` wherever they appear as a whole string.
fn roles_hidden(o: &Value) -> Value {
    let mut text = o.to_string();
    for (i, ps) in o["spec"]["podSets"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(name) = ps["name"].as_str() else {
            continue;
        };
        if is_role_hash(name) {
            text = text.replace(&format!("\"{name}\""), &format!("\"role-{i}\""));
        }
    }
    serde_json::from_str(&text).unwrap_or_else(|_| o.clone())
}

/// A pod group's Workload's owners: its pods, by name, in name order (Kueue adds them in its list's order).
fn pod_group_owners(o: &Value, fields: &mut BTreeMap<String, String>) {
    let mut pods: Vec<&str> = o["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["kind"] == "Pod")
        .filter_map(|r| r["name"].as_str())
        .collect();
    pods.sort_unstable();
    fields.insert("metadata.ownerReferences[Pod]".into(), pods.join(","));
}

/// A plain pod group's pod: its gates, phase, deletion, Kueue's finalizer, Kueue's labels and annotations (the
/// role hash left out, see [`roles_hidden`]), node selector and tolerations.
fn group_pod(
    o: &Value,
    fields: &mut BTreeMap<String, String>,
    roles: &BTreeMap<(String, String), String>,
) {
    pod_placement(o, fields);
    let meta = &o["metadata"];
    let managed = meta["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|f| f == "kueue.x-k8s.io/managed");
    fields.insert("metadata.finalizers[managed]".into(), managed.to_string());
    for part in ["labels", "annotations"] {
        for (k, v) in kueue_keys(meta, part).filter(|(k, _)| *k != "kueue.x-k8s.io/role-hash") {
            let ns = meta["namespace"].as_str().unwrap_or_default().to_string();
            match v.as_str().and_then(|h| roles.get(&(ns, h.to_string()))) {
                Some(role) => {
                    fields.insert(format!("metadata.{part}.{k}"), role.clone());
                }
                None => put(fields, &format!("metadata.{part}.{k}"), v),
            }
        }
    }
}

/// What Kueue and Sluice decide of any managed pod: its scheduling gates, phase, whether it is being deleted, its
/// node selector and tolerations.
fn pod_placement(o: &Value, fields: &mut BTreeMap<String, String>) {
    let gates: Vec<&str> = o["spec"]["schedulingGates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["name"].as_str())
        .collect();
    fields.insert("spec.schedulingGates".into(), gates.join(","));
    put(fields, "status.phase", &o["status"]["phase"]);
    if !o["metadata"]["deletionTimestamp"].is_null() {
        fields.insert("metadata.deletionTimestamp".into(), "set".into());
    }
    let pod = &o["spec"];
    for (k, v) in pod["nodeSelector"].as_object().into_iter().flatten() {
        put(fields, &format!("spec.nodeSelector.{k}"), v);
    }
    // The API server's own (not-ready, unreachable) are the same on both sides and stay.
    if let Some(t) = pod["tolerations"].as_array().filter(|t| !t.is_empty()) {
        fields.insert(
            "spec.tolerations".into(),
            Value::from(t.clone()).to_string(),
        );
    }
}

fn lws_pod(o: &Value, fields: &mut BTreeMap<String, String>, lws_uids: &LwsUids) {
    let meta = &o["metadata"];
    let ns = meta["namespace"].as_str().unwrap_or_default();
    let set = meta["labels"][LWS_NAME_LABEL].as_str().unwrap_or_default();
    let index = meta["labels"][lws::GROUP_INDEX_LABEL]
        .as_str()
        .unwrap_or("?");
    let expected = lws_expected(lws_uids, ns, set, index).unwrap_or_default();
    pod_placement(o, fields);
    for part in ["labels", "annotations"] {
        for (k, v) in kueue_keys(meta, part) {
            let path = format!("metadata.{part}.{k}");
            match v.as_str() {
                Some(name) if name.starts_with("leaderworkerset-") => {
                    fields.insert(path, hash_hidden(name, &expected));
                }
                _ => put(fields, &path, v),
            }
        }
    }
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
    cluster_templates_given(
        fields,
        "spec.rayClusterSpec",
        &spec["rayClusterSpec"],
        &workload,
    );
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

/// What was injected into a Ray cluster spec's pod templates: the head's, and each worker group's by group name.
fn cluster_templates_given(
    fields: &mut BTreeMap<String, String>,
    at: &str,
    cluster: &Value,
    workload: &str,
) {
    template_given(
        fields,
        &format!("{at}.headGroupSpec.template"),
        &cluster["headGroupSpec"]["template"],
        workload,
    );
    for g in cluster["workerGroupSpecs"].as_array().into_iter().flatten() {
        let n = g["groupName"].as_str().unwrap_or("?");
        let prefix = format!("{at}.workerGroupSpecs[{n}].template");
        template_given(fields, &prefix, &g["template"], workload);
    }
}

/// A RayCluster: suspended or not (`spec.suspend`, absent read as false) and what was injected into its head's and
/// each worker group's pod template.
fn raycluster(o: &Value, fields: &mut BTreeMap<String, String>) {
    let spec = &o["spec"];
    fields.insert(
        "spec.suspend".into(),
        spec["suspend"].as_bool().unwrap_or(false).to_string(),
    );
    let workload = workload_name(
        "RayCluster",
        "ray.io",
        o["metadata"]["name"].as_str().unwrap_or_default(),
        o["metadata"]["uid"].as_str().unwrap_or_default(),
    );
    cluster_templates_given(fields, "spec", spec, &workload);
}

/// A RayService: its cluster's suspend (`spec.rayClusterConfig.suspend`, absent read as false) and what was injected
/// into its cluster's head and worker group templates.
fn rayservice(o: &Value, fields: &mut BTreeMap<String, String>) {
    let cluster = &o["spec"]["rayClusterConfig"];
    fields.insert(
        "spec.rayClusterConfig.suspend".into(),
        cluster["suspend"].as_bool().unwrap_or(false).to_string(),
    );
    let workload = workload_name(
        "RayService",
        "ray.io",
        o["metadata"]["name"].as_str().unwrap_or_default(),
        o["metadata"]["uid"].as_str().unwrap_or_default(),
    );
    cluster_templates_given(fields, "spec.rayClusterConfig", cluster, &workload);
}

/// A TrainJob: suspended or not, its runtime patches' managers in order, and what Kueue's runtime patch gives each
/// replicated job's pod template.
fn trainjob(o: &Value, fields: &mut BTreeMap<String, String>) {
    let spec = &o["spec"];
    fields.insert(
        "spec.suspend".into(),
        spec["suspend"].as_bool().unwrap_or(false).to_string(),
    );
    let patches = spec["runtimePatches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let managers: Vec<&str> = patches
        .iter()
        .map(|p| p["manager"].as_str().unwrap_or("?"))
        .collect();
    fields.insert("spec.runtimePatches.managers".into(), managers.join(","));
    let workload = workload_name(
        "TrainJob",
        "trainer.kubeflow.org",
        o["metadata"]["name"].as_str().unwrap_or_default(),
        o["metadata"]["uid"].as_str().unwrap_or_default(),
    );
    let kueue = patches
        .iter()
        .find(|p| p["manager"] == "kueue.x-k8s.io/manager");
    let jobs = kueue
        .and_then(|p| p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"].as_array());
    for rj in jobs.into_iter().flatten() {
        let n = rj["name"].as_str().unwrap_or("?");
        let prefix =
            format!("spec.runtimePatches[kueue].replicatedJobs[{n}].template.spec.template");
        template_given(
            fields,
            &prefix,
            &rj["template"]["spec"]["template"],
            &workload,
        );
    }
}

/// A PyTorchJob: suspended or not (`spec.runPolicy.suspend`, absent read as false) and what was injected into each
/// replica type's pod template, by replica type.
fn pytorchjob(o: &Value, fields: &mut BTreeMap<String, String>) {
    let spec = &o["spec"];
    fields.insert(
        "spec.runPolicy.suspend".into(),
        spec["runPolicy"]["suspend"]
            .as_bool()
            .unwrap_or(false)
            .to_string(),
    );
    let workload = workload_name(
        "PyTorchJob",
        "kubeflow.org",
        o["metadata"]["name"].as_str().unwrap_or_default(),
        o["metadata"]["uid"].as_str().unwrap_or_default(),
    );
    for (replica_type, r) in spec["pytorchReplicaSpecs"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let prefix = format!("spec.pytorchReplicaSpecs[{replica_type}].template");
        template_given(fields, &prefix, &r["template"], &workload);
    }
}

/// A ClusterQueue, LocalQueue or Cohort: whether it is being deleted, its status counts, usage per flavor and
/// resource, conditions and fair share.
fn queue(o: &Value, fields: &mut BTreeMap<String, String>) {
    let status = &o["status"];
    if !o["metadata"]["deletionTimestamp"].is_null() {
        fields.insert("metadata.deletionTimestamp".into(), "set".into());
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

/// Every field whose value differs (an object or field one side lacks counts, shown as `<absent>`).
pub fn differences(kueue: &State, sluice: &State) -> Vec<Difference> {
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    let objects: std::collections::BTreeSet<&String> = kueue.keys().chain(sluice.keys()).collect();
    for obj in objects {
        let (k, s) = (kueue.get(obj), sluice.get(obj));
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
            if kv != sv {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    const LWS_UID: &str = "3a5c7e9b-2d4f-4a6c-8e0b-1f3d5b7a9c2e";
    const POD_UID: &str = "5e7a9c1b-4d6f-4b8a-9c2e-3f5d7b9a1c4e";
    const GONE_UID: &str = "9c1e3a5b-7d9f-4e2a-8b4c-6f8d0b2a4c6e";

    /// A LeaderWorkerSet, the Workload of its group 0 (owned by the set, by its live leader pod and by a deleted
    /// one) named `workload`, and the leader pod, ungated onto pool a.
    fn lws_objects(workload: &str) -> Vec<(String, Value)> {
        let set = json!({"metadata": {"namespace": "ns", "name": "serve", "uid": LWS_UID},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "leaderTemplate": {
                "metadata": {"annotations": {"kueue.x-k8s.io/pod-group-serving": "true"}}, "spec": {}}}}});
        let wl = json!({"metadata": {"namespace": "ns", "name": workload, "uid": "1b3d5f7a-9c2e-4f6a-8b0d-2e4f6a8c0b1d",
            "annotations": {"kueue.x-k8s.io/component-workload-index": "0"},
            "ownerReferences": [
                {"kind": "LeaderWorkerSet", "name": "serve", "uid": LWS_UID},
                {"kind": "Pod", "name": "serve-0", "uid": POD_UID},
                {"kind": "Pod", "name": "serve-0", "uid": GONE_UID}]},
            "spec": {"queueName": "q"}});
        let pod = json!({"metadata": {"namespace": "ns", "name": "serve-0", "uid": POD_UID,
                "labels": {"leaderworkerset.sigs.k8s.io/name": "serve", "leaderworkerset.sigs.k8s.io/group-index": "0",
                           "kueue.x-k8s.io/managed": "true", "app": "x"},
                "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": workload}},
            "spec": {"schedulingGates": [], "nodeSelector": {"pool": "a"}},
            "status": {"phase": "Running"}});
        vec![
            ("LeaderWorkerSet".into(), set),
            ("Workload".into(), wl),
            ("Pod".into(), pod),
        ]
    }

    #[test]
    fn a_leaderworkerset_group_is_compared_by_its_workload_and_its_pods() {
        let expected = workload_name(
            "LeaderWorkerSet",
            "leaderworkerset.x-k8s.io",
            "serve-0",
            LWS_UID,
        );
        let s = state(&lws_objects(&expected));
        let shown = format!("Workload ns/{}#####", &expected[..expected.len() - 5]);
        let wl = &s[&shown];
        assert!(!wl.contains_key("metadata.name"), "{wl:?}");
        // The deleted pod's reference is the garbage collector's: only existing owners count.
        assert_eq!(wl["metadata.ownerReferences[Pod].existing"], "1");
        assert_eq!(
            wl["metadata.ownerReferences[LeaderWorkerSet].name"],
            "serve"
        );
        let pod = &s["Pod ns/serve-0"];
        assert_eq!(pod["spec.schedulingGates"], "");
        assert_eq!(pod["spec.nodeSelector.pool"], "a");
        assert_eq!(pod["status.phase"], "Running");
        assert_eq!(
            pod["metadata.annotations.kueue.x-k8s.io/prebuilt-workload-name"],
            shown.trim_start_matches("Workload ns/")
        );
        assert!(
            !pod.contains_key("metadata.labels.app"),
            "only Kueue's labels: {pod:?}"
        );
        let set = &s["LeaderWorkerSet ns/serve"];
        assert_eq!(
            set["spec.leaderWorkerTemplate.leaderTemplate.metadata.annotations.kueue.x-k8s.io/pod-group-serving"],
            "true"
        );
        // Another name is one Kueue would not have given, on the Workload and where a pod names it.
        let s = state(&lws_objects("leaderworkerset-serve-0-00000"));
        let wl = &s["Workload ns/leaderworkerset-serve-0-#####"];
        assert!(wl["metadata.name"].contains("not Kueue's name"), "{wl:?}");
        let named =
            &s["Pod ns/serve-0"]["metadata.annotations.kueue.x-k8s.io/prebuilt-workload-name"];
        assert!(named.contains("not Kueue's name"), "{named}");
        // Pods of other owners are not compared (their names are generated).
        let mut other = lws_objects(&expected);
        other[2].1["metadata"]["labels"] = json!({});
        assert!(!state(&other).contains_key("Pod ns/serve-0"));
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
    fn a_raycluster_is_compared_by_its_suspension_and_what_each_template_was_given() {
        let expected = workload_name("RayCluster", "ray.io", "train", RAY_UID);
        let job = rayjob_object(&expected, false);
        let mut o = json!({"metadata": job["metadata"].clone(), "spec": job["spec"]["rayClusterSpec"].clone()});
        o["spec"]["suspend"] = json!(true);
        let s = state(&[("RayCluster".into(), o)]);
        let fields = &s["RayCluster ns/train"];
        assert_eq!(fields["spec.suspend"], "true");
        assert_eq!(
            fields["spec.headGroupSpec.template.metadata.labels.kueue.x-k8s.io/podset"],
            "head"
        );
        assert_eq!(
            fields["spec.workerGroupSpecs[Workers].template.spec.nodeSelector.pool"],
            "a"
        );
        assert_eq!(
            fields["spec.workerGroupSpecs[Workers].template.metadata.annotations.kueue.x-k8s.io/workload"],
            "raycluster-train-#####"
        );
        assert!(!fields.keys().any(|f| f.contains("containers")));
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
}
