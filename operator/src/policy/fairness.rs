//! A fairness module in the engine, with the built-in DRS as the fallback of every decision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_sdk::policy::PolicyError;
use sluice_sdk::policy::fairness::{
    FairnessPolicy as ModulePolicy, OrderBatch, ShareBatch, check_order,
};

use super::health::ModuleHealth;
use crate::engine::{DrsPolicy, EngineFairness, OrderKey, Share, ShareInput};

/// Shares computed so far are remembered by input: a module's shares must be a function of the
/// batch's inputs (the contract), and the engine asks for the same shares many times while it
/// simulates preemptions. Bounded: cleared when full.
const SHARE_CACHE_LIMIT: usize = 100_000;

/// Everything a share depends on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ShareKey {
    name: String,
    weight: u64,
    has_parent: bool,
    history: u64,
    borrowing: Vec<(u32, i64, i64)>,
}

impl ShareKey {
    fn of(i: &ShareInput<'_>) -> Self {
        Self {
            name: i.name.to_string(),
            weight: i.weight.to_bits(),
            has_parent: i.has_parent,
            history: i.history.to_bits(),
            borrowing: i
                .borrowing
                .iter()
                .map(|r| (r.resource, r.borrowed, r.lendable))
                .collect(),
        }
    }
}

/// Calls a fairness module once per batch (for the shares it has not computed before); a failed
/// call (trap, deadline, memory, malformed output) or a degraded module falls back to the
/// built-in DRS for that decision.
#[derive(Debug)]
pub struct GuardedFairness {
    name: String,
    module: Arc<dyn ModulePolicy>,
    health: Arc<ModuleHealth>,
    cache: Mutex<HashMap<ShareKey, Share>>,
}

impl GuardedFairness {
    /// Guards `module` (named `name`) with `health`.
    pub fn new(name: &str, module: Arc<dyn ModulePolicy>, health: Arc<ModuleHealth>) -> Self {
        Self {
            name: name.to_string(),
            module,
            health,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The module's health.
    pub fn health(&self) -> &Arc<ModuleHealth> {
        &self.health
    }

    fn failed(&self, e: &PolicyError) {
        if self.health.record_failure(e) {
            tracing::warn!(module = %self.name, error = %e, "fairness module degraded: the built-in DRS decides until it is replaced");
        } else {
            tracing::warn!(module = %self.name, error = %e, "fairness module failed; the built-in DRS decided");
        }
    }

    fn usable(&self) -> bool {
        if self.health.is_degraded() {
            self.health.record_skipped();
            return false;
        }
        true
    }
}

fn share_batch(inputs: &[ShareInput<'_>]) -> ShareBatch {
    let mut b = ShareBatch {
        names: Vec::with_capacity(inputs.len() + 1),
        ..ShareBatch::default()
    };
    b.names.push(String::new());
    for i in inputs {
        b.names.push(i.name.to_string());
        let rows: Vec<(u32, i64, i64)> = i
            .borrowing
            .iter()
            .map(|r| (r.resource, r.borrowed, r.lendable))
            .collect();
        b.push(
            (b.names.len() - 1) as u32,
            i.weight,
            i.has_parent,
            &rows,
            i.history,
        );
    }
    b
}

fn order_batch(keys: &[OrderKey]) -> OrderBatch {
    OrderBatch {
        borrowing_on_requested: keys.iter().map(|k| k.borrowing_on_requested).collect(),
        ratio: keys.iter().map(|k| k.share.ratio).collect(),
        weight: keys.iter().map(|k| k.share.weight).collect(),
        borrowing: keys.iter().map(|k| k.share.borrowing).collect(),
        priority: keys.iter().map(|k| k.priority).collect(),
        timestamp: keys.iter().map(|k| k.timestamp).collect(),
    }
}

impl EngineFairness for GuardedFairness {
    fn name(&self) -> &str {
        &self.name
    }

    fn history_half_life(&self) -> Option<f64> {
        self.module.history_half_life()
    }

    fn shares(&self, inputs: &[ShareInput<'_>], out: &mut Vec<Share>) {
        if inputs.is_empty() || !self.usable() {
            return DrsPolicy.shares(inputs, out);
        }
        let keys: Vec<ShareKey> = inputs.iter().map(ShareKey::of).collect();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let missing: Vec<usize> = (0..inputs.len())
            .filter(|&i| !cache.contains_key(&keys[i]))
            .collect();
        if !missing.is_empty() {
            let batch: Vec<ShareInput<'_>> = missing.iter().map(|&i| inputs[i].clone()).collect();
            let answer = self
                .module
                .shares(&share_batch(&batch))
                .and_then(|s| s.check(&self.name, batch.len()).map(|()| s));
            match answer {
                Ok(s) => {
                    self.health.record_success();
                    if cache.len() + missing.len() > SHARE_CACHE_LIMIT {
                        cache.clear();
                    }
                    for (j, &i) in missing.iter().enumerate() {
                        let share = Share {
                            ratio: s.ratio[j],
                            weight: s.weight[j],
                            borrowing: s.borrowing[j],
                        };
                        cache.insert(keys[i].clone(), share);
                    }
                }
                Err(e) => {
                    drop(cache);
                    self.failed(&e);
                    return DrsPolicy.shares(inputs, out);
                }
            }
        }
        out.clear();
        out.extend(
            keys.iter()
                .zip(inputs)
                .map(|(k, i)| cache.get(k).copied().unwrap_or_else(|| DrsPolicy::share(i))),
        );
    }

    fn order(&self, keys: &[OrderKey]) -> Vec<usize> {
        if keys.len() < 2 || !self.usable() {
            return DrsPolicy.order(keys);
        }
        let answer = self
            .module
            .order(&order_batch(keys))
            .and_then(|p| check_order(&self.name, &p, keys.len()).map(|()| p));
        match answer {
            Ok(perm) => {
                self.health.record_success();
                perm.into_iter().map(|i| i as usize).collect()
            }
            Err(e) => {
                self.failed(&e);
                DrsPolicy.order(keys)
            }
        }
    }
}
