//! Loaded policy modules by name (each pinned by sha256), and their selection per ClusterQueue.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_sdk::host::validate::{kind_of, limits_of};
use sluice_sdk::host::{LoadError, ModuleKind, ModuleLimits, PolicyHost, sha256_hex};
use sluice_sdk::policy::PlacementPolicy;
use sluice_sdk::sluice::policy_module::{
    CONDITION_COMPILED, CONDITION_DEGRADED, FAIRNESS_POLICY_ANNOTATION,
    PLACEMENT_POLICY_ANNOTATION, PREEMPTION_POLICY_ANNOTATION, PolicyModule, PolicyModuleStatus,
};
use thiserror::Error;

use super::embedded;
use super::fairness::GuardedFairness;
use super::health::{HealthSnapshot, ModuleHealth};
use super::placement::GuardedPlacement;
use super::preemption_cost::GuardedPreemptionCost;

/// Why a module could not be registered or selected.
#[derive(Debug, Error, PartialEq)]
pub enum RegistryError {
    /// The host refused the module.
    #[error("PolicyModule {name}: {error}")]
    Load {
        /// Module name.
        name: String,
        /// Why.
        error: LoadError,
    },
    /// The PolicyModule object is invalid.
    #[error("{0}")]
    Invalid(String),
    /// No module of that name is loaded.
    #[error("no PolicyModule named {0:?} is loaded")]
    Unknown(String),
    /// The named module is of another kind.
    #[error("PolicyModule {name} is a {got} module, but {annotation} needs a {want} module")]
    WrongKind {
        /// Module name.
        name: String,
        /// Annotation that named it.
        annotation: &'static str,
        /// Kind needed.
        want: &'static str,
        /// Kind loaded.
        got: &'static str,
    },
    /// ClusterQueues of one cohort tree name different fairness modules.
    #[error("ClusterQueues of one cohort tree name different fairness modules: {0:?}")]
    Conflict(Vec<String>),
}

/// A loaded module.
#[derive(Clone, Debug)]
pub enum LoadedModule {
    /// A placement module.
    Placement(Arc<GuardedPlacement>),
    /// A fairness module.
    Fairness(Arc<GuardedFairness>),
    /// A preemption-cost module.
    PreemptionCost(Arc<GuardedPreemptionCost>),
}

impl LoadedModule {
    /// The world the module implements.
    pub fn kind(&self) -> ModuleKind {
        match self {
            Self::Placement(_) => ModuleKind::Placement,
            Self::Fairness(_) => ModuleKind::Fairness,
            Self::PreemptionCost(_) => ModuleKind::PreemptionCost,
        }
    }
}

#[derive(Debug)]
struct Entry {
    sha256: String,
    config: String,
    limits: ModuleLimits,
    module: LoadedModule,
    health: Arc<ModuleHealth>,
}

/// What a ClusterQueue (or cohort tree) uses.
#[derive(Clone, Debug)]
pub enum Selection<T> {
    /// The built-in policy (no annotation).
    Builtin,
    /// A module.
    Module(T),
}

/// The operator's policy modules.
#[derive(Debug)]
pub struct PolicyRegistry {
    host: PolicyHost,
    degrade_after: u32,
    builtin_placement: Arc<dyn PlacementPolicy>,
    modules: BTreeMap<String, Entry>,
}

impl PolicyRegistry {
    /// A registry on `host`; modules are degraded after `degrade_after` failures in a row, and
    /// placement falls back to `builtin_placement`.
    pub fn new(
        host: PolicyHost,
        degrade_after: u32,
        builtin_placement: Arc<dyn PlacementPolicy>,
    ) -> Self {
        Self {
            host,
            degrade_after,
            builtin_placement,
            modules: BTreeMap::new(),
        }
    }

    /// The WebAssembly host.
    pub fn host(&self) -> &PolicyHost {
        &self.host
    }

