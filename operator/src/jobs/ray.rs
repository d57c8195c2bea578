//! The KubeRay integrations (`ray.io/v1`), as Kueue's: a RayCluster is one pod set for its head (1 pod) and one per
//! worker group (named after the group in lower case, replicas times hosts per replica); a RayJob is the cluster
//! it creates, plus a `submitter` pod set last when KubeRay submits through a Kubernetes Job; a RayService is the
//! cluster at its `spec.rayClusterConfig`. They wait with their cluster's `suspend` (a RayJob with `spec.suspend`);
//! none supports partial admission. The head pod set carries what KubeRay adds to the head pod
//! beyond its template (the autoscaler sidecar, the SidecarMode submitter, GCS fault tolerance's Redis cleanup), so
//! the quota covers what actually runs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_sdk::kueue::v1beta2::{PodSet, PodSetTopologyRequest, Workload};
use sluice_sdk::ray::{self, RayCluster, RayClusterSpec, RayJob, RayService};

use super::topology_request::template_topology_request;
use super::{
    JobError, JobIntegration, Owner, PodSetInfo, PriorityClasses, SuspendableJob, owned_workload,
};

/// A kind that is one Ray cluster: the same integration for each ([`ClusterObject`] says where its cluster is).
pub struct ClusterJob<T>(std::marker::PhantomData<T>);

/// The RayCluster kind.
pub type RayClusterJob = ClusterJob<RayCluster>;

/// The RayJob kind.
pub struct RayJobJob;

/// The RayService kind: the cluster at `spec.rayClusterConfig`, which serves until deleted.
pub type RayServiceJob = ClusterJob<RayService>;

/// A field at fault, relative to the object, and what is wrong.
type FieldError = (String, String);

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// KubeRay's resources for a container it adds with `requests` and `limits` given.
fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(quantities(requests)),
        limits: Some(quantities(limits)),
        ..Default::default()
    }
}

/// KubeRay's default resources of the submitter container.
fn submitter_resources() -> ResourceRequirements {
    resources(
        &[("cpu", "500m"), ("memory", "200Mi")],
        &[("cpu", "1"), ("memory", "1Gi")],
    )
}

/// The topology request of a pod template, None when its annotations ask for none (Ray pods have no index label).
fn topology(
    template: &PodTemplateSpec,
    path: &str,
) -> Result<Option<PodSetTopologyRequest>, FieldError> {
    let empty = BTreeMap::new();
    let ann = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .unwrap_or(&empty);
    let req = template_topology_request(ann)
        .map_err(|(key, m)| (format!("{path}.metadata.annotations[{key}]"), m))?;
    Ok((req != PodSetTopologyRequest::default()).then_some(req))
}

/// Raises the Ray container's requests to what KubeRay's Redis cleanup Job requests (it runs beside the head).
fn keep_max_requests(template: &mut PodTemplateSpec, path: &str) -> Result<(), FieldError> {
    let container = template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
        .ok_or_else(|| {
            (
                format!("{path}.spec.containers"),
                "cannot account for Redis cleanup resources: head pod template must include the Ray container"
                    .to_string(),
            )
        })?;
    let requests = container
        .resources
        .get_or_insert_with(Default::default)
        .requests
        .get_or_insert_with(Default::default);
    for (resource, floor) in [("cpu", "200m"), ("memory", "256Mi")] {
        let floor = Quantity(floor.to_string());
        let below = requests.get(resource).is_none_or(|q| {
            sluice_sdk::quantity::nano_value(q) < sluice_sdk::quantity::nano_value(&floor)
        });
        if below {
            requests.insert(resource.to_string(), floor);
        }
    }
    Ok(())
}

/// Where the cluster's pod sets' templates live: the head, then each worker group.
fn cluster_template_path(prefix: &str, index: usize) -> String {
    match index {
        0 => format!("{prefix}headGroupSpec.template"),
        i => format!("{prefix}workerGroupSpecs[{}].template", i - 1),
    }
}

