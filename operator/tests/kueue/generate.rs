//! A seeded generator of small differential scenarios: flavors, ClusterQueues in cohorts (sometimes under Cohort
//! objects), priority classes, LocalQueues and Jobs arriving in waves, with now and then a finished or deleted
//! Job or a quota change between waves.
//!
//! Kueue orders workloads by priority, then by creation time with one-second resolution, and the order in which
//! the Jobs of one apply reach its scheduler is not fixed (its Job reconcilers run concurrently). So a generated
//! scenario never lets the outcome hang on that order:
//! - in one wave, the Jobs of a cohort tree all go to one ClusterQueue, with distinct priorities, written (and so
//!   created) highest first: whether the scheduler sees them together or one by one, its queue pops them in that
//!   order, and the borrowing-first and fair-sharing orderings between ClusterQueues never come into play;
//! - in a cohort tree where anything can preempt, every Job has its own priority, so preemption never picks
//!   between equal-priority victims admitted in the same second;
//! - waves are separate steps, seconds apart, so equal priorities across waves are ordered by creation time;
//! - a Job is finished only when it is certainly admitted (see [`Plan::finish_candidate`]);
//! - nothing depends on wall time (no waitForPodsReady, no run-seconds).
//!
//! Flavors come from a fixed catalogue so that the fake Nodes can be made once for all seeds: `default` (no node
//! labels), `on-demand` (`node-pool: on-demand`) and `spot` (`node-pool: spot`, taint `spot=true:NoSchedule`).

use serde_json::{Value, json};

use super::scenario::{ObjectRef, Scenario, Step};

/// The image of every generated Job's container.
const IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
/// Kueue's label naming a Job's LocalQueue.
const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's label naming a Job's WorkloadPriorityClass.
const PRIORITY_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// Kueue's annotation allowing a Job to be admitted with fewer pods.
const MIN_PARALLELISM: &str = "kueue.x-k8s.io/job-min-parallelism";
/// The most Jobs in one scenario: every step costs seconds on both systems.
const MAX_JOBS: usize = 12;
/// The resources a scenario may cover, in coveredResources order: cpu (millicores), memory (MiB), GPUs.
const RESOURCES: [&str; 3] = ["cpu", "memory", "nvidia.com/gpu"];

/// An amount of each of [`RESOURCES`].
type Amounts = [u32; 3];

/// A small deterministic random source (splitmix64): the same seed gives the same scenario on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    fn between(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below((hi - lo + 1) as usize) as u32
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// A ResourceFlavor of the catalogue.
#[derive(Clone, Copy)]
struct Flavor {
    name: &'static str,
    /// The `node-pool` node label it selects, if any.
    pool: Option<&'static str>,
    /// Whether its nodes carry the `spot=true:NoSchedule` taint.
    tainted: bool,
}

/// Every flavor a scenario may use.
const CATALOGUE: [Flavor; 3] = [
    Flavor {
        name: "default",
        pool: None,
        tainted: false,
    },
    Flavor {
        name: "on-demand",
        pool: Some("on-demand"),
        tainted: false,
    },
    Flavor {
        name: "spot",
        pool: Some("spot"),
        tainted: true,
    },
];

/// The quota of one flavor in a ClusterQueue or Cohort.
#[derive(Clone)]
struct FlavorQuota {
    flavor: Flavor,
    nominal: Amounts,
    borrowing: [Option<u32>; 3],
    lending: [Option<u32>; 3],
}

/// A cohort: by name only, or also a Cohort object.
struct Cohort {
    name: String,
    parent: Option<String>,
    /// Whether a Cohort object is created (otherwise the name only links ClusterQueues).
    object: bool,
    quota: Vec<FlavorQuota>,
    weight: Option<&'static str>,
}

/// A ClusterQueue, with its namespace and LocalQueue.
struct ClusterQueue {
    name: String,
    cohort: String,
    flavors: Vec<FlavorQuota>,
    strategy: &'static str,
    within: &'static str,
    reclaim: &'static str,
    /// borrowWithinCohort LowerPriority, with its optional maxPriorityThreshold.
    borrow_within: Option<Option<i32>>,
    /// whenCanBorrow and whenCanPreempt, when not the defaults.
    fungibility: Option<(&'static str, &'static str)>,
    weight: Option<&'static str>,
    /// Whether the namespaceSelector names its namespace's `team` label instead of being `{}`.
    selects_team: bool,
}

impl ClusterQueue {
    fn namespace(&self) -> String {
        format!("team-{}", &self.name[3..])
    }

    fn preempts(&self) -> bool {
        self.within != "Never" || self.reclaim != "Never"
    }
}

