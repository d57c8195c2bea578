//! Fairness: shares of quota-tree nodes and the order of competing heads, in batches.
//!
//! One call per decision: the engine sends every share it needs for a step (or every head that
//! competes at one cohort level) at once, in columns, so that a WebAssembly module is called once
//! per decision rather than once per pairwise comparison.

use std::cmp::Ordering;
use std::fmt::Debug;

use super::error::{PolicyError, PolicyFailure};

/// Share inputs of several quota-tree nodes (ClusterQueues or Cohorts), one column per attribute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShareBatch {
    /// Interned node names; entry 0 is the empty string.
    pub names: Vec<String>,
    /// Per input: the node's name (string id).
    pub node: Vec<u32>,
    /// Per input: fair-sharing weight.
    pub weight: Vec<f64>,
    /// Per input: whether the node has a parent cohort (a share is 0 without one).
    pub has_parent: Vec<bool>,
    /// `inputs + 1` offsets into [`Self::resource`], [`Self::borrowed`] and [`Self::lendable`].
    pub borrow_offsets: Vec<u32>,
    /// Borrowed resource (engine-local index, stable while the engine lives).
    pub resource: Vec<u32>,
    /// Usage beyond the node's subtree quota.
    pub borrowed: Vec<i64>,
    /// What the parent could lend of that resource with the tree empty.
    pub lendable: Vec<i64>,
    /// Per input: decayed dominant usage, per mille of the node's quota (0 without history, and 0 when the
    /// shares are for choosing preemption victims: history orders admission only).
    pub history: Vec<f64>,
}

impl ShareBatch {
    /// Number of inputs.
    pub fn len(&self) -> usize {
        self.weight.len()
    }

    /// Whether the batch has no input.
    pub fn is_empty(&self) -> bool {
        self.weight.is_empty()
    }

    /// The borrowing rows of input `i`: `(resource, borrowed, lendable)`.
    pub fn borrowing(&self, i: usize) -> impl Iterator<Item = (u32, i64, i64)> + '_ {
        let lo = self.borrow_offsets.get(i).copied().unwrap_or(0) as usize;
        let hi = self.borrow_offsets.get(i + 1).copied().unwrap_or(0) as usize;
        let hi = hi
            .min(self.resource.len())
            .min(self.borrowed.len())
            .min(self.lendable.len());
        (lo.min(hi)..hi).map(move |j| (self.resource[j], self.borrowed[j], self.lendable[j]))
    }

    /// Kueue's dominant resource share of input `i`, unweighted: the largest borrowed/lendable ratio (per mille)
    /// over its borrowing rows, and whether it borrows at all; `(0, false)` without a parent or borrowing.
    pub fn dominant_ratio(&self, i: usize) -> (f64, bool) {
        let mut rows = self.borrowing(i).peekable();
        if !self.has_parent.get(i).copied().unwrap_or(false) || rows.peek().is_none() {
            return (0.0, false);
        }
        let ratio = rows
            .filter(|&(_, _, lendable)| lendable > 0)
            .map(|(_, borrowed, lendable)| borrowed as f64 * 1000.0 / lendable as f64)
            .fold(0.0f64, f64::max);
        (ratio, true)
    }

    /// Appends one input; `borrowing` rows are `(resource, borrowed, lendable)`.
    pub fn push(
        &mut self,
        node: u32,
        weight: f64,
        has_parent: bool,
        borrowing: &[(u32, i64, i64)],
        history: f64,
    ) {
        if self.borrow_offsets.is_empty() {
            self.borrow_offsets.push(0);
        }
        self.node.push(node);
        self.weight.push(weight);
        self.has_parent.push(has_parent);
        for &(r, b, l) in borrowing {
            self.resource.push(r);
            self.borrowed.push(b);
            self.lendable.push(l);
        }
        self.borrow_offsets.push(self.resource.len() as u32);
        self.history.push(history);
    }
}

/// Shares, one per input of a [`ShareBatch`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shares {
    /// Unweighted share (per mille of what the parent could lend); finite and not negative, or -1.
    pub ratio: Vec<f64>,
    /// Weight the ratio is divided by when shares are compared.
    pub weight: Vec<f64>,
    /// Whether the node borrows.
    pub borrowing: Vec<bool>,
}

impl Shares {
    /// Checks an answer for `n` inputs: lengths match and no number is NaN.
    pub fn check(&self, policy: &str, n: usize) -> Result<(), PolicyError> {
        if self.ratio.len() != n || self.weight.len() != n || self.borrowing.len() != n {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Malformed,
                format!(
                    "returned {} ratios, {} weights and {} borrowing flags for {n} inputs",
                    self.ratio.len(),
                    self.weight.len(),
                    self.borrowing.len()
                ),
            ));
        }
        if let Some(i) = (0..n).find(|&i| self.ratio[i].is_nan() || self.weight[i].is_nan()) {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Malformed,
                format!(
                    "share {i} is NaN (ratio {}, weight {})",
                    self.ratio[i], self.weight[i]
                ),
            ));
        }
        if let Some(i) = (0..n).find(|&i| self.weight[i] < 0.0) {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Malformed,
                format!("share {i} has a negative weight {}", self.weight[i]),
            ));
        }
        Ok(())
    }
}

