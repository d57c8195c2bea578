//! Flavor assignment (Kueue's flavorassigner) and partial admission (podset_reducer).

use std::collections::BTreeMap;

use super::matching::flavor_mismatch;
use super::preempt::{Preemptor, Sim, Target};
use super::quota::{Fr, NodeId};
use super::vecmap::VecMap;
use super::{Admission, FlavorPreference, FungibilityPolicy, PodSetAssignment, Qty};

/// Kueue's FlavorAssignmentMode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    NoFit,
    Preempt,
    Fit,
}

/// Kueue's granular preemption mode, worst to best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PMode {
    NoFit,
    NoCandidates,
    Preempt,
    Reclaim,
    Fit,
}

impl PMode {
    fn mode(self) -> Mode {
        match self {
            PMode::NoFit => Mode::NoFit,
            PMode::Fit => Mode::Fit,
            _ => Mode::Preempt,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Granular {
    p: PMode,
    borrow: i32,
}

pub(crate) const NO_MATCHING_FLAVOR: &str = "NoMatchingFlavor";
pub(crate) const EXCEEDS_MAX_QUOTA: &str = "ExceedsMaxQuota";
pub(crate) const WAITING_FOR_QUOTA: &str = "WaitingForQuota";

fn severity(reason: &str) -> u8 {
    match reason {
        NO_MATCHING_FLAVOR => 4,
        EXCEEDS_MAX_QUOTA => 3,
        WAITING_FOR_QUOTA => 2,
        "TopologyPlacementFailed" => 1,
        _ => 0,
    }
}

fn most_severe(a: &'static str, b: &'static str) -> &'static str {
    if severity(a) >= severity(b) { a } else { b }
}

/// Kueue's TAS check of a flavor for a pod set (`checkPodSetAndFlavorMatchForTAS`): a pod set
/// asking for a topology takes only TAS flavors having its levels (a non-TAS flavor only when it
/// covers none of the pod set's resources), one asking for none skips TAS flavors unless every
/// flavor of the ClusterQueue is a TAS flavor (TAS is then implied). None when it matches.
fn tas_mismatch(
    topologies: &std::collections::HashMap<String, Vec<String>>,
    tas_only: bool,
    overlaps: bool,
    flavor: &super::Flavor,
    ps: &super::PodSet,
) -> Option<String> {
    let request = ps.topology.as_ref().filter(|t| t.explicit());
    let Some(t) = request else {
        return (flavor.topology_name.is_some() && !tas_only).then(|| {
            format!(
                "Flavor {:?} supports only TopologyAwareScheduling",
                flavor.name
            )
        });
    };
    let Some(topo) = &flavor.topology_name else {
        return overlaps.then(|| {
            format!(
                "Flavor {:?} does not support TopologyAwareScheduling",
                flavor.name
            )
        });
    };
    let Some(levels) = topologies.get(topo) else {
        return Some(format!(
            "Flavor {:?} information missing in TAS cache",
            flavor.name
        ));
    };
    if !has_levels(levels, t) {
        return Some(format!(
            "Flavor {:?} does not contain the requested level",
            flavor.name
        ));
    }
    None
}

/// A pod set's total request of resource `r` (0 when it asks for none).
fn request_of(requests: &[(u32, i64)], r: u32) -> i64 {
    requests
        .iter()
        .find(|(x, _)| *x == r)
        .map_or(0, |(_, q)| *q)
}

/// Whether a topology has the pod set's main level and slice level (Kueue's `HasLevel`).
pub(crate) fn has_levels(levels: &[String], t: &super::PodSetTopology) -> bool {
    use super::TopologyMode;
    let main = match (&t.mode, &t.level) {
        (TopologyMode::Required | TopologyMode::Preferred, Some(l)) => Some(l),
        // A slice-only request is placed from the highest level.
        _ if t.slice_level.is_some() => levels.first(),
        // Sluice's NVLink-only request is placed like an unconstrained one.
        (TopologyMode::Unconstrained, _) => levels.last(),
        _ if t.nvlink => levels.last(),
        _ => None,
    };
    let slice = t.slice_level.as_ref().or(levels.last());
    main.is_some_and(|m| levels.contains(m)) && slice.is_some_and(|s| levels.contains(s))
}

/// Flavor chosen for one resource of a pod set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FlavorChoice {
    pub flavor: u32,
    pub mode: Mode,
    pub borrow: i32,
    /// Index of the last flavor tried, -1 when the search reached the end of the list.
    pub tried: i32,
}

/// Why a flavor was not chosen for a resource: kept as data during the search, worded only when an assignment's
/// message is written (most reasons are dropped when a later flavor fits).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FlavorReason {
    /// Already worded (flavor and topology mismatches).
    Text(String),
    /// The request exceeds the most the ClusterQueue could ever get of this flavor-resource.
    ExceedsMax {
        fr: Fr,
        assumed: i64,
        req: i64,
        max: i64,
    },
    /// The request exceeds what is unused now by `more`.
    Unused { fr: Fr, more: i64 },
}

