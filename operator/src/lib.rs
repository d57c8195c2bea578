//! Sluice's operator: the controllers around the scheduling engine, the simulator and the `sluice` binary's
//! subcommands.

pub mod admission_checks;
pub mod agent;
pub mod bench;
pub mod cli;
pub mod controller;
pub mod duration;
pub mod gpu_use;
/// The scheduling engine (crate `sluice-engine`), under the path it had when it was a module here.
pub use sluice_engine as engine;
pub mod ingest;
pub mod jobs;
pub mod leader;
pub mod manifest;
pub mod output;
pub mod policy;
pub mod resource_rules;
pub mod sim;
pub mod status;
pub mod telemetry;
/// The in-memory API server the controller tests and benchmarks script (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod visibility;
