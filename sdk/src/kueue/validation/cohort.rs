//! Cohort: its parent, resource groups and fair-sharing weight.

use super::common::{self, LimitRules};
use super::errors::{Errors, Path, ValidationErrors};
use super::names;
use crate::kueue::v1beta2::Cohort;

/// Validates a Cohort (Kueue applies the same rules on create and update).
pub fn validate_cohort(cohort: &Cohort) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    names::object_name(&mut errs, cohort.metadata.name.as_deref());
    let spec = Path::new("spec");
    let s = &cohort.spec;
    if !s.parent_name.is_empty() {
        names::reference(&mut errs, &spec.child("parentName"), &s.parent_name);
    }
    common::fair_sharing(
        &mut errs,
        &spec.child("fairSharing"),
        s.fair_sharing.as_ref(),
    );
    let rules = LimitRules {
        has_parent: !s.parent_name.is_empty(),
        parent_word: "parent",
        // A cohort may lend more than it owns nominally: its quota adds to what its members lend.
        lending_within_nominal: false,
    };
    common::resource_groups(
        &mut errs,
        &spec.child("resourceGroups"),
        &s.resource_groups,
        &rules,
    );
    errs.finish(
        "Cohort",
        cohort.metadata.name.as_deref().unwrap_or_default(),
    )
}
