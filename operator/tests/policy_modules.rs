//! The shipped policy modules (embedded WebAssembly) and the operator's guards around modules:
//! harness cases, topology-pack vs spread on the same input, WebAssembly vs native (topology-pack,
//! anti-thrash), the DRS module against the built-in DRS, preemption-cost selection, and the
//! fallback, counting and Degraded marking of failing modules.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sluice_operator::engine::{
    DrsPolicy, EngineConfig, EngineFairness, FairSharingConfig, OrderKey, ResourceBorrowing, Share,
    ShareInput,
};
use sluice_operator::output::OutputFormat;
use sluice_operator::policy::{
    GuardedFairness, LoadedModule, ModuleHealth, PolicyRegistry, Selection, embedded,
};
use sluice_operator::sim::{self, Simulation};
use sluice_sdk::harness::{self, Harness, PodSetBuilder, synthetic_cluster};
use sluice_sdk::host::{HostConfig, ModuleKind, ModuleLimits, PolicyHost, StateSends};
use sluice_sdk::policy::fairness::{
    FairnessPolicy as ModulePolicy, OrderBatch, ShareBatch, Shares,
};
use sluice_sdk::policy::{PlacementPolicy, PolicyError, PolicyFailure, PreemptionCostPolicy};

fn host() -> PolicyHost {
    static H: OnceLock<PolicyHost> = OnceLock::new();
    H.get_or_init(|| {
        // Generous deadline: debug builds on a loaded machine; deadlines are tested separately.
        PolicyHost::new(HostConfig {
            pool_instances: 24,
            default_deadline: Duration::from_secs(2),
            ..HostConfig::default()
        })
        .expect("host starts")
    })
    .clone()
}

fn registry(degrade_after: u32) -> PolicyRegistry {
    PolicyRegistry::new(
        host(),
        degrade_after,
        Arc::new(sluice_policy_topology_pack::Policy::default()),
    )
}

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn shipped_modules_pass_their_harness_cases() {
    let h = Harness::with_config(HostConfig {
        pool_instances: 8,
        default_deadline: Duration::from_secs(2),
        ..HostConfig::default()
    })
    .expect("host");
    for name in [
        "topology-pack",
        "spread",
        "fair-credits",
        "drs",
        "anti-thrash",
    ] {
        let (_, bytes) = embedded::by_name(name).expect("embedded");
        let path = root().join("policies-wasm").join(name).join("cases.yaml");
        let text = std::fs::read_to_string(&path).expect("cases file");
        let file = harness::cases::parse(&text).expect("cases parse");
        let results = harness::cases::run(&h, bytes, &file).expect("module loads");
        assert!(!results.is_empty());
        for r in results {
            assert_eq!(r.failure, None, "{name}: {}", r.name);
        }
    }
}

#[test]
fn webassembly_and_native_topology_pack_agree() {
    let nodes = synthetic_cluster(2000);
    let gang = PodSetBuilder::new("team/train", 12)
        .gpus_per_pod(2)
        .nvlink()
        .build();
    let wasm = host()
        .load_placement(
            "topology-pack",
            embedded::TOPOLOGY_PACK,
            "",
            ModuleLimits::default(),
        )
        .expect("loads");
    let native = sluice_policy_topology_pack::Policy::default();
    assert_eq!(
        wasm.score(&gang, &nodes).expect("wasm scores"),
        native.score(&gang, &nodes).expect("native scores")
    );
}

