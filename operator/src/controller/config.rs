//! The operator's configuration: the subset of Kueue's Configuration it honours, read from `--config`.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use sluice_sdk::kueue::integrations::{self, FRAMEWORKS};

use crate::engine::{EngineConfig, FairSharingConfig, FairSharingStrategy};

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        error: std::io::Error,
    },
    /// A field is malformed.
    #[error("{path}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// What is wrong, naming the field.
        message: String,
    },
}

/// Kueue's requeuingStrategy of waitForPodsReady.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequeuingStrategy {
    /// "Eviction" (default: queue order after a timeout is the eviction time) or "Creation".
    #[serde(default)]
    pub timestamp: Option<String>,
    /// First backoff in seconds (Kueue's default 60).
    #[serde(default)]
    pub backoff_base_seconds: Option<i64>,
    /// Requeues before the workload is deactivated (None: requeued forever).
    #[serde(default)]
    pub backoff_limit_count: Option<i32>,
    /// Longest backoff in seconds (Kueue's default 3600).
    #[serde(default)]
    pub backoff_max_seconds: Option<i64>,
}

/// Kueue's waitForPodsReady.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitForPodsReadyFile {
    /// On unless false.
    #[serde(default)]
    pub enable: Option<bool>,
    /// Duration string such as "5m" (Kueue's default 5m).
    #[serde(default)]
    pub timeout: Option<String>,
    /// Kueue's blockAdmission: admit nothing more while a quota holder is not PodsReady (default false).
    #[serde(default)]
    pub block_admission: Option<bool>,
    /// Backoff settings.
    #[serde(default)]
    pub requeuing_strategy: Option<RequeuingStrategy>,
    /// Kueue's recoveryTimeout: how long a running workload whose pod failed may wait for a replacement to be
    /// ready (default: the timeout; "0s": no limit).
    #[serde(default)]
    pub recovery_timeout: Option<String>,
}

/// Kueue's fairSharing.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FairSharingFile {
    /// Whether fair sharing is on (v1beta1; in v1beta2 the field's presence turns it on).
    #[serde(default)]
    pub enable: Option<bool>,
    /// Preemption strategies in order.
    #[serde(default)]
    pub preemption_strategies: Vec<String>,
}

/// Kueue's integrations.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationsFile {
    /// Enabled frameworks, e.g. "batch/job".
    #[serde(default)]
    pub frameworks: Vec<String>,
    /// Label keys copied from a job to its Workload when the Workload is created.
    #[serde(default)]
    pub label_keys_to_copy: Vec<String>,
    /// Kinds whose Workloads another controller makes (`Kind.version.group`); checked as Kueue checks them.
    #[serde(default)]
    pub external_frameworks: Vec<String>,
}

/// The frameworks on without an `integrations` section: Kueue's shipped list less what it took out in v0.19 (the
/// Kubeflow v1 kinds) and what Sluice lacks.
pub const DEFAULT_FRAMEWORKS: &[&str] = &[
    integrations::BATCH_JOB,
    integrations::JOBSET,
    integrations::RAYJOB,
    integrations::RAYCLUSTER,
    integrations::RAYSERVICE,
    integrations::TRAINJOB,
    integrations::LEADERWORKERSET,
    integrations::POD,
];

/// The frameworks of Kueue's ([`sluice_sdk::kueue::integrations::FRAMEWORKS`]) that Sluice integrates.
pub const SLUICE_FRAMEWORKS: &[&str] = &[
    integrations::BATCH_JOB,
    integrations::JOBSET,
    integrations::PYTORCHJOB,
    integrations::RAYJOB,
    integrations::RAYCLUSTER,
    integrations::RAYSERVICE,
    integrations::TRAINJOB,
    integrations::LEADERWORKERSET,
    integrations::POD,
];

impl IntegrationsFile {
    /// Kueue's checks of `integrations`: every framework one Kueue registers, none twice, and external frameworks
    /// as `Kind.version.group`, none twice. A framework Kueue has and Sluice does not is logged, not refused, so
    /// that Kueue's own Configuration loads.
    pub fn check(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let mut seen = std::collections::BTreeSet::new();
        for (i, f) in self.frameworks.iter().enumerate() {
            if !FRAMEWORKS.iter().any(|k| k.0 == f) {
                let names: Vec<&str> = FRAMEWORKS.iter().map(|k| k.0).collect();
                return Err(invalid(format!(
                    "integrations.frameworks[{i}]: Unsupported value: {f:?}: supported values: {}",
                    names.join(", ")
                )));
            }
            if !seen.insert(f.as_str()) {
                return Err(invalid(format!(
                    "integrations.frameworks[{i}]: Duplicate value: {f:?}"
                )));
            }
            if !SLUICE_FRAMEWORKS.contains(&f.as_str()) {
                tracing::warn!(
                    framework = %f,
                    "integrations.frameworks names a Kueue integration Sluice does not have: its jobs are not queued"
                );
            }
        }
        let mut external = std::collections::BTreeSet::new();
        for (i, f) in self.external_frameworks.iter().enumerate() {
            // Kubernetes' ParseKindArg: Kind, version and group, the group itself dotted or not.
            if f.matches('.').count() < 2 {
                return Err(invalid(format!(
                    "integrations.externalFrameworks[{i}]: Invalid value: {f:?}: must be format, 'Kind.version.group.com'"
                )));
            }
            if !external.insert(f.as_str()) {
                return Err(invalid(format!(
                    "integrations.externalFrameworks[{i}]: Duplicate value: {f:?}"
                )));
            }
        }
        Ok(())
    }
}

