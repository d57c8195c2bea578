//! Fair sharing behind one narrow, plain-data trait so that another implementation (e.g. a
//! WebAssembly module) can replace the built-in Dominant Resource Share (DRS) policy.
//!
//! The engine computes, for a quota-tree node, how much of each resource it borrows beyond its
//! subtree quota and how much of that resource its parent could lend; the policy turns that into a
//! [`Share`], compares shares, and orders competing admission candidates at a cohort level.

use std::cmp::Ordering;
use std::fmt::Debug;

use super::types::Time;

/// Borrowing of one resource (summed over flavors) by one node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResourceBorrowing {
    /// Engine-local resource index (stable while the engine lives; only used for tie-breaks).
    pub resource: u32,
    /// Usage beyond the node's subtree quota (including the candidate's request).
    pub borrowed: i64,
    /// What the parent could lend of this resource with the tree empty.
    pub lendable: i64,
}

/// Input for one share computation.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareInput {
    /// Fair-sharing weight of the node.
    pub weight: f64,
    /// False for root cohorts and ClusterQueues without a cohort (their share is 0).
    pub has_parent: bool,
    /// Resources the node borrows; empty when it borrows nothing.
    pub borrowing: Vec<ResourceBorrowing>,
}

/// A node's share as produced by a [`FairnessPolicy`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share {
    /// Unweighted dominant ratio (per mille of lendable); -1 for "no share yet".
    pub ratio: f64,
    /// Weight it was computed with.
    pub weight: f64,
    /// Whether the node borrows anything.
    pub borrowing: bool,
}

impl Share {
    /// The share that sorts below every real share.
    pub fn negative() -> Self {
        Self {
            ratio: -1.0,
            weight: 1.0,
            borrowing: false,
        }
    }
}

/// What the admission tournament compares for one candidate at one cohort level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrderKey {
    /// The candidate would borrow on a flavor-resource it requests.
    pub borrowing_on_requested: bool,
    /// Share of the cohort's child on the candidate's path, with the candidate's usage added.
    pub share: Share,
    /// Workload priority.
    pub priority: i32,
    /// Queue-order timestamp.
    pub timestamp: Time,
}

/// Pluggable fairness: share computation, share comparison and admission ordering.
pub trait FairnessPolicy: Debug + Send + Sync {
    /// Computes a node's share.
    fn share(&self, input: &ShareInput) -> Share;
    /// Orders two shares (Less = smaller share).
    fn compare(&self, a: &Share, b: &Share) -> Ordering;
    /// Integer share written to status (`weightedShare`).
    fn weighted_share(&self, share: &Share) -> i64;
    /// Orders two admission candidates at a cohort level (Less = admitted first).
    fn order(&self, a: &OrderKey, b: &OrderKey) -> Ordering;
}

/// Kueue's Dominant Resource Share policy.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DrsPolicy;

impl DrsPolicy {
    fn zero_weight_borrows(s: &Share) -> bool {
        s.weight == 0.0 && s.ratio != 0.0
    }

    fn precise(s: &Share) -> f64 {
        if s.ratio == 0.0 {
            0.0
        } else if s.weight == 0.0 {
            f64::INFINITY
        } else {
            s.ratio / s.weight
        }
    }
}

impl FairnessPolicy for DrsPolicy {
    fn share(&self, input: &ShareInput) -> Share {
        let mut share = Share {
            ratio: 0.0,
            weight: input.weight,
            borrowing: false,
        };
        if !input.has_parent || input.borrowing.is_empty() {
            return share;
        }
        share.borrowing = true;
        let mut dominant: Option<u32> = None;
        for b in &input.borrowing {
            if b.lendable <= 0 {
                continue;
            }
            let ratio = b.borrowed as f64 * 1000.0 / b.lendable as f64;
            if ratio > share.ratio
                || (ratio == share.ratio && dominant.is_none_or(|d| b.resource < d))
            {
                share.ratio = ratio;
                dominant = Some(b.resource);
            }
        }
        share
    }

    fn compare(&self, a: &Share, b: &Share) -> Ordering {
        match (Self::zero_weight_borrows(a), Self::zero_weight_borrows(b)) {
            (true, true) => a.ratio.total_cmp(&b.ratio),
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => Self::precise(a).total_cmp(&Self::precise(b)),
        }
    }

    fn weighted_share(&self, share: &Share) -> i64 {
        if Self::zero_weight_borrows(share) {
            i64::MAX
        } else {
            Self::precise(share).ceil() as i64
        }
    }

    fn order(&self, a: &OrderKey, b: &OrderKey) -> Ordering {
        if a.borrowing_on_requested != b.borrowing_on_requested {
            return if a.borrowing_on_requested {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        self.compare(&a.share, &b.share)
            .then_with(|| b.priority.cmp(&a.priority))
            .then_with(|| a.timestamp.cmp(&b.timestamp))
    }
}
