//! The label and annotation rules Kueue's job framework enforces on a batch/v1 Job (and, for the shared part, on
//! any job-like object such as a plain Pod), with Kueue v0.19.2's messages and its feature gates at their defaults
//! (WorkloadIdentifierAnnotations, ElasticJobsViaWorkloadSlices and TopologyAwareScheduling on).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::errors::{Errors, Path, ValidationErrors, quote};
use super::names::{dns_subdomain, qualified_name};
use crate::kueue::labels as l;

/// Kubernetes' message for a changed immutable field.
pub(super) const IMMUTABLE: &str = "field is immutable";

/// Validates a Job on creation.
pub fn validate_job(job: &Job) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    job_create_rules(&mut errs, job);
    errs.finish("Job.batch", name(&job.metadata))
}

/// Validates an update of a Job; `default_queue_exists` says whether the Job's namespace has a LocalQueue named
/// `default` (the queue-name label may then not be removed).
pub fn validate_job_update(
    old: &Job,
    new: &Job,
    default_queue_exists: bool,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    // Kueue re-runs the creation rules on the new object, except that the min-parallelism annotation is only
    // re-checked when it changed.
    meta_create_rules(&mut errs, &new.metadata);
    if annotation(&new.metadata, l::JOB_MIN_PARALLELISM_ANNOTATION)
        != annotation(&old.metadata, l::JOB_MIN_PARALLELISM_ANNOTATION)
    {
        partial_admission_rules(&mut errs, new);
    }
    sync_completion_rules(&mut errs, new);
    meta_update_rules(
        &mut errs,
        &old.metadata,
        &new.metadata,
        job_suspended(old),
        job_suspended(new),
        default_queue_exists,
    );
    partial_admission_update_rules(&mut errs, old, new);
    topology_rules(&mut errs, new);
    errs.finish("Job.batch", name(&new.metadata))
}

/// Validates the job-framework labels of any job-like object on creation (queue name, prebuilt workload,
/// maximum execution time); `kind` names it in the message (e.g. `Pod`).
pub fn validate_job_metadata(meta: &ObjectMeta, kind: &str) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    meta_create_rules(&mut errs, meta);
    errs.finish(kind, name(meta))
}

/// Validates a plain Pod's Kueue metadata on creation: the job-framework labels, the managed label's value, the
/// pod-group name and total count, and the topology annotations (Kueue's pod webhook).
pub fn validate_pod_metadata(meta: &ObjectMeta) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    meta_create_rules(&mut errs, meta);
    pod_rules(&mut errs, meta);
    if let Some(ann) = meta.annotations.as_ref() {
        // Kueue's pod webhook checks no slice size against a pod count.
        let path = Path::new("metadata").child("annotations");
        template_topology_rules(&mut errs, ann, &path, i32::MAX);
    }
    errs.finish("Pod", name(meta))
}

fn pod_rules(errs: &mut Errors, meta: &ObjectMeta) {
    if let Some(v) = label(meta, l::MANAGED_LABEL)
        && v != "true"
    {
        errs.forbidden(
            &labels_path(l::MANAGED_LABEL),
            "managed label value can only be 'true'",
        );
    }
    // The group name may sit in the annotation (WorkloadIdentifierAnnotations) or the label.
    let (group_path, group, detail) = match annotation(meta, l::POD_GROUP_NAME_LABEL) {
        Some(g) if !g.is_empty() => (annotations_path(l::POD_GROUP_NAME_LABEL), g, "annotation"),
        _ => (
            labels_path(l::POD_GROUP_NAME_LABEL),
            label(meta, l::POD_GROUP_NAME_LABEL).unwrap_or_default(),
            "label",
        ),
    };
    let detail = format!(
        "both the '{}' annotation and the '{}' {detail} should be set",
        l::POD_GROUP_TOTAL_COUNT_ANNOTATION,
        l::POD_GROUP_NAME_LABEL
    );
    let total = annotation(meta, l::POD_GROUP_TOTAL_COUNT_ANNOTATION);
    let total_path = annotations_path(l::POD_GROUP_TOTAL_COUNT_ANNOTATION);
    if group.is_empty() {
        if total.is_some() {
            errs.required(&group_path, detail);
        }
        return;
    }
    subdomain(errs, group_path, group);
    let Some(total) = total else {
        errs.required(&total_path, detail);
        return;
    };
    match total.parse::<i64>() {
        Err(_) => errs.invalid_str(
            &total_path,
            total,
            format!("strconv.Atoi: parsing {}: invalid syntax", quote(total)),
        ),
        Ok(n) if n < 1 => errs.invalid_str(
            &total_path,
            total,
            format!(
                "incorrect annotation value '{}={total}': group total count should be greater than zero",
                l::POD_GROUP_TOTAL_COUNT_ANNOTATION
            ),
        ),
        Ok(_) => {}
    }
}

