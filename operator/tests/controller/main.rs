//! The controllers against the scripted API server: the exact requests they make.
//!
//! One test binary per area: each links the whole operator, so fewer binaries build and link much faster
//! and take a fraction of the disk.

mod admission_checks;
mod admission_fair_sharing;
mod checkpoint;
mod failover;
mod gpu_use;
mod jobs;
mod jobsets;
mod leaderworkersets;
mod pod_groups;
mod pods_ready;
mod policy_modules;
mod prebuilt;
mod rayjobs;
mod support;
mod telemetry;
mod topology;
mod trainjobs;
mod writes;
