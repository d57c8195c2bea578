//! LeaderWorkerSets, as Kueue's LeaderWorkerSet integration queues them: not as one job, but one Workload per
//! group (a leader and its workers), built ahead of the group's pods and named after the group's index. The LWS
//! controller's pods are gated by the pod webhook (their templates carry `kueue.x-k8s.io/pod-suspending-parent`);
//! [`pod_defaults`] then makes each pod a member of its group's pod group with that Workload as its prebuilt
//! Workload, and the pod-group integration ungates the pods on admission and ends them on eviction.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2::{DEFAULT_POD_SET_NAME, PodSet, Workload};
use sluice_sdk::lws::{self, LeaderWorkerSet};

use super::pod_group::IS_GROUP_WORKLOAD_ANNOTATION;
use super::topology_request::template_topology_request;
use super::{JobError, Owner, PriorityClasses, owned_workload, workload_name};

/// Kueue's marker for a LeaderWorkerSet's owner kind in `kueue.x-k8s.io/job-owner-gvk` (Go's GVK string).
const OWNER_GVK: &str = "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet";

fn error(lws: &LeaderWorkerSet, field: &str, message: impl Into<String>) -> JobError {
    JobError {
        kind: lws::KIND.to_string(),
        namespace: lws.namespace().unwrap_or_default(),
        name: lws.name_any(),
        field: field.to_string(),
        message: message.into(),
    }
}

/// The name of the Workload of group `index` (None while the LeaderWorkerSet's uid is unknown).
pub fn group_workload_name(lws: &LeaderWorkerSet, index: &str) -> Option<String> {
    let uid = lws.metadata.uid.as_deref()?;
    Some(workload_name(
        lws::KIND,
        lws::GROUP,
        &format!("{}-{index}", lws.name_any()),
        uid,
    ))
}

/// Drops the LWS controller's own labels or annotations but its name label, as Kueue does from pod sets.
fn drop_lws_keys(map: &mut Option<BTreeMap<String, String>>) {
    if let Some(m) = map {
        m.retain(|k, _| !k.starts_with(lws::DOMAIN_PREFIX) || k == lws::SET_NAME_LABEL);
    }
}

/// Keeps the last of each environment variable a container sets twice (Kueue's `SanitizePodSet`).
fn sanitize(template: &mut PodTemplateSpec) {
    let Some(spec) = template.spec.as_mut() else {
        return;
    };
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let Some(env) = c.env.as_mut() else { continue };
        let mut last: BTreeMap<String, usize> = BTreeMap::new();
        for (i, e) in env.iter().enumerate() {
            last.insert(e.name.clone(), i);
        }
        let mut order: Vec<String> = Vec::new();
        for e in env.iter() {
            if !order.contains(&e.name) {
                order.push(e.name.clone());
            }
        }
        let kept = order.iter().map(|n| env[last[n]].clone()).collect();
        *env = kept;
    }
}

fn pod_set(
    lws: &LeaderWorkerSet,
    name: &str,
    count: i32,
    template: &PodTemplateSpec,
    path: &str,
    index_label: bool,
) -> Result<PodSet, JobError> {
    let mut template = template.clone();
    if let Some(meta) = template.metadata.as_mut() {
        drop_lws_keys(&mut meta.labels);
        drop_lws_keys(&mut meta.annotations);
    }
    sanitize(&mut template);
    let empty = BTreeMap::new();
    let ann = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .unwrap_or(&empty);
    let mut req = template_topology_request(ann).map_err(|(key, message)| {
        error(lws, &format!("{path}.metadata.annotations[{key}]"), message)
    })?;
    if index_label {
        req.pod_index_label = Some(lws::WORKER_INDEX_LABEL.to_string());
    }
    // Kueue sends no request for a pod set without topology annotations or index labels (the leader's).
    let topology_request = (req != Default::default()).then_some(req);
    Ok(PodSet {
        name: name.to_string(),
        template,
        count,
        min_count: None,
        topology_request,
    })
}

