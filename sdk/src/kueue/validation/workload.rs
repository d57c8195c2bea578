//! Workload: pod sets, priority, topology requests, and the status Kueue writes (admission, reclaimable pods,
//! admission checks), plus what must stay while quota is reserved.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::common;
use super::errors::{Errors, Path, ValidationErrors, quote};
use super::gates;
use super::names;
use super::quantity;
use super::workload_status;
use crate::kueue::labels::{ADMISSION_GATED_BY_ANNOTATION, ELASTIC_JOB_ANNOTATION, condition};
use crate::kueue::v1beta2::{
    CheckState, PodSet, PodSetTopologyRequest, PriorityClassGroup, PriorityClassKind, Workload,
};
use crate::quantity::resource_value;

const KIND: &str = "Workload";
const IMMUTABLE: &str = "field is immutable";

fn condition_true(conditions: &[Condition], kind: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == kind && c.status == "True")
}

/// Whether the workload holds a quota reservation (its QuotaReserved condition is True).
pub fn has_quota_reservation(wl: &Workload) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| condition_true(&s.conditions, condition::QUOTA_RESERVED))
}

fn is_admitted(wl: &Workload) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| condition_true(&s.conditions, condition::ADMITTED))
}

/// Whether the workload is elastic (ElasticJobsViaWorkloadSlices is on by default in Kueue 0.19).
fn is_elastic(wl: &Workload) -> bool {
    annotation(wl, ELASTIC_JOB_ANNOTATION) == Some("true")
}

fn annotation<'a>(wl: &'a Workload, key: &str) -> Option<&'a str> {
    wl.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn check(errs: &mut Errors, wl: &Workload, old: Option<&Workload>) {
    names::object_name(errs, wl.metadata.name.as_deref());
    gates::format(
        errs,
        annotation(wl, ADMISSION_GATED_BY_ANNOTATION).unwrap_or_default(),
    );
    let spec = Path::new("spec");
    let s = &wl.spec;
    let ps_path = spec.child("podSets");
    errs.items(&ps_path, s.pod_sets.len(), 1, 18);
    let mut seen = BTreeSet::new();
    let mut with_min_count = 0;
    for (i, ps) in s.pod_sets.iter().enumerate() {
        let p = ps_path.index(i);
        pod_set(errs, &p, ps);
        if !seen.insert(ps.name.as_str()) {
            errs.duplicate(&p.child("name"), quote(&ps.name));
        }
        if ps.min_count.is_some() {
            with_min_count += 1;
        }
    }
    if with_min_count > 1 {
        errs.invalid(
            &ps_path,
            with_min_count.to_string(),
            "at most one podSet can use minCount",
        );
    }
    if with_min_count > 0 && is_elastic(wl) {
        errs.invalid(
            &ps_path,
            with_min_count.to_string(),
            "partial admission and elastic job cannot be used together",
        );
    }
    if !s.queue_name.is_empty() {
        names::reference(errs, &spec.child("queueName"), &s.queue_name);
    }
    if let Some(r) = &s.priority_class_ref {
        let rp = spec.child("priorityClassRef");
        if r.group == Some(PriorityClassGroup::Scheduling)
            && r.kind != Some(PriorityClassKind::PriorityClass)
        {
            errs.invalid(
                &rp,
                "\"object\"",
                "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
            );
        }
        if r.group == Some(PriorityClassGroup::Kueue)
            && r.kind != Some(PriorityClassKind::WorkloadPriorityClass)
        {
            errs.invalid(
                &rp,
                "\"object\"",
                "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
            );
        }
        if r.name.is_empty() {
            errs.invalid_str(&rp.child("name"), "", "should be at least 1 chars long");
        } else {
            names::reference(errs, &rp.child("name"), &r.name);
        }
        if s.priority.is_none() {
            errs.invalid(
                &spec,
                "\"object\"",
                "priority should not be nil when priorityClassRef is set",
            );
        }
    }
    if let Some(m) = s.maximum_execution_time_seconds {
        errs.minimum(&spec.child("maximumExecutionTimeSeconds"), m.into(), 1);
    }
    let gates = spec.child("preemptionGates");
    if s.preemption_gates.len() > 8 {
        errs.too_many(&gates, s.preemption_gates.len(), 8);
    }
    for (i, g) in s.preemption_gates.iter().enumerate() {
        let p = gates.index(i).child("name");
        if g.name.is_empty() {
            errs.invalid_str(&p, "", "should be at least 1 chars long");
        }
        errs.max_len(&p, &g.name, 63);
    }
    status(errs, wl, old);
}