/// A module holding the batch is sent only the changed rows (`score-delta`); its scores stay those of the
/// native policy on the whole batch, through churn, a second flavor's batch in between (another epoch), a new
/// epoch, and a request naming other resources.
#[test]
fn webassembly_sent_only_changed_rows_agrees_with_native() {
    let wasm = host()
        .load_placement(
            "topology-pack",
            embedded::TOPOLOGY_PACK,
            "",
            ModuleLimits::default(),
        )
        .expect("loads");
    let native = sluice_policy_topology_pack::Policy::default();
    let gang = PodSetBuilder::new("team/train", 6)
        .gpus_per_pod(2)
        .nvlink()
        .build();
    let mut nodes = synthetic_cluster(800);
    let mut other = synthetic_cluster(800);
    harness::churn(&mut other, 3, 0);
    // Another shape (4 GPUs per pod) in rounds 3 and 4: the guest, which keeps the last answer of a row-local
    // policy and rescores only the changed rows, must score every row for it, and again when the first
    // shape returns.
    let other_shape = PodSetBuilder::new("team/infer", 2).gpus_per_pod(4).build();
    for round in 0..12 {
        harness::churn(&mut nodes, 37 + round, round);
        let req = if (3..5).contains(&round) {
            &other_shape
        } else {
            &gang
        };
        assert_eq!(
            wasm.score(req, &nodes).expect("wasm scores"),
            native.score(req, &nodes).expect("native scores"),
            "round {round}"
        );
        if round % 4 == 1 {
            assert_eq!(
                wasm.score(&gang, &other).expect("wasm scores"),
                native.score(&gang, &other).expect("native scores"),
                "other batch, round {round}"
            );
        }
        if round == 6 {
            nodes.dynamic_epoch = sluice_sdk::policy::next_dynamic_epoch();
            nodes.changed_rows.clear();
        }
    }
    // A request naming two resources has two entries per `free` row: the module is sent everything again.
    let mut two = gang.clone();
    two.resources.push("cpu".into());
    two.per_pod.push(1000);
    let mut wide = synthetic_cluster(800);
    wide.free = wide.free.iter().flat_map(|&g| [g, 64_000]).collect();
    harness::churn(&mut wide, 5, 1);
    let before = wasm.state_sends();
    assert_eq!(
        wasm.score(&two, &wide).expect("wasm scores"),
        native.score(&two, &wide).expect("native scores")
    );
    // 15 calls. Whole: the first, each switch to the other batch (3) and back (3), the new epoch's first call;
    // the other 7 went as deltas. Then the wide batch, whole.
    assert_eq!(before, StateSends { whole: 8, delta: 7 });
    assert_eq!(wasm.state_sends().whole, 9);
}