/// Validates the job-framework labels of any job-like object on update; `suspended` tells whether the old and the
/// new object are suspended (for a Pod: whether it still carries Kueue's admission scheduling gate).
pub fn validate_job_metadata_update(
    old: &ObjectMeta,
    new: &ObjectMeta,
    suspended: (bool, bool),
    default_queue_exists: bool,
    kind: &str,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    meta_update_rules(
        &mut errs,
        old,
        new,
        suspended.0,
        suspended.1,
        default_queue_exists,
    );
    errs.finish(kind, name(new))
}

/// Whether a Job is suspended (`spec.suspend`, false when unset).
pub fn job_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
}

/// The number of pods Kueue admits for a Job: min(parallelism, completions), each defaulting to 1.
pub fn job_pods_count(job: &Job) -> i32 {
    let spec = job.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    match spec.and_then(|s| s.completions) {
        Some(c) => parallelism.min(c),
        None => parallelism,
    }
}

pub(super) fn name(meta: &ObjectMeta) -> &str {
    meta.name
        .as_deref()
        .or(meta.generate_name.as_deref())
        .unwrap_or_default()
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn labels_path(key: &str) -> Path {
    Path::new("metadata").child("labels").key(key)
}

fn annotations_path(key: &str) -> Path {
    Path::new("metadata").child("annotations").key(key)
}

/// The queue name a job-like object asks for (the label; empty when absent).
fn queue_name(meta: &ObjectMeta) -> &str {
    label(meta, l::QUEUE_NAME_LABEL).unwrap_or_default()
}

fn elastic(meta: &ObjectMeta) -> bool {
    annotation(meta, l::ELASTIC_JOB_ANNOTATION) == Some("true")
}

/// Where the prebuilt workload name is read from: the annotation when set (WorkloadIdentifierAnnotations), else
/// the label.
fn prebuilt(meta: &ObjectMeta) -> (Path, &str) {
    match annotation(meta, l::PREBUILT_WORKLOAD_ANNOTATION) {
        Some(v) if !v.is_empty() => (annotations_path(l::PREBUILT_WORKLOAD_ANNOTATION), v),
        _ => (
            labels_path(l::PREBUILT_WORKLOAD_LABEL),
            label(meta, l::PREBUILT_WORKLOAD_LABEL).unwrap_or_default(),
        ),
    }
}

/// One Invalid error joining every grammar problem, as Kueue reports a name that must be a DNS subdomain.
fn subdomain(errs: &mut Errors, path: Path, value: &str) {
    let problems = dns_subdomain(value);
    if !problems.is_empty() {
        errs.invalid_str(&path, value, problems.join(","));
    }
}

/// Kueue's `ValidateQueueName`: the queue-name label, when set, is a DNS subdomain.
pub(super) fn queue_name_rules(errs: &mut Errors, meta: &ObjectMeta) {
    if let Some(q) = label(meta, l::QUEUE_NAME_LABEL) {
        subdomain(errs, labels_path(l::QUEUE_NAME_LABEL), q);
    }
}

/// The part of a pod spec that decides where and how a pod is placed, as Kueue's `SpecShape` reads it: a pod
/// group's pods of one shape share a role, and a managed LeaderWorkerSet may not change its templates' shapes.
pub fn pod_spec_shape(spec: &k8s_openapi::api::core::v1::PodSpec) -> serde_json::Value {
    let containers = |cs: &[k8s_openapi::api::core::v1::Container]| {
        cs.iter()
            .map(|c| {
                serde_json::json!({
                    "resources": {"requests": c.resources.as_ref().and_then(|r| r.requests.as_ref())},
                    "ports": c.ports,
                })
            })
            .collect::<Vec<_>>()
    };
    let mut shape = serde_json::json!({
        "initContainers": containers(spec.init_containers.as_deref().unwrap_or_default()),
        "containers": containers(&spec.containers),
        "nodeSelector": spec.node_selector,
        "affinity": spec.affinity,
        "tolerations": spec.tolerations,
        "runtimeClassName": spec.runtime_class_name,
        "priority": spec.priority,
        "topologySpreadConstraints": spec.topology_spread_constraints,
        "overhead": spec.overhead,
        "resourceClaims": spec.resource_claims,
    });
    // Pod-level resources count only when set, so that shapes of pods without them stay as they were.
    if let Some(r) = &spec.resources {
        shape["resources"] = serde_json::json!(r.requests);
    }
    shape
}

pub(super) fn meta_create_rules(errs: &mut Errors, meta: &ObjectMeta) {
    queue_name_rules(errs, meta);
    let (path, value) = prebuilt(meta);
    if !value.is_empty() || label(meta, l::PREBUILT_WORKLOAD_LABEL).is_some() {
        subdomain(errs, path, value);
    }
    if let Some(v) = label(meta, l::MAX_EXEC_TIME_SECONDS_LABEL) {
        let path = labels_path(l::MAX_EXEC_TIME_SECONDS_LABEL);
        match v.parse::<i64>() {
            Err(_) => errs.invalid_str(
                &path,
                v,
                format!("strconv.Atoi: parsing {}: invalid syntax", quote(v)),
            ),
            Ok(n) if n <= 0 => errs.invalid(&path, n.to_string(), "should be greater than 0"),
            Ok(_) => {}
        }
    }
    // Kueue's AdmissionGatedBy (beta, on): the gates' format.
    super::gates::format(
        errs,
        annotation(meta, l::ADMISSION_GATED_BY_ANNOTATION).unwrap_or_default(),
    );
}

pub(super) fn meta_update_rules(
    errs: &mut Errors,
    old: &ObjectMeta,
    new: &ObjectMeta,
    old_suspended: bool,
    new_suspended: bool,
    default_queue_exists: bool,
) {
    let queue_path = labels_path(l::QUEUE_NAME_LABEL);
    if !new_suspended && queue_name(new) != queue_name(old) {
        errs.immutable(&queue_path, quote(queue_name(new)), IMMUTABLE);
    }
    if queue_name(new).is_empty() && !queue_name(old).is_empty() && default_queue_exists {
        errs.invalid_str(
            &queue_path,
            "",
            "queue-name must not be empty in namespace with default queue",
        );
    }
    // The prebuilt workload may change only while suspended; the creation rules cover it otherwise.
    if !new_suspended && !elastic(old) {
        let (path, new_name) = prebuilt(new);
        let (_, old_name) = prebuilt(old);
        if new_name != old_name {
            errs.immutable(&path, quote(new_name), IMMUTABLE);
        }
    }
    if !new_suspended || !old_suspended {
        let new_v = label(new, l::MAX_EXEC_TIME_SECONDS_LABEL).unwrap_or_default();
        let old_v = label(old, l::MAX_EXEC_TIME_SECONDS_LABEL).unwrap_or_default();
        if new_v != old_v {
            errs.immutable(
                &labels_path(l::MAX_EXEC_TIME_SECONDS_LABEL),
                quote(new_v),
                IMMUTABLE,
            );
        }
    }
    let wpc_path = labels_path(l::PRIORITY_CLASS_LABEL);
    let old_wpc = label(old, l::PRIORITY_CLASS_LABEL).unwrap_or_default();
    let new_wpc = label(new, l::PRIORITY_CLASS_LABEL).unwrap_or_default();
    if !new_suspended && old_wpc.is_empty() && !new_wpc.is_empty() {
        errs.invalid_str(
            &wpc_path,
            new_wpc,
            "WorkloadPriorityClass cannot be added to a non-suspended workload",
        );
    } else if new_wpc.is_empty() && !old_wpc.is_empty() {
        errs.invalid_str(
            &wpc_path,
            new_wpc,
            "WorkloadPriorityClass cannot be removed from a workload",
        );
    }
    if elastic(old) != elastic(new) {
        errs.immutable(
            &annotations_path(l::ELASTIC_JOB_ANNOTATION),
            elastic(new).to_string(),
            IMMUTABLE,
        );
    }
    // Kueue's AdmissionGatedBy: gates may only be removed after creation.
    super::gates::update(
        errs,
        annotation(old, l::ADMISSION_GATED_BY_ANNOTATION),
        annotation(new, l::ADMISSION_GATED_BY_ANNOTATION),
    );
}

fn job_create_rules(errs: &mut Errors, job: &Job) {
    meta_create_rules(errs, &job.metadata);
    partial_admission_rules(errs, job);
    sync_completion_rules(errs, job);
    topology_rules(errs, job);
}

fn partial_admission_rules(errs: &mut Errors, job: &Job) {
    let Some(v) = annotation(&job.metadata, l::JOB_MIN_PARALLELISM_ANNOTATION) else {
        return;
    };
    let path = annotations_path(l::JOB_MIN_PARALLELISM_ANNOTATION);
    let count = job_pods_count(job);
    match v.parse::<i64>() {
        Err(_) => errs.invalid_str(
            &path,
            v,
            format!("strconv.Atoi: parsing {}: invalid syntax", quote(v)),
        ),
        Ok(n) if n >= i64::from(count) || n <= 0 => errs.invalid(
            &path,
            n.to_string(),
            format!("should be between 0 and {}", i64::from(count) - 1),
        ),
        Ok(_) => {}
    }
    if elastic(&job.metadata) {
        errs.invalid_str(
            &path,
            v,
            "partial admission and elastic job cannot be used together",
        );
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn sync_completion_rules(errs: &mut Errors, job: &Job) {
    let Some(v) = annotation(
        &job.metadata,
        l::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    ) else {
        return;
    };
    let path = annotations_path(l::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION);
    let enabled = match parse_bool(v) {
        Some(b) => b,
        None => {
            errs.invalid_str(
                &path,
                v,
                format!("strconv.ParseBool: parsing {}: invalid syntax", quote(v)),
            );
            false
        }
    };
    if !enabled {
        return;
    }
    let spec = job.spec.as_ref();
    if spec.and_then(|s| s.completion_mode.as_deref()) != Some("Indexed") {
        errs.invalid_str(&path, v, "should not be enabled for NonIndexed jobs");
    }
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    let completions = spec.and_then(|s| s.completions);
    if parallelism != completions.unwrap_or(1) {
        errs.invalid(
            &Path::new("spec").child("completions"),
            completions.map_or_else(|| "null".to_owned(), |c| c.to_string()),
            format!(
                "should be equal to parallelism when {} annotation is true",
                l::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION
            ),
        );
    }
}

fn sync_completion(job: &Job) -> bool {
    annotation(
        &job.metadata,
        l::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    )
    .and_then(parse_bool)
    .unwrap_or(false)
}

fn partial_admission_update_rules(errs: &mut Errors, old: &Job, new: &Job) {
    let parallelism = |j: &Job| j.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
    if annotation(&old.metadata, l::JOB_MIN_PARALLELISM_ANNOTATION).is_some()
        && !job_suspended(old)
        && parallelism(old) != parallelism(new)
    {
        errs.forbidden(
            &Path::new("spec").child("parallelism"),
            "cannot change when partial admission is enabled and the job is not suspended",
        );
    }
    if job_suspended(old) == job_suspended(new)
        && !job_suspended(new)
        && sync_completion(old) != sync_completion(new)
    {
        errs.forbidden(
            &annotations_path(l::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION),
            format!("{IMMUTABLE} while the job is not suspended"),
        );
    }
}

/// The pod template's topology annotations (Kueue's `ValidateTASPodSetRequest`, its core rules).
fn topology_rules(errs: &mut Errors, job: &Job) {
    let empty = BTreeMap::new();
    let ann = job
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .unwrap_or(&empty);
    let path = Path::new("spec")
        .child("template")
        .child("metadata")
        .child("annotations");
    template_topology_rules(errs, ann, &path, job_pods_count(job));
}

/// The topology annotations of one pod template at `path` (its `metadata.annotations`), for a pod set of
/// `pods` pods.
pub(super) fn template_topology_rules(
    errs: &mut Errors,
    ann: &BTreeMap<String, String>,
    path: &Path,
    pods: i32,
) {
    let required = ann.get(l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION);
    let preferred = ann.get(l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION);
    let unconstrained = ann.get(l::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION);
    let slice_required = ann.get(l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION);
    let slice_size = ann.get(l::PODSET_SLICE_SIZE_ANNOTATION);
    let found = [required, preferred, unconstrained]
        .iter()
        .filter(|a| a.is_some())
        .count();
    if found > 1 {
        errs.invalid_omitted(
            path,
            format!(
                "must not contain more than one topology annotation: [{}, {}, {}]",
                quote(l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION),
                quote(l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION),
                quote(l::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
            ),
        );
    }
    for (key, value) in [
        (l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION, required),
        (l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION, preferred),
        (l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION, slice_required),
    ] {
        if let Some(v) = value {
            for m in qualified_name(v) {
                errs.invalid_str(&path.key(key), v, m);
            }
        }
    }
    if let Some(group) = ann.get(l::PODSET_GROUP_NAME_ANNOTATION) {
        let gpath = path.key(l::PODSET_GROUP_NAME_ANNOTATION);
        if group.parse::<u64>().is_ok() {
            errs.invalid_str(&gpath, group, "must not be a number");
        }
        for (present, key) in [
            (slice_size.is_some(), l::PODSET_SLICE_SIZE_ANNOTATION),
            (
                slice_required.is_some(),
                l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
            ),
        ] {
            if present {
                errs.forbidden(&gpath, format!("may not be set when '{key}' is specified"));
            }
        }
        if required.is_none() && preferred.is_none() {
            errs.forbidden(
                &gpath,
                format!(
                    "may not be set when neither '{}' nor '{}' is specified",
                    l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
                    l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION
                ),
            );
        }
    }
    if let Some(v) = unconstrained
        && parse_bool(v).is_none()
    {
        errs.invalid_str(
            &path.key(l::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION),
            v,
            "must be a boolean value",
        );
    }
    if slice_required.is_some() && slice_size.is_none() {
        errs.required(
            &path.key(l::PODSET_SLICE_SIZE_ANNOTATION),
            format!(
                "must be set when '{}' is specified",
                l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION
            ),
        );
    }
    if slice_required.is_none() && slice_size.is_some() {
        errs.forbidden(
            &path.key(l::PODSET_SLICE_SIZE_ANNOTATION),
            format!(
                "may not be set when '{}' is not specified",
                l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION
            ),
        );
    }
    if let (Some(_), Some(size)) = (slice_required, slice_size) {
        let spath = path.key(l::PODSET_SLICE_SIZE_ANNOTATION);
        match size.parse::<i64>() {
            Ok(n) if n < 1 => errs.invalid_str(&spath, size, "must be greater than or equal to 1"),
            Ok(n) if n > i64::from(pods) => errs.invalid_str(
                &spath,
                size,
                format!("must not be greater than pod set count {pods}"),
            ),
            Ok(_) => {}
            Err(_) => errs.invalid_str(&spath, size, "must be a numeric value"),
        }
    }
    slice_constraints_rules(errs, ann, path, pods);
}

/// The multi-layer slice annotation (`podset-slice-required-topology-constraints`, TASMultiLayerTopology being on
/// in v0.19): exclusive with the two-level slice annotations and the group name, 1 to 3 layers of distinct
/// topology levels whose sizes are at least 1, each dividing the one above, the first no larger than the pod set.
fn slice_constraints_rules(
    errs: &mut Errors,
    ann: &BTreeMap<String, String>,
    path: &Path,
    pods: i32,
) {
    let key = l::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION;
    let Some(json) = ann.get(key) else {
        return;
    };
    let cpath = path.key(key);
    for other in [
        l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
        l::PODSET_SLICE_SIZE_ANNOTATION,
    ] {
        if ann.contains_key(other) {
            errs.forbidden(
                &cpath,
                format!("may not be set when '{other}' is specified"),
            );
        }
    }
    if ann.contains_key(l::PODSET_GROUP_NAME_ANNOTATION) {
        errs.forbidden(
            &path.key(l::PODSET_GROUP_NAME_ANNOTATION),
            format!("may not be set when '{key}' is specified"),
        );
    }
    let layers: Vec<crate::kueue::v1beta2::PodsetSliceRequiredTopologyConstraint> =
        match serde_json::from_str(json) {
            Ok(l) => l,
            Err(e) => {
                errs.invalid_str(&cpath, json, format!("must be a valid JSON array: {e}"));
                return;
            }
        };
    if layers.is_empty() || layers.len() > 3 {
        errs.invalid_str(
            &cpath,
            json,
            "topology constraints must contain between 1 and 3 entries",
        );
        return;
    }
    for (i, layer) in layers.iter().enumerate() {
        let lpath = cpath.index(i);
        for m in qualified_name(&layer.topology) {
            errs.invalid_str(&lpath.child("topology"), &layer.topology, m);
        }
        if layer.size < 1 {
            errs.invalid(
                &lpath.child("size"),
                layer.size.to_string(),
                "must be greater than or equal to 1",
            );
        }
    }
    for (i, layer) in layers.iter().enumerate() {
        if let Some(first) = layers[..i]
            .iter()
            .position(|p| p.topology == layer.topology)
        {
            errs.duplicate(
                &cpath.index(i).child("topology"),
                quote(&format!("{} (also at index {first})", layer.topology)),
            );
        }
    }
    for (i, pair) in layers.windows(2).enumerate() {
        if pair[1].size > 0 && pair[0].size % pair[1].size != 0 {
            errs.invalid(
                &cpath.index(i + 1).child("size"),
                pair[1].size.to_string(),
                format!("must evenly divide the parent layer size {}", pair[0].size),
            );
        }
    }
    if layers[0].size > pods {
        errs.invalid(
            &cpath,
            layers[0].size.to_string(),
            format!("must not be greater than pod set count {pods}"),
        );
    }
}

/// One pod set as Kueue's pod-set-group rules see it: its pod count, template annotations and their path.
pub(super) struct GroupMember<'a> {
    /// Its pod count.
    pub count: i32,
    /// Its pod template's annotations.
    pub annotations: &'a BTreeMap<String, String>,
    /// Where they are (`...template.metadata.annotations`).
    pub path: Path,
}

/// Kueue's `ValidatePodSetGroupingTopology`: pod sets sharing a `kueue.x-k8s.io/podset-group-name` (beside a
/// required or preferred topology) come in pairs, one of a single pod, asking for the same topology level.
pub(super) fn pod_set_group_rules(errs: &mut Errors, members: &[GroupMember<'_>]) {
    let mut groups: Vec<(&str, Vec<&GroupMember<'_>>)> = Vec::new();
    for m in members {
        let ann = m.annotations;
        let Some(group) = ann.get(l::PODSET_GROUP_NAME_ANNOTATION) else {
            continue;
        };
        if !ann.contains_key(l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION)
            && !ann.contains_key(l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
        {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == group.as_str()) {
            Some((_, list)) => list.push(m),
            None => groups.push((group, vec![m])),
        }
    }
    let level = |m: &GroupMember<'_>| {
        // Kueue's request takes required before preferred.
        match m.annotations.get(l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION) {
            Some(r) => (true, r.clone()),
            None => (
                false,
                m.annotations
                    .get(l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION)
                    .cloned()
                    .unwrap_or_default(),
            ),
        }
    };
    for (group, list) in groups {
        let key = l::PODSET_GROUP_NAME_ANNOTATION;
        if list.len() != 2 {
            for m in &list {
                errs.invalid_str(
                    &m.path.key(key),
                    group,
                    format!(
                        "can only define groups of exactly 2 pod sets, got: {} pod set(s)",
                        list.len()
                    ),
                );
            }
            continue;
        }
        let (a, b) = (list[0], list[1]);
        if a.count != 1 && b.count != 1 {
            let message = format!(
                "can only define groups where at least one pod set has only 1 replica, got: {} replica(s) and {} replica(s) in the group",
                a.count, b.count
            );
            errs.invalid_str(&a.path.key(key), group, message.clone());
            errs.invalid_str(&b.path.key(key), group, message);
        }
        if level(a) != level(b) {
            let message = |other: &Path| {
                format!(
                    "must specify '{}' or '{}' topology consistent with '{}' in group '{group}'",
                    l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
                    l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
                    other.as_str()
                )
            };
            errs.invalid_omitted(&a.path, message(&b.path));
            errs.invalid_omitted(&b.path, message(&a.path));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(
        labels: serde_json::Value,
        annotations: serde_json::Value,
        spec: serde_json::Value,
    ) -> Job {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": labels, "annotations": annotations},
            "spec": spec,
        }))
        .expect("job")
    }

    #[test]
    fn queue_name_must_be_a_subdomain() {
        let j = job(
            json!({l::QUEUE_NAME_LABEL: "Bad_Queue"}),
            json!({}),
            json!({}),
        );
        let err = validate_job(&j).expect_err("invalid");
        assert!(err.to_string().starts_with(
            "Job.batch \"j\" is invalid: metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: \"Bad_Queue\": a lowercase RFC 1123 subdomain"
        ), "{err}");
        assert!(
            validate_job(&job(
                json!({l::QUEUE_NAME_LABEL: "team-a"}),
                json!({}),
                json!({})
            ))
            .is_ok()
        );
    }

    #[test]
    fn slice_layers_are_checked_as_kueue_checks_them() {
        let key = l::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION;
        let rules = |json: &str, pods: i32| {
            let mut errs = Errors::default();
            let ann = BTreeMap::from([(key.to_string(), json.to_string())]);
            template_topology_rules(&mut errs, &ann, &Path::new("a"), pods);
            errs.finish("Job.batch", "j")
        };
        assert!(
            rules(
                r#"[{"topology":"block","size":16},{"topology":"rack","size":8}]"#,
                16
            )
            .is_ok()
        );
        let e = rules(
            r#"[{"topology":"rack","size":6},{"topology":"rack","size":4}]"#,
            4,
        )
        .expect_err("bad layers");
        let at = format!("a[{key}]");
        assert!(
            e.has(
                &format!("{at}[1].size"),
                "must evenly divide the parent layer size 6"
            ),
            "{e}"
        );
        assert!(
            !e.at(&format!("{at}[1].topology")).is_empty(),
            "duplicate: {e}"
        );
        assert!(
            e.has(&at, "must not be greater than pod set count 4"),
            "{e}"
        );
        let e = rules("[]", 4).expect_err("no layer");
        assert!(
            e.has(
                &at,
                "topology constraints must contain between 1 and 3 entries"
            ),
            "{e}"
        );
        assert!(rules("not json", 4).is_err());
    }

    #[test]
    fn admission_gates_are_checked_and_may_only_be_removed() {
        let key = l::ADMISSION_GATED_BY_ANNOTATION;
        let path = format!("metadata.annotations[{key}]");
        let gated = |v: &str| job(json!({}), json!({key: v}), json!({"suspend": true}));
        let e = validate_job(&gated("no-domain")).expect_err("format");
        assert!(
            e.to_string().contains("must be a domain-prefixed path"),
            "{e}"
        );
        let two = gated("example.com/a,example.com/b");
        assert!(validate_job(&two).is_ok());
        assert!(validate_job_update(&two, &gated("example.com/b"), false).is_ok());
        assert!(
            validate_job_update(
                &two,
                &job(json!({}), json!({}), json!({"suspend": true})),
                false
            )
            .is_ok()
        );
        let e = validate_job_update(&two, &gated("example.com/c"), false).expect_err("added");
        assert!(
            e.has(&path, "can only remove gates, not add new ones"),
            "{e}"
        );
        let plain = job(json!({}), json!({}), json!({"suspend": true}));
        let e = validate_job_update(&plain, &gated("example.com/a"), false).expect_err("late");
        assert!(
            e.has(&path, "cannot add admission gate after creation"),
            "{e}"
        );
    }

    #[test]
    fn max_exec_time_must_be_positive() {
        let e = validate_job(&job(
            json!({l::MAX_EXEC_TIME_SECONDS_LABEL: "0"}),
            json!({}),
            json!({}),
        ))
        .expect_err("zero");
        assert!(e.has(
            "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
            "should be greater than 0"
        ));
        let e = validate_job(&job(
            json!({l::MAX_EXEC_TIME_SECONDS_LABEL: "x"}),
            json!({}),
            json!({}),
        ))
        .expect_err("nan");
        assert!(
            e.to_string()
                .contains("strconv.Atoi: parsing \"x\": invalid syntax"),
            "{e}"
        );
    }

    #[test]
    fn queue_name_is_immutable_while_running() {
        let old = job(
            json!({l::QUEUE_NAME_LABEL: "a"}),
            json!({}),
            json!({"suspend": false}),
        );
        let new = job(
            json!({l::QUEUE_NAME_LABEL: "b"}),
            json!({}),
            json!({"suspend": false}),
        );
        let e = validate_job_update(&old, &new, false).expect_err("running");
        assert!(
            e.has("metadata.labels[kueue.x-k8s.io/queue-name]", IMMUTABLE),
            "{e}"
        );
        let old = job(
            json!({l::QUEUE_NAME_LABEL: "a"}),
            json!({}),
            json!({"suspend": true}),
        );
        let new = job(
            json!({l::QUEUE_NAME_LABEL: "b"}),
            json!({}),
            json!({"suspend": true}),
        );
        assert!(validate_job_update(&old, &new, false).is_ok());
        let new = job(json!({}), json!({}), json!({"suspend": true}));
        let e = validate_job_update(&old, &new, true).expect_err("default queue");
        assert!(
            e.to_string()
                .contains("queue-name must not be empty in namespace with default queue")
        );
    }

    #[test]
    fn priority_class_rules() {
        let running = json!({"suspend": false});
        let old = job(json!({}), json!({}), running.clone());
        let new = job(
            json!({l::PRIORITY_CLASS_LABEL: "high"}),
            json!({}),
            running.clone(),
        );
        let e = validate_job_update(&old, &new, false).expect_err("add while running");
        assert!(
            e.to_string()
                .contains("cannot be added to a non-suspended workload")
        );
        let e = validate_job_update(&new, &old, false).expect_err("remove");
        assert!(e.to_string().contains("cannot be removed from a workload"));
    }

    #[test]
    fn min_parallelism_and_sync_completions() {
        let e = validate_job(&job(
            json!({}),
            json!({l::JOB_MIN_PARALLELISM_ANNOTATION: "4"}),
            json!({"parallelism": 4}),
        ))
        .expect_err("too big");
        assert!(e.to_string().contains("should be between 0 and 3"), "{e}");
        let e = validate_job(&job(
            json!({}),
            json!({l::JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: "true"}),
            json!({"parallelism": 2, "completions": 3}),
        ))
        .expect_err("nonindexed");
        assert!(
            e.to_string()
                .contains("should not be enabled for NonIndexed jobs"),
            "{e}"
        );
        assert!(
            e.to_string().contains("spec.completions: Invalid value: 3"),
            "{e}"
        );
    }

    #[test]
    fn pod_group_needs_name_and_total_count() {
        let meta = |labels: serde_json::Value, annotations: serde_json::Value| -> ObjectMeta {
            serde_json::from_value(
                json!({"name": "p", "labels": labels, "annotations": annotations}),
            )
            .expect("meta")
        };
        let e = validate_pod_metadata(&meta(json!({l::POD_GROUP_NAME_LABEL: "g"}), json!({})))
            .expect_err("no count");
        assert!(
            e.to_string().contains(
                "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value"
            ),
            "{e}"
        );
        let e = validate_pod_metadata(&meta(
            json!({}),
            json!({l::POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"}),
        ))
        .expect_err("no name");
        assert!(
            e.to_string()
                .contains("metadata.labels[kueue.x-k8s.io/pod-group-name]: Required value"),
            "{e}"
        );
        let e = validate_pod_metadata(&meta(
            json!({l::POD_GROUP_NAME_LABEL: "g", l::MANAGED_LABEL: "yes"}),
            json!({l::POD_GROUP_TOTAL_COUNT_ANNOTATION: "0"}),
        ))
        .expect_err("bad");
        assert!(
            e.to_string()
                .contains("group total count should be greater than zero"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("managed label value can only be 'true'"),
            "{e}"
        );
        assert!(
            validate_pod_metadata(&meta(
                json!({l::POD_GROUP_NAME_LABEL: "g"}),
                json!({l::POD_GROUP_TOTAL_COUNT_ANNOTATION: "3"})
            ))
            .is_ok()
        );
    }

    #[test]
    fn a_pods_topology_annotations_are_checked_as_a_templates() {
        let meta = |annotations: serde_json::Value| -> ObjectMeta {
            serde_json::from_value(json!({"name": "p", "annotations": annotations})).expect("meta")
        };
        let e = validate_pod_metadata(&meta(json!({
            l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
            l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION: "block",
        })))
        .expect_err("two levels");
        assert!(
            e.to_string().contains(
                "metadata.annotations: Invalid value: must not contain more than one topology annotation"
            ),
            "{e}"
        );
        let e = validate_pod_metadata(&meta(
            json!({l::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: "maybe"}),
        ))
        .expect_err("not a boolean");
        assert!(
            e.to_string().contains(&format!(
                "metadata.annotations[{}]",
                l::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION
            )),
            "{e}"
        );
        assert!(
            validate_pod_metadata(&meta(json!({
                l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "cloud.provider.com/rack",
                l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "kubernetes.io/hostname",
                l::PODSET_SLICE_SIZE_ANNOTATION: "64",
            })))
            .is_ok()
        );
    }

    #[test]
    fn topology_annotations_are_exclusive() {
        let mut j = job(json!({}), json!({}), json!({}));
        if let Some(spec) = j.spec.as_mut() {
            spec.template.metadata = Some(ObjectMeta {
                annotations: Some(BTreeMap::from([
                    (
                        l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION.to_owned(),
                        "rack".to_owned(),
                    ),
                    (
                        l::PODSET_PREFERRED_TOPOLOGY_ANNOTATION.to_owned(),
                        "block".to_owned(),
                    ),
                ])),
                ..Default::default()
            });
        }
        let e = validate_job(&j).expect_err("two");
        assert!(
            e.to_string()
                .contains("must not contain more than one topology annotation")
        );
    }
}
