//! Placement scoring of 10,000 candidate nodes in one call: the shipped topology-pack and spread
//! modules in WebAssembly vs the same policies native, and the per-decision overhead (instantiate +
//! init + inventory + call + copies) of a fresh instance. Preemption cost: the shipped anti-thrash
//! module vs its native build on one search of 64 and of 1,024 candidates.
//!
//! `cargo bench -p sluice-operator --bench policy_wasm` (`-- preemption` for preemption cost only)

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sluice_operator::cli::policy::synthetic_candidates;
use sluice_operator::policy::embedded;
use sluice_sdk::harness::{PodSetBuilder, churn, synthetic_cluster};
use sluice_sdk::host::{HostConfig, ModuleLimits, PolicyHost};
use sluice_sdk::policy::{PlacementPolicy, PreemptionCostPolicy};

fn placement(c: &mut Criterion) {
    let host = PolicyHost::new(HostConfig::default()).expect("host starts");
    let limits = ModuleLimits {
        deadline: Some(Duration::from_secs(1)),
        memory_limit: Some(256 << 20),
    };
    let wasm = host
        .load_placement("topology-pack", embedded::TOPOLOGY_PACK, "", limits)
        .expect("module loads");
    let native = sluice_policy_topology_pack::Policy::default();
    let gang = PodSetBuilder::new("bench/train", 16)
        .gpus_per_pod(4)
        .build();
    for n in [10_000usize, 10] {
        let nodes = synthetic_cluster(n);
        let mut g = c.benchmark_group(format!("topology_pack_{n}_nodes"));
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        g.bench_function("native", |b| {
            b.iter(|| black_box(native.score(black_box(&gang), black_box(&nodes))))
        });
        g.bench_function("wasm_resident_inventory", |b| {
            b.iter(|| black_box(wasm.score(black_box(&gang), black_box(&nodes))))
        });
        // 1% of the nodes changed since the module's last call: it is sent those rows only.
        g.bench_function("wasm_resident_1pct_changed", |b| {
            let mut batch = nodes.clone();
            let mut round = 0usize;
            b.iter(|| {
                round += 1;
                churn(&mut batch, 100, round % 100);
                black_box(wasm.score(black_box(&gang), black_box(&batch)))
            })
        });
        g.bench_function("native_1pct_changed", |b| {
            let mut batch = nodes.clone();
            let mut round = 0usize;
            b.iter(|| {
                round += 1;
                churn(&mut batch, 100, round % 100);
                black_box(native.score(black_box(&gang), black_box(&batch)))
            })
        });
        g.bench_function("wasm_new_inventory", |b| {
            let mut generation = 1000u64;
            b.iter_batched(
                || {
                    generation += 1;
                    let mut batch = nodes.clone();
                    batch.inventory_generation = generation;
                    batch
                },
                |batch| black_box(wasm.score(&gang, &batch)),
                BatchSize::LargeInput,
            )
        });
        g.bench_function("wasm_fresh_instance", |b| {
            b.iter(|| black_box(wasm.score_fresh(black_box(&gang), black_box(&nodes))))
        });
        g.finish();
    }
    // spread: the same comparison for the steady state only.
    let wasm = host
        .load_placement("spread", embedded::SPREAD, "", limits)
        .expect("module loads");
    let native = sluice_policy_spread::Policy::default();
    let nodes = synthetic_cluster(10_000);
    let mut g = c.benchmark_group("spread_10000_nodes");
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    g.bench_function("native", |b| {
        b.iter(|| black_box(native.score(black_box(&gang), black_box(&nodes))))
    });
    g.bench_function("wasm_resident_inventory", |b| {
        b.iter(|| black_box(wasm.score(black_box(&gang), black_box(&nodes))))
    });
    g.finish();
}

fn preemption_cost(c: &mut Criterion) {
    let host = PolicyHost::new(HostConfig::default()).expect("host starts");
    let limits = ModuleLimits {
        deadline: Some(Duration::from_secs(1)),
        memory_limit: None,
    };
    let wasm = host
        .load_preemption_cost("anti-thrash", embedded::ANTI_THRASH, "", limits)
        .expect("module loads");
    let native = sluice_policy_anti_thrash::AntiThrash::default();
    for n in [64usize, 1024] {
        let batch = synthetic_candidates(n);
        let mut g = c.benchmark_group(format!("preemption_cost_anti_thrash_{n}_candidates"));
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        g.bench_function("native", |b| {
            b.iter(|| black_box(native.costs(black_box(&batch))))
        });
        g.bench_function("wasm_resident_instance", |b| {
            b.iter(|| black_box(wasm.costs(black_box(&batch))))
        });
        g.finish();
    }
}

criterion_group!(benches, placement, preemption_cost);
criterion_main!(benches);