    /// Loads (or replaces) module `name`. Loading the same bytes, config and limits again keeps
    /// the loaded module and its counters; anything else replaces it with fresh counters (which
    /// is how a Degraded module comes back).
    pub fn load(
        &mut self,
        name: &str,
        kind: ModuleKind,
        bytes: &[u8],
        config: &str,
        limits: ModuleLimits,
    ) -> Result<LoadedModule, RegistryError> {
        let sha = sha256_hex(bytes);
        if let Some(e) = self.modules.get(name)
            && e.sha256 == sha
            && e.config == config
            && e.limits == limits
        {
            return Ok(e.module.clone());
        }
        let err = |error| RegistryError::Load {
            name: name.to_string(),
            error,
        };
        let health = Arc::new(ModuleHealth::new(self.degrade_after));
        let module = match kind {
            ModuleKind::Placement => {
                let m = self
                    .host
                    .load_placement(name, bytes, config, limits)
                    .map_err(err)?;
                LoadedModule::Placement(Arc::new(GuardedPlacement::new(
                    name,
                    Arc::new(m),
                    self.builtin_placement.clone(),
                    health.clone(),
                )))
            }
            ModuleKind::Fairness => {
                let m = self
                    .host
                    .load_fairness(name, bytes, config, limits)
                    .map_err(err)?;
                LoadedModule::Fairness(Arc::new(GuardedFairness::new(
                    name,
                    Arc::new(m),
                    health.clone(),
                )))
            }
            ModuleKind::PreemptionCost => {
                let m = self
                    .host
                    .load_preemption_cost(name, bytes, config, limits)
                    .map_err(err)?;
                LoadedModule::PreemptionCost(Arc::new(GuardedPreemptionCost::new(
                    name,
                    Arc::new(m),
                    health.clone(),
                )))
            }
        };
        tracing::info!(module = name, kind = kind.as_str(), sha256 = %sha, "policy module loaded");
        self.modules.insert(
            name.to_string(),
            Entry {
                sha256: sha,
                config: config.to_string(),
                limits,
                module: module.clone(),
                health,
            },
        );
        Ok(module)
    }

    /// Loads one of the modules embedded in the binary under its own name, with `config`.
    pub fn load_embedded(
        &mut self,
        name: &str,
        config: &str,
    ) -> Result<LoadedModule, RegistryError> {
        let (kind, bytes) =
            embedded::by_name(name).ok_or_else(|| RegistryError::Unknown(name.into()))?;
        self.load(name, kind, bytes, config, ModuleLimits::default())
    }

    /// Loads a PolicyModule object (bytes inline, or `config_map_bytes` for a `configMapRef`),
    /// checking its sha256.
    pub fn load_policy_module(
        &mut self,
        pm: &PolicyModule,
        config_map_bytes: Option<&[u8]>,
    ) -> Result<LoadedModule, RegistryError> {
        let name = pm.metadata.name.clone().unwrap_or_default();
        if name.is_empty() {
            return Err(RegistryError::Invalid(
                "PolicyModule: metadata.name is required".into(),
            ));
        }
        let bytes = match (&pm.spec.module, config_map_bytes) {
            (Some(m), _) => m.0.as_slice(),
            (None, Some(b)) => b,
            (None, None) => {
                return Err(RegistryError::Invalid(format!(
                    "PolicyModule {name}: spec.module: no module bytes (inline or from the ConfigMap)"
                )));
            }
        };
        let got = sha256_hex(bytes);
        if got != pm.spec.sha256.trim() {
            return Err(RegistryError::Invalid(format!(
                "PolicyModule {name}: spec.sha256: is {} but the module's bytes hash to {got}",
                pm.spec.sha256
            )));
        }
        let config = pm.spec.config.clone().unwrap_or_default();
        self.load(
            &name,
            kind_of(pm.spec.kind),
            bytes,
            &config,
            limits_of(&pm.spec),
        )
    }

    /// Unloads module `name`.
    pub fn remove(&mut self, name: &str) {
        if let Some(e) = self.modules.remove(name)
            && !self.modules.values().any(|o| o.sha256 == e.sha256)
        {
            self.host.evict(&e.sha256);
        }
    }

    /// Names of the loaded modules.
    pub fn names(&self) -> Vec<String> {
        self.modules.keys().cloned().collect()
    }

    /// Health of module `name`.
    pub fn health(&self, name: &str) -> Option<HealthSnapshot> {
        self.modules.get(name).map(|e| e.health.snapshot())
    }

