//! Dominant Resource Share (Kueue's fair sharing) as a fairness module: the share of a node is its
//! largest borrowed/lendable ratio (per mille); heads are ordered by "does not borrow on a requested
//! resource" first, then by share, then by priority (higher first), then by timestamp (older first).
//!
//! Written independently of the engine's built-in policy; a test in the operator checks that both
//! give the same shares and orders on generated inputs.

use std::cmp::Ordering;

use sluice_sdk::guest::PolicyInit;
use sluice_sdk::policy::PolicyError;
use sluice_sdk::policy::fairness::{
    FairnessPolicy, OrderBatch, ShareBatch, Shares, compare_shares,
};

/// Dominant Resource Share fairness.
#[derive(Clone, Copy, Debug, Default)]
pub struct Drs;

impl PolicyInit for Drs {
    fn init(config: &str) -> Result<Self, String> {
        let c = config.trim();
        if c.is_empty() || c == "{}" || c == "null" {
            Ok(Drs)
        } else {
            Err(format!("drs takes no configuration, got {c}"))
        }
    }
}

impl Drs {
    /// Share ratio of input `i`: the dominant borrowed/lendable ratio, lowest resource index on ties.
    fn ratio(batch: &ShareBatch, i: usize) -> (f64, bool) {
        let has_parent = batch.has_parent.get(i).copied().unwrap_or(false);
        let mut rows = batch.borrowing(i).peekable();
        if !has_parent || rows.peek().is_none() {
            return (0.0, false);
        }
        let mut best = 0.0f64;
        for (_, borrowed, lendable) in rows {
            if lendable > 0 {
                best = best.max(borrowed as f64 * 1000.0 / lendable as f64);
            }
        }
        (best, true)
    }

    fn cmp_heads(b: &OrderBatch, x: usize, y: usize) -> Ordering {
        b.borrowing_on_requested[x]
            .cmp(&b.borrowing_on_requested[y])
            .then_with(|| compare_shares(b.ratio[x], b.weight[x], b.ratio[y], b.weight[y]))
            .then_with(|| b.priority[y].cmp(&b.priority[x]))
            .then_with(|| b.timestamp[x].cmp(&b.timestamp[y]))
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
            let (ratio, borrowing) = Self::ratio(batch, i);
            out.ratio.push(ratio);
            out.borrowing.push(borrowing);
        }
        Ok(out)
    }

    fn order(&self, batch: &OrderBatch) -> Result<Vec<u32>, PolicyError> {
        let n = batch.len();
        let ok = [
            batch.borrowing_on_requested.len(),
            batch.weight.len(),
            batch.borrowing.len(),
            batch.priority.len(),
            batch.timestamp.len(),
        ]
        .iter()
        .all(|&l| l == n);
        if !ok {
            return Err(PolicyError::new(
                "drs",
                sluice_sdk::policy::PolicyFailure::Rejected,
                "order batch columns differ in length",
            ));
        }
        let mut idx: Vec<u32> = (0..n as u32).collect();
        // Stable: equal heads keep their input order.
        idx.sort_by(|&x, &y| Self::cmp_heads(batch, x as usize, y as usize));
        Ok(idx)
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
