//! Decodes a realistic mixed-version setup and checks the v1beta2 view, defaults and quantities.

use serde::Deserialize;
use sluice_sdk::kueue::decode::{KueueObject, decode};
use sluice_sdk::kueue::v1beta2::{
    BorrowWithinCohortPolicy, FlavorFungibilityPolicy, PreemptionPolicy, PriorityClassRef,
    QueueingStrategy, StopPolicy,
};
use sluice_sdk::quantity::resource_value;

fn load() -> Vec<KueueObject> {
    let text = include_str!("fixtures/setup.yaml");
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            let value = serde_json::Value::deserialize(doc).map_err(|e| e.to_string())?;
            decode(value).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()
        .unwrap_or_else(|e| panic!("fixture does not decode: {e}"))
}

#[test]
fn setup_decodes_with_defaults() {
    let objs = load();
    let kinds: Vec<&str> = objs.iter().map(KueueObject::kind).collect();
    assert_eq!(
        kinds,
        [
            "ResourceFlavor",
            "ClusterQueue",
            "LocalQueue",
            "Cohort",
            "WorkloadPriorityClass",
            "Topology",
            "AdmissionCheck",
            "Workload"
        ]
    );

    let KueueObject::ClusterQueue(cq) = &objs[1] else {
        panic!("not a CQ")
    };
    assert_eq!(cq.spec.cohort(), Some("research"));
    assert_eq!(
        cq.spec.queueing_strategy(),
        QueueingStrategy::BestEffortFIFO
    );
    assert_eq!(cq.spec.stop_policy(), StopPolicy::None);
    let p = cq.spec.preemption();
    assert_eq!(p.reclaim_within_cohort(), PreemptionPolicy::Any);
    assert_eq!(
        p.within_cluster_queue(),
        PreemptionPolicy::LowerOrNewerEqualPriority
    );
    assert_eq!(
        p.borrow_within_cohort_policy(),
        BorrowWithinCohortPolicy::LowerPriority
    );
    let ff = cq.spec.flavor_fungibility();
    assert_eq!(ff.when_can_borrow(), FlavorFungibilityPolicy::MayStopSearch);
    assert_eq!(
        ff.when_can_preempt(),
        FlavorFungibilityPolicy::TryNextFlavor
    );
    assert_eq!(cq.spec.fair_sharing_weight().0, "2");
    let quotas = &cq.spec.resource_groups[0].flavors[0].resources;
    assert_eq!(resource_value("cpu", &quotas[0].nominal_quota), Ok(9000));
    assert_eq!(
        quotas[0]
            .borrowing_limit
            .as_ref()
            .map(|q| resource_value("cpu", q)),
        Some(Ok(500))
    );
    assert_eq!(
        resource_value("memory", &quotas[1].nominal_quota),
        Ok(36 << 30)
    );
    assert_eq!(
        resource_value("nvidia.com/gpu", &quotas[2].nominal_quota),
        Ok(8)
    );

    let KueueObject::LocalQueue(lq) = &objs[2] else {
        panic!("not an LQ")
    };
    assert_eq!(lq.spec.stop_policy(), StopPolicy::Hold);
    assert_eq!(lq.spec.fair_sharing_weight().0, "1");

    let KueueObject::WorkloadPriorityClass(wpc) = &objs[4] else {
        panic!("not a WPC")
    };
    assert_eq!(wpc.spec.value, 1000);
    assert_eq!(wpc.spec.description, "urgent work");

    let KueueObject::Workload(wl) = &objs[7] else {
        panic!("not a Workload")
    };
    assert!(wl.spec.is_active());
    assert_eq!(
        wl.spec.priority_class_ref,
        Some(PriorityClassRef::workload_priority_class("high"))
    );
    assert_eq!(wl.spec.pod_sets[0].name, "main");
    assert_eq!(wl.spec.pod_sets[0].count, 3);
    let status = wl.status.as_ref().unwrap_or_else(|| panic!("status lost"));
    assert_eq!(status.accumulated_past_execution_time_seconds, Some(30));
    let ta = status
        .admission
        .as_ref()
        .and_then(|a| a.pod_set_assignments[0].topology_assignment.as_ref());
    let ta = ta.unwrap_or_else(|| panic!("topology assignment lost"));
    assert_eq!(ta.slices[0].domain_count, 2);
    assert_eq!(ta.slices[0].pod_counts.individual, vec![2, 1]);
}

#[test]
fn every_object_survives_both_encodings() {
    for obj in load() {
        let v2 = obj.encode().unwrap_or_else(|e| panic!("{e}"));
        let again = decode(v2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, obj);
        let v1 = obj.encode_v1beta1().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v1["apiVersion"], "kueue.x-k8s.io/v1beta1");
        let back = decode(v1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, obj, "{} {}", obj.kind(), obj.name());
    }
}

/// The fixture is written as users write manifests: every field is one of Kueue's (`kubectl apply`'s strict
/// field validation would take it).
#[test]
fn setup_has_no_unknown_fields() {
    let text = include_str!("fixtures/setup.yaml");
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(doc).unwrap_or_default();
        if let Err(e) = sluice_sdk::kueue::decode::decode_strict(value) {
            panic!("{e}");
        }
    }
}
