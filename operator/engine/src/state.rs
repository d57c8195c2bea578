//! Applying events: object upserts/deletes, queue placement, quota charging and release.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use super::fasthash::FastMap;
use super::quota::{NodeId, Quota};
use super::{
    Adm, Admission, ClusterQueue, Cohort, CqData, Decision, Engine, EngineError, Event, Flavor,
    FrMask, LocalQueue, LqData, Phase, ResourceGroup, Rg, StopPolicy, Time, Wl, Workload,
    WorkloadKey,
};

const INADMISSIBLE: &str = "Inadmissible";
/// Kueue's QuotaReserved=False reason of a workload held by admission gates.
pub const ADMISSION_GATED: &str = "AdmissionGated";

/// Whether two versions of a workload schedule identically: same pod sets and requests, same
/// LocalQueue, activation and priority, and the same queue ordering key (creation time, UID). Its admissibility
/// is not compared: as Kueue reads a LimitRange's bounds again at each nomination, a change of them alone leaves
/// the workload where it waits.
fn same_scheduling_inputs(old: &Workload, new: &Workload) -> bool {
    old.pod_sets == new.pod_sets
        && old.scheduling_shape == new.scheduling_shape
        && old.adjusted_resources == new.adjusted_resources
        && old.admission_gated_by == new.admission_gated_by
        && old.queue_name == new.queue_name
        && old.active == new.active
        && old.priority == new.priority
        && old.creation_time == new.creation_time
        && old.uid == new.uid
}

impl Engine {
    /// Applies one event; returns the decisions it causes (evictions, pending reasons).
    pub fn apply(&mut self, event: Event) -> Result<Vec<Decision>, EngineError> {
        // An event may move quotas, weights or policies, which cached shares do not key on.
        self.preempt_scratch.shares.clear();
        match event {
            Event::UpsertFlavor(f) => self.upsert_flavor(f),
            Event::DeleteFlavor(name) => {
                if let Some(id) = self.ids.find_flavor(&name)
                    && let Some(slot) = self.flavors.get_mut(id as usize)
                {
                    *slot = None;
                }
                self.topo.inventory_changed();
                self.refresh_cq_states();
                self.requeue_all_inadmissible();
            }
            Event::UpsertClusterQueue(cq) => self.upsert_cq(cq)?,
            Event::UpsertAdmissionCheck { name, active } => {
                if self.admission_checks.insert(name, active) != Some(active) {
                    self.refresh_cq_states();
                }
            }
            Event::DeleteAdmissionCheck(name) => {
                if self.admission_checks.remove(&name).is_some() {
                    self.refresh_cq_states();
                }
            }
            Event::DeleteClusterQueue(name) => self.delete_cq(&name),
            Event::UpsertCohort(c) => self.upsert_cohort(c)?,
            Event::DeleteCohort(name) => {
                if let Some(&n) = self.cohort_by_name.get(&name) {
                    let node = self.tree.node_mut(n);
                    node.explicit = false;
                    node.quotas.clear();
                    node.parent_name = None;
                    node.weight = 1.0;
                    self.structure_changed();
                }
            }
            Event::UpsertLocalQueue(lq) => self.upsert_lq(lq),
            Event::DeleteLocalQueue { namespace, name } => {
                let key = (namespace, name);
                if let Some(l) = self.lqs.get_mut(&key) {
                    l.spec = None;
                }
                self.reroute_lq(&key);
            }
            Event::UpsertNamespace(ns) => {
                self.namespaces.insert(ns.name, ns.labels);
                self.requeue_all_inadmissible();
            }
            Event::DeleteNamespace(name) => {
                self.namespaces.remove(&name);
                self.requeue_all_inadmissible();
            }
            Event::UpsertWorkload {
                workload,
                admission,
            } => self.upsert_workload(workload, admission)?,
            Event::DeleteWorkload(key) => self.delete_workload(&key),
            Event::FinishWorkload(key) => {
                if let Some(&i) = self.wl_by_key.get(&key) {
                    self.afs_forget_own(i);
                    self.release(i);
                    self.dequeue(i);
                    if let Some(w) = self.wl_mut(i) {
                        w.phase = Phase::Finished;
                        w.pending = None;
                    }
                }
            }
            Event::UpsertNode(node) => self.topo_upsert_node(node),
            Event::DeleteNode(name) => self.topo_delete_node(&name),
            Event::UpsertTopology(t) => {
                Arc::make_mut(&mut self.topo.topologies).insert(t.name, t.levels);
                self.topo.inventory_changed();
                self.requeue_all_inadmissible();
            }
            Event::DeleteTopology(name) => {
                Arc::make_mut(&mut self.topo.topologies).remove(&name);
                self.topo.inventory_changed();
            }
            Event::UpsertNodeGpus { node, gpus } => self.topo_upsert_gpus(&node, Some(gpus)),
            Event::DeleteNodeGpus(node) => self.topo_upsert_gpus(&node, None),
            Event::RestoreLocalQueueUsage {
                namespace,
                name,
                usage,
            } => self.afs_restore(&(namespace, name), usage),
            Event::RestorePlacement { workload, pod_sets } => {
                if let Some(&i) = self.wl_by_key.get(&workload)
                    && self
                        .wl(i)
                        .is_some_and(|w| matches!(w.phase, Phase::Admitted | Phase::Evicting))
                {
                    self.topo.hold(i, pod_sets);
                }
            }
            Event::EvictionComplete { workload, time } => {
                self.now = self.now.max(time);
                if let Some(&i) = self.wl_by_key.get(&workload)
                    && self
                        .wl(i)
                        .is_some_and(|w| matches!(w.phase, Phase::Evicting | Phase::Admitted))
                {
                    self.release(i);
                    if let Some(w) = self.wl_mut(i) {
                        w.phase = Phase::Pending;
                        w.pending = None;
                    }
                    self.place(i);
                }
            }
        }
        Ok(std::mem::take(&mut self.out))
    }

