//! The quota tree: ClusterQueue and Cohort nodes with subtree quota and usage per flavor-resource.
//!
//! Cohort usage is a pure function of the ClusterQueues' usage (each child contributes what it
//! uses beyond its local, never-lent quota), so updates are path-local and exactly reversible,
//! which is what preemption simulation relies on.

/// Interned flavor-resource pair.
pub(crate) type Fr = u32;
/// Index of a node (ClusterQueue or Cohort) in the tree arena.
pub(crate) type NodeId = u32;

/// Quota of one flavor-resource on a node.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Quota {
    pub nominal: i64,
    pub borrowing_limit: Option<i64>,
    pub lending_limit: Option<i64>,
}

/// One ClusterQueue or Cohort.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    pub name: String,
    pub is_cq: bool,
    pub alive: bool,
    /// Set for cohorts backed by a Cohort object (not just implied by a reference).
    pub explicit: bool,
    /// The node sits in a tree whose cohort parents form a cycle; the tree is disabled.
    pub cycle: bool,
    pub parent: Option<NodeId>,
    /// Configured parent name (cohort of a CQ, parentName of a Cohort).
    pub parent_name: Option<String>,
    pub child_cohorts: Vec<NodeId>,
    pub child_cqs: Vec<NodeId>,
    pub quotas: Vec<Option<Quota>>,
    pub subtree: Vec<i64>,
    pub usage: Vec<i64>,
    pub weight: f64,
    /// Cached [`Tree::potential_available`] by flavor-resource; it depends only on quotas and
    /// structure, so [`Tree::rebuild`] refreshes it. Entries past its end are computed on demand.
    pub potential: Vec<i64>,
    /// Bumped on every usage change in the tree rooted here (only meaningful on roots).
    pub generation: u64,
}

fn at(v: &[i64], fr: Fr) -> i64 {
    v.get(fr as usize).copied().unwrap_or(0)
}

fn slot(v: &mut Vec<i64>, fr: Fr) -> &mut i64 {
    let i = fr as usize;
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    &mut v[i]
}

