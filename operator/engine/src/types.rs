//! Public, plain-data model of the engine: objects, events, decisions and status views.

use std::collections::BTreeMap;
use std::fmt;

pub use sluice_sdk::policy::TopologyMode;

/// Milliseconds since the Unix epoch (virtual or real).
pub type Time = i64;
/// cpu in milli-units, everything else in base units (bytes, GPUs, pods).
pub type Quantity = i64;
/// Resource name to quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Engine-wide settings (Kueue's Configuration subset that affects admission).
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Fair sharing is enabled when set.
    pub fair_sharing: Option<FairSharingConfig>,
    /// Kueue's PartialAdmission feature gate (on by default).
    pub partial_admission: bool,
    /// Kueue's PrioritizePreemptorWorkloads feature gate (alpha, off by default): a workload whose preemptions
    /// were issued goes first in the fair-sharing order.
    pub prioritize_preemptor_workloads: bool,
    /// Kueue's PriorityBoost feature gate (alpha, off by default): the effective priority is the priority plus
    /// the Workload's `kueue.x-k8s.io/priority-boost`.
    pub priority_boost: bool,
    /// Kueue's SchedulingEquivalenceHashing feature gate (beta, on by default): in a BestEffortFIFO ClusterQueue,
    /// once a workload fails to fit (or finds no preemption candidates), the pending workloads of the same
    /// scheduling shape go to the inadmissible list unevaluated until its workloads are requeued.
    pub scheduling_equivalence_hashing: bool,
    /// Kueue's `waitForPodsReady.blockAdmission`: once a workload fits while another that holds quota is not
    /// PodsReady, that one waits ("Waiting") and nothing more is admitted until every holder is PodsReady.
    pub block_admission: bool,
    /// Kueue's `admissionFairSharing` (with its AdmissionFairSharing gate on): ClusterQueues whose
    /// `admissionScope.admissionMode` is UsageBasedAdmissionFairSharing order by LocalQueue usage.
    pub admission_fair_sharing: Option<AdmissionFairSharingConfig>,
    /// Sluice: evict the workloads on a GPU its node agent reports degrading (still working, failing soon),
    /// with their checkpoint grace, so they move before it fails. Off: they stay, and only new placements
    /// avoid the GPU.
    pub evict_on_degraded_gpus: bool,
    /// Kueue's `resources.quotaCheckStrategy: IgnoreUndeclared` (with its QuotaCheckStrategy gate on): a resource
    /// that no resource group of the ClusterQueue covers is left out of the quota check instead of keeping the
    /// workload out.
    pub ignore_undeclared_resources: bool,
}

/// Kueue's `admissionFairSharing` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionFairSharingConfig {
    /// `usageHalfLifeTime` in milliseconds (0: usage is reset, ordering falls back to priority and time).
    pub usage_half_life: Time,
    /// `usageSamplingInterval` in milliseconds (Kueue's default 5 minutes).
    pub usage_sampling_interval: Time,
    /// `resourceWeights`: a resource not listed weighs 1.
    pub resource_weights: BTreeMap<String, f64>,
}

impl Default for AdmissionFairSharingConfig {
    fn default() -> Self {
        Self {
            usage_half_life: 0,
            usage_sampling_interval: 5 * 60 * 1000,
            resource_weights: BTreeMap::new(),
        }
    }
}

/// A LocalQueue's consumed resources under admission fair sharing (its `status.fairSharing.admissionFairSharingStatus`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ConsumedUsage {
    /// Decayed usage per resource, in base units (cpu in cores, memory in bytes).
    pub resources: BTreeMap<String, f64>,
    /// When it was brought up to date.
    pub last_update: Time,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            fair_sharing: None,
            partial_admission: true,
            prioritize_preemptor_workloads: false,
            priority_boost: false,
            scheduling_equivalence_hashing: true,
            block_admission: false,
            admission_fair_sharing: None,
            evict_on_degraded_gpus: false,
            ignore_undeclared_resources: false,
        }
    }
}

