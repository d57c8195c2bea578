//! Guest side of the `placement` world: the policy value and the resident node inventory.

use std::cell::RefCell;

use super::PolicyInit;
use super::placement_bindings::sluice::policy::placement_types as wit;
use crate::policy::placement::{
    NodeBatch, NodeScores, PlacementPolicy, PodSetRequest, TopologyMode,
};

thread_local! {
    /// The policy built by `init` (a module instance is single-threaded).
    static POLICY: RefCell<Option<Box<dyn PlacementPolicy>>> = const { RefCell::new(None) };
    /// The node batch: static columns resident between calls, dynamic columns replaced per call.
    static BATCH: RefCell<NodeBatch> = RefCell::new(NodeBatch::default());
    /// A row-local policy's last answer and the request shape it was for (see [`Shape`]).
    static LAST: RefCell<Option<(Shape, NodeScores)>> = const { RefCell::new(None) };
}

/// What a row-local policy's scores depend on besides each node's own row
/// ([`PlacementPolicy::row_local`]).
#[derive(PartialEq)]
struct Shape {
    resources: Vec<String>,
    per_pod: Vec<i64>,
    gpus_per_pod: u32,
    nvlink: bool,
}

impl Shape {
    fn of(r: &PodSetRequest) -> Self {
        Shape {
            resources: r.resources.clone(),
            per_pod: r.per_pod.clone(),
            gpus_per_pod: r.gpus_per_pod,
            nvlink: r.nvlink_required,
        }
    }
}

/// Builds the policy from its configuration (called by [`export_placement!`](crate::export_placement)).
pub fn init<T: PolicyInit + PlacementPolicy + 'static>(config: &str) -> Result<(), String> {
    let policy = T::init(config)?;
    POLICY.with(|p| *p.borrow_mut() = Some(Box::new(policy)));
    Ok(())
}

/// Replaces the resident static node columns.
pub fn set_inventory(inv: wit::NodeInventory) {
    BATCH.with(|b| {
        let mut b = b.borrow_mut();
        b.inventory_generation = inv.generation;
        b.strings = inv.strings;
        b.levels = inv.levels;
        b.name = inv.name;
        b.domain = inv.domain;
        b.gpu_model = inv.gpu_model;
        b.gpu_memory_mib = inv.gpu_memory_mib;
        b.fabric_clique = inv.fabric_clique;
        b.label_offsets = inv.label_offsets;
        b.label_keys = inv.label_keys;
        b.label_values = inv.label_values;
    });
    LAST.with(|l| *l.borrow_mut() = None);
}

/// The contract's request from the WIT record.
pub fn request_from_wit(r: wit::PodSetRequest) -> PodSetRequest {
    PodSetRequest {
        workload: r.workload,
        pod_set: r.pod_set,
        count: r.count,
        min_count: r.min_count,
        resources: r.resources,
        per_pod: r.per_pod,
        gpus_per_pod: r.gpus_per_pod,
        topology_mode: match r.topology_mode {
            wit::TopologyMode::None => TopologyMode::None,
            wit::TopologyMode::Required => TopologyMode::Required,
            wit::TopologyMode::Preferred => TopologyMode::Preferred,
            wit::TopologyMode::Unconstrained => TopologyMode::Unconstrained,
        },
        topology_level: r.topology_level,
        nvlink_required: r.nvlink_required,
        priority: r.priority,
        labels: r.label_keys.into_iter().zip(r.label_values).collect(),
    }
}

/// Scores the resident inventory with this call's dynamic columns.
pub fn score(
    request: wit::PodSetRequest,
    state: wit::NodeState,
) -> Result<wit::NodeScores, String> {
    let request = request_from_wit(request);
    BATCH.with(|b| {
        let mut b = b.borrow_mut();
        b.ready = state.ready.iter().map(|&r| r != 0).collect();
        b.gpu_total = state.gpu_total;
        b.gpu_free = state.gpu_free;
        b.island_offsets = state.island_offsets;
        b.island_size = state.island_size;
        b.island_free = state.island_free;
        b.free = state.free;
        score_all(&request, &b)
    })
}

