//! Admission fair sharing (Kueue's `admissionFairSharing` with a ClusterQueue's
//! `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`): each LocalQueue's consumed resources decay
//! towards what its admitted workloads use, a workload entering adds an entry penalty until it is admitted, and
//! a ClusterQueue orders its queue by its LocalQueues' weighted usage first.
//!
//! As Kueue v0.19: usage is sampled every `usageSamplingInterval` (here when a cycle or a caller's
//! [`Engine::sample_admission_usage`] finds the interval passed, which is exact while admitted usage is
//! constant), `alpha = 1 - 0.5^(elapsed / usageHalfLifeTime)` (no half-life: usage is reset), the penalty of a
//! workload is its total requests times the alpha of one sampling interval and is settled into the consumed
//! usage once the workload is admitted, and a LocalQueue whose weight is not positive sorts last.

use std::collections::BTreeMap;

use super::fasthash::FastMap;
use super::quota::NodeId;
use super::{AdmissionFairSharingConfig, ConsumedUsage, Engine, Phase, Time};

/// A LocalQueue's admission-fair-sharing state.
#[derive(Clone, Debug, Default)]
pub(crate) struct LqUsage {
    /// Decayed consumed resources, in base units (cpu in cores).
    pub consumed: BTreeMap<String, f64>,
    /// When `consumed` was last brought up to date; None until the engine's first cycle after the LocalQueue
    /// appeared.
    pub last_update: Option<Time>,
    /// Entry penalties of workloads that reserved quota and are not admitted yet.
    pub penalties: FastMap<u32, BTreeMap<String, f64>>,
    /// Whether `consumed` came from the LocalQueue's persisted status or a sample (a later restore is ignored).
    pub seeded: bool,
}

/// `1 - 0.5^(elapsed / half_life)`; 0 without a half-life.
pub(crate) fn alpha(elapsed_ms: Time, half_life_ms: Time) -> f64 {
    if half_life_ms <= 0 {
        return 0.0;
    }
    1.0 - 0.5f64.powf(elapsed_ms.max(0) as f64 / half_life_ms as f64)
}

/// A workload's requests or usage in base units, by resource name.
pub(crate) type Resources = BTreeMap<String, f64>;

fn add_into(into: &mut Resources, from: &Resources, factor: f64) {
    for (r, v) in from {
        *into.entry(r.clone()).or_default() += v * factor;
    }
}

/// An engine value of `resource` in base units (the engine keeps cpu in milli-cores).
pub(crate) fn base_units(resource: &str, v: i64) -> f64 {
    if resource == "cpu" {
        v as f64 / 1000.0
    } else {
        v as f64
    }
}

impl AdmissionFairSharingConfig {
    /// Weighted sum of `resources` (a resource without a weight counts 1).
    fn weighted(&self, resources: &Resources) -> f64 {
        resources
            .iter()
            .map(|(r, v)| self.resource_weights.get(r).copied().unwrap_or(1.0) * v)
            .sum()
    }
}

impl Engine {
    /// Admission fair sharing's settings when it is on.
    fn afs(&self) -> Option<&AdmissionFairSharingConfig> {
        self.config.admission_fair_sharing.as_ref()
    }

    /// Whether ClusterQueue `n` orders its queue by LocalQueue usage.
    pub(crate) fn cq_uses_afs(&self, n: NodeId) -> bool {
        self.afs().is_some() && self.cq(n).is_some_and(|c| c.spec.admission_fair_sharing)
    }

    /// A LocalQueue's weighted usage (consumed plus pending penalties, over its weight); +inf when its weight is
    /// not positive, as Kueue v0.19 sorts such a queue last.
    pub(crate) fn lq_usage(&self, lq: &(String, String)) -> f64 {
        let Some(cfg) = self.afs() else { return 0.0 };
        let Some(l) = self.lqs.get(lq) else {
            return 0.0;
        };
        let weight = l
            .spec
            .as_ref()
            .and_then(|s| s.fair_sharing_weight)
            .unwrap_or(1.0);
        if weight <= 0.0 || weight.is_nan() {
            return f64::INFINITY;
        }
        let Some(u) = &l.usage else { return 0.0 };
        let mut all = u.consumed.clone();
        for p in u.penalties.values() {
            add_into(&mut all, p, 1.0);
        }
        cfg.weighted(&all) / weight
    }

    /// The queue-order component of workload `i` queued in ClusterQueue `n`: its LocalQueue's usage as
    /// order-preserving bits (0 where the ClusterQueue does not use admission fair sharing).
    pub(crate) fn afs_order(&self, i: u32, n: NodeId) -> u64 {
        if !self.cq_uses_afs(n) {
            return 0;
        }
        self.wl(i)
            .map(|w| {
                usage_bits(self.lq_usage(&(w.spec.namespace.clone(), w.spec.queue_name.clone())))
            })
            .unwrap_or(0)
    }

