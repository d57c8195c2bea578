//! The rules Kueue's Ray webhooks enforce on a RayCluster and a RayJob: for an object Kueue manages, no in-tree
//! autoscaling (Sluice has no elastic workload slices), at most 18 pod sets, no worker group named `head`, and
//! for a RayJob a cluster of its own that is deleted once the job ends; for every object, the job-framework
//! labels on its metadata and the topology annotations of the head and each worker group.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::errors::{Errors, Path, ValidationErrors};
use super::job::{
    GroupMember, meta_create_rules, meta_update_rules, name, pod_set_group_rules,
    template_topology_rules,
};
use crate::kueue::labels as l;
use crate::ray::{HEAD_POD_SET, RayCluster, RayClusterSpec, RayJob, RayService};

/// How Kueue names a RayCluster in its errors.
const CLUSTER_KIND: &str = "RayCluster.ray.io";
/// How Kueue names a RayJob in its errors.
const JOB_KIND: &str = "RayJob.ray.io";
/// How Kueue names a RayService in its errors.
const SERVICE_KIND: &str = "RayService.ray.io";
/// Autoscaling refused in a managed RayJob's or RayService's cluster (Kueue's message, and why).
const JOB_AUTOSCALING: &str = "a kueue managed job should only use autoscaling when workload slicing is enabled (Sluice does not run elastic \
     jobs yet)";
/// Most pod sets a Workload may have (Kueue's `MaxPodSets`).
pub const MAX_POD_SETS: usize = 18;

/// What the create and update rules of a Ray kind need.
trait RayKind {
    /// How Kueue names the kind in its errors.
    const KIND: &'static str;
    fn meta(&self) -> &ObjectMeta;
    fn suspended(&self) -> bool;
    fn create_rules(&self, errs: &mut Errors, manage_without_queue_name: bool);
}

/// `RayKind` for a Ray kind: Kueue's name for it and its create rules.
macro_rules! ray_kind {
    ($ty:ty, $kind:expr, $rules:ident) => {
        impl RayKind for $ty {
            const KIND: &'static str = $kind;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn suspended(&self) -> bool {
                self.is_suspended()
            }
            fn create_rules(&self, errs: &mut Errors, manage_without_queue_name: bool) {
                $rules(errs, self, manage_without_queue_name);
            }
        }
    };
}

ray_kind!(RayCluster, CLUSTER_KIND, cluster_create_rules);
ray_kind!(RayJob, JOB_KIND, job_create_rules);
ray_kind!(RayService, SERVICE_KIND, service_create_rules);

fn validate_create<T: RayKind>(
    obj: &T,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    obj.create_rules(&mut errs, manage_without_queue_name);
    errs.finish(T::KIND, name(obj.meta()))
}

/// As in Kueue (ValidateRayAndSparkJobUpdates on), an update is checked only when the object is managed or was
/// queued before.
fn validate_update<T: RayKind>(
    old: &T,
    new: &T,
    default_queue_exists: bool,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    if !checked_on_update(old.meta(), new.meta(), manage_without_queue_name) {
        return Ok(());
    }
    let mut errs = Errors::default();
    meta_update_rules(
        &mut errs,
        old.meta(),
        new.meta(),
        old.suspended(),
        new.suspended(),
        default_queue_exists,
    );
    new.create_rules(&mut errs, manage_without_queue_name);
    errs.finish(T::KIND, name(new.meta()))
}

/// Validates a RayCluster on creation; `manage_without_queue_name` is Kueue's `manageJobsWithoutQueueName`.
pub fn validate_raycluster(
    cluster: &RayCluster,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    validate_create(cluster, manage_without_queue_name)
}

/// Validates an update of a RayCluster; `default_queue_exists` says whether its namespace has a LocalQueue named
/// `default`. Checked only while the cluster is managed or was queued before.
pub fn validate_raycluster_update(
    old: &RayCluster,
    new: &RayCluster,
    default_queue_exists: bool,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    validate_update(old, new, default_queue_exists, manage_without_queue_name)
}

