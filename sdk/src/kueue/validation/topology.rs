//! Topology: its levels (1 to 16, unique, hostname only last, immutable).

use std::collections::BTreeMap;

use super::errors::{Errors, Path, ValidationErrors};
use super::names;
use crate::kueue::v1beta2::Topology;

const KIND: &str = "Topology";
const HOSTNAME: &str = "kubernetes.io/hostname";
const NODE_LABEL_MSG: &str = "should match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?\
(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'";

fn check(errs: &mut Errors, t: &Topology) {
    names::object_name(errs, t.metadata.name.as_deref());
    let path = Path::new("spec").child("levels");
    let levels = &t.spec.levels;
    errs.items(&path, levels.len(), 1, 16);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for l in levels {
        *counts.entry(l.node_label.as_str()).or_default() += 1;
    }
    if counts.values().any(|&c| c > 1) {
        errs.invalid(&path, "\"array\"", "must be unique");
    }
    let has_hostname = levels.iter().any(|l| l.node_label == HOSTNAME);
    if has_hostname && levels.last().is_some_and(|l| l.node_label != HOSTNAME) {
        errs.invalid(
            &path,
            "\"array\"",
            "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        );
    }
    for (i, l) in levels.iter().enumerate() {
        let p = path.index(i).child("nodeLabel");
        if l.node_label.is_empty() {
            errs.invalid_str(&p, "", "should be at least 1 chars long");
        } else {
            errs.max_len(&p, &l.node_label, 316);
            if !names::qualified_name(&l.node_label).is_empty() {
                errs.invalid_str(&p, &l.node_label, NODE_LABEL_MSG);
            }
        }
    }
}

/// Validates a Topology for creation.
pub fn validate_topology(t: &Topology) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, t);
    errs.finish(KIND, t.metadata.name.as_deref().unwrap_or_default())
}

/// Validates an update: the new object, and the levels stay.
pub fn validate_topology_update(old: &Topology, new: &Topology) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, new);
    if old.spec.levels != new.spec.levels {
        errs.immutable(
            &Path::new("spec").child("levels"),
            "\"array\"",
            "field is immutable",
        );
    }
    errs.finish(KIND, new.metadata.name.as_deref().unwrap_or_default())
}
