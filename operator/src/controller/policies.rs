//! PolicyModules in the running operator: load (and reload) them as they change, route each ClusterQueue to the
//! modules its annotations name (placement, preemption cost; fairness per cohort tree), keep the last good version serving when a new one fails, and work out the
//! status, events and metrics that report all of it.
//!
//! The engine task owns one [`Policies`]; this module does no I/O itself: the engine task spawns the ConfigMap
//! watchers it asks for ([`Policies::wanted_config_maps`]), publishes the [`Notice`]s and writes the statuses
//! [`Policies::due_statuses`] returns.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{Resource, ResourceExt};
use sluice_sdk::host::{HostConfig, PolicyHost};
use sluice_sdk::kueue::v1beta2 as api;
use sluice_sdk::kueue::v1beta2::PreemptionPolicy;
use sluice_sdk::policy::PlacementPolicy;
use sluice_sdk::policy::PreemptionCostPolicy;
use sluice_sdk::policy::builtin::TopologyPack;
use sluice_sdk::sluice::policy_module::{
    CONDITION_COMPILED, CONDITION_DEGRADED, FAIRNESS_POLICY_ANNOTATION,
    PLACEMENT_POLICY_ANNOTATION, PREEMPTION_POLICY_ANNOTATION, PolicyModule, PolicyModuleStatus,
};
use tokio::time::Instant;

use crate::engine::Engine;
use crate::policy::{
    GuardedFairness, GuardedPlacement, GuardedPreemptionCost, HealthSnapshot, PolicyRegistry,
    RegistryError, Selection,
};
use crate::telemetry::{EventSeverity, Metrics};

/// Event reason: a PolicyModule was compiled and loaded.
pub const REASON_LOADED: &str = "PolicyModuleLoaded";
/// Event reason: a PolicyModule's current spec could not be loaded.
pub const REASON_LOAD_FAILED: &str = "PolicyModuleLoadFailed";
/// Event reason: a PolicyModule failed too many calls in a row.
pub const REASON_DEGRADED: &str = "PolicyModuleDegraded";
/// Event reason: a ClusterQueue's policy annotation cannot be honoured; the built-in policy serves it.
pub const REASON_FALLBACK: &str = "PolicyFallback";
/// Event reason: a ClusterQueue's policy annotation is honoured again.
pub const REASON_SELECTED: &str = "PolicySelected";

/// An event to publish.
#[derive(Clone, Debug)]
pub struct Notice {
    /// The object it is about.
    pub object: ObjectReference,
    /// Normal or Warning.
    pub severity: EventSeverity,
    /// Event reason.
    pub reason: &'static str,
    /// Event action.
    pub action: &'static str,
    /// Event note.
    pub note: String,
}

/// Why the current spec of a module is not the one serving.
#[derive(Clone, Debug, PartialEq)]
struct LoadFailure {
    reason: &'static str,
    message: String,
}

/// What a status write must contain, and when it must happen.
#[derive(Clone, Debug)]
pub struct DueStatus {
    /// The PolicyModule as last seen.
    pub object: PolicyModule,
    /// The status wanted (transition times still to be filled in against the object's).
    pub status: PolicyModuleStatus,
}

/// The operator's PolicyModules and what each ClusterQueue uses.
pub struct Policies {
    host_config: HostConfig,
    degrade_after: u32,
    status_interval: Duration,
    /// Started with the first module (no WebAssembly engine for clusters without modules).
    registry: Option<PolicyRegistry>,
    host_error: Option<String>,
    modules: BTreeMap<String, PolicyModule>,
    config_maps: BTreeMap<(String, String), ConfigMap>,
    to_load: BTreeSet<String>,
    failed: BTreeMap<String, LoadFailure>,
    /// Status last written per module (transition times as written) and when.
    written: BTreeMap<String, (PolicyModuleStatus, Instant)>,
    /// Placement modules applied to the engine, by ClusterQueue.
    applied_placement: BTreeMap<String, Arc<GuardedPlacement>>,
    /// Fairness modules applied to the engine, by root Cohort of the tree they order.
    applied_fairness: BTreeMap<String, Arc<GuardedFairness>>,
    /// Preemption-cost modules applied to the engine, by ClusterQueue.
    applied_preemption: BTreeMap<String, Arc<GuardedPreemptionCost>>,
    /// Selection problem reported per ClusterQueue.
    reported: BTreeMap<String, String>,
    /// Selection problem reported per Cohort.
    reported_cohorts: BTreeMap<String, String>,
    degraded: BTreeSet<String>,
    /// Counters already turned into metrics, per module.
    metered: BTreeMap<String, HealthSnapshot>,
    /// When statuses were last looked at.
    last_check: Option<Instant>,
}

fn builtin_name(annotation: &str) -> &'static str {
    if annotation == FAIRNESS_POLICY_ANNOTATION {
        "DRS"
    } else {
        TopologyPack::NAME
    }
}

/// A Warning event for each problem that is new or changed since `reported`, and a Normal one for each
/// problem that went away, on the object `object` finds by name (objects since deleted are skipped).
fn problem_events(
    reported: &BTreeMap<String, String>,
    problems: &BTreeMap<String, String>,
    object: impl Fn(&str) -> Option<ObjectReference>,
    resolved: &str,
    out: &mut Vec<Notice>,
) {
    for (name, msg) in problems {
        if reported.get(name) != Some(msg)
            && let Some(obj) = object(name)
        {
            tracing::warn!(kind = ?obj.kind, name = %name, problem = %msg, "policy selection failed");
            out.push(Notice {
                object: obj,
                severity: EventSeverity::Warning,
                reason: REASON_FALLBACK,
                action: "SelectPolicy",
                note: msg.clone(),
            });
        }
    }
    for name in reported.keys() {
        if !problems.contains_key(name)
            && let Some(obj) = object(name)
        {
            out.push(Notice {
                object: obj,
                severity: EventSeverity::Normal,
                reason: REASON_SELECTED,
                action: "SelectPolicy",
                note: resolved.to_string(),
            });
        }
    }
}

/// Adds `problem` to what is reported for object `name`.
fn append_problem(problems: &mut BTreeMap<String, String>, name: &str, problem: &str) {
    match problems.get_mut(name) {
        Some(m) => {
            m.push_str("; ");
            m.push_str(problem);
        }
        None => {
            problems.insert(name.to_string(), problem.to_string());
        }
    }
}

fn reference(cq: &api::ClusterQueue) -> ObjectReference {
    cq.object_ref(&())
}

