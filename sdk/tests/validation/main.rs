//! Validation of every Kueue and Sluice object the webhook and the engine share: queues, workloads and the rest.

mod helpers;
mod misc;
mod queues;
mod workload;