/// Kueue v0.19 feature gates and their defaults (pkg/features), to tell a known gate from a typo.
pub const KUEUE_FEATURE_GATES: &[(&str, bool)] = &[
    ("AdmissionFairSharing", true),
    ("AdmissionGatedBy", true),
    ("AssignQueueLabelsForPods", true),
    ("CleanupProvisioningRequestsOnEviction", true),
    ("ConcurrentAdmission", false),
    ("CustomMetricLabels", false),
    ("DeferRayServiceFinalizationForRedisCleanup", true),
    ("DisableWaitForPodsReady", false),
    ("ElasticJobsViaWorkloadSlices", true),
    ("ElasticJobsViaWorkloadSlicesWithTAS", false),
    ("FailureRecoveryPolicy", false),
    ("FairSharingPreemptWithinNominal", true),
    ("FairSharingPrioritizeNonBorrowing", true),
    ("FastQuotaReleaseInPodIntegration", false),
    ("FinishOrphanedWorkloads", true),
    ("FlavorFungibility", true),
    ("FlavorFungibilityPreserveScanProgress", true),
    ("HierarchicalCohorts", true),
    ("KueueDRAIntegration", true),
    ("KueueDRAIntegrationConsumableCapacity", false),
    ("KueueDRAIntegrationExtendedResource", true),
    ("KueueDRAIntegrationPartitionableDevices", true),
    ("KueueDRARejectWorkloadsWhenDRADisabled", true),
    ("LWSImmutableGroupSize", true),
    ("LocalQueueMetrics", true),
    ("ManagedJobsNamespaceSelectorAlwaysRespected", true),
    ("MetricForWorkloadCreationLatency", true),
    ("MetricsForCohorts", true),
    ("MultiKueue", true),
    ("MultiKueueAdaptersForCustomJobs", true),
    ("MultiKueueAllowInsecureKubeconfigs", true),
    ("MultiKueueClusterProfile", false),
    ("MultiKueueIncrementalDispatcherConfig", true),
    ("MultiKueueIncrementalDispatcherRespectConfigOrder", true),
    ("MultiKueueKubeConfigPathValidation", false),
    ("MultiKueueManagerQuotaAutomation", false),
    ("MultiKueueOrchestratedPreemption", false),
    ("MultiKueueRedoAdmissionOnEvictionInWorker", true),
    ("MultiKueueRemoteSpecSync", true),
    ("MultiKueueWaitForWorkloadAdmitted", true),
    ("ObjectRetentionPolicies", true),
    ("PartialAdmission", true),
    ("PodIntegrationValidateGroupOwner", true),
    ("PrioritizePreemptorWorkloads", false),
    ("PriorityBoost", false),
    ("PrioritySortingWithinCohort", true),
    ("PropagateBatchJobLabelsToWorkload", true),
    ("QuotaCheckStrategy", true),
    ("ReclaimablePods", true),
    ("RecomputeAssignmentUponPreemptionTargetsOverlap", false),
    ("RejectUpdatesToCQWithInvalidOnFlavors", false),
    ("RemoveFinalizersWithStrictPatch", true),
    ("SchedulerLibraryIntegration", false),
    ("SchedulerLongRequeueInterval", false),
    ("SchedulerTimestampPreemptionBuffer", false),
    ("SchedulingEquivalenceHashing", true),
    ("ShortWorkloadNames", false),
    ("SkipAncestorCheckForDeletedWorkloads", true),
    ("SkipFinalizersForPodsSuspendedByParent", true),
    ("SkipReassignmentForPodOwnedWorkloads", true),
    ("SparkApplicationIntegration", false),
    ("TASAssignmentsEncodingByHostnamePrefix", true),
    ("TASBalancedPlacement", false),
    ("TASCacheNodeMatchResults", true),
    ("TASCacheTopologyTree", false),
    ("TASCachingRemainingResources", true),
    ("TASFailedNodeReplacement", true),
    ("TASFailedNodeReplacementFailFast", true),
    ("TASHandleOverlappingFlavors", true),
    ("TASMultiLayerTopology", true),
    ("TASProfileMixed", true),
    ("TASRecomputeAssignmentWithinSchedulingCycle", true),
    ("TASReplaceNodeDueToNotReadyOverFixedTime", false),
    ("TASReplaceNodeOnNodeTaints", true),
    ("TASReplaceNodeOnPodTermination", true),
    ("TASRespectNodeAffinityPreferred", false),
    ("TASValidateWorkloadSliceSize", true),
    ("TLSOptions", true),
    ("TopologyAwareScheduling", true),
    ("UnadmittedWorkloadsExplicitStatus", false),
    ("UnadmittedWorkloadsObservability", false),
    ("ValidateRayAndSparkJobUpdates", true),
    ("VectorizedResourceRequests", true),
    ("VisibilityOnDemand", true),
    ("WorkloadIdentifierAnnotations", true),
    ("WorkloadPriorityClassDefaulting", false),
    ("WorkloadRequestUseMergePatch", false),
    ("WorkloadValidateResourcesAreNonNegative", true),
    ("WorkloadValidationForPodSetMetadata", true),
];

/// The feature gates that change what Sluice does; every other known gate is accepted at Kueue's default only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// PartialAdmission (on by default).
    pub partial_admission: bool,
    /// PrioritizePreemptorWorkloads (off by default).
    pub prioritize_preemptor_workloads: bool,
    /// UnadmittedWorkloadsObservability: Kueue's detailed pending reasons (off by default).
    pub unadmitted_workloads_observability: bool,
    /// PriorityBoost: `kueue.x-k8s.io/priority-boost` adds to the effective priority (off by default).
    pub priority_boost: bool,
    /// AdmissionFairSharing: `admissionFairSharing` takes effect (beta, on by default).
    pub admission_fair_sharing: bool,
    /// SchedulingEquivalenceHashing: a failed scheduling shape sets its equals aside (beta, on by default).
    pub scheduling_equivalence_hashing: bool,
    /// ObjectRetentionPolicies: `objectRetentionPolicies` takes effect (beta, on by default).
    pub object_retention_policies: bool,
    /// QuotaCheckStrategy: `resources.quotaCheckStrategy` takes effect (beta, on by default).
    pub quota_check_strategy: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            partial_admission: true,
            prioritize_preemptor_workloads: false,
            unadmitted_workloads_observability: false,
            priority_boost: false,
            admission_fair_sharing: true,
            scheduling_equivalence_hashing: true,
            object_retention_policies: true,
            quota_check_strategy: true,
        }
    }
}

