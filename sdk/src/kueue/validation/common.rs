//! Checks shared by several kinds: resource groups, fair sharing, taints, tolerations and label selectors.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::errors::{Errors, Path, quote};
use super::names::{self, check};
use super::quantity;
use crate::kueue::v1beta2::{FairSharing, ResourceGroup};

/// How limits are judged in a ClusterQueue or a Cohort.
pub struct LimitRules {
    /// Whether the owner has a cohort (ClusterQueue) or parent (Cohort); limits need one.
    pub has_parent: bool,
    /// The name of that relation in messages: `cohort` or `parent`.
    pub parent_word: &'static str,
    /// Whether lendingLimit must not exceed nominalQuota (ClusterQueue only, as in Kueue).
    pub lending_within_nominal: bool,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const EFFECT_MSG: &str =
    "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'";

/// Checks resource groups: counts, names, each flavor covering the group's resources in order, flavors and resources
/// in at most one group, and the quantities and limits of each quota.
pub fn resource_groups(
    errs: &mut Errors,
    path: &Path,
    groups: &[ResourceGroup],
    rules: &LimitRules,
) {
    if groups.len() > 16 {
        errs.too_many(path, groups.len(), 16);
    }
    let mut seen_resources = BTreeSet::new();
    let mut seen_flavors = BTreeSet::new();
    for (i, rg) in groups.iter().enumerate() {
        let rg_path = path.index(i);
        let covered_path = rg_path.child("coveredResources");
        errs.items(&covered_path, rg.covered_resources.len(), 1, 64);
        let flavors_path = rg_path.child("flavors");
        errs.items(&flavors_path, rg.flavors.len(), 1, 64);
        if rg
            .flavors
            .iter()
            .any(|f| f.resources.len() != rg.covered_resources.len())
        {
            errs.invalid(
                &rg_path,
                "\"object\"",
                "flavors must have the same number of resources as the coveredResources",
            );
        }
        for (j, name) in rg.covered_resources.iter().enumerate() {
            let p = covered_path.index(j);
            check(errs, &p, name, names::qualified_name);
            if !seen_resources.insert(name.as_str()) {
                errs.duplicate(&p, quote(name));
            }
        }
        for (j, fq) in rg.flavors.iter().enumerate() {
            let fp = flavors_path.index(j);
            names::reference(errs, &fp.child("name"), &fq.name);
            let res_path = fp.child("resources");
            errs.items(&res_path, fq.resources.len(), 1, 64);
            for (k, rq) in fq.resources.iter().enumerate() {
                // Kueue only looks at as many quotas as there are covered resources.
                let Some(covered) = rg.covered_resources.get(k) else {
                    break;
                };
                let rp = res_path.index(k);
                if &rq.name != covered {
                    errs.invalid_str(
                        &rp.child("name"),
                        &rq.name,
                        "must match the name in coveredResources",
                    );
                }
                let nominal =
                    quantity::non_negative(errs, &rp.child("nominalQuota"), &rq.nominal_quota);
                if let Some(b) = &rq.borrowing_limit {
                    let bp = rp.child("borrowingLimit");
                    limit_needs_parent(errs, &bp, &b.0, rules);
                    quantity::non_negative(errs, &bp, b);
                }
                if let Some(l) = &rq.lending_limit {
                    let lp = rp.child("lendingLimit");
                    let lend = quantity::non_negative(errs, &lp, l);
                    limit_needs_parent(errs, &lp, &l.0, rules);
                    if rules.lending_within_nominal
                        && let (Some(lend), Some(nominal)) = (lend, nominal)
                        && lend > nominal
                    {
                        errs.invalid_str(
                            &lp,
                            &l.0,
                            "must be less than or equal to the nominalQuota",
                        );
                    }
                }
            }
            if !seen_flavors.insert(fq.name.as_str()) {
                errs.duplicate(&fp.child("name"), quote(&fq.name));
            }
        }
    }
}

fn limit_needs_parent(errs: &mut Errors, path: &Path, value: &str, rules: &LimitRules) {
    if !rules.has_parent {
        errs.invalid_str(
            path,
            value,
            format!("must be nil when {} is empty", rules.parent_word),
        );
    }
}

/// Checks a fair-sharing weight: not negative, and 0 or above 1n so it does not collapse.
pub fn fair_sharing(errs: &mut Errors, path: &Path, fs: Option<&FairSharing>) {
    let Some(w) = fs.and_then(|f| f.weight.as_ref()) else {
        return;
    };
    let Some(v) = quantity::non_negative(errs, path, w) else {
        return;
    };
    if v > 0 && v <= 1 {
        errs.invalid_str(path, &w.0, "When not 0, weight must be > 10e-9");
    }
}

/// Checks node taints: key a qualified name, value a label value, effect supported, unique by key and effect.
pub fn taints(errs: &mut Errors, path: &Path, taints: &[Taint]) {
    if taints.len() > 8 {
        errs.too_many(path, taints.len(), 8);
    }
    if taints.iter().any(|t| !EFFECTS.contains(&t.effect.as_str())) {
        errs.invalid(path, "\"array\"", EFFECT_MSG);
    }
    let mut seen: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (i, t) in taints.iter().enumerate() {
        let p = path.index(i);
        check(errs, &p.child("key"), &t.key, names::qualified_name);
        let value = t.value.as_deref().unwrap_or_default();
        let problems = names::label_value(value);
        if !problems.is_empty() {
            errs.invalid_str(&p.child("value"), value, problems.join(";"));
        }
        if !seen
            .entry(t.effect.as_str())
            .or_default()
            .insert(t.key.as_str())
        {
            errs.duplicate_with(
                &p,
                format!("{{key: {}, effect: {}}}", quote(&t.key), quote(&t.effect)),
                "taints must be unique by key and effect pair",
            );
        }
    }
}

/// A CEL rule on one toleration: whether it holds.
type TolerationRule = fn(&Toleration) -> bool;

/// Checks tolerations: Kueue's CEL rules on operator, value, effect and tolerationSeconds, and keys as qualified
/// names.
pub fn tolerations(errs: &mut Errors, path: &Path, tolerations: &[Toleration]) {
    if tolerations.len() > 8 {
        errs.too_many(path, tolerations.len(), 8);
    }
    let rules: [(TolerationRule, &str); 5] = [
        (
            |t| t.key.is_some() || t.operator.as_deref() == Some("Exists"),
            "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        ),
        (
            |t| t.toleration_seconds.is_none() || t.effect.as_deref() == Some("NoExecute"),
            "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        ),
        (
            |t| {
                t.operator
                    .as_deref()
                    .is_none_or(|o| o == "Equal" || o == "Exists")
            },
            "supported toleration values: 'Equal'(default), 'Exists'",
        ),
        (
            |t| t.operator.as_deref() != Some("Exists") || t.value.is_none(),
            "a value must be empty when 'operator' is 'Exists'",
        ),
        (
            |t| t.effect.as_deref().is_none_or(|e| EFFECTS.contains(&e)),
            EFFECT_MSG,
        ),
    ];
    // Each CEL rule judges the whole list, so each is reported once, on the list.
    for (ok, msg) in rules {
        if !tolerations.iter().all(ok) {
            errs.invalid(path, "\"array\"", msg);
        }
    }
    for (i, t) in tolerations.iter().enumerate() {
        if let Some(k) = t.key.as_deref().filter(|k| !k.is_empty()) {
            check(errs, &path.index(i).child("key"), k, names::qualified_name);
        }
    }
}

/// Checks a label selector as Kubernetes does: valid keys and values, and values consistent with each operator.
pub fn label_selector(errs: &mut Errors, path: &Path, sel: Option<&LabelSelector>) {
    let Some(sel) = sel else { return };
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.required(
                        &p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    );
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.forbidden(
                        &p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    );
                }
            }
            other => errs.invalid_str(&p.child("operator"), other, "not a valid selector operator"),
        }
        check(errs, &p.child("key"), &req.key, names::qualified_name);
    }
    if let Some(ml) = &sel.match_labels {
        names::labels(errs, &path.child("matchLabels"), ml);
    }
}
