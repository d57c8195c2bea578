//! The `admission.k8s.io/v1` AdmissionReview wire format, decoded leniently: anything that carries a request `uid`
//! gets an answer, however broken the rest is.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

/// The API version of the reviews this webhook speaks.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// Why a body cannot be answered with an AdmissionReview at all (the server answers HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum UnreviewableError {
    /// The body is not JSON.
    #[error("the body is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// The body has no `request.uid` string to answer to.
    #[error("the body has no request.uid to answer to")]
    NoRequest,
}

/// Group, version and kind of the object under review.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Gvk {
    /// API group (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// The operation under review.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// Creation.
    Create,
    /// Update.
    Update,
    /// Deletion.
    Delete,
    /// Connect (exec, attach, ...).
    Connect,
}

/// The part of an AdmissionRequest that the hooks use.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifier to echo.
    pub uid: String,
    /// Kind of the object.
    #[serde(default)]
    pub kind: Gvk,
    /// Operation.
    pub operation: Operation,
    /// Namespace of the object (absent for cluster-scoped ones).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name of the object (may be absent on create with generateName).
    #[serde(default)]
    pub name: Option<String>,
    /// The new object (absent on delete).
    #[serde(default)]
    pub object: Option<Value>,
    /// The old object (update and delete).
    #[serde(default)]
    pub old_object: Option<Value>,
}

impl AdmissionRequest {
    /// The request's namespace, else the object's.
    pub fn namespace(&self) -> &str {
        self.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .or_else(|| {
                self.object
                    .as_ref()
                    .and_then(|o| o.pointer("/metadata/namespace"))
                    .and_then(Value::as_str)
            })
            .unwrap_or_default()
    }
}

/// A request that has a uid but cannot be reviewed (wrong envelope, missing or mistyped fields).
#[derive(Debug)]
pub struct BadRequest {
    /// The uid to echo.
    pub uid: String,
    /// What is wrong.
    pub message: String,
}

/// Decodes an AdmissionReview body.
///
/// `Err` means there is nobody to answer (HTTP 400); `Ok(Err(_))` a request to deny with a message.
pub fn decode(body: &[u8]) -> Result<Result<AdmissionRequest, BadRequest>, UnreviewableError> {
    let doc: Value = serde_json::from_slice(body).map_err(UnreviewableError::NotJson)?;
    let uid = doc
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .ok_or(UnreviewableError::NoRequest)?
        .to_owned();
    let api_version = doc.get("apiVersion").and_then(Value::as_str);
    let kind = doc.get("kind").and_then(Value::as_str);
    if api_version != Some(ADMISSION_API_VERSION) || kind != Some("AdmissionReview") {
        return Ok(Err(BadRequest {
            uid,
            message: format!(
                "expected an {ADMISSION_API_VERSION} AdmissionReview, got apiVersion {} kind {}",
                show(api_version),
                show(kind)
            ),
        }));
    }
    let Some(request) = doc.get("request").cloned() else {
        return Err(UnreviewableError::NoRequest);
    };
    Ok(
        serde_json::from_value::<AdmissionRequest>(request).map_err(|e| BadRequest {
            uid,
            message: format!("the AdmissionReview request cannot be decoded: {e}"),
        }),
    )
}

fn show(s: Option<&str>) -> String {
    s.map_or_else(|| "<missing>".to_owned(), |s| format!("{s:?}"))
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// HTTP-style status code in `status.code` (200 when allowed).
    pub code: u16,
    /// `status.reason` (e.g. `Forbidden`, `BadRequest`); empty when allowed.
    pub reason: &'static str,
    /// `status.message`; empty when allowed.
    pub message: String,
    /// Warnings shown to the client.
    pub warnings: Vec<String>,
    /// JSONPatch to apply (mutating hooks only).
    pub patch: Option<json_patch::Patch>,
}

impl Verdict {
    /// Admitted as is.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            code: 200,
            reason: "",
            message: String::new(),
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// Refused by a rule, as controller-runtime reports a webhook's validation error (403 Forbidden).
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            code: 403,
            reason: "Forbidden",
            message: message.into(),
            ..Self::allow()
        }
    }

    /// Refused because the request itself is malformed (400 BadRequest).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            ..Self::allow()
        }
    }

    /// Admitted with a patch computed from `before` to `after` (no patch when they are equal).
    pub fn patched(before: &Value, after: &Value) -> Self {
        let patch = json_patch::diff(before, after);
        Self {
            patch: (!patch.0.is_empty()).then_some(patch),
            ..Self::allow()
        }
    }

    /// The result label used in metrics.
    pub fn result_label(&self) -> &'static str {
        match (self.allowed, &self.patch) {
            (true, Some(_)) => "patched",
            (true, None) => "allowed",
            (false, _) if self.code == 400 => "invalid",
            (false, _) => "denied",
        }
    }

    /// The AdmissionReview answering request `uid`.
    pub fn to_review(&self, uid: &str) -> Value {
        let mut response = json!({"uid": uid, "allowed": self.allowed});
        if !self.allowed {
            response["status"] = json!({
                "status": "Failure",
                "code": self.code,
                "reason": self.reason,
                "message": self.message,
            });
        }
        if !self.warnings.is_empty() {
            response["warnings"] = json!(self.warnings);
        }
        if let Some(patch) = &self.patch {
            // Serializing a Patch cannot fail: it is plain JSON values and strings.
            let bytes = serde_json::to_vec(patch).unwrap_or_default();
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        json!({"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_has_nobody_to_answer() {
        assert!(matches!(decode(b"{"), Err(UnreviewableError::NotJson(_))));
        assert!(matches!(decode(b"{}"), Err(UnreviewableError::NoRequest)));
        assert!(matches!(
            decode(br#"{"request": {"uid": 7}}"#),
            Err(UnreviewableError::NoRequest)
        ));
    }

    #[test]
    fn wrong_envelope_is_answered_with_a_message() {
        let body = br#"{"apiVersion": "v1", "kind": "Pod", "request": {"uid": "u1"}}"#;
        let Ok(Err(bad)) = decode(body) else {
            panic!("expected a bad request");
        };
        assert_eq!(bad.uid, "u1");
        assert!(bad.message.contains("kind \"Pod\""), "{}", bad.message);
    }

    #[test]
    fn missing_operation_is_answered_with_a_message() {
        let body = br#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u1"}}"#;
        let Ok(Err(bad)) = decode(body) else {
            panic!("expected a bad request");
        };
        assert!(bad.message.contains("operation"), "{}", bad.message);
    }

    #[test]
    fn patch_is_base64_json_patch() {
        let v = Verdict::patched(&json!({"a": 1}), &json!({"a": 2}));
        let review = v.to_review("u");
        assert_eq!(review["response"]["patchType"], "JSONPatch");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(review["response"]["patch"].as_str().unwrap_or_default())
            .unwrap_or_default();
        let ops: Value = serde_json::from_slice(&raw).unwrap_or_default();
        assert_eq!(ops, json!([{"op": "replace", "path": "/a", "value": 2}]));
        assert!(
            Verdict::patched(&json!({"a": 1}), &json!({"a": 1}))
                .patch
                .is_none()
        );
    }
}
