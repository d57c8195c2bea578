//! Decoding of arbitrary Kueue documents (either version) into v1beta2 objects.

use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use super::conversion::{ConversionError, ToV1beta1, ToV1beta2};
use super::{v1beta1, v1beta2};

/// A Kueue object in the storage version v1beta2.
#[derive(Clone, Debug, PartialEq)]
pub enum KueueObject {
    /// A ResourceFlavor.
    ResourceFlavor(v1beta2::ResourceFlavor),
    /// A ClusterQueue.
    ClusterQueue(v1beta2::ClusterQueue),
    /// A LocalQueue.
    LocalQueue(v1beta2::LocalQueue),
    /// A Cohort.
    Cohort(v1beta2::Cohort),
    /// A Workload.
    Workload(v1beta2::Workload),
    /// A WorkloadPriorityClass.
    WorkloadPriorityClass(v1beta2::WorkloadPriorityClass),
    /// A Topology.
    Topology(v1beta2::Topology),
    /// An AdmissionCheck.
    AdmissionCheck(v1beta2::AdmissionCheck),
}

/// Why a document could not be decoded.
#[derive(Debug, Error)]
pub enum DecodeError {
    /// The document is not a JSON object or lacks `apiVersion`/`kind`.
    #[error("document (name {name:?}) has no {missing}")]
    MissingTypeMeta {
        /// metadata.name if readable, else empty.
        name: String,
        /// The missing field.
        missing: &'static str,
    },
    /// The apiVersion is not v1beta1 or v1beta2 of `kueue.x-k8s.io`.
    #[error(
        "{kind} {name:?}: unsupported apiVersion {api_version:?} (expected kueue.x-k8s.io/v1beta1 or v1beta2)"
    )]
    UnknownVersion {
        /// Kind.
        kind: String,
        /// metadata.name if readable.
        name: String,
        /// The apiVersion found.
        api_version: String,
    },
    /// The kind is not one of Kueue's modelled kinds.
    #[error("unknown kind {kind:?} (object {name:?}, apiVersion {api_version})")]
    UnknownKind {
        /// Kind found.
        kind: String,
        /// metadata.name if readable.
        name: String,
        /// apiVersion found.
        api_version: String,
    },
    /// A field has the wrong type or value.
    #[error("{kind} {name:?}: field `{path}`: {message}")]
    Field {
        /// Kind.
        kind: String,
        /// metadata.name if readable.
        name: String,
        /// JSON path of the bad field, e.g. `spec.podSets[0].count`.
        path: String,
        /// What serde reported.
        message: String,
    },
    /// Fields the kind's schema does not have (only from [`decode_strict`]).
    #[error("{kind} {name:?}: {error}")]
    Unknown {
        /// Kind.
        kind: String,
        /// metadata.name if readable.
        name: String,
        /// The unknown fields.
        error: StrictError,
    },
    /// Conversion from v1beta1 failed.
    #[error(transparent)]
    Conversion(#[from] ConversionError),
}

/// Why [`deserialize_strict`] refused a value.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StrictError {
    /// A field has the wrong type or value.
    #[error("field `{path}`: {message}")]
    Invalid {
        /// JSON path of the field, e.g. `spec.podSets[0].count`.
        path: String,
        /// What serde reported.
        message: String,
    },
    /// Fields that the type does not have, worded as kubectl's strict field validation words them.
    #[error("strict decoding error: {}", unknown_fields(.fields))]
    UnknownFields {
        /// JSON paths of the unknown fields, e.g. `spec.resourceGroupz`, in document order.
        fields: Vec<String>,
    },
}

fn unknown_fields(fields: &[String]) -> String {
    fields
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deserializes `value` as `T`, refusing fields that `T` does not have, as `kubectl apply` does by default
/// (strict field validation). The types are the schema: every key a type's `Deserialize` skips is reported,
/// while parts typed as free-form JSON (`serde_json::Value`, `RawExtension`) accept anything, as
/// `x-kubernetes-preserve-unknown-fields` does. A type with `#[serde(flatten)]` cannot report what its
/// flattened part skips; check such a part on its own.
pub fn deserialize_strict<T: DeserializeOwned>(value: Value) -> Result<T, StrictError> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let result = serde_ignored::deserialize(
        serde_path_to_error::Deserializer::new(value, &mut track),
        |path| {
            // TypeMeta: some types (kube's derived roots) leave apiVersion and kind to the decoder.
            let field = field_path(&path);
            if !matches!(field.as_str(), "apiVersion" | "kind") {
                unknown.push(field);
            }
        },
    );
    match result {
        // A typo'd required field also fails as missing: the unknown field is the better clue.
        _ if !unknown.is_empty() => Err(StrictError::UnknownFields { fields: unknown }),
        Ok(v) => Ok(v),
        Err(e) => Err(StrictError::Invalid {
            path: track.path().to_string(),
            message: e.to_string(),
        }),
    }
}