/// Kueue's cluster pod sets (`BuildPodSets`); `prefix` is the spec's path (`spec.` or `spec.rayClusterSpec.`).
fn cluster_pod_sets(
    spec: &RayClusterSpec,
    annotations: Option<&BTreeMap<String, String>>,
    prefix: &str,
) -> Result<Vec<PodSet>, FieldError> {
    let head_path = cluster_template_path(prefix, 0);
    let mut head = PodSet {
        name: ray::HEAD_POD_SET.to_string(),
        template: spec.head_group_spec.template.clone(),
        count: 1,
        min_count: None,
        topology_request: topology(&spec.head_group_spec.template, &head_path)?,
    };
    if spec.gcs_fault_tolerance(annotations) {
        keep_max_requests(&mut head.template, &head_path)?;
    }
    if spec.enable_in_tree_autoscaling == Some(true) {
        let resources = spec
            .autoscaler_options
            .as_ref()
            .and_then(|o| o.resources.clone())
            .unwrap_or_else(|| {
                let r = [("cpu", "500m"), ("memory", "512Mi")];
                resources(&r, &r)
            });
        head.template
            .spec
            .get_or_insert_with(Default::default)
            .containers
            .push(Container {
                name: ray::AUTOSCALER_CONTAINER.to_string(),
                resources: Some(resources),
                ..Default::default()
            });
    }
    let mut sets = vec![head];
    for (i, group) in spec.worker_group_specs.iter().enumerate() {
        sets.push(PodSet {
            name: group.group_name.to_lowercase(),
            template: group.template.clone(),
            count: group.pod_count(),
            min_count: None,
            topology_request: topology(&group.template, &cluster_template_path(prefix, i + 1))?,
        });
    }
    Ok(sets)
}

/// The cluster's templates in pod-set order, mutably.
fn cluster_templates_mut(spec: &mut RayClusterSpec) -> Vec<&mut PodTemplateSpec> {
    std::iter::once(&mut spec.head_group_spec.template)
        .chain(spec.worker_group_specs.iter_mut().map(|g| &mut g.template))
        .collect()
}

/// Merges each pod set's info into the cluster's templates, in pod-set order.
fn run_cluster(
    spec: &mut RayClusterSpec,
    infos: &[PodSetInfo],
    prefix: &str,
) -> Result<(), FieldError> {
    for (i, (template, info)) in cluster_templates_mut(spec)
        .into_iter()
        .zip(infos)
        .enumerate()
    {
        info.merge_into(template)
            .map_err(|m| (cluster_template_path(prefix, i), m))?;
    }
    Ok(())
}

/// The first pod-set template that names a pod PriorityClass, with the field that names it.
fn first_pod_class(
    pod_sets: &[PodSet],
    path: impl Fn(usize) -> String,
) -> Option<(String, String)> {
    pod_sets.iter().enumerate().find_map(|(i, ps)| {
        let name = ps.template.spec.as_ref()?.priority_class_name.as_deref()?;
        (!name.is_empty()).then(|| {
            (
                name.to_string(),
                format!("{}.spec.priorityClassName", path(i)),
            )
        })
    })
}

fn job_error(kind: &str, meta: &ObjectMeta, (field, message): FieldError) -> JobError {
    JobError {
        kind: kind.to_string(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        field,
        message,
    }
}

fn wrong_count(expected: usize, got: usize) -> FieldError {
    (
        "status.admission.podSetAssignments".to_string(),
        format!("expected {expected} pod sets, got {}", got),
    )
}

/// Starts a cluster: each template given its pod set's info, then unsuspended; nothing changes on an error.
fn start_cluster(
    spec: &mut RayClusterSpec,
    infos: &[PodSetInfo],
    prefix: &str,
) -> Result<(), FieldError> {
    let mut started = spec.clone();
    let n = started.pod_set_count();
    if infos.len() != n {
        return Err(wrong_count(n, infos.len()));
    }
    run_cluster(&mut started, infos, prefix)?;
    started.suspend = Some(false);
    *spec = started;
    Ok(())
}

/// Puts back each template as the Workload recorded it, when the pod sets still match (as Kueue, else nothing).
fn restore_cluster(spec: &mut RayClusterSpec, infos: &[PodSetInfo]) {
    if infos.len() != spec.pod_set_count() {
        return;
    }
    for (template, info) in cluster_templates_mut(spec).into_iter().zip(infos) {
        info.restore_into(template);
    }
}

/// A kind that is exactly one Ray cluster (RayCluster, RayService): where its cluster is, and when KubeRay says it
/// runs.
pub trait ClusterObject: Sized {
    /// Kubernetes kind.
    const KIND: &'static str;
    /// Where its cluster spec is, as the prefix of field paths ("spec.").
    const CLUSTER_PATH: &'static str;
    /// Its metadata.
    fn meta(&self) -> &ObjectMeta;
    /// Its cluster spec, if set.
    fn cluster(&self) -> Option<&RayClusterSpec>;
    /// Its cluster spec, created empty when absent.
    fn cluster_mut(&mut self) -> &mut RayClusterSpec;
    /// Kueue's IsActive and PodsReady: a cluster once its state is `ready`, a service once it is `Ready`.
    fn running(&self) -> bool;
}

impl ClusterObject for RayCluster {
    const KIND: &'static str = ray::RAY_CLUSTER_KIND;
    const CLUSTER_PATH: &'static str = "spec.";
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn cluster(&self) -> Option<&RayClusterSpec> {
        self.spec.as_ref()
    }
    fn cluster_mut(&mut self) -> &mut RayClusterSpec {
        self.spec.get_or_insert_with(Default::default)
    }
    fn running(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.state == ray::STATE_READY)
    }
}