    fn upsert_flavor(&mut self, f: Flavor) {
        let id = self.ids.flavor(&f.name) as usize;
        if self.flavors.len() <= id {
            self.flavors.resize(id + 1, None);
        }
        // The same flavor again: nothing to retry.
        if self.flavors[id].as_ref() == Some(&f) {
            return;
        }
        self.flavors[id] = Some(f);
        // A flavor's node labels choose the nodes of its cached placement batch.
        self.topo.inventory_changed();
        self.refresh_cq_states();
        self.requeue_all_inadmissible();
    }

    /// Validates resource groups and interns them into per-flavor-resource quotas.
    fn intern_groups(
        &mut self,
        kind: &'static str,
        name: &str,
        groups: &[ResourceGroup],
    ) -> Result<(Vec<Rg>, Vec<Option<Quota>>), EngineError> {
        let mut rgs = Vec::with_capacity(groups.len());
        let mut quotas: Vec<Option<Quota>> = Vec::new();
        let mut seen_res = HashSet::new();
        let mut seen_flavors = HashSet::new();
        for (gi, g) in groups.iter().enumerate() {
            let mut rg = Rg::default();
            for r in &g.covered_resources {
                if !seen_res.insert(r.clone()) {
                    return Err(EngineError::invalid(
                        kind,
                        name,
                        format!("spec.resourceGroups[{gi}].coveredResources"),
                        format!("resource {r} is covered by more than one resource group"),
                    ));
                }
                rg.covered.push(self.ids.resource(r));
            }
            for (fi, fq) in g.flavors.iter().enumerate() {
                let field = format!("spec.resourceGroups[{gi}].flavors[{fi}].resources");
                let names: Vec<&str> = fq.resources.iter().map(|r| r.name.as_str()).collect();
                let covered: Vec<&str> = g.covered_resources.iter().map(String::as_str).collect();
                if names != covered {
                    return Err(EngineError::invalid(
                        kind,
                        name,
                        field,
                        format!(
                            "flavor {} lists {:?}, must match coveredResources {:?}",
                            fq.flavor, names, covered
                        ),
                    ));
                }
                if !seen_flavors.insert(fq.flavor.clone()) {
                    return Err(EngineError::invalid(
                        kind,
                        name,
                        format!("spec.resourceGroups[{gi}].flavors[{fi}].name"),
                        format!(
                            "flavor {} appears in more than one resource group",
                            fq.flavor
                        ),
                    ));
                }
                let f = self.ids.flavor(&fq.flavor);
                rg.flavors.push(f);
                for (ri, rq) in fq.resources.iter().enumerate() {
                    let rfield = format!("spec.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]");
                    if rq.nominal < 0 {
                        return Err(EngineError::invalid(
                            kind,
                            name,
                            format!("{rfield}.nominalQuota"),
                            "must be >= 0",
                        ));
                    }
                    // Limits without a cohort are rejected by Kueue's webhook; the quota tree
                    // ignores them for parentless nodes, so they are accepted here.
                    if rq.borrowing_limit.is_some_and(|b| b < 0) {
                        return Err(EngineError::invalid(
                            kind,
                            name,
                            format!("{rfield}.borrowingLimit"),
                            "must be >= 0",
                        ));
                    }
                    if rq.lending_limit.is_some_and(|l| l < 0) {
                        return Err(EngineError::invalid(
                            kind,
                            name,
                            format!("{rfield}.lendingLimit"),
                            "must be >= 0",
                        ));
                    }
                    // Kueue bounds lendingLimit by nominalQuota only for ClusterQueues; a
                    // Cohort may lend more than its own nominal (e.g. its children's quota).
                    if kind == "ClusterQueue" && rq.lending_limit.is_some_and(|l| l > rq.nominal) {
                        return Err(EngineError::invalid(
                            kind,
                            name,
                            format!("{rfield}.lendingLimit"),
                            "must be between 0 and nominalQuota",
                        ));
                    }
                    let r = self.ids.resource(&rq.name);
                    let fr = self.ids.fr(f, r) as usize;
                    if quotas.len() <= fr {
                        quotas.resize(fr + 1, None);
                    }
                    quotas[fr] = Some(Quota {
                        nominal: rq.nominal,
                        borrowing_limit: rq.borrowing_limit,
                        lending_limit: rq.lending_limit,
                    });
                }
            }
            rgs.push(rg);
        }
        Ok((rgs, quotas))
    }