impl Policies {
    /// No modules yet; `host_config` starts the WebAssembly host when the first module arrives, modules degrade
    /// after `degrade_after` failures in a row, and counter-only status changes are written at most once per
    /// `status_interval`.
    pub fn new(host_config: HostConfig, degrade_after: u32, status_interval: Duration) -> Self {
        Self {
            host_config,
            degrade_after,
            status_interval,
            registry: None,
            host_error: None,
            modules: BTreeMap::new(),
            config_maps: BTreeMap::new(),
            to_load: BTreeSet::new(),
            failed: BTreeMap::new(),
            written: BTreeMap::new(),
            applied_placement: BTreeMap::new(),
            applied_fairness: BTreeMap::new(),
            applied_preemption: BTreeMap::new(),
            reported: BTreeMap::new(),
            reported_cohorts: BTreeMap::new(),
            degraded: BTreeSet::new(),
            metered: BTreeMap::new(),
            last_check: None,
        }
    }

    /// Whether any PolicyModule exists.
    pub fn any(&self) -> bool {
        !self.modules.is_empty()
    }

    /// Takes a PolicyModule change; the module is (re)loaded by the next [`Self::load_pending`].
    pub fn module_changed(&mut self, pm: PolicyModule, deleted: bool) {
        let name = pm.name_any();
        if deleted {
            self.modules.remove(&name);
            self.to_load.remove(&name);
            self.failed.remove(&name);
            self.written.remove(&name);
            self.degraded.remove(&name);
            if let Some(r) = self.registry.as_mut() {
                r.remove(&name);
                tracing::info!(module = %name, "policy module deleted; ClusterQueues naming it use the built-in");
            }
            return;
        }
        let changed = self
            .modules
            .get(&name)
            .is_none_or(|old| old.spec != pm.spec);
        if changed {
            self.to_load.insert(name.clone());
        }
        self.modules.insert(name, pm);
    }

    /// ConfigMaps the modules' `configMapRef`s name (namespace, name).
    pub fn wanted_config_maps(&self) -> BTreeSet<(String, String)> {
        self.modules
            .values()
            .filter_map(|m| m.spec.config_map_ref.as_ref())
            .map(|r| (r.namespace.clone(), r.name.clone()))
            .collect()
    }

    /// Takes a ConfigMap change; modules reading it are reloaded. ConfigMaps no module names are ignored.
    pub fn config_map_changed(&mut self, cm: ConfigMap, deleted: bool) {
        let key = (cm.namespace().unwrap_or_default(), cm.name_any());
        if !self.wanted_config_maps().contains(&key) {
            self.config_maps.remove(&key);
            return;
        }
        if deleted {
            self.config_maps.remove(&key);
        } else if self
            .config_maps
            .get(&key)
            .is_some_and(|old| old.binary_data == cm.binary_data)
        {
            return;
        } else {
            self.config_maps.insert(key.clone(), cm);
        }
        for (name, m) in &self.modules {
            if m.spec
                .config_map_ref
                .as_ref()
                .is_some_and(|r| r.namespace == key.0 && r.name == key.1)
            {
                self.to_load.insert(name.clone());
            }
        }
    }

    /// Forgets ConfigMaps no module names any more.
    pub fn prune_config_maps(&mut self) {
        let wanted = self.wanted_config_maps();
        self.config_maps.retain(|k, _| wanted.contains(k));
    }

    fn registry(&mut self) -> Option<&mut PolicyRegistry> {
        if self.registry.is_none() && self.host_error.is_none() {
            match PolicyHost::new(self.host_config.clone()) {
                Ok(host) => {
                    self.registry = Some(PolicyRegistry::new(
                        host,
                        self.degrade_after,
                        Arc::new(TopologyPack),
                    ));
                }
                Err(e) => {
                    tracing::error!(error = %e, "the WebAssembly host did not start; no policy module can load");
                    self.host_error = Some(e.to_string());
                }
            }
        }
        self.registry.as_mut()
    }

    /// The bytes of a module kept in a ConfigMap; Err names the field.
    fn config_map_bytes(&self, pm: &PolicyModule) -> Result<Option<Vec<u8>>, LoadFailure> {
        let name = pm.name_any();
        let unavailable = |message: String| LoadFailure {
            reason: "ModuleUnavailable",
            message,
        };
        match (&pm.spec.module, &pm.spec.config_map_ref) {
            (Some(_), Some(_)) => Err(LoadFailure {
                reason: "InvalidSpec",
                message: format!(
                    "PolicyModule {name}: spec.module and spec.configMapRef are exclusive; set one"
                ),
            }),
            (Some(_), None) => Ok(None),
            (None, None) => Err(LoadFailure {
                reason: "InvalidSpec",
                message: format!(
                    "PolicyModule {name}: spec.module or spec.configMapRef is required"
                ),
            }),
            (None, Some(r)) => {
                let key = (r.namespace.clone(), r.name.clone());
                let Some(cm) = self.config_maps.get(&key) else {
                    return Err(unavailable(format!(
                        "PolicyModule {name}: spec.configMapRef: ConfigMap {}/{} not found",
                        r.namespace, r.name
                    )));
                };
                match cm.binary_data.as_ref().and_then(|d| d.get(&r.key)) {
                    Some(b) => Ok(Some(b.0.clone())),
                    None => Err(unavailable(format!(
                        "PolicyModule {name}: spec.configMapRef: ConfigMap {}/{} has no binaryData key {:?}",
                        r.namespace, r.name, r.key
                    ))),
                }
            }
        }
    }

    /// Loads the modules that changed. A module that fails keeps its previous version (if any) serving.
    pub fn load_pending(&mut self) -> Vec<Notice> {
        let mut out = Vec::new();
        for name in std::mem::take(&mut self.to_load) {
            let Some(pm) = self.modules.get(&name).cloned() else {
                continue;
            };
            let result = self.config_map_bytes(&pm).and_then(|cm_bytes| {
                let Some(registry) = self.registry() else {
                    return Err(LoadFailure {
                        reason: "HostUnavailable",
                        message: format!(
                            "the WebAssembly host did not start: {}",
                            self.host_error.clone().unwrap_or_default()
                        ),
                    });
                };
                registry
                    .load_policy_module(&pm, cm_bytes.as_deref())
                    .map(|_| ())
                    .map_err(|e| LoadFailure {
                        reason: match e {
                            RegistryError::Load { .. } => "CompileFailed",
                            _ => "InvalidSpec",
                        },
                        message: e.to_string(),
                    })
            });
            let object = pm.object_ref(&());
            match result {
                Ok(()) => {
                    self.failed.remove(&name);
                    self.degraded.remove(&name);
                    let sha = self
                        .registry
                        .as_ref()
                        .and_then(|r| r.status(&name))
                        .and_then(|s| s.sha256)
                        .unwrap_or_default();
                    out.push(Notice {
                        object,
                        severity: EventSeverity::Normal,
                        reason: REASON_LOADED,
                        action: "Load",
                        note: format!(
                            "{} module compiled and loaded (sha256 {sha})",
                            pm.spec.kind.as_str()
                        ),
                    });
                }
                Err(f) => {
                    let serving = self.serving_sha(&name);
                    tracing::warn!(module = %name, error = %f.message, previous = ?serving, "policy module not loaded");
                    let note = match &serving {
                        Some(sha) => format!(
                            "{}; the previous version (sha256 {sha}) keeps serving",
                            f.message
                        ),
                        None => format!(
                            "{}; ClusterQueues naming it use the built-in policy",
                            f.message
                        ),
                    };
                    out.push(Notice {
                        object,
                        severity: EventSeverity::Warning,
                        reason: REASON_LOAD_FAILED,
                        action: "Load",
                        note,
                    });
                    self.failed.insert(name, f);
                }
            }
        }
        out
    }

