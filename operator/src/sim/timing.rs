//! Timing annotations of the discrete-event simulation; their values are [durations](crate::duration).

/// Annotation: when a Job or Workload arrives, as a duration from the start of the simulation.
pub const ARRIVAL_TIME_ANNOTATION: &str = "sluice.dev/arrival-time";
/// Annotation: how long a Job or Workload runs once admitted.
pub const RUN_TIME_ANNOTATION: &str = "sluice.dev/run-time";
