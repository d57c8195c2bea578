//! Sluice's scheduling engine: a pure, deterministic, event-driven implementation of Kueue v0.19's
//! admission semantics (quota tree, queues, scheduling cycle, flavor assignment, preemption,
//! fair sharing, partial admission). No I/O, no clocks: time is passed in.
//!
//! Usage: feed objects and workloads through [`Engine::apply`], call [`Engine::schedule`] while
//! [`Engine::has_work`] is true, and apply the returned [`Decision`]s to the cluster. Evicted
//! workloads keep their quota until [`Event::EvictionComplete`].
//!
//! Notes for callers:
//! * `Decision::Pending` is emitted only when a workload's (reason, message) changes.
//! * The engine's own admission wins over an `UpsertWorkload` that omits it (e.g. a stale read).
//! * Restored admissions (`UpsertWorkload` with `admission`) use `creation_time` as their
//!   reservation time (preemption ordering tie-break).
//! * Queue order uses `creation_time`; the `EvictionComplete` time does not reorder (as Kueue
//!   does for preemption evictions).
//! * Flavors with a `topology_name` are placed on Nodes (topology-aware, see `topology/place.rs`);
//!   [`Engine::placement`] gives an admitted workload's placement.
//! * Admission fair sharing (`EngineConfig::admission_fair_sharing`) orders a ClusterQueue's queue by its
//!   LocalQueues' decayed usage; callers write what [`Engine::take_local_queue_usage_updates`] returns.
//! * Not modelled: admission-check states (callers pass `Workload::admitted`), waitForPodsReady's timeouts (the
//!   callers time them; blockAdmission is here), workload slices. Kueue's priority boost is (behind
//!   `EngineConfig::priority_boost`).

mod admission_usage;
pub mod allocator;
mod assign;
pub mod bench;
/// `sluice bench --topology`'s workload: topology-aware fill of a large GPU cluster and per-gang placement time.
pub mod bench_topology;
mod cycle;
mod equivalence;
mod error;
mod fairness;
mod fasthash;
mod matching;
mod preempt;
mod preemption_cost;
mod quota;
mod state;
mod status;
mod topology;
mod tree_fairness;
mod types;
mod usage_history;
mod vecmap;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use cycle::{WAITING_FOR_PODS_READY, WAITING_FOR_PODS_READY_MESSAGE};
pub use error::EngineError;
pub use fairness::{DrsPolicy, EngineFairness, OrderKey, ResourceBorrowing, Share, ShareInput};
pub use preemption_cost::PreemptionCost;
pub use state::ADMISSION_GATED;
pub use topology::admit::{NODE_FAILURES, TOPOLOGY_PLACEMENT_FAILED};
pub use types::*;

use fasthash::{FastMap, NameMap as HashMap};
use quota::{Fr, NodeId, Tree};
use tree_fairness::TreeFairness;

/// Interned names: flavors, resources and flavor-resource pairs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    flavor_ids: HashMap<String, u32>,
    flavor_names: Vec<String>,
    resource_ids: HashMap<String, u32>,
    resource_names: Vec<String>,
    fr_ids: FastMap<(u32, u32), Fr>,
    fr_parts: Vec<(u32, u32)>,
}

impl Interner {
    pub(crate) fn flavor(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.flavor_ids.get(name) {
            return id;
        }
        let id = self.flavor_names.len() as u32;
        self.flavor_names.push(name.to_string());
        self.flavor_ids.insert(name.to_string(), id);
        id
    }

    pub(crate) fn resource(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.resource_ids.get(name) {
            return id;
        }
        let id = self.resource_names.len() as u32;
        self.resource_names.push(name.to_string());
        self.resource_ids.insert(name.to_string(), id);
        id
    }

    pub(crate) fn fr(&mut self, flavor: u32, resource: u32) -> Fr {
        if let Some(&id) = self.fr_ids.get(&(flavor, resource)) {
            return id;
        }
        let id = self.fr_parts.len() as Fr;
        self.fr_parts.push((flavor, resource));
        self.fr_ids.insert((flavor, resource), id);
        id
    }