/// `spec.containers[0].imagez`, as the API server names fields.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => match field_path(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent),
    }
}

/// Kinds whose `spec` Kueue may omit; decoding fills in an empty one.
const SPEC_KINDS: [&str; 7] = [
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "Workload",
    "Topology",
    "AdmissionCheck",
];

/// Decodes a Kueue document of either version into its v1beta2 form. Fields the types do not know are
/// dropped, as the API server prunes them (what the webhook and the operator see has been pruned already).
pub fn decode(doc: Value) -> Result<KueueObject, DecodeError> {
    decode_with(doc, false)
}

/// Decodes like [`decode`], but refuses fields that the kind's schema (the version's full CRD schema) does not
/// have, with [`DecodeError::Unknown`], as `kubectl apply` does: for manifests read from files, where a typo
/// would otherwise silently change what the object means.
pub fn decode_strict(doc: Value) -> Result<KueueObject, DecodeError> {
    decode_with(doc, true)
}

fn decode_with(mut doc: Value, strict: bool) -> Result<KueueObject, DecodeError> {
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(root) = doc.as_object_mut() else {
        return Err(DecodeError::MissingTypeMeta {
            name,
            missing: "JSON object",
        });
    };
    let api_version = match root.get("apiVersion").and_then(Value::as_str) {
        Some(v) => v.to_owned(),
        None => {
            return Err(DecodeError::MissingTypeMeta {
                name,
                missing: "apiVersion",
            });
        }
    };
    let kind = match root.get("kind").and_then(Value::as_str) {
        Some(k) => k.to_owned(),
        None => {
            return Err(DecodeError::MissingTypeMeta {
                name,
                missing: "kind",
            });
        }
    };
    if !super::conversion::KINDS.contains(&kind.as_str()) {
        return Err(DecodeError::UnknownKind {
            kind,
            name,
            api_version,
        });
    }
    if SPEC_KINDS.contains(&kind.as_str()) && !root.contains_key("spec") {
        root.insert("spec".to_owned(), Value::Object(serde_json::Map::new()));
    }
    let ctx = Ctx {
        kind: &kind,
        name: &name,
        strict,
    };
    match api_version.as_str() {
        v1beta2::API_VERSION => ctx.v1beta2(doc),
        v1beta1::API_VERSION => ctx.v1beta1(doc),
        _ => Err(DecodeError::UnknownVersion {
            kind,
            name,
            api_version,
        }),
    }
}

struct Ctx<'a> {
    kind: &'a str,
    name: &'a str,
    strict: bool,
}

