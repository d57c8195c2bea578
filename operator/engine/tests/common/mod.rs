//! Test DSL for engine scenarios, shaped after Kueue's scheduler test fixtures.
#![allow(dead_code)]

use std::collections::BTreeMap;

use sluice_engine::*;

/// Cores to milli-cpu.
pub fn cpu(cores: i64) -> Quantity {
    cores * 1000
}

/// Nominal-only resource quota.
pub fn rq(name: &str, nominal: Quantity) -> ResourceQuota {
    ResourceQuota {
        name: name.into(),
        nominal,
        borrowing_limit: None,
        lending_limit: None,
    }
}

/// Resource quota with limits.
pub fn rql(
    name: &str,
    nominal: Quantity,
    bl: Option<Quantity>,
    ll: Option<Quantity>,
) -> ResourceQuota {
    ResourceQuota {
        name: name.into(),
        nominal,
        borrowing_limit: bl,
        lending_limit: ll,
    }
}

/// Quotas of one flavor.
pub fn fq(flavor: &str, resources: Vec<ResourceQuota>) -> FlavorQuotas {
    FlavorQuotas {
        flavor: flavor.into(),
        resources,
    }
}

/// ClusterQueue builder.
pub struct CqB(pub ClusterQueue);

/// Starts a ClusterQueue (BestEffortFIFO, all namespaces, no preemption).
pub fn cq(name: &str) -> CqB {
    CqB(ClusterQueue {
        name: name.into(),
        namespace_selector: Some(LabelSelector::default()),
        ..ClusterQueue::default()
    })
}

impl CqB {
    pub fn cohort(mut self, c: &str) -> Self {
        self.0.cohort = Some(c.into());
        self
    }
    pub fn strict(mut self) -> Self {
        self.0.queueing_strategy = QueueingStrategy::StrictFIFO;
        self
    }
    pub fn ns_selector(mut self, s: Option<LabelSelector>) -> Self {
        self.0.namespace_selector = s;
        self
    }
    pub fn group(mut self, covered: &[&str], flavors: Vec<FlavorQuotas>) -> Self {
        self.0.resource_groups.push(ResourceGroup {
            covered_resources: covered.iter().map(|s| s.to_string()).collect(),
            flavors,
        });
        self
    }
    pub fn preemption(mut self, reclaim: ReclaimPolicy, within: WithinCqPolicy) -> Self {
        self.0.preemption.reclaim_within_cohort = reclaim;
        self.0.preemption.within_cluster_queue = within;
        self
    }
    pub fn borrow_within_cohort(mut self, threshold: Option<i32>) -> Self {
        self.0.preemption.borrow_within_cohort = BorrowWithinCohort {
            policy: BorrowWithinCohortPolicy::LowerPriority,
            max_priority_threshold: threshold,
        };
        self
    }
    pub fn fungibility(
        mut self,
        b: FungibilityPolicy,
        p: FungibilityPolicy,
        pref: Option<FlavorPreference>,
    ) -> Self {
        self.0.flavor_fungibility = FlavorFungibility {
            when_can_borrow: b,
            when_can_preempt: p,
            preference: pref,
        };
        self
    }
    pub fn stop(mut self, s: StopPolicy) -> Self {
        self.0.stop_policy = s;
        self
    }
    pub fn weight(mut self, w: f64) -> Self {
        self.0.fair_weight = w;
        self
    }
    pub fn build(self) -> ClusterQueue {
        self.0
    }
}

/// Workload builder.
#[derive(Clone)]
pub struct WlB(pub Workload);

/// Starts a workload `ns/name` in LocalQueue `main`, priority 0, created at 0.
pub fn wl(ns: &str, name: &str) -> WlB {
    WlB(Workload {
        namespace: ns.into(),
        name: name.into(),
        uid: name.into(),
        queue_name: "main".into(),
        priority: 0,
        creation_time: 0,
        active: true,
        pod_sets: Vec::new(),
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
    })
}