fn pod_set(errs: &mut Errors, p: &Path, ps: &PodSet) {
    names::check(errs, &p.child("name"), &ps.name, names::dns_label);
    errs.minimum(&p.child("count"), ps.count.into(), 0);
    if let Some(mc) = ps.min_count {
        errs.minimum(&p.child("minCount"), mc.into(), 1);
        if mc > ps.count {
            errs.invalid(
                p,
                "\"object\"",
                "minCount should be positive and less or equal to count",
            );
        }
    }
    template(errs, &p.child("template"), &ps.template);
    if let Some(tr) = &ps.topology_request {
        topology_request(errs, &p.child("topologyRequest"), tr);
    }
}

fn template(errs: &mut Errors, p: &Path, t: &PodTemplateSpec) {
    if let Some(meta) = &t.metadata {
        let mp = p.child("metadata");
        if let Some(l) = &meta.labels {
            names::labels(errs, &mp.child("labels"), l);
        }
        if let Some(a) = &meta.annotations {
            names::annotations(errs, &mp.child("annotations"), a);
        }
    }
    let Some(spec) = &t.spec else { return };
    let sp = p.child("spec");
    let containers = |errs: &mut Errors, name: &str, list: &[Container]| {
        for (i, c) in list.iter().enumerate() {
            let rp = sp.child(name).index(i).child("resources");
            if let Some(r) = &c.resources {
                resource_list(errs, &rp.child("requests"), r.requests.as_ref());
                resource_list(errs, &rp.child("limits"), r.limits.as_ref());
            }
        }
    };
    containers(
        errs,
        "initContainers",
        spec.init_containers.as_deref().unwrap_or_default(),
    );
    containers(errs, "containers", &spec.containers);
    if let Some(r) = &spec.resources {
        let rp = sp.child("resources");
        resource_list(errs, &rp.child("requests"), r.requests.as_ref());
        resource_list(errs, &rp.child("limits"), r.limits.as_ref());
    }
}

fn resource_list(errs: &mut Errors, p: &Path, list: Option<&BTreeMap<String, Quantity>>) {
    for (name, q) in list.into_iter().flatten() {
        let kp = p.key(name);
        if name == "pods" {
            errs.invalid_str(&kp, "pods", "the key is reserved for internal kueue use");
        }
        quantity::non_negative(errs, &kp, q);
    }
}

fn topology_request(errs: &mut Errors, p: &Path, tr: &PodSetTopologyRequest) {
    let lengths = [
        ("required", tr.required.as_deref(), 63),
        ("preferred", tr.preferred.as_deref(), 63),
        ("podIndexLabel", tr.pod_index_label.as_deref(), 317),
        (
            "subGroupIndexLabel",
            tr.sub_group_index_label.as_deref(),
            317,
        ),
        ("podSetGroupName", tr.pod_set_group_name.as_deref(), 256),
        (
            "podSetSliceRequiredTopology",
            tr.pod_set_slice_required_topology.as_deref(),
            63,
        ),
    ];
    for (field, value, max) in lengths {
        if let Some(v) = value {
            errs.max_len(&p.child(field), v, max);
        }
    }
    if tr.pod_set_slice_required_topology.is_some() {
        match tr.pod_set_slice_size {
            None => errs.required(
                &p.child("podSetSliceSize"),
                "must be set when podSetSliceRequiredTopology is specified",
            ),
            Some(n) if n <= 0 => errs.invalid(
                &p.child("podSetSliceSize"),
                n.to_string(),
                "must be greater than 0",
            ),
            Some(_) => {}
        }
    } else if tr.pod_set_slice_size.is_some() {
        errs.forbidden(
            &p.child("podSetSliceSize"),
            "may not be set when podSetSliceRequiredTopology is not specified",
        );
    }
    let cp = p.child("podsetSliceRequiredTopologyConstraints");
    let constraints = &tr.podset_slice_required_topology_constraints;
    if constraints.len() > 3 {
        errs.too_many(&cp, constraints.len(), 3);
    }
    for (i, c) in constraints.iter().enumerate() {
        let ip = cp.index(i);
        if c.topology.is_empty() {
            errs.invalid_str(&ip.child("topology"), "", "should be at least 1 chars long");
        }
        errs.max_len(&ip.child("topology"), &c.topology, 63);
        if c.size <= 0 {
            errs.invalid(
                &ip.child("size"),
                c.size.to_string(),
                "must be greater than 0",
            );
        }
    }
}

