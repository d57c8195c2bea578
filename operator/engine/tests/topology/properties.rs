//! All or nothing, property-tested: whatever the cluster and the gangs, no admitted TAS pod set is
//! partially placed, every placed pod set has exactly its admitted count (at least minCount) and
//! no node holds more than it has.

use crate::common::*;
use proptest::prelude::*;
use sluice_engine::*;

const GPU: &str = "nvidia.com/gpu";
const LEVELS: [&str; 3] = ["block", "rack", "kubernetes.io/hostname"];

/// A TAS flavor over `racks` racks of `per_rack` nodes (two racks per block), `gpus` GPUs each; node k (in rack
/// order) is ready when `ready(k)`.
fn cluster(racks: usize, per_rack: usize, gpus: i64, ready: impl Fn(usize) -> bool) -> Env {
    let mut env = Env::new();
    env.apply(Event::UpsertTopology(TopologyLevels {
        name: "t".into(),
        levels: LEVELS.iter().map(|s| s.to_string()).collect(),
    }));
    env.flavor_obj(Flavor {
        name: "tas".into(),
        topology_name: Some("t".into()),
        ..Flavor::default()
    });
    for r in 0..racks {
        for n in 0..per_rack {
            let name = format!("n{r}-{n}");
            env.apply(Event::UpsertNode(Node {
                name: name.clone(),
                labels: [
                    ("block", format!("b{}", r / 2)),
                    ("rack", format!("r{r}")),
                    ("kubernetes.io/hostname", name),
                ]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b))
                .collect(),
                allocatable: [(GPU.to_string(), gpus)].into(),
                ready: ready(r * per_rack + n),
                ..Node::default()
            }));
        }
    }
    env
}

#[derive(Clone, Debug)]
struct Gang {
    pods: i32,
    min: Option<i32>,
    gpus: i64,
    mode: u8,
    level: u8,
    finish_after: u8,
}

