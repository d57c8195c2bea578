//! What admission injects into a pod set: node selectors and tolerations of its flavors, Kueue's labels and the
//! admitted count.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSchedulingGate, PodTemplateSpec, Toleration};
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2::{Admission, PodSet, ResourceFlavor};

/// The changes admission makes to one pod set's template.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSetInfo {
    /// Pod set name.
    pub name: String,
    /// Pods admitted (less than the pod set's count under partial admission).
    pub count: i32,
    /// Labels to add to the pods.
    pub labels: BTreeMap<String, String>,
    /// Node selector entries to add.
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations to add.
    pub tolerations: Vec<Toleration>,
    /// Annotations to add (`kueue.x-k8s.io/workload` on every pod set, as Kueue's TAS gate does).
    pub annotations: BTreeMap<String, String>,
    /// Scheduling gates to add (`kueue.x-k8s.io/topology` on TAS pod sets, lifted per pod by
    /// [`super::topology::node_selector_for_rank`]'s caller).
    pub scheduling_gates: Vec<String>,
}

impl PodSetInfo {
    /// The info that restores a template to what the Workload recorded before admission.
    pub fn from_template(name: &str, count: i32, template: &PodTemplateSpec) -> Self {
        PodSetInfo {
            name: name.to_string(),
            count,
            labels: template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default(),
            node_selector: template
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default(),
            tolerations: template
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.clone())
                .unwrap_or_default(),
            annotations: template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone())
                .unwrap_or_default(),
            scheduling_gates: template
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.clone())
                .into_iter()
                .flatten()
                .map(|g| g.name)
                .collect(),
        }
    }

    /// Adds this info to a pod template. A node selector or label already set to another value is an error
    /// (message names the key), as Kueue refuses to silently override it.
    pub fn merge_into(&self, template: &mut PodTemplateSpec) -> Result<(), String> {
        let meta = template.metadata.get_or_insert_with(Default::default);
        let tpl_labels = meta.labels.get_or_insert_with(Default::default);
        merge_map(tpl_labels, &self.labels, "metadata.labels")?;
        if !self.annotations.is_empty() {
            let tpl_ann = meta.annotations.get_or_insert_with(Default::default);
            merge_map(tpl_ann, &self.annotations, "metadata.annotations")?;
        }
        let spec = template.spec.get_or_insert_with(Default::default);
        let selector = spec.node_selector.get_or_insert_with(Default::default);
        merge_map(selector, &self.node_selector, "spec.nodeSelector")?;
        let tolerations = spec.tolerations.get_or_insert_with(Default::default);
        for t in &self.tolerations {
            if !tolerations.contains(t) {
                tolerations.push(t.clone());
            }
        }
        if !self.scheduling_gates.is_empty() {
            let gates = spec.scheduling_gates.get_or_insert_with(Default::default);
            for g in &self.scheduling_gates {
                if !gates.iter().any(|x| &x.name == g) {
                    gates.push(PodSchedulingGate { name: g.clone() });
                }
            }
        }
        Ok(())
    }

    /// Sets the template's labels, node selector and tolerations back to this info's.
    pub fn restore_into(&self, template: &mut PodTemplateSpec) {
        let meta = template.metadata.get_or_insert_with(Default::default);
        meta.labels = (!self.labels.is_empty()).then(|| self.labels.clone());
        meta.annotations = (!self.annotations.is_empty()).then(|| self.annotations.clone());
        let spec = template.spec.get_or_insert_with(Default::default);
        spec.scheduling_gates = (!self.scheduling_gates.is_empty()).then(|| {
            self.scheduling_gates
                .iter()
                .map(|g| PodSchedulingGate { name: g.clone() })
                .collect()
        });
        spec.node_selector = (!self.node_selector.is_empty()).then(|| self.node_selector.clone());
        spec.tolerations = (!self.tolerations.is_empty()).then(|| self.tolerations.clone());
    }
}