/// Kueue's pod sets of one group: `leader` (1 pod) and `worker` (`size - 1`) with a leader template, else `main`
/// (`size` pods); the workers' ranks are their `leaderworkerset.sigs.k8s.io/worker-index`.
pub fn pod_sets(lws: &LeaderWorkerSet) -> Result<Vec<PodSet>, JobError> {
    let lwt = &lws.spec.leader_worker_template;
    let base = "spec.leaderWorkerTemplate";
    let size = lws.size();
    if size < 1 {
        return Err(error(lws, &format!("{base}.size"), "must be at least 1"));
    }
    let mut sets = Vec::with_capacity(2);
    let (worker_name, workers) = match &lwt.leader_template {
        Some(leader) => {
            sets.push(pod_set(
                lws,
                lws::LEADER_POD_SET,
                1,
                leader,
                &format!("{base}.leaderTemplate"),
                false,
            )?);
            (lws::WORKER_POD_SET, size - 1)
        }
        None => (DEFAULT_POD_SET_NAME, size),
    };
    sets.push(pod_set(
        lws,
        worker_name,
        workers,
        &lwt.worker_template,
        &format!("{base}.workerTemplate"),
        true,
    )?);
    Ok(sets)
}

/// The Workload of group `index` as Kueue's LeaderWorkerSet reconciler creates it: a group Workload (annotation
/// `kueue.x-k8s.io/is-group-workload`) owned (not controlled) by the LeaderWorkerSet, with its uid label, its
/// owner's kind and name and the group's index in annotations, the queue and priority of the LeaderWorkerSet.
pub fn group_workload(
    lws: &LeaderWorkerSet,
    index: i32,
    priorities: &PriorityClasses,
) -> Result<Workload, JobError> {
    let uid = lws
        .metadata
        .uid
        .clone()
        .ok_or_else(|| error(lws, "metadata.uid", "required"))?;
    let sets = pod_sets(lws)?;
    let pod_class = sets.iter().find_map(|ps| {
        let name = ps.template.spec.as_ref()?.priority_class_name.clone()?;
        let path = if ps.name == lws::LEADER_POD_SET {
            "spec.leaderWorkerTemplate.leaderTemplate.spec.priorityClassName"
        } else {
            "spec.leaderWorkerTemplate.workerTemplate.spec.priorityClassName"
        };
        (!name.is_empty()).then(|| (name, path.to_string()))
    });
    let owner = Owner {
        meta: &lws.metadata,
        kind: lws::KIND,
        group: lws::GROUP,
        api_version: lws::API_VERSION,
        pod_class,
    };
    let mut wl = owned_workload(owner, sets, priorities)?;
    let name = group_workload_name(lws, &index.to_string())
        .ok_or_else(|| error(lws, "metadata.uid", "required"))?;
    // Kueue copies the LeaderWorkerSet's ProvisioningRequest annotations and admission gates, as for every job.
    let mut annotations: BTreeMap<String, String> =
        wl.metadata.annotations.take().unwrap_or_default();
    annotations.insert(IS_GROUP_WORKLOAD_ANNOTATION.to_string(), "true".to_string());
    annotations.insert(
        labels::JOB_OWNER_GVK_ANNOTATION.to_string(),
        OWNER_GVK.to_string(),
    );
    annotations.insert(
        labels::JOB_OWNER_NAME_ANNOTATION.to_string(),
        lws.name_any(),
    );
    annotations.insert(
        labels::COMPONENT_WORKLOAD_INDEX_ANNOTATION.to_string(),
        index.to_string(),
    );
    wl.metadata = ObjectMeta {
        name: Some(name),
        annotations: Some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: lws::API_VERSION.to_string(),
            kind: lws::KIND.to_string(),
            name: lws.name_any(),
            uid: uid.clone(),
            controller: None,
            block_owner_deletion: None,
        }]),
        ..wl.metadata
    };
    Ok(wl)
}