impl FlavorReason {
    /// Appends Kueue's wording of the reason to `out`.
    fn render_into(&self, ids: &super::Interner, out: &mut String) {
        match self {
            FlavorReason::Text(t) => out.push_str(t),
            &FlavorReason::ExceedsMax {
                fr,
                assumed,
                req,
                max,
            } => {
                let rname = quota_words(ids, fr, "insufficient quota for ", out);
                out.push_str(", previously considered podsets requests (");
                Qty(rname, assumed).write_to(out);
                out.push_str(") + current podset request (");
                Qty(rname, req).write_to(out);
                out.push_str(") > maximum capacity (");
                Qty(rname, max).write_to(out);
                out.push(')');
            }
            &FlavorReason::Unused { fr, more } => {
                let rname = quota_words(ids, fr, "insufficient unused quota for ", out);
                out.push_str(", ");
                Qty(rname, more).write_to(out);
                out.push_str(" more needed");
            }
        }
    }
}

/// Appends `lead`, the resource and "in flavor F" (how both quota reasons start); returns the resource's name.
fn quota_words<'i>(ids: &'i super::Interner, fr: Fr, lead: &str, out: &mut String) -> &'i str {
    let (f, r) = ids.fr_parts(fr);
    let rname = ids.resource_name(r);
    out.push_str(lead);
    out.push_str(rname);
    out.push_str(" in flavor ");
    out.push_str(ids.flavor_name(f));
    rname
}

/// An assignment's message as last worded for a workload, with the reasons it was worded from: a head retried
/// with the same reasons every cycle reuses the words instead of formatting them again.
#[derive(Clone, Debug)]
pub(crate) struct WordedMessage {
    /// Per pod set with reasons: its index and the reasons.
    source: Vec<(usize, Vec<FlavorReason>)>,
    /// The message.
    pub text: std::sync::Arc<str>,
}

/// Assignment of one pod set.
#[derive(Clone, Debug, Default)]
pub(crate) struct PsAssign {
    pub ps: usize,
    pub count: i32,
    /// Total requests for `count` pods by interned resource.
    pub requests: Vec<(u32, i64)>,
    pub flavors: VecMap<u32, FlavorChoice>,
    pub reasons: Vec<FlavorReason>,
    pub failed: bool,
    /// NoFit flavor attempts: (resource group, reason).
    pub nofit_attempts: Vec<(i64, &'static str)>,
}

impl PsAssign {
    fn mode(&self) -> Mode {
        if self.reasons.is_empty() && !self.failed {
            return Mode::Fit;
        }
        if self.failed || self.flavors.is_empty() {
            return Mode::NoFit;
        }
        self.flavors
            .values()
            .map(|c| c.mode)
            .min()
            .unwrap_or(Mode::Fit)
    }
}

/// A workload's flavor assignment.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assignment {
    pub podsets: Vec<PsAssign>,
    pub borrowing: i32,
    pub usage: VecMap<Fr, i64>,
    pub no_fit_reason: &'static str,
    /// Overrides the computed mode (used to mark recomputed assignments).
    pub forced_mode: Option<Mode>,
}

impl Assignment {
    pub(crate) fn mode(&self) -> Mode {
        if let Some(m) = self.forced_mode {
            return m;
        }
        self.podsets
            .iter()
            .map(PsAssign::mode)
            .min()
            .unwrap_or(Mode::NoFit)
    }

