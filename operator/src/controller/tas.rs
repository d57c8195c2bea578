//! Topology-aware scheduling in the operator: placements rebuilt from Workload status after a restart, and
//! gated pods pinned to their domain (what Kueue's TAS ungater does).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use sluice_sdk::kueue::conversion::expand_topology_assignment;
use sluice_sdk::kueue::labels;
use sluice_sdk::kueue::v1beta2 as api;

use crate::engine;
use crate::ingest;
use crate::jobs::topology::node_selector_for_rank;

const HOSTNAME: &str = "kubernetes.io/hostname";
/// Label and annotation the Job controller puts on each pod of an Indexed Job: its rank.
const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The topology placements recorded in an admitted Workload's `status.admission`, for
/// `Event::RestorePlacement`. Kueue's status names domains, not GPUs: with a hostname level each domain is one
/// node; otherwise the domain's pods are spread over its nodes (by name) up to what each node can hold.
pub fn restored_placements(
    wl: &api::Workload,
    w: &engine::Workload,
    flavors: &BTreeMap<String, api::ResourceFlavor>,
    nodes: &BTreeMap<String, Node>,
) -> Result<Vec<engine::PodSetPlacement>, String> {
    let Some(admission) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, psa) in admission.pod_set_assignments.iter().enumerate() {
        let Some(ta) = psa.topology_assignment.as_ref() else {
            continue;
        };
        let field = format!("status.admission.podSetAssignments[{i}].topologyAssignment");
        let expanded = expand_topology_assignment(ta).map_err(|e| format!("{field}: {e}"))?;
        let per_pod = w
            .pod_sets
            .iter()
            .find(|ps| ps.name == psa.name)
            .map(|ps| ps.requests.clone())
            .ok_or_else(|| format!("{field}: no pod set named {:?}", psa.name))?;
        let flavor = psa
            .flavors
            .values()
            .find(|f| {
                flavors
                    .get(*f)
                    .is_some_and(|rf| rf.spec.topology_name.is_some())
            })
            .or_else(|| psa.flavors.values().next())
            .cloned()
            .unwrap_or_default();
        let mut placed = Vec::new();
        for d in &expanded.domains {
            if d.values.len() != expanded.levels.len() {
                return Err(format!(
                    "{field}: a domain has {} values for {} levels",
                    d.values.len(),
                    expanded.levels.len()
                ));
            }
            if expanded.levels.last().is_some_and(|l| l == HOSTNAME) {
                if let Some(node) = d.values.last() {
                    placed.push(node_placement(node, d.count));
                }
                continue;
            }
            spread(
                &mut placed,
                &expanded.levels,
                &d.values,
                d.count,
                &per_pod,
                nodes,
            );
        }
        out.push(engine::PodSetPlacement {
            pod_set: psa.name.clone(),
            flavor,
            per_pod,
            assignment: engine::TopologyAssignment {
                levels: expanded.levels.clone(),
                domains: expanded
                    .domains
                    .iter()
                    .map(|d| engine::TopologyDomain {
                        values: d.values.clone(),
                        count: d.count,
                    })
                    .collect(),
            },
            nodes: placed,
        });
    }
    Ok(out)
}

fn node_placement(node: &str, pods: i32) -> engine::NodePlacement {
    engine::NodePlacement {
        node: node.to_string(),
        pods,
        // Kueue's status does not say which GPUs; node capacity is charged by count.
        gpus: Vec::new(),
        mig_gpus: Vec::new(),
    }
}