/// Modules built against `sluice:policy@0.1.0` (sdk/tests/fixtures/contract-0.1.0: the shipped topology-pack
/// and drs as they were before `score-delta`) still load, and answer as the current builds do: the placement
/// module is sent every row on every call.
#[test]
fn modules_built_against_contract_0_1_0_still_load_and_agree() {
    let fixture = |f: &str| {
        let p = root().join("sdk/tests/fixtures/contract-0.1.0").join(f);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let old = host()
        .load_placement(
            "topology-pack-0.1",
            &fixture("topology_pack.wasm"),
            "",
            ModuleLimits::default(),
        )
        .expect("a 0.1.0 placement module loads");
    assert_eq!(old.contract_version(), "0.1.0");
    let native = sluice_policy_topology_pack::Policy::default();
    let gang = PodSetBuilder::new("team/train", 6)
        .gpus_per_pod(2)
        .nvlink()
        .build();
    let mut nodes = synthetic_cluster(500);
    for round in 0..4 {
        harness::churn(&mut nodes, 11, round);
        assert_eq!(
            old.score(&gang, &nodes).expect("wasm scores"),
            native.score(&gang, &nodes).expect("native scores"),
            "round {round}"
        );
    }
    assert_eq!(old.state_sends(), StateSends { whole: 4, delta: 0 });

    let old = host()
        .load_fairness("drs-0.1", &fixture("drs.wasm"), "", ModuleLimits::default())
        .expect("a 0.1.0 fairness module loads");
    let new = host()
        .load_fairness("drs", embedded::DRS, "", ModuleLimits::default())
        .expect("loads");
    let mut g = Lcg(11);
    for round in 0..50 {
        let mut batch = ShareBatch::default();
        for i in 0..1 + g.next(10) as u32 {
            let rows: Vec<(u32, i64, i64)> = (0..g.next(3) as u32)
                .map(|r| (r, g.next(5000) as i64 + 1, g.next(8000) as i64 - 500))
                .collect();
            batch.push(
                i,
                [0.0, 1.0, 2.5][g.next(3) as usize],
                g.next(4) != 0,
                &rows,
                0.0,
            );
        }
        assert_eq!(
            ModulePolicy::shares(&old, &batch).expect("old answers"),
            ModulePolicy::shares(&new, &batch).expect("new answers"),
            "round {round}"
        );
    }
    // Any other version is refused, naming it.
    let mut bytes = fixture("drs.wasm");
    let name = b"sluice:policy/fairness-types@0.1.0";
    let mut found = 0;
    while let Some(at) = bytes.windows(name.len()).position(|w| w == name) {
        bytes[at + name.len() - 3] = b'9';
        found += 1;
    }
    assert!(found > 0, "the import name is in the binary");
    let e = host()
        .load_fairness("drs-0.9", &bytes, "", ModuleLimits::default())
        .expect_err("refused");
    assert!(e.to_string().contains("sluice:policy@0.9.0"), "{e}");
}

#[test]
fn webassembly_and_native_anti_thrash_agree() {
    let config = r#"{"minRunSeconds": 3000, "boostPerPreemption": 70, "maxBoost": 400}"#;
    let wasm = host()
        .load_preemption_cost(
            "anti-thrash",
            embedded::ANTI_THRASH,
            config,
            ModuleLimits::default(),
        )
        .expect("loads");
    let native = sluice_policy_anti_thrash::Config::parse(config)
        .map(sluice_policy_anti_thrash::AntiThrash::new)
        .expect("config");
    for n in [0, 1, 64, 1024] {
        let batch = sluice_operator::cli::policy::synthetic_candidates(n);
        let w = wasm.costs(&batch).expect("wasm answers");
        assert_eq!(w, native.costs(&batch).expect("native answers"), "{n}");
        if n == 1024 {
            // The synthetic batch exercises both rules, so equality is not two empty answers.
            assert!(w.protected.iter().any(|&p| p) && w.protected.iter().any(|&p| !p));
            assert!(w.boost.contains(&400) && w.boost.contains(&70));
        }
    }
}

#[test]
fn preemption_cost_selection_follows_the_annotation() {
    let mut reg = registry(3);
    reg.load_embedded("anti-thrash", "").expect("loads");
    reg.load_embedded("drs", "").expect("loads");
    let annotated = |key: &str, v: &str| BTreeMap::from([(key.to_string(), v.to_string())]);
    let costs = "sluice.dev/preemption-policy";
    let Ok(Selection::Module(m)) = reg.preemption_cost_for(&annotated(costs, "anti-thrash")) else {
        panic!("anti-thrash is a preemption-cost module");
    };
    let mut batch = sluice_sdk::policy::CandidateBatch::default();
    batch.push("t/a", "cq", 0, 60.0, 60.0, 2, 1);
    let a = m.costs(&batch).expect("answers");
    assert_eq!((a.boost, a.protected), (vec![200], vec![true]));
    assert!(matches!(
        reg.preemption_cost_for(&BTreeMap::new()),
        Ok(Selection::Builtin)
    ));
    let e = reg
        .preemption_cost_for(&annotated(costs, "drs"))
        .expect_err("wrong kind");
    assert_eq!(
        e.to_string(),
        "PolicyModule drs is a fairness module, but sluice.dev/preemption-policy needs a preemption-cost module"
    );
    let e = reg
        .preemption_cost_for(&annotated(costs, "typo"))
        .expect_err("unknown");
    assert_eq!(e.to_string(), "no PolicyModule named \"typo\" is loaded");
    let e = reg
        .placement_for(&annotated("sluice.dev/placement-policy", "anti-thrash"))
        .expect_err("wrong kind");
    assert!(e.to_string().contains("is a preemption-cost module"), "{e}");
    let e = reg
        .fairness_named(["anti-thrash".to_string()])
        .expect_err("wrong kind");
    assert!(e.to_string().contains("is a preemption-cost module"), "{e}");
    let LoadedModule::PreemptionCost(_) =
        reg.load_embedded("anti-thrash", "").expect("same module")
    else {
        panic!("loaded as preemption cost");
    };
    // A config the module refuses is a load error naming the field.
    let e = reg
        .load_embedded("anti-thrash", r#"{"minRunSeconds": -5}"#)
        .expect_err("refused");
    assert!(e.to_string().contains("minRunSeconds"), "{e}");
}

/// A small deterministic generator (no extra dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

#[test]
fn drs_module_gives_the_same_shares_and_orders_as_the_builtin() {
    let module = host()
        .load_fairness("drs", embedded::DRS, "", ModuleLimits::default())
        .expect("loads");
    let guarded = GuardedFairness::new("drs", Arc::new(module), Arc::new(ModuleHealth::new(3)));
    let native = sluice_policy_drs::Drs;
    let names: Vec<String> = (0..16).map(|i| format!("cq-{i}")).collect();
    let mut g = Lcg(7);
    for round in 0..200 {
        let n = 1 + g.next(12) as usize;
        let inputs: Vec<ShareInput<'_>> = (0..n)
            .map(|i| ShareInput {
                name: &names[i],
                weight: [0.0, 0.5, 1.0, 2.0, 3.0][g.next(5) as usize],
                has_parent: g.next(6) != 0,
                borrowing: (0..g.next(4))
                    .map(|r| ResourceBorrowing {
                        resource: r as u32,
                        borrowed: g.next(5000) as i64 + 1,
                        lendable: g.next(8000) as i64 - 500,
                    })
                    .collect(),
                history: 0.0,
            })
            .collect();
        let (mut want, mut got) = (Vec::new(), Vec::new());
        DrsPolicy.shares(&inputs, &mut want);
        guarded.shares(&inputs, &mut got);
        assert_eq!(bits(&want), bits(&got), "round {round}: {inputs:?}");
        // The native crate agrees too.
        let mut batch = ShareBatch::default();
        for (i, s) in inputs.iter().enumerate() {
            let rows: Vec<(u32, i64, i64)> = s
                .borrowing
                .iter()
                .map(|b| (b.resource, b.borrowed, b.lendable))
                .collect();
            batch.push(i as u32, s.weight, s.has_parent, &rows, 0.0);
        }
        let Shares { ratio, .. } = native.shares(&batch).expect("native");
        assert_eq!(
            ratio.iter().map(|r| r.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|s| s.ratio.to_bits()).collect::<Vec<_>>()
        );
        // Orders, with many ties.
        let keys: Vec<OrderKey> = (0..n)
            .map(|_| OrderKey {
                borrowing_on_requested: g.next(3) == 0,
                share: Share {
                    ratio: [0.0, 100.0, 250.0, 1000.0][g.next(4) as usize],
                    weight: [0.0, 1.0, 2.0][g.next(3) as usize],
                    borrowing: g.next(2) == 0,
                },
                priority: g.next(3) as i32,
                timestamp: g.next(4) as i64,
            })
            .collect();
        assert_eq!(
            DrsPolicy.order(&keys),
            guarded.order(&keys),
            "round {round}: {keys:?}"
        );
    }
    assert_eq!(guarded.health().snapshot().failures, BTreeMap::new());
}

fn bits(s: &[Share]) -> Vec<(u64, u64, bool)> {
    s.iter()
        .map(|s| (s.ratio.to_bits(), s.weight.to_bits(), s.borrowing))
        .collect()
}

fn simulate(fairness: Option<Arc<dyn EngineFairness>>) -> String {
    let docs = sim::bundled_example().expect("bundled example");
    let config = EngineConfig {
        fair_sharing: Some(FairSharingConfig::default()),
        ..EngineConfig::default()
    };
    let mut s = Simulation::from_documents_with_fairness(&docs, config, fairness).expect("loads");
    let report = s.run(None, |_, _| {}).expect("runs");
    sim::render_report(&s, &report, OutputFormat::Json)
}

// Minutes in a debug build (the engine asks for shares millions of times); run with
// `cargo test --release -p sluice-operator --test policy_modules -- --ignored`.
#[test]
#[ignore]
fn bundled_example_with_the_drs_module_matches_the_builtin() {
    let module = host()
        .load_fairness("drs", embedded::DRS, "", ModuleLimits::default())
        .expect("loads");
    let health = Arc::new(ModuleHealth::new(3));
    let guarded = Arc::new(GuardedFairness::new(
        "drs",
        Arc::new(module),
        health.clone(),
    ));
    assert_eq!(simulate(None), simulate(Some(guarded)));
    let h = health.snapshot();
    assert!(h.calls > 0, "the module was called");
    assert!(h.failures.is_empty(), "{h:?}");
}

// Minutes in a debug build; run with
// `cargo test --release -p sluice-operator --test policy_modules -- --ignored`.
#[test]
#[ignore]
fn bundled_example_runs_with_fair_credits() {
    let mut reg = registry(5);
    let LoadedModule::Fairness(f) = reg
        .load_embedded(
            "fair-credits",
            r#"{"halfLifeSeconds": 3600, "historyWeight": 0.5}"#,
        )
        .expect("loads")
    else {
        panic!("fair-credits is a fairness module")
    };
    assert_eq!(f.history_half_life(), Some(3600.0));
    let out = simulate(Some(f));
    assert!(out.contains("\"schedulingCycles\""), "{out}");
    let h = reg.health("fair-credits").expect("loaded");
    assert!(h.calls > 0 && h.failures.is_empty(), "{h:?}");
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(root().join("sdk/tests/wat").join(format!("{name}.wat"))).expect("fixture")
}

#[test]
fn failing_placement_modules_fall_back_count_and_degrade() {
    let nodes = synthetic_cluster(64);
    let gang = PodSetBuilder::new("team/train", 4).gpus_per_pod(4).build();
    let builtin = sluice_policy_topology_pack::Policy::default()
        .score(&gang, &nodes)
        .expect("builtin scores");
    for (fixture_name, class, message) in [
        ("infinite_loop", "deadline", "deadline"),
        ("memory_growth", "memory", "memory cap"),
        ("trap", "trap", "unreachable"),
        ("wrong_length", "malformed", "returned 1 scores"),
    ] {
        let mut reg = registry(3);
        let limits = ModuleLimits {
            deadline: Some(Duration::from_millis(if class == "memory" {
                2000
            } else {
                20
            })),
            memory_limit: Some(32 << 20),
        };
        let LoadedModule::Placement(p) = reg
            .load(
                fixture_name,
                ModuleKind::Placement,
                &fixture(fixture_name),
                "",
                limits,
            )
            .expect("loads")
        else {
            panic!("placement")
        };
        for call in 1..=4 {
            // Every decision gets the built-in policy's scores.
            assert_eq!(
                p.score(&gang, &nodes).expect("fallback scores"),
                builtin,
                "{fixture_name} call {call}"
            );
        }
        let h = reg.health(fixture_name).expect("loaded");
        assert_eq!(h.failures.get(class), Some(&3), "{fixture_name}: {h:?}");
        assert_eq!(
            h.failures.get("degraded"),
            Some(&1),
            "4th call skipped: {h:?}"
        );
        assert!(h.degraded);
        assert!(
            h.last_message
                .as_deref()
                .is_some_and(|m| m.contains(message)),
            "{h:?}"
        );
        let status = reg.status(fixture_name).expect("status");
        let degraded = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .expect("condition");
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "RepeatedFailures")
        );
        assert_eq!(status.failures.get(class), Some(&3));
        // Replacing the module (new config here) brings it back with fresh counters.
        reg.load(
            fixture_name,
            ModuleKind::Placement,
            &fixture(fixture_name),
            "{}",
            limits,
        )
        .expect("reloads");
        assert!(!reg.health(fixture_name).expect("loaded").degraded);
    }
}