impl ClusterObject for RayService {
    const KIND: &'static str = ray::RAY_SERVICE_KIND;
    const CLUSTER_PATH: &'static str = "spec.rayClusterConfig.";
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn cluster(&self) -> Option<&RayClusterSpec> {
        self.spec.as_ref()?.ray_cluster_config.as_ref()
    }
    fn cluster_mut(&mut self) -> &mut RayClusterSpec {
        self.spec
            .get_or_insert_with(Default::default)
            .ray_cluster_config
            .get_or_insert_with(Default::default)
    }
    fn running(&self) -> bool {
        self.is_ready()
    }
}

impl<T: ClusterObject> ClusterJob<T> {
    /// The Workload Kueue builds for the object: its cluster's pod sets.
    pub fn workload(obj: &T, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        let meta = obj.meta();
        let error = |e| job_error(T::KIND, meta, e);
        let prefix = T::CLUSTER_PATH;
        let spec = obj
            .cluster()
            .ok_or_else(|| error((prefix.trim_end_matches('.').into(), "required".into())))?;
        let pod_sets = cluster_pod_sets(spec, meta.annotations.as_ref(), prefix).map_err(error)?;
        let pod_class = first_pod_class(&pod_sets, |i| cluster_template_path(prefix, i));
        owned_workload(Owner::of::<Self>(meta, pod_class), pod_sets, priorities)
    }
}

impl<T: ClusterObject> JobIntegration for ClusterJob<T> {
    type Job = T;
    const KIND: &'static str = T::KIND;
    const GROUP: &'static str = ray::GROUP;
    const API_VERSION: &'static str = ray::API_VERSION;

    fn queue_name(obj: &T) -> Option<String> {
        obj.meta()
            .labels
            .as_ref()?
            .get(sluice_sdk::kueue::labels::QUEUE_NAME_LABEL)
            .cloned()
    }

    fn prebuilt_workload(obj: &T) -> Option<String> {
        super::prebuilt_workload_name(obj.meta())
    }

    fn workload_name(obj: &T) -> Option<String> {
        if let Some(prebuilt) = Self::prebuilt_workload(obj) {
            return Some(prebuilt);
        }
        let meta = obj.meta();
        Some(super::workload_name(
            Self::KIND,
            Self::GROUP,
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref()?,
        ))
    }

    fn compose(obj: &T, priorities: &PriorityClasses) -> Result<Option<Workload>, JobError> {
        Self::workload(obj, priorities).map(Some)
    }

    fn copied_labels(
        obj: &T,
        keys: &[String],
    ) -> Result<std::collections::BTreeMap<String, String>, JobError> {
        Ok(super::copy_labels(obj.meta(), keys))
    }

    fn is_suspended(obj: &T) -> bool {
        obj.cluster().and_then(|c| c.suspend).unwrap_or(false)
    }

    fn is_active(obj: &T) -> bool {
        obj.running()
    }

    /// A cluster or a service serves until deleted: it never finishes.
    fn finished(_: &T) -> Result<Option<(bool, String)>, JobError> {
        Ok(None)
    }

    fn pods_ready(obj: &T, _: &Workload) -> bool {
        obj.running()
    }
}

impl<T: ClusterObject> SuspendableJob for ClusterJob<T> {
    fn suspend(obj: &mut T) {
        obj.cluster_mut().suspend = Some(true);
    }

    fn run_with(obj: &mut T, infos: &[PodSetInfo]) -> Result<(), JobError> {
        let mut cluster = obj.cluster_mut().clone();
        start_cluster(&mut cluster, infos, T::CLUSTER_PATH)
            .map_err(|e| job_error(T::KIND, obj.meta(), e))?;
        *obj.cluster_mut() = cluster;
        Ok(())
    }

