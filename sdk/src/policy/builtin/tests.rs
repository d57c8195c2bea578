use super::*;
use crate::policy::placement::{NodeScores, PlacementPolicy};

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

#[test]
fn pack_gives_nodes_missing_from_gpu_columns_no_pod() {
    let mut b = batch(false);
    b.gpu_total.truncate(2);
    let s = TopologyPack.score(&req(1, 0, false), &b).unwrap();
    assert_eq!(s.max_pods, vec![u32::MAX, u32::MAX, 0]);
    let mut b = batch(false);
    b.island_free.truncate(4);
    let s = TopologyPack.score(&req(1, 2, true), &b).unwrap();
    assert_eq!(s.max_pods[2], 0, "n2's island is past the column: none");
}

/// The per-node definition of topology-pack's score (what the column passes must equal).
fn pack_reference(request: &PodSetRequest, nodes: &NodeBatch) -> NodeScores {
    let mut out = NodeScores::default();
    for i in 0..nodes.len() {
        if pods_fitting(request, nodes, i) == 0 {
            out.score.push(0.0);
            out.max_pods.push(0);
            continue;
        }
        let mut score = 1.0 - free_share(nodes, i);
        let gpp = request.gpus_per_pod;
        let tightest = island_range(nodes, i)
            .filter_map(|j| nodes.island_free.get(j).copied())
            .filter(|&f| gpp > 0 && f >= gpp)
            .min();
        if let Some(f) = tightest {
            score += f64::from(gpp) / f64::from(f);
        }
        out.score.push(score);
        out.max_pods.push(u32::MAX);
    }
    out
}

/// One node: ready, GPUs (total, free), islands (size, free), free amount per resource.
type NodeRow = (bool, (u32, u32), Vec<(u32, u32)>, Vec<i64>);

fn random_batch(rows: &[NodeRow], k: usize) -> NodeBatch {
    let mut b = NodeBatch {
        strings: vec![String::new()],
        island_offsets: vec![0],
        ..NodeBatch::default()
    };
    for (i, (ready, (total, free), islands, amounts)) in rows.iter().enumerate() {
        b.strings.push(format!("n{i}"));
        b.name.push(i as u32 + 1);
        b.ready.push(*ready);
        b.gpu_total.push(*total);
        b.gpu_free.push((*free).min(*total));
        for &(size, f) in islands {
            b.island_size.push(size);
            b.island_free.push(f.min(size));
        }
        b.island_offsets.push(b.island_size.len() as u32);
        b.free
            .extend((0..k).map(|r| amounts.get(r).copied().unwrap_or(0)));
    }
    b
}

use proptest::prelude::*;

proptest! {
    /// The column passes give exactly the per-node answers: topology-pack for any well-formed
    /// batch, `fits` also with columns shorter than the batch. Batches have not-ready nodes,
    /// nodes without GPUs, negative and larger-than-32-bit amounts, requests with zero or
    /// negative per-pod amounts and with or without NVLink.
    #[test]
    fn column_passes_equal_the_per_node_definitions(
        rows in proptest::collection::vec(
            (
                proptest::bool::weighted(0.8),
                (0u32..9, 0u32..9),
                proptest::collection::vec((0u32..5, 0u32..5), 0..3),
                proptest::collection::vec(
                    prop_oneof![-5i64..40, Just(i64::from(u32::MAX) * 3)],
                    3,
                ),
            ),
            0..40,
        ),
        per_pod in proptest::collection::vec(-2i64..6, 0..4),
        k in 0usize..4,
        gpus in 0u32..5,
        nvlink in proptest::bool::ANY,
        cut in proptest::collection::vec(0usize..4, 7),
    ) {
        let full = random_batch(&rows, k);
        let mut r = req(1, gpus, nvlink);
        r.resources = (0..k).map(|i| format!("r{i}")).collect();
        r.per_pod = per_pod;
        prop_assert_eq!(TopologyPack.score(&r, &full).unwrap(), pack_reference(&r, &full));
        // Short columns: for `fits`, nodes missing from a column have none of it.
        let mut b = full;
        let short = |len: usize, c: usize| len.saturating_sub(c);
        b.ready.truncate(short(b.ready.len(), cut[0]));
        b.gpu_free.truncate(short(b.gpu_free.len(), cut[1]));
        b.gpu_total.truncate(short(b.gpu_total.len(), cut[2]));
        b.island_offsets.truncate(short(b.island_offsets.len(), cut[3]));
        b.island_free.truncate(short(b.island_free.len(), cut[4]));
        b.free.truncate(short(b.free.len(), cut[5] * k + cut[6]));
        let per_node: Vec<u32> = (0..b.len()).map(|i| pods_fitting(&r, &b, i)).collect();
        prop_assert_eq!(fits(&r, &b), per_node);
    }
}
