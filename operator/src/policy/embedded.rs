//! The shipped policy modules, built by `build.rs` from `policies-wasm/` and embedded in the binary.

use sluice_sdk::host::ModuleKind;

/// `topology-pack` (placement).
pub const TOPOLOGY_PACK: &[u8] = include_bytes!(concat!(
    env!("OUT_DIR"),
    "/sluice_policy_topology_pack.wasm"
));
/// `spread` (placement).
pub const SPREAD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sluice_policy_spread.wasm"));
/// `fair-credits` (fairness).
pub const FAIR_CREDITS: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/sluice_policy_fair_credits.wasm"));
/// `drs` (fairness; the built-in DRS reimplemented as a module).
pub const DRS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sluice_policy_drs.wasm"));

/// `anti-thrash` (preemption cost).
pub const ANTI_THRASH: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/sluice_policy_anti_thrash.wasm"));

/// Names of the embedded modules.
pub const NAMES: &[&str] = &[
    "topology-pack",
    "spread",
    "fair-credits",
    "drs",
    "anti-thrash",
];

/// The kind and bytes of an embedded module.
pub fn by_name(name: &str) -> Option<(ModuleKind, &'static [u8])> {
    match name {
        "topology-pack" => Some((ModuleKind::Placement, TOPOLOGY_PACK)),
        "spread" => Some((ModuleKind::Placement, SPREAD)),
        "fair-credits" => Some((ModuleKind::Fairness, FAIR_CREDITS)),
        "drs" => Some((ModuleKind::Fairness, DRS)),
        "anti-thrash" => Some((ModuleKind::PreemptionCost, ANTI_THRASH)),
        _ => None,
    }
}