/// Fair sharing settings.
#[derive(Clone, Debug, PartialEq)]
pub struct FairSharingConfig {
    /// Preemption strategies, tried in order.
    pub preemption_strategies: Vec<FairSharingStrategy>,
}

impl Default for FairSharingConfig {
    fn default() -> Self {
        Self {
            preemption_strategies: vec![
                FairSharingStrategy::LessThanOrEqualToFinalShare,
                FairSharingStrategy::LessThanInitialShare,
            ],
        }
    }
}

/// Fair-sharing preemption strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairSharingStrategy {
    /// Preemptor share after admission <= target share after removal.
    LessThanOrEqualToFinalShare,
    /// Preemptor share after admission < target share before removal.
    LessThanInitialShare,
}

/// A ResourceFlavor.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Flavor {
    /// Object name.
    pub name: String,
    /// Node labels the flavor stands for.
    pub node_labels: BTreeMap<String, String>,
    /// Taints pods must tolerate.
    pub node_taints: Vec<Taint>,
    /// Tolerations injected into pods on admission (they also tolerate the flavor's taints).
    pub tolerations: Vec<Toleration>,
    /// Topology name for TAS flavors (recorded, not evaluated).
    pub topology_name: Option<String>,
}

/// Taint effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    /// NoSchedule.
    NoSchedule,
    /// PreferNoSchedule (never blocks a flavor).
    PreferNoSchedule,
    /// NoExecute.
    NoExecute,
}

/// A node taint.
#[derive(Clone, Debug, PartialEq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value.
    pub value: Option<String>,
    /// Effect.
    pub effect: TaintEffect,
}

/// Toleration operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum TolerationOperator {
    /// Key and value must match.
    #[default]
    Equal,
    /// Key must exist (any value).
    Exists,
}

/// A pod toleration.
#[derive(Clone, Debug, PartialEq, Default, Hash)]
pub struct Toleration {
    /// Key (None with Exists tolerates everything).
    pub key: Option<String>,
    /// Operator.
    pub operator: TolerationOperator,
    /// Value.
    pub value: Option<String>,
    /// Effect (None = all effects).
    pub effect: Option<TaintEffect>,
}

/// Quota of one resource in one flavor.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResourceQuota {
    /// Resource name.
    pub name: String,
    /// Nominal quota.
    pub nominal: Quantity,
    /// Max borrowed beyond nominal (None = unlimited).
    pub borrowing_limit: Option<Quantity>,
    /// Max lent to the cohort (None = all).
    pub lending_limit: Option<Quantity>,
}

/// Quotas of one flavor in a resource group.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FlavorQuotas {
    /// Flavor name.
    pub flavor: String,
    /// One entry per covered resource, in coveredResources order.
    pub resources: Vec<ResourceQuota>,
}

/// A resource group.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResourceGroup {
    /// Resources covered by the group.
    pub covered_resources: Vec<String>,
    /// Flavors in preference order.
    pub flavors: Vec<FlavorQuotas>,
}

/// Queueing strategy of a ClusterQueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QueueingStrategy {
    /// The head blocks the queue.
    StrictFIFO,
    /// Inadmissible heads are set aside.
    #[default]
    BestEffortFIFO,
}

/// Stop policy of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StopPolicy {
    /// Running.
    #[default]
    None,
    /// No new admissions.
    Hold,
    /// No new admissions and admitted workloads are evicted.
    HoldAndDrain,
}

/// Flavor fungibility policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FungibilityPolicy {
    /// Stop at the current flavor.
    MayStopSearch,
    /// Keep looking for a better flavor.
    TryNextFlavor,
}

/// Preference between borrowing and preemption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlavorPreference {
    /// Prefer borrowing.
    BorrowingOverPreemption,
    /// Prefer preemption.
    PreemptionOverBorrowing,
}

