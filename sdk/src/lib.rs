//! Sluice SDK: the shared contract of Sluice's crates.
//!
//! * [`kueue`]: Kueue's `kueue.x-k8s.io` API as of Kueue v0.19.2.
//!   * [`kueue::v1beta2`] (storage version) and [`kueue::v1beta1`] (deprecated) types, with accessors that apply
//!     Kueue's defaults (e.g. [`kueue::v1beta2::ClusterQueueSpec::queueing_strategy`]).
//!   * [`kueue::decode::decode`]: any Kueue document of either version -> [`kueue::decode::KueueObject`] (v1beta2),
//!     with errors naming kind, object and JSON path; [`kueue::decode::KueueObject::encode_v1beta1`] for the way
//!     back.
//!   * [`kueue::conversion`]: lossless v1beta1 <-> v1beta2 conversion.
//!   * [`kueue::crds`]: CRDs for all kinds, both versions.
//!   * [`kueue::labels`]: well-known label, annotation, finalizer, condition and reason strings.
//! * [`policy`]: the policy contract (placement scoring over a columnar node batch, fairness over
//!   queue batches); builds without Kubernetes types, also for `wasm32-wasip2`.
//! * [`host`] (feature `host`): the wasmtime runtime that runs policy modules in a sandbox.
//! * [`harness`] (feature `host`): fixtures, builders and assertions for policy authors.
//! * [`guest`] (feature `guest`): the bindings and export macros for policy modules.
//! * [`jobset`]: the JobSet kind (`jobset.x-k8s.io/v1alpha2`) as Kueue's JobSet integration reads it.
//! * [`kubeflow`]: the Kubeflow training v1 PyTorchJob (`kubeflow.org/v1`) as Kueue's integration reads it.
//! * [`ray`]: KubeRay's RayCluster and RayJob (`ray.io/v1`) as Kueue's Ray integrations read them.
//! * [`sluice`]: Sluice's own `sluice.dev` kinds.
//! * [`topology`]: the GPU topology model (GPUs, NVLink islands, health) the node agent publishes; like
//!   [`policy`], it builds without Kubernetes types (its JSON Schema derives come with feature `api`).
//! * [`quantity`]: exact integer values of Kubernetes quantities in the units Kueue's scheduler uses.
//!
//! ```
//! use sluice_sdk::kueue::decode::{decode, KueueObject};
//! use sluice_sdk::kueue::v1beta2::QueueingStrategy;
//! use sluice_sdk::quantity::resource_value;
//!
//! let doc = serde_json::json!({
//!     "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
//!     "spec": {"cohort": "eng", "resourceGroups": [{"coveredResources": ["cpu"],
//!         "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1500m"}]}]}]}
//! });
//! let Ok(KueueObject::ClusterQueue(cq)) = decode(doc) else { panic!("not a ClusterQueue") };
//! assert_eq!(cq.spec.cohort(), Some("eng"));
//! assert_eq!(cq.spec.queueing_strategy(), QueueingStrategy::BestEffortFIFO);
//! let quota = &cq.spec.resource_groups[0].flavors[0].resources[0].nominal_quota;
//! assert_eq!(resource_value("cpu", quota), Ok(1500));
//! ```

// Lets generated bindings name this crate by its public path from inside it too.
#[cfg(feature = "guest")]
extern crate self as sluice_sdk;

/// `kube::Resource` for another project's kind with `metadata`, in the module's `GROUP` and `VERSION`: its Rust
/// type, scope (`k8s_openapi::NamespaceResourceScope` or `ClusterResourceScope`), kind and plural.
#[cfg(feature = "api")]
macro_rules! api_resource {
    ($ty:ty, $scope:ty, $kind:expr, $plural:expr) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                GROUP.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                VERSION.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

#[cfg(feature = "guest")]
pub mod guest;
#[cfg(all(feature = "host", not(target_arch = "wasm32")))]
pub mod harness;
#[cfg(all(feature = "host", not(target_arch = "wasm32")))]
pub mod host;
#[cfg(feature = "api")]
pub mod jobset;
#[cfg(feature = "api")]
pub mod kubeflow;
#[cfg(feature = "api")]
pub mod kueue;
#[cfg(feature = "api")]
pub mod lws;
pub mod policy;
#[cfg(feature = "api")]
pub mod quantity;
#[cfg(feature = "api")]
pub mod ray;
#[cfg(feature = "api")]
pub mod sluice;
pub mod topology;
#[cfg(feature = "api")]
pub mod trainer;

/// Re-export of the Kubernetes API types these types are built on.
#[cfg(feature = "api")]
pub use k8s_openapi as k8s;
