//! WorkloadPriorityClass: its description length.

use super::errors::{Errors, Path, ValidationErrors};
use super::names;
use crate::kueue::v1beta2::WorkloadPriorityClass;

/// Validates a WorkloadPriorityClass (any value is allowed; the description has at most 2048 characters).
pub fn validate_workload_priority_class(
    wpc: &WorkloadPriorityClass,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    names::object_name(&mut errs, wpc.metadata.name.as_deref());
    errs.max_len(&Path::new("description"), &wpc.spec.description, 2048);
    errs.finish(
        "WorkloadPriorityClass",
        wpc.metadata.name.as_deref().unwrap_or_default(),
    )
}