/// Flavor fungibility settings.
#[derive(Clone, Debug, PartialEq)]
pub struct FlavorFungibility {
    /// What to do when a flavor fits by borrowing.
    pub when_can_borrow: FungibilityPolicy,
    /// What to do when a flavor fits by preempting.
    pub when_can_preempt: FungibilityPolicy,
    /// Preference when trying all flavors.
    pub preference: Option<FlavorPreference>,
}

impl Default for FlavorFungibility {
    fn default() -> Self {
        Self {
            when_can_borrow: FungibilityPolicy::MayStopSearch,
            when_can_preempt: FungibilityPolicy::TryNextFlavor,
            preference: None,
        }
    }
}

/// reclaimWithinCohort policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReclaimPolicy {
    /// Never.
    #[default]
    Never,
    /// Only lower priority.
    LowerPriority,
    /// Any priority.
    Any,
}

/// withinClusterQueue policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WithinCqPolicy {
    /// Never.
    #[default]
    Never,
    /// Only lower priority.
    LowerPriority,
    /// Lower priority, or equal priority and newer.
    LowerOrNewerEqualPriority,
}

/// borrowWithinCohort policy kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BorrowWithinCohortPolicy {
    /// Never.
    #[default]
    Never,
    /// Lower priority.
    LowerPriority,
}

/// borrowWithinCohort settings.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct BorrowWithinCohort {
    /// Policy.
    pub policy: BorrowWithinCohortPolicy,
    /// Only workloads with priority <= threshold may be preempted while borrowing.
    pub max_priority_threshold: Option<i32>,
}

/// Preemption settings of a ClusterQueue.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PreemptionPolicy {
    /// reclaimWithinCohort.
    pub reclaim_within_cohort: ReclaimPolicy,
    /// withinClusterQueue.
    pub within_cluster_queue: WithinCqPolicy,
    /// borrowWithinCohort.
    pub borrow_within_cohort: BorrowWithinCohort,
}

/// A ClusterQueue.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterQueue {
    /// Object name.
    pub name: String,
    /// Cohort name.
    pub cohort: Option<String>,
    /// Resource groups.
    pub resource_groups: Vec<ResourceGroup>,
    /// Queueing strategy.
    pub queueing_strategy: QueueingStrategy,
    /// Namespace selector: None = no namespace (Kueue's nil, also the `Default`), empty = all.
    pub namespace_selector: Option<LabelSelector>,
    /// Flavor fungibility.
    pub flavor_fungibility: FlavorFungibility,
    /// Preemption policy.
    pub preemption: PreemptionPolicy,
    /// Stop policy.
    pub stop_policy: StopPolicy,
    /// Fair sharing weight.
    pub fair_weight: f64,
    /// Admission checks: with any, a reservation counts as admitted only once the workload's checks pass
    /// (`Workload::admitted`).
    pub admission_checks: Vec<String>,
    /// `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`: the queue is ordered by LocalQueue usage
    /// (when admission fair sharing is configured).
    pub admission_fair_sharing: bool,
}

impl Default for ClusterQueue {
    fn default() -> Self {
        Self {
            name: String::new(),
            cohort: None,
            resource_groups: Vec::new(),
            queueing_strategy: QueueingStrategy::BestEffortFIFO,
            namespace_selector: None,
            flavor_fungibility: FlavorFungibility::default(),
            preemption: PreemptionPolicy::default(),
            stop_policy: StopPolicy::None,
            fair_weight: 1.0,
            admission_checks: Vec::new(),
            admission_fair_sharing: false,
        }
    }
}

/// A Cohort object.
#[derive(Clone, Debug, PartialEq)]
pub struct Cohort {
    /// Object name.
    pub name: String,
    /// Parent cohort.
    pub parent: Option<String>,
    /// Extra shared quota.
    pub resource_groups: Vec<ResourceGroup>,
    /// Fair sharing weight.
    pub fair_weight: f64,
}

impl Default for Cohort {
    fn default() -> Self {
        Self {
            name: String::new(),
            parent: None,
            resource_groups: Vec::new(),
            fair_weight: 1.0,
        }
    }
}

