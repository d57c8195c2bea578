//! ClusterQueue: resource groups and quotas, cohort, policies and admission checks.

use std::collections::BTreeSet;

use super::common::{self, LimitRules};
use super::errors::{Errors, Path, ValidationErrors};
use super::names;
use crate::kueue::v1beta2::{
    BorrowWithinCohortPolicy, ClusterQueue, FlavorFungibilityPolicy, PreemptionPolicy,
};

const KIND: &str = "ClusterQueue";

fn check(errs: &mut Errors, cq: &ClusterQueue, old: Option<&ClusterQueue>) {
    names::object_name(errs, cq.metadata.name.as_deref());
    let spec = Path::new("spec");
    let s = &cq.spec;
    if !s.cohort_name.is_empty() {
        names::reference(errs, &spec.child("cohortName"), &s.cohort_name);
    }
    let rg_path = spec.child("resourceGroups");
    let rules = LimitRules {
        has_parent: !s.cohort_name.is_empty(),
        parent_word: "cohort",
        lending_within_nominal: true,
    };
    common::resource_groups(errs, &rg_path, &s.resource_groups, &rules);
    common::label_selector(
        errs,
        &spec.child("namespaceSelector"),
        s.namespace_selector.as_ref(),
    );

    if let Some(p) = &s.preemption {
        let path = spec.child("preemption");
        if p.reclaim_within_cohort() == PreemptionPolicy::LowerOrNewerEqualPriority {
            errs.not_supported(
                &path.child("reclaimWithinCohort"),
                "LowerOrNewerEqualPriority",
                &["Never", "LowerPriority", "Any"],
            );
        }
        if p.within_cluster_queue() == PreemptionPolicy::Any {
            errs.not_supported(
                &path.child("withinClusterQueue"),
                "Any",
                &["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
            );
        }
        if p.reclaim_within_cohort() == PreemptionPolicy::Never
            && p.borrow_within_cohort.is_some()
            && p.borrow_within_cohort_policy() != BorrowWithinCohortPolicy::Never
        {
            errs.invalid(
                &path,
                "\"object\"",
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            );
        }
    }
    if let Some(f) = &s.flavor_fungibility
        && let Some(pref) = f.preference
        && (f.when_can_borrow() != FlavorFungibilityPolicy::TryNextFlavor
            || f.when_can_preempt() != FlavorFungibilityPolicy::TryNextFlavor)
    {
        errs.invalid(
            &spec.child("flavorFungibility").child("preference"),
            format!("\"{pref:?}\""),
            format!("preference \"{pref:?}\" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"),
        );
    }
    common::fair_sharing(errs, &spec.child("fairSharing"), s.fair_sharing.as_ref());

    let total_flavors: usize = s.resource_groups.iter().map(|rg| rg.flavors.len()).sum();
    if total_flavors > 256 {
        errs.invalid(
            &rg_path,
            total_flavors.to_string(),
            format!("total number of flavors across all resourceGroups must be ≤ 256, got {total_flavors}"),
        );
    }
    let total_covered: usize = s
        .resource_groups
        .iter()
        .map(|rg| rg.covered_resources.len())
        .sum();
    if total_covered > 256 {
        errs.invalid(
            &rg_path,
            total_covered.to_string(),
            format!("total number of covered resources across all resourceGroups must be ≤ 256, got {total_covered}"),
        );
    }
    for (i, rg) in s.resource_groups.iter().enumerate() {
        let combos: usize = rg.flavors.iter().map(|f| f.resources.len()).sum();
        if combos > 512 {
            errs.invalid(
                &rg_path.index(i),
                combos.to_string(),
                format!("number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {combos}"),
            );
        }
    }

    if let Some(acs) = &s.admission_checks_strategy {
        let path = spec
            .child("admissionChecksStrategy")
            .child("admissionChecks");
        errs.items(&path, acs.admission_checks.len(), 1, 64);
        let flavors: BTreeSet<&str> = s
            .resource_groups
            .iter()
            .flat_map(|rg| rg.flavors.iter().map(|f| f.name.as_str()))
            .collect();
        let allowed: Vec<&str> = flavors.iter().copied().collect();
        let legacy = legacy_on_flavors(old, &flavors);
        for (i, rule) in acs.admission_checks.iter().enumerate() {
            let rp = path.index(i);
            let unchanged = legacy.iter().any(|(name, on)| {
                *name == rule.name.as_str()
                    && *on == rule.on_flavors.iter().map(String::as_str).collect()
            });
            if rule.name.is_empty() {
                errs.invalid_str(&rp.child("name"), "", "should be at least 1 chars long");
            }
            errs.max_len(&rp.child("name"), &rule.name, 316);
            let of = rp.child("onFlavors");
            if rule.on_flavors.len() > 64 {
                errs.too_many(&of, rule.on_flavors.len(), 64);
            }
            for (j, f) in rule.on_flavors.iter().enumerate() {
                names::reference(errs, &of.index(j), f);
                if !unchanged && !flavors.contains(f.as_str()) {
                    errs.not_supported(&of.index(j), f, &allowed);
                }
            }
        }
    }
    // Beyond its schema, concurrentAdmissionPolicy is only checked by Kueue behind the alpha ConcurrentAdmission gate
    // (off by default).
    if let Some(cap) = &s.concurrent_admission_policy {
        let mp = spec.child("concurrentAdmissionPolicy").child("migration");
        if cap.migration.mode.is_none() {
            errs.required(&mp.child("mode"), "");
        }
        if let Some(last) = cap
            .migration
            .constraints
            .as_ref()
            .and_then(|c| c.last_acceptable_flavor_name.as_ref())
        {
            names::reference(
                errs,
                &mp.child("constraints").child("lastAcceptableFlavorName"),
                last,
            );
        }
    }
}

/// The admission-check rules of `old` whose onFlavors an update may keep even if now invalid: Kueue lets them through
/// while the set of flavors is unchanged (RejectUpdatesToCQWithInvalidOnFlavors, alpha, is off by default).
fn legacy_on_flavors<'a>(
    old: Option<&'a ClusterQueue>,
    flavors: &BTreeSet<&str>,
) -> Vec<(&'a str, BTreeSet<&'a str>)> {
    let Some(old) = old else { return Vec::new() };
    let old_flavors: BTreeSet<&str> = old
        .spec
        .resource_groups
        .iter()
        .flat_map(|rg| rg.flavors.iter().map(|f| f.name.as_str()))
        .collect();
    if &old_flavors != flavors {
        return Vec::new();
    }
    old.spec
        .admission_checks_strategy
        .iter()
        .flat_map(|s| &s.admission_checks)
        .map(|r| {
            (
                r.name.as_str(),
                r.on_flavors.iter().map(String::as_str).collect(),
            )
        })
        .collect()
}

/// Validates a ClusterQueue for creation.
pub fn validate_cluster_queue(cq: &ClusterQueue) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, cq, None);
    errs.finish(KIND, cq.metadata.name.as_deref().unwrap_or_default())
}

/// Validates an update: the new object, and concurrentAdmissionPolicy stays as it was.
pub fn validate_cluster_queue_update(
    old: &ClusterQueue,
    new: &ClusterQueue,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, new, Some(old));
    if old.spec.concurrent_admission_policy != new.spec.concurrent_admission_policy {
        errs.immutable(
            &Path::new("spec").child("concurrentAdmissionPolicy"),
            "\"object\"",
            "field is immutable",
        );
    }
    errs.finish(KIND, new.metadata.name.as_deref().unwrap_or_default())
}