/// Validates a RayJob on creation.
pub fn validate_rayjob(
    job: &RayJob,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    validate_create(job, manage_without_queue_name)
}

/// Validates an update of a RayJob (checked only while managed or queued before).
pub fn validate_rayjob_update(
    old: &RayJob,
    new: &RayJob,
    default_queue_exists: bool,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    validate_update(old, new, default_queue_exists, manage_without_queue_name)
}

/// Validates a RayService on creation.
pub fn validate_rayservice(
    service: &RayService,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    validate_create(service, manage_without_queue_name)
}

/// Validates an update of a RayService (checked only while managed or queued before).
pub fn validate_rayservice_update(
    old: &RayService,
    new: &RayService,
    default_queue_exists: bool,
    manage_without_queue_name: bool,
) -> Result<(), ValidationErrors> {
    validate_update(old, new, default_queue_exists, manage_without_queue_name)
}

fn queue_name(meta: &ObjectMeta) -> &str {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(l::QUEUE_NAME_LABEL))
        .map_or("", String::as_str)
}

/// Kueue's `ShouldValidateRayOrSparkJobOnUpdate` with ValidateRayAndSparkJobUpdates on.
fn checked_on_update(old: &ObjectMeta, new: &ObjectMeta, manage_without_queue_name: bool) -> bool {
    manage_without_queue_name || !queue_name(new).is_empty() || !queue_name(old).is_empty()
}

fn cluster_create_rules(errs: &mut Errors, cluster: &RayCluster, manage_without_queue_name: bool) {
    let spec_path = Path::new("spec");
    let default_spec = RayClusterSpec::default();
    let spec = cluster.spec.as_ref().unwrap_or(&default_spec);
    if manage_without_queue_name || !queue_name(&cluster.metadata).is_empty() {
        if spec.enable_in_tree_autoscaling == Some(true) {
            errs.invalid(
                &spec_path.child("enableInTreeAutoscaling"),
                "true",
                format!(
                    "a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the \
                     ElasticJobsViaWorkloadSlices feature gate and set the \"{}\": \"true\" annotation \
                     (Sluice does not run elastic jobs yet)",
                    l::ELASTIC_JOB_ANNOTATION
                ),
            );
        }
        managed_cluster_rules(errs, spec, &spec_path);
    }
    meta_create_rules(errs, &cluster.metadata);
    topology_rules(errs, spec, &spec_path);
}

fn job_create_rules(errs: &mut Errors, job: &RayJob, manage_without_queue_name: bool) {
    let spec_path = Path::new("spec");
    if manage_without_queue_name || !queue_name(&job.metadata).is_empty() {
        let spec = job.spec.as_ref();
        let selector = spec.map(|s| &s.cluster_selector).filter(|s| !s.is_empty());
        match (selector, spec.and_then(|s| s.ray_cluster_spec.as_ref())) {
            (Some(selector), Some(_)) => {
                let rendered = serde_json::to_string(selector).unwrap_or_default();
                errs.invalid(
                    &spec_path.child("clusterSelector"),
                    rendered,
                    "a kueue managed job should not use an existing cluster",
                );
                return;
            }
            // A job on an existing cluster is not Kueue's.
            (Some(_), None) => return,
            (None, None) => {
                errs.required(
                    &spec_path.child("rayClusterSpec"),
                    "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector",
                );
                return;
            }
            (None, Some(cluster)) => {
                let shutdown = spec
                    .and_then(|s| s.shutdown_after_job_finishes)
                    .unwrap_or(false);
                if !shutdown {
                    errs.invalid(
                        &spec_path.child("shutdownAfterJobFinishes"),
                        "false",
                        "a kueue managed job should delete the cluster after finishing",
                    );
                }
                let cluster_path = spec_path.child("rayClusterSpec");
                if cluster.enable_in_tree_autoscaling == Some(true) {
                    errs.invalid(
                        &cluster_path.child("enableInTreeAutoscaling"),
                        "true",
                        JOB_AUTOSCALING,
                    );
                }
                managed_cluster_rules(errs, cluster, &cluster_path);
            }
        }
    }
    meta_create_rules(errs, &job.metadata);
    if let Some(cluster) = job.spec.as_ref().and_then(|s| s.ray_cluster_spec.as_ref()) {
        topology_rules(errs, cluster, &spec_path.child("rayClusterSpec"));
    }
}