/// Label selector operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelSelectorOperator {
    /// Value in set.
    In,
    /// Value not in set (or key absent).
    NotIn,
    /// Key present.
    Exists,
    /// Key absent.
    DoesNotExist,
}

/// One label selector requirement.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelSelectorRequirement {
    /// Key.
    pub key: String,
    /// Operator.
    pub operator: LabelSelectorOperator,
    /// Values.
    pub values: Vec<String>,
}

/// Kubernetes label selector.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LabelSelector {
    /// Exact matches.
    pub match_labels: BTreeMap<String, String>,
    /// Expressions (ANDed).
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// Whether the labels satisfy the selector (empty selector matches everything).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let val = labels.get(&r.key);
                match r.operator {
                    LabelSelectorOperator::In => val.is_some_and(|v| r.values.contains(v)),
                    LabelSelectorOperator::NotIn => val.is_none_or(|v| !r.values.contains(v)),
                    LabelSelectorOperator::Exists => val.is_some(),
                    LabelSelectorOperator::DoesNotExist => val.is_none(),
                }
            })
    }
}

/// A LocalQueue.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LocalQueue {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Target ClusterQueue.
    pub cluster_queue: String,
    /// Stop policy.
    pub stop_policy: StopPolicy,
    /// `spec.fairSharing.weight` for admission fair sharing (None: 1).
    pub fair_sharing_weight: Option<f64>,
}

/// A Namespace.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Namespace {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// Node selector operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeSelectorOperator {
    /// Value in set.
    In,
    /// Value not in set.
    NotIn,
    /// Key exists.
    Exists,
    /// Key absent.
    DoesNotExist,
    /// Integer value greater than.
    Gt,
    /// Integer value less than.
    Lt,
}

/// One node selector requirement.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct NodeSelectorRequirement {
    /// Key.
    pub key: String,
    /// Operator.
    pub operator: NodeSelectorOperator,
    /// Values.
    pub values: Vec<String>,
}

/// One node selector term (AND of requirements).
#[derive(Clone, Debug, PartialEq, Default, Hash)]
pub struct NodeSelectorTerm {
    /// Requirements.
    pub match_expressions: Vec<NodeSelectorRequirement>,
}

/// A pod set of a workload.
#[derive(Clone, Debug, PartialEq, Default, Hash)]
pub struct PodSet {
    /// Name.
    pub name: String,
    /// Pod count.
    pub count: i32,
    /// Minimum count for partial admission.
    pub min_count: Option<i32>,
    /// Per-pod requests.
    pub requests: ResourceList,
    /// Pod nodeSelector.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity (OR of terms).
    pub required_affinity: Vec<NodeSelectorTerm>,
    /// Pod tolerations.
    pub tolerations: Vec<Toleration>,
    /// Topology request (None: TAS flavors place it unconstrained, as Kueue's implicit default).
    pub topology: Option<PodSetTopology>,
}

/// A pod set's topology request (Kueue's `topologyRequest`, plus Sluice's NVLink requirement).
#[derive(Clone, Debug, PartialEq, Default, Hash)]
pub struct PodSetTopology {
    /// Required, preferred or unconstrained.
    pub mode: TopologyMode,
    /// Node label of the requested level (required/preferred).
    pub level: Option<String>,
    /// Each pod's GPUs on a node must share one NVLink island.
    pub nvlink: bool,
    /// Level each slice must fit in (`podSetSliceRequiredTopology`, or the first of
    /// `podsetSliceRequiredTopologyConstraints`).
    pub slice_level: Option<String>,
    /// Pods per slice (`podSetSliceSize`); 0 or absent with a slice level fails placement.
    pub slice_size: Option<i32>,
    /// `podSetGroupName`: pod sets sharing it are placed together as one unit.
    pub group: Option<String>,
}

