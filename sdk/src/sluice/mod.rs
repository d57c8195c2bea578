//! Sluice's own API group, `sluice.dev`: the objects Kueue has no kind for.

/// API group of Sluice's own kinds.
pub const GROUP: &str = "sluice.dev";
/// Served and stored version of Sluice's own kinds.
pub const VERSION: &str = "v1alpha1";

pub mod node_gpu_topology;
pub mod policy_module;
