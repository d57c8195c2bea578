//! Policy modules on the operator side: the registry of loaded modules (by name and sha256), the
//! selection per ClusterQueue, and the guards that fall back to the built-in policy when a module
//! fails, count failures per module and class, and mark a module Degraded after repeated failures.

pub mod embedded;
mod fairness;
mod health;
mod placement;
mod registry;

pub use fairness::GuardedFairness;
pub use health::{HealthSnapshot, ModuleHealth};
pub use placement::GuardedPlacement;
pub use registry::{LoadedModule, PolicyRegistry, RegistryError, Selection};
