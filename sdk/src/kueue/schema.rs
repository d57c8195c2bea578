//! Helpers that shape the generated OpenAPI schemas.

/// Drops the `default` schemars derives from `#[serde(default)]`.
///
/// serde's default is only a lenient reader for fields Kueue always writes; it is not a Kueue default, and an
/// apiserver would otherwise fill such fields (sometimes with invalid values like an empty quantity).
pub(crate) fn no_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}