    pub(crate) fn find_fr(&self, flavor: u32, resource: u32) -> Option<Fr> {
        self.fr_ids.get(&(flavor, resource)).copied()
    }

    pub(crate) fn find_resource(&self, name: &str) -> Option<u32> {
        self.resource_ids.get(name).copied()
    }

    pub(crate) fn find_flavor(&self, name: &str) -> Option<u32> {
        self.flavor_ids.get(name).copied()
    }

    pub(crate) fn flavor_name(&self, id: u32) -> &str {
        &self.flavor_names[id as usize]
    }

    pub(crate) fn resource_name(&self, id: u32) -> &str {
        &self.resource_names[id as usize]
    }

    pub(crate) fn fr_parts(&self, fr: Fr) -> (u32, u32) {
        self.fr_parts[fr as usize]
    }
}

/// Interned resource group of a ClusterQueue.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rg {
    pub covered: Vec<u32>,
    pub flavors: Vec<u32>,
}

/// Ordering key of a pending workload in its ClusterQueue: LocalQueue usage (admission fair sharing), priority
/// desc, timestamp, UID.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct QKey {
    /// Its LocalQueue's admission usage (order-preserving bits; 0 without admission fair sharing): lower first.
    pub afs: u64,
    pub priority: Reverse<i32>,
    pub timestamp: Time,
    /// Shared so that moving a key between a queue's sets doesn't copy the string.
    pub uid: Arc<str>,
    pub wl: u32,
    /// The workload's scheduling shape hash when the key was made (after `wl`, so it never decides the order):
    /// setting a failed shape aside scans keys without visiting workloads.
    pub shape: Option<u64>,
}

/// An admission kept for reuse, with the assignment shape it was built from.
#[derive(Clone, Debug)]
pub(crate) struct SharedAdmission {
    pub shape: Vec<(usize, i32, u32, u32, i64)>,
    pub admission: Arc<Admission>,
}

/// A ClusterQueue: spec, interned groups, queue and admitted set.
#[derive(Clone, Debug)]
pub(crate) struct CqData {
    pub spec: ClusterQueue,
    pub rgs: Vec<Rg>,
    pub rg_of_resource: FastMap<u32, usize>,
    pub active: bool,
    pub inactive_reason: String,
    /// Kueue's Active=False message when it says more than "Can't admit new workloads." (empty otherwise).
    pub inactive_message: String,
    pub heap: BTreeSet<QKey>,
    pub inadmissible: BTreeSet<QKey>,
    /// Scheduling shapes that failed here since the inadmissible list was last requeued (BestEffortFIFO, with
    /// SchedulingEquivalenceHashing).
    pub failed_shapes: fasthash::FastSet<u64>,
    /// A preemptor waiting for its victims stays at the head (BestEffortFIFO).
    pub sticky: Option<u32>,
    /// Head tried without success and the tree generation at the time: nothing to do until it changes.
    pub tried: Option<(u32, u64)>,
    /// Workloads holding quota here (admitted or evicting).
    pub admitted: crate::vecmap::IdSet,
    /// Kueue's AllocatableResourceGeneration: bumped on quota changes and workload removal.
    pub generation: u64,
    /// Deleted while still holding admitted workloads: kept (inactive, "Terminating") with its
    /// usage counted until the last one leaves, as Kueue's finalizer does.
    pub terminating: bool,
}

/// A LocalQueue and the workloads that name it.
#[derive(Clone, Debug)]
pub(crate) struct LqData {
    /// None once the LocalQueue is deleted while workloads still name it.
    pub spec: Option<LocalQueue>,
    pub workloads: BTreeSet<u32>,
    /// Admission fair sharing's consumed usage and entry penalties (None while it is off).
    pub usage: Option<admission_usage::LqUsage>,
}