impl FeatureGates {
    /// Reads `featureGates`: an unknown gate, or a known one set away from Kueue's default that Sluice does not
    /// implement, is an error naming it.
    pub fn parse(
        origin: &str,
        gates: &std::collections::BTreeMap<String, bool>,
    ) -> Result<Self, ConfigError> {
        let mut out = Self::default();
        for (name, &on) in gates {
            let invalid = |message: String| ConfigError::Invalid {
                path: origin.to_string(),
                message: format!("featureGates.{name}: {message}"),
            };
            let Some(&(_, default)) = KUEUE_FEATURE_GATES.iter().find(|(n, _)| n == name) else {
                return Err(invalid(
                    "unknown feature gate (not one of Kueue v0.19's)".into(),
                ));
            };
            match name.as_str() {
                "PartialAdmission" => out.partial_admission = on,
                "PrioritizePreemptorWorkloads" => out.prioritize_preemptor_workloads = on,
                "UnadmittedWorkloadsObservability" => out.unadmitted_workloads_observability = on,
                "PriorityBoost" => out.priority_boost = on,
                "AdmissionFairSharing" => out.admission_fair_sharing = on,
                "SchedulingEquivalenceHashing" => out.scheduling_equivalence_hashing = on,
                "ObjectRetentionPolicies" => out.object_retention_policies = on,
                "QuotaCheckStrategy" => out.quota_check_strategy = on,
                _ if on == default => {}
                _ => {
                    return Err(invalid(format!(
                        "{on} is not supported: Sluice behaves as Kueue's default ({default})"
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// The configuration file (a Kueue Configuration; unknown top-level fields are ignored so Kueue's files load).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigFile {
    /// apiVersion: v1beta1 and v1beta2 differ in how fair sharing is turned on and in defaults.
    #[serde(default)]
    pub api_version: Option<String>,
    /// fairSharing.
    #[serde(default)]
    pub fair_sharing: Option<FairSharingFile>,
    /// waitForPodsReady.
    #[serde(default)]
    pub wait_for_pods_ready: Option<WaitForPodsReadyFile>,
    /// admissionFairSharing.
    #[serde(default)]
    pub admission_fair_sharing: Option<AdmissionFairSharingFile>,
    /// manageJobsWithoutQueueName.
    #[serde(default)]
    pub manage_jobs_without_queue_name: Option<bool>,
    /// managedJobsNamespaceSelector: the namespaces whose jobs Kueue manages at all.
    #[serde(default)]
    pub managed_jobs_namespace_selector:
        Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// namespace: Kueue's own, which its default managedJobsNamespaceSelector leaves out.
    #[serde(default)]
    pub namespace: Option<String>,
    /// integrations.
    #[serde(default)]
    pub integrations: Option<IntegrationsFile>,
    /// featureGates.
    #[serde(default)]
    pub feature_gates: std::collections::BTreeMap<String, bool>,
    /// resources.
    #[serde(default)]
    pub resources: Option<ResourcesFile>,
    /// objectRetentionPolicies.
    #[serde(default)]
    pub object_retention_policies: Option<ObjectRetentionPoliciesFile>,
}

/// Kueue's `objectRetentionPolicies`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRetentionPoliciesFile {
    /// workloads.
    #[serde(default)]
    pub workloads: Option<WorkloadRetentionFile>,
}

/// Kueue's `objectRetentionPolicies.workloads`: durations such as "10m" or "1h30m".
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadRetentionFile {
    /// How long a finished Workload is kept before it is deleted.
    #[serde(default)]
    pub after_finished: Option<String>,
    /// How long a job whose Workload Kueue deactivated is kept before the job is deleted.
    #[serde(default)]
    pub after_deactivated_by_kueue: Option<String>,
}

/// Kueue's Workload retention (ObjectRetentionPolicies, on by default): None keeps objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadRetention {
    /// A finished Workload is deleted this long after it finished.
    pub after_finished: Option<Duration>,
    /// A job whose Workload Kueue deactivated is deleted this long after the eviction.
    pub after_deactivated_by_kueue: Option<Duration>,
}

/// Kueue's `resources`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourcesFile {
    /// Resources whose names start with one of these are not counted.
    #[serde(default)]
    pub exclude_resource_prefixes: Vec<String>,
    /// How requested resources are counted as others.
    #[serde(default)]
    pub transformations: Vec<TransformationFile>,
    /// BlockUndeclared (Kueue's default) or IgnoreUndeclared (read only with the QuotaCheckStrategy gate on).
    #[serde(default)]
    pub quota_check_strategy: Option<String>,
    /// Dynamic Resource Allocation (KueueDRAIntegration): not supported.
    #[serde(default)]
    pub device_class_mappings: Vec<serde_json::Value>,
}

/// One of Kueue's `resources.transformations`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformationFile {
    /// The requested resource transformed.
    pub input: String,
    /// Retain (default) or Replace.
    #[serde(default)]
    pub strategy: Option<String>,
    /// A resource whose request multiplies the outputs.
    #[serde(default)]
    pub multiply_by: Option<String>,
    /// Output resources per unit of input.
    #[serde(default)]
    pub outputs:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}

impl ResourcesFile {
    /// Whether `quotaCheckStrategy` is IgnoreUndeclared, validated as Kueue validates it; with the gate off Kueue
    /// neither reads nor checks the field.
    pub fn ignore_undeclared(&self, origin: &str, gate: bool) -> Result<bool, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message: format!("resources.quotaCheckStrategy: {message}"),
        };
        match self.quota_check_strategy.as_deref().filter(|_| gate) {
            // Kueue's default: a resource the ClusterQueue does not cover keeps the workload out.
            None | Some("BlockUndeclared") => Ok(false),
            Some("IgnoreUndeclared") if !self.exclude_resource_prefixes.is_empty() => Err(invalid(
                "Invalid value: \"IgnoreUndeclared\": excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared".into(),
            )),
            Some("IgnoreUndeclared") => Ok(true),
            Some(other) => Err(invalid(format!(
                "Unsupported value: {other:?}: supported values: \"IgnoreUndeclared\", \"BlockUndeclared\""
            ))),
        }
    }

    /// The counting rules, validated as Kueue validates its Configuration.
    pub fn counting(&self, origin: &str) -> Result<crate::resource_rules::Counting, ConfigError> {
        let invalid = |field: String, message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message: format!("resources.{field}: {message}"),
        };
        if !self.device_class_mappings.is_empty() {
            return Err(invalid(
                "deviceClassMappings".into(),
                "Dynamic Resource Allocation (Kueue's KueueDRAIntegration) is not supported".into(),
            ));
        }
        let mut out = crate::resource_rules::Counting {
            exclude_prefixes: self.exclude_resource_prefixes.clone(),
            ..Default::default()
        };
        for (i, t) in self.transformations.iter().enumerate() {
            let replace = match t.strategy.as_deref() {
                None | Some("Retain") => false,
                Some("Replace") => true,
                Some(other) => {
                    return Err(invalid(
                        format!("transformations[{i}].strategy"),
                        format!(
                            "Unsupported value: {other:?}: supported values: \"Retain\", \"Replace\""
                        ),
                    ));
                }
            };
            if out.transformations.contains_key(&t.input) {
                return Err(invalid(
                    format!("transformations[{i}].input"),
                    format!("Duplicate value: {:?}", t.input),
                ));
            }
            let mut outputs = std::collections::BTreeMap::new();
            for (name, q) in &t.outputs {
                let v = sluice_sdk::quantity::nano_value(q).ok_or_else(|| {
                    invalid(
                        format!("transformations[{i}].outputs[{name}]"),
                        format!("{:?} is not a quantity", q.0),
                    )
                })?;
                outputs.insert(name.clone(), v);
            }
            out.transformations.insert(
                t.input.clone(),
                crate::resource_rules::Transformation {
                    replace,
                    multiply_by: t.multiply_by.clone().filter(|m| !m.is_empty()),
                    outputs,
                },
            );
        }
        Ok(out)
    }
}