/// Whether `wl` is one of this LeaderWorkerSet's group Workloads (an owner reference to its uid).
pub fn owns(lws: &LeaderWorkerSet, wl: &Workload) -> bool {
    let Some(uid) = lws.metadata.uid.as_deref() else {
        return false;
    };
    wl.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.kind == lws::KIND)
}

/// What the LeaderWorkerSet's Workloads should become, as Kueue's reconciler sorts them.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Groups without a Workload: (index, name).
    pub create: Vec<(i32, String)>,
    /// Existing Workloads of groups that still exist, by name.
    pub keep: Vec<String>,
    /// Workloads of groups that no longer exist, by name.
    pub delete: Vec<String>,
}

/// Sorts the LeaderWorkerSet's existing Workloads (by name) against its groups.
pub fn plan(lws: &LeaderWorkerSet, existing: &[String]) -> Plan {
    let mut plan = Plan::default();
    let mut left: Vec<&String> = existing.iter().collect();
    for i in 0..lws.groups().max(0) {
        let Some(name) = group_workload_name(lws, &i.to_string()) else {
            return Plan::default();
        };
        match left.iter().position(|n| **n == name) {
            Some(p) => {
                left.remove(p);
                plan.keep.push(name);
            }
            None => plan.create.push((i, name)),
        }
    }
    plan.delete = left.into_iter().cloned().collect();
    plan
}

/// Whether a pod was made by this integration's parent: its template's `pod-suspending-parent` names
/// LeaderWorkerSets and it names its LeaderWorkerSet; returns that name.
pub fn parent_of(pod: &Pod) -> Option<&str> {
    let by = pod
        .annotations()
        .get(sluice_sdk::kueue::defaults::POD_SUSPENDING_PARENT_ANNOTATION)?;
    if by != lws::FRAMEWORK_NAME {
        return None;
    }
    pod.labels().get(lws::SET_NAME_LABEL).map(String::as_str)
}

/// Kueue's defaults for a pod of a managed LeaderWorkerSet (its `setDefault`): a pod not managed yet becomes a
/// managed member of its group's pod group, with the group's Workload as its prebuilt Workload, the group size as
/// its total count and its role (`leader`, `worker` or `main`) as its role hash; a managed pod still gated takes
/// the LeaderWorkerSet's current queue. Returns whether the pod changed.
pub fn pod_defaults(lws: &LeaderWorkerSet, pod: &mut Pod) -> bool {
    let queue = lws
        .labels()
        .get(labels::QUEUE_NAME_LABEL)
        .cloned()
        .unwrap_or_default();
    let gated = super::pod_group::is_gated(pod);
    if pod.labels().contains_key(labels::MANAGED_LABEL) {
        if !queue.is_empty() && gated && pod.labels().get(labels::QUEUE_NAME_LABEL) != Some(&queue)
        {
            pod.labels_mut()
                .insert(labels::QUEUE_NAME_LABEL.to_string(), queue);
            return true;
        }
        return false;
    }
    let Some(index) = pod.labels().get(lws::GROUP_INDEX_LABEL).cloned() else {
        return false;
    };
    let Some(wl_name) = group_workload_name(lws, &index) else {
        return false;
    };
    let role = if lws.spec.leader_worker_template.leader_template.is_none() {
        DEFAULT_POD_SET_NAME
    } else if pod.annotations().contains_key(lws::LEADER_NAME_ANNOTATION) {
        lws::WORKER_POD_SET
    } else {
        lws::LEADER_POD_SET
    };
    let labels_map = pod.labels_mut();
    labels_map.insert(labels::MANAGED_LABEL.to_string(), "true".to_string());
    if !queue.is_empty() && gated {
        labels_map.insert(labels::QUEUE_NAME_LABEL.to_string(), queue);
    }
    let ann = pod.annotations_mut();
    // Kueue v0.19 writes the identifiers as annotations (WorkloadIdentifierAnnotations, on by default).
    ann.insert(labels::POD_GROUP_NAME_LABEL.to_string(), wl_name.clone());
    ann.insert(labels::PREBUILT_WORKLOAD_ANNOTATION.to_string(), wl_name);
    ann.insert(
        labels::POD_GROUP_TOTAL_COUNT_ANNOTATION.to_string(),
        lws.size().to_string(),
    );
    ann.insert(labels::ROLE_HASH_ANNOTATION.to_string(), role.to_string());
    true
}

