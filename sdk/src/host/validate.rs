//! Validation of a `PolicyModule` object, for the admission webhook and `sluice policy push`.

use std::time::Duration;

use super::{LoadError, ModuleKind, ModuleLimits, PolicyHost, sha256_hex};
use crate::sluice::policy_module::{PolicyKind, PolicyModule, PolicyModuleSpec};

/// The host limits a PolicyModule asks for.
pub fn limits_of(spec: &PolicyModuleSpec) -> ModuleLimits {
    ModuleLimits {
        deadline: spec
            .deadline_ms
            .map(|ms| Duration::from_millis(u64::from(ms))),
        memory_limit: spec
            .memory_limit_bytes
            .map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
    }
}

/// The host's module kind of a PolicyModule kind.
pub fn kind_of(kind: PolicyKind) -> ModuleKind {
    match kind {
        PolicyKind::Placement => ModuleKind::Placement,
        PolicyKind::Fairness => ModuleKind::Fairness,
        PolicyKind::PreemptionCost => ModuleKind::PreemptionCost,
    }
}

/// Validates a PolicyModule: exactly one source of bytes, the sha256 matches, the config is JSON,
/// limits are in range, and the module compiles, imports nothing forbidden, implements the world
/// of `spec.kind` and accepts its config in `init`. `config_map_bytes` are the bytes a
/// `configMapRef` points at, when the caller could read them. Returns the module bytes, or a
/// message naming the object and the field.
pub fn validate_policy_module(
    host: &PolicyHost,
    pm: &PolicyModule,
    config_map_bytes: Option<&[u8]>,
) -> Result<Vec<u8>, String> {
    let name = pm.metadata.name.as_deref().unwrap_or("<unnamed>");
    let err = |field: &str, msg: String| format!("PolicyModule {name}: {field}: {msg}");
    let spec = &pm.spec;
    let (field, bytes) = match (&spec.module, &spec.config_map_ref) {
        (Some(m), None) => ("spec.module", m.0.clone()),
        (None, Some(r)) => match config_map_bytes {
            Some(b) => ("spec.configMapRef", b.to_vec()),
            None => {
                return Err(err(
                    "spec.configMapRef",
                    format!(
                        "binaryData key {:?} of ConfigMap {}/{} not found",
                        r.key, r.namespace, r.name
                    ),
                ));
            }
        },
        (Some(_), Some(_)) => {
            return Err(err(
                "spec.module",
                "set either spec.module or spec.configMapRef, not both".into(),
            ));
        }
        (None, None) => {
            return Err(err(
                "spec.module",
                "one of spec.module or spec.configMapRef is required".into(),
            ));
        }
    };
    if bytes.is_empty() {
        return Err(err(field, "the module is empty".into()));
    }
    let want = spec.sha256.trim();
    if want.len() != 64
        || !want
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(err(
            "spec.sha256",
            "must be 64 lower-case hex digits".into(),
        ));
    }
    let got = sha256_hex(&bytes);
    if got != want {
        return Err(err(
            "spec.sha256",
            format!("is {want} but the module's bytes hash to {got}"),
        ));
    }
    let config = spec.config.clone().unwrap_or_default();
    if !config.trim().is_empty()
        && let Err(e) = serde_json::from_str::<serde_json::Value>(&config)
    {
        return Err(err("spec.config", format!("not JSON: {e}")));
    }
    if let Some(ms) = spec.deadline_ms
        && !(1..=10_000).contains(&ms)
    {
        return Err(err("spec.deadlineMs", format!("{ms} is outside 1..=10000")));
    }
    host.validate(kind_of(spec.kind), &bytes, &config, limits_of(spec))
        .map_err(|e| match e {
            LoadError::InitRejected(m) => {
                err("spec.config", format!("the module's init refused it: {m}"))
            }
            LoadError::Limits(m) => err(
                if spec.memory_limit_bytes.is_some() {
                    "spec.memoryLimitBytes"
                } else {
                    "spec.deadlineMs"
                },
                m,
            ),
            LoadError::WorldMismatch { .. } => err("spec.kind", e.to_string()),
            other => err(field, other.to_string()),
        })?;
    Ok(bytes)
}