/// Where a Job's priority comes from.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Priority {
    /// No class: priority 0.
    None,
    /// A WorkloadPriorityClass `wpc-V`, named by the Job's label.
    Workload(i32),
    /// A PriorityClass `pc-V`, named by the pod template.
    Pod(i32),
}

impl Priority {
    fn value(self) -> i32 {
        match self {
            Priority::None => 0,
            Priority::Workload(v) | Priority::Pod(v) => v,
        }
    }
}

/// A batch/v1 Job.
struct Job {
    name: String,
    cq: usize,
    wave: usize,
    pods: u32,
    per_pod: Amounts,
    priority: Priority,
    tolerates_spot: bool,
    min_parallelism: Option<u32>,
}

impl Job {
    fn demand(&self) -> Amounts {
        self.per_pod.map(|a| a * self.pods)
    }
}

/// Something that happens after a wave.
enum Event {
    Finish(usize),
    Delete(usize),
    /// A ClusterQueue's new resource groups, as a merge patch sets them (lists are replaced whole).
    Quota(usize, Vec<FlavorQuota>),
}

/// Everything a scenario is made of, before it is written as manifests.
struct Plan {
    fair_sharing: bool,
    gpu: bool,
    flavors: Vec<Flavor>,
    cohorts: Vec<Cohort>,
    cqs: Vec<ClusterQueue>,
    jobs: Vec<Job>,
    waves: usize,
    /// Events with the wave they follow.
    events: Vec<(usize, Event)>,
}

/// Builds the scenario of `seed`: the same seed always gives the same scenario.
pub fn generate(seed: u64) -> Scenario {
    let plan = Plan::new(&mut Rng::new(seed));
    plan.scenario(format!("seed-{seed}"))
}

impl Plan {
    fn new(rng: &mut Rng) -> Plan {
        let mut plan = Plan {
            fair_sharing: rng.chance(25),
            gpu: rng.chance(30),
            flavors: pick_flavors(rng),
            cohorts: Vec::new(),
            cqs: Vec::new(),
            jobs: Vec::new(),
            waves: rng.between(1, 3) as usize,
            events: Vec::new(),
        };
        plan.cohorts = plan.make_cohorts(rng);
        let count = rng.between(2, 5) as usize;
        for i in 0..count {
            // Round-robin, so the leaf cohorts get ClusterQueues first; one may sit in the root beside them.
            let cohort = plan.cohorts[i % plan.cohorts.len()].name.clone();
            let cq = plan.make_cq(rng, i + 1, cohort);
            plan.cqs.push(cq);
        }
        plan.make_jobs(rng);
        plan.make_events(rng);
        plan
    }

    fn resource_count(&self) -> usize {
        if self.gpu { 3 } else { 2 }
    }

