//! A fairness module behind the batch [`FairnessPolicy`] trait.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::Store;

use super::sandbox::{StoreState, guarded, init_deadline, new_store};
use super::{Compiled, LoadError, Shared, hex};
use crate::policy::fairness::{FairnessPolicy, OrderBatch, ShareBatch, Shares, check_order};
use crate::policy::{PolicyError, PolicyFailure};

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "fairness",
    });
}

use bindings::sluice::policy::fairness_types as wit;
use bindings::{Fairness, FairnessPre};

struct Live {
    store: Store<StoreState>,
    bindings: Fairness,
}

/// A loaded fairness module. Calls are serialised; a failed instance is rebuilt on the next call.
pub struct WasmFairness {
    name: String,
    shared: Arc<Shared>,
    compiled: Arc<Compiled>,
    pre: FairnessPre<StoreState>,
    config: String,
    deadline: Duration,
    memory_limit: usize,
    half_life: Option<f64>,
    live: Mutex<Option<Live>>,
}

impl std::fmt::Debug for WasmFairness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmFairness")
            .field("name", &self.name)
            .field("sha256", &self.sha256())
            .field("half_life", &self.half_life)
            .finish_non_exhaustive()
    }
}

impl WasmFairness {
    pub(crate) fn new(
        shared: Arc<Shared>,
        compiled: Arc<Compiled>,
        name: &str,
        config: &str,
        deadline: Duration,
        memory_limit: usize,
    ) -> Result<Self, LoadError> {
        let pre = FairnessPre::new(compiled.pre.clone()).map_err(|e| LoadError::WorldMismatch {
            kind: "fairness",
            message: format!("{e:#}"),
        })?;
        let mut me = Self {
            name: name.to_string(),
            shared,
            compiled,
            pre,
            config: config.to_string(),
            deadline,
            memory_limit,
            half_life: None,
            live: Mutex::new(None),
        };
        let (live, info) = me.instantiate().map_err(|e| match e.failure {
            PolicyFailure::Rejected => LoadError::InitRejected(e.message),
            _ => LoadError::InitRejected(e.to_string()),
        })?;
        if let Some(h) = info.history_half_life_seconds
            && !(h.is_finite() && h > 0.0)
        {
            return Err(LoadError::InitRejected(format!(
                "history half-life must be a positive number of seconds, got {h}"
            )));
        }
        me.half_life = info.history_half_life_seconds;
        *me.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
        Ok(me)
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        hex(&self.compiled.sha256)
    }

    fn instantiate(&self) -> Result<(Live, wit::FairnessInfo), PolicyError> {
        let mut store = new_store(&self.shared, self.memory_limit);
        let bindings = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            self.pre.instantiate(s)
        })?;
        let config = self.config.clone();
        let info = guarded(&mut store, &self.name, init_deadline(self.deadline), |s| {
            bindings.call_init(s, &config)
        })?
        .map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m))?;
        Ok((Live { store, bindings }, info))
    }

    fn with_live<R>(
        &self,
        f: impl FnOnce(&mut Live) -> Result<R, PolicyError>,
    ) -> Result<R, PolicyError> {
        let mut slot = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = match slot.take() {
            Some(l) => l,
            None => self.instantiate()?.0,
        };
        let r = f(&mut live);
        // A module that trapped may be mid-update; malformed or refused answers leave it sound.
        let keep = match &r {
            Ok(_) => true,
            Err(e) => matches!(
                e.failure,
                PolicyFailure::Malformed | PolicyFailure::Rejected
            ),
        };
        if keep {
            *slot = Some(live);
        }
        r
    }
}

impl FairnessPolicy for WasmFairness {
    fn name(&self) -> &str {
        &self.name
    }

    fn history_half_life(&self) -> Option<f64> {
        self.half_life
    }

    fn shares(&self, batch: &ShareBatch) -> Result<Shares, PolicyError> {
        let b = wit::ShareBatch {
            names: batch.names.clone(),
            node: batch.node.clone(),
            weight: batch.weight.clone(),
            has_parent: batch.has_parent.iter().map(|&x| u8::from(x)).collect(),
            borrow_offsets: batch.borrow_offsets.clone(),
            resource: batch.resource.clone(),
            borrowed: batch.borrowed.clone(),
            lendable: batch.lendable.clone(),
            history: batch.history.clone(),
        };
        let out = self.with_live(|l| {
            let bi = &l.bindings;
            guarded(&mut l.store, &self.name, self.deadline, |s| {
                bi.call_shares(s, &b)
            })?
            .map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m))
        })?;
        let shares = Shares {
            ratio: out.ratio,
            weight: out.weight,
            borrowing: out.borrowing.iter().map(|&x| x != 0).collect(),
        };
        shares.check(&self.name, batch.len())?;
        Ok(shares)
    }

    fn order(&self, batch: &OrderBatch) -> Result<Vec<u32>, PolicyError> {
        let b = wit::OrderBatch {
            borrowing_on_requested: batch
                .borrowing_on_requested
                .iter()
                .map(|&x| u8::from(x))
                .collect(),
            ratio: batch.ratio.clone(),
            weight: batch.weight.clone(),
            borrowing: batch.borrowing.iter().map(|&x| u8::from(x)).collect(),
            priority: batch.priority.clone(),
            timestamp: batch.timestamp.clone(),
        };
        let out = self.with_live(|l| {
            let bi = &l.bindings;
            guarded(&mut l.store, &self.name, self.deadline, |s| {
                bi.call_order(s, &b)
            })?
            .map_err(|m| PolicyError::new(&self.name, PolicyFailure::Rejected, m))
        })?;
        check_order(&self.name, &out, batch.len())?;
        Ok(out)
    }
}
