//! Field errors in the shape and wording of Kubernetes' `field.Error`, and their aggregate.

use std::fmt;

use thiserror::Error;

/// The class of a violation, as Kubernetes names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A required field is missing.
    Required,
    /// A field has a bad value.
    Invalid,
    /// A field may not be set (or changed) in this context.
    Forbidden,
    /// A list has too many items.
    TooMany,
    /// A value repeats where values must be unique.
    Duplicate,
    /// A value is not one of the allowed ones.
    NotSupported,
    /// A reference names something that does not exist.
    NotFound,
}

impl ErrorKind {
    /// The phrase Kubernetes prints for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::Forbidden => "Forbidden",
            Self::TooMany => "Too many",
            Self::Duplicate => "Duplicate value",
            Self::NotSupported => "Unsupported value",
            Self::NotFound => "Not found",
        }
    }
}

/// One violation: where, what kind, the offending value (already rendered) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.resourceGroups[0].flavors[1].resources`.
    pub field: String,
    /// Kind of violation.
    pub kind: ErrorKind,
    /// The offending value as Kubernetes renders it (strings quoted), when the kind shows one.
    pub value: Option<String>,
    /// Why the value is wrong; may be empty (e.g. for Duplicate).
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A rule on the whole object has no path; Kubernetes prints it as `<nil>`.
        let field = if self.field.is_empty() {
            "<nil>"
        } else {
            &self.field
        };
        write!(f, "{field}: {}", self.kind.as_str())?;
        // Kubernetes never prints the value of Required and Forbidden errors.
        if let Some(v) = &self.value
            && !matches!(self.kind, ErrorKind::Required | ErrorKind::Forbidden)
        {
            write!(f, ": {v}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

/// Every violation found in one object, displayed like the API server's Invalid status message.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{kind} {name:?} is invalid: {}", join(.errors))]
pub struct ValidationErrors {
    /// Kind of the object.
    pub kind: String,
    /// metadata.name of the object (may be empty).
    pub name: String,
    /// The violations, in the order found; never empty.
    pub errors: Vec<FieldError>,
}

impl ValidationErrors {
    /// Whether some violation sits at `field` with `message` (a convenience for callers and tests).
    pub fn has(&self, field: &str, message: &str) -> bool {
        self.errors
            .iter()
            .any(|e| e.field == field && e.message == message)
    }

    /// The violations at `field`.
    pub fn at(&self, field: &str) -> Vec<&FieldError> {
        self.errors.iter().filter(|e| e.field == field).collect()
    }
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Renders a string value the way Go's `%q` does for plain text.
pub fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// A JSON path under construction.
#[derive(Clone, Debug)]
pub struct Path(String);

impl Path {
    /// A root path such as `spec`.
    pub fn new(root: &str) -> Self {
        Self(root.to_owned())
    }

    /// The path of a child field.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// The path of a list item.
    pub fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }

    /// The path of a map entry.
    pub fn key(&self, k: &str) -> Self {
        Self(format!("{}[{k}]", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Collects violations while an object is checked.
#[derive(Debug, Default)]
pub struct Errors(pub Vec<FieldError>);

impl Errors {
    fn push(&mut self, path: &Path, kind: ErrorKind, value: Option<String>, message: String) {
        self.0.push(FieldError {
            field: path.as_str().to_owned(),
            kind,
            value,
            message,
        });
    }

    /// A missing required field.
    pub fn required(&mut self, path: &Path, message: impl Into<String>) {
        self.push(path, ErrorKind::Required, None, message.into());
    }

    /// A bad value; `value` is rendered already (use [`quote`] for strings).
    pub fn invalid(&mut self, path: &Path, value: impl Into<String>, message: impl Into<String>) {
        self.push(path, ErrorKind::Invalid, Some(value.into()), message.into());
    }

    /// A bad value Kubernetes does not print (`field.OmitValueType`).
    pub fn invalid_omitted(&mut self, path: &Path, message: impl Into<String>) {
        self.push(path, ErrorKind::Invalid, None, message.into());
    }

    /// A bad string value.
    pub fn invalid_str(&mut self, path: &Path, value: &str, message: impl Into<String>) {
        self.invalid(path, quote(value), message);
    }

    /// A field that may not be set.
    pub fn forbidden(&mut self, path: &Path, message: impl Into<String>) {
        self.push(path, ErrorKind::Forbidden, None, message.into());
    }

    /// A list longer than `max`.
    pub fn too_many(&mut self, path: &Path, actual: usize, max: usize) {
        self.push(
            path,
            ErrorKind::TooMany,
            Some(actual.to_string()),
            format!("must have at most {max} items"),
        );
    }

    /// A repeated value.
    pub fn duplicate(&mut self, path: &Path, value: impl Into<String>) {
        self.push(
            path,
            ErrorKind::Duplicate,
            Some(value.into()),
            String::new(),
        );
    }

    /// A repeated value with an explanation.
    pub fn duplicate_with(&mut self, path: &Path, value: impl Into<String>, message: &str) {
        self.push(
            path,
            ErrorKind::Duplicate,
            Some(value.into()),
            message.to_owned(),
        );
    }

    /// A value outside `allowed`.
    pub fn not_supported(&mut self, path: &Path, value: &str, allowed: &[&str]) {
        let list = allowed
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(", ");
        self.push(
            path,
            ErrorKind::NotSupported,
            Some(quote(value)),
            format!("supported values: {list}"),
        );
    }

    /// A reference to something that does not exist.
    pub fn not_found(&mut self, path: &Path, value: &str) {
        self.push(path, ErrorKind::NotFound, Some(quote(value)), String::new());
    }

    /// A field changed although it is immutable.
    pub fn immutable(&mut self, path: &Path, value: impl Into<String>, message: &str) {
        self.invalid(path, value, message);
    }

    /// Checks a list's length against `min..=max` the way the CRD schema does.
    pub fn items(&mut self, path: &Path, len: usize, min: usize, max: usize) {
        if len < min {
            self.invalid(
                path,
                len.to_string(),
                format!("should have at least {min} items"),
            );
        } else if len > max {
            self.too_many(path, len, max);
        }
    }

    /// Checks a string's length against `max` the way the CRD schema does.
    pub fn max_len(&mut self, path: &Path, value: &str, max: usize) {
        if value.chars().count() > max {
            self.invalid_str(
                path,
                value,
                format!("must be no more than {max} characters"),
            );
        }
    }

    /// Checks an integer against a minimum the way the CRD schema does.
    pub fn minimum(&mut self, path: &Path, value: i64, min: i64) {
        if value < min {
            self.invalid(
                path,
                value.to_string(),
                format!("should be greater than or equal to {min}"),
            );
        }
    }

    /// The result for an object of `kind` named `name`.
    pub fn finish(self, kind: &str, name: &str) -> Result<(), ValidationErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors {
                kind: kind.to_owned(),
                name: name.to_owned(),
                errors: self.0,
            })
        }
    }
}
