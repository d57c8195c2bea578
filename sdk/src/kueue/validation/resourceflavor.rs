//! ResourceFlavor: node labels, taints, tolerations and the topology they belong to.

use super::common;
use super::errors::{Errors, Path, ValidationErrors};
use super::names;
use crate::kueue::v1beta2::ResourceFlavor;

const KIND: &str = "ResourceFlavor";

fn check(errs: &mut Errors, rf: &ResourceFlavor) {
    names::object_name(errs, rf.metadata.name.as_deref());
    let spec = Path::new("spec");
    let s = &rf.spec;
    let labels_path = spec.child("nodeLabels");
    if s.node_labels.len() > 8 {
        errs.too_many(&labels_path, s.node_labels.len(), 8);
    }
    names::labels(errs, &labels_path, &s.node_labels);
    common::taints(errs, &spec.child("nodeTaints"), &s.node_taints);
    common::tolerations(errs, &spec.child("tolerations"), &s.tolerations);
    if let Some(t) = &s.topology_name {
        names::reference(errs, &spec.child("topologyName"), t);
        if s.node_labels.is_empty() {
            errs.invalid(
                &spec,
                "\"object\"",
                "at least one nodeLabel is required when topology is set",
            );
        }
    }
}

/// Validates a ResourceFlavor for creation.
pub fn validate_resource_flavor(rf: &ResourceFlavor) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, rf);
    errs.finish(KIND, rf.metadata.name.as_deref().unwrap_or_default())
}

/// Validates an update: the new object, and once a topology is set its labels, tolerations and topology stay.
pub fn validate_resource_flavor_update(
    old: &ResourceFlavor,
    new: &ResourceFlavor,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, new);
    let spec = Path::new("spec");
    if old.spec.topology_name.is_some() {
        let (o, n) = (&old.spec, &new.spec);
        if o.node_labels != n.node_labels {
            errs.invalid(
                &spec,
                "\"object\"",
                "nodeLabels are immutable when topologyName is set",
            );
        }
        if o.tolerations != n.tolerations {
            errs.invalid(
                &spec,
                "\"object\"",
                "tolerations are immutable when topologyName is set",
            );
        }
        if o.topology_name != n.topology_name {
            errs.invalid(
                &spec,
                "\"object\"",
                "topologyName is immutable when topologyName is set",
            );
        }
    }
    errs.finish(KIND, new.metadata.name.as_deref().unwrap_or_default())
}