impl PodSetTopology {
    /// Kueue's explicit TAS request: a required, preferred, unconstrained or slice request
    /// (or Sluice's NVLink requirement, which only a TAS flavor can honour).
    pub fn explicit(&self) -> bool {
        self.mode != TopologyMode::None
            || self.slice_level.is_some()
            || self.slice_size.is_some()
            || self.nvlink
    }
}

/// A Kubernetes Node as the engine sees it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Node {
    /// Node name.
    pub name: String,
    /// Labels (topology levels, flavor labels).
    pub labels: BTreeMap<String, String>,
    /// Allocatable resources (cpu in milli-units).
    pub allocatable: ResourceList,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Ready condition is True.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
}

/// A Kueue Topology object: node labels of its levels, outermost first.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TopologyLevels {
    /// Topology name.
    pub name: String,
    /// Node label keys, outermost (e.g. block) first.
    pub levels: Vec<String>,
}

/// One topology domain of an assignment (Kueue's v1beta1 `domains[]` form).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopologyDomain {
    /// Domain value per assignment level.
    pub values: Vec<String>,
    /// Pods in the domain.
    pub count: i32,
}

/// Where the pods of one pod set go: Kueue's topology assignment (per-domain form).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TopologyAssignment {
    /// Node labels of the levels.
    pub levels: Vec<String>,
    /// Domains with pod counts.
    pub domains: Vec<TopologyDomain>,
}

/// Pods of a pod set on one node, with the GPUs chosen for them.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodePlacement {
    /// Node name.
    pub node: String,
    /// Pods on the node.
    pub pods: i32,
    /// Whole GPUs held (node GPU indexes), `gpus_per_pod` per pod in pod order; empty when the node has no GPU inventory.
    pub gpus: Vec<u32>,
    /// GPU index of each MIG instance held, grouped by pod.
    pub mig_gpus: Vec<u32>,
}

/// Topology placement of one pod set of an admitted workload.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PodSetPlacement {
    /// Pod set name.
    pub pod_set: String,
    /// TAS flavor the pod set was placed in.
    pub flavor: String,
    /// Per-pod requests the nodes were charged for.
    pub per_pod: ResourceList,
    /// Kueue's topology assignment.
    pub assignment: TopologyAssignment,
    /// Per node pods and GPUs.
    pub nodes: Vec<NodePlacement>,
}
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Workload {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// LocalQueue name.
    pub queue_name: String,
    /// Priority.
    pub priority: i32,
    /// Creation time.
    pub creation_time: Time,
    /// spec.active.
    pub active: bool,
    /// Pod sets.
    pub pod_sets: Vec<PodSet>,
    /// UID of the owning job (Kueue's `kueue.x-k8s.io/job-uid` label), shown in preemption messages.
    pub job_uid: Option<String>,
    /// When its recorded admission reserved quota (the `QuotaReserved` condition's lastTransitionTime), for a
    /// workload that arrives already admitted: preemption orders equal priorities by it.
    pub quota_reserved_at: Option<Time>,
    /// When the workload last reported a checkpoint (`sluice.dev/last-checkpoint`): work before it survives an
    /// eviction (a preemption-cost signal).
    pub checkpointed_at: Option<Time>,
    /// Kueue's `kueue.x-k8s.io/priority-boost` annotation (0 when absent or not a 32-bit integer); added to
    /// `priority` wherever the engine orders or preempts when the PriorityBoost gate is on.
    pub priority_boost: i32,
    /// Kueue's Admitted condition is True. In a ClusterQueue with admission checks quota is reserved first and
    /// the workload counts as admitted (its queues' `admittedWorkloads` and `flavorsUsage`) only once its checks
    /// pass; without checks reserving is admitting and this is not read.
    pub admitted: bool,
    /// Kueue's PodsReady condition is True (every pod is ready or succeeded); read only under
    /// `EngineConfig::block_admission`.
    pub pods_ready: bool,
    /// Kueue's `status.reclaimablePods`: per pod set, pods that finished and will not run again. An admitted
    /// workload holds quota only for its other pods (Kueue's ReclaimablePods, on by default).
    pub reclaimable: Vec<(String, i32)>,
    /// A digest of what else of its pod templates Kueue's scheduling hash covers and the engine does not read
    /// (ports, runtime class, spread constraints, overhead, claims, pod priority); 0 when there is none.
    pub scheduling_shape: u64,
    /// Why Kueue's admissibility checks refuse its pod templates (requests above limits, or outside its
    /// namespace's LimitRanges), worded as Kueue's pending message; None when they pass.
    pub misconfigured: Option<String>,
    /// Kueue's `kueue.x-k8s.io/admission-gated-by` gates (AdmissionGatedBy): while set the workload is not
    /// queued ("Admission is gated by: ...").
    pub admission_gated_by: Option<String>,
    /// A digest of its pod templates' resources as Kueue adjusted them (LimitRange defaults, RuntimeClass
    /// overhead): Kueue re-queues a waiting Workload whose adjusted spec changed, and only updates one whose
    /// admissibility alone changed (a LimitRange's bounds, read again at its next nomination).
    pub adjusted_resources: u64,
}

