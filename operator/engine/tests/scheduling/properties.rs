//! Property tests over random clusters and event sequences: the engine never over-commits the quota tree, never
//! admits a workload twice, and every admission matches the workload's requests.
//!
//! The checks here are an oracle independent of the engine's own bookkeeping: usage is rebuilt from the decisions
//! the engine returned.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use sluice_engine::*;

const RESOURCES: [&str; 2] = ["cpu", "nvidia.com/gpu"];
const FLAVORS: [&str; 2] = ["on-demand", "spot"];

#[derive(Clone, Debug)]
struct CqSpec {
    cohort: Option<usize>,
    /// Per flavor: nominal, borrowing limit, lending limit (the same for both resources).
    quotas: Vec<(i64, Option<i64>, Option<i64>)>,
    strict: bool,
    within: u8,
    reclaim: u8,
}

#[derive(Clone, Debug)]
enum Step {
    Submit {
        cq: usize,
        count: i32,
        min_count: Option<i32>,
        cpu: i64,
        gpu: i64,
        priority: i32,
    },
    Schedule,
    Finish(usize),
    Delete(usize),
    Reconfigure {
        cq: usize,
        nominal: i64,
    },
}

fn cq_spec() -> impl Strategy<Value = CqSpec> {
    (
        prop::option::of(0usize..2),
        prop::collection::vec(
            (
                0i64..12,
                prop::option::of(0i64..8),
                prop::option::of(0i64..6),
            ),
            1..=2,
        ),
        any::<bool>(),
        0u8..3,
        0u8..3,
    )
        .prop_map(|(cohort, quotas, strict, within, reclaim)| CqSpec {
            cohort,
            quotas,
            strict,
            within,
            reclaim,
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..6, 1i32..4, prop::option::of(1i32..3), 0i64..3, 0i64..4, -2i32..3).prop_map(
            |(cq, count, min, cpu, gpu, priority)| Step::Submit {
                cq,
                count,
                min_count: min.filter(|m| *m <= count),
                cpu,
                gpu,
                priority,
            }
        ),
        4 => Just(Step::Schedule),
        2 => (0usize..64).prop_map(Step::Finish),
        1 => (0usize..64).prop_map(Step::Delete),
        1 => (0usize..6, 0i64..12).prop_map(|(cq, nominal)| Step::Reconfigure { cq, nominal }),
    ]
}