    /// What the admitted workloads of a LocalQueue use, summed over flavors, in base units.
    fn admitted_usage(&self, lq: &(String, String)) -> Resources {
        let mut out = Resources::new();
        let Some(l) = self.lqs.get(lq) else {
            return out;
        };
        for &i in &l.workloads {
            let Some(w) = self.wl(i) else { continue };
            let Some(adm) = &w.adm else { continue };
            if !matches!(w.phase, Phase::Admitted | Phase::Evicting) || !self.counts_admitted(i) {
                continue;
            }
            for &(fr, v) in &adm.usage {
                let (_, r) = self.ids.fr_parts(fr);
                let name = self.ids.resource_name(r);
                *out.entry(name.to_string()).or_default() += base_units(name, v);
            }
        }
        out
    }

    /// The LocalQueue a workload names.
    /// [`Engine::afs_forget`] for workload `i`'s own LocalQueue.
    pub(crate) fn afs_forget_own(&mut self, i: u32) {
        if self.afs().is_none() {
            return;
        }
        if let Some(lq) = self.lq_of(i) {
            self.afs_forget(i, &lq);
        }
    }

    pub(crate) fn lq_of(&self, i: u32) -> Option<(String, String)> {
        self.wl(i)
            .map(|w| (w.spec.namespace.clone(), w.spec.queue_name.clone()))
    }

    /// Whether a workload holding quota counts as admitted (its ClusterQueue's admission checks, if any, passed).
    pub(crate) fn counts_admitted(&self, i: u32) -> bool {
        let Some(w) = self.wl(i) else { return false };
        let has_checks = w
            .adm
            .as_ref()
            .and_then(|a| self.cq(a.cq))
            .is_some_and(|c| !c.spec.admission_checks.is_empty());
        !has_checks || w.spec.admitted
    }

    /// A LocalQueue appeared (or admission fair sharing is on and it has no state yet).
    pub(crate) fn afs_track_lq(&mut self, lq: &(String, String)) {
        if self.afs().is_none() {
            return;
        }
        if let Some(l) = self.lqs.get_mut(lq)
            && l.usage.is_none()
        {
            l.usage = Some(LqUsage::default());
        }
    }

    /// Seeds a LocalQueue's consumed usage from its persisted status (after a restart), unless it was already
    /// sampled or seeded.
    pub(crate) fn afs_restore(&mut self, lq: &(String, String), usage: ConsumedUsage) {
        self.afs_track_lq(lq);
        let Some(u) = self.lqs.get_mut(lq).and_then(|l| l.usage.as_mut()) else {
            return;
        };
        if u.seeded {
            return;
        }
        u.seeded = true;
        u.consumed = usage.resources;
        self.afs_rekey(lq);
    }

    /// Brings every LocalQueue's consumed usage up to date where a sampling interval passed (and starts the clock
    /// of new ones); reorders the queues whose usage changed.
    pub fn sample_admission_usage(&mut self, now: Time) {
        let Some(cfg) = self.afs().cloned() else {
            return;
        };
        self.now = self.now.max(now);
        let now = self.now;
        let due: Vec<(String, String)> = self
            .lqs
            .iter()
            .filter(|(_, l)| l.spec.as_ref().is_some_and(|s| self.lq_samples(s)))
            .filter_map(|(k, l)| {
                let u = l.usage.as_ref()?;
                match u.last_update {
                    None => Some(k.clone()),
                    Some(t) if now - t >= cfg.usage_sampling_interval => Some(k.clone()),
                    _ => None,
                }
            })
            .collect();
        for lq in due {
            let admitted = self.admitted_usage(&lq);
            let Some(u) = self.lqs.get_mut(&lq).and_then(|l| l.usage.as_mut()) else {
                continue;
            };
            match u.last_update {
                // The first sample starts the clock (from the persisted usage when restored).
                None => u.seeded = true,
                Some(t) => decay(&mut u.consumed, &admitted, now - t, cfg.usage_half_life),
            }
            u.last_update = Some(now);
            self.afs_rekey(&lq);
        }
    }

    /// Whether a LocalQueue's usage is sampled: as Kueue's LocalQueue reconciler, not while it is stopped or its
    /// ClusterQueue is missing or inactive (its clock then waits, and the next sample covers the whole time).
    fn lq_samples(&self, spec: &super::LocalQueue) -> bool {
        spec.stop_policy == super::StopPolicy::None
            && self
                .cq_by_name
                .get(&spec.cluster_queue)
                .and_then(|&n| self.cq(n))
                .is_some_and(|c| c.active)
    }

