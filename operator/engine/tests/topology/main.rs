//! Topology-aware placement: Kueue's TAS scenarios, GPU and NVLink placement, preemption for room, properties.
//!
//! One test binary per area (this one and `scheduling`), both on the scenario DSL in `common/`.

#[path = "../common/mod.rs"]
mod common;
mod empty_topology;
mod kueue_tas;
mod placement;
mod preemption;
mod properties;