/// Charges `count` pods of one non-hostname domain to its nodes in name order, each up to its allocatable.
fn spread(
    placed: &mut Vec<engine::NodePlacement>,
    levels: &[String],
    values: &[String],
    count: i32,
    per_pod: &engine::ResourceList,
    nodes: &BTreeMap<String, Node>,
) {
    let members: Vec<(&String, &Node)> = nodes
        .iter()
        .filter(|(_, n)| {
            let l = n.labels();
            levels
                .iter()
                .zip(values)
                .all(|(k, v)| l.get(k).is_some_and(|x| x == v))
        })
        .collect();
    let mut left = count;
    for (name, n) in &members {
        if left <= 0 {
            break;
        }
        let fits = ingest::node(n).map_or(0, |en| {
            per_pod
                .iter()
                .filter(|(_, q)| **q > 0)
                .map(|(r, q)| en.allocatable.get(r).copied().unwrap_or(0) / q)
                .min()
                .unwrap_or(i64::from(left))
        });
        let take = i32::try_from(fits.clamp(0, i64::from(left))).unwrap_or(left);
        if take > 0 {
            placed.push(node_placement(name, take));
            left -= take;
        }
    }
    // More pods than the nodes seem to hold (allocatable shrank): still charge them, to the first node.
    if left > 0
        && let Some((name, _)) = members.first()
    {
        match placed.iter_mut().find(|p| &p.node == *name) {
            Some(p) => p.pods += left,
            None => placed.push(node_placement(name, left)),
        }
    }
}

/// Whether the pod still waits at Kueue's topology gate.
pub fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == labels::TOPOLOGY_SCHEDULING_GATE))
}

/// The Workload a pod belongs to by Kueue's TAS annotation, as (namespace, name).
pub fn pod_workload(pod: &Pod) -> Option<(String, String)> {
    pod.annotations()
        .get(labels::WORKLOAD_ANNOTATION)
        .map(|w| (pod.namespace().unwrap_or_default(), w.clone()))
}

/// Whether the pod belongs to a pod set of `wl` with a topology assignment (by its `kueue.x-k8s.io/podset`
/// label).
pub fn in_topology_pod_set(wl: &api::Workload, pod: &Pod) -> bool {
    let Some(ps) = pod.labels().get(labels::PODSET_LABEL) else {
        return false;
    };
    wl.status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .is_some_and(|a| {
            a.pod_set_assignments
                .iter()
                .any(|p| &p.name == ps && p.topology_assignment.is_some())
        })
}

/// Node label -> value a pod must be placed on.
pub type NodeSelector = BTreeMap<String, String>;

/// How a pod set's pods are ranked: the label of a pod's index within its group (a Job's completion index) and,
/// for kinds with several groups (a JobSet's Jobs), the label of the group's index with the number of groups.
struct Ranking<'a> {
    pod_index: &'a str,
    sub_group: Option<(&'a str, i32)>,
    pods: i32,
}

impl<'a> Ranking<'a> {
    /// As the pod set's topology request says (the completion index when it says nothing).
    fn of(ps: Option<&'a api::PodSet>) -> Self {
        let req = ps.and_then(|p| p.topology_request.as_ref());
        Ranking {
            pod_index: req
                .and_then(|r| r.pod_index_label.as_deref())
                .unwrap_or(JOB_COMPLETION_INDEX),
            sub_group: req.and_then(|r| {
                Some((r.sub_group_index_label.as_deref()?, r.sub_group_count?))
                    .filter(|(_, n)| *n > 0)
            }),
            pods: ps.map_or(0, |p| p.count),
        }
    }

    /// The pod's rank in the pod set: group index x pods per group + index in the group.
    fn rank(&self, pod: &Pod) -> Option<usize> {
        let read = |key: &str| -> Option<usize> {
            pod.labels()
                .get(key)
                .or_else(|| pod.annotations().get(key))
                .and_then(|v| v.parse().ok())
        };
        let index = read(self.pod_index)?;
        match self.sub_group {
            None => Some(index),
            Some((label, groups)) => {
                let per_group = usize::try_from(self.pods / groups).ok()?;
                if index >= per_group {
                    return None;
                }
                let group = read(label)?;
                if group >= usize::try_from(groups).ok()? {
                    return None;
                }
                group.checked_mul(per_group)?.checked_add(index)
            }
        }
    }
}

fn selector_matches(pod: &Pod, levels: &[String], values: &[String]) -> bool {
    let ns = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    levels
        .iter()
        .zip(values)
        .all(|(k, v)| ns.and_then(|m| m.get(k)) == Some(v))
}

