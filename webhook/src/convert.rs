//! The CRD conversion webhook: `apiextensions.k8s.io/v1` ConversionReviews converting Kueue objects between
//! v1beta1 and v1beta2 with the SDK's lossless conversion.

use serde_json::{Value, json};
use sluice_sdk::kueue::conversion::Version;
use sluice_sdk::kueue::decode::decode;

use crate::review::UnreviewableError;

/// The API version of ConversionReviews.
pub const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";

/// The answer to one ConversionReview body: the review to send, and whether the conversion succeeded.
#[derive(Debug)]
pub struct Converted {
    /// The ConversionReview response.
    pub review: Value,
    /// Whether every object was converted.
    pub success: bool,
}

/// Converts every object of a ConversionReview body; `Err` when there is no request uid to answer to.
pub fn convert(body: &[u8]) -> Result<Converted, UnreviewableError> {
    let doc: Value = serde_json::from_slice(body).map_err(UnreviewableError::NotJson)?;
    let uid = doc
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .ok_or(UnreviewableError::NoRequest)?
        .to_owned();
    let outcome = convert_request(&doc);
    let (response, success) = match outcome {
        Ok(objects) => (
            json!({"uid": uid, "convertedObjects": objects, "result": {"status": "Success"}}),
            true,
        ),
        Err(message) => (
            json!({"uid": uid, "result": {"status": "Failure", "message": message}}),
            false,
        ),
    };
    Ok(Converted {
        review: json!({"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": response}),
        success,
    })
}

fn convert_request(doc: &Value) -> Result<Vec<Value>, String> {
    let api_version = doc.get("apiVersion").and_then(Value::as_str);
    let kind = doc.get("kind").and_then(Value::as_str);
    if api_version != Some(CONVERSION_API_VERSION) || kind != Some("ConversionReview") {
        return Err(format!(
            "expected an {CONVERSION_API_VERSION} ConversionReview, got apiVersion {api_version:?} kind {kind:?}"
        ));
    }
    let desired = doc
        .pointer("/request/desiredAPIVersion")
        .and_then(Value::as_str)
        .ok_or("the request has no desiredAPIVersion")?;
    let to = Version::from_api_version(desired).ok_or_else(|| {
        format!(
            "cannot convert to {desired:?}: this webhook converts kueue.x-k8s.io/v1beta1 and kueue.x-k8s.io/v1beta2"
        )
    })?;
    let objects = doc
        .pointer("/request/objects")
        .and_then(Value::as_array)
        .ok_or("the request has no objects list")?;
    objects
        .iter()
        .enumerate()
        .map(|(i, obj)| {
            let decoded = decode(obj.clone()).map_err(|e| format!("objects[{i}]: {e}"))?;
            match to {
                Version::V1beta2 => decoded.encode().map_err(|e| e.to_string()),
                Version::V1beta1 => decoded.encode_v1beta1().map_err(|e| e.to_string()),
            }
            .map_err(|e| format!("objects[{i}]: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(desired: &str, objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview",
            "request": {"uid": "c1", "desiredAPIVersion": desired, "objects": objects}
        }))
        .unwrap_or_default()
    }

    #[test]
    fn cluster_queue_cohort_is_renamed_both_ways() {
        let v1 = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": {"name": "cq"}, "spec": {"cohort": "pool"}});
        let out = convert(&review("kueue.x-k8s.io/v1beta2", json!([v1]))).expect("answer");
        assert!(out.success, "{}", out.review);
        let v2 = &out.review["response"]["convertedObjects"][0];
        assert_eq!(v2["apiVersion"], "kueue.x-k8s.io/v1beta2");
        assert_eq!(v2["spec"]["cohortName"], "pool");
        let back = convert(&review("kueue.x-k8s.io/v1beta1", json!([v2]))).expect("answer");
        assert_eq!(
            back.review["response"]["convertedObjects"][0]["spec"]["cohort"],
            "pool"
        );
        assert_eq!(back.review["response"]["uid"], "c1");
    }

    #[test]
    fn unknown_target_fails_with_a_message() {
        let out = convert(&review("kueue.x-k8s.io/v9", json!([]))).expect("answer");
        assert!(!out.success);
        assert_eq!(out.review["response"]["result"]["status"], "Failure");
        assert!(convert(b"[]").is_err());
    }
}
