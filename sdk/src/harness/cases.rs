//! Table-driven cases for `sluice policy test FILE.wasm CASES.yaml`.
//!
//! ```yaml
//! kind: placement            # or fairness, preemptioncost
//! config: {}                 # the module's JSON configuration
//! levels: [block, rack]      # topology levels of the fixture nodes (hostname is added)
//! cases:
//! - name: packs the partly used node first
//!   request: {count: 1, gpusPerPod: 2}
//!   nodes:
//!   - {name: a, gpus: 8, free: 8, path: [b1, r1]}
//!   - {name: b, gpus: 8, free: 2, path: [b1, r1]}
//!   expect: {best: b, rejected: []}
//! - name: fairness order           # fairness modules: heads and/or shares
//!   heads:
//!   - {ratio: 500, priority: 0, timestamp: 1}
//!   - {ratio: 100, priority: 0, timestamp: 2}
//!   expect: {order: [1, 0]}
//! - name: preemption cost          # preemptioncost modules: candidates of one search
//!   preemptorPriority: 100
//!   candidates:
//!   - {workload: team/fresh, admittedSeconds: 60}
//!   - {workload: team/old, admittedSeconds: 7200, timesPreempted: 2, gpus: 8}
//!   expect: {boosts: [0, 200], protected: [team/fresh]}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use super::builders::{NodeBatchBuilder, NodeSpec, PodSetBuilder};
use super::{Harness, HarnessError, place_gang, ranking, rejected};
use crate::host::ModuleKind;
use crate::policy::fairness::{FairnessPolicy, OrderBatch, ShareBatch};
use crate::policy::placement::PlacementPolicy;
use crate::policy::preemption_cost::{CandidateBatch, PreemptionCostPolicy};

/// A file of cases for one module.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CaseFile {
    /// World of the module under test.
    pub kind: ModuleKind,
    /// The module's JSON configuration.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// Topology levels of the fixture nodes, outermost first (hostname is added).
    #[serde(default)]
    pub levels: Vec<String>,
    /// The cases.
    pub cases: Vec<Case>,
}

/// One case.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    /// Name shown in the report.
    pub name: String,
    /// Placement: the pod set.
    #[serde(default)]
    pub request: Option<RequestCase>,
    /// Placement: the candidate nodes.
    #[serde(default)]
    pub nodes: Vec<NodeCase>,
    /// Fairness: competing heads.
    #[serde(default)]
    pub heads: Vec<HeadCase>,
    /// Fairness: share inputs.
    #[serde(default)]
    pub shares: Vec<ShareCase>,
    /// Preemption cost: the candidates of one preemption search.
    #[serde(default)]
    pub candidates: Vec<CandidateCase>,
    /// Preemption cost: the preemptor's priority.
    #[serde(default)]
    pub preemptor_priority: i32,
    /// What must hold.
    pub expect: Expect,
}

/// A pod set.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequestCase {
    /// Pods.
    pub count: u32,
    /// GPUs per pod.
    #[serde(default = "one")]
    pub gpus_per_pod: u32,
    /// Each pod inside one NVLink island.
    #[serde(default)]
    pub nvlink: bool,
    /// Priority.
    #[serde(default)]
    pub priority: i32,
}

fn one() -> u32 {
    1
}

fn one_f() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

/// A fixture node.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeCase {
    /// Node name.
    pub name: String,
    /// Healthy GPUs.
    pub gpus: u32,
    /// Free GPUs.
    pub free: u32,
    /// Domain values, outermost first.
    #[serde(default)]
    pub path: Vec<String>,
    /// NVLink islands as `[size, free]` (default: one island of all GPUs).
    #[serde(default)]
    pub islands: Option<Vec<[u32; 2]>>,
    /// Ready and schedulable.
    #[serde(default = "yes")]
    pub ready: bool,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A competing head.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HeadCase {
    /// Share ratio.
    #[serde(default)]
    pub ratio: f64,
    /// Share weight.
    #[serde(default = "one_f")]
    pub weight: f64,
    /// The child borrows.
    #[serde(default)]
    pub borrowing: bool,
    /// The head would borrow on a requested resource.
    #[serde(default)]
    pub borrowing_on_requested: bool,
    /// Priority.
    #[serde(default)]
    pub priority: i32,
    /// Timestamp (ms).
    #[serde(default)]
    pub timestamp: i64,
}

/// A share input.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShareCase {
    /// Node name.
    pub name: String,
    /// Weight.
    #[serde(default = "one_f")]
    pub weight: f64,
    /// Has a parent cohort.
    #[serde(default = "yes")]
    pub has_parent: bool,
    /// `[resource, borrowed, lendable]` rows.
    #[serde(default)]
    pub borrowing: Vec<[i64; 3]>,
    /// Decayed dominant usage (per mille).
    #[serde(default)]
    pub history: f64,
}

