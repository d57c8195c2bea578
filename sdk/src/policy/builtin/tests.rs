use super::*;
use crate::policy::placement::PlacementPolicy;

/// Three ready nodes of 8 GPUs in two racks: n0 (rack a, 8 free, islands 4+4),
/// n1 (rack a, 3 free, islands 1+2), n2 (rack b, 8 free, not ready when `down`).
fn batch(down: bool) -> NodeBatch {
    NodeBatch {
        strings: vec![
            "".into(),
            "rack".into(),
            "host".into(),
            "a".into(),
            "b".into(),
            "n0".into(),
            "n1".into(),
            "n2".into(),
        ],
        levels: vec![1, 2],
        name: vec![5, 6, 7],
        domain: vec![3, 5, 3, 6, 4, 7],
        ready: vec![true, true, !down],
        gpu_total: vec![8, 8, 8],
        gpu_free: vec![8, 3, 8],
        island_offsets: vec![0, 2, 4, 5],
        island_size: vec![4, 4, 4, 4, 8],
        island_free: vec![4, 4, 1, 2, 8],
        free: vec![64_000, 64_000, 64_000],
        ..NodeBatch::default()
    }
}

fn req(count: u32, gpus: u32, nvlink: bool) -> PodSetRequest {
    PodSetRequest {
        count,
        min_count: count,
        resources: vec!["cpu".into()],
        per_pod: vec![8_000],
        gpus_per_pod: gpus,
        nvlink_required: nvlink,
        ..PodSetRequest::default()
    }
}

#[test]
fn fitting_counts_gpus_islands_resources_and_readiness() {
    let b = batch(true);
    assert_eq!(pods_fitting(&req(1, 2, false), &b, 1), 1);
    assert_eq!(pods_fitting(&req(1, 3, false), &b, 1), 1);
    assert_eq!(pods_fitting(&req(1, 3, true), &b, 1), 0);
    assert_eq!(pods_fitting(&req(1, 1, false), &b, 0), 8);
    assert_eq!(
        pods_fitting(&req(1, 0, false), &b, 0),
        8,
        "cpu bound: 64 / 8"
    );
    assert_eq!(pods_fitting(&req(1, 1, false), &b, 2), 0, "not ready");
}

#[test]
fn pack_prefers_partially_used_nodes_and_tight_islands() {
    let b = batch(false);
    let s = TopologyPack.score(&req(1, 2, false), &b).unwrap();
    s.check("topology-pack", &b).unwrap();
    assert!(s.score[1] > s.score[0], "{:?}", s.score);
    assert!(
        s.score[0] > s.score[2],
        "n0's 4-GPU island is tighter than n2's 8: {:?}",
        s.score
    );
    let down = batch(true);
    let s = TopologyPack.score(&req(1, 2, false), &down).unwrap();
    assert_eq!(s.max_pods[2], 0);
}

#[test]
fn spread_caps_pods_per_node_and_prefers_empty_racks() {
    let b = batch(false);
    let s = Spread.score(&req(4, 1, false), &b).unwrap();
    s.check("spread", &b).unwrap();
    assert_eq!(s.max_pods, vec![2, 2, 2]);
    assert!(
        s.score[2] > s.score[0] && s.score[0] > s.score[1],
        "{:?}",
        s.score
    );
}
