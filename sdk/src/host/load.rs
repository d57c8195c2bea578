//! Checks made before a module is instantiated: no native code, only granted imports.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::LoadError;

/// Import name prefixes a module may have: the WASI interfaces Rust's std on `wasm32-wasip2`
/// imports even in a pure component. All are satisfied by an empty, locked-down WASI context.
pub const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "wasi:cli/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
];

/// Rejects precompiled native code and anything that is neither a WebAssembly binary nor text.
pub(crate) fn check_bytes(bytes: &[u8]) -> Result<(), LoadError> {
    // `.cwasm` files are ELF objects; wasmtime would only load them through `deserialize`, which
    // the host never calls, but a clear message beats a parse error.
    if bytes.starts_with(b"\x7fELF") {
        return Err(LoadError::Precompiled);
    }
    if bytes.starts_with(b"\0asm") {
        // Component binaries carry layer 1 in the upper half of the version field.
        if bytes.get(6..8) != Some(&[1, 0]) {
            return Err(LoadError::Compile(
                "a core WebAssembly module, not a component: build for wasm32-wasip2".into(),
            ));
        }
        return Ok(());
    }
    if std::str::from_utf8(bytes).is_ok() {
        // WebAssembly text (used by tests and fixtures); wasmtime parses it.
        return Ok(());
    }
    Err(LoadError::Compile(
        "not a WebAssembly component (bad magic number)".into(),
    ))
}

/// Version of the `sluice:policy` package this host implements (`sdk/wit/policy.wit`).
pub const CONTRACT_VERSION: &str = "0.2.0";

/// Earlier versions whose modules still load: 0.1.0's placement world lacks `score-delta` (such modules are sent
/// every row on every call); its fairness and preemption-cost worlds are the current ones.
pub const OLDER_CONTRACT_VERSIONS: &[&str] = &["0.1.0"];

/// The contract's own type-only interfaces, of every version that loads, which a component imports for the
/// types its exports use; they carry no functions, so the host defines them as empty instances.
pub const TYPE_INTERFACES: &[&str] = &[
    "sluice:policy/placement-types@0.2.0",
    "sluice:policy/fairness-types@0.2.0",
    "sluice:policy/preemption-cost-types@0.2.0",
    "sluice:policy/placement-types@0.1.0",
    "sluice:policy/fairness-types@0.1.0",
    "sluice:policy/preemption-cost-types@0.1.0",
];

/// Rejects a component whose imports go beyond [`ALLOWED_IMPORT_PREFIXES`] and the contract's type-only
/// interfaces, naming the first, or that was built against a contract version this host does not load.
/// Returns the contract version its imports carry (None when it imports none of the contract's interfaces).
pub(crate) fn check_imports(
    engine: &Engine,
    component: &Component,
) -> Result<Option<String>, LoadError> {
    let ty = component.component_type();
    let mut version: Option<String> = None;
    for (name, item) in ty.imports(engine) {
        if ALLOWED_IMPORT_PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let types_only = match &item.ty {
            ComponentItem::ComponentInstance(i) => i
                .exports(engine)
                .all(|(_, e)| matches!(e.ty, ComponentItem::Type(_))),
            _ => false,
        };
        if let Some(rest) = name.strip_prefix("sluice:policy/")
            && types_only
        {
            let v = rest.rsplit_once('@').map_or("", |(_, v)| v);
            if v != CONTRACT_VERSION && !OLDER_CONTRACT_VERSIONS.contains(&v) {
                return Err(LoadError::OtherContract(format!("sluice:policy@{v}")));
            }
            if version.as_deref().is_some_and(|seen| seen != v) {
                return Err(LoadError::OtherContract(format!(
                    "two versions of sluice:policy ({} and {v})",
                    version.unwrap_or_default()
                )));
            }
            version = Some(v.to_string());
            continue;
        }
        return Err(LoadError::ForbiddenImport(name.to_string()));
    }
    Ok(version)
}
