//! Sluice SDK: the shared contract of Sluice's crates.
//!
//! * [`kueue`]: Kueue's `kueue.x-k8s.io` API (v1beta2 and v1beta1), decoding, conversion, CRDs and well-known names.
//! * [`quantity`]: exact integer values of Kubernetes quantities in the units Kueue's scheduler uses.

pub mod kueue;
pub mod quantity;

/// Re-export of the Kubernetes API types these types are built on.
pub use k8s_openapi as k8s;