#[test]
fn a_module_with_a_forbidden_import_is_never_loaded_and_queues_keep_the_builtin() {
    let mut reg = registry(3);
    let err = reg
        .load(
            "sneaky",
            ModuleKind::Placement,
            &fixture("forbidden_import"),
            "",
            ModuleLimits::default(),
        )
        .expect_err("refused");
    assert!(
        err.to_string()
            .contains("imports \"wasi:sockets/tcp@0.2.0\""),
        "{err}"
    );
    let annotations = BTreeMap::from([(
        "sluice.dev/placement-policy".to_string(),
        "sneaky".to_string(),
    )]);
    assert!(
        reg.placement_for(&annotations).is_err(),
        "unknown module: caller uses the built-in"
    );
    assert!(matches!(
        reg.placement_for(&BTreeMap::new()),
        Ok(Selection::Builtin)
    ));
}

#[test]
fn fairness_selection_follows_the_names_given() {
    let mut reg = registry(3);
    reg.load_embedded("drs", "").expect("loads");
    reg.load_embedded("spread", "").expect("loads");
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(matches!(
        reg.fairness_named(names(&["drs", "drs"])),
        Ok(Selection::Module(_))
    ));
    assert!(matches!(
        reg.fairness_named(names(&[])),
        Ok(Selection::Builtin)
    ));
    let e = reg
        .fairness_named(names(&["drs", "other"]))
        .expect_err("conflict");
    assert!(e.to_string().contains("different fairness modules"), "{e}");
    let e = reg
        .fairness_named(names(&["spread"]))
        .expect_err("wrong kind");
    assert!(e.to_string().contains("is a placement module"), "{e}");
}

