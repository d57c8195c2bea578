//! Flavor eligibility for a pod set: taints vs tolerations, nodeSelector and required node affinity
//! compared only on the label keys the flavor defines.

use std::collections::BTreeMap;

use super::types::{
    Flavor, NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm, PodSet, Taint,
    TaintEffect, Toleration, TolerationOperator,
};

fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect.is_some_and(|e| e != taint.effect) {
        return false;
    }
    match &t.key {
        None => t.operator == TolerationOperator::Exists,
        Some(k) if *k != taint.key => false,
        Some(_) => match t.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => {
                t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
            }
        },
    }
}

/// Formats a taint the way Kueue's message prints the Go struct: `{key value Effect <nil>}`.
fn taint_string(t: &Taint) -> String {
    let effect = match t.effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    };
    format!(
        "{{{} {} {} <nil>}}",
        t.key,
        t.value.as_deref().unwrap_or(""),
        effect
    )
}

fn requirement_matches(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let val = labels.get(&r.key);
    let int_cmp = |want_greater: bool| -> bool {
        let (Some(v), Some(bound)) = (val, r.values.first()) else {
            return false;
        };
        match (v.parse::<i64>(), bound.parse::<i64>()) {
            (Ok(v), Ok(b)) => {
                if want_greater {
                    v > b
                } else {
                    v < b
                }
            }
            _ => false,
        }
    };
    match r.operator {
        NodeSelectorOperator::In => val.is_some_and(|v| r.values.contains(v)),
        NodeSelectorOperator::NotIn => val.is_none_or(|v| !r.values.contains(v)),
        NodeSelectorOperator::Exists => val.is_some(),
        NodeSelectorOperator::DoesNotExist => val.is_none(),
        NodeSelectorOperator::Gt => int_cmp(true),
        NodeSelectorOperator::Lt => int_cmp(false),
    }
}

/// Whether a node's labels satisfy required node affinity (any term; no terms: yes).
pub(crate) fn node_affinity_matches(
    terms: &[NodeSelectorTerm],
    labels: &BTreeMap<String, String>,
) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_expressions
                .iter()
                .all(|r| requirement_matches(r, labels))
        })
}

/// Why the flavor can't host the pod set, as Kueue words it; None when it can.
pub(crate) fn flavor_mismatch(flavor: &Flavor, ps: &PodSet) -> Option<String> {
    for taint in &flavor.node_taints {
        if taint.effect == TaintEffect::PreferNoSchedule {
            continue;
        }
        let ok = ps
            .tolerations
            .iter()
            .chain(flavor.tolerations.iter())
            .any(|t| tolerates(t, taint));
        if !ok {
            return Some(format!(
                "untolerated taint {} in flavor {}",
                taint_string(taint),
                flavor.name
            ));
        }
    }
    let labels = &flavor.node_labels;
    let selector_ok = ps
        .node_selector
        .iter()
        .filter(|(k, _)| labels.contains_key(*k))
        .all(|(k, v)| labels.get(k) == Some(v));
    // A term that loses all its requirements to the key filter makes the whole affinity vacuous.
    let mut terms: Vec<Vec<&NodeSelectorRequirement>> = Vec::new();
    for term in &ps.required_affinity {
        let kept: Vec<_> = term
            .match_expressions
            .iter()
            .filter(|e| labels.contains_key(&e.key))
            .collect();
        if kept.is_empty() {
            terms.clear();
            break;
        }
        terms.push(kept);
    }
    let affinity_ok = terms.is_empty()
        || terms
            .iter()
            .any(|t| t.iter().all(|r| requirement_matches(r, labels)));
    if selector_ok && affinity_ok {
        None
    } else {
        Some(format!(
            "flavor {} doesn't match node affinity",
            flavor.name
        ))
    }
}