    /// Scan progress to remember for the next attempt.
    pub(crate) fn scan_progress(&self) -> Vec<VecMap<u32, i32>> {
        let mut out = Vec::new();
        self.fill_scan_progress(&mut out);
        out
    }

    /// Writes the scan progress to remember for the next attempt into `out`, reusing its maps.
    pub(crate) fn fill_scan_progress(&self, out: &mut Vec<VecMap<u32, i32>>) {
        out.truncate(self.podsets.len());
        out.resize_with(self.podsets.len(), VecMap::default);
        for (m, ps) in out.iter_mut().zip(&self.podsets) {
            m.clear();
            for (&r, c) in &ps.flavors {
                m.insert(r, c.tried);
            }
        }
    }

    pub(crate) fn usage_vec(&self) -> Vec<(Fr, i64)> {
        self.usage.iter().map(|(&fr, &v)| (fr, v)).collect()
    }

    /// The pod sets a message is worded from: those with reasons or a failure.
    fn message_source(&self) -> impl Iterator<Item = (usize, &Vec<FlavorReason>)> {
        self.podsets
            .iter()
            .filter(|ps| !ps.reasons.is_empty() || ps.failed)
            .map(|ps| (ps.ps, &ps.reasons))
    }

    /// [`Assignment::message`], reusing `last` when it was worded from the same reasons.
    pub(crate) fn worded(
        &self,
        sim: &Sim<'_>,
        wl: u32,
        last: Option<WordedMessage>,
    ) -> WordedMessage {
        if let Some(last) = last
            && self
                .message_source()
                .eq(last.source.iter().map(|(ps, r)| (*ps, r)))
        {
            return last;
        }
        WordedMessage {
            source: self
                .message_source()
                .map(|(ps, r)| (ps, r.clone()))
                .collect(),
            text: self.message(sim, wl).into(),
        }
    }

    /// Kueue's Assignment.Message().
    pub(crate) fn message(&self, sim: &Sim<'_>, wl: u32) -> String {
        let Some(w) = sim.wl(wl) else {
            return String::new();
        };
        let mut out = String::with_capacity(256);
        for ps in &self.podsets {
            if ps.reasons.is_empty() && !ps.failed {
                continue;
            }
            let name = w
                .spec
                .pod_sets
                .get(ps.ps)
                .map(|p| p.name.as_str())
                .unwrap_or("");
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str("couldn't assign flavors to pod set ");
            out.push_str(name);
            out.push_str(": ");
            if let [one] = ps.reasons.as_slice() {
                one.render_into(sim.ids, &mut out);
                continue;
            }
            // Kueue sorts the reasons' words: they are worded into one buffer and their ranges sorted.
            let mut words = String::with_capacity(96 * ps.reasons.len());
            let mut ranges: Vec<std::ops::Range<usize>> = Vec::with_capacity(ps.reasons.len());
            for r in &ps.reasons {
                let start = words.len();
                r.render_into(sim.ids, &mut words);
                ranges.push(start..words.len());
            }
            ranges.sort_by(|a, b| words[a.clone()].cmp(&words[b.clone()]));
            for (i, r) in ranges.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&words[r]);
            }
        }
        out
    }

    /// Flavor-resources whose assignment needs preemption.
    pub(crate) fn frs_need_preemption(&self, sim: &Sim<'_>) -> Vec<Fr> {
        let mut out = Vec::new();
        for ps in &self.podsets {
            for (&r, c) in &ps.flavors {
                if c.mode == Mode::Preempt
                    && let Some(fr) = sim.ids.find_fr(c.flavor, r)
                    && !out.contains(&fr)
                {
                    out.push(fr);
                }
            }
        }
        out.sort_unstable();
        out
    }

    pub(crate) fn to_admission(&self, sim: &Sim<'_>, cq: NodeId, wl: u32) -> Admission {
        let w = sim.wl(wl);
        let mut psas = Vec::with_capacity(self.podsets.len());
        for ps in &self.podsets {
            let mut flavors = BTreeMap::new();
            let mut usage = BTreeMap::new();
            for (&r, c) in &ps.flavors {
                let rname = sim.ids.resource_name(r).to_string();
                flavors.insert(rname.clone(), sim.ids.flavor_name(c.flavor).to_string());
                usage.insert(rname, request_of(&ps.requests, r));
            }
            let name = w
                .and_then(|w| w.spec.pod_sets.get(ps.ps))
                .map(|p| p.name.clone())
                .unwrap_or_default();
            psas.push(PodSetAssignment {
                name,
                flavors,
                resource_usage: usage,
                count: ps.count,
            });
        }
        Admission {
            cluster_queue: sim.tree.node(cq).name.clone(),
            pod_set_assignments: psas,
        }
    }

    /// What [`Assignment::to_admission`] builds from besides names: per pod set its index and count (resource and
    /// flavor `u32::MAX`: a pod set asking for nothing has no flavors but a count), then per resource the resource,
    /// its flavor and the total request. Workloads with equal shapes (and pod set names) in one ClusterQueue get
    /// equal admissions.
    pub(crate) fn admission_shape(&self) -> impl Iterator<Item = (usize, i32, u32, u32, i64)> + '_ {
        self.podsets.iter().flat_map(|ps| {
            std::iter::once((ps.ps, ps.count, u32::MAX, u32::MAX, 0)).chain(
                ps.flavors
                    .iter()
                    .map(|(&r, c)| (ps.ps, ps.count, r, c.flavor, request_of(&ps.requests, r))),
            )
        })
    }

    fn resolve_no_fit_reason(&mut self) {
        if self.mode() != Mode::NoFit {
            return;
        }
        let mut overall = "";
        for ps in &self.podsets {
            if ps.mode() != Mode::NoFit {
                continue;
            }
            if ps.nofit_attempts.is_empty() {
                overall = most_severe(overall, NO_MATCHING_FLAVOR);
                continue;
            }
            let mut per_rg: VecMap<i64, &'static str> = VecMap::default();
            for &(rg, r) in &ps.nofit_attempts {
                match per_rg.get(&rg) {
                    Some(e) if severity(r) >= severity(e) => {}
                    _ => {
                        per_rg.insert(rg, r);
                    }
                }
            }
            let ps_reason = per_rg.values().fold("", |acc, r| most_severe(acc, r));
            overall = most_severe(overall, ps_reason);
        }
        self.no_fit_reason = overall;
    }
}