/// A native fairness module that always fails, to check the guard without WebAssembly.
#[derive(Debug)]
struct Broken;

impl ModulePolicy for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn shares(&self, _: &ShareBatch) -> Result<Shares, PolicyError> {
        Ok(Shares::default())
    }
    fn order(&self, _: &OrderBatch) -> Result<Vec<u32>, PolicyError> {
        Err(PolicyError::new("broken", PolicyFailure::Trap, "boom"))
    }
}

#[test]
fn failing_fairness_falls_back_to_drs_per_decision() {
    let health = Arc::new(ModuleHealth::new(10));
    let g = GuardedFairness::new("broken", Arc::new(Broken), health.clone());
    let input = ShareInput {
        name: "a",
        weight: 1.0,
        has_parent: true,
        borrowing: vec![ResourceBorrowing {
            resource: 0,
            borrowed: 5,
            lendable: 10,
        }],
        history: 0.0,
    };
    let mut got = Vec::new();
    g.shares(std::slice::from_ref(&input), &mut got);
    assert_eq!(
        got,
        vec![DrsPolicy::share(&input)],
        "empty answer is malformed: DRS decides"
    );
    let key = |ratio: f64| OrderKey {
        borrowing_on_requested: false,
        share: Share {
            ratio,
            weight: 1.0,
            borrowing: true,
        },
        priority: 0,
        timestamp: 0,
    };
    assert_eq!(g.order(&[key(5.0), key(1.0)]), vec![1, 0]);
    let h = health.snapshot();
    assert_eq!(h.failures.get("malformed"), Some(&1));
    assert_eq!(h.failures.get("trap"), Some(&1));
}

