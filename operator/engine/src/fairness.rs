//! Fair sharing behind one narrow, plain-data, batch trait so that another implementation (e.g. a
//! WebAssembly module) can replace the built-in Dominant Resource Share (DRS) policy.
//!
//! The engine computes, for quota-tree nodes, how much of each resource they borrow beyond their
//! subtree quota and how much of that resource their parent could lend; the policy turns a batch
//! of those into [`Share`]s, and orders the candidates competing at a cohort level in one call.
//! Shares are always compared by the same rule ([`compare`]: by ratio over weight), so preemption
//! can compare them without calling the policy again.

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
pub struct ShareInput<'a> {
    /// Name of the ClusterQueue or Cohort.
    pub name: &'a str,
    /// Fair-sharing weight of the node.
    pub weight: f64,
    /// False for root cohorts and ClusterQueues without a cohort (their share is 0).
    pub has_parent: bool,
    /// Resources the node borrows; empty when it borrows nothing.
    pub borrowing: Vec<ResourceBorrowing>,
    /// Decayed dominant usage of the node, per mille of its quota (0 when no history is kept).
    pub history: f64,
}

/// A node's share as produced by a [`EngineFairness`].
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

/// The fairness the engine asks, called once per decision: a batch of shares, or the order of all the
/// candidates competing at one cohort level. (A policy module's contract is the SDK's `FairnessPolicy`; the
/// operator adapts one to this.)
pub trait EngineFairness: Debug + Send + Sync {
    /// Name used in metrics, events and errors.
    fn name(&self) -> &str;
    /// Half-life in seconds of the usage history the engine should keep, if the policy uses it.
    fn history_half_life(&self) -> Option<f64> {
        None
    }
    /// Computes the share of every input, replacing the contents of `out`.
    fn shares(&self, inputs: &[ShareInput<'_>], out: &mut Vec<Share>);
    /// Whether each share depends on its own input alone (not on the others in the call): the engine may
    /// then reuse a node's share while its input is unchanged.
    fn per_input(&self) -> bool {
        false
    }
    /// Orders admission candidates at a cohort level: a permutation of `0..keys.len()`, first
    /// admitted first.
    fn order(&self, keys: &[OrderKey]) -> Vec<usize>;
}

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

/// Orders two shares (Less = smaller share): by ratio over weight, a zero weight with a non-zero
/// ratio sorting after everything else.
pub fn compare(a: &Share, b: &Share) -> Ordering {
    match (zero_weight_borrows(a), zero_weight_borrows(b)) {
        (true, true) => a.ratio.total_cmp(&b.ratio),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => precise(a).total_cmp(&precise(b)),
    }
}

/// Integer share written to status (`weightedShare`).
pub fn weighted_share(share: &Share) -> i64 {
    if zero_weight_borrows(share) {
        i64::MAX
    } else {
        precise(share).ceil() as i64
    }
}

/// Kueue's Dominant Resource Share policy.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DrsPolicy;

impl DrsPolicy {
    /// The DRS share of one input.
    pub fn share(input: &ShareInput<'_>) -> Share {
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

    /// Kueue's pairwise candidate order (Less = admitted first).
    pub fn order_pair(a: &OrderKey, b: &OrderKey) -> Ordering {
        if a.borrowing_on_requested != b.borrowing_on_requested {
            return if a.borrowing_on_requested {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        compare(&a.share, &b.share)
            .then_with(|| b.priority.cmp(&a.priority))
            .then_with(|| a.timestamp.cmp(&b.timestamp))
    }
}

impl EngineFairness for DrsPolicy {
    fn name(&self) -> &str {
        "drs"
    }

    fn per_input(&self) -> bool {
        true
    }

    fn shares(&self, inputs: &[ShareInput<'_>], out: &mut Vec<Share>) {
        out.clear();
        out.extend(inputs.iter().map(Self::share));
    }

    fn order(&self, keys: &[OrderKey]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        // Stable: among equal candidates the first stays first, as in Kueue's tournament scan.
        idx.sort_by(|&a, &b| Self::order_pair(&keys[a], &keys[b]));
        idx
    }
}
