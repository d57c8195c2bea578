//! CustomResourceDefinitions of Kueue's kinds, each serving v1beta1 (deprecated) and v1beta2 (storage).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSON, WebhookClientConfig,
    WebhookConversion,
};
use kube::CustomResourceExt;

use super::{v1beta1, v1beta2};

/// Joins a kind's two generated CRDs: v1beta1 served and deprecated, v1beta2 served and stored.
fn both_versions(
    old: CustomResourceDefinition,
    mut new: CustomResourceDefinition,
) -> CustomResourceDefinition {
    let mut versions: Vec<_> = old.spec.versions.into_iter().collect();
    for v in &mut versions {
        v.served = true;
        v.storage = false;
        v.deprecated = Some(true);
        v.deprecation_warning = Some(v1beta1::DEPRECATION_WARNING.to_owned());
    }
    for v in &mut new.spec.versions {
        v.served = true;
        v.storage = true;
        v.deprecated = None;
        v.deprecation_warning = None;
    }
    // Kueue lists the older version first.
    versions.append(&mut new.spec.versions);
    new.spec.versions = versions;
    new
}

/// One CRD per Kueue kind, ordered by CRD name.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut all = vec![
        both_versions(
            v1beta1::AdmissionCheck::crd(),
            v1beta2::AdmissionCheck::crd(),
        ),
        both_versions(v1beta1::ClusterQueue::crd(), v1beta2::ClusterQueue::crd()),
        both_versions(v1beta1::Cohort::crd(), v1beta2::Cohort::crd()),
        both_versions(v1beta1::LocalQueue::crd(), v1beta2::LocalQueue::crd()),
        both_versions(
            v1beta1::ResourceFlavor::crd(),
            v1beta2::ResourceFlavor::crd(),
        ),
        both_versions(v1beta1::Topology::crd(), v1beta2::Topology::crd()),
        both_versions(
            v1beta1::WorkloadPriorityClass::crd(),
            v1beta2::WorkloadPriorityClass::crd(),
        ),
        both_versions(v1beta1::Workload::crd(), v1beta2::Workload::crd()),
    ];
    for crd in &mut all {
        spec_optional(crd);
    }
    all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    all
}

/// Kueue's kinds declare `spec,omitempty`, so their CRDs do not require `spec` (Kueue's own samples create a
/// ResourceFlavor without one); the derived schema would. The API server defaults a missing `spec` to `{}`, so
/// every client (the operator's typed watches, the CLI) reads one: Sluice shows `spec: {}` where Kueue shows
/// none (docs/compatibility.md).
fn spec_optional(crd: &mut CustomResourceDefinition) {
    for v in &mut crd.spec.versions {
        if let Some(root) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            let required: Vec<String> = root.required.take().unwrap_or_default();
            let rest: Vec<String> = required.into_iter().filter(|f| f != "spec").collect();
            root.required = (!rest.is_empty()).then_some(rest);
            // Only where `{}` is a valid spec (a default must pass the schema).
            if let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec"))
                && spec.required.as_ref().is_none_or(|r| r.is_empty())
            {
                spec.default = Some(JSON(serde_json::json!({})));
            }
        }
    }
}

/// All CRDs as one multi-document YAML stream, in the order of [`crds`].
pub fn crds_yaml() -> String {
    to_yaml(&crds())
}

/// Sets the conversion webhook at `client` on every CRD that serves more than one version (as the chart does, and
/// as a webhook run outside the cluster needs: `sluice crds --conversion-url`).
pub fn with_conversion_webhook(
    mut crds: Vec<CustomResourceDefinition>,
    client: &WebhookClientConfig,
) -> Vec<CustomResourceDefinition> {
    for crd in crds.iter_mut().filter(|c| c.spec.versions.len() > 1) {
        crd.spec.conversion = Some(CustomResourceConversion {
            strategy: "Webhook".into(),
            webhook: Some(WebhookConversion {
                client_config: Some(client.clone()),
                conversion_review_versions: vec!["v1".into()],
            }),
        });
    }
    crds
}

