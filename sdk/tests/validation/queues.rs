//! Validation of ResourceFlavor, ClusterQueue, LocalQueue and Cohort: one violating manifest per rule.

use crate::helpers::{errors, rejects, update_errors, update_ok, valid};
use sluice_sdk::kueue::validation::ErrorKind::{
    Duplicate, Forbidden, Invalid, NotSupported, Required, TooMany,
};

// ---- ResourceFlavor ----

#[test]
fn flavor_valid() {
    valid(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {cloud.example.com/instance: a100}
  nodeTaints: [{key: gpu, value: "true", effect: NoSchedule}]
  tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
  topologyName: default
"#,
    );
}

#[test]
fn flavor_name_must_be_dns_subdomain() {
    rejects(
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: Bad_Name}}",
        "metadata.name",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    rejects(
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {}}",
        "metadata.name",
        Required,
        "name or generateName is required",
    );
}

#[test]
fn flavor_node_labels() {
    let e = errors(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec:
  nodeLabels: {a: "1", b: "2", c: "3", d: "4", e: "5", f: "6", g: "7", h: "8", "-bad": "x y"}
"#,
    );
    crate::helpers::assert_has(&e, "spec.nodeLabels", TooMany, "must have at most 8 items");
    crate::helpers::assert_has(&e, "spec.nodeLabels", Invalid, "name part must consist of");
    crate::helpers::assert_has(
        &e,
        "spec.nodeLabels",
        Invalid,
        "a valid label must be an empty string",
    );
}

#[test]
fn flavor_taints() {
    let e = errors(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec:
  nodeTaints:
  - {key: a, value: "1", effect: NoSchedule}
  - {key: a, value: "2", effect: NoSchedule}
  - {key: "b/c/d", effect: Sometimes}
  - {key: ok, value: "not valid", effect: NoExecute}
"#,
    );
    crate::helpers::assert_has(
        &e,
        "spec.nodeTaints[1]",
        Duplicate,
        "taints must be unique by key and effect pair",
    );
    crate::helpers::assert_has(
        &e,
        "spec.nodeTaints",
        Invalid,
        "supported taint effect values",
    );
    crate::helpers::assert_has(
        &e,
        "spec.nodeTaints[2].key",
        Invalid,
        "a qualified name must consist of",
    );
    crate::helpers::assert_has(
        &e,
        "spec.nodeTaints[3].value",
        Invalid,
        "a valid label must be",
    );
    let nine: String = (0..9)
        .map(|i| format!("  - {{key: k{i}, effect: NoSchedule}}\n"))
        .collect();
    rejects(
        &format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: f}}\nspec:\n  nodeTaints:\n{nine}"
        ),
        "spec.nodeTaints",
        TooMany,
        "must have at most 8 items",
    );
}

#[test]
fn flavor_tolerations() {
    let e = errors(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec:
  tolerations:
  - {operator: Equal, value: x}
  - {key: a, operator: Equal, value: x, effect: NoSchedule, tolerationSeconds: 5}
  - {key: a, operator: Maybe}
  - {key: a, operator: Exists, value: x}
  - {key: a, effect: Never}
  - {key: "bad key"}
"#,
    );
    for msg in [
        "operator must be Exists when 'key' is empty",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        "supported toleration values: 'Equal'(default), 'Exists'",
        "a value must be empty when 'operator' is 'Exists'",
        "supported taint effect values",
    ] {
        crate::helpers::assert_has(&e, "spec.tolerations", Invalid, msg);
    }
    crate::helpers::assert_has(
        &e,
        "spec.tolerations[5].key",
        Invalid,
        "name part must consist of",
    );
}

#[test]
fn flavor_topology_needs_node_labels() {
    rejects(
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}, spec: {topologyName: t}}",
        "spec",
        Invalid,
        "at least one nodeLabel is required when topology is set",
    );
    rejects(
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}, spec: {nodeLabels: {a: b}, topologyName: T}}",
        "spec.topologyName",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
}