fn is_preferred(a: Granular, b: Granular, pref: Option<FlavorPreference>) -> bool {
    if a.p == PMode::NoFit {
        return false;
    }
    if b.p == PMode::NoFit {
        return true;
    }
    let a_nc = a.p == PMode::NoCandidates;
    let b_nc = b.p == PMode::NoCandidates;
    if a_nc != b_nc {
        return !a_nc;
    }
    match pref {
        Some(FlavorPreference::PreemptionOverBorrowing) => {
            if a.borrow != b.borrow {
                a.borrow < b.borrow
            } else {
                a.p > b.p
            }
        }
        _ => {
            if a.p != b.p {
                a.p > b.p
            } else {
                a.borrow < b.borrow
            }
        }
    }
}

fn should_try_next(
    m: Granular,
    when_borrow: FungibilityPolicy,
    when_preempt: FungibilityPolicy,
) -> bool {
    if matches!(m.p, PMode::NoFit | PMode::NoCandidates) {
        return true;
    }
    if matches!(m.p, PMode::Preempt | PMode::Reclaim)
        && when_preempt == FungibilityPolicy::TryNextFlavor
    {
        return true;
    }
    m.borrow != 0 && when_borrow == FungibilityPolicy::TryNextFlavor
}

type Status = Option<(FlavorReason, &'static str)>;

impl Sim<'_> {
    /// Assigns flavors to every pod set, with `counts` overriding pod counts (partial admission).
    pub(crate) fn assign(&mut self, pre: &Preemptor, counts: Option<&[i32]>) -> Assignment {
        let mut a = Assignment::default();
        let Some(w) = self.wl(pre.wl) else { return a };
        let Some(cqd) = self.cq(pre.cq) else { return a };
        let covers_pods = cqd.rg_of_resource.contains_key(&self.pods_resource);
        a.podsets.reserve_exact(w.spec.pod_sets.len());
        for (psi, ps) in w.spec.pod_sets.iter().enumerate() {
            let count = counts.and_then(|c| c.get(psi).copied()).unwrap_or(ps.count);
            let mut requests: Vec<(u32, i64)> = Vec::with_capacity(w.reqs[psi].len() + 1);
            requests.extend(
                w.reqs[psi]
                    .iter()
                    .map(|&(r, q)| (r, q.saturating_mul(i64::from(count)))),
            );
            if covers_pods {
                requests.retain(|(r, _)| *r != self.pods_resource);
                requests.push((self.pods_resource, i64::from(count)));
                requests
                    .sort_by(|x, y| self.ids.resource_name(x.0).cmp(self.ids.resource_name(y.0)));
            }
            let mut psa = PsAssign {
                ps: psi,
                count,
                requests,
                ..PsAssign::default()
            };
            for ri in 0..psa.requests.len() {
                let (res, qty) = psa.requests[ri];
                let Some(&rg_idx) = cqd.rg_of_resource.get(&res) else {
                    // A zero request needs no flavor; under IgnoreUndeclared neither does any undeclared one.
                    if qty == 0 || self.ignore_undeclared {
                        continue;
                    }
                    psa.reasons = vec![FlavorReason::Text(format!(
                        "resource {} unavailable in ClusterQueue",
                        self.ids.resource_name(res)
                    ))];
                    psa.flavors.clear();
                    psa.failed = true;
                    psa.nofit_attempts
                        .push((-1 - i64::from(res), NO_MATCHING_FLAVOR));
                    break;
                };
                if psa.flavors.contains_key(&res) {
                    continue;
                }
                let mark = psa.reasons.len();
                let found = self.find_flavor(pre, psi, res, rg_idx, &a.usage, &mut psa);
                if !found {
                    // The pod set fails with this resource group's reasons only.
                    psa.reasons.drain(..mark);
                    psa.flavors.clear();
                    psa.failed = true;
                    break;
                }
            }
            for (&r, c) in &psa.flavors {
                a.borrowing = a.borrowing.max(c.borrow);
                if let Some(fr) = self.ids.find_fr(c.flavor, r) {
                    let q = psa
                        .requests
                        .iter()
                        .find(|(x, _)| *x == r)
                        .map(|(_, q)| *q)
                        .unwrap_or(0);
                    let u = a.usage.entry_or_default(fr);
                    *u = u.saturating_add(q);
                }
            }
            let failed = psa.failed;
            a.podsets.push(psa);
            if failed {
                break;
            }
        }
        a.resolve_no_fit_reason();
        a
    }

    /// Kueue's findFlavorForPodSetResource for the resource group of `res`: the chosen flavor's choices go into
    /// `psa.flavors` (false when none was found), the reasons against the others into `psa.reasons` (none when the
    /// chosen one fits), NoFit attempts into `psa.nofit_attempts`.
    fn find_flavor(
        &mut self,
        pre: &Preemptor,
        psi: usize,
        res: u32,
        rg_idx: usize,
        usage: &VecMap<Fr, i64>,
        psa: &mut PsAssign,
    ) -> bool {
        let Some(cqd) = self.cq(pre.cq) else {
            return false;
        };
        let rg = &cqd.rgs[rg_idx];
        let fung = &cqd.spec.flavor_fungibility;
        let covered = |r: &u32| rg.covered.contains(r);
        let any_covered = psa.requests.iter().any(|(r, _)| covered(r));
        let mark = psa.reasons.len();
        // Choices of the flavor being tried and of the best so far; both buffers are the engine's, kept between
        // searches.
        let mut best = std::mem::take(&mut self.scratch.best_choices);
        let mut assignments = std::mem::take(&mut self.scratch.flavor_choices);
        best.clear();
        let mut best_mode = Granular {
            p: PMode::NoFit,
            borrow: i32::MAX,
        };
        let rg_key = rg_idx as i64;
        let start = pre
            .scan
            .as_ref()
            .map(|s| s.next_flavor(psi, res))
            .unwrap_or(0);
        let mut attempted: i32 = -1;
        let mut tas_only: Option<bool> = None;
        let pod_set = self.wl(pre.wl).and_then(|w| w.spec.pod_sets.get(psi));
        for (idx, &f) in rg.flavors.iter().enumerate().skip(start) {
            attempted = idx as i32;
            let mismatch = match self.flavors.get(f as usize).and_then(|x| x.as_ref()) {
                None => Some(format!("flavor {} not found", self.ids.flavor_name(f))),
                Some(flavor) => pod_set.and_then(|ps| {
                    // Whether every flavor of the ClusterQueue is a TAS flavor matters only to a pod set without a
                    // topology request meeting a TAS flavor.
                    let tas_only = *tas_only.get_or_insert_with(|| {
                        cqd.rgs.iter().flat_map(|g| &g.flavors).all(|&f| {
                            self.flavors
                                .get(f as usize)
                                .and_then(|x| x.as_ref())
                                .is_some_and(|x| x.topology_name.is_some())
                        })
                    });
                    tas_mismatch(&self.topologies, tas_only, any_covered, flavor, ps)
                        .or_else(|| flavor_mismatch(flavor, ps))
                }),
            };
            if let Some(msg) = mismatch {
                psa.reasons.push(FlavorReason::Text(msg));
                psa.nofit_attempts.push((rg_key, NO_MATCHING_FLAVOR));
                continue;
            }
            let mut rep = Granular {
                p: PMode::Fit,
                borrow: 0,
            };
            assignments.clear();
            let mut nofit_reason = "";
            for &(r, val) in psa.requests.iter().filter(|(r, _)| covered(r)) {
                let Some(fr) = self.ids.find_fr(f, r) else {
                    continue;
                };
                let assumed = usage.get(&fr).copied().unwrap_or(0);
                let (pm, borrow, status) = self.fits_resource_quota(pre, fr, assumed, val);
                if let Some((msg, reason)) = status {
                    if psa.reasons.capacity() == 0 {
                        // Room for a reason per flavor and resource: one allocation instead of growing.
                        psa.reasons.reserve(rg.flavors.len() * rg.covered.len());
                    }
                    psa.reasons.push(msg);
                    nofit_reason = most_severe(nofit_reason, reason);
                }
                let mode = Granular { p: pm, borrow };
                if is_preferred(rep, mode, fung.preference) {
                    rep = mode;
                }
                if rep.p == PMode::NoFit {
                    continue;
                }
                // Each resource appears once in the requests, so a push is the map's insert.
                assignments.push((
                    r,
                    FlavorChoice {
                        flavor: f,
                        mode: pm.mode(),
                        borrow,
                        tried: -1,
                    },
                ));
            }
            if rep.p == PMode::NoFit {
                psa.nofit_attempts.push((rg_key, nofit_reason));
            }
            if !should_try_next(rep, fung.when_can_borrow, fung.when_can_preempt) {
                std::mem::swap(&mut best, &mut assignments);
                best_mode = rep;
                break;
            }
            if is_preferred(rep, best_mode, fung.preference) {
                std::mem::swap(&mut best, &mut assignments);
                best_mode = rep;
            }
        }
        let tried = if attempted == rg.flavors.len() as i32 - 1 {
            -1
        } else {
            attempted
        };
        let found = !best.is_empty();
        for &(r, c) in &best {
            psa.flavors.insert(r, FlavorChoice { tried, ..c });
        }
        if best_mode.p == PMode::Fit {
            psa.reasons.truncate(mark);
        }
        self.scratch.best_choices = best;
        self.scratch.flavor_choices = assignments;
        found
    }

    fn fits_resource_quota(
        &mut self,
        pre: &Preemptor,
        fr: Fr,
        assumed: i64,
        req: i64,
    ) -> (PMode, i32, Status) {
        let cq = pre.cq;
        let avail = self.tree.cq_available(cq, fr);
        let max_cap = self.tree.potential_available(cq, fr);
        // Requests come from input: an oversized sum saturates and then exceeds the capacity.
        let val = assumed.saturating_add(req);
        if val > max_cap {
            let why = FlavorReason::ExceedsMax {
                fr,
                assumed,
                req,
                max: max_cap,
            };
            return (PMode::NoFit, 0, Some((why, EXCEEDS_MAX_QUOTA)));
        }
        let (borrow, may_reclaim) = self.tree.lowest_subtree_that_fits(cq, fr, val);
        if val <= avail {
            return (PMode::Fit, borrow, None);
        }
        let msg = FlavorReason::Unused {
            fr,
            more: val.saturating_sub(avail),
        };
        let nominal = self.tree.quota(cq, fr).nominal;
        if nominal >= val || may_reclaim || self.can_preempt_while_borrowing(cq) {
            let (p, b) = self.simulate_preemption(pre, fr, val);
            return (p, b, Some((msg, "")));
        }
        (PMode::NoFit, borrow, Some((msg, WAITING_FOR_QUOTA)))
    }

    /// Kueue's preemption oracle for one flavor-resource.
    fn simulate_preemption(&mut self, pre: &Preemptor, fr: Fr, val: i64) -> (PMode, i32) {
        let targets = self.get_targets(pre, &[fr], &[(fr, val)]);
        if targets.is_empty() {
            return (
                PMode::NoCandidates,
                self.tree.lowest_subtree_that_fits(pre.cq, fr, val).0,
            );
        }
        let victims: Vec<u32> = targets.iter().map(|t| t.wl).collect();
        self.remove_workloads(&victims);
        let borrow = self.tree.lowest_subtree_that_fits(pre.cq, fr, val).0;
        self.add_workloads(&victims);
        if targets.iter().any(|t| t.cq == pre.cq) {
            (PMode::Preempt, borrow)
        } else {
            (PMode::Reclaim, borrow)
        }
    }

    /// Full assignment, preemption targets, and partial admission when neither fits.
    pub(crate) fn get_assignments(
        &mut self,
        pre: &Preemptor,
        partial: bool,
    ) -> (Assignment, Vec<Target>) {
        let full = self.assign(pre, pre.max_counts.as_deref());
        match full.mode() {
            Mode::Fit => return (full, Vec::new()),
            Mode::Preempt => {
                let targets = self.targets_for(pre, &full);
                if !targets.is_empty() {
                    return (full, targets);
                }
            }
            Mode::NoFit => {}
        }
        if !partial {
            return (full, Vec::new());
        }
        let Some(w) = self.wl(pre.wl) else {
            return (full, Vec::new());
        };
        let full_counts: Vec<i32> = match &pre.max_counts {
            Some(c) => c.clone(),
            None => w.spec.pod_sets.iter().map(|p| p.count).collect(),
        };
        // Pod counts are i32 from input: their sum is taken in i64 so it cannot overflow.
        let deltas: Vec<i64> = w
            .spec
            .pod_sets
            .iter()
            .zip(&full_counts)
            .map(|(p, &c)| (i64::from(c) - i64::from(p.min_count.unwrap_or(p.count))).max(0))
            .collect();
        let total: i64 = deltas.iter().sum();
        if total <= 0 {
            return (full, Vec::new());
        }
        let mut last_good: Option<(i64, Assignment, Vec<Target>)> = None;
        let (mut lo, mut hi) = (0i64, total + 1);
        while lo < hi {
            let h = lo + (hi - lo) / 2;
            let counts: Vec<i32> = full_counts
                .iter()
                .zip(&deltas)
                .map(|(&c, &d)| {
                    // d * h / total <= d <= c, so the result stays within 0..=c.
                    let cut = (i128::from(d) * i128::from(h) / i128::from(total)) as i64;
                    (i64::from(c) - cut) as i32
                })
                .collect();
            let a = self.assign(pre, Some(&counts));
            let found = match a.mode() {
                Mode::Fit => Some((a, Vec::new())),
                Mode::Preempt => {
                    let t = self.targets_for(pre, &a);
                    if t.is_empty() { None } else { Some((a, t)) }
                }
                Mode::NoFit => None,
            };
            match found {
                Some((a, t)) => {
                    last_good = Some((h, a, t));
                    hi = h;
                }
                None => lo = h + 1,
            }
        }
        match last_good {
            Some((idx, a, t)) if idx == lo => (a, t),
            _ => (full, Vec::new()),
        }
    }

    fn targets_for(&mut self, pre: &Preemptor, a: &Assignment) -> Vec<Target> {
        let frs = a.frs_need_preemption(self);
        let usage = a.usage_vec();
        self.get_targets(pre, &frs, &usage)
    }
}