    fn restore(obj: &mut T, infos: &[PodSetInfo]) {
        if obj.cluster().is_some() {
            restore_cluster(obj.cluster_mut(), infos);
        }
    }
}

const JOB_CLUSTER: &str = "spec.rayClusterSpec.";
const SUBMITTER_TEMPLATE: &str = "spec.submitterPodTemplate";

impl RayJobJob {
    fn submitter_job(job: &RayJob) -> bool {
        job.submission_mode() == ray::K8S_JOB_MODE
    }

    /// Pod sets of the job: its cluster's, then the submitter's when KubeRay submits through a Job.
    fn pod_set_count(job: &RayJob, spec: &RayClusterSpec) -> usize {
        spec.pod_set_count() + usize::from(Self::submitter_job(job))
    }

    /// The submitter Job's template: the job's own, else KubeRay's default (the head's image, its default
    /// resources, never restarted).
    fn submitter_template(
        job: &RayJob,
        cluster: &RayClusterSpec,
    ) -> Result<PodTemplateSpec, FieldError> {
        if let Some(t) = job
            .spec
            .as_ref()
            .and_then(|s| s.submitter_pod_template.clone())
        {
            return Ok(t);
        }
        let image = cluster
            .head_group_spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .map(|c| c.image.clone())
            .ok_or_else(|| {
                (
                    format!("{JOB_CLUSTER}headGroupSpec.template.spec.containers"),
                    "must have the Ray container, whose image the default submitter uses"
                        .to_string(),
                )
            })?;
        Ok(PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: ray::SUBMITTER_CONTAINER.to_string(),
                    image,
                    resources: Some(submitter_resources()),
                    ..Default::default()
                }],
                restart_policy: Some("Never".to_string()),
                ..Default::default()
            }),
        })
    }

    fn cluster_spec(job: &RayJob) -> Result<&RayClusterSpec, FieldError> {
        job.spec
            .as_ref()
            .and_then(|s| s.ray_cluster_spec.as_ref())
            .ok_or_else(|| {
                (
                    "spec.rayClusterSpec".to_string(),
                    "required for a RayJob that Kueue manages".to_string(),
                )
            })
    }

    fn template_path(job: &RayJob, cluster: &RayClusterSpec, index: usize) -> String {
        if Self::submitter_job(job) && index == cluster.pod_set_count() {
            SUBMITTER_TEMPLATE.to_string()
        } else {
            cluster_template_path(JOB_CLUSTER, index)
        }
    }

    fn pod_sets(job: &RayJob, cluster: &RayClusterSpec) -> Result<Vec<PodSet>, FieldError> {
        let mut sets = cluster_pod_sets(cluster, job.metadata.annotations.as_ref(), JOB_CLUSTER)?;
        if Self::submitter_job(job) {
            let template = Self::submitter_template(job, cluster)?;
            sets.push(PodSet {
                name: ray::SUBMITTER_POD_SET.to_string(),
                topology_request: topology(&template, SUBMITTER_TEMPLATE)?,
                template,
                count: 1,
                min_count: None,
            });
        }
        // In SidecarMode KubeRay puts the submitter into the head pod, always with its default resources.
        if job.submission_mode() == ray::SIDECAR_MODE {
            sets[0]
                .template
                .spec
                .get_or_insert_with(Default::default)
                .containers
                .push(Container {
                    name: ray::SUBMITTER_CONTAINER.to_string(),
                    resources: Some(submitter_resources()),
                    ..Default::default()
                });
        }
        Ok(sets)
    }

    /// The Workload Kueue builds for the RayJob.
    pub fn workload(job: &RayJob, priorities: &PriorityClasses) -> Result<Workload, JobError> {
        let error = |e| job_error(Self::KIND, &job.metadata, e);
        let cluster = Self::cluster_spec(job).map_err(error)?;
        let pod_sets = Self::pod_sets(job, cluster).map_err(error)?;
        let pod_class = first_pod_class(&pod_sets, |i| Self::template_path(job, cluster, i));
        owned_workload(
            Owner::of::<Self>(&job.metadata, pod_class),
            pod_sets,
            priorities,
        )
    }
}

impl JobIntegration for RayJobJob {
    type Job = RayJob;
    const KIND: &'static str = ray::RAY_JOB_KIND;
    const GROUP: &'static str = ray::GROUP;
    const API_VERSION: &'static str = ray::API_VERSION;

    object_job_identity!(RayJob);