#[test]
fn flavor_topology_pins_labels_tolerations_and_topology() {
    let old = "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}, spec: {nodeLabels: {a: b}, topologyName: t}}";
    let e = update_errors(
        old,
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}, spec: {nodeLabels: {a: c}, tolerations: [{key: x, operator: Exists}], topologyName: u}}",
    );
    crate::helpers::assert_has(
        &e,
        "spec",
        Invalid,
        "nodeLabels are immutable when topologyName is set",
    );
    crate::helpers::assert_has(
        &e,
        "spec",
        Invalid,
        "tolerations are immutable when topologyName is set",
    );
    crate::helpers::assert_has(
        &e,
        "spec",
        Invalid,
        "topologyName is immutable when topologyName is set",
    );
    // Without a topology the same changes are fine.
    update_ok(
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}, spec: {nodeLabels: {a: b}}}",
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}, spec: {nodeLabels: {a: c}, topologyName: t}}",
    );
}

// ---- ClusterQueue ----

const CQ_VALID: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: org
  namespaceSelector:
    matchLabels: {team: a}
    matchExpressions: [{key: env, operator: In, values: [prod]}]
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "10", borrowingLimit: "5", lendingLimit: "10"}
      - {name: memory, nominalQuota: 10Gi}
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority}}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}
  admissionChecksStrategy:
    admissionChecks: [{name: prov, onFlavors: [a100]}]
  fairSharing: {weight: "0"}
"#;

fn cq(spec: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: cq}}\nspec:\n{spec}"
    )
}

#[test]
fn cluster_queue_valid() {
    valid(CQ_VALID);
}

#[test]
fn cluster_queue_cohort_name_is_subdomain() {
    let e = errors(&cq("  cohortName: Bad!\n"));
    crate::helpers::assert_has(
        &e,
        "spec.cohortName",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    assert!(e.to_string().starts_with(
        "ClusterQueue \"cq\" is invalid: spec.cohortName: Invalid value: \"Bad!\": a lowercase RFC 1123 subdomain"
    ));
}

#[test]
fn cluster_queue_counts() {
    let groups: String = (0..17)
        .map(|i| format!("  - coveredResources: [r{i}]\n    flavors: [{{name: f{i}, resources: [{{name: r{i}, nominalQuota: 1}}]}}]\n"))
        .collect();
    rejects(
        &cq(&format!("  resourceGroups:\n{groups}")),
        "spec.resourceGroups",
        TooMany,
        "must have at most 16 items",
    );

    let e = errors(&cq(
        "  resourceGroups:\n  - {coveredResources: [], flavors: []}\n",
    ));
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[0].coveredResources",
        Invalid,
        "should have at least 1 items",
    );
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[0].flavors",
        Invalid,
        "should have at least 1 items",
    );

    let many: Vec<String> = (0..65).map(|i| format!("r{i}")).collect();
    let quotas: Vec<String> = many
        .iter()
        .map(|r| format!("{{name: {r}, nominalQuota: 1}}"))
        .collect();
    let e = errors(&cq(&format!(
        "  resourceGroups:\n  - coveredResources: [{}]\n    flavors: [{{name: f, resources: [{}]}}]\n",
        many.join(", "),
        quotas.join(", ")
    )));
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[0].coveredResources",
        TooMany,
        "must have at most 64 items",
    );
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[0].flavors[0].resources",
        TooMany,
        "must have at most 64 items",
    );

    let flavors: String = (0..65)
        .map(|i| format!("    - {{name: f{i}, resources: [{{name: cpu, nominalQuota: 1}}]}}\n"))
        .collect();
    rejects(
        &cq(&format!(
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n{flavors}"
        )),
        "spec.resourceGroups[0].flavors",
        TooMany,
        "must have at most 64 items",
    );
}

