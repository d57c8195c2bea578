//! The engine's integration tests: quota, queues, flavors, preemption, fair sharing, invariants.
//!
//! One test binary per area (this one and `topology`), both on the scenario DSL in `common/`.

mod admission_checks;
mod admission_fair_sharing;
mod bench_decisions;
mod bench_topology;
mod block_admission;
#[path = "../common/mod.rs"]
mod common;
mod equivalence;
mod fair_preemption;
mod flavors;
mod invariants;
mod kueue_scenarios;
mod kueue_schedule_cases;
mod limits_and_edge_cases;
mod livelock;
mod preemption;
mod preemption_cost;
mod priority_boost;
mod properties;
mod queues;
mod quota;
mod scale;
mod tree_fairness;