    fn serving_sha(&self, name: &str) -> Option<String> {
        self.registry
            .as_ref()
            .and_then(|r| r.status(name))
            .and_then(|s| s.sha256)
    }

    /// The engine was (re)built: every selection is applied again by the next [`Self::route`].
    pub fn engine_rebuilt(&mut self) {
        self.applied_placement.clear();
        self.applied_fairness.clear();
        self.applied_preemption.clear();
    }

    /// The fairness module that annotations name (see [`PolicyRegistry::fairness_named`]); with no host, every
    /// named module is unknown.
    fn select_fairness(
        &self,
        named: &[String],
    ) -> Result<Selection<Arc<GuardedFairness>>, RegistryError> {
        match self.registry.as_ref() {
            Some(r) => r.fairness_named(named.iter().cloned()),
            None => match named.first() {
                Some(m) => Err(RegistryError::Unknown(m.clone())),
                None => Ok(Selection::Builtin),
            },
        }
    }

    /// Puts each ClusterQueue on the placement and preemption-cost modules its annotations name, and each cohort
    /// tree on the fairness module its ClusterQueues name; anything that cannot be honoured leaves the built-in
    /// serving (for preemption cost: Kueue's preemption, without boosts or protections), with a Warning event on
    /// the ClusterQueue (once per problem).
    pub fn route(
        &mut self,
        cluster_queues: &BTreeMap<String, api::ClusterQueue>,
        cohorts: &BTreeMap<String, api::Cohort>,
        engine: &mut Engine,
    ) -> Vec<Notice> {
        let mut out = Vec::new();
        let mut problems: BTreeMap<String, String> = BTreeMap::new();
        let mut placement: BTreeMap<String, Arc<GuardedPlacement>> = BTreeMap::new();
        let annotations_of =
            |cq: &api::ClusterQueue| cq.metadata.annotations.clone().unwrap_or_default();
        for (name, cq) in cluster_queues {
            let a = annotations_of(cq);
            let selected = match self.registry.as_ref() {
                Some(r) => r.placement_for(&a),
                None => match a.get(PLACEMENT_POLICY_ANNOTATION) {
                    Some(m) => Err(RegistryError::Unknown(m.clone())),
                    None => Ok(Selection::Builtin),
                },
            };
            match selected {
                Ok(Selection::Module(p)) => {
                    placement.insert(name.clone(), p);
                }
                Ok(Selection::Builtin) => {}
                Err(e) => {
                    problems.insert(
                        name.clone(),
                        format!(
                            "{PLACEMENT_POLICY_ANNOTATION}: {e}; the built-in {} places this ClusterQueue's workloads",
                            builtin_name(PLACEMENT_POLICY_ANNOTATION)
                        ),
                    );
                }
            }
        }
        let preemption = self.preemption_by_queue(cluster_queues, &mut problems);
        let mut cohort_problems: BTreeMap<String, String> = BTreeMap::new();
        let fairness = self.fairness_by_tree(
            cluster_queues,
            cohorts,
            engine,
            &mut problems,
            &mut cohort_problems,
        );

        // The engine: only what changed (a new version of a module is a new Arc).
        for (cq, p) in &placement {
            if self
                .applied_placement
                .get(cq)
                .is_none_or(|old| !Arc::ptr_eq(old, p))
            {
                tracing::info!(cluster_queue = %cq, module = %p.name(), "placement module selected");
                engine.set_placement_policy_for(cq, p.clone());
            }
        }
        for cq in self.applied_placement.keys() {
            if !placement.contains_key(cq) {
                engine.clear_placement_policy_for(cq);
            }
        }
        self.applied_placement = placement;
        for (cq, p) in &preemption {
            if self
                .applied_preemption
                .get(cq)
                .is_none_or(|old| !Arc::ptr_eq(old, p))
            {
                tracing::info!(cluster_queue = %cq, module = %p.name(), "preemption-cost module selected");
                engine
                    .set_preemption_cost_policy_for(cq, p.clone() as Arc<dyn PreemptionCostPolicy>);
            }
        }
        for cq in self.applied_preemption.keys() {
            if !preemption.contains_key(cq) {
                engine.clear_preemption_cost_policy_for(cq);
            }
        }
        self.applied_preemption = preemption;
        let fairness_changed = fairness.len() != self.applied_fairness.len()
            || fairness.iter().any(|(root, f)| {
                self.applied_fairness
                    .get(root)
                    .is_none_or(|old| !Arc::ptr_eq(old, f))
            });
        if fairness_changed {
            for (root, f) in &fairness {
                tracing::info!(cohort = %root, module = %crate::engine::EngineFairness::name(f.as_ref()), "fairness module orders the cohort tree");
            }
            // All trees in one step, so a usage history whose half-life stays in use is kept.
            engine.set_tree_fairness_policies(fairness.iter().map(|(root, f)| {
                (
                    root.clone(),
                    f.clone() as Arc<dyn crate::engine::EngineFairness>,
                )
            }));
        }
        self.applied_fairness = fairness;

        // Events: a new or changed problem, and a problem that went away.
        problem_events(
            &self.reported,
            &problems,
            |n| cluster_queues.get(n).map(reference),
            "the policy modules this ClusterQueue names serve it again",
            &mut out,
        );
        problem_events(
            &self.reported_cohorts,
            &cohort_problems,
            |n| cohorts.get(n).map(|c| c.object_ref(&())),
            "no problem remains with the fairness module this Cohort names",
            &mut out,
        );
        self.reported = problems;
        self.reported_cohorts = cohort_problems;
        out
    }

