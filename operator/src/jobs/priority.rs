//! Resolving a job's priority as Kueue does: WorkloadPriorityClass label, else the pods' PriorityClass, else the
//! cluster's global default PriorityClass, else 0.

use std::collections::BTreeMap;

use k8s_openapi::api::scheduling::v1::PriorityClass;
use sluice_sdk::kueue::v1beta2::{
    PriorityClassGroup, PriorityClassKind, PriorityClassRef, Workload, WorkloadPriorityClass,
};

/// The priority classes a cluster has: Kueue's WorkloadPriorityClasses and Kubernetes' PriorityClasses.
#[derive(Clone, Debug, Default)]
pub struct PriorityClasses {
    workload: BTreeMap<String, i32>,
    pod: BTreeMap<String, (i32, bool)>,
}

/// A resolved priority: the value and the reference written to the Workload.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedPriority {
    /// Reference for `spec.priorityClassRef`, when a class was used.
    pub class_ref: Option<PriorityClassRef>,
    /// Value for `spec.priority`.
    pub value: i32,
}

impl PriorityClasses {
    /// Adds or replaces a WorkloadPriorityClass.
    pub fn upsert_workload_class(&mut self, wpc: &WorkloadPriorityClass) {
        if let Some(name) = &wpc.metadata.name {
            self.workload.insert(name.clone(), wpc.spec.value);
        }
    }

    /// Removes a WorkloadPriorityClass.
    pub fn delete_workload_class(&mut self, name: &str) {
        self.workload.remove(name);
    }

    /// Adds or replaces a scheduling.k8s.io PriorityClass.
    pub fn upsert_pod_class(&mut self, pc: &PriorityClass) {
        if let Some(name) = &pc.metadata.name {
            self.pod.insert(
                name.clone(),
                (pc.value.unwrap_or(0), pc.global_default.unwrap_or(false)),
            );
        }
    }

    /// Removes a PriorityClass.
    pub fn delete_pod_class(&mut self, name: &str) {
        self.pod.remove(name);
    }

    /// Value of a WorkloadPriorityClass.
    pub fn workload_class(&self, name: &str) -> Option<i32> {
        self.workload.get(name).copied()
    }

    /// Value of a PriorityClass.
    pub fn pod_class(&self, name: &str) -> Option<i32> {
        self.pod.get(name).map(|(v, _)| *v)
    }

    /// The WorkloadPriorityClass a Workload's `spec.priorityClassRef` names (Kueue indexes only references with
    /// that kind and group).
    pub fn workload_class_of(wl: &Workload) -> Option<&str> {
        wl.spec
            .priority_class_ref
            .as_ref()
            .filter(|r| {
                r.kind == Some(PriorityClassKind::WorkloadPriorityClass)
                    && r.group == Some(PriorityClassGroup::Kueue)
            })
            .map(|r| r.name.as_str())
    }

    /// Kueue's WorkloadPriorityClass controller: the value a Workload's `spec.priority` takes from the
    /// WorkloadPriorityClass it names, when the two differ (a class created or changed after the Workload).
    pub fn class_priority_change(&self, wl: &Workload) -> Option<i32> {
        let value = self.workload_class(Self::workload_class_of(wl)?)?;
        (wl.spec.priority != Some(value)).then_some(value)
    }

    /// Resolves a priority from an optional WorkloadPriorityClass name and an optional pod PriorityClass name.
    /// Err names the class that does not exist.
    pub fn resolve(
        &self,
        workload_class: Option<&str>,
        pod_class: Option<&str>,
    ) -> Result<ResolvedPriority, String> {
        if let Some(name) = workload_class.filter(|n| !n.is_empty()) {
            let value = self
                .workload_class(name)
                .ok_or_else(|| format!("WorkloadPriorityClass {name:?} not found"))?;
            return Ok(ResolvedPriority {
                class_ref: Some(PriorityClassRef::workload_priority_class(name)),
                value,
            });
        }
        if let Some(name) = pod_class.filter(|n| !n.is_empty()) {
            let value = self
                .pod_class(name)
                .ok_or_else(|| format!("PriorityClass {name:?} not found"))?;
            return Ok(ResolvedPriority {
                class_ref: Some(PriorityClassRef::pod_priority_class(name)),
                value,
            });
        }
        // Kueue picks the global default with the lowest value when several claim to be the default.
        let default = self
            .pod
            .iter()
            .filter(|(_, (_, global))| *global)
            .min_by_key(|(_, (v, _))| *v);
        Ok(match default {
            Some((name, (value, _))) => ResolvedPriority {
                class_ref: Some(PriorityClassRef::pod_priority_class(name)),
                value: *value,
            },
            None => ResolvedPriority {
                class_ref: None,
                value: 0,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pc(name: &str, value: i32, global: bool) -> PriorityClass {
        PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            global_default: Some(global),
            ..Default::default()
        }
    }

    #[test]
    fn order_of_resolution() {
        let mut p = PriorityClasses::default();
        p.upsert_pod_class(&pc("high", 1000, false));
        assert_eq!(p.resolve(None, None).unwrap().value, 0);
        p.upsert_pod_class(&pc("base", 5, true));
        p.upsert_pod_class(&pc("base2", 7, true));
        let d = p.resolve(None, None).unwrap();
        assert_eq!(
            (d.value, d.class_ref.unwrap().name),
            (5, "base".to_string())
        );
        assert_eq!(p.resolve(None, Some("high")).unwrap().value, 1000);
        let mut wpc = WorkloadPriorityClass::default();
        wpc.metadata.name = Some("prod".into());
        wpc.spec.value = 77;
        p.upsert_workload_class(&wpc);
        assert_eq!(p.resolve(Some("prod"), Some("high")).unwrap().value, 77);
        assert!(
            p.resolve(Some("missing"), None)
                .unwrap_err()
                .contains("missing")
        );
        assert!(p.resolve(None, Some("nope")).is_err());
    }

    #[test]
    fn a_workload_follows_the_value_of_the_workload_priority_class_it_names() {
        let mut p = PriorityClasses::default();
        let mut wpc = WorkloadPriorityClass::default();
        wpc.metadata.name = Some("prod".into());
        wpc.spec.value = 100;
        p.upsert_workload_class(&wpc);
        let mut wl = Workload::default();
        wl.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class("prod"));
        wl.spec.priority = Some(100);
        assert_eq!(p.class_priority_change(&wl), None);
        wpc.spec.value = 1000;
        p.upsert_workload_class(&wpc);
        assert_eq!(p.class_priority_change(&wl), Some(1000));
        // A pod PriorityClass, or a class not known, changes nothing.
        wl.spec.priority_class_ref = Some(PriorityClassRef::pod_priority_class("prod"));
        assert_eq!(p.class_priority_change(&wl), None);
        wl.spec.priority_class_ref = Some(PriorityClassRef::workload_priority_class("other"));
        assert_eq!(p.class_priority_change(&wl), None);
    }
}