/// Lifecycle of a workload inside the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    Pending,
    Admitted,
    Evicting,
    Finished,
}

/// A workload's quota reservation.
#[derive(Clone, Debug)]
pub(crate) struct Adm {
    pub cq: NodeId,
    pub admission: Arc<Admission>,
    pub usage: Vec<(Fr, i64)>,
    /// [`FrMask`] of `usage`'s flavor-resources: the preemption search asks "does it use one of these" of every
    /// admitted workload in a cohort.
    pub frs: FrMask,
    pub reserved_at: Time,
}

/// A set of flavor-resources as a bit mask, for ids below 64; `None` when some id is beyond (then callers compare
/// the lists).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FrMask(Option<u64>);

impl FrMask {
    /// The mask of `frs`.
    pub(crate) fn of(frs: impl IntoIterator<Item = Fr>) -> Self {
        let mut bits = 0u64;
        for fr in frs {
            if fr >= 64 {
                return FrMask(None);
            }
            bits |= 1 << fr;
        }
        FrMask(Some(bits))
    }

    /// Whether the two sets share a flavor-resource; `None` when a mask cannot tell.
    pub(crate) fn intersects(self, other: FrMask) -> Option<bool> {
        Some(self.0? & other.0? != 0)
    }
}

/// Engine record of a workload.
#[derive(Clone, Debug)]
pub(crate) struct Wl {
    pub spec: Workload,
    pub key: WorkloadKey,
    /// Per pod set, per-pod requests by interned resource, in resource-name order.
    pub reqs: Vec<Vec<(u32, i64)>>,
    pub phase: Phase,
    /// ClusterQueue whose queue holds it while pending.
    pub queued_in: Option<NodeId>,
    pub qkey: Option<QKey>,
    /// Its pending reason and message, as last decided.
    pub pending: Option<(&'static str, Arc<str>)>,
    pub adm: Option<Adm>,
    /// Flavor scan progress from the last nomination (Kueue's LastAssignment).
    pub last: Option<ScanProgress>,
    /// Reduced pod counts its pending preemptions were computed for (partial admission).
    pub preempted_for: Option<Vec<i32>>,
    /// Times the engine preempted it (a preemption-cost signal).
    pub preemptions: u32,
    /// The assignment its issued preemptions make room for, and their victims.
    pub awaiting: Option<Awaiting>,
    /// Its LocalQueue's admission usage as order-preserving bits, where its ClusterQueue (queued or holding
    /// quota) uses admission fair sharing; 0 elsewhere. Victims of a more used LocalQueue go first.
    pub afs: u64,
    /// Its last assignment message and the reasons it was worded from (reset when its spec changes).
    pub worded: Option<assign::WordedMessage>,
    /// Its scheduling shape's hash, with SchedulingEquivalenceHashing on.
    pub hash: Option<u64>,
}

/// What a preemptor's issued preemptions were for: once its victims are gone, this assignment is what they
/// freed, so it is tried when a fresh flavor search would not admit the preemptor.
#[derive(Clone, Debug)]
pub(crate) struct Awaiting {
    pub assignment: assign::Assignment,
    pub victims: Vec<WorkloadKey>,
}

/// Where the flavor search stopped per pod set and resource (-1: all flavors were tried), so the
/// next attempt resumes after it (Kueue's FlavorFungibilityPreserveScanProgress, on in v0.19).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ScanProgress {
    pub tried: Vec<vecmap::VecMap<u32, i32>>,
    pub cycle: u64,
    pub cq_generation: u64,
}

impl ScanProgress {
    /// Some flavor was not tried yet.
    pub(crate) fn pending_flavors(&self) -> bool {
        self.tried.iter().any(|m| m.values().any(|&i| i != -1))
    }

    pub(crate) fn next_flavor(&self, ps: usize, res: u32) -> usize {
        self.tried
            .get(ps)
            .and_then(|m| m.get(&res))
            .map(|&i| (i + 1).max(0) as usize)
            .unwrap_or(0)
    }
}