    /// The root of a cohort's tree: the ClusterQueues under one root share quota and so compete.
    fn root_of(&self, cohort: &str) -> String {
        let mut name = cohort.to_string();
        while let Some(parent) = self
            .cohorts
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.parent.clone())
        {
            name = parent;
        }
        name
    }

    fn groups(&self) -> Vec<String> {
        let mut roots: Vec<String> = self.cqs.iter().map(|c| self.root_of(&c.cohort)).collect();
        roots.sort();
        roots.dedup();
        roots
    }

    fn cqs_in(&self, group: &str) -> Vec<usize> {
        (0..self.cqs.len())
            .filter(|&i| self.root_of(&self.cqs[i].cohort) == group)
            .collect()
    }

    /// One or two leaf cohorts; sometimes Cohort objects, sometimes under a common parent with its own quota.
    fn make_cohorts(&self, rng: &mut Rng) -> Vec<Cohort> {
        let leaves = rng.between(1, 2) as usize;
        let objects = rng.chance(35);
        let parented = objects && rng.chance(60);
        let mut cohorts: Vec<Cohort> = (0..leaves)
            .map(|i| Cohort {
                name: format!("cohort-{}", ["a", "b"][i]),
                parent: (parented && (i == 0 || rng.chance(70))).then(|| "cohort-root".into()),
                object: objects,
                quota: Vec::new(),
                weight: None,
            })
            .collect();
        for c in &mut cohorts {
            if c.object && rng.chance(40) {
                c.quota = self.cohort_quota(rng, c.parent.is_some());
            }
        }
        if parented && rng.chance(60) {
            let quota = if rng.chance(50) {
                self.cohort_quota(rng, false)
            } else {
                Vec::new()
            };
            cohorts.push(Cohort {
                name: "cohort-root".into(),
                parent: None,
                object: true,
                quota,
                weight: None,
            });
        }
        if self.fair_sharing {
            for c in cohorts
                .iter_mut()
                .filter(|c| c.object && c.parent.is_some())
            {
                c.weight = rng.chance(40).then(|| rng.pick(&["1", "2", "500m"]));
            }
        }
        cohorts
    }

    /// A Cohort's own pool: the first flavor only, with limits towards its parent when it has one.
    fn cohort_quota(&self, rng: &mut Rng, has_parent: bool) -> Vec<FlavorQuota> {
        let nominal = [
            rng.between(1, 4) * 1000,
            rng.between(2, 8) * 1024,
            rng.between(0, 2),
        ];
        let mut q = FlavorQuota {
            flavor: self.flavors[0],
            nominal,
            borrowing: [None; 3],
            lending: [None; 3],
        };
        if has_parent && rng.chance(50) {
            q.lending[0] = Some(rng.between(0, nominal[0] / 1000) * 1000);
        }
        if has_parent && rng.chance(30) {
            q.borrowing[0] = Some(rng.between(0, 4) * 1000);
        }
        vec![q]
    }

    fn make_cq(&self, rng: &mut Rng, index: usize, cohort: String) -> ClusterQueue {
        let mut flavors: Vec<Flavor> = self.flavors.clone();
        rng.shuffle(&mut flavors);
        flavors.truncate(rng.between(1, flavors.len() as u32) as usize);
        let reclaim = rng.pick(&["Never", "Never", "LowerPriority", "Any"]);
        // Kueue rejects borrowWithinCohort with reclaimWithinCohort Never; it is classic preemption only.
        let borrow_within = (reclaim != "Never" && !self.fair_sharing && rng.chance(30))
            .then(|| rng.chance(50).then(|| rng.pick(&[10, 50, 100])));
        ClusterQueue {
            name: format!("cq-{index}"),
            cohort,
            flavors: flavors.into_iter().map(|f| cq_quota(rng, f)).collect(),
            strategy: rng.pick(&["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
            within: rng.pick(&[
                "Never",
                "Never",
                "LowerPriority",
                "LowerOrNewerEqualPriority",
            ]),
            reclaim,
            borrow_within,
            fungibility: rng.chance(25).then(|| {
                (
                    rng.pick(&["MayStopSearch", "TryNextFlavor"]),
                    rng.pick(&["MayStopSearch", "TryNextFlavor"]),
                )
            }),
            weight: (self.fair_sharing && rng.chance(60))
                .then(|| rng.pick(&["1", "2", "3", "500m"])),
            selects_team: rng.chance(25),
        }
    }

    /// Jobs wave by wave: in each wave, each cohort tree gets Jobs of at most one ClusterQueue.
    fn make_jobs(&mut self, rng: &mut Rng) {
        let groups = self.groups();
        for wave in 0..self.waves {
            let first = self.jobs.len();
            for (g, group) in groups.iter().enumerate() {
                let last_chance = g + 1 == groups.len() && self.jobs.len() == first;
                if self.jobs.len() >= MAX_JOBS || !(last_chance || rng.chance(70)) {
                    continue;
                }
                let cqs = self.cqs_in(group);
                let cq = rng.pick(&cqs);
                let room = MAX_JOBS - self.jobs.len();
                for _ in 0..rng.between(1, 3).min(room as u32) {
                    let job = self.make_job(rng, cq, wave);
                    self.jobs.push(job);
                }
            }
            self.assign_priorities(rng, first);
            // Highest priority first: the order they are written, and so created, in.
            self.jobs[first..].sort_by_key(|j| (-j.priority.value(), j.cq));
        }
        for (i, job) in self.jobs.iter_mut().enumerate() {
            job.name = format!("job-{}", i + 1);
        }
    }

    fn make_job(&self, rng: &mut Rng, cq: usize, wave: usize) -> Job {
        let pods = rng.between(1, 4);
        let gpu = u32::from(self.gpu && rng.chance(40));
        Job {
            name: String::new(),
            cq,
            wave,
            pods,
            per_pod: [
                rng.pick(&[500, 1000, 1000, 2000]),
                rng.pick(&[256, 512, 1024, 2048]),
                gpu,
            ],
            priority: Priority::None,
            tolerates_spot: rng.chance(50),
            min_parallelism: (pods > 1 && rng.chance(15)).then(|| rng.between(1, pods - 1)),
        }
    }

    /// Priorities for the Jobs from `first` on (one wave): distinct within each cohort tree in the wave, and
    /// distinct from every earlier Job of the tree when anything in it can preempt.
    fn assign_priorities(&mut self, rng: &mut Rng, first: usize) {
        let style = rng.below(3);
        for i in first..self.jobs.len() {
            let group = self.root_of(&self.cqs[self.jobs[i].cq].cohort);
            let preempts =
                self.fair_sharing || self.cqs_in(&group).iter().any(|&c| self.cqs[c].preempts());
            let taken: Vec<i32> = self
                .jobs
                .iter()
                .enumerate()
                .filter(|&(j, job)| {
                    // Jobs after `i` have no priority yet.
                    j < i
                        && (j >= first || preempts)
                        && self.root_of(&self.cqs[job.cq].cohort) == group
                })
                .map(|(_, job)| job.priority.value())
                .collect();
            let free: Vec<i32> = (0..20)
                .map(|v| v * 10)
                .filter(|v| !taken.contains(v))
                .collect();
            let value = rng.pick(&free);
            self.jobs[i].priority = match (value, style) {
                (0, _) => Priority::None,
                (v, 0) => Priority::Workload(v),
                (v, 1) => Priority::Pod(v),
                (v, _) if rng.chance(50) => Priority::Workload(v),
                (v, _) => Priority::Pod(v),
            };
        }
    }

    /// Up to two events: a finish right after the first wave, a deletion, a quota increase.
    fn make_events(&mut self, rng: &mut Rng) {
        if rng.chance(40)
            && let Some(job) = self.finish_candidate()
        {
            self.events.push((0, Event::Finish(job)));
        }
        if rng.chance(30) {
            let wave = rng.below(self.waves);
            let candidates: Vec<usize> = (0..self.jobs.len())
                .filter(|&j| self.jobs[j].wave <= wave && !self.finishes(j))
                .collect();
            if !candidates.is_empty() {
                self.events
                    .push((wave, Event::Delete(rng.pick(&candidates))));
            }
        }
        if self.events.len() < 2 && rng.chance(30) {
            let wave = rng.below(self.waves);
            let cq = rng.below(self.cqs.len());
            let mut flavors = self.cqs[cq].flavors.clone();
            flavors[0].nominal[0] += rng.between(1, 4) * 1000;
            flavors[0].nominal[1] += rng.between(0, 4) * 1024;
            self.events.push((wave, Event::Quota(cq, flavors)));
        }
        self.events.sort_by_key(|(wave, _)| *wave);
    }

    fn finishes(&self, job: usize) -> bool {
        self.events
            .iter()
            .any(|(_, e)| matches!(e, Event::Finish(j) if *j == job))
    }

    /// A first-wave Job certainly admitted once its wave is in: its ClusterQueue's first flavor holds, within
    /// its nominal quota, every first-wave Job that may use it (tolerates its taint), so they all fit there in
    /// whatever order they come, without borrowing, whatever the cohort does. Under StrictFIFO a Job that fits
    /// nowhere would block the queue, so there every first-wave Job of the queue must fit there too.
    fn finish_candidate(&self) -> Option<usize> {
        let first_wave: Vec<usize> = (0..self.jobs.len())
            .filter(|&j| self.jobs[j].wave == 0)
            .collect();
        first_wave.iter().copied().find(|&j| {
            let cq = &self.cqs[self.jobs[j].cq];
            let flavor = &cq.flavors[0];
            let usable = |job: &Job| !flavor.flavor.tainted || job.tolerates_spot;
            let mates: Vec<&Job> = first_wave
                .iter()
                .map(|&k| &self.jobs[k])
                .filter(|k| k.cq == self.jobs[j].cq)
                .collect();
            let strict_ok = cq.strategy != "StrictFIFO" || mates.iter().all(|m| usable(m));
            let total = mates
                .iter()
                .filter(|m| usable(m))
                .fold([0; 3], |acc, m| add(acc, m.demand()));
            strict_ok && usable(&self.jobs[j]) && (0..3).all(|r| total[r] <= flavor.nominal[r])
        })
    }

    fn scenario(&self, name: String) -> Scenario {
        let mut steps = vec![Step::Apply {
            what: "setup".into(),
            yaml: documents(&self.setup()),
        }];
        for wave in 0..self.waves {
            let jobs: Vec<Value> = self
                .jobs
                .iter()
                .filter(|j| j.wave == wave)
                .map(|j| self.job(j))
                .collect();
            if !jobs.is_empty() {
                steps.push(Step::Apply {
                    what: format!("wave {}", wave + 1),
                    yaml: documents(&jobs),
                });
            }
            for (_, event) in self.events.iter().filter(|(w, _)| *w == wave) {
                steps.push(self.event_step(event));
            }
        }
        Scenario {
            name,
            config: self.fair_sharing.then(fair_sharing_config),
            steps,
            not_simulated: None,
            nodes: Vec::new(),
        }
    }

    fn event_step(&self, event: &Event) -> Step {
        match event {
            Event::Finish(j) => Step::Finish {
                namespace: self.cqs[self.jobs[*j].cq].namespace(),
                job: self.jobs[*j].name.clone(),
            },
            Event::Delete(j) => Step::Delete(ObjectRef {
                kind: "Job".into(),
                namespace: Some(self.cqs[self.jobs[*j].cq].namespace()),
                name: self.jobs[*j].name.clone(),
            }),
            Event::Quota(cq, flavors) => Step::Patch {
                object: ObjectRef {
                    kind: "ClusterQueue".into(),
                    namespace: None,
                    name: self.cqs[*cq].name.clone(),
                },
                patch: json!({"spec": {"resourceGroups": self.resource_groups(flavors)}}),
                status: false,
            },
        }
    }

    /// The first step: namespaces, flavors, cohorts, queues and priority classes.
    fn setup(&self) -> Vec<Value> {
        let mut docs: Vec<Value> = self.cqs.iter().map(namespace).collect();
        docs.extend(self.flavors.iter().map(resource_flavor));
        docs.extend(
            self.cohorts
                .iter()
                .filter(|c| c.object)
                .map(|c| self.cohort(c)),
        );
        docs.extend(self.cqs.iter().map(|c| self.cluster_queue(c)));
        docs.extend(self.cqs.iter().map(local_queue));
        let mut classes: Vec<Priority> = self.jobs.iter().map(|j| j.priority).collect();
        classes.sort();
        classes.dedup();
        docs.extend(classes.into_iter().filter_map(priority_class));
        docs
    }

    fn resource_groups(&self, flavors: &[FlavorQuota]) -> Value {
        let n = self.resource_count();
        json!([{
            "coveredResources": RESOURCES[..n],
            "flavors": flavors.iter().map(|f| flavor_quotas(f, n)).collect::<Vec<_>>(),
        }])
    }

    fn cohort(&self, c: &Cohort) -> Value {
        let mut spec = json!({});
        if let Some(parent) = &c.parent {
            spec["parentName"] = json!(parent);
        }
        if !c.quota.is_empty() {
            spec["resourceGroups"] = self.resource_groups(&c.quota);
        }
        if let Some(w) = c.weight {
            spec["fairSharing"] = json!({"weight": w});
        }
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": c.name},
            "spec": spec,
        })
    }

    fn cluster_queue(&self, cq: &ClusterQueue) -> Value {
        let mut preemption = json!({
            "withinClusterQueue": cq.within,
            "reclaimWithinCohort": cq.reclaim,
        });
        if let Some(threshold) = cq.borrow_within {
            preemption["borrowWithinCohort"] = json!({"policy": "LowerPriority"});
            if let Some(t) = threshold {
                preemption["borrowWithinCohort"]["maxPriorityThreshold"] = json!(t);
            }
        }
        let selector = if cq.selects_team {
            json!({"matchLabels": {"team": cq.namespace()}})
        } else {
            json!({})
        };
        let mut spec = json!({
            "cohortName": cq.cohort,
            "namespaceSelector": selector,
            "queueingStrategy": cq.strategy,
            "preemption": preemption,
            "resourceGroups": self.resource_groups(&cq.flavors),
        });
        if let Some((borrow, preempt)) = cq.fungibility {
            spec["flavorFungibility"] = json!({"whenCanBorrow": borrow, "whenCanPreempt": preempt});
        }
        if let Some(w) = cq.weight {
            spec["fairSharing"] = json!({"weight": w});
        }
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq.name},
            "spec": spec,
        })
    }

    fn job(&self, job: &Job) -> Value {
        let cq = &self.cqs[job.cq];
        let mut labels = json!({QUEUE_LABEL: "queue"});
        let mut pod = json!({
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": IMAGE,
                "args": ["pause"],
                "resources": container_resources(job.per_pod),
            }],
        });
        match job.priority {
            Priority::Workload(v) => labels[PRIORITY_LABEL] = json!(format!("wpc-{v}")),
            Priority::Pod(v) => pod["priorityClassName"] = json!(format!("pc-{v}")),
            Priority::None => {}
        }
        if job.tolerates_spot {
            pod["tolerations"] = json!([{
                "key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule",
            }]);
        }
        let mut metadata = json!({"name": job.name, "namespace": cq.namespace(), "labels": labels});
        if let Some(min) = job.min_parallelism {
            metadata["annotations"] = json!({MIN_PARALLELISM: min.to_string()});
        }
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata,
            "spec": {
                "parallelism": job.pods,
                "completions": job.pods,
                "template": {"spec": pod},
            },
        })
    }
}