    fn upsert_cq(&mut self, spec: ClusterQueue) -> Result<(), EngineError> {
        let name = spec.name.clone();
        if !(spec.fair_weight >= 0.0 && spec.fair_weight.is_finite()) {
            return Err(EngineError::invalid(
                "ClusterQueue",
                &name,
                "spec.fairSharing.weight",
                "must be >= 0",
            ));
        }
        // The same spec again (the shell sees every status write as an update): nothing changes, and, as in
        // Kueue, which requeues inadmissible workloads only when a ClusterQueue's spec changed, none is retried.
        if let Some(&n) = self.cq_by_name.get(&name)
            && self.tree.node(n).alive
            && self.cq(n).is_some_and(|c| !c.terminating && c.spec == spec)
        {
            return Ok(());
        }
        let (rgs, quotas) = self.intern_groups("ClusterQueue", &name, &spec.resource_groups)?;
        let mut rg_of_resource = FastMap::default();
        for (i, rg) in rgs.iter().enumerate() {
            for &r in &rg.covered {
                rg_of_resource.insert(r, i);
            }
        }
        let (n, new) = match self.cq_by_name.get(&name) {
            Some(&n) => (n, false),
            None => {
                let n = self.tree.add_node(&name, true);
                self.cq_by_name.insert(name.clone(), n);
                (n, true)
            }
        };
        let was_alive = self.tree.node(n).alive;
        let node = self.tree.node_mut(n);
        node.alive = true;
        // An empty cohortName means no cohort, as in Kueue.
        node.parent_name = spec.cohort.clone().filter(|c| !c.is_empty());
        node.quotas = quotas;
        node.weight = spec.fair_weight;
        if self.cqs.len() <= n as usize {
            self.cqs.resize(n as usize + 1, None);
        }
        let drain = spec.stop_policy == StopPolicy::HoldAndDrain;
        match &mut self.cqs[n as usize] {
            Some(c) => {
                c.spec = spec;
                c.rgs = rgs;
                c.rg_of_resource = rg_of_resource;
                c.tried = None;
                c.generation += 1;
            }
            slot @ None => {
                *slot = Some(CqData {
                    spec,
                    rgs,
                    rg_of_resource,
                    active: false,
                    inactive_reason: String::new(),
                    inactive_message: String::new(),
                    heap: Default::default(),
                    inadmissible: Default::default(),
                    failed_shapes: Default::default(),
                    sticky: None,
                    tried: None,
                    admitted: Default::default(),
                    generation: 1,
                    terminating: false,
                });
            }
        }
        if new {
            self.link_new_cq(n);
        } else {
            self.relink();
        }
        self.requeue_tree_of(n);
        if !was_alive {
            for k in self.local_queues_of(&name) {
                self.reroute_lq(&k);
            }
        }
        if self.config.admission_fair_sharing.is_some() {
            // Its admissionScope may have changed: its queue takes (or drops) the LocalQueues' usage order.
            for k in self.local_queues_of(&name) {
                self.afs_rekey(&k);
            }
        }
        self.requeue_inadmissible_of(n);
        if drain {
            let admitted: Vec<u32> = self
                .cq(n)
                .map(|c| c.admitted.iter().copied().collect())
                .unwrap_or_default();
            for i in admitted {
                self.drain_if_stopped(i);
            }
        }
        Ok(())
    }

