//! Kueue's well-known label, annotation, finalizer, scheduling-gate, condition-type and reason strings, so that no
//! other crate spells them by hand.

// ---- Job labels and annotations ----

/// Label naming the LocalQueue a job is submitted to.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Name of the LocalQueue used when a namespace's jobs carry no queue label.
pub const DEFAULT_LOCAL_QUEUE_NAME: &str = "default";
/// Label naming the WorkloadPriorityClass of a job.
pub const PRIORITY_CLASS_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// Name of the default WorkloadPriorityClass.
pub const DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME: &str = "default";
/// Label (and annotation) naming a prebuilt Workload for a job.
pub const PREBUILT_WORKLOAD_LABEL: &str = "kueue.x-k8s.io/prebuilt-workload-name";
/// Annotation form of [`PREBUILT_WORKLOAD_LABEL`].
pub const PREBUILT_WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/prebuilt-workload-name";
/// Label giving a job's maximum execution time in seconds.
pub const MAX_EXEC_TIME_SECONDS_LABEL: &str = "kueue.x-k8s.io/max-exec-time-seconds";
/// Annotation enabling partial admission of a batch Job down to this parallelism.
pub const JOB_MIN_PARALLELISM_ANNOTATION: &str = "kueue.x-k8s.io/job-min-parallelism";
/// Annotation keeping a Job's completions equal to its (partially admitted) parallelism.
pub const JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION: &str =
    "kueue.x-k8s.io/job-completions-equal-parallelism";
/// Annotation marking an elastic job.
pub const ELASTIC_JOB_ANNOTATION: &str = "kueue.x-k8s.io/elastic-job";
/// Annotation listing controllers that gate a job's admission.
pub const ADMISSION_GATED_BY_ANNOTATION: &str = "kueue.x-k8s.io/admission-gated-by";
/// Prefix of job annotations passed on to ProvisioningRequests.
pub const PROVREQ_ANNOTATION_PREFIX: &str = "provreq.kueue.x-k8s.io/";
/// Annotation marking a job that is being stopped.
pub const STOPPING_ANNOTATION: &str = "kueue.x-k8s.io/stopping";
/// Annotation allowing forceful deletion of a pod.
pub const SAFE_TO_FORCEFULLY_DELETE_ANNOTATION: &str = "kueue.x-k8s.io/safe-to-forcefully-delete";

// ---- Pod set (pod template) annotations for topology-aware scheduling ----

/// Topology level all pods of the pod set must share.
pub const PODSET_REQUIRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";
/// Topology level the pods should preferably share.
pub const PODSET_PREFERRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// "true": scheduled by TAS without a topology constraint.
pub const PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-unconstrained-topology";
/// Topology level each slice of the pod set must share.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology";
/// Pods per slice.
pub const PODSET_SLICE_SIZE_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-size";
/// JSON list of multi-level slice constraints.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// Pod sets with the same group name are placed together.
pub const PODSET_GROUP_NAME_ANNOTATION: &str = "kueue.x-k8s.io/podset-group-name";

// ---- Plain pod groups ----

/// Label naming the group of a plain pod.
pub const POD_GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// Annotation with the total pod count of a group.
pub const POD_GROUP_TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";
/// Annotation ("true") admitting a group as soon as its first pods exist.
pub const POD_GROUP_FAST_ADMISSION_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-fast-admission";
/// Annotation ("true") marking a serving pod group.
pub const POD_GROUP_SERVING_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-serving";
/// Annotation ("false") making a failed pod end its group.
pub const RETRIABLE_IN_GROUP_ANNOTATION: &str = "kueue.x-k8s.io/retriable-in-group";
/// Annotation holding the hash of a pod's role in its group.
pub const ROLE_HASH_ANNOTATION: &str = "kueue.x-k8s.io/role-hash";
/// Label marking pods managed by Kueue; also the finalizer of such pods.
pub const MANAGED_LABEL: &str = "kueue.x-k8s.io/managed";
/// Finalizer Kueue puts on the plain pods it manages.
pub const MANAGED_FINALIZER: &str = "kueue.x-k8s.io/managed";
/// Scheduling gate holding plain pods until admission.
pub const ADMISSION_SCHEDULING_GATE: &str = "kueue.x-k8s.io/admission";