    /// The preemption-cost module of each ClusterQueue whose annotation names one that is loaded. Problems (a
    /// module missing or of another kind, or one that is never consulted because the ClusterQueue preempts
    /// nothing) go to the ClusterQueue.
    fn preemption_by_queue(
        &self,
        cluster_queues: &BTreeMap<String, api::ClusterQueue>,
        problems: &mut BTreeMap<String, String>,
    ) -> BTreeMap<String, Arc<GuardedPreemptionCost>> {
        let mut out = BTreeMap::new();
        for (name, cq) in cluster_queues {
            let a = cq.metadata.annotations.clone().unwrap_or_default();
            let selected = match self.registry.as_ref() {
                Some(r) => r.preemption_cost_for(&a),
                None => match a.get(PREEMPTION_POLICY_ANNOTATION) {
                    Some(m) => Err(RegistryError::Unknown(m.clone())),
                    None => Ok(Selection::Builtin),
                },
            };
            match selected {
                Ok(Selection::Module(p)) => {
                    // The policy of the preempting ClusterQueue is asked; one that preempts nothing never asks.
                    let preemption = cq.spec.preemption();
                    if preemption.within_cluster_queue() == PreemptionPolicy::Never
                        && preemption.reclaim_within_cohort() == PreemptionPolicy::Never
                    {
                        append_problem(
                            problems,
                            name,
                            &format!(
                                "{PREEMPTION_POLICY_ANNOTATION}: PolicyModule {} is loaded but not consulted: this ClusterQueue's spec.preemption (withinClusterQueue and reclaimWithinCohort Never) lets its workloads preempt nothing",
                                p.name()
                            ),
                        );
                    }
                    out.insert(name.clone(), p);
                }
                Ok(Selection::Builtin) => {}
                Err(e) => append_problem(
                    problems,
                    name,
                    &format!(
                        "{PREEMPTION_POLICY_ANNOTATION}: {e}; this ClusterQueue's workloads preempt by Kueue's rules, without boosts or protections"
                    ),
                ),
            }
        }
        out
    }

    /// The fairness module of each cohort tree, by root Cohort: the one the root Cohort's annotation names,
    /// else the one the tree's ClusterQueues name (those without the annotation follow). Problems go to the
    /// ClusterQueue or Cohort whose annotation cannot be honoured.
    fn fairness_by_tree(
        &self,
        cluster_queues: &BTreeMap<String, api::ClusterQueue>,
        cohorts: &BTreeMap<String, api::Cohort>,
        engine: &Engine,
        problems: &mut BTreeMap<String, String>,
        cohort_problems: &mut BTreeMap<String, String>,
    ) -> BTreeMap<String, Arc<GuardedFairness>> {
        let named = |a: &Option<BTreeMap<String, String>>| {
            a.as_ref()
                .and_then(|a| a.get(FAIRNESS_POLICY_ANNOTATION))
                .cloned()
        };
        // ClusterQueues by the root Cohort of their tree, with the module each names.
        let mut trees: BTreeMap<String, Vec<(&String, Option<String>)>> = BTreeMap::new();
        for (name, cq) in cluster_queues {
            let m = named(&cq.metadata.annotations);
            let Some(cohort) = cq.spec.cohort() else {
                if let Some(m) = m {
                    let p = match self.select_fairness(std::slice::from_ref(&m)) {
                        Err(e) => format!(
                            "{FAIRNESS_POLICY_ANNOTATION}: {e}; this ClusterQueue has no cohort, so no fairness policy orders it"
                        ),
                        Ok(_) => format!(
                            "{FAIRNESS_POLICY_ANNOTATION}: {m} is not consulted: a fairness policy orders the ClusterQueues of one cohort tree, and this ClusterQueue has no cohort"
                        ),
                    };
                    append_problem(problems, name, &p);
                }
                continue;
            };
            let Some(root) = engine.cohort_root_of(name) else {
                // Rejected by the engine, or on a cohort cycle: no tree orders it.
                if let Some(m) = m {
                    append_problem(
                        problems,
                        name,
                        &format!(
                            "{FAIRNESS_POLICY_ANNOTATION}: {m} is not consulted: cohort {cohort} is not in a valid cohort tree (its parents form a cycle, or the ClusterQueue was rejected)"
                        ),
                    );
                }
                continue;
            };
            trees.entry(root.to_string()).or_default().push((name, m));
        }
        // Only a tree's root Cohort can name its module; a root without ClusterQueues has nothing to order,
        // but a name that cannot be honoured is still reported.
        for (name, c) in cohorts {
            let Some(m) = named(&c.metadata.annotations) else {
                continue;
            };
            let Some(root) = engine.root_of_cohort(name) else {
                cohort_problems.insert(
                    name.clone(),
                    format!(
                        "{FAIRNESS_POLICY_ANNOTATION}: {m} is not consulted: this Cohort is not in a valid cohort tree (its parents form a cycle, or it was rejected)"
                    ),
                );
                continue;
            };
            let problem = if root != name {
                Some(format!(
                    "{FAIRNESS_POLICY_ANNOTATION}: {m} is ignored: only the root of a cohort tree names its fairness module, and this Cohort's root is {root}"
                ))
            } else if trees.contains_key(name) {
                None
            } else {
                self.select_fairness(std::slice::from_ref(&m))
                    .err()
                    .map(|e| format!("{FAIRNESS_POLICY_ANNOTATION}: {e}"))
            };
            if let Some(p) = problem {
                cohort_problems.insert(name.clone(), p);
            }
        }
        let mut fairness = BTreeMap::new();
        for (root, members) in &trees {
            let by_root = cohorts
                .get(root)
                .and_then(|c| named(&c.metadata.annotations));
            let (selected, problem_to) = match &by_root {
                Some(m) => {
                    for (cq, theirs) in members {
                        if let Some(t) = theirs.as_ref().filter(|t| *t != m) {
                            append_problem(
                                problems,
                                cq,
                                &format!(
                                    "{FAIRNESS_POLICY_ANNOTATION}: {t} is ignored: the tree's root Cohort {root} names {m}"
                                ),
                            );
                        }
                    }
                    (self.select_fairness(std::slice::from_ref(m)), None)
                }
                None => {
                    let votes: Vec<&String> = members
                        .iter()
                        .filter_map(|(cq, m)| m.as_ref().map(|_| *cq))
                        .collect();
                    if votes.is_empty() {
                        continue;
                    }
                    let names: Vec<String> =
                        members.iter().filter_map(|(_, m)| m.clone()).collect();
                    (self.select_fairness(&names), Some(votes))
                }
            };
            let problem = match selected {
                Ok(Selection::Module(f)) => {
                    let name = crate::engine::EngineFairness::name(f.as_ref()).to_string();
                    fairness.insert(root.clone(), f);
                    // Loaded and selected, but the engine orders by fair share only with fair sharing on.
                    (!engine.fair_sharing()).then(|| format!(
                        "{FAIRNESS_POLICY_ANNOTATION}: fair sharing is off in the operator's configuration, so PolicyModule {name} is loaded but not consulted"
                    ))
                }
                Ok(Selection::Builtin) => None,
                Err(e) => Some(format!(
                    "{FAIRNESS_POLICY_ANNOTATION}: {e}; the built-in {} orders the workloads of cohort tree {root}",
                    builtin_name(FAIRNESS_POLICY_ANNOTATION)
                )),
            };
            if let Some(p) = problem {
                match problem_to {
                    Some(cqs) => {
                        for cq in cqs {
                            append_problem(problems, cq, &p);
                        }
                    }
                    None => append_problem(cohort_problems, root, &p),
                }
            }
        }
        fairness
    }