/// A RayService's cluster is `spec.rayClusterConfig`; Kueue's errors name it by its Go field, `spec.rayClusterSpec`.
fn service_create_rules(errs: &mut Errors, service: &RayService, manage_without_queue_name: bool) {
    let cluster_path = Path::new("spec").child("rayClusterSpec");
    let default_cluster = RayClusterSpec::default();
    let cluster = service
        .spec
        .as_ref()
        .and_then(|s| s.ray_cluster_config.as_ref())
        .unwrap_or(&default_cluster);
    if manage_without_queue_name || !queue_name(&service.metadata).is_empty() {
        if cluster.enable_in_tree_autoscaling == Some(true) {
            errs.invalid(
                &cluster_path.child("enableInTreeAutoscaling"),
                "true",
                JOB_AUTOSCALING,
            );
        }
        managed_cluster_rules(errs, cluster, &cluster_path);
    }
    meta_create_rules(errs, &service.metadata);
    topology_rules(errs, cluster, &cluster_path);
}

/// The pod-set limit and the reserved `head` name.
fn managed_cluster_rules(errs: &mut Errors, spec: &RayClusterSpec, path: &Path) {
    let groups = path.child("workerGroupSpecs");
    let count = spec.pod_set_count();
    if count > MAX_POD_SETS {
        errs.too_many(&groups, count, MAX_POD_SETS);
    }
    for (i, g) in spec.worker_group_specs.iter().enumerate() {
        if g.group_name == HEAD_POD_SET {
            errs.forbidden(
                &groups.index(i).child("groupName"),
                format!("\"{HEAD_POD_SET}\" is reserved for the head group"),
            );
        }
    }
}

