//! Policy modules on the operator side: the registry of loaded modules (by name and sha256), the
//! selection per ClusterQueue, and the guards that fall back to the built-in policy (for preemption
//! cost: no boost, nothing protected) when a module fails, count failures per module and class, and
//! mark a module Degraded after repeated failures.

pub mod embedded;
mod fairness;
mod health;
mod placement;
mod preemption_cost;
mod registry;

pub use fairness::GuardedFairness;
pub use health::{HealthSnapshot, ModuleHealth};
pub use placement::GuardedPlacement;
pub use preemption_cost::GuardedPreemptionCost;
pub use registry::{LoadedModule, PolicyRegistry, RegistryError, Selection};
