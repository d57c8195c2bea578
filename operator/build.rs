//! Builds the shipped policy modules (`policies-wasm/`) for `wasm32-wasip2` so that the `sluice`
//! binary embeds them (`include_bytes!` in `src/policy/embedded.rs`): `cargo build` alone is
//! enough on a fresh clone.
//!
//! The nested cargo gets its own target directory (`<target>/policies-wasm`, shared by all profiles) and an environment cleared of the
//! outer build's variables (RUSTFLAGS, wrappers such as clippy-driver, CARGO_* of this package),
//! which would otherwise leak host-only flags into the WebAssembly build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates built, as (package, file stem).
const MODULES: &[(&str, &str)] = &[
    ("sluice-policy-topology-pack", "sluice_policy_topology_pack"),
    ("sluice-policy-spread", "sluice_policy_spread"),
    ("sluice-policy-fair-credits", "sluice_policy_fair_credits"),
    ("sluice-policy-drs", "sluice_policy_drs"),
    ("sluice-policy-anti-thrash", "sluice_policy_anti_thrash"),
];

/// Environment variables passed through to the nested cargo; everything else is dropped.
const KEEP: &[&str] = &[
    "PATH",
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CARGO_NET_OFFLINE",
    "CARGO_REGISTRIES_CRATES_IO_PROTOCOL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "TMPDIR",
];

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().unwrap_or(&manifest_dir).to_path_buf();
    for dir in [
        "policies-wasm",
        "sdk/src/policy",
        "sdk/src/guest",
        "sdk/wit",
        "sdk/Cargo.toml",
        "sdk/src/lib.rs",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let out = PathBuf::from(env("OUT_DIR"));
    // One WebAssembly target directory for every profile (check, debug, release) of this target
    // directory, so the modules are compiled once: OUT_DIR is <target>/<profile>/build/<pkg>/out.
    let target_dir = out
        .ancestors()
        .nth(4)
        .map_or_else(|| out.join("wasm-target"), |t| t.join("policies-wasm"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.env_clear();
    for k in KEEP {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    cmd.env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_INCREMENTAL", "0")
        // Small modules: no debug info, symbols stripped (the component type is kept).
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .current_dir(&root)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"));
    for (pkg, _) in MODULES {
        cmd.args(["-p", pkg]);
    }
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("sluice-operator build script: cannot run cargo to build the policy modules: {e}")
    });
    if !status.success() {
        panic!(
            "sluice-operator build script: building policies-wasm/ for wasm32-wasip2 failed ({status}); \
             is the target installed (`rustup target add wasm32-wasip2`; rust-toolchain.toml lists it)?"
        );
    }
    let built = target_dir.join("wasm32-wasip2").join("release");
    for (_, stem) in MODULES {
        let from = built.join(format!("{stem}.wasm"));
        let to = out.join(format!("{stem}.wasm"));
        copy(&from, &to);
    }
}

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("sluice-operator build script: {k} is not set"))
}

fn copy(from: &Path, to: &Path) {
    if let Err(e) = std::fs::copy(from, to) {
        panic!(
            "sluice-operator build script: copying {} to {}: {e}",
            from.display(),
            to.display()
        );
    }
}