/// One to three flavors of the catalogue, in a random order; the untainted `default` or `on-demand` comes first
/// so that Cohort pools and most Jobs have a flavor every pod tolerates.
fn pick_flavors(rng: &mut Rng) -> Vec<Flavor> {
    let mut flavors = CATALOGUE.to_vec();
    rng.shuffle(&mut flavors);
    flavors.truncate(rng.between(1, 3) as usize);
    if let Some(i) = flavors.iter().position(|f| !f.tainted) {
        flavors.swap(0, i);
    } else {
        flavors.insert(0, CATALOGUE[0]);
    }
    flavors
}

/// A ClusterQueue's quota on a flavor; limits sometimes, lending never above nominal (Kueue rejects that).
fn cq_quota(rng: &mut Rng, flavor: Flavor) -> FlavorQuota {
    let nominal = [
        rng.between(0, 8) * 1000,
        rng.between(1, 16) * 1024,
        rng.between(0, 4),
    ];
    let mut q = FlavorQuota {
        flavor,
        nominal,
        borrowing: [None; 3],
        lending: [None; 3],
    };
    for (r, nominal) in nominal.into_iter().enumerate() {
        let unit = unit(r);
        if rng.chance(20) {
            q.borrowing[r] = Some(rng.between(0, 4) * unit);
        }
        if rng.chance(20) {
            q.lending[r] = Some(rng.between(0, nominal / unit) * unit);
        }
    }
    q
}