    /// The LocalQueues that point at ClusterQueue `name`.
    fn local_queues_of(&self, name: &str) -> Vec<(String, String)> {
        self.lqs
            .iter()
            .filter(|(_, l)| l.spec.as_ref().is_some_and(|s| s.cluster_queue == name))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn delete_cq(&mut self, name: &str) {
        let Some(&n) = self.cq_by_name.get(name) else {
            return;
        };
        if !self.tree.node(n).alive {
            return;
        }
        if let Some(c) = self.cq_mut(n)
            && !c.admitted.is_empty()
        {
            // Its admitted workloads still hold quota in the cohort: it stays linked but inactive
            // until they are gone (see `release`).
            c.terminating = true;
            self.refresh_cq_states();
            return;
        }
        self.remove_cq(n);
    }

    /// Unlinks a deleted ClusterQueue that holds no quota and reroutes its LocalQueues.
    fn remove_cq(&mut self, n: NodeId) {
        let name = self.tree.node(n).name.clone();
        self.tree.node_mut(n).alive = false;
        if let Some(c) = self.cq_mut(n) {
            c.terminating = false;
        }
        let queued: Vec<u32> = match self.cq_mut(n) {
            Some(c) => {
                let q = c
                    .heap
                    .iter()
                    .chain(c.inadmissible.iter())
                    .map(|k| k.wl)
                    .collect();
                c.heap.clear();
                c.inadmissible.clear();
                c.sticky = None;
                q
            }
            None => Vec::new(),
        };
        for i in queued {
            if let Some(w) = self.wl_mut(i) {
                w.queued_in = None;
                w.qkey = None;
            }
        }
        self.structure_changed();
        for k in self.local_queues_of(&name) {
            self.reroute_lq(&k);
        }
    }

    fn upsert_cohort(&mut self, spec: Cohort) -> Result<(), EngineError> {
        let name = spec.name.clone();
        if !(spec.fair_weight >= 0.0 && spec.fair_weight.is_finite()) {
            return Err(EngineError::invalid(
                "Cohort",
                &name,
                "spec.fairSharing.weight",
                "must be >= 0",
            ));
        }
        if spec.parent.as_deref() == Some(name.as_str()) {
            return Err(EngineError::invalid(
                "Cohort",
                &name,
                "spec.parentName",
                "cannot be the cohort itself",
            ));
        }
        let (_, quotas) = self.intern_groups("Cohort", &name, &spec.resource_groups)?;
        let n = self.cohort_node(&name);
        let parent = spec.parent.filter(|p| !p.is_empty());
        let node = self.tree.node_mut(n);
        // The same spec again (a status write): nothing to relink or retry, as in Kueue.
        if node.explicit
            && node.parent_name == parent
            && node.quotas == quotas
            && node.weight == spec.fair_weight
        {
            return Ok(());
        }
        node.explicit = true;
        node.parent_name = parent;
        node.quotas = quotas;
        node.weight = spec.fair_weight;
        self.relink();
        self.requeue_tree_of(n);
        Ok(())
    }

    fn cohort_node(&mut self, name: &str) -> NodeId {
        if let Some(&n) = self.cohort_by_name.get(name) {
            return n;
        }
        let n = self.tree.add_node(name, false);
        self.cohort_by_name.insert(name.to_string(), n);
        n
    }

    /// Relinks the cohort forest, detects cycles, recomputes quotas and usage, and gives every inadmissible workload
    /// another chance (after a deletion).
    pub(crate) fn structure_changed(&mut self) {
        self.relink();
        self.requeue_all_inadmissible();
    }

    /// Relinks the cohort forest, detects cycles and recomputes quotas and usage.
    pub(crate) fn relink(&mut self) {
        let count = self.tree.nodes.len();
        for node in &mut self.tree.nodes {
            node.parent = None;
            node.child_cohorts.clear();
            node.child_cqs.clear();
            node.cycle = false;
            if !node.is_cq {
                node.alive = node.explicit;
            }
        }
        for n in 0..count as NodeId {
            let node = self.tree.node(n);
            let linked = if node.is_cq {
                node.alive
            } else {
                node.explicit
            };
            if !linked {
                continue;
            }
            if let Some(pname) = node.parent_name.clone() {
                let p = self.cohort_node(&pname);
                self.tree.node_mut(p).alive = true;
                self.tree.node_mut(n).parent = Some(p);
            }
        }
        for n in 0..self.tree.nodes.len() as NodeId {
            if let Some(p) = self.tree.node(n).parent {
                if self.tree.node(n).is_cq {
                    self.tree.node_mut(p).child_cqs.push(n);
                } else {
                    self.tree.node_mut(p).child_cohorts.push(n);
                }
            }
        }
        // A node is disabled when walking its parents revisits a node.
        let total = self.tree.nodes.len();
        let mut in_cycle = vec![false; total];
        for (n, flag) in in_cycle.iter_mut().enumerate() {
            // Every node has at most one parent: a walk that has not reached a root after `total` steps
            // revisits a node.
            let mut cur = n as NodeId;
            let mut steps = 0;
            while let Some(p) = self.tree.node(cur).parent {
                if steps == total {
                    *flag = true;
                    break;
                }
                steps += 1;
                cur = p;
            }
        }
        for (n, c) in in_cycle.into_iter().enumerate() {
            self.tree.nodes[n].cycle = c;
        }
        self.tree.rebuild();
        for c in self.cqs.iter_mut().flatten() {
            c.tried = None;
        }
        self.refresh_cq_states();
    }

    /// [`Engine::relink`] for a ClusterQueue seen for the first time: a leaf that holds nothing, so it joins its
    /// Cohort (made or revived by it) and only its own tree's quotas are recomputed, not the whole forest's
    /// (which made adding many queues quadratic).
    fn link_new_cq(&mut self, n: NodeId) {
        if let Some(pname) = self.tree.node(n).parent_name.clone() {
            let p = self.cohort_node(&pname);
            // Below a Cohort cycle its tree is disabled too, as relink's walk up finds.
            let cycle = self.tree.node(p).cycle;
            self.tree.node_mut(p).alive = true;
            // The newest node: last among its Cohort's children, where relink's pass in node order puts it.
            self.tree.node_mut(p).child_cqs.push(n);
            let node = self.tree.node_mut(n);
            node.parent = Some(p);
            node.cycle = cycle;
        }
        let root = self.tree.root(n);
        self.tree.rebuild_tree(root);
        for c in self.cqs.iter_mut().flatten() {
            c.tried = None;
        }
        // No other ClusterQueue's state depends on this one.
        self.refresh_cq_state(n);
    }

    /// Kueue's requeue after a ClusterQueue or Cohort is added or changed: the inadmissible workloads of the tree
    /// `n` is in (from its root Cohort down; `n` alone without a parent), none when its Cohorts form a cycle. Other
    /// trees' messages stay as they were written, as Kueue leaves them.
    fn requeue_tree_of(&mut self, n: NodeId) {
        if self.tree.node(n).cycle {
            return;
        }
        let mut root = n;
        while let Some(p) = self.tree.node(root).parent {
            root = p;
        }
        self.requeue_inadmissible_tree(root);
    }

    /// Recomputes each ClusterQueue's Active state; reports newly blocked pending workloads.
    pub(crate) fn refresh_cq_states(&mut self) {
        for n in 0..self.cqs.len() as NodeId {
            self.refresh_cq_state(n);
        }
    }

    /// [`Engine::refresh_cq_states`] for ClusterQueue `n` alone.
    fn refresh_cq_state(&mut self, n: NodeId) {
        {
            let Some(c) = self.cq(n) else { return };
            let node = self.tree.node(n);
            let reason = if !node.alive || c.terminating {
                "Terminating"
            } else if c.spec.stop_policy != StopPolicy::None {
                "Stopped"
            } else if node.cycle {
                "CohortHasCycle"
            } else {
                ""
            };
            // Kueue lists what is missing or inactive, the first kind as the reason.
            let mut missing_flavors: Vec<String> = c
                .rgs
                .iter()
                .flat_map(|rg| rg.flavors.iter())
                .filter(|&&f| self.flavors.get(f as usize).is_none_or(|x| x.is_none()))
                .map(|&f| self.ids.flavor_name(f).to_string())
                .collect();
            missing_flavors.sort();
            missing_flavors.dedup();
            let mut missing_checks = Vec::new();
            let mut inactive_checks = Vec::new();
            for name in &c.spec.admission_checks {
                match self.admission_checks.get(name) {
                    None => missing_checks.push(name.clone()),
                    Some(false) => inactive_checks.push(name.clone()),
                    Some(true) => {}
                }
            }
            missing_checks.sort();
            inactive_checks.sort();
            let mut reasons: Vec<(&str, String)> = Vec::new();
            if !missing_flavors.is_empty() {
                let list = missing_flavors.join(",");
                reasons.push((
                    "FlavorNotFound",
                    format!("references missing ResourceFlavor(s): {list}"),
                ));
            }
            if !missing_checks.is_empty() {
                let list = missing_checks.join(",");
                reasons.push((
                    "AdmissionCheckNotFound",
                    format!("references missing AdmissionCheck(s): {list}"),
                ));
            }
            if !inactive_checks.is_empty() {
                let list = inactive_checks.join(",");
                reasons.push((
                    "AdmissionCheckInactive",
                    format!("references inactive AdmissionCheck(s): {list}"),
                ));
            }
            let (reason, message) = match (reason, reasons.first()) {
                ("", Some((first, _))) => {
                    let all: Vec<&str> = reasons.iter().map(|(_, m)| m.as_str()).collect();
                    (
                        *first,
                        format!("Can't admit new workloads: {}.", all.join(", ")),
                    )
                }
                ("Terminating", _) => (
                    "Terminating",
                    "Can't admit new workloads; clusterQueue is terminating".to_string(),
                ),
                (r, _) => (r, String::new()),
            };
            let active = reason.is_empty();
            let was_active = c.active;
            let queued: Vec<u32> = if was_active && !active {
                c.heap
                    .iter()
                    .chain(c.inadmissible.iter())
                    .map(|k| k.wl)
                    .collect()
            } else {
                Vec::new()
            };
            let name = c.spec.name.clone();
            if let Some(c) = self.cq_mut(n) {
                c.active = active;
                c.inactive_reason = reason.to_string();
                c.inactive_message = message;
            }
            for i in queued {
                self.set_pending(i, INADMISSIBLE, format!("ClusterQueue {name} is inactive"));
            }
            if active && !was_active {
                self.requeue_inadmissible_of(n);
            }
        }
    }

    fn upsert_lq(&mut self, spec: LocalQueue) {
        let key = (spec.namespace.clone(), spec.name.clone());
        let drain = spec.stop_policy == StopPolicy::HoldAndDrain;
        let entry = self.lqs.entry(key.clone()).or_insert_with(|| LqData {
            spec: None,
            workloads: BTreeSet::new(),
            usage: None,
        });
        // The same spec again (a status write): its workloads are not retried, as in Kueue.
        if entry.spec.as_ref() == Some(&spec) {
            return;
        }
        entry.spec = Some(spec);
        self.afs_track_lq(&key);
        self.reroute_lq(&key);
        if drain {
            let members: Vec<u32> = self
                .lqs
                .get(&key)
                .map(|l| l.workloads.iter().copied().collect())
                .unwrap_or_default();
            for i in members {
                self.drain_if_stopped(i);
            }
        }
    }

    fn reroute_lq(&mut self, key: &(String, String)) {
        let members: Vec<u32> = self
            .lqs
            .get(key)
            .map(|l| l.workloads.iter().copied().collect())
            .unwrap_or_default();
        for i in members {
            if self.wl(i).is_some_and(|w| w.phase == Phase::Pending) {
                self.place(i);
            }
        }
    }

    /// Where a pending workload should queue, or why it can't.
    fn route(&self, w: &Wl) -> Result<NodeId, (&'static str, String)> {
        let q = &w.spec.queue_name;
        let lq = self
            .lqs
            .get(&(w.spec.namespace.clone(), q.clone()))
            .and_then(|l| l.spec.as_ref())
            .ok_or_else(|| (INADMISSIBLE, format!("LocalQueue {q} doesn't exist")))?;
        if lq.stop_policy != StopPolicy::None {
            return Err((INADMISSIBLE, format!("LocalQueue {q} is inactive")));
        }
        match self.cq_by_name.get(&lq.cluster_queue) {
            Some(&n) if self.tree.node(n).alive => Ok(n),
            _ => Err((
                INADMISSIBLE,
                format!("ClusterQueue {} doesn't exist", lq.cluster_queue),
            )),
        }
    }

    /// (Re)places a pending workload in its ClusterQueue's queue, or records why it can't queue.
    pub(crate) fn place(&mut self, i: u32) {
        // Kueue sends a workload whose shape failed to the inadmissible list only when it was not queued already.
        let was_queued = self.wl(i).is_some_and(|w| {
            w.queued_in
                .zip(w.qkey.as_ref())
                .and_then(|(n, k)| self.cq(n).map(|c| c.heap.contains(k)))
                .unwrap_or(false)
        });
        self.dequeue(i);
        let Some(w) = self.wl(i) else { return };
        if w.phase != Phase::Pending {
            return;
        }
        if !w.spec.active {
            self.set_pending(i, "Deactivated", "The workload is deactivated");
            return;
        }
        let route = self.route(w);
        if route.is_ok()
            && let Some(gates) = w.spec.admission_gated_by.clone()
        {
            // Kueue's queue manager never holds a gated workload; its workload controller says why it waits.
            let message = format!("Admission is gated by: {gates}");
            self.set_pending(i, ADMISSION_GATED, message);
            return;
        }
        match route {
            Ok(n) => {
                let mut key = w.qkey(i);
                key.afs = self.afs_order(i, n);
                if let Some(w) = self.wl_mut(i) {
                    w.afs = key.afs;
                    w.queued_in = Some(n);
                    w.qkey = Some(key.clone());
                }
                let mut inactive = None;
                let set_aside = !was_queued && self.shape_failed_in(i, n);
                if let Some(c) = self.cq_mut(n) {
                    if set_aside {
                        c.inadmissible.insert(key);
                    } else {
                        c.heap.insert(key);
                        // The queue's content changed: its head deserves another look.
                        c.tried = None;
                    }
                    if !c.active {
                        inactive = Some(c.spec.name.clone());
                    }
                }
                if let Some(name) = inactive {
                    self.set_pending(i, INADMISSIBLE, format!("ClusterQueue {name} is inactive"));
                }
            }
            Err((reason, msg)) => self.set_pending(i, reason, msg),
        }
    }

    /// Removes a workload from whatever queue holds it.
    pub(crate) fn dequeue(&mut self, i: u32) {
        let Some(w) = self.wl_mut(i) else { return };
        let (Some(n), Some(key)) = (w.queued_in.take(), w.qkey.take()) else {
            return;
        };
        if let Some(c) = self.cq_mut(n) {
            c.heap.remove(&key);
            c.inadmissible.remove(&key);
            if c.sticky == Some(i) {
                c.sticky = None;
            }
        }
    }

    /// Records a pending reason; emits a decision only when it changes. The message is kept shared: a worded
    /// assignment message is stored without a copy.
    pub(crate) fn set_pending<M>(&mut self, i: u32, reason: &'static str, message: M)
    where
        M: AsRef<str> + Into<std::sync::Arc<str>>,
    {
        let Some(w) = self.wl_mut(i) else { return };
        if w.pending
            .as_ref()
            .is_some_and(|(r, m)| *r == reason && **m == *message.as_ref())
        {
            return;
        }
        let text = message.as_ref().to_string();
        w.pending = Some((reason, message.into()));
        let key = w.key.clone();
        self.out.push(Decision::Pending {
            workload: key,
            reason: reason.to_string(),
            message: text,
        });
    }

    fn validate_workload(&self, w: &Workload) -> Result<(), EngineError> {
        // The object's name is formatted only for an error: most workloads are valid.
        let invalid = |field: String, reason: &str| {
            EngineError::invalid(
                "Workload",
                &format!("{}/{}", w.namespace, w.name),
                field,
                reason,
            )
        };
        for (i, ps) in w.pod_sets.iter().enumerate() {
            if ps.count < 0 {
                return Err(invalid(format!("spec.podSets[{i}].count"), "must be >= 0"));
            }
            if let Some(m) = ps.min_count
                && (m < 1 || m > ps.count)
            {
                return Err(invalid(
                    format!("spec.podSets[{i}].minCount"),
                    "must be between 1 and count",
                ));
            }
            if let Some((r, _)) = ps.requests.iter().find(|(_, q)| **q < 0) {
                return Err(invalid(
                    format!("spec.podSets[{i}].requests[{r}]"),
                    "must be >= 0",
                ));
            }
        }
        Ok(())
    }

    fn upsert_workload(
        &mut self,
        spec: Workload,
        admission: Option<Admission>,
    ) -> Result<(), EngineError> {
        self.validate_workload(&spec)?;
        let mut spec = spec;
        if self.config.priority_boost {
            // Kueue's effective priority: queue order, entry order and every preemption rule read it.
            spec.priority = spec.priority.saturating_add(spec.priority_boost);
        }
        let key = spec.key();
        let restore_cq = match &admission {
            Some(a) => match self.cq_by_name.get(&a.cluster_queue) {
                Some(&n) => Some(n),
                None => {
                    return Err(EngineError::invalid(
                        "Workload",
                        &key.to_string(),
                        "status.admission.clusterQueue",
                        format!("ClusterQueue {} doesn't exist", a.cluster_queue),
                    ));
                }
            },
            None => None,
        };
        let reqs: Vec<Vec<(u32, i64)>> = spec
            .pod_sets
            .iter()
            .map(|ps| {
                ps.requests
                    .iter()
                    .map(|(r, q)| (self.ids.resource(r), *q))
                    .collect()
            })
            .collect();
        let lq_key = (spec.namespace.clone(), spec.queue_name.clone());
        let hash = self
            .config
            .scheduling_equivalence_hashing
            .then(|| crate::equivalence::scheduling_hash(&spec));
        // Its admission checks passed: under admission fair sharing its entry penalty settles.
        let now_admitted = spec.admitted;
        let settle = |engine: &mut Self, i: u32| {
            if now_admitted && engine.wl(i).is_some_and(|w| w.adm.is_some()) {
                engine.afs_settle(i);
            }
        };
        if let Some(&i) = self.wl_by_key.get(&key)
            && let Some(w) = self.wl_mut(i)
            && (admission.is_none() || w.adm.is_some())
            && same_scheduling_inputs(&w.spec, &spec)
        {
            // Nothing that scheduling reads changed (e.g. a status update): keep the workload
            // where it is queued and keep its flavor scan progress, as Kueue's PushOrUpdate does.
            let reclaimed = w.spec.reclaimable != spec.reclaimable;
            w.spec = spec;
            w.hash = hash;
            w.reqs = reqs;
            w.worded = None;
            settle(self, i);
            if reclaimed {
                self.recharge_reclaimed(i);
            }
            return Ok(());
        }
        let old_reclaimable = self
            .wl_by_key
            .get(&key)
            .and_then(|&i| self.wl(i))
            .map(|w| w.spec.reclaimable.clone());
        let i = match self.wl_by_key.get(&key) {
            Some(&i) => {
                let old_lq = self
                    .wl(i)
                    .map(|w| (w.spec.namespace.clone(), w.spec.queue_name.clone()));
                if let Some(old) = old_lq
                    && old != lq_key
                {
                    self.afs_forget(i, &old);
                    if let Some(l) = self.lqs.get_mut(&old) {
                        l.workloads.remove(&i);
                    }
                }
                self.dequeue(i);
                if let Some(w) = self.wl_mut(i) {
                    w.spec = spec;
                    w.hash = hash;
                    w.reqs = reqs;
                    w.last = None;
                    w.worded = None;
                    if w.phase == Phase::Finished {
                        return Ok(());
                    }
                }
                i
            }
            None => {
                let w = Wl {
                    spec,
                    key: key.clone(),
                    reqs,
                    phase: Phase::Pending,
                    queued_in: None,
                    qkey: None,
                    pending: None,
                    adm: None,
                    last: None,
                    preempted_for: None,
                    preemptions: 0,
                    awaiting: None,
                    afs: 0,
                    worded: None,
                    hash,
                };
                let i = match self.free_wls.pop() {
                    Some(i) => {
                        self.wls[i as usize] = Some(w);
                        i
                    }
                    None => {
                        self.wls.push(Some(w));
                        (self.wls.len() - 1) as u32
                    }
                };
                self.wl_by_key.insert(key, i);
                i
            }
        };
        self.lqs
            .entry(lq_key.clone())
            .or_insert_with(|| LqData {
                spec: None,
                workloads: BTreeSet::new(),
                usage: None,
            })
            .workloads
            .insert(i);
        let holds_quota = self.wl(i).is_some_and(|w| w.adm.is_some());
        if let (Some(a), Some(n), false) = (admission, restore_cq, holds_quota) {
            let reserved_at = self
                .wl(i)
                .map(|w| w.spec.quota_reserved_at.unwrap_or(w.spec.creation_time))
                .unwrap_or_default();
            self.reserve(i, n, a, reserved_at);
        } else if holds_quota
            && old_reclaimable
                .is_some_and(|old| self.wl(i).is_some_and(|w| w.spec.reclaimable != old))
        {
            self.recharge_reclaimed(i);
        }
        settle(self, i);
        let (phase, active) = match self.wl(i) {
            Some(w) => (w.phase, w.spec.active),
            None => return Ok(()),
        };
        if !active && phase == Phase::Pending {
            // Deactivated before it was admitted: its entry penalty no longer counts.
            self.afs_forget(i, &lq_key);
        }
        match phase {
            Phase::Pending => self.place(i),
            Phase::Admitted if !active => {
                self.evict(
                    i,
                    "Deactivated",
                    None,
                    None,
                    "The workload is deactivated".into(),
                    self.now,
                );
            }
            Phase::Admitted => self.drain_if_stopped(i),
            _ => {}
        }
        Ok(())
    }

    /// Kueue's workload controller re-checks every workload that holds quota: while its LocalQueue, then its
    /// ClusterQueue, has `stopPolicy: HoldAndDrain`, it is evicted. Called when a queue stops and when the engine
    /// learns of an admitted workload after its queue stopped (a restart, the simulator's load order).
    fn drain_if_stopped(&mut self, i: u32) {
        let Some(w) = self.wl(i) else { return };
        if w.phase != Phase::Admitted {
            return;
        }
        let lq_drains = self
            .lqs
            .get(&(w.spec.namespace.clone(), w.spec.queue_name.clone()))
            .and_then(|l| l.spec.as_ref())
            .is_some_and(|s| s.stop_policy == StopPolicy::HoldAndDrain);
        let cq_drains = w
            .adm
            .as_ref()
            .and_then(|a| self.cq(a.cq))
            .is_some_and(|c| c.spec.stop_policy == StopPolicy::HoldAndDrain);
        let (reason, message) = if lq_drains {
            ("LocalQueueStopped", "The LocalQueue is stopped")
        } else if cq_drains {
            ("ClusterQueueStopped", "The ClusterQueue is stopped")
        } else {
            return;
        };
        self.evict(i, reason, None, None, message.into(), self.now);
    }

    fn delete_workload(&mut self, key: &WorkloadKey) {
        let Some(i) = self.wl_by_key.remove(key) else {
            return;
        };
        self.afs_forget_own(i);
        self.release(i);
        self.dequeue(i);
        if let Some(w) = self.wl(i) {
            let lq_key = (w.spec.namespace.clone(), w.spec.queue_name.clone());
            if let Some(l) = self.lqs.get_mut(&lq_key) {
                l.workloads.remove(&i);
                if l.spec.is_none() && l.workloads.is_empty() {
                    self.lqs.remove(&lq_key);
                }
            }
        }
        self.wls[i as usize] = None;
        self.free_wls.push(i);
    }

    /// Charges an admission's usage to the quota tree and records it (less its reclaimable pods: a restored
    /// admission may have some).
    pub(crate) fn reserve(&mut self, i: u32, n: NodeId, admission: Admission, time: Time) {
        let reclaimable = self
            .wl(i)
            .map(|w| w.spec.reclaimable.clone())
            .unwrap_or_default();
        let usage = self.admission_usage_after(&admission, &reclaimable);
        self.reserve_with_usage(i, n, Arc::new(admission), usage, time);
    }

    /// An admission's usage less the pods `reclaimable` says finished (Kueue scales each pod set's usage to its
    /// count less its reclaimable pods, at least 0).
    fn admission_usage_after(
        &mut self,
        admission: &Admission,
        reclaimable: &[(String, i32)],
    ) -> Vec<(u32, i64)> {
        if reclaimable.is_empty() {
            return self.admission_usage(admission);
        }
        let pod_set_count = |name: &str| {
            reclaimable
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |&(_, c)| c)
        };
        let mut usage: BTreeMap<u32, i64> = BTreeMap::new();
        for psa in &admission.pod_set_assignments {
            let reclaimed = i64::from(pod_set_count(&psa.name).max(0));
            let count = i64::from(psa.count);
            for (res, flavor) in &psa.flavors {
                let f = self.ids.flavor(flavor);
                let r = self.ids.resource(res);
                let fr = self.ids.fr(f, r);
                let full = psa.resource_usage.get(res).copied().unwrap_or(0);
                let v = if count > 0 && reclaimed > 0 {
                    let live = (count - reclaimed).max(0);
                    i64::try_from(i128::from(full) * i128::from(live) / i128::from(count))
                        .unwrap_or(full)
                } else {
                    full
                };
                let u = usage.entry(fr).or_default();
                *u = u.saturating_add(v);
            }
        }
        usage.into_iter().collect()
    }

    /// Charges an admitted workload anew after its reclaimable pods changed: the quota its finished pods held
    /// goes back to the tree, and workloads waiting in it get another chance.
    fn recharge_reclaimed(&mut self, i: u32) {
        let Some(w) = self.wl(i) else {
            return;
        };
        let Some(adm) = w.adm.as_ref() else {
            return;
        };
        let (n, admission, old) = (adm.cq, adm.admission.clone(), adm.usage.clone());
        let reclaimable = w.spec.reclaimable.clone();
        let new = self.admission_usage_after(&admission, &reclaimable);
        if new == old {
            return;
        }
        for &(fr, v) in &old {
            self.tree.add_usage(n, fr, -v);
        }
        for &(fr, v) in &new {
            self.tree.add_usage(n, fr, v);
        }
        self.tree.bump(n);
        if let Some(c) = self.cq_mut(n) {
            c.generation += 1;
        }
        if let Some(adm) = self.wl_mut(i).and_then(|w| w.adm.as_mut()) {
            adm.frs = FrMask::of(new.iter().map(|&(fr, _)| fr));
            adm.usage = new;
        }
        let root = self.tree.root(n);
        self.requeue_inadmissible_tree(root);
    }

    /// An admission's usage by interned flavor-resource, summed over its pod sets.
    pub(crate) fn admission_usage(&mut self, admission: &Admission) -> Vec<(u32, i64)> {
        let mut usage: BTreeMap<u32, i64> = BTreeMap::new();
        for psa in &admission.pod_set_assignments {
            for (res, flavor) in &psa.flavors {
                let f = self.ids.flavor(flavor);
                let r = self.ids.resource(res);
                let fr = self.ids.fr(f, r);
                let u = usage.entry(fr).or_default();
                // Restored admissions are input: oversized sums saturate.
                *u = u.saturating_add(psa.resource_usage.get(res).copied().unwrap_or(0));
            }
        }
        usage.into_iter().collect()
    }

    /// Reserves quota for an admission whose usage by flavor-resource (sorted) is already known: the scheduling
    /// cycle has it from the assignment and need not look every name up again.
    pub(crate) fn reserve_with_usage(
        &mut self,
        i: u32,
        n: NodeId,
        admission: Arc<Admission>,
        usage: Vec<(u32, i64)>,
        time: Time,
    ) {
        for &(fr, v) in &usage {
            self.tree.add_usage(n, fr, v);
        }
        self.tree.bump(n);
        if let Some(c) = self.cq_mut(n) {
            c.admitted.insert(i);
            if c.sticky == Some(i) {
                c.sticky = None;
            }
        }
        if let Some(w) = self.wl_mut(i) {
            w.phase = Phase::Admitted;
            w.pending = None;
            w.adm = Some(Adm {
                cq: n,
                admission,
                frs: FrMask::of(usage.iter().map(|&(fr, _)| fr)),
                usage,
                reserved_at: time,
            });
        }
    }

    /// Releases a workload's quota and gives inadmissible workloads in its tree another chance.
    pub(crate) fn release(&mut self, i: u32) {
        let Some(adm) = self.wl_mut(i).and_then(|w| w.adm.take()) else {
            return;
        };
        for &(fr, v) in &adm.usage {
            self.tree.add_usage(adm.cq, fr, -v);
        }
        self.tree.bump(adm.cq);
        let mut gone = false;
        if let Some(c) = self.cq_mut(adm.cq) {
            c.admitted.remove(&i);
            c.generation += 1;
            gone = c.terminating && c.admitted.is_empty();
        }
        // Node capacity is shared by every tree: a released placement requeues them all, quota only this one.
        if self.topo.release(i) {
            self.requeue_all_inadmissible();
        } else {
            let root = self.tree.root(adm.cq);
            self.requeue_inadmissible_tree(root);
        }
        if gone {
            self.remove_cq(adm.cq);
        }
    }

    /// Marks an admitted workload as evicting (its quota stays held) and emits the decision.
    pub(crate) fn evict(
        &mut self,
        i: u32,
        reason: &str,
        preemption_reason: Option<String>,
        preemptor: Option<WorkloadKey>,
        message: String,
        time: Time,
    ) {
        self.evict_with(
            i,
            reason,
            preemption_reason,
            preemptor,
            message,
            time,
            false,
        );
    }

    /// [`Engine::evict`], saying whether the victim may checkpoint first.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn evict_with(
        &mut self,
        i: u32,
        reason: &str,
        preemption_reason: Option<String>,
        preemptor: Option<WorkloadKey>,
        message: String,
        time: Time,
        graceful: bool,
    ) {
        let Some(w) = self.wl_mut(i) else { return };
        if w.phase != Phase::Admitted {
            return;
        }
        w.phase = Phase::Evicting;
        if reason == "Preempted" {
            w.preemptions = w.preemptions.saturating_add(1);
        }
        let key = w.key.clone();
        self.out.push(Decision::Evict {
            workload: key,
            reason: reason.to_string(),
            preemption_reason,
            preemptor,
            message,
            time,
            graceful,
        });
    }

    pub(crate) fn requeue_inadmissible_of(&mut self, n: NodeId) {
        if let Some(c) = self.cq_mut(n) {
            // Kueue forgets the failed shapes whenever it requeues, so the requeued workloads are tried afresh.
            c.failed_shapes.clear();
            if c.heap.is_empty() {
                std::mem::swap(&mut c.heap, &mut c.inadmissible);
            } else if !c.inadmissible.is_empty() {
                let moved = std::mem::take(&mut c.inadmissible);
                c.heap.extend(moved);
            }
            c.tried = None;
        }
    }

    pub(crate) fn requeue_all_inadmissible(&mut self) {
        for n in 0..self.cqs.len() as NodeId {
            self.requeue_inadmissible_of(n);
        }
    }

    /// Moves inadmissible workloads of every ClusterQueue under `root` back to their heaps.
    pub(crate) fn requeue_inadmissible_tree(&mut self, root: NodeId) {
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            let node = self.tree.node(n);
            if node.is_cq {
                self.requeue_inadmissible_of(n);
            } else if !node.cycle {
                stack.extend(node.child_cohorts.iter().copied());
                stack.extend(node.child_cqs.iter().copied());
            }
        }
    }
}