/// The bundled example under fair sharing with `policy`: (finished workloads, evictions). Kueue's
/// PrioritizePreemptorWorkloads gate is on: without it a requeued victim may take back the quota its preemption
/// freed, and both policies thrash for that reason, which would hide what this compares.
fn fair_sharing_run(policy: Option<Arc<dyn EngineFairness>>) -> (usize, usize) {
    let docs = sim::bundled_example().expect("bundled example");
    let config = EngineConfig {
        fair_sharing: Some(FairSharingConfig::default()),
        prioritize_preemptor_workloads: true,
        ..EngineConfig::default()
    };
    let mut s = Simulation::from_documents_with_fairness(&docs, config, policy).expect("loads");
    let report = s.run(None, |_, _| {}).expect("runs");
    (report.finished, report.evictions.len())
}

/// Usage history orders admission but never picks preemption victims: with it in the victims' shares,
/// fair-credits on the bundled example evicted 4,152 times (DRS: 525), because a queue's past usage does not
/// shrink when one of its workloads is evicted. Without that fault the ratio still swings with placement: over
/// the bundled trace and eight generated from `gen-trace.py` with other seeds it ran from 0.3 to 2.5 (2026-12-07),
/// so the bound is 3x, well under the fault's 8x.
#[test]
fn history_orders_admission_but_does_not_drive_preemption() {
    let native = sluice_policy_fair_credits::FairCredits::new(sluice_policy_fair_credits::Config {
        half_life_seconds: 3600.0,
        history_weight: 0.5,
    })
    .expect("valid config");
    let guarded: Arc<dyn EngineFairness> = Arc::new(GuardedFairness::new(
        "fair-credits",
        Arc::new(native),
        Arc::new(ModuleHealth::new(3)),
    ));
    let (drs_finished, drs_evictions) = fair_sharing_run(None);
    let (finished, evictions) = fair_sharing_run(Some(guarded));
    println!("bundled example: fair-credits {evictions} evictions, DRS {drs_evictions}");
    assert_eq!(finished, drs_finished, "every workload still finishes");
    assert!(
        evictions <= drs_evictions * 3,
        "fair-credits evicted {evictions} times, DRS {drs_evictions}"
    );
}
