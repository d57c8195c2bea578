//! End-to-end tests on a real control plane (tests/control-plane: etcd, kube-apiserver, kube-controller-manager
//! built from their Go modules), with `sluice webhook` and `sluice operator` run as processes and a fake
//! kubelet. Each test starts its own control plane; without one built the tests say they are skipped, unless
//! SLUICE_E2E=require (CI), where that fails.
//!
//! Build the control plane once: `tests/control-plane/build`; then `cargo test -p sluice-operator --test cluster`.

mod kubelet;
mod lws;
mod plane;
mod sluice;
mod support;

mod admission;
mod chart;
mod cli;
mod failover;
mod fair_sharing;
mod gpu_use;
mod jobsets;
mod leaderworkersets;
mod pods;
mod policy;
mod pytorchjobs;
mod rayjobs;
mod restart;
mod samples;
mod scripts;
mod trainjobs;