    /// When the next sampling interval ends for some LocalQueue (None without admission fair sharing).
    pub fn next_admission_usage_sample(&self) -> Option<Time> {
        let cfg = self.afs()?;
        self.lqs
            .values()
            .filter(|l| l.spec.as_ref().is_some_and(|s| self.lq_samples(s)))
            .filter_map(|l| l.usage.as_ref())
            .map(|u| {
                u.last_update
                    .map_or(self.now, |t| t + cfg.usage_sampling_interval)
            })
            .min()
    }

    /// Workload `i` reserved quota in ClusterQueue `n` in this cycle: under admission fair sharing its LocalQueue
    /// carries the entry penalty (replacing an earlier one of the same workload) until it is admitted, at once
    /// when the ClusterQueue has no admission checks.
    pub(crate) fn afs_entered(&mut self, i: u32, n: NodeId) {
        let Some(cfg) = self.afs().cloned() else {
            return;
        };
        if !self.cq_uses_afs(n) {
            return;
        }
        let Some(w) = self.wl(i) else { return };
        let lq = (w.spec.namespace.clone(), w.spec.queue_name.clone());
        let mut requests = Resources::new();
        // Kueue's entry penalty under IgnoreUndeclared counts only the resources the queue covers.
        let covering = self
            .config
            .ignore_undeclared_resources
            .then(|| self.cq(n))
            .flatten();
        for (ps, reqs) in w.spec.pod_sets.iter().zip(&w.reqs) {
            let count = w
                .adm
                .as_ref()
                .and_then(|a| {
                    a.admission
                        .pod_set_assignments
                        .iter()
                        .find(|p| p.name == ps.name)
                })
                .map_or(ps.count, |p| p.count);
            for &(r, v) in reqs {
                if covering.is_some_and(|c| !c.rg_of_resource.contains_key(&r)) {
                    continue;
                }
                let name = self.ids.resource_name(r);
                *requests.entry(name.to_string()).or_default() +=
                    base_units(name, v) * f64::from(count.max(0));
            }
        }
        let a = alpha(cfg.usage_sampling_interval, cfg.usage_half_life);
        let penalty: Resources = requests.into_iter().map(|(r, v)| (r, v * a)).collect();
        self.afs_track_lq(&lq);
        if let Some(u) = self.lqs.get_mut(&lq).and_then(|l| l.usage.as_mut()) {
            u.penalties.insert(i, penalty);
        }
        if self.counts_admitted(i) {
            self.afs_settle(i);
        } else {
            self.afs_rekey(&lq);
        }
    }

    /// Workload `i` is admitted: its LocalQueue's usage is decayed up to now (this workload included) and its
    /// entry penalty moves into the consumed usage.
    pub(crate) fn afs_settle(&mut self, i: u32) {
        let Some(w) = self.wl(i) else { return };
        let lq = (w.spec.namespace.clone(), w.spec.queue_name.clone());
        let pending = self
            .lqs
            .get(&lq)
            .and_then(|l| l.usage.as_ref())
            .is_some_and(|u| u.penalties.contains_key(&i));
        if !pending {
            return;
        }
        let Some(cfg) = self.afs().cloned() else {
            return;
        };
        let admitted = self.admitted_usage(&lq);
        let now = self.now;
        let Some(u) = self.lqs.get_mut(&lq).and_then(|l| l.usage.as_mut()) else {
            return;
        };
        let penalty = u.penalties.remove(&i).unwrap_or_default();
        if let Some(t) = u.last_update {
            decay(&mut u.consumed, &admitted, now - t, cfg.usage_half_life);
        }
        add_into(&mut u.consumed, &penalty, 1.0);
        u.last_update = Some(now);
        u.seeded = true;
        self.afs_rekey(&lq);
    }

    /// Workload `i` leaves its LocalQueue's accounting without being admitted (deleted, finished, deactivated
    /// or moved to another queue): its pending entry penalty is dropped.
    pub(crate) fn afs_forget(&mut self, i: u32, lq: &(String, String)) {
        // Entry penalties exist only under admission fair sharing (fixed for the engine's life).
        if self.afs().is_none() {
            return;
        }
        let dropped = self
            .lqs
            .get_mut(lq)
            .and_then(|l| l.usage.as_mut())
            .is_some_and(|u| u.penalties.remove(&i).is_some());
        if dropped {
            self.afs_rekey(lq);
        }
    }