/// The step quotas and limits are drawn in: a core, a GiB, a GPU.
fn unit(resource: usize) -> u32 {
    [1000, 1024, 1][resource]
}

fn add(a: Amounts, b: Amounts) -> Amounts {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// A quantity as Kubernetes writes it: `2`, `500m`, `4Gi`, `512Mi`.
fn quantity(resource: usize, amount: u32) -> String {
    match resource {
        0 if amount.is_multiple_of(1000) => (amount / 1000).to_string(),
        0 => format!("{amount}m"),
        1 if amount.is_multiple_of(1024) => format!("{}Gi", amount / 1024),
        1 => format!("{amount}Mi"),
        _ => amount.to_string(),
    }
}

fn flavor_quotas(f: &FlavorQuota, resources: usize) -> Value {
    let resources: Vec<Value> = (0..resources)
        .map(|r| {
            let mut q = json!({"name": RESOURCES[r], "nominalQuota": quantity(r, f.nominal[r])});
            if let Some(b) = f.borrowing[r] {
                q["borrowingLimit"] = json!(quantity(r, b));
            }
            if let Some(l) = f.lending[r] {
                q["lendingLimit"] = json!(quantity(r, l));
            }
            q
        })
        .collect();
    json!({"name": f.flavor.name, "resources": resources})
}

/// Requests, and for GPUs the equal limits the API server requires of extended resources.
fn container_resources(per_pod: Amounts) -> Value {
    let mut requests = json!({"cpu": quantity(0, per_pod[0]), "memory": quantity(1, per_pod[1])});
    if per_pod[2] == 0 {
        return json!({"requests": requests});
    }
    let gpus = quantity(2, per_pod[2]);
    requests[RESOURCES[2]] = json!(gpus);
    json!({"requests": requests, "limits": {RESOURCES[2]: gpus}})
}

fn namespace(cq: &ClusterQueue) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": cq.namespace(), "labels": {"team": cq.namespace()}},
    })
}