impl Wl {
    pub(crate) fn qkey(&self, idx: u32) -> QKey {
        QKey {
            afs: 0,
            priority: Reverse(self.spec.priority),
            timestamp: self.spec.creation_time,
            uid: Arc::from(self.spec.uid.as_str()),
            wl: idx,
            shape: self.hash,
        }
    }
}

/// The scheduling engine. See the module docs.
#[derive(Clone, Debug)]
pub struct Engine {
    pub(crate) config: EngineConfig,
    /// Fairness policy per cohort tree, and the decayed usage the policies ask for.
    pub(crate) fairness: TreeFairness,
    pub(crate) ids: Interner,
    pub(crate) flavors: Vec<Option<Flavor>>,
    pub(crate) tree: Tree,
    pub(crate) cqs: Vec<Option<CqData>>,
    pub(crate) cq_by_name: HashMap<String, NodeId>,
    /// AdmissionChecks by name, and whether each is Active (a ClusterQueue naming a missing or inactive one is
    /// inactive).
    pub(crate) admission_checks: HashMap<String, bool>,
    pub(crate) cohort_by_name: HashMap<String, NodeId>,
    pub(crate) lqs: BTreeMap<(String, String), LqData>,
    pub(crate) namespaces: HashMap<String, BTreeMap<String, String>>,
    pub(crate) wls: Vec<Option<Wl>>,
    pub(crate) wl_by_key: HashMap<WorkloadKey, u32>,
    pub(crate) free_wls: Vec<u32>,
    pub(crate) out: Vec<Decision>,
    pub(crate) pods_resource: u32,
    /// Latest time seen (for evictions caused by events).
    pub(crate) now: Time,
    /// Scheduling cycles run so far.
    pub(crate) cycle: u64,
    /// Buffers the preemption search reuses.
    pub(crate) preempt_scratch: preempt::Scratch,
    /// Admissions by ClusterQueue and a digest of [`assign::Assignment::admission_shape`], with that shape:
    /// workloads admitted alike share one (the shape and pod set names are compared before it is shared).
    pub(crate) admissions: FastMap<(NodeId, u64), SharedAdmission>,
    /// Nodes, GPU reports, Topologies and topology placements (TAS).
    pub(crate) topo: topology::TopoState,
    /// Preemption-cost policies per ClusterQueue.
    pub(crate) costs: preemption_cost::PreemptionCosts,
    /// Under blockAdmission, a workload that fit is waiting for every quota holder to be PodsReady: no cycle
    /// admits or preempts until then.
    pub(crate) waiting_for_pods_ready: bool,
    /// Under blockAdmission, whether the current cycle has a holder that is not PodsReady.
    pub(crate) block_now: bool,
}

impl Engine {
    /// Creates an engine with the built-in DRS fairness policy.
    pub fn new(config: EngineConfig) -> Self {
        Self::with_fairness_policy(config, Arc::new(DrsPolicy))
    }

    /// Creates an engine with a custom fairness policy (used only when fair sharing is enabled).
    pub fn with_fairness_policy(config: EngineConfig, policy: Arc<dyn EngineFairness>) -> Self {
        let mut ids = Interner::default();
        let pods_resource = ids.resource("pods");
        Self {
            config,
            fairness: TreeFairness::new(policy),
            ids,
            flavors: Vec::new(),
            tree: Tree::default(),
            cqs: Vec::new(),
            cq_by_name: HashMap::default(),
            admission_checks: HashMap::default(),
            cohort_by_name: HashMap::default(),
            lqs: BTreeMap::new(),
            namespaces: HashMap::default(),
            wls: Vec::new(),
            wl_by_key: HashMap::default(),
            free_wls: Vec::new(),
            out: Vec::new(),
            pods_resource,
            now: 0,
            cycle: 0,
            preempt_scratch: Default::default(),
            admissions: Default::default(),
            topo: topology::TopoState::default(),
            costs: preemption_cost::PreemptionCosts::default(),
            waiting_for_pods_ready: false,
            block_now: false,
        }
    }

