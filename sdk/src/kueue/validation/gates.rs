//! The `kueue.x-k8s.io/admission-gated-by` annotation of Workloads (AdmissionGatedBy gate, beta and on in 0.19).

use super::errors::{Errors, Path};
use super::names;
use crate::kueue::labels::ADMISSION_GATED_BY_ANNOTATION;

const MAX_GATE_LEN: usize = 63;

fn path() -> Path {
    Path::new("metadata")
        .child("annotations")
        .key(ADMISSION_GATED_BY_ANNOTATION)
}

/// Splits the comma-separated gate list, trimming blanks; blank text is no gates.
fn parse(s: &str) -> Vec<&str> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    s.split(',').map(str::trim).collect()
}

fn is_http_path(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c))
}

/// Checks the annotation's value: non-empty, unique, domain-prefixed gate names of at most 63 characters.
pub fn format(errs: &mut Errors, value: &str) {
    let path = path();
    let mut seen = Vec::new();
    for gate in parse(value) {
        if gate.is_empty() {
            errs.invalid_str(&path, value, "cannot contain empty gate names");
            continue;
        }
        if seen.contains(&gate) {
            errs.invalid_str(&path, value, format!("duplicate gate name: {gate}"));
            continue;
        }
        seen.push(gate);
        match gate.split_once('/') {
            Some((host, rest)) if !host.is_empty() && !rest.is_empty() => {
                names::check(errs, &path, host, names::dns_subdomain);
                if !is_http_path(rest) {
                    errs.invalid_str(
                        &path,
                        rest,
                        "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
                    );
                }
            }
            _ => errs.invalid_str(
                &path,
                gate,
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            ),
        }
        if gate.len() > MAX_GATE_LEN {
            errs.invalid(
                &path,
                "\"\"",
                format!("may not be more than {MAX_GATE_LEN} bytes"),
            );
        }
    }
}

/// Checks an update: gates can only be removed, never added after creation.
pub fn update(errs: &mut Errors, old: Option<&str>, new: Option<&str>) {
    let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
    let path = path();
    if old.is_empty() && !new.is_empty() {
        errs.forbidden(&path, "cannot add admission gate after creation");
    }
    if !old.is_empty() && !new.is_empty() {
        let old_gates = parse(old);
        if parse(new).iter().any(|g| !old_gates.contains(g)) {
            errs.forbidden(&path, "can only remove gates, not add new ones");
        }
    }
}
