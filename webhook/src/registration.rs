//! How the API server is told to call the webhook: every registered hook with its rules (the chart registers the
//! same set, which a chart test checks), and the webhook configurations for a webhook served at a URL, as for a
//! webhook run outside the cluster (`sluice webhook configurations`).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

/// One hook as the API server registers it: Kueue's webhook name, path and rule where Kueue has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The webhook's name in its configuration (Kueue's `*.kb.io`, Sluice's own `*.sluice.dev`).
    pub name: &'static str,
    /// The path served (one of [`crate::ROUTES`]).
    pub path: &'static str,
    /// API group of the objects.
    pub group: &'static str,
    /// API version of the objects.
    pub version: &'static str,
    /// Resources (and subresources) the rule matches.
    pub resources: &'static [&'static str],
    /// Operations the rule matches.
    pub operations: &'static [&'static str],
}

impl Registration {
    /// Whether this hook mutates (its path starts with `/mutate-`).
    pub fn mutating(&self) -> bool {
        self.path.starts_with("/mutate-")
    }
}

const CREATE: &[&str] = &["CREATE"];
const CREATE_UPDATE: &[&str] = &["CREATE", "UPDATE"];

const fn kueue(
    name: &'static str,
    path: &'static str,
    resources: &'static [&'static str],
    operations: &'static [&'static str],
) -> Registration {
    Registration {
        name,
        path,
        group: "kueue.x-k8s.io",
        version: "v1beta2",
        resources,
        operations,
    }
}