    /// The settings it runs with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Replaces the default fairness policy: the one of every cohort tree without its own. Usage
    /// history is kept per half-life, so a new half-life starts with none.
    pub fn set_fairness_policy(&mut self, policy: Arc<dyn EngineFairness>) {
        self.fairness.set_default(policy);
        self.requeue_all_inadmissible();
    }

    /// Puts the cohort tree whose root is Cohort `root` on its own fairness policy (None: back on
    /// the default).
    pub fn set_fairness_policy_for_tree(
        &mut self,
        root: &str,
        policy: Option<Arc<dyn EngineFairness>>,
    ) {
        if self.fairness.set_for_root(root, policy) {
            self.requeue_all_inadmissible();
        }
    }

    /// Puts exactly the cohort trees in `policies` (by root Cohort name) on their own fairness
    /// policies and every other tree on the default, in one step.
    pub fn set_tree_fairness_policies(
        &mut self,
        policies: impl IntoIterator<Item = (String, Arc<dyn EngineFairness>)>,
    ) {
        if self.fairness.set_roots(policies.into_iter().collect()) {
            self.requeue_all_inadmissible();
        }
    }

    /// Name of the default fairness policy.
    pub fn fairness_policy_name(&self) -> &str {
        self.fairness.default_policy().name()
    }

    /// Name of the fairness policy that orders ClusterQueue `cq`'s tree (None: unknown queue).
    pub fn fairness_policy_name_of(&self, cq: &str) -> Option<&str> {
        let &n = self.cq_by_name.get(cq)?;
        Some(self.fairness.policy_of(&self.tree, n).name())
    }

    /// The root Cohort of ClusterQueue `cq`'s tree (None: unknown queue, no cohort, or a cohort
    /// cycle).
    pub fn cohort_root_of(&self, cq: &str) -> Option<&str> {
        let &n = self.cq_by_name.get(cq)?;
        if !self.tree.node(n).alive {
            return None;
        }
        let root = self.tree.node(self.tree.root(n));
        (!root.is_cq).then_some(root.name.as_str())
    }

    /// The root Cohort of Cohort `name`'s tree (itself when it has no parent; None: unknown cohort,
    /// or one on a cohort cycle).
    pub fn root_of_cohort(&self, name: &str) -> Option<&str> {
        let &n = self.cohort_by_name.get(name)?;
        if self.tree.node(n).cycle {
            return None;
        }
        Some(self.tree.node(self.tree.root(n)).name.as_str())
    }

    pub(crate) fn cq(&self, n: NodeId) -> Option<&CqData> {
        self.cqs.get(n as usize).and_then(|c| c.as_ref())
    }

    pub(crate) fn cq_mut(&mut self, n: NodeId) -> Option<&mut CqData> {
        self.cqs.get_mut(n as usize).and_then(|c| c.as_mut())
    }

    pub(crate) fn wl(&self, i: u32) -> Option<&Wl> {
        self.wls.get(i as usize).and_then(|w| w.as_ref())
    }

    pub(crate) fn wl_mut(&mut self, i: u32) -> Option<&mut Wl> {
        self.wls.get_mut(i as usize).and_then(|w| w.as_mut())
    }

    /// Whether fair sharing is on ([`EngineConfig::fair_sharing`] is set).
    pub fn fair_sharing(&self) -> bool {
        self.config.fair_sharing.is_some()
    }
}

/// Formats a quantity the way Kueue prints it in messages (Kubernetes canonical form: cpu in
/// DecimalSI milli-units, memory-like resources in BinarySI, everything else DecimalSI).
/// A quantity of a resource as Kubernetes renders it. Written by hand: pending messages are worded every
/// cycle a head waits, and core::fmt's machinery (i128 above all) cost more than the rest of the message.
pub(crate) struct Qty<'a>(pub &'a str, pub i64);

