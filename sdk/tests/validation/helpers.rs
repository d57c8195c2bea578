//! Helpers shared by the validation tests: YAML manifests in, validation results out.

// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use serde::Deserialize;
use sluice_sdk::kueue::decode::{KueueObject, decode};
use sluice_sdk::kueue::validation::{ErrorKind, ValidationErrors, validate, validate_update};

/// Decodes one YAML manifest, panicking with the decode error (test input is ours).
pub fn obj(yaml: &str) -> KueueObject {
    let value = serde_yaml::from_str::<serde_json::Value>(yaml)
        .unwrap_or_else(|e| panic!("test YAML does not parse: {e}\n{yaml}"));
    decode(value).unwrap_or_else(|e| panic!("test manifest does not decode: {e}\n{yaml}"))
}

/// Decodes every document of a multi-document YAML file.
pub fn objs(text: &str) -> Vec<KueueObject> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            let value = serde_json::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("fixture does not parse: {e}"));
            decode(value).unwrap_or_else(|e| panic!("fixture does not decode: {e}"))
        })
        .collect()
}

/// The errors of validating `yaml` for creation; panics if it is valid.
pub fn errors(yaml: &str) -> ValidationErrors {
    match validate(&obj(yaml)) {
        Ok(()) => panic!("expected validation errors for\n{yaml}"),
        Err(e) => e,
    }
}

/// Asserts that `yaml` validates.
pub fn valid(yaml: &str) {
    if let Err(e) = validate(&obj(yaml)) {
        panic!("expected valid, got: {e}\n{yaml}");
    }
}

/// Asserts a violation at `field` of `kind` whose message contains `message`.
pub fn assert_has(errs: &ValidationErrors, field: &str, kind: ErrorKind, message: &str) {
    assert!(
        errs.errors
            .iter()
            .any(|e| e.field == field && e.kind == kind && e.message.contains(message)),
        "no {kind:?} error at {field} with {message:?}; got: {errs}"
    );
}

/// Asserts that creating `yaml` fails with (at least) the given violation.
pub fn rejects(yaml: &str, field: &str, kind: ErrorKind, message: &str) {
    assert_has(&errors(yaml), field, kind, message);
}

/// The errors of updating `old` to `new`; panics if the update is valid.
pub fn update_errors(old: &str, new: &str) -> ValidationErrors {
    match validate_update(&obj(old), &obj(new)) {
        Ok(()) => panic!("expected update errors for\n{old}\n->\n{new}"),
        Err(e) => e,
    }
}

/// Asserts that updating `old` to `new` is allowed.
pub fn update_ok(old: &str, new: &str) {
    if let Err(e) = validate_update(&obj(old), &obj(new)) {
        panic!("expected valid update, got: {e}");
    }
}
