//! Plain Pods and Pod groups, queued as Kueue queues them.
//!
//! A managed pod (label `kueue.x-k8s.io/managed: "true"`, set by the webhook with the admission gate) without a
//! group name is a group of one: its Workload is `pod-<name>-<hash>`, owned by the pod, with one pod set `main`.
//! Pods sharing `kueue.x-k8s.io/pod-group-name` (the annotation, else the label) in a namespace form one group whose Workload is named after the
//! group, owned by every pod, and created only once `kueue.x-k8s.io/pod-group-total-count` pods exist; its pod
//! sets are the distinct pod shapes (role hashes). Pods cannot be suspended: admission lifts their gate, and an
//! eviction ends them (see the engine task's pod-group controller).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use sha2::{Digest, Sha256};
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2::{DEFAULT_POD_SET_NAME, PodSet, Workload, WorkloadSpec};

use super::topology_request::template_topology_request;
use super::{JobError, JobIntegration, PodSetInfo, PriorityClasses, workload_name};

/// Annotation Kueue puts on a group's Workload (the SDK does not define it).
pub const IS_GROUP_WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/is-group-workload";
/// Pod condition Kueue sets on a pod it ends after an eviction.
pub const TERMINATION_TARGET_CONDITION: &str = "TerminationTarget";
/// Kueue's limit on pod sets per Workload, hence on distinct pod shapes per group.
const MAX_POD_SETS: usize = 8;
/// Kind of the owner of a plain pod's Workload.
const KIND: &str = "Pod";

/// The Workload a managed pod belongs to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodGroupKey {
    /// A pod without a group name: a group of one.
    Single {
        /// Namespace.
        namespace: String,
        /// Pod name.
        pod: String,
    },
    /// Pods sharing `kueue.x-k8s.io/pod-group-name`.
    Group {
        /// Namespace.
        namespace: String,
        /// Group name (also the Workload's name).
        name: String,
    },
}

impl PodGroupKey {
    /// The key of a pod Kueue manages (label `kueue.x-k8s.io/managed: "true"`); None for any other pod.
    pub fn of(pod: &Pod) -> Option<Self> {
        if pod.labels().get(labels::MANAGED_LABEL).map(String::as_str) != Some("true") {
            return None;
        }
        let namespace = pod.namespace().unwrap_or_default();
        // A group with a prebuilt Workload is keyed by that Workload's name, so that its events find the group.
        let group =
            group_name(pod).map(|g| super::prebuilt_workload_name(&pod.metadata).unwrap_or(g));
        Some(match group {
            Some(g) => PodGroupKey::Group {
                namespace,
                name: g.clone(),
            },
            _ => PodGroupKey::Single {
                namespace,
                pod: pod.name_any(),
            },
        })
    }

    /// The key of the group whose Workload this is: a group Workload (annotation `kueue.x-k8s.io/is-group-workload`,
    /// as Kueue's pod groups and LeaderWorkerSets build them) or one pods own without controlling it (an adopted
    /// prebuilt Workload) is the group of its name; one a pod controls is that single pod's.
    pub fn of_workload(wl: &Workload) -> Option<Self> {
        let namespace = wl.namespace().unwrap_or_default();
        let group = PodGroupKey::Group {
            namespace: namespace.clone(),
            name: wl.name_any(),
        };
        if wl
            .annotations()
            .get(IS_GROUP_WORKLOAD_ANNOTATION)
            .map(String::as_str)
            == Some("true")
        {
            return Some(group);
        }
        let owners = wl.metadata.owner_references.iter().flatten();
        let mut pod_owners = owners
            .filter(|o| o.kind == KIND && o.api_version == "v1")
            .peekable();
        pod_owners.peek()?;
        match pod_owners.find(|o| o.controller == Some(true)) {
            Some(o) => Some(PodGroupKey::Single {
                namespace,
                pod: o.name.clone(),
            }),
            None => Some(group),
        }
    }

    /// Namespace of the group.
    pub fn namespace(&self) -> &str {
        match self {
            PodGroupKey::Single { namespace, .. } | PodGroupKey::Group { namespace, .. } => {
                namespace
            }
        }
    }

    /// Whether this is a named group (not a single pod).
    pub fn is_group(&self) -> bool {
        matches!(self, PodGroupKey::Group { .. })
    }

    /// The Workload's name: the group name, or `pod-<name>-<hash>` for a single pod (None while its uid is
    /// unknown).
    pub fn workload_name(&self, pods: &[Pod]) -> Option<String> {
        match self {
            PodGroupKey::Group { name, .. } => Some(name.clone()),
            PodGroupKey::Single { pod, .. } => {
                let uid = pods.iter().find(|p| &p.name_any() == pod)?.uid()?;
                Some(workload_name(KIND, "", pod, &uid))
            }
        }
    }
}

/// The pod's group name, as Kueue v0.19 reads it (WorkloadIdentifierAnnotations on): the
/// `kueue.x-k8s.io/pod-group-name` annotation when set, else the label of that name.
fn group_name(pod: &Pod) -> Option<String> {
    [pod.annotations(), pod.labels()]
        .into_iter()
        .find_map(|m| {
            m.get(labels::POD_GROUP_NAME_LABEL)
                .filter(|g| !g.is_empty())
        })
        .cloned()
}