fn local_queue(cq: &ClusterQueue) -> Value {
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "queue", "namespace": cq.namespace()},
        "spec": {"clusterQueue": cq.name},
    })
}

fn resource_flavor(f: &Flavor) -> Value {
    let mut spec = json!({});
    if let Some(pool) = f.pool {
        spec["nodeLabels"] = json!({"node-pool": pool});
    }
    if f.tainted {
        spec["nodeTaints"] = json!([{"key": "spot", "value": "true", "effect": "NoSchedule"}]);
    }
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": f.name},
        "spec": spec,
    })
}

fn priority_class(p: Priority) -> Option<Value> {
    match p {
        Priority::None => None,
        Priority::Workload(v) => Some(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": format!("wpc-{v}")},
            "value": v,
        })),
        Priority::Pod(v) => Some(json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": format!("pc-{v}")},
            "value": v,
        })),
    }
}

/// The Configuration of a fair-sharing scenario: fair sharing on, with Kueue's two preemption strategies.
fn fair_sharing_config() -> String {
    documents(&[json!({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": {
            "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
        },
    })])
}

/// Objects as one multi-document YAML text.
fn documents(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| serde_yaml::to_string(d).expect("a JSON value is valid YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use super::*;

    /// Every document of every Apply step.
    fn applied(s: &Scenario) -> Vec<(usize, Value)> {
        let mut out = Vec::new();
        for (i, step) in s.steps.iter().enumerate() {
            if let Step::Apply { yaml, .. } = step {
                for doc in serde_yaml::Deserializer::from_str(yaml) {
                    let v: Value = serde::Deserialize::deserialize(doc).expect("valid YAML");
                    out.push((i, v));
                }
            }
        }
        out
    }

    fn render(s: &Scenario) -> String {
        format!("{:?}", s)
    }

    #[test]
    fn same_seed_same_scenario() {
        for seed in [0, 1, 7, 123, u64::MAX] {
            assert_eq!(render(&generate(seed)), render(&generate(seed)));
        }
    }

    #[test]
    fn different_seeds_differ() {
        let all: Vec<String> = (0..50).map(|s| render(&generate(s))).collect();
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "two seeds gave the same scenario");
    }

    #[test]
    fn scenarios_are_small() {
        for seed in 0..200 {
            let s = generate(seed);
            assert_eq!(s.name, format!("seed-{seed}"));
            let jobs = applied(&s)
                .iter()
                .filter(|(_, d)| d["kind"] == "Job")
                .count();
            assert!((1..=MAX_JOBS).contains(&jobs), "seed {seed}: {jobs} jobs");
            let applies = s
                .steps
                .iter()
                .filter(|st| matches!(st, Step::Apply { .. }))
                .count();
            assert!((2..=4).contains(&applies), "seed {seed}: {applies} applies");
            assert!(s.steps.len() <= 6, "seed {seed}: {} steps", s.steps.len());
        }
    }

    /// What the manifests say about cohorts, queues and priorities, read back independently of the generator.
    struct Setup {
        parent: BTreeMap<String, String>,
        cq_cohort: BTreeMap<String, String>,
        queue_cq: BTreeMap<(String, String), String>,
        classes: BTreeMap<String, i64>,
    }

    impl Setup {
        fn read(docs: &[(usize, Value)]) -> Setup {
            let mut s = Setup {
                parent: BTreeMap::new(),
                cq_cohort: BTreeMap::new(),
                queue_cq: BTreeMap::new(),
                classes: BTreeMap::new(),
            };
            for (_, d) in docs {
                let name = d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                match d["kind"].as_str().unwrap_or_default() {
                    "Cohort" if d["spec"]["parentName"].is_string() => {
                        s.parent.insert(name, text(&d["spec"]["parentName"]));
                    }
                    "ClusterQueue" => {
                        s.cq_cohort.insert(name, text(&d["spec"]["cohortName"]));
                    }
                    "LocalQueue" => {
                        let ns = text(&d["metadata"]["namespace"]);
                        s.queue_cq
                            .insert((ns, name), text(&d["spec"]["clusterQueue"]));
                    }
                    "WorkloadPriorityClass" | "PriorityClass" => {
                        s.classes.insert(
                            format!("{}/{name}", text(&d["kind"])),
                            d["value"].as_i64().unwrap(),
                        );
                    }
                    _ => {}
                }
            }
            s
        }

        fn root(&self, cohort: &str) -> String {
            let mut c = cohort.to_string();
            while let Some(p) = self.parent.get(&c) {
                c = p.clone();
            }
            c
        }

        /// The Job's ClusterQueue, cohort tree root and priority.
        fn job(&self, job: &Value) -> (String, String, i64) {
            let meta = &job["metadata"];
            let ns = meta["namespace"].as_str().unwrap().to_string();
            let queue = meta["labels"][QUEUE_LABEL].as_str().unwrap().to_string();
            let cq = self.queue_cq[&(ns, queue)].clone();
            let root = self.root(&self.cq_cohort[&cq]);
            let wpc = meta["labels"][PRIORITY_LABEL].as_str();
            let pc = job["spec"]["template"]["spec"]["priorityClassName"].as_str();
            let priority = match (wpc, pc) {
                (Some(w), _) => self.classes[&format!("WorkloadPriorityClass/{w}")],
                (None, Some(p)) => self.classes[&format!("PriorityClass/{p}")],
                (None, None) => 0,
            };
            (cq, root, priority)
        }
    }

    #[test]
    fn jobs_that_compete_in_a_wave_have_distinct_priorities_and_one_queue() {
        for seed in 0..200 {
            let docs = applied(&generate(seed));
            let setup = Setup::read(&docs);
            let mut waves: BTreeMap<(usize, String), Vec<(String, i64)>> = BTreeMap::new();
            for (step, d) in docs.iter().filter(|(_, d)| d["kind"] == "Job") {
                let (cq, root, priority) = setup.job(d);
                waves.entry((*step, root)).or_default().push((cq, priority));
            }
            for ((step, root), jobs) in waves {
                let at = format!("seed {seed}, step {step}, cohort tree {root}");
                let mut priorities: Vec<i64> = jobs.iter().map(|j| j.1).collect();
                assert!(
                    priorities.windows(2).all(|w| w[0] > w[1]),
                    "{at}: not created highest first: {jobs:?}"
                );
                priorities.dedup();
                assert_eq!(
                    priorities.len(),
                    jobs.len(),
                    "{at}: equal priorities {jobs:?}"
                );
                assert!(
                    jobs.iter().all(|j| j.0 == jobs[0].0),
                    "{at}: several ClusterQueues {jobs:?}"
                );
            }
        }
    }

    #[test]
    fn finished_jobs_were_applied_earlier() {
        for seed in 0..200 {
            let s = generate(seed);
            let mut seen = Vec::new();
            for step in &s.steps {
                match step {
                    Step::Apply { yaml, .. } => seen.push(yaml.clone()),
                    Step::Finish { job, .. } | Step::Delete(ObjectRef { name: job, .. }) => {
                        let line = format!("name: {job}\n");
                        assert!(
                            seen.iter().any(|y| y.contains(&line)),
                            "seed {seed}: {job} not applied yet"
                        );
                    }
                    Step::Patch { .. } | Step::Answer { .. } => {}
                }
            }
        }
    }

    /// A fresh directory under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sluice-kueue-gen-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        dir
    }

    /// Writes the Apply steps' manifests, `patched` replacing the objects of the same kind and name.
    fn write_manifests(dir: &Path, s: &Scenario, patched: &[Value]) {
        for (i, step) in s.steps.iter().enumerate() {
            if let Step::Apply { yaml, .. } = step {
                let mut docs: Vec<Value> = serde_yaml::Deserializer::from_str(yaml)
                    .map(|d| serde::Deserialize::deserialize(d).expect("valid YAML"))
                    .collect();
                for d in &mut docs {
                    if let Some(p) = patched.iter().find(|p| {
                        p["kind"] == d["kind"] && p["metadata"]["name"] == d["metadata"]["name"]
                    }) {
                        *d = p.clone();
                    }
                }
                std::fs::write(dir.join(format!("{i:02}.yaml")), documents(&docs))
                    .expect("write manifest");
            }
        }
    }

    /// The objects as the scenario's patches leave them.
    fn patched_objects(s: &Scenario) -> Vec<Value> {
        let docs = applied(s);
        let mut out: Vec<Value> = Vec::new();
        for step in &s.steps {
            if let Step::Patch { object, patch, .. } = step {
                let current = out.iter().position(|d| {
                    d["kind"] == object.kind.as_str()
                        && d["metadata"]["name"] == object.name.as_str()
                });
                let mut doc = match current {
                    Some(i) => out.remove(i),
                    None => docs
                        .iter()
                        .map(|(_, d)| d)
                        .find(|d| {
                            d["kind"] == object.kind.as_str()
                                && d["metadata"]["name"] == object.name.as_str()
                        })
                        .expect("a patch names an applied object")
                        .clone(),
                };
                json_patch::merge(&mut doc, patch);
                out.push(doc);
            }
        }
        out
    }

    fn simulate(dir: &Path, config: Option<&Path>) -> Result<(), String> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["simulate", "-f"])
            .arg(dir)
            .args(["--no-progress", "-o", "json"]);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let out = cmd.output().map_err(|e| format!("running sluice: {e}"))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("exit {}: {stderr}", out.status));
        }
        let lower = stderr.to_lowercase();
        if ["invalid", "error", "unknown", "reject"]
            .iter()
            .any(|w| lower.contains(w))
        {
            return Err(format!("stderr: {stderr}"));
        }
        serde_json::from_slice::<Value>(&out.stdout)
            .map_err(|e| format!("output is not JSON: {e}"))?;
        Ok(())
    }

    #[test]
    fn sluice_simulate_accepts_every_generated_scenario() {
        let root = scratch("simulate");
        let mut failures = Vec::new();
        for seed in 0..200 {
            let s = generate(seed);
            let dir = root.join(&s.name);
            std::fs::create_dir_all(&dir).expect("scenario directory");
            let config = s.config.as_ref().map(|c| {
                let path = root.join(format!("{}-config.yaml", s.name));
                std::fs::write(&path, c).expect("write config");
                path
            });
            write_manifests(&dir, &s, &[]);
            if let Err(e) = simulate(&dir, config.as_deref()) {
                failures.push(format!("{}: {e}", s.name));
            }
            let patched = patched_objects(&s);
            if !patched.is_empty() {
                let dir = root.join(format!("{}-patched", s.name));
                std::fs::create_dir_all(&dir).expect("scenario directory");
                write_manifests(&dir, &s, &patched);
                if let Err(e) = simulate(&dir, config.as_deref()) {
                    failures.push(format!("{} (patched): {e}", s.name));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&root);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
