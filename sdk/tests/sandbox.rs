//! Sandbox tests: hand-written components that loop, grow memory without bound, trap, return the
//! wrong number of scores (or of preemption-cost answers) or import a socket. Each call must end in a classed `PolicyError` with a
//! clear message (the operator then falls back to the built-in policy), never in a hang or crash.
#![cfg(feature = "host")]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sluice_sdk::harness::{Harness, NodeBatchBuilder, NodeSpec, PodSetBuilder};
use sluice_sdk::host::validate::validate_policy_module;
use sluice_sdk::host::{HostConfig, LoadError, ModuleLimits, sha256_hex};
use sluice_sdk::policy::{
    CandidateBatch, NodeBatch, PlacementPolicy, PodSetRequest, PolicyFailure, PreemptionCostPolicy,
};
use sluice_sdk::sluice::policy_module::{PolicyKind, PolicyModule, PolicyModuleSpec};

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        Harness::with_config(HostConfig {
            pool_instances: 16,
            ..HostConfig::default()
        })
        .expect("host starts")
    })
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/wat/{name}.wat", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn input() -> (PodSetRequest, NodeBatch) {
    let nodes = NodeBatchBuilder::new(&["rack"])
        .node(NodeSpec::gpu("a", 8, 8).path(&["r1"]))
        .node(NodeSpec::gpu("b", 8, 4).path(&["r1"]))
        .node(NodeSpec::gpu("c", 8, 0).path(&["r2"]))
        .build();
    (
        PodSetBuilder::new("ns/job", 2).gpus_per_pod(4).build(),
        nodes,
    )
}

#[test]
fn infinite_loop_ends_at_the_deadline() {
    let h = harness().clone().limits(ModuleLimits {
        deadline: Some(Duration::from_millis(20)),
        memory_limit: None,
    });
    let p = h.placement(&fixture("infinite_loop"), "").expect("loads");
    let (req, nodes) = input();
    let t = Instant::now();
    let err = p.score(&req, &nodes).expect_err("must not return scores");
    assert_eq!(err.failure, PolicyFailure::Deadline, "{err}");
    assert!(err.message.contains("deadline of 20ms"), "{err}");
    // Generous bound: the point is that the call ends, on a loaded shared machine.
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    // The instance was discarded; the next call is a fresh one and fails the same way.
    let err = p.score(&req, &nodes).expect_err("still loops");
    assert_eq!(err.failure, PolicyFailure::Deadline);
}

#[test]
fn unbounded_memory_growth_stops_at_the_cap() {
    let h = harness().clone().limits(ModuleLimits {
        deadline: Some(Duration::from_secs(2)),
        memory_limit: Some(48 << 20),
    });
    let p = h.placement(&fixture("memory_growth"), "").expect("loads");
    let (req, nodes) = input();
    let err = p.score(&req, &nodes).expect_err("must not return scores");
    assert_eq!(err.failure, PolicyFailure::Memory, "{err}");
    assert!(
        err.message.contains("memory cap of 50331648 bytes"),
        "{err}"
    );
}

#[test]
fn trap_is_reported_as_a_trap() {
    let p = harness().placement(&fixture("trap"), "").expect("loads");
    let (req, nodes) = input();
    let err = p.score(&req, &nodes).expect_err("must not return scores");
    assert_eq!(err.failure, PolicyFailure::Trap, "{err}");
    assert!(err.message.contains("unreachable"), "{err}");
}

#[test]
fn wrong_result_length_is_malformed() {
    let p = harness()
        .placement(&fixture("wrong_length"), "")
        .expect("loads");
    let (req, nodes) = input();
    let err = p
        .score(&req, &nodes)
        .expect_err("one score for three nodes");
    assert_eq!(err.failure, PolicyFailure::Malformed, "{err}");
    assert!(
        err.message
            .contains("returned 1 scores and 1 pod caps for 3 nodes"),
        "{err}"
    );
}