fn error(pod: &Pod, field: &str, message: impl Into<String>) -> JobError {
    JobError {
        kind: KIND.to_string(),
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        field: field.to_string(),
        message: message.into(),
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Succeeded or Failed.
pub fn is_terminated(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Still carries the `kueue.x-k8s.io/admission` scheduling gate.
pub fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| {
            g.iter()
                .any(|g| g.name == labels::ADMISSION_SCHEDULING_GATE)
        })
}

/// Whether Kueue leaves the pod alone when stopping a group: already terminated or never ungated.
pub fn is_suspended(pod: &Pod) -> bool {
    is_terminated(pod) || is_gated(pod)
}

/// Runs or may still run: not Failed, and not deleted before reaching a node.
pub fn is_runnable_or_succeeded(pod: &Pod) -> bool {
    let unscheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    if pod.metadata.deletion_timestamp.is_some() && unscheduled {
        return false;
    }
    phase(pod) != "Failed"
}

/// Ungated, not terminated and not being deleted: it runs, or is about to.
pub fn is_live(pod: &Pod) -> bool {
    !is_suspended(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Holds resources on a node, as Kueue's `IsActive` with its FastQuotaReleaseInPodIntegration gate off (its
/// default): Running, even while being deleted, unless its deletion is a grace period overdue (a pod stuck
/// terminating, say on a lost node, must not keep its group's quota).
pub fn is_active(pod: &Pod) -> bool {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    is_active_at(pod, now_ms)
}

/// [`is_active`] at `now_ms` (milliseconds since the epoch).
pub fn is_active_at(pod: &Pod, now_ms: i64) -> bool {
    if phase(pod) != "Running" {
        return false;
    }
    match (
        &pod.metadata.deletion_timestamp,
        pod.metadata.deletion_grace_period_seconds,
    ) {
        (Some(deleted), Some(grace)) => {
            now_ms
                <= deleted
                    .0
                    .as_millisecond()
                    .saturating_add(grace.saturating_mul(1000))
        }
        _ => true,
    }
}

/// The group size from `kueue.x-k8s.io/pod-group-total-count`.
pub fn total_count(pod: &Pod) -> Result<usize, JobError> {
    let key = labels::POD_GROUP_TOTAL_COUNT_ANNOTATION;
    let field = format!("metadata.annotations[{key}]");
    let v = pod
        .annotations()
        .get(key)
        .ok_or_else(|| error(pod, &field, "required for a pod group"))?;
    match v.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(error(
            pod,
            &field,
            format!("{v:?} is not an integer greater than zero"),
        )),
    }
}

/// The pod's role: `kueue.x-k8s.io/role-hash` if set, else the first 8 hex digits of sha256 over the
/// scheduling-relevant fields of its spec (the fields Kueue hashes; the digits need not equal Kueue's, whose
/// JSON encoding differs).
pub fn role_hash(pod: &Pod) -> Result<String, JobError> {
    if let Some(h) = pod.annotations().get(labels::ROLE_HASH_ANNOTATION) {
        return Ok(h.clone());
    }
    let empty = PodSpec::default();
    let shape =
        sluice_sdk::kueue::validation::job::pod_spec_shape(pod.spec.as_ref().unwrap_or(&empty));
    // serde_json's maps are sorted, so the encoding (hence the hash) is stable.
    let bytes = serde_json::to_vec(&shape).map_err(|e| error(pod, "spec", e.to_string()))?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().take(4).map(|b| format!("{b:02x}")).collect())
}

/// A pod set of `count` pods shaped as `pod`, with the topology request its annotations make (Kueue's
/// `constructPodSet`: pods ranked by `kueue.x-k8s.io/pod-group-pod-index`, which the webhook copies from the label
/// that `kueue.x-k8s.io/pod-group-pod-index-label` names).
fn pod_set(name: String, count: i32, pod: &Pod) -> Result<PodSet, JobError> {
    let mut req = template_topology_request(pod.annotations())
        .map_err(|(key, message)| error(pod, &format!("metadata.annotations[{key}]"), message))?;
    req.pod_index_label = Some(labels::POD_GROUP_POD_INDEX_LABEL.to_string());
    Ok(PodSet {
        name,
        template: PodTemplateSpec {
            metadata: None,
            spec: pod.spec.clone(),
        },
        count,
        min_count: None,
        topology_request: Some(req),
    })
}

/// Pod sets of a group: one per role hash over its runnable or succeeded pods, sorted by name.
fn group_pod_sets(pods: &[&Pod]) -> Result<Vec<PodSet>, JobError> {
    let mut sets: BTreeMap<String, PodSet> = BTreeMap::new();
    for pod in pods {
        let hash = role_hash(pod)?;
        match sets.get_mut(&hash) {
            Some(ps) => ps.count += 1,
            None => {
                sets.insert(hash.clone(), pod_set(hash, 1, pod)?);
            }
        }
    }
    if sets.len() > MAX_POD_SETS {
        return Err(error(
            pods[0],
            "spec",
            format!(
                "the group has {} distinct pod shapes; at most {MAX_POD_SETS} are supported",
                sets.len()
            ),
        ));
    }
    Ok(sets.into_values().collect())
}

/// Kueue's test that a group's prebuilt Workload still fits its pods: the roles of the runnable or succeeded pods,
/// sorted by name, are pod sets of the Workload in its order, each with at least as many pods (a finished Workload
/// needs only the roles).
pub fn group_fits(pods: &[Pod], wl: &Workload) -> Result<bool, JobError> {
    let mut roles: BTreeMap<String, i32> = BTreeMap::new();
    for p in pods.iter().filter(|p| is_runnable_or_succeeded(p)) {
        *roles.entry(role_hash(p)?).or_default() += 1;
    }
    let finished = wl.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == labels::condition::FINISHED && c.status == "True")
    });
    if !finished && wl.spec.pod_sets.len() < roles.len() {
        return Ok(false);
    }
    let mut sets = wl.spec.pod_sets.iter();
    for (role, count) in &roles {
        let Some(ps) = sets.find(|ps| &ps.name == role) else {
            return Ok(false);
        };
        if !finished && ps.count < *count {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Event reason (and action) on a pod deleted as excess, as Kueue's.
pub const EXCESS_POD_DELETED: &str = "ExcessPodDeleted";

/// The pods Kueue deletes as excess (its `removeExcessPods`) from a group that has no Workload yet: the runnable
/// pods beyond its total count. The kept pods are those with the `kueue.x-k8s.io/managed` finalizer first, then
/// the ungated, then the oldest (Kueue's `sortActivePods`; the name breaks ties, which Kueue leaves to its list
/// order). A single pod has none.
pub fn excess_pods(pods: &[Pod]) -> Result<Vec<&Pod>, JobError> {
    let runnable: Vec<&Pod> = pods
        .iter()
        .filter(|p| is_runnable_or_succeeded(p))
        .collect();
    let Some(first) = runnable.first() else {
        return Ok(Vec::new());
    };
    if !PodGroupKey::of(first).is_some_and(|k| k.is_group()) {
        return Ok(Vec::new());
    }
    let total = total_count(first)?;
    let mut excess = Vec::new();
    take_excess(runnable, total, &mut excess);
    Ok(excess)
}

/// A group's pods against its Workload, as Kueue's `FindMatchingWorkloads` sorts them out per pod set (role).
#[derive(Debug, Default)]
pub struct Alignment<'a> {
    /// The pods the Workload keeps (its owners): per role, the runnable pods up to the pod set's count and the
    /// terminated or deleted ones not replaced.
    pub kept: Vec<&'a Pod>,
    /// Runnable pods beyond their pod set's count: deleted.
    pub excess: Vec<&'a Pod>,
    /// Failed or deleted pods that runnable ones replace: their finalizer is removed.
    pub replaced: Vec<&'a Pod>,
    /// How many pods the pod sets still lack (Kueue's `absentPods`): `WaitingForReplacementPods` while above 0.
    pub absent: usize,
}

/// Sorts a group's pods against its Workload `wl` (the pods of roles it lacks are in no list). For each pod set:
/// the runnable pods beyond its count are excess ([`excess_pods`]' order); of the others, as many as runnable pods
/// outnumber the count without them are replaced: first those already without the finalizer, then those inactive
/// longest (Kueue's `sortInactivePods`; `now_ms` for a pod still active); the count less the runnable pods is
/// absent.
pub fn align<'a>(pods: &'a [Pod], wl: &Workload, now_ms: i64) -> Result<Alignment<'a>, JobError> {
    let mut roles: BTreeMap<String, (Vec<&Pod>, Vec<&Pod>)> = BTreeMap::new();
    for p in pods {
        let (active, inactive) = roles.entry(role_hash(p)?).or_default();
        if is_runnable_or_succeeded(p) {
            active.push(p);
        } else {
            inactive.push(p);
        }
    }
    // Kueue's countAbsentPods: a fast-admission group lacks a pod only when its pod set has none running.
    let fast = pods
        .iter()
        .min_by_key(|p| p.name_any())
        .is_some_and(is_fast_admission);
    let absent = |count: usize, active: usize| match fast {
        true => usize::from(count > 0 && active == 0),
        false => count.saturating_sub(active),
    };
    let mut out = Alignment::default();
    for ps in &wl.spec.pod_sets {
        let count = usize::try_from(ps.count).unwrap_or(0);
        let Some((active, mut inactive)) = roles.remove(&ps.name) else {
            out.absent += absent(count, 0);
            continue;
        };
        out.absent += absent(count, active.len());
        let replaced = (inactive.len() + active.len())
            .saturating_sub(count)
            .min(inactive.len());
        let before = out.excess.len();
        take_excess(active.clone(), count, &mut out.excess);
        let excess = &out.excess[before..];
        out.kept.extend(
            active
                .iter()
                .filter(|p| !excess.iter().any(|e| std::ptr::eq(*e, **p))),
        );
        inactive.sort_by(|a, b| {
            managed(b)
                .cmp(&managed(a))
                .then_with(|| last_active_ms(b, now_ms).cmp(&last_active_ms(a, now_ms)))
                .then_with(|| created(a).cmp(&created(b)))
                .then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let keep = inactive.len() - replaced;
        out.replaced.extend(inactive.drain(keep..));
        out.kept.extend(inactive);
    }
    Ok(out)
}

fn managed(p: &Pod) -> bool {
    p.finalizers()
        .iter()
        .any(|f| f == labels::MANAGED_FINALIZER)
}

fn created(p: &Pod) -> Option<i64> {
    p.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond())
}

