//! Job integrations: how a kind of job becomes a Workload, starts on admission and stops on eviction.
//!
//! Each kind implements [`JobIntegration`]; the batch/v1 Job is the first. The controllers and the simulator call
//! the kind's functions through this trait, but each still names the kind it drives ([`BatchJob`] in
//! `controller/engine_task/jobs.rs` and the simulator; plain Pods through [`pod_group`]): a reconciler generic over
//! the trait, so that a new kind is one implementation plus its watch, is not built yet.

mod batch_job;
pub mod pod_group;
mod podset_info;
mod priority;
pub mod topology;

pub use batch_job::BatchJob;
pub use pod_group::PodGroupKey;
pub use podset_info::{PodSetInfo, pod_set_infos};
pub use priority::{PriorityClasses, ResolvedPriority};

use sluice_sdk::kueue::v1beta2::Workload;

/// An error turning a job into a Workload or applying an admission to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {namespace}/{name}: {field}: {message}")]
pub struct JobError {
    /// Kind of the job.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The field at fault (JSON path).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// One kind of job that Sluice queues.
pub trait JobIntegration {
    /// The job object.
    type Job;

    /// Kubernetes kind, e.g. "Job".
    const KIND: &'static str;
    /// Kubernetes API group, e.g. "batch".
    const GROUP: &'static str;
    /// apiVersion, e.g. "batch/v1".
    const API_VERSION: &'static str;

    /// The LocalQueue the job names (label `kueue.x-k8s.io/queue-name`), if any.
    fn queue_name(job: &Self::Job) -> Option<String>;

    /// The Workload Kueue builds for the job (name, owner, pod sets, priority, queue).
    fn workload(job: &Self::Job, priorities: &PriorityClasses) -> Result<Workload, JobError>;

    /// Whether the job is suspended.
    fn is_suspended(job: &Self::Job) -> bool;

    /// Suspends the job (it waits for admission, or was evicted).
    fn suspend(job: &mut Self::Job);

    /// Starts an admitted job: unsuspends it with the admission's node selectors, tolerations, labels and counts.
    fn run_with(job: &mut Self::Job, infos: &[PodSetInfo]) -> Result<(), JobError>;

    /// Undoes `run_with` after an eviction: restores what it injected, keeping the job suspended.
    fn restore(job: &mut Self::Job, infos: &[PodSetInfo]);

    /// `Some((success, message))` once the job has finished; the message is the one Kueue writes into the
    /// Workload's Finished condition (the job's own condition message).
    fn finished(job: &Self::Job) -> Option<(bool, String)>;
}

/// The name Kueue gives a job's Workload: `<lower(kind)>-<name>` truncated, then 5 hex digits of
/// sha1(kind, group, name, uid) so that names never collide across kinds.
pub fn workload_name(kind: &str, group: &str, name: &str, uid: &str) -> String {
    use sha1::{Digest, Sha1};
    const HASH_LEN: usize = 5;
    const MAX_LEN: usize = 253;
    let mut h = Sha1::new();
    for (i, part) in [kind, group, name, uid].iter().enumerate() {
        if i > 0 {
            h.update(b"\n");
        }
        h.update(part.as_bytes());
    }
    let hash: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let mut prefix = format!("{}-{name}", kind.to_lowercase());
    let max_prefix = MAX_LEN - 1 - HASH_LEN;
    if prefix.len() > max_prefix {
        let mut cut = max_prefix;
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        prefix.truncate(cut);
    }
    format!("{prefix}-{}", &hash[..HASH_LEN])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_name_is_kind_name_and_hash() {
        let n = workload_name("Job", "batch", "train", "uid-1");
        assert!(n.starts_with("job-train-"), "{n}");
        assert_eq!(n.len(), "job-train-".len() + 5);
        assert_ne!(n, workload_name("Job", "batch", "train", "uid-2"));
        assert_eq!(n, workload_name("Job", "batch", "train", "uid-1"));
    }

    #[test]
    fn long_names_are_truncated_to_253() {
        let n = workload_name("Job", "batch", &"x".repeat(400), "u");
        assert_eq!(n.len(), 253);
    }
}
