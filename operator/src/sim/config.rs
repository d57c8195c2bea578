//! The Kueue `Configuration` a simulation runs under: from `sluice simulate --config FILE` or a `Configuration`
//! document among the manifests.
//!
//! It is the file the operator takes (one parser, `controller::config`), read strictly: a field Kueue does not
//! have, or one of a feature the simulator does not model yet, is an error naming it, so a simulation never runs
//! something else than the file says. Fields that only configure the manager process (webhook, metrics, leader
//! election, certificates, client connection, ...) do not change scheduling and are accepted.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::controller::config::{ConfigError, ConfigFile, OperatorConfig, WaitForPodsReady};
use crate::engine::EngineConfig;
use crate::manifest::Document;
use sluice_sdk::kueue::integrations::{FRAMEWORKS, Integrations};
use sluice_sdk::kueue::namespaces::selects_namespace;

/// API group and version prefix of Kueue's Configuration.
const CONFIG_GROUP: &str = "config.kueue.x-k8s.io/";

/// Top-level fields the simulation reads.
const SCHEDULING_FIELDS: &[&str] = &[
    "fairSharing",
    "waitForPodsReady",
    "admissionFairSharing",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector",
    "featureGates",
    "integrations",
    "resources",
];

/// Kueue's fields that configure the manager process only: no effect on what a simulation admits.
const PROCESS_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "namespace",
    "internalCertManagement",
    "clientConnection",
    "queueVisibility",
    "visibilityServer",
    "objectRetentionPolicies",
    "webhook",
    "leaderElection",
    "metrics",
    "health",
    "pprofBindAddress",
    "controller",
    "tls",
];

/// Kueue's fields of features the simulator does not model yet, with what is missing.
const NOT_SIMULATED: &[(&str, &str)] = &[("multiKueue", "MultiKueue is not simulated")];

/// What a simulation takes from a Configuration.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Fair sharing, blockAdmission and the feature gates the engine honours.
    pub engine: EngineConfig,
    /// Kueue's detailed pending reasons (UnadmittedWorkloadsObservability).
    pub detailed_pending_reasons: bool,
    /// waitForPodsReady (None: off): timeouts and backoffs for pods that are slow to start
    /// (`sluice.dev/simulated-startup`).
    pub wait_for_pods_ready: Option<WaitForPodsReady>,
    /// `resources`: excluded prefixes and transformations of the requests counted.
    pub resource_counting: crate::resource_rules::Counting,
    /// `integrations`: jobs of a kind whose framework is off are not Kueue's, so not simulated (without a
    /// Configuration every kind is).
    pub integrations: Integrations,
    /// `managedJobsNamespaceSelector`: jobs in other namespaces are not simulated.
    pub managed_namespaces: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
}

impl Default for SimConfig {
    /// As the operator runs without a Configuration.
    fn default() -> Self {
        let operator = OperatorConfig::default();
        Self {
            engine: operator.engine,
            detailed_pending_reasons: operator.detailed_pending_reasons,
            wait_for_pods_ready: operator.wait_for_pods_ready,
            resource_counting: operator.resource_counting,
            integrations: Integrations::every().clone(),
            managed_namespaces: operator.managed_jobs_namespace_selector,
        }
    }
}