/// A module built against a contract version this host does not know (its type interfaces carry `@0.3.0`) is
/// refused at load with both versions named, not with a world mismatch about some export.
#[test]
fn a_module_built_against_an_unknown_contract_is_refused_naming_both_versions() {
    let old = r#"(component
      (import "sluice:policy/placement-types@0.3.0" (instance
        (type $m (enum "none" "required" "preferred" "unconstrained"))
        (export "topology-mode" (type (eq $m))))))"#;
    let err = harness()
        .placement(old.as_bytes(), "")
        .expect_err("must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains("built against sluice:policy@0.3.0")
            && msg.contains(&format!(
                "sluice:policy@{}",
                sluice_sdk::host::CONTRACT_VERSION
            )),
        "{msg}"
    );
    assert!(
        matches!(
            err,
            sluice_sdk::harness::HarnessError::Load {
                error: LoadError::OtherContract(_),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn forbidden_import_is_refused_at_load_naming_it() {
    let err = harness()
        .placement(&fixture("forbidden_import"), "")
        .expect_err("must be refused");
    let msg = err.to_string();
    assert!(msg.contains("wasi:sockets/tcp@0.2.0"), "{msg}");
    assert!(
        matches!(
            err,
            sluice_sdk::harness::HarnessError::Load {
                error: LoadError::ForbiddenImport(_),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn precompiled_native_code_is_refused() {
    let mut elf = b"\x7fELF".to_vec();
    elf.extend_from_slice(&[2, 1, 1, 0, 0, 0, 0, 0]);
    let err = harness().placement(&elf, "").expect_err("never loaded");
    assert!(
        matches!(
            err,
            sluice_sdk::harness::HarnessError::Load {
                error: LoadError::Precompiled,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_fixture_of_the_wrong_world_is_refused() {
    let err = harness()
        .fairness(&fixture("trap"), "")
        .expect_err("a placement component is not a fairness module");
    assert!(err.to_string().contains("sluice:policy/fairness"), "{err}");
}

#[test]
fn same_bytes_compile_once() {
    // A host of its own: the shared one compiles other tests' modules concurrently.
    let h = Harness::with_config(HostConfig {
        pool_instances: 4,
        ..HostConfig::default()
    })
    .expect("host starts");
    let bytes = fixture("wrong_length");
    let _a = h.placement(&bytes, "").expect("loads");
    assert_eq!(h.host().compiled_modules(), 1);
    let _b = h.placement(&bytes, "").expect("loads");
    assert_eq!(h.host().compiled_modules(), 1);
}

#[test]
fn init_is_not_held_to_the_call_deadline() {
    // Instantiation and init run once per instance, outside any decision: a module whose init takes longer than
    // its 5 ms call deadline still loads (it was refused by `sluice policy push` and the webhook on a busy
    // machine), while its calls keep the deadline.
    let h = harness().clone().limits(ModuleLimits {
        deadline: Some(Duration::from_millis(5)),
        memory_limit: None,
    });
    let t = Instant::now();
    h.placement(&fixture("slow_init"), "")
        .expect("a slow but finite init loads");
    eprintln!("slow init loaded in {:?}", t.elapsed());
}

fn candidates(n: usize) -> CandidateBatch {
    let mut b = CandidateBatch {
        preemptor_priority: 10,
        ..CandidateBatch::default()
    };
    for i in 0..n {
        b.push(format!("ns/w{i}"), "cq", 0, 60.0, 30.0, 1, 2);
    }
    b
}

#[test]
fn preemption_cost_answers_cross_the_boundary_and_a_wrong_length_is_malformed() {
    let p = harness()
        .preemption_cost(&fixture("preemption_wrong_length"), "")
        .expect("loads");
    // One candidate: the fixed answer fits, and comes back as the module wrote it.
    let a = p
        .costs(&candidates(1))
        .expect("one answer for one candidate");
    assert_eq!((a.boost, a.protected), (vec![7], vec![true]));
    let err = p
        .costs(&candidates(3))
        .expect_err("one answer for three candidates");
    assert_eq!(err.failure, PolicyFailure::Malformed, "{err}");
    assert!(
        err.message
            .contains("returned 1 boosts and 1 protection flags for 3 candidates"),
        "{err}"
    );
    // A malformed answer leaves the instance sound: the next call is answered again.
    assert!(p.costs(&candidates(1)).is_ok());
}

#[test]
fn worlds_are_told_apart_both_ways() {
    let err = harness()
        .preemption_cost(&fixture("trap"), "")
        .expect_err("a placement component is not a preemption-cost module");
    assert!(
        err.to_string().contains("sluice:policy/preemption-cost"),
        "{err}"
    );
    let err = harness()
        .placement(&fixture("preemption_wrong_length"), "")
        .expect_err("a preemption-cost component is not a placement module");
    assert!(err.to_string().contains("sluice:policy/placement"), "{err}");
}

fn policy_module(kind: PolicyKind, bytes: &[u8]) -> PolicyModule {
    PolicyModule::new(
        "costs",
        PolicyModuleSpec {
            kind,
            sha256: sha256_hex(bytes),
            module: Some(sluice_sdk::k8s::ByteString(bytes.to_vec())),
            ..PolicyModuleSpec::default()
        },
    )
}

#[test]
fn policy_module_validation_checks_the_preemption_cost_world() {
    let host = harness().host();
    let costs = fixture("preemption_wrong_length");
    validate_policy_module(
        host,
        &policy_module(PolicyKind::PreemptionCost, &costs),
        None,
    )
    .expect("a preemption-cost module declared as one is valid");
    let err = validate_policy_module(host, &policy_module(PolicyKind::Placement, &costs), None)
        .expect_err("declared as placement");
    assert!(
        err.starts_with("PolicyModule costs: spec.kind: the module does not implement the sluice:policy/placement world"),
        "{err}"
    );
    let err = validate_policy_module(
        host,
        &policy_module(PolicyKind::PreemptionCost, &fixture("trap")),
        None,
    )
    .expect_err("a placement module declared as preemption-cost");
    assert!(
        err.starts_with(
            "PolicyModule costs: spec.kind: the module does not implement the sluice:policy/preemption-cost world"
        ),
        "{err}"
    );
}
