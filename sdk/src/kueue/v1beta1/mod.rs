//! Kueue's deprecated but served version, `kueue.x-k8s.io/v1beta1`.
//!
//! Only the types whose JSON differs from v1beta2 are modelled here; everything else is reused from
//! [`super::v1beta2`]. Convert with [`super::conversion`].

mod clusterqueue;
mod kinds;
mod localqueue;
mod workload;

pub use clusterqueue::*;
pub use kinds::*;
pub use localqueue::*;
pub use workload::*;

/// This version.
pub const VERSION: &str = "v1beta1";
/// `apiVersion` of objects in this version.
pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta1";
/// Deprecation warning Kueue's CRDs attach to this version.
pub const DEPRECATION_WARNING: &str = "This version is deprecated. Use v1beta2 instead.";