/// Kueue's admissionFairSharing.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionFairSharingFile {
    /// Half-life of LocalQueue usage, a duration such as "168h" (Kueue: none by default, usage reset at once).
    #[serde(default)]
    pub usage_half_life_time: Option<String>,
    /// How often usage is sampled (Kueue's default 5m).
    #[serde(default)]
    pub usage_sampling_interval: Option<String>,
    /// Weight of each resource in a LocalQueue's usage (1 when not listed).
    #[serde(default)]
    pub resource_weights: std::collections::BTreeMap<String, f64>,
}

impl AdmissionFairSharingFile {
    /// The engine's settings, with Kueue's defaults and validation.
    fn engine(
        &self,
        origin: &str,
    ) -> Result<crate::engine::AdmissionFairSharingConfig, ConfigError> {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message: format!("admissionFairSharing.{field}: {message}"),
        };
        let duration = |field: &str, v: &Option<String>| -> Result<Option<i64>, ConfigError> {
            v.as_deref()
                .map(|t| {
                    crate::duration::parse_duration(t).map_err(|e| invalid(field, e.to_string()))
                })
                .transpose()
        };
        let half_life = duration("usageHalfLifeTime", &self.usage_half_life_time)?.unwrap_or(0);
        if half_life < 0 {
            return Err(invalid(
                "usageHalfLifeTime",
                format!("must be greater than or equal to 0, got {half_life} ms"),
            ));
        }
        // Kueue defaults a zero interval to 5 minutes, so only a negative one is refused.
        let interval = match duration("usageSamplingInterval", &self.usage_sampling_interval)? {
            None | Some(0) => 5 * 60 * 1000,
            Some(ms) if ms < 0 => {
                return Err(invalid(
                    "usageSamplingInterval",
                    format!("must be greater than 0, got {ms} ms"),
                ));
            }
            Some(ms) => ms,
        };
        for (resource, w) in &self.resource_weights {
            if !(*w >= 0.0 && w.is_finite()) {
                return Err(invalid(
                    &format!("resourceWeights[{resource}]"),
                    format!("must be greater than or equal to 0, got {w}"),
                ));
            }
        }
        Ok(crate::engine::AdmissionFairSharingConfig {
            usage_half_life: half_life,
            usage_sampling_interval: interval,
            resource_weights: self.resource_weights.clone(),
        })
    }
}

/// waitForPodsReady as the controllers use it.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitForPodsReady {
    /// Time an admitted workload has for all its pods to be ready.
    pub timeout: Duration,
    /// First requeue backoff.
    pub backoff_base: Duration,
    /// Longest requeue backoff.
    pub backoff_max: Duration,
    /// Requeues before deactivation (None: forever).
    pub backoff_limit_count: Option<i32>,
    /// Queue order after a timeout uses the eviction time (Kueue's default) rather than creation.
    pub order_by_eviction: bool,
    /// recoveryTimeout when set: zero means none. Unset, it is the timeout (Kueue's default).
    pub recovery_timeout: Option<Duration>,
    /// blockAdmission.
    pub block_admission: bool,
}

impl Default for WaitForPodsReady {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            backoff_base: Duration::from_secs(60),
            backoff_max: Duration::from_secs(3600),
            backoff_limit_count: None,
            order_by_eviction: true,
            recovery_timeout: None,
            block_admission: false,
        }
    }
}

impl WaitForPodsReady {
    /// How long a workload whose pod failed after it was ready may wait for recovery; None: no limit.
    pub fn recovery(&self) -> Option<Duration> {
        match self.recovery_timeout {
            None => Some(self.timeout),
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
        }
    }

    /// Kueue's backoff before the `count`-th requeue: base * 2^(count-1), at most the maximum.
    pub fn backoff(&self, count: i32) -> Duration {
        let exp = count.saturating_sub(1).clamp(0, 30) as u32;
        self.backoff_base
            .checked_mul(1u32 << exp)
            .unwrap_or(self.backoff_max)
            .min(self.backoff_max)
    }

    /// Kueue's requeuingStrategy after a PodsReady timeout of a workload requeued `requeued` times before:
    /// `None` past backoffLimitCount (it is deactivated, RequeuingLimitExceeded), else its new requeue count
    /// and the time its backoff ends.
    pub fn requeue_after_timeout(
        &self,
        requeued: i32,
        now: crate::engine::Time,
    ) -> Option<(i32, crate::engine::Time)> {
        let count = requeued.saturating_add(1);
        if self.backoff_limit_count.is_some_and(|limit| count > limit) {
            return None;
        }
        Some((
            count,
            now + self.backoff(count).as_millis() as crate::engine::Time,
        ))
    }
}