/// Arena of quota nodes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    pub fn node(&self, n: NodeId) -> &Node {
        &self.nodes[n as usize]
    }

    pub fn node_mut(&mut self, n: NodeId) -> &mut Node {
        &mut self.nodes[n as usize]
    }

    pub fn add_node(&mut self, name: &str, is_cq: bool) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.nodes.push(Node {
            name: name.to_string(),
            is_cq,
            weight: 1.0,
            ..Node::default()
        });
        id
    }

    /// Parent for quota purposes: none inside a disabled (cyclic) tree.
    pub fn parent(&self, n: NodeId) -> Option<NodeId> {
        let node = self.node(n);
        if node.cycle { None } else { node.parent }
    }

    pub fn quota(&self, n: NodeId, fr: Fr) -> Quota {
        self.node(n)
            .quotas
            .get(fr as usize)
            .copied()
            .flatten()
            .unwrap_or_default()
    }

    /// The node's quota of `fr`, when it declares one (read in place on hot paths).
    fn quota_ref(&self, n: NodeId, fr: Fr) -> Option<&Quota> {
        self.node(n)
            .quotas
            .get(fr as usize)
            .and_then(|q| q.as_ref())
    }

    pub fn subtree(&self, n: NodeId, fr: Fr) -> i64 {
        at(&self.node(n).subtree, fr)
    }

    pub fn usage(&self, n: NodeId, fr: Fr) -> i64 {
        at(&self.node(n).usage, fr)
    }

    /// Capacity of the node never lent to its parent.
    pub fn local_quota(&self, n: NodeId, fr: Fr) -> i64 {
        match self.quota_ref(n, fr).and_then(|q| q.lending_limit) {
            Some(ll) => self.subtree(n, fr).saturating_sub(ll).max(0),
            None => 0,
        }
    }

    pub fn local_available(&self, n: NodeId, fr: Fr) -> i64 {
        self.local_quota(n, fr)
            .saturating_sub(self.usage(n, fr))
            .max(0)
    }

    /// What a workload in this node could use now.
    pub fn available(&self, n: NodeId, fr: Fr) -> i64 {
        let node = self.node(n);
        let usage = at(&node.usage, fr);
        let subtree = at(&node.subtree, fr);
        let Some(p) = self.parent(n) else {
            return subtree.saturating_sub(usage);
        };
        let quota = self.quota_ref(n, fr);
        let lq = match quota.and_then(|q| q.lending_limit) {
            Some(ll) => subtree.saturating_sub(ll).max(0),
            None => 0,
        };
        let mut parent_avail = self.available(p, fr);
        if let Some(bl) = quota.and_then(|q| q.borrowing_limit) {
            let stored_in_parent = subtree.saturating_sub(lq);
            let used_in_parent = usage.saturating_sub(lq).max(0);
            parent_avail = parent_avail.min(
                stored_in_parent
                    .saturating_sub(used_in_parent)
                    .saturating_add(bl),
            );
        }
        lq.saturating_sub(usage).max(0).saturating_add(parent_avail)
    }

    /// What a new workload in ClusterQueue `n` can use now: [`Tree::available`] floored at 0, so
    /// an over-admitted queue (quota shrunk below usage) still fits zero requests and its
    /// overdraft is not reported as missing quota (Kueue's ClusterQueueSnapshot.Available).
    pub fn cq_available(&self, n: NodeId, fr: Fr) -> i64 {
        self.available(n, fr).max(0)
    }

    /// What a workload in this node could use with the whole tree empty.
    pub fn potential_available(&self, n: NodeId, fr: Fr) -> i64 {
        match self.node(n).potential.get(fr as usize) {
            Some(&v) => v,
            None => self.compute_potential(n, fr),
        }
    }

    /// [`Tree::potential_available`] without the cache.
    pub fn compute_potential(&self, n: NodeId, fr: Fr) -> i64 {
        let Some(p) = self.parent(n) else {
            return self.subtree(n, fr);
        };
        self.potential_below(n, fr, self.compute_potential(p, fr))
    }

    /// A node's potential given its parent's.
    fn potential_below(&self, n: NodeId, fr: Fr, parent_potential: i64) -> i64 {
        let mut avail = self.local_quota(n, fr).saturating_add(parent_potential);
        if let Some(bl) = self.quota_ref(n, fr).and_then(|q| q.borrowing_limit) {
            avail = avail.min(self.subtree(n, fr).saturating_add(bl));
        }
        avail
    }

    /// Usage the node places on its parent.
    fn contribution(&self, n: NodeId, fr: Fr) -> i64 {
        self.usage(n, fr)
            .saturating_sub(self.local_quota(n, fr))
            .max(0)
    }

    /// Adds `delta` (may be negative) to a node's usage and propagates the change upwards.
    pub fn add_usage(&mut self, n: NodeId, fr: Fr, delta: i64) {
        let i = fr as usize;
        let mut cur = n;
        let mut delta = delta;
        // Per level the local quota is read once: the node's contribution before and after differ only by usage.
        while delta != 0 {
            let lq = self.local_quota(cur, fr);
            let node = &mut self.nodes[cur as usize];
            if node.usage.len() <= i {
                node.usage.resize(i + 1, 0);
            }
            let u = &mut node.usage[i];
            let before = u.saturating_sub(lq).max(0);
            *u = u.saturating_add(delta);
            let after = u.saturating_sub(lq).max(0);
            match node.parent.filter(|_| !node.cycle) {
                Some(p) => {
                    delta = after.saturating_sub(before);
                    cur = p;
                }
                None => break,
            }
        }
    }

    /// Records a real (not simulated) usage change in the tree containing `n`.
    pub fn bump(&mut self, n: NodeId) {
        let root = self.root(n);
        self.node_mut(root).generation += 1;
    }

    pub fn root(&self, n: NodeId) -> NodeId {
        let mut cur = n;
        while let Some(p) = self.parent(cur) {
            cur = p;
        }
        cur
    }

    /// Ancestors from the parent up to the root.
    pub fn ancestors(&self, n: NodeId) -> Vec<NodeId> {
        self.ancestors_iter(n).collect()
    }

    /// [`Tree::ancestors`] without collecting them (hot paths walk them per candidate).
    pub fn ancestors_iter(&self, n: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::successors(self.parent(n), |&p| self.parent(p))
    }

    /// Kueue's BorrowingWith: a CQ compares against nominal, a cohort against its subtree quota.
    pub fn borrowing_with(&self, n: NodeId, fr: Fr, val: i64) -> bool {
        let node = self.node(n);
        let limit = if node.is_cq {
            self.quota_ref(n, fr).map_or(0, |q| q.nominal)
        } else {
            at(&node.subtree, fr)
        };
        limit < at(&node.usage, fr).saturating_add(val)
    }

    pub fn within_nominal_in(&self, n: NodeId, frs: &[Fr]) -> bool {
        frs.iter()
            .all(|&fr| self.subtree(n, fr) >= self.usage(n, fr))
    }

    /// Whether the requests fit in the node's subtree quota; `reqs` becomes what remains for the parent.
    pub fn quantities_fit_in_quota(&self, n: NodeId, reqs: &mut [(Fr, i64)]) -> bool {
        let mut fits = true;
        for (fr, v) in reqs.iter_mut() {
            if self.subtree(n, *fr) < self.usage(n, *fr).saturating_add(*v) {
                fits = false;
            }
            *v = v.saturating_sub(self.local_available(n, *fr)).max(0);
        }
        fits
    }

    /// Height of a cohort: 1 when it only has ClusterQueues, plus one per cohort level below.
    pub fn height(&self, n: NodeId) -> i32 {
        let node = self.node(n);
        let mut h = i32::from(!node.child_cqs.is_empty() || !node.child_cohorts.is_empty());
        for &c in &node.child_cohorts {
            h = h.max(self.height(c) + 1);
        }
        h
    }

    /// Borrowing level for `val` of `fr` in CQ `cq`, and whether reclaiming in the hierarchy may help.
    pub fn lowest_subtree_that_fits(&self, cq: NodeId, fr: Fr, val: i64) -> (i32, bool) {
        let has_parent = self.parent(cq).is_some();
        if !self.borrowing_with(cq, fr, val) || !has_parent {
            return (0, has_parent);
        }
        let mut remaining = val.saturating_sub(self.local_available(cq, fr));
        let mut cur = cq;
        while let Some(p) = self.parent(cur) {
            if !self.borrowing_with(p, fr, remaining) {
                return (self.height(p), self.parent(p).is_some());
            }
            remaining = remaining.saturating_sub(self.local_available(p, fr));
            cur = p;
        }
        (self.height(cur), false)
    }

    /// Recomputes subtree quotas and cohort usage for every tree from CQ usage.
    pub fn rebuild(&mut self) {
        let roots: Vec<NodeId> = (0..self.nodes.len() as NodeId)
            .filter(|&n| self.node(n).alive && self.parent(n).is_none())
            .collect();
        for node in &mut self.nodes {
            node.potential.clear();
        }
        for r in roots {
            self.rebuild_tree(r);
        }
    }

    /// [`Tree::rebuild`] for the one tree under `root`, when nothing outside it changed.
    pub fn rebuild_tree(&mut self, root: NodeId) {
        self.rebuild_node(root);
        self.node_mut(root).generation += 1;
        let len = self.node(root).subtree.len();
        let potential = self.node(root).subtree.clone();
        // Every node of the tree gets its potential anew.
        self.fill_potential(root, potential, len);
    }

    /// Children of `n` in the quota tree (none when `n` sits on a cohort cycle, which disables its tree).
    fn tree_children(&self, n: NodeId) -> Vec<NodeId> {
        let node = self.node(n);
        if node.cycle {
            return Vec::new();
        }
        node.child_cohorts
            .iter()
            .chain(node.child_cqs.iter())
            .copied()
            .collect()
    }

    /// Stores the cached potential of `n` and derives its children's from it, top-down.
    fn fill_potential(&mut self, n: NodeId, potential: Vec<i64>, len: usize) {
        let children = self.tree_children(n);
        for c in children {
            let below = (0..len as Fr)
                .map(|fr| self.potential_below(c, fr, potential[fr as usize]))
                .collect();
            self.fill_potential(c, below, len);
        }
        self.node_mut(n).potential = potential;
    }

    fn rebuild_node(&mut self, n: NodeId) {
        let frs = self.node(n).quotas.len();
        let mut subtree = vec![0i64; frs];
        for (i, q) in self.node(n).quotas.iter().enumerate() {
            if let Some(q) = q {
                subtree[i] = q.nominal;
            }
        }
        if self.node(n).is_cq {
            self.node_mut(n).subtree = subtree;
            return;
        }
        let mut usage: Vec<i64> = Vec::new();
        let children = self.tree_children(n);
        for c in children {
            self.rebuild_node(c);
            let cn = self.node(c);
            let len = cn.subtree.len().max(cn.usage.len());
            for fr in 0..len as Fr {
                let lq = self.local_quota(c, fr);
                // Quotas and usage come from input, so sums saturate instead of overflowing.
                let d = self.subtree(c, fr).saturating_sub(lq);
                if d != 0 {
                    let s = slot(&mut subtree, fr);
                    *s = s.saturating_add(d);
                }
                let u = self.contribution(c, fr);
                if u != 0 {
                    let s = slot(&mut usage, fr);
                    *s = s.saturating_add(u);
                }
            }
        }
        let node = self.node_mut(n);
        node.subtree = subtree;
        node.usage = usage;
    }
}