    /// The selection problem of ClusterQueue `cq`, if any.
    pub fn problem(&self, cq: &str) -> Option<&str> {
        self.reported.get(cq).map(String::as_str)
    }

    /// The status module `name` should have (transition times are the epoch: filled in by [`merge_status`]).
    pub fn wanted_status(&self, name: &str) -> Option<PolicyModuleStatus> {
        let pm = self.modules.get(name)?;
        let loaded = self.registry.as_ref().and_then(|r| r.status(name));
        let mut status = loaded.clone().unwrap_or_default();
        if let Some(f) = self.failed.get(name) {
            let message = match loaded.as_ref().and_then(|s| s.sha256.clone()) {
                Some(sha) => format!(
                    "{}; the previous version (sha256 {sha}) keeps serving",
                    f.message
                ),
                None => f.message.clone(),
            };
            let cond = Condition {
                type_: CONDITION_COMPILED.to_string(),
                status: "False".to_string(),
                reason: f.reason.to_string(),
                message,
                last_transition_time: epoch(),
                observed_generation: None,
            };
            match status
                .conditions
                .iter_mut()
                .find(|c| c.type_ == CONDITION_COMPILED)
            {
                Some(c) => *c = cond,
                None => status.conditions.insert(0, cond),
            }
        } else if loaded.is_none() {
            // Not loaded and no failure recorded: still waiting for its first load.
            return None;
        }
        let generation = pm.metadata.generation;
        for c in &mut status.conditions {
            c.observed_generation = generation;
        }
        Some(status)
    }

    /// Statuses to write now: every module whose Compiled or Degraded condition changed, and those whose
    /// counters changed when `status_interval` has passed since their last write. Also returns the events for
    /// modules that just became Degraded.
    pub fn due_statuses(&mut self, now: Instant) -> (Vec<DueStatus>, Vec<Notice>) {
        let mut due = Vec::new();
        let mut notices = Vec::new();
        self.last_check = Some(now);
        let names: Vec<String> = self.modules.keys().cloned().collect();
        for name in names {
            let Some(status) = self.wanted_status(&name) else {
                continue;
            };
            let Some(object) = self.modules.get(&name).cloned() else {
                continue;
            };
            let is_degraded = status
                .conditions
                .iter()
                .any(|c| c.type_ == CONDITION_DEGRADED && c.status == "True");
            if is_degraded && self.degraded.insert(name.clone()) {
                notices.push(Notice {
                    object: object.object_ref(&()),
                    severity: EventSeverity::Warning,
                    reason: REASON_DEGRADED,
                    action: "Call",
                    note: status
                        .conditions
                        .iter()
                        .find(|c| c.type_ == CONDITION_DEGRADED)
                        .map(|c| c.message.clone())
                        .unwrap_or_default(),
                });
            }
            let current = object.status.clone().unwrap_or_default();
            let (significant, any) = differs(&current, &status);
            let recent = self
                .written
                .get(&name)
                .is_some_and(|(_, at)| now.duration_since(*at) < self.status_interval);
            if significant || (any && !recent) {
                due.push(DueStatus { object, status });
            }
        }
        (due, notices)
    }

    /// Records a status write (the object as the API server returned it).
    pub fn status_written(&mut self, obj: PolicyModule, now: Instant) {
        let name = obj.name_any();
        if let Some(m) = self.modules.get_mut(&name) {
            // Only the status and resourceVersion: a newer spec seen meanwhile stays.
            m.status = obj.status.clone();
            m.metadata.resource_version = obj.metadata.resource_version.clone();
        }
        self.written
            .insert(name, (obj.status.unwrap_or_default(), now));
    }

    /// Turns the modules' counters into metrics: `sluice_policy_module_calls_total{module,outcome}` and
    /// `sluice_policy_degraded{module}`.
    pub fn report_metrics(&mut self, metrics: &Metrics) {
        let Some(registry) = self.registry.as_ref() else {
            return;
        };
        for name in registry.names() {
            let Some(h) = registry.health(&name) else {
                continue;
            };
            let before = self.metered.get(&name).cloned().unwrap_or_default();
            // A reloaded module starts from zero again: count from there.
            let reset = h.calls < before.calls;
            let base = if reset {
                HealthSnapshot::default()
            } else {
                before
            };
            let failed = |s: &HealthSnapshot| {
                s.failures
                    .iter()
                    .filter(|(k, _)| **k != "degraded")
                    .map(|(_, v)| *v)
                    .sum::<u64>()
            };
            let ok_now = h.calls.saturating_sub(failed(&h));
            let ok_before = base.calls.saturating_sub(failed(&base));
            let add = |outcome: &str, n: u64| {
                if n > 0 {
                    metrics.policy_module_called(&name, outcome, n);
                }
            };
            add("ok", ok_now.saturating_sub(ok_before));
            for (class, n) in &h.failures {
                let was = base.failures.get(class).copied().unwrap_or(0);
                add(class, n.saturating_sub(was));
            }
            metrics.policy_module_degraded(&name, h.degraded);
            self.metered.insert(name, h);
        }
        self.metered
            .retain(|n, _| registry.names().iter().any(|x| x == n));
    }

    /// When counters not yet written may be due (None: no module is loaded).
    pub fn next_status_check(&self) -> Option<Instant> {
        self.registry.as_ref().filter(|r| !r.names().is_empty())?;
        Some(self.last_check? + self.status_interval)
    }
}

fn epoch() -> Time {
    Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// Whether `wanted` differs from `current`: (in a condition's status, type or reason, or in anything at all).
fn differs(current: &PolicyModuleStatus, wanted: &PolicyModuleStatus) -> (bool, bool) {
    let key = |s: &PolicyModuleStatus| {
        let mut v: Vec<(String, String, String)> = s
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect();
        v.sort();
        (v, s.sha256.clone())
    };
    let significant = key(current) != key(wanted);
    let strip = |s: &PolicyModuleStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = epoch();
        }
        s.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        s
    };
    (significant, significant || strip(current) != strip(wanted))
}