/// One group of a LeaderWorkerSet as the simulator runs it: its own Workload, its pods gated until admitted and
/// ended on eviction. A serving group never finishes by itself.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LwsGroup {
    /// The set's metadata, named `<set>-<index>` (the set's timing annotations apply to each group).
    pub metadata: ObjectMeta,
    /// The LeaderWorkerSet.
    pub set: LeaderWorkerSet,
    /// The group's index.
    pub index: i32,
    /// Whether its pods run (ungated by an admission).
    pub running: bool,
}

impl LwsGroup {
    /// The groups of a LeaderWorkerSet, each waiting.
    pub fn of(set: &LeaderWorkerSet) -> Vec<LwsGroup> {
        (0..set.groups().max(0))
            .map(|index| {
                let mut metadata = set.metadata.clone();
                metadata.name = Some(format!("{}-{index}", set.name_any()));
                LwsGroup {
                    metadata,
                    set: set.clone(),
                    index,
                    running: false,
                }
            })
            .collect()
    }
}

/// The groups of LeaderWorkerSets as a job kind of the simulator (the operator runs them as pod groups).
pub struct LwsGroupJob;

impl LwsGroupJob {
    /// The group's Workload, as the operator builds it.
    pub fn workload(g: &LwsGroup, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        group_workload(&g.set, g.index, priorities)
    }
}

impl super::JobIntegration for LwsGroupJob {
    type Job = LwsGroup;
    const KIND: &'static str = lws::KIND;
    const GROUP: &'static str = lws::GROUP;
    const API_VERSION: &'static str = lws::API_VERSION;

    fn queue_name(g: &LwsGroup) -> Option<String> {
        g.set.labels().get(labels::QUEUE_NAME_LABEL).cloned()
    }

    fn workload_name(g: &LwsGroup) -> Option<String> {
        group_workload_name(&g.set, &g.index.to_string())
    }

    fn compose(g: &LwsGroup, priorities: &PriorityClasses) -> Result<Option<Workload>, JobError> {
        Self::workload(g, priorities).map(Some)
    }

    /// From the LeaderWorkerSet, as Kueue builds a group's Workload from the set.
    fn copied_labels(
        g: &LwsGroup,
        keys: &[String],
    ) -> Result<std::collections::BTreeMap<String, String>, JobError> {
        Ok(super::copy_labels(&g.set.metadata, keys))
    }

    fn is_suspended(g: &LwsGroup) -> bool {
        !g.running
    }

    fn is_active(g: &LwsGroup) -> bool {
        g.running
    }

    /// Serving groups never finish (Kueue's pod groups marked `pod-group-serving`).
    fn finished(_: &LwsGroup) -> Result<Option<(bool, String)>, JobError> {
        Ok(None)
    }

    fn pods_ready(g: &LwsGroup, _: &Workload) -> bool {
        g.running
    }
}

impl super::SuspendableJob for LwsGroupJob {
    fn suspend(g: &mut LwsGroup) {
        g.running = false;
    }

    /// Every pod set of the group must be admitted (a group is all or nothing).
    fn run_with(g: &mut LwsGroup, infos: &[super::PodSetInfo]) -> Result<(), JobError> {
        let sets = pod_sets(&g.set)?;
        if let Some(missing) = sets
            .iter()
            .find(|ps| !infos.iter().any(|i| i.name == ps.name))
        {
            return Err(error(
                &g.set,
                "status.admission.podSetAssignments",
                format!("no assignment for pod set {:?}", missing.name),
            ));
        }
        g.running = true;
        Ok(())
    }

