//! Decayed per-node usage, kept for fairness policies that weigh recent usage (e.g. fair-credits).
//!
//! Each quota-tree node's usage of each flavor-resource is averaged with exponential decay: after
//! `dt` at constant usage `u`, the average moves to `u + (avg - u) * 0.5^(dt / half_life)`. Usage
//! is sampled when a scheduling cycle starts (admissions and finishes between cycles count from
//! the next cycle), which is exact for the piecewise-constant usage between cycles.

use super::quota::{Fr, NodeId, Tree};
use super::types::Time;

/// Decayed usage per node and flavor-resource.
#[derive(Clone, Debug, Default)]
pub(crate) struct UsageHistory {
    /// Half-life in milliseconds; `None` keeps no history.
    half_life_ms: Option<f64>,
    /// Time of the last sample.
    last: Option<Time>,
    /// `avg[node][fr]`.
    avg: Vec<Vec<f64>>,
}

/// A half-life in seconds as kept, in milliseconds; none unless finite and positive.
fn half_life_ms(seconds: Option<f64>) -> Option<f64> {
    seconds
        .filter(|h| h.is_finite() && *h > 0.0)
        .map(|h| h * 1000.0)
}

impl UsageHistory {
    /// History with the given half-life in seconds (`None`: none kept).
    pub(crate) fn new(half_life_seconds: Option<f64>) -> Self {
        Self {
            half_life_ms: half_life_ms(half_life_seconds),
            last: None,
            avg: Vec::new(),
        }
    }

    /// Whether this history is kept with the half-life a policy asks for (`None`: none).
    pub(crate) fn has_half_life(&self, half_life_seconds: Option<f64>) -> bool {
        self.half_life_ms.is_some() && self.half_life_ms == half_life_ms(half_life_seconds)
    }

    /// Whether history is kept.
    pub(crate) fn enabled(&self) -> bool {
        self.half_life_ms.is_some()
    }

    /// Decays every average towards the tree's current usage over the time since the last sample.
    pub(crate) fn advance(&mut self, tree: &Tree, now: Time) {
        let Some(h) = self.half_life_ms else { return };
        let dt = self.last.map_or(0, |l| now.saturating_sub(l).max(0));
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        let keep = 0.5f64.powf(dt as f64 / h);
        self.avg.resize(tree.nodes.len(), Vec::new());
        for (n, row) in self.avg.iter_mut().enumerate() {
            let node = &tree.nodes[n];
            row.resize(row.len().max(node.usage.len()), 0.0);
            for (fr, a) in row.iter_mut().enumerate() {
                let u = node.usage.get(fr).copied().unwrap_or(0) as f64;
                *a = u + (*a - u) * keep;
            }
        }
    }

    /// Decayed dominant usage of `n`: the largest average usage over subtree quota, per mille.
    pub(crate) fn dominant(&self, tree: &Tree, n: NodeId) -> f64 {
        let Some(row) = self.avg.get(n as usize) else {
            return 0.0;
        };
        let mut best = 0.0f64;
        for (fr, &a) in row.iter().enumerate() {
            let q = tree.subtree(n, fr as Fr);
            if q > 0 {
                best = best.max(a * 1000.0 / q as f64);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_halves_towards_current_usage_each_half_life() {
        let mut tree = Tree::default();
        let n = tree.add_node("cq", true);
        tree.node_mut(n).subtree = vec![100];
        tree.node_mut(n).usage = vec![100];
        let mut h = UsageHistory::new(Some(10.0));
        h.advance(&tree, 0);
        assert_eq!(h.dominant(&tree, n), 0.0);
        h.advance(&tree, 10_000);
        assert!((h.dominant(&tree, n) - 500.0).abs() < 1e-9);
        tree.node_mut(n).usage = vec![0];
        h.advance(&tree, 20_000);
        assert!((h.dominant(&tree, n) - 250.0).abs() < 1e-9);
    }

    #[test]
    fn disabled_history_is_zero() {
        let mut tree = Tree::default();
        let n = tree.add_node("cq", true);
        tree.node_mut(n).usage = vec![5];
        let mut h = UsageHistory::new(None);
        h.advance(&tree, 1000);
        assert!(!h.enabled());
        assert_eq!(h.dominant(&tree, n), 0.0);
    }
}