/// Node selector for each gated pod of an admitted TAS Workload: by rank (the Job completion index) when every
/// gated pod has one inside the assignment, else gated pods in name order fill what each domain still lacks
/// after the pods already ungated there. `pods` are the Workload's pods (by the TAS annotation).
pub fn plan_ungates(
    wl: &api::Workload,
    pods: &[&Pod],
) -> Result<Vec<(String, NodeSelector)>, String> {
    let Some(admission) = wl.status.as_ref().and_then(|s| s.admission.as_ref()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, psa) in admission.pod_set_assignments.iter().enumerate() {
        let Some(ta) = psa.topology_assignment.as_ref() else {
            continue;
        };
        let field = format!("status.admission.podSetAssignments[{i}].topologyAssignment");
        let members: Vec<&Pod> = pods
            .iter()
            .copied()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.labels().get(labels::PODSET_LABEL) == Some(&psa.name))
            .collect();
        let mut gated: Vec<&Pod> = members.iter().copied().filter(|p| is_gated(p)).collect();
        if gated.is_empty() {
            continue;
        }
        gated.sort_by_key(|p| p.name_any());
        let ranking = Ranking::of(wl.spec.pod_sets.iter().find(|ps| ps.name == psa.name));
        let rank_of = |p: &Pod| ranking.rank(p);
        let expanded = expand_topology_assignment(ta).map_err(|e| format!("{field}: {e}"))?;
        let total: i64 = expanded.domains.iter().map(|d| i64::from(d.count)).sum();
        let ranked = gated
            .iter()
            .all(|p| rank_of(p).is_some_and(|r| (r as i64) < total));
        // Two pods claiming one rank (a pod set whose ranks are not those of its request) are placed unranked.
        let ranked = ranked && {
            let mut ranks: Vec<usize> = gated.iter().filter_map(|p| rank_of(p)).collect();
            ranks.sort_unstable();
            ranks.windows(2).all(|w| w[0] != w[1])
        };
        if ranked {
            for p in gated {
                let rank = rank_of(p).unwrap_or_default();
                if let Some(sel) =
                    node_selector_for_rank(ta, rank).map_err(|e| format!("{field}: {e}"))?
                {
                    out.push((p.name_any(), sel));
                }
            }
            continue;
        }
        let mut left: Vec<i64> = expanded
            .domains
            .iter()
            .map(|d| {
                let there = members
                    .iter()
                    .filter(|p| !is_gated(p) && selector_matches(p, &expanded.levels, &d.values))
                    .count() as i64;
                i64::from(d.count) - there
            })
            .collect();
        for p in gated {
            let Some(di) = left.iter().position(|n| *n > 0) else {
                break;
            };
            left[di] -= 1;
            let sel = expanded
                .levels
                .iter()
                .cloned()
                .zip(expanded.domains[di].values.iter().cloned())
                .collect();
            out.push((p.name_any(), sel));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(levels: &str, values: &str, counts: &str) -> api::Workload {
        serde_yaml::from_str(&format!(
            r#"
metadata: {{name: w, namespace: ns}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 3
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "4"}}}}}}]}}}}
status:
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 3
      flavors: {{nvidia.com/gpu: tas}}
      topologyAssignment:
        levels: [{levels}]
        slices:
        - domainCount: 2
          valuesPerLevel: [{{individual: {{roots: [{values}]}}}}]
          podCounts: {{individual: [{counts}]}}
