//! The schema limits of a Workload's status (list sizes, minimums, lengths) and the shape rules of its compressed
//! topology assignments.

use super::errors::{Errors, Path};
use super::names;
use crate::kueue::v1beta2::{TopologyAssignment, WorkloadStatus};

/// Checks the limits Kueue's CRD schema puts on `status`.
pub fn limits(errs: &mut Errors, st: &WorkloadStatus) {
    let sp = Path::new("status");
    if let Some(adm) = &st.admission {
        let ap = sp.child("admission");
        names::reference(errs, &ap.child("clusterQueue"), &adm.cluster_queue);
        let psa = ap.child("podSetAssignments");
        if adm.pod_set_assignments.len() > 18 {
            errs.too_many(&psa, adm.pod_set_assignments.len(), 18);
        }
        for (i, a) in adm.pod_set_assignments.iter().enumerate() {
            let p = psa.index(i);
            names::check(errs, &p.child("name"), &a.name, names::dns_label);
            if let Some(c) = a.count {
                errs.minimum(&p.child("count"), c.into(), 0);
            }
            for (res, flavor) in &a.flavors {
                names::reference(errs, &p.child("flavors").key(res), flavor);
            }
            if let Some(ta) = &a.topology_assignment {
                topology_assignment(errs, &p.child("topologyAssignment"), ta);
            }
        }
    }
    if let Some(rs) = &st.requeue_state
        && let Some(c) = rs.count
    {
        errs.minimum(&sp.child("requeueState").child("count"), c.into(), 0);
    }
    for (i, ac) in st.admission_checks.iter().enumerate() {
        let p = sp.child("admissionChecks").index(i);
        if ac.name.is_empty() {
            errs.invalid_str(&p.child("name"), "", "should be at least 1 chars long");
        }
        errs.max_len(&p.child("name"), &ac.name, 316);
        errs.max_len(&p.child("message"), &ac.message, 32768);
        if let Some(v) = ac.requeue_after_seconds {
            errs.minimum(&p.child("requeueAfterSeconds"), v.into(), 0);
        }
        if let Some(v) = ac.retry_count {
            errs.minimum(&p.child("retryCount"), v.into(), 0);
        }
        let up = p.child("podSetUpdates");
        if ac.pod_set_updates.len() > 18 {
            errs.too_many(&up, ac.pod_set_updates.len(), 18);
        }
        for (j, u) in ac.pod_set_updates.iter().enumerate() {
            if u.tolerations.len() > 8 {
                errs.too_many(&up.index(j).child("tolerations"), u.tolerations.len(), 8);
            }
        }
    }
    let rr = sp.child("resourceRequests");
    if st.resource_requests.len() > 18 {
        errs.too_many(&rr, st.resource_requests.len(), 18);
    }
    let ncn = sp.child("nominatedClusterNames");
    if st.nominated_cluster_names.len() > 20 {
        errs.too_many(&ncn, st.nominated_cluster_names.len(), 20);
    }
    for (i, n) in st.nominated_cluster_names.iter().enumerate() {
        errs.max_len(&ncn.index(i), n, 256);
    }
    if let Some(n) = &st.cluster_name {
        errs.max_len(&sp.child("clusterName"), n, 256);
    }
    let un = sp.child("unhealthyNodes");
    if st.unhealthy_nodes.len() > 8 {
        errs.too_many(&un, st.unhealthy_nodes.len(), 8);
    }
    for (i, n) in st.unhealthy_nodes.iter().enumerate() {
        errs.max_len(&un.index(i).child("name"), &n.name, 63);
    }
    let pg = sp.child("preemptionGates");
    if st.preemption_gates.len() > 8 {
        errs.too_many(&pg, st.preemption_gates.len(), 8);
    }
    for (i, g) in st.preemption_gates.iter().enumerate() {
        let p = pg.index(i).child("name");
        if g.name.is_empty() {
            errs.invalid_str(&p, "", "should be at least 1 chars long");
        }
        errs.max_len(&p, &g.name, 63);
    }
    if let Some(stats) = &st.scheduling_stats {
        let ep = sp.child("schedulingStats").child("evictions");
        if stats.evictions.len() > 256 {
            errs.too_many(&ep, stats.evictions.len(), 256);
        }
        for (i, e) in stats.evictions.iter().enumerate() {
            let p = ep.index(i);
            errs.max_len(&p.child("reason"), &e.reason, 316);
            errs.max_len(&p.child("underlyingCause"), &e.underlying_cause, 316);
            errs.minimum(&p.child("count"), e.count.into(), 0);
        }
    }
}