/// `wanted` with each condition's transition time kept from `current` when its status did not change, else
/// `now`.
pub fn merge_status(
    current: Option<&PolicyModuleStatus>,
    wanted: &PolicyModuleStatus,
    now: Time,
) -> PolicyModuleStatus {
    let mut out = wanted.clone();
    for c in &mut out.conditions {
        let before = current.and_then(|s| s.conditions.iter().find(|o| o.type_ == c.type_));
        c.last_transition_time = match before {
            Some(o) if o.status == c.status => o.last_transition_time.clone(),
            _ => now.clone(),
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use sluice_sdk::sluice::policy_module::{PolicyKind, PolicyModuleSpec};

    use super::*;

    fn cond(t: &str, s: &str, reason: &str, msg: &str) -> Condition {
        Condition {
            type_: t.into(),
            status: s.into(),
            reason: reason.into(),
            message: msg.into(),
            last_transition_time: epoch(),
            observed_generation: None,
        }
    }

    fn cq(name: &str, annotations: &[(&str, &str)]) -> (String, api::ClusterQueue) {
        in_cohort(name, "", annotations)
    }

    /// A ClusterQueue in `cohort` ("" for none).
    fn in_cohort(
        name: &str,
        cohort: &str,
        annotations: &[(&str, &str)],
    ) -> (String, api::ClusterQueue) {
        let mut c = api::ClusterQueue::default();
        c.spec.cohort_name = cohort.to_string();
        c.metadata.name = Some(name.to_string());
        c.metadata.annotations = Some(annotation_map(annotations));
        (name.to_string(), c)
    }

    fn annotation_map(annotations: &[(&str, &str)]) -> BTreeMap<String, String> {
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn fairness_module(name: &str) -> PolicyModule {
        let bytes = crate::policy::embedded::FAIR_CREDITS;
        PolicyModule::new(
            name,
            sluice_sdk::sluice::policy_module::PolicyModuleSpec {
                kind: sluice_sdk::sluice::policy_module::PolicyKind::Fairness,
                module: Some(k8s_openapi::ByteString(bytes.to_vec())),
                sha256: sluice_sdk::host::sha256_hex(bytes),
                ..Default::default()
            },
        )
    }

    fn policies_with_credits() -> Policies {
        let mut p = Policies::new(
            HostConfig {
                pool_instances: 4,
                default_deadline: Duration::from_secs(2),
                ..HostConfig::default()
            },
            2,
            Duration::from_secs(10),
        );
        p.module_changed(fairness_module("credits"), false);
        let loaded: Vec<&str> = p.load_pending().iter().map(|n| n.reason).collect();
        assert_eq!(loaded, [REASON_LOADED]);
        p
    }

    fn fair_engine(cqs: &BTreeMap<String, api::ClusterQueue>) -> Engine {
        let mut engine = Engine::new(crate::engine::EngineConfig {
            fair_sharing: Some(crate::engine::FairSharingConfig::default()),
            ..crate::engine::EngineConfig::default()
        });
        sync(&mut engine, cqs);
        engine
    }

    fn sync(engine: &mut Engine, cqs: &BTreeMap<String, api::ClusterQueue>) {
        for c in cqs.values() {
            let c = crate::ingest::cluster_queue(c).expect("valid ClusterQueue");
            engine
                .apply(crate::engine::Event::UpsertClusterQueue(c))
                .expect("applies");
        }
    }

    /// Puts Cohort `name` under `parent` in the engine.
    fn nest(engine: &mut Engine, name: &str, parent: &str) {
        engine
            .apply(crate::engine::Event::UpsertCohort(crate::engine::Cohort {
                name: name.into(),
                parent: Some(parent.into()),
                resource_groups: Vec::new(),
                fair_weight: 1.0,
            }))
            .expect("applies");
    }

    fn names(notices: &[Notice]) -> Vec<(&'static str, String)> {
        let mut v: Vec<_> = notices
            .iter()
            .map(|n| (n.reason, n.object.name.clone().unwrap_or_default()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn each_cohort_tree_gets_the_fairness_module_its_queues_name() {
        let mut p = policies_with_credits();
        let mut cqs: BTreeMap<String, api::ClusterQueue> = [
            in_cohort("a", "team-x", &[(FAIRNESS_POLICY_ANNOTATION, "credits")]),
            in_cohort("b", "team-x", &[(PLACEMENT_POLICY_ANNOTATION, "credits")]),
            in_cohort("c", "team-y", &[]),
            cq("d", &[(FAIRNESS_POLICY_ANNOTATION, "credits")]),
        ]
        .into();
        let mut engine = fair_engine(&cqs);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        // team-x (a names it, b follows) is on the module; team-y stays on DRS.
        assert_eq!(engine.fairness_policy_name_of("a"), Some("credits"));
        assert_eq!(engine.fairness_policy_name_of("b"), Some("credits"));
        assert_eq!(engine.fairness_policy_name_of("c"), Some("drs"));
        assert_eq!(engine.fairness_policy_name(), "drs");
        // b names a fairness module for placement; d has no cohort, so nothing for a fairness module to order.
        assert_eq!(engine.placement_policy_name("b"), TopologyPack::NAME);
        assert_eq!(
            names(&notices),
            [(REASON_FALLBACK, "b".into()), (REASON_FALLBACK, "d".into())]
        );
        assert!(
            p.problem("b")
                .is_some_and(|m| m.contains("credits is a fairness module"))
        );
        assert!(
            p.problem("d").is_some_and(|m| m.contains("has no cohort")),
            "{:?}",
            p.problem("d")
        );
        // Reported once, not on every route.
        assert!(p.route(&cqs, &BTreeMap::new(), &mut engine).is_empty());

        // A conflict in team-x puts that tree on DRS and tells both queues; team-y is not involved.
        cqs.extend([in_cohort(
            "b",
            "team-x",
            &[(FAIRNESS_POLICY_ANNOTATION, "other")],
        )]);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(engine.fairness_policy_name_of("a"), Some("drs"));
        assert_eq!(
            names(&notices),
            [(REASON_FALLBACK, "a".into()), (REASON_FALLBACK, "b".into())]
        );
        assert!(
            p.problem("a")
                .is_some_and(|m| m.contains("different fairness modules")
                    && m.contains("cohort tree team-x")),
            "{:?}",
            p.problem("a")
        );
        assert!(p.problem("c").is_none());

        // b moves to team-y and names credits there: both trees are on the module, each on its own.
        cqs.extend([in_cohort(
            "b",
            "team-y",
            &[(FAIRNESS_POLICY_ANNOTATION, "credits")],
        )]);
        sync(&mut engine, &cqs);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(engine.fairness_policy_name_of("a"), Some("credits"));
        assert_eq!(engine.fairness_policy_name_of("c"), Some("credits"));
        assert_eq!(
            names(&notices),
            [(REASON_SELECTED, "a".into()), (REASON_SELECTED, "b".into())]
        );

        // Metrics name the module; deleted, it is gone and DRS serves every tree.
        let m = Metrics::new();
        p.report_metrics(&m);
        assert!(
            m.render()
                .contains("sluice_policy_degraded{module=\"credits\"} 0"),
            "{}",
            m.render()
        );
        p.module_changed(fairness_module("credits"), true);
        p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(engine.fairness_policy_name_of("a"), Some("drs"));
        assert_eq!(engine.fairness_policy_name_of("c"), Some("drs"));
        assert!(
            p.problem("a")
                .is_some_and(|m| m.contains("no PolicyModule named"))
        );
    }

    #[test]
    fn a_cohort_tree_follows_its_root_when_cohorts_nest() {
        let mut p = policies_with_credits();
        let cqs: BTreeMap<String, api::ClusterQueue> = [
            in_cohort("a", "org", &[(FAIRNESS_POLICY_ANNOTATION, "credits")]),
            in_cohort("b", "team", &[]),
        ]
        .into();
        let mut engine = fair_engine(&cqs);
        p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(engine.fairness_policy_name_of("b"), Some("drs"));
        // team joins org's tree: routing again (a Cohort event does) puts b on org's module.
        nest(&mut engine, "team", "org");
        assert!(p.route(&cqs, &BTreeMap::new(), &mut engine).is_empty());
        assert_eq!(engine.fairness_policy_name_of("b"), Some("credits"));
        // org under team closes a cycle: no tree orders a or b, and a is told.
        nest(&mut engine, "org", "team");
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(names(&notices), [(REASON_FALLBACK, "a".into())]);
        assert!(
            p.problem("a")
                .is_some_and(|m| m.contains("not in a valid cohort tree")),
            "{:?}",
            p.problem("a")
        );
        assert_eq!(engine.fairness_policy_name_of("a"), Some("drs"));
    }

    fn cohort(name: &str, parent: &str, annotations: &[(&str, &str)]) -> (String, api::Cohort) {
        let mut c = api::Cohort::new(
            name,
            sluice_sdk::kueue::v1beta2::CohortSpec {
                parent_name: parent.to_string(),
                ..Default::default()
            },
        );
        c.metadata.annotations = Some(annotation_map(annotations));
        (name.to_string(), c)
    }

    #[test]
    fn a_root_cohort_names_its_trees_module_over_its_queues() {
        let mut p = policies_with_credits();
        let cqs: BTreeMap<String, api::ClusterQueue> = [
            in_cohort("a", "org", &[(FAIRNESS_POLICY_ANNOTATION, "other")]),
            in_cohort("b", "team", &[]),
        ]
        .into();
        let mut engine = fair_engine(&cqs);
        let mut cohorts: BTreeMap<String, api::Cohort> = [
            cohort("org", "", &[(FAIRNESS_POLICY_ANNOTATION, "credits")]),
            cohort("team", "org", &[(FAIRNESS_POLICY_ANNOTATION, "credits")]),
            cohort("idle", "", &[(FAIRNESS_POLICY_ANNOTATION, "typo")]),
        ]
        .into();
        for c in cohorts.values() {
            let c = crate::ingest::cohort(c).expect("valid Cohort");
            engine
                .apply(crate::engine::Event::UpsertCohort(c))
                .expect("applies");
        }
        let notices = p.route(&cqs, &cohorts, &mut engine);
        assert_eq!(engine.fairness_policy_name_of("a"), Some("credits"));
        assert_eq!(engine.fairness_policy_name_of("b"), Some("credits"));
        // a's own choice, team's (not a root) and idle's unknown module are each reported.
        assert_eq!(
            names(&notices),
            [
                (REASON_FALLBACK, "a".into()),
                (REASON_FALLBACK, "idle".into()),
                (REASON_FALLBACK, "team".into())
            ]
        );
        assert!(
            p.problem("a").is_some_and(
                |m| m.contains("other is ignored: the tree's root Cohort org names credits")
            ),
            "{:?}",
            p.problem("a")
        );
        let note = |name: &str| {
            notices
                .iter()
                .find(|n| n.object.name.as_deref() == Some(name))
                .map(|n| (n.object.kind.clone(), n.note.clone()))
        };
        assert_eq!(
            note("team").map(|(k, m)| (k, m.contains("this Cohort's root is org"))),
            Some((Some("Cohort".to_string()), true))
        );
        assert!(
            note("idle").is_some_and(|(_, m)| m.contains("no PolicyModule named \"typo\"")),
            "{:?}",
            note("idle")
        );

        // The root names a module that is not loaded: the tree is on DRS and the root Cohort hears it.
        cohorts.extend([cohort(
            "org",
            "",
            &[(FAIRNESS_POLICY_ANNOTATION, "missing")],
        )]);
        let notices = p.route(&cqs, &cohorts, &mut engine);
        assert_eq!(engine.fairness_policy_name_of("a"), Some("drs"));
        assert!(
            note_of(&notices, "org")
                .is_some_and(|m| m.contains("orders the workloads of cohort tree org")),
            "{notices:?}"
        );
        // Fixed: the Cohort is told its module serves again.
        cohorts.extend([cohort(
            "org",
            "",
            &[(FAIRNESS_POLICY_ANNOTATION, "credits")],
        )]);
        let notices = p.route(&cqs, &cohorts, &mut engine);
        assert_eq!(engine.fairness_policy_name_of("a"), Some("credits"));
        assert!(
            notices
                .iter()
                .any(|n| n.object.name.as_deref() == Some("org") && n.reason == REASON_SELECTED),
            "{notices:?}"
        );
    }

    fn note_of(notices: &[Notice], name: &str) -> Option<String> {
        notices
            .iter()
            .find(|n| n.object.name.as_deref() == Some(name))
            .map(|n| n.note.clone())
    }

    #[test]
    fn a_fairness_module_without_fair_sharing_is_reported() {
        let mut p = Policies::new(
            HostConfig {
                pool_instances: 4,
                default_deadline: Duration::from_secs(2),
                ..HostConfig::default()
            },
            2,
            Duration::from_secs(10),
        );
        p.module_changed(fairness_module("credits"), false);
        p.load_pending();
        let mut engine = Engine::new(crate::engine::EngineConfig::default());
        let cqs: BTreeMap<String, api::ClusterQueue> = [in_cohort(
            "a",
            "team",
            &[(FAIRNESS_POLICY_ANNOTATION, "credits")],
        )]
        .into();
        sync(&mut engine, &cqs);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(notices.len(), 1);
        assert!(
            notices[0].note.contains("fair sharing is off"),
            "{}",
            notices[0].note
        );
    }

    /// The shipped anti-thrash module as PolicyModule `name`.
    fn cost_module(name: &str) -> PolicyModule {
        let bytes = crate::policy::embedded::ANTI_THRASH;
        PolicyModule::new(
            name,
            PolicyModuleSpec {
                kind: PolicyKind::PreemptionCost,
                module: Some(k8s_openapi::ByteString(bytes.to_vec())),
                sha256: sluice_sdk::host::sha256_hex(bytes),
                config: Some(r#"{"minRunSeconds": 600}"#.into()),
                ..Default::default()
            },
        )
    }

    /// A ClusterQueue that preempts within itself (`LowerPriority`), so its preemption-cost module is asked.
    fn preempting(name: &str, annotations: &[(&str, &str)]) -> (String, api::ClusterQueue) {
        let (name, mut c) = cq(name, annotations);
        c.spec.preemption = Some(api::ClusterQueuePreemption {
            within_cluster_queue: Some(PreemptionPolicy::LowerPriority),
            ..Default::default()
        });
        (name, c)
    }

    #[test]
    fn each_cluster_queue_gets_the_preemption_cost_module_it_names() {
        let mut p = policies_with_credits();
        p.module_changed(cost_module("calm"), false);
        let loaded = p.load_pending();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].reason, REASON_LOADED);
        assert!(
            loaded[0]
                .note
                .starts_with("preemptioncost module compiled and loaded"),
            "{}",
            loaded[0].note
        );
        let mut cqs: BTreeMap<String, api::ClusterQueue> = [
            preempting("a", &[(PREEMPTION_POLICY_ANNOTATION, "calm")]),
            preempting("b", &[(PREEMPTION_POLICY_ANNOTATION, "credits")]),
            preempting("c", &[(PREEMPTION_POLICY_ANNOTATION, "missing")]),
            cq("d", &[(PREEMPTION_POLICY_ANNOTATION, "calm")]),
            preempting("e", &[(PLACEMENT_POLICY_ANNOTATION, "calm")]),
            preempting("f", &[]),
        ]
        .into();
        let mut engine = Engine::new(crate::engine::EngineConfig::default());
        sync(&mut engine, &cqs);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        // a names it; d names it too but preempts nothing, which it is told; f names nothing.
        assert_eq!(engine.preemption_cost_policy_name("a"), Some("calm"));
        assert_eq!(engine.preemption_cost_policy_name("d"), Some("calm"));
        assert_eq!(engine.preemption_cost_policy_name("b"), None);
        assert_eq!(engine.preemption_cost_policy_name("c"), None);
        assert_eq!(engine.preemption_cost_policy_name("f"), None);
        assert_eq!(
            names(&notices),
            [
                (REASON_FALLBACK, "b".into()),
                (REASON_FALLBACK, "c".into()),
                (REASON_FALLBACK, "d".into()),
                (REASON_FALLBACK, "e".into())
            ]
        );
        let problem = |cq: &str| p.problem(cq).unwrap_or_default().to_string();
        assert_eq!(
            problem("b"),
            "sluice.dev/preemption-policy: PolicyModule credits is a fairness module, but sluice.dev/preemption-policy needs a preemption-cost module; this ClusterQueue's workloads preempt by Kueue's rules, without boosts or protections"
        );
        assert!(
            problem("c").contains("no PolicyModule named \"missing\" is loaded"),
            "{}",
            problem("c")
        );
        assert!(
            problem("d").contains("calm is loaded but not consulted")
                && problem("d").contains("preempt nothing"),
            "{}",
            problem("d")
        );
        assert!(
            problem("e").contains("calm is a preemption-cost module, but sluice.dev/placement-policy needs a placement module"),
            "{}",
            problem("e")
        );
        assert!(p.route(&cqs, &BTreeMap::new(), &mut engine).is_empty());

        // c's annotation removed: it is told the problem is gone; deleting the module clears a and d.
        cqs.extend([preempting("c", &[])]);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(names(&notices), [(REASON_SELECTED, "c".into())]);
        p.module_changed(cost_module("calm"), true);
        let notices = p.route(&cqs, &BTreeMap::new(), &mut engine);
        assert_eq!(engine.preemption_cost_policy_name("a"), None);
        assert_eq!(engine.preemption_cost_policy_name("d"), None);
        assert!(
            note_of(&notices, "a").is_some_and(|m| m.contains("no PolicyModule named \"calm\"")),
            "{notices:?}"
        );
    }

    #[test]
    fn a_rebuilt_engine_gets_the_preemption_cost_modules_again() {
        let mut p = policies_with_credits();
        p.module_changed(cost_module("calm"), false);
        p.load_pending();
        let cqs: BTreeMap<String, api::ClusterQueue> =
            [preempting("a", &[(PREEMPTION_POLICY_ANNOTATION, "calm")])].into();
        let mut engine = Engine::new(crate::engine::EngineConfig::default());
        sync(&mut engine, &cqs);
        p.route(&cqs, &BTreeMap::new(), &mut engine);
        let mut fresh = Engine::new(crate::engine::EngineConfig::default());
        sync(&mut fresh, &cqs);
        p.engine_rebuilt();
        p.route(&cqs, &BTreeMap::new(), &mut fresh);
        assert_eq!(fresh.preemption_cost_policy_name("a"), Some("calm"));
    }

    #[test]
    fn counter_changes_are_not_significant_condition_changes_are() {
        let a = PolicyModuleStatus {
            conditions: vec![cond("Compiled", "True", "Loaded", "x")],
            sha256: Some("ab".into()),
            failures: BTreeMap::new(),
            calls: 0,
        };
        let mut b = a.clone();
        b.failures.insert("trap".into(), 1);
        assert_eq!(differs(&a, &b), (false, true));
        let mut calls = a.clone();
        calls.calls = 10;
        assert_eq!(differs(&a, &calls), (false, true));
        assert_eq!(differs(&a, &a), (false, false));
        let mut c = a.clone();
        c.conditions[0].status = "False".into();
        assert_eq!(differs(&a, &c), (true, true));
    }

    #[test]
    fn transition_time_moves_only_when_the_status_does() {
        let t1 = Time(k8s_openapi::jiff::Timestamp::from_second(100).unwrap_or_default());
        let t2 = Time(k8s_openapi::jiff::Timestamp::from_second(200).unwrap_or_default());
        let mut current = PolicyModuleStatus {
            conditions: vec![
                cond("Compiled", "True", "Loaded", "x"),
                cond("Degraded", "False", "Healthy", ""),
            ],
            ..PolicyModuleStatus::default()
        };
        current.conditions[0].last_transition_time = t1.clone();
        current.conditions[1].last_transition_time = t1.clone();
        let wanted = PolicyModuleStatus {
            conditions: vec![
                cond("Compiled", "True", "Loaded", "y"),
                cond("Degraded", "True", "RepeatedFailures", "z"),
            ],
            ..PolicyModuleStatus::default()
        };
        let out = merge_status(Some(&current), &wanted, t2.clone());
        assert_eq!(out.conditions[0].last_transition_time, t1);
        assert_eq!(out.conditions[1].last_transition_time, t2);
    }
}