/// Applies the changed rows to the resident dynamic columns, then scores: a row-local policy only those rows
/// when its last answer was for the same request shape, any other policy every row. An error when a row does
/// not fit the resident columns (the host then resends everything).
pub fn score_delta(
    request: wit::PodSetRequest,
    delta: wit::NodeStateDelta,
) -> Result<wit::NodeScores, String> {
    let request = request_from_wit(request);
    BATCH.with(|b| {
        let mut b = b.borrow_mut();
        if let Err(e) = apply_delta(&mut b, &delta, request.resources.len()) {
            LAST.with(|l| *l.borrow_mut() = None);
            return Err(e);
        }
        let shape = Shape::of(&request);
        let cached = LAST.with(|l| l.borrow().as_ref().is_some_and(|(s, _)| *s == shape));
        if !cached {
            return score_all(&request, &b);
        }
        let rows = rows_of(&mut b, &delta.nodes);
        let fresh = with_policy(|p| p.score(&request, &rows).map_err(|e| e.message));
        b.strings = rows.strings;
        let fresh = match fresh {
            Ok(f)
                if f.score.len() == delta.nodes.len() && f.max_pods.len() == delta.nodes.len() =>
            {
                f
            }
            // A wrong length is the host's to report: it checks the whole answer.
            other => {
                LAST.with(|l| *l.borrow_mut() = None);
                return other.map(|s| wit::NodeScores {
                    score: s.score,
                    max_pods: s.max_pods,
                });
            }
        };
        LAST.with(|l| {
            let mut l = l.borrow_mut();
            let (_, last) = l.as_mut().expect("checked above");
            for (j, &i) in delta.nodes.iter().enumerate() {
                last.score[i as usize] = fresh.score[j];
                last.max_pods[i as usize] = fresh.max_pods[j];
            }
            Ok(wit::NodeScores {
                score: last.score.clone(),
                max_pods: last.max_pods.clone(),
            })
        })
    })
}

/// The listed rows of `b` as a batch of their own (its strings are moved over; the caller puts them back).
fn rows_of(b: &mut NodeBatch, rows: &[u32]) -> NodeBatch {
    let nlev = b.levels.len();
    let nres = b.free.len().checked_div(b.len()).unwrap_or(0);
    let mut out = NodeBatch {
        inventory_generation: b.inventory_generation,
        strings: std::mem::take(&mut b.strings),
        levels: b.levels.clone(),
        ..NodeBatch::default()
    };
    out.label_offsets.push(0);
    out.island_offsets.push(0);
    for &i in rows {
        let i = i as usize;
        out.name.push(b.name[i]);
        out.domain
            .extend_from_slice(&b.domain[i * nlev..(i + 1) * nlev]);
        out.gpu_model.push(b.gpu_model[i]);
        out.gpu_memory_mib.push(b.gpu_memory_mib[i]);
        out.fabric_clique.push(b.fabric_clique[i]);
        let (lo, hi) = (b.label_offsets[i] as usize, b.label_offsets[i + 1] as usize);
        out.label_keys.extend_from_slice(&b.label_keys[lo..hi]);
        out.label_values.extend_from_slice(&b.label_values[lo..hi]);
        out.label_offsets.push(out.label_keys.len() as u32);
        out.ready.push(b.ready[i]);
        out.gpu_total.push(b.gpu_total[i]);
        out.gpu_free.push(b.gpu_free[i]);
        let (lo, hi) = (
            b.island_offsets[i] as usize,
            b.island_offsets[i + 1] as usize,
        );
        out.island_size.extend_from_slice(&b.island_size[lo..hi]);
        out.island_free.extend_from_slice(&b.island_free[lo..hi]);
        out.island_offsets.push(out.island_size.len() as u32);
        out.free
            .extend_from_slice(&b.free[i * nres..(i + 1) * nres]);
    }
    out
}