// ---- Injected into admitted pods ----

/// Label naming a pod's pod set.
pub const PODSET_LABEL: &str = "kueue.x-k8s.io/podset";
/// Label naming a pod's LocalQueue.
pub const LOCAL_QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/local-queue-name";
/// Label naming a pod's ClusterQueue.
pub const CLUSTER_QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/cluster-queue-name";
/// Annotation naming a pod's Workload (topology-aware scheduling).
pub const WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";
/// Scheduling gate held until topology-aware placement is decided.
pub const TOPOLOGY_SCHEDULING_GATE: &str = "kueue.x-k8s.io/topology";
/// Scheduling gate of elastic jobs.
pub const ELASTIC_JOB_SCHEDULING_GATE: &str = "kueue.x-k8s.io/elastic-job";
/// Annotation with the offset of a pod set's pod indexes.
pub const POD_INDEX_OFFSET_ANNOTATION: &str = "kueue.x-k8s.io/pod-index-offset";
/// Label with a pod's index in its group.
pub const POD_GROUP_POD_INDEX_LABEL: &str = "kueue.x-k8s.io/pod-group-pod-index";
/// Annotation naming the label that holds a pod's index in its group.
pub const POD_GROUP_POD_INDEX_LABEL_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-pod-index-label";

// ---- Workload labels and annotations ----

/// Label with the UID of a workload's job.
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";
/// Annotation with the GroupVersionKind of a workload's owner job.
pub const JOB_OWNER_GVK_ANNOTATION: &str = "kueue.x-k8s.io/job-owner-gvk";
/// Annotation with the name of a workload's owner job.
pub const JOB_OWNER_NAME_ANNOTATION: &str = "kueue.x-k8s.io/job-owner-name";
/// Annotation with the index of a workload among its owner's (one per LeaderWorkerSet group).
pub const COMPONENT_WORKLOAD_INDEX_ANNOTATION: &str = "kueue.x-k8s.io/component-workload-index";
/// Annotation with a signed priority boost (alpha gate PriorityBoost).
pub const PRIORITY_BOOST_ANNOTATION: &str = "kueue.x-k8s.io/priority-boost";
/// Annotation naming a workload slice (elastic jobs).
pub const WORKLOAD_SLICE_NAME_ANNOTATION: &str = "kueue.x-k8s.io/workload-slice-name";
/// Label with the origin cluster of a MultiKueue workload.
pub const MULTIKUEUE_ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
/// Annotation restricting the flavors a workload may use.
pub const WORKLOAD_ALLOWED_RESOURCE_FLAVORS_ANNOTATION: &str =
    "kueue.x-k8s.io/workload-allowed-resource-flavors";
/// Label naming the parent of a concurrent-admission workload.
pub const CONCURRENT_ADMISSION_PARENT_LABEL: &str = "kueue.x-k8s.io/concurrent-admission-parent";
/// Controller name (and managedBy value) of MultiKueue.
pub const MULTIKUEUE_CONTROLLER_NAME: &str = "kueue.x-k8s.io/multikueue";

// ---- Finalizers ----

/// Finalizer on ClusterQueues, LocalQueues, ResourceFlavors and Workloads that are in use.
pub const RESOURCE_IN_USE_FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";

/// Workload condition types.
pub mod condition {
    /// Quota is reserved in a ClusterQueue.
    pub const QUOTA_RESERVED: &str = "QuotaReserved";
    /// Quota is reserved and all admission checks are ready.
    pub const ADMITTED: &str = "Admitted";
    /// The workload was evicted.
    pub const EVICTED: &str = "Evicted";
    /// The workload was preempted.
    pub const PREEMPTED: &str = "Preempted";
    /// The workload was requeued.
    pub const REQUEUED: &str = "Requeued";
    /// All pods are ready.
    pub const PODS_READY: &str = "PodsReady";
    /// The workload finished.
    pub const FINISHED: &str = "Finished";
    /// The workload is about to be deactivated.
    pub const DEACTIVATION_TARGET: &str = "DeactivationTarget";
    /// The workload waits for replacements of failed pods.
    pub const WAITING_FOR_REPLACEMENT_PODS: &str = "WaitingForReplacementPods";
    /// Preemption by the workload is blocked by a closed gate.
    pub const BLOCKED_ON_PREEMPTION_GATES: &str = "BlockedOnPreemptionGates";
    /// ClusterQueue, LocalQueue and AdmissionCheck condition type.
    pub const ACTIVE: &str = "Active";
}

