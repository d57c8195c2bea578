//! The chart's RBAC grants each component exactly the permissions it uses: every permission below is granted,
//! and nothing else is (least privilege). The rules are read from the chart's templates, whose rule lists
//! hold no template expressions.
//!
//! The operator's table below is what the chart promises; `chart_grants_every_permission_the_operator_code_uses`
//! also checks it against the operator's own table of the calls it makes (`controller::rbac::PERMISSIONS`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};

/// (API group, resource, verbs) the operator uses cluster-wide.
const OPERATOR_CLUSTER: &[(&str, &str, &[&str])] = &[
    (
        "kueue.x-k8s.io",
        "workloads",
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    ),
    ("kueue.x-k8s.io", "admissionchecks", READ_UPDATE),
    ("kueue.x-k8s.io", "clusterqueues", READ_UPDATE),
    ("kueue.x-k8s.io", "cohorts", READ_UPDATE),
    ("kueue.x-k8s.io", "localqueues", READ_UPDATE),
    ("kueue.x-k8s.io", "resourceflavors", READ_UPDATE),
    ("kueue.x-k8s.io", "topologies", READ_UPDATE),
    ("kueue.x-k8s.io", "workloadpriorityclasses", READ_UPDATE),
    ("kueue.x-k8s.io", "admissionchecks/status", STATUS),
    ("kueue.x-k8s.io", "clusterqueues/status", STATUS),
    ("kueue.x-k8s.io", "cohorts/status", STATUS),
    ("kueue.x-k8s.io", "localqueues/status", STATUS),
    ("kueue.x-k8s.io", "topologies/status", STATUS),
    ("kueue.x-k8s.io", "workloads/status", STATUS),
    ("kueue.x-k8s.io", "clusterqueues/finalizers", &["update"]),
    ("kueue.x-k8s.io", "cohorts/finalizers", &["update"]),
    ("kueue.x-k8s.io", "localqueues/finalizers", &["update"]),
    ("kueue.x-k8s.io", "resourceflavors/finalizers", &["update"]),
    ("kueue.x-k8s.io", "topologies/finalizers", &["update"]),
    ("kueue.x-k8s.io", "workloads/finalizers", &["update"]),
    (
        "batch",
        "jobs",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    // Workloads are owned by their Job with blockOwnerDeletion, which needs this.
    ("batch", "jobs/finalizers", &["update"]),
    ("batch", "jobs/status", &["get"]),
    (
        "jobset.x-k8s.io",
        "jobsets",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    // Workloads are owned by their JobSet with blockOwnerDeletion.
    ("jobset.x-k8s.io", "jobsets/finalizers", &["update"]),
    (
        "kubeflow.org",
        "pytorchjobs",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    ("kubeflow.org", "pytorchjobs/finalizers", &["update"]),
    (
        "ray.io",
        "rayjobs",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    ("ray.io", "rayjobs/finalizers", &["update"]),
    (
        "ray.io",
        "rayclusters",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    ("ray.io", "rayclusters/finalizers", &["update"]),
    (
        "ray.io",
        "rayservices",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    ("ray.io", "rayservices/finalizers", &["update"]),
    (
        "trainer.kubeflow.org",
        "trainjobs",
        &["get", "list", "watch", "update", "patch", "delete"],
    ),
    ("trainer.kubeflow.org", "trainjobs/finalizers", &["update"]),
    ("trainer.kubeflow.org", "trainingruntimes", READ),
    ("trainer.kubeflow.org", "clustertrainingruntimes", READ),
    (
        "leaderworkerset.x-k8s.io",
        "leaderworkersets",
        &["get", "list", "watch", "delete"],
    ),
    ("apps", "statefulsets", READ),
    ("", "pods", &["get", "list", "watch", "patch", "delete"]),
    ("", "pods/status", &["patch"]),
    // A single plain pod owns its Workload with blockOwnerDeletion.
    ("", "pods/finalizers", &["update"]),
    ("", "nodes", READ),
    ("", "namespaces", READ),
    // LimitRanges and RuntimeClasses adjust what a Workload's pods count, as in Kueue.
    ("", "limitranges", READ),
    ("node.k8s.io", "runtimeclasses", READ),
    ("", "events", &["create", "patch"]),
    ("events.k8s.io", "events", &["create", "patch"]),
    ("scheduling.k8s.io", "priorityclasses", READ),
    ("sluice.dev", "policymodules", READ),
    ("sluice.dev", "nodegputopologies", READ),
    ("sluice.dev", "policymodules/status", STATUS),
];

/// In the operator's own namespace.
const OPERATOR_NAMESPACED: &[(&str, &str, &[&str])] = &[
    (
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "update", "patch"],
    ),
    ("", "configmaps", READ),
];

/// The node agent writes its node's NodeGpuTopology and labels its node.
const WEBHOOK: &[(&str, &str, &[&str])] = &[
    ("kueue.x-k8s.io", "localqueues", &["get", "list", "watch"]),
    // The TrainJob hook validates on the pod sets of the TrainJob's runtime.
    ("trainer.kubeflow.org", "trainingruntimes", READ),
    ("trainer.kubeflow.org", "clustertrainingruntimes", READ),
    // Namespaces' labels, for managedJobsNamespaceSelector.
    ("", "namespaces", READ),
];

const NODE_AGENT: &[(&str, &str, &[&str])] = &[
    (
        "sluice.dev",
        "nodegputopologies",
        &["get", "list", "watch", "create", "update", "patch"],
    ),
    ("sluice.dev", "nodegputopologies/status", STATUS),
    ("", "nodes", &["get", "patch"]),
];

const READ: &[&str] = &["get", "list", "watch"];
const READ_UPDATE: &[&str] = &["get", "list", "watch", "update", "patch"];
const STATUS: &[&str] = &["get", "update", "patch"];

type Grant = (String, String, String);

fn template(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/sluice/templates")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The template's YAML documents of `kind`, with template-expression lines removed (names and labels).
fn documents<T: serde::de::DeserializeOwned>(text: &str, kind: &str) -> Vec<T> {
    let plain: String = text
        .lines()
        .filter(|l| !l.contains("{{"))
        .map(|l| format!("{l}\n"))
        .collect();
    plain
        .split("\n---\n")
        .filter(|d| d.lines().any(|l| l == format!("kind: {kind}")))
        .map(|d| {
            let de = serde_yaml::Deserializer::from_str(d);
            serde_path_to_error::deserialize(de)
                .unwrap_or_else(|e| panic!("a {kind} in the chart: {e}"))
        })
        .collect()
}

fn grants(rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for r in rules {
        assert!(
            r.non_resource_urls.as_ref().is_none_or(Vec::is_empty),
            "non-resource URLs are not used: {r:?}"
        );
        assert!(r.resource_names.as_ref().is_none_or(Vec::is_empty));
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    for field in [g, res, v] {
                        assert!(!field.contains('*'), "wildcard in {r:?}");
                    }
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

fn expected(table: &[(&str, &str, &[&str])]) -> BTreeSet<Grant> {
    table
        .iter()
        .flat_map(|(g, r, verbs)| {
            verbs
                .iter()
                .map(|v| (g.to_string(), r.to_string(), v.to_string()))
        })
        .collect()
}

fn assert_same(component: &str, granted: &BTreeSet<Grant>, needed: &BTreeSet<Grant>) {
    let missing: Vec<_> = needed.difference(granted).collect();
    let extra: Vec<_> = granted.difference(needed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{component}: missing {missing:?}; granted but unused {extra:?}"
    );
}

#[test]
fn operator_cluster_role_matches_what_it_uses() {
    let roles: Vec<ClusterRole> = documents(&template("operator/rbac.yaml"), "ClusterRole");
    assert_eq!(roles.len(), 1);
    let rules = roles[0].rules.clone().unwrap_or_default();
    assert_same(
        "operator ClusterRole",
        &grants(&rules),
        &expected(OPERATOR_CLUSTER),
    );
}

#[test]
fn operator_namespaced_role_matches_what_it_uses() {
    let roles: Vec<Role> = documents(&template("operator/rbac.yaml"), "Role");
    assert_eq!(roles.len(), 1);
    let rules = roles[0].rules.clone().unwrap_or_default();
    assert_same(
        "operator Role",
        &grants(&rules),
        &expected(OPERATOR_NAMESPACED),
    );
}

#[test]
fn node_agent_role_matches_what_it_uses() {
    let roles: Vec<ClusterRole> = documents(&template("node-agent/rbac.yaml"), "ClusterRole");
    assert_eq!(roles.len(), 1);
    let rules = roles[0].rules.clone().unwrap_or_default();
    assert_same(
        "node agent ClusterRole",
        &grants(&rules),
        &expected(NODE_AGENT),
    );
}

#[test]
fn webhook_role_matches_what_it_uses() {
    // The webhook only reads LocalQueues (its default-queue mutation), Trainer runtimes and Namespaces; no writes.
    let roles: Vec<ClusterRole> =
        documents(&template("webhook/serviceaccount.yaml"), "ClusterRole");
    assert_eq!(roles.len(), 1);
    let rules = roles[0].rules.clone().unwrap_or_default();
    assert_same("webhook ClusterRole", &grants(&rules), &expected(WEBHOOK));
    for file in [
        "webhook/deployment.yaml",
        "webhook/service.yaml",
        "webhook/pdb.yaml",
    ] {
        assert!(
            !template(file).contains("rbac.authorization.k8s.io"),
            "{file} grants the webhook API access"
        );
    }
}

#[test]
fn an_extra_grant_is_noticed() {
    let mut rules = documents::<ClusterRole>(&template("node-agent/rbac.yaml"), "ClusterRole")[0]
        .rules
        .clone()
        .unwrap_or_default();
    rules[0].verbs.push("delete".into());
    assert_ne!(grants(&rules), expected(NODE_AGENT));
}

/// Every permission the operator's code uses (its one table, `controller::rbac::PERMISSIONS`, which the
/// controller tests check every request of a full run against) is granted by the chart's operator roles.
#[test]
fn chart_grants_every_permission_the_operator_code_uses() {
    let mut granted = BTreeSet::new();
    for role in documents::<ClusterRole>(&template("operator/rbac.yaml"), "ClusterRole") {
        granted.extend(grants(&role.rules.unwrap_or_default()));
    }
    for role in documents::<Role>(&template("operator/rbac.yaml"), "Role") {
        granted.extend(grants(&role.rules.unwrap_or_default()));
    }
    let used: BTreeSet<Grant> = sluice_operator::controller::rbac::PERMISSIONS
        .iter()
        .flat_map(|p| {
            p.verbs
                .iter()
                .map(|v| (p.group.to_string(), p.resource.to_string(), v.to_string()))
        })
        .collect();
    let missing: Vec<_> = used.difference(&granted).collect();
    assert!(
        missing.is_empty(),
        "the operator uses permissions the chart does not grant: {missing:?}"
    );
}
