//! Kueue's API group `kueue.x-k8s.io`: types for v1beta2 (storage) and v1beta1 (deprecated), conversion between
//! them, decoding of arbitrary documents, CRD generation and well-known names.

// kube-derive takes one `printcolumn(...)`/`shortname` per entry, so the same keys legitimately repeat.
#![allow(clippy::duplicated_attributes)]

pub mod conversion;
pub mod crds;
pub mod decode;
pub mod defaults;
pub mod integrations;
pub mod labels;
pub mod namespaces;
mod schema;
pub mod v1beta1;
pub mod v1beta2;
pub mod validation;