impl WlB {
    pub fn queue(mut self, q: &str) -> Self {
        self.0.queue_name = q.into();
        self
    }
    pub fn prio(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    /// When its recorded admission reserved quota (QuotaReserved's lastTransitionTime in status).
    pub fn reserved(mut self, t: Time) -> Self {
        self.0.quota_reserved_at = Some(t);
        self
    }
    pub fn created(mut self, t: Time) -> Self {
        self.0.creation_time = t;
        self
    }
    pub fn inactive(mut self) -> Self {
        self.0.active = false;
        self
    }
    /// Adds a pod set with per-pod requests.
    pub fn ps(mut self, name: &str, count: i32, reqs: &[(&str, Quantity)]) -> Self {
        self.0.pod_sets.push(PodSet {
            name: name.into(),
            count,
            requests: reqs.iter().map(|(r, q)| (r.to_string(), *q)).collect(),
            ..PodSet::default()
        });
        self
    }
    /// Sets minCount on the last pod set.
    pub fn min(mut self, m: i32) -> Self {
        if let Some(p) = self.0.pod_sets.last_mut() {
            p.min_count = Some(m);
        }
        self
    }
    pub fn tolerate(mut self, t: Toleration) -> Self {
        if let Some(p) = self.0.pod_sets.last_mut() {
            p.tolerations.push(t);
        }
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        if let Some(p) = self.0.pod_sets.last_mut() {
            p.node_selector.insert(k.into(), v.into());
        }
        self
    }
    pub fn affinity(mut self, term: Vec<NodeSelectorRequirement>) -> Self {
        if let Some(p) = self.0.pod_sets.last_mut() {
            p.required_affinity.push(NodeSelectorTerm {
                match_expressions: term,
            });
        }
        self
    }
    pub fn build(self) -> Workload {
        self.0
    }
}

/// Admission of every pod set at full count with `flavors` (resource -> flavor).
pub fn admission_for(w: &Workload, cq: &str, flavors: &[(&str, &str)]) -> Admission {
    let fl: BTreeMap<String, String> = flavors
        .iter()
        .map(|(r, f)| (r.to_string(), f.to_string()))
        .collect();
    Admission {
        cluster_queue: cq.into(),
        pod_set_assignments: w
            .pod_sets
            .iter()
            .map(|ps| PodSetAssignment {
                name: ps.name.clone(),
                flavors: ps
                    .requests
                    .keys()
                    .filter_map(|r| fl.get(r).map(|f| (r.clone(), f.clone())))
                    .collect(),
                resource_usage: ps
                    .requests
                    .iter()
                    .map(|(r, q)| (r.clone(), q * i64::from(ps.count)))
                    .collect(),
                count: ps.count,
            })
            .collect(),
    }
}

/// Engine plus helpers; every cycle is followed by an invariant check.
pub struct Env {
    pub engine: Engine,
    pub now: Time,
    /// Off for fixtures that restore admissions beyond the quota on purpose (as Kueue's tests do).
    pub check: bool,
}

impl Env {
    pub fn new() -> Self {
        Self {
            engine: Engine::new(EngineConfig::default()),
            now: 1_000,
            check: true,
        }
    }
    pub fn with_config(config: EngineConfig) -> Self {
        Self {
            engine: Engine::new(config),
            now: 1_000,
            check: true,
        }
    }
    pub fn fair() -> Self {
        Self::with_config(EngineConfig {
            fair_sharing: Some(FairSharingConfig::default()),
            partial_admission: true,
            ..EngineConfig::default()
        })
    }
    pub fn apply(&mut self, e: Event) -> Vec<Decision> {
        let out = self.engine.apply(e).expect("event applies");
        if self.check {
            self.engine
                .check_invariants()
                .expect("invariants after event");
        }
        out
    }
    pub fn flavor(&mut self, name: &str) -> &mut Self {
        self.apply(Event::UpsertFlavor(Flavor {
            name: name.into(),
            ..Flavor::default()
        }));
        self
    }
    pub fn flavor_obj(&mut self, f: Flavor) -> &mut Self {
        self.apply(Event::UpsertFlavor(f));
        self
    }
    pub fn ns(&mut self, name: &str, labels: &[(&str, &str)]) -> &mut Self {
        self.apply(Event::UpsertNamespace(Namespace {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }));
        self
    }
    /// Adds a ClusterQueue and a LocalQueue `<ns>/main` pointing to it.
    pub fn cq_lq(&mut self, c: CqB, ns: &str) -> &mut Self {
        let name = c.0.name.clone();
        self.apply(Event::UpsertClusterQueue(c.build()));
        self.lq(ns, "main", &name);
        self
    }
    pub fn cq(&mut self, c: CqB) -> &mut Self {
        self.apply(Event::UpsertClusterQueue(c.build()));
        self
    }
    pub fn lq(&mut self, ns: &str, name: &str, cq: &str) -> &mut Self {
        self.apply(Event::UpsertLocalQueue(LocalQueue {
            namespace: ns.into(),
            name: name.into(),
            cluster_queue: cq.into(),
            stop_policy: StopPolicy::None,
            fair_sharing_weight: None,
        }));
        self
    }
    pub fn cohort(
        &mut self,
        name: &str,
        parent: Option<&str>,
        groups: Vec<ResourceGroup>,
    ) -> &mut Self {
        self.apply(Event::UpsertCohort(Cohort {
            name: name.into(),
            parent: parent.map(Into::into),
            resource_groups: groups,
            fair_weight: 1.0,
        }));
        self
    }
    pub fn submit(&mut self, w: WlB) -> Vec<Decision> {
        self.apply(Event::UpsertWorkload {
            workload: w.build(),
            admission: None,
        })
    }
    /// Adds an already-admitted workload.
    pub fn admitted(&mut self, w: WlB, cq: &str, flavors: &[(&str, &str)]) -> &mut Self {
        self.restore(w, cq, flavors);
        self
    }
    /// Adds an already-admitted workload (as after a restart) and returns the engine's decisions.
    pub fn restore(&mut self, w: WlB, cq: &str, flavors: &[(&str, &str)]) -> Vec<Decision> {
        let w = w.build();
        let a = admission_for(&w, cq, flavors);
        self.apply(Event::UpsertWorkload {
            workload: w,
            admission: Some(a),
        })
    }
    pub fn schedule(&mut self) -> Vec<Decision> {
        self.now += 1_000;
        let out = self.engine.schedule(self.now);
        if self.check {
            self.engine
                .check_invariants()
                .expect("invariants after cycle");
        }
        out
    }
    pub fn state(&self, key: &str) -> WorkloadState {
        self.engine
            .workload_state(&key_of(key))
            .unwrap_or_else(|| panic!("unknown workload {key}"))
    }
    /// Asserts the workload is admitted; returns its admission.
    pub fn assert_admitted(&self, key: &str) -> Admission {
        match self.state(key) {
            WorkloadState::Admitted(a) => a,
            other => panic!("{key} expected admitted, got {other:?}"),
        }
    }
    /// Asserts admission on flavor `flavor` for `resource` in the first pod set, with `usage` total.
    pub fn assert_admitted_on(&self, key: &str, resource: &str, flavor: &str, usage: Quantity) {
        let a = self.assert_admitted(key);
        let ps = &a.pod_set_assignments[0];
        assert_eq!(
            ps.flavors.get(resource).map(String::as_str),
            Some(flavor),
            "{key}: {a:?}"
        );
        assert_eq!(
            ps.resource_usage.get(resource).copied(),
            Some(usage),
            "{key}: {a:?}"
        );
    }
    /// Asserts a pending state; returns the message.
    pub fn assert_pending(&self, key: &str, reason: &str) -> String {
        match self.state(key) {
            WorkloadState::Pending { reason: r, message } => {
                assert_eq!(r, reason, "{key}: {message}");
                message
            }
            other => panic!("{key} expected pending {reason}, got {other:?}"),
        }
    }
    /// Completes every pending eviction.
    pub fn complete_evictions(&mut self, decisions: &[Decision]) {
        for d in decisions {
            if let Decision::Evict { workload, .. } = d {
                let t = self.now;
                self.apply(Event::EvictionComplete {
                    workload: workload.clone(),
                    time: t,
                });
            }
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

/// Parses "ns/name".
pub fn key_of(s: &str) -> WorkloadKey {
    let (ns, name) = s.split_once('/').expect("ns/name");
    WorkloadKey::new(ns, name)
}

/// Keys of evicted workloads with their preemption reasons, sorted.
pub fn evictions(ds: &[Decision]) -> Vec<(String, Option<String>)> {
    let mut v: Vec<_> = ds
        .iter()
        .filter_map(|d| match d {
            Decision::Evict {
                workload,
                preemption_reason,
                ..
            } => Some((workload.to_string(), preemption_reason.clone())),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// Keys of admitted workloads, sorted.
pub fn admits(ds: &[Decision]) -> Vec<String> {
    let mut v: Vec<_> = ds
        .iter()
        .filter_map(|d| match d {
            Decision::Admit { workload, .. } => Some(workload.to_string()),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// Kueue's TestSchedule fixture: flavors, namespaces, sales / eng-alpha / eng-beta / lend-a / lend-b.
pub fn kueue_fixture(env: &mut Env) {
    for f in ["default", "on-demand", "spot", "model-a"] {
        env.flavor(f);
    }
    env.ns("sales", &[("dep", "sales")])
        .ns("eng-alpha", &[("dep", "eng")])
        .ns("eng-beta", &[("dep", "eng")]);
    env.ns("lend", &[("dep", "lend")]);
    let sel = |v: &str| {
        Some(LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "dep".into(),
                operator: LabelSelectorOperator::In,
                values: vec![v.into()],
            }],
        })
    };
    env.cq_lq(
        cq("sales")
            .strict()
            .ns_selector(sel("sales"))
            .group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(50))])]),
        "sales",
    );
    env.cq_lq(
        cq("eng-alpha")
            .cohort("eng")
            .strict()
            .ns_selector(sel("eng"))
            .group(
                &["cpu"],
                vec![
                    fq("on-demand", vec![rql("cpu", cpu(50), Some(cpu(50)), None)]),
                    fq("spot", vec![rql("cpu", cpu(100), Some(cpu(0)), None)]),
                ],
            ),
        "eng-alpha",
    );
    env.cq_lq(
        cq("eng-beta")
            .cohort("eng")
            .strict()
            .ns_selector(sel("eng"))
            .preemption(ReclaimPolicy::Any, WithinCqPolicy::LowerPriority)
            .group(
                &["cpu"],
                vec![
                    fq("on-demand", vec![rql("cpu", cpu(50), Some(cpu(10)), None)]),
                    fq("spot", vec![rql("cpu", 0, Some(cpu(100)), None)]),
                ],
            )
            .group(
                &["example.com/gpu"],
                vec![fq(
                    "model-a",
                    vec![rql("example.com/gpu", 20, Some(0), None)],
                )],
            ),
        "eng-beta",
    );
    env.cq_lq(
        cq("lend-a").cohort("lend").group(
            &["cpu"],
            vec![fq("default", vec![rql("cpu", cpu(3), None, Some(cpu(2)))])],
        ),
        "lend",
    );
    env.cq(cq("lend-b").cohort("lend").group(
        &["cpu"],
        vec![fq("default", vec![rql("cpu", cpu(2), None, Some(cpu(2)))])],
    ));
    env.lq("lend", "lend-b-queue", "lend-b");
}

/// One ClusterQueue `cq` of 10 cpu (flavor `default`, namespace `ns`), BestEffortFIFO or StrictFIFO, with 8 cpu held
/// by the admitted `ns/running`.
pub fn busy_queue(config: EngineConfig, strict: bool) -> Env {
    let mut env = Env::with_config(config);
    env.flavor("default").ns("ns", &[]);
    let mut c = cq("cq").group(&["cpu"], vec![fq("default", vec![rq("cpu", cpu(10))])]);
    if strict {
        c = c.strict();
    }
    env.cq_lq(c, "ns");
    env.admitted(
        wl("ns", "running").ps("main", 1, &[("cpu", cpu(8))]),
        "cq",
        &[("cpu", "default")],
    );
    env
}