/// Checks a compressed topology assignment: level and slice counts, and every slice consistent with its
/// domainCount and the number of levels.
fn topology_assignment(errs: &mut Errors, p: &Path, ta: &TopologyAssignment) {
    let lp = p.child("levels");
    errs.items(&lp, ta.levels.len(), 1, 16);
    for (i, l) in ta.levels.iter().enumerate() {
        errs.max_len(&lp.index(i), l, 317);
    }
    let sp = p.child("slices");
    if ta.slices.len() > 1000 {
        errs.too_many(&sp, ta.slices.len(), 1000);
    }
    if ta
        .slices
        .iter()
        .any(|s| s.values_per_level.len() != ta.levels.len())
    {
        errs.invalid(
            p,
            "\"object\"",
            "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
        );
    }
    for (i, s) in ta.slices.iter().enumerate() {
        let p = sp.index(i);
        errs.minimum(&p.child("domainCount"), s.domain_count.into(), 1);
        let domains = usize::try_from(s.domain_count).unwrap_or(0);
        let vp = p.child("valuesPerLevel");
        errs.items(&vp, s.values_per_level.len(), 1, 16);
        let pc = &s.pod_counts;
        if !pc.individual.is_empty() && pc.individual.len() != domains {
            errs.invalid(
                &p,
                "\"object\"",
                "podCounts.individual must have length equal to domainCount",
            );
        }
        if s.values_per_level.iter().any(|v| {
            v.individual
                .as_ref()
                .is_some_and(|ind| ind.roots.len() != domains)
        }) {
            errs.invalid(
                &p,
                "\"object\"",
                "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this \
                 TopologyAssignmentSlice",
            );
        }
        for (j, v) in s.values_per_level.iter().enumerate() {
            let lvp = vp.index(j);
            if v.universal.is_some() == v.individual.is_some() {
                errs.invalid(
                    &lvp,
                    "\"object\"",
                    "exactly one of the fields in [universal individual] must be set",
                );
            }
            if let Some(u) = &v.universal {
                errs.max_len(&lvp.child("universal"), u, 63);
            }
            if let Some(ind) = &v.individual {
                let ip = lvp.child("individual");
                for (field, value) in [("prefix", &ind.prefix), ("suffix", &ind.suffix)] {
                    if let Some(v) = value {
                        errs.max_len(&ip.child(field), v, 63);
                    }
                }
                errs.items(&ip.child("roots"), ind.roots.len(), 1, 100_000);
                for (k, r) in ind.roots.iter().enumerate() {
                    errs.max_len(&ip.child("roots").index(k), r, 63);
                }
            }
        }
        let cp = p.child("podCounts");
        if pc.universal.is_some() != pc.individual.is_empty() {
            errs.invalid(
                &cp,
                "\"object\"",
                "exactly one of the fields in [universal individual] must be set",
            );
        }
        if let Some(u) = pc.universal {
            errs.minimum(&cp.child("universal"), u.into(), 1);
        }
        if pc.individual.len() > 100_000 {
            errs.too_many(&cp.child("individual"), pc.individual.len(), 100_000);
        }
        for (k, c) in pc.individual.iter().enumerate() {
            errs.minimum(&cp.child("individual").index(k), (*c).into(), 1);
        }
    }
}
