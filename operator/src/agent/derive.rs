//! From raw driver data to the shared model: NVLink islands, fabric clique, health, GFD labels.

use std::collections::BTreeMap;

use sluice_sdk::topology::{
    Gpu, GpuHealth, GpuLink, GpuPair, LinkRemote, MigInstance, NodeGpus, gfd, islands_from_links,
};

use super::health::{DEGRADING, HealthRules, Reasons, judge_once};
use super::raw::{RawNode, RemoteType};

/// Most XIDs kept per GPU in the report.
const XID_HISTORY: usize = 16;

/// Derives the model from one read judged on its own by the default health rules (no history).
pub fn derive(raw: &RawNode) -> NodeGpus {
    let rules = HealthRules::default();
    let reasons = raw
        .gpus
        .iter()
        .map(|g| (g.uuid.clone(), judge_once(&rules, g)))
        .collect();
    derive_with(raw, &reasons)
}

/// Derives the model the agent publishes, with each GPU's health reasons (by UUID) from the tracker.
pub fn derive_with(raw: &RawNode, health: &BTreeMap<String, Reasons>) -> NodeGpus {
    let ids: Vec<(u32, String)> = raw
        .gpus
        .iter()
        .map(|g| (g.index, g.bus_id.clone()))
        .collect();
    let links: Vec<GpuLink> = raw
        .gpus
        .iter()
        .flat_map(|g| {
            g.links.iter().filter(|l| l.active).map(|l| GpuLink {
                gpu: g.index,
                remote: match l.remote_type {
                    RemoteType::Gpu => LinkRemote::Gpu(l.remote_bus_id.clone()),
                    RemoteType::Switch => LinkRemote::Switch(l.remote_bus_id.clone()),
                    RemoteType::Other => LinkRemote::Other,
                },
            })
        })
        .collect();
    let cliques: Vec<String> = raw
        .gpus
        .iter()
        .filter_map(|g| g.fabric.as_ref().map(|(c, id)| format!("{c}.{id}")))
        .collect();
    // GFD warns and sets no label when the GPUs disagree; so does the agent.
    let fabric_clique = match cliques.first() {
        Some(c) if cliques.len() == raw.gpus.len() && cliques.iter().all(|x| x == c) => {
            Some(c.clone())
        }
        Some(_) => {
            tracing::warn!(
                ?cliques,
                "GPUs disagree on the fabric clique; none published"
            );
            None
        }
        None => None,
    };
    NodeGpus {
        driver_version: raw.driver_version.clone(),
        gpus: raw
            .gpus
            .iter()
            .map(|g| {
                let mut xids = g.xids.clone();
                if xids.len() > XID_HISTORY {
                    xids.drain(..xids.len() - XID_HISTORY);
                }
                Gpu {
                    index: g.index,
                    uuid: g.uuid.clone(),
                    model: g.name.clone(),
                    memory_mib: g.memory_bytes / (1024 * 1024),
                    pci_bus_id: g.bus_id.clone(),
                    numa_node: g.numa_node,
                    mig_enabled: g.mig_enabled,
                    mig_instances: g
                        .mig
                        .iter()
                        .map(|m| MigInstance {
                            profile: m.profile.clone(),
                            uuid: m.uuid.clone(),
                            memory_mib: m.memory_mib,
                        })
                        .collect(),
                    health: GpuHealth {
                        healthy: health.get(&g.uuid).is_none_or(Vec::is_empty),
                        degrading: health.get(&g.uuid).is_some_and(|r| {
                            !r.is_empty() && r.iter().all(|x| x.starts_with(DEGRADING))
                        }),
                        reasons: health.get(&g.uuid).cloned().unwrap_or_default(),
                        xid_errors: xids,
                        ecc_uncorrected: g.ecc_uncorrected,
                        in_use: g.processes > 0,
                    },
                }
            })
            .collect(),
        nvlink_islands: islands_from_links(&ids, &links),
        fabric_clique,
        pcie_pairs: raw
            .pairs
            .iter()
            .map(|&(a, b, l)| GpuPair {
                a: a.min(b),
                b: a.max(b),
                common_ancestor: l,
            })
            .collect(),
    }
}

/// The node labels NVIDIA's GPU Feature Discovery sets, from the model.
pub fn gfd_labels(m: &NodeGpus) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert(gfd::GPU_COUNT.to_string(), m.gpus.len().to_string());
    if let Some(p) = m.gfd_product() {
        out.insert(gfd::GPU_PRODUCT.to_string(), p);
    }
    if let Some(g) = m.gpus.first() {
        out.insert(gfd::GPU_MEMORY.to_string(), g.memory_mib.to_string());
    }
    if let Some(c) = &m.fabric_clique {
        out.insert(gfd::GPU_CLIQUE.to_string(), c.clone());
    }
    out
}