/// A preemption candidate.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CandidateCase {
    /// `namespace/name` of the Workload (default `cases/candidate-N`, N from 0).
    #[serde(default)]
    pub workload: Option<String>,
    /// ClusterQueue holding it.
    #[serde(default = "default_cluster_queue")]
    pub cluster_queue: String,
    /// Base priority.
    #[serde(default)]
    pub priority: i32,
    /// Seconds since its quota was reserved.
    #[serde(default)]
    pub admitted_seconds: f64,
    /// Seconds since its last checkpoint (default: `admittedSeconds`).
    #[serde(default)]
    pub since_checkpoint_seconds: Option<f64>,
    /// Times it was preempted before.
    #[serde(default)]
    pub times_preempted: u32,
    /// GPUs it holds.
    #[serde(default = "one")]
    pub gpus: u32,
}

fn default_cluster_queue() -> String {
    "cases".to_string()
}

/// Expectations; every one given must hold.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// Placement: the best-scored accepted node.
    #[serde(default)]
    pub best: Option<String>,
    /// Placement: the ranking starts with these nodes.
    #[serde(default)]
    pub ranking: Option<Vec<String>>,
    /// Placement: exactly these nodes are rejected.
    #[serde(default)]
    pub rejected: Option<Vec<String>>,
    /// Placement: a greedy gang placement spans at most this many domains per level.
    #[serde(default)]
    pub max_domains: Option<Vec<usize>>,
    /// Fairness: the order of the heads.
    #[serde(default)]
    pub order: Option<Vec<u32>>,
    /// Fairness: the share ratios (within 1e-9).
    #[serde(default)]
    pub ratios: Option<Vec<f64>>,
    /// Preemption cost: the boost of each candidate, in order.
    #[serde(default)]
    pub boosts: Option<Vec<i32>>,
    /// Preemption cost: exactly these candidates (by workload) are protected.
    #[serde(default)]
    pub protected: Option<Vec<String>>,
}

/// Outcome of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// `None` when it passed, else what failed.
    pub failure: Option<String>,
}

/// Parses a case file.
pub fn parse(yaml: &str) -> Result<CaseFile, String> {
    serde_yaml::from_str(yaml).map_err(|e| format!("case file: {e}"))
}

/// Runs every case of `file` against the module `bytes`.
pub fn run(h: &Harness, bytes: &[u8], file: &CaseFile) -> Result<Vec<CaseResult>, HarnessError> {
    let config = file
        .config
        .as_ref()
        .map_or_else(String::new, |c| c.to_string());
    let levels: Vec<&str> = file.levels.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    match file.kind {
        ModuleKind::Placement => {
            let p = h.placement(bytes, &config)?;
            for (i, c) in file.cases.iter().enumerate() {
                out.push(CaseResult {
                    name: c.name.clone(),
                    failure: placement_case(&p, &levels, c, i as u64 + 1).err(),
                });
            }
        }
        ModuleKind::Fairness => {
            let f = h.fairness(bytes, &config)?;
            for c in &file.cases {
                out.push(CaseResult {
                    name: c.name.clone(),
                    failure: fairness_case(&f, c).err(),
                });
            }
        }
        ModuleKind::PreemptionCost => {
            let p = h.preemption_cost(bytes, &config)?;
            for c in &file.cases {
                out.push(CaseResult {
                    name: c.name.clone(),
                    failure: preemption_cost_case(&p, c).err(),
                });
            }
        }
    }
    Ok(out)
}

/// The candidate batch a case describes.
pub fn candidate_batch(c: &Case) -> CandidateBatch {
    let mut b = CandidateBatch {
        preemptor_priority: c.preemptor_priority,
        ..CandidateBatch::default()
    };
    for (i, k) in c.candidates.iter().enumerate() {
        b.push(
            k.workload
                .clone()
                .unwrap_or_else(|| format!("cases/candidate-{i}")),
            k.cluster_queue.clone(),
            k.priority,
            k.admitted_seconds,
            k.since_checkpoint_seconds.unwrap_or(k.admitted_seconds),
            k.times_preempted,
            k.gpus,
        );
    }
    b
}