/// CRDs as one multi-document YAML stream.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> String {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        // CRDs are plain data, so rendering cannot fail; the comment only guards against a serde_yaml surprise and
        // makes it visible (the YAML round-trip test would catch it).
        match serde_yaml::to_string(crd) {
            Ok(y) => out.push_str(&y),
            Err(e) => out.push_str(&format!("# cannot render {:?}: {e}\n", crd.metadata.name)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Expect {
        name: &'static str,
        kind: &'static str,
        scope: &'static str,
        short: &'static [&'static str],
        columns: &'static [&'static str],
        status: bool,
    }

    const EXPECTED: [Expect; 8] = [
        Expect {
            name: "admissionchecks.kueue.x-k8s.io",
            kind: "AdmissionCheck",
            scope: "Cluster",
            short: &["ac"],
            columns: &[],
            status: true,
        },
        Expect {
            name: "clusterqueues.kueue.x-k8s.io",
            kind: "ClusterQueue",
            scope: "Cluster",
            short: &["cq"],
            columns: &[
                "Cohort",
                "Strategy",
                "Pending Workloads",
                "Admitted Workloads",
            ],
            status: true,
        },
        Expect {
            name: "cohorts.kueue.x-k8s.io",
            kind: "Cohort",
            scope: "Cluster",
            short: &["co"],
            columns: &[],
            status: true,
        },
        Expect {
            name: "localqueues.kueue.x-k8s.io",
            kind: "LocalQueue",
            scope: "Namespaced",
            short: &["queue", "queues", "lq"],
            columns: &["ClusterQueue", "Pending Workloads", "Admitted Workloads"],
            status: true,
        },
        Expect {
            name: "resourceflavors.kueue.x-k8s.io",
            kind: "ResourceFlavor",
            scope: "Cluster",
            short: &["flavor", "flavors", "rf"],
            columns: &[],
            status: false,
        },
        Expect {
            name: "topologies.kueue.x-k8s.io",
            kind: "Topology",
            scope: "Cluster",
            short: &["topo"],
            columns: &[],
            status: false,
        },
        Expect {
            name: "workloadpriorityclasses.kueue.x-k8s.io",
            kind: "WorkloadPriorityClass",
            scope: "Cluster",
            short: &["wpc"],
            columns: &["Value"],
            status: false,
        },
        Expect {
            name: "workloads.kueue.x-k8s.io",
            kind: "Workload",
            scope: "Namespaced",
            short: &["kwl", "kueueworkload", "kueueworkloads"],
            columns: &["Queue", "Reserved in", "Admitted", "Finished", "Age"],
            status: true,
        },
    ];

    #[test]
    fn names_scopes_columns_versions() {
        let crds = crds();
        assert_eq!(crds.len(), EXPECTED.len());
        for (crd, want) in crds.iter().zip(EXPECTED.iter()) {
            assert_eq!(crd.metadata.name.as_deref(), Some(want.name));
            assert_eq!(crd.spec.group, "kueue.x-k8s.io");
            assert_eq!(crd.spec.names.kind, want.kind);
            assert_eq!(crd.spec.scope, want.scope, "{}", want.name);
            let short: Vec<&str> = crd
                .spec
                .names
                .short_names
                .iter()
                .flatten()
                .map(String::as_str)
                .collect();
            assert_eq!(short, want.short, "{}", want.name);
            let versions: Vec<(&str, bool, bool, Option<bool>)> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
                .collect();
            assert_eq!(
                versions,
                vec![
                    ("v1beta1", true, false, Some(true)),
                    ("v1beta2", true, true, None)
                ],
                "{}",
                want.name
            );
            for v in &crd.spec.versions {
                let cols: Vec<&str> = v
                    .additional_printer_columns
                    .iter()
                    .flatten()
                    .map(|c| c.name.as_str())
                    .collect();
                assert_eq!(cols, want.columns, "{} {}", want.name, v.name);
                let has_status = v
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some();
                assert_eq!(has_status, want.status, "{} {}", want.name, v.name);
                assert!(v.schema.is_some());
            }
            assert_eq!(
                crd.spec.versions[0].deprecation_warning.as_deref(),
                Some("This version is deprecated. Use v1beta2 instead.")
            );
        }
    }

    #[test]
    fn spec_is_optional_as_in_kueue() {
        let flavors = crds()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some("resourceflavors.kueue.x-k8s.io"))
            .expect("ResourceFlavor CRD");
        let root = flavors.spec.versions[1]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref());
        let spec = &root
            .and_then(|r| r.properties.as_ref())
            .expect("properties")["spec"];
        assert_eq!(spec.default, Some(JSON(serde_json::json!({}))));
        for crd in crds() {
            for v in &crd.spec.versions {
                let root = v
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref());
                let required = root.and_then(|r| r.required.clone()).unwrap_or_default();
                assert!(
                    !required.contains(&"spec".to_string()),
                    "{:?}",
                    crd.metadata.name
                );
                // WorkloadPriorityClass has no spec.
                let Some(spec) = root
                    .and_then(|r| r.properties.as_ref())
                    .and_then(|p| p.get("spec"))
                else {
                    continue;
                };
                if spec.required.as_ref().is_none_or(|r| r.is_empty()) {
                    assert_eq!(spec.default, Some(JSON(serde_json::json!({}))));
                }
            }
        }
    }

    #[test]
    fn schemas_carry_kueue_defaults() {
        let crds = crds();
        let json = serde_json::to_value(&crds).unwrap_or_default();
        let cq = &json[1]["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"];
        assert_eq!(cq["queueingStrategy"]["default"], "BestEffortFIFO");
        assert_eq!(cq["stopPolicy"]["default"], "None");
        assert_eq!(
            cq["preemption"]["properties"]["withinClusterQueue"]["default"],
            "Never"
        );
        assert_eq!(
            cq["flavorFungibility"]["properties"]["whenCanPreempt"]["default"],
            "TryNextFlavor"
        );
        assert_eq!(cq["cohortName"]["type"], "string");
        let wpc = &json[6]["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(wpc["value"]["type"], "integer");
        assert!(wpc.get("spec").is_none());
        let wl = &json[7]["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"];
        assert_eq!(wl["active"]["default"], true);
        assert_eq!(
            wl["podSets"]["items"]["properties"]["name"]["default"],
            "main"
        );
        assert_eq!(wl["podSets"]["items"]["properties"]["count"]["default"], 1);
    }

    /// Kueue v0.19 is built against Kubernetes 1.36: a Workload's pod templates carry 1.36's PodSpec, whose
    /// `schedulingGroup` (new in 1.36) the API server would otherwise prune from users' objects.
    #[test]
    fn workload_pod_templates_are_kubernetes_1_36() {
        let json = serde_json::to_value(crds()).unwrap_or_default();
        for version in [0, 1] {
            let wl = &json[7]["spec"]["versions"][version]["schema"]["openAPIV3Schema"]["properties"]
                ["spec"]["properties"];
            let pod_spec = &wl["podSets"]["items"]["properties"]["template"]["properties"]["spec"]
                ["properties"];
            assert!(
                pod_spec.get("schedulingGroup").is_some(),
                "version {version}: podSets[].template.spec has no schedulingGroup"
            );
        }
    }

    #[test]
    fn yaml_parses_back() {
        let yaml = crds_yaml();
        assert!(!yaml.contains("# cannot render"));
        let parsed: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&yaml)
            .map(|doc| serde::Deserialize::deserialize(doc).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        assert_eq!(parsed, crds());
        assert_eq!(crds_yaml(), yaml, "stable output");
    }

    fn collect_defaults(schema: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        if path.ends_with(".template") {
            return;
        }
        if let Some(d) = schema.get("default") {
            out.push(format!("{path}={d}"));
        }
        if let Some(props) = schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
        {
            for (k, v) in props {
                collect_defaults(v, &format!("{path}.{k}"), out);
            }
        }
        if let Some(items) = schema.get("items") {
            collect_defaults(items, &format!("{path}[]"), out);
        }
    }

    /// Every `default:` of Kueue v0.19.2's CRDs outside the embedded pod template, per kind and version.
    #[test]
    fn defaults_match_kueue() {
        let mut got = Vec::new();
        for crd in crds() {
            for v in &crd.spec.versions {
                let schema = serde_json::to_value(
                    v.schema
                        .as_ref()
                        .and_then(|s| s.open_api_v3_schema.as_ref()),
                )
                .unwrap_or_default();
                collect_defaults(
                    &schema,
                    &format!("{}/{}", crd.spec.names.kind, v.name),
                    &mut got,
                );
            }
        }
        got.sort();
        let mut want = vec![r#"AdmissionCheck/v1beta1.spec.retryDelayMinutes=15"#.to_owned()];
        for v in ["v1beta1", "v1beta2"] {
            for d in [
                r#"ClusterQueue/V.spec.fairSharing.weight=1"#,
                r#"ClusterQueue/V.spec.flavorFungibility={}"#,
                r#"ClusterQueue/V.spec.flavorFungibility.whenCanBorrow="MayStopSearch""#,
                r#"ClusterQueue/V.spec.flavorFungibility.whenCanPreempt="TryNextFlavor""#,
                r#"ClusterQueue/V.spec.preemption={}"#,
                r#"ClusterQueue/V.spec.preemption.borrowWithinCohort={}"#,
                r#"ClusterQueue/V.spec.preemption.borrowWithinCohort.policy="Never""#,
                r#"ClusterQueue/V.spec.preemption.reclaimWithinCohort="Never""#,
                r#"ClusterQueue/V.spec.preemption.withinClusterQueue="Never""#,
                r#"ClusterQueue/V.spec.queueingStrategy="BestEffortFIFO""#,
                r#"ClusterQueue/V.spec.stopPolicy="None""#,
                r#"Cohort/V.spec.fairSharing.weight=1"#,
                r#"LocalQueue/V.spec.fairSharing.weight=1"#,
                r#"LocalQueue/V.spec.stopPolicy="None""#,
                r#"Workload/V.spec.active=true"#,
                r#"Workload/V.spec.podSets[].count=1"#,
                r#"Workload/V.spec.podSets[].name="main""#,
                r#"Workload/V.status.admission.podSetAssignments[].name="main""#,
            ] {
                want.push(d.replace("/V.", &format!("/{v}.")));
            }
        }
        want.push(r#"Workload/v1beta1.spec.priorityClassSource="""#.to_owned());
        // Sluice's one addition: a missing spec reads back as `{}` where `{}` is a valid spec
        // (docs/compatibility.md).
        for kind in [
            "ClusterQueue",
            "Cohort",
            "LocalQueue",
            "ResourceFlavor",
            "Topology",
            "Workload",
        ] {
            for v in ["v1beta1", "v1beta2"] {
                want.push(format!("{kind}/{v}.spec={{}}"));
            }
        }
        want.sort();
        assert_eq!(got, want);
    }
}
