//! The Helm chart: rendered objects, RBAC (least privilege, and everything the operator's code uses) and CRDs.
//!
//! One binary for the three, since each test binary links the whole operator.

mod crds;
mod manifests;
mod rbac;
