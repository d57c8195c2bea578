//! The Kueue `Configuration` a simulation runs under: from `sluice simulate --config FILE` or a `Configuration`
//! document among the manifests.
//!
//! It is the file the operator takes (one parser, `controller::config`), read strictly: a field Kueue does not
//! have, or one of a feature the simulator does not model yet, is an error naming it, so a simulation never runs
//! something else than the file says. Fields that only configure the manager process (webhook, metrics, leader
//! election, certificates, client connection, ...) do not change scheduling and are accepted.

use serde_json::Value;

use crate::controller::config::{ConfigError, ConfigFile, OperatorConfig, WaitForPodsReady};
use crate::engine::EngineConfig;
use crate::manifest::Document;
use sluice_sdk::kueue::integrations::{FRAMEWORKS, Integrations};

/// API group and version prefix of Kueue's Configuration.
const CONFIG_GROUP: &str = "config.kueue.x-k8s.io/";

/// Top-level fields the simulation reads.
const SCHEDULING_FIELDS: &[&str] = &[
    "fairSharing",
    "waitForPodsReady",
    "admissionFairSharing",
    "manageJobsWithoutQueueName",
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
const NOT_SIMULATED: &[(&str, &str)] = &[
    ("multiKueue", "MultiKueue is not simulated"),
    (
        "managedJobsNamespaceSelector",
        "managed-namespace selection is not simulated yet: only Jobs with a queue-name label are simulated",
    ),
];

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
        })
    }

    /// The documents a simulation under this Configuration reads: a job of a kind whose integration is off is
    /// left out (logged), as Kueue leaves it alone.
    pub fn managed_documents(&self, docs: Vec<Document>) -> Vec<Document> {
        docs.into_iter()
            .filter(|doc| {
                let (api_version, kind) = (
                    doc.api_version().unwrap_or_default(),
                    doc.kind().unwrap_or_default(),
                );
                let off = FRAMEWORKS
                    .iter()
                    .find(|f| f.1 == api_version && f.2 == kind)
                    .is_some_and(|f| !self.integrations.enabled(f.0));
                if off {
                    tracing::info!(
                        object = %doc.describe(),
                        "skipped: its integration is not in the Configuration's integrations.frameworks"
                    );
                }
                !off
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