fn cluster_queue(i: usize, spec: &CqSpec, nominal_override: Option<i64>) -> ClusterQueue {
    let flavors = spec
        .quotas
        .iter()
        .enumerate()
        .map(|(f, (nominal, bl, ll))| {
            let nominal = nominal_override.unwrap_or(*nominal);
            FlavorQuotas {
                flavor: FLAVORS[f].to_string(),
                resources: RESOURCES
                    .iter()
                    .map(|r| {
                        let scale = if *r == "cpu" { 1000 } else { 1 };
                        ResourceQuota {
                            name: r.to_string(),
                            nominal: nominal * scale,
                            // Limits are only allowed inside a cohort; a lending limit never exceeds nominal.
                            borrowing_limit: spec.cohort.and(*bl).map(|v| v * scale),
                            lending_limit: spec.cohort.and(*ll).map(|v| v.min(nominal) * scale),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    ClusterQueue {
        name: format!("cq{i}"),
        cohort: spec.cohort.map(|c| format!("cohort{c}")),
        resource_groups: vec![ResourceGroup {
            covered_resources: RESOURCES.iter().map(|r| r.to_string()).collect(),
            flavors,
        }],
        queueing_strategy: if spec.strict {
            QueueingStrategy::StrictFIFO
        } else {
            QueueingStrategy::BestEffortFIFO
        },
        namespace_selector: Some(LabelSelector::default()),
        flavor_fungibility: FlavorFungibility::default(),
        preemption: PreemptionPolicy {
            within_cluster_queue: [
                WithinCqPolicy::Never,
                WithinCqPolicy::LowerPriority,
                WithinCqPolicy::LowerOrNewerEqualPriority,
            ][spec.within as usize],
            reclaim_within_cohort: [
                ReclaimPolicy::Never,
                ReclaimPolicy::LowerPriority,
                ReclaimPolicy::Any,
            ][spec.reclaim as usize],
            ..Default::default()
        },
        stop_policy: StopPolicy::None,
        fair_weight: 1.0,
        admission_checks: Vec::new(),
        admission_fair_sharing: false,
    }
}

type Request = (usize, i32, Option<i32>, BTreeMap<String, i64>);

/// What the oracle knows: the CQ specs (with current nominal quotas) and each admitted workload's assignment.
struct Oracle {
    specs: Vec<CqSpec>,
    nominal: Vec<Option<i64>>,
    requests: BTreeMap<WorkloadKey, Request>,
    admitted: BTreeMap<WorkloadKey, Admission>,
    evicting: BTreeSet<WorkloadKey>,
}

impl Oracle {
    fn nominal(&self, cq: usize, flavor: usize, resource: &str) -> i64 {
        let n = self.nominal[cq].unwrap_or(self.specs[cq].quotas[flavor].0);
        if resource == "cpu" { n * 1000 } else { n }
    }

    fn usage(&self, cq: usize) -> BTreeMap<(String, String), i64> {
        let mut u = BTreeMap::new();
        let name = format!("cq{cq}");
        for a in self.admitted.values().filter(|a| a.cluster_queue == name) {
            for p in &a.pod_set_assignments {
                for (r, v) in &p.resource_usage {
                    let f = p.flavors.get(r).cloned().unwrap_or_default();
                    *u.entry((f, r.clone())).or_default() += v;
                }
            }
        }
        u
    }

    /// Usage of a ClusterQueue without a cohort stays within nominal; with one, within nominal + borrowingLimit.
    /// In a cohort, what members use beyond the part of their quota they do not lend (nominal - lendingLimit)
    /// stays within what they lend (lendingLimit, or all of nominal without one): Kueue's subtree arithmetic.
    fn check_quota(&self) -> Result<(), String> {
        type Key = (Option<usize>, String, String);
        let mut from_pool: BTreeMap<Key, i64> = BTreeMap::new();
        let mut pool: BTreeMap<Key, i64> = BTreeMap::new();
        for (i, spec) in self.specs.iter().enumerate() {
            let usage = self.usage(i);
            for ((f, r), v) in &usage {
                let defined = (0..spec.quotas.len()).any(|fi| FLAVORS[fi] == f);
                if !defined && *v > 0 {
                    return Err(format!(
                        "cq{i} uses {v} of {r} in flavor {f:?}, which it does not define"
                    ));
                }
            }
            for (f, q) in spec.quotas.iter().enumerate() {
                for r in RESOURCES {
                    let nominal = self.nominal(i, f, r);
                    let used = usage
                        .get(&(FLAVORS[f].to_string(), r.to_string()))
                        .copied()
                        .unwrap_or(0);
                    let scale = if r == "cpu" { 1000 } else { 1 };
                    let cap = match (spec.cohort, q.1) {
                        (None, _) => Some(nominal),
                        (Some(_), Some(bl)) => Some(nominal + bl * scale),
                        (Some(_), None) => None,
                    };
                    if let Some(cap) = cap
                        && used > cap
                    {
                        return Err(format!(
                            "cq{i} uses {used} of {r} in {} above its cap {cap}",
                            FLAVORS[f]
                        ));
                    }
                    if spec.cohort.is_some() {
                        let lending = q.2.map(|ll| (ll * scale).min(nominal));
                        let kept = lending.map_or(0, |ll| nominal - ll);
                        let key = (spec.cohort, FLAVORS[f].to_string(), r.to_string());
                        *from_pool.entry(key.clone()).or_default() += (used - kept).max(0);
                        *pool.entry(key).or_default() += lending.unwrap_or(nominal);
                    }
                }
            }
        }
        for (k, used) in &from_pool {
            let lent = pool.get(k).copied().unwrap_or(0);
            if *used > lent {
                return Err(format!(
                    "cohort{:?} members use {used} of {} in {} beyond what they keep, above the {lent} they lend",
                    k.0, k.2, k.1
                ));
            }
        }
        Ok(())
    }
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn run(specs: Vec<CqSpec>, steps: Vec<Step>, fair: bool) -> Result<(), TestCaseError> {
    let mut engine = Engine::new(EngineConfig {
        fair_sharing: fair.then(FairSharingConfig::default),
        ..EngineConfig::default()
    });
    for f in FLAVORS {
        engine
            .apply(Event::UpsertFlavor(Flavor {
                name: f.into(),
                ..Default::default()
            }))
            .map_err(fail)?;
    }
    engine
        .apply(Event::UpsertNamespace(Namespace {
            name: "ns".into(),
            labels: BTreeMap::new(),
        }))
        .map_err(fail)?;
    for (i, spec) in specs.iter().enumerate() {
        engine
            .apply(Event::UpsertClusterQueue(cluster_queue(i, spec, None)))
            .map_err(fail)?;
        engine
            .apply(Event::UpsertLocalQueue(LocalQueue {
                namespace: "ns".into(),
                name: format!("lq{i}"),
                cluster_queue: format!("cq{i}"),
                stop_policy: StopPolicy::None,
                fair_sharing_weight: None,
            }))
            .map_err(fail)?;
    }
    let mut oracle = Oracle {
        nominal: vec![None; specs.len()],
        specs,
        requests: BTreeMap::new(),
        admitted: BTreeMap::new(),
        evicting: BTreeSet::new(),
    };
    let mut names: Vec<WorkloadKey> = Vec::new();
    let mut now = 1_000;
    for step in steps {
        now += 1_000;
        // Evictions issued in the previous step complete now: their pods are gone.
        let mut decisions: Vec<Decision> = Vec::new();
        for workload in std::mem::take(&mut oracle.evicting) {
            decisions.extend(
                engine
                    .apply(Event::EvictionComplete {
                        workload,
                        time: now,
                    })
                    .map_err(fail)?,
            );
        }
        let stepped = match step {
            Step::Submit {
                cq,
                count,
                min_count,
                cpu,
                gpu,
                priority,
            } => {
                let cq = cq % oracle.specs.len();
                let key = WorkloadKey::new("ns", format!("wl{}", names.len()));
                let mut requests = BTreeMap::new();
                if cpu > 0 {
                    requests.insert("cpu".to_string(), cpu * 1000);
                }
                if gpu > 0 {
                    requests.insert("nvidia.com/gpu".to_string(), gpu);
                }
                oracle
                    .requests
                    .insert(key.clone(), (cq, count, min_count, requests.clone()));
                names.push(key.clone());
                engine.apply(Event::UpsertWorkload {
                    workload: Workload {
                        namespace: "ns".into(),
                        name: key.name.clone(),
                        uid: key.name.clone(),
                        queue_name: format!("lq{cq}"),
                        priority,
                        creation_time: now,
                        active: true,
                        pod_sets: vec![PodSet {
                            name: "main".into(),
                            count,
                            min_count,
                            requests,
                            ..Default::default()
                        }],
                        job_uid: None,
                        quota_reserved_at: None,
                        checkpointed_at: None,
                        priority_boost: 0,
                        admitted: false,
                        pods_ready: false,
                        reclaimable: Vec::new(),
                        scheduling_shape: 0,
                        misconfigured: None,
                        admission_gated_by: None,
                        adjusted_resources: 0,
                    },
                    admission: None,
                })
            }
            Step::Schedule => Ok(engine.schedule(now)),
            Step::Finish(i) if !names.is_empty() => {
                let key = names[i % names.len()].clone();
                if oracle.admitted.remove(&key).is_some() {
                    engine.apply(Event::FinishWorkload(key))
                } else {
                    Ok(Vec::new())
                }
            }
            Step::Delete(i) if !names.is_empty() => {
                let key = names[i % names.len()].clone();
                oracle.admitted.remove(&key);
                oracle.evicting.remove(&key);
                oracle.requests.remove(&key);
                engine.apply(Event::DeleteWorkload(key))
            }
            Step::Reconfigure { cq, nominal } => {
                // Quota only grows here: Kueue does not evict when quota shrinks, so a smaller quota could
                // legitimately sit below usage admitted earlier.
                let cq = cq % oracle.specs.len();
                let current = oracle.specs[cq]
                    .quotas
                    .iter()
                    .map(|q| q.0)
                    .max()
                    .unwrap_or(0);
                let nominal = nominal.max(oracle.nominal[cq].unwrap_or(current));
                oracle.nominal[cq] = Some(nominal);
                engine.apply(Event::UpsertClusterQueue(cluster_queue(
                    cq,
                    &oracle.specs[cq],
                    Some(nominal),
                )))
            }
            _ => Ok(Vec::new()),
        }
        .map_err(|e| fail(format!("engine refused a valid event: {e}")))?;
        decisions.extend(stepped);

        let mut queue: std::collections::VecDeque<Decision> = decisions.into();
        while let Some(d) = queue.pop_front() {
            match d {
                Decision::Admit {
                    workload,
                    admission,
                    ..
                } => {
                    prop_assert!(
                        !oracle.admitted.contains_key(&workload),
                        "{} admitted twice",
                        workload
                    );
                    let Some((cq, count, min_count, requests)) = oracle.requests.get(&workload)
                    else {
                        return Err(fail(format!(
                            "admitted unknown or deleted workload {workload}"
                        )));
                    };
                    prop_assert_eq!(&admission.cluster_queue, &format!("cq{cq}"));
                    prop_assert_eq!(admission.pod_set_assignments.len(), 1);
                    let p = &admission.pod_set_assignments[0];
                    prop_assert!(
                        p.count <= *count && p.count >= min_count.unwrap_or(*count),
                        "count {} of {} (min {:?})",
                        p.count,
                        count,
                        min_count
                    );
                    for (r, per_pod) in requests {
                        prop_assert_eq!(
                            p.resource_usage.get(r).copied(),
                            Some(per_pod * p.count as i64),
                            "usage of {} for {}",
                            r,
                            workload
                        );
                        prop_assert!(
                            p.flavors.contains_key(r),
                            "no flavor for {} in {:?}",
                            r,
                            p.flavors
                        );
                    }
                    oracle
                        .admitted
                        .insert(workload, std::sync::Arc::unwrap_or_clone(admission));
                }
                Decision::Evict { workload, .. } => {
                    prop_assert!(
                        oracle.evicting.insert(workload.clone()),
                        "{} evicted twice",
                        workload
                    );
                    // Its quota is being released: it no longer counts against the limits checked below.
                    prop_assert!(
                        oracle.admitted.remove(&workload).is_some(),
                        "evicted {}, which holds no quota",
                        workload
                    );
                }
                Decision::Pending { .. } => {}
            }
        }
        oracle.check_quota().map_err(fail)?;
        engine
            .check_invariants()
            .map_err(|e| fail(format!("engine invariant: {e}")))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn classical_admission_respects_quota(
        specs in prop::collection::vec(cq_spec(), 1..6),
        steps in prop::collection::vec(step(), 1..80),
    ) {
        run(specs, steps, false)?;
    }

    #[test]
    fn fair_sharing_admission_respects_quota(
        specs in prop::collection::vec(cq_spec(), 1..6),
        steps in prop::collection::vec(step(), 1..80),
    ) {
        run(specs, steps, true)?;
    }
}