    fn is_suspended(job: &RayJob) -> bool {
        job.is_suspended()
    }

    /// Active unless KubeRay reports it suspended or has not seen it yet.
    fn is_active(job: &RayJob) -> bool {
        let status = job
            .status
            .as_ref()
            .map_or(ray::DEPLOYMENT_NEW, |s| s.job_deployment_status.as_str());
        status != ray::DEPLOYMENT_SUSPENDED && status != ray::DEPLOYMENT_NEW
    }

    /// Finished once KubeRay's deployment status is `Complete` or `Failed`; a success when Ray's job status is
    /// `SUCCEEDED`.
    fn finished(job: &RayJob) -> Result<Option<(bool, String)>, JobError> {
        Ok(job.status.as_ref().and_then(|s| {
            let done = s.job_deployment_status == ray::DEPLOYMENT_COMPLETE
                || s.job_deployment_status == ray::DEPLOYMENT_FAILED;
            done.then(|| (s.job_status == ray::JOB_SUCCEEDED, s.message.clone()))
        }))
    }

    /// A RayJob KubeRay marked `ValidationFailed` is on hold.
    fn is_on_hold(job: &RayJob) -> bool {
        job.status
            .as_ref()
            .is_some_and(|s| s.job_deployment_status == ray::DEPLOYMENT_VALIDATION_FAILED)
    }

    /// Kueue reads the state of the job's cluster.
    fn pods_ready(job: &RayJob, _: &Workload) -> bool {
        job.status
            .as_ref()
            .and_then(|s| s.ray_cluster_status.as_ref())
            .is_some_and(|c| c.state == ray::STATE_READY)
    }
}

impl SuspendableJob for RayJobJob {
    fn suspend(job: &mut RayJob) {
        job.spec.get_or_insert_with(Default::default).suspend = true;
    }

    /// Unsuspends with the cluster's templates and the submitter's (written out when it was KubeRay's default)
    /// merged with their pod sets' infos.
    fn run_with(job: &mut RayJob, infos: &[PodSetInfo]) -> Result<(), JobError> {
        let error = |e| job_error(Self::KIND, &job.metadata, e);
        let mut spec = job.spec.clone().unwrap_or_default();
        let mut cluster = Self::cluster_spec(job).map_err(error)?.clone();
        let n = Self::pod_set_count(job, &cluster);
        if infos.len() != n {
            return Err(error(wrong_count(n, infos.len())));
        }
        if Self::submitter_job(job) {
            let mut submitter = Self::submitter_template(job, &cluster).map_err(error)?;
            infos[n - 1]
                .merge_into(&mut submitter)
                .map_err(|m| error((SUBMITTER_TEMPLATE.to_string(), m)))?;
            spec.submitter_pod_template = Some(submitter);
        }
        run_cluster(&mut cluster, infos, JOB_CLUSTER).map_err(error)?;
        spec.ray_cluster_spec = Some(cluster);
        spec.suspend = false;
        job.spec = Some(spec);
        Ok(())
    }

