//! NVLink island derivation from per-GPU link lists.

use super::NvlinkIsland;

/// What the far end of an NVLink is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkRemote {
    /// Another GPU, by PCI bus id.
    Gpu(String),
    /// An NVSwitch, by PCI bus id (all GPUs reaching a switch are joined through it).
    Switch(String),
    /// Something else (IBMNPU, unknown); ignored.
    Other,
}

/// One active NVLink of a GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuLink {
    /// GPU index that owns the link.
    pub gpu: u32,
    /// Far end.
    pub remote: LinkRemote,
}

/// Union-find over GPU indexes.
fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Groups GPUs into NVLink islands: GPUs joined by a direct link or through a common NVSwitch.
///
/// `gpus` is `(index, PCI bus id)` of every GPU; links to unknown bus ids are ignored. Only islands
/// with two or more GPUs are returned, each sorted, ordered by their lowest GPU.
pub fn islands_from_links(gpus: &[(u32, String)], links: &[GpuLink]) -> Vec<NvlinkIsland> {
    let norm = |s: &str| s.trim().to_ascii_lowercase();
    let pos_of_bus = |bus: &str| gpus.iter().position(|(_, b)| norm(b) == norm(bus));
    let pos_of_idx = |idx: u32| gpus.iter().position(|(i, _)| *i == idx);
    let mut parent: Vec<usize> = (0..gpus.len()).collect();
    let mut switch_member: Vec<(String, usize)> = Vec::new();
    let mut via_switch = vec![false; gpus.len()];
    for l in links {
        let Some(a) = pos_of_idx(l.gpu) else { continue };
        let b = match &l.remote {
            LinkRemote::Gpu(bus) => pos_of_bus(bus),
            LinkRemote::Switch(bus) => {
                via_switch[a] = true;
                let key = norm(bus);
                match switch_member.iter().find(|(k, _)| *k == key) {
                    Some(&(_, first)) => Some(first),
                    None => {
                        switch_member.push((key, a));
                        None
                    }
                }
            }
            LinkRemote::Other => None,
        };
        if let Some(b) = b {
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            if ra != rb {
                parent[ra] = rb;
            }
        }
    }
    let mut groups: Vec<(usize, NvlinkIsland)> = Vec::new();
    for p in 0..gpus.len() {
        let r = find(&mut parent, p);
        match groups.iter_mut().find(|(root, _)| *root == r) {
            Some((_, isl)) => {
                isl.gpus.push(gpus[p].0);
                isl.nvswitch |= via_switch[p];
            }
            None => groups.push((
                r,
                NvlinkIsland {
                    gpus: vec![gpus[p].0],
                    nvswitch: via_switch[p],
                },
            )),
        }
    }
    let mut out: Vec<NvlinkIsland> = groups
        .into_iter()
        .map(|(_, mut i)| {
            i.gpus.sort_unstable();
            i
        })
        .filter(|i| i.gpus.len() > 1)
        .collect();
    out.sort_by_key(|i| i.gpus.first().copied());
    out
}
