//! AdmissionCheck: controller name (immutable) and the parameters reference.

use super::errors::{Errors, Path, ValidationErrors, quote};
use super::names;
use crate::kueue::v1beta2::AdmissionCheck;

const KIND: &str = "AdmissionCheck";

fn is_kind(s: &str) -> bool {
    // Kueue's pattern for kinds is case-insensitive: a letter, then letters, digits or '-', not ending in '-'.
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

fn check(errs: &mut Errors, ac: &AdmissionCheck) {
    names::object_name(errs, ac.metadata.name.as_deref());
    let spec = Path::new("spec");
    let cn = spec.child("controllerName");
    if ac.spec.controller_name.is_empty() {
        errs.required(&cn, "");
    }
    errs.max_len(&cn, &ac.spec.controller_name, 253);
    if let Some(p) = &ac.spec.parameters {
        let pp = spec.child("parameters");
        let fields = [
            ("apiGroup", &p.api_group, 253),
            ("kind", &p.kind, 63),
            ("name", &p.name, 63),
        ];
        for (field, value, max) in fields {
            let path = pp.child(field);
            if value.is_empty() {
                errs.required(&path, "");
                continue;
            }
            errs.max_len(&path, value, max);
            let ok = match field {
                "apiGroup" => names::dns_subdomain(value).is_empty(),
                "kind" => is_kind(value),
                _ => names::dns_label(value).is_empty(),
            };
            if !ok {
                let pattern = match field {
                    "apiGroup" => {
                        "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
                    }
                    "kind" => "^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$",
                    _ => "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                };
                errs.invalid_str(&path, value, format!("should match '{pattern}'"));
            }
        }
    }
}

/// Validates an AdmissionCheck for creation.
pub fn validate_admission_check(ac: &AdmissionCheck) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, ac);
    errs.finish(KIND, ac.metadata.name.as_deref().unwrap_or_default())
}

/// Validates an update: the new object, and spec.controllerName stays.
pub fn validate_admission_check_update(
    old: &AdmissionCheck,
    new: &AdmissionCheck,
) -> Result<(), ValidationErrors> {
    let mut errs = Errors::default();
    check(&mut errs, new);
    if old.spec.controller_name != new.spec.controller_name {
        errs.immutable(
            &Path::new("spec").child("controllerName"),
            quote(&new.spec.controller_name),
            "field is immutable",
        );
    }
    errs.finish(KIND, new.metadata.name.as_deref().unwrap_or_default())
}