#[test]
fn cluster_queue_totals_across_groups() {
    // 5 groups of 60 flavors: 300 flavors in all, each group within its own limit.
    let groups: String = (0..5)
        .map(|g| {
            let flavors: String = (0..60)
                .map(|f| {
                    format!(
                        "    - {{name: f{g}-{f}, resources: [{{name: r{g}, nominalQuota: 1}}]}}\n"
                    )
                })
                .collect();
            format!("  - coveredResources: [r{g}]\n    flavors:\n{flavors}")
        })
        .collect();
    rejects(
        &cq(&format!("  resourceGroups:\n{groups}")),
        "spec.resourceGroups",
        Invalid,
        "total number of flavors across all resourceGroups must be ≤ 256, got 300",
    );

    // 5 groups of 60 covered resources: 300 in all.
    let groups: String = (0..5)
        .map(|g| {
            let names: Vec<String> = (0..60).map(|r| format!("r{g}-{r}")).collect();
            let quotas: Vec<String> = names
                .iter()
                .map(|n| format!("{{name: {n}, nominalQuota: 1}}"))
                .collect();
            format!(
                "  - coveredResources: [{}]\n    flavors: [{{name: f{g}, resources: [{}]}}]\n",
                names.join(", "),
                quotas.join(", ")
            )
        })
        .collect();
    rejects(
        &cq(&format!("  resourceGroups:\n{groups}")),
        "spec.resourceGroups",
        Invalid,
        "total number of covered resources across all resourceGroups must be ≤ 256, got 300",
    );

    // One group of 10 resources x 60 flavors: 600 flavor-resource combinations.
    let names: Vec<String> = (0..10).map(|r| format!("r{r}")).collect();
    let quotas: Vec<String> = names
        .iter()
        .map(|n| format!("{{name: {n}, nominalQuota: 1}}"))
        .collect();
    let flavors: String = (0..60)
        .map(|f| format!("    - {{name: f{f}, resources: [{}]}}\n", quotas.join(", ")))
        .collect();
    rejects(
        &cq(&format!(
            "  resourceGroups:\n  - coveredResources: [{}]\n    flavors:\n{flavors}",
            names.join(", ")
        )),
        "spec.resourceGroups[0]",
        Invalid,
        "number of flavor-resource combinations in a resourceGroup must be ≤ 512, got 600",
    );
}

#[test]
fn cluster_queue_flavor_lists_covered_resources_in_order() {
    rejects(
        &cq(
            "  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]\n",
        ),
        "spec.resourceGroups[0]",
        Invalid,
        "flavors must have the same number of resources as the coveredResources",
    );
    rejects(
        &cq(
            "  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors: [{name: f, resources: [{name: memory, nominalQuota: 1}, {name: cpu, nominalQuota: 1}]}]\n",
        ),
        "spec.resourceGroups[0].flavors[0].resources[0].name",
        Invalid,
        "must match the name in coveredResources",
    );
}

#[test]
fn cluster_queue_flavor_and_resource_in_one_group_only() {
    let e = errors(&cq(
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]\n",
    ));
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[1].coveredResources[0]",
        Duplicate,
        "",
    );
    crate::helpers::assert_has(&e, "spec.resourceGroups[1].flavors[0].name", Duplicate, "");
    assert!(
        e.to_string()
            .contains("spec.resourceGroups[1].flavors[0].name: Duplicate value: \"f\""),
        "{e}"
    );
}

#[test]
fn cluster_queue_names_in_groups() {
    let e = errors(&cq(
        "  resourceGroups:\n  - coveredResources: [\"not a resource\"]\n    flavors: [{name: Flavor, resources: [{name: \"not a resource\", nominalQuota: 1}]}]\n",
    ));
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[0].coveredResources[0]",
        Invalid,
        "name part must consist of",
    );
    crate::helpers::assert_has(
        &e,
        "spec.resourceGroups[0].flavors[0].name",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
}

#[test]
fn cluster_queue_quantities() {
    let e = errors(&cq(
        "  cohortName: org\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: \"-1\", borrowingLimit: \"-2\", lendingLimit: lots}]}]\n",
    ));
    let p = "spec.resourceGroups[0].flavors[0].resources[0]";
    crate::helpers::assert_has(
        &e,
        &format!("{p}.nominalQuota"),
        Invalid,
        "must be greater than or equal to 0",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.borrowingLimit"),
        Invalid,
        "must be greater than or equal to 0",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.lendingLimit"),
        Invalid,
        "quantities must match the regular expression",
    );
}