impl Workload {
    /// The workload's key.
    pub fn key(&self) -> WorkloadKey {
        WorkloadKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// Namespaced name of a workload.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct WorkloadKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl WorkloadKey {
    /// Builds a key.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Assignment of one pod set.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PodSetAssignment {
    /// Pod set name.
    pub name: String,
    /// resource -> flavor.
    pub flavors: BTreeMap<String, String>,
    /// Total usage for `count` pods.
    pub resource_usage: ResourceList,
    /// Admitted pod count.
    pub count: i32,
}

/// Admission of a workload.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Admission {
    /// ClusterQueue name.
    pub cluster_queue: String,
    /// One per pod set.
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// An outcome the caller must apply to the cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Quota reserved (Kueue: QuotaReserved=True, and Admitted=True when the CQ has no admission checks).
    Admit {
        /// Workload.
        workload: WorkloadKey,
        /// Admission.
        admission: std::sync::Arc<Admission>,
        /// Decision time.
        time: Time,
    },
    /// Workload stays pending with a Kueue QuotaReserved=False reason and message.
    Pending {
        /// Workload.
        workload: WorkloadKey,
        /// Reason.
        reason: String,
        /// Message.
        message: String,
    },
    /// Evict an admitted workload.
    Evict {
        /// Workload.
        workload: WorkloadKey,
        /// Evicted reason.
        reason: String,
        /// Preempted reason, for preemptions.
        preemption_reason: Option<String>,
        /// Preempting workload, for preemptions.
        preemptor: Option<WorkloadKey>,
        /// Message.
        message: String,
        /// Decision time.
        time: Time,
        /// The victim may checkpoint first (its checkpoint grace applies), as for a preemption: the
        /// eviction moves it off a degrading GPU before that fails.
        graceful: bool,
    },
}