    /// The status the operator writes on PolicyModule `name` (conditions carry no transition
    /// time here; the status writer adds it when a condition changes).
    pub fn status(&self, name: &str) -> Option<PolicyModuleStatus> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        let e = self.modules.get(name)?;
        let h = e.health.snapshot();
        let epoch = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let cond = |t: &str, status: bool, reason: &str, message: String| Condition {
            type_: t.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message,
            last_transition_time: epoch.clone(),
            observed_generation: None,
        };
        Some(PolicyModuleStatus {
            conditions: vec![
                cond(
                    CONDITION_COMPILED,
                    true,
                    "Loaded",
                    format!("compiled and initialised (sha256 {})", e.sha256),
                ),
                if h.degraded {
                    cond(
                        CONDITION_DEGRADED,
                        true,
                        "RepeatedFailures",
                        format!(
                            "{} failures in a row; the built-in policy decides until the module is replaced. Last: {}",
                            h.consecutive,
                            h.last_message.clone().unwrap_or_default()
                        ),
                    )
                } else {
                    cond(
                        CONDITION_DEGRADED,
                        false,
                        "Healthy",
                        h.last_message
                            .clone()
                            .map_or_else(String::new, |m| format!("last failure: {m}")),
                    )
                },
            ],
            sha256: Some(e.sha256.clone()),
            failures: h
                .failures
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            calls: h.calls,
        })
    }

    /// The placement policy of a ClusterQueue with `annotations`.
    pub fn placement_for(
        &self,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Selection<Arc<GuardedPlacement>>, RegistryError> {
        let Some(name) = annotations.get(PLACEMENT_POLICY_ANNOTATION) else {
            return Ok(Selection::Builtin);
        };
        match self.modules.get(name).map(|e| &e.module) {
            None => Err(RegistryError::Unknown(name.clone())),
            Some(LoadedModule::Placement(p)) => Ok(Selection::Module(p.clone())),
            Some(other) => Err(wrong_kind(
                name,
                PLACEMENT_POLICY_ANNOTATION,
                ModuleKind::Placement,
                other,
            )),
        }
    }

    /// The preemption-cost policy of a ClusterQueue with `annotations`: the module
    /// [`PREEMPTION_POLICY_ANNOTATION`] names, or none (Kueue's preemption) without it.
    pub fn preemption_cost_for(
        &self,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Selection<Arc<GuardedPreemptionCost>>, RegistryError> {
        let Some(name) = annotations.get(PREEMPTION_POLICY_ANNOTATION) else {
            return Ok(Selection::Builtin);
        };
        match self.modules.get(name).map(|e| &e.module) {
            None => Err(RegistryError::Unknown(name.clone())),
            Some(LoadedModule::PreemptionCost(p)) => Ok(Selection::Module(p.clone())),
            Some(other) => Err(wrong_kind(
                name,
                PREEMPTION_POLICY_ANNOTATION,
                ModuleKind::PreemptionCost,
                other,
            )),
        }
    }

    /// The fairness module of a cohort tree, from the names its annotations give (names may repeat): the
    /// built-in DRS when there are none, an error when they differ or the module is missing or a placement
    /// module.
    pub fn fairness_named(
        &self,
        names: impl IntoIterator<Item = String>,
    ) -> Result<Selection<Arc<GuardedFairness>>, RegistryError> {
        let mut named: Vec<String> = names.into_iter().collect();
        named.sort();
        named.dedup();
        let name = match named.as_slice() {
            [] => return Ok(Selection::Builtin),
            [one] => one,
            _ => return Err(RegistryError::Conflict(named)),
        };
        match self.modules.get(name).map(|e| &e.module) {
            None => Err(RegistryError::Unknown(name.clone())),
            Some(LoadedModule::Fairness(f)) => Ok(Selection::Module(f.clone())),
            Some(other) => Err(wrong_kind(
                name,
                FAIRNESS_POLICY_ANNOTATION,
                ModuleKind::Fairness,
                other,
            )),
        }
    }
}

/// The error for `annotation` naming module `name`, which is `got` rather than a `want` module.
fn wrong_kind(
    name: &str,
    annotation: &'static str,
    want: ModuleKind,
    got: &LoadedModule,
) -> RegistryError {
    RegistryError::WrongKind {
        name: name.to_string(),
        annotation,
        want: want.world(),
        got: got.kind().world(),
    }
}
