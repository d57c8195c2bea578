//! Dominant Resource Share (Kueue's fair sharing) as a fairness module: the share of a node is its
//! largest borrowed/lendable ratio (per mille); heads are ordered by "does not borrow on a requested
//! resource" first, then by share, then by priority (higher first), then by timestamp (older first).
//!
//! Built on the SDK's batch helpers (`ShareBatch::dominant_ratio`, `OrderBatch::kueue_order`), which are
//! written independently of the engine's built-in policy; a test in the operator checks that both give the
//! same shares and orders on generated inputs.

use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::PolicyError;
use sluice_sdk::policy::fairness::{FairnessPolicy, OrderBatch, ShareBatch, Shares};

/// Dominant Resource Share fairness.
#[derive(Clone, Copy, Debug, Default)]
pub struct Drs;

impl PolicyInit for Drs {
    fn init(config: &str) -> Result<Self, String> {
        sluice_sdk::guest::no_config("drs", config).map(|()| Drs)
    }
}

impl FairnessPolicy for Drs {
    fn name(&self) -> &str {
        "drs"
    }

    fn shares(&self, batch: &ShareBatch) -> Result<Shares, PolicyError> {
        let n = batch.len();
        let mut out = Shares {
            ratio: Vec::with_capacity(n),
            weight: batch.weight.clone(),
            borrowing: Vec::with_capacity(n),
        };
        for i in 0..n {
            let (ratio, borrowing) = batch.dominant_ratio(i);
            out.ratio.push(ratio);
            out.borrowing.push(borrowing);
        }
        Ok(out)
    }

    fn order(&self, batch: &OrderBatch) -> Result<Vec<u32>, PolicyError> {
        batch.kueue_order("drs")
    }
}

#[cfg(target_arch = "wasm32")]
sluice_sdk::export_fairness!(Drs);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominant_resource_wins_and_roots_have_no_share() {
        let mut b = ShareBatch::default();
        b.push(1, 1.0, true, &[(0, 5, 10), (1, 9, 10)], 0.0);
        b.push(2, 2.0, false, &[(0, 5, 10)], 0.0);
        b.push(3, 1.0, true, &[], 0.0);
        let s = Drs.shares(&b).unwrap();
        assert_eq!(s.ratio, vec![900.0, 0.0, 0.0]);
        assert_eq!(s.borrowing, vec![true, false, false]);
        assert_eq!(s.weight, vec![1.0, 2.0, 1.0]);
    }

    #[test]
    fn order_puts_non_borrowing_then_lower_share_first() {
        let b = OrderBatch {
            borrowing_on_requested: vec![true, false, false, false],
            ratio: vec![0.0, 500.0, 100.0, 100.0],
            weight: vec![1.0; 4],
            borrowing: vec![true; 4],
            priority: vec![0, 0, 0, 5],
            timestamp: vec![0, 0, 0, 9],
        };
        assert_eq!(Drs.order(&b).unwrap(), vec![3, 2, 1, 0]);
    }
}
