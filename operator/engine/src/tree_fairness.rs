//! Which fairness policy, and which decayed usage history, serve each cohort tree.
//!
//! Shares are only ever compared inside one cohort tree (admission picks per tree, preemption
//! looks for victims in the preemptor's tree, status shares are per node), so each tree may have
//! its own policy; a tree without one uses the engine's default. Usage history is kept once per
//! half-life in use, so trees whose policies share a half-life share one history, and a tree that
//! moves to another policy with the same half-life keeps its past.
//!
//! Every share the engine uses (admission order, preemption, status) is computed here: each node's
//! [`ShareInput`] read off the quota tree, then one call to its tree's policy.

use std::collections::HashMap;
use std::sync::Arc;

use super::Interner;
use super::fairness::{EngineFairness, ResourceBorrowing, Share, ShareInput};
use super::quota::{Fr, NodeId, Tree};
use super::types::Time;
use super::usage_history::UsageHistory;

/// Shares computed during one scheduling cycle, per node and history setting, with the node's usage they were
/// computed from. Within a cycle a node's share input (its borrowing, its parent's lendable capacity, its weight
/// and history) changes only with its usage, and a search removes and restores usage many times, so the usage
/// itself is the key.
#[derive(Clone, Debug, Default)]
pub(crate) struct ShareCache {
    by_history: [Vec<NodeShares>; 2],
    /// The policy's output buffer, kept between calls.
    got: Vec<Share>,
}

/// Usages a node had in this cycle and the shares computed from them. A preemption search moves a node back and
/// forth between a few usages (a candidate removed, then restored), so a few are kept, replaced in turn.
#[derive(Clone, Debug, Default)]
struct NodeShares {
    entries: Vec<(Vec<i64>, Share)>,
    /// The entry replaced next once all are taken.
    next: usize,
}

/// Usages kept per node.
const USAGES_KEPT: usize = 4;

impl NodeShares {
    /// The share cached for `usage`.
    fn get(&self, usage: &[i64]) -> Option<Share> {
        self.entries
            .iter()
            .find(|(u, _)| u.as_slice() == usage)
            .map(|&(_, s)| s)
    }

    /// Caches `share` for `usage`, reusing the buffer of the entry replaced when all are taken.
    fn put(&mut self, usage: &[i64], share: Share) {
        if self.entries.len() < USAGES_KEPT {
            self.entries.push((usage.to_vec(), share));
            return;
        }
        let (u, s) = &mut self.entries[self.next];
        u.clear();
        u.extend_from_slice(usage);
        *s = share;
        self.next = (self.next + 1) % USAGES_KEPT;
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.next = 0;
    }
}

/// A [`ShareCache`] that shares are asked for through shared references (`&Sim`); a mutex keeps the engine
/// `Sync`, and is never contended (one engine, one thread at a time).
#[derive(Debug, Default)]
pub(crate) struct SharedShareCache(std::sync::Mutex<ShareCache>);

impl Clone for SharedShareCache {
    fn clone(&self) -> Self {
        SharedShareCache(std::sync::Mutex::new(self.lock().clone()))
    }
}

