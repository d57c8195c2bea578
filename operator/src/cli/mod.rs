//! Subcommands of the `sluice` binary that talk to a cluster or to policy modules; `main.rs` only dispatches.
pub mod kueue;
pub mod top;

pub mod policy;