"#
        ))
        .unwrap()
    }

    fn pod(name: &str, rank: Option<u32>, gated: bool, on: Option<&str>) -> Pod {
        let rank = rank
            .map(|r| format!(", {JOB_COMPLETION_INDEX}: \"{r}\""))
            .unwrap_or_default();
        let gates = if gated {
            "[{name: kueue.x-k8s.io/topology}]"
        } else {
            "[]"
        };
        let sel = on
            .map(|n| format!("{{rack: {n}}}"))
            .unwrap_or_else(|| "{}".into());
        serde_yaml::from_str(&format!(
            r#"
metadata:
  name: {name}
  namespace: ns
  labels: {{kueue.x-k8s.io/podset: main{rank}}}
  annotations: {{kueue.x-k8s.io/workload: w}}
spec: {{schedulingGates: {gates}, nodeSelector: {sel}, containers: []}}
"#
        ))
        .unwrap()
    }

    #[test]
    fn ranked_pods_follow_their_rank_and_unranked_fill_what_is_left() {
        let w = wl("rack", "r1, r2", "1, 2");
        let (a, b, c) = (
            pod("a", Some(2), true, None),
            pod("b", Some(0), true, None),
            pod("c", Some(1), true, None),
        );
        let plan = plan_ungates(&w, &[&a, &b, &c]).unwrap();
        let rack: BTreeMap<_, _> = plan
            .iter()
            .map(|(p, s)| (p.as_str(), s["rack"].as_str()))
            .collect();
        assert_eq!(rack, [("a", "r2"), ("b", "r1"), ("c", "r2")].into());

        // r1 already holds its one pod: both unranked gated pods go to r2.
        let (x, y, z) = (
            pod("x", None, false, Some("r1")),
            pod("y", None, true, None),
            pod("z", None, true, None),
        );
        let plan = plan_ungates(&w, &[&x, &y, &z]).unwrap();
        assert_eq!(plan.len(), 2);
        assert!(plan.iter().all(|(_, s)| s["rack"] == "r2"));
    }

    #[test]
    fn jobset_pods_rank_by_job_index_then_completion_index() {
        // Two Jobs of two pods each over racks r1 and r2: each Job's pods share a rack, as Kueue's sub-groups do.
        let mut w = wl("rack", "r1, r2", "2, 2");
        w.spec.pod_sets[0].count = 4;
        w.spec.pod_sets[0].topology_request = Some(api::PodSetTopologyRequest {
            required: Some("rack".into()),
            pod_index_label: Some(JOB_COMPLETION_INDEX.into()),
            sub_group_index_label: Some("jobset.sigs.k8s.io/job-index".into()),
            sub_group_count: Some(2),
            ..Default::default()
        });
        let member = |name: &str, job: u32, index: u32| {
            let mut p = pod(name, Some(index), true, None);
            p.labels_mut()
                .insert("jobset.sigs.k8s.io/job-index".into(), job.to_string());
            p
        };
        // Names whose order (the fallback for unranked pods) would put a and b together.
        let pods = [
            member("a", 1, 0),
            member("b", 0, 1),
            member("c", 1, 1),
            member("d", 0, 0),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = plan_ungates(&w, &refs).unwrap();
        let rack: BTreeMap<_, _> = plan
            .iter()
            .map(|(p, s)| (p.as_str(), s["rack"].as_str()))
            .collect();
        assert_eq!(
            rack,
            [("a", "r2"), ("b", "r1"), ("c", "r2"), ("d", "r1")].into()
        );
    }

    #[test]
    fn restore_charges_hostnames_directly_and_racks_over_their_nodes() {
        let flavors = BTreeMap::new();
        let w = wl(HOSTNAME, "n1, n2", "1, 2");
        let (ew, _) = ingest::workload(&w).unwrap();
        let p = restored_placements(&w, &ew, &flavors, &BTreeMap::new()).unwrap();
        let got: Vec<_> = p[0]
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.pods))
            .collect();
        assert_eq!(got, [("n1", 1), ("n2", 2)]);
        assert_eq!(p[0].flavor, "tas");

        let node = |name: &str, rack: &str| -> Node {
            serde_yaml::from_str(&format!(
                "metadata: {{name: {name}, labels: {{rack: {rack}}}}}\nstatus: {{allocatable: {{nvidia.com/gpu: \"4\"}}}}"
            ))
            .unwrap()
        };
        let nodes: BTreeMap<String, Node> = [
            ("m1".to_string(), node("m1", "r1")),
            ("m2".to_string(), node("m2", "r2")),
            ("m3".to_string(), node("m3", "r2")),
        ]
        .into();
        let w = wl("rack", "r1, r2", "1, 2");
        let p = restored_placements(&w, &ew, &flavors, &nodes).unwrap();
        let got: Vec<_> = p[0]
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.pods))
            .collect();
        assert_eq!(got, [("m1", 1), ("m2", 1), ("m3", 1)]);
    }
}