/// When the pod was last seen active (Kueue's `lastActiveTime`): the earlier of its failure (ContainersReady
/// False with reason PodFailed) and its deletion, `now_ms` for neither.
fn last_active_ms(p: &Pod, now_ms: i64) -> i64 {
    let failed = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "ContainersReady"))
        .filter(|c| c.status == "False" && c.reason.as_deref() == Some("PodFailed"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or(now_ms, |t| t.0.as_millisecond());
    let deleted = p
        .metadata
        .deletion_timestamp
        .as_ref()
        .map_or(now_ms, |t| t.0.as_millisecond());
    failed.min(deleted)
}

/// Appends to `out` the pods of `pods` beyond the first `keep` in Kueue's keeping order.
fn take_excess<'a>(mut pods: Vec<&'a Pod>, keep: usize, out: &mut Vec<&'a Pod>) {
    if pods.len() <= keep {
        return;
    }
    pods.sort_by(|a, b| {
        managed(b)
            .cmp(&managed(a))
            .then_with(|| is_gated(a).cmp(&is_gated(b)))
            .then_with(|| created(a).cmp(&created(b)))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    out.extend(pods.drain(keep..));
}

/// Queue name, priority and total count agree across the group's pods (failed pods excepted); Err names the
/// pod that disagrees.
fn check_group(first: &Pod, pods: &[&Pod], total: usize) -> Result<(), JobError> {
    let queue = first.labels().get(labels::QUEUE_NAME_LABEL);
    for p in pods.iter().filter(|p| phase(p) != "Failed") {
        if p.labels().get(labels::QUEUE_NAME_LABEL) != queue {
            return Err(error(
                p,
                &format!("metadata.labels[{}]", labels::QUEUE_NAME_LABEL),
                format!("differs from pod {:?} of the same group", first.name_any()),
            ));
        }
        if total_count(p)? != total {
            return Err(error(
                p,
                &format!(
                    "metadata.annotations[{}]",
                    labels::POD_GROUP_TOTAL_COUNT_ANNOTATION
                ),
                format!("differs from pod {:?} of the same group", first.name_any()),
            ));
        }
    }
    Ok(())
}

/// The Workload for the group, or None while the group lacks pods (a group waits for its total count, a
/// fast-admission group for one runnable pod).
/// `pods` are all the group's pods as last seen, in any order.
pub fn workload(
    key: &PodGroupKey,
    pods: &[Pod],
    priorities: &PriorityClasses,
) -> Result<Option<Workload>, JobError> {
    let mut sorted: Vec<&Pod> = pods.iter().collect();
    sorted.sort_by_key(|p| p.name_any());
    let Some(first) = sorted.first().copied() else {
        return Ok(None);
    };
    let Some(name) = key.workload_name(pods) else {
        return Err(error(first, "metadata.uid", "required"));
    };
    let queue = first
        .labels()
        .get(labels::QUEUE_NAME_LABEL)
        .cloned()
        .ok_or_else(|| {
            error(
                first,
                &format!("metadata.labels[{}]", labels::QUEUE_NAME_LABEL),
                "required",
            )
        })?;
    let owner = |p: &Pod, controller: bool| -> Result<OwnerReference, JobError> {
        Ok(OwnerReference {
            api_version: "v1".to_string(),
            kind: KIND.to_string(),
            name: p.name_any(),
            uid: p
                .uid()
                .ok_or_else(|| error(p, "metadata.uid", "required"))?,
            controller: controller.then_some(true),
            block_owner_deletion: controller.then_some(true),
        })
    };
    let mut wl_labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let (pod_sets, owners) = if key.is_group() {
        let total = total_count(first)?;
        check_group(first, &sorted, total)?;
        let active: Vec<&Pod> = sorted
            .iter()
            .copied()
            .filter(|p| is_runnable_or_succeeded(p))
            .collect();
        let fast = is_fast_admission(first);
        if active.is_empty() || (!fast && active.len() < total) {
            return Ok(None);
        }
        if active.len() > total {
            return Err(error(
                first,
                &format!(
                    "metadata.annotations[{}]",
                    labels::POD_GROUP_TOTAL_COUNT_ANNOTATION
                ),
                format!(
                    "the group has {} runnable pods, more than its total count {total}",
                    active.len()
                ),
            ));
        }
        annotations.insert(IS_GROUP_WORKLOAD_ANNOTATION.to_string(), "true".to_string());
        let owners = active
            .iter()
            .map(|p| owner(p, false))
            .collect::<Result<Vec<_>, _>>()?;
        let pod_sets = if fast {
            // Kueue's constructGroupPodSetsFast: one pod set of the total count, shaped as the first runnable pod.
            let pod = active[0];
            vec![pod_set(role_hash(pod)?, count_i32(pod, total)?, pod)?]
        } else {
            group_pod_sets(&active)?
        };
        (pod_sets, owners)
    } else {
        let uid = first
            .uid()
            .ok_or_else(|| error(first, "metadata.uid", "required"))?;
        wl_labels.insert(labels::JOB_UID_LABEL.to_string(), uid);
        (
            vec![pod_set(DEFAULT_POD_SET_NAME.to_string(), 1, first)?],
            vec![owner(first, true)?],
        )
    };
    let pod_class = first
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    let wpc = first
        .labels()
        .get(labels::PRIORITY_CLASS_LABEL)
        .map(String::as_str);
    let priority = priorities.resolve(wpc, pod_class).map_err(|m| {
        let field = if wpc.is_some() {
            format!("metadata.labels[{}]", labels::PRIORITY_CLASS_LABEL)
        } else {
            "spec.priorityClassName".to_string()
        };
        error(first, &field, m)
    })?;
    let max_exec =
        super::max_exec_seconds(&first.metadata).map_err(|(f, m)| error(first, &f, m))?;
    // From the first pod as from a job: ProvisioningRequest annotations and admission gates.
    annotations.extend(super::copied_annotations(&first.metadata));
    Ok(Some(Workload {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(key.namespace().to_string()),
            labels: (!wl_labels.is_empty()).then_some(wl_labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(owners),
            finalizers: Some(vec![labels::RESOURCE_IN_USE_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: WorkloadSpec {
            pod_sets,
            queue_name: queue,
            priority_class_ref: priority.class_ref,
            priority: Some(priority.value),
            maximum_execution_time_seconds: max_exec,
            ..Default::default()
        },
        status: None,
    }))
}

/// The labels `keys` lists from the group's pods (Kueue's `integrations.labelKeysToCopy`): a pod without one
/// leaves it to the others, and two pods with different values are an error naming the later pod and the label.
pub fn copied_labels(pods: &[Pod], keys: &[String]) -> Result<BTreeMap<String, String>, JobError> {
    let mut copied: BTreeMap<String, String> = BTreeMap::new();
    for pod in pods {
        for key in keys {
            let Some(value) = pod.labels().get(key) else {
                continue;
            };
            match copied.get(key) {
                Some(seen) if seen != value => {
                    return Err(error(
                        pod,
                        &format!("metadata.labels[{key}]"),
                        format!(
                            "{value:?} differs from {seen:?} on another pod of the group; integrations.labelKeysToCopy \
                             needs the pods of a group to agree"
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    copied.insert(key.clone(), value.clone());
                }
            }
        }
    }
    Ok(copied)
}

/// `Some((success, message))` once the group is done: a single pod when it terminated; a group when all its
/// `total-count` pods succeeded, or, for a group with a pod annotated `kueue.x-k8s.io/retriable-in-group:
/// "false"`, when no pod runs any more (Kueue reports that case as a success too, with the count). A serving group
/// (its first pod annotated `kueue.x-k8s.io/pod-group-serving: "true"`) never finishes: its pods are replaced, as
/// Kueue reads it.
pub fn finished(key: &PodGroupKey, pods: &[Pod]) -> Result<Option<(bool, String)>, JobError> {
    if !key.is_group() {
        let Some(pod) = pods.first() else {
            return Ok(None);
        };
        let message = pod
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_default();
        return Ok(match phase(pod) {
            "Succeeded" => Some((true, message)),
            "Failed" => Some((false, message)),
            _ => None,
        });
    }
    let Some(first) = pods.first() else {
        return Ok(None);
    };
    if is_serving(first) {
        return Ok(None);
    }
    let total = total_count(first)?;
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    let running = pods.iter().any(|p| !is_terminated(p));
    let unretriable = pods.iter().any(|p| {
        p.annotations()
            .get(labels::RETRIABLE_IN_GROUP_ANNOTATION)
            .map(String::as_str)
            == Some("false")
    });
    if succeeded == total || (!running && unretriable) {
        return Ok(Some((
            true,
            format!("Pods succeeded: {succeeded}/{total}."),
        )));
    }
    Ok(None)
}

/// Whether the group is admitted as soon as one of its pods exists (annotation
/// `kueue.x-k8s.io/pod-group-fast-admission: "true"`, read from `pod`, as Kueue reads it from one pod of the group):
/// its Workload has one pod set of the total count, shaped as its first runnable pod, and later pods join it.
pub fn is_fast_admission(pod: &Pod) -> bool {
    pod.annotations()
        .get(labels::POD_GROUP_FAST_ADMISSION_ANNOTATION)
        .map(String::as_str)
        == Some("true")
}

/// The total count as a pod-set count; Err names the annotation when it does not fit.
fn count_i32(pod: &Pod, total: usize) -> Result<i32, JobError> {
    i32::try_from(total).map_err(|_| {
        error(
            pod,
            &format!(
                "metadata.annotations[{}]",
                labels::POD_GROUP_TOTAL_COUNT_ANNOTATION
            ),
            format!("{total} is more pods than a pod set holds"),
        )
    })
}

/// Whether the pod belongs to a serving group (annotation `kueue.x-k8s.io/pod-group-serving: "true"`).
pub fn is_serving(pod: &Pod) -> bool {
    pod.annotations()
        .get(labels::POD_GROUP_SERVING_ANNOTATION)
        .map(String::as_str)
        == Some("true")
}

/// Kueue's PodsReady for pods: a single pod's `Ready` condition is True; a group has all `total-count` pods
/// and every one is Ready.
pub fn pods_ready(key: &PodGroupKey, pods: &[Pod]) -> bool {
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True")
    };
    if !key.is_group() {
        return pods.first().is_some_and(ready);
    }
    let Some(total) = pods.first().and_then(|p| total_count(p).ok()) else {
        return false;
    };
    pods.len() >= total && pods.iter().all(ready)
}

/// The admission info of the pod's pod set: the only one for a single pod, the one named by its role hash in a
/// group.
pub fn info_for<'a>(
    key: &PodGroupKey,
    pod: &Pod,
    infos: &'a [PodSetInfo],
) -> Result<&'a PodSetInfo, JobError> {
    let field = "status.admission.podSetAssignments";
    if !key.is_group() {
        return match infos {
            [one] => Ok(one),
            _ => Err(error(
                pod,
                field,
                format!("expected 1 pod set, got {}", infos.len()),
            )),
        };
    }
    let hash = role_hash(pod)?;
    infos.iter().find(|i| i.name == hash).ok_or_else(|| {
        error(
            pod,
            field,
            format!("no pod set named {hash:?} (the pod's role)"),
        )
    })
}

/// Starts an admitted pod: adds the pod set's node selector, tolerations, labels and annotations and lifts the
/// admission gate (and the topology gate unless the pod set is topology-assigned). Kubernetes accepts a node
/// selector change only while a pod is gated, so both go in one write.
pub fn run_pod(pod: &mut Pod, info: &PodSetInfo) -> Result<(), JobError> {
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: pod.metadata.labels.clone(),
            annotations: pod.metadata.annotations.clone(),
            ..Default::default()
        }),
        spec: pod.spec.clone(),
    };
    info.merge_into(&mut template)
        .map_err(|m| error(pod, "spec", m))?;
    let meta = template.metadata.unwrap_or_default();
    pod.metadata.labels = meta.labels;
    pod.metadata.annotations = meta.annotations;
    let mut spec = template.spec.unwrap_or_default();
    let keep_topology = info
        .scheduling_gates
        .iter()
        .any(|g| g == labels::TOPOLOGY_SCHEDULING_GATE);
    if let Some(gates) = spec.scheduling_gates.as_mut() {
        gates.retain(|g| {
            g.name != labels::ADMISSION_SCHEDULING_GATE
                && (keep_topology || g.name != labels::TOPOLOGY_SCHEDULING_GATE)
        });
        if gates.is_empty() {
            spec.scheduling_gates = None;
        }
    }
    pod.spec = Some(spec);
    Ok(())
}

/// Plain Pods and pod groups as a job kind. Pods have no suspend field: they are not a [`super::SuspendableJob`];
/// admission lifts each pod's gate and an eviction ends the pods.
pub struct PodGroups;

/// A pod group as the reconciler loads it: its key and its pods as last seen (possibly none).
#[derive(Clone, Debug)]
pub struct PodGroup {
    /// Which group.
    pub key: PodGroupKey,
    /// Its pods, by name.
    pub pods: Vec<Pod>,
}

impl JobIntegration for PodGroups {
    type Job = PodGroup;
    const KIND: &'static str = KIND;
    const GROUP: &'static str = "";
    const API_VERSION: &'static str = "v1";

    fn queue_name(job: &PodGroup) -> Option<String> {
        job.pods
            .first()
            .and_then(|p| p.labels().get(labels::QUEUE_NAME_LABEL).cloned())
    }

    /// The prebuilt Workload the group's first pod names (a LeaderWorkerSet's pods name their group's).
    fn prebuilt_workload(job: &PodGroup) -> Option<String> {
        job.pods
            .first()
            .and_then(|p| super::prebuilt_workload_name(&p.metadata))
    }

    fn workload_name(job: &PodGroup) -> Option<String> {
        Self::prebuilt_workload(job).or_else(|| job.key.workload_name(&job.pods))
    }

    fn compose(job: &PodGroup, priorities: &PriorityClasses) -> Result<Option<Workload>, JobError> {
        workload(&job.key, &job.pods, priorities)
    }

    fn copied_labels(
        job: &PodGroup,
        keys: &[String],
    ) -> Result<BTreeMap<String, String>, JobError> {
        copied_labels(&job.pods, keys)
    }

    /// A group is not running when it has no pods or any pod is gated or terminated; a single pod when it is
    /// not active.
    fn is_suspended(job: &PodGroup) -> bool {
        if job.key.is_group() {
            job.pods.is_empty() || job.pods.iter().any(is_suspended)
        } else {
            !job.pods.iter().any(is_live)
        }
    }

    fn is_active(job: &PodGroup) -> bool {
        job.pods.iter().any(is_active)
    }

    /// As [`finished`], with Kueue's "Pod succeeded" / "Pod failed" for a single pod that gave no message.
    fn finished(job: &PodGroup) -> Result<Option<(bool, String)>, JobError> {
        Ok(finished(&job.key, &job.pods)?.map(|(success, message)| {
            let message = match (message.is_empty(), success) {
                (false, _) => message,
                (true, true) => "Pod succeeded".to_string(),
                (true, false) => "Pod failed".to_string(),
            };
            (success, message)
        }))
    }

    fn pods_ready(job: &PodGroup, _: &Workload) -> bool {
        pods_ready(&job.key, &job.pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, group: Option<(&str, u32)>, gpus: u32) -> Pod {
        let (lbl, ann) = match group {
            Some((g, n)) => (
                format!("kueue.x-k8s.io/pod-group-name: {g}"),
                format!("kueue.x-k8s.io/pod-group-total-count: \"{n}\""),
            ),
            None => (String::new(), String::new()),
        };
        serde_yaml::from_str(&format!(
            r#"
metadata:
  name: {name}
  namespace: ns
  uid: uid-{name}
  labels: {{kueue.x-k8s.io/queue-name: lq, kueue.x-k8s.io/managed: "true", {lbl}}}
  annotations: {{{ann}}}
spec:
  schedulingGates: [{{name: kueue.x-k8s.io/admission}}]
  containers:
  - name: c
    resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}}}
"#
        ))
        .unwrap()
    }

    #[test]
    fn keys_of_pods_and_workloads() {
        let single = pod("a", None, 1);
        let k = PodGroupKey::of(&single).unwrap();
        assert_eq!(
            k,
            PodGroupKey::Single {
                namespace: "ns".into(),
                pod: "a".into()
            }
        );
        let wl = workload(
            &k,
            std::slice::from_ref(&single),
            &PriorityClasses::default(),
        )
        .unwrap()
        .unwrap();
        assert!(wl.name_any().starts_with("pod-a-"), "{}", wl.name_any());
        assert_eq!(PodGroupKey::of_workload(&wl), Some(k));

        let g = pod("b", Some(("g", 1)), 1);
        let k = PodGroupKey::of(&g).unwrap();
        let wl = workload(&k, &[g], &PriorityClasses::default())
            .unwrap()
            .unwrap();
        assert_eq!(wl.name_any(), "g");
        assert_eq!(PodGroupKey::of_workload(&wl), Some(k));

        // The annotation names the group too, before the label (Kueue's WorkloadIdentifierAnnotations).
        let mut annotated = pod("d", Some(("label-group", 1)), 1);
        annotated
            .annotations_mut()
            .insert(labels::POD_GROUP_NAME_LABEL.into(), "annotated".into());
        assert_eq!(
            PodGroupKey::of(&annotated),
            Some(PodGroupKey::Group {
                namespace: "ns".into(),
                name: "annotated".into()
            })
        );
        annotated.labels_mut().remove(labels::POD_GROUP_NAME_LABEL);
        assert!(PodGroupKey::of(&annotated).unwrap().is_group());

        let mut unmanaged = pod("c", None, 1);
        unmanaged.labels_mut().remove(labels::MANAGED_LABEL);
        assert_eq!(PodGroupKey::of(&unmanaged), None);
    }

    #[test]
    fn group_waits_for_its_count_and_splits_by_shape() {
        let pods = vec![pod("w-0", Some(("g", 3)), 1), pod("w-1", Some(("g", 3)), 1)];
        let key = PodGroupKey::of(&pods[0]).unwrap();
        let p = PriorityClasses::default();
        assert_eq!(workload(&key, &pods, &p).unwrap(), None);
        let mut pods = pods;
        pods.push(pod("driver", Some(("g", 3)), 0));
        let wl = workload(&key, &pods, &p).unwrap().unwrap();
        let counts: Vec<i32> = wl.spec.pod_sets.iter().map(|ps| ps.count).collect();
        let mut sorted = counts.clone();
        sorted.sort();
        assert_eq!(sorted, vec![1, 2]);
        let names: Vec<&str> = wl.spec.pod_sets.iter().map(|p| p.name.as_str()).collect();
        assert!(names.iter().all(|n| n.len() == 8), "{names:?}");
        assert_eq!(wl.metadata.owner_references.as_ref().unwrap().len(), 3);
        // Every pod finds its own pod set by its role.
        let infos: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo {
                name: ps.name.clone(),
                count: ps.count,
                ..Default::default()
            })
            .collect();
        let w = info_for(&key, &pods[0], &infos).unwrap();
        let d = info_for(&key, &pods[2], &infos).unwrap();
        assert_ne!(w.name, d.name);
        assert_eq!((w.count, d.count), (2, 1));
    }

    #[test]
    fn a_fast_admission_group_has_its_workload_with_its_first_pod() {
        let fast = |mut p: Pod| {
            p.annotations_mut().insert(
                labels::POD_GROUP_FAST_ADMISSION_ANNOTATION.into(),
                "true".into(),
            );
            p
        };
        let p = PriorityClasses::default();
        let first = fast(pod("w-1", Some(("g", 3)), 2));
        let key = PodGroupKey::of(&first).unwrap();
        // Kueue's constructGroupPodSetsFast: one pod set of the total count, named by the first pod's role.
        let wl = workload(&key, std::slice::from_ref(&first), &p)
            .unwrap()
            .unwrap();
        assert_eq!(wl.spec.pod_sets.len(), 1);
        assert_eq!(wl.spec.pod_sets[0].count, 3);
        assert_eq!(wl.spec.pod_sets[0].name, role_hash(&first).unwrap());
        assert_eq!(wl.metadata.owner_references.as_ref().unwrap().len(), 1);
        // Without the annotation the same pod waits for the rest of its group; "false" is no annotation.
        let plain = pod("w-1", Some(("g", 3)), 2);
        assert_eq!(
            workload(&key, std::slice::from_ref(&plain), &p).unwrap(),
            None
        );
        let mut off = plain.clone();
        off.annotations_mut().insert(
            labels::POD_GROUP_FAST_ADMISSION_ANNOTATION.into(),
            "false".into(),
        );
        assert_eq!(workload(&key, &[off], &p).unwrap(), None);
        // Pods that arrive later belong to the pod set: none is excess, none absent (Kueue's countAbsentPods
        // counts one only while the pod set has no runnable pod).
        let pods = vec![
            first.clone(),
            fast(pod("w-0", Some(("g", 3)), 2)),
            fast(pod("w-2", Some(("g", 3)), 2)),
        ];
        let a = align(&pods, &wl, 0).unwrap();
        assert!(a.excess.is_empty());
        assert_eq!(a.kept.len(), 3);
        assert_eq!(a.absent, 0);
        assert_eq!(align(&pods[..1], &wl, 0).unwrap().absent, 0);
        let mut failed = first;
        failed.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        });
        assert_eq!(align(&[failed], &wl, 0).unwrap().absent, 1);
        // A fourth runnable pod is beyond the total count.
        let mut four = pods;
        four.push(fast(pod("w-3", Some(("g", 3)), 2)));
        assert_eq!(align(&four, &wl, 0).unwrap().excess.len(), 1);
    }

    #[test]
    fn pod_sets_carry_the_topology_request_of_their_pods_annotations() {
        let p = PriorityClasses::default();
        // Without annotations, as Kueue's builder with a pod index label: the index label only.
        let single = pod("a", None, 1);
        let key = PodGroupKey::of(&single).unwrap();
        let wl = workload(&key, std::slice::from_ref(&single), &p)
            .unwrap()
            .unwrap();
        let req = wl.spec.pod_sets[0].topology_request.clone().unwrap();
        assert_eq!(
            req.pod_index_label.as_deref(),
            Some(labels::POD_GROUP_POD_INDEX_LABEL)
        );
        assert_eq!((req.required, req.preferred), (None, None));

        // A group whose pods require a rack.
        let mut pods = vec![pod("w-0", Some(("g", 2)), 1), pod("w-1", Some(("g", 2)), 1)];
        for pod in &mut pods {
            pod.annotations_mut().insert(
                labels::PODSET_REQUIRED_TOPOLOGY_ANNOTATION.into(),
                "cloud.provider.com/rack".into(),
            );
        }
        let key = PodGroupKey::of(&pods[0]).unwrap();
        let wl = workload(&key, &pods, &p).unwrap().unwrap();
        let req = wl.spec.pod_sets[0].topology_request.clone().unwrap();
        assert_eq!(req.required.as_deref(), Some("cloud.provider.com/rack"));
        assert_eq!(
            req.pod_index_label.as_deref(),
            Some(labels::POD_GROUP_POD_INDEX_LABEL)
        );

        // A bad annotation is an error naming the pod and the annotation.
        let mut bad = pod("b", None, 1);
        bad.annotations_mut().insert(
            labels::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION.into(),
            "maybe".into(),
        );
        let key = PodGroupKey::of(&bad).unwrap();
        let e = workload(&key, std::slice::from_ref(&bad), &p).unwrap_err();
        assert_eq!(e.name, "b");
        assert_eq!(
            e.field,
            format!(
                "metadata.annotations[{}]",
                labels::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION
            )
        );
    }

    #[test]
    fn the_workload_carries_the_maximum_execution_time_and_copied_annotations_of_its_pods() {
        for group in [None, Some(("g", 1))] {
            let mut p = pod("a", group, 1);
            p.labels_mut()
                .insert(labels::MAX_EXEC_TIME_SECONDS_LABEL.into(), "30".into());
            p.annotations_mut().insert(
                labels::ADMISSION_GATED_BY_ANNOTATION.into(),
                "example.com/gate".into(),
            );
            p.annotations_mut().insert(
                "provreq.kueue.x-k8s.io/max-run-duration-seconds".into(),
                "60".into(),
            );
            p.annotations_mut().insert("other".into(), "x".into());
            let key = PodGroupKey::of(&p).unwrap();
            let wl = workload(&key, std::slice::from_ref(&p), &PriorityClasses::default())
                .unwrap()
                .unwrap();
            assert_eq!(wl.spec.maximum_execution_time_seconds, Some(30));
            assert_eq!(
                wl.annotations()[labels::ADMISSION_GATED_BY_ANNOTATION],
                "example.com/gate"
            );
            assert_eq!(
                wl.annotations()["provreq.kueue.x-k8s.io/max-run-duration-seconds"],
                "60"
            );
            assert!(!wl.annotations().contains_key("other"));
            // A value Kueue's webhook refuses is an error naming the label.
            p.labels_mut()
                .insert(labels::MAX_EXEC_TIME_SECONDS_LABEL.into(), "0".into());
            let err = workload(&key, std::slice::from_ref(&p), &PriorityClasses::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("Pod ns/a") && err.contains("max-exec-time-seconds"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_group_copies_the_listed_labels_its_pods_agree_on() {
        let keys = ["team".to_string(), "cost".to_string()];
        let mut a = pod("a", Some(("g", 2)), 1);
        let mut b = pod("b", Some(("g", 2)), 1);
        a.labels_mut().insert("team".into(), "nlp".into());
        a.labels_mut().insert("unlisted".into(), "x".into());
        b.labels_mut().insert("cost".into(), "42".into());
        let pods = vec![a, b];
        // A label one pod lacks comes from the other; an unlisted label stays behind.
        let copied = copied_labels(&pods, &keys).unwrap();
        assert_eq!(
            copied,
            BTreeMap::from([
                ("cost".to_string(), "42".to_string()),
                ("team".to_string(), "nlp".to_string())
            ])
        );
        assert!(copied_labels(&pods, &[]).unwrap().is_empty());
        let mut pods = pods;
        pods[1].labels_mut().insert("team".into(), "vision".into());
        let err = copied_labels(&pods, &keys).unwrap_err().to_string();
        assert!(
            err.contains("Pod ns/b") && err.contains("metadata.labels[team]"),
            "{err}"
        );
    }

    #[test]
    fn bad_group_metadata_is_an_error_naming_the_pod() {
        let pods = vec![pod("a", Some(("g", 2)), 1), pod("b", Some(("g", 3)), 1)];
        let key = PodGroupKey::of(&pods[0]).unwrap();
        let err = workload(&key, &pods, &PriorityClasses::default()).unwrap_err();
        assert!(err.to_string().contains("Pod ns/b"), "{err}");
        assert!(err.to_string().contains("pod-group-total-count"), "{err}");
        let mut bad = pod("c", Some(("g", 2)), 1);
        bad.annotations_mut().insert(
            labels::POD_GROUP_TOTAL_COUNT_ANNOTATION.into(),
            "zero".into(),
        );
        assert!(total_count(&bad).is_err());
    }

    #[test]
    fn finished_needs_all_pods_succeeded() {
        let mut pods = vec![pod("a", Some(("g", 2)), 1), pod("b", Some(("g", 2)), 1)];
        let key = PodGroupKey::of(&pods[0]).unwrap();
        let set_phase = |p: &mut Pod, ph: &str| {
            p.status.get_or_insert_with(Default::default).phase = Some(ph.into());
        };
        set_phase(&mut pods[0], "Succeeded");
        set_phase(&mut pods[1], "Failed");
        assert_eq!(
            finished(&key, &pods).unwrap(),
            None,
            "a failed pod is retried"
        );
        set_phase(&mut pods[1], "Succeeded");
        assert_eq!(
            finished(&key, &pods).unwrap(),
            Some((true, "Pods succeeded: 2/2.".to_string()))
        );
        // A serving group never finishes, whatever its pods did.
        let mut serving = pods.clone();
        serving[0]
            .annotations_mut()
            .insert(labels::POD_GROUP_SERVING_ANNOTATION.into(), "true".into());
        assert_eq!(finished(&key, &serving).unwrap(), None);
        let mut single = vec![pod("s", None, 1)];
        let key = PodGroupKey::of(&single[0]).unwrap();
        set_phase(&mut single[0], "Failed");
        assert_eq!(finished(&key, &single).unwrap().map(|f| f.0), Some(false));
    }

    #[test]
    fn role_hash_annotation_wins_and_shapes_differ() {
        let a = pod("a", Some(("g", 2)), 1);
        let b = pod("b", Some(("g", 2)), 2);
        assert_ne!(role_hash(&a).unwrap(), role_hash(&b).unwrap());
        assert_eq!(
            role_hash(&a).unwrap(),
            role_hash(&pod("c", Some(("g", 2)), 1)).unwrap()
        );
        let mut c = pod("c", Some(("g", 2)), 2);
        c.annotations_mut()
            .insert(labels::ROLE_HASH_ANNOTATION.into(), "workers".into());
        assert_eq!(role_hash(&c).unwrap(), "workers");
    }

    #[test]
    fn pods_ready_needs_every_pod_of_the_group_ready() {
        let ready = |p: &mut Pod| {
            p.status = Some(
                serde_json::from_value(
                    serde_json::json!({"conditions": [{"type": "Ready", "status": "True"}]}),
                )
                .unwrap(),
            );
        };
        let mut pods = vec![pod("a", Some(("g", 2)), 1)];
        let key = PodGroupKey::of(&pods[0]).unwrap();
        ready(&mut pods[0]);
        assert!(!pods_ready(&key, &pods), "one of two pods exists");
        pods.push(pod("b", Some(("g", 2)), 1));
        assert!(!pods_ready(&key, &pods));
        ready(&mut pods[1]);
        assert!(pods_ready(&key, &pods));
    }

    #[test]
    fn run_pod_injects_and_ungates() {
        let mut p = pod("a", None, 1);
        p.spec.as_mut().unwrap().scheduling_gates = Some(vec![
            k8s_openapi::api::core::v1::PodSchedulingGate {
                name: labels::ADMISSION_SCHEDULING_GATE.into(),
            },
            k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "other".into(),
            },
        ]);
        let info = PodSetInfo {
            name: "main".into(),
            count: 1,
            node_selector: BTreeMap::from([("zone".to_string(), "a".to_string())]),
            labels: BTreeMap::from([(labels::PODSET_LABEL.to_string(), "main".to_string())]),
            ..Default::default()
        };
        run_pod(&mut p, &info).unwrap();
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_selector.as_ref().unwrap()["zone"], "a");
        let gates: Vec<&str> = spec
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| g.name.as_str())
            .collect();
        assert_eq!(gates, vec!["other"]);
        assert_eq!(p.labels()[labels::PODSET_LABEL], "main");
        assert!(!is_gated(&p));
    }

    fn group_of(key: &PodGroupKey, pods: Vec<Pod>) -> PodGroup {
        PodGroup {
            key: key.clone(),
            pods,
        }
    }

    fn ungated(mut p: Pod) -> Pod {
        p.spec.as_mut().unwrap().scheduling_gates = None;
        p
    }

    fn in_phase(mut p: Pod, phase: &str) -> Pod {
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        p
    }

    #[test]
    fn a_single_pod_runs_once_ungated_until_it_ends_or_is_deleted() {
        let key = PodGroupKey::of(&pod("a", None, 1)).unwrap();
        let state = |p: Pod| {
            let g = group_of(&key, vec![p]);
            (PodGroups::is_suspended(&g), PodGroups::is_active(&g))
        };
        assert_eq!(state(pod("a", None, 1)), (true, false), "gated");
        // Ungated: runs, yet holds a node (Kueue's IsActive) only once Running.
        assert_eq!(state(ungated(pod("a", None, 1))), (false, false), "pending");
        let running = in_phase(ungated(pod("a", None, 1)), "Running");
        assert_eq!(state(running.clone()), (false, true), "running");
        assert_eq!(
            state(in_phase(ungated(pod("a", None, 1)), "Succeeded")),
            (true, false),
            "terminated"
        );
        // Being deleted: stopped, yet Running on its node until it stops or is a grace period overdue.
        let mut deleting = running;
        // (Deleted in the year 3000, so the clock cannot make it overdue.)
        let at = 32_503_680_000_000;
        deleting.metadata.deletion_timestamp = Some(crate::status::k8s_time(at));
        deleting.metadata.deletion_grace_period_seconds = Some(30);
        assert_eq!(state(deleting.clone()), (true, true), "being deleted");
        assert!(is_active_at(&deleting, at + 30_000));
        assert!(!is_active_at(&deleting, at + 30_001), "stuck terminating");
        let gone = group_of(&key, vec![]);
        assert!(PodGroups::is_suspended(&gone) && !PodGroups::is_active(&gone));
    }

    #[test]
    fn a_group_runs_only_while_none_of_its_pods_is_gated_or_terminated() {
        let a = in_phase(ungated(pod("a", Some(("g", 2)), 1)), "Running");
        let b = in_phase(ungated(pod("b", Some(("g", 2)), 1)), "Running");
        let key = PodGroupKey::of(&a).unwrap();
        let running = group_of(&key, vec![a.clone(), b.clone()]);
        assert!(!PodGroups::is_suspended(&running) && PodGroups::is_active(&running));
        // One pod done: the group counts as stopped, yet the other still holds its node.
        let half = group_of(&key, vec![a.clone(), in_phase(b, "Failed")]);
        assert!(PodGroups::is_suspended(&half) && PodGroups::is_active(&half));
        let gated = group_of(&key, vec![a, pod("b", Some(("g", 2)), 1)]);
        assert!(PodGroups::is_suspended(&gated));
        assert!(PodGroups::is_suspended(&group_of(&key, vec![])));
    }

    #[test]
    fn a_single_pod_without_a_message_finishes_with_kueues_words() {
        let key = PodGroupKey::of(&pod("a", None, 1)).unwrap();
        let done =
            |phase| PodGroups::finished(&group_of(&key, vec![in_phase(pod("a", None, 1), phase)]));
        assert_eq!(done("Succeeded"), Ok(Some((true, "Pod succeeded".into()))));
        assert_eq!(done("Failed"), Ok(Some((false, "Pod failed".into()))));
        assert_eq!(done("Running"), Ok(None));
    }

    /// A group pod with the given creation second, managed finalizer and gate.
    fn member(
        name: &str,
        total: u32,
        gpus: u32,
        created: i64,
        finalizer: bool,
        gated: bool,
    ) -> Pod {
        let mut p = pod(name, Some(("g", total)), gpus);
        p.metadata.creation_timestamp = Some(crate::status::k8s_time(created * 1000));
        if finalizer {
            p.metadata.finalizers = Some(vec![labels::MANAGED_FINALIZER.to_string()]);
        }
        if !gated {
            p.spec.as_mut().unwrap().scheduling_gates = None;
        }
        p
    }

    /// The Workload of a complete group.
    fn group_workload(pods: &[Pod]) -> Workload {
        workload(
            &PodGroupKey::of(&pods[0]).unwrap(),
            pods,
            &PriorityClasses::default(),
        )
        .unwrap()
        .unwrap()
    }

    fn names(pods: Vec<&Pod>) -> Vec<String> {
        pods.into_iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn excess_pods_are_the_last_in_kueues_keeping_order() {
        // Kept first: the managed finalizer, then ungated, then the oldest; the name breaks ties.
        let pods = vec![
            member("a-new", 3, 1, 30, true, true),
            member("b-no-finalizer", 3, 1, 10, false, false),
            member("c-ungated", 3, 1, 40, true, false),
            member("d-old", 3, 1, 20, true, true),
            member("e-tie", 3, 1, 30, true, true),
        ];
        assert_eq!(
            names(excess_pods(&pods).unwrap()),
            ["e-tie", "b-no-finalizer"]
        );
        // Failed pods and pods deleted before reaching a node do not count.
        let mut failed = member("f-failed", 3, 1, 1, true, false);
        failed.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        });
        let mut deleted = member("g-deleted", 3, 1, 1, true, true);
        deleted.metadata.deletion_timestamp = Some(crate::status::k8s_time(50_000));
        let few = vec![
            pods[0].clone(),
            pods[3].clone(),
            pods[4].clone(),
            failed,
            deleted,
        ];
        assert!(excess_pods(&few).unwrap().is_empty());
        // A single pod never has excess.
        assert!(excess_pods(&[pod("solo", None, 1)]).unwrap().is_empty());
    }

    #[test]
    fn with_a_workload_each_role_keeps_its_pod_sets_count() {
        let pods = vec![
            member("w0", 3, 2, 1, true, true),
            member("w1", 3, 2, 2, true, true),
            member("w2", 3, 2, 5, true, true),
            member("driver", 3, 0, 3, true, true),
            member("driver-2", 3, 0, 4, true, true),
            member("other-role", 3, 7, 6, true, true),
        ];
        let wl = group_workload(&[pods[0].clone(), pods[1].clone(), pods[3].clone()]);
        // Two workers and one driver are kept; a role the Workload lacks is in no list.
        let a = align(&pods, &wl, 0).unwrap();
        assert_eq!(names(a.excess), ["driver-2", "w2"]);
        assert_eq!(names(a.kept), ["driver", "w0", "w1"]);
        assert!(a.replaced.is_empty());
        assert_eq!(a.absent, 0);
        // A group missing a worker: one absent.
        let short = [pods[0].clone(), pods[3].clone()];
        assert_eq!(align(&short, &wl, 0).unwrap().absent, 1);
    }

    #[test]
    fn failed_pods_are_replaced_as_runnable_ones_take_their_place() {
        let wl = group_workload(&[
            member("w0", 2, 1, 1, true, true),
            member("w1", 2, 1, 2, true, true),
        ]);
        let failed = |name: &str, created: i64, failed_at: i64| {
            let mut p = member(name, 2, 1, created, true, false);
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Failed".into()),
                conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                    type_: "ContainersReady".into(),
                    status: "False".into(),
                    reason: Some("PodFailed".into()),
                    last_transition_time: Some(crate::status::k8s_time(failed_at * 1000)),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            p
        };
        // Two failed, one replacement: one pod is still absent, and the one that failed first is replaced.
        let pods = vec![
            member("w0", 2, 1, 1, true, false),
            failed("w1", 2, 50),
            failed("w2", 3, 40),
            member("w3", 2, 1, 60, true, true),
        ];
        let a = align(&pods, &wl, 100_000).unwrap();
        assert!(a.excess.is_empty());
        assert_eq!(a.absent, 0);
        assert_eq!(names(a.replaced), ["w1", "w2"]);
        let pods = &pods[..3];
        let a = align(pods, &wl, 100_000).unwrap();
        assert_eq!(a.absent, 1);
        // Two inactive, one active, count 2: one inactive is replaced (the one inactive longest), one kept.
        assert_eq!(names(a.replaced), ["w2"]);
        assert_eq!(names(a.kept), ["w0", "w1"]);
        // A pod already released counts as replaced before any still holding the finalizer.
        let mut released = pods[1].clone();
        released.metadata.finalizers = None;
        let with_released = [pods[0].clone(), released, pods[2].clone()];
        let a = align(&with_released, &wl, 100_000).unwrap();
        assert_eq!(names(a.replaced), ["w1"]);
    }
}