fn preemption_cost_case(p: &dyn PreemptionCostPolicy, c: &Case) -> Result<(), String> {
    if c.candidates.is_empty() {
        return Err("a preemption-cost case needs candidates".into());
    }
    let batch = candidate_batch(c);
    let answers = p.costs(&batch).map_err(|e| e.to_string())?;
    answers
        .check(p.name(), batch.len())
        .map_err(|e| e.to_string())?;
    if let Some(want) = &c.expect.boosts
        && &answers.boost != want
    {
        return Err(format!("boosts are {:?}, expected {want:?}", answers.boost));
    }
    if let Some(want) = &c.expect.protected {
        let got: Vec<&String> = batch
            .workload
            .iter()
            .zip(&answers.protected)
            .filter_map(|(w, &p)| p.then_some(w))
            .collect();
        if got.iter().copied().ne(want.iter()) {
            return Err(format!("protected {got:?}, expected {want:?}"));
        }
    }
    Ok(())
}

fn placement_case(
    p: &dyn PlacementPolicy,
    levels: &[&str],
    c: &Case,
    generation: u64,
) -> Result<(), String> {
    let r = c
        .request
        .as_ref()
        .ok_or("a placement case needs a request")?;
    let mut req = PodSetBuilder::new("cases/workload", r.count)
        .gpus_per_pod(r.gpus_per_pod)
        .priority(r.priority);
    if r.nvlink {
        req = req.nvlink();
    }
    let req = req.build();
    let mut b = NodeBatchBuilder::new(levels).generation(generation);
    for n in &c.nodes {
        let path: Vec<&str> = n.path.iter().map(String::as_str).collect();
        let mut s = NodeSpec::gpu(&n.name, n.gpus, n.free).path(&path);
        if let Some(isl) = &n.islands {
            let isl: Vec<(u32, u32)> = isl.iter().map(|[a, b]| (*a, *b)).collect();
            s = s.islands(&isl);
        }
        if !n.ready {
            s = s.not_ready();
        }
        for (k, v) in &n.labels {
            s = s.label(k, v);
        }
        b = b.node(s);
    }
    let nodes = b.build();
    let scores = p.score(&req, &nodes).map_err(|e| e.to_string())?;
    let rank = ranking(&scores, &nodes);
    if let Some(best) = &c.expect.best
        && rank.first() != Some(best)
    {
        return Err(format!("best node is {:?}, expected {best}", rank.first()));
    }
    if let Some(want) = &c.expect.ranking
        && !rank.starts_with(want)
    {
        return Err(format!(
            "ranking is {rank:?}, expected it to start with {want:?}"
        ));
    }
    if let Some(want) = &c.expect.rejected {
        let got = rejected(&scores, &nodes);
        if &got != want {
            return Err(format!("rejected {got:?}, expected {want:?}"));
        }
    }
    if let Some(max) = &c.expect.max_domains {
        let g = place_gang(&scores, &nodes, &req);
        if g.domains_per_level.iter().zip(max).any(|(got, m)| got > m) {
            return Err(format!(
                "gang spans {:?} domains per level, expected at most {max:?}",
                g.domains_per_level
            ));
        }
    }
    Ok(())
}

fn fairness_case(f: &dyn FairnessPolicy, c: &Case) -> Result<(), String> {
    if !c.heads.is_empty() {
        let b = OrderBatch {
            borrowing_on_requested: c.heads.iter().map(|h| h.borrowing_on_requested).collect(),
            ratio: c.heads.iter().map(|h| h.ratio).collect(),
            weight: c.heads.iter().map(|h| h.weight).collect(),
            borrowing: c.heads.iter().map(|h| h.borrowing).collect(),
            priority: c.heads.iter().map(|h| h.priority).collect(),
            timestamp: c.heads.iter().map(|h| h.timestamp).collect(),
        };
        let order = f.order(&b).map_err(|e| e.to_string())?;
        if let Some(want) = &c.expect.order
            && &order != want
        {
            return Err(format!("order is {order:?}, expected {want:?}"));
        }
    }
    if !c.shares.is_empty() {
        let mut b = ShareBatch {
            names: vec![String::new()],
            ..ShareBatch::default()
        };
        for s in &c.shares {
            b.names.push(s.name.clone());
            let rows: Vec<(u32, i64, i64)> = s
                .borrowing
                .iter()
                .map(|[r, bo, l]| (u32::try_from(*r).unwrap_or(0), *bo, *l))
                .collect();
            b.push(
                (b.names.len() - 1) as u32,
                s.weight,
                s.has_parent,
                &rows,
                s.history,
            );
        }
        let shares = f.shares(&b).map_err(|e| e.to_string())?;
        if let Some(want) = &c.expect.ratios
            && (want.len() != shares.ratio.len()
                || want
                    .iter()
                    .zip(&shares.ratio)
                    .any(|(w, g)| (w - g).abs() > 1e-9))
        {
            return Err(format!("ratios are {:?}, expected {want:?}", shares.ratio));
        }
    }
    Ok(())
}
