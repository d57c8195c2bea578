//! The policy contract: plain-data inputs and outputs of the decisions that policies make.
//!
//! The same types are used by the engine's built-in policies, by native policy crates and (through
//! the WIT package in `sdk/wit/`) by WebAssembly modules, so a module is only one implementation of
//! a trait, never a special case in the engine.

pub mod builtin;
pub mod error;
pub mod fairness;
pub mod placement;
pub mod preemption_cost;

pub use error::{PolicyError, PolicyFailure};
pub use fairness::{FairnessPolicy, OrderBatch, ShareBatch, Shares};
pub use placement::{
    NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, TopologyMode, next_dynamic_epoch,
};
pub use preemption_cost::{CandidateBatch, CostAnswers, PreemptionCostPolicy};
