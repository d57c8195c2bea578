//! Timing annotations of the discrete-event simulation; their values are [durations](crate::duration).

/// Annotation: when a Job or Workload arrives, as a duration from the start of the simulation.
pub const ARRIVAL_TIME_ANNOTATION: &str = "sluice.dev/arrival-time";
/// Annotation: how long a Job or Workload runs once admitted.
pub const RUN_TIME_ANNOTATION: &str = "sluice.dev/run-time";
/// Annotation: how long a Job's or Workload's pods take to be ready once it is admitted (a duration, or `never`);
/// its run time counts from then. Without it the pods are ready at once.
pub const STARTUP_ANNOTATION: &str = "sluice.dev/simulated-startup";