impl SimConfig {
    /// Reads a Configuration file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: origin.clone(),
            error,
        })?;
        let value: Value = serde_yaml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path: origin.clone(),
            message: e.to_string(),
        })?;
        Self::from_value(&origin, &value)
    }

    /// Reads a Configuration object; `origin` names it in errors.
    pub fn from_value(origin: &str, value: &Value) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: origin.to_string(),
            message,
        };
        let Some(fields) = value.as_object() else {
            return Err(invalid("a Kueue Configuration must be a mapping".into()));
        };
        if let Some(v) = fields.get("apiVersion")
            && !v.as_str().is_some_and(|s| s.starts_with(CONFIG_GROUP))
        {
            return Err(invalid(format!(
                "field `apiVersion`: {v} is not {CONFIG_GROUP}v1beta1 or v1beta2"
            )));
        }
        if let Some(v) = fields.get("kind")
            && v.as_str() != Some("Configuration")
        {
            return Err(invalid(format!("field `kind`: {v} is not Configuration")));
        }
        for key in fields.keys() {
            if let Some((_, why)) = NOT_SIMULATED.iter().find(|(f, _)| f == key) {
                return Err(invalid(format!("field `{key}`: {why}")));
            }
            if !SCHEDULING_FIELDS.contains(&key.as_str()) && !PROCESS_FIELDS.contains(&key.as_str())
            {
                return Err(invalid(format!(
                    "unknown field `{key}` (not a field of Kueue's Configuration)"
                )));
            }
        }
        if fields.get("manageJobsWithoutQueueName") == Some(&Value::Bool(true)) {
            return Err(invalid(
                "field `manageJobsWithoutQueueName`: true is not simulated yet (Jobs without a queue-name \
                 label would stay suspended); only Jobs with the label, or in a namespace with a `default` \
                 LocalQueue, are simulated"
                    .into(),
            ));
        }
        let file: ConfigFile =
            serde_json::from_value(value.clone()).map_err(|e| invalid(e.to_string()))?;
        let operator = OperatorConfig::from_config_file(origin, file)?;
        Ok(SimConfig {
            engine: operator.engine,
            detailed_pending_reasons: operator.detailed_pending_reasons,
            wait_for_pods_ready: operator.wait_for_pods_ready,
            resource_counting: operator.resource_counting,
            integrations: operator.integrations,
            managed_namespaces: operator.managed_jobs_namespace_selector,
        })
    }

    /// The documents a simulation under this Configuration reads: a job of a kind whose integration is off, or in
    /// a namespace `managedJobsNamespaceSelector` leaves out (on the labels of its Namespace among the documents,
    /// its name label always), is left out (logged), as Kueue leaves it alone.
    pub fn managed_documents(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut namespace_labels: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for doc in docs.iter().filter(|d| d.kind() == Some("Namespace")) {
            let Some(name) = doc.value.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            let labels = doc
                .value
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            namespace_labels.insert(name.to_owned(), labels);
        }
        docs.into_iter()
            .filter(|doc| {
                let (api_version, kind) = (
                    doc.api_version().unwrap_or_default(),
                    doc.kind().unwrap_or_default(),
                );
                let Some(framework) = FRAMEWORKS
                    .iter()
                    .find(|f| f.1 == api_version && f.2 == kind)
                else {
                    return true;
                };
                let why = if !self.integrations.enabled(framework.0) {
                    "its integration is not in the Configuration's integrations.frameworks"
                } else {
                    let ns = doc.namespace().unwrap_or("default");
                    if selects_namespace(&self.managed_namespaces, ns, namespace_labels.get(ns)) {
                        return true;
                    }
                    "its namespace does not match the Configuration's managedJobsNamespaceSelector"
                };
                tracing::info!(object = %doc.describe(), "skipped: {why}");
                false
            })
            .collect()
    }
}

/// Whether a manifest document is a Kueue Configuration.
pub fn is_configuration(doc: &Document) -> bool {
    doc.kind() == Some("Configuration")
        && doc
            .api_version()
            .is_some_and(|v| v.starts_with(CONFIG_GROUP))
}

/// The Configuration among the documents (at most one) and the other documents.
pub fn split_configuration(
    docs: Vec<Document>,
) -> Result<(Option<SimConfig>, Vec<Document>), ConfigError> {
    let (configs, rest): (Vec<Document>, Vec<Document>) =
        docs.into_iter().partition(is_configuration);
    match configs.as_slice() {
        [] => Ok((None, rest)),
        [one] => Ok((
            Some(SimConfig::from_value(&one.origin.to_string(), &one.value)?),
            rest,
        )),
        [first, second, ..] => Err(ConfigError::Invalid {
            path: second.origin.to_string(),
            message: format!(
                "a second Kueue Configuration (the first is {}): give one",
                first.origin
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(docs: &[Document]) -> Vec<String> {
        docs.iter().map(Document::describe).collect()
    }

    #[test]
    fn jobs_kueue_leaves_alone_are_left_out_and_everything_else_kept() {
        let docs = crate::manifest::parse_documents(
            "m.yaml",
            r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {example.com/kueue: enabled}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: batch/v1
kind: Job
metadata: {name: in, namespace: team-a}
---
apiVersion: batch/v1
kind: Job
metadata: {name: out, namespace: team-b}
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js, namespace: team-a}
"#,
        )
        .unwrap();
        let config = SimConfig::from_value(
            "c",
            &serde_json::json!({
                "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "managedJobsNamespaceSelector": {"matchLabels": {"example.com/kueue": "enabled"}},
                "integrations": {"frameworks": ["batch/job"]}
            }),
        )
        .unwrap();
        let kept = names(&config.managed_documents(docs.clone()));
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(kept.iter().any(|d| d.contains("team-a/in")), "{kept:?}");
        assert!(
            !kept.iter().any(|d| d.contains("out") || d.contains("js")),
            "{kept:?}"
        );
        // Without a Configuration every kind and namespace but Kueue's default exclusions is simulated.
        assert_eq!(SimConfig::default().managed_documents(docs).len(), 5);
    }
}