#[test]
fn cluster_queue_limits_need_cohort() {
    let e = errors(&cq(
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1, lendingLimit: 1}]}]\n",
    ));
    let p = "spec.resourceGroups[0].flavors[0].resources[0]";
    crate::helpers::assert_has(
        &e,
        &format!("{p}.borrowingLimit"),
        Invalid,
        "must be nil when cohort is empty",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.lendingLimit"),
        Invalid,
        "must be nil when cohort is empty",
    );
}

#[test]
fn cluster_queue_lending_limit_within_nominal() {
    let e = errors(&cq(
        "  cohortName: org\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1500m, lendingLimit: \"1.6\"}]}]\n",
    ));
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(
        e.to_string(),
        "ClusterQueue \"cq\" is invalid: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: \
         Invalid value: \"1.6\": must be less than or equal to the nominalQuota"
    );
    // Equal is fine, compared exactly across units.
    valid(&cq(
        "  cohortName: org\n  resourceGroups:\n  - coveredResources: [memory]\n    flavors: [{name: f, resources: [{name: memory, nominalQuota: 1Gi, lendingLimit: \"1073741824\"}]}]\n",
    ));
}

#[test]
fn cluster_queue_preemption_combinations() {
    rejects(
        &cq(
            "  preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}\n",
        ),
        "spec.preemption",
        Invalid,
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    );
    rejects(
        &cq("  preemption: {reclaimWithinCohort: LowerOrNewerEqualPriority}\n"),
        "spec.preemption.reclaimWithinCohort",
        NotSupported,
        "supported values: \"Never\", \"LowerPriority\", \"Any\"",
    );
    rejects(
        &cq("  preemption: {withinClusterQueue: Any}\n"),
        "spec.preemption.withinClusterQueue",
        NotSupported,
        "supported values",
    );
}

#[test]
fn cluster_queue_fungibility_preference_needs_try_next_flavor() {
    rejects(
        &cq(
            "  flavorFungibility: {whenCanPreempt: TryNextFlavor, preference: BorrowingOverPreemption}\n",
        ),
        "spec.flavorFungibility.preference",
        Invalid,
        "preference \"BorrowingOverPreemption\" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor",
    );
}

#[test]
fn cluster_queue_fair_sharing_weight() {
    rejects(
        &cq("  fairSharing: {weight: \"-1\"}\n"),
        "spec.fairSharing",
        Invalid,
        "must be greater than or equal to 0",
    );
    rejects(
        &cq("  fairSharing: {weight: 1n}\n"),
        "spec.fairSharing",
        Invalid,
        "When not 0, weight must be > 10e-9",
    );
    valid(&cq("  fairSharing: {weight: 2n}\n"));
}

#[test]
fn cluster_queue_namespace_selector() {
    let e = errors(&cq(
        "  namespaceSelector:\n    matchExpressions:\n    - {key: a, operator: In}\n    - {key: b, operator: Exists, values: [x]}\n    - {key: c, operator: Near, values: [x]}\n    - {key: \"-d\", operator: Exists}\n    matchLabels: {e: \"bad value!\"}\n",
    ));
    let p = "spec.namespaceSelector";
    crate::helpers::assert_has(
        &e,
        &format!("{p}.matchExpressions[0].values"),
        Required,
        "must be specified when `operator` is 'In' or 'NotIn'",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.matchExpressions[1].values"),
        Forbidden,
        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.matchExpressions[2].operator"),
        Invalid,
        "not a valid selector operator",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.matchExpressions[3].key"),
        Invalid,
        "name part must consist of",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.matchLabels"),
        Invalid,
        "a valid label must be",
    );
}

#[test]
fn cluster_queue_admission_checks_on_known_flavors() {
    let e = errors(&cq(
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]\n  admissionChecksStrategy:\n    admissionChecks: [{name: prov, onFlavors: [f, g]}]\n",
    ));
    crate::helpers::assert_has(
        &e,
        "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[1]",
        NotSupported,
        "supported values: \"f\"",
    );
    rejects(
        &cq("  admissionChecksStrategy: {admissionChecks: []}\n"),
        "spec.admissionChecksStrategy.admissionChecks",
        Invalid,
        "should have at least 1 items",
    );
}