/// Every hook registered with the API server: Kueue v0.19's mutating and validating webhooks, then Sluice's
/// validations of the Kueue kinds Kueue checks only with CEL rules, and of PolicyModules.
pub const REGISTRATIONS: &[Registration] = &[
    Registration {
        name: "mjob.kb.io",
        path: "/mutate-batch-v1-job",
        group: "batch",
        version: "v1",
        resources: &["jobs"],
        operations: CREATE,
    },
    Registration {
        name: "mjobset.kb.io",
        path: "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        group: "jobset.x-k8s.io",
        version: "v1alpha2",
        resources: &["jobsets"],
        operations: CREATE,
    },
    Registration {
        name: "mpytorchjob.kb.io",
        path: "/mutate-kubeflow-org-v1-pytorchjob",
        group: "kubeflow.org",
        version: "v1",
        resources: &["pytorchjobs"],
        operations: CREATE,
    },
    Registration {
        name: "mrayjob.kb.io",
        path: "/mutate-ray-io-v1-rayjob",
        group: "ray.io",
        version: "v1",
        resources: &["rayjobs"],
        operations: CREATE,
    },
    Registration {
        name: "mraycluster.kb.io",
        path: "/mutate-ray-io-v1-raycluster",
        group: "ray.io",
        version: "v1",
        resources: &["rayclusters"],
        operations: CREATE,
    },
    Registration {
        name: "mrayservice.kb.io",
        path: "/mutate-ray-io-v1-rayservice",
        group: "ray.io",
        version: "v1",
        resources: &["rayservices"],
        operations: CREATE,
    },
    Registration {
        name: "mleaderworkerset.kb.io",
        path: "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        group: "leaderworkerset.x-k8s.io",
        version: "v1",
        resources: &["leaderworkersets"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "mtrainjob.kb.io",
        path: "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        group: "trainer.kubeflow.org",
        version: "v1alpha1",
        resources: &["trainjobs"],
        operations: CREATE,
    },
    Registration {
        name: "mpod.kb.io",
        path: "/mutate--v1-pod",
        group: "",
        version: "v1",
        resources: &["pods"],
        operations: CREATE,
    },
    kueue(
        "mclusterqueue.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &["clusterqueues"],
        CREATE,
    ),
    kueue(
        "mresourceflavor.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        &["resourceflavors"],
        CREATE,
    ),
    kueue(
        "mworkload.kb.io",
        "/mutate-kueue-x-k8s-io-v1beta2-workload",
        &["workloads"],
        CREATE,
    ),
    Registration {
        name: "vjob.kb.io",
        path: "/validate-batch-v1-job",
        group: "batch",
        version: "v1",
        resources: &["jobs"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vjobset.kb.io",
        path: "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        group: "jobset.x-k8s.io",
        version: "v1alpha2",
        resources: &["jobsets"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vpytorchjob.kb.io",
        path: "/validate-kubeflow-org-v1-pytorchjob",
        group: "kubeflow.org",
        version: "v1",
        resources: &["pytorchjobs"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vrayjob.kb.io",
        path: "/validate-ray-io-v1-rayjob",
        group: "ray.io",
        version: "v1",
        resources: &["rayjobs"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vraycluster.kb.io",
        path: "/validate-ray-io-v1-raycluster",
        group: "ray.io",
        version: "v1",
        resources: &["rayclusters"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vrayservice.kb.io",
        path: "/validate-ray-io-v1-rayservice",
        group: "ray.io",
        version: "v1",
        resources: &["rayservices"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vleaderworkerset.kb.io",
        path: "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        group: "leaderworkerset.x-k8s.io",
        version: "v1",
        resources: &["leaderworkersets"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vtrainjob.kb.io",
        path: "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        group: "trainer.kubeflow.org",
        version: "v1alpha1",
        resources: &["trainjobs"],
        operations: CREATE_UPDATE,
    },
    Registration {
        name: "vpod.kb.io",
        path: "/validate--v1-pod",
        group: "",
        version: "v1",
        resources: &["pods"],
        operations: CREATE_UPDATE,
    },
    kueue(
        "vclusterqueue.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        &["clusterqueues"],
        CREATE_UPDATE,
    ),
    kueue(
        "vcohort.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-cohort",
        &["cohorts"],
        CREATE_UPDATE,
    ),
    kueue(
        "vresourceflavor.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        &["resourceflavors"],
        CREATE_UPDATE,
    ),
    kueue(
        "vworkload.kb.io",
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        &["workloads", "workloads/status"],
        CREATE_UPDATE,
    ),
    kueue(
        "vlocalqueue.sluice.dev",
        "/validate-kueue-x-k8s-io-v1beta2-localqueue",
        &["localqueues"],
        CREATE_UPDATE,
    ),
    kueue(
        "vtopology.sluice.dev",
        "/validate-kueue-x-k8s-io-v1beta2-topology",
        &["topologies"],
        CREATE_UPDATE,
    ),
    kueue(
        "vworkloadpriorityclass.sluice.dev",
        "/validate-kueue-x-k8s-io-v1beta2-workloadpriorityclass",
        &["workloadpriorityclasses"],
        CREATE_UPDATE,
    ),
    Registration {
        name: "vpolicymodule.sluice.dev",
        path: "/validate-sluice-dev-v1alpha1-policymodule",
        group: "sluice.dev",
        version: "v1alpha1",
        resources: &["policymodules"],
        operations: CREATE_UPDATE,
    },
];

/// Where the API server reaches the webhook: a base URL (`https://127.0.0.1:9443`) and the PEM of the CA that
/// signed its serving certificate.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `https://host:port`, without a path.
    pub url: String,
    /// PEM bytes of the CA bundle.
    pub ca_bundle: Vec<u8>,
}

impl Endpoint {
    /// The client configuration for one path under this endpoint.
    pub fn client_config(&self, path: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            url: Some(format!("{}{path}", self.url.trim_end_matches('/'))),
            ca_bundle: Some(ByteString(self.ca_bundle.clone())),
            service: None,
        }
    }
}

/// The namespaces whose objects never reach the webhook (the chart excludes kube-system and its own namespace).
fn namespace_selector(excluded: &[String]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "NotIn".into(),
            values: Some(excluded.to_vec()),
        }]),
        match_labels: None,
    }
}

fn rule(r: &Registration) -> RuleWithOperations {
    RuleWithOperations {
        api_groups: Some(vec![r.group.into()]),
        api_versions: Some(vec![r.version.into()]),
        operations: Some(r.operations.iter().map(|s| (*s).into()).collect()),
        resources: Some(r.resources.iter().map(|s| (*s).into()).collect()),
        scope: None,
    }
}

/// The mutating and validating webhook configurations named `{prefix}-mutating` and `{prefix}-validating` for
/// every hook in [`REGISTRATIONS`], served at `endpoint`, with the chart's settings (failure policy Fail, 10 s
/// timeout, equivalent versions matched, the excluded namespaces never sent).
pub fn configurations(
    prefix: &str,
    endpoint: &Endpoint,
    excluded_namespaces: &[String],
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    let selector = namespace_selector(excluded_namespaces);
    let meta = |kind: &str| ObjectMeta {
        name: Some(format!("{prefix}-{kind}")),
        ..ObjectMeta::default()
    };
    let mutating = REGISTRATIONS
        .iter()
        .filter(|r| r.mutating())
        .map(|r| MutatingWebhook {
            name: r.name.into(),
            admission_review_versions: vec!["v1".into()],
            side_effects: "None".into(),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            timeout_seconds: Some(10),
            reinvocation_policy: Some("Never".into()),
            client_config: endpoint.client_config(r.path),
            namespace_selector: Some(selector.clone()),
            rules: Some(vec![rule(r)]),
            ..MutatingWebhook::default()
        })
        .collect();
    let validating = REGISTRATIONS
        .iter()
        .filter(|r| !r.mutating())
        .map(|r| ValidatingWebhook {
            name: r.name.into(),
            admission_review_versions: vec!["v1".into()],
            side_effects: "None".into(),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Equivalent".into()),
            timeout_seconds: Some(10),
            client_config: endpoint.client_config(r.path),
            namespace_selector: Some(selector.clone()),
            rules: Some(vec![rule(r)]),
            ..ValidatingWebhook::default()
        })
        .collect();
    (
        MutatingWebhookConfiguration {
            metadata: meta("mutating"),
            webhooks: Some(mutating),
        },
        ValidatingWebhookConfiguration {
            metadata: meta("validating"),
            webhooks: Some(validating),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registration_is_a_served_path_and_names_are_unique() {
        let served: Vec<&str> = crate::ROUTES.iter().map(|(p, _)| *p).collect();
        let mut names = std::collections::BTreeSet::new();
        for r in REGISTRATIONS {
            assert!(served.contains(&r.path), "{} is not served", r.path);
            assert!(names.insert(r.name), "{} registered twice", r.name);
        }
    }

    #[test]
    fn configurations_point_every_hook_at_the_endpoint() {
        let endpoint = Endpoint {
            url: "https://127.0.0.1:9443/".into(),
            ca_bundle: b"PEM".to_vec(),
        };
        let (m, v) = configurations("sluice", &endpoint, &["kube-system".into()]);
        let m = m.webhooks.unwrap();
        let v = v.webhooks.unwrap();
        assert_eq!(m.len() + v.len(), REGISTRATIONS.len());
        assert_eq!(
            m[0].client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/mutate-batch-v1-job")
        );
        assert!(v.iter().all(|w| {
            w.client_config
                .url
                .as_deref()
                .is_some_and(|u| u.contains("/validate-"))
        }));
    }
}
