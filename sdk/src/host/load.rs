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

/// The contract's own type-only interfaces, which a component imports for the types its exports
/// use; they carry no functions, so the host defines them as empty instances.
pub const TYPE_INTERFACES: &[&str] = &[
    "sluice:policy/placement-types@0.1.0",
    "sluice:policy/fairness-types@0.1.0",
    "sluice:policy/preemption-cost-types@0.1.0",
];

/// Rejects a component whose imports go beyond [`ALLOWED_IMPORT_PREFIXES`] and the contract's
/// type-only interfaces, naming the first.
pub(crate) fn check_imports(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
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
        if name.starts_with("sluice:policy/") && types_only {
            continue;
        }
        return Err(LoadError::ForbiddenImport(name.to_string()));
    }
    Ok(())
}