fn is_condition_reason(s: &str) -> bool {
    let b = s.as_bytes();
    let tail_ok = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last().is_some_and(tail_ok)
        && b.iter().all(|c| tail_ok(c) || matches!(c, b',' | b':'))
}

/// Checks a condition's reason, message and observed generation as Kubernetes does.
fn condition_text(errs: &mut Errors, cp: &Path, c: &Condition) {
    let rp = cp.child("reason");
    if c.reason.is_empty() {
        errs.required(&rp, "must be set");
    } else {
        if c.reason.len() > 1024 {
            errs.invalid(&rp, "\"\"", "may not be more than 1024 bytes");
        }
        if !is_condition_reason(&c.reason) {
            errs.invalid_str(
                &rp,
                &c.reason,
                "a condition reason must start with alphabetic character, optionally followed by a string of \
                 alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. \
                 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex \
                 used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
            );
        }
    }
    if c.message.len() > 32768 {
        errs.invalid(
            &cp.child("message"),
            "\"\"",
            "may not be more than 32768 bytes",
        );
    }
    if let Some(g) = c.observed_generation.filter(|g| *g < 0) {
        errs.invalid(
            &cp.child("observedGeneration"),
            g.to_string(),
            "must be greater than or equal to zero",
        );
    }
}

fn status(errs: &mut Errors, wl: &Workload, old: Option<&Workload>) {
    let Some(st) = &wl.status else { return };
    workload_status::limits(errs, st);
    let sp = Path::new("status");
    let pod_sets: BTreeMap<&str, &PodSet> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    let known: Vec<&str> = pod_sets.keys().copied().collect();
    if st.conditions.len() > 16 {
        errs.too_many(&sp.child("conditions"), st.conditions.len(), 16);
    }
    for (i, c) in st.conditions.iter().enumerate() {
        let cp = sp.child("conditions").index(i);
        names::check(errs, &cp.child("type"), &c.type_, names::qualified_name);
        if !["True", "False", "Unknown"].contains(&c.status.as_str()) {
            errs.not_supported(
                &cp.child("status"),
                &c.status,
                &["False", "True", "Unknown"],
            );
        }
        condition_text(errs, &cp, c);
    }

    if has_quota_reservation(wl) {
        let ap = sp.child("admission");
        match &st.admission {
            // A workload already in this state may go on converging, as Kueue allows.
            None if old.is_some_and(|o| {
                has_quota_reservation(o) && o.status.as_ref().is_some_and(|s| s.admission.is_none())
            }) => {}
            None => errs.required(&ap, "must be set while the QuotaReserved condition is true"),
            Some(adm) => {
                if adm.pod_set_assignments.len() != wl.spec.pod_sets.len() {
                    errs.invalid(
                        &Path::new(""),
                        "\"object\"",
                        "podSetAssignments must have the same number of podSets as the spec",
                    );
                }
                let psa = ap.child("podSetAssignments");
                for (i, a) in adm.pod_set_assignments.iter().enumerate() {
                    let p = psa.index(i);
                    if !pod_sets.contains_key(a.name.as_str()) {
                        errs.not_found(&p.child("name"), &a.name);
                    }
                    let count = a.count.unwrap_or(0);
                    if count > 0 {
                        for (res, q) in &a.resource_usage {
                            // An unparsable usage is reported by its own rule elsewhere; skip it here.
                            if let Ok(v) = resource_value(res, q)
                                && v % i64::from(count) != 0
                            {
                                errs.invalid_str(
                                    &p.child("resourceUsage").key(res),
                                    &q.0,
                                    format!("is not a multiple of {count}"),
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    let rp = sp.child("reclaimablePods");
    if st.reclaimable_pods.len() > 18 {
        errs.too_many(&rp, st.reclaimable_pods.len(), 18);
    }
    for r in &st.reclaimable_pods {
        let p = rp.key(&r.name);
        errs.minimum(&p.child("count"), r.count.into(), 0);
        match pod_sets.get(r.name.as_str()) {
            None => errs.not_supported(&p.child("name"), &r.name, &known),
            Some(ps) if r.count > ps.count => {
                // An unchanged count left over by an elastic scale-down may stay, so the job can converge.
                let stale = is_elastic(wl)
                    && old.and_then(|o| o.status.as_ref()).is_some_and(|os| {
                        os.reclaimable_pods
                            .iter()
                            .any(|o| o.name == r.name && o.count == r.count)
                    });
                if !stale {
                    errs.invalid(
                        &p.child("count"),
                        r.count.to_string(),
                        format!("should be less or equal to {}", ps.count),
                    );
                }
            }
            Some(_) => {}
        }
    }

    let acp = sp.child("admissionChecks");
    if st.admission_checks.len() > 8 {
        errs.too_many(&acp, st.admission_checks.len(), 8);
    }
    for (i, ac) in st.admission_checks.iter().enumerate() {
        let base = acp.index(i).child("podSetUpdates");
        for (j, u) in ac.pod_set_updates.iter().enumerate() {
            let up = base.index(j);
            if !pod_sets.contains_key(u.name.as_str()) {
                errs.not_supported(&up.child("name"), &u.name, &known);
            }
            common::tolerations(errs, &up.child("tolerations"), &u.tolerations);
            names::annotations(errs, &up.child("annotations"), &u.annotations);
            names::labels(errs, &up.child("nodeSelector"), &u.node_selector);
            names::labels(errs, &up.child("labels"), &u.labels);
        }
    }
    if st.cluster_name.is_some() && !st.nominated_cluster_names.is_empty() {
        errs.invalid(
            &sp,
            "\"object\"",
            "clusterName and nominatedClusterNames are mutually exclusive",
        );
    }
}

/// Validates a Workload for creation.
pub fn validate_workload(wl: &Workload) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, wl, None);
    errs.finish(KIND, wl.metadata.name.as_deref().unwrap_or_default())
}

/// Validates an update: the new object, and what must stay while quota is reserved (pod sets, queue name, priority
/// class, maximum execution time, admission, reclaimable counts, ready pod set updates, cluster name).
pub fn validate_workload_update(old: &Workload, new: &Workload) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, new, Some(old));
    gates::update(
        &mut errs,
        annotation(old, ADMISSION_GATED_BY_ANNOTATION),
        annotation(new, ADMISSION_GATED_BY_ANNOTATION),
    );
    let spec = Path::new("spec");
    let old_reserved = has_quota_reservation(old);
    let new_reserved = has_quota_reservation(new);
    let elastic = is_elastic(new);

    if old_reserved {
        let p = spec.child("podSets");
        if old.spec.pod_sets.len() != new.spec.pod_sets.len() {
            errs.immutable(&p, "\"array\"", IMMUTABLE);
        } else {
            for (i, (o, n)) in old.spec.pod_sets.iter().zip(&new.spec.pod_sets).enumerate() {
                let mut n = n.clone();
                // Elastic jobs may scale down while admitted (ElasticJobsViaWorkloadSlices is on by default).
                if n.count < o.count {
                    n.count = o.count;
                }
                if &n != o {
                    errs.immutable(&p.index(i), "\"object\"", IMMUTABLE);
                }
            }
        }
        match (&old.spec.priority_class_ref, &new.spec.priority_class_ref) {
            (None, None) => {}
            (Some(o), Some(n)) => {
                if o.group != n.group {
                    errs.invalid(
                        &Path::new(""),
                        "\"object\"",
                        "priorityClassRef.group is immutable while workload quota reserved",
                    );
                }
                if o.kind != n.kind {
                    errs.invalid(
                        &Path::new(""),
                        "\"object\"",
                        "priorityClassRef.kind is immutable while workload quota reserved",
                    );
                }
                // Only a pod PriorityClass reference is pinned; a WorkloadPriorityClass may be switched.
                if n.group == Some(PriorityClassGroup::Scheduling)
                    && n.kind == Some(PriorityClassKind::PriorityClass)
                    && o.name != n.name
                {
                    errs.invalid(
                        &Path::new(""),
                        "\"object\"",
                        "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved",
                    );
                }
            }
            _ => errs.invalid(
                &Path::new(""),
                "\"object\"",
                "priorityClassRef is immutable while workload quota reserved",
            ),
        }
    }
    if old_reserved && new_reserved && old.spec.queue_name != new.spec.queue_name {
        errs.invalid(
            &Path::new(""),
            "\"object\"",
            "queueName is immutable while workload quota reserved",
        );
    }
    // Kueue pins this one while Admitted (not merely QuotaReserved), despite its message.
    if is_admitted(old)
        && is_admitted(new)
        && old.spec.maximum_execution_time_seconds.unwrap_or(0)
            != new.spec.maximum_execution_time_seconds.unwrap_or(0)
    {
        errs.invalid(
            &Path::new(""),
            "\"object\"",
            "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        );
    }

    let (os, ns) = (
        old.status.clone().unwrap_or_default(),
        new.status.clone().unwrap_or_default(),
    );
    let sp = Path::new("status");
    if old_reserved && new_reserved {
        reclaimable_update(&mut errs, &sp.child("reclaimablePods"), old, new, elastic);
    }
    if let (Some(o), Some(n)) = (&os.admission, &ns.admission) {
        let mut o = o.clone();
        // Topology assignments may be filled in after the reservation (TAS is on by default).
        if o.pod_set_assignments.len() == n.pod_set_assignments.len() {
            for (oa, na) in o.pod_set_assignments.iter_mut().zip(&n.pod_set_assignments) {
                oa.topology_assignment.clone_from(&na.topology_assignment);
                oa.delayed_topology_request = na.delayed_topology_request;
            }
        }
        if &o != n {
            errs.immutable(&sp.child("admission"), "\"object\"", IMMUTABLE);
        }
    }
    for (i, oac) in os.admission_checks.iter().enumerate() {
        if let Some(nac) = ns.admission_checks.iter().find(|a| a.name == oac.name)
            && oac.state == Some(CheckState::Ready)
            && nac.state == Some(CheckState::Ready)
            && oac.pod_set_updates != nac.pod_set_updates
        {
            errs.immutable(
                &sp.child("admissionChecks").index(i).child("podSetUpdates"),
                "\"array\"",
                IMMUTABLE,
            );
        }
    }
    match (&os.cluster_name, &ns.cluster_name) {
        (None, Some(n)) if !os.nominated_cluster_names.contains(n) => errs.invalid_str(
            &sp.child("clusterName"),
            n,
            "when setting clusterName it must be one of the nominatedClusterNames",
        ),
        (Some(o), Some(n)) if o != n => {
            errs.invalid(&sp, "\"object\"", "clusterName is immutable once set")
        }
        _ => {}
    }
    errs.finish(KIND, new.metadata.name.as_deref().unwrap_or_default())
}

fn reclaimable_update(errs: &mut Errors, p: &Path, old: &Workload, new: &Workload, elastic: bool) {
    let empty = Vec::new();
    let olds = old.status.as_ref().map_or(&empty, |s| &s.reclaimable_pods);
    let news = new.status.as_ref().map_or(&empty, |s| &s.reclaimable_pods);
    if olds.is_empty() {
        return;
    }
    let current: BTreeMap<&str, i32> = new
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    // Pod sets scaled down below their admitted count may see their reclaimable count fall or vanish.
    let scaled_down: BTreeSet<&str> = if elastic {
        new.status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map(|a| {
                a.pod_set_assignments
                    .iter()
                    .filter(|a| {
                        a.count
                            .is_some_and(|c| c > current.get(a.name.as_str()).copied().unwrap_or(0))
                    })
                    .map(|a| a.name.as_str())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        BTreeSet::new()
    };
    for n in news {
        if let Some(o) = olds.iter().find(|o| o.name == n.name)
            && n.count < o.count
            && !scaled_down.contains(n.name.as_str())
        {
            errs.invalid(
                &p.key(&n.name).child("count"),
                n.count.to_string(),
                format!("cannot be less than {}", o.count),
            );
        }
    }
    for o in olds {
        if !news.iter().any(|n| n.name == o.name) && !scaled_down.contains(o.name.as_str()) {
            errs.required(&p.key(&o.name), "cannot be removed");
        }
    }
}
