//! Validation of Topology, WorkloadPriorityClass and AdmissionCheck, the shared fixtures, and the error display.

use crate::helpers::{assert_has, errors, obj, objs, rejects, update_errors, update_ok, valid};
use sluice_sdk::kueue::validation::ErrorKind::{Invalid, Required, TooMany};
use sluice_sdk::kueue::validation::{validate, validate_update};

#[test]
fn shared_fixtures_are_valid() {
    for o in objs(include_str!("../fixtures/setup.yaml")) {
        if let Err(e) = validate(&o) {
            panic!("fixture {} {:?} is invalid: {e}", o.kind(), o.name());
        }
    }
}

// ---- Topology ----

fn topo(levels: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {{name: t}}\nspec:\n  levels: {levels}\n"
    )
}

#[test]
fn topology_levels() {
    valid(&topo(
        "[{nodeLabel: cloud/block}, {nodeLabel: cloud/rack}, {nodeLabel: kubernetes.io/hostname}]",
    ));
    rejects(
        &topo("[]"),
        "spec.levels",
        Invalid,
        "should have at least 1 items",
    );
    let many: Vec<String> = (0..17).map(|i| format!("{{nodeLabel: l{i}}}")).collect();
    rejects(
        &topo(&format!("[{}]", many.join(", "))),
        "spec.levels",
        TooMany,
        "must have at most 16 items",
    );
    rejects(
        &topo("[{nodeLabel: a}, {nodeLabel: a}]"),
        "spec.levels",
        Invalid,
        "must be unique",
    );
    rejects(
        &topo("[{nodeLabel: kubernetes.io/hostname}, {nodeLabel: rack}]"),
        "spec.levels",
        Invalid,
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    );
    rejects(
        &topo("[{nodeLabel: \"\"}]"),
        "spec.levels[0].nodeLabel",
        Invalid,
        "should be at least 1 chars long",
    );
    rejects(
        &topo("[{nodeLabel: \"a b\"}]"),
        "spec.levels[0].nodeLabel",
        Invalid,
        "should match",
    );
}

#[test]
fn topology_levels_are_immutable() {
    let e = update_errors(
        &topo("[{nodeLabel: a}]"),
        &topo("[{nodeLabel: a}, {nodeLabel: b}]"),
    );
    assert_has(&e, "spec.levels", Invalid, "field is immutable");
    update_ok(&topo("[{nodeLabel: a}]"), &topo("[{nodeLabel: a}]"));
}

// ---- WorkloadPriorityClass ----

#[test]
fn priority_class_description_length() {
    let ok = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: -5\ndescription: short\n";
    valid(ok);
    let long = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {{name: high}}\nvalue: 1\ndescription: {}\n",
        "d".repeat(2049)
    );
    rejects(
        &long,
        "description",
        Invalid,
        "must be no more than 2048 characters",
    );
    assert!(validate_update(&obj(ok), &obj(&long)).is_err());
}

// ---- AdmissionCheck ----

fn ac(spec: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {{name: prov}}\nspec:\n{spec}"
    )
}

#[test]
fn admission_check_rules() {
    valid(&ac(
        "  controllerName: kueue.x-k8s.io/provisioning-request\n  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: cfg}\n",
    ));
    rejects(
        &ac("  controllerName: \"\"\n"),
        "spec.controllerName",
        Required,
        "",
    );
    let e = errors(&ac(
        "  controllerName: c\n  parameters: {apiGroup: Kueue, kind: \"1kind\", name: Cfg}\n",
    ));
    assert_has(&e, "spec.parameters.apiGroup", Invalid, "should match");
    assert_has(
        &e,
        "spec.parameters.kind",
        Invalid,
        "should match '^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$'",
    );
    assert_has(&e, "spec.parameters.name", Invalid, "should match");
    rejects(
        &ac("  controllerName: c\n  parameters: {kind: K, name: n}\n"),
        "spec.parameters.apiGroup",
        Required,
        "",
    );
}

#[test]
fn admission_check_controller_is_immutable() {
    let e = update_errors(&ac("  controllerName: a\n"), &ac("  controllerName: b\n"));
    assert_eq!(
        e.to_string(),
        "AdmissionCheck \"prov\" is invalid: spec.controllerName: Invalid value: \"b\": field is immutable"
    );
}

// ---- Display and dispatch ----

#[test]
fn all_errors_are_reported_and_joined() {
    let e = errors(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: Q}\nspec: {clusterQueue: \"a b\", fairSharing: {weight: \"-1\"}}\n",
    );
    assert_eq!(e.errors.len(), 3, "{e}");
    let text = e.to_string();
    assert!(
        text.starts_with("LocalQueue \"Q\" is invalid: metadata.name: Invalid value: \"Q\": "),
        "{text}"
    );
    assert!(
        text.contains("; spec.clusterQueue: Invalid value: \"a b\": "),
        "{text}"
    );
    assert!(
        text.ends_with(
            "; spec.fairSharing: Invalid value: \"-1\": must be greater than or equal to 0"
        ),
        "{text}"
    );
}

#[test]
fn update_may_not_change_kind() {
    let old = obj(&topo("[{nodeLabel: a}]"));
    let new =
        obj("{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: t}}");
    let e = validate_update(&old, &new).expect_err("kind change accepted");
    assert_has(&e, "kind", Invalid, "may not change from \"Topology\"");
}

#[test]
fn error_lookup_helpers() {
    let e = errors(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q}\nspec: {clusterQueue: \"a b\"}\n",
    );
    assert_eq!(e.at("spec.clusterQueue").len(), 1);
    assert!(e.at("spec.fairSharing").is_empty());
    assert!(!e.has("spec.clusterQueue", "field is immutable"));
    let msg = &e.at("spec.clusterQueue")[0].message;
    assert!(e.has("spec.clusterQueue", msg));
}
