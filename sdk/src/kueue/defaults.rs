//! Kueue's defaulting as its mutating webhooks apply it (v0.19.2, feature gates at their defaults), on raw JSON
//! documents so that a caller can diff the result against the original without re-encoding artefacts.
//!
//! * ClusterQueue, ResourceFlavor: the `kueue.x-k8s.io/resource-in-use` finalizer.
//! * Workload: `minCount` dropped from every pod set when PartialAdmission is off.
//! * batch/v1 Job: the default LocalQueue label, `spec.suspend=true` for managed jobs, the elastic-job scheduling
//!   gate on elastic Jobs' pod template.
//! * Pod (the plain-pod integration): the default LocalQueue label, the managed label and finalizer, the admission
//!   scheduling gate (and the topology gate, TopologyAwareScheduling being on).
//!
//! Schema defaults (`queueingStrategy`, `flavorFungibility`, ...) are the API server's job, not these.

use serde_json::{Map, Value};

use super::integrations::Integrations;
use super::labels as l;

/// Kueue feature gates that change defaulting.
#[derive(Clone, Copy, Debug)]
pub struct Gates {
    /// PartialAdmission (beta, on by default): keep `podSets[].minCount`.
    pub partial_admission: bool,
    /// TopologyAwareScheduling (beta, on by default): gate managed plain pods with `kueue.x-k8s.io/topology`.
    pub topology_aware_scheduling: bool,
    /// ElasticJobsViaWorkloadSlices (beta, on by default): gate the pods of elastic Jobs with
    /// `kueue.x-k8s.io/elastic-job`.
    pub elastic_jobs: bool,
}

impl Default for Gates {
    fn default() -> Self {
        Self {
            partial_admission: true,
            topology_aware_scheduling: true,
            elastic_jobs: true,
        }
    }
}

/// What defaulting a job-like object needs to know about its surroundings.
#[derive(Clone, Copy, Debug)]
pub struct JobContext<'a> {
    /// A LocalQueue named `default` exists in the object's namespace.
    pub default_local_queue_exists: bool,
    /// The namespace matches Kueue's `managedJobsNamespaceSelector`.
    pub namespace_managed: bool,
    /// Kueue's `manageJobsWithoutQueueName`.
    pub manage_jobs_without_queue_name: bool,
    /// The integrations on: an object whose controller is of a kind one of them manages is left to that
    /// integration.
    pub integrations: &'a Integrations,
}

impl Default for JobContext<'static> {
    fn default() -> Self {
        Self {
            default_local_queue_exists: false,
            namespace_managed: false,
            manage_jobs_without_queue_name: false,
            integrations: Integrations::every(),
        }
    }
}

/// The annotation a parent integration puts on pods it suspends itself.
pub const POD_SUSPENDING_PARENT_ANNOTATION: &str = "kueue.x-k8s.io/pod-suspending-parent";

/// Applies Kueue's mutating-webhook defaults to a Kueue object (v1beta1 or v1beta2); other kinds are untouched.
pub fn default_kueue_object(obj: &mut Value, gates: Gates) {
    match obj.get("kind").and_then(Value::as_str) {
        Some("ClusterQueue" | "ResourceFlavor") => {
            add_finalizer(obj, l::RESOURCE_IN_USE_FINALIZER);
        }
        Some("Workload") if !gates.partial_admission => {
            let pod_sets = obj
                .get_mut("spec")
                .and_then(|s| s.get_mut("podSets"))
                .and_then(Value::as_array_mut);
            for ps in pod_sets.into_iter().flatten() {
                if let Some(m) = ps.as_object_mut() {
                    m.remove("minCount");
                }
            }
        }
        _ => {}
    }
}