/// Everything the controllers need to know.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Engine settings (fair sharing).
    pub engine: EngineConfig,
    /// waitForPodsReady (None: off).
    pub wait_for_pods_ready: Option<WaitForPodsReady>,
    /// Queue Jobs without a queue-name label into the namespace's `default` LocalQueue.
    pub manage_jobs_without_queue_name: bool,
    /// Kueue's `managedJobsNamespaceSelector` (GA and always respected in v0.19): jobs in other namespaces are
    /// not managed, whatever their queue name.
    pub managed_jobs_namespace_selector:
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    /// Write Kueue's detailed pending reasons instead of "Pending".
    pub detailed_pending_reasons: bool,
    /// First retry delay of a failed API write.
    pub retry_base: Duration,
    /// Longest retry delay of a failed API write.
    pub retry_max: Duration,
    /// API writes of one round kept in flight at once: new Workloads, a cycle's admissions and pending reasons,
    /// the Jobs they start (1: one after another).
    pub writes_in_flight: usize,
    /// Name of this replica (events' reporting instance, lease identity).
    pub identity: String,
    /// WebAssembly host settings for PolicyModules (call deadline, memory cap, pool size).
    pub policy_host: sluice_sdk::host::HostConfig,
    /// Kueue's `resources`: excluded prefixes and transformations of the requests counted.
    pub resource_counting: crate::resource_rules::Counting,
    /// Kueue's `objectRetentionPolicies.workloads`.
    pub workload_retention: WorkloadRetention,
    /// Kueue's `integrations.labelKeysToCopy`: labels a new Workload takes from its job.
    pub label_keys_to_copy: Vec<String>,
    /// The integrations on, as Kueue counts them (Sluice's frameworks, Kueue's that Sluice lacks, external
    /// frameworks, the pod integration that LeaderWorkerSets, Deployments and StatefulSets imply): which kinds
    /// are managed, whose children are left to their owner, and which webhooks act.
    pub integrations: sluice_sdk::kueue::integrations::Integrations,
    /// Failed calls in a row after which a PolicyModule is Degraded.
    pub policy_degrade_after: u32,
    /// Least time between two PolicyModule status writes that only change counters.
    pub policy_status_interval: Duration,
    /// Least time between two passes over the ClusterQueue, LocalQueue and Cohort statuses: with a thousand queues
    /// whose counts change on every admission, a pass per round would keep the API server busy with them.
    pub queue_status_interval: Duration,
    /// How long one round of scheduling cycles may run before the engine task takes in the watch events that
    /// came meanwhile (finished Workloads free quota only once their events are in).
    pub round_budget: Duration,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            engine: EngineConfig::default(),
            wait_for_pods_ready: Some(WaitForPodsReady::default()),
            manage_jobs_without_queue_name: false,
            managed_jobs_namespace_selector: sluice_sdk::kueue::namespaces::kueue_default(
                "kueue-system",
            ),
            detailed_pending_reasons: false,
            retry_base: Duration::from_millis(100),
            retry_max: Duration::from_secs(30),
            writes_in_flight: 16,
            identity: "sluice-operator".to_string(),
            policy_host: sluice_sdk::host::HostConfig::default(),
            resource_counting: Default::default(),
            workload_retention: WorkloadRetention::default(),
            label_keys_to_copy: Vec::new(),
            integrations: sluice_sdk::kueue::integrations::Integrations::new(
                DEFAULT_FRAMEWORKS.iter().copied(),
                [],
            ),
            policy_degrade_after: 5,
            policy_status_interval: Duration::from_secs(10),
            queue_status_interval: Duration::from_secs(1),
            round_budget: Duration::from_millis(500),
        }
    }
}

fn seconds(path: &str, field: &str, v: Option<i64>, default: u64) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(Duration::from_secs(default)),
        Some(s) if s > 0 => Ok(Duration::from_secs(s as u64)),
        Some(s) => Err(ConfigError::Invalid {
            path: path.to_string(),
            message: format!("{field}: must be positive, got {s}"),
        }),
    }
}

impl OperatorConfig {
    /// Whether Kueue's framework `name` (`batch/job`, `pod`, [`integrations::JOBSET`], ...) is on: its kind is
    /// managed once its CRD is served. LeaderWorkerSets, Deployments and StatefulSets turn `pod` on with them.
    pub fn manages(&self, name: &str) -> bool {
        self.integrations.enabled(name)
    }

