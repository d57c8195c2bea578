//! Topology-aware placement, the node agent and the simulator's topology figures.
//!
//! One test binary per area: each links the whole operator, so fewer binaries build and link much faster
//! and take a fraction of the disk.

mod agent;
#[path = "../common/mod.rs"]
mod common;
mod kueue_tas;
mod placement;
mod preemption;
mod properties;
mod publish;
mod sim;
mod trace;
