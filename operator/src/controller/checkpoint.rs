//! Checkpoint-aware preemption (a Sluice addition to Kueue): a victim that opts in with
//! `sluice.dev/checkpoint-grace: <duration>` (on its Job or Workload) is asked to checkpoint before it is
//! evicted. Its Workload and pods get `sluice.dev/checkpoint-requested: <time>`; the eviction waits until the
//! Workload carries `sluice.dev/checkpoint-done` (annotation) or a `CheckpointDone=True` condition, or the grace
//! runs out. Both sides show the wait as a condition (victim: `CheckpointRequested`, preemptor:
//! `WaitingForCheckpoint`) and `sluice_checkpoint_wait_seconds` records how long it took.

use crate::engine::{Time, WorkloadKey};

/// Opt-in annotation: the longest wait for a checkpoint, e.g. "5m".
pub const GRACE_ANNOTATION: &str = "sluice.dev/checkpoint-grace";
/// Set on the victim's Workload and pods when a checkpoint is requested (RFC 3339 time).
pub const REQUESTED_ANNOTATION: &str = "sluice.dev/checkpoint-requested";
/// Set by the workload (any value) once its checkpoint is written.
pub const DONE_ANNOTATION: &str = "sluice.dev/checkpoint-done";
/// Condition the workload may set instead of the annotation.
pub const DONE_CONDITION: &str = "CheckpointDone";
/// Condition on the victim while the checkpoint is awaited.
pub const REQUESTED_CONDITION: &str = "CheckpointRequested";
/// Condition on the preemptor while it waits for its victims' checkpoints.
pub const WAITING_CONDITION: &str = "WaitingForCheckpoint";

/// An eviction held back until the victim's checkpoint is done.
#[derive(Clone, Debug)]
pub struct PendingCheckpoint {
    /// Eviction reason.
    pub reason: String,
    /// Preemption reason.
    pub preemption_reason: Option<String>,
    /// Preemptor.
    pub preemptor: Option<WorkloadKey>,
    /// Eviction message.
    pub message: String,
    /// When the checkpoint was requested.
    pub requested: Time,
    /// When the eviction goes ahead regardless.
    pub deadline: Time,
    /// ClusterQueue of the victim (metric label).
    pub cluster_queue: String,
}

/// The grace of an annotation value, in milliseconds; None when absent, Err naming the problem when malformed.
pub fn parse_grace(value: Option<&str>) -> Result<Option<Time>, String> {
    let Some(v) = value else { return Ok(None) };
    let ms = crate::duration::parse_duration(v).map_err(|e| format!("{GRACE_ANNOTATION}: {e}"))?;
    if ms <= 0 {
        return Err(format!("{GRACE_ANNOTATION}: must be positive, got {v:?}"));
    }
    Ok(Some(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_parses_durations_and_names_bad_values() {
        assert_eq!(parse_grace(Some("5m")), Ok(Some(300_000)));
        assert_eq!(parse_grace(None), Ok(None));
        assert!(
            parse_grace(Some("soon"))
                .unwrap_err()
                .contains(GRACE_ANNOTATION)
        );
        assert!(parse_grace(Some("0s")).is_err());
    }
}