fn gang() -> impl Strategy<Value = Gang> {
    (
        1..12i32,
        proptest::option::of(1..12i32),
        1..=8i64,
        0..3u8,
        0..3u8,
        0..4u8,
    )
        .prop_map(|(pods, min, gpus, mode, level, finish_after)| Gang {
            pods,
            min: min.map(|m| m.min(pods)),
            gpus,
            mode,
            level,
            finish_after,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn never_a_partial_gang(
        racks in 1..4usize,
        per_rack in 1..5usize,
        gpus_per_node in prop::sample::select(vec![4i64, 8]),
        down in proptest::collection::vec(any::<bool>(), 16),
        gangs in proptest::collection::vec(gang(), 1..10),
    ) {
        let mut env = cluster(racks, per_rack, gpus_per_node, |k| !down[k % down.len()] || k == 0);
        env.cq_lq(cq("cq").group(&[GPU], vec![fq("tas", vec![rq(GPU, 64)])]), "ns");
        // One pod that always fits (node n0-0 is always ready): the checks below see admissions.
        let mut small = wl("ns", "small").queue("main").ps("main", 1, &[(GPU, 1)]);
        small.0.pod_sets[0].topology = Some(PodSetTopology { mode: TopologyMode::Unconstrained, ..PodSetTopology::default() });
        env.submit(small);
        for (i, g) in gangs.iter().enumerate() {
            let mut w = wl("ns", &format!("w{i}")).queue("main").ps("main", g.pods, &[(GPU, g.gpus)]);
            if let Some(m) = g.min { w = w.min(m); }
            let mode = [TopologyMode::Required, TopologyMode::Preferred, TopologyMode::Unconstrained][g.mode as usize];
            w.0.pod_sets[0].topology = Some(PodSetTopology {
                mode,
                level: (mode != TopologyMode::Unconstrained).then(|| LEVELS[g.level as usize].to_string()),
                ..PodSetTopology::default()
            });
            env.submit(w);
        }
        for cycle in 0..12u8 {
            env.schedule();
            env.engine.check_topology_invariants().map_err(TestCaseError::fail)?;
            if cycle == 0 {
                prop_assert!(matches!(env.state("ns/small"), WorkloadState::Admitted(_)));
                prop_assert_eq!(env.engine.placement(&key_of("ns/small")).map(|p| p[0].nodes[0].pods), Some(1));
            }
            for (i, g) in gangs.iter().enumerate() {
                let key = format!("ns/w{i}");
                if let WorkloadState::Admitted(a) = env.state(&key) {
                    let p = env.engine.placement(&key_of(&key));
                    prop_assert!(p.is_some(), "{key} admitted without a placement");
                    let placed: i32 = p.into_iter().flatten().flat_map(|p| &p.nodes).map(|n| n.pods).sum();
                    let count = a.pod_set_assignments[0].count;
                    prop_assert_eq!(placed, count);
                    prop_assert!(count >= g.min.unwrap_or(g.pods) && count <= g.pods);
                    if g.mode == 0 {
                        // Required: one domain of the level.
                        let p = &env.engine.placement(&key_of(&key)).unwrap()[0];
                        let level = LEVELS[g.level as usize];
                        let domains: std::collections::BTreeSet<String> = p.nodes.iter().map(|n| {
                            let (r, _) = n.node[1..].split_once('-').unwrap();
                            let r: usize = r.parse().unwrap();
                            match level { "block" => format!("b{}", r / 2), "rack" => format!("r{r}"), _ => n.node.clone() }
                        }).collect();
                        prop_assert_eq!(domains.len(), 1, "{} spans {:?}", key, domains);
                    }
                    if cycle >= g.finish_after {
                        env.apply(Event::FinishWorkload(key_of(&key)));
                    }
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Arrival {
    pods: i32,
    gpus: i64,
    level: u8,
    priority: i32,
    at_cycle: u8,
    finish_after: u8,
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (1..6i32, 1..=8i64, 0..3u8, 0..4i32, 0..12u8, 2..10u8).prop_map(
        |(pods, gpus, level, priority, at_cycle, finish_after)| Arrival {
            pods,
            gpus,
            level,
            priority,
            at_cycle,
            finish_after,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// No workload is evicted for a preemptor that is not then admitted: once a preemptor's victims are gone,
    /// the next cycle admits it (or it is still waiting for those very victims, or it finished).
    #[test]
    fn every_preemption_admits_its_preemptor(
        racks in 1..4usize,
        per_rack in 1..4usize,
        gpus_per_node in prop::sample::select(vec![4i64, 8]),
        newer_equal in any::<bool>(),
        eviction_cycles in 0..3u8,
        tight_quota in any::<bool>(),
        arrivals in proptest::collection::vec(arrival(), 4..24),
    ) {
        let mut env = cluster(racks, per_rack, gpus_per_node, |_| true);
        // Either as much quota as GPUs (quota and room both decide) or ample quota (only room does).
        let quota = if tight_quota { (racks * per_rack) as i64 * gpus_per_node } else { 1000 };
        let within = if newer_equal { WithinCqPolicy::LowerOrNewerEqualPriority } else { WithinCqPolicy::LowerPriority };
        env.cq_lq(
            cq("cq")
                .group(&[GPU], vec![fq("tas", vec![rq(GPU, quota)])])
                .preemption(ReclaimPolicy::Never, within),
            "ns",
        );
        // Evictions in flight: victim -> cycle its pods are gone.
        let mut stopping: std::collections::BTreeMap<String, u32> = Default::default();
        // Preemptor -> its victims, while it has not been admitted.
        let mut owed: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        let mut admitted_at: std::collections::BTreeMap<String, u32> = Default::default();
        for cycle in 0..30u32 {
            for (i, a) in arrivals.iter().enumerate() {
                if u32::from(a.at_cycle) == cycle {
                    let mut w = wl("ns", &format!("w{i}")).queue("main").prio(a.priority).ps("main", a.pods, &[(GPU, a.gpus)]);
                    w.0.pod_sets[0].topology = Some(PodSetTopology {
                        mode: TopologyMode::Required,
                        level: Some(LEVELS[a.level as usize].to_string()),
                        ..PodSetTopology::default()
                    });
                    env.submit(w);
                }
            }
            // Victims whose pods are gone by now.
            let done: Vec<String> = stopping.iter().filter(|(_, c)| **c <= cycle).map(|(k, _)| k.clone()).collect();
            for k in &done {
                stopping.remove(k);
                env.apply(Event::EvictionComplete { workload: key_of(k), time: env.now });
            }
            // Every preemptor whose victims were all gone before this cycle is admitted by it.
            let due: Vec<String> = owed
                .iter()
                .filter(|(_, vs)| vs.iter().all(|v| !stopping.contains_key(v)))
                .map(|(p, _)| p.clone())
                .collect();
            let out = env.schedule();
            env.engine.check_topology_invariants().map_err(TestCaseError::fail)?;
            for d in &out {
                match d {
                    Decision::Evict { workload, preemptor: Some(p), .. } => {
                        stopping.insert(workload.to_string(), cycle + u32::from(eviction_cycles));
                        owed.entry(p.to_string()).or_default().push(workload.to_string());
                    }
                    Decision::Evict { workload, .. } => {
                        stopping.insert(workload.to_string(), cycle + u32::from(eviction_cycles));
                    }
                    Decision::Admit { workload, .. } => {
                        admitted_at.insert(workload.to_string(), cycle);
                        owed.remove(&workload.to_string());
                    }
                    _ => {}
                }
            }
            for p in due {
                prop_assert!(
                    !owed.contains_key(&p),
                    "{} preempted {:?}, they are gone, and it was not admitted: {:?}",
                    p, owed.get(&p), env.state(&p)
                );
            }
            // Finish admitted workloads after their run.
            for (i, a) in arrivals.iter().enumerate() {
                let key = format!("ns/w{i}");
                if admitted_at.get(&key).is_some_and(|&c| cycle >= c + u32::from(a.finish_after))
                    && matches!(env.state(&key), WorkloadState::Admitted(_))
                {
                    env.apply(Event::FinishWorkload(key_of(&key)));
                    admitted_at.remove(&key);
                }
            }
        }
    }
}
