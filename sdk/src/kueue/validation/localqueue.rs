//! LocalQueue: the ClusterQueue it feeds (immutable) and its fair-sharing weight.

use super::common;
use super::errors::{Errors, Path, ValidationErrors, quote};
use super::names;
use crate::kueue::v1beta2::LocalQueue;

const KIND: &str = "LocalQueue";

fn check(errs: &mut Errors, lq: &LocalQueue) {
    names::object_name(errs, lq.metadata.name.as_deref());
    let spec = Path::new("spec");
    if !lq.spec.cluster_queue.is_empty() {
        names::reference(errs, &spec.child("clusterQueue"), &lq.spec.cluster_queue);
    }
    common::fair_sharing(
        errs,
        &spec.child("fairSharing"),
        lq.spec.fair_sharing.as_ref(),
    );
}

/// Validates a LocalQueue for creation.
pub fn validate_local_queue(lq: &LocalQueue) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, lq);
    errs.finish(KIND, lq.metadata.name.as_deref().unwrap_or_default())
}

/// Validates an update: the new object, and spec.clusterQueue stays.
pub fn validate_local_queue_update(
    old: &LocalQueue,
    new: &LocalQueue,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, new);
    if old.spec.cluster_queue != new.spec.cluster_queue {
        errs.immutable(
            &Path::new("spec").child("clusterQueue"),
            quote(&new.spec.cluster_queue),
            "field is immutable",
        );
    }
    errs.finish(KIND, new.metadata.name.as_deref().unwrap_or_default())
}
