//! The engine's tests that need the operator: Kueue Workloads read into the engine's model. The rest are
//! `sluice-engine`'s own (`operator/engine/tests/`).
//!
//! One test binary per area: each links the whole operator, so fewer binaries build and link much faster
//! and take a fraction of the disk.

mod ingest;
