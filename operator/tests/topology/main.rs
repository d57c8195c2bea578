//! The node agent and the simulator's topology figures (topology-aware placement itself is tested in
//! `sluice-engine`: `operator/engine/tests/topology/`).
//!
//! One test binary per area: each links the whole operator, so fewer binaries build and link much faster
//! and take a fraction of the disk.

mod agent;
mod degrade;
mod gpu_metrics;
mod publish;
mod sim;
mod trace;