#[test]
fn cluster_queue_concurrent_admission_policy_is_immutable() {
    let e = update_errors(
        &cq("  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}\n"),
        &cq("  concurrentAdmissionPolicy: {migration: {mode: RetainFirstAdmission}}\n"),
    );
    crate::helpers::assert_has(
        &e,
        "spec.concurrentAdmissionPolicy",
        Invalid,
        "field is immutable",
    );
    update_ok(
        CQ_VALID,
        &CQ_VALID.replace("cohortName: org", "cohortName: other"),
    );
}

#[test]
fn cluster_queue_keeps_legacy_on_flavors_while_flavors_unchanged() {
    let legacy = cq(
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]\n  admissionChecksStrategy:\n    admissionChecks: [{name: prov, onFlavors: [gone]}]\n",
    );
    // An unrelated change goes through, as Kueue allows by default.
    update_ok(
        &legacy,
        &legacy.replace("nominalQuota: 1", "nominalQuota: 2"),
    );
    // Changing the flavors brings the rule back.
    let e = update_errors(&legacy, &legacy.replace("name: f,", "name: g,"));
    crate::helpers::assert_has(
        &e,
        "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
        NotSupported,
        "supported values: \"g\"",
    );
}

#[test]
fn cluster_queue_concurrent_admission_schema() {
    rejects(
        &cq("  concurrentAdmissionPolicy: {migration: {}}\n"),
        "spec.concurrentAdmissionPolicy.migration.mode",
        Required,
        "",
    );
    rejects(
        &cq(
            "  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors, constraints: {lastAcceptableFlavorName: X}}}\n",
        ),
        "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
}

// ---- LocalQueue ----

fn lq(spec: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: main, namespace: ns}}\nspec:\n{spec}"
    )
}

#[test]
fn local_queue_rules() {
    valid(&lq(
        "  clusterQueue: cq\n  stopPolicy: HoldAndDrain\n  fairSharing: {weight: \"0.5\"}\n",
    ));
    rejects(
        &lq("  clusterQueue: CQ\n"),
        "spec.clusterQueue",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    rejects(
        &lq("  clusterQueue: cq\n  fairSharing: {weight: \"-0.5\"}\n"),
        "spec.fairSharing",
        Invalid,
        "must be greater than or equal to 0",
    );
}

#[test]
fn local_queue_cluster_queue_is_immutable() {
    let e = update_errors(&lq("  clusterQueue: a\n"), &lq("  clusterQueue: b\n"));
    assert_eq!(
        e.to_string(),
        "LocalQueue \"main\" is invalid: spec.clusterQueue: Invalid value: \"b\": field is immutable"
    );
    update_ok(
        &lq("  clusterQueue: a\n"),
        &lq("  clusterQueue: a\n  stopPolicy: Hold\n"),
    );
}

// ---- Cohort ----

fn cohort(spec: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: co}}\nspec:\n{spec}"
    )
}

#[test]
fn cohort_limits_need_parent() {
    let groups = "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1, lendingLimit: 5}]}]\n";
    let e = errors(&cohort(groups));
    let p = "spec.resourceGroups[0].flavors[0].resources[0]";
    crate::helpers::assert_has(
        &e,
        &format!("{p}.borrowingLimit"),
        Invalid,
        "must be nil when parent is empty",
    );
    crate::helpers::assert_has(
        &e,
        &format!("{p}.lendingLimit"),
        Invalid,
        "must be nil when parent is empty",
    );
    // With a parent, a cohort may lend more than its nominal quota (unlike a ClusterQueue).
    valid(&cohort(&format!("  parentName: org\n{groups}")));
}

#[test]
fn cohort_other_rules() {
    rejects(
        &cohort("  parentName: Org\n"),
        "spec.parentName",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    rejects(
        &cohort("  fairSharing: {weight: \"-1\"}\n"),
        "spec.fairSharing",
        Invalid,
        "must be greater than or equal to 0",
    );
    rejects(
        &cohort(
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: f, resources: [{name: cpu, nominalQuota: \"-1\"}]}]\n",
        ),
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        Invalid,
        "must be greater than or equal to 0",
    );
}