/// Applies Kueue's Job defaulting to a batch/v1 Job document: the default LocalQueue label, `spec.suspend` for a
/// job Kueue manages (not for jobs controlled by an integrated owner, which its own integration handles), and the
/// elastic-job scheduling gate on the pod template of elastic Jobs.
pub fn default_job(job: &mut Value, ctx: JobContext, gates: Gates) {
    default_queue_and_suspend(job, ctx);
    let elastic = job
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(l::ELASTIC_JOB_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true");
    if gates.elastic_jobs
        && elastic
        && let Some(template) = object_at(job, "spec").and_then(|s| child_object(s, "template"))
    {
        add_scheduling_gate_in(template, l::ELASTIC_JOB_SCHEDULING_GATE);
    }
}

/// Applies Kueue's JobSet defaulting to a JobSet document: the namespace's default LocalQueue, and `spec.suspend`
/// when the JobSet is managed (Kueue's MultiKueue `managedBy` defaulting does not apply: Sluice has no MultiKueue).
pub fn default_jobset(jobset: &mut Value, ctx: JobContext) {
    default_queue_and_suspend(jobset, ctx);
}

/// Applies Kueue's RayJob and RayCluster defaulting to a document: the namespace's default LocalQueue, and
/// `spec.suspend` when the object is managed (a RayCluster that a RayJob owns is left to the RayJob's integration).
/// Elastic RayClusters' scheduling gates are not added: Sluice does not run elastic jobs.
pub fn default_ray_object(obj: &mut Value, ctx: JobContext) {
    default_queue_and_suspend(obj, ctx);
}

/// Applies Kueue's RayService defaulting to a document: the namespace's default LocalQueue, and
/// `spec.rayClusterConfig.suspend` when the service is managed (the suspend of the cluster KubeRay makes for it).
pub fn default_rayservice(obj: &mut Value, ctx: JobContext) {
    default_queue_and_suspend_at(obj, ctx, &["spec", "rayClusterConfig"]);
}

/// Applies Kueue's TrainJob defaulting to a document: the namespace's default LocalQueue, `spec.suspend` when the
/// job is managed, and, on every TrainJob (managed or not), Kueue's own empty runtime patch appended to
/// `spec.runtimePatches` (where the admission's node selectors and tolerations go later).
pub fn default_trainjob(job: &mut Value, ctx: JobContext) {
    default_queue_and_suspend(job, ctx);
    let Some(spec) = object_at(job, "spec") else {
        return;
    };
    let patches = spec
        .entry("runtimePatches")
        .or_insert_with(|| Value::Array(Vec::new()));
    if patches.is_null() {
        *patches = Value::Array(Vec::new());
    }
    if let Some(list) = patches.as_array_mut() {
        list.push(serde_json::json!({
            "manager": crate::trainer::KUEUE_RUNTIME_PATCH_MANAGER,
            "trainingRuntimeSpec": {"template": {"spec": {}}}
        }));
    }
}

/// Applies Kueue's defaulting of the Kubeflow training v1 kinds (PyTorchJob) to a document: the namespace's
/// default LocalQueue, and `spec.runPolicy.suspend` when the job is managed.
pub fn default_kubeflow_job(job: &mut Value, ctx: JobContext) {
    default_queue_and_suspend_at(job, ctx, &["spec", "runPolicy"]);
}

/// Applies Kueue's LeaderWorkerSet defaulting to a document: the namespace's default LocalQueue, and, when the
/// LeaderWorkerSet is managed, on its leader and worker templates the queue name and workload priority class, the
/// annotations that make the pod webhook gate the pods for their parent (`pod-suspending-parent`) and mark each
/// group as serving, and with topology-aware scheduling and a leader the workers' pod-index offset of 1 (the leader
/// holds index 0) unless the worker template is in a pod-set group. There is no suspend field: the pods are gated.
pub fn default_lws(lws: &mut Value, ctx: JobContext, gates: Gates) {
    if ctx.integrations.manages_owner_of(lws) {
        return;
    }
    default_queue(lws, ctx);
    if !managed(lws, ctx) {
        return;
    }
    let queue = queue_name(lws).to_owned();
    let priority = lws
        .pointer("/metadata/labels")
        .and_then(|m| m.get(l::PRIORITY_CLASS_LABEL))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(lwt) = object_at(lws, "spec").and_then(|s| child_object(s, "leaderWorkerTemplate"))
    else {
        return;
    };
    let has_leader = lwt.get("leaderTemplate").is_some_and(|t| !t.is_null());
    for (key, worker) in [("leaderTemplate", false), ("workerTemplate", true)] {
        if !worker && !has_leader {
            continue;
        }
        let Some(meta) = child_object(lwt, key).and_then(|t| child_object(t, "metadata")) else {
            continue;
        };
        if let Some(labels) = child_object(meta, "labels") {
            if !queue.is_empty() {
                labels.insert(l::QUEUE_NAME_LABEL.to_owned(), Value::String(queue.clone()));
            }
            if let Some(p) = &priority {
                labels.insert(l::PRIORITY_CLASS_LABEL.to_owned(), Value::String(p.clone()));
            }
        }
        let Some(annotations) = child_object(meta, "annotations") else {
            continue;
        };
        annotations.insert(
            POD_SUSPENDING_PARENT_ANNOTATION.to_owned(),
            Value::String(crate::lws::FRAMEWORK_NAME.to_owned()),
        );
        annotations.insert(
            l::POD_GROUP_SERVING_ANNOTATION.to_owned(),
            Value::String("true".to_owned()),
        );
        if gates.topology_aware_scheduling
            && worker
            && has_leader
            && !annotations.contains_key(l::PODSET_GROUP_NAME_ANNOTATION)
        {
            annotations.insert(
                l::POD_INDEX_OFFSET_ANNOTATION.to_owned(),
                Value::String("1".to_owned()),
            );
        }
    }
}

/// The namespace's `default` LocalQueue for a job without a queue name (Kueue's `ApplyDefaultLocalQueue`).
fn default_queue(job: &mut Value, ctx: JobContext) {
    if queue_name(job).is_empty() && ctx.default_local_queue_exists && ctx.namespace_managed {
        set_label(job, l::QUEUE_NAME_LABEL, l::DEFAULT_LOCAL_QUEUE_NAME);
    }
}

/// Whether Kueue manages the job: it names a queue, or jobs without one are managed in its namespace.
fn managed(job: &Value, ctx: JobContext) -> bool {
    !queue_name(job).is_empty() || (ctx.manage_jobs_without_queue_name && ctx.namespace_managed)
}

/// The steps every kind with a `spec.suspend` field shares (Kueue's `ApplyDefaultLocalQueue` and
/// `ApplyDefaultForSuspend`): a job not owned by another integrated kind gets the `default` LocalQueue when its
/// namespace has one, and is suspended when managed.
fn default_queue_and_suspend(job: &mut Value, ctx: JobContext) {
    default_queue_and_suspend_at(job, ctx, &["spec"]);
}

/// [`default_queue_and_suspend`] for a kind whose `suspend` field sits in the object at `path` (created if absent
/// below `spec`, as the kinds' own defaulting would).
fn default_queue_and_suspend_at(job: &mut Value, ctx: JobContext, path: &[&str]) {
    if ctx.integrations.manages_owner_of(job) {
        return;
    }
    default_queue(job, ctx);
    if !managed(job, ctx) {
        return;
    }
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(mut holder) = object_at(job, first) else {
        return;
    };
    for key in rest {
        let Some(next) = child_object(holder, key) else {
            return;
        };
        holder = next;
    }
    if holder.get("suspend").and_then(Value::as_bool) != Some(true) {
        holder.insert("suspend".to_owned(), Value::Bool(true));
    }
}

/// Applies Kueue's plain-pod defaulting to a Pod document (single pods and pod groups alike).
pub fn default_pod(pod: &mut Value, ctx: JobContext, gates: Gates) {
    let by_parent = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(POD_SUSPENDING_PARENT_ANNOTATION))
        .is_some();
    let mut suspend = by_parent;
    if !by_parent {
        if !ctx.namespace_managed || ctx.integrations.manages_owner_of(pod) {
            return;
        }
        if queue_name(pod).is_empty() && ctx.default_local_queue_exists {
            set_label(pod, l::QUEUE_NAME_LABEL, l::DEFAULT_LOCAL_QUEUE_NAME);
        }
        suspend = !queue_name(pod).is_empty() || ctx.manage_jobs_without_queue_name;
        if suspend {
            set_label(pod, l::MANAGED_LABEL, "true");
        }
    }
    if !suspend {
        return;
    }
    if !by_parent {
        add_finalizer(pod, l::MANAGED_FINALIZER);
    }
    add_scheduling_gate(pod, l::ADMISSION_SCHEDULING_GATE);
    if gates.topology_aware_scheduling {
        let index_label = pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(l::POD_GROUP_POD_INDEX_LABEL_ANNOTATION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(key) = index_label {
            let value = pod
                .pointer("/metadata/labels")
                .and_then(|a| a.get(&key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            set_label(pod, l::POD_GROUP_POD_INDEX_LABEL, &value);
        }
        add_scheduling_gate(pod, l::TOPOLOGY_SCHEDULING_GATE);
    }
}

/// The queue-name label of a document (empty when absent).
pub fn queue_name(obj: &Value) -> &str {
    obj.pointer("/metadata/labels")
        .and_then(|m| m.get(l::QUEUE_NAME_LABEL))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The object at `key` of `parent`, created when absent or null; None when something else sits there (the
/// document is then malformed and is left for validation to refuse).
fn child_object<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = parent.entry(key.to_owned()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

fn object_at<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    child_object(obj.as_object_mut()?, key)
}

fn set_label(obj: &mut Value, key: &str, value: &str) {
    if let Some(labels) = object_at(obj, "metadata").and_then(|m| child_object(m, "labels")) {
        labels.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(meta) = object_at(obj, "metadata") else {
        return;
    };
    let list = meta.entry("finalizers".to_owned()).or_insert(Value::Null);
    if list.is_null() {
        *list = Value::Array(Vec::new());
    }
    if let Some(list) = list.as_array_mut()
        && !list.iter().any(|f| f.as_str() == Some(finalizer))
    {
        list.push(Value::String(finalizer.to_owned()));
    }
}

fn add_scheduling_gate(pod: &mut Value, gate: &str) {
    if let Some(pod) = pod.as_object_mut() {
        add_scheduling_gate_in(pod, gate);
    }
}

/// Adds `gate` to `spec.schedulingGates` of a pod or pod template object, once.
fn add_scheduling_gate_in(pod: &mut Map<String, Value>, gate: &str) {
    let Some(spec) = child_object(pod, "spec") else {
        return;
    };
    let gates = spec
        .entry("schedulingGates".to_owned())
        .or_insert(Value::Null);
    if gates.is_null() {
        *gates = Value::Array(Vec::new());
    }
    if let Some(gates) = gates.as_array_mut()
        && !gates
            .iter()
            .any(|g| g.get("name").and_then(Value::as_str) == Some(gate))
    {
        let mut entry = Map::new();
        entry.insert("name".to_owned(), Value::String(gate.to_owned()));
        gates.push(Value::Object(entry));
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_managed_lws_gets_its_templates_annotated_for_the_pod_webhook() {
        let mut lws = serde_json::json!({
            "metadata": {"name": "infer", "labels": {l::PRIORITY_CLASS_LABEL: "high"}},
            "spec": {"leaderWorkerTemplate": {"size": 3,
                "leaderTemplate": {"spec": {"containers": []}},
                "workerTemplate": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": []}}}}
        });
        let ctx = JobContext {
            default_local_queue_exists: true,
            namespace_managed: true,
            ..JobContext::default()
        };
        default_lws(&mut lws, ctx, Gates::default());
        assert_eq!(lws["metadata"]["labels"][l::QUEUE_NAME_LABEL], "default");
        let lwt = &lws["spec"]["leaderWorkerTemplate"];
        for t in ["leaderTemplate", "workerTemplate"] {
            let meta = &lwt[t]["metadata"];
            assert_eq!(meta["labels"][l::QUEUE_NAME_LABEL], "default", "{t}");
            assert_eq!(meta["labels"][l::PRIORITY_CLASS_LABEL], "high", "{t}");
            assert_eq!(
                meta["annotations"][POD_SUSPENDING_PARENT_ANNOTATION],
                crate::lws::FRAMEWORK_NAME
            );
            assert_eq!(meta["annotations"][l::POD_GROUP_SERVING_ANNOTATION], "true");
        }
        assert_eq!(lwt["workerTemplate"]["metadata"]["labels"]["app"], "w");
        assert_eq!(
            lwt["workerTemplate"]["metadata"]["annotations"][l::POD_INDEX_OFFSET_ANNOTATION],
            "1"
        );
        assert!(
            lwt["leaderTemplate"]["metadata"]["annotations"]
                .get(l::POD_INDEX_OFFSET_ANNOTATION)
                .is_none()
        );
        // No queue and no default queue: not managed, untouched.
        let mut plain = serde_json::json!({"metadata": {"name": "x"},
            "spec": {"leaderWorkerTemplate": {"workerTemplate": {}}}});
        let before = plain.clone();
        default_lws(&mut plain, JobContext::default(), Gates::default());
        assert_eq!(plain, before);
    }
    use super::*;
    use serde_json::json;

    fn managed_ns(default_lq: bool) -> JobContext<'static> {
        JobContext {
            default_local_queue_exists: default_lq,
            namespace_managed: true,
            ..JobContext::default()
        }
    }

    #[test]
    fn a_jobset_is_suspended_with_the_default_queue_unless_a_trainjob_owns_it() {
        let mut js =
            json!({"kind": "JobSet", "metadata": {"name": "t"}, "spec": {"replicatedJobs": []}});
        default_jobset(&mut js, managed_ns(true));
        assert_eq!(js["spec"]["suspend"], true);
        assert_eq!(js["metadata"]["labels"][l::QUEUE_NAME_LABEL], "default");
        let mut unmanaged = json!({"kind": "JobSet", "metadata": {"name": "t"}, "spec": {}});
        default_jobset(&mut unmanaged, managed_ns(false));
        assert!(unmanaged["spec"].get("suspend").is_none());
        let mut child = json!({"kind": "JobSet", "metadata": {"name": "t", "ownerReferences": [
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "t", "uid": "u", "controller": true}
        ]}, "spec": {}});
        default_jobset(&mut child, managed_ns(true));
        assert!(child["spec"].get("suspend").is_none());
        assert!(child["metadata"].get("labels").is_none());
    }

    #[test]
    fn a_pytorchjob_is_suspended_in_its_run_policy() {
        let mut j = json!({"kind": "PyTorchJob", "metadata": {"name": "t", "labels": {l::QUEUE_NAME_LABEL: "q"}},
            "spec": {"pytorchReplicaSpecs": {}}});
        default_kubeflow_job(&mut j, managed_ns(false));
        assert_eq!(j["spec"]["runPolicy"]["suspend"], true);
        let mut other = json!({"kind": "PyTorchJob", "metadata": {"name": "t"}, "spec": {"runPolicy": {"cleanPodPolicy": "None"}}});
        default_kubeflow_job(&mut other, managed_ns(false));
        assert_eq!(
            other["spec"]["runPolicy"],
            json!({"cleanPodPolicy": "None"})
        );
    }

    #[test]
    fn a_ray_cluster_is_suspended_unless_its_rayjob_owns_it() {
        let mut c = json!({"kind": "RayCluster", "metadata": {"name": "c", "labels": {l::QUEUE_NAME_LABEL: "q"}},
            "spec": {"headGroupSpec": {}}});
        default_ray_object(&mut c, managed_ns(false));
        assert_eq!(c["spec"]["suspend"], true);
        let mut owned = json!({"kind": "RayCluster", "metadata": {"name": "c", "labels": {l::QUEUE_NAME_LABEL: "q"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "j", "uid": "u", "controller": true}]},
            "spec": {"headGroupSpec": {}}});
        default_ray_object(&mut owned, managed_ns(false));
        assert!(owned["spec"].get("suspend").is_none());
    }

    #[test]
    fn a_ray_service_is_suspended_in_its_cluster_config_and_gets_the_default_queue() {
        let mut svc = json!({"kind": "RayService", "metadata": {"name": "s", "labels": {l::QUEUE_NAME_LABEL: "q"}},
            "spec": {"serveConfigV2": "", "rayClusterConfig": {"headGroupSpec": {}}}});
        default_rayservice(&mut svc, managed_ns(false));
        assert_eq!(svc["spec"]["rayClusterConfig"]["suspend"], true);
        assert!(svc["spec"].get("suspend").is_none());
        // No queue name: the namespace's `default` LocalQueue, and suspended since it is then managed.
        let mut plain = json!({"kind": "RayService", "metadata": {"name": "s"}, "spec": {}});
        default_rayservice(&mut plain, managed_ns(true));
        assert_eq!(
            plain["metadata"]["labels"][l::QUEUE_NAME_LABEL],
            l::DEFAULT_LOCAL_QUEUE_NAME
        );
        assert_eq!(plain["spec"]["rayClusterConfig"]["suspend"], true);
        // Not managed: untouched.
        let mut free = json!({"kind": "RayService", "metadata": {"name": "s"}, "spec": {}});
        default_rayservice(&mut free, managed_ns(false));
        assert_eq!(free["spec"], json!({}));
    }

    #[test]
    fn a_trainjob_always_gets_kueues_runtime_patch_and_is_suspended_when_managed() {
        let user_patch = json!({"manager": "me", "trainingRuntimeSpec": {}});
        let mut tj = json!({"kind": "TrainJob", "metadata": {"name": "t"},
            "spec": {"runtimeRef": {"name": "torch"}, "runtimePatches": [user_patch.clone()]}});
        default_trainjob(&mut tj, managed_ns(true));
        assert_eq!(tj["metadata"]["labels"][l::QUEUE_NAME_LABEL], "default");
        assert_eq!(tj["spec"]["suspend"], true);
        let kueue = json!({"manager": "kueue.x-k8s.io/manager",
            "trainingRuntimeSpec": {"template": {"spec": {}}}});
        assert_eq!(
            tj["spec"]["runtimePatches"],
            json!([user_patch, kueue.clone()])
        );
        // Not managed: not suspended, but the patch is still added (as Kueue does).
        let mut free = json!({"kind": "TrainJob", "metadata": {"name": "t"}, "spec": {}});
        default_trainjob(&mut free, managed_ns(false));
        assert_eq!(free["spec"], json!({"runtimePatches": [kueue]}));
    }

    #[test]
    fn cluster_queue_gets_the_finalizer_once() {
        let mut cq = json!({"kind": "ClusterQueue", "metadata": {"name": "cq"}});
        default_kueue_object(&mut cq, Gates::default());
        default_kueue_object(&mut cq, Gates::default());
        assert_eq!(
            cq["metadata"]["finalizers"],
            json!([l::RESOURCE_IN_USE_FINALIZER])
        );
    }

    #[test]
    fn workload_min_count_dropped_without_partial_admission() {
        let mut wl = json!({"kind": "Workload", "spec": {"podSets": [{"name": "main", "count": 3, "minCount": 1}]}});
        default_kueue_object(&mut wl, Gates::default());
        assert_eq!(wl["spec"]["podSets"][0]["minCount"], 1);
        let gates = Gates {
            partial_admission: false,
            ..Gates::default()
        };
        default_kueue_object(&mut wl, gates);
        assert!(wl["spec"]["podSets"][0].get("minCount").is_none());
    }

    #[test]
    fn job_with_queue_is_suspended_and_others_untouched() {
        let mut job = json!({"kind": "Job", "metadata": {"name": "j", "labels": {l::QUEUE_NAME_LABEL: "q"}}, "spec": {}});
        default_job(&mut job, managed_ns(false), Gates::default());
        assert_eq!(job["spec"]["suspend"], true);
        let mut plain = json!({"kind": "Job", "metadata": {"name": "j"}, "spec": {}});
        let before = plain.clone();
        default_job(&mut plain, managed_ns(false), Gates::default());
        assert_eq!(plain, before);
    }

    #[test]
    fn default_local_queue_is_applied_only_in_managed_namespaces() {
        let mut job = json!({"kind": "Job", "metadata": {"name": "j"}, "spec": {"suspend": false}});
        default_job(&mut job, managed_ns(true), Gates::default());
        assert_eq!(job["metadata"]["labels"][l::QUEUE_NAME_LABEL], "default");
        assert_eq!(job["spec"]["suspend"], true);
        let mut job = json!({"kind": "Job", "metadata": {"name": "j"}, "spec": {}});
        let ctx = JobContext {
            namespace_managed: false,
            ..managed_ns(true)
        };
        default_job(&mut job, ctx, Gates::default());
        assert!(job["metadata"].get("labels").is_none());
    }

    #[test]
    fn job_owned_by_an_integrated_kind_is_left_alone() {
        let mut job = json!({"kind": "Job", "metadata": {"name": "j", "labels": {l::QUEUE_NAME_LABEL: "q"},
            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": true}]},
            "spec": {}});
        default_job(&mut job, managed_ns(false), Gates::default());
        assert!(job["spec"].get("suspend").is_none());
        // With the JobSet integration off, Kueue's Job webhook treats it as any Job with a queue name.
        let jobs_only = Integrations::new(["batch/job"], []);
        let ctx = JobContext {
            integrations: &jobs_only,
            ..managed_ns(false)
        };
        default_job(&mut job, ctx, Gates::default());
        assert_eq!(job["spec"]["suspend"], true);
    }

    #[test]
    fn elastic_job_pods_are_gated() {
        let mut job = json!({"kind": "Job", "metadata": {"name": "j", "annotations": {l::ELASTIC_JOB_ANNOTATION: "true"}},
            "spec": {"template": {"spec": {"containers": []}}}});
        default_job(&mut job, managed_ns(false), Gates::default());
        assert_eq!(
            job["spec"]["template"]["spec"]["schedulingGates"],
            json!([{"name": l::ELASTIC_JOB_SCHEDULING_GATE}])
        );
    }

    #[test]
    fn pod_in_group_is_gated_and_labelled() {
        let mut pod = json!({"kind": "Pod", "metadata": {"name": "p", "labels": {l::QUEUE_NAME_LABEL: "q", l::POD_GROUP_NAME_LABEL: "g"}},
            "spec": {"containers": []}});
        default_pod(&mut pod, managed_ns(false), Gates::default());
        assert_eq!(pod["metadata"]["labels"][l::MANAGED_LABEL], "true");
        assert_eq!(pod["metadata"]["finalizers"], json!([l::MANAGED_FINALIZER]));
        assert_eq!(
            pod["spec"]["schedulingGates"],
            json!([{"name": l::ADMISSION_SCHEDULING_GATE}, {"name": l::TOPOLOGY_SCHEDULING_GATE}])
        );
    }

    #[test]
    fn malformed_documents_do_not_panic() {
        for mut doc in [
            json!(null),
            json!({"metadata": 3, "spec": "x"}),
            json!([1, 2]),
        ] {
            default_job(&mut doc, managed_ns(true), Gates::default());
            default_pod(&mut doc, managed_ns(true), Gates::default());
            default_kueue_object(&mut doc, Gates::default());
        }
    }
}