    /// Nothing to restore: the pods are ended, and the LWS controller makes them again from the templates.
    fn restore(_: &mut LwsGroup, _: &[super::PodSetInfo]) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lws(leader: bool) -> LeaderWorkerSet {
        let mut doc = json!({
            "apiVersion": lws::API_VERSION, "kind": lws::KIND,
            "metadata": {"name": "infer", "namespace": "ml", "uid": "u-1",
                "labels": {labels::QUEUE_NAME_LABEL: "serving"},
                "annotations": {"provreq.kueue.x-k8s.io/max-run-duration-seconds": "60", "other": "x",
                    labels::ADMISSION_GATED_BY_ANNOTATION: "example.com/gate"}},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4,
                "workerTemplate": {
                    "metadata": {"labels": {"leaderworkerset.sigs.k8s.io/name": "infer",
                                            "leaderworkerset.sigs.k8s.io/template-revision-hash": "h"},
                                 "annotations": {labels::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack"}},
                    "spec": {"containers": [{"name": "w", "image": "vllm",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}],
                        "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}}
        });
        if leader {
            doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"] =
                json!({"spec": {"containers": [{"name": "l", "image": "vllm"}]}});
        }
        serde_json::from_value(doc).expect("lws")
    }

    #[test]
    fn pod_sets_are_leader_and_workers_or_main() {
        let sets = pod_sets(&lws(true)).unwrap();
        let shape: Vec<(&str, i32)> = sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
        assert_eq!(shape, vec![("leader", 1), ("worker", 3)]);
        assert_eq!(
            sets[0].topology_request, None,
            "no annotations on the leader"
        );
        let req = sets[1].topology_request.as_ref().unwrap();
        assert_eq!(req.required.as_deref(), Some("rack"));
        assert_eq!(
            req.pod_index_label.as_deref(),
            Some(lws::WORKER_INDEX_LABEL)
        );
        let meta = sets[1].template.metadata.as_ref().unwrap();
        let kept: Vec<&String> = meta.labels.as_ref().unwrap().keys().collect();
        assert_eq!(
            kept,
            vec![lws::SET_NAME_LABEL],
            "LWS keys dropped but its name"
        );
        let env: Vec<(String, Option<String>)> = sets[1].template.spec.as_ref().unwrap().containers
            [0]
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
        assert_eq!(
            env,
            vec![
                ("A".into(), Some("3".into())),
                ("B".into(), Some("2".into()))
            ],
            "the last of a duplicated variable wins, in first-seen order"
        );
        let sets = pod_sets(&lws(false)).unwrap();
        let shape: Vec<(&str, i32)> = sets.iter().map(|p| (p.name.as_str(), p.count)).collect();
        assert_eq!(shape, vec![("main", 4)]);
    }

    #[test]
    fn one_workload_per_group_owned_by_the_lws() {
        let set = lws(true);
        let wl = group_workload(&set, 1, &PriorityClasses::default()).unwrap();
        let name = wl.name_any();
        assert!(name.starts_with("leaderworkerset-infer-1-"), "{name}");
        assert_eq!(Some(name), group_workload_name(&set, "1"));
        assert_ne!(
            group_workload_name(&set, "0"),
            group_workload_name(&set, "1")
        );
        assert_eq!(wl.spec.queue_name, "serving");
        let ann = wl.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[IS_GROUP_WORKLOAD_ANNOTATION], "true");
        assert_eq!(ann[labels::JOB_OWNER_GVK_ANNOTATION], OWNER_GVK);
        assert_eq!(ann[labels::JOB_OWNER_NAME_ANNOTATION], "infer");
        assert_eq!(ann[labels::COMPONENT_WORKLOAD_INDEX_ANNOTATION], "1");
        assert_eq!(ann["provreq.kueue.x-k8s.io/max-run-duration-seconds"], "60");
        assert_eq!(
            ann[labels::ADMISSION_GATED_BY_ANNOTATION],
            "example.com/gate"
        );
        assert!(!ann.contains_key("other"));
        assert_eq!(wl.labels()[labels::JOB_UID_LABEL], "u-1");
        let owners = wl.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].controller),
            ("LeaderWorkerSet", None)
        );
        assert!(owns(&set, &wl));
        assert_eq!(
            super::super::PodGroupKey::of_workload(&wl),
            Some(super::super::PodGroupKey::Group {
                namespace: "ml".into(),
                name: wl.name_any()
            })
        );
    }