/// Input to the engine.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Create or update a ResourceFlavor.
    UpsertFlavor(Flavor),
    /// Delete a ResourceFlavor.
    DeleteFlavor(String),
    /// Create or update a ClusterQueue.
    UpsertClusterQueue(ClusterQueue),
    /// Delete a ClusterQueue.
    DeleteClusterQueue(String),
    /// Create or update a Cohort.
    UpsertCohort(Cohort),
    /// Delete a Cohort.
    DeleteCohort(String),
    /// Create or update a LocalQueue.
    UpsertLocalQueue(LocalQueue),
    /// Delete a LocalQueue.
    DeleteLocalQueue {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// Create or update a Namespace.
    UpsertNamespace(Namespace),
    /// Delete a Namespace.
    DeleteNamespace(String),
    /// A pending workload (queued), or with `admission` an already-admitted one (restores usage).
    UpsertWorkload {
        /// Workload.
        workload: Workload,
        /// Existing admission.
        admission: Option<Admission>,
    },
    /// Delete a workload.
    DeleteWorkload(WorkloadKey),
    /// The workload finished: release its quota.
    FinishWorkload(WorkloadKey),
    /// An evicted workload's pods are gone: release its quota and requeue it.
    EvictionComplete {
        /// Workload.
        workload: WorkloadKey,
        /// Requeue time.
        time: Time,
    },
    /// Create or update a Node; a NotReady node evicts the workloads placed on it (`NodeFailures`).
    UpsertNode(Node),
    /// Delete a Node (its workloads are evicted).
    DeleteNode(String),
    /// Create or update an AdmissionCheck: whether its controller says it is Active.
    UpsertAdmissionCheck {
        /// Name.
        name: String,
        /// Its Active condition is True.
        active: bool,
    },
    /// Delete an AdmissionCheck.
    DeleteAdmissionCheck(String),
    /// Create or update a Kueue Topology.
    UpsertTopology(TopologyLevels),
    /// Delete a Kueue Topology.
    DeleteTopology(String),
    /// A node agent's report (NodeGpuTopology); GPUs that turn unhealthy evict their workloads.
    UpsertNodeGpus {
        /// Node name.
        node: String,
        /// What the agent found.
        gpus: sluice_sdk::topology::NodeGpus,
    },
    /// The NodeGpuTopology of a node is gone.
    DeleteNodeGpus(String),
    /// Restores a LocalQueue's admission-fair-sharing usage from its persisted status (after its
    /// `UpsertLocalQueue`; ignored once the engine sampled it).
    RestoreLocalQueueUsage {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The persisted consumed resources.
        usage: ConsumedUsage,
    },
    /// Restores the topology placement of an admitted workload (after its `UpsertWorkload`).
    RestorePlacement {
        /// Workload.
        workload: WorkloadKey,
        /// One entry per TAS pod set.
        pod_sets: Vec<PodSetPlacement>,
    },
}

/// Engine view of a workload.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadState {
    /// Waiting for quota.
    Pending {
        /// Reason.
        reason: String,
        /// Message.
        message: String,
    },
    /// Holding quota.
    Admitted(Admission),
    /// Evicted, quota still held until EvictionComplete.
    Evicting,
    /// Finished.
    Finished,
}

/// Usage of one resource in one flavor.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ResourceUsage {
    /// Resource name.
    pub name: String,
    /// Total usage.
    pub total: Quantity,
    /// Usage above nominal quota.
    pub borrowed: Quantity,
}

/// Usage of one flavor.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct FlavorUsage {
    /// Flavor name.
    pub name: String,
    /// Per resource, in the CQ's covered-resource order.
    pub resources: Vec<ResourceUsage>,
}

/// ClusterQueue status data.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ClusterQueueUsage {
    /// flavorsReservation: quota held by reserving workloads (admitted and evicting).
    pub flavors_reservation: Vec<FlavorUsage>,
    /// flavorsUsage: quota held by admitted (not evicting) workloads.
    pub flavors_usage: Vec<FlavorUsage>,
    /// Pending workloads.
    pub pending_workloads: i32,
    /// Workloads holding quota.
    pub reserving_workloads: i32,
    /// Admitted workloads.
    pub admitted_workloads: i32,
    /// fairSharing.weightedShare (i64::MAX for weight 0 while borrowing).
    pub weighted_share: i64,
    /// Whether the ClusterQueue is active.
    pub active: bool,
    /// Why the ClusterQueue is inactive (empty when active).
    pub inactive_reason: String,
    /// Kueue's Active=False message naming what is missing or inactive (empty: the plain "Can't admit new
    /// workloads.").
    pub inactive_message: String,
}

/// LocalQueue status data.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LocalQueueUsage {
    /// flavorsReservation.
    pub flavors_reservation: Vec<FlavorUsage>,
    /// flavorsUsage.
    pub flavors_usage: Vec<FlavorUsage>,
    /// Pending workloads.
    pub pending_workloads: i32,
    /// Workloads holding quota.
    pub reserving_workloads: i32,
    /// Admitted workloads.
    pub admitted_workloads: i32,
}