/// How every share is compared, whoever computed it: by `ratio / weight`, where a zero weight
/// with a non-zero ratio sorts after every other share (and among such shares, by ratio).
pub fn compare_shares(a_ratio: f64, a_weight: f64, b_ratio: f64, b_weight: f64) -> Ordering {
    let zero_weight_borrows = |r: f64, w: f64| w == 0.0 && r != 0.0;
    let precise = |r: f64, w: f64| {
        if r == 0.0 {
            0.0
        } else if w == 0.0 {
            f64::INFINITY
        } else {
            r / w
        }
    };
    match (
        zero_weight_borrows(a_ratio, a_weight),
        zero_weight_borrows(b_ratio, b_weight),
    ) {
        (true, true) => a_ratio.total_cmp(&b_ratio),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => precise(a_ratio, a_weight).total_cmp(&precise(b_ratio, b_weight)),
    }
}

/// Heads competing at one cohort level, one column per attribute.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrderBatch {
    /// The head would borrow on a flavor-resource it requests.
    pub borrowing_on_requested: Vec<bool>,
    /// Share ratio of the cohort's child on the head's path, with the head's usage added.
    pub ratio: Vec<f64>,
    /// Weight of that share.
    pub weight: Vec<f64>,
    /// Whether that child borrows.
    pub borrowing: Vec<bool>,
    /// Workload priority.
    pub priority: Vec<i32>,
    /// Queue-order timestamp in milliseconds.
    pub timestamp: Vec<i64>,
}

impl OrderBatch {
    /// Number of heads.
    pub fn len(&self) -> usize {
        self.ratio.len()
    }

    /// Whether the batch has no head.
    pub fn is_empty(&self) -> bool {
        self.ratio.is_empty()
    }

    /// Kueue's admission order of the heads, given the shares already in the batch: not borrowing on a
    /// requested resource first, then smaller share ([`compare_shares`]), higher priority, earlier timestamp;
    /// equal heads keep their input order. Refuses a batch whose columns differ in length.
    pub fn kueue_order(&self, policy: &str) -> Result<Vec<u32>, PolicyError> {
        let n = self.len();
        let columns = [
            self.borrowing_on_requested.len(),
            self.weight.len(),
            self.borrowing.len(),
            self.priority.len(),
            self.timestamp.len(),
        ];
        if columns.iter().any(|&l| l != n) {
            return Err(PolicyError::new(
                policy,
                PolicyFailure::Rejected,
                "order batch columns differ in length",
            ));
        }
        let mut idx: Vec<u32> = (0..n as u32).collect();
        idx.sort_by(|&x, &y| {
            let (x, y) = (x as usize, y as usize);
            self.borrowing_on_requested[x]
                .cmp(&self.borrowing_on_requested[y])
                .then_with(|| {
                    compare_shares(self.ratio[x], self.weight[x], self.ratio[y], self.weight[y])
                })
                .then_with(|| self.priority[y].cmp(&self.priority[x]))
                .then_with(|| self.timestamp[x].cmp(&self.timestamp[y]))
        });
        Ok(idx)
    }
}

/// Checks that `order` is a permutation of `0..n`.
pub fn check_order(policy: &str, order: &[u32], n: usize) -> Result<(), PolicyError> {
    let malformed = |m: String| Err(PolicyError::new(policy, PolicyFailure::Malformed, m));
    if order.len() != n {
        return malformed(format!(
            "returned an order of {} heads for {n} heads",
            order.len()
        ));
    }
    let mut seen = vec![false; n];
    for &i in order {
        match seen.get_mut(i as usize) {
            None => return malformed(format!("order names head {i} of {n}")),
            Some(true) => return malformed(format!("order names head {i} twice")),
            Some(s) => *s = true,
        }
    }
    Ok(())
}

/// Fairness in batches: computes shares and orders competing heads.
pub trait FairnessPolicy: Debug + Send + Sync {
    /// Name used in metrics, events and errors.
    fn name(&self) -> &str;
    /// Half-life in seconds of the usage history the engine should keep for this policy, if any.
    fn history_half_life(&self) -> Option<f64> {
        None
    }
    /// Computes the share of every input of `batch`.
    fn shares(&self, batch: &ShareBatch) -> Result<Shares, PolicyError>;
    /// Orders the heads of `batch`: a permutation of `0..batch.len()`, first admitted first.
    fn order(&self, batch: &OrderBatch) -> Result<Vec<u32>, PolicyError>;
}