    #[test]
    fn the_plan_creates_missing_groups_and_deletes_gone_ones() {
        let set = lws(true);
        let w0 = group_workload_name(&set, "0").unwrap();
        let w1 = group_workload_name(&set, "1").unwrap();
        let p = plan(&set, &[w1.clone(), "leaderworkerset-infer-7-abcde".into()]);
        assert_eq!(p.create, vec![(0, w0)]);
        assert_eq!(p.keep, vec![w1]);
        assert_eq!(p.delete, vec!["leaderworkerset-infer-7-abcde".to_string()]);
    }

    fn pod(index: &str, worker: bool) -> Pod {
        let mut ann = json!({sluice_sdk::kueue::defaults::POD_SUSPENDING_PARENT_ANNOTATION: lws::FRAMEWORK_NAME});
        if worker {
            ann[lws::LEADER_NAME_ANNOTATION] = json!("infer-0");
        }
        serde_json::from_value(json!({
            "metadata": {"name": format!("infer-{index}"), "namespace": "ml",
                "labels": {lws::SET_NAME_LABEL: "infer", lws::GROUP_INDEX_LABEL: index},
                "annotations": ann},
            "spec": {"schedulingGates": [{"name": labels::ADMISSION_SCHEDULING_GATE}], "containers": []}
        }))
        .unwrap()
    }

    #[test]
    fn pods_join_their_groups_pod_group_with_its_workload() {
        let set = lws(true);
        let mut leader = pod("1", false);
        assert_eq!(parent_of(&leader), Some("infer"));
        assert!(pod_defaults(&set, &mut leader));
        let wl = group_workload_name(&set, "1").unwrap();
        let ann = leader.annotations();
        assert_eq!(ann[labels::POD_GROUP_NAME_LABEL], wl);
        assert_eq!(ann[labels::PREBUILT_WORKLOAD_ANNOTATION], wl);
        assert_eq!(ann[labels::POD_GROUP_TOTAL_COUNT_ANNOTATION], "4");
        assert_eq!(ann[labels::ROLE_HASH_ANNOTATION], "leader");
        assert_eq!(leader.labels()[labels::MANAGED_LABEL], "true");
        assert_eq!(leader.labels()[labels::QUEUE_NAME_LABEL], "serving");
        assert!(!pod_defaults(&set, &mut leader), "done once");
        let mut worker = pod("1", true);
        pod_defaults(&set, &mut worker);
        assert_eq!(worker.annotations()[labels::ROLE_HASH_ANNOTATION], "worker");
        let mut main = pod("0", false);
        pod_defaults(&lws(false), &mut main);
        assert_eq!(main.annotations()[labels::ROLE_HASH_ANNOTATION], "main");
        // A managed, gated pod follows the LeaderWorkerSet's queue.
        let mut moved = lws(true);
        moved
            .labels_mut()
            .insert(labels::QUEUE_NAME_LABEL.into(), "other".into());
        assert!(pod_defaults(&moved, &mut leader));
        assert_eq!(leader.labels()[labels::QUEUE_NAME_LABEL], "other");
    }
}
