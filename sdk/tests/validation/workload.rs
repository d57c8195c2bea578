//! Validation of Workloads: spec rules, the status Kueue writes, and what stays fixed while quota is reserved.

use crate::helpers::{assert_has, errors, rejects, update_errors, update_ok, valid};
use sluice_sdk::kueue::validation::ErrorKind::{
    Duplicate, Forbidden, Invalid, NotFound, NotSupported, Required, TooMany,
};

const HEAD: &str =
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: wl, namespace: ns}\n";

fn wl(body: &str) -> String {
    format!("{HEAD}{body}")
}

const VALID: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: wl, namespace: ns}
spec:
  queueName: main
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  priority: 1000
  maximumExecutionTimeSeconds: 60
  podSets:
  - name: driver
    count: 1
    template:
      metadata: {labels: {app: x}, annotations: {note: y}}
      spec:
        containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  - name: workers
    count: 4
    minCount: 2
    topologyRequest: {required: rack, podSetSliceRequiredTopology: host, podSetSliceSize: 2}
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: 500m, nvidia.com/gpu: 1}}}]
"#;

const RESERVED: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: wl, namespace: ns}
spec:
  queueName: main
  maximumExecutionTimeSeconds: 60
  podSets:
  - name: main
    count: 4
    template: {spec: {containers: [{name: c}]}}
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
  - {type: Admitted, status: "True", reason: Admitted, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
  admission:
    clusterQueue: cq
    podSetAssignments:
    - {name: main, count: 4, flavors: {cpu: default}, resourceUsage: {cpu: "4"}}
  reclaimablePods: [{name: main, count: 1}]
"#;

#[test]
fn valid_workloads() {
    valid(VALID);
    valid(RESERVED);
}

#[test]
fn pod_set_counts() {
    rejects(
        &wl("spec: {podSets: []}\n"),
        "spec.podSets",
        Invalid,
        "should have at least 1 items",
    );
    let sets: String = (0..19)
        .map(|i| format!("  - {{name: p{i}, count: 1, template: {{}}}}\n"))
        .collect();
    rejects(
        &wl(&format!("spec:\n  podSets:\n{sets}")),
        "spec.podSets",
        TooMany,
        "must have at most 18 items",
    );
}

#[test]
fn pod_set_names_are_unique_dns_labels() {
    let e = errors(&wl(
        "spec:\n  podSets:\n  - {name: Main, count: 1, template: {}}\n  - {name: a, count: 1, template: {}}\n  - {name: a, count: 1, template: {}}\n",
    ));
    assert_has(
        &e,
        "spec.podSets[0].name",
        Invalid,
        "a lowercase RFC 1123 label",
    );
    assert_has(&e, "spec.podSets[2].name", Duplicate, "");
}

#[test]
fn pod_set_count_and_min_count() {
    rejects(
        &wl("spec:\n  podSets: [{name: a, count: -1, template: {}}]\n"),
        "spec.podSets[0].count",
        Invalid,
        "should be greater than or equal to 0",
    );
    rejects(
        &wl("spec:\n  podSets: [{name: a, count: 2, minCount: 0, template: {}}]\n"),
        "spec.podSets[0].minCount",
        Invalid,
        "should be greater than or equal to 1",
    );
    rejects(
        &wl("spec:\n  podSets: [{name: a, count: 2, minCount: 3, template: {}}]\n"),
        "spec.podSets[0]",
        Invalid,
        "minCount should be positive and less or equal to count",
    );
    rejects(
        &wl(
            "spec:\n  podSets:\n  - {name: a, count: 2, minCount: 1, template: {}}\n  - {name: b, count: 2, minCount: 1, template: {}}\n",
        ),
        "spec.podSets",
        Invalid,
        "at most one podSet can use minCount",
    );
    rejects(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: wl, annotations: {kueue.x-k8s.io/elastic-job: \"true\"}}\nspec:\n  podSets: [{name: a, count: 2, minCount: 1, template: {}}]\n",
        "spec.podSets",
        Invalid,
        "partial admission and elastic job cannot be used together",
    );
}

#[test]
fn priority_required_with_class_ref() {
    rejects(
        &wl(
            "spec:\n  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}\n  podSets: [{name: a, count: 1, template: {}}]\n",
        ),
        "spec",
        Invalid,
        "priority should not be nil when priorityClassRef is set",
    );
    let e = errors(&wl(
        "spec:\n  priorityClassRef: {group: scheduling.k8s.io, kind: WorkloadPriorityClass, name: High}\n  priority: 1\n  podSets: [{name: a, count: 1, template: {}}]\n",
    ));
    assert_has(
        &e,
        "spec.priorityClassRef",
        Invalid,
        "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
    );
    assert_has(
        &e,
        "spec.priorityClassRef.name",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    rejects(
        &wl(
            "spec:\n  priorityClassRef: {group: kueue.x-k8s.io, kind: PriorityClass, name: high}\n  priority: 1\n  podSets: [{name: a, count: 1, template: {}}]\n",
        ),
        "spec.priorityClassRef",
        Invalid,
        "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    );
}

#[test]
fn spec_scalars() {
    let e = errors(&wl(
        "spec:\n  queueName: Main\n  maximumExecutionTimeSeconds: 0\n  preemptionGates: [{name: \"\"}]\n  podSets: [{name: a, count: 1, template: {}}]\n",
    ));
    assert_has(
        &e,
        "spec.queueName",
        Invalid,
        "a lowercase RFC 1123 subdomain",
    );
    assert_has(
        &e,
        "spec.maximumExecutionTimeSeconds",
        Invalid,
        "should be greater than or equal to 1",
    );
    assert_has(
        &e,
        "spec.preemptionGates[0].name",
        Invalid,
        "should be at least 1 chars long",
    );
}

#[test]
fn pods_resource_is_reserved_and_quantities_non_negative() {
    let e = errors(&wl(
        "spec:\n  podSets:\n  - name: a\n    count: 1\n    template:\n      spec:\n        initContainers: [{name: i, resources: {limits: {pods: \"1\"}}}]\n        containers: [{name: c, resources: {requests: {cpu: \"-1\"}}}]\n",
    ));
    assert_has(
        &e,
        "spec.podSets[0].template.spec.initContainers[0].resources.limits[pods]",
        Invalid,
        "the key is reserved for internal kueue use",
    );
    assert_has(
        &e,
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
        Invalid,
        "must be greater than or equal to 0",
    );
}

#[test]
fn pod_set_template_metadata() {
    let e = errors(&wl(
        "spec:\n  podSets:\n  - name: a\n    count: 1\n    template:\n      metadata: {labels: {\"bad key!\": x}, annotations: {\"/x\": y}}\n",
    ));
    assert_has(
        &e,
        "spec.podSets[0].template.metadata.labels",
        Invalid,
        "name part must consist of",
    );
    assert_has(
        &e,
        "spec.podSets[0].template.metadata.annotations",
        Invalid,
        "prefix part must be non-empty",
    );
}

#[test]
fn topology_request_rules() {
    let p = "spec.podSets[0].topologyRequest";
    rejects(
        &wl(
            "spec:\n  podSets: [{name: a, count: 4, template: {}, topologyRequest: {podSetSliceRequiredTopology: rack}}]\n",
        ),
        &format!("{p}.podSetSliceSize"),
        Required,
        "must be set when podSetSliceRequiredTopology is specified",
    );
    rejects(
        &wl(
            "spec:\n  podSets: [{name: a, count: 4, template: {}, topologyRequest: {podSetSliceRequiredTopology: rack, podSetSliceSize: 0}}]\n",
        ),
        &format!("{p}.podSetSliceSize"),
        Invalid,
        "must be greater than 0",
    );
    rejects(
        &wl(
            "spec:\n  podSets: [{name: a, count: 4, template: {}, topologyRequest: {podSetSliceSize: 2}}]\n",
        ),
        &format!("{p}.podSetSliceSize"),
        Forbidden,
        "may not be set when podSetSliceRequiredTopology is not specified",
    );
    let e = errors(&wl(
        "spec:\n  podSets: [{name: a, count: 4, template: {}, topologyRequest: {podsetSliceRequiredTopologyConstraints: [{topology: r, size: 0}, {topology: r, size: 1}, {topology: r, size: 1}, {topology: r, size: 1}]}}]\n",
    ));
    assert_has(
        &e,
        &format!("{p}.podsetSliceRequiredTopologyConstraints"),
        TooMany,
        "must have at most 3 items",
    );
    assert_has(
        &e,
        &format!("{p}.podsetSliceRequiredTopologyConstraints[0].size"),
        Invalid,
        "must be greater than 0",
    );
    let long = "x".repeat(64);
    rejects(
        &wl(&format!(
            "spec:\n  podSets: [{{name: a, count: 4, template: {{}}, topologyRequest: {{required: {long}}}}}]\n"
        )),
        &format!("{p}.required"),
        Invalid,
        "must be no more than 63 characters",
    );
}

#[test]
fn admission_required_and_matching_while_reserved() {
    let no_admission = RESERVED.replace(
        "  admission:\n    clusterQueue: cq\n    podSetAssignments:\n    - {name: main, count: 4, flavors: {cpu: default}, resourceUsage: {cpu: \"4\"}}\n",
        "",
    );
    rejects(
        &no_admission,
        "status.admission",
        Required,
        "must be set while the QuotaReserved condition is true",
    );

    let wrong = RESERVED.replace(
        "    - {name: main, count: 4, flavors: {cpu: default}, resourceUsage: {cpu: \"4\"}}\n",
        "    - {name: other, count: 3, resourceUsage: {cpu: \"4\"}}\n    - {name: main, count: 4}\n",
    );
    let e = errors(&wrong);
    assert_has(
        &e,
        "",
        Invalid,
        "podSetAssignments must have the same number of podSets as the spec",
    );
    assert_has(
        &e,
        "status.admission.podSetAssignments[0].name",
        NotFound,
        "",
    );
    assert_has(
        &e,
        "status.admission.podSetAssignments[0].resourceUsage[cpu]",
        Invalid,
        "is not a multiple of 3",
    );
    assert!(
        e.to_string()
            .contains("<nil>: Invalid value: \"object\": podSetAssignments must have"),
        "{e}"
    );
}

#[test]
fn reclaimable_pods() {
    let e = errors(&RESERVED.replace(
        "  reclaimablePods: [{name: main, count: 1}]",
        "  reclaimablePods: [{name: main, count: 5}, {name: ghost, count: 1}]",
    ));
    assert_has(
        &e,
        "status.reclaimablePods[main].count",
        Invalid,
        "should be less or equal to 4",
    );
    assert_has(
        &e,
        "status.reclaimablePods[ghost].name",
        NotSupported,
        "supported values: \"main\"",
    );
}

#[test]
fn admission_check_pod_set_updates() {
    let e = errors(&wl(
        "spec:\n  podSets: [{name: a, count: 1, template: {}}]\nstatus:\n  admissionChecks:\n  - name: prov\n    state: Ready\n    message: \"\"\n    lastTransitionTime: \"2026-01-01T00:00:00Z\"\n    podSetUpdates:\n    - {name: b, labels: {\"x y\": z}, nodeSelector: {k: \"v v\"}, tolerations: [{operator: Equal}]}\n",
    ));
    let p = "status.admissionChecks[0].podSetUpdates[0]";
    assert_has(
        &e,
        &format!("{p}.name"),
        NotSupported,
        "supported values: \"a\"",
    );
    assert_has(
        &e,
        &format!("{p}.labels"),
        Invalid,
        "name part must consist of",
    );
    assert_has(
        &e,
        &format!("{p}.nodeSelector"),
        Invalid,
        "a valid label must be",
    );
    assert_has(
        &e,
        &format!("{p}.tolerations"),
        Invalid,
        "operator must be Exists when 'key' is empty",
    );
}

#[test]
fn cluster_name_and_nominated_are_exclusive() {
    rejects(
        &wl(
            "spec:\n  podSets: [{name: a, count: 1, template: {}}]\nstatus:\n  clusterName: w1\n  nominatedClusterNames: [w1]\n",
        ),
        "status",
        Invalid,
        "clusterName and nominatedClusterNames are mutually exclusive",
    );
}

#[test]
fn immutable_while_reserved() {
    let e = update_errors(
        RESERVED,
        &RESERVED
            .replace("queueName: main", "queueName: other")
            .replace(
                "maximumExecutionTimeSeconds: 60",
                "maximumExecutionTimeSeconds: 61",
            )
            .replace(
                "template: {spec: {containers: [{name: c}]}}",
                "template: {spec: {containers: [{name: d}]}}",
            ),
    );
    assert_has(
        &e,
        "",
        Invalid,
        "queueName is immutable while workload quota reserved",
    );
    assert_has(
        &e,
        "",
        Invalid,
        "maximumExecutionTimeSeconds is immutable while workload quota reserved",
    );
    assert_has(&e, "spec.podSets[0]", Invalid, "field is immutable");

    let with_ref = RESERVED.replace("  queueName: main\n", "  queueName: main\n  priority: 1\n  priorityClassRef: {group: scheduling.k8s.io, kind: PriorityClass, name: a}\n");
    let e = update_errors(&with_ref, &with_ref.replace("name: a}", "name: b}"));
    assert_has(
        &e,
        "",
        Invalid,
        "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass",
    );
    let e = update_errors(&with_ref, RESERVED);
    assert_has(
        &e,
        "",
        Invalid,
        "priorityClassRef is immutable while workload quota reserved",
    );

    // Scaling down is allowed, and so is anything once the reservation is gone.
    update_ok(
        RESERVED,
        &RESERVED.replace("    count: 4\n    template", "    count: 3\n    template"),
    );
    let pending =
        wl("spec:\n  queueName: main\n  podSets: [{name: main, count: 4, template: {}}]\n");
    update_ok(
        &pending,
        &pending.replace("queueName: main", "queueName: other"),
    );
}

#[test]
fn status_updates_while_reserved() {
    let e = update_errors(
        RESERVED,
        &RESERVED.replace(
            "reclaimablePods: [{name: main, count: 1}]",
            "reclaimablePods: [{name: main, count: 0}]",
        ),
    );
    assert_has(
        &e,
        "status.reclaimablePods[main].count",
        Invalid,
        "cannot be less than 1",
    );
    let e = update_errors(
        RESERVED,
        &RESERVED.replace("  reclaimablePods: [{name: main, count: 1}]\n", ""),
    );
    assert_has(
        &e,
        "status.reclaimablePods[main]",
        Required,
        "cannot be removed",
    );
    let e = update_errors(
        RESERVED,
        &RESERVED.replace("flavors: {cpu: default}", "flavors: {cpu: other}"),
    );
    assert_has(&e, "status.admission", Invalid, "field is immutable");
    // A topology assignment may be added after the reservation.
    update_ok(
        RESERVED,
        &RESERVED.replace("resourceUsage: {cpu: \"4\"}}", "resourceUsage: {cpu: \"4\"}, topologyAssignment: {levels: [h], slices: [{domainCount: 1, valuesPerLevel: [{universal: n1}], podCounts: {universal: 4}}]}}"),
    );
}

#[test]
fn ready_pod_set_updates_and_cluster_name() {
    let base = wl(
        "spec:\n  podSets: [{name: a, count: 1, template: {}}]\nstatus:\n  nominatedClusterNames: [w1]\n  admissionChecks:\n  - {name: prov, state: Ready, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\", podSetUpdates: [{name: a, labels: {k: v}}]}\n",
    );
    let e = update_errors(&base, &base.replace("labels: {k: v}", "labels: {k: w}"));
    assert_has(
        &e,
        "status.admissionChecks[0].podSetUpdates",
        Invalid,
        "field is immutable",
    );
    let e = update_errors(
        &base,
        &base.replace("nominatedClusterNames: [w1]", "clusterName: w2"),
    );
    assert_has(
        &e,
        "status.clusterName",
        Invalid,
        "when setting clusterName it must be one of the nominatedClusterNames",
    );
    update_ok(
        &base,
        &base.replace("nominatedClusterNames: [w1]", "clusterName: w1"),
    );
}

#[test]
fn admission_gated_by_annotation() {
    let gated = |v: &str| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {{name: wl, annotations: {{kueue.x-k8s.io/admission-gated-by: \"{v}\"}}}}\nspec:\n  podSets: [{{name: a, count: 1, template: {{}}}}]\n"
        )
    };
    let p = "metadata.annotations[kueue.x-k8s.io/admission-gated-by]";
    valid(&gated("example.com/a, example.com/b"));
    rejects(
        &gated("example.com/a,,example.com/b"),
        p,
        Invalid,
        "cannot contain empty gate names",
    );
    rejects(
        &gated("example.com/a,example.com/a"),
        p,
        Invalid,
        "duplicate gate name: example.com/a",
    );
    rejects(
        &gated("plain"),
        p,
        Invalid,
        "must be a domain-prefixed path (such as \"acme.io/foo\")",
    );
    rejects(
        &gated(&format!("example.com/{}", "g".repeat(60))),
        p,
        Invalid,
        "may not be more than 63 bytes",
    );

    let e = update_errors(
        &wl("spec:\n  podSets: [{name: a, count: 1, template: {}}]\n"),
        &gated("example.com/a"),
    );
    assert_has(&e, p, Forbidden, "cannot add admission gate after creation");
    let e = update_errors(
        &gated("example.com/a"),
        &gated("example.com/a,example.com/b"),
    );
    assert_has(&e, p, Forbidden, "can only remove gates, not add new ones");
    update_ok(
        &gated("example.com/a,example.com/b"),
        &gated("example.com/b"),
    );
}

#[test]
fn status_conditions() {
    let e = errors(&wl(
        "spec:\n  podSets: [{name: a, count: 1, template: {}}]\nstatus:\n  conditions:\n  - {type: \"bad type!\", status: Maybe, reason: \"1bad\", message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n  - {type: Finished, status: \"True\", reason: \"\", message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
    ));
    assert_has(
        &e,
        "status.conditions[0].type",
        Invalid,
        "name part must consist of",
    );
    assert_has(
        &e,
        "status.conditions[0].status",
        NotSupported,
        "supported values: \"False\", \"True\", \"Unknown\"",
    );
    assert_has(
        &e,
        "status.conditions[0].reason",
        Invalid,
        "a condition reason must start with alphabetic character",
    );
    assert_has(&e, "status.conditions[1].reason", Required, "must be set");
}

#[test]
fn status_schema_limits() {
    let e = errors(&wl(
        "spec:\n  podSets: [{name: a, count: 1, template: {}}]\nstatus:\n  requeueState: {count: -1}\n  unhealthyNodes: [{name: n1}, {name: n2}, {name: n3}, {name: n4}, {name: n5}, {name: n6}, {name: n7}, {name: n8}, {name: n9}]\n  preemptionGates: [{name: \"\"}]\n  schedulingStats: {evictions: [{reason: Preempted, underlyingCause: \"\", count: -2}]}\n  admissionChecks: [{name: \"\", message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\", retryCount: -1}]\n",
    ));
    assert_has(
        &e,
        "status.requeueState.count",
        Invalid,
        "should be greater than or equal to 0",
    );
    assert_has(
        &e,
        "status.unhealthyNodes",
        TooMany,
        "must have at most 8 items",
    );
    assert_has(
        &e,
        "status.preemptionGates[0].name",
        Invalid,
        "should be at least 1 chars long",
    );
    assert_has(
        &e,
        "status.schedulingStats.evictions[0].count",
        Invalid,
        "should be greater than or equal to 0",
    );
    assert_has(
        &e,
        "status.admissionChecks[0].name",
        Invalid,
        "should be at least 1 chars long",
    );
    assert_has(
        &e,
        "status.admissionChecks[0].retryCount",
        Invalid,
        "should be greater than or equal to 0",
    );
}

#[test]
fn topology_assignment_shape() {
    let with = |ta: &str| {
        RESERVED.replace(
            "resourceUsage: {cpu: \"4\"}}",
            &format!("resourceUsage: {{cpu: \"4\"}}, topologyAssignment: {ta}}}"),
        )
    };
    valid(&with(
        "{levels: [rack, host], slices: [{domainCount: 2, valuesPerLevel: [{universal: r1}, {individual: {prefix: h, roots: [\"1\", \"2\"]}}], podCounts: {individual: [3, 1]}}]}",
    ));
    let e = errors(&with(
        "{levels: [rack, host], slices: [{domainCount: 2, valuesPerLevel: [{universal: r1, individual: {roots: [a]}}], podCounts: {universal: 0, individual: [1]}}]}",
    ));
    let ta = "status.admission.podSetAssignments[0].topologyAssignment";
    assert_has(
        &e,
        ta,
        Invalid,
        "valuesPerLevel must have the same length as the number of levels",
    );
    assert_has(
        &e,
        &format!("{ta}.slices[0]"),
        Invalid,
        "podCounts.individual must have length equal to domainCount",
    );
    assert_has(
        &e,
        &format!("{ta}.slices[0]"),
        Invalid,
        "valuesPerLevel.individual, if set, must have roots of length",
    );
    assert_has(
        &e,
        &format!("{ta}.slices[0].valuesPerLevel[0]"),
        Invalid,
        "exactly one of the fields in [universal individual] must be set",
    );
    assert_has(
        &e,
        &format!("{ta}.slices[0].podCounts"),
        Invalid,
        "exactly one of the fields in [universal individual] must be set",
    );
    assert_has(
        &e,
        &format!("{ta}.slices[0].podCounts.universal"),
        Invalid,
        "should be greater than or equal to 1",
    );
}

#[test]
fn elastic_workloads_may_converge() {
    let elastic = RESERVED.replace(
        "metadata: {name: wl, namespace: ns}",
        "metadata: {name: wl, namespace: ns, annotations: {kueue.x-k8s.io/elastic-job: \"true\"}}",
    );
    // Scaled down from 4 to 2 while admitted with 4: the reclaimable count may fall.
    let old = elastic.replace(
        "reclaimablePods: [{name: main, count: 1}]",
        "reclaimablePods: [{name: main, count: 3}]",
    );
    let scaled = old.replace("    count: 4\n    template", "    count: 2\n    template");
    update_ok(&old, &scaled.replace("count: 3}]", "count: 1}]"));
    // An unchanged count above the new size is a stale leftover and may stay; a new one may not.
    update_ok(&old, &scaled);
    let e = update_errors(&scaled.replace("count: 3}]", "count: 1}]"), &scaled);
    assert_has(
        &e,
        "status.reclaimablePods[main].count",
        Invalid,
        "should be less or equal to 2",
    );
    // The same decrease is refused for a workload that is not elastic.
    let plain_old = RESERVED.replace(
        "reclaimablePods: [{name: main, count: 1}]",
        "reclaimablePods: [{name: main, count: 3}]",
    );
    let e = update_errors(
        &plain_old,
        &plain_old
            .replace("    count: 4\n    template", "    count: 2\n    template")
            .replace("count: 3}]", "count: 1}]"),
    );
    assert_has(
        &e,
        "status.reclaimablePods[main].count",
        Invalid,
        "cannot be less than 3",
    );
}

#[test]
fn reservation_without_admission_may_converge() {
    let broken = RESERVED.replace(
        "  admission:\n    clusterQueue: cq\n    podSetAssignments:\n    - {name: main, count: 4, flavors: {cpu: default}, resourceUsage: {cpu: \"4\"}}\n",
        "",
    );
    rejects(
        &broken,
        "status.admission",
        Required,
        "must be set while the QuotaReserved condition is true",
    );
    update_ok(&broken, &broken);
    let e = update_errors(RESERVED, &broken);
    assert_has(
        &e,
        "status.admission",
        Required,
        "must be set while the QuotaReserved condition is true",
    );
}

#[test]
fn enumerations_are_enforced_by_decoding() {
    let doc: serde_json::Value = serde_yaml::from_str(
        "{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: q}, spec: {clusterQueue: cq, stopPolicy: Pause}}",
    )
    .expect("test YAML parses");
    let err = sluice_sdk::kueue::decode::decode(doc).expect_err("unknown stopPolicy decoded");
    assert!(err.to_string().contains("spec.stopPolicy"), "{err}");
}