impl SharedShareCache {
    /// The cache (a poisoned lock still holds a usable cache: entries are only ever whole).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, ShareCache> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets every share.
    pub(crate) fn clear(&mut self) {
        self.0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

impl ShareCache {
    /// Forgets every share.
    pub(crate) fn clear(&mut self) {
        for v in &mut self.by_history {
            for n in v.iter_mut() {
                n.clear();
            }
        }
    }
}

/// The default policy, the per-tree policies (by root cohort name) and their histories.
#[derive(Clone, Debug)]
pub(crate) struct TreeFairness {
    default: Arc<dyn EngineFairness>,
    by_root: HashMap<String, Arc<dyn EngineFairness>>,
    /// One per distinct half-life asked for by the policies in use.
    histories: Vec<UsageHistory>,
}

impl TreeFairness {
    /// Every tree on `default`.
    pub(crate) fn new(default: Arc<dyn EngineFairness>) -> Self {
        let mut f = Self {
            default,
            by_root: HashMap::new(),
            histories: Vec::new(),
        };
        f.sync_histories();
        f
    }

    /// The policy of trees without their own.
    pub(crate) fn default_policy(&self) -> &dyn EngineFairness {
        self.default.as_ref()
    }

    /// Replaces the default policy.
    pub(crate) fn set_default(&mut self, policy: Arc<dyn EngineFairness>) {
        self.default = policy;
        self.sync_histories();
    }

    /// Puts the tree rooted at cohort `root` on `policy` (None: back on the default). Returns
    /// whether anything changed.
    pub(crate) fn set_for_root(
        &mut self,
        root: &str,
        policy: Option<Arc<dyn EngineFairness>>,
    ) -> bool {
        let changed = match (self.by_root.get(root), &policy) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (None, None) => false,
            _ => true,
        };
        if !changed {
            return false;
        }
        match policy {
            Some(p) => self.by_root.insert(root.to_string(), p),
            None => self.by_root.remove(root),
        };
        self.sync_histories();
        true
    }

    /// Puts exactly the trees in `policies` (by root cohort name) on their own policies, every other
    /// tree on the default, in one step (so a history whose half-life stays in use is kept whatever
    /// the order of the changes). Returns whether anything changed.
    pub(crate) fn set_roots(&mut self, policies: HashMap<String, Arc<dyn EngineFairness>>) -> bool {
        let same = policies.len() == self.by_root.len()
            && policies
                .iter()
                .all(|(k, p)| self.by_root.get(k).is_some_and(|q| Arc::ptr_eq(p, q)));
        if same {
            return false;
        }
        self.by_root = policies;
        self.sync_histories();
        true
    }

    /// The policy of the tree holding node `n`: its root cohort's, else the default. A
    /// ClusterQueue without a cohort is a tree of its own, always on the default (it has no
    /// siblings to be ordered against).
    pub(crate) fn policy_of(&self, tree: &Tree, n: NodeId) -> &dyn EngineFairness {
        if self.by_root.is_empty() {
            return self.default.as_ref();
        }
        let root = tree.node(tree.root(n));
        if root.is_cq {
            return self.default.as_ref();
        }
        self.by_root
            .get(&root.name)
            .map_or(self.default.as_ref(), |p| p.as_ref())
    }

    /// The history kept for `policy` (None when it keeps none).
    fn history_for(&self, policy: &dyn EngineFairness) -> Option<&UsageHistory> {
        let half_life = policy.history_half_life();
        self.histories.iter().find(|h| h.has_half_life(half_life))
    }

    /// Keeps one history per half-life in use: existing ones stay, new ones start empty, unused
    /// ones go.
    fn sync_histories(&mut self) {
        let mut old = std::mem::take(&mut self.histories);
        for p in std::iter::once(&self.default).chain(self.by_root.values()) {
            let half_life = p.history_half_life();
            if self.histories.iter().any(|h| h.has_half_life(half_life)) {
                continue;
            }
            match old.iter().position(|h| h.has_half_life(half_life)) {
                Some(i) => self.histories.push(old.swap_remove(i)),
                None => {
                    let h = UsageHistory::new(half_life);
                    if h.enabled() {
                        self.histories.push(h);
                    }
                }
            }
        }
    }

    /// Samples every history at `now`.
    pub(crate) fn advance(&mut self, tree: &Tree, now: Time) {
        for h in &mut self.histories {
            h.advance(tree, now);
        }
    }

    /// Node `n`'s share through its tree's policy (with its history when `with_history`).
    /// [`TreeFairness::shares_of`] written into `out` (replacing what it held), reusing, for a policy whose shares
    /// are per input, the shares of nodes whose usage is what it was when they were cached. The cache holds only
    /// within one scheduling cycle or event: the engine clears it whenever quotas, weights, policies or history
    /// may have moved.
    pub(crate) fn shares_cached_into(
        &self,
        tree: &Tree,
        ids: &Interner,
        with_history: bool,
        nodes: &[NodeId],
        cache: &mut ShareCache,
        out: &mut Vec<Share>,
    ) {
        out.clear();
        let Some(&first) = nodes.first() else {
            return;
        };
        let policy = self.policy_of(tree, first);
        let cacheable = policy.per_input()
            && (self.by_root.is_empty()
                || nodes
                    .iter()
                    .all(|&n| same_policy(self.policy_of(tree, n), policy)));
        if !cacheable {
            out.extend(self.shares_of(tree, ids, with_history, nodes));
            return;
        }
        out.extend(
            nodes
                .iter()
                .map(|&n| self.cached(tree, ids, with_history, policy, n, cache)),
        );
    }

    /// Node `n`'s share through its tree's policy, cached as [`TreeFairness::shares_cached_into`] does.
    pub(crate) fn share_cached(
        &self,
        tree: &Tree,
        ids: &Interner,
        with_history: bool,
        n: NodeId,
        cache: &mut ShareCache,
    ) -> Share {
        let policy = self.policy_of(tree, n);
        if !policy.per_input() {
            return self.share_of(tree, ids, with_history, n);
        }
        self.cached(tree, ids, with_history, policy, n, cache)
    }

    /// The share of `n` under the per-input `policy`: from the cache, or computed alone (a per-input policy's share
    /// of one node is its share in any call) and cached.
    fn cached(
        &self,
        tree: &Tree,
        ids: &Interner,
        with_history: bool,
        policy: &dyn EngineFairness,
        n: NodeId,
        cache: &mut ShareCache,
    ) -> Share {
        let ShareCache { by_history, got } = cache;
        let slots = &mut by_history[usize::from(with_history)];
        let usage = tree.node(n).usage.as_slice();
        if slots.len() <= n as usize {
            slots.resize(n as usize + 1, NodeShares::default());
        }
        if let Some(s) = slots[n as usize].get(usage) {
            return s;
        }
        let history = self.history_for(policy).filter(|_| with_history);
        let input = share_input(tree, ids, history, n);
        got.clear();
        policy.shares(std::slice::from_ref(&input), got);
        let s = got.first().copied().unwrap_or_else(Share::negative);
        slots[n as usize].put(usage, s);
        s
    }

    pub(crate) fn share_of(
        &self,
        tree: &Tree,
        ids: &Interner,
        with_history: bool,
        n: NodeId,
    ) -> Share {
        let policy = self.policy_of(tree, n);
        let mut out = Vec::with_capacity(1);
        self.call(tree, ids, with_history, policy, &[n], &mut out);
        out.first().copied().unwrap_or_else(Share::negative)
    }

    /// The shares of several nodes: one policy call per policy among them (callers pass nodes of
    /// one tree, so one call).
    pub(crate) fn shares_of(
        &self,
        tree: &Tree,
        ids: &Interner,
        with_history: bool,
        nodes: &[NodeId],
    ) -> Vec<Share> {
        let Some(&first) = nodes.first() else {
            return Vec::new();
        };
        let policy = self.policy_of(tree, first);
        let one_policy = self.by_root.is_empty()
            || nodes
                .iter()
                .all(|&n| same_policy(self.policy_of(tree, n), policy));
        if one_policy {
            let mut out = Vec::with_capacity(nodes.len());
            self.call(tree, ids, with_history, policy, nodes, &mut out);
            return out;
        }
        let mut out = vec![Share::negative(); nodes.len()];
        let mut todo: Vec<usize> = (0..nodes.len()).collect();
        let mut got = Vec::with_capacity(nodes.len());
        while let Some(&first) = todo.first() {
            let policy = self.policy_of(tree, nodes[first]);
            let (mine, rest): (Vec<usize>, Vec<usize>) = todo
                .iter()
                .partition(|&&i| same_policy(self.policy_of(tree, nodes[i]), policy));
            todo = rest;
            let group: Vec<NodeId> = mine.iter().map(|&i| nodes[i]).collect();
            self.call(tree, ids, with_history, policy, &group, &mut got);
            for (&i, s) in mine.iter().zip(&got) {
                out[i] = *s;
            }
        }
        out
    }

    /// One policy call for `nodes`: exactly one share per node in `out` (negative where a policy
    /// returned too few).
    fn call(
        &self,
        tree: &Tree,
        ids: &Interner,
        with_history: bool,
        policy: &dyn EngineFairness,
        nodes: &[NodeId],
        out: &mut Vec<Share>,
    ) {
        let history = self.history_for(policy).filter(|_| with_history);
        let inputs: Vec<_> = nodes
            .iter()
            .map(|&n| share_input(tree, ids, history, n))
            .collect();
        out.clear();
        policy.shares(&inputs, out);
        out.resize(nodes.len(), Share::negative());
    }
}

/// The share input of one node: what it borrows beyond its subtree quota, and what its parent
/// could lend of those resources.
fn share_input<'t>(
    tree: &'t Tree,
    ids: &Interner,
    history: Option<&UsageHistory>,
    n: NodeId,
) -> ShareInput<'t> {
    let node = tree.node(n);
    let weight = node.weight;
    let hist = history.map_or(0.0, |h| h.dominant(tree, n));
    let Some(parent) = tree.parent(n) else {
        return ShareInput {
            name: &node.name,
            weight,
            has_parent: false,
            borrowing: Vec::new(),
            history: hist,
        };
    };
    let mut borrowing: Vec<ResourceBorrowing> = Vec::new();
    let len = node.subtree.len().max(node.usage.len());
    for fr in 0..len as Fr {
        let b = tree.usage(n, fr) - tree.subtree(n, fr);
        if b > 0 {
            let (_, r) = ids.fr_parts(fr);
            match borrowing.iter_mut().find(|e| e.resource == r) {
                Some(e) => e.borrowed = e.borrowed.saturating_add(b),
                None => borrowing.push(ResourceBorrowing {
                    resource: r,
                    borrowed: b,
                    lendable: 0,
                }),
            }
        }
    }
    if !borrowing.is_empty() {
        let root = tree.root(parent);
        let rlen = tree.node(root).subtree.len();
        for fr in 0..rlen as Fr {
            let (_, r) = ids.fr_parts(fr);
            if let Some(e) = borrowing.iter_mut().find(|e| e.resource == r) {
                e.lendable = e
                    .lendable
                    .saturating_add(tree.potential_available(parent, fr));
            }
        }
    }
    ShareInput {
        name: &node.name,
        weight,
        has_parent: true,
        borrowing,
        history: hist,
    }
}

