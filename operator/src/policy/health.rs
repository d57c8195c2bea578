//! Failure counters and the Degraded state of one module (plain atomics the metrics layer reads).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use sluice_sdk::policy::{PolicyError, PolicyFailure};

const CLASSES: [PolicyFailure; 6] = [
    PolicyFailure::Trap,
    PolicyFailure::Deadline,
    PolicyFailure::Memory,
    PolicyFailure::Malformed,
    PolicyFailure::Rejected,
    PolicyFailure::Degraded,
];

fn slot(f: PolicyFailure) -> usize {
    CLASSES.iter().position(|&c| c == f).unwrap_or(0)
}

/// Health of one loaded module.
#[derive(Debug)]
pub struct ModuleHealth {
    degrade_after: u32,
    calls: AtomicU64,
    failures: [AtomicU64; 6],
    consecutive: AtomicU32,
    degraded: AtomicBool,
    last_message: Mutex<Option<String>>,
}

/// A copy of a module's health, for status and metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HealthSnapshot {
    /// Calls made to the module (failed ones included; skipped ones not).
    pub calls: u64,
    /// Failures by class name (`degraded` counts decisions skipped while degraded).
    pub failures: BTreeMap<&'static str, u64>,
    /// Failures in a row.
    pub consecutive: u32,
    /// No longer called.
    pub degraded: bool,
    /// Message of the last failure.
    pub last_message: Option<String>,
}

impl ModuleHealth {
    /// Health of a freshly loaded module, degraded after `degrade_after` failures in a row
    /// (at least 1).
    pub fn new(degrade_after: u32) -> Self {
        Self {
            degrade_after: degrade_after.max(1),
            calls: AtomicU64::new(0),
            failures: Default::default(),
            consecutive: AtomicU32::new(0),
            degraded: AtomicBool::new(false),
            last_message: Mutex::new(None),
        }
    }

    /// Whether the module is degraded (not called until replaced).
    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Counts a decision skipped because the module is degraded.
    pub fn record_skipped(&self) {
        self.failures[slot(PolicyFailure::Degraded)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a successful call.
    pub fn record_success(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.consecutive.store(0, Ordering::Relaxed);
    }

    /// Counts a failed call; returns true when this failure made the module degraded.
    pub fn record_failure(&self, e: &PolicyError) -> bool {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.failures[slot(e.failure)].fetch_add(1, Ordering::Relaxed);
        *self.last_message.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        let n = self.consecutive.fetch_add(1, Ordering::Relaxed) + 1;
        n >= self.degrade_after && !self.degraded.swap(true, Ordering::Relaxed)
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> HealthSnapshot {
        HealthSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            failures: CLASSES
                .iter()
                .map(|&c| (c.as_str(), self.failures[slot(c)].load(Ordering::Relaxed)))
                .filter(|&(_, n)| n > 0)
                .collect(),
            consecutive: self.consecutive.load(Ordering::Relaxed),
            degraded: self.is_degraded(),
            last_message: self
                .last_message
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_after_n_in_a_row_and_success_resets_the_run() {
        let h = ModuleHealth::new(3);
        let e = PolicyError::new("m", PolicyFailure::Trap, "boom");
        assert!(!h.record_failure(&e));
        assert!(!h.record_failure(&e));
        h.record_success();
        assert!(!h.record_failure(&e));
        assert!(!h.record_failure(&e));
        assert!(h.record_failure(&e));
        assert!(h.is_degraded());
        assert!(!h.record_failure(&e), "becomes degraded once");
        let s = h.snapshot();
        assert_eq!(s.failures.get("trap"), Some(&6));
        assert_eq!(s.calls, 7);
        assert!(s.last_message.unwrap().contains("boom"));
    }
}
