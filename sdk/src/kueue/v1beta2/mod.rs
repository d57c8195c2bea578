//! Kueue's storage version, `kueue.x-k8s.io/v1beta2`.

mod admissioncheck;
mod clusterqueue;
mod cohort;
mod common;
mod localqueue;
mod resourceflavor;
mod topology;
mod workload;
mod workloadpriorityclass;

pub use admissioncheck::*;
pub use clusterqueue::*;
pub use cohort::*;
pub use common::*;
pub use localqueue::*;
pub use resourceflavor::*;
pub use topology::*;
pub use workload::*;
pub use workloadpriorityclass::*;

/// API group of every Kueue kind.
pub const GROUP: &str = "kueue.x-k8s.io";
/// This version.
pub const VERSION: &str = "v1beta2";
/// `apiVersion` of objects in this version.
pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";