impl Qty<'_> {
    /// Appends the rendering to `out`.
    pub(crate) fn write_to(&self, out: &mut String) {
        let Qty(resource, v) = *self;
        if resource == "cpu" {
            return decimal_si(out, v, -3);
        }
        let binary = matches!(resource, "memory" | "ephemeral-storage")
            || resource.starts_with("hugepages-");
        if binary && v.unsigned_abs() >= 1024 {
            const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
            let mut m = v;
            let mut k = 0;
            while k < SUFFIXES.len() && m % 1024 == 0 {
                m /= 1024;
                k += 1;
            }
            if k > 0 {
                push_int(out, m);
                out.push_str(SUFFIXES[k - 1]);
                return;
            }
        }
        decimal_si(out, v, 0)
    }
}

impl std::fmt::Display for Qty<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        self.write_to(&mut s);
        f.write_str(&s)
    }
}

/// Appends the decimal digits of `n`.
pub(crate) fn push_int(out: &mut String, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut u = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if n < 0 {
        out.push('-');
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or_default());
}

/// Kubernetes' canonical DecimalSI rendering of `m * 10^e`.
fn decimal_si(out: &mut String, m: i64, e: i32) {
    if m == 0 {
        return out.push('0');
    }
    // 64-bit arithmetic suffices: trailing zeros are stripped and at most two put back, never past the exponent
    // the value started at (a multiple of 3), so the digits stay within the input's magnitude.
    let (mut m, mut e) = (m, e);
    while m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    let mut e3 = e.div_euclid(3) * 3;
    e3 = e3.clamp(-9, 18);
    for _ in e3..e {
        m *= 10;
    }
    let suffix = match e3 {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    push_int(out, m);
    out.push_str(suffix);
}

#[cfg(test)]
mod tests {
    use super::Qty;

    fn fmt_quantity(resource: &str, v: i64) -> String {
        Qty(resource, v).to_string()
    }

    #[test]
    fn quantities_render_like_kubernetes() {
        assert_eq!(fmt_quantity("cpu", 1000), "1");
        assert_eq!(fmt_quantity("cpu", 1500), "1500m");
        assert_eq!(fmt_quantity("cpu", 0), "0");
        assert_eq!(fmt_quantity("cpu", 2_000_000), "2k");
        assert_eq!(fmt_quantity("memory", 1 << 30), "1Gi");
        assert_eq!(fmt_quantity("memory", 1536 * 1024), "1536Ki");
        assert_eq!(fmt_quantity("memory", 2000), "2k");
        assert_eq!(fmt_quantity("memory", 500), "500");
        assert_eq!(fmt_quantity("example.com/gpu", 20), "20");
        assert_eq!(fmt_quantity("pods", 1000), "1k");
    }

    /// The 64-bit rendering agrees with exact (128-bit) arithmetic at the extremes and around the suffixes.
    #[test]
    fn quantities_render_exactly_at_the_extremes() {
        fn reference(m: i64, e: i32) -> String {
            if m == 0 {
                return "0".into();
            }
            let (mut m, mut e) = (i128::from(m), e);
            while m % 10 == 0 {
                m /= 10;
                e += 1;
            }
            let e3 = (e.div_euclid(3) * 3).clamp(-9, 18);
            for _ in e3..e {
                m *= 10;
            }
            let suffix = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"][((e3 + 9) / 3) as usize];
            format!("{m}{suffix}")
        }
        let mut values = vec![i64::MAX, i64::MIN, i64::MIN + 1, 1, -1, 9, 10, 999, 1001];
        for p in 0..19 {
            let t = 10i64.pow(p);
            values.extend([t, -t, t - 1, t + 1, 7 * t, -3 * t]);
        }
        for v in values {
            assert_eq!(fmt_quantity("cpu", v), reference(v, -3), "cpu {v}");
            assert_eq!(
                fmt_quantity("example.com/gpu", v),
                reference(v, 0),
                "gpu {v}"
            );
        }
    }
}