    /// Reads a Kueue Configuration file (YAML).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: p.clone(),
            error,
        })?;
        Self::from_yaml(&p, &text)
    }

    /// Parses a Kueue Configuration (YAML); `origin` names it in errors.
    pub fn from_yaml(origin: &str, text: &str) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let file: ConfigFile = serde_yaml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        Self::from_config_file(origin, file)
    }

    /// Builds the configuration from a decoded Kueue Configuration; `origin` names it in errors.
    pub fn from_config_file(origin: &str, file: ConfigFile) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let mut out = Self::default();
        let gates = FeatureGates::parse(origin, &file.feature_gates)?;
        if let Some(r) = &file.resources {
            out.resource_counting = r.counting(origin)?;
            out.engine.ignore_undeclared_resources =
                r.ignore_undeclared(origin, gates.quota_check_strategy)?;
        }
        if let Some(w) = file
            .object_retention_policies
            .as_ref()
            .and_then(|p| p.workloads.as_ref())
            .filter(|_| gates.object_retention_policies)
        {
            let duration = |field: &str,
                            v: &Option<String>|
             -> Result<Option<Duration>, ConfigError> {
                let Some(text) = v else { return Ok(None) };
                let ms = crate::duration::parse_duration(text).map_err(|e| {
                    invalid(format!("objectRetentionPolicies.workloads.{field}: {e}"))
                })?;
                if ms < 0 {
                    return Err(invalid(format!(
                        "objectRetentionPolicies.workloads.{field}: {text:?}: must be greater than or equal to 0"
                    )));
                }
                Ok(Some(Duration::from_millis(ms as u64)))
            };
            out.workload_retention = WorkloadRetention {
                after_finished: duration("afterFinished", &w.after_finished)?,
                after_deactivated_by_kueue: duration(
                    "afterDeactivatedByKueue",
                    &w.after_deactivated_by_kueue,
                )?,
            };
        }
        out.engine.partial_admission = gates.partial_admission;
        out.engine.prioritize_preemptor_workloads = gates.prioritize_preemptor_workloads;
        out.engine.priority_boost = gates.priority_boost;
        out.engine.scheduling_equivalence_hashing = gates.scheduling_equivalence_hashing;
        out.detailed_pending_reasons = gates.unadmitted_workloads_observability;
        // Kueue's v1beta2 has no `enable`: fair sharing and waitForPodsReady are on when present, and
        // waitForPodsReady's timeout defaults to 30 minutes (5 in v1beta1).
        let v1beta2 = file
            .api_version
            .as_deref()
            .is_some_and(|v| v.ends_with("/v1beta2"));
        if !v1beta2 {
            out.wait_for_pods_ready = Some(WaitForPodsReady::default());
        } else {
            out.wait_for_pods_ready = Some(WaitForPodsReady {
                timeout: Duration::from_secs(30 * 60),
                ..WaitForPodsReady::default()
            });
        }
        if let Some(fs) = file.fair_sharing.filter(|f| f.enable.unwrap_or(v1beta2)) {
            let mut cfg = FairSharingConfig::default();
            if !fs.preemption_strategies.is_empty() {
                cfg.preemption_strategies = fs
                    .preemption_strategies
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match s.as_str() {
                        "LessThanOrEqualToFinalShare" => {
                            Ok(FairSharingStrategy::LessThanOrEqualToFinalShare)
                        }
                        "LessThanInitialShare" => Ok(FairSharingStrategy::LessThanInitialShare),
                        other => Err(invalid(format!(
                            "fairSharing.preemptionStrategies[{i}]: unknown strategy {other:?}"
                        ))),
                    })
                    .collect::<Result<_, _>>()?;
            }
            out.engine.fair_sharing = Some(cfg);
        }
        if let Some(w) = file.wait_for_pods_ready {
            if w.enable == Some(false) {
                out.wait_for_pods_ready = None;
            } else {
                let mut cfg = out.wait_for_pods_ready.clone().unwrap_or_default();
                if let Some(t) = &w.timeout {
                    let ms = crate::duration::parse_duration(t)
                        .map_err(|e| invalid(format!("waitForPodsReady.timeout: {e}")))?;
                    if ms <= 0 {
                        return Err(invalid("waitForPodsReady.timeout: must be positive".into()));
                    }
                    cfg.timeout = Duration::from_millis(ms as u64);
                }
                if let Some(t) = &w.recovery_timeout {
                    let ms = crate::duration::parse_duration(t)
                        .map_err(|e| invalid(format!("waitForPodsReady.recoveryTimeout: {e}")))?;
                    if ms < 0 {
                        return Err(invalid(
                            "waitForPodsReady.recoveryTimeout: must not be negative".into(),
                        ));
                    }
                    cfg.recovery_timeout = Some(Duration::from_millis(ms as u64));
                }
                cfg.block_admission = w.block_admission.unwrap_or(false);
                if let Some(rs) = w.requeuing_strategy {
                    cfg.backoff_base = seconds(
                        origin,
                        "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
                        rs.backoff_base_seconds,
                        60,
                    )?;
                    cfg.backoff_max = seconds(
                        origin,
                        "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
                        rs.backoff_max_seconds,
                        3600,
                    )?;
                    if rs.backoff_limit_count.is_some_and(|c| c < 0) {
                        return Err(invalid(
                            "waitForPodsReady.requeuingStrategy.backoffLimitCount: must not be negative".into(),
                        ));
                    }
                    cfg.backoff_limit_count = rs.backoff_limit_count;
                    cfg.order_by_eviction = match rs.timestamp.as_deref() {
                        None | Some("Eviction") => true,
                        Some("Creation") => false,
                        Some(other) => {
                            return Err(invalid(format!(
                                "waitForPodsReady.requeuingStrategy.timestamp: {other:?} is not Eviction or Creation"
                            )));
                        }
                    };
                }
                out.wait_for_pods_ready = Some(cfg);
            }
        }
        out.engine.block_admission = out
            .wait_for_pods_ready
            .as_ref()
            .is_some_and(|w| w.block_admission);
        if let Some(afs) = &file.admission_fair_sharing {
            let cfg = afs.engine(origin)?;
            if gates.admission_fair_sharing {
                out.engine.admission_fair_sharing = Some(cfg);
            }
        }
        out.manage_jobs_without_queue_name = file.manage_jobs_without_queue_name.unwrap_or(false);
        let kueue_namespace = file.namespace.as_deref().unwrap_or("kueue-system");
        out.managed_jobs_namespace_selector = match file.managed_jobs_namespace_selector {
            Some(s) => {
                let errors =
                    sluice_sdk::kueue::validation::validate_managed_jobs_namespace_selector(
                        &s,
                        Some(kueue_namespace),
                    );
                if !errors.is_empty() {
                    let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
                    return Err(invalid(all.join("; ")));
                }
                s
            }
            None => sluice_sdk::kueue::namespaces::kueue_default(kueue_namespace),
        };
        if let Some(mut i) = file.integrations {
            i.check(origin)?;
            // Kueue's default for an empty list.
            if i.frameworks.is_empty() {
                i.frameworks.push("batch/job".to_owned());
            }
            out.label_keys_to_copy = i.label_keys_to_copy;
            out.integrations = sluice_sdk::kueue::integrations::Integrations::new(
                i.frameworks.iter().map(String::as_str),
                i.external_frameworks.iter().map(String::as_str),
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_fair_sharing_is_read_with_kueues_defaults_and_gate() {
        let c = OperatorConfig::from_yaml(
            "cfg",
            r#"
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
admissionFairSharing:
  usageHalfLifeTime: 168h
  resourceWeights: {cpu: 0, nvidia.com/gpu: 100}
"#,
        )
        .unwrap();
        let afs = c.engine.admission_fair_sharing.unwrap();
        assert_eq!(afs.usage_half_life, 168 * 3_600_000);
        assert_eq!(afs.usage_sampling_interval, 5 * 60_000, "Kueue's default");
        assert_eq!(afs.resource_weights["nvidia.com/gpu"], 100.0);
        let off = OperatorConfig::from_yaml(
            "cfg",
            "admissionFairSharing: {usageHalfLifeTime: 1h}\nfeatureGates: {AdmissionFairSharing: false}\n",
        )
        .unwrap();
        assert!(
            off.engine.admission_fair_sharing.is_none(),
            "the gate turns it off"
        );
        assert!(
            OperatorConfig::default()
                .engine
                .admission_fair_sharing
                .is_none()
        );
        for (bad, field) in [
            (
                "{usageHalfLifeTime: -1s}",
                "admissionFairSharing.usageHalfLifeTime",
            ),
            (
                "{usageSamplingInterval: -1m}",
                "admissionFairSharing.usageSamplingInterval",
            ),
            (
                "{resourceWeights: {cpu: -1}}",
                "admissionFairSharing.resourceWeights[cpu]",
            ),
        ] {
            let e = OperatorConfig::from_yaml("cfg", &format!("admissionFairSharing: {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{e}");
        }
    }

    #[test]
    fn kueue_configuration_subset_is_read() {
        let c = OperatorConfig::from_yaml(
            "cfg",
            r#"
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing: {enable: true}
waitForPodsReady:
  timeout: 2m
  requeuingStrategy: {backoffBaseSeconds: 10, backoffLimitCount: 3, backoffMaxSeconds: 100}
manageJobsWithoutQueueName: true
integrations: {frameworks: ["batch/job"], labelKeysToCopy: [example.com/team]}
"#,
        )
        .unwrap();
        assert_eq!(c.label_keys_to_copy, ["example.com/team"]);
        // Kueue's checks of the lists: a name Kueue has no integration for, a name twice, an external framework
        // that is not Kind.version.group.
        for (yaml, field) in [
            (
                "integrations: {frameworks: [batch/jobs]}",
                "integrations.frameworks[0]: Unsupported value: \"batch/jobs\"",
            ),
            (
                "integrations: {frameworks: [pod, pod]}",
                "integrations.frameworks[1]: Duplicate value",
            ),
            (
                "integrations: {frameworks: [pod], externalFrameworks: [AppWrapper]}",
                "integrations.externalFrameworks[0]: Invalid value",
            ),
            (
                "integrations: {frameworks: [pod], externalFrameworks: [A.v1.example.com, A.v1.example.com]}",
                "integrations.externalFrameworks[1]: Duplicate value",
            ),
        ] {
            let e = OperatorConfig::from_yaml("cfg", yaml)
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        // Kueue's own list loads: the integrations Sluice lacks are logged, not refused.
        let kueue = format!(
            "integrations: {{frameworks: [{}]}}",
            FRAMEWORKS
                .iter()
                .map(|k| k.0)
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(OperatorConfig::from_yaml("cfg", &kueue).is_ok());
        assert!(OperatorConfig::default().label_keys_to_copy.is_empty());
        assert!(c.engine.fair_sharing.is_some());
        let w = c.wait_for_pods_ready.clone().unwrap();
        assert_eq!(w.timeout, Duration::from_secs(120));
        assert_eq!(w.backoff(1), Duration::from_secs(10));
        assert_eq!(w.backoff(3), Duration::from_secs(40));
        assert_eq!(w.backoff(5), Duration::from_secs(100), "capped at max");
        assert_eq!(w.backoff_limit_count, Some(3));
        assert!(c.manage_jobs_without_queue_name);
        let on = |c: &OperatorConfig, names: &[&str]| names.iter().all(|n| c.manages(n));
        let off = |c: &OperatorConfig, names: &[&str]| names.iter().all(|n| !c.manages(n));
        assert!(
            on(&c, &["batch/job"])
                && off(
                    &c,
                    &[
                        "pod",
                        integrations::JOBSET,
                        integrations::RAYJOB,
                        integrations::RAYCLUSTER,
                        integrations::RAYSERVICE
                    ]
                ),
            "frameworks list: only batch/job"
        );
        let both = OperatorConfig::from_yaml(
            "cfg",
            "integrations: {frameworks: [\"batch/job\", \"pod\", \"jobset.x-k8s.io/jobset\", \"kubeflow.org/pytorchjob\", \"ray.io/rayjob\"]}",
        )
        .unwrap();
        assert!(on(
            &both,
            &[
                "batch/job",
                "pod",
                integrations::JOBSET,
                integrations::PYTORCHJOB,
                integrations::RAYJOB
            ]
        ));
        assert!(off(
            &both,
            &[integrations::RAYCLUSTER, integrations::RAYSERVICE]
        ));
        let default = OperatorConfig::default();
        assert!(!default.manages(integrations::PYTORCHJOB));
        // Kueue's shipped Configuration lists the three Ray kinds.
        assert!(on(
            &default,
            &[
                integrations::RAYJOB,
                integrations::RAYCLUSTER,
                integrations::RAYSERVICE
            ]
        ));
    }

    #[test]
    fn managed_jobs_namespace_selector_defaults_to_kueues_and_a_bad_one_is_named() {
        use sluice_sdk::kueue::namespaces::selects_namespace;
        let d = OperatorConfig::default().managed_jobs_namespace_selector;
        assert!(selects_namespace(&d, "team-a", None));
        assert!(!selects_namespace(&d, "kube-system", None));
        assert!(!selects_namespace(&d, "kueue-system", None));
        // Kueue leaves out its own namespace, wherever that is.
        let own = OperatorConfig::from_yaml("cfg", "namespace: kueue").unwrap();
        assert!(!selects_namespace(
            &own.managed_jobs_namespace_selector,
            "kueue",
            None
        ));
        assert!(selects_namespace(
            &own.managed_jobs_namespace_selector,
            "kueue-system",
            None
        ));
        let labelled = OperatorConfig::from_yaml(
            "cfg",
            "managedJobsNamespaceSelector: {matchLabels: {example.com/kueue: enabled}}",
        )
        .unwrap();
        let on = [("example.com/kueue".to_owned(), "enabled".to_owned())].into();
        assert!(selects_namespace(
            &labelled.managed_jobs_namespace_selector,
            "a",
            Some(&on)
        ));
        assert!(!selects_namespace(
            &labelled.managed_jobs_namespace_selector,
            "a",
            None
        ));
        let e = OperatorConfig::from_yaml(
            "cfg",
            "managedJobsNamespaceSelector: {matchExpressions: [{key: a, operator: Near}]}",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("managedJobsNamespaceSelector.matchExpressions[0].operator"),
            "{e}"
        );
        // Kueue's own checks: well-formed, and never selecting kube-system or Kueue's namespace.
        for (yaml, want) in [
            (
                "managedJobsNamespaceSelector: {}",
                "should not match the \"kube-system\" namespace",
            ),
            (
                "managedJobsNamespaceSelector: {matchExpressions: [{key: a, operator: In}]}",
                "managedJobsNamespaceSelector.matchExpressions[0].values: Required value",
            ),
            (
                "{namespace: kueue, managedJobsNamespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}}",
                "should not match the \"kueue\" namespace",
            ),
        ] {
            let e = OperatorConfig::from_yaml("cfg", yaml)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{yaml}: {e}");
        }
    }

    #[test]
    fn implied_and_default_frameworks_are_kueues() {
        for implies_pods in ["deployment", "statefulset", integrations::LEADERWORKERSET] {
            let c = OperatorConfig::from_yaml(
                "cfg",
                &format!("integrations: {{frameworks: [batch/job, {implies_pods}]}}"),
            )
            .unwrap();
            assert!(
                c.manages("pod"),
                "{implies_pods} turns the pod integration on"
            );
        }
        // An empty list is Kueue's default, batch/job alone.
        let empty = OperatorConfig::from_yaml("cfg", "integrations: {frameworks: []}").unwrap();
        assert!(empty.manages("batch/job"));
        assert!(!empty.manages(integrations::JOBSET) && !empty.manages("pod"));
        let default = OperatorConfig::default();
        for name in DEFAULT_FRAMEWORKS {
            assert!(
                default.manages(name),
                "{name} is on without a Configuration"
            );
        }
        let lws = OperatorConfig::from_yaml(
            "cfg",
            "integrations: {frameworks: [batch/job, leaderworkerset.x-k8s.io/leaderworkerset, kubeflow.org/mpijob], \
             externalFrameworks: [AppWrapper.v1beta2.workload.codeflare.dev]}",
        )
        .unwrap();
        assert!(lws.manages(integrations::LEADERWORKERSET) && !lws.manages(integrations::TRAINJOB));
        // A framework Sluice lacks, and an external one, still make their kinds' children theirs.
        assert!(
            lws.integrations
                .manages_owner("kubeflow.org/v2beta1", "MPIJob")
        );
        assert!(
            lws.integrations
                .manages_owner("workload.codeflare.dev/v1beta2", "AppWrapper")
        );
        assert!(
            !lws.integrations
                .manages_owner("jobset.x-k8s.io/v1alpha2", "JobSet")
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let e = OperatorConfig::from_yaml("cfg", "waitForPodsReady: {timeout: soon}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("waitForPodsReady.timeout"), "{e}");
        let e = OperatorConfig::from_yaml(
            "cfg",
            "waitForPodsReady: {requeuingStrategy: {timestamp: Later}}",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("requeuingStrategy.timestamp"), "{e}");
    }

    #[test]
    fn block_admission_and_recovery_timeout_follow_kueue_defaults() {
        let c = OperatorConfig::from_yaml(
            "cfg",
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nwaitForPodsReady: {timeout: 3m}",
        )
        .unwrap();
        let w = c.wait_for_pods_ready.unwrap();
        assert!(!w.block_admission && !c.engine.block_admission);
        assert_eq!(
            w.recovery(),
            Some(Duration::from_secs(180)),
            "defaults to the timeout"
        );
        let c = OperatorConfig::from_yaml(
            "cfg",
            "waitForPodsReady: {blockAdmission: true, recoveryTimeout: 45s}",
        )
        .unwrap();
        assert!(c.engine.block_admission);
        let w = c.wait_for_pods_ready.unwrap();
        assert_eq!(w.recovery(), Some(Duration::from_secs(45)));
        let none = OperatorConfig::from_yaml("cfg", "waitForPodsReady: {recoveryTimeout: 0s}")
            .unwrap()
            .wait_for_pods_ready
            .unwrap();
        assert_eq!(none.recovery(), None);
        let off = OperatorConfig::from_yaml(
            "cfg",
            "waitForPodsReady: {enable: false, blockAdmission: true}",
        )
        .unwrap();
        assert!(
            !off.engine.block_admission,
            "nothing blocks when waitForPodsReady is off"
        );
        let e = OperatorConfig::from_yaml("cfg", "waitForPodsReady: {recoveryTimeout: -1m}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("waitForPodsReady.recoveryTimeout"), "{e}");
    }

    #[test]
    fn wait_for_pods_ready_is_on_by_default_and_can_be_disabled() {
        assert!(OperatorConfig::default().wait_for_pods_ready.is_some());
        let c = OperatorConfig::from_yaml("cfg", "waitForPodsReady: {enable: false}").unwrap();
        assert!(c.wait_for_pods_ready.is_none());
    }

    #[test]
    fn object_retention_policies_are_read_and_a_negative_one_refused() {
        let c = OperatorConfig::from_yaml(
            "cfg",
            "objectRetentionPolicies: {workloads: {afterFinished: 1h30m, afterDeactivatedByKueue: 0s}}",
        )
        .unwrap();
        assert_eq!(
            c.workload_retention,
            WorkloadRetention {
                after_finished: Some(Duration::from_secs(5400)),
                after_deactivated_by_kueue: Some(Duration::ZERO),
            }
        );
        assert_eq!(
            OperatorConfig::from_yaml("cfg", "{}")
                .unwrap()
                .workload_retention,
            WorkloadRetention::default()
        );
        let off = OperatorConfig::from_yaml(
            "cfg",
            "{objectRetentionPolicies: {workloads: {afterFinished: 1m}}, featureGates: {ObjectRetentionPolicies: false}}",
        )
        .unwrap();
        assert_eq!(off.workload_retention, WorkloadRetention::default());
        let e = OperatorConfig::from_yaml(
            "cfg",
            "objectRetentionPolicies: {workloads: {afterFinished: -1m}}",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("objectRetentionPolicies.workloads.afterFinished"),
            "{e}"
        );
    }

    #[test]
    fn quota_check_strategy_is_read_under_its_gate_and_checked_as_kueue_checks_it() {
        let ignore = |yaml: &str| {
            OperatorConfig::from_yaml("cfg", yaml).map(|c| c.engine.ignore_undeclared_resources)
        };
        assert!(ignore("resources: {quotaCheckStrategy: IgnoreUndeclared}").unwrap());
        assert!(!ignore("resources: {quotaCheckStrategy: BlockUndeclared}").unwrap());
        assert!(!ignore("{}").unwrap());
        // With the gate off Kueue neither reads nor checks the field.
        assert!(!ignore("{resources: {quotaCheckStrategy: Sometimes}, featureGates: {QuotaCheckStrategy: false}}")
                .unwrap());
        let e = ignore("resources: {quotaCheckStrategy: Sometimes}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("resources.quotaCheckStrategy: Unsupported value: \"Sometimes\""),
            "{e}"
        );
        let e = ignore(
            "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [example.com/]}",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared"
            ),
            "{e}"
        );
    }
}
