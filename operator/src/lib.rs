//! Sluice operator: scheduling engine.

pub mod engine;