impl Ctx<'_> {
    fn parse<T: DeserializeOwned>(&self, doc: Value) -> Result<T, DecodeError> {
        if self.strict {
            return deserialize_strict(doc).map_err(|e| match e {
                StrictError::Invalid { path, message } => DecodeError::Field {
                    kind: self.kind.to_owned(),
                    name: self.name.to_owned(),
                    path,
                    message,
                },
                error @ StrictError::UnknownFields { .. } => DecodeError::Unknown {
                    kind: self.kind.to_owned(),
                    name: self.name.to_owned(),
                    error,
                },
            });
        }
        serde_path_to_error::deserialize(doc).map_err(|e| DecodeError::Field {
            kind: self.kind.to_owned(),
            name: self.name.to_owned(),
            path: e.path().to_string(),
            message: e.into_inner().to_string(),
        })
    }

    fn v1beta2(&self, doc: Value) -> Result<KueueObject, DecodeError> {
        Ok(match self.kind {
            "ResourceFlavor" => KueueObject::ResourceFlavor(self.parse(doc)?),
            "ClusterQueue" => KueueObject::ClusterQueue(self.parse(doc)?),
            "LocalQueue" => KueueObject::LocalQueue(self.parse(doc)?),
            "Cohort" => KueueObject::Cohort(self.parse(doc)?),
            "Workload" => KueueObject::Workload(self.parse(doc)?),
            "WorkloadPriorityClass" => KueueObject::WorkloadPriorityClass(self.parse(doc)?),
            "Topology" => KueueObject::Topology(self.parse(doc)?),
            _ => KueueObject::AdmissionCheck(self.parse(doc)?),
        })
    }

    fn v1beta1(&self, doc: Value) -> Result<KueueObject, DecodeError> {
        Ok(match self.kind {
            "ResourceFlavor" => KueueObject::ResourceFlavor(
                self.parse::<v1beta1::ResourceFlavor>(doc)?.to_v1beta2()?,
            ),
            "ClusterQueue" => {
                KueueObject::ClusterQueue(self.parse::<v1beta1::ClusterQueue>(doc)?.to_v1beta2()?)
            }
            "LocalQueue" => {
                KueueObject::LocalQueue(self.parse::<v1beta1::LocalQueue>(doc)?.to_v1beta2()?)
            }
            "Cohort" => KueueObject::Cohort(self.parse::<v1beta1::Cohort>(doc)?.to_v1beta2()?),
            "Workload" => {
                KueueObject::Workload(self.parse::<v1beta1::Workload>(doc)?.to_v1beta2()?)
            }
            "WorkloadPriorityClass" => KueueObject::WorkloadPriorityClass(
                self.parse::<v1beta1::WorkloadPriorityClass>(doc)?
                    .to_v1beta2()?,
            ),
            "Topology" => {
                KueueObject::Topology(self.parse::<v1beta1::Topology>(doc)?.to_v1beta2()?)
            }
            _ => KueueObject::AdmissionCheck(
                self.parse::<v1beta1::AdmissionCheck>(doc)?.to_v1beta2()?,
            ),
        })
    }
}

macro_rules! each {
    ($self:expr, $o:ident => $e:expr) => {
        match $self {
            KueueObject::ResourceFlavor($o) => $e,
            KueueObject::ClusterQueue($o) => $e,
            KueueObject::LocalQueue($o) => $e,
            KueueObject::Cohort($o) => $e,
            KueueObject::Workload($o) => $e,
            KueueObject::WorkloadPriorityClass($o) => $e,
            KueueObject::Topology($o) => $e,
            KueueObject::AdmissionCheck($o) => $e,
        }
    };
}

impl KueueObject {
    /// The kind name, e.g. `ClusterQueue`.
    pub fn kind(&self) -> &'static str {
        match self {
            KueueObject::ResourceFlavor(_) => "ResourceFlavor",
            KueueObject::ClusterQueue(_) => "ClusterQueue",
            KueueObject::LocalQueue(_) => "LocalQueue",
            KueueObject::Cohort(_) => "Cohort",
            KueueObject::Workload(_) => "Workload",
            KueueObject::WorkloadPriorityClass(_) => "WorkloadPriorityClass",
            KueueObject::Topology(_) => "Topology",
            KueueObject::AdmissionCheck(_) => "AdmissionCheck",
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        each!(self, o => o.meta())
    }

