//! Guest side of the `fairness` world: the policy value and the batch conversions.

use std::cell::RefCell;

use super::PolicyInit;
use super::fairness_bindings::sluice::policy::fairness_types as wit;
use crate::policy::fairness::{FairnessPolicy, OrderBatch, ShareBatch};

thread_local! {
    /// The policy built by `init` (a module instance is single-threaded).
    static POLICY: RefCell<Option<Box<dyn FairnessPolicy>>> = const { RefCell::new(None) };
}

/// Builds the policy from its configuration (called by [`export_fairness!`](crate::export_fairness)).
pub fn init<T: PolicyInit + FairnessPolicy + 'static>(
    config: &str,
) -> Result<wit::FairnessInfo, String> {
    let policy = T::init(config)?;
    let info = wit::FairnessInfo {
        history_half_life_seconds: policy.history_half_life(),
    };
    POLICY.with(|p| *p.borrow_mut() = Some(Box::new(policy)));
    Ok(info)
}

fn with_policy<R>(f: impl FnOnce(&dyn FairnessPolicy) -> Result<R, String>) -> Result<R, String> {
    POLICY.with(|p| {
        let p = p.borrow();
        let policy = p.as_deref().ok_or("called before init")?;
        f(policy)
    })
}

/// Computes shares of a batch.
pub fn shares(b: wit::ShareBatch) -> Result<wit::Shares, String> {
    let batch = ShareBatch {
        names: b.names,
        node: b.node,
        weight: b.weight,
        has_parent: b.has_parent.iter().map(|&x| x != 0).collect(),
        borrow_offsets: b.borrow_offsets,
        resource: b.resource,
        borrowed: b.borrowed,
        lendable: b.lendable,
        history: b.history,
    };
    with_policy(|p| {
        let s = p.shares(&batch).map_err(|e| e.message)?;
        Ok(wit::Shares {
            ratio: s.ratio,
            weight: s.weight,
            borrowing: s.borrowing.iter().map(|&x| u8::from(x)).collect(),
        })
    })
}

/// Orders the heads of a batch.
pub fn order(b: wit::OrderBatch) -> Result<Vec<u32>, String> {
    let batch = OrderBatch {
        borrowing_on_requested: b.borrowing_on_requested.iter().map(|&x| x != 0).collect(),
        ratio: b.ratio,
        weight: b.weight,
        borrowing: b.borrowing.iter().map(|&x| x != 0).collect(),
        priority: b.priority,
        timestamp: b.timestamp,
    };
    with_policy(|p| p.order(&batch).map_err(|e| e.message))
}