/// Whether every resident column has one entry per node (per level, per offset), so rows can be read by index.
fn rows_consistent(b: &NodeBatch) -> bool {
    let n = b.ready.len();
    let last = |o: &[u32]| o.last().map_or(0, |&x| x as usize);
    [
        b.name.len(),
        b.gpu_model.len(),
        b.gpu_memory_mib.len(),
        b.fabric_clique.len(),
    ]
    .iter()
    .chain(&[b.gpu_total.len(), b.gpu_free.len()])
    .all(|&l| l == n)
        && b.domain.len() == n * b.levels.len()
        && b.label_offsets.len() == n + 1
        && b.island_offsets.len() == n + 1
        && b.label_offsets.windows(2).all(|w| w[0] <= w[1])
        && b.island_offsets.windows(2).all(|w| w[0] <= w[1])
        && last(&b.label_offsets) <= b.label_keys.len().min(b.label_values.len())
        && last(&b.island_offsets) <= b.island_size.len().min(b.island_free.len())
}

/// Writes each listed node's row into the resident columns.
fn apply_delta(b: &mut NodeBatch, d: &wit::NodeStateDelta, nres: usize) -> Result<(), String> {
    let n = d.nodes.len();
    if [d.ready.len(), d.gpu_total.len(), d.gpu_free.len()]
        .iter()
        .any(|&l| l != n)
        || d.free.len() != n * nres
        || d.island_size.len() != d.island_free.len()
        || b.free.len() != b.ready.len() * nres
        || !rows_consistent(b)
    {
        return Err("score-delta: column lengths do not match the listed nodes".into());
    }
    let mut k = 0usize;
    for (j, &node) in d.nodes.iter().enumerate() {
        let i = node as usize;
        if i >= b.ready.len() {
            return Err(format!(
                "score-delta: node {i} is not in the resident batch"
            ));
        }
        b.ready[i] = d.ready[j] != 0;
        b.gpu_total[i] = d.gpu_total[j];
        b.gpu_free[i] = d.gpu_free[j];
        let (lo, hi) = (
            b.island_offsets[i] as usize,
            b.island_offsets[i + 1] as usize,
        );
        let Some(end) = k.checked_add(hi - lo).filter(|&e| e <= d.island_size.len()) else {
            return Err("score-delta: fewer islands than the resident batch holds".into());
        };
        b.island_size[lo..hi].copy_from_slice(&d.island_size[k..end]);
        b.island_free[lo..hi].copy_from_slice(&d.island_free[k..end]);
        k = end;
        b.free[i * nres..(i + 1) * nres].copy_from_slice(&d.free[j * nres..(j + 1) * nres]);
    }
    if k != d.island_size.len() {
        return Err("score-delta: more islands than the resident batch holds".into());
    }
    Ok(())
}

/// Scores every row; a row-local policy's answer is kept for the next delta.
fn score_all(request: &PodSetRequest, b: &NodeBatch) -> Result<wit::NodeScores, String> {
    let scores = with_policy(|p| p.score(request, b).map_err(|e| e.message));
    let keep = with_policy(|p| Ok(p.row_local())).unwrap_or(false);
    LAST.with(|l| {
        *l.borrow_mut() = match &scores {
            Ok(s) if keep => Some((Shape::of(request), s.clone())),
            _ => None,
        }
    });
    scores.map(|s| wit::NodeScores {
        score: s.score,
        max_pods: s.max_pods,
    })
}

/// Runs `f` on the policy `init` built.
fn with_policy<R>(f: impl FnOnce(&dyn PlacementPolicy) -> Result<R, String>) -> Result<R, String> {
    POLICY.with(|p| {
        let p = p.borrow();
        let policy = p.as_ref().ok_or("score called before init")?;
        f(policy.as_ref())
    })
}