fn merge_map(
    into: &mut BTreeMap<String, String>,
    add: &BTreeMap<String, String>,
    field: &str,
) -> Result<(), String> {
    for (k, v) in add {
        match into.get(k) {
            Some(old) if old != v => {
                return Err(format!(
                    "{field}[{k}]: already {old:?}, admission needs {v:?}"
                ));
            }
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

/// Adds what admission checks asked for each pod set (`status.admissionChecks[].podSetUpdates`: labels, annotations,
/// node selector, tolerations), as Kueue's job reconciler does before starting the job. An update that contradicts
/// a label, annotation or node selector entry already there is an error with Kueue's message, naming the check;
/// Kueue finishes the Workload with it (FailedToStart), since no retry can succeed.
pub fn merge_check_updates(
    infos: &mut [PodSetInfo],
    checks: &[sluice_sdk::kueue::v1beta2::AdmissionCheckState],
) -> Result<(), String> {
    fn merge(
        into: &mut BTreeMap<String, String>,
        add: &BTreeMap<String, String>,
        field: &str,
        check: &str,
    ) -> Result<(), String> {
        if let Some((k, old, new)) = into.iter().find_map(|(k, old)| {
            add.get(k)
                .filter(|new| *new != old)
                .map(|new| (k, old, new))
        }) {
            return Err(format!(
                "in admission check {check:?}: invalid admission check PodSetUpdate: conflict for {field}: \
                 conflict for key={k}, value1={old}, value2={new}"
            ));
        }
        into.extend(add.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(())
    }
    for info in infos.iter_mut() {
        for check in checks {
            let Some(update) = check.pod_set_updates.iter().find(|u| u.name == info.name) else {
                continue;
            };
            merge(
                &mut info.annotations,
                &update.annotations,
                "annotations",
                &check.name,
            )?;
            merge(&mut info.labels, &update.labels, "labels", &check.name)?;
            merge(
                &mut info.node_selector,
                &update.node_selector,
                "nodeSelector",
                &check.name,
            )?;
            for t in &update.tolerations {
                if !info.tolerations.contains(t) {
                    info.tolerations.push(t.clone());
                }
            }
        }
    }
    Ok(())
}

/// Builds the per-pod-set infos of an admission: the union of the node labels of every flavor assigned to the pod
/// set (two flavors disagreeing on a label is an error), their tolerations, the `kueue.x-k8s.io/podset` label and
/// the ClusterQueue/LocalQueue labels Kueue adds to pods, and for a topology-assigned pod set the topology gate and
/// the annotation naming `workload`. A missing count means the pod set's full count.
pub fn pod_set_infos<'a>(
    admission: &Admission,
    pod_sets: &[PodSet],
    local_queue: &str,
    workload: &str,
    flavor: impl Fn(&str) -> Option<&'a ResourceFlavor>,
) -> Result<Vec<PodSetInfo>, String> {
    admission
        .pod_set_assignments
        .iter()
        .enumerate()
        .map(|(i, psa)| {
            let mut info = PodSetInfo { name: psa.name.clone(), count: psa.count.unwrap_or_else(|| {
                    pod_sets.iter().find(|ps| ps.name == psa.name).map_or(0, |ps| ps.count)
                }), ..Default::default() };
            info.labels.insert(labels::PODSET_LABEL.to_string(), psa.name.clone());
            info.labels.insert(labels::CLUSTER_QUEUE_NAME_LABEL.to_string(), admission.cluster_queue.clone());
            info.labels.insert(labels::LOCAL_QUEUE_NAME_LABEL.to_string(), local_queue.to_string());
            // Kueue (TopologyAwareScheduling, on by default) names the Workload on every pod set's pods; those of a
            // topology assignment also wait at the topology gate until each gets its domain's node selector.
            info.annotations.insert(labels::WORKLOAD_ANNOTATION.to_string(), workload.to_string());
            if psa.topology_assignment.is_some() {
                info.scheduling_gates.push(labels::TOPOLOGY_SCHEDULING_GATE.to_string());
            }
            let mut seen = std::collections::BTreeSet::new();
            for flavor_name in psa.flavors.values() {
                if !seen.insert(flavor_name) {
                    continue;
                }
                let flavor = flavor(flavor_name).ok_or_else(|| {
                    format!("status.admission.podSetAssignments[{i}].flavors: ResourceFlavor {flavor_name:?} not found")
                })?;
                merge_map(&mut info.node_selector, &flavor.spec.node_labels, "nodeLabels")
                    .map_err(|e| format!("status.admission.podSetAssignments[{i}]: flavors disagree: {e}"))?;
                for t in &flavor.spec.tolerations {
                    if !info.tolerations.contains(t) {
                        info.tolerations.push(t.clone());
                    }
                }
            }
            Ok(info)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::kueue::v1beta2::{AdmissionCheckState, PodSetUpdate};

    fn check(name: &str, update: PodSetUpdate) -> AdmissionCheckState {
        AdmissionCheckState {
            name: name.into(),
            pod_set_updates: vec![update],
            ..Default::default()
        }
    }

    fn map(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn check_updates_are_added_to_their_pod_set_only() {
        let mut infos = vec![
            PodSetInfo {
                name: "main".into(),
                node_selector: map("zone", "a"),
                ..Default::default()
            },
            PodSetInfo {
                name: "other".into(),
                ..Default::default()
            },
        ];
        let toleration = Toleration {
            key: Some("prov".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        let update = PodSetUpdate {
            name: "main".into(),
            labels: map("capacity", "reserved"),
            annotations: map("prov/request", "r1"),
            node_selector: map("zone", "a"),
            tolerations: vec![toleration.clone(), toleration.clone()],
        };
        merge_check_updates(&mut infos, &[check("prov", update)]).unwrap();
        assert_eq!(infos[0].labels, map("capacity", "reserved"));
        assert_eq!(infos[0].annotations, map("prov/request", "r1"));
        assert_eq!(
            infos[0].node_selector,
            map("zone", "a"),
            "an equal entry is no conflict"
        );
        assert_eq!(
            infos[0].tolerations,
            vec![toleration],
            "no duplicate toleration"
        );
        assert_eq!(
            infos[1],
            PodSetInfo {
                name: "other".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn a_contradicting_update_is_refused_with_kueues_message() {
        let mut infos = vec![PodSetInfo {
            name: "main".into(),
            node_selector: map("zone", "a"),
            ..Default::default()
        }];
        let update = PodSetUpdate {
            name: "main".into(),
            node_selector: map("zone", "b"),
            ..Default::default()
        };
        let e = merge_check_updates(&mut infos, &[check("prov", update)]).unwrap_err();
        assert_eq!(
            e,
            "in admission check \"prov\": invalid admission check PodSetUpdate: conflict for nodeSelector: \
             conflict for key=zone, value1=a, value2=b"
        );
    }
}