/// Whether two policy references are the same object.
fn same_policy(a: &dyn EngineFairness, b: &dyn EngineFairness) -> bool {
    std::ptr::addr_eq(
        a as *const dyn EngineFairness,
        b as *const dyn EngineFairness,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fairness::OrderKey;

    /// A policy that only asks for history with a half-life.
    #[derive(Debug)]
    struct WithHistory(f64);

    impl EngineFairness for WithHistory {
        fn name(&self) -> &str {
            "with-history"
        }
        fn history_half_life(&self) -> Option<f64> {
            Some(self.0)
        }
        fn shares(&self, inputs: &[super::super::ShareInput<'_>], out: &mut Vec<Share>) {
            out.clear();
            out.extend(inputs.iter().map(|i| Share {
                ratio: i.history,
                weight: 1.0,
                borrowing: false,
            }));
        }
        fn order(&self, keys: &[OrderKey]) -> Vec<usize> {
            (0..keys.len()).collect()
        }
    }

    fn full_queue() -> (Tree, NodeId) {
        let mut tree = Tree::default();
        let n = tree.add_node("cq", true);
        tree.node_mut(n).subtree = vec![100];
        tree.node_mut(n).usage = vec![100];
        (tree, n)
    }

    /// A policy whose every share is `ratio`.
    #[derive(Debug)]
    struct Fixed(f64);

    impl EngineFairness for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn shares(&self, inputs: &[super::super::ShareInput<'_>], out: &mut Vec<Share>) {
            out.clear();
            out.extend(inputs.iter().map(|_| Share {
                ratio: self.0,
                weight: 1.0,
                borrowing: false,
            }));
        }
        fn order(&self, keys: &[OrderKey]) -> Vec<usize> {
            (0..keys.len()).collect()
        }
    }

    #[test]
    fn nodes_of_different_trees_get_their_own_trees_shares() {
        let mut tree = Tree::default();
        let mut queue_under = |cohort: &str| {
            let c = tree.add_node(cohort, false);
            let q = tree.add_node(&format!("{cohort}-cq"), true);
            tree.node_mut(q).parent = Some(c);
            q
        };
        let (x, y) = (queue_under("x"), queue_under("y"));
        let lone = tree.add_node("lone", true);
        let ids = Interner::default();
        let mut f = TreeFairness::new(Arc::new(Fixed(1.0)));
        f.set_for_root("x", Some(Arc::new(Fixed(2.0))));
        f.set_for_root("lone", Some(Arc::new(Fixed(3.0))));
        let ratios = |f: &TreeFairness| -> Vec<f64> {
            f.shares_of(&tree, &ids, true, &[x, y, lone, x])
                .iter()
                .map(|s| s.ratio)
                .collect()
        };
        // A queue without a cohort is on the default even if a cohort shares its name.
        assert_eq!(ratios(&f), [2.0, 1.0, 1.0, 2.0]);
        assert_eq!(f.share_of(&tree, &ids, true, x).ratio, 2.0);
        f.set_for_root("x", None);
        assert_eq!(ratios(&f), [1.0, 1.0, 1.0, 1.0]);
        assert!(f.shares_of(&tree, &ids, true, &[]).is_empty());
    }

    #[test]
    fn cached_shares_follow_usage_and_only_serve_per_input_policies() {
        use crate::quota::Quota;
        let mut ids = Interner::default();
        let gpu = ids.resource("nvidia.com/gpu");
        let h100 = ids.flavor("h100");
        let fr = ids.fr(h100, gpu);
        let mut tree = Tree::default();
        let c = tree.add_node("c", false);
        let (a, b) = (tree.add_node("a", true), tree.add_node("b", true));
        for q in [a, b] {
            tree.node_mut(q).parent = Some(c);
            tree.node_mut(c).child_cqs.push(q);
            tree.node_mut(q).quotas = vec![Some(Quota {
                nominal: 10,
                ..Quota::default()
            })];
        }
        tree.node_mut(c).alive = true;
        tree.rebuild();
        let drs = TreeFairness::new(Arc::new(super::super::DrsPolicy));
        let mut cache = ShareCache::default();
        let check = |tree: &Tree, cache: &mut ShareCache| {
            let mut cached = Vec::new();
            // Asked twice into one buffer: the second answer replaces the first.
            drs.shares_cached_into(tree, &ids, false, &[b], cache, &mut cached);
            drs.shares_cached_into(tree, &ids, false, &[a, b, a], cache, &mut cached);
            assert_eq!(cached, drs.shares_of(tree, &ids, false, &[a, b, a]));
            cached
        };
        let idle = check(&tree, &mut cache);
        tree.add_usage(a, fr, 15);
        let borrowing = check(&tree, &mut cache);
        assert!(borrowing[0].ratio > idle[0].ratio, "a borrows 5 of b's 10");
        assert_eq!(borrowing[1], idle[1]);
        tree.add_usage(a, fr, -15);
        assert_eq!(check(&tree, &mut cache), idle);
        // More usages than a node keeps, visited twice: replaced entries are recomputed, kept ones reused, and
        // every answer is the uncached one.
        for _ in 0..2 {
            for step in 1..=7 {
                tree.add_usage(a, fr, 3);
                let shares = check(&tree, &mut cache);
                assert_eq!(shares[0].borrowing, 3 * step > 10, "step {step}");
            }
            tree.add_usage(a, fr, -21);
        }
        assert_eq!(check(&tree, &mut cache), idle);
        // A policy whose shares depend on the whole call is asked every time.
        let fixed = TreeFairness::new(Arc::new(Fixed(7.0)));
        let mut shares = Vec::new();
        fixed.shares_cached_into(&tree, &ids, false, &[a], &mut cache, &mut shares);
        assert_eq!(shares[0].ratio, 7.0);
        assert!(!Fixed(7.0).per_input());
    }

    #[test]
    fn one_history_per_half_life_in_use() {
        let mut f = TreeFairness::new(Arc::new(super::super::DrsPolicy));
        assert!(f.histories.is_empty());
        f.set_for_root("x", Some(Arc::new(WithHistory(10.0))));
        f.set_for_root("y", Some(Arc::new(WithHistory(10.0))));
        assert_eq!(f.histories.len(), 1);
        f.set_for_root("y", Some(Arc::new(WithHistory(20.0))));
        assert_eq!(f.histories.len(), 2);
        f.set_for_root("x", None);
        assert_eq!(f.histories.len(), 1);
        assert!(!f.set_for_root("x", None), "nothing changed");
    }

    #[test]
    fn a_history_moving_between_trees_in_one_step_is_kept() {
        let (tree, n) = full_queue();
        let ten: Arc<dyn EngineFairness> = Arc::new(WithHistory(10.0));
        let mut f = TreeFairness::new(Arc::new(super::super::DrsPolicy));
        f.set_roots(HashMap::from([("x".to_string(), ten.clone())]));
        f.advance(&tree, 0);
        f.advance(&tree, 10_000);
        // x leaves half-life 10 s while y joins it: the history stays.
        let swapped = HashMap::from([
            (
                "x".to_string(),
                Arc::new(WithHistory(20.0)) as Arc<dyn EngineFairness>,
            ),
            ("y".to_string(), ten.clone()),
        ]);
        assert!(f.set_roots(swapped.clone()));
        assert!(!f.set_roots(swapped), "same policies: nothing changed");
        let h = f.history_for(ten.as_ref()).expect("kept");
        assert!((h.dominant(&tree, n) - 500.0).abs() < 1e-9);
    }

    #[test]
    fn history_carries_over_to_a_policy_with_the_same_half_life_only() {
        let (tree, n) = full_queue();
        let ids = Interner::default();
        let mut f = TreeFairness::new(Arc::new(WithHistory(10.0)));
        f.advance(&tree, 0);
        f.advance(&tree, 10_000);
        let share = |f: &TreeFairness| f.share_of(&tree, &ids, true, n).ratio;
        assert!((share(&f) - 500.0).abs() < 1e-9);
        // Without history (preemption), the same policy sees none.
        assert_eq!(f.share_of(&tree, &ids, false, n).ratio, 0.0);
        f.set_default(Arc::new(WithHistory(10.0)));
        assert!((share(&f) - 500.0).abs() < 1e-9, "same half-life: kept");
        f.set_default(Arc::new(WithHistory(20.0)));
        assert_eq!(share(&f), 0.0, "another half-life starts empty");
        let both = f.shares_of(&tree, &ids, true, &[n, n]);
        assert_eq!(both.len(), 2);
    }
}
