//! Read-only views (workload state, queue status, visibility) and the invariant checker.

use std::collections::{BTreeMap, HashSet};

use super::fairness::weighted_share;
use super::quota::{Fr, NodeId};
use super::{
    ClusterQueueUsage, Engine, FlavorUsage, LocalQueueUsage, Phase, ResourceUsage, WorkloadKey,
    WorkloadState,
};

impl Engine {
    /// Current state of a workload, if known.
    pub fn workload_state(&self, key: &WorkloadKey) -> Option<WorkloadState> {
        let w = self.wl(*self.wl_by_key.get(key)?)?;
        Some(match w.phase {
            Phase::Pending => {
                let (reason, message) = w
                    .pending
                    .as_ref()
                    .map(|(r, m)| (r.to_string(), m.to_string()))
                    .unwrap_or_else(|| {
                        (
                            "PendingEvaluation".to_string(),
                            "Workload is pending evaluation in the scheduling queue".to_string(),
                        )
                    });
                WorkloadState::Pending { reason, message }
            }
            Phase::Admitted => {
                WorkloadState::Admitted(crate::Admission::clone(&w.adm.as_ref()?.admission))
            }
            Phase::Evicting => WorkloadState::Evicting,
            Phase::Finished => WorkloadState::Finished,
        })
    }

    /// Builds per-flavor usage lists in the ClusterQueue's resource-group order.
    fn flavor_usage(
        &self,
        cq: NodeId,
        usage: &BTreeMap<Fr, i64>,
        with_borrowed: bool,
    ) -> Vec<FlavorUsage> {
        let Some(c) = self.cq(cq) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for rg in &c.rgs {
            for &f in &rg.flavors {
                let mut resources = Vec::new();
                for &r in &rg.covered {
                    let fr = self.ids.find_fr(f, r);
                    let total = fr.and_then(|fr| usage.get(&fr).copied()).unwrap_or(0);
                    let borrowed = match (with_borrowed, fr) {
                        (true, Some(fr)) => (total - self.tree.quota(cq, fr).nominal).max(0),
                        _ => 0,
                    };
                    resources.push(ResourceUsage {
                        name: self.ids.resource_name(r).to_string(),
                        total,
                        borrowed,
                    });
                }
                // Kueue lists them by name (a stable order, whatever the covered order).
                resources.sort_by(|a, b| a.name.cmp(&b.name));
                out.push(FlavorUsage {
                    name: self.ids.flavor_name(f).to_string(),
                    resources,
                });
            }
        }
        out
    }

