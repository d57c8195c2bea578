//! Turns placement scores into a gang placement the way a greedy scheduler would, and measures
//! how many topology domains the gang spans (to compare policies on the same input).

use crate::policy::placement::{NodeBatch, NodeScores, PodSetRequest};

/// Where a gang landed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GangPlacement {
    /// `(node, pods)` in the order chosen.
    pub nodes: Vec<(String, u32)>,
    /// Pods placed (fewer than requested when capacity ran out).
    pub placed: u32,
    /// Distinct domains used at each level of the batch (outermost first, hostname last).
    pub domains_per_level: Vec<usize>,
    /// NVLink islands the gang's GPUs touch.
    pub nvlink_islands: usize,
}

/// Places `request.count` pods on the best-scored nodes first, each node taking as many pods as
/// its free GPUs (per NVLink island when required) and its pod cap allow.
pub fn place_gang(
    scores: &NodeScores,
    nodes: &NodeBatch,
    request: &PodSetRequest,
) -> GangPlacement {
    let n = nodes
        .len()
        .min(scores.score.len())
        .min(scores.max_pods.len());
    let mut order: Vec<usize> = (0..n)
        .filter(|&i| scores.max_pods[i] > 0 && nodes.ready.get(i).copied().unwrap_or(false))
        .collect();
    order.sort_by(|&a, &b| scores.score[b].total_cmp(&scores.score[a]).then(a.cmp(&b)));
    let per_pod = request.gpus_per_pod.max(1);
    let levels = nodes.levels.len();
    let mut out = GangPlacement {
        domains_per_level: vec![0; levels],
        ..GangPlacement::default()
    };
    let mut seen: Vec<std::collections::HashSet<u32>> = vec![Default::default(); levels];
    let mut left = request.count;
    for i in order {
        if left == 0 {
            break;
        }
        let lo = nodes.island_offsets.get(i).copied().unwrap_or(0) as usize;
        let hi = nodes.island_offsets.get(i + 1).copied().unwrap_or(0) as usize;
        let mut islands: Vec<u32> = nodes.island_free.get(lo..hi).unwrap_or(&[]).to_vec();
        if islands.is_empty() {
            islands.push(nodes.gpu_free.get(i).copied().unwrap_or(0));
        }
        let mut pods = 0u32;
        let mut used = vec![false; islands.len()];
        while pods < left && pods < scores.max_pods[i] {
            // Fullest island that still fits a pod keeps emptier islands whole.
            let pick = (0..islands.len())
                .filter(|&k| islands[k] >= per_pod)
                .min_by_key(|&k| islands[k]);
            match pick {
                Some(k) => {
                    islands[k] -= per_pod;
                    used[k] = true;
                    pods += 1;
                }
                None if !request.nvlink_required => {
                    // Without the NVLink requirement a pod may span islands.
                    let total: u32 = islands.iter().sum();
                    if total < per_pod {
                        break;
                    }
                    let mut need = per_pod;
                    for k in 0..islands.len() {
                        let take = islands[k].min(need);
                        if take > 0 {
                            islands[k] -= take;
                            need -= take;
                            used[k] = true;
                        }
                    }
                    pods += 1;
                }
                None => break,
            }
        }
        if pods == 0 {
            continue;
        }
        left -= pods;
        out.placed += pods;
        out.nvlink_islands += used.iter().filter(|&&u| u).count();
        out.nodes
            .push((nodes.string(nodes.name[i]).to_string(), pods));
        for (l, s) in seen.iter_mut().enumerate() {
            if let Some(&d) = nodes.domain.get(i * levels + l) {
                s.insert(d);
            }
        }
    }
    out.domains_per_level = seen.iter().map(|s| s.len()).collect();
    out
}