    /// A LocalQueue's usage changed: its queued workloads take their new place in ClusterQueues that order by it.
    pub(crate) fn afs_rekey(&mut self, lq: &(String, String)) {
        let members: Vec<u32> = self
            .lqs
            .get(lq)
            .map(|l| l.workloads.iter().copied().collect())
            .unwrap_or_default();
        // Every member shares the LocalQueue's usage: computed once.
        let bits = usage_bits(self.lq_usage(lq));
        for i in members {
            let Some(w) = self.wl(i) else { continue };
            let Some(n) = w.queued_in.or(w.adm.as_ref().map(|a| a.cq)) else {
                continue;
            };
            let afs = if self.cq_uses_afs(n) { bits } else { 0 };
            let Some(w) = self.wl_mut(i) else { continue };
            if w.afs == afs && w.qkey.as_ref().is_none_or(|k| k.afs == afs) {
                continue;
            }
            w.afs = afs;
            let Some(key) = w.qkey.clone() else { continue };
            let mut new = key.clone();
            new.afs = afs;
            w.qkey = Some(new.clone());
            if let Some(q) = w.queued_in
                && let Some(c) = self.cq_mut(q)
            {
                if c.heap.remove(&key) {
                    c.heap.insert(new);
                } else if c.inadmissible.remove(&key) {
                    c.inadmissible.insert(new);
                }
            }
        }
    }

    /// A LocalQueue's admission-fair-sharing status: its consumed resources and when they were brought up to date.
    pub fn local_queue_consumed_usage(&self, namespace: &str, name: &str) -> Option<ConsumedUsage> {
        let u = self
            .lqs
            .get(&(namespace.to_string(), name.to_string()))?
            .usage
            .as_ref()?;
        Some(ConsumedUsage {
            resources: u.consumed.clone(),
            last_update: u.last_update?,
        })
    }

    /// A LocalQueue's weighted admission usage (what its ClusterQueue orders by), when admission fair sharing is on.
    pub fn local_queue_admission_usage(&self, namespace: &str, name: &str) -> Option<f64> {
        self.afs()?;
        Some(self.lq_usage(&(namespace.to_string(), name.to_string())))
    }
}

/// `consumed = consumed * (1 - alpha) + admitted * alpha` over `elapsed`; no half-life resets it.
fn decay(consumed: &mut Resources, admitted: &Resources, elapsed: Time, half_life: Time) {
    if half_life <= 0 {
        consumed.clear();
        return;
    }
    let a = alpha(elapsed, half_life);
    for v in consumed.values_mut() {
        *v *= 1.0 - a;
    }
    add_into(consumed, admitted, a);
}

/// Order-preserving bits of a non-negative usage (NaN and negatives sort first, +inf last).
fn usage_bits(u: f64) -> u64 {
    if u.is_nan() || u <= 0.0 {
        0
    } else {
        u.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_follows_kueues_half_life() {
        // Kueue's LocalQueue reconciler cases: 8 cpu consumed, 5 minutes elapsed.
        let five_min = 300_000;
        let cpu = |v: f64| Resources::from([("cpu".to_string(), v)]);
        let mut c = cpu(8.0);
        decay(&mut c, &Resources::new(), five_min, five_min);
        assert!((c["cpu"] - 4.0).abs() < 1e-9);
        let mut c = cpu(8.0);
        decay(&mut c, &cpu(4.0), five_min, five_min);
        assert!((c["cpu"] - 6.0).abs() < 1e-9);
        let mut c = cpu(8.0);
        decay(&mut c, &cpu(4.0), five_min, 2 * five_min);
        assert!((c["cpu"] - 6.828427124).abs() < 1e-9, "{}", c["cpu"]);
        let mut c = cpu(8.0);
        decay(&mut c, &Resources::new(), five_min, 24 * 3_600_000);
        assert!((c["cpu"] - 7.980769063).abs() < 1e-9, "{}", c["cpu"]);
        let mut c = cpu(8.0);
        decay(&mut c, &cpu(4.0), five_min, 0);
        assert!(c.is_empty());
    }

    #[test]
    fn alpha_of_one_interval_is_kueues_entry_penalty_factor() {
        // Half-life 10 s, interval 1 s: 4 cpu enter with a 267m penalty (Kueue's scheduler AFS test).
        assert_eq!((4000.0 * alpha(1000, 10_000)) as i64, 267);
        assert_eq!(alpha(1000, 0), 0.0);
    }

    #[test]
    fn usage_bits_keep_the_order() {
        let xs = [0.0, 1e-9, 0.5, 1.0, 4.267, 1e12, f64::INFINITY];
        for w in xs.windows(2) {
            assert!(usage_bits(w[0]) < usage_bits(w[1]), "{w:?}");
        }
        assert_eq!(usage_bits(f64::NAN), 0);
    }
}
