//! A pod set's topology request from its pod template's annotations, as Kueue's request builder reads them; every
//! kind adds its own index labels.

use std::collections::BTreeMap;

use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2::{PodSetTopologyRequest, PodsetSliceRequiredTopologyConstraint};

/// The request the annotations `ann` make: one of required, preferred or unconstrained (in that precedence), the
/// slice layers and the group name. An error names the annotation at fault and what is wrong.
pub(crate) fn template_topology_request(
    ann: &BTreeMap<String, String>,
) -> Result<PodSetTopologyRequest, (&'static str, String)> {
    let mut req = PodSetTopologyRequest::default();
    if let Some(v) = ann.get(labels::PODSET_REQUIRED_TOPOLOGY_ANNOTATION) {
        req.required = Some(v.clone());
    } else if let Some(v) = ann.get(labels::PODSET_PREFERRED_TOPOLOGY_ANNOTATION) {
        req.preferred = Some(v.clone());
    } else if let Some(v) = ann.get(labels::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION) {
        let parsed = match v.as_str() {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
            "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
            _ => {
                return Err((
                    labels::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
                    format!("{v:?} is not a boolean"),
                ));
            }
        };
        req.unconstrained = Some(parsed);
    }
    // Kueue v0.19 (TASMultiLayerTopology, beta and on) reads the constraints list first.
    if let Some(json) = ann.get(labels::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION) {
        let key = labels::PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION;
        let layers: Vec<PodsetSliceRequiredTopologyConstraint> =
            serde_json::from_str(json).map_err(|e| (key, format!("invalid JSON: {e}")))?;
        if layers.is_empty() || layers.len() > 3 {
            return Err((
                key,
                format!("must have 1 to 3 layers, got {}", layers.len()),
            ));
        }
        req.podset_slice_required_topology_constraints = layers;
    } else if let (Some(topology), Some(size)) = (
        ann.get(labels::PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION),
        ann.get(labels::PODSET_SLICE_SIZE_ANNOTATION),
    ) {
        let key = labels::PODSET_SLICE_SIZE_ANNOTATION;
        let size: i32 = size
            .parse()
            .map_err(|_| (key, format!("{size:?} is not an integer")))?;
        req.pod_set_slice_required_topology = Some(topology.clone());
        req.pod_set_slice_size = Some(size);
    }
    // Kueue keeps the group name only beside a required or preferred level.
    if let Some(group) = ann.get(labels::PODSET_GROUP_NAME_ANNOTATION)
        && (req.required.is_some() || req.preferred.is_some())
    {
        req.pod_set_group_name = Some(group.clone());
    }
    Ok(req)
}