    /// Puts back the templates as the Workload recorded them, when the pod sets still match.
    fn restore(job: &mut RayJob, infos: &[PodSetInfo]) {
        let submitter = Self::submitter_job(job);
        let Some(spec) = job.spec.as_mut() else {
            return;
        };
        let Some(cluster) = spec.ray_cluster_spec.as_mut() else {
            return;
        };
        let cluster_sets = cluster.pod_set_count();
        if infos.len() != cluster_sets + usize::from(submitter) {
            return;
        }
        for (template, info) in cluster_templates_mut(cluster).into_iter().zip(infos) {
            info.restore_into(template);
        }
        if submitter && let Some(t) = spec.submitter_pod_template.as_mut() {
            infos[cluster_sets].restore_into(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::workload_name;
    use super::*;
    use sluice_sdk::kueue::labels;
    use sluice_sdk::kueue::v1beta2::{Admission, PodSetAssignment, ResourceFlavor};

    fn rayjob(mode: Option<&str>) -> RayJob {
        let mut j: RayJob = serde_yaml::from_str(
            r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: train
  namespace: ml
  uid: 11111111-2222-3333-4444-555555555555
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  entrypoint: python train.py
  shutdownAfterJobFinishes: true
  rayClusterSpec:
    rayVersion: "2.41.0"
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-head, image: "rayproject/ray:2.41.0", resources: {requests: {cpu: "1"}}}]
    workerGroupSpecs:
    - groupName: GPU-Workers
      replicas: 2
      numOfHosts: 2
      template:
        metadata:
          annotations: {kueue.x-k8s.io/podset-required-topology: example.com/rack}
        spec:
          priorityClassName: high
          containers: [{name: ray-worker, image: x, resources: {requests: {nvidia.com/gpu: "8"}}}]
"#,
        )
        .unwrap();
        j.spec.as_mut().unwrap().submission_mode = mode.map(str::to_string);
        j
    }

    fn priorities() -> PriorityClasses {
        let mut p = PriorityClasses::default();
        let mut pc = k8s_openapi::api::scheduling::v1::PriorityClass::default();
        pc.metadata.name = Some("high".into());
        pc.value = Some(700);
        p.upsert_pod_class(&pc);
        p
    }

    fn names_counts(wl: &Workload) -> Vec<(&str, i32)> {
        wl.spec
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count))
            .collect()
    }

    fn containers(ps: &PodSet) -> Vec<&str> {
        ps.template
            .spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn a_rayjobs_pod_sets_are_head_workers_then_the_submitter_job() {
        let wl = RayJobJob::workload(&rayjob(None), &priorities()).unwrap();
        assert!(
            wl.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("rayjob-train-")
        );
        assert_eq!(
            wl.metadata.name,
            Some(workload_name(
                "RayJob",
                "ray.io",
                "train",
                "11111111-2222-3333-4444-555555555555"
            ))
        );
        assert_eq!(
            names_counts(&wl),
            [("head", 1), ("gpu-workers", 4), ("submitter", 1)]
        );
        assert_eq!(wl.spec.priority, Some(700));
        assert!(wl.spec.pod_sets[0].topology_request.is_none());
        let req = wl.spec.pod_sets[1].topology_request.as_ref().unwrap();
        assert_eq!(req.required.as_deref(), Some("example.com/rack"));
        assert_eq!(req.pod_index_label, None);
        // KubeRay's default submitter: the head's image, 500m/200Mi.
        let submitter = &wl.spec.pod_sets[2]
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0];
        assert_eq!(submitter.image.as_deref(), Some("rayproject/ray:2.41.0"));
        let requests = submitter
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        assert_eq!(requests["cpu"].0, "500m");
        assert_eq!(requests["memory"].0, "200Mi");

        let http = RayJobJob::workload(&rayjob(Some("HTTPMode")), &priorities()).unwrap();
        assert_eq!(names_counts(&http), [("head", 1), ("gpu-workers", 4)]);
        let sidecar = RayJobJob::workload(&rayjob(Some("SidecarMode")), &priorities()).unwrap();
        assert_eq!(names_counts(&sidecar), [("head", 1), ("gpu-workers", 4)]);
        assert_eq!(
            containers(&sidecar.spec.pod_sets[0]),
            ["ray-head", "ray-job-submitter"]
        );

        let e = RayJobJob::workload(&rayjob(None), &PriorityClasses::default()).unwrap_err();
        assert_eq!(
            e.field,
            "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.priorityClassName"
        );
        let mut no_cluster = rayjob(None);
        no_cluster.spec.as_mut().unwrap().ray_cluster_spec = None;
        let e = RayJobJob::workload(&no_cluster, &priorities()).unwrap_err();
        assert_eq!(e.field, "spec.rayClusterSpec");
    }

    #[test]
    fn the_head_carries_the_autoscaler_and_the_redis_cleanup() {
        let mut j = rayjob(Some("HTTPMode"));
        let cluster = j.spec.as_mut().unwrap().ray_cluster_spec.as_mut().unwrap();
        cluster.enable_in_tree_autoscaling = Some(true);
        cluster.gcs_fault_tolerance_options =
            Some(serde_json::json!({"redisAddress": "redis:6379"}));
        let wl = RayJobJob::workload(&j, &priorities()).unwrap();
        let head = &wl.spec.pod_sets[0];
        assert_eq!(containers(head), ["ray-head", "autoscaler"]);
        let spec = head.template.spec.as_ref().unwrap();
        let ray_requests = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        // cpu 1 stays (above 200m); memory, unset, is raised to 256Mi.
        assert_eq!(ray_requests["cpu"].0, "1");
        assert_eq!(ray_requests["memory"].0, "256Mi");
        let autoscaler = spec.containers[1].resources.as_ref().unwrap();
        assert_eq!(autoscaler.requests.as_ref().unwrap()["memory"].0, "512Mi");
    }

    fn admit(wl: &Workload) -> Vec<PodSetInfo> {
        let mut flavor = ResourceFlavor::default();
        flavor.metadata.name = Some("gpu".into());
        flavor.spec.node_labels = BTreeMap::from([("pool".to_string(), "h100".to_string())]);
        let admission = Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: wl
                .spec
                .pod_sets
                .iter()
                .map(|ps| PodSetAssignment {
                    name: ps.name.clone(),
                    flavors: BTreeMap::from([("cpu".to_string(), "gpu".to_string())]),
                    count: Some(ps.count),
                    ..Default::default()
                })
                .collect(),
        };
        super::super::pod_set_infos(&admission, &wl.spec.pod_sets, "lq", "w", |n| {
            (n == "gpu").then_some(&flavor)
        })
        .unwrap()
    }

    fn selector(t: &PodTemplateSpec) -> Option<&BTreeMap<String, String>> {
        t.spec.as_ref().unwrap().node_selector.as_ref()
    }

    #[test]
    fn a_rayjob_runs_with_its_admission_and_is_restored() {
        let original = rayjob(None);
        let wl = RayJobJob::workload(&original, &priorities()).unwrap();
        let infos = admit(&wl);
        let mut j = original.clone();
        RayJobJob::run_with(&mut j, &infos).unwrap();
        assert!(!j.is_suspended());
        let spec = j.spec.as_ref().unwrap();
        let cluster = spec.ray_cluster_spec.as_ref().unwrap();
        assert_eq!(
            selector(&cluster.head_group_spec.template).unwrap()["pool"],
            "h100"
        );
        let worker = &cluster.worker_group_specs[0].template;
        assert_eq!(selector(worker).unwrap()["pool"], "h100");
        let worker_labels = worker.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(worker_labels[labels::PODSET_LABEL], "gpu-workers");
        // The default submitter template is written out with its admission.
        let submitter = spec.submitter_pod_template.as_ref().unwrap();
        assert_eq!(selector(submitter).unwrap()["pool"], "h100");
        assert_eq!(spec.other["entrypoint"], "python train.py");

        RayJobJob::suspend(&mut j);
        let originals: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
            .collect();
        RayJobJob::restore(&mut j, &originals);
        let cluster = j.spec.as_ref().unwrap().ray_cluster_spec.as_ref().unwrap();
        assert!(selector(&cluster.head_group_spec.template).is_none());
        assert!(selector(&cluster.worker_group_specs[0].template).is_none());
        assert!(
            selector(
                j.spec
                    .as_ref()
                    .unwrap()
                    .submitter_pod_template
                    .as_ref()
                    .unwrap()
            )
            .is_none()
        );
        assert!(j.is_suspended());

        let mut k = original.clone();
        assert!(RayJobJob::run_with(&mut k, &infos[..2]).is_err());
        assert_eq!(k, original);
    }

    #[test]
    fn a_rayjob_is_finished_active_and_ready_as_kuberay_reports() {
        let mut j = rayjob(None);
        let wl = RayJobJob::workload(&j, &priorities()).unwrap();
        assert!(!RayJobJob::is_active(&j));
        assert_eq!(RayJobJob::finished(&j).unwrap(), None);
        j.status = serde_json::from_value(serde_json::json!({
            "jobDeploymentStatus": "Running", "rayClusterStatus": {"state": "ready"}
        }))
        .unwrap();
        assert!(RayJobJob::is_active(&j));
        assert!(RayJobJob::pods_ready(&j, &wl));
        j.status = serde_json::from_value(serde_json::json!({
            "jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "entrypoint exited with 1"
        }))
        .unwrap();
        assert_eq!(
            RayJobJob::finished(&j).unwrap(),
            Some((false, "entrypoint exited with 1".into()))
        );
        j.status.as_mut().unwrap().job_deployment_status = "Complete".into();
        j.status.as_mut().unwrap().job_status = "SUCCEEDED".into();
        assert_eq!(RayJobJob::finished(&j).unwrap().map(|f| f.0), Some(true));
    }

    #[test]
    fn a_raycluster_is_head_then_worker_groups_and_never_finishes() {
        let j = rayjob(None);
        let cluster = RayCluster {
            metadata: j.metadata.clone(),
            spec: j.spec.as_ref().unwrap().ray_cluster_spec.clone(),
            status: None,
        };
        let wl = RayClusterJob::workload(&cluster, &priorities()).unwrap();
        assert!(
            wl.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("raycluster-train-")
        );
        assert_eq!(names_counts(&wl), [("head", 1), ("gpu-workers", 4)]);
        let e = RayClusterJob::workload(&cluster, &PriorityClasses::default()).unwrap_err();
        assert_eq!(
            e.field,
            "spec.workerGroupSpecs[0].template.spec.priorityClassName"
        );

        let infos = admit(&wl);
        let mut c = cluster.clone();
        RayClusterJob::suspend(&mut c);
        assert!(c.is_suspended());
        RayClusterJob::run_with(&mut c, &infos).unwrap();
        assert!(!c.is_suspended());
        let spec = c.spec.as_ref().unwrap();
        assert_eq!(
            selector(&spec.worker_group_specs[0].template).unwrap()["pool"],
            "h100"
        );
        assert!(!RayClusterJob::is_active(&c));
        c.status = serde_json::from_value(serde_json::json!({"state": "ready"})).unwrap();
        assert!(RayClusterJob::is_active(&c));
        assert!(RayClusterJob::pods_ready(&c, &wl));
        assert_eq!(RayClusterJob::finished(&c).unwrap(), None);
        let mut refused = cluster.clone();
        assert!(RayClusterJob::run_with(&mut refused, &infos[..1]).is_err());
        assert_eq!(refused, cluster);
    }

    #[test]
    fn a_rayservice_is_its_cluster_suspended_in_the_cluster_and_never_finishes() {
        let j = rayjob(None);
        let svc = RayService {
            metadata: j.metadata.clone(),
            spec: Some(sluice_sdk::ray::RayServiceSpec {
                ray_cluster_config: j.spec.as_ref().unwrap().ray_cluster_spec.clone(),
                other: [("serveConfigV2".to_string(), "applications: []".into())].into(),
            }),
            status: None,
        };
        let wl = RayServiceJob::workload(&svc, &priorities()).unwrap();
        assert_eq!(
            wl.metadata.name.as_deref(),
            Some(
                workload_name(
                    "RayService",
                    "ray.io",
                    "train",
                    j.metadata.uid.as_deref().unwrap()
                )
                .as_str()
            )
        );
        assert!(
            wl.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("rayservice-train-")
        );
        assert_eq!(names_counts(&wl), [("head", 1), ("gpu-workers", 4)]);
        let e = RayServiceJob::workload(&svc, &PriorityClasses::default()).unwrap_err();
        assert_eq!(
            e.field,
            "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.priorityClassName"
        );
        let mut empty = svc.clone();
        empty.spec = None;
        assert_eq!(
            RayServiceJob::workload(&empty, &priorities())
                .unwrap_err()
                .field,
            "spec.rayClusterConfig"
        );

        let infos = admit(&wl);
        let mut s = svc.clone();
        RayServiceJob::suspend(&mut s);
        assert!(s.is_suspended());
        let cluster = |s: &RayService| s.spec.as_ref().unwrap().ray_cluster_config.clone().unwrap();
        assert_eq!(cluster(&s).suspend, Some(true));
        RayServiceJob::run_with(&mut s, &infos).unwrap();
        assert!(!s.is_suspended());
        assert_eq!(
            selector(&cluster(&s).worker_group_specs[0].template).unwrap()["pool"],
            "h100"
        );
        // The service's own fields are kept.
        assert_eq!(
            s.spec.as_ref().unwrap().other["serveConfigV2"],
            "applications: []"
        );
        RayServiceJob::suspend(&mut s);
        // Restored from the templates the Workload recorded.
        let originals: Vec<PodSetInfo> = wl
            .spec
            .pod_sets
            .iter()
            .map(|ps| PodSetInfo::from_template(&ps.name, ps.count, &ps.template))
            .collect();
        RayServiceJob::restore(&mut s, &originals);
        assert!(selector(&cluster(&s).worker_group_specs[0].template).is_none());
        assert!(!RayServiceJob::is_active(&s));
        s.status = serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "RayServiceReady", "message": "",
                            "lastTransitionTime": "2026-12-05T00:00:00Z"}],
            "serviceStatus": "Running"}))
        .unwrap();
        assert!(RayServiceJob::is_active(&s));
        assert!(RayServiceJob::pods_ready(&s, &wl));
        assert_eq!(RayServiceJob::finished(&s).unwrap(), None);
        let mut refused = svc.clone();
        assert!(RayServiceJob::run_with(&mut refused, &infos[..1]).is_err());
        assert_eq!(refused, svc);
    }
}