    /// metadata.name, or "" when unset.
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// metadata.namespace, for namespaced kinds.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata().namespace.as_deref()
    }

    /// The v1beta2 JSON of the object.
    pub fn encode(&self) -> Result<Value, serde_json::Error> {
        each!(self, o => serde_json::to_value(o))
    }

    /// The v1beta1 JSON of the object (for the conversion webhook); v1beta2-only data is kept in an annotation.
    pub fn encode_v1beta1(&self) -> Result<Value, ConversionError> {
        let invalid = |e: serde_json::Error| ConversionError::Invalid {
            kind: self.kind().to_owned(),
            name: self.name().to_owned(),
            reason: e.to_string(),
        };
        each!(self, o => serde_json::to_value(o.to_v1beta1()?).map_err(invalid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_both_versions_to_v1beta2() {
        let v1 = decode(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"cohort": "eng"}
        }));
        let Ok(KueueObject::ClusterQueue(cq)) = v1 else {
            panic!("{v1:?}")
        };
        assert_eq!(cq.spec.cohort_name, "eng");

        let v2 = decode(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"cohortName": "eng"}
        }));
        let Ok(KueueObject::ClusterQueue(cq2)) = v2 else {
            panic!("{v2:?}")
        };
        assert_eq!(cq, cq2);
    }

    #[test]
    fn spec_may_be_omitted() {
        let rf = decode(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                               "metadata": {"name": "default-flavor"}}),
        );
        let Ok(KueueObject::ResourceFlavor(rf)) = rf else {
            panic!("{rf:?}")
        };
        assert_eq!(rf.metadata.name.as_deref(), Some("default-flavor"));
    }

    #[test]
    fn wrong_field_type_names_kind_object_and_path() {
        let err = decode(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w1", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": "three"}]}
        }));
        let Err(e) = err else { panic!("should fail") };
        let msg = e.to_string();
        assert!(msg.contains("Workload"), "{msg}");
        assert!(msg.contains("w1"), "{msg}");
        assert!(msg.contains("spec.podSets[0].count"), "{msg}");

        let err = decode(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"queueingStrategy": "Random"}
        }));
        let Err(e) = err else { panic!("should fail") };
        assert!(e.to_string().contains("spec.queueingStrategy"), "{e}");
    }

    #[test]
    fn unknown_kind_and_version() {
        let e = decode(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Nope", "metadata": {"name": "x"}}),
        );
        assert!(matches!(e, Err(DecodeError::UnknownKind { .. })), "{e:?}");
        let e = decode(
            json!({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": "x"}}),
        );
        let Err(e) = e else { panic!("should fail") };
        assert!(matches!(e, DecodeError::UnknownVersion { .. }));
        assert!(
            e.to_string().contains("Cohort") && e.to_string().contains("\"x\""),
            "{e}"
        );
        let e = decode(json!({"kind": "Cohort"}));
        assert!(matches!(
            e,
            Err(DecodeError::MissingTypeMeta {
                missing: "apiVersion",
                ..
            })
        ));
        assert!(decode(json!([1])).is_err());
    }

    #[test]
    fn strict_decode_refuses_unknown_fields_naming_them() {
        let cq = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"resourceGroupz": [], "cohortName": "eng"}
        });
        // The default decode prunes, as the API server does.
        assert!(decode(cq.clone()).is_ok());
        let e = decode_strict(cq);
        let Err(e) = e else { panic!("{e:?}") };
        assert!(matches!(e, DecodeError::Unknown { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            r#"ClusterQueue "cq": strict decoding error: unknown field "spec.resourceGroupz""#
        );

        // Deep in a Workload's pod template (k8s-openapi's PodSpec), and in v1beta1 too.
        let wl = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "labelz": {}},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "i", "resourcez": {}}], "nodeSelectorr": {}}}}]}
        });
        let e = decode_strict(wl)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            e,
            r#"Workload "w": strict decoding error: unknown field "metadata.labelz", unknown field "spec.podSets[0].template.spec.containers[0].resourcez", unknown field "spec.podSets[0].template.spec.nodeSelectorr""#
        );

        // Type errors keep their own message.
        let e = decode_strict(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"},
            "spec": {"clusterQueue": 3}
        }));
        assert!(
            matches!(e, Err(DecodeError::Field { ref path, .. }) if path == "spec.clusterQueue"),
            "{e:?}"
        );
    }

    #[test]
    fn strict_decode_accepts_every_known_field() {
        // Kubernetes 1.36's PodSpec field, status, and a full v1beta2 Workload round trip.
        let wl = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "labels": {"a": "b"}, "creationTimestamp": null},
            "spec": {"queueName": "q", "active": true, "podSets": [{"name": "main", "count": 2,
                "template": {"metadata": {"annotations": {"x": "y"}}, "spec": {"schedulingGroup": {"podGroupName": "g"},
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}}}]}
        });
        let obj = decode_strict(wl);
        assert!(obj.is_ok(), "{obj:?}");
        let encoded = obj.ok().and_then(|o| o.encode().ok()).unwrap_or_default();
        let again = decode_strict(encoded);
        assert!(again.is_ok(), "{again:?}");
    }

    #[test]
    fn encode_v1beta1_round_trips() {
        let doc = json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
            "status": {"pendingWorkloads": 1, "reservingWorkloads": 0, "admittedWorkloads": 0,
                       "flavorUsage": [{"name": "f"}]}
        });
        let obj = decode(doc.clone());
        let Ok(obj) = obj else { panic!("{obj:?}") };
        assert_eq!(obj.kind(), "LocalQueue");
        assert_eq!(obj.name(), "lq");
        assert_eq!(obj.namespace(), Some("ns"));
        assert_eq!(obj.encode_v1beta1().ok(), Some(doc));
        assert_eq!(
            obj.encode().ok().and_then(|v| v.get("apiVersion").cloned()),
            Some(json!("kueue.x-k8s.io/v1beta2"))
        );
    }
}
