//! A fairness module behind the batch [`FairnessPolicy`] trait.

use super::LoadError;
use super::instance::{Module, world};
use crate::policy::PolicyError;
use crate::policy::fairness::{FairnessPolicy, OrderBatch, ShareBatch, Shares, check_order};

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "fairness",
    });
}

use bindings::sluice::policy::fairness_types as wit;
use bindings::{Fairness, FairnessPre};

world! {
    kind: Fairness,
    bindings: Fairness,
    pre: FairnessPre,
    init: wit::FairnessInfo,
    resident: (),
}

/// A loaded fairness module. Calls are serialised; a failed instance is rebuilt on the next call.
pub struct WasmFairness {
    module: Module<Fairness>,
    half_life: Option<f64>,
}

impl std::fmt::Debug for WasmFairness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmFairness")
            .field("name", &self.module.name)
            .field("sha256", &self.sha256())
            .field("half_life", &self.half_life)
            .finish_non_exhaustive()
    }
}

impl WasmFairness {
    /// Checks what `init` answered.
    pub(crate) fn new(
        module: Module<Fairness>,
        info: wit::FairnessInfo,
    ) -> Result<Self, LoadError> {
        if let Some(h) = info.history_half_life_seconds
            && !(h.is_finite() && h > 0.0)
        {
            return Err(LoadError::InitRejected(format!(
                "history half-life must be a positive number of seconds, got {h}"
            )));
        }
        Ok(Self {
            module,
            half_life: info.history_half_life_seconds,
        })
    }

    /// Lower-case hex sha256 of the module bytes.
    pub fn sha256(&self) -> String {
        self.module.sha256()
    }
}

impl FairnessPolicy for WasmFairness {
    fn name(&self) -> &str {
        &self.module.name
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
        let out = self.module.with_live(|l| {
            let bi = &l.bindings;
            self.module.call(&mut l.store, |s| bi.call_shares(s, &b))
        })?;
        let shares = Shares {
            ratio: out.ratio,
            weight: out.weight,
            borrowing: out.borrowing.iter().map(|&x| x != 0).collect(),
        };
        shares.check(&self.module.name, batch.len())?;
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
        let out = self.module.with_live(|l| {
            let bi = &l.bindings;
            self.module.call(&mut l.store, |s| bi.call_order(s, &b))
        })?;
        check_order(&self.module.name, &out, batch.len())?;
        Ok(out)
    }
}
