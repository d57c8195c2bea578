//! Every object the chart renders is the Kubernetes object it claims to be: it deserialises into its
//! k8s-openapi type (or, for cert-manager and Prometheus Operator kinds, a strict model of the fields the chart
//! uses), and no field is lost on the way (an unknown or misspelt field is an error). Then the rendered
//! default release is checked for what the chart promises: pod security, webhook rules, leader election, CRDs
//! equal to `sluice crds`.
//!
//! The rendered manifests come from `.ci/chart-check`, which renders the chart with Helm's engine and runs
//! this test with SLUICE_CHART_RENDER_DIR set; without it the rendered-chart test says it is skipped.

use std::collections::BTreeSet;
use std::path::PathBuf;

use k8s_openapi::Resource;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_webhook::registration::REGISTRATIONS;

/// cert-manager.io/v1 and monitoring.coreos.com/v1 kinds, limited to the fields the chart writes; unknown
/// fields are rejected.
mod crd_kinds {
    use super::*;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Object<S> {
        pub api_version: String,
        pub kind: String,
        pub metadata: ObjectMeta,
        pub spec: S,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct CertificateSpec {
        pub secret_name: String,
        pub issuer_ref: IssuerRef,
        #[serde(rename = "isCA")]
        pub is_ca: Option<bool>,
        pub common_name: Option<String>,
        pub dns_names: Option<Vec<String>>,
        pub duration: Option<String>,
        pub renew_before: Option<String>,
        pub private_key: Option<PrivateKey>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct IssuerRef {
        pub name: String,
        pub kind: Option<String>,
        pub group: Option<String>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PrivateKey {
        pub algorithm: Option<String>,
        pub size: Option<u32>,
        pub rotation_policy: Option<String>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct IssuerSpec {
        pub self_signed: Option<SelfSigned>,
        pub ca: Option<CaIssuer>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct SelfSigned {}

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct CaIssuer {
        pub secret_name: String,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ServiceMonitorSpec {
        pub selector: LabelSelector,
        pub namespace_selector: Option<NamespaceSelector>,
        pub endpoints: Vec<Endpoint>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct NamespaceSelector {
        pub match_names: Option<Vec<String>>,
        pub any: Option<bool>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Endpoint {
        pub port: Option<String>,
        pub path: Option<String>,
        pub interval: Option<String>,
        pub honor_labels: Option<bool>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct PrometheusRuleSpec {
        pub groups: Vec<RuleGroup>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct RuleGroup {
        pub name: String,
        pub rules: Vec<Rule>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Rule {
        pub alert: String,
        pub expr: String,
        #[serde(rename = "for")]
        pub for_: Option<String>,
        pub labels: Option<std::collections::BTreeMap<String, String>>,
        pub annotations: Option<std::collections::BTreeMap<String, String>>,
    }
}

/// Fields of `original` (paths) that `back` does not have: what deserialising dropped.
fn dropped(original: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(o), Value::Object(b)) => {
            for (k, v) in o {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(bv) => dropped(v, bv, &p, out),
                    None if !v.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(o), Value::Array(b)) => {
            for (i, (v, bv)) in o.iter().zip(b).enumerate() {
                dropped(v, bv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Deserialises `value` as `T`, then checks nothing was dropped.
fn strictly<T: DeserializeOwned + Serialize>(value: &Value, what: &str) -> Result<T, String> {
    let typed: T = serde_path_to_error::deserialize(value)
        .map_err(|e| format!("{what}: field `{}`: {}", e.path(), e.inner()))?;
    let back = serde_json::to_value(&typed).map_err(|e| format!("{what}: {e}"))?;
    let mut lost = Vec::new();
    dropped(value, &back, "", &mut lost);
    if lost.is_empty() {
        Ok(typed)
    } else {
        Err(format!("{what}: unknown fields {lost:?}"))
    }
}

fn typed<T: Resource + DeserializeOwned + Serialize>(
    value: &Value,
    what: &str,
) -> Result<(), String> {
    strictly::<T>(value, what).map(|_| ())
}

/// Checks one rendered object against the type its apiVersion and kind name.
fn check_object(value: &Value) -> Result<(), String> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    let name = value["metadata"]["name"].as_str().unwrap_or("<no name>");
    let what = format!("{api_version} {kind} {name}");
    macro_rules! one_of {
        ($($t:ty),*) => {
            $(if api_version == <$t>::API_VERSION && kind == <$t>::KIND {
                return typed::<$t>(value, &what);
            })*
        };
    }
    one_of!(
        ConfigMap,
        Secret,
        Service,
        ServiceAccount,
        Deployment,
        DaemonSet,
        ClusterRole,
        ClusterRoleBinding,
        Role,
        RoleBinding,
        MutatingWebhookConfiguration,
        ValidatingWebhookConfiguration,
        PodDisruptionBudget,
        CustomResourceDefinition,
        APIService
    );
    use crd_kinds::*;
    match (api_version, kind) {
        ("cert-manager.io/v1", "Certificate") => {
            strictly::<Object<CertificateSpec>>(value, &what).map(|_| ())
        }
        ("cert-manager.io/v1", "Issuer") => {
            let issuer = strictly::<Object<IssuerSpec>>(value, &what)?;
            match (issuer.spec.self_signed.is_some(), issuer.spec.ca.is_some()) {
                (true, false) | (false, true) => Ok(()),
                _ => Err(format!("{what}: exactly one of selfSigned and ca")),
            }
        }
        ("monitoring.coreos.com/v1", "ServiceMonitor") => {
            strictly::<Object<ServiceMonitorSpec>>(value, &what).map(|_| ())
        }
        ("monitoring.coreos.com/v1", "PrometheusRule") => {
            strictly::<Object<PrometheusRuleSpec>>(value, &what).map(|_| ())
        }
        _ => Err(format!(
            "{what}: not a kind the chart is expected to render"
        )),
    }
}

fn render_dir() -> Option<PathBuf> {
    std::env::var_os("SLUICE_CHART_RENDER_DIR").map(PathBuf::from)
}

fn load(dir: &std::path::Path, variant: &str) -> Vec<Value> {
    let path = dir.join(format!("{variant}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn of_kind<T: Resource + DeserializeOwned>(objects: &[Value]) -> Vec<T> {
    objects
        .iter()
        .filter(|o| o["kind"] == T::KIND && o["apiVersion"] == T::API_VERSION)
        .map(|o| serde_json::from_value(o.clone()).unwrap_or_else(|e| panic!("{}: {e}", T::KIND)))
        .collect()
}

fn assert_restricted(spec: &PodSpec, what: &str) {
    let pod = spec.security_context.as_ref();
    assert_eq!(
        pod.and_then(|s| s.run_as_non_root),
        Some(true),
        "{what}: runAsNonRoot"
    );
    for c in &spec.containers {
        let sc = c
            .security_context
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no securityContext"));
        assert_eq!(sc.run_as_non_root, Some(true), "{what}/{}", c.name);
        assert_eq!(
            sc.read_only_root_filesystem,
            Some(true),
            "{what}/{}",
            c.name
        );
        assert_eq!(
            sc.allow_privilege_escalation,
            Some(false),
            "{what}/{}",
            c.name
        );
        assert_ne!(sc.privileged, Some(true), "{what}/{}", c.name);
        let drop = sc
            .capabilities
            .as_ref()
            .and_then(|c| c.drop.clone())
            .unwrap_or_default();
        assert_eq!(drop, vec!["ALL".to_string()], "{what}/{}", c.name);
        let res = c
            .resources
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no resources"));
        for (part, q) in [("requests", &res.requests), ("limits", &res.limits)] {
            let q = q.clone().unwrap_or_default();
            assert!(
                q.contains_key("cpu") && q.contains_key("memory"),
                "{what}/{}: {part}",
                c.name
            );
        }
    }
}

/// A registered hook as (name, path, groups, versions, resources, operations), for comparing the chart with
/// `sluice_webhook::registration::REGISTRATIONS`.
type HookKey = (
    String,
    String,
    Vec<String>,
    Vec<String>,
    Vec<String>,
    Vec<String>,
);

fn hook_key(
    name: &str,
    client: &WebhookClientConfig,
    rules: &Option<Vec<RuleWithOperations>>,
) -> HookKey {
    let path = client
        .service
        .as_ref()
        .and_then(|s| s.path.clone())
        .unwrap_or_default();
    let rule = rules
        .as_ref()
        .and_then(|r| r.first())
        .cloned()
        .unwrap_or_default();
    (
        name.to_string(),
        path,
        rule.api_groups.unwrap_or_default(),
        rule.api_versions.unwrap_or_default(),
        rule.resources.unwrap_or_default(),
        rule.operations.unwrap_or_default(),
    )
}

#[test]
fn rendered_chart_objects_are_what_they_claim() {
    let Some(dir) = render_dir() else {
        println!(
            "SKIPPED: SLUICE_CHART_RENDER_DIR is not set (.ci/chart-check renders the chart and sets it)"
        );
        return;
    };
    for variant in ["default", "cert-manager", "cert-manager-issuer"] {
        let objects = load(&dir, variant);
        assert!(!objects.is_empty(), "{variant}: nothing rendered");
        let errors: Vec<String> = objects
            .iter()
            .filter_map(|o| check_object(o).err())
            .collect();
        assert!(errors.is_empty(), "{variant}:\n{}", errors.join("\n"));
    }
}

/// The operator's config file each variant renders is a Configuration the operator takes, with what the values
/// asked for.
#[test]
fn rendered_operator_configuration_is_read_by_the_operator() {
    let Some(dir) = render_dir() else {
        println!(
            "SKIPPED: SLUICE_CHART_RENDER_DIR is not set (.ci/chart-check renders the chart and sets it)"
        );
        return;
    };
    for variant in ["default", "cert-manager", "cert-manager-issuer"] {
        let objects = load(&dir, variant);
        let cms: Vec<ConfigMap> = of_kind(&objects);
        let text = cms
            .iter()
            .find_map(|c| c.data.as_ref()?.get("config.yaml"))
            .unwrap_or_else(|| panic!("{variant}: no operator config"));
        let cfg = sluice_operator::controller::config::OperatorConfig::from_yaml(variant, text)
            .unwrap_or_else(|e| panic!("{variant}: {e}\n{text}"));
        // The operator and the webhook read the same file, so they agree on the integrations.
        let name = cms
            .iter()
            .find(|c| {
                c.data
                    .as_ref()
                    .is_some_and(|d| d.contains_key("config.yaml"))
            })
            .and_then(|c| c.metadata.name.clone())
            .expect("the config's ConfigMap has a name");
        let deployments: Vec<Deployment> = of_kind(&objects);
        for component in ["operator", "webhook"] {
            let d = deployments
                .iter()
                .find(|d| {
                    d.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.ends_with(&format!("-{component}")))
                })
                .unwrap_or_else(|| panic!("{variant}: no {component} Deployment"));
            let pod = d
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .expect("pod spec");
            assert_eq!(
                config_map_behind_config_flag(pod).as_deref(),
                Some(name.as_str()),
                "{variant}: the {component}'s --config is not the operator's config.yaml"
            );
        }
        let afs = cfg.engine.admission_fair_sharing;
        if variant == "cert-manager" {
            let afs = afs.expect("admission fair sharing on");
            assert_eq!(afs.usage_half_life, 168 * 3_600_000);
            assert_eq!(afs.resource_weights.get("cpu"), Some(&0.0));
        } else {
            assert!(afs.is_none(), "{variant}: off by default");
        }
    }
}

/// The ConfigMap whose `config.yaml` the first container's `--config=PATH` reads (through a volume mount).
fn config_map_behind_config_flag(pod: &PodSpec) -> Option<String> {
    let c = pod.containers.first()?;
    let path = c
        .args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix("--config="))?;
    let (dir, file) = path.rsplit_once('/')?;
    if file != "config.yaml" {
        return None;
    }
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == dir)?;
    pod.volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)?
        .config_map
        .as_ref()
        .map(|cm| cm.name.clone())
}

/// The node agent as each variant renders it: its metrics port, its pod-resources mount (read-only, only when
/// asked for) and health rules the agent reads; the GPU alerts and the agents' ServiceMonitor when asked for.
#[test]
fn rendered_node_agent_serves_metrics_and_reads_its_rules() {
    let Some(dir) = render_dir() else {
        println!(
            "SKIPPED: SLUICE_CHART_RENDER_DIR is not set (.ci/chart-check renders the chart and sets it)"
        );
        return;
    };
    for variant in ["default", "cert-manager"] {
        let objects = load(&dir, variant);
        let agents: Vec<DaemonSet> = of_kind(&objects);
        let pod = agents[0]
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod spec");
        let c = &pod.containers[0];
        let args = c.args.clone().unwrap_or_default();
        assert!(
            args.contains(&"--metrics-listen=:9400".to_string()),
            "{args:?}"
        );
        let port = c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some("metrics"));
        assert_eq!(port.map(|p| p.container_port), Some(9400));
        let mounts = c.volume_mounts.clone().unwrap_or_default();
        let podres = mounts.iter().find(|m| m.name == "pod-resources");
        let services: Vec<Service> = of_kind(&objects);
        assert!(
            services.iter().any(|s| s.spec.as_ref().is_some_and(|sp| {
                sp.cluster_ip.as_deref() == Some("None")
                    && sp.ports.iter().flatten().any(|p| p.port == 9400)
            })),
            "{variant}: a headless Service for the agents"
        );
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        if variant == "default" {
            // Off by default: restricted, no hostPath, no rules file, no alerts.
            assert!(podres.is_none());
            assert!(!args.iter().any(|a| a.starts_with("--health-rules")));
            assert_restricted(pod, "node-agent");
            assert!(!kinds.contains(&"PrometheusRule"));
            continue;
        }
        let podres = podres.expect("pod-resources mounted");
        assert_eq!(podres.read_only, Some(true));
        assert!(args.contains(
            &"--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock".to_string()
        ));
        assert!(args.contains(&"--health-rules=/etc/sluice/health-rules.yaml".to_string()));
        let cms: Vec<ConfigMap> = of_kind(&objects);
        let text = cms
            .iter()
            .find_map(|c| c.data.as_ref()?.get("health-rules.yaml"))
            .expect("health rules ConfigMap");
        let rules: sluice_operator::agent::health::HealthRules =
            serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(rules.thermal_reads, 3);
        assert_eq!(kinds.iter().filter(|k| **k == "PrometheusRule").count(), 1);
        assert_eq!(kinds.iter().filter(|k| **k == "ServiceMonitor").count(), 2);
    }
}

#[test]
fn rendered_default_release_keeps_the_charts_promises() {
    let Some(dir) = render_dir() else {
        println!(
            "SKIPPED: SLUICE_CHART_RENDER_DIR is not set (.ci/chart-check renders the chart and sets it)"
        );
        return;
    };
    let objects = load(&dir, "default");
    let release_ns = "sluice-system";

    // Pod security on the operator and webhook, and the operator's leader election.
    let deployments: Vec<Deployment> = of_kind(&objects);
    assert_eq!(deployments.len(), 2);
    for d in &deployments {
        let name = d.metadata.name.clone().unwrap_or_default();
        let spec = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod spec");
        assert_restricted(spec, &name);
        let args = spec.containers[0].args.clone().unwrap_or_default();
        if args.first().map(String::as_str) == Some("operator") {
            assert_eq!(d.spec.as_ref().and_then(|s| s.replicas), Some(2));
            assert!(
                args.contains(&"--leader-elect=true".to_string()),
                "{args:?}"
            );
        }
    }
    // The node agent in its default (runtime) mode is restricted as well.
    let agents: Vec<DaemonSet> = of_kind(&objects);
    assert_eq!(agents.len(), 1);
    let agent = agents[0]
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec");
    assert_restricted(agent, "node-agent");
    assert!(agent.tolerations.as_ref().is_some_and(|t| !t.is_empty()));
    assert!(agent.node_selector.as_ref().is_some_and(|n| !n.is_empty()));

    // Webhooks: Fail, a timeout, kube-system and the release namespace excluded, only served paths.
    let mutating: Vec<MutatingWebhookConfiguration> = of_kind(&objects);
    let validating: Vec<ValidatingWebhookConfiguration> = of_kind(&objects);
    assert_eq!((mutating.len(), validating.len()), (1, 1));
    let mut hooks = Vec::new();
    let mut registered = BTreeSet::new();
    for w in mutating[0].webhooks.iter().flatten() {
        registered.insert(hook_key(&w.name, &w.client_config, &w.rules));
        hooks.push((
            w.name.clone(),
            w.failure_policy.clone(),
            w.timeout_seconds,
            w.namespace_selector.clone(),
            w.client_config.clone(),
        ));
    }
    for w in validating[0].webhooks.iter().flatten() {
        registered.insert(hook_key(&w.name, &w.client_config, &w.rules));
        hooks.push((
            w.name.clone(),
            w.failure_policy.clone(),
            w.timeout_seconds,
            w.namespace_selector.clone(),
            w.client_config.clone(),
        ));
    }
    assert_eq!(hooks.len(), REGISTRATIONS.len());
    // The chart registers exactly what `sluice webhook configurations` registers: same names, paths and rules.
    let expected: BTreeSet<HookKey> = REGISTRATIONS
        .iter()
        .map(|r| {
            let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            (
                r.name.to_string(),
                r.path.to_string(),
                vec![r.group.to_string()],
                vec![r.version.to_string()],
                strings(r.resources),
                strings(r.operations),
            )
        })
        .collect();
    assert_eq!(registered, expected);
    for (name, failure, timeout, selector, client) in hooks {
        assert_eq!(failure.as_deref(), Some("Fail"), "{name}");
        assert!(timeout.is_some_and(|t| (1..=30).contains(&t)), "{name}");
        let excluded: Vec<String> = selector
            .and_then(|s| s.match_expressions)
            .into_iter()
            .flatten()
            .filter(|e| e.key == "kubernetes.io/metadata.name" && e.operator == "NotIn")
            .flat_map(|e| e.values.unwrap_or_default())
            .collect();
        assert!(
            excluded.iter().any(|n| n == "kube-system"),
            "{name}: {excluded:?}"
        );
        assert!(
            excluded.iter().any(|n| n == release_ns),
            "{name}: {excluded:?}"
        );
        assert!(client.ca_bundle.is_some(), "{name}: no caBundle");
    }

    // PodDisruptionBudgets for both Deployments.
    assert_eq!(of_kind::<PodDisruptionBudget>(&objects).len(), 2);

    // The CRDs are `sluice crds`' own (Kueue's, with the conversion webhook set, and Sluice's two sluice.dev kinds).
    let rendered: Vec<CustomResourceDefinition> = of_kind(&objects);
    let generated = sluice_sdk::kueue::crds::crds();
    assert_eq!(rendered.len(), generated.len() + 2);
    for name in ["policymodules.sluice.dev", "nodegputopologies.sluice.dev"] {
        assert!(
            rendered
                .iter()
                .any(|r| r.metadata.name.as_deref() == Some(name)),
            "{name} not rendered"
        );
    }
    for g in generated {
        let name = g.metadata.name.clone().unwrap_or_default();
        let r = rendered
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} not rendered"));
        let mut spec = r.spec.clone();
        if g.spec.versions.len() > 1 {
            let conv = spec
                .conversion
                .take()
                .unwrap_or_else(|| panic!("{name}: no conversion"));
            assert_eq!(conv.strategy, "Webhook");
            let path = conv
                .webhook
                .and_then(|w| w.client_config)
                .and_then(|c| c.service)
                .and_then(|s| s.path);
            assert_eq!(path.as_deref(), Some("/convert"));
        }
        // Compared as JSON: the template reads and rewrites the YAML, so only meaning must survive.
        assert_eq!(
            serde_json::to_value(&spec).ok(),
            serde_json::to_value(&g.spec).ok(),
            "{name}: the rendered CRD differs from `sluice crds`"
        );
    }
}

#[test]
fn a_misspelt_field_is_rejected() {
    let mut d = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "readinessProbe": {"httpGet": {"port": 1}}}]}}}
    });
    assert_eq!(check_object(&d), Ok(()));
    d["spec"]["template"]["spec"]["containers"][0]["imagePulPolicy"] = "Always".into();
    let err = check_object(&d).expect_err("a misspelt field");
    assert!(
        err.contains(".spec.template.spec.containers[0].imagePulPolicy"),
        "{err}"
    );
}

#[test]
fn a_wrong_type_or_kind_is_rejected() {
    let wrong_type = serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": "https"}]}
    });
    assert!(check_object(&wrong_type).is_err());
    let unknown = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    assert!(check_object(&unknown).unwrap_err().contains("not a kind"));
    let issuer_both = serde_json::json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "i"},
        "spec": {"selfSigned": {}, "ca": {"secretName": "x"}}
    });
    assert!(check_object(&issuer_both).is_err());
    let monitor_typo = serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m"},
        "spec": {"selector": {}, "endpoints": [{"port": "metrics", "intervall": "30s"}]}
    });
    assert!(check_object(&monitor_typo).is_err());
}