    fn sum_usage<'a>(&self, holders: impl Iterator<Item = &'a u32>) -> BTreeMap<Fr, i64> {
        let mut usage = BTreeMap::new();
        for &i in holders {
            if let Some(a) = self.wl(i).and_then(|w| w.adm.as_ref()) {
                for &(fr, v) in &a.usage {
                    let u: &mut i64 = usage.entry(fr).or_default();
                    *u = u.saturating_add(v);
                }
            }
        }
        usage
    }

    /// What Kueue writes in the ClusterQueue's status.
    pub fn cluster_queue_usage(&self, name: &str) -> Option<ClusterQueueUsage> {
        let &n = self.cq_by_name.get(name)?;
        if !self.tree.node(n).alive {
            return None;
        }
        let c = self.cq(n)?;
        let reserving = self.sum_usage(c.admitted.iter());
        let admitted_ids = self.admitted_of(n, c.admitted.iter().copied());
        let admitted = self.sum_usage(admitted_ids.iter());
        let share = self.fairness.share_of(&self.tree, &self.ids, true, n);
        Some(ClusterQueueUsage {
            flavors_reservation: self.flavor_usage(n, &reserving, true),
            flavors_usage: self.flavor_usage(n, &admitted, true),
            pending_workloads: (c.heap.len() + c.inadmissible.len()) as i32,
            reserving_workloads: c.admitted.len() as i32,
            admitted_workloads: admitted_ids.len() as i32,
            weighted_share: weighted_share(&share),
            active: c.active,
            inactive_reason: c.inactive_reason.clone(),
            inactive_message: c.inactive_message.clone(),
        })
    }

    /// What Kueue writes in the LocalQueue's status.
    pub fn local_queue_usage(&self, namespace: &str, name: &str) -> Option<LocalQueueUsage> {
        let lq = self.lqs.get(&(namespace.to_string(), name.to_string()))?;
        let spec = lq.spec.as_ref()?;
        let holders: Vec<u32> = lq
            .workloads
            .iter()
            .copied()
            .filter(|&i| self.wl(i).is_some_and(|w| w.adm.is_some()))
            .collect();
        // A deactivated workload is not queued (Kueue's queue manager never holds it), so it is not pending.
        let pending = lq
            .workloads
            .iter()
            .filter(|&&i| {
                self.wl(i).is_some_and(|w| {
                    w.phase == Phase::Pending
                        && w.spec.active
                        && w.spec.admission_gated_by.is_none()
                })
            })
            .count();
        let usage = self.sum_usage(holders.iter());
        let cq = self.cq_by_name.get(&spec.cluster_queue).copied();
        let list = |u: &BTreeMap<Fr, i64>| {
            cq.map(|n| self.flavor_usage(n, u, false))
                .unwrap_or_default()
        };
        let admitted_ids = match cq {
            Some(n) => self.admitted_of(n, holders.iter().copied()),
            None => holders.clone(),
        };
        let admitted = self.sum_usage(admitted_ids.iter());
        Some(LocalQueueUsage {
            flavors_reservation: list(&usage),
            flavors_usage: list(&admitted),
            pending_workloads: pending as i32,
            reserving_workloads: holders.len() as i32,
            admitted_workloads: admitted_ids.len() as i32,
        })
    }

    /// Of workloads holding quota in ClusterQueue `n`, those Kueue counts as admitted: all of them without
    /// admission checks, with checks those whose checks passed.
    fn admitted_of(&self, n: NodeId, holders: impl Iterator<Item = u32>) -> Vec<u32> {
        let has_checks = self
            .cq(n)
            .is_some_and(|c| !c.spec.admission_checks.is_empty());
        holders
            .filter(|&i| !has_checks || self.wl(i).is_some_and(|w| w.spec.admitted))
            .collect()
    }

    /// Pending workloads of a ClusterQueue in queue order (inadmissible ones included).
    pub fn pending_workloads(&self, cluster_queue: &str) -> Vec<WorkloadKey> {
        let Some(&n) = self.cq_by_name.get(cluster_queue) else {
            return Vec::new();
        };
        let Some(c) = self.cq(n) else {
            return Vec::new();
        };
        let mut keys: Vec<_> = c.heap.iter().chain(c.inadmissible.iter()).collect();
        keys.sort();
        let sticky = self.head_of(n).filter(|&h| Some(h) == c.sticky);
        let mut out: Vec<WorkloadKey> = Vec::with_capacity(keys.len());
        if let Some(s) = sticky
            && let Some(w) = self.wl(s)
        {
            out.push(w.key.clone());
        }
        for k in keys {
            if Some(k.wl) != sticky
                && let Some(w) = self.wl(k.wl)
            {
                out.push(w.key.clone());
            }
        }
        out
    }

    /// Pending workloads of a LocalQueue, in their ClusterQueue's queue order.
    pub fn local_queue_pending_workloads(&self, namespace: &str, name: &str) -> Vec<WorkloadKey> {
        let Some(lq) = self.lqs.get(&(namespace.to_string(), name.to_string())) else {
            return Vec::new();
        };
        let Some(spec) = lq.spec.as_ref() else {
            return Vec::new();
        };
        self.pending_workloads(&spec.cluster_queue)
            .into_iter()
            .filter(|k| {
                self.wl_by_key
                    .get(k)
                    .and_then(|&i| self.wl(i))
                    .is_some_and(|w| w.spec.namespace == namespace && w.spec.queue_name == name)
            })
            .collect()
    }

    /// A Cohort's `status.fairSharing.weightedShare` (None for unknown cohorts).
    pub fn cohort_weighted_share(&self, name: &str) -> Option<i64> {
        let &n = self.cohort_by_name.get(name)?;
        if !self.tree.node(n).alive {
            return None;
        }
        let share = self.fairness.share_of(&self.tree, &self.ids, true, n);
        Some(weighted_share(&share))
    }

    /// Checks internal consistency: usage bookkeeping, quota limits, no double admission, and
    /// that admissions match workload requests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut holders_seen = HashSet::new();
        for (n, c) in self.cqs.iter().enumerate() {
            let Some(c) = c else { continue };
            for &i in &c.admitted {
                if !holders_seen.insert(i) {
                    return Err(format!("workload #{i} holds quota in two ClusterQueues"));
                }
                let w = self.wl(i).ok_or_else(|| {
                    format!("ClusterQueue {} lists a deleted workload", c.spec.name)
                })?;
                let adm = w
                    .adm
                    .as_ref()
                    .ok_or_else(|| format!("{} is listed as admitted but holds no quota", w.key))?;
                if adm.cq as usize != n {
                    return Err(format!(
                        "{} is admitted in another ClusterQueue than the one listing it",
                        w.key
                    ));
                }
                if !matches!(w.phase, Phase::Admitted | Phase::Evicting) {
                    return Err(format!("{} holds quota while {:?}", w.key, w.phase));
                }
                if w.queued_in.is_some() {
                    return Err(format!("{} is queued while holding quota", w.key));
                }
            }
            let sums = self.sum_usage(c.admitted.iter());
            let node = self.tree.node(n as NodeId);
            for fr in 0..node.usage.len().max(sums.len()) as Fr {
                let want = sums.get(&fr).copied().unwrap_or(0);
                if self.tree.usage(n as NodeId, fr) != want {
                    return Err(format!(
                        "ClusterQueue {} usage of fr#{fr} is {} but its workloads use {want}",
                        c.spec.name,
                        self.tree.usage(n as NodeId, fr)
                    ));
                }
            }
        }
        for (i, w) in self.wls.iter().enumerate() {
            let Some(w) = w else { continue };
            if w.adm.is_some() != holders_seen.contains(&(i as u32)) {
                return Err(format!(
                    "{} has a reservation not tracked by its ClusterQueue",
                    w.key
                ));
            }
            if let Some(adm) = &w.adm {
                for psa in &adm.admission.pod_set_assignments {
                    let ps = w
                        .spec
                        .pod_sets
                        .iter()
                        .find(|p| p.name == psa.name)
                        .ok_or_else(|| {
                            format!("{} admission names unknown pod set {}", w.key, psa.name)
                        })?;
                    let min = ps.min_count.unwrap_or(ps.count);
                    if psa.count > ps.count || psa.count < min {
                        return Err(format!(
                            "{} pod set {} admitted with count {}",
                            w.key, ps.name, psa.count
                        ));
                    }
                    for (r, q) in &ps.requests {
                        // Under IgnoreUndeclared a resource the ClusterQueue does not cover has no flavor.
                        let undeclared = || {
                            self.config.ignore_undeclared_resources
                                && self.cq(adm.cq).is_some_and(|c| {
                                    self.ids
                                        .find_resource(r)
                                        .is_none_or(|id| !c.rg_of_resource.contains_key(&id))
                                })
                        };
                        if *q == 0 || undeclared() {
                            continue;
                        }
                        let want = q.saturating_mul(i64::from(psa.count));
                        if psa.resource_usage.get(r) != Some(&want) || !psa.flavors.contains_key(r)
                        {
                            return Err(format!(
                                "{} pod set {} assignment does not cover {r} = {want}",
                                w.key, ps.name
                            ));
                        }
                    }
                }
            }
        }
        let mut fresh = self.tree.clone();
        fresh.rebuild();
        // Quota held by evicting workloads may be promised to the workloads that preempted them
        // (Kueue admits against the usage those victims will free), so limits are checked on
        // committed usage only.
        let mut committed = self.tree.clone();
        for w in self.wls.iter().flatten() {
            if let (Phase::Evicting, Some(adm)) = (w.phase, &w.adm) {
                for &(fr, v) in &adm.usage {
                    committed.add_usage(adm.cq, fr, -v);
                }
            }
        }
        for (n, node) in self.tree.nodes.iter().enumerate() {
            if !node.alive {
                continue;
            }
            let id = n as NodeId;
            for fr in 0..node.potential.len() as Fr {
                if self.tree.potential_available(id, fr) != self.tree.compute_potential(id, fr) {
                    return Err(format!(
                        "cached potential capacity of {} is stale for fr#{fr}",
                        node.name
                    ));
                }
            }
            for fr in 0..node.usage.len().max(fresh.node(id).usage.len()) as Fr {
                if fresh.usage(id, fr) != self.tree.usage(id, fr) {
                    return Err(format!(
                        "incremental usage of {} drifted for fr#{fr}",
                        node.name
                    ));
                }
                let used = committed.usage(id, fr);
                let has_parent = self.tree.parent(id).is_some();
                if !has_parent && used > self.tree.subtree(id, fr) {
                    return Err(format!(
                        "{} uses {used} of fr#{fr} beyond its quota",
                        node.name
                    ));
                }
                if let (true, Some(bl)) = (has_parent, self.tree.quota(id, fr).borrowing_limit)
                    && used > self.tree.subtree(id, fr).saturating_add(bl)
                {
                    return Err(format!(
                        "{} exceeds its borrowing limit for fr#{fr}",
                        node.name
                    ));
                }
            }
        }
        self.check_forest()
    }

    /// The cohort forest and the ClusterQueues' states as a relink of the whole forest makes them (a new
    /// ClusterQueue is linked alone).
    fn check_forest(&self) -> Result<(), String> {
        let mut whole = self.clone();
        whole.relink();
        if whole.tree.nodes.len() != self.tree.nodes.len() {
            return Err(format!(
                "a relink makes {} ClusterQueues and Cohorts of {}",
                whole.tree.nodes.len(),
                self.tree.nodes.len()
            ));
        }
        for (n, (a, b)) in self.tree.nodes.iter().zip(&whole.tree.nodes).enumerate() {
            let linked = |x: &crate::quota::Node| {
                (
                    x.alive,
                    x.cycle,
                    x.parent,
                    x.child_cohorts.clone(),
                    x.child_cqs.clone(),
                )
            };
            if linked(a) != linked(b) {
                return Err(format!(
                    "{} is linked otherwise than a relink links it: {:?} against {:?}",
                    a.name,
                    linked(a),
                    linked(b)
                ));
            }
            let id = n as NodeId;
            for fr in 0..a.subtree.len().max(b.subtree.len()) as Fr {
                if self.tree.subtree(id, fr) != whole.tree.subtree(id, fr) {
                    return Err(format!("subtree quota of {} is stale for fr#{fr}", a.name));
                }
            }
            let state = |e: &Engine| {
                e.cq(id).map(|c| {
                    (
                        c.active,
                        c.inactive_reason.clone(),
                        c.inactive_message.clone(),
                    )
                })
            };
            if state(self) != state(&whole) {
                return Err(format!("ClusterQueue {} has a stale state", a.name));
            }
        }
        Ok(())
    }
}
