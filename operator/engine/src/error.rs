//! Errors for invalid input objects.

use thiserror::Error;

/// An event carried an invalid object; names the object and the field.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum EngineError {
    /// A field of an object is invalid.
    #[error("{kind} {name}: invalid {field}: {reason}")]
    Invalid {
        /// Object kind.
        kind: &'static str,
        /// Object name.
        name: String,
        /// Field path.
        field: String,
        /// Why.
        reason: String,
    },
}

impl EngineError {
    pub(crate) fn invalid(
        kind: &'static str,
        name: &str,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            kind,
            name: name.to_string(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}