/// The topology annotations of the head (one pod) and of each worker group (its pod count), and the pod-set
/// groups they form.
fn topology_rules(errs: &mut Errors, spec: &RayClusterSpec, path: &Path) {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    fn annotations(t: &k8s_openapi::api::core::v1::PodTemplateSpec) -> &BTreeMap<String, String> {
        t.metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .unwrap_or(&EMPTY)
    }
    let meta_path = |p: Path| p.child("template").child("metadata").child("annotations");
    let mut members = vec![GroupMember {
        count: 1,
        annotations: annotations(&spec.head_group_spec.template),
        path: meta_path(path.child("headGroupSpec")),
    }];
    for (i, g) in spec.worker_group_specs.iter().enumerate() {
        members.push(GroupMember {
            count: g.pod_count(),
            annotations: annotations(&g.template),
            path: meta_path(path.child("workerGroupSpecs").index(i)),
        });
    }
    for m in &members {
        template_topology_rules(errs, m.annotations, &m.path, m.count);
    }
    pod_set_group_rules(errs, &members);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(labels: serde_json::Value, spec: serde_json::Value) -> RayJob {
        serde_json::from_value(json!({"metadata": {"name": "train", "namespace": "ml", "labels": labels}, "spec": spec}))
            .expect("rayjob")
    }

    fn cluster_spec(worker_annotations: serde_json::Value) -> serde_json::Value {
        json!({
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2,
                "template": {"metadata": {"annotations": worker_annotations}, "spec": {"containers": []}}}]
        })
    }

    #[test]
    fn a_managed_rayjob_needs_its_own_cluster_deleted_after_the_job() {
        let q = json!({l::QUEUE_NAME_LABEL: "q"});
        let e = validate_rayjob(&job(q.clone(), json!({})), false).expect_err("no cluster spec");
        assert!(
            e.has(
                "spec.rayClusterSpec",
                "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"
            ),
            "{e}"
        );
        let e = validate_rayjob(
            &job(
                q.clone(),
                json!({"rayClusterSpec": cluster_spec(json!({}))}),
            ),
            false,
        )
        .expect_err("cluster kept");
        assert!(
            e.has(
                "spec.shutdownAfterJobFinishes",
                "a kueue managed job should delete the cluster after finishing"
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("RayJob.ray.io \"train\" is invalid"),
            "{e}"
        );
        let e = validate_rayjob(
            &job(
                q.clone(),
                json!({"clusterSelector": {"ray.io/cluster": "shared"}, "rayClusterSpec": cluster_spec(json!({}))}),
            ),
            false,
        )
        .expect_err("both");
        assert!(
            e.has(
                "spec.clusterSelector",
                "a kueue managed job should not use an existing cluster"
            ),
            "{e}"
        );
        // An existing cluster's job is not managed; nor is an unqueued job unless all jobs are.
        assert!(
            validate_rayjob(
                &job(q.clone(), json!({"clusterSelector": {"a": "b"}})),
                false
            )
            .is_ok()
        );
        assert!(validate_rayjob(&job(json!({}), json!({})), false).is_ok());
        assert!(validate_rayjob(&job(json!({}), json!({})), true).is_err());
        let ok =
            json!({"shutdownAfterJobFinishes": true, "rayClusterSpec": cluster_spec(json!({}))});
        assert!(validate_rayjob(&job(q, ok), false).is_ok());
    }

    #[test]
    fn autoscaling_the_head_name_and_topology_are_checked_per_group() {
        let q = json!({l::QUEUE_NAME_LABEL: "q"});
        let mut spec = cluster_spec(json!({l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                                          l::PODSET_SLICE_SIZE_ANNOTATION: "3"}));
        spec["enableInTreeAutoscaling"] = json!(true);
        spec["workerGroupSpecs"][0]["groupName"] = json!("head");
        let cluster: RayCluster = serde_json::from_value(
            json!({"metadata": {"name": "serve", "labels": q}, "spec": spec}),
        )
        .unwrap();
        let e = validate_raycluster(&cluster, false).expect_err("three problems");
        assert!(
            e.to_string()
                .starts_with("RayCluster.ray.io \"serve\" is invalid"),
            "{e}"
        );
        assert_eq!(e.at("spec.enableInTreeAutoscaling").len(), 1, "{e}");
        assert!(
            e.has(
                "spec.workerGroupSpecs[0].groupName",
                "\"head\" is reserved for the head group"
            ),
            "{e}"
        );
        let field = format!(
            "spec.workerGroupSpecs[0].template.metadata.annotations[{}]",
            l::PODSET_SLICE_SIZE_ANNOTATION
        );
        assert!(
            e.has(&field, "must not be greater than pod set count 2"),
            "{e}"
        );
        // An unmanaged cluster is still checked for its topology annotations, not for autoscaling.
        let mut unmanaged = cluster.clone();
        unmanaged.metadata.labels = None;
        let e = validate_raycluster(&unmanaged, false).expect_err("topology");
        assert!(e.at("spec.enableInTreeAutoscaling").is_empty(), "{e}");
        assert!(
            e.has(&field, "must not be greater than pod set count 2"),
            "{e}"
        );
        // An update of a cluster that never had a queue is not checked.
        assert!(validate_raycluster_update(&unmanaged, &unmanaged, false, false).is_ok());
    }

    #[test]
    fn the_head_and_a_worker_group_may_form_a_pod_set_group() {
        let g = l::PODSET_GROUP_NAME_ANNOTATION;
        let mut spec =
            cluster_spec(json!({l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack", g: "serve"}));
        spec["headGroupSpec"]["template"]["metadata"] =
            json!({"annotations": {l::PODSET_REQUIRED_TOPOLOGY_ANNOTATION: "rack", g: "serve"}});
        let cluster = |spec: serde_json::Value| -> RayCluster {
            serde_json::from_value(json!({"metadata": {"name": "serve"}, "spec": spec})).unwrap()
        };
        assert!(validate_raycluster(&cluster(spec.clone()), false).is_ok());
        // Without the head in it, the worker group is a group of one.
        spec["headGroupSpec"]["template"]["metadata"] = json!({});
        let e = validate_raycluster(&cluster(spec), false).expect_err("a group of one");
        assert!(
            e.has(
                &format!("spec.workerGroupSpecs[0].template.metadata.annotations[{g}]"),
                "can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_rayservice_is_checked_as_its_cluster_under_kueues_field_path() {
        let q = json!({l::QUEUE_NAME_LABEL: "q"});
        let mut spec = cluster_spec(json!({l::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
                                          l::PODSET_SLICE_SIZE_ANNOTATION: "3"}));
        spec["enableInTreeAutoscaling"] = json!(true);
        spec["workerGroupSpecs"][0]["groupName"] = json!("head");
        let service = |labels: &serde_json::Value| -> RayService {
            serde_json::from_value(json!({"metadata": {"name": "llm", "labels": labels},
                "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": spec}}))
            .unwrap()
        };
        let managed = service(&q);
        let e = validate_rayservice(&managed, false).expect_err("three problems");
        assert!(
            e.to_string()
                .starts_with("RayService.ray.io \"llm\" is invalid"),
            "{e}"
        );
        // Kueue names the cluster by its Go field, rayClusterSpec, not the JSON one.
        assert!(
            e.has(
                "spec.rayClusterSpec.enableInTreeAutoscaling",
                JOB_AUTOSCALING
            ),
            "{e}"
        );
        assert!(
            e.has(
                "spec.rayClusterSpec.workerGroupSpecs[0].groupName",
                "\"head\" is reserved for the head group"
            ),
            "{e}"
        );
        let field = format!(
            "spec.rayClusterSpec.workerGroupSpecs[0].template.metadata.annotations[{}]",
            l::PODSET_SLICE_SIZE_ANNOTATION
        );
        assert!(
            e.has(&field, "must not be greater than pod set count 2"),
            "{e}"
        );
        // Unmanaged: only the topology annotations; its update is not checked.
        let unmanaged = service(&json!({}));
        let e = validate_rayservice(&unmanaged, false).expect_err("topology");
        assert!(
            e.at("spec.rayClusterSpec.enableInTreeAutoscaling")
                .is_empty(),
            "{e}"
        );
        assert!(validate_rayservice_update(&unmanaged, &unmanaged, false, false).is_ok());
        // A managed service's update is checked, and its queue may not change while it runs.
        let mut running = managed.clone();
        running.spec.as_mut().unwrap().ray_cluster_config =
            Some(serde_json::from_value(cluster_spec(json!({}))).unwrap());
        let mut moved = running.clone();
        moved.metadata.labels =
            Some([(l::QUEUE_NAME_LABEL.to_string(), "other".to_string())].into());
        let e =
            validate_rayservice_update(&running, &moved, false, false).expect_err("queue changed");
        assert!(
            !e.at(&format!("metadata.labels[{}]", l::QUEUE_NAME_LABEL))
                .is_empty(),
            "{e}"
        );
    }

    #[test]
    fn too_many_worker_groups_are_refused() {
        let groups: Vec<serde_json::Value> = (0..18)
            .map(
                |i| json!({"groupName": format!("g{i}"), "template": {"spec": {"containers": []}}}),
            )
            .collect();
        let cluster: RayCluster = serde_json::from_value(json!({
            "metadata": {"name": "big", "labels": {l::QUEUE_NAME_LABEL: "q"}},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": []}}}, "workerGroupSpecs": groups}
        }))
        .unwrap();
        let e = validate_raycluster(&cluster, false).expect_err("19 pod sets");
        assert!(
            e.has("spec.workerGroupSpecs", "must have at most 18 items"),
            "{e}"
        );
    }
}
