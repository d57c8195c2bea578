//! Realising a topology assignment on pods: what Kueue's TAS ungater does per pod.
//!
//! Pods of a TAS pod set start behind the `kueue.x-k8s.io/topology` scheduling gate; each pod is
//! then given the node selector of its domain and ungated. Pod `rank` (its index in the pod set,
//! e.g. `batch.kubernetes.io/job-completion-index`) goes to the domain whose cumulative count
//! range holds it, in the assignment's domain order, so ranks next to each other share domains.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use sluice_sdk::kueue::conversion::expand_topology_assignment;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2::TopologyAssignment;

/// The node selector (level label -> domain value) that places pod `rank` of a pod set, or
/// `Ok(None)` when the assignment holds fewer pods than `rank + 1`.
pub fn node_selector_for_rank(
    assignment: &TopologyAssignment,
    rank: usize,
) -> Result<Option<BTreeMap<String, String>>, String> {
    let expanded = expand_topology_assignment(assignment)?;
    let mut start = 0usize;
    for d in &expanded.domains {
        let n = usize::try_from(d.count).map_err(|_| "negative pod count".to_string())?;
        if rank < start + n {
            return Ok(Some(
                expanded
                    .levels
                    .iter()
                    .cloned()
                    .zip(d.values.iter().cloned())
                    .collect(),
            ));
        }
        start += n;
    }
    Ok(None)
}

/// Lifts the topology gate from a pod and pins it to its domain; a node selector key already set
/// to another value is an error naming the key.
pub fn ungate(pod: &mut PodSpec, selector: &BTreeMap<String, String>) -> Result<(), String> {
    let ns = pod.node_selector.get_or_insert_with(Default::default);
    for (k, v) in selector {
        match ns.get(k) {
            Some(old) if old != v => {
                return Err(format!(
                    "spec.nodeSelector[{k}]: already {old:?}, topology needs {v:?}"
                ));
            }
            _ => {
                ns.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(gates) = pod.scheduling_gates.as_mut() {
        gates.retain(|g| g.name != labels::TOPOLOGY_SCHEDULING_GATE);
        if gates.is_empty() {
            pod.scheduling_gates = None;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::kueue::v1beta2::{
        TopologyAssignmentSlice, TopologyAssignmentSliceLevelIndividualValues,
        TopologyAssignmentSliceLevelValues, TopologyAssignmentSlicePodCounts,
    };

    fn assignment() -> TopologyAssignment {
        // Three hosts x1, x2, x3 with 2, 1 and 3 pods.
        TopologyAssignment {
            levels: vec!["kubernetes.io/hostname".into()],
            slices: vec![TopologyAssignmentSlice {
                domain_count: 3,
                values_per_level: vec![TopologyAssignmentSliceLevelValues {
                    universal: None,
                    individual: Some(TopologyAssignmentSliceLevelIndividualValues {
                        prefix: Some("x".into()),
                        suffix: None,
                        roots: vec!["1".into(), "2".into(), "3".into()],
                    }),
                }],
                pod_counts: TopologyAssignmentSlicePodCounts {
                    universal: None,
                    individual: vec![2, 1, 3],
                },
            }],
        }
    }

    #[test]
    fn ranks_map_to_domains_in_order() {
        let a = assignment();
        let host = |r| {
            node_selector_for_rank(&a, r)
                .unwrap()
                .map(|s| s["kubernetes.io/hostname"].clone())
        };
        assert_eq!(host(0).as_deref(), Some("x1"));
        assert_eq!(host(1).as_deref(), Some("x1"));
        assert_eq!(host(2).as_deref(), Some("x2"));
        assert_eq!(host(5).as_deref(), Some("x3"));
        assert_eq!(host(6), None);
    }

    #[test]
    fn ungate_pins_the_pod_and_lifts_only_the_topology_gate() {
        use k8s_openapi::api::core::v1::PodSchedulingGate;
        let mut pod = PodSpec {
            scheduling_gates: Some(vec![
                PodSchedulingGate {
                    name: labels::TOPOLOGY_SCHEDULING_GATE.into(),
                },
                PodSchedulingGate {
                    name: "other".into(),
                },
            ]),
            ..PodSpec::default()
        };
        let sel = node_selector_for_rank(&assignment(), 2).unwrap().unwrap();
        ungate(&mut pod, &sel).unwrap();
        assert_eq!(
            pod.node_selector.as_ref().unwrap()["kubernetes.io/hostname"],
            "x2"
        );
        assert_eq!(pod.scheduling_gates.as_ref().unwrap().len(), 1);
        pod.node_selector = Some([("kubernetes.io/hostname".to_string(), "x9".to_string())].into());
        assert!(ungate(&mut pod, &sel).unwrap_err().contains("hostname"));
    }
}