/// Condition reasons.
pub mod reason {
    /// QuotaReserved=True.
    pub const QUOTA_RESERVED: &str = "QuotaReserved";
    /// QuotaReserved=False (deprecated generic reason).
    pub const PENDING: &str = "Pending";
    /// QuotaReserved=False: not enough free quota.
    pub const WAITING_FOR_QUOTA: &str = "WaitingForQuota";
    /// QuotaReserved=False: no flavor matches the pods.
    pub const NO_MATCHING_FLAVOR: &str = "NoMatchingFlavor";
    /// QuotaReserved=False: the request exceeds what the queue can ever provide.
    pub const EXCEEDS_MAX_QUOTA: &str = "ExceedsMaxQuota";
    /// QuotaReserved=False: no topology placement found.
    pub const TOPOLOGY_PLACEMENT_FAILED: &str = "TopologyPlacementFailed";
    /// QuotaReserved=False: waiting for preempted workloads to go.
    pub const WAITING_FOR_PREEMPTED_WORKLOADS: &str = "WaitingForPreemptedWorkloads";
    /// QuotaReserved=False: configuration problem.
    pub const MISCONFIGURED: &str = "Misconfigured";
    /// QuotaReserved=False: the workload is suspended.
    pub const SUSPENDED: &str = "Suspended";
    /// QuotaReserved=False: not evaluated yet.
    pub const PENDING_EVALUATION: &str = "PendingEvaluation";
    /// QuotaReserved=False: waiting for other workloads' pods to become ready.
    pub const WAITING_FOR_PODS_READY: &str = "WaitingForPodsReady";
    /// QuotaReserved=False: the queue cannot admit it.
    pub const INADMISSIBLE: &str = "Inadmissible";
    /// QuotaReserved=False: the queue is on hold.
    pub const ON_HOLD: &str = "OnHold";
    /// QuotaReserved=False: admission gated by annotation.
    pub const ADMISSION_GATED: &str = "AdmissionGated";
    /// Admitted=True.
    pub const ADMITTED: &str = "Admitted";
    /// Admitted=False: no quota reservation.
    pub const NO_RESERVATION: &str = "NoReservation";
    /// Admitted=False: admission checks not all ready.
    pub const UNSATISFIED_ADMISSION_CHECKS: &str = "UnsatisfiedAdmissionChecks";
    /// Admitted=False: delayed topology requests pending.
    pub const PENDING_DELAYED_TOPOLOGY_REQUESTS: &str = "PendingDelayedTopologyRequests";
    /// Evicted: preempted.
    pub const EVICTED_BY_PREEMPTION: &str = "Preempted";
    /// Evicted: pods not ready in time.
    pub const PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
    /// Evicted: an admission check asked for it.
    pub const ADMISSION_CHECK: &str = "AdmissionCheck";
    /// Evicted: the ClusterQueue was stopped.
    pub const CLUSTER_QUEUE_STOPPED: &str = "ClusterQueueStopped";
    /// Evicted: the LocalQueue was stopped.
    pub const LOCAL_QUEUE_STOPPED: &str = "LocalQueueStopped";
    /// Evicted: the workload was deactivated.
    pub const DEACTIVATED: &str = "Deactivated";
    /// Evicted: node failures.
    pub const NODE_FAILURES: &str = "NodeFailures";
    /// Evicted on the MultiKueue manager cluster.
    pub const EVICTED_ON_MANAGER_CLUSTER: &str = "EvictedOnManagerCluster";
    /// Evicted to migrate flavors (concurrent admission).
    pub const FLAVOR_MIGRATION: &str = "FlavorMigration";
    /// Deactivation cause: maximum execution time exceeded.
    pub const MAXIMUM_EXECUTION_TIME_EXCEEDED: &str = "MaximumExecutionTimeExceeded";
    /// Deactivation cause: requeuing limit exceeded.
    pub const REQUEUING_LIMIT_EXCEEDED: &str = "RequeuingLimitExceeded";
    /// Preempted: within the ClusterQueue.
    pub const IN_CLUSTER_QUEUE: &str = "InClusterQueue";
    /// Preempted: to reclaim quota in the cohort.
    pub const IN_COHORT_RECLAMATION: &str = "InCohortReclamation";
    /// Preempted: by fair sharing.
    pub const IN_COHORT_FAIR_SHARING: &str = "InCohortFairSharing";
    /// Preempted: by a borrowing workload (borrowWithinCohort).
    pub const IN_COHORT_RECLAIM_WHILE_BORROWING: &str = "InCohortReclaimWhileBorrowing";
    /// Requeued: reactivated.
    pub const REACTIVATED: &str = "Reactivated";
    /// Requeued: backoff finished.
    pub const BACKOFF_FINISHED: &str = "BackoffFinished";
    /// Requeued: the ClusterQueue restarted.
    pub const CLUSTER_QUEUE_RESTARTED: &str = "ClusterQueueRestarted";
    /// Requeued: the LocalQueue restarted.
    pub const LOCAL_QUEUE_RESTARTED: &str = "LocalQueueRestarted";
    /// PodsReady=True: started.
    pub const STARTED: &str = "Started";
    /// PodsReady=True: recovered.
    pub const RECOVERED: &str = "Recovered";
    /// PodsReady=False: waiting for start.
    pub const WAIT_FOR_START: &str = "WaitForStart";
    /// PodsReady=False: waiting for recovery.
    pub const WAIT_FOR_RECOVERY: &str = "WaitForRecovery";
    /// Finished: succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Finished: failed.
    pub const FAILED: &str = "Failed";
    /// Finished: out of sync with its job.
    pub const OUT_OF_SYNC: &str = "OutOfSync";
    /// Finished: the owner job is gone.
    pub const OWNER_NOT_FOUND: &str = "OwnerNotFound";
    /// Finished: replaced by a newer workload slice.
    pub const WORKLOAD_SLICE_REPLACED: &str = "WorkloadSliceReplaced";
    /// BlockedOnPreemptionGates reason.
    pub const PREEMPTION_GATED: &str = "PreemptionGated";
    /// Active=True on queues and checks.
    pub const READY: &str = "Ready";
    /// Active=False: queue stopped.
    pub const STOPPED: &str = "Stopped";
    /// Active=False: queue being deleted.
    pub const TERMINATING: &str = "Terminating";
    /// Active=False: a flavor is missing.
    pub const FLAVOR_NOT_FOUND: &str = "FlavorNotFound";
    /// Active=False: an admission check is missing.
    pub const ADMISSION_CHECK_NOT_FOUND: &str = "AdmissionCheckNotFound";
    /// Active=False: an admission check is inactive.
    pub const ADMISSION_CHECK_INACTIVE: &str = "AdmissionCheckInactive";
    /// Active=False: a topology is missing.
    pub const TOPOLOGY_NOT_FOUND: &str = "TopologyNotFound";
    /// Active=False: more than one MultiKueue admission check.
    pub const MULTIPLE_MULTIKUEUE_ADMISSION_CHECKS: &str = "MultipleMultiKueueAdmissionChecks";
    /// Active=False: MultiKueue check applied per flavor.
    pub const MULTIKUEUE_ADMISSION_CHECK_APPLIED_PER_FLAVOR: &str =
        "MultiKueueAdmissionCheckAppliedPerFlavor";
    /// Active=False: MultiKueue together with ProvisioningRequest.
    pub const MULTIKUEUE_WITH_PROVISIONING_REQUEST: &str = "MultiKueueWithProvisioningRequest";
    /// Active=False: unknown cause.
    pub const UNKNOWN: &str = "Unknown";
}
